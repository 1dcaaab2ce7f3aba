/* Delegated authentication (TokenReview) and authorization (SubjectAccessReview) with their
 * caches (authn.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/timeutil.h"
#include "common/kube/authn.h"
#include "common/kube/rest.h"

#define MAX_GROUPS 256
#define MAX_AUDIENCES 32
#define DEFAULT_TIMEOUT_NS (5 * NSEC_PER_SEC)

void kube_user_release(struct kube_user *u)
{
	if (!u)
		return;
	free(u->name);
	free(u->uid);
	strv_free(u->groups);
	*u = (struct kube_user){0};
}

int kube_user_copy(const struct kube_user *src, struct kube_user *dst)
{
	struct kube_user u = {0};

	if (!(u.name = strdup(src->name ? src->name : "")) ||
	    (src->uid && !(u.uid = strdup(src->uid))))
		goto oom;
	for (char **g = src->groups; g && *g; g++)
		if (strv_push(&u.groups, *g) < 0)
			goto oom;
	*dst = u;
	return 0;
oom:
	kube_user_release(&u);
	return -ENOMEM;
}

static void user_free(void *v)
{
	kube_user_release(v);
	free(v);
}

static void *user_dup(const void *v)
{
	struct kube_user *u = malloc(sizeof(*u));

	if (u && kube_user_copy(v, u) < 0) {
		free(u);
		return NULL;
	}
	return u;
}

struct kube_authn {
	struct kube_client *kc;
	char **audiences;
	int64_t timeout_ns;
	struct kube_auth_cache *cache;
};

struct kube_authz {
	struct kube_client *kc;
	int64_t timeout_ns;
	struct kube_auth_cache *cache;
};

int kube_authn_new(struct kube_client *kc, const struct kube_authn_opts *o, struct kube_authn **ret)
{
	struct kube_authn *a = calloc(1, sizeof(*a));
	int r;

	if (!a)
		return -ENOMEM;
	a->kc = kc;
	a->timeout_ns = o->timeout_ns > 0 ? o->timeout_ns : DEFAULT_TIMEOUT_NS;
	for (size_t i = 0; o->audiences && o->audiences[i]; i++)
		if (i >= MAX_AUDIENCES || strv_push(&a->audiences, o->audiences[i]) < 0) {
			kube_authn_free(a);
			return i >= MAX_AUDIENCES ? -E2BIG : -ENOMEM;
		}
	int64_t ttl = o->ttl_ns > 0 ? o->ttl_ns : 120 * NSEC_PER_SEC;
	r = kube_auth_cache_new(&(struct kube_auth_cache_opts){.pos_ttl_ns = ttl,
							       .neg_ttl_ns = ttl,
							       .stale_ns = o->stale_ns,
							       .max_entries = o->max_entries,
							       .free_value = user_free,
							       .copy_value = user_dup},
				&a->cache);
	if (r < 0) {
		kube_authn_free(a);
		return r;
	}
	*ret = a;
	return 0;
}

void kube_authn_free(struct kube_authn *a)
{
	if (!a)
		return;
	kube_auth_cache_free(a->cache);
	strv_free(a->audiences);
	free(a);
}

static int token_key(const struct kube_authn *a, const char *token, unsigned char *key)
{
	const char *parts[2 + MAX_AUDIENCES] = {"token", token};
	size_t n = 2;

	for (char **p = a->audiences; p && *p; p++)
		parts[n++] = *p;
	return kube_auth_key(key, parts, n);
}

/* The answer of a cache lookup: 1 with *ret, 0, or -EAGAIN. */
static int from_cache(struct kube_authn *a, const unsigned char *key, bool stale,
		      struct kube_user *ret)
{
	void *v = NULL;
	int r = kube_auth_cache_get(a->cache, key, stale, &v);

	if (r == 1) {
		*ret = *(struct kube_user *)v;
		free(v);
	} else if (v) {
		user_free(v);
	}
	return r;
}

int kube_authn_cached(struct kube_authn *a, const char *token, struct kube_user *ret)
{
	unsigned char key[KUBE_AUTH_KEY_LEN];
	int r = token_key(a, token, key);

	return r < 0 ? r : from_cache(a, key, false, ret);
}

/* status.user of a TokenReview, with system:authenticated. */
static int user_from_status(const cJSON *st, struct kube_user *u, char *err, size_t errlen)
{
	const cJSON *groups = json_find(st, "user.groups"), *g;
	const char *name = json_str(st, "user.username"), *uid = json_str(st, "user.uid");
	bool auth_group = false;
	size_t n = 0;

	if (!name || !*name) {
		snprintf(err, errlen, "the TokenReview authenticated a user with no name");
		return -EPROTO;
	}
	if (!(u->name = strdup(name)) || (uid && *uid && !(u->uid = strdup(uid))))
		return -ENOMEM;
	if (!cJSON_IsArray(groups))
		groups = NULL;
	cJSON_ArrayForEach(g, groups)
	{
		if (!cJSON_IsString(g))
			continue;
		if (++n > MAX_GROUPS) {
			snprintf(err, errlen, "the TokenReview returned over %d groups", MAX_GROUPS);
			return -E2BIG;
		}
		if (strv_push(&u->groups, g->valuestring) < 0)
			return -ENOMEM;
		auth_group |= strcmp(g->valuestring, "system:authenticated") == 0;
	}
	if (!auth_group && strv_push(&u->groups, "system:authenticated") < 0)
		return -ENOMEM;
	return 0;
}

