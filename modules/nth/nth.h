/* aws-k8s nth: the AWS node-termination-handler (IMDS mode and queue mode).
 *
 * This header is the module's internal contract: nth.c (configuration, main), nth_imds*.c (the
 * IMDS monitors), nth_handle.c (acting on one event: cordon, taints, drain, events, metrics,
 * webhook) and nth_sqs*.c (queue mode) share it. Queue mode builds a struct nth_event per
 * interruption it reads, with its pre-drain hook (lifecycle heartbeats) and post-drain hook
 * (CompleteLifecycleAction, deleting the SQS message), and calls nth_handle_event.
 *
 * Names follow upstream (aws/aws-node-termination-handler): the kinds, taint keys, label keys,
 * Kubernetes event reasons and metric names are upstream's, so dashboards and alerts keep
 * working. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct aws_imds;
struct cancel;
struct kube_client;
struct kube_recorder;
struct nth;

/* Every upstream environment variable has its flag (Go flag syntax, -name or --name); the
 * environment sets the default and the command line wins, as upstream. */
struct nth_config {
	/* identity */
	char *node_name;	 /* NODE_NAME --node-name (required in IMDS mode) */
	char *pod_name;		 /* POD_NAME --pod-name (this pod is never evicted) */
	char *pod_namespace;	 /* POD_NAMESPACE --pod-namespace */
	char *metadata_url;	 /* INSTANCE_METADATA_URL --metadata-url */
	long long metadata_tries; /* METADATA_TRIES (3) */
	char *kube_host, *kube_port; /* KUBERNETES_SERVICE_HOST/PORT (advanced) */
	double kube_api_qps;	 /* KUBE_API_QPS (5) */
	long long kube_api_burst; /* KUBE_API_BURST (10) */
	bool use_apiserver_cache; /* USE_APISERVER_CACHE: pod lists with resourceVersion=0 */

	/* what to watch */
	bool enable_spot_itn;	   /* ENABLE_SPOT_INTERRUPTION_DRAINING (true) */
	bool enable_scheduled;	   /* ENABLE_SCHEDULED_EVENT_DRAINING (true) */
	bool enable_rebalance_monitoring; /* ENABLE_REBALANCE_MONITORING (false): cordon */
	bool enable_rebalance_draining;	  /* ENABLE_REBALANCE_DRAINING (false): drain */
	bool enable_asg_lifecycle;	  /* ENABLE_ASG_LIFECYCLE_DRAINING (true) */
	bool enable_sqs;		  /* ENABLE_SQS_TERMINATION_DRAINING (false): queue mode */

	/* queue mode */
	char *queue_url;	     /* QUEUE_URL */
	char *aws_region;	     /* AWS_REGION (else from the queue URL) */
	char *aws_endpoint;	     /* AWS_ENDPOINT */
	bool check_tag_before_draining; /* CHECK_TAG_BEFORE_DRAINING (true) */
	char *managed_tag;	     /* MANAGED_TAG (aws-node-termination-handler/managed) */
	bool use_provider_id;	     /* USE_PROVIDER_ID */
	bool delete_sqs_msg_if_node_not_found; /* DELETE_SQS_MSG_IF_NODE_NOT_FOUND */
	long long sqs_visibility_timeout_s; /* SQS_MSG_VISIBILITY_TIMEOUT_SEC (20; 1..119) */
	long long heartbeat_interval_s;	    /* HEARTBEAT_INTERVAL (-1: none; 30..3600) */
	long long heartbeat_until_s;	    /* HEARTBEAT_UNTIL (-1: 172800 with an interval) */
	long long complete_lifecycle_action_delay_s; /* COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS (-1) */
	long long workers;		     /* WORKERS (10) */

	/* what to do */
	bool dry_run;		/* DRY_RUN: log "would have ..." and change nothing */
	bool cordon_only;	/* CORDON_ONLY */
	bool taint_node;	/* TAINT_NODE */
	char *taint_effect;	/* TAINT_EFFECT: NoSchedule (default), PreferNoSchedule, NoExecute */
	bool exclude_from_lb;	/* EXCLUDE_FROM_LOAD_BALANCERS */
	bool out_of_service_taint; /* ENABLE_OUT_OF_SERVICE_TAINT */
	bool ignore_daemon_sets; /* IGNORE_DAEMON_SETS (true) */
	bool delete_local_data; /* DELETE_LOCAL_DATA (true) */
	long long pod_termination_grace_s;  /* POD_TERMINATION_GRACE_PERIOD (-1: the pod's) */
	long long node_termination_grace_s; /* NODE_TERMINATION_GRACE_PERIOD (120) */
	char *uptime_from_file;		    /* UPTIME_FROM_FILE (else /proc/uptime) */

