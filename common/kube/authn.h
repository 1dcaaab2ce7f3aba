/* Delegated authentication and authorization, as a Kubernetes component's
 * --authentication-kubeconfig / --authorization-kubeconfig do it: a bearer token is checked with
 * a TokenReview (with audiences), a request is authorized with a SubjectAccessReview, and both
 * answers are cached with upstream's lifetimes (authentication: 2 min for success and failure;
 * authorization: 5 min allowed, 30 s denied). kube-rbac-proxy uses it for every request, and a
 * metrics endpoint of the ccm or the CSI driver could too.
 *
 *   struct kube_authn *an; struct kube_authz *az;
 *   kube_authn_new(kc, &(struct kube_authn_opts){.audiences = auds}, &an);
 *   kube_authz_new(kc, &(struct kube_authz_opts){0}, &az);
 *   struct kube_user u = {0};
 *   r = kube_authn_token(an, token, &u, err, sizeof(err));   // 1 yes, 0 no, < 0 error
 *   struct kube_authz_attrs at = {.verb = "get", .path = "/metrics"};
 *   r = kube_authz_check(az, &u, &at, err, sizeof(err));     // 1 allowed, 0 denied, < 0 error
 *   kube_user_release(&u);
 *
 * kube_authn_cached and kube_authz_cached answer from the caches only (-EAGAIN when the answer
 * is not there), so that an event loop can decide a request without blocking and hand a miss to
 * a thread that calls the blocking functions.
 *
 * Stale cache (Deckhouse's --stale-cache-interval): when the API server cannot answer (a
 * transport error, 5xx, 429), a positive answer (authenticated, allowed) obtained less than
 * stale_ns ago is reused; anything else fails closed (the error is returned). A negative answer
 * is never stretched. Caches are keyed by a SHA-256 of what was asked: no token is stored or
 * logged. Each cache holds at most max_entries; the oldest entry goes first. Thread-safe. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kube_client;

struct kube_user {
	char *name;
	char *uid;
	char **groups; /* NULL-terminated, maybe NULL */
};
void kube_user_release(struct kube_user *u);
int kube_user_copy(const struct kube_user *src, struct kube_user *dst);

/* A cache of answers keyed by SHA-256 digests (authn_cache.c). */
struct kube_auth_cache;

struct kube_authn_opts {
	const char *const *audiences; /* TokenReview spec.audiences; NULL: none */
	int64_t ttl_ns;		      /* 0: 2 min */
	int64_t stale_ns;	      /* 0: no stale cache */
	size_t max_entries;	      /* 0: 4096 */
	int64_t timeout_ns;	      /* per TokenReview; 0: the client's */
};
struct kube_authn;
int kube_authn_new(struct kube_client *kc, const struct kube_authn_opts *o, struct kube_authn **ret);
void kube_authn_free(struct kube_authn *a);
/* From the cache only: 1 (user in *ret), 0 (not authenticated), -EAGAIN (not cached). */
int kube_authn_cached(struct kube_authn *a, const char *token, struct kube_user *ret);
/* The cache, then a TokenReview: 1 with the user in *ret (system:authenticated added when
 * missing), 0 not authenticated, or -errno with why in err (stale answers applied). */
int kube_authn_token(struct kube_authn *a, const char *token, struct kube_user *ret, char *err,
		     size_t errlen);

/* What a SubjectAccessReview asks. resource: resourceAttributes, else nonResourceAttributes
 * {path, verb}. */
struct kube_authz_attrs {
	const char *verb;
	bool resource;
	const char *ns, *group, *version, *res, *subresource, *name;
	const char *path;
};
struct kube_authz_opts {
	int64_t allow_ttl_ns; /* 0: 5 min */
	int64_t deny_ttl_ns;  /* 0: 30 s */
	int64_t stale_ns;     /* 0: no stale cache */
	size_t max_entries;   /* 0: 4096 */
	int64_t timeout_ns;
};
struct kube_authz;
int kube_authz_new(struct kube_client *kc, const struct kube_authz_opts *o, struct kube_authz **ret);
void kube_authz_free(struct kube_authz *z);
/* From the cache only: 1 allowed, 0 denied, -EAGAIN not cached. */
int kube_authz_cached(struct kube_authz *z, const struct kube_user *u,
		      const struct kube_authz_attrs *at);
/* The cache, then a SubjectAccessReview: 1 allowed, 0 denied (the reason in err), -errno. */
int kube_authz_check(struct kube_authz *z, const struct kube_user *u,
		     const struct kube_authz_attrs *at, char *err, size_t errlen);

/* authn_cache.c: the cache both use. */
#define KUBE_AUTH_KEY_LEN 32
struct kube_auth_cache_opts {
	int64_t pos_ttl_ns, neg_ttl_ns, stale_ns;
	size_t max_entries;
	void (*free_value)(void *value); /* of the values stored; NULL: none */
	void *(*copy_value)(const void *value); /* for lookups; NULL: values are not copied */
};
int kube_auth_cache_new(const struct kube_auth_cache_opts *o, struct kube_auth_cache **ret);
void kube_auth_cache_free(struct kube_auth_cache *c);
/* 1 positive, 0 negative, -EAGAIN absent or expired. stale: also positive answers within the
 * stale interval. A copy of the value goes to *ret_value when asked (copy_value). */
int kube_auth_cache_get(struct kube_auth_cache *c, const unsigned char key[KUBE_AUTH_KEY_LEN],
			bool stale, void **ret_value);
/* Stores an answer (taking value, freed if it cannot be stored). */
int kube_auth_cache_put(struct kube_auth_cache *c, const unsigned char key[KUBE_AUTH_KEY_LEN],
			bool positive, void *value);
size_t kube_auth_cache_size(struct kube_auth_cache *c);
/* The digest of n strings (each NUL-terminated in the input, NULL as an empty marker). */
int kube_auth_key(unsigned char key[KUBE_AUTH_KEY_LEN], const char *const *parts, size_t n);
/* True for an error after which a stale answer may be used: no reply, 429 or 5xx. */
bool kube_auth_error_is_transient(int r);
