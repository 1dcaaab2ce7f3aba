/* Kubernetes client configuration: in-cluster and kubeconfig files (see config.h). */
#include "common/kube/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/base64.h"
#include "common/base/buf.h"
#include "common/base/fileutil.h"
#include "common/base/json.h"
#include "common/base/secret.h"
#include "common/kube/yaml.h"

void kube_config_free(struct kube_config *c)
{
	if (!c)
		return;
	free(c->server);
	free(c->ca_file);
	free(c->ca_pem);
	free(c->cert_file);
	free(c->key_file);
	free(c->cert_pem);
	secret_free(c->key_pem);
	secret_free(c->token);
	free(c->token_file);
	free(c->username);
	secret_free(c->password);
	free(c->namespace);
	free(c->context);
	free(c->source);
	free(c);
}

int kube_read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	return file_read_all(path, max, ret, ret_len);
}

int kube_token_check(const char *token)
{
	for (const unsigned char *p = (const unsigned char *)token; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return -EBADMSG;
	return 0;
}

int kube_read_token_file(const char *path, char **ret)
{
	char *data = NULL;
	size_t len;
	int r = kube_read_file(path, KUBE_TOKEN_MAX_FILE, &data, &len);
	if (r < 0)
		return r;
	/* a NUL would cut the token short unseen */
	r = strlen(data) != len ? -EBADMSG : 0;
	str_strip(data);
	if (r == 0 && !*data)
		r = -ENODATA;
	if (r == 0)
		r = kube_token_check(data);
	if (r < 0) {
		secret_free(data);
		return r;
	}
	*ret = data;
	return 0;
}

int kube_base64_decode(const char *s, size_t len, char **ret, size_t *ret_len)
{
	void *d;
	int r = base64_decode(s, len, BASE64_STD | BASE64_PAD_OPTIONAL | BASE64_SKIP_SPACE, &d,
			      ret_len);

	if (r >= 0)
		*ret = d;
	return r;
}

/* Parsing context of one kubeconfig. */
struct kc {
	const char *path;
	char dir[4096];
	char *err;
	size_t errlen;
};

static int kc_fail(struct kc *k, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int kc_fail(struct kc *k, int r, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(k->err, k->errlen, "kubeconfig '%s': ", k->path ? k->path : "<data>");

	if (n < 0 || (size_t)n >= k->errlen)
		return r;
	va_start(ap, fmt);
	vsnprintf(k->err + n, k->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return r;
}

/* A string field of obj: 0, -ENOENT when absent, null or empty, -EINVAL (reported) otherwise. */
static int kc_str(struct kc *k, const cJSON *obj, const char *where, const char *field,
		  const char **ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, field);
	if (!v || cJSON_IsNull(v))
		return -ENOENT;
	if (!cJSON_IsString(v))
		return kc_fail(k, -EINVAL, "%s.%s: not a string", where, field);
	if (!*v->valuestring)
		return -ENOENT;
	*ret = v->valuestring;
	return 0;
}

static int kc_dup(struct kc *k, const cJSON *obj, const char *where, const char *field, char **ret)
{
	const char *s;
	int r = kc_str(k, obj, where, field, &s);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	free(*ret);
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

/* A file name field, made absolute against the kubeconfig's directory. */
static int kc_path(struct kc *k, const cJSON *obj, const char *where, const char *field, char **ret)
{
	const char *s;
	int r = kc_str(k, obj, where, field, &s);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	free(*ret);
	if (s[0] == '/' || !k->dir[0])
		*ret = strdup(s);
	else if (asprintf(ret, "%s/%s", k->dir, s) < 0)
		*ret = NULL;
	return *ret ? 0 : -ENOMEM;
}

/* A base64 "-data" field decoded into PEM text. */
static int kc_data(struct kc *k, const cJSON *obj, const char *where, const char *field, char **ret)
{
	const char *s;
	size_t n;
	char *out;
	int r = kc_str(k, obj, where, field, &s);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	if ((r = kube_base64_decode(s, strlen(s), &out, &n)) < 0)
		return r == -ENOMEM ? r
				    : kc_fail(k, -EINVAL, "%s.%s: invalid base64", where, field);
	if (strlen(out) != n || n == 0) {
		secret_free(out);
		return kc_fail(k, -EINVAL, "%s.%s: not PEM text", where, field);
	}
	secret_free(*ret);
	*ret = out;
	return 0;
}

static int kc_bool(struct kc *k, const cJSON *obj, const char *where, const char *field, bool *ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, field);
	if (!v || cJSON_IsNull(v))
		return 0;
	if (cJSON_IsBool(v)) {
		*ret = cJSON_IsTrue(v);
		return 0;
	}
	if (!cJSON_IsString(v) || str_to_bool(v->valuestring, ret) < 0)
		return kc_fail(k, -EINVAL, "%s.%s: not a boolean", where, field);
	return 0;
}

/* Finds the entry called name in the list (clusters, users, contexts) and returns its inner
 * object (cluster, user, context); where receives "clusters[2].cluster". */
static int kc_find(struct kc *k, const cJSON *root, const char *list, const char *name,
		   const char *inner, const cJSON **ret, char *where, size_t wn)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, list), *item;
	int i = 0;

	if (arr && !cJSON_IsNull(arr) && !cJSON_IsArray(arr))
		return kc_fail(k, -EINVAL, "%s: not a list", list);
	cJSON_ArrayForEach(item, arr)
	{
		char here[64];
		const char *n = NULL;
		snprintf(here, sizeof(here), "%s[%d]", list, i++);
		if (!cJSON_IsObject(item))
			return kc_fail(k, -EINVAL, "%s: not a mapping", here);
		int r = kc_str(k, item, here, "name", &n);
		if (r == -ENOENT)
			return kc_fail(k, -EINVAL, "%s.name: missing", here);
		if (r < 0)
			return r;
		if (strcmp(n, name) != 0)
			continue;
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(item, inner);
		snprintf(where, wn, "%s.%s", here, inner);
		if (!v || cJSON_IsNull(v))
			return kc_fail(k, -EINVAL, "%s: missing", where);
		if (!cJSON_IsObject(v))
			return kc_fail(k, -EINVAL, "%s: not a mapping", where);
		*ret = v;
		return 0;
	}
	return kc_fail(k, -EINVAL, "%s: no entry named '%s'", list, name);
}

