/* kubeadm's static-pod manifests with Deckhouse's checksum annotation (cpm_manifest.h). */
#include "modules/cpm/cpm_manifest.h"

#include <errno.h>
#include <stdarg.h>
#include <strings.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/fileutil.h"
#include "common/base/textdiff.h"
#include "modules/cpm/cpm_files.h"

#define MANIFEST_MAX ((size_t)1 << 20)
#define REF_FILE_MAX ((size_t)4 << 20)
#define ARGS_MAX (CPM_CONFIG_MAX_ARGS + 64)
#define VOLS_MAX (CPM_CONFIG_MAX_VOLUMES + 16)
#define PKI "/etc/kubernetes/pki/"

static const char *const names[CPM_COMPONENT_COUNT] = {
	"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"
};

const char *cpm_component_name(enum cpm_component_id id)
{
	return (unsigned)id < CPM_COMPONENT_COUNT ? names[id] : "?";
}

/* A command line being built: name/value pairs (the strings are owned by the pool). */
struct args {
	const char *name[ARGS_MAX], *value[ARGS_MAX];
	size_t n;
	char *pool[ARGS_MAX];
	size_t npool;
	int err;
};

static const char *keep(struct args *a, char *s)
{
	if (!s || a->npool >= ARGS_MAX) {
		free(s);
		a->err = -ENOMEM;
		return "";
	}
	a->pool[a->npool++] = s;
	return s;
}

static void arg(struct args *a, const char *name, const char *value)
{
	if (a->n >= ARGS_MAX) {
		a->err = -E2BIG;
		return;
	}
	a->name[a->n] = name;
	a->value[a->n++] = value;
}

__attribute__((format(printf, 3, 4))) static void argf(struct args *a, const char *name,
						      const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= sizeof(tmp)) {
		a->err = -E2BIG;
		return;
	}
	arg(a, name, keep(a, strdup(tmp)));
}

static const char *arg_get(const struct args *a, const char *name)
{
	for (size_t i = a->n; i-- > 0;)
		if (strcmp(a->name[i], name) == 0)
			return a->value[i];
	return NULL;
}

/* The configuration's extraArgs over the defaults, then sorted by name (stable). */
static void args_finish(struct args *a, const struct cpm_component *extra)
{
	for (size_t e = 0; e < extra->nargs; e++) {
		size_t k = 0;
		for (size_t i = 0; i < a->n; i++) {
			bool extra_before = false; /* an earlier extra of the same name stays */
			for (size_t j = 0; j < e; j++)
				extra_before |= a->value[i] == extra->args[j].value;
			if (strcmp(a->name[i], extra->args[e].name) != 0 || extra_before) {
				a->name[k] = a->name[i];
				a->value[k++] = a->value[i];
			}
		}
		a->n = k;
		arg(a, extra->args[e].name, extra->args[e].value);
	}
	for (size_t i = 1; i < a->n; i++)
		for (size_t j = i; j > 0 && strcmp(a->name[j - 1], a->name[j]) > 0; j--) {
			const char *n = a->name[j], *v = a->value[j];
			a->name[j] = a->name[j - 1];
			a->value[j] = a->value[j - 1];
			a->name[j - 1] = n;
			a->value[j - 1] = v;
		}
}

static void args_release(struct args *a)
{
	for (size_t i = 0; i < a->npool; i++)
		free(a->pool[i]);
}

struct vol {
	const char *name, *host, *mount, *type;
	bool ro;
};

struct vols {
	struct vol v[VOLS_MAX];
	size_t n;
};

static void vol(struct vols *v, const char *name, const char *host, const char *type, bool ro)
{
	if (v->n < VOLS_MAX)
		v->v[v->n++] = (struct vol){ name, host, host, type, ro };
}

