/* Cordon, taints and labels of a Node (drain.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/kube/drain.h"

int kube_node_cordon(struct kube_client *c, const char *node, bool unschedulable)
{
	struct kube_status st = {0};
	cJSON *obj = NULL;
	bool cur = false;
	int r;

	if (!node || !*node)
		return -EINVAL;
	if ((r = kube_get(c, KUBE_REF(&kube_nodes, NULL, node), &obj, &st)) < 0)
		return r;
	(void)json_get_bool(obj, "spec.unschedulable", &cur);
	cJSON_Delete(obj);
	if (cur == unschedulable)
		return 0;
	/* as kubectl: false is written as null (the field is omitempty) */
	r = kube_patch(c, KUBE_REF(&kube_nodes, NULL, node), KUBE_PATCH_STRATEGIC,
		       unschedulable ? "{\"spec\":{\"unschedulable\":true}}"
				     : "{\"spec\":{\"unschedulable\":null}}",
		       NULL, &st);
	if (r < 0)
		log_v(2, "failed to patch spec.unschedulable", KV_S("node", node),
		      KV_S("error", st.message), KV_E(r));
	return r;
}

struct taint_edit {
	const char *key, *value, *effect;
	bool add;
};

static bool str_eq(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/* kube_update_retry's mutate: 0 to write, 1 when the node is already as asked. */
static int taint_edit_apply(void *ud, cJSON *obj)
{
	const struct taint_edit *e = ud;
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	cJSON *taints = cJSON_GetObjectItemCaseSensitive(spec, "taints");
	bool changed = false, present = false;
	int n = cJSON_IsArray(taints) ? cJSON_GetArraySize(taints) : 0;

	for (int i = n - 1; i >= 0; i--) {
		const cJSON *t = cJSON_GetArrayItem(taints, i);
		if (!str_eq(json_str(t, "key"), e->key))
			continue;
		if (e->add) {
			if (!str_eq(json_str(t, "effect"), e->effect))
				continue;
			if (str_eq(json_str(t, "value"), e->value) && !present) {
				present = true;
				continue;
			}
		} else if (e->effect && !str_eq(json_str(t, "effect"), e->effect)) {
			continue;
		}
		cJSON_DeleteItemFromArray(taints, i); /* removed, or replaced below */
		changed = true;
	}
	if (e->add && !present) {
		cJSON *t = cJSON_CreateObject();
		if (!spec && !(spec = cJSON_AddObjectToObject(obj, "spec")))
			goto nomem;
		if (!cJSON_IsArray(taints)) {
			cJSON_DeleteItemFromObjectCaseSensitive(spec, "taints");
			if (!(taints = cJSON_AddArrayToObject(spec, "taints")))
				goto nomem;
		}
		if (!t || !cJSON_AddStringToObject(t, "key", e->key) ||
		    (e->value && *e->value && !cJSON_AddStringToObject(t, "value", e->value)) ||
		    !cJSON_AddStringToObject(t, "effect", e->effect)) {
			cJSON_Delete(t);
			return -ENOMEM;
		}
		cJSON_AddItemToArray(taints, t);
		return 0;
	nomem:
		cJSON_Delete(t);
		return -ENOMEM;
	}
	return changed ? 0 : 1;
}

static bool taint_effect_valid(const char *e)
{
	return e && (strcmp(e, "NoSchedule") == 0 || strcmp(e, "PreferNoSchedule") == 0 ||
		     strcmp(e, "NoExecute") == 0);
}

int kube_node_taint(struct kube_client *c, const char *node, const char *key, const char *value,
		    const char *effect, bool add)
{
	struct taint_edit e = {.key = key, .value = value, .effect = effect, .add = add};
	struct kube_status st = {0};
	int r;

	if (!node || !*node || !key || !*key || (add && !taint_effect_valid(effect)) ||
	    (!add && effect && !taint_effect_valid(effect)))
		return -EINVAL;
	r = kube_update_retry(c, KUBE_REF(&kube_nodes, NULL, node), taint_edit_apply, &e, NULL,
			      &st);
	if (r < 0)
		log_v(2, "failed to update the node's taints", KV_S("node", node), KV_S("key", key),
		      KV_S("error", st.message), KV_E(r));
	return r < 0 ? r : 0;
}

int kube_node_label(struct kube_client *c, const char *node, const char *key, const char *value)
{
	_cleanup_free_ char *text = NULL;
	struct kube_status st = {0};
	cJSON *patch = cJSON_CreateObject(), *labels;
	int r = -ENOMEM;

	if (!node || !*node || !key || !*key) {
		cJSON_Delete(patch);
		return -EINVAL;
	}
	if (!patch || !(labels = cJSON_AddObjectToObject(cJSON_AddObjectToObject(patch, "metadata"),
							 "labels")))
		goto out;
	if (!(value ? cJSON_AddStringToObject(labels, key, value) : cJSON_AddNullToObject(labels, key)))
		goto out;
	if (!(text = json_print(patch)))
		goto out;
	r = kube_patch(c, KUBE_REF(&kube_nodes, NULL, node), KUBE_PATCH_MERGE, text, NULL, &st);
	if (r < 0)
		log_v(2, "failed to patch the node's labels", KV_S("node", node), KV_S("key", key),
		      KV_S("error", st.message), KV_E(r));
out:
	cJSON_Delete(patch);
	return r;
}
