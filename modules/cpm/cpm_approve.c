/* `aws-k8s cpm approve`: one master at a time, Deckhouse's update_approval hook as a controller
 * (cpm_approve.h). One controller, "cpm-approver", one worker, one key (the decision is about
 * all masters at once), queued by every change of a master Node or of a cpm Pod and every
 * --resync-period:
 *
 *   1. every master Node carrying approved (either spelling) whose cpm Pod (the Pod of
 *      --pod-selector in --pod-namespace on that node) is Ready loses approved: its converge
 *      is done. A Node approved whose Pod is not Ready (or absent) is left alone.
 *   2. while any master Node is approved, nothing else happens;
 *   3. otherwise the first (by name) master Node that carries waiting-for-approval and is
 *      Ready and schedulable is approved: approved set and waiting-for-approval removed in one
 *      merge patch that carries the resourceVersion read just before from the API server
 *      itself (a quorum list, not the informer's cache), so a Node that changed meanwhile is
 *      a 409 and a new pass, never an approval made on a stale view. The Node gets an Event.
 *
 * Two replicas never approve two Nodes: only the holder of the Lease acts (checked before
 * every write), and the holder re-reads every master from the API server before it approves,
 * so a new leader sees an approval its predecessor made a moment before, even when its own
 * informer has not yet. */
#include "modules/cpm/cpm_approve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/flags.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/http/server.h"
#include "common/kube/controller.h"
#include "common/kube/events.h"
#include "common/kube/informer.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"
#include "common/metrics/metrics.h"

#define APPROVE_KEY "#all" /* '#' is in no Node name */
#define APPROVE_COMPONENT "d8-control-plane-manager-approver"

static const char approve_usage[] =
	"One master at a time, as Deckhouse's update_approval hook: the cpm run on each master asks\n"
	"for its turn with the Node annotation\n"
	"control-plane-manager.deckhouse.io/waiting-for-approval, waits for\n"
	"control-plane-manager.deckhouse.io/approved, converges its control plane, then its Pod\n"
	"becomes Ready. This controller, while it holds the Lease (--leader-elect):\n"
	"  - removes approved from a master Node once the cpm Pod on it is Ready (not before: a\n"
	"    Node whose Pod is not Ready, or has no Pod, stays approved);\n"
	"  - while no master Node is approved, approves exactly one that is waiting, Ready and\n"
	"    schedulable (the first by name): approved set and waiting-for-approval removed in one\n"
	"    patch guarded by the resourceVersion it has just read from the API server, with a\n"
	"    Normal Event on the Node (ControlPlaneManagerApproved; ControlPlaneManagerDone when\n"
	"    it removes approved). NotReady and cordoned Nodes wait.\n"
	"The older spelling control-plane-manger.deckhouse.io/ (Deckhouse's older hooks) is read\n"
	"too, and a Node that asked with it is approved with it.\n"
	"\n"
	"Why a role of its own (a Deployment of 2 replicas with leader election) and not a Lease\n"
	"in each cpm process: the cpm processes are the ones that restart, one after the other,\n"
	"when the configuration changes, and the one converging may take its own API server and\n"
	"etcd member down; the approver must keep deciding through that. It needs patch on every\n"
	"master Node, which the DaemonSet's pods then do not need beyond their own.\n"
	"\n"
	"RBAC: nodes get/list/watch/patch, pods get/list/watch (in --pod-namespace), events\n"
	"create/patch, leases get/create/update (in the Lease's namespace).\n"
	"Exit codes: 0 on SIGTERM, 1 when it cannot start or loses the Lease, 2 usage error.";

static char *f_node_selector, *f_pod_ns, *f_pod_selector, *f_listen;
static int64_t f_resync;

