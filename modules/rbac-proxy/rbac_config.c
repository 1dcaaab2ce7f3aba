/* kube-rbac-proxy's --config-file and Deckhouse's KUBE_RBAC_PROXY_CONFIG: YAML into struct
 * rbac_cfg. Unknown keys are refused (a typo in an authorization rule must not widen it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/kube/yaml.h"
#include "modules/rbac-proxy/rbac_proxy.h"

#define MAX_STATICS 256
#define MAX_UPSTREAMS 64

static int only_keys(const cJSON *o, const char *what, const char *const *keys, char *err,
		     size_t errlen)
{
	const cJSON *k;

	if (!cJSON_IsObject(o)) {
		snprintf(err, errlen, "%s: not a mapping", what);
		return -EINVAL;
	}
	cJSON_ArrayForEach(k, o)
	{
		size_t i = 0;
		while (keys[i] && strcmp(keys[i], k->string) != 0)
			i++;
		if (!keys[i]) {
			snprintf(err, errlen, "%s: unknown field '%s'", what, k->string);
			return -EINVAL;
		}
	}
	return 0;
}

/* A string field (absent: NULL); a number or bool becomes its text as YAML gave it. */
static int get_str(const cJSON *o, const char *key, const char *what, char **ret, char *err,
		   size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	*ret = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v)) {
		snprintf(err, errlen, "%s.%s: not a string", what, key);
		return -EINVAL;
	}
	return (*ret = strdup(v->valuestring)) ? 0 : -ENOMEM;
}

static int get_bool(const cJSON *o, const char *key, const char *what, bool *ret, char *err,
		    size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	*ret = false;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (cJSON_IsString(v) && (!strcmp(v->valuestring, "true") || !strcmp(v->valuestring, "false"))) {
		*ret = v->valuestring[0] == 't';
		return 0;
	}
	snprintf(err, errlen, "%s.%s: not a bool", what, key);
	return -EINVAL;
}

static int get_strv(const cJSON *o, const char *key, const char *what, char ***ret, char *err,
		    size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key), *e;

	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsArray(v)) {
		snprintf(err, errlen, "%s.%s: not a list", what, key);
		return -EINVAL;
	}
	cJSON_ArrayForEach(e, v)
	{
		if (!cJSON_IsString(e)) {
			snprintf(err, errlen, "%s.%s: an item is not a string", what, key);
			return -EINVAL;
		}
		if (strv_push(ret, e->valuestring) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int parse_static(const cJSON *o, struct rbac_static *s, char *err, size_t errlen)
{
	static const char *const keys[] = {"user",	  "verb", "namespace",	     "apiGroup",
					   "resource",	  "subresource", "name", "resourceRequest",
					   "path",	  NULL};
	static const char *const ukeys[] = {"name", "groups", NULL};
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "user");
	int r = only_keys(o, "authorization.static[]", keys, err, errlen);

	if (r >= 0 && u && (r = only_keys(u, "authorization.static[].user", ukeys, err, errlen)) >= 0 &&
	    (r = get_str(u, "name", "user", &s->user, err, errlen)) >= 0)
		r = get_strv(u, "groups", "user", &s->groups, err, errlen);
	if (r >= 0)
		r = get_str(o, "verb", "static", &s->verb, err, errlen);
	if (r >= 0)
		r = get_str(o, "namespace", "static", &s->ns, err, errlen);
	if (r >= 0)
		r = get_str(o, "apiGroup", "static", &s->group, err, errlen);
	if (r >= 0)
		r = get_str(o, "resource", "static", &s->res, err, errlen);
	if (r >= 0)
		r = get_str(o, "subresource", "static", &s->subresource, err, errlen);
	if (r >= 0)
		r = get_str(o, "name", "static", &s->name, err, errlen);
	if (r >= 0)
		r = get_str(o, "path", "static", &s->path, err, errlen);
	if (r >= 0)
		r = get_bool(o, "resourceRequest", "static", &s->resource_request, err, errlen);
	return r;
}

static int parse_rewrites(const cJSON *o, struct rbac_authz_cfg *a, char *err, size_t errlen)
{
	static const char *const keys[] = {"byQueryParameter", "byHttpHeader", NULL};
	static const char *const nkeys[] = {"name", NULL};
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(o, "byQueryParameter");
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "byHttpHeader");
	int r = only_keys(o, "authorization.rewrites", keys, err, errlen);

	if (r >= 0 && q && (r = only_keys(q, "rewrites.byQueryParameter", nkeys, err, errlen)) >= 0)
		r = get_str(q, "name", "byQueryParameter", &a->rewrite_query, err, errlen);
	if (r >= 0 && h && (r = only_keys(h, "rewrites.byHttpHeader", nkeys, err, errlen)) >= 0)
		r = get_str(h, "name", "byHttpHeader", &a->rewrite_header, err, errlen);
	return r;
}

