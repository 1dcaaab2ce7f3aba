/* aws-k8s nth: acting on one interruption event (nth_handle_event) and undoing it
 * (nth_cancel_event, the uncordon after a reboot): labels, taints, cordon, drain (common/kube's
 * drain), hooks, Kubernetes events and metrics with upstream's names. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/drain.h"
#include "common/kube/events.h"
#include "common/kube/rest.h"
#include "common/metrics/metrics.h"
#include "modules/nth/nth.h"

/* ---- Kubernetes events ---- */

void nth_node_event(struct nth *n, const struct nth_event *ev, bool warning, const char *reason,
		    const char *fmt, ...)
{
	char msg[KUBE_EVENT_MAX_MESSAGE];
	va_list ap;

	if (!n->rec || !ev->node_name[0])
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* kubelet's reference to a Node: its name as UID */
	struct kube_event_ref ref = { .kind = "Node", .api_version = "v1", .name = ev->node_name,
				      .uid = ev->node_name };
	kube_eventf(n->rec, &ref, warning ? KUBE_EVENT_WARNING : KUBE_EVENT_NORMAL, reason, "%s",
		    msg);
}

/* One step's outcome: the Kubernetes event (reason, or reason + "Error"), the metric, the log. */
static int step_done(struct nth *n, const struct nth_event *ev, const char *reason,
		     const char *action, int r, const char *okmsg, const char *detail)
{
	char why[96];

	nth_metric_action(action, ev->node_name, ev->event_id, r);
	if (r >= 0) {
		nth_node_event(n, ev, false, reason, "%s", okmsg);
		return r;
	}
	str_printf(why, sizeof(why), "%sError", reason);
	nth_node_event(n, ev, true, why, "%s: %s", action, detail && *detail ? detail : errno_name(-r));
	log_error("failed", KV_S("action", action), KV_S("node", ev->node_name),
		  KV_S("event", ev->event_id), KV_S("detail", detail ? detail : ""), KV_E(r));
	return r;
}

/* A label value: at most 63 characters of [A-Za-z0-9._-], starting and ending with an
 * alphanumeric. */