static const struct flag approve_flags[] = {
	{ "node-selector", FLAG_STRING, &f_node_selector, "node-role.kubernetes.io/control-plane",
	  NULL,
	  "Label selector of the master Nodes (Deckhouse's older hooks: "
	  "node-role.kubernetes.io/master)." },
	{ "pod-namespace", FLAG_STRING, &f_pod_ns, "kube-system", NULL,
	  "Namespace of the cpm DaemonSet's Pods." },
	{ "pod-selector", FLAG_STRING, &f_pod_selector, "app=d8-control-plane-manager", NULL,
	  "Label selector of the cpm DaemonSet's Pods (one per master)." },
	{ "listen-address", FLAG_STRING, &f_listen, ":8096", NULL,
	  "Address to serve /healthz, /readyz, /livez and /metrics on (empty: none)." },
	{ "resync-period", FLAG_DURATION, &f_resync, "1m", NULL,
	  "How often the whole decision is made again without any change seen." },
	KUBE_FLAGS_QPS("5", "10"),
	LEADER_ELECT_FLAGS("d8-control-plane-manager-approver"),
	LOG_FLAGS,
	{ NULL },
};

struct approver {
	struct kube_client *kc;
	struct kube_informer *nodes, *pods;
	struct kube_recorder *rec;
	struct controller ctl;
	struct controllers run;
	struct metric *m_approvals, *m_done;
};

/* ---- what a Node and a Pod say ----------------------------------------------------------- */

static const char *ann_prefix(const cJSON *ann, const char *what)
{
	static const char *const prefixes[] = { CPM_ANN_PREFIX, CPM_ANN_PREFIX_OLD };
	char key[96];

	for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++)
		if (str_printf(key, sizeof(key), "%s%s", prefixes[i], what) >= 0 &&
		    cJSON_GetObjectItemCaseSensitive(ann, key))
			return prefixes[i];
	return NULL;
}

bool cpm_obj_ready(const cJSON *obj)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, json_find(obj, "status.conditions"))
	{
		const char *t = json_str(c, "type"), *s = json_str(c, "status");
		if (t && s && strcmp(t, "Ready") == 0)
			return strcmp(s, "True") == 0;
	}
	return false;
}

void cpm_node_view(const cJSON *node, struct cpm_node_view *ret)
{
	const cJSON *ann = json_find(node, "metadata.annotations");
	const cJSON *u = json_find(node, "spec.unschedulable");

	*ret = (struct cpm_node_view){
		.name = json_str(node, "metadata.name"),
		.rv = json_str(node, "metadata.resourceVersion"),
		.approved = cJSON_IsObject(ann) ? ann_prefix(ann, CPM_ANN_APPROVED) : NULL,
		.waiting = cJSON_IsObject(ann) ? ann_prefix(ann, CPM_ANN_WAITING) : NULL,
		.ready = cpm_obj_ready(node),
		.schedulable = !cJSON_IsTrue(u),
	};
}

/* The cpm Pod on the node is Ready (one of them, should a rollout leave two). */
static bool pod_ready_on(struct approver *a, const char *node)
{
	struct kube_obj **pods = NULL;
	size_t n = 0;
	bool ready = false;

	if (kube_store_by_index(kube_informer_store(a->pods), "node", node, &pods, &n) < 0)
		return false;
	for (size_t i = 0; i < n && !ready; i++)
		ready = !json_find(pods[i]->json, "metadata.deletionTimestamp") &&
			cpm_obj_ready(pods[i]->json);
	kube_objv_free(pods, n);
	return ready;
}

/* ---- the writes -------------------------------------------------------------------------- */

static void node_event(struct approver *a, const cJSON *node, const char *reason, const char *msg)
{
	struct kube_event_ref ref;

	kube_event_ref_from(node, &kube_nodes, &ref);
	kube_eventf(a->rec, &ref, KUBE_EVENT_NORMAL, reason, "%s", msg);
}

/* One merge patch of the Node's annotations (set: "" for each of set, null for each of del),
 * guarded by rv. */
