/* What both CAPA controllers use: AWS calls in an object's region, CAPA's tags, the owner
 * Cluster and the pause, CAPI conditions and finalizers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/capa/capa.h"

const struct kube_resource capa_awsclusters = {CAPA_INFRA_GROUP, "v1beta2", "awsclusters",
					       "AWSCluster", true};
const struct kube_resource capa_awsmachines = {CAPA_INFRA_GROUP, "v1beta2", "awsmachines",
					       "AWSMachine", true};
const struct kube_resource capa_clusters = {"cluster.x-k8s.io", "v1beta1", "clusters", "Cluster",
					    true};
const struct kube_resource capa_machines = {"cluster.x-k8s.io", "v1beta1", "machines", "Machine",
					    true};

/* ---- the table of controllers ---- */

int capa_controller_add(struct capa_ctx *x, const struct controller *c, struct controller **ret)
{
	if (x->n_ctls >= CAPA_MAX_CONTROLLERS)
		return -ENOSPC;
	x->ctls[x->n_ctls] = *c;
	if (ret)
		*ret = &x->ctls[x->n_ctls];
	x->n_ctls++;
	return 0;
}

int capa_cluster_watch(struct capa_ctx *x, capa_cluster_watch_fn fn, void *ud)
{
	if (x->n_cluster_watches >= CAPA_MAX_CLUSTER_WATCHES)
		return -ENOSPC;
	x->cluster_watches[x->n_cluster_watches].fn = fn;
	x->cluster_watches[x->n_cluster_watches].ud = ud;
	x->n_cluster_watches++;
	return 0;
}

bool capa_feature(const struct capa_ctx *x, const char *name, bool def)
{
	size_t len = strlen(name);

	for (char **p = x->feature_gates; p && *p; p++)
		if (strncmp(*p, name, len) == 0 && (*p)[len] == '=')
			return strcmp(*p + len + 1, "true") == 0;
	return def;
}

/* ---- AWS calls ---- */

static enum capa_svc limiter_svc(enum aws_service svc)
{
	switch (svc) {
	case AWS_SVC_ELB:
		return CAPA_SVC_ELB;
	case AWS_SVC_ELBV2:
		return CAPA_SVC_ELBV2;
	case AWS_SVC_SECRETSMANAGER:
		return CAPA_SVC_SECRETS;
	default:
		return CAPA_SVC_EC2;
	}
}

int capa_aws_do(struct capa_ctx *x, const struct aws_request *rq, struct aws_reply *ret,
		struct aws_error *err)
{
	enum capa_svc ls = limiter_svc(rq->service);
	int r = capa_limiter_wait(&x->lim, ls, rq->action, x->cancel);
	if (r < 0)
		return r;
	r = aws_do(x->aws, rq, ret, err);
	if (r < 0 && err && aws_error_code_is_throttle(err->code)) {
		capa_limiter_throttled(&x->lim, ls, rq->action, now_mono_ns());
		struct capa_bucket *b = capa_limiter_bucket(&x->lim, ls, rq->action);
		log_v(2, "AWS throttled the call: its token bucket is emptied",
		      KV_S("bucket", b ? b->name : ""), KV_S("action", rq->action),
		      KV_S("code", err->code));
	}
	return r;
}

int capa_call(struct capa_ctx *x, enum aws_service svc, const char *region, const char *action,
	      const struct aws_query *q, struct aws_reply *ret, struct aws_error *err)
{
	struct aws_request rq = {
	    .service = svc,
	    .action = action,
	    .query = q,
	    .region = region && *region ? region : NULL,
	    .cancel = x->cancel,
	};
	return capa_aws_do(x, &rq, ret, err);
}

int capa_ec2(struct capa_ctx *x, const char *region, const char *action,
	     const struct aws_query *q, struct aws_reply *ret, struct aws_error *err)
{
	return capa_call(x, AWS_SVC_EC2, region, action, q, ret, err);
}

/* ---- tags ---- */

int capa_tags_set(struct capa_tags *t, const char *key, const char *value)
{
	size_t i = 0;
	char *v;

	while (i < t->n && strcmp(t->key[i], key) < 0)
		i++;
	if (i < t->n && strcmp(t->key[i], key) == 0) {
		if (!(v = strdup(value)))
			return -ENOMEM;
		free(t->value[i]);
		t->value[i] = v;
		return 0;
	}
	if (t->n >= CAPA_MAX_TAGS)
		return -E2BIG;
	char *k = strdup(key);
	v = strdup(value);
	if (!k || !v) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	memmove(&t->key[i + 1], &t->key[i], (t->n - i) * sizeof(char *));
	memmove(&t->value[i + 1], &t->value[i], (t->n - i) * sizeof(char *));
	t->key[i] = k;
	t->value[i] = v;
	t->n++;
	return 0;
}

