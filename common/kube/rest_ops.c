/* The REST verbs over kube_call_do, paths and query strings, and the usual resources. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/rest.h"

#define RES(n, g, v, p, k, nsd)                                                                    \
	const struct kube_resource n = {                                                           \
	    .group = g, .version = v, .plural = p, .kind = k, .namespaced = nsd}
RES(kube_namespaces, "", "v1", "namespaces", "Namespace", false);
RES(kube_nodes, "", "v1", "nodes", "Node", false);
RES(kube_pods, "", "v1", "pods", "Pod", true);
RES(kube_services, "", "v1", "services", "Service", true);
RES(kube_endpoints, "", "v1", "endpoints", "Endpoints", true);
RES(kube_secrets, "", "v1", "secrets", "Secret", true);
RES(kube_configmaps, "", "v1", "configmaps", "ConfigMap", true);
RES(kube_events, "", "v1", "events", "Event", true);
RES(kube_pvs, "", "v1", "persistentvolumes", "PersistentVolume", false);
RES(kube_pvcs, "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true);
RES(kube_serviceaccounts, "", "v1", "serviceaccounts", "ServiceAccount", true);
RES(kube_endpointslices, "discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true);
RES(kube_leases, "coordination.k8s.io", "v1", "leases", "Lease", true);
RES(kube_volumeattachments, "storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", false);
RES(kube_csinodes, "storage.k8s.io", "v1", "csinodes", "CSINode", false);
RES(kube_csidrivers, "storage.k8s.io", "v1", "csidrivers", "CSIDriver", false);
RES(kube_storageclasses, "storage.k8s.io", "v1", "storageclasses", "StorageClass", false);
RES(kube_daemonsets, "apps", "v1", "daemonsets", "DaemonSet", true);
RES(kube_deployments, "apps", "v1", "deployments", "Deployment", true);
RES(kube_pdbs, "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true);
RES(kube_tokenreviews, "authentication.k8s.io", "v1", "tokenreviews", "TokenReview", false);
RES(kube_subjectaccessreviews, "authorization.k8s.io", "v1", "subjectaccessreviews",
    "SubjectAccessReview", false);
RES(kube_crds, "apiextensions.k8s.io", "v1", "customresourcedefinitions",
    "CustomResourceDefinition", false);

/* "/" and the percent-encoded segment; "", "." and ".." are refused. */
static int put_segment(struct buf *b, const char *s)
{
	if (!s || !*s || !strcmp(s, ".") || !strcmp(s, ".."))
		return -EINVAL;
	int r = buf_putc(b, '/');
	return r < 0 ? r : buf_put_urlencoded(b, s, strlen(s), false);
}

int kube_path(const struct kube_ref *ref, struct buf *out)
{
	const struct kube_resource *res = ref->res;
	int r;

	if (!res || !res->version || !res->plural)
		return -EINVAL;
	if (res->group && *res->group) {
		if ((r = buf_puts(out, "/apis")) < 0 || (r = put_segment(out, res->group)) < 0)
			return r;
	} else if ((r = buf_puts(out, "/api")) < 0)
		return r;
	if ((r = put_segment(out, res->version)) < 0)
		return r;
	if (res->namespaced && ref->ns &&
	    ((r = buf_puts(out, "/namespaces")) < 0 || (r = put_segment(out, ref->ns)) < 0))
		return r;
	if ((r = put_segment(out, res->plural)) < 0)
		return r;
	if (ref->name && (r = put_segment(out, ref->name)) < 0)
		return r;
	if (ref->sub && (!ref->name || (r = put_segment(out, ref->sub)) < 0))
		return r < 0 ? r : -EINVAL;
	return 0;
}

static int query_param(struct buf *b, const char *name, const char *value)
{
	int r = buf_printf(b, "%c%s=", b->len && strchr(b->data, '?') ? '&' : '?', name);
	return r < 0 ? r : buf_put_urlencoded(b, value, strlen(value), false);
}

int kube_query(const struct kube_list_opts *lo, bool watch, struct buf *out)
{
	char n[32];
	int r = 0;

	if (!lo)
		return watch ? query_param(out, "watch", "true") : 0;
	if (lo->label_selector && *lo->label_selector)
		r = query_param(out, "labelSelector", lo->label_selector);
	if (r >= 0 && lo->field_selector && *lo->field_selector)
		r = query_param(out, "fieldSelector", lo->field_selector);
	if (r >= 0 && lo->limit > 0 && !watch) {
		snprintf(n, sizeof(n), "%lld", lo->limit);
		r = query_param(out, "limit", n);
	}
	if (r >= 0 && lo->continue_token && *lo->continue_token && !watch)
		r = query_param(out, "continue", lo->continue_token);
	if (r >= 0 && lo->resource_version)
		r = query_param(out, "resourceVersion", lo->resource_version);
	if (r >= 0 && lo->resource_version_match && !watch)
		r = query_param(out, "resourceVersionMatch", lo->resource_version_match);
	if (r >= 0 && lo->timeout_seconds > 0) {
		snprintf(n, sizeof(n), "%lld", lo->timeout_seconds);
		r = query_param(out, "timeoutSeconds", n);
	}
	if (r >= 0 && watch && lo->allow_watch_bookmarks)
		r = query_param(out, "allowWatchBookmarks", "true");
	if (r >= 0 && watch)
		r = query_param(out, "watch", "true");
	return r;
}