static int patch_annotations(struct approver *a, const char *name, const char *rv,
			     const char *const *set, const char *const *del)
{
	struct kube_status st = { 0 };
	cJSON *p = cJSON_CreateObject(), *md, *ann;
	char *text = NULL;
	int r = -ENOMEM;

	if (!p || !(md = cJSON_AddObjectToObject(p, "metadata")) ||
	    !cJSON_AddStringToObject(md, "resourceVersion", rv) ||
	    !(ann = cJSON_AddObjectToObject(md, "annotations")))
		goto out;
	for (; set && *set; set++)
		if (!cJSON_AddStringToObject(ann, *set, ""))
			goto out;
	for (; del && *del; del++)
		if (!cJSON_AddNullToObject(ann, *del))
			goto out;
	if (!(text = cJSON_PrintUnformatted(p)))
		goto out;
	r = kube_patch(a->kc, KUBE_REF(&kube_nodes, NULL, name), KUBE_PATCH_MERGE, text, NULL, &st);
	if (r == -KUBE_ECONFLICT)
		log_v(2, "the Node changed meanwhile: deciding again", KV_S("node", name));
	else if (r < 0)
		log_warn("cannot patch the Node's annotations", KV_S("node", name),
			 KV_S("reason", st.reason), KV_S("message", st.message), KV_E(r));
out:
	cJSON_free(text);
	cJSON_Delete(p);
	return r;
}

/* Removes approved (both spellings) from a Node whose cpm Pod is Ready. */
static int finish(struct approver *a, const cJSON *node, const struct cpm_node_view *v)
{
	const char *const del[] = { CPM_ANN_PREFIX CPM_ANN_APPROVED,
				    CPM_ANN_PREFIX_OLD CPM_ANN_APPROVED, NULL };
	int r;

	if (!controllers_may_act(&a->run))
		return -ECANCELED;
	if ((r = patch_annotations(a, v->name, v->rv, NULL, del)) < 0)
		return r;
	log_info("the control plane of the node is converged: approval removed",
		 KV_S("node", v->name));
	metric_inc(a->m_done);
	node_event(a, node, "ControlPlaneManagerDone",
		   "the control-plane-manager Pod on this node is Ready: approval removed");
	return 0;
}

/* The masters as the API server has them now (a quorum read, not the informer's cache). */
static int fresh_masters(struct approver *a, cJSON **ret)
{
	struct kube_status st = { 0 };
	struct kube_list_opts lo = { .label_selector = f_node_selector };
	int r = kube_list(a->kc, KUBE_REF(&kube_nodes, NULL, NULL), &lo, ret, &st);

	if (r < 0)
		log_warn("cannot list the master Nodes", KV_S("reason", st.reason),
			 KV_S("message", st.message), KV_E(r));
	return r;
}

/* Approves the Node name after checking, on a fresh read, that no master is approved and that
 * name still waits, is Ready and schedulable. 0 also when the fresh read says no. */
static int approve(struct approver *a, const char *name)
{
	cJSON *list = NULL;
	const cJSON *it, *node = NULL;
	struct cpm_node_view v = { 0 }, x;
	char approved[96];
	const char *const set[] = { approved, NULL };
	const char *const del[] = { CPM_ANN_PREFIX CPM_ANN_WAITING,
				    CPM_ANN_PREFIX_OLD CPM_ANN_WAITING, NULL };
	int r;

	if ((r = fresh_masters(a, &list)) < 0)
		return r;
	cJSON_ArrayForEach(it, json_find(list, "items"))
	{
		cpm_node_view(it, &x);
		if (x.approved) {
			log_v(2, "a master is already approved (the cache lagged): not approving",
			      KV_S("approved", x.name), KV_S("node", name));
			goto out;
		}
		if (x.name && strcmp(x.name, name) == 0) {
			node = it;
			v = x;
		}
	}
	if (!node || !v.waiting || !v.ready || !v.schedulable || !v.rv) {
		log_v(2, "the node no longer waits, Ready and schedulable: not approving",
		      KV_S("node", name));
		goto out;
	}
	if (!controllers_may_act(&a->run)) {
		r = -ECANCELED;
		goto out;
	}
	/* answered in the spelling it asked with; both waiting spellings go */
	if ((r = str_printf(approved, sizeof(approved), "%s%s", v.waiting, CPM_ANN_APPROVED)) < 0 ||
	    (r = patch_annotations(a, name, v.rv, set, del)) < 0)
		goto out;
	log_info("approved the control-plane update of the node (one master at a time)",
		 KV_S("node", name), KV_S("annotation", approved));
	metric_inc(a->m_approvals);
	node_event(a, node, "ControlPlaneManagerApproved",
		   "this node may converge its control plane now (one master at a time)");
out:
	cJSON_Delete(list);
	return r;
}