static int parse_authz(const cJSON *o, struct rbac_authz_cfg *a, char *err, size_t errlen)
{
	static const char *const keys[] = {"rewrites", "resourceAttributes", "static", NULL};
	static const char *const rkeys[] = {"namespace", "apiGroup", "apiVersion", "resource",
					    "subresource", "name", NULL};
	const cJSON *rw = cJSON_GetObjectItemCaseSensitive(o, "rewrites");
	const cJSON *ra = cJSON_GetObjectItemCaseSensitive(o, "resourceAttributes");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "static"), *e;
	int r = only_keys(o, "authorization", keys, err, errlen);

	if (r >= 0 && rw && !cJSON_IsNull(rw))
		r = parse_rewrites(rw, a, err, errlen);
	if (r >= 0 && ra && !cJSON_IsNull(ra)) {
		a->resource = true;
		if ((r = only_keys(ra, "authorization.resourceAttributes", rkeys, err, errlen)) >= 0 &&
		    (r = get_str(ra, "namespace", "resourceAttributes", &a->ns, err, errlen)) >= 0 &&
		    (r = get_str(ra, "apiGroup", "resourceAttributes", &a->group, err, errlen)) >= 0 &&
		    (r = get_str(ra, "apiVersion", "resourceAttributes", &a->version, err, errlen)) >= 0 &&
		    (r = get_str(ra, "resource", "resourceAttributes", &a->res, err, errlen)) >= 0 &&
		    (r = get_str(ra, "subresource", "resourceAttributes", &a->subresource, err, errlen)) >= 0)
			r = get_str(ra, "name", "resourceAttributes", &a->name, err, errlen);
	}
	if (r >= 0 && st && !cJSON_IsNull(st)) {
		int n = cJSON_GetArraySize(st);
		if (!cJSON_IsArray(st) || n > MAX_STATICS) {
			snprintf(err, errlen, "authorization.static: not a list of at most %d rules",
				 MAX_STATICS);
			return -EINVAL;
		}
		if (n && !(a->statics = calloc((size_t)n, sizeof(*a->statics))))
			return -ENOMEM;
		cJSON_ArrayForEach(e, st)
		{
			if ((r = parse_static(e, &a->statics[a->nstatics++], err, errlen)) < 0)
				break;
		}
	}
	return r;
}

static int parse_upstream(const cJSON *o, struct rbac_upstream *u, char *err, size_t errlen)
{
	static const char *const keys[] = {"upstream", "path", "authorization", "upstreamCaFile",
					   "upstreamInsecureSkipVerify", NULL};
	const cJSON *az = cJSON_GetObjectItemCaseSensitive(o, "authorization");
	_cleanup_free_ char *url = NULL;
	int r = only_keys(o, "upstreams[]", keys, err, errlen);

	if (r >= 0 && (r = get_str(o, "upstream", "upstreams[]", &url, err, errlen)) >= 0 && !url) {
		snprintf(err, errlen, "upstreams[]: no upstream URL");
		r = -EINVAL;
	}
	if (r >= 0)
		r = rbac_upstream_parse(url, u, err, errlen);
	if (r >= 0)
		r = get_str(o, "path", "upstreams[]", &u->prefix, err, errlen);
	if (r >= 0 && !u->prefix && !(u->prefix = strdup("/")))
		r = -ENOMEM;
	if (r >= 0 && u->prefix[0] != '/') {
		snprintf(err, errlen, "upstreams[].path '%s' does not start with '/'", u->prefix);
		r = -EINVAL;
	}
	if (r >= 0)
		r = get_str(o, "upstreamCaFile", "upstreams[]", &u->ca_file, err, errlen);
	if (r >= 0)
		r = get_bool(o, "upstreamInsecureSkipVerify", "upstreams[]", &u->insecure, err,
			     errlen);
	if (r >= 0 && az && !cJSON_IsNull(az)) {
		if (!(u->authz = calloc(1, sizeof(*u->authz))))
			return -ENOMEM;
		r = parse_authz(az, u->authz, err, errlen);
	}
	return r;
}

