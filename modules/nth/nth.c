/* aws-k8s nth: configuration (upstream's environment variables and flags), validation and the
 * main function. The monitors are in nth_imds*.c (IMDS mode) and nth_sqs*.c (queue mode); acting
 * on an event is nth_handle.c. */
#include "modules/nth/nth.h"
#include "modules/nth/nth_sqs.h"

#include <errno.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/imds.h"
#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/http/server.h"
#include "common/kube/config.h"
#include "common/kube/events.h"
#include "common/kube/rest.h"
#include "common/metrics/metrics.h"

static const char nth_usage[] =
	"The AWS node-termination-handler: drains a Node before EC2 interrupts its instance.\n"
	"IMDS mode (the default; a DaemonSet, NODE_NAME from spec.nodeName) polls the instance\n"
	"metadata for spot interruptions, scheduled maintenance, rebalance recommendations and the\n"
	"ASG target lifecycle state. Queue mode (ENABLE_SQS_TERMINATION_DRAINING=true, QUEUE_URL; a\n"
	"Deployment) reads EventBridge events from SQS. Every flag also reads the environment\n"
	"variable upstream reads ([$NAME] below); a flag on the command line wins.\n"
	"\n"
	"Also read from the environment: KUBECONFIG (else the in-cluster service account); in\n"
	"queue mode the AWS SDK's variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,\n"
	"AWS_SESSION_TOKEN, AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE (IRSA), AWS_PROFILE,\n"
	"AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, AWS_CONTAINER_CREDENTIALS_*_URI,\n"
	"AWS_DEFAULT_REGION, AWS_ENDPOINT_URL, AWS_CA_BUNDLE, AWS_MAX_ATTEMPTS; else the instance\n"
	"profile). The region is AWS_REGION, else the queue URL's.\n"
	"Served: /metrics on PROMETHEUS_SERVER_PORT (upstream's actions_total{node_action,\n"
	"node_status}, actions_node_total{+node_name,node_event_id}, events_error_total\n"
	"{event_error_where}, process_*); PROBES_SERVER_ENDPOINT on PROBES_SERVER_PORT\n"
	"({\"health\":\"OK\"}).";

static struct nth_config cfg;
static long long grace_period_deprecated;
static bool check_asg_tag_deprecated;
static char *managed_asg_tag_deprecated;

#define DEFAULT_TEMPLATE                                                                           \
	"{\"text\":\"[NTH][Instance Interruption] EventID: {{ .EventID }} - Kind: {{ .Kind }} - "  \
	"Instance: {{ .InstanceID }} - Node: {{ .NodeName }} - Description: {{ .Description }} - " \
	"Start Time: {{ .StartTime }}\"}"

