/* aws-k8s nth: configuration (upstream's environment variables and flags), validation and the
 * main function. The monitors are in nth_imds*.c (IMDS mode) and nth_sqs*.c (queue mode); acting
 * on an event is nth_handle.c. */
#include "modules/nth/nth.h"

#include <errno.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/flags.h"
#include "common/base/log.h"

static const char nth_usage[] =
	"The AWS node-termination-handler: drains a Node before EC2 interrupts its instance.\n"
	"IMDS mode (the default; a DaemonSet, NODE_NAME from spec.nodeName) polls the instance\n"
	"metadata for spot interruptions, scheduled maintenance, rebalance recommendations and the\n"
	"ASG target lifecycle state. Queue mode (ENABLE_SQS_TERMINATION_DRAINING=true, QUEUE_URL; a\n"
	"Deployment) reads EventBridge events from SQS. Every flag also reads the environment\n"
	"variable upstream reads ([$NAME] below); a flag on the command line wins.";

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
	{ "pod-namespace", FLAG_STRING, &cfg.pod_namespace, "", "POD_NAMESPACE",
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
	{ "enable-asg-lifecycle-draining", FLAG_BOOL, &cfg.enable_asg_lifecycle, "true",
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

int nth_main(int argc, char **argv)
{
	int r, n = flags_parse("nth", nth_usage, nth_flags, argc, argv);

	if (n < 0)
		return flags_exit_code(n);
	if (n > 0) {
		fprintf(stderr, "aws-k8s nth: unexpected argument '%s'\n", argv[0]);
		r = 2;
		goto out;
	}
	if (nth_config_check(&cfg) < 0 || !cfg.managed_tag) {
		r = 2;
		goto out;
	}
	nth_config_deprecated(&cfg);
	nth_config_logging(&cfg);
	if (!cfg.managed_tag) {
		r = 1;
		goto out;
	}
	fprintf(stderr, "aws-k8s nth: %s mode is not built yet in this aws-k8s\n",
		cfg.enable_sqs ? "queue (SQS)" : "IMDS");
	r = 1;
out:
	flags_free(nth_flags);
	return r;
}
