/* The Kubernetes REST client: JSON over HTTP(S) through cJSON.
 *
 *   struct kube_client *kc;
 *   kube_client_new(cfg, &(struct kube_client_opts){ .component = "ccm", .qps = 20, .burst = 30 },
 *                   &kc);
 *   cJSON *node;
 *   struct kube_status st;
 *   r = kube_get(kc, KUBE_REF(&kube_nodes, NULL, "ip-10-0-0-1"), &node, &st);
 *   if (r == -ENOENT) ...
 *
 * A resource is named by a descriptor {group, version, plural, kind, namespaced}; the usual
 * ones are declared below, and a custom resource is just another descriptor. A struct kube_ref
 * adds the namespace, the name and a subresource ("status", "eviction", "scale").
 *
 * Results: 0 on success; otherwise a -errno mapped from the API's Status (see kube_errno):
 *   404 -ENOENT; 409 AlreadyExists -EEXIST, 409 Conflict -KUBE_ECONFLICT (stale
 *   resourceVersion: re-read and retry); 410 Gone/Expired -KUBE_EGONE (relist); 401/403
 *   -EACCES; 429 and 5xx -EAGAIN; 400/422 -EINVAL; 405/415/501 -EOPNOTSUPP; 413 -EMSGSIZE;
 *   other 4xx -EPROTO; transport errors as http_client_do says (-ETIMEDOUT, -ECONNREFUSED...).
 * The Status's code, reason and message are copied into *st when st is not NULL.
 *
 * Every request waits for the client's token bucket (--kube-api-qps/--kube-api-burst), sends
 * "aws-k8s-<component>/<version>" as its user agent, and re-reads a token file once a minute
 * and after a 401 (service-account token rotation). A GET answered 429 or 5xx with a Retry-After
 * is retried up to KUBE_MAX_RETRIES times (waiting at most 10 s each time).
 *
 * Cancellation (cancel.h): a call ends with -ECANCELED as soon as its token is cancelled, in
 * flight or in any of its waits (the token bucket, a Retry-After, a conflict retry). The token
 * is the call's own (kube_call.cancel, kube_list_opts.cancel, kube_watch_opts.cancel) or else
 * the client's (kube_client_opts.cancel, by default the process's: a stop ends every call). */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/http/client.h"
#include "common/kube/config.h"

#define KUBE_ECONFLICT ESTALE  /* 409 Conflict */
#define KUBE_EGONE EKEYEXPIRED /* 410 Gone / Expired: the resourceVersion is too old */
#define KUBE_MAX_RETRIES 3
#define KUBE_DEFAULT_MAX_RESPONSE ((size_t)256 << 20)

struct kube_resource {
	const char *group; /* "" (or NULL) for the core group */
	const char *version;
	const char *plural;
	const char *kind;
	bool namespaced;
};

extern const struct kube_resource kube_namespaces, kube_nodes, kube_pods, kube_services,
    kube_endpoints, kube_secrets, kube_configmaps, kube_events, kube_pvs, kube_pvcs,
    kube_serviceaccounts, kube_endpointslices, kube_leases, kube_volumeattachments, kube_csinodes,
    kube_csidrivers, kube_storageclasses, kube_daemonsets, kube_deployments, kube_pdbs,
    kube_tokenreviews, kube_subjectaccessreviews, kube_crds;

struct kube_ref {
	const struct kube_resource *res;
	const char *ns;	  /* NULL: all namespaces (lists, watches) or the object's own namespace */
	const char *name; /* NULL: the collection, or the object's own name */
	const char *sub;  /* subresource or NULL */
};
#define KUBE_REF(r, n, nm) (&(const struct kube_ref){.res = (r), .ns = (n), .name = (nm)})
#define KUBE_REF_SUB(r, n, nm, s)                                                                  \
	(&(const struct kube_ref){.res = (r), .ns = (n), .name = (nm), .sub = (s)})

/* What a failed call's Status said. */
struct kube_status {
	long http;	 /* HTTP status; 0 when no reply arrived */
	int code;	 /* Status.code (the HTTP status when absent) */
	char reason[48]; /* NotFound, AlreadyExists, Conflict, Expired, TooManyRequests... */
	char message[512];
	int64_t retry_after_ns; /* Retry-After header or details.retryAfterSeconds; 0 if none */
};

struct kube_client_opts {
	const char *component; /* user agent "aws-k8s-<component>/<version>"; NULL: "aws-k8s" */
	double qps;	       /* 0: 5 (client-go's default); negative: no client-side limit */
	int burst;	       /* 0: 10 */
	int64_t timeout_ns;    /* per request (not streams); 0: 60 s */
	size_t max_response;   /* 0: KUBE_DEFAULT_MAX_RESPONSE */
	struct cancel *cancel; /* of the calls that name none; NULL: cancel_root() */
};

struct kube_client;

int kube_client_new(const struct kube_config *cfg, const struct kube_client_opts *o,
		    struct kube_client **ret);
void kube_client_free(struct kube_client *c);
const char *kube_client_server(const struct kube_client *c);
/* The namespace of the configuration (context namespace, pod namespace or "default"). */
const char *kube_client_namespace(const struct kube_client *c);
/* The client's token (kube_client_opts.cancel, or cancel_root()). */
struct cancel *kube_client_cancel(const struct kube_client *c);