static int kc_cluster(struct kc *k, const cJSON *cl, const char *where, struct kube_config *c)
{
	const char *server;
	int r;

	if ((r = kc_str(k, cl, where, "server", &server)) < 0)
		return r == -ENOENT ? kc_fail(k, -EINVAL, "%s.server: missing", where) : r;
	if (str_has_prefix(server, "https://") || str_has_prefix(server, "http://"))
		c->server = strdup(server);
	else if (strstr(server, "://"))
		return kc_fail(k, -EINVAL, "%s.server: unsupported scheme in '%s'", where, server);
	else if (asprintf(&c->server, "https://%s", server) < 0)
		c->server = NULL;
	if (!c->server)
		return -ENOMEM;
	for (size_t n = strlen(c->server); n > 0 && c->server[n - 1] == '/'; n--)
		c->server[n - 1] = 0;
	if ((r = kc_path(k, cl, where, "certificate-authority", &c->ca_file)) < 0 ||
	    (r = kc_data(k, cl, where, "certificate-authority-data", &c->ca_pem)) < 0 ||
	    (r = kc_bool(k, cl, where, "insecure-skip-tls-verify", &c->insecure_skip_verify)) < 0)
		return r;
	if (c->ca_pem) {
		/* the data overrides the file, as in client-go */
		free(c->ca_file);
		c->ca_file = NULL;
	}
	if (c->insecure_skip_verify && (c->ca_file || c->ca_pem))
		return kc_fail(
		    k, -EINVAL,
		    "%s: insecure-skip-tls-verify is not allowed with a certificate authority",
		    where);
	return 0;
}

static int kc_user(struct kc *k, const cJSON *u, const char *where, struct kube_config *c)
{
	int r;

	if ((r = kc_path(k, u, where, "client-certificate", &c->cert_file)) < 0 ||
	    (r = kc_data(k, u, where, "client-certificate-data", &c->cert_pem)) < 0 ||
	    (r = kc_path(k, u, where, "client-key", &c->key_file)) < 0 ||
	    (r = kc_data(k, u, where, "client-key-data", &c->key_pem)) < 0 ||
	    (r = kc_dup(k, u, where, "token", &c->token)) < 0 ||
	    (r = kc_path(k, u, where, "tokenFile", &c->token_file)) < 0 ||
	    (r = kc_dup(k, u, where, "username", &c->username)) < 0 ||
	    (r = kc_dup(k, u, where, "password", &c->password)) < 0)
		return r;
	if (c->cert_pem) {
		free(c->cert_file);
		c->cert_file = NULL;
	}
	if (c->key_pem) {
		free(c->key_file);
		c->key_file = NULL;
	}
	bool has_cert = c->cert_file || c->cert_pem, has_key = c->key_file || c->key_pem;
	if (has_cert != has_key)
		return kc_fail(k, -EINVAL, "%s: %s without %s", where,
			       has_cert ? "client-certificate" : "client-key",
			       has_cert ? "client-key" : "client-certificate");
	/* a CR or LF would end the Authorization header early: say so here, not as an
	 * "Invalid argument" at the first request; never show the token */
	if (c->token && kube_token_check(c->token) < 0)
		return kc_fail(
		    k, -EINVAL,
		    "%s.token holds a control character (CR, LF or another); the token is "
		    "not shown",
		    where);
	if (c->token_file) {
		char *t = NULL;
		if ((r = kube_read_token_file(c->token_file, &t)) == -EBADMSG)
			return kc_fail(
			    k, -EINVAL,
			    "%s.tokenFile '%s' holds a token with a control character (CR, "
			    "LF, NUL or another); the token is not shown",
			    where, c->token_file);
		if (r < 0)
			return kc_fail(k, r == -ENOMEM ? r : -EINVAL,
				       "%s.tokenFile '%s' cannot be read: %s", where, c->token_file,
				       strerror(-r));
		secret_free(c->token);
		c->token = t;
	}
	if (has_cert || c->token || c->username)
		return 0;
	if (cJSON_GetObjectItemCaseSensitive(u, "exec"))
		return kc_fail(k, -EINVAL,
			       "%s.exec: exec credential plugins are not supported (use a token, a "
			       "tokenFile or a client certificate)",
			       where);
	if (cJSON_GetObjectItemCaseSensitive(u, "auth-provider"))
		return kc_fail(k, -EINVAL, "%s.auth-provider: auth providers are not supported",
			       where);
	return 0;
}