/* clang-format off */
static const struct flag nth_flags[] = {
	{ "node-name", FLAG_STRING, &cfg.node_name, "", "NODE_NAME",
	  "The kubernetes node name." },
	{ "pod-name", FLAG_STRING, &cfg.pod_name, "", "POD_NAME",
	  "The name of the pod running the node-termination-handler (never evicted)." },
	{ "pod-namespace", FLAG_STRING, &cfg.pod_namespace, "", "NAMESPACE",
	  "The namespace of the pod running the node-termination-handler." },
	{ "metadata-url", FLAG_STRING, &cfg.metadata_url, "http://169.254.169.254",
	  "INSTANCE_METADATA_URL",
	  "The URL of EC2 instance metadata. This shouldn't need to be changed unless you are "
	  "testing." },
	{ "metadata-tries", FLAG_INT, &cfg.metadata_tries, "3", "METADATA_TRIES",
	  "The number of times to try requesting metadata.", 1, 100 },
	{ "kubernetes-service-host", FLAG_STRING, &cfg.kube_host, "", "KUBERNETES_SERVICE_HOST",
	  "[ADVANCED] The k8s service host to send api calls to." },
	{ "kubernetes-service-port", FLAG_STRING, &cfg.kube_port, "", "KUBERNETES_SERVICE_PORT",
	  "[ADVANCED] The k8s service port to send api calls to." },
	{ "kube-api-qps", FLAG_FLOAT, &cfg.kube_api_qps, "5", "KUBE_API_QPS",
	  "The QPS limit of the Kubernetes client." },
	{ "kube-api-burst", FLAG_INT, &cfg.kube_api_burst, "10", "KUBE_API_BURST",
	  "The burst of the Kubernetes client.", 1, 100000 },
	{ "use-apiserver-cache", FLAG_BOOL, &cfg.use_apiserver_cache, "false",
	  "USE_APISERVER_CACHE",
	  "If true, list pods from the API server's cache (resourceVersion=0)." },
	{ "enable-spot-interruption-draining", FLAG_BOOL, &cfg.enable_spot_itn, "true",
	  "ENABLE_SPOT_INTERRUPTION_DRAINING",
	  "If false, do not drain nodes when the spot interruption termination notice is received." },
	{ "enable-scheduled-event-draining", FLAG_BOOL, &cfg.enable_scheduled, "true",
	  "ENABLE_SCHEDULED_EVENT_DRAINING",
	  "If true, drain nodes before the maintenance window starts for an EC2 instance scheduled "
	  "event." },
	{ "enable-rebalance-monitoring", FLAG_BOOL, &cfg.enable_rebalance_monitoring, "false",
	  "ENABLE_REBALANCE_MONITORING",
	  "If true, cordon nodes when the rebalance recommendation notice is received." },
	{ "enable-rebalance-draining", FLAG_BOOL, &cfg.enable_rebalance_draining, "false",
	  "ENABLE_REBALANCE_DRAINING",
	  "If true, drain nodes when the rebalance recommendation notice is received." },
	{ "enable-asg-lifecycle-draining", FLAG_BOOL, &cfg.enable_asg_lifecycle, "false",
	  "ENABLE_ASG_LIFECYCLE_DRAINING",
	  "If true, drain nodes when the ASG target lifecycle state is Terminated." },
	{ "enable-sqs-termination-draining", FLAG_BOOL, &cfg.enable_sqs, "false",
	  "ENABLE_SQS_TERMINATION_DRAINING",
	  "If true, drain nodes when an SQS termination event is received (queue mode)." },
	{ "queue-url", FLAG_STRING, &cfg.queue_url, "", "QUEUE_URL",
	  "Listens for messages on the specified SQS queue URL." },
	{ "aws-region", FLAG_STRING, &cfg.aws_region, "", "AWS_REGION",
	  "If specified, use the AWS region for AWS API calls." },
	{ "aws-endpoint", FLAG_STRING, &cfg.aws_endpoint, "", "AWS_ENDPOINT",
	  "[testing] If specified, use the AWS endpoint to make API calls." },
	{ "check-tag-before-draining", FLAG_BOOL, &cfg.check_tag_before_draining, "true",
	  "CHECK_TAG_BEFORE_DRAINING",
	  "If true, check that the instance is tagged with the managed tag before draining." },
	{ "check-asg-tag-before-draining", FLAG_BOOL, &check_asg_tag_deprecated, "true",
	  "CHECK_ASG_TAG_BEFORE_DRAINING",
	  "[DEPRECATED] * Use check-tag-before-draining instead *." },
	{ "managed-tag", FLAG_STRING, &cfg.managed_tag, "aws-node-termination-handler/managed",
	  "MANAGED_TAG",
	  "Sets the tag to check for on instances that is propogated from the ASG before taking "
	  "action." },
	{ "managed-asg-tag", FLAG_STRING, &managed_asg_tag_deprecated, "", "MANAGED_ASG_TAG",
	  "[DEPRECATED] * Use managed-tag instead *." },
	{ "use-provider-id", FLAG_BOOL, &cfg.use_provider_id, "false", "USE_PROVIDER_ID",
	  "If true, fetch node name through Kubernetes node spec ProviderID instead of AWS event "
	  "PrivateDnsHostname." },
	{ "delete-sqs-msg-if-node-not-found", FLAG_BOOL, &cfg.delete_sqs_msg_if_node_not_found,
	  "false", "DELETE_SQS_MSG_IF_NODE_NOT_FOUND",
	  "If true, delete SQS Messages from the SQS Queue if the targeted node(s) are not found." },
	{ "sqs-msg-visibility-timeout-sec", FLAG_INT, &cfg.sqs_visibility_timeout_s, "20",
	  "SQS_MSG_VISIBILITY_TIMEOUT_SEC",
	  "The visibility timeout of received SQS messages, in seconds.", 1, 119 },
	{ "heartbeat-interval", FLAG_INT, &cfg.heartbeat_interval_s, "-1", "HEARTBEAT_INTERVAL",
	  "The time period in seconds between consecutive heartbeat signals. Valid range: 30-3600 "
	  "seconds (30 seconds to 1 hour).", -1, 3600 },
	{ "heartbeat-until", FLAG_INT, &cfg.heartbeat_until_s, "-1", "HEARTBEAT_UNTIL",
	  "The duration in seconds over which heartbeat signals are sent. Valid range: 60-172800 "
	  "seconds (1 minute to 48 hours).", -1, 172800 },
	{ "complete-lifecycle-action-delay-seconds", FLAG_INT,
	  &cfg.complete_lifecycle_action_delay_s, "-1", "COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS",
	  "Pauses for the duration in seconds before completing the ASG lifecycle action; -1: no "
	  "pause.", -1, 86400 },
	{ "workers", FLAG_INT, &cfg.workers, "10", "WORKERS",
	  "The maximum amount of parallel event processors.", 1, 1000 },
	{ "dry-run", FLAG_BOOL, &cfg.dry_run, "false", "DRY_RUN",
	  "If true, only log if a node would be drained." },
	{ "cordon-only", FLAG_BOOL, &cfg.cordon_only, "false", "CORDON_ONLY",
	  "If true, nodes will be cordoned but not drained when an interruption event occurs." },
	{ "taint-node", FLAG_BOOL, &cfg.taint_node, "false", "TAINT_NODE",
	  "If true, nodes will be tainted when an interruption event occurs." },
	{ "taint-effect", FLAG_STRING, &cfg.taint_effect, "NoSchedule", "TAINT_EFFECT",
	  "Sets the effect when a node is tainted.", 0, 0,
	  "NoSchedule,PreferNoSchedule,NoExecute" },
	{ "exclude-from-load-balancers", FLAG_BOOL, &cfg.exclude_from_lb, "false",
	  "EXCLUDE_FROM_LOAD_BALANCERS",
	  "If true, nodes will be marked for exclusion from load balancers when an interruption "
	  "event occurs." },
	{ "enable-out-of-service-taint", FLAG_BOOL, &cfg.out_of_service_taint, "false",
	  "ENABLE_OUT_OF_SERVICE_TAINT",
	  "If true, nodes will be tainted with node.kubernetes.io/out-of-service=nodeshutdown:"
	  "NoExecute after the drain." },
	{ "ignore-daemon-sets", FLAG_BOOL, &cfg.ignore_daemon_sets, "true", "IGNORE_DAEMON_SETS",
	  "If true, ignore daemon sets and drain other pods when a spot interrupt is received." },
	{ "delete-local-data", FLAG_BOOL, &cfg.delete_local_data, "true", "DELETE_LOCAL_DATA",
	  "If true, do not drain pods that are using local node storage in emptyDir." },
	{ "grace-period", FLAG_INT, &grace_period_deprecated, "-1", "GRACE_PERIOD",
	  "[DEPRECATED] * Use pod-termination-grace-period instead *.", -1,
	  INT32_MAX },
	{ "pod-termination-grace-period", FLAG_INT, &cfg.pod_termination_grace_s, "-1",
	  "POD_TERMINATION_GRACE_PERIOD",
	  "Period of time in seconds given to each POD to terminate gracefully. If negative, the "
	  "default value specified in the pod will be used.", -1,
	  INT32_MAX },
	{ "node-termination-grace-period", FLAG_INT, &cfg.node_termination_grace_s, "120",
	  "NODE_TERMINATION_GRACE_PERIOD",
	  "Period of time in seconds given to each NODE to terminate gracefully. Node draining "
	  "will be scheduled based on this value.", 0, INT32_MAX },
	{ "uptime-from-file", FLAG_STRING, &cfg.uptime_from_file, "", "UPTIME_FROM_FILE",
	  "If specified, read system uptime from the file path (useful for testing)." },
	{ "webhook-url", FLAG_STRING, &cfg.webhook_url, "", "WEBHOOK_URL",
	  "If specified, posts event data to URL upon instance interruption action." },
	{ "webhook-proxy", FLAG_STRING, &cfg.webhook_proxy, "", "WEBHOOK_PROXY",
	  "If specified, uses the HTTP(S) proxy to send webhooks." },
	{ "webhook-headers", FLAG_STRING, &cfg.webhook_headers,
	  "{\"Content-type\":\"application/json\"}", "WEBHOOK_HEADERS",
	  "If specified, replaces the default webhook headers (a JSON object)." },
	{ "webhook-template", FLAG_STRING, &cfg.webhook_template, DEFAULT_TEMPLATE,
	  "WEBHOOK_TEMPLATE",
	  "If specified, replaces the default webhook message template." },
	{ "webhook-template-file", FLAG_STRING, &cfg.webhook_template_file, "",
	  "WEBHOOK_TEMPLATE_FILE",
	  "If specified, replaces the default webhook message template with content from template "
	  "file." },
	{ "emit-kubernetes-events", FLAG_BOOL, &cfg.emit_events, "false", "EMIT_KUBERNETES_EVENTS",
	  "If true, Kubernetes events will be emitted when interruption events are received and "
	  "when actions are taken on Kubernetes nodes." },
	{ "kubernetes-events-extra-annotations", FLAG_STRING, &cfg.events_extra_annotations, "",
	  "KUBERNETES_EVENTS_EXTRA_ANNOTATIONS",
	  "A comma-separated list of key=value extra annotations to attach to all emitted "
	  "Kubernetes events." },
	{ "enable-prometheus-server", FLAG_BOOL, &cfg.enable_prometheus, "false",
	  "ENABLE_PROMETHEUS_SERVER",
	  "If true, a http server is used for exposing prometheus metrics in /metrics endpoint." },
	{ "prometheus-server-port", FLAG_INT, &cfg.prometheus_port, "9092",
	  "PROMETHEUS_SERVER_PORT", "The port for running the prometheus http server.", 0, 65535 },
	{ "enable-probes-server", FLAG_BOOL, &cfg.enable_probes, "false", "ENABLE_PROBES_SERVER",
	  "If true, a http server is used for exposing probes in /healthz endpoint." },
	{ "probes-server-port", FLAG_INT, &cfg.probes_port, "8080", "PROBES_SERVER_PORT",
	  "The port for running the probes http server.", 0, 65535 },
	{ "probes-server-endpoint", FLAG_STRING, &cfg.probes_endpoint, "/healthz",
	  "PROBES_SERVER_ENDPOINT",
	  "If specified, use this endpoint to make liveness probe." },
	{ "json-logging", FLAG_BOOL, &cfg.json_logging, "false", "JSON_LOGGING",
	  "If true, use JSON-formatted logs instead of human readable logs." },
	{ "log-level", FLAG_STRING, &cfg.log_level, "info", "LOG_LEVEL",
	  "Sets the log level (INFO, DEBUG, or ERROR).", 0, 0,
	  "info,debug,warn,error,INFO,DEBUG,WARN,ERROR" },
	{ "log-format-version", FLAG_INT, &cfg.log_format_version, "1", "LOG_FORMAT_VERSION",
	  "Sets the log format version (1 or 2).", 1, 2 },
	{ "poll-interval", FLAG_DURATION, &cfg.poll_interval_ns, "2s", NULL,
	  "How often the IMDS monitors poll (upstream: 2s; for tests)." },
	LOG_FLAGS,
	{ NULL },
};
/* clang-format on */

