/* kube_drain_classify: kubectl drain's pod filters (drain.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/base/json.h"
#include "common/kube/drain.h"

static void say(char *why, size_t n, const char *s)
{
	if (why && n)
		snprintf(why, n, "%s", s);
}

/* The controller owner reference's kind, or NULL when none. */
static const char *controller_kind(const cJSON *pod)
{
	const cJSON *refs = json_find(pod, "metadata.ownerReferences"), *ref;

	cJSON_ArrayForEach(ref, refs)
	{
		bool ctl = false;
		if (json_get_bool(ref, "controller", &ctl) == 0 && ctl)
			return json_str(ref, "kind") ? json_str(ref, "kind") : "";
	}
	return NULL;
}

static bool has_emptydir(const cJSON *pod)
{
	const cJSON *v;

	cJSON_ArrayForEach(v, json_find(pod, "spec.volumes"))
	{
		if (cJSON_GetObjectItemCaseSensitive(v, "emptyDir"))
			return true;
	}
	return false;
}

enum kube_drain_verdict kube_drain_classify(const cJSON *pod, const struct kube_drain_opts *o,
					    char *why, size_t why_len)
{
	const char *phase = json_str(pod, "status.phase"), *kind = controller_kind(pod);
	const cJSON *ann = json_find(pod, "metadata.annotations");
	bool finished = phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"));

	say(why, why_len, "");
	if (ann && json_str_key(ann, "kubernetes.io/config.mirror")) {
		say(why, why_len, "mirror pod");
		return KUBE_DRAIN_SKIP_MIRROR;
	}
	if (o->skip && o->skip(o->ud, pod)) {
		say(why, why_len, "skipped by the caller");
		return KUBE_DRAIN_SKIP_CALLER;
	}
	if (finished && json_find(pod, "metadata.deletionTimestamp")) {
		say(why, why_len, "finished and being deleted");
		return KUBE_DRAIN_SKIP_DONE;
	}
	if (kind && !strcmp(kind, "DaemonSet")) {
		say(why, why_len, "DaemonSet-managed pod");
		return o->ignore_daemonsets ? KUBE_DRAIN_SKIP_DAEMONSET
					    : KUBE_DRAIN_REFUSE_DAEMONSET;
	}
	/* a finished pod holds no data worth keeping and needs no controller (kubectl) */
	if (finished)
		return KUBE_DRAIN_EVICT;
	if (!kind && !o->force) {
		say(why, why_len, "not managed by a controller");
		return KUBE_DRAIN_REFUSE_UNMANAGED;
	}
	if (has_emptydir(pod) && !o->delete_emptydir_data) {
		say(why, why_len, "has local storage (emptyDir)");
		return KUBE_DRAIN_REFUSE_EMPTYDIR;
	}
	return KUBE_DRAIN_EVICT;
}