static int token_review(struct kube_authn *a, const char *token, struct kube_user *u, char *err,
			size_t errlen)
{
	_cleanup_free_ char *body = NULL;
	struct kube_status st = {0};
	cJSON *req = cJSON_CreateObject(), *spec, *reply = NULL, *auds;
	bool authenticated = false;
	int r = -ENOMEM;

	if (!req || !cJSON_AddStringToObject(req, "apiVersion", "authentication.k8s.io/v1") ||
	    !cJSON_AddStringToObject(req, "kind", "TokenReview") ||
	    !(spec = cJSON_AddObjectToObject(req, "spec")) ||
	    !cJSON_AddStringToObject(spec, "token", token))
		goto out;
	if (a->audiences) {
		if (!(auds = cJSON_AddArrayToObject(spec, "audiences")))
			goto out;
		for (char **p = a->audiences; *p; p++)
			cJSON_AddItemToArray(auds, cJSON_CreateString(*p));
	}
	if (!(body = cJSON_PrintUnformatted(req)))
		goto out;
	r = kube_call_do(a->kc,
			 &(struct kube_call){.method = "POST",
					     .path = "/apis/authentication.k8s.io/v1/tokenreviews",
					     .body = body,
					     .timeout_ns = a->timeout_ns},
			 &reply, &st);
	if (r < 0) {
		snprintf(err, errlen, "TokenReview failed: %s", st.message[0] ? st.message : strerror(-r));
		goto out;
	}
	r = json_get_bool(reply, "status.authenticated", &authenticated);
	if (r == -ENOENT) {
		authenticated = false;
		r = 0;
	}
	if (r < 0) {
		snprintf(err, errlen, "the TokenReview's status.authenticated is not a bool");
		r = -EPROTO;
	} else if (!authenticated) {
		snprintf(err, errlen, "the token is not authenticated");
		r = 0;
	} else {
		r = user_from_status(json_find(reply, "status"), u, err, errlen);
		r = r < 0 ? r : 1;
	}
out:
	if (body)
		memset(body, 0, strlen(body)); /* it holds the token */
	cJSON_Delete(req);
	cJSON_Delete(reply);
	return r;
}

int kube_authn_token(struct kube_authn *a, const char *token, struct kube_user *ret, char *err,
		     size_t errlen)
{
	unsigned char key[KUBE_AUTH_KEY_LEN];
	struct kube_user u = {0};
	int r = token_key(a, token, key);

	if (r < 0 || (r = from_cache(a, key, false, ret)) != -EAGAIN)
		return r;
	r = token_review(a, token, &u, err, errlen);
	if (r >= 0) {
		struct kube_user *v = r == 1 ? user_dup(&u) : NULL;
		if (r == 1 && !v) {
			kube_user_release(&u);
			return -ENOMEM;
		}
		kube_auth_cache_put(a->cache, key, r == 1, v);
		if (r == 1)
			*ret = u;
		return r;
	}
	kube_user_release(&u);
	if (kube_auth_error_is_transient(r) && from_cache(a, key, true, ret) == 1)
		return 1;
	return r;
}

int kube_authz_new(struct kube_client *kc, const struct kube_authz_opts *o, struct kube_authz **ret)
{
	struct kube_authz *z = calloc(1, sizeof(*z));
	int r;

	if (!z)
		return -ENOMEM;
	z->kc = kc;
	z->timeout_ns = o->timeout_ns > 0 ? o->timeout_ns : DEFAULT_TIMEOUT_NS;
	r = kube_auth_cache_new(
	    &(struct kube_auth_cache_opts){
		.pos_ttl_ns = o->allow_ttl_ns > 0 ? o->allow_ttl_ns : 300 * NSEC_PER_SEC,
		.neg_ttl_ns = o->deny_ttl_ns > 0 ? o->deny_ttl_ns : 30 * NSEC_PER_SEC,
		.stale_ns = o->stale_ns,
		.max_entries = o->max_entries},
	    &z->cache);
	if (r < 0) {
		free(z);
		return r;
	}
	*ret = z;
	return 0;
}

void kube_authz_free(struct kube_authz *z)
{
	if (!z)
		return;
	kube_auth_cache_free(z->cache);
	free(z);
}