/* Upstream's rules: a missing node name, heartbeats out of range or without queue mode, queue
 * mode without a queue. One line naming the setting; -EINVAL. */
static int nth_config_check(struct nth_config *c)
{
	if (!c->enable_sqs && !*c->node_name) {
		fprintf(stderr, "aws-k8s nth: you must provide a node-name to the CLI or NODE_NAME "
				"environment variable\n");
		return -EINVAL;
	}
	if (c->enable_sqs && !*c->queue_url) {
		fprintf(stderr, "aws-k8s nth: queue mode (ENABLE_SQS_TERMINATION_DRAINING) needs "
				"QUEUE_URL (--queue-url)\n");
		return -EINVAL;
	}
	if (c->heartbeat_interval_s != -1 || c->heartbeat_until_s != -1) {
		if (!c->enable_sqs) {
			fprintf(stderr, "aws-k8s nth: heartbeats (HEARTBEAT_INTERVAL, HEARTBEAT_UNTIL) "
					"are only for queue mode\n");
			return -EINVAL;
		}
		if (c->heartbeat_interval_s < 30 || c->heartbeat_interval_s > 3600) {
			fprintf(stderr, "aws-k8s nth: invalid heartbeat-interval %lld: the range is "
					"30-3600 seconds\n",
				c->heartbeat_interval_s);
			return -EINVAL;
		}
		if (c->heartbeat_until_s == -1)
			c->heartbeat_until_s = 172800;
		if (c->heartbeat_until_s < 60 || c->heartbeat_until_s < c->heartbeat_interval_s) {
			fprintf(stderr, "aws-k8s nth: invalid heartbeat-until %lld: the range is "
					"60-172800 seconds, and at least heartbeat-interval\n",
				c->heartbeat_until_s);
			return -EINVAL;
		}
	}
	if (c->poll_interval_ns <= 0) {
		fprintf(stderr, "aws-k8s nth: invalid poll-interval: must be above 0\n");
		return -EINVAL;
	}
	return 0;
}