static void vols_finish(struct vols *v, const struct cpm_component *extra)
{
	for (size_t i = 0; i < extra->nvols && v->n < VOLS_MAX; i++) {
		const struct cpm_volume *e = &extra->vols[i];
		v->v[v->n++] = (struct vol){ e->name, e->host_path, e->mount_path, e->path_type,
					     e->read_only };
	}
	for (size_t i = 1; i < v->n; i++)
		for (size_t j = i; j > 0 && strcmp(v->v[j - 1].name, v->v[j].name) > 0; j--) {
			struct vol t = v->v[j];
			v->v[j] = v->v[j - 1];
			v->v[j - 1] = t;
		}
}

static void ca_vols(struct vols *v)
{
	vol(v, "ca-certs", "/etc/ssl/certs", "DirectoryOrCreate", true);
	vol(v, "etc-ca-certificates", "/etc/ca-certificates", "DirectoryOrCreate", true);
	vol(v, "k8s-certs", "/etc/kubernetes/pki", "DirectoryOrCreate", true);
	vol(v, "usr-local-share-ca-certificates", "/usr/local/share/ca-certificates",
	    "DirectoryOrCreate", true);
	vol(v, "usr-share-ca-certificates", "/usr/share/ca-certificates", "DirectoryOrCreate",
	    true);
}