static int authz_key(const struct kube_user *u, const struct kube_authz_attrs *at,
		     unsigned char *key)
{
	const char *parts[12 + MAX_GROUPS] = {u->name,	 u->uid,      at->verb, at->resource ? "r" : "n",
					      at->ns,	 at->group,   at->version, at->res,
					      at->subresource, at->name, at->path,	 "groups"};
	size_t n = 12;

	for (char **g = u->groups; g && *g && n < ARRAY_SIZE(parts); g++)
		parts[n++] = *g;
	return kube_auth_key(key, parts, n);
}

int kube_authz_cached(struct kube_authz *z, const struct kube_user *u,
		      const struct kube_authz_attrs *at)
{
	unsigned char key[KUBE_AUTH_KEY_LEN];
	int r = authz_key(u, at, key);

	return r < 0 ? r : kube_auth_cache_get(z->cache, key, false, NULL);
}

static int add_str(cJSON *o, const char *k, const char *v)
{
	return !v || !*v || cJSON_AddStringToObject(o, k, v) ? 0 : -ENOMEM;
}

static cJSON *sar_body(const struct kube_user *u, const struct kube_authz_attrs *at)
{
	cJSON *req = cJSON_CreateObject(), *spec, *attrs, *groups;
	int r = 0;

	if (!req || !cJSON_AddStringToObject(req, "apiVersion", "authorization.k8s.io/v1") ||
	    !cJSON_AddStringToObject(req, "kind", "SubjectAccessReview") ||
	    !(spec = cJSON_AddObjectToObject(req, "spec")) ||
	    !cJSON_AddStringToObject(spec, "user", u->name) || add_str(spec, "uid", u->uid) < 0 ||
	    !(groups = cJSON_AddArrayToObject(spec, "groups")))
		goto fail;
	for (char **g = u->groups; g && *g; g++)
		cJSON_AddItemToArray(groups, cJSON_CreateString(*g));
	if (!(attrs = cJSON_AddObjectToObject(
		  spec, at->resource ? "resourceAttributes" : "nonResourceAttributes")))
		goto fail;
	r = add_str(attrs, "verb", at->verb);
	if (at->resource) {
		if (r >= 0)
			r = add_str(attrs, "namespace", at->ns);
		if (r >= 0)
			r = add_str(attrs, "group", at->group);
		if (r >= 0)
			r = add_str(attrs, "version", at->version);
		if (r >= 0)
			r = add_str(attrs, "resource", at->res);
		if (r >= 0)
			r = add_str(attrs, "subresource", at->subresource);
		if (r >= 0)
			r = add_str(attrs, "name", at->name);
	} else if (r >= 0) {
		r = add_str(attrs, "path", at->path);
	}
	if (r >= 0)
		return req;
fail:
	cJSON_Delete(req);
	return NULL;
}

static int sar(struct kube_authz *z, const struct kube_user *u, const struct kube_authz_attrs *at,
	       char *err, size_t errlen)
{
	cJSON *req = sar_body(u, at), *reply = NULL;
	_cleanup_free_ char *body = req ? cJSON_PrintUnformatted(req) : NULL;
	struct kube_status st = {0};
	bool allowed = false;
	int r;

	cJSON_Delete(req);
	if (!body)
		return -ENOMEM;
	r = kube_call_do(z->kc,
			 &(struct kube_call){.method = "POST",
					     .path = "/apis/authorization.k8s.io/v1/subjectaccessreviews",
					     .body = body,
					     .timeout_ns = z->timeout_ns},
			 &reply, &st);
	if (r < 0) {
		snprintf(err, errlen, "SubjectAccessReview failed: %s",
			 st.message[0] ? st.message : strerror(-r));
		return r;
	}
	r = json_get_bool(reply, "status.allowed", &allowed);
	if (r == -ENOENT) {
		allowed = false;
		r = 0;
	}
	if (r < 0) {
		snprintf(err, errlen, "the SubjectAccessReview's status.allowed is not a bool");
		r = -EPROTO;
	} else if (!allowed) {
		const char *why = json_str(reply, "status.reason");
		snprintf(err, errlen, "%s", why && *why ? why : "no RBAC policy matched");
	}
	cJSON_Delete(reply);
	return r < 0 ? r : allowed;
}

int kube_authz_check(struct kube_authz *z, const struct kube_user *u,
		     const struct kube_authz_attrs *at, char *err, size_t errlen)
{
	unsigned char key[KUBE_AUTH_KEY_LEN];
	int r = authz_key(u, at, key);

	if (r < 0 || (r = kube_auth_cache_get(z->cache, key, false, NULL)) != -EAGAIN) {
		if (r == 0)
			snprintf(err, errlen, "denied (cached)");
		return r;
	}
	r = sar(z, u, at, err, errlen);
	if (r >= 0) {
		kube_auth_cache_put(z->cache, key, r == 1, NULL);
		return r;
	}
	if (kube_auth_error_is_transient(r) && kube_auth_cache_get(z->cache, key, true, NULL) == 1)
		return 1;
	return r;
}