/* Deprecated names upstream still honours: GRACE_PERIOD when POD_TERMINATION_GRACE_PERIOD is
 * not given, CHECK_ASG_TAG_BEFORE_DRAINING=false, MANAGED_ASG_TAG. */
static void nth_config_deprecated(struct nth_config *c)
{
	if (grace_period_deprecated != -1 && c->pod_termination_grace_s == -1) {
		log_warn("deprecated argument \"grace-period\" was provided: use "
			 "\"pod-termination-grace-period\" instead");
		c->pod_termination_grace_s = grace_period_deprecated;
	}
	if (!check_asg_tag_deprecated)
		c->check_tag_before_draining = false;
	if (*managed_asg_tag_deprecated &&
	    strcmp(c->managed_tag, "aws-node-termination-handler/managed") == 0) {
		free(c->managed_tag);
		c->managed_tag = strdup(managed_asg_tag_deprecated);
	}
}

/* LOG_LEVEL and JSON_LOGGING on top of --v and --logging-format. */
static void nth_config_logging(const struct nth_config *c)
{
	if (c->json_logging)
		log_format = LOG_FORMAT_JSON;
	if (strcasecmp(c->log_level, "debug") == 0 && log_verbosity < 4)
		log_verbosity = 4;
}

/* The /healthz of the probes server: upstream's body. */
static int probe_healthz(void *ud, const struct http_server_request *req,
			 struct http_server_reply *rep)
{
	rep->content_type = "application/json";
	return http_reply_text(rep, 200, "{\"health\":\"OK\"}");
}