/* The path of ref, taking a missing namespace and name from obj's metadata. */
static int obj_path(const struct kube_ref *ref, const cJSON *obj, bool with_name, struct buf *out)
{
	struct kube_ref r = *ref;

	if (!r.ns && ref->res && ref->res->namespaced &&
	    !(r.ns = json_str(obj, "metadata.namespace")))
		return -EINVAL; /* a namespaced object needs a namespace */
	if (with_name && !r.name && !(r.name = json_str(obj, "metadata.name")))
		return -EINVAL;
	if (!with_name)
		r.name = NULL;
	return kube_path(&r, out);
}

static int call_json(struct kube_client *c, const char *method, const char *path, const char *ctype,
		     const cJSON *body, cJSON **ret, struct kube_status *st)
{
	_cleanup_free_ char *text = body ? json_print(body) : NULL;
	if (body && !text)
		return -ENOMEM;
	struct kube_call k = {.method = method, .path = path, .ctype = ctype, .body = text};
	return kube_call_do(c, &k, ret, st);
}

static int get_json(struct kube_client *c, const char *path, struct cancel *ct, cJSON **ret,
		    struct kube_status *st)
{
	struct kube_call k = {.method = "GET", .path = path, .cancel = ct};
	return kube_call_do(c, &k, ret, st);
}

int kube_get(struct kube_client *c, const struct kube_ref *ref, cJSON **ret, struct kube_status *st)
{
	_cleanup_buf_ struct buf p = BUF_INIT(0);
	int r = kube_path(ref, &p);
	return r < 0 ? r : call_json(c, "GET", p.data, NULL, NULL, ret, st);
}

int kube_get_path(struct kube_client *c, const char *path, cJSON **ret, struct kube_status *st)
{
	return call_json(c, "GET", path, NULL, NULL, ret, st);
}

int kube_list(struct kube_client *c, const struct kube_ref *ref, const struct kube_list_opts *lo,
	      cJSON **ret, struct kube_status *st)
{
	_cleanup_buf_ struct buf p = BUF_INIT(0);
	int r = kube_path(ref, &p);
	if (r < 0 || (r = kube_query(lo, false, &p)) < 0)
		return r;
	return get_json(c, p.data, lo ? lo->cancel : NULL, ret, st);
}

int kube_list_each(struct kube_client *c, const struct kube_ref *ref,
		   const struct kube_list_opts *lo, int (*on_item)(void *ud, cJSON *item), void *ud,
		   char **ret_rv, struct kube_status *st)
{
	struct kube_list_opts o = lo ? *lo : (struct kube_list_opts){0};
	_cleanup_free_ char *cont = NULL, *rv = NULL;
	int r;

	if (o.limit <= 0)
		o.limit = 500;
	for (;;) {
		cJSON *page = NULL, *item;
		o.continue_token = cont;
		if ((r = kube_list(c, ref, &o, &page, st)) < 0)
			return r;
		cJSON *items = cJSON_GetObjectItemCaseSensitive(page, "items");
		const char *prv = json_str(page, "metadata.resourceVersion");
		const char *pc = json_str(page, "metadata.continue");
		free(rv);
		free(cont);
		rv = prv ? strdup(prv) : NULL;
		cont = pc && *pc ? strdup(pc) : NULL;
		if ((prv && !rv) || (pc && *pc && !cont)) {
			cJSON_Delete(page);
			return -ENOMEM;
		}
		if (items && !cJSON_IsArray(items) && !cJSON_IsNull(items)) {
			cJSON_Delete(page);
			return -EBADMSG;
		}
		r = 0;
		while (r >= 0 && items && (item = items->child)) {
			cJSON_DetachItemViaPointer(items, item);
			r = on_item(ud, item);
		}
		cJSON_Delete(page);
		if (r < 0)
			return r;
		if (!cont)
			break;
		/* the following pages come from the first page's snapshot */
		o.resource_version = NULL;
		o.resource_version_match = NULL;
	}
	if (ret_rv)
		*ret_rv = TAKE_PTR(rv);
	return 0;
}

int kube_create(struct kube_client *c, const struct kube_ref *ref, const cJSON *obj, cJSON **ret,
		struct kube_status *st)
{
	_cleanup_buf_ struct buf p = BUF_INIT(0);
	int r = obj_path(ref, obj, false, &p);
	return r < 0 ? r : call_json(c, "POST", p.data, NULL, obj, ret, st);
}

int kube_update(struct kube_client *c, const struct kube_ref *ref, const cJSON *obj, cJSON **ret,
		struct kube_status *st)
{
	_cleanup_buf_ struct buf p = BUF_INIT(0);
	int r = obj_path(ref, obj, true, &p);
	return r < 0 ? r : call_json(c, "PUT", p.data, NULL, obj, ret, st);
}