	/* reporting */
	char *webhook_url, *webhook_headers, *webhook_template, *webhook_template_file,
		*webhook_proxy; /* WEBHOOK_* */
	bool emit_events;	/* EMIT_KUBERNETES_EVENTS */
	char *events_extra_annotations; /* KUBERNETES_EVENTS_EXTRA_ANNOTATIONS "k=v,..." */
	bool enable_prometheus; /* ENABLE_PROMETHEUS_SERVER */
	long long prometheus_port; /* PROMETHEUS_SERVER_PORT (9092) */
	bool enable_probes;	/* ENABLE_PROBES_SERVER */
	long long probes_port;	/* PROBES_SERVER_PORT (8080) */
	char *probes_endpoint;	/* PROBES_SERVER_ENDPOINT (/healthz) */
	bool json_logging;	/* JSON_LOGGING */
	char *log_level;	/* LOG_LEVEL: debug, info, warn, error */
	long long log_format_version; /* LOG_FORMAT_VERSION (1) */

	/* tests only: the IMDS poll period (upstream: 2 s) */
	int64_t poll_interval_ns;
};

/* Upstream's kinds (monitor.*Kind) and what each maps to. */
enum nth_kind {
	NTH_KIND_SPOT_ITN,	   /* "SPOT_ITN": taint aws-node-termination-handler/spot-itn */
	NTH_KIND_SCHEDULED,	   /* "SCHEDULED_EVENT": .../scheduled-maintenance */
	NTH_KIND_REBALANCE,	   /* "REBALANCE_RECOMMENDATION": .../rebalance-recommendation */
	NTH_KIND_ASG_LIFECYCLE,	   /* "ASG_LIFECYCLE" (termination): .../asg-lifecycle-termination */
	NTH_KIND_ASG_LAUNCH,	   /* "ASG_LAUNCH_LIFECYCLE": no drain (queue mode) */
	NTH_KIND_STATE_CHANGE,	   /* "STATE_CHANGE" (queue mode): .../spot-itn as upstream */
	NTH_KIND_SQS_TERMINATE,	   /* "SQS_TERMINATE" (queue mode, other sources) */
	NTH_KIND_COUNT,
};

const char *nth_kind_name(enum nth_kind k);	/* "SPOT_ITN", ... */
const char *nth_kind_taint(enum nth_kind k);	/* the taint key, NULL when none */
const char *nth_kind_reason(enum nth_kind k);	/* Kubernetes event reason: SpotInterruption... */

#define NTH_TAINT_PREFIX "aws-node-termination-handler/"
#define NTH_LABEL_EVENT_ID "aws-node-termination-handler/event-id"
#define NTH_LABEL_ACTION "aws-node-termination-handler/action"
#define NTH_LABEL_ACTION_TIME "aws-node-termination-handler/action-time"
#define NTH_ACTION_UNCORDON_AFTER_REBOOT "UncordonAfterReboot"
#define NTH_LABEL_EXCLUDE_LB "node.kubernetes.io/exclude-from-external-load-balancers"
#define NTH_TAINT_OUT_OF_SERVICE "node.kubernetes.io/out-of-service"

struct nth_event;

/* Hooks of an event (any may be NULL). pre_drain runs after the cordon and taint and before the
 * evictions (e.g. start lifecycle heartbeats); a negative return stops the handling (counted as
 * an error, the node stays cordoned). post_drain runs after the drain with its result (0, or a
 * negative errno: -EAGAIN when pods remained, -ECANCELED on shutdown) and does what must follow
 * a drain (CompleteLifecycleAction, deleting the SQS message: only when drain_result is 0). */
typedef int (*nth_pre_drain_fn)(struct nth *n, struct nth_event *ev, void *ctx);
typedef int (*nth_post_drain_fn)(struct nth *n, struct nth_event *ev, int drain_result, void *ctx);

/* One interruption (upstream's monitor.InterruptionEvent). Strings are NUL-terminated and cut to
 * their buffers. */
struct nth_event {
	enum nth_kind kind;
	char event_id[128];	/* spot-itn-<sha256>, the scheduled EventId, rebalance-recommendation-... */
	char instance_id[32];
	char instance_type[64];
	char node_name[256];	/* the Node this event drains (monitor or queue lookup fills it) */
	char provider_id[160];
	char asg_name[256];
	char description[512];
	char state[32];		/* scheduled events: active, canceled, completed */
	char code[48];		/* scheduled events: system-reboot, instance-stop, ... */
	int64_t start_ns;	/* realtime; the drain starts at start - NODE_TERMINATION_GRACE_PERIOD */
	int64_t end_ns;		/* realtime; 0 when unknown */
	bool cordon_only;	/* this kind only cordons here (IMDS rebalance without draining) */
	bool uncordon_after_reboot; /* restart codes: label the node for the uncordon at boot */
	bool is_managed;	/* queue mode: the instance carries the managed tag */