static void label_value(const char *src, char *dst, size_t n)
{
	size_t j = 0;

	for (size_t i = 0; src[i] && j + 1 < n && j < 63; i++) {
		char c = src[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (alnum || ((c == '-' || c == '_' || c == '.') && j > 0))
			dst[j++] = c;
	}
	while (j > 0 && !((dst[j - 1] >= 'a' && dst[j - 1] <= 'z') ||
			  (dst[j - 1] >= 'A' && dst[j - 1] <= 'Z') ||
			  (dst[j - 1] >= '0' && dst[j - 1] <= '9')))
		j--;
	dst[j] = '\0';
}

/* Whether the node is cordoned already (spec.unschedulable); -ENOENT when it does not exist. */
static int node_cordoned(struct nth *n, const char *node)
{
	cJSON *obj = NULL;
	bool unsched = false;
	int r = kube_get(n->kube, KUBE_REF(&kube_nodes, NULL, node), &obj, NULL);

	if (r < 0)
		return r;
	if (json_get_bool(obj, "spec.unschedulable", &unsched) < 0)
		unsched = false;
	cJSON_Delete(obj);
	return unsched;
}

int nth_node_marked(struct nth *n, const struct nth_event *ev)
{
	cJSON *obj = NULL;
	char value[64];
	int r = kube_get(n->kube, KUBE_REF(&kube_nodes, NULL, ev->node_name), &obj, NULL);

	if (r < 0)
		return r;
	const char *id = json_str_key(json_find(obj, "metadata.labels"), NTH_LABEL_EVENT_ID);
	label_value(ev->event_id, value, sizeof(value));
	r = id && *value && strcmp(id, value) == 0;
	cJSON_Delete(obj);
	return r;
}

/* Upstream's pre-drain: the event-id label, the uncordon-after-reboot labels (restart codes, on a
 * node not cordoned yet), the exclude-from-load-balancers label, the kind's taint, the hook. */
static int pre_drain(struct nth *n, struct nth_event *ev)
{
	const struct nth_config *c = n->cfg;
	const char *node = ev->node_name, *taint = nth_kind_taint(ev->kind);
	char value[64];
	int r;

	label_value(ev->event_id, value, sizeof(value));
	if ((r = kube_node_label(n->kube, node, NTH_LABEL_EVENT_ID, value)) < 0)
		return r;
	if (ev->uncordon_after_reboot) {
		if ((r = node_cordoned(n, node)) < 0)
			return r;
		if (r == 0) {
			char when[32];
			str_printf(when, sizeof(when), "%lld",
				   (long long)(now_real_ns() / 1000000000LL));
			if ((r = kube_node_label(n->kube, node, NTH_LABEL_ACTION,
						 NTH_ACTION_UNCORDON_AFTER_REBOOT)) < 0 ||
			    (r = kube_node_label(n->kube, node, NTH_LABEL_ACTION_TIME, when)) < 0)
				return r;
		}
	}
	if (c->exclude_from_lb &&
	    (r = kube_node_label(n->kube, node, NTH_LABEL_EXCLUDE_LB, "aws-node-termination-handler")) <
		    0)
		return r;
	if (c->taint_node && taint &&
	    (r = kube_node_taint(n->kube, node, taint, value, c->taint_effect, true)) < 0)
		return r;
	if (ev->pre_drain && (r = ev->pre_drain(n, ev, ev->ctx)) < 0)
		return r;
	return 0;
}

/* NTH's own pod is never evicted. */
static bool skip_self(void *ud, const cJSON *pod)
{
	const struct nth_config *c = ud;
	const char *name = json_str(pod, "metadata.name"), *ns = json_str(pod, "metadata.namespace");

	if (!*c->pod_name || !name || strcmp(name, c->pod_name) != 0)
		return false;
	return !*c->pod_namespace || (ns && strcmp(ns, c->pod_namespace) == 0);
}

static int drain(struct nth *n, struct nth_event *ev, struct kube_drain_result *res)
{
	const struct nth_config *c = n->cfg;
	struct kube_drain_opts o = KUBE_DRAIN_OPTS_INIT;

	o.pod_grace_s = (int)c->pod_termination_grace_s;
	o.timeout_s = (int)c->node_termination_grace_s;
	o.ignore_daemonsets = c->ignore_daemon_sets;
	o.delete_emptydir_data = c->delete_local_data;
	o.force = true;
	/* upstream leaves kubectl's retry delay at 0 s (a hot loop against a PDB): 5 s here */
	o.eviction_retry_ms = 5000;
	o.skip = skip_self;
	o.ud = n->cfg;
	return kube_drain_node(n->kube, ev->node_name, &o, n->cancel, res);
}

static int handle_dry_run(struct nth *n, struct nth_event *ev, bool cordon_only)
{
	log_info(cordon_only ? "node would have been cordoned, but dry-run flag was set"
			     : "node would have been cordoned and drained, but dry-run flag was set",
		 KV_S("node", ev->node_name), KV_S("event", ev->event_id),
		 KV_S("kind", nth_kind_name(ev->kind)));
	nth_webhook_send(n, ev);
	return 0;
}

int nth_handle_event(struct nth *n, struct nth_event *ev)
{
	const struct nth_config *c = n->cfg;
	bool cordon_only = c->cordon_only || ev->cordon_only;
	struct kube_drain_result res = { 0 };
	int r, dr;

	log_info("handling interruption event", KV_S("node", ev->node_name),
		 KV_S("event", ev->event_id), KV_S("kind", nth_kind_name(ev->kind)),
		 KV_S("instance", ev->instance_id), KV_S("description", ev->description));
	nth_node_event(n, ev, false, nth_kind_reason(ev->kind), "%s", ev->description);
	if (c->dry_run)
		return handle_dry_run(n, ev, cordon_only);

	r = pre_drain(n, ev);
	if (step_done(n, ev, "PreDrain", "pre-drain", r, "Pre-drain task successfully executed",
		      NULL) < 0) {
		if (r != -ENOENT)
			nth_webhook_send(n, ev);
		goto out;
	}
	r = kube_node_cordon(n->kube, ev->node_name, true);
	if (cordon_only || r < 0) {
		dr = step_done(n, ev, "Cordon", "cordon", r, "Node successfully cordoned", NULL);
	} else {
		dr = drain(n, ev, &res);
		if (dr == 0 && c->out_of_service_taint)
			dr = kube_node_taint(n->kube, ev->node_name, NTH_TAINT_OUT_OF_SERVICE,
					     "nodeshutdown", "NoExecute", true);
		if (dr != -ECANCELED)
			step_done(n, ev, "CordonAndDrain", "cordon-and-drain", dr,
				  "Node successfully cordoned and drained", res.err);
		if (dr == -ETIMEDOUT)
			dr = -EAGAIN; /* pods remained (a PDB): the caller retries later */
	}
	if (ev->post_drain) {
		int pr = ev->post_drain(n, ev, dr, ev->ctx);
		step_done(n, ev, "PostDrain", "post-drain", pr, "Post-drain task successfully executed",
			  NULL);
		if (dr == 0 && pr < 0)
			dr = pr;
	}
	if (dr != -ECANCELED)
		nth_webhook_send(n, ev);
	r = dr;
	if (r == 0)
		log_info(cordon_only ? "node cordoned" : "node cordoned and drained",
			 KV_S("node", ev->node_name), KV_S("event", ev->event_id),
			 KV_I("evicted", res.evicted), KV_I("skipped", res.skipped));
out:
	pthread_mutex_lock(&n->lock);
	if (r == 0)
		n->drained++;
	else
		n->failed++;
	pthread_mutex_unlock(&n->lock);
	return r;
}

/* Uncordon and remove what NTH added: its labels (including the exclude-from-LB label, which
 * upstream never removes), the taints of every kind and the out-of-service taint. */
static int undo_node(struct nth *n, const char *node)
{
	static const char *const labels[] = { NTH_LABEL_EVENT_ID, NTH_LABEL_ACTION,
					      NTH_LABEL_ACTION_TIME };
	int r;

	if ((r = kube_node_cordon(n->kube, node, false)) < 0)
		return r;
	for (size_t i = 0; i < sizeof(labels) / sizeof(labels[0]); i++)
		if ((r = kube_node_label(n->kube, node, labels[i], NULL)) < 0)
			return r;
	if (n->cfg->exclude_from_lb &&
	    (r = kube_node_label(n->kube, node, NTH_LABEL_EXCLUDE_LB, NULL)) < 0)
		return r;
	for (int k = 0; k < NTH_KIND_COUNT; k++) {
		const char *t = nth_kind_taint((enum nth_kind)k);
		if (t && (r = kube_node_taint(n->kube, node, t, NULL, NULL, false)) < 0)
			return r;
	}
	return kube_node_taint(n->kube, node, NTH_TAINT_OUT_OF_SERVICE, NULL, NULL, false);
}

int nth_cancel_event(struct nth *n, struct nth_event *ev)
{
	int r;

	log_info("interruption event canceled: uncordoning the node", KV_S("node", ev->node_name),
		 KV_S("event", ev->event_id), KV_S("state", ev->state));
	nth_node_event(n, ev, false, "CancelDrain", "Event %s was canceled (%s)", ev->event_id,
		       ev->state);
	if (n->cfg->dry_run) {
		log_info("node would have been uncordoned, but dry-run flag was set",
			 KV_S("node", ev->node_name));
		return 0;
	}
	r = undo_node(n, ev->node_name);
	if (r == -ECANCELED) /* stopping: the next run finishes it */
		return r;
	if (r == 0)
		log_info("node uncordoned", KV_S("node", ev->node_name), KV_S("event", ev->event_id));
	return step_done(n, ev, "Uncordon", "uncordon", r, "Node successfully uncordoned", NULL);
}

/* The uptime in seconds: UPTIME_FROM_FILE or /proc/uptime ("12345.67 ..."). */
static int read_uptime(const char *path, double *ret)
{
	char buf[128];
	FILE *f = fopen(path && *path ? path : "/proc/uptime", "re");
	char *end;

	if (!f)
		return -errno;
	size_t len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	errno = 0;
	*ret = strtod(buf, &end);
	if (end == buf || errno || *ret < 0)
		return -EBADMSG;
	return 0;
}

int nth_uncordon_after_reboot(struct nth *n)
{
	const char *node = n->cfg->node_name;
	cJSON *obj = NULL;
	double uptime = 0;
	char *end;
	int r;

	if ((r = kube_get(n->kube, KUBE_REF(&kube_nodes, NULL, node), &obj, NULL)) < 0)
		return r;
	const cJSON *labels = json_find(obj, "metadata.labels");
	const char *action = json_str_key(labels, NTH_LABEL_ACTION);
	const char *at = json_str_key(labels, NTH_LABEL_ACTION_TIME);
	const char *id = json_str_key(labels, NTH_LABEL_EVENT_ID);
	char event_id[sizeof(n->rebooted_event_id)];
	if (!action || strcmp(action, NTH_ACTION_UNCORDON_AFTER_REBOOT) != 0 || !at) {
		cJSON_Delete(obj);
		return 0;
	}
	str_copy(event_id, sizeof(event_id), id ? id : "");
	errno = 0;
	long long t = strtoll(at, &end, 10);
	bool bad = errno || end == at || *end;
	cJSON_Delete(obj);
	if (bad) {
		log_warn("ignoring a malformed action-time label", KV_S("node", node),
			 KV_S("value", at));
		return 0;
	}
	if ((r = read_uptime(n->cfg->uptime_from_file, &uptime)) < 0)
		return log_error_errno(r, "failed to read the uptime");
	double since = (double)(now_real_ns() / 1000000000LL - t);
	if (since < uptime) {
		log_info("the node has not rebooted since it was cordoned: leaving it cordoned",
			 KV_S("node", node), KV_D("uptime_s", uptime), KV_D("since_action_s", since));
		return 0;
	}
	struct nth_event ev = { .kind = NTH_KIND_SCHEDULED };
	str_copy(ev.node_name, sizeof(ev.node_name), node);
	str_copy(ev.event_id, sizeof(ev.event_id), "uncordon-after-reboot");
	if (n->cfg->dry_run) {
		log_info("node would have been uncordoned after its reboot, but dry-run flag was set",
			 KV_S("node", node));
		return 0;
	}
	r = undo_node(n, node);
	if (r == -ECANCELED)
		return r;
	if (r == 0) {
		log_info("uncordoned the node after its reboot", KV_S("node", node),
			 KV_S("event", event_id));
		str_copy(n->rebooted_event_id, sizeof(n->rebooted_event_id), event_id);
	}
	return step_done(n, &ev, "Uncordon", "uncordon", r, "Node successfully uncordoned after reboot",
			 NULL);
}