void capa_tags_release(struct capa_tags *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->key[i]);
		free(t->value[i]);
	}
	t->n = 0;
}

int capa_tags_build(struct capa_tags *t, const cJSON *additional, const char *cluster,
		    const char *role, const char *name)
{
	char key[320];
	const cJSON *it;
	int r;

	cJSON_ArrayForEach(it, additional)
	{
		if (cJSON_IsString(it) && (r = capa_tags_set(t, it->string, it->valuestring)) < 0)
			return r;
	}
	if ((r = str_printf(key, sizeof(key), CAPA_TAG_CLUSTER_PREFIX "%s", cluster)) < 0 ||
	    (r = capa_tags_set(t, key, "owned")) < 0)
		return r;
	if (role && (r = capa_tags_set(t, CAPA_TAG_ROLE, role)) < 0)
		return r;
	if (name && (r = capa_tags_set(t, "Name", name)) < 0)
		return r;
	return 0;
}

int capa_query_tagspec(struct aws_query *q, int idx, const char *type, const struct capa_tags *t)
{
	char prefix[64];
	int r;

	if ((r = aws_query_addf(q, type, "TagSpecification.%d.ResourceType", idx)) < 0)
		return r;
	snprintf(prefix, sizeof(prefix), "TagSpecification.%d.Tag", idx);
	return aws_query_add_tags(q, prefix, (const char *const *)t->key,
				  (const char *const *)t->value, t->n);
}

/* ---- the owner Cluster, pause ---- */

int capa_owner_cluster(struct capa_ctx *x, const cJSON *obj, cJSON **ret)
{
	const cJSON *refs = json_find(obj, "metadata.ownerReferences"), *ref;
	const char *ns = json_str(obj, "metadata.namespace");
	struct kube_status st;

	cJSON_ArrayForEach(ref, refs)
	{
		const char *kind = json_str(ref, "kind"), *api = json_str(ref, "apiVersion");
		const char *name = json_str(ref, "name");
		if (!kind || !api || !name || strcmp(kind, "Cluster") != 0 ||
		    !str_has_prefix(api, "cluster.x-k8s.io/"))
			continue;
		return kube_get(x->kc, KUBE_REF(&capa_clusters, ns, name), ret, &st);
	}
	return -ENOENT;
}

static bool annotated_paused(const cJSON *obj)
{
	const cJSON *ann = json_find(obj, "metadata.annotations");
	return ann && cJSON_GetObjectItemCaseSensitive(ann, CAPA_PAUSED_ANNOTATION);
}

bool capa_is_paused(const cJSON *cluster, const cJSON *obj)
{
	bool paused = false;

	if (cluster && json_get_bool(cluster, "spec.paused", &paused) == 0 && paused)
		return true;
	return annotated_paused(cluster) || annotated_paused(obj);
}

/* ---- conditions ---- */

static cJSON *condition_find(const cJSON *conds, const char *type)
{
	cJSON *c;
	cJSON_ArrayForEach(c, conds)
	{
		const char *t = json_str(c, "type");
		if (t && strcmp(t, type) == 0)
			return c;
	}
	return NULL;
}

const char *capa_condition_status(const cJSON *obj, const char *type)
{
	cJSON *c = condition_find(json_find(obj, "status.conditions"), type);
	return c ? json_str(c, "status") : NULL;
}

static bool same_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

static int put_str(cJSON *o, const char *key, const char *v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, key);
	if (!v || !*v)
		return 0;
	return cJSON_AddStringToObject(o, key, v) ? 0 : -ENOMEM;
}

