/* The kubeadm ClusterConfiguration / InitConfiguration, v1beta3 and v1beta4 (cpm_config.h). */
#include "modules/cpm/cpm_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/fileutil.h"
#include "common/base/json.h"
#include "common/base/timeutil.h"
#include "common/kube/yaml.h"

#define CPM_CONFIG_MAX_DOCS 32

static int set_str(char **dst, const char *v)
{
	char *d;

	if (!v)
		return 0;
	d = strdup(v);
	if (!d)
		return -ENOMEM;
	free(*dst);
	*dst = d;
	return 0;
}

/* A string field of obj at path, when there; -EINVAL (named) when it is not a string. */
static int get_str(const cJSON *obj, const char *path, char **dst, char *err, size_t errlen)
{
	const char *v = NULL;
	int r = json_get_str(obj, path, &v);

	if (r == -ENOENT)
		return 0;
	if (r < 0) {
		snprintf(err, errlen, "%s: not a string", path);
		return -EINVAL;
	}
	return set_str(dst, v);
}

static int get_list(const cJSON *obj, const char *path, char ***dst, char *err, size_t errlen)
{
	const cJSON *a = NULL, *it;
	size_t n = 0;
	char **v;
	int r = json_get_array(obj, path, &a);

	if (r == -ENOENT)
		return 0;
	if (r < 0 || cJSON_GetArraySize(a) > CPM_CONFIG_MAX_SANS) {
		snprintf(err, errlen, "%s: not a list of at most %d strings", path,
			 CPM_CONFIG_MAX_SANS);
		return -EINVAL;
	}
	v = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	cJSON_ArrayForEach(it, a)
	{
		if (!cJSON_IsString(it) || !(v[n++] = strdup(it->valuestring))) {
			for (size_t i = 0; i < n; i++)
				free(v[i]);
			free(v);
			snprintf(err, errlen, "%s: not a list of strings", path);
			return cJSON_IsString(it) ? -ENOMEM : -EINVAL;
		}
	}
	*dst = v;
	return 0;
}

static int args_add(struct cpm_component *c, const char *name, const char *value)
{
	struct cpm_arg *a;

	if (c->nargs >= CPM_CONFIG_MAX_ARGS)
		return -E2BIG;
	a = realloc(c->args, (c->nargs + 1) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	c->args = a;
	a[c->nargs].name = strdup(name);
	a[c->nargs].value = strdup(value);
	if (!a[c->nargs].name || !a[c->nargs].value) {
		free(a[c->nargs].name);
		free(a[c->nargs].value);
		return -ENOMEM;
	}
	c->nargs++;
	return 0;
}

/* extraArgs: {name: value} (v1beta3) or [{name, value}] (v1beta4). */
static int get_args(const cJSON *obj, const char *path, struct cpm_component *c, char *err,
		    size_t errlen)
{
	const cJSON *a = json_find(obj, path), *it;
	int r = 0;

	if (!a || cJSON_IsNull(a))
		return 0;
	if (cJSON_IsObject(a)) {
		cJSON_ArrayForEach(it, a)
		{
			if (!cJSON_IsString(it)) {
				snprintf(err, errlen, "%s.%s: not a string", path, it->string);
				return -EINVAL;
			}
			if ((r = args_add(c, it->string, it->valuestring)) < 0)
				break;
		}
	} else if (cJSON_IsArray(a)) {
		cJSON_ArrayForEach(it, a)
		{
			const char *n = json_str(it, "name"), *v = json_str(it, "value");
			if (!n || !n[0] || !v) {
				snprintf(err, errlen, "%s: each entry needs a name and a value", path);
				return -EINVAL;
			}
			if ((r = args_add(c, n, v)) < 0)
				break;
		}
	} else {
		snprintf(err, errlen, "%s: neither a map nor a list", path);
		return -EINVAL;
	}
	if (r < 0)
		snprintf(err, errlen, "%s: %s", path,
			 r == -E2BIG ? "too many arguments" : strerror(-r));
	return r;
}

static int get_volumes(const cJSON *obj, const char *path, struct cpm_component *c, char *err,
		       size_t errlen)
{
	const cJSON *a = NULL, *it;
	int r = json_get_array(obj, path, &a);

	if (r == -ENOENT)
		return 0;
	if (r < 0 || cJSON_GetArraySize(a) > CPM_CONFIG_MAX_VOLUMES) {
		snprintf(err, errlen, "%s: not a list of at most %d volumes", path,
			 CPM_CONFIG_MAX_VOLUMES);
		return -EINVAL;
	}
	c->vols = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(*c->vols));
	if (!c->vols)
		return -ENOMEM;
	cJSON_ArrayForEach(it, a)
	{
		struct cpm_volume *v = &c->vols[c->nvols++];
		const char *ro = json_str(it, "readOnly");
		if ((r = get_str(it, "name", &v->name, err, errlen)) < 0 ||
		    (r = get_str(it, "hostPath", &v->host_path, err, errlen)) < 0 ||
		    (r = get_str(it, "mountPath", &v->mount_path, err, errlen)) < 0 ||
		    (r = get_str(it, "pathType", &v->path_type, err, errlen)) < 0)
			return r;
		if (!v->name || !v->host_path || !v->mount_path || v->host_path[0] != '/' ||
		    v->mount_path[0] != '/') {
			snprintf(err, errlen, "%s: each volume needs a name, an absolute hostPath and "
					      "an absolute mountPath", path);
			return -EINVAL;
		}
		v->read_only = ro && strcmp(ro, "true") == 0;
	}
	return 0;
}