int rbac_cfg_parse(const char *text, size_t len, struct rbac_cfg *cfg, char *err, size_t errlen)
{
	static const char *const keys[] = {"authorization", "excludePaths", "upstreams", NULL};
	cJSON *root = NULL;
	const cJSON *az, *ups, *e;
	int r = kube_yaml_parse(text, len, 0, &root, err, errlen);

	if (r == -ENODATA) /* an empty file: no authorization settings */
		return 0;
	if (r < 0)
		return r;
	if ((r = only_keys(root, "configuration", keys, err, errlen)) < 0)
		goto out;
	az = cJSON_GetObjectItemCaseSensitive(root, "authorization");
	if (az && !cJSON_IsNull(az) && (r = parse_authz(az, &cfg->authz, err, errlen)) < 0)
		goto out;
	if ((r = get_strv(root, "excludePaths", "configuration", &cfg->exclude_paths, err, errlen)) < 0)
		goto out;
	ups = cJSON_GetObjectItemCaseSensitive(root, "upstreams");
	if (ups && !cJSON_IsNull(ups)) {
		int n = cJSON_GetArraySize(ups);
		if (!cJSON_IsArray(ups) || n < 1 || n > MAX_UPSTREAMS) {
			snprintf(err, errlen, "upstreams: not a list of 1 to %d upstreams", MAX_UPSTREAMS);
			r = -EINVAL;
			goto out;
		}
		if (!(cfg->ups = calloc((size_t)n, sizeof(*cfg->ups)))) {
			r = -ENOMEM;
			goto out;
		}
		cfg->deckhouse_upstreams = true;
		cJSON_ArrayForEach(e, ups)
		{
			if ((r = parse_upstream(e, &cfg->ups[cfg->nups++], err, errlen)) < 0)
				goto out;
		}
	}
out:
	cJSON_Delete(root);
	return r;
}

void rbac_authz_cfg_release(struct rbac_authz_cfg *a)
{
	free(a->ns);
	free(a->group);
	free(a->version);
	free(a->res);
	free(a->subresource);
	free(a->name);
	free(a->rewrite_query);
	free(a->rewrite_header);
	for (size_t i = 0; i < a->nstatics; i++) {
		struct rbac_static *s = &a->statics[i];
		free(s->user);
		strv_free(s->groups);
		free(s->verb);
		free(s->ns);
		free(s->group);
		free(s->res);
		free(s->subresource);
		free(s->name);
		free(s->path);
	}
	free(a->statics);
	*a = (struct rbac_authz_cfg){0};
}

void rbac_upstream_release(struct rbac_upstream *u)
{
	free(u->url);
	free(u->base_path);
	free(u->prefix);
	free(u->ca_file);
	if (u->authz) {
		rbac_authz_cfg_release(u->authz);
		free(u->authz);
	}
	SSL_CTX_free(u->ctx);
	*u = (struct rbac_upstream){0};
}

void rbac_cfg_release(struct rbac_cfg *cfg)
{
	rbac_authz_cfg_release(&cfg->authz);
	strv_free(cfg->exclude_paths);
	for (size_t i = 0; i < cfg->nups; i++)
		rbac_upstream_release(&cfg->ups[i]);
	free(cfg->ups);
	*cfg = (struct rbac_cfg){0};
}
