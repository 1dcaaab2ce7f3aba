/* kube-debug's node actions: drain, cordon, uncordon, taint, label (common/kube/drain.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/drain.h"
#include "modules/kube-debug/kube_debug_int.h"

static void print_evicted(void *ud, const cJSON *pod)
{
	(void)ud;
	if (!dbg.quiet)
		printf("evicted %s/%s\n", json_str(pod, "metadata.namespace"),
		       json_str(pod, "metadata.name"));
}

int dbg_drain(struct kube_client *kc, const char *node)
{
	struct kube_drain_opts o = KUBE_DRAIN_OPTS_INIT;
	struct kube_drain_result res;
	int r;

	o.pod_grace_s = (int)dbg.grace;
	o.timeout_s = (int)(dbg.duration / NSEC_PER_SEC);
	o.ignore_daemonsets = dbg.ignore_daemonsets;
	o.delete_emptydir_data = dbg.delete_emptydir;
	o.force = dbg.force;
	o.eviction_retry_ms = (int)(dbg.eviction_retry / NSEC_PER_MSEC);
	o.parallel = (int)dbg.parallel;
	o.dry_run = dbg.dry_run;
	o.on_evicted = print_evicted;
	r = kube_drain_node(kc, node, &o, NULL, &res);
	printf("drain: result=%s evicted=%d skipped=%d refused=%d blocked_by_pdb=%d remaining=%d\n",
	       r < 0 ? errno_name(r) : "ok", res.evicted, res.skipped, res.refused,
	       res.blocked_by_pdb, res.remaining);
	if (r < 0) {
		printf("error: drain: %s\n", res.err);
		return 1;
	}
	return 0;
}

int dbg_cordon(struct kube_client *kc, const char *node, bool on)
{
	int r = kube_node_cordon(kc, node, on);

	if (r < 0)
		return dbg_fail(r, NULL, on ? "cordon" : "uncordon");
	printf("%s: %s\n", on ? "cordoned" : "uncordoned", node);
	return 0;
}

/* KEY[=VALUE]:EFFECT to add, KEY[:EFFECT]- to remove (kubectl taint's syntax). */
int dbg_taint(struct kube_client *kc, const char *node, const char *spec)
{
	char buf[512], *eff, *val;
	size_t n = strlen(spec);
	bool add = true;
	int r;

	if (n == 0 || str_copy(buf, sizeof(buf), spec) < 0) {
		fprintf(stderr, "kube-debug: bad taint '%s'\n", spec);
		return 2;
	}
	if (buf[n - 1] == '-') {
		add = false;
		buf[n - 1] = 0;
	}
	if ((eff = strrchr(buf, ':')))
		*eff++ = 0;
	if ((val = strchr(buf, '=')))
		*val++ = 0;
	if ((add && !eff) || (!add && val)) {
		fprintf(stderr, "kube-debug: bad taint '%s' (KEY[=VALUE]:EFFECT or KEY[:EFFECT]-)\n",
			spec);
		return 2;
	}
	if ((r = kube_node_taint(kc, node, buf, val, eff, add)) < 0)
		return dbg_fail(r, NULL, "taint");
	printf("taint %s: %s\n", add ? "set" : "removed", spec);
	return 0;
}

/* KEY=VALUE to set, KEY- to remove. */
int dbg_label(struct kube_client *kc, const char *node, const char *spec)
{
	char buf[512], *val;
	size_t n = strlen(spec);
	int r;

	if (n < 2 || str_copy(buf, sizeof(buf), spec) < 0) {
		fprintf(stderr, "kube-debug: bad label '%s'\n", spec);
		return 2;
	}
	if ((val = strchr(buf, '=')))
		*val++ = 0;
	else if (buf[n - 1] == '-')
		buf[n - 1] = 0;
	else {
		fprintf(stderr, "kube-debug: bad label '%s' (KEY=VALUE or KEY-)\n", spec);
		return 2;
	}
	if ((r = kube_node_label(kc, node, buf, val)) < 0)
		return dbg_fail(r, NULL, "label");
	printf("label %s: %s\n", val ? "set" : "removed", spec);
	return 0;
}