int kube_config_parse(const char *data, size_t len, const char *path, const char *context,
		      struct kube_config **ret, char *err, size_t errlen)
{
	struct kc k = {.path = path, .err = err, .errlen = errlen};
	cJSON *root = NULL;
	const cJSON *ctx, *cl, *u;
	const char *cluster_name, *user_name = NULL;
	char where[96], yerr[256];
	struct kube_config *c;
	int r;

	if (errlen)
		err[0] = 0;
	if (path) {
		const char *slash = strrchr(path, '/');
		if (slash && (size_t)(slash - path) < sizeof(k.dir))
			memcpy(k.dir, path, (size_t)(slash - path) + (slash == path));
	}
	r = kube_yaml_parse(data, len, 0, &root, yerr, sizeof(yerr));
	if (r == -ENODATA)
		return kc_fail(&k, -EINVAL, "empty file");
	if (r < 0)
		return r == -ENOMEM ? r : kc_fail(&k, -EINVAL, "%s", yerr);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return kc_fail(&k, -EINVAL, "not a mapping");
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		cJSON_Delete(root);
		return -ENOMEM;
	}
	if (!context) {
		r = kc_str(&k, root, "kubeconfig", "current-context", &context);
		if (r == -ENOENT)
			r = kc_fail(&k, -EINVAL, "current-context is not set");
		if (r < 0)
			goto out;
	}
	if ((r = kc_find(&k, root, "contexts", context, "context", &ctx, where, sizeof(where))) < 0)
		goto out;
	if ((r = kc_str(&k, ctx, where, "cluster", &cluster_name)) < 0) {
		if (r == -ENOENT)
			r = kc_fail(&k, -EINVAL, "%s.cluster: missing", where);
		goto out;
	}
	if ((r = kc_str(&k, ctx, where, "user", &user_name)) < 0 && r != -ENOENT)
		goto out;
	if ((r = kc_dup(&k, ctx, where, "namespace", &c->namespace)) < 0)
		goto out;
	if (user_name) {
		char uwhere[96];
		if ((r = kc_find(&k, root, "users", user_name, "user", &u, uwhere,
				 sizeof(uwhere))) < 0 ||
		    (r = kc_user(&k, u, uwhere, c)) < 0)
			goto out;
	}
	if ((r = kc_find(&k, root, "clusters", cluster_name, "cluster", &cl, where,
			 sizeof(where))) < 0 ||
	    (r = kc_cluster(&k, cl, where, c)) < 0)
		goto out;
	if ((!c->namespace && !(c->namespace = strdup("default"))) ||
	    !(c->context = strdup(context)) || !(c->source = strdup(path ? path : "<data>"))) {
		r = -ENOMEM;
		goto out;
	}
	*ret = TAKE_PTR(c);
	r = 0;
out:
	kube_config_free(c);
	cJSON_Delete(root);
	return r;
}

static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return r;
}