/* ---- the reconcile ----------------------------------------------------------------------- */

static int by_name(const void *x, const void *y)
{
	const char *a = json_str((*(struct kube_obj *const *)x)->json, "metadata.name");
	const char *b = json_str((*(struct kube_obj *const *)y)->json, "metadata.name");
	return strcmp(a ? a : "", b ? b : "");
}

static int reconcile(void *ud, const char *key, int64_t *requeue_after_ns)
{
	struct approver *a = ud;
	struct kube_obj **nodes = NULL;
	size_t n = 0, approved = 0;
	const char *candidate = NULL;
	int r, result = 0;

	(void)key;
	if ((r = kube_store_list(kube_informer_store(a->nodes), &nodes, &n)) < 0)
		return r;
	qsort(nodes, n, sizeof(*nodes), by_name);
	for (size_t i = 0; i < n; i++) {
		struct cpm_node_view v;
		cpm_node_view(nodes[i]->json, &v);
		if (!v.name || !v.rv)
			continue;
		if (v.approved) {
			approved++;
			if (pod_ready_on(a, v.name)) {
				r = finish(a, nodes[i]->json, &v);
				if (r < 0 && result == 0)
					result = r;
			} else {
				log_v(3, "approved; its cpm Pod is not Ready yet", KV_S("node", v.name));
			}
		} else if (v.waiting && !candidate) {
			if (v.ready && v.schedulable)
				candidate = v.name;
			else
				log_v(2, "waiting for approval, skipped while it is not Ready and "
					 "schedulable", KV_S("node", v.name), KV_B("ready", v.ready),
				      KV_B("schedulable", v.schedulable));
		}
	}
	if (approved > 1)
		log_warn("more than one master is approved (made by someone else): approving no "
			 "other until they are done", KV_U("approved", approved));
	/* a removal above shows in the informer's next event, which decides again */
	if (approved == 0 && candidate)
		result = approve(a, candidate);
	kube_objv_free(nodes, n);
	if (result == -KUBE_ECONFLICT) {
		*requeue_after_ns = 500 * NSEC_PER_MSEC;
		return 0;
	}
	return result;
}

/* ---- informers and the command ----------------------------------------------------------- */

static cJSON *node_transform(void *ud, cJSON *obj)
{
	static const char *const keep[] = { "metadata.uid", "metadata.annotations",
					    "spec.unschedulable", "status.conditions", NULL };
	cJSON *p = kube_project(obj, keep);
	(void)ud;
	cJSON_Delete(obj);
	return p;
}

static cJSON *pod_transform(void *ud, cJSON *obj)
{
	static const char *const keep[] = { "metadata.deletionTimestamp", "spec.nodeName",
					    "status.conditions", NULL };
	cJSON *p = kube_project(obj, keep);
	(void)ud;
	cJSON_Delete(obj);
	return p;
}

static void changed(void *ud, const cJSON *obj)
{
	(void)obj;
	controller_add(&((struct approver *)ud)->ctl, APPROVE_KEY);
}

static void updated(void *ud, const cJSON *old, const cJSON *obj)
{
	(void)old;
	changed(ud, obj);
}

static const struct kube_indexer pod_indexers[] = { { "node", kube_index_by_node_name } };

static int check_synced(void *ud, char *why, size_t n)
{
	struct approver *a = ud;
	if (a->nodes && !kube_informer_has_synced(a->nodes)) {
		snprintf(why, n, "the informers have not synced yet");
		return -EAGAIN;
	}
	return 0;
}

