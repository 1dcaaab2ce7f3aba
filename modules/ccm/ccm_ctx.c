/* What the ccm's controllers share (see ccm_ctx.h). */
#include "modules/ccm/ccm_ctx.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/base/json.h"
#include "common/kube/events.h"
#include "common/kube/informer.h"
#include "common/kube/rest.h"

bool ccm_may_act(struct ccm *m)
{
	return controllers_may_act(&m->run);
}

struct kube_store *ccm_node_store(struct ccm *m)
{
	return kube_informer_store(m->nodes);
}

void ccm_eventv(struct ccm *m, const cJSON *obj, const struct kube_resource *res,
		const char *type, const char *reason, const char *fmt, va_list ap)
{
	struct kube_event_ref ref;
	char msg[KUBE_EVENT_MAX_MESSAGE];

	if (!m->rec)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	kube_event_ref_from(obj, res, &ref);
	kube_eventf(m->rec, &ref, type, reason, "%s", msg);
}

void ccm_node_event(struct ccm *m, const cJSON *node, const char *type, const char *reason,
		    const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ccm_eventv(m, node, &kube_nodes, type, reason, fmt, ap);
	va_end(ap);
}

int ccm_node_instance_id(const cJSON *node, char *buf, size_t n)
{
	const char *pid = json_str(node, "spec.providerID");
	if (!pid || !*pid)
		return -ENOENT;
	return ccm_parse_provider_id(pid, buf, n);
}

/* What the controllers read of a Node: everything else is dropped before it is stored. */
cJSON *ccm_node_transform(void *ud, cJSON *obj)
{
	static const char *const keep[] = {
	    "metadata.uid",	    "metadata.labels",
	    "metadata.annotations", "metadata.creationTimestamp", /* the tagging grace period */
	    "spec.providerID",	    "spec.taints",
	    "spec.podCIDR",	    "spec.podCIDRs",
	    "spec.unschedulable",   "status.addresses",
	    "status.conditions",    NULL,
	};
	cJSON *p = kube_project(obj, keep);
	cJSON_Delete(obj);
	if (!p)
		return NULL;
	/* one annotation and two conditions are read */
	cJSON *md = cJSON_GetObjectItemCaseSensitive(p, "metadata");
	cJSON *ann = md ? cJSON_GetObjectItemCaseSensitive(md, "annotations") : NULL;
	if (ann) {
		cJSON *a = ann->child;
		while (a) {
			cJSON *next = a->next;
			if (!a->string || strcmp(a->string, CCM_ANNOTATION_PROVIDED_IP) != 0)
				cJSON_Delete(cJSON_DetachItemViaPointer(ann, a));
			a = next;
		}
	}
	cJSON *st = cJSON_GetObjectItemCaseSensitive(p, "status");
	cJSON *conds = st ? cJSON_GetObjectItemCaseSensitive(st, "conditions") : NULL;
	for (int i = cJSON_GetArraySize(conds) - 1; i >= 0; i--) {
		const char *t = json_str(cJSON_GetArrayItem(conds, i), "type");
		if (!t || (strcmp(t, "Ready") != 0 && strcmp(t, "NetworkUnavailable") != 0))
			cJSON_DeleteItemFromArray(conds, i);
	}
	(void)ud;
	return p;
}