int capa_condition_set(cJSON *status, const char *type, const char *st, const char *severity,
		       const char *reason, const char *message)
{
	cJSON *conds = cJSON_GetObjectItemCaseSensitive(status, "conditions"), *c;
	char now[40];
	int r;

	if (!conds) {
		if (!(conds = cJSON_AddArrayToObject(status, "conditions")))
			return -ENOMEM;
	}
	c = condition_find(conds, type);
	if (c && same_str(json_str(c, "status"), st) && same_str(json_str(c, "severity"), severity) &&
	    same_str(json_str(c, "reason"), reason) && same_str(json_str(c, "message"), message))
		return 0;
	bool transition = !c || !same_str(json_str(c, "status"), st);
	if (!c) {
		if (!(c = cJSON_CreateObject()))
			return -ENOMEM;
		cJSON_AddItemToArray(conds, c);
		if (!cJSON_AddStringToObject(c, "type", type))
			return -ENOMEM;
	}
	if ((r = put_str(c, "status", st)) < 0 || (r = put_str(c, "severity", severity)) < 0 ||
	    (r = put_str(c, "reason", reason)) < 0 || (r = put_str(c, "message", message)) < 0)
		return r;
	if (transition) {
		rfc3339_format(now_real_ns(), 0, now, sizeof(now));
		if ((r = put_str(c, "lastTransitionTime", now)) < 0)
			return r;
	}
	return 1;
}

/* ---- finalizers ---- */

bool capa_has_finalizer(const cJSON *obj, const char *name)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, json_find(obj, "metadata.finalizers"))
	{
		if (cJSON_IsString(it) && strcmp(it->valuestring, name) == 0)
			return true;
	}
	return false;
}

/* A JSON patch: the resourceVersion must not have moved, then the whole list. */
static int finalizers_write(struct capa_ctx *x, const struct kube_resource *res,
			    const cJSON *obj, cJSON *list)
{
	cJSON *patch = cJSON_CreateArray(), *t = cJSON_CreateObject(), *a = cJSON_CreateObject();
	const char *rv = json_str(obj, "metadata.resourceVersion");
	struct kube_status st;
	char *text = NULL;
	int r = -ENOMEM;

	if (!patch || !t || !a || !rv) {
		cJSON_Delete(list);
		r = rv ? -ENOMEM : -EINVAL;
		goto out;
	}
	cJSON_AddItemToArray(patch, t);
	cJSON_AddItemToArray(patch, a);
	t = a = NULL;
	cJSON *test = cJSON_GetArrayItem(patch, 0), *add = cJSON_GetArrayItem(patch, 1);
	cJSON_AddStringToObject(test, "op", "test");
	cJSON_AddStringToObject(test, "path", "/metadata/resourceVersion");
	cJSON_AddStringToObject(test, "value", rv);
	cJSON_AddStringToObject(add, "op", "add");
	cJSON_AddStringToObject(add, "path", "/metadata/finalizers");
	cJSON_AddItemToObject(add, "value", list);
	if (!(text = cJSON_PrintUnformatted(patch)))
		goto out;
	r = kube_patch(x->kc,
		       KUBE_REF(res, json_str(obj, "metadata.namespace"),
				json_str(obj, "metadata.name")),
		       KUBE_PATCH_JSON, text, NULL, &st);
	/* a failed test is 422 (Invalid) on the API server: the object moved, retry */
	if (r < 0 && st.http == 422)
		r = -KUBE_ECONFLICT;
out:
	free(text);
	cJSON_Delete(t);
	cJSON_Delete(a);
	cJSON_Delete(patch);
	return r;
}

int capa_finalizer_add(struct capa_ctx *x, const struct kube_resource *res, const cJSON *obj,
		       const char *name)
{
	const cJSON *it;
	cJSON *list;

	if (capa_has_finalizer(obj, name))
		return 0;
	if (!(list = cJSON_CreateArray()))
		return -ENOMEM;
	cJSON_ArrayForEach(it, json_find(obj, "metadata.finalizers"))
	{
		if (cJSON_IsString(it))
			cJSON_AddItemToArray(list, cJSON_CreateString(it->valuestring));
	}
	cJSON_AddItemToArray(list, cJSON_CreateString(name));
	return finalizers_write(x, res, obj, list);
}

int capa_finalizer_remove(struct capa_ctx *x, const struct kube_resource *res,
			  const cJSON *obj, const char *name)
{
	const cJSON *it;
	cJSON *list;

	if (!capa_has_finalizer(obj, name))
		return 0;
	if (!(list = cJSON_CreateArray()))
		return -ENOMEM;
	cJSON_ArrayForEach(it, json_find(obj, "metadata.finalizers"))
	{
		if (cJSON_IsString(it) && strcmp(it->valuestring, name) != 0)
			cJSON_AddItemToArray(list, cJSON_CreateString(it->valuestring));
	}
	return finalizers_write(x, res, obj, list);
}