static int start_server(long long port, const char *what, struct http_server **ret)
{
	char bind[32];
	int r;

	str_printf(bind, sizeof(bind), ":%lld", port);
	struct http_server_opts o = { .bind = bind };
	if ((r = http_server_new(&o, ret)) < 0)
		return log_error_errno(r, "failed to create the server", KV_S("server", what));
	if (strcmp(what, "probes") == 0)
		r = http_server_handle(*ret, cfg.probes_endpoint, false, probe_healthz, NULL);
	else
		r = http_server_add_standard(*ret);
	if (r < 0 || (r = http_server_start(*ret)) < 0)
		return log_error_errno(r, "failed to start the server", KV_S("server", what),
				       KV_S("address", bind));
	log_info("serving", KV_S("server", what), KV_I("port", http_server_port(*ret)));
	return 0;
}

/* Reads what upstream reads at startup: the identity document, instance-life-cycle,
 * local-hostname, public-hostname and public-ipv4 (the last two may be absent). */
static int read_metadata(struct nth *n)
{
	struct aws_imds_identity id;
	const struct {
		const char *path;
		char *dst;
		size_t n;
		bool optional;
	} more[] = {
		{ "meta-data/instance-life-cycle", n->instance_life_cycle,
		  sizeof(n->instance_life_cycle), true },
		{ "meta-data/local-hostname", n->local_hostname, sizeof(n->local_hostname), true },
		{ "meta-data/public-hostname", n->public_hostname, sizeof(n->public_hostname), true },
		{ "meta-data/public-ipv4", n->public_ipv4, sizeof(n->public_ipv4), true },
	};
	int r;

	if ((r = aws_imds_identity(n->imds, &id)) < 0)
		return log_error_errno(r, "failed to read the instance identity document",
				       KV_S("metadata_url", cfg.metadata_url));
	str_copy(n->account_id, sizeof(n->account_id), id.account_id);
	str_copy(n->instance_id, sizeof(n->instance_id), id.instance_id);
	str_copy(n->instance_type, sizeof(n->instance_type), id.instance_type);
	str_copy(n->region, sizeof(n->region), id.region);
	str_copy(n->zone, sizeof(n->zone), id.availability_zone);
	str_copy(n->private_ip, sizeof(n->private_ip), id.private_ip);
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
		char *v = NULL;
		if ((r = aws_imds_get(n->imds, more[i].path, &v)) == 0)
			str_copy(more[i].dst, more[i].n, v);
		else if (r != -ENOENT)
			log_warn("failed to read metadata", KV_S("path", more[i].path), KV_E(r));
		free(v);
	}
	log_info("instance metadata", KV_S("instance", n->instance_id),
		 KV_S("type", n->instance_type), KV_S("zone", n->zone),
		 KV_S("life_cycle", n->instance_life_cycle), KV_S("local_hostname", n->local_hostname));
	return 0;
}