static int get_component(const cJSON *cc, const char *key, struct cpm_component *c, char *err,
			 size_t errlen)
{
	char p[96];
	int r;

	snprintf(p, sizeof(p), "%s.extraArgs", key);
	r = get_args(cc, p, c, err, errlen);
	snprintf(p, sizeof(p), "%s.extraVolumes", key);
	if (r >= 0)
		r = get_volumes(cc, p, c, err, errlen);
	return r;
}

static int get_duration_s(const cJSON *obj, const char *path, int64_t *dst, char *err,
			  size_t errlen)
{
	const char *v = json_str(obj, path);
	int64_t ns;

	if (!v)
		return 0;
	if (duration_parse(v, &ns) < 0 || ns < (int64_t)1000000000 * 3600) {
		snprintf(err, errlen, "%s: \"%s\" is not a duration of at least 1h", path, v);
		return -EINVAL;
	}
	*dst = ns / 1000000000;
	return 0;
}

static int cluster_configuration(const cJSON *d, struct cpm_config *c, char *err, size_t errlen)
{
	const char *algo = json_str(d, "encryptionAlgorithm"), *dir = json_str(d, "certificatesDir");
	unsigned major = 0, minor = 0;
	int r;

	if (json_find(d, "etcd.external")) {
		snprintf(err, errlen, "etcd.external: an external etcd is not supported by cpm");
		return -ENOTSUP;
	}
	if (dir && strcmp(dir, "/etc/kubernetes/pki") != 0) {
		snprintf(err, errlen, "certificatesDir: \"%s\": only /etc/kubernetes/pki is supported",
			 dir);
		return -ENOTSUP;
	}
	if ((r = get_str(d, "kubernetesVersion", &c->kubernetes_version, err, errlen)) < 0 ||
	    (r = get_str(d, "clusterName", &c->cluster_name, err, errlen)) < 0 ||
	    (r = get_str(d, "controlPlaneEndpoint", &c->control_plane_endpoint, err, errlen)) < 0 ||
	    (r = get_str(d, "imageRepository", &c->image_repository, err, errlen)) < 0 ||
	    (r = get_str(d, "networking.serviceSubnet", &c->service_subnet, err, errlen)) < 0 ||
	    (r = get_str(d, "networking.podSubnet", &c->pod_subnet, err, errlen)) < 0 ||
	    (r = get_str(d, "networking.dnsDomain", &c->dns_domain, err, errlen)) < 0 ||
	    (r = get_list(d, "apiServer.certSANs", &c->apiserver_cert_sans, err, errlen)) < 0 ||
	    (r = get_list(d, "etcd.local.serverCertSANs", &c->etcd_server_cert_sans, err, errlen)) <
		    0 ||
	    (r = get_list(d, "etcd.local.peerCertSANs", &c->etcd_peer_cert_sans, err, errlen)) < 0 ||
	    (r = get_str(d, "etcd.local.dataDir", &c->etcd_data_dir, err, errlen)) < 0 ||
	    (r = get_str(d, "etcd.local.imageRepository", &c->etcd_image_repository, err, errlen)) <
		    0 ||
	    (r = get_str(d, "etcd.local.imageTag", &c->etcd_image_tag, err, errlen)) < 0 ||
	    (r = get_duration_s(d, "certificateValidityPeriod", &c->cert_validity_s, err, errlen)) <
		    0 ||
	    (r = get_duration_s(d, "caCertificateValidityPeriod", &c->ca_validity_s, err,
				errlen)) < 0 ||
	    (r = get_component(d, "apiServer", &c->apiserver, err, errlen)) < 0 ||
	    (r = get_component(d, "controllerManager", &c->controller_manager, err, errlen)) < 0 ||
	    (r = get_component(d, "scheduler", &c->scheduler, err, errlen)) < 0 ||
	    (r = get_args(d, "etcd.local.extraArgs", &c->etcd, err, errlen)) < 0)
		return r;
	if (!c->kubernetes_version ||
	    sscanf(c->kubernetes_version, "v%u.%u", &major, &minor) != 2 || major != 1 ||
	    minor < 25 || minor > 99) {
		snprintf(err, errlen, "kubernetesVersion: \"%s\" is not a version v1.MINOR.PATCH "
				      "(1.25 or newer)",
			 c->kubernetes_version ? c->kubernetes_version : "");
		return -EINVAL;
	}
	c->kube_minor = (int)minor;
	if (!algo || strcmp(algo, "RSA-2048") == 0)
		c->algo = CPM_KEY_RSA2048;
	else if (strcmp(algo, "RSA-3072") == 0)
		c->algo = CPM_KEY_RSA3072;
	else if (strcmp(algo, "RSA-4096") == 0)
		c->algo = CPM_KEY_RSA4096;
	else if (strcmp(algo, "ECDSA-P256") == 0)
		c->algo = CPM_KEY_ECDSA_P256;
	else {
		snprintf(err, errlen, "encryptionAlgorithm: \"%s\" is not one of RSA-2048, RSA-3072, "
				      "RSA-4096, ECDSA-P256",
			 algo);
		return -EINVAL;
	}
	return 0;
}

