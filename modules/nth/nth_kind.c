/* aws-k8s nth: upstream's kinds (names, taint keys, event reasons) and metrics. */
#include <stddef.h>

#include "common/metrics/metrics.h"
#include "modules/nth/nth.h"

static const struct {
	const char *name, *taint, *reason;
} kinds[NTH_KIND_COUNT] = {
	[NTH_KIND_SPOT_ITN] = { "SPOT_ITN", NTH_TAINT_PREFIX "spot-itn", "SpotInterruption" },
	[NTH_KIND_SCHEDULED] = { "SCHEDULED_EVENT", NTH_TAINT_PREFIX "scheduled-maintenance",
				 "ScheduledEvent" },
	[NTH_KIND_REBALANCE] = { "REBALANCE_RECOMMENDATION",
				 NTH_TAINT_PREFIX "rebalance-recommendation",
				 "RebalanceRecommendation" },
	[NTH_KIND_ASG_LIFECYCLE] = { "ASG_LIFECYCLE", NTH_TAINT_PREFIX "asg-lifecycle-termination",
				     "ASGLifecycle" },
	[NTH_KIND_ASG_LAUNCH] = { "ASG_LAUNCH_LIFECYCLE", NULL, "ASGLaunchLifecycle" },
	[NTH_KIND_STATE_CHANGE] = { "STATE_CHANGE", NTH_TAINT_PREFIX "spot-itn", "StateChange" },
	[NTH_KIND_SQS_TERMINATE] = { "SQS_TERMINATE", NTH_TAINT_PREFIX "spot-itn",
				     "SQSTermination" },
};

const char *nth_kind_name(enum nth_kind k)
{
	return k < NTH_KIND_COUNT ? kinds[k].name : "UNKNOWN";
}

const char *nth_kind_taint(enum nth_kind k)
{
	return k < NTH_KIND_COUNT ? kinds[k].taint : NULL;
}

const char *nth_kind_reason(enum nth_kind k)
{
	return k < NTH_KIND_COUNT ? kinds[k].reason : "Unknown";
}

void nth_event_clear(struct nth_event *ev)
{
	if (ev->ctx_free && ev->ctx)
		ev->ctx_free(ev->ctx);
	ev->ctx = NULL;
	ev->ctx_free = NULL;
}

/* ---- metrics (upstream's OpenTelemetry names as the Prometheus exporter writes them) ---- */

static struct metric *m_actions, *m_actions_node, *m_errors, *m_tagged_nodes, *m_tagged_instances;

static void metrics_init(void)
{
	if (m_actions)
		return;
	m_actions = metric_counter("actions_total", "Number of actions",
				   (const char *[]){ "node_action", "node_status", NULL });
	m_actions_node = metric_counter(
		"actions_node_total", "Number of actions per node (deprecated: use actions_total)",
		(const char *[]){ "node_action", "node_status", "node_name", "node_event_id", NULL });
	m_errors = metric_counter("events_error_total", "Number of errors in events processing",
				  (const char *[]){ "event_error_where", NULL });
	m_tagged_nodes = metric_gauge("nth_tagged_nodes", "Number of nodes processing", NULL);
	m_tagged_instances =
		metric_gauge("nth_tagged_instances", "Number of instances processing", NULL);
	metric_set(m_tagged_nodes, 0);
	metric_set(m_tagged_instances, 0);
}

void nth_metrics_init(void)
{
	metrics_init();
}

void nth_metric_tagged(long long instances, long long nodes)
{
	metrics_init();
	metric_set(m_tagged_instances, (double)instances);
	if (nodes >= 0)
		metric_set(m_tagged_nodes, (double)nodes);
}

void nth_metric_action(const char *action, const char *node, const char *event_id, int r)
{
	const char *status = r < 0 ? "error" : "success";

	metrics_init();
	metric_inc(m_actions, action, status);
	metric_inc(m_actions_node, action, status, node ? node : "", event_id ? event_id : "");
}

void nth_metric_error(const char *where)
{
	metrics_init();
	metric_inc(m_errors, where);
}