static int kube_setup(struct nth *n)
{
	struct kube_config *kc = NULL;
	char err[512];
	int r;

	if (*cfg.kube_host)
		setenv("KUBERNETES_SERVICE_HOST", cfg.kube_host, 1);
	if (*cfg.kube_port)
		setenv("KUBERNETES_SERVICE_PORT", cfg.kube_port, 1);
	if ((r = kube_config_load(&(struct kube_config_opts){ 0 }, &kc, err, sizeof(err))) < 0) {
		log_error("no Kubernetes configuration", KV_S("error", err), KV_E(r));
		return r;
	}
	struct kube_client_opts co = { .component = "node-termination-handler",
				       .qps = cfg.kube_api_qps,
				       .burst = (int)cfg.kube_api_burst,
				       .cancel = n->cancel };
	r = kube_client_new(kc, &co, &n->kube);
	kube_config_free(kc);
	if (r < 0) {
		log_error("failed to create the Kubernetes client", KV_E(r));
		return r;
	}
	if (!cfg.emit_events)
		return 0;
	struct kube_recorder_opts ro = { .component = "aws-node-termination-handler",
					 .host = cfg.node_name };
	if ((r = kube_recorder_new(n->kube, &ro, &n->rec)) < 0)
		log_error("failed to create the event recorder", KV_E(r));
	return r < 0 ? r : 0;
}