static int init_configuration(const cJSON *d, struct cpm_config *c, char *err, size_t errlen)
{
	const char *port = json_str(d, "localAPIEndpoint.bindPort");
	int r;

	if ((r = get_str(d, "nodeRegistration.name", &c->node_name, err, errlen)) < 0 ||
	    (r = get_str(d, "localAPIEndpoint.advertiseAddress", &c->advertise_address, err,
			 errlen)) < 0)
		return r;
	if (port) {
		char *end;
		long p = strtol(port, &end, 10);
		if (*end || p < 1 || p > 65535) {
			snprintf(err, errlen, "localAPIEndpoint.bindPort: \"%s\" is not a port", port);
			return -EINVAL;
		}
		c->bind_port = (int)p;
	}
	return 0;
}

static int defaults(struct cpm_config *c, const char *node_name, const char *my_ip, char *err,
		    size_t errlen)
{
	unsigned char a[16];
	int r = 0;

	if (node_name && node_name[0])
		r = set_str(&c->node_name, node_name);
	if (r >= 0 && my_ip && my_ip[0])
		r = set_str(&c->advertise_address, my_ip);
	if (r >= 0 && !c->cluster_name)
		r = set_str(&c->cluster_name, "kubernetes");
	if (r >= 0 && !c->image_repository)
		r = set_str(&c->image_repository, "registry.k8s.io");
	if (r >= 0 && !c->service_subnet)
		r = set_str(&c->service_subnet, "10.96.0.0/12");
	if (r >= 0 && !c->dns_domain)
		r = set_str(&c->dns_domain, "cluster.local");
	if (r >= 0 && !c->etcd_data_dir)
		r = set_str(&c->etcd_data_dir, "/var/lib/etcd");
	if (r < 0)
		return r;
	if (!c->bind_port)
		c->bind_port = 6443;
	if (!c->node_name || !c->node_name[0]) {
		snprintf(err, errlen, "no node name: set NODE_NAME (--node-name) or "
				      "InitConfiguration's nodeRegistration.name");
		return -EINVAL;
	}
	if (!c->advertise_address || (inet_pton(AF_INET, c->advertise_address, a) != 1 &&
				      inet_pton(AF_INET6, c->advertise_address, a) != 1)) {
		snprintf(err, errlen, "no node IP: set MY_IP (--my-ip) or InitConfiguration's "
				      "localAPIEndpoint.advertiseAddress (got \"%s\")",
			 c->advertise_address ? c->advertise_address : "");
		return -EINVAL;
	}
	return 0;
}

/* The next document of text: [*start, *end), after a "---" line. */
static const char *next_doc(const char *p, const char *end, const char **doc_end)
{
	const char *line = p;

	while (line < end) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *le = nl ? nl : end;
		if (le - line >= 3 && strncmp(line, "---", 3) == 0 &&
		    (le - line == 3 || line[3] == ' ' || line[3] == '\r' || line[3] == '\t')) {
			*doc_end = line;
			return nl ? nl + 1 : end;
		}
		line = nl ? nl + 1 : end;
	}
	*doc_end = end;
	return end;
}

int cpm_config_parse(const char *text, size_t len, const char *node_name, const char *my_ip,
		     struct cpm_config *ret, char *err, size_t errlen)
{
	struct cpm_config c = { 0 };
	const char *p = text, *end = text + len;
	bool have_cluster = false;
	int r = 0, ndocs = 0;

