/* kube-debug's REST actions: get, list, create, update, conflict, patch, delete, evict,
 * token-review, access-review, raw. Each prints its result, or "error: ..." and returns 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/kube/config.h"
#include "common/kube/rest.h"
#include "common/kube/store.h"
#include "common/kube/yaml.h"
#include "modules/kube-debug/kube_debug_int.h"

static int read_object(const char *path, cJSON **ret)
{
	_cleanup_free_ char *data = NULL;
	char err[256];
	size_t len;
	int r;

	if (strcmp(path, "-") == 0) {
		_cleanup_buf_ struct buf b = BUF_INIT(16 << 20);
		char chunk[4096];
		size_t n;
		while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0)
			if ((r = buf_append(&b, chunk, n)) < 0)
				return r;
		len = b.len;
		data = buf_steal(&b);
		r = data ? 0 : -ENOMEM;
	} else
		r = kube_read_file(path, 16 << 20, &data, &len);
	if (r < 0) {
		fprintf(stderr, "kube-debug: cannot read '%s': %s\n", path, strerror(-r));
		return r;
	}
	if ((r = kube_yaml_parse(data, len, KUBE_YAML_TYPED, ret, err, sizeof(err))) < 0)
		fprintf(stderr, "kube-debug: '%s': %s\n", path, err);
	return r;
}

int dbg_get(struct kube_client *kc, const struct kube_resource *res, char **args)
{
	struct kube_ref ref;
	struct kube_status st;
	char nsbuf[128];
	cJSON *obj = NULL;
	int r;

	dbg_ref(kc, res, args[0], &ref, nsbuf, sizeof(nsbuf));
	if ((r = kube_get(kc, &ref, &obj, &st)) < 0)
		return dbg_fail(r, &st, "get");
	dbg_print(obj);
	cJSON_Delete(obj);
	return 0;
}

int dbg_list(struct kube_client *kc, const struct kube_resource *res)
{
	struct kube_ref ref = {.res = res, .ns = dbg.ns};
	struct kube_list_opts lo = {
	    .label_selector = dbg.label, .field_selector = dbg.field, .limit = dbg.limit};
	_cleanup_free_ char *cont = NULL;
	long total = 0, pages = 0;
	struct kube_status st;
	int r;

	do {
		cJSON *page = NULL, *item;
		lo.continue_token = cont;
		if ((r = kube_list(kc, &ref, &lo, &page, &st)) < 0)
			return dbg_fail(r, &st, "list");
		pages++;
		cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(page, "items"))
		{
			char key[KUBE_KEY_MAX];
			total++;
			if (!dbg.quiet && kube_obj_key(item, key, sizeof(key)) == 0)
				printf("%s %s\n", key, json_str(item, "metadata.resourceVersion"));
		}
		const char *c = json_str(page, "metadata.continue");
		free(cont);
		cont = c && *c ? strdup(c) : NULL;
		printf("page %ld items %d resourceVersion %s continue %s\n", pages,
		       cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(page, "items")),
		       json_str(page, "metadata.resourceVersion"), cont ? "yes" : "no");
		cJSON_Delete(page);
	} while (cont);
	printf("total %ld pages %ld\n", total, pages);
	return 0;
}

int dbg_write(struct kube_client *kc, const struct kube_resource *res, const char *file,
	      bool update)
{
	struct kube_ref ref = {.res = res, .ns = dbg.ns};
	struct kube_status st;
	cJSON *obj = NULL, *out = NULL;
	int r;

	if (read_object(file, &obj) < 0)
		return 1;
	if (!ref.ns && !json_str(obj, "metadata.namespace"))
		ref.ns = kube_client_namespace(kc);
	r = update ? kube_update(kc, &ref, obj, &out, &st) : kube_create(kc, &ref, obj, &out, &st);
	cJSON_Delete(obj);
	if (r < 0)
		return dbg_fail(r, &st, update ? "update" : "create");
	dbg_print(out);
	cJSON_Delete(out);
	return 0;
}

static int set_label(cJSON *obj, const char *key, const char *value)
{
	cJSON *labels = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "labels");
	if (!cJSON_IsObject(labels)) {
		if (json_set_str(obj, "metadata.labels.x", "") < 0)
			return -ENOMEM;
		labels = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "labels");
		cJSON_DeleteItemFromObjectCaseSensitive(labels, "x");
	}
	return json_put(labels, key, cJSON_CreateString(value));
}

static int mutate_retried(void *ud, cJSON *obj)
{
	int *calls = ud;
	(*calls)++;
	return set_label(obj, "kube-debug/retried", "true");
}

/* A stale update must fail with a conflict; RetryOnConflict must then succeed. */
int dbg_conflict(struct kube_client *kc, const struct kube_resource *res, const char *arg)
{
	struct kube_ref ref;
	struct kube_status st;
	char nsbuf[128];
	cJSON *stale = NULL, *fresh = NULL, *out = NULL;
	int r, calls = 0;

	dbg_ref(kc, res, arg, &ref, nsbuf, sizeof(nsbuf));
	if ((r = kube_get(kc, &ref, &stale, &st)) < 0 ||
	    (r = kube_get(kc, &ref, &fresh, &st)) < 0) {
		cJSON_Delete(stale);
		return dbg_fail(r, &st, "get");
	}
	set_label(fresh, "kube-debug/step", "fresh");
	r = kube_update(kc, &ref, fresh, NULL, &st);
	cJSON_Delete(fresh);
	if (r < 0) {
		cJSON_Delete(stale);
		return dbg_fail(r, &st, "first update");
	}
	set_label(stale, "kube-debug/step", "stale");
	r = kube_update(kc, &ref, stale, NULL, &st);
	cJSON_Delete(stale);
	if (r != -KUBE_ECONFLICT) {
		printf("error: the stale update gave %s, not a conflict\n",
		       r < 0 ? errno_name(r) : "success");
		return 1;
	}
	printf("conflict: code=%d reason=%s\n", st.code, st.reason);
	if ((r = kube_update_retry(kc, &ref, mutate_retried, &calls, &out, &st)) < 0)
		return dbg_fail(r, &st, "retry on conflict");
	printf("retried: ok calls=%d resourceVersion=%s\n", calls,
	       json_str(out, "metadata.resourceVersion"));
	cJSON_Delete(out);
	return 0;
}