	nth_pre_drain_fn pre_drain;
	nth_post_drain_fn post_drain;
	void *ctx;		/* the hooks' context */
	void (*ctx_free)(void *ctx); /* called by nth_event_clear */
};

void nth_event_clear(struct nth_event *ev);

/* The running handler: read-only after nth_new except where noted. */
struct nth {
	struct nth_config *cfg;
	struct kube_client *kube;
	struct kube_recorder *rec;  /* NULL unless EMIT_KUBERNETES_EVENTS */
	struct aws_imds *imds;	    /* NULL in queue mode */
	struct cancel *cancel;	    /* cancelled on SIGTERM/SIGINT */
	char account_id[32], instance_id[32], instance_type[64], region[32], zone[40], private_ip[64],
		local_hostname[256], public_hostname[256], public_ipv4[64], instance_life_cycle[32];
	char *webhook_template;	    /* the template read (WEBHOOK_TEMPLATE or _FILE) */
	char rebooted_event_id[128]; /* the event uncordoned after a reboot: ignored from then on */
	pthread_mutex_t lock;	    /* guards what follows */
	unsigned long drained, failed; /* counts of handled events (tests, bench) */
};

/* Acts on one event for ev->node_name, synchronously: pre-drain (the node's event-id label,
 * uncordon-after-reboot labels, exclude-from-LB label, the kind's taint when TAINT_NODE, the
 * event's pre_drain hook), cordon, then unless CORDON_ONLY or ev->cordon_only the drain (pods
 * evicted in parallel honouring PDBs, waiting until they are gone or NODE_TERMINATION_GRACE_PERIOD
 * passes), the out-of-service taint when asked, then the post_drain hook; Kubernetes events,
 * metrics (actions_total) and the webhook along the way. DRY_RUN logs what would be done.
 * 0 when done; -ENOENT when the Node does not exist (an explicit 404), -EAGAIN when the drain did
 * not finish (PDB, deadline), -ECANCELED on shutdown, other -errno. */
int nth_handle_event(struct nth *n, struct nth_event *ev);

/* A canceled or completed event (scheduled maintenance): if no other active event holds the node,
 * uncordon it and remove NTH's labels and taints. 0, or -errno. */
int nth_cancel_event(struct nth *n, struct nth_event *ev);

/* Whether ev->node_name carries ev's event-id label (NTH handled ev, perhaps in an earlier run):
 * 1 or 0, or -errno. */
int nth_node_marked(struct nth *n, const struct nth_event *ev);

/* At startup: if the node carries the UncordonAfterReboot action label and it rebooted since
 * (now - action-time >= uptime), uncordon it, remove NTH's labels and taints and keep its
 * event-id label in n->rebooted_event_id (the IMDS monitors ignore that event, which can still be
 * listed active after the reboot, as upstream does). 0, or -errno. */
int nth_uncordon_after_reboot(struct nth *n);

/* Checks the webhook settings (headers JSON, template fields) and reads the template file into
 * n->webhook_template; one line on stderr and -EINVAL when they are wrong. */
int nth_webhook_init(struct nth *n);
/* Renders the template for ev (exposed for tests). malloc'd string, or NULL with *err set. */
char *nth_webhook_render(const struct nth *n, const struct nth_event *ev, char *err, size_t errlen);

/* Sends the webhook for ev (after each drain attempt), if WEBHOOK_URL is set. */
int nth_webhook_send(struct nth *n, const struct nth_event *ev);

/* Records a Kubernetes event on the event's Node (no-op unless EMIT_KUBERNETES_EVENTS). */
void nth_node_event(struct nth *n, const struct nth_event *ev, bool warning, const char *reason,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Counts one action in actions_total{node_action,node_status} (and the deprecated
 * actions_node_total); status "success" or "error". */
void nth_metric_action(const char *action, const char *node, const char *event_id, int r);
/* Counts an error in events_error_total{event_error_where}. */
void nth_metric_error(const char *where);
/* Registers every metric (the counters without series yet, the gauges at 0), as upstream's
 * exporter shows them from the start. */
void nth_metrics_init(void);
/* Queue mode: nth_tagged_instances, and nth_tagged_nodes unless nodes < 0 (not counted). */
void nth_metric_tagged(long long instances, long long nodes);

/* The IMDS mode: runs the monitors until n->cancel is cancelled. 0, or -errno on a fatal error. */
int nth_imds_run(struct nth *n);

int nth_main(int argc, char **argv);