/* A YAML scalar: plain when that reads back as the same string, else double-quoted. */
static void yq(struct buf *b, const char *s, bool force_quote)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
				   "._/=,:@%+*-";
	static const char *const words[] = { "true", "false", "null", "yes", "no", "on", "off",
					     "y", "n", "~" };
	bool plain = !force_quote && s[0] && strspn(s, safe) == strlen(s) &&
		     (strncmp(s, "--", 2) == 0 || s[0] == '/' ||
		      (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')) &&
		     s[strlen(s) - 1] != ':';

	for (size_t i = 0; plain && i < sizeof(words) / sizeof(words[0]); i++)
		plain = strcasecmp(s, words[i]) != 0;
	if (plain) {
		buf_puts(b, s);
		return;
	}
	buf_putc(b, '"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_putc(b, '\\');
		if ((unsigned char)*s < 0x20)
			buf_printf(b, "\\x%02x", (unsigned char)*s);
		else
			buf_putc(b, *s);
	}
	buf_putc(b, '"');
}

struct probe {
	const char *host, *path, *scheme;
	long port;
	int failure, initial_delay, period;
};

static void probe(struct buf *b, const char *kind, const struct probe *p)
{
	buf_printf(b, "    %s:\n      failureThreshold: %d\n      httpGet:\n        host: ", kind,
		   p->failure);
	yq(b, p->host, false);
	buf_printf(b, "\n        path: ");
	yq(b, p->path, false);
	buf_printf(b, "\n        port: %ld\n        scheme: %s\n", p->port, p->scheme);
	if (p->initial_delay)
		buf_printf(b, "      initialDelaySeconds: %d\n", p->initial_delay);
	buf_printf(b, "      periodSeconds: %d\n      timeoutSeconds: 15\n", p->period);
}

/* What differs between the four pods. */
struct pod {
	const char *name;
	const char *annotation_key, *annotation_value; /* kubeadm's own, may be NULL */
	char image[512];
	struct args a;
	struct vols v;
	struct probe live, ready, start;
	bool has_ready;
	const char *cpu, *memory;
};

static void pod_text(struct buf *b, const struct pod *p, const char *checksum)
{
	buf_puts(b, "apiVersion: v1\nkind: Pod\nmetadata:\n");
	if (checksum || p->annotation_key) {
		buf_puts(b, "  annotations:\n");
		if (checksum)
			buf_printf(b, "    %s: \"%s\"\n", CPM_CHECKSUM_ANNOTATION, checksum);
		if (p->annotation_key) {
			buf_printf(b, "    %s: ", p->annotation_key);
			yq(b, p->annotation_value, false);
			buf_putc(b, '\n');
		}
	}
	buf_printf(b, "  creationTimestamp: null\n  labels:\n    component: %s\n"
		      "    tier: control-plane\n  name: %s\n  namespace: kube-system\nspec:\n"
		      "  containers:\n  - command:\n    - %s\n",
		   p->name, p->name, p->name);
	for (size_t i = 0; i < p->a.n; i++) {
		char *s = NULL;
		if (asprintf(&s, "--%s=%s", p->a.name[i], p->a.value[i]) < 0)
			s = NULL;
		buf_puts(b, "    - ");
		yq(b, s ? s : "", false);
		buf_putc(b, '\n');
		free(s);
	}
	buf_puts(b, "    image: ");
	yq(b, p->image, false);
	buf_puts(b, "\n    imagePullPolicy: IfNotPresent\n");
	probe(b, "livenessProbe", &p->live);
	buf_printf(b, "    name: %s\n", p->name);
	if (p->has_ready)
		probe(b, "readinessProbe", &p->ready);
	buf_printf(b, "    resources:\n      requests:\n        cpu: %s\n", p->cpu);
	if (p->memory)
		buf_printf(b, "        memory: %s\n", p->memory);
	probe(b, "startupProbe", &p->start);
	buf_puts(b, "    volumeMounts:\n");
	for (size_t i = 0; i < p->v.n; i++) {
		buf_puts(b, "    - mountPath: ");
		yq(b, p->v.v[i].mount, false);
		buf_puts(b, "\n      name: ");
		yq(b, p->v.v[i].name, false);
		buf_puts(b, p->v.v[i].ro ? "\n      readOnly: true\n" : "\n");
	}
	buf_puts(b, "  hostNetwork: true\n  priority: 2000001000\n"
		    "  priorityClassName: system-node-critical\n  securityContext:\n"
		    "    seccompProfile:\n      type: RuntimeDefault\n  volumes:\n");
	for (size_t i = 0; i < p->v.n; i++) {
		buf_puts(b, "  - hostPath:\n      path: ");
		yq(b, p->v.v[i].host, false);
		buf_putc(b, '\n');
		if (p->v.v[i].type && p->v.v[i].type[0])
			buf_printf(b, "      type: %s\n", p->v.v[i].type);
		buf_puts(b, "    name: ");
		yq(b, p->v.v[i].name, false);
		buf_putc(b, '\n');
	}
	buf_puts(b, "status: {}\n");
}

/* "host:port" of an URL or address list's first entry. */
static long port_of(const char *v, long def)
{
	const char *c = v ? strrchr(v, ':') : NULL;
	char *end;
	long p;

	if (!c)
		return def;
	p = strtol(c + 1, &end, 10);
	return (*end == 0 || *end == '/') && p > 0 && p < 65536 ? p : def;
}

static long num_of(const char *v, long def)
{
	char *end;
	long p = v ? strtol(v, &end, 10) : 0;

	return v && *v && !*end && p > 0 && p < 65536 ? p : def;
}

static const char *etcd_tag(const struct cpm_config *c)
{
	if (c->etcd_image_tag && c->etcd_image_tag[0])
		return c->etcd_image_tag;
	return c->kube_minor >= 34 ? "3.6.4-0" : c->kube_minor >= 31 ? "3.5.21-0" : "3.5.15-0";
}

static void url_host(char *out, size_t n, const char *ip)
{
	snprintf(out, n, strchr(ip, ':') ? "[%s]" : "%s", ip);
}

static void pod_apiserver(const struct cpm_config *c, struct pod *p)
{
	struct args *a = &p->a;
	const char *ip = c->advertise_address;

	argf(a, "advertise-address", "%s", ip);
	arg(a, "allow-privileged", "true");
	arg(a, "authorization-mode", "Node,RBAC");
	arg(a, "client-ca-file", PKI "ca.crt");
	arg(a, "enable-admission-plugins", "NodeRestriction");
	arg(a, "enable-bootstrap-token-auth", "true");
	arg(a, "etcd-cafile", PKI "etcd/ca.crt");
	arg(a, "etcd-certfile", PKI "apiserver-etcd-client.crt");
	arg(a, "etcd-keyfile", PKI "apiserver-etcd-client.key");
	arg(a, "etcd-servers", "https://127.0.0.1:2379");
	arg(a, "kubelet-client-certificate", PKI "apiserver-kubelet-client.crt");
	arg(a, "kubelet-client-key", PKI "apiserver-kubelet-client.key");
	arg(a, "kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname");
	arg(a, "proxy-client-cert-file", PKI "front-proxy-client.crt");
	arg(a, "proxy-client-key-file", PKI "front-proxy-client.key");
	arg(a, "requestheader-allowed-names", "front-proxy-client");
	arg(a, "requestheader-client-ca-file", PKI "front-proxy-ca.crt");
	arg(a, "requestheader-extra-headers-prefix", "X-Remote-Extra-");
	arg(a, "requestheader-group-headers", "X-Remote-Group");
	arg(a, "requestheader-username-headers", "X-Remote-User");
	argf(a, "secure-port", "%d", c->bind_port);
	argf(a, "service-account-issuer", "https://kubernetes.default.svc.%s", c->dns_domain);
	arg(a, "service-account-key-file", PKI "sa.pub");
	arg(a, "service-account-signing-key-file", PKI "sa.key");
	arg(a, "service-cluster-ip-range", c->service_subnet);
	arg(a, "tls-cert-file", PKI "apiserver.crt");
	arg(a, "tls-private-key-file", PKI "apiserver.key");
	args_finish(a, &c->apiserver);
	ca_vols(&p->v);
	vols_finish(&p->v, &c->apiserver);
	p->annotation_key = "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint";
	{
		char h[64];
		url_host(h, sizeof(h), ip);
		char *s = NULL;
		if (asprintf(&s, "%s:%d", h, c->bind_port) < 0)
			s = NULL;
		p->annotation_value = keep(a, s);
	}
	const char *host = arg_get(a, "advertise-address");
	long port = num_of(arg_get(a, "secure-port"), 6443);
	p->live = (struct probe){ host, "/livez", "HTTPS", port, 8, 10, 10 };
	p->ready = (struct probe){ host, "/readyz", "HTTPS", port, 3, 0, 1 };
	p->start = (struct probe){ host, "/livez", "HTTPS", port, 24, 10, 10 };
	p->has_ready = true;
	p->cpu = "250m";
}

static void pod_kcm(const struct cpm_config *c, struct pod *p)
{
	struct args *a = &p->a;

	arg(a, "authentication-kubeconfig", "/etc/kubernetes/controller-manager.conf");
	arg(a, "authorization-kubeconfig", "/etc/kubernetes/controller-manager.conf");
	arg(a, "bind-address", "127.0.0.1");
	arg(a, "client-ca-file", PKI "ca.crt");
	arg(a, "cluster-name", c->cluster_name);
	arg(a, "cluster-signing-cert-file", PKI "ca.crt");
	arg(a, "cluster-signing-key-file", PKI "ca.key");
	arg(a, "controllers", "*,bootstrapsigner,tokencleaner");
	arg(a, "kubeconfig", "/etc/kubernetes/controller-manager.conf");
	arg(a, "leader-elect", "true");
	arg(a, "requestheader-client-ca-file", PKI "front-proxy-ca.crt");
	arg(a, "root-ca-file", PKI "ca.crt");
	arg(a, "service-account-private-key-file", PKI "sa.key");
	arg(a, "use-service-account-credentials", "true");
	if (c->pod_subnet && c->pod_subnet[0]) {
		arg(a, "allocate-node-cidrs", "true");
		arg(a, "cluster-cidr", c->pod_subnet);
		arg(a, "service-cluster-ip-range", c->service_subnet);
	}
	args_finish(a, &c->controller_manager);
	ca_vols(&p->v);
	vol(&p->v, "flexvolume-dir", "/usr/libexec/kubernetes/kubelet-plugins/volume/exec",
	    "DirectoryOrCreate", false);
	vol(&p->v, "kubeconfig", "/etc/kubernetes/controller-manager.conf", "FileOrCreate", true);
	vols_finish(&p->v, &c->controller_manager);
	const char *host = arg_get(a, "bind-address");
	long port = num_of(arg_get(a, "secure-port"), 10257);
	p->live = (struct probe){ host, "/healthz", "HTTPS", port, 8, 10, 10 };
	p->start = (struct probe){ host, "/healthz", "HTTPS", port, 24, 10, 10 };
	p->cpu = "200m";
}

static void pod_scheduler(const struct cpm_config *c, struct pod *p)
{
	struct args *a = &p->a;

	arg(a, "authentication-kubeconfig", "/etc/kubernetes/scheduler.conf");
	arg(a, "authorization-kubeconfig", "/etc/kubernetes/scheduler.conf");
	arg(a, "bind-address", "127.0.0.1");
	arg(a, "kubeconfig", "/etc/kubernetes/scheduler.conf");
	arg(a, "leader-elect", "true");
	args_finish(a, &c->scheduler);
	vol(&p->v, "kubeconfig", "/etc/kubernetes/scheduler.conf", "FileOrCreate", true);
	vols_finish(&p->v, &c->scheduler);
	const char *host = arg_get(a, "bind-address");
	long port = num_of(arg_get(a, "secure-port"), 10259);
	p->live = (struct probe){ host, "/healthz", "HTTPS", port, 8, 10, 10 };
	p->start = (struct probe){ host, "/healthz", "HTTPS", port, 24, 10, 10 };
	p->cpu = "100m";
}

static void pod_etcd(const struct cpm_config *c, struct pod *p)
{
	struct args *a = &p->a;
	const char *tag = etcd_tag(c);
	bool v36 = strncmp(tag, "3.5", 3) != 0 && strncmp(tag, "3.4", 3) != 0;
	char h[64];

	url_host(h, sizeof(h), c->advertise_address);
	argf(a, "advertise-client-urls", "https://%s:2379", h);
	arg(a, "cert-file", PKI "etcd/server.crt");
	arg(a, "client-cert-auth", "true");
	arg(a, "data-dir", c->etcd_data_dir);
	if (v36) {
		arg(a, "feature-gates", "InitialCorruptCheck=true");
		arg(a, "watch-progress-notify-interval", "5s");
	} else {
		arg(a, "experimental-initial-corrupt-check", "true");
		arg(a, "experimental-watch-progress-notify-interval", "5s");
	}
	argf(a, "initial-advertise-peer-urls", "https://%s:2380", h);
	argf(a, "initial-cluster", "%s=https://%s:2380", c->node_name, h);
	arg(a, "key-file", PKI "etcd/server.key");
	argf(a, "listen-client-urls", "https://127.0.0.1:2379,https://%s:2379", h);
	arg(a, "listen-metrics-urls", "http://127.0.0.1:2381");
	argf(a, "listen-peer-urls", "https://%s:2380", h);
	arg(a, "name", c->node_name);
	arg(a, "peer-cert-file", PKI "etcd/peer.crt");
	arg(a, "peer-client-cert-auth", "true");
	arg(a, "peer-key-file", PKI "etcd/peer.key");
	arg(a, "peer-trusted-ca-file", PKI "etcd/ca.crt");
	arg(a, "snapshot-count", "10000");
	arg(a, "trusted-ca-file", PKI "etcd/ca.crt");
	args_finish(a, &c->etcd);
	vol(&p->v, "etcd-certs", "/etc/kubernetes/pki/etcd", "DirectoryOrCreate", false);
	vol(&p->v, "etcd-data", c->etcd_data_dir, "DirectoryOrCreate", false);
	vols_finish(&p->v, &c->etcd);
	p->annotation_key = "kubeadm.kubernetes.io/etcd.advertise-client-urls";
	p->annotation_value = arg_get(a, "advertise-client-urls");
	long port = port_of(arg_get(a, "listen-metrics-urls"), 2381);
	bool new_probes = c->kube_minor >= 31;
	const char *lpath = new_probes ? "/livez" : "/health?exclude=NOSPACE&serializable=true";
	const char *rpath = new_probes ? "/readyz" : "/health?exclude=NOSPACE&serializable=false";
	p->live = (struct probe){ "127.0.0.1", lpath, "HTTP", port, 8, 10, 10 };
	p->ready = (struct probe){ "127.0.0.1", rpath, "HTTP", port, 3, 0, 1 };
	p->start = (struct probe){ "127.0.0.1", rpath, "HTTP", port, 24, 10, 10 };
	p->has_ready = new_probes;
	p->cpu = "100m";
	p->memory = "100Mi";
	snprintf(p->image, sizeof(p->image), "%s/etcd:%s",
		 c->etcd_image_repository && c->etcd_image_repository[0] ? c->etcd_image_repository
									 : c->image_repository,
		 tag);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* sha256 hex of the manifest and every file it references under /etc/kubernetes. */
static int checksum(const char *root, const struct pod *p, const char *text, char out[65])
{
	const char *refs[ARGS_MAX];
	size_t nrefs = 0;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int r = 0;

	if (!ctx)
		return -ENOMEM;
	for (size_t i = 0; i < p->a.n; i++)
		if (strncmp(p->a.value[i], "/etc/kubernetes/", 16) == 0) {
			bool dup = false;
			for (size_t j = 0; j < nrefs; j++)
				dup |= strcmp(refs[j], p->a.value[i]) == 0;
			if (!dup)
				refs[nrefs++] = p->a.value[i];
		}
	qsort(refs, nrefs, sizeof(refs[0]), cmp_str);
	if (!EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ||
	    !EVP_DigestUpdate(ctx, text, strlen(text)))
		r = -EIO;
	for (size_t i = 0; r >= 0 && i < nrefs; i++) {
		char path[4096], *data = NULL;
		size_t len = 0;
		if ((r = cpm_path(root, refs[i], path, sizeof(path))) < 0)
			break;
		r = file_read_all(path, REF_FILE_MAX, &data, &len);
		if (r == -ENOENT || r == -EISDIR) {
			/* a missing file counts by its name */
			r = EVP_DigestUpdate(ctx, refs[i], strlen(refs[i])) ? 0 : -EIO;
			continue;
		}
		if (r >= 0 && !EVP_DigestUpdate(ctx, data, len))
			r = -EIO;
		free(data);
	}
	if (r >= 0 && !EVP_DigestFinal_ex(ctx, md, &mdlen))
		r = -EIO;
	EVP_MD_CTX_free(ctx);
	for (unsigned i = 0; r >= 0 && i < mdlen && i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	return r;
}

int cpm_manifest_render(const struct cpm_config *c, const char *root, enum cpm_component_id id,
			char **ret, char *err, size_t errlen)
{
	struct pod *p = calloc(1, sizeof(*p));
	struct buf b = BUF_INIT(MANIFEST_MAX);
	char sum[65] = "";
	int r = 0;

	if (!p)
		return -ENOMEM;
	p->name = cpm_component_name(id);
	snprintf(p->image, sizeof(p->image), "%s/%s:%s", c->image_repository, p->name,
		 c->kubernetes_version);
	switch (id) {
	case CPM_KUBE_APISERVER:
		pod_apiserver(c, p);
		break;
	case CPM_KUBE_CONTROLLER_MANAGER:
		pod_kcm(c, p);
		break;
	case CPM_KUBE_SCHEDULER:
		pod_scheduler(c, p);
		break;
	case CPM_ETCD:
		pod_etcd(c, p);
		break;
	default:
		r = -EINVAL;
	}
	if (r >= 0 && p->a.err < 0)
		r = p->a.err;
	if (r >= 0 && p->v.n >= VOLS_MAX)
		r = -E2BIG;
	if (r >= 0) {
		pod_text(&b, p, NULL);
		r = b.data ? checksum(root, p, b.data, sum) : -ENOMEM;
	}
	if (r >= 0) {
		buf_reset(&b);
		pod_text(&b, p, sum);
		r = b.data && b.len < MANIFEST_MAX - 1 ? 0 : -E2BIG;
	}
	if (r >= 0)
		*ret = buf_steal(&b);
	else
		snprintf(err, errlen, "cannot render %s: %s", p->name, strerror(-r));
	buf_release(&b);
	args_release(&p->a);
	free(p);
	return r;
}

/* --dry-run: what would change in the manifest abs, as `diff -u` (old NULL: a new file). */
static void print_diff(const char *abs, const char *old, const char *text)
{
	_cleanup_buf_ struct buf d = BUF_INIT(0);
	char a[160], b[160];

	if (old)
		snprintf(a, sizeof(a), "a%s", abs);
	else
		snprintf(a, sizeof(a), "/dev/null");
	snprintf(b, sizeof(b), "b%s", abs);
	int r = text_diff(old ? old : "", text, a, b, 3, &d);
	if (r == 1)
		fwrite(d.data, 1, d.len, stdout);
	else if (r < 0)
		printf("%s: cannot show the difference: %s\n", abs, strerror(-r));
}

int cpm_manifests_converge(const struct cpm_config *c, const char *root, bool dry_run,
			   struct cpm_report *rep)
{
	char err[300] = "", path[4096], abs[128], step[96];
	int changed = 0;

	for (int id = 0; id < CPM_COMPONENT_COUNT; id++) {
		int64_t t0 = cpm_report_clock_ms();
		const char *name = cpm_component_name((enum cpm_component_id)id);
		char *text = NULL, *old = NULL;
		int r;

		snprintf(abs, sizeof(abs), "/etc/kubernetes/manifests/%s.yaml", name);
		snprintf(step, sizeof(step), "manifests/%s.yaml", name);
		r = cpm_path(root, abs, path, sizeof(path));
		if (r >= 0)
			r = cpm_manifest_render(c, root, (enum cpm_component_id)id, &text, err,
						sizeof(err));
		if (r < 0) {
			cpm_report_add(rep, step, CPM_STEP_FAILED, cpm_report_clock_ms() - t0, "%s",
				       err[0] ? err : strerror(-r));
			return r;
		}
		bool existed = file_read_all(path, MANIFEST_MAX, &old, NULL) >= 0;
		free(old);
		if (dry_run) {
			char *cur = NULL;
			bool same = file_read_all(path, MANIFEST_MAX, &cur, NULL) >= 0 &&
				    strcmp(cur, text) == 0;
			if (!same)
				print_diff(abs, cur, text);
			free(cur);
			cpm_report_add(rep, step, same ? CPM_STEP_UNCHANGED : CPM_STEP_WOULD_CHANGE,
				       cpm_report_clock_ms() - t0, same ? NULL : "would %s",
				       existed ? "replace" : "create");
			changed |= !same;
			free(text);
			continue;
		}
		r = cpm_write_if_changed(path, text, strlen(text), FILE_MODE_SECRET);
		free(text);
		cpm_report_add(rep, step,
			       r < 0	 ? CPM_STEP_FAILED
			       : r == 0	 ? CPM_STEP_UNCHANGED
			       : existed ? CPM_STEP_UPDATED
					 : CPM_STEP_CREATED,
			       cpm_report_clock_ms() - t0, r < 0 ? "cannot write %s: %s" : NULL, path,
			       r < 0 ? strerror(-r) : "");
		if (r < 0)
			return r;
		changed |= r;
	}
	return changed;
}