int dbg_patch(struct kube_client *kc, const struct kube_resource *res, char **args)
{
	struct kube_ref ref;
	struct kube_status st;
	enum kube_patch_type t;
	char nsbuf[128];
	cJSON *out = NULL;
	int r;

	if (strcmp(args[1], "merge") == 0)
		t = KUBE_PATCH_MERGE;
	else if (strcmp(args[1], "strategic") == 0)
		t = KUBE_PATCH_STRATEGIC;
	else if (strcmp(args[1], "json") == 0)
		t = KUBE_PATCH_JSON;
	else {
		fprintf(stderr, "kube-debug: unknown patch type '%s'\n", args[1]);
		return 2;
	}
	dbg_ref(kc, res, args[0], &ref, nsbuf, sizeof(nsbuf));
	if ((r = kube_patch(kc, &ref, t, args[2], &out, &st)) < 0)
		return dbg_fail(r, &st, "patch");
	dbg_print(out);
	cJSON_Delete(out);
	return 0;
}

int dbg_delete(struct kube_client *kc, const struct kube_resource *res, const char *arg,
	       bool evict)
{
	struct kube_delete_opts o = {
	    .propagation = dbg.propagation,
	    .set_grace_period = dbg.grace >= 0,
	    .grace_period_seconds = dbg.grace,
	    .precondition_uid = dbg.pre_uid,
	    .precondition_rv = dbg.pre_rv,
	};
	bool any = o.propagation || o.set_grace_period || o.precondition_uid || o.precondition_rv;
	struct kube_ref ref;
	struct kube_status st;
	char nsbuf[128];
	int r;

	dbg_ref(kc, res, arg, &ref, nsbuf, sizeof(nsbuf));
	if (evict)
		r = kube_evict(kc, ref.ns, ref.name, any ? &o : NULL, &st);
	else
		r = kube_delete(kc, &ref, any ? &o : NULL, &st);
	if (r < 0)
		return dbg_fail(r, &st, evict ? "evict" : "delete");
	printf("%s %s/%s\n", evict ? "evicted" : "deleted", ref.ns ? ref.ns : "", ref.name);
	return 0;
}

int dbg_review(struct kube_client *kc, char **args, int n, bool token)
{
	cJSON *req = cJSON_CreateObject(), *out = NULL;
	struct kube_status st;
	int r;

	if (!req)
		return 1;
	if (token) {
		cJSON_AddStringToObject(req, "apiVersion", "authentication.k8s.io/v1");
		cJSON_AddStringToObject(req, "kind", "TokenReview");
		json_set_str(req, "spec.token", args[0]);
	} else {
		if (n < 3) {
			cJSON_Delete(req);
			fprintf(stderr, "kube-debug: access-review USER VERB RESOURCE\n");
			return 2;
		}
		cJSON_AddStringToObject(req, "apiVersion", "authorization.k8s.io/v1");
		cJSON_AddStringToObject(req, "kind", "SubjectAccessReview");
		json_set_str(req, "spec.user", args[0]);
		json_set_str(req, "spec.resourceAttributes.verb", args[1]);
		json_set_str(req, "spec.resourceAttributes.resource", args[2]);
		if (dbg.ns)
			json_set_str(req, "spec.resourceAttributes.namespace", dbg.ns);
		if (dbg.group)
			json_set_str(req, "spec.resourceAttributes.group", dbg.group);
	}
	r = kube_create(
	    kc, KUBE_REF(token ? &kube_tokenreviews : &kube_subjectaccessreviews, NULL, NULL), req,
	    &out, &st);
	cJSON_Delete(req);
	if (r < 0)
		return dbg_fail(r, &st, token ? "token review" : "access review");
	dbg_print(cJSON_GetObjectItemCaseSensitive(out, "status"));
	cJSON_Delete(out);
	return 0;
}

int dbg_raw(struct kube_client *kc, const char *path)
{
	struct kube_status st;
	cJSON *out = NULL;
	int r = kube_get_path(kc, path, &out, &st);
	if (r < 0)
		return dbg_fail(r, &st, "get");
	dbg_print(out);
	cJSON_Delete(out);
	return 0;
}