struct kube_list_opts {
	const char *label_selector; /* "app=web,tier in (a,b)" */
	const char *field_selector; /* "spec.nodeName=n1,status.phase!=Succeeded" */
	long long limit;	    /* page size; 0: no paging */
	const char *continue_token;
	const char *resource_version;
	const char *resource_version_match; /* "NotOlderThan", "Exact" */
	long long timeout_seconds;	    /* watch: server-side end of the stream */
	bool allow_watch_bookmarks;
	struct cancel *cancel; /* kube_list, kube_list_each: instead of the client's token */
};

enum kube_patch_type {
	KUBE_PATCH_MERGE,     /* application/merge-patch+json (RFC 7386) */
	KUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json */
	KUBE_PATCH_JSON,      /* application/json-patch+json (RFC 6902) */
};

struct kube_delete_opts {
	const char *propagation; /* "Foreground", "Background", "Orphan"; NULL: the default */
	bool set_grace_period;
	long long grace_period_seconds;
	const char *precondition_uid;
	const char *precondition_rv;
	bool dry_run;
};

int kube_get(struct kube_client *c, const struct kube_ref *ref, cJSON **ret,
	     struct kube_status *st);
/* One page: the List object (items, metadata.resourceVersion, metadata.continue). */
int kube_list(struct kube_client *c, const struct kube_ref *ref, const struct kube_list_opts *lo,
	      cJSON **ret, struct kube_status *st);
/* Every page (lo->limit per page; 500 when 0), handing each item to on_item, which takes
 * ownership of it; on_item returning < 0 stops the listing with that result. The list's
 * resourceVersion goes to *ret_rv (malloc'd) when not NULL. An expired continue token gives
 * -KUBE_EGONE: list again from the start. */
int kube_list_each(struct kube_client *c, const struct kube_ref *ref,
		   const struct kube_list_opts *lo, int (*on_item)(void *ud, cJSON *item), void *ud,
		   char **ret_rv, struct kube_status *st);
/* ref->ns and ref->name default to the object's metadata. */
int kube_create(struct kube_client *c, const struct kube_ref *ref, const cJSON *obj, cJSON **ret,
		struct kube_status *st);
/* PUT with the object's metadata.resourceVersion: -KUBE_ECONFLICT when it is stale. */
int kube_update(struct kube_client *c, const struct kube_ref *ref, const cJSON *obj, cJSON **ret,
		struct kube_status *st);
int kube_patch(struct kube_client *c, const struct kube_ref *ref, enum kube_patch_type type,
	       const char *patch, cJSON **ret, struct kube_status *st);
int kube_delete(struct kube_client *c, const struct kube_ref *ref, const struct kube_delete_opts *o,
		struct kube_status *st);
/* POST pods/<name>/eviction (policy/v1). A PodDisruptionBudget that forbids it gives -EAGAIN
 * with st->code 429. */
int kube_evict(struct kube_client *c, const char *ns, const char *name,
	       const struct kube_delete_opts *o, struct kube_status *st);
/* client-go's RetryOnConflict: GET, mutate, PUT; on -KUBE_ECONFLICT again, up to 5 times with a
 * short backoff (a wait on the client's token). mutate returns 0 to write the object, 1 when
 * nothing needs to change (no PUT; returns 1), or < 0 to stop with that error. The written
 * object goes to *ret. */
int kube_update_retry(struct kube_client *c, const struct kube_ref *ref,
		      int (*mutate)(void *ud, cJSON *obj), void *ud, cJSON **ret,
		      struct kube_status *st);
/* GET of any path ("/version", "/apis"). */
int kube_get_path(struct kube_client *c, const char *path, cJSON **ret, struct kube_status *st);

/* Lower level, for watches, reviews and tests. */
struct kube_call {
	const char *method;
	const char *path;  /* "/api/v1/nodes?limit=5" */
	const char *ctype; /* of the body; NULL: application/json */
	const char *body;
	size_t body_len; /* 0: strlen(body) */
	int64_t timeout_ns;
	struct cancel *cancel; /* instead of the client's token */
};
/* One request; on success the reply's JSON goes to *ret when ret is not NULL. */
int kube_call_do(struct kube_client *c, const struct kube_call *k, cJSON **ret,
		 struct kube_status *st);
int kube_path(const struct kube_ref *ref, struct buf *out);
int kube_query(const struct kube_list_opts *lo, bool watch, struct buf *out);
/* A stream (watch) with the client's rate limit, token and TLS; see http_client_stream. It ends
 * with -ECANCELED when ct is cancelled (NULL: the client's token). */
int kube_stream(struct kube_client *c, const char *path_and_query, int64_t timeout_ns,
		struct cancel *ct, const struct http_stream_opts *so, struct http_response *resp);

/* The -errno for an HTTP status and Status reason (reason may be NULL). */
int kube_errno(long http, const char *reason);
/* Fills st from a reply (a Status body, or plain text) and returns kube_errno's result (0 for
 * a 2xx). Also used for a watch ERROR event's object with http = 0. */
int kube_status_parse(long http, const char *body, size_t len, struct kube_status *st);
int kube_status_from_json(long http, const cJSON *status, struct kube_status *st);