/* Upstream retries the uncordon-after-reboot check for 8 s at startup. */
static void uncordon_at_start(struct nth *n)
{
	int r = -EAGAIN;

	for (int i = 0; i < 4 && r < 0 && r != -ENOENT; i++) {
		if (i > 0 && cancel_wait(n->cancel, 2000000000LL))
			return;
		r = nth_uncordon_after_reboot(n);
	}
	if (r < 0)
		log_error("failed to check the uncordon after a reboot", KV_S("node", cfg.node_name),
			  KV_E(r));
}

static int run_imds(struct nth *n)
{
	struct aws_imds_opts io = { .endpoint = cfg.metadata_url,
				    .attempts = (int)cfg.metadata_tries,
				    .timeout_ns = 2000000000LL,
				    .token_ttl_s = 3600 };
	int r;

	if ((r = aws_imds_new(&io, &n->imds)) < 0)
		return log_error_errno(r, "failed to create the metadata client",
				       KV_S("metadata_url", cfg.metadata_url));
	if ((r = read_metadata(n)) < 0)
		return r;
	uncordon_at_start(n);
	return nth_imds_run(n);
}

/* Queue mode: nth_sqs*.c. */
static int run_queue(struct nth *n)
{
	return nth_sqs_run(n);
}

int nth_main(int argc, char **argv)
{
	struct http_server *prom = NULL, *probes = NULL;
	struct nth nth = { .cfg = &cfg, .cancel = cancel_root() };
	int r, n = flags_parse("nth", nth_usage, nth_flags, argc, argv);

	if (n < 0)
		return flags_exit_code(n);
	pthread_mutex_init(&nth.lock, NULL);
	if (n > 0) {
		fprintf(stderr, "aws-k8s nth: unexpected argument '%s'\n", argv[0]);
		r = 2;
		goto out;
	}
	if (nth_config_check(&cfg) < 0) {
		r = 2;
		goto out;
	}
	nth_config_deprecated(&cfg);
	nth_config_logging(&cfg);
	if (!cfg.managed_tag || nth_webhook_init(&nth) < 0) {
		r = 2;
		goto out;
	}
	log_info("aws-node-termination-handler starting", KV_S("node", cfg.node_name),
		 KV_S("mode", cfg.enable_sqs ? "queue" : "imds"), KV_B("dry_run", cfg.dry_run),
		 KV_B("cordon_only", cfg.cordon_only), KV_B("taint_node", cfg.taint_node),
		 KV_I("node_termination_grace_period", cfg.node_termination_grace_s),
		 KV_I("pod_termination_grace_period", cfg.pod_termination_grace_s));
	r = 1;
	if (cfg.enable_prometheus) {
		metrics_register_process();
		nth_metrics_init();
		if (start_server(cfg.prometheus_port, "prometheus", &prom) < 0)
			goto out;
	}
	if (cfg.enable_probes && start_server(cfg.probes_port, "probes", &probes) < 0)
		goto out;
	if (kube_setup(&nth) < 0)
		goto out;
	int rr = cfg.enable_sqs ? run_queue(&nth) : run_imds(&nth);
	r = rr < 0 ? 1 : 0;
	log_info("aws-node-termination-handler stopped", KV_I("drained", nth.drained),
		 KV_I("failed", nth.failed));
out:
	kube_recorder_free(nth.rec);
	kube_client_free(nth.kube);
	aws_imds_free(nth.imds);
	http_server_free(probes);
	http_server_free(prom);
	free(nth.webhook_template);
	pthread_mutex_destroy(&nth.lock);
	flags_free(nth_flags);
	return r;
}