	while (p < end && r >= 0) {
		const char *doc_end, *next = next_doc(p, end, &doc_end);
		cJSON *d = NULL;
		char e[200] = "";
		const char *kind, *av;

		if (++ndocs > CPM_CONFIG_MAX_DOCS) {
			snprintf(err, errlen, "more than %d YAML documents", CPM_CONFIG_MAX_DOCS);
			r = -E2BIG;
			break;
		}
		r = kube_yaml_parse(p, (size_t)(doc_end - p), 0, &d, e, sizeof(e));
		p = next;
		if (r == -ENODATA) {
			r = 0;
			continue;
		}
		if (r < 0) {
			snprintf(err, errlen, "document %d: %s", ndocs, e);
			break;
		}
		kind = json_str(d, "kind");
		av = json_str(d, "apiVersion");
		if (kind && (strcmp(kind, "ClusterConfiguration") == 0 ||
			     strcmp(kind, "InitConfiguration") == 0)) {
			if (!av || (strcmp(av, "kubeadm.k8s.io/v1beta3") != 0 &&
				    strcmp(av, "kubeadm.k8s.io/v1beta4") != 0)) {
				snprintf(err, errlen, "%s: apiVersion \"%s\" is not "
						      "kubeadm.k8s.io/v1beta3 or v1beta4",
					 kind, av ? av : "");
				r = -ENOTSUP;
			} else if (strcmp(kind, "ClusterConfiguration") == 0) {
				have_cluster = true;
				r = set_str(&c.api_version, av);
				if (r >= 0)
					r = cluster_configuration(d, &c, err, errlen);
			} else {
				r = init_configuration(d, &c, err, errlen);
			}
		}
		cJSON_Delete(d);
	}
	if (r >= 0 && !have_cluster) {
		snprintf(err, errlen, "no ClusterConfiguration (kubeadm.k8s.io/v1beta3 or v1beta4) "
				      "in the configuration");
		r = -EINVAL;
	}
	if (r >= 0)
		r = defaults(&c, node_name, my_ip, err, errlen);
	if (r < 0) {
		if (!err[0])
			snprintf(err, errlen, "%s", strerror(-r));
		cpm_config_release(&c);
		return r;
	}
	*ret = c;
	return 0;
}

int cpm_config_load(const char *path, const char *node_name, const char *my_ip,
		    struct cpm_config *ret, char *err, size_t errlen)
{
	char *text = NULL, e[400] = "";
	size_t len = 0;
	int r = file_read_all(path, CPM_CONFIG_MAX_FILE, &text, &len);

	if (r < 0) {
		snprintf(err, errlen, "cannot read \"%s\": %s", path, strerror(-r));
		return r;
	}
	r = cpm_config_parse(text, len, node_name, my_ip, ret, e, sizeof(e));
	free(text);
	if (r < 0)
		snprintf(err, errlen, "\"%s\": %s", path, e);
	return r;
}

void cpm_config_pki_input(const struct cpm_config *c, const char *root, struct cpm_pki_input *ret)
{
	*ret = (struct cpm_pki_input){
		.root = root,
		.node_name = c->node_name,
		.advertise_address = c->advertise_address,
		.bind_port = c->bind_port,
		.cluster_name = c->cluster_name,
		.service_subnet = c->service_subnet,
		.dns_domain = c->dns_domain,
		.control_plane_endpoint = c->control_plane_endpoint,
		.apiserver_cert_sans = (const char *const *)c->apiserver_cert_sans,
		.etcd_server_cert_sans = (const char *const *)c->etcd_server_cert_sans,
		.etcd_peer_cert_sans = (const char *const *)c->etcd_peer_cert_sans,
		.algo = c->algo,
		.cert_validity_s = c->cert_validity_s,
		.ca_validity_s = c->ca_validity_s,
		.kube_minor = c->kube_minor,
	};
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static void component_release(struct cpm_component *c)
{
	for (size_t i = 0; i < c->nargs; i++) {
		free(c->args[i].name);
		free(c->args[i].value);
	}
	for (size_t i = 0; i < c->nvols; i++) {
		free(c->vols[i].name);
		free(c->vols[i].host_path);
		free(c->vols[i].mount_path);
		free(c->vols[i].path_type);
	}
	free(c->args);
	free(c->vols);
}

void cpm_config_release(struct cpm_config *c)
{
	if (!c)
		return;
	free(c->api_version);
	free(c->kubernetes_version);
	free(c->cluster_name);
	free(c->control_plane_endpoint);
	free(c->image_repository);
	free(c->service_subnet);
	free(c->pod_subnet);
	free(c->dns_domain);
	strv_free(c->apiserver_cert_sans);
	strv_free(c->etcd_server_cert_sans);
	strv_free(c->etcd_peer_cert_sans);
	free(c->etcd_data_dir);
	free(c->etcd_image_repository);
	free(c->etcd_image_tag);
	free(c->node_name);
	free(c->advertise_address);
	component_release(&c->apiserver);
	component_release(&c->controller_manager);
	component_release(&c->scheduler);
	component_release(&c->etcd);
	memset(c, 0, sizeof(*c));
}