int kube_patch(struct kube_client *c, const struct kube_ref *ref, enum kube_patch_type type,
	       const char *patch, cJSON **ret, struct kube_status *st)
{
	static const char *const ctypes[] = {
	    [KUBE_PATCH_MERGE] = "application/merge-patch+json",
	    [KUBE_PATCH_STRATEGIC] = "application/strategic-merge-patch+json",
	    [KUBE_PATCH_JSON] = "application/json-patch+json",
	};
	_cleanup_buf_ struct buf p = BUF_INIT(0);
	int r;

	if ((unsigned)type >= ARRAY_SIZE(ctypes) || !ref->name || !patch)
		return -EINVAL;
	if ((r = kube_path(ref, &p)) < 0)
		return r;
	struct kube_call k = {
	    .method = "PATCH", .path = p.data, .ctype = ctypes[type], .body = patch};
	return kube_call_do(c, &k, ret, st);
}

/* A DeleteOptions object, or NULL when o asks for nothing. */
static cJSON *delete_options(const struct kube_delete_opts *o, bool always)
{
	cJSON *d;

	if (!o && !always)
		return NULL;
	if (!(d = cJSON_CreateObject()))
		return NULL;
	cJSON_AddStringToObject(d, "kind", "DeleteOptions");
	cJSON_AddStringToObject(d, "apiVersion", "v1");
	if (!o)
		return d;
	if (o->propagation)
		cJSON_AddStringToObject(d, "propagationPolicy", o->propagation);
	if (o->set_grace_period)
		cJSON_AddNumberToObject(d, "gracePeriodSeconds", (double)o->grace_period_seconds);
	if (o->precondition_uid)
		json_set_str(d, "preconditions.uid", o->precondition_uid);
	if (o->precondition_rv)
		json_set_str(d, "preconditions.resourceVersion", o->precondition_rv);
	if (o->dry_run) {
		cJSON *a = cJSON_AddArrayToObject(d, "dryRun");
		cJSON_AddItemToArray(a, cJSON_CreateString("All"));
	}
	return d;
}

int kube_delete(struct kube_client *c, const struct kube_ref *ref, const struct kube_delete_opts *o,
		struct kube_status *st)
{
	_cleanup_buf_ struct buf p = BUF_INIT(0);
	cJSON *body = delete_options(o, false);
	int r;

	if (o && !body)
		return -ENOMEM;
	if (!ref->name)
		r = -EINVAL;
	else if ((r = kube_path(ref, &p)) >= 0)
		r = call_json(c, "DELETE", p.data, NULL, body, NULL, st);
	cJSON_Delete(body);
	return r;
}

int kube_evict(struct kube_client *c, const char *ns, const char *name,
	       const struct kube_delete_opts *o, struct kube_status *st)
{
	_cleanup_buf_ struct buf p = BUF_INIT(0);
	cJSON *ev = cJSON_CreateObject();
	int r = -ENOMEM;

	if (!ev)
		return -ENOMEM;
	cJSON_AddStringToObject(ev, "apiVersion", "policy/v1");
	cJSON_AddStringToObject(ev, "kind", "Eviction");
	if (json_set_str(ev, "metadata.name", name) < 0 ||
	    json_set_str(ev, "metadata.namespace", ns) < 0)
		goto out;
	if (o) {
		cJSON *d = delete_options(o, true);
		if (!d || json_put(ev, "deleteOptions", d) < 0)
			goto out;
	}
	if ((r = kube_path(KUBE_REF_SUB(&kube_pods, ns, name, "eviction"), &p)) >= 0)
		r = call_json(c, "POST", p.data, NULL, ev, NULL, st);
out:
	cJSON_Delete(ev);
	return r;
}

int kube_update_retry(struct kube_client *c, const struct kube_ref *ref,
		      int (*mutate)(void *ud, cJSON *obj), void *ud, cJSON **ret,
		      struct kube_status *st)
{
	struct kube_ref get = *ref;
	int r = -KUBE_ECONFLICT;

	get.sub = NULL;
	/* client-go's retry.DefaultRetry: 5 steps of 10 ms with 10% jitter */
	for (int step = 0; step < 5; step++) {
		cJSON *obj = NULL;
		if (step > 0 && cancel_wait(kube_client_cancel(c),
					    10 * NSEC_PER_MSEC + (int64_t)random_below(NSEC_PER_MSEC)))
			return -ECANCELED;
		if ((r = kube_get(c, &get, &obj, st)) < 0)
			return r;
		if ((r = mutate(ud, obj)) != 0) {
			cJSON_Delete(obj);
			return r;
		}
		r = kube_update(c, ref, obj, ret, st);
		cJSON_Delete(obj);
		if (r != -KUBE_ECONFLICT)
			return r;
		log_v(4, "update conflict, retrying", KV_S("name", ref->name ? ref->name : ""));
	}
	return r;
}