static int setup(struct approver *a)
{
	char err[512];
	int r;

	if ((r = kube_client_from_flags("cpm-approve", &a->kc, err, sizeof(err))) < 0) {
		log_error("no Kubernetes client", KV_S("error", err), KV_E(r));
		return r;
	}
	const struct kube_handlers h = { .on_add = changed, .on_update = updated,
					 .on_delete = changed, .ud = a };
	struct kube_informer_opts no = { .res = &kube_nodes, .label_selector = f_node_selector,
					 .transform = node_transform, .handlers = h,
					 .name = "master nodes" };
	struct kube_informer_opts po = { .res = &kube_pods, .ns = f_pod_ns,
					 .label_selector = f_pod_selector,
					 .transform = pod_transform, .indexers = pod_indexers,
					 .n_indexers = ARRAY_SIZE(pod_indexers), .handlers = h,
					 .name = "cpm pods" };
	struct kube_recorder_opts ro = { .component = APPROVE_COMPONENT };
	if ((r = kube_informer_new(a->kc, &no, &a->nodes)) < 0 ||
	    (r = kube_informer_new(a->kc, &po, &a->pods)) < 0 ||
	    (r = kube_recorder_new(a->kc, &ro, &a->rec)) < 0) {
		log_error("cannot create the informers and the event recorder", KV_E(r));
		return r;
	}
	a->m_approvals = metric_counter("cpm_approver_approvals_total",
					"Master Nodes approved to converge their control plane",
					(const char *[]){ NULL });
	a->m_done = metric_counter("cpm_approver_done_total",
				   "Approvals removed once the node's cpm Pod was Ready",
				   (const char *[]){ NULL });
	a->ctl = (struct controller){
		.name = "cpm-approver",
		.informers = { a->nodes, a->pods },
		.reconcile = reconcile,
		.ud = a,
		.workers = 1,
		.queue = { .base_delay_ns = 500 * NSEC_PER_MSEC, .max_delay_ns = 60 * NSEC_PER_SEC },
		.resync_key = APPROVE_KEY,
		.resync_ns = f_resync,
	};
	a->run = (struct controllers){ .ctls = &a->ctl, .n = 1, .kc = a->kc,
				       .leader_elect = kube_flag_leader_elect };
	kube_le_config_from_flags(&a->run.le);
	log_info("cpm approver", KV_S("nodeSelector", f_node_selector),
		 KV_S("podNamespace", f_pod_ns), KV_S("podSelector", f_pod_selector),
		 KV_B("leaderElect", kube_flag_leader_elect));
	return 0;
}

static int serve(struct approver *a, struct http_server **ret)
{
	int r;

	*ret = NULL;
	if (!f_listen || !*f_listen)
		return 0;
	if ((r = http_server_new(&(struct http_server_opts){ .bind = f_listen }, ret)) < 0 ||
	    (r = http_server_add_standard(*ret)) < 0 ||
	    (r = http_server_add_check(*ret, HTTP_CHECK_READYZ, "informer-sync", check_synced,
				       a)) < 0 ||
	    (r = http_server_start(*ret)) < 0) {
		log_error("failed to serve", KV_S("address", f_listen), KV_E(r));
		http_server_free(*ret);
		*ret = NULL;
		return r;
	}
	log_info("serving", KV_S("address", f_listen), KV_I("port", http_server_port(*ret)));
	return 0;
}

int cpm_approve_main(int argc, char **argv)
{
	struct approver a = { 0 };
	struct http_server *srv = NULL;
	char err[256];
	int code = 1, n = flags_parse("cpm approve", approve_usage, approve_flags, argc, argv);

	if (n < 0)
		return flags_exit_code(n);
	if (n > 0 || f_resync <= 0 || !*f_node_selector || !*f_pod_selector || !*f_pod_ns) {
		if (n > 0)
			fprintf(stderr, "aws-k8s cpm approve: unexpected argument '%s'\n", argv[0]);
		else
			fprintf(stderr, "aws-k8s cpm approve: --resync-period must be positive; "
					"--node-selector, --pod-selector and --pod-namespace not "
					"empty\n");
		code = 2;
		goto out;
	}
	if (kube_flag_leader_elect && kube_le_flags_check(err, sizeof(err)) < 0) {
		fprintf(stderr, "aws-k8s cpm approve: %s\n", err);
		code = 2;
		goto out;
	}
	if (setup(&a) < 0 || serve(&a, &srv) < 0)
		goto out;
	/* until SIGTERM (0) or the Lease lost (-ENOLCK); a failure to start is logged */
	code = controllers_run(&a.run) == 0 ? 0 : 1;
out:
	http_server_free(srv);
	kube_informer_free(a.nodes);
	kube_informer_free(a.pods);
	kube_recorder_free(a.rec);
	kube_client_free(a.kc);
	flags_free(approve_flags);
	return code;
}
