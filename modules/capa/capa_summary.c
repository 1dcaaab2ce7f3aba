/* The Ready condition of an AWSCluster whose reconcile failed, as CAPI's conditions.SetSummary
 * with a step counter (the AWSCluster patch in CAPA): False, with the reason and severity of the
 * most severe False step condition (Error before Warning before Info, then the order of the
 * steps), and the message "N of M completed". status.ready is left as it is: CAPA never sets it
 * back to false. */
#include <stdio.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "modules/capa/capa_cluster.h"

static int severity_rank(const char *sev)
{
	if (sev && strcmp(sev, "Error") == 0)
		return 3;
	if (sev && strcmp(sev, "Warning") == 0)
		return 2;
	if (sev && strcmp(sev, "Info") == 0)
		return 1;
	return 0;
}

static const cJSON *find(const cJSON *conds, const char *type)
{
	const cJSON *c;
	cJSON_ArrayForEach(c, conds)
	{
		const char *t = json_str(c, "type");
		if (t && strcmp(t, type) == 0)
			return c;
	}
	return NULL;
}

void capa_cluster_ready_false(struct capa_scope *s)
{
	static const char *const steps[] = {CAPA_COND_VPC, CAPA_COND_SUBNETS, CAPA_COND_IGW,
					    CAPA_COND_NAT, CAPA_COND_RT,      CAPA_COND_SG,
					    CAPA_COND_LB};
	cJSON *st = capa_scope_status(s);
	const cJSON *conds = json_find(st, "conditions"), *top = NULL;
	int top_rank = -1, n = 0, done = 0;
	char msg[64];

	if (!st)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		const cJSON *c = find(conds, steps[i]);
		const char *status = c ? json_str(c, "status") : NULL;
		if (!status)
			continue;
		n++;
		if (strcmp(status, "True") == 0) {
			done++;
			continue;
		}
		int rank = severity_rank(json_str(c, "severity"));
		if (strcmp(status, "False") == 0 && rank > top_rank) {
			top = c;
			top_rank = rank;
		}
	}
	snprintf(msg, sizeof(msg), "%d of %d completed", done, n);
	/* a failure before any step condition was set (the layout, a cancelled call) */
	capa_condition_set(st, "Ready", "False", top ? json_str(top, "severity") : "Warning",
			   top ? json_str(top, "reason") : "ReconciliationFailed", msg);
}