int kube_config_in_cluster(const char *sa_dir, struct kube_config **ret, char *err, size_t errlen)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	const char *pod_ns = getenv("POD_NAMESPACE");
	char path[4096];
	struct kube_config *c;
	int r;

	if (!sa_dir)
		sa_dir = KUBE_SA_DIR;
	if (!host || !*host || !port || !*port)
		return fail(err, errlen, -ENOENT,
			    "not running in a cluster: KUBERNETES_SERVICE_HOST and "
			    "KUBERNETES_SERVICE_PORT must be defined");
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->in_cluster = true;
	/* an IPv6 address goes in brackets */
	if (asprintf(&c->server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
		     port) < 0)
		c->server = NULL;
	if (!c->server || !(c->source = strdup("in-cluster")) ||
	    asprintf(&c->token_file, "%s/token", sa_dir) < 0) {
		kube_config_free(c);
		return -ENOMEM;
	}
	if ((r = kube_read_token_file(c->token_file, &c->token)) < 0) {
		if (r == -EBADMSG)
			r = fail(err, errlen, -EINVAL,
				 "in-cluster: the service-account token '%s' holds a control "
				 "character (CR, LF, NUL or another); the token is not shown",
				 c->token_file);
		else
			fail(err, errlen, r,
			     "in-cluster: cannot read the service-account token '%s': %s",
			     c->token_file, strerror(-r));
		kube_config_free(c);
		return r;
	}
	snprintf(path, sizeof(path), "%s/ca.crt", sa_dir);
	if (access(path, R_OK) == 0 && !(c->ca_file = strdup(path))) {
		kube_config_free(c);
		return -ENOMEM;
	}
	snprintf(path, sizeof(path), "%s/namespace", sa_dir);
	if (pod_ns && *pod_ns)
		c->namespace = strdup(pod_ns);
	else if (kube_read_token_file(path, &c->namespace) < 0)
		c->namespace = strdup("default");
	if (!c->namespace) {
		kube_config_free(c);
		return -ENOMEM;
	}
	*ret = c;
	return 0;
}

static int load_file(const char *path, const struct kube_config_opts *o, struct kube_config **ret,
		     char *err, size_t errlen)
{
	_cleanup_free_ char *data = NULL;
	size_t len;
	int r = kube_read_file(path, KUBE_CONFIG_MAX_FILE, &data, &len);

	if (r == -EFBIG)
		return fail(err, errlen, -EINVAL, "kubeconfig '%s': larger than %zu bytes", path,
			    KUBE_CONFIG_MAX_FILE);
	if (r < 0)
		return fail(err, errlen, r, "kubeconfig '%s': %s", path, strerror(-r));
	return kube_config_parse(data, len, path, o->context, ret, err, errlen);
}

static int master_only(const char *master, struct kube_config **ret)
{
	struct kube_config *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (strstr(master, "://"))
		c->server = strdup(master);
	else if (asprintf(&c->server, "https://%s", master) < 0)
		c->server = NULL;
	if (!c->server || !(c->namespace = strdup("default")) ||
	    !(c->source = strdup("--master"))) {
		kube_config_free(c);
		return -ENOMEM;
	}
	for (size_t n = strlen(c->server); n > 0 && c->server[n - 1] == '/'; n--)
		c->server[n - 1] = 0;
	*ret = c;
	return 0;
}

int kube_config_load(const struct kube_config_opts *o, struct kube_config **ret, char *err,
		     size_t errlen)
{
	const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");
	const char *master = o->master && *o->master ? o->master : NULL;
	struct kube_config *c = NULL;
	char path[4096];
	int r;

	if (errlen)
		err[0] = 0;
	if (o->kubeconfig && *o->kubeconfig)
		r = load_file(o->kubeconfig, o, &c, err, errlen);
	else if (master)
		return master_only(master, ret);
	else {
		r = -ENOENT;
		/* the first file of $KUBECONFIG that exists (lists are not merged) */
		if (env && *env) {
			_cleanup_strv_ char **files = NULL;
			if (strv_split(env, ':', &files) < 0)
				return -ENOMEM;
			for (char **f = files; *f && r == -ENOENT; f++)
				if (access(*f, F_OK) == 0)
					return load_file(*f, o, ret, err, errlen);
		}
		r = kube_config_in_cluster(o->sa_dir, ret, err, errlen);
		if (r != -ENOENT)
			return r;
		if (home && *home && snprintf(path, sizeof(path), "%s/.kube/config", home) > 0 &&
		    access(path, F_OK) == 0)
			return load_file(path, o, ret, err, errlen);
		return fail(err, errlen, -ENOENT,
			    "no Kubernetes configuration: use --kubeconfig or --master, set "
			    "KUBECONFIG, or run in a cluster");
	}
	if (r < 0)
		return r;
	if (master) {
		char *s = NULL;
		struct kube_config *m = NULL;
		if ((r = master_only(master, &m)) < 0) {
			kube_config_free(c);
			return r;
		}
		s = TAKE_PTR(m->server);
		kube_config_free(m);
		free(c->server);
		c->server = s;
	}
	*ret = c;
	return 0;
}
