/* aws-k8s csi-controller: the EBS CSI driver's controller plugin (the upstream driver's
 * `aws-ebs-csi-driver controller`). This file holds the usage text, the flag table and main,
 * which wires the flags into the service (csi_controller_service.h) and serves it through the
 * gRPC adapter (csi_controller_grpc.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/tags.h"
#include "common/base/buf.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/csi/plugin.h"
#include "common/kube/kubeflags.h"
#include "modules/csi-controller/csi_controller.h"
#include "modules/csi-controller/csi_controller_grpc.h"
#include "modules/csi-controller/csi_controller_internal.h"

#define CTRL_MAX_EXTRA_TAGS 256

static const char ctrl_usage[] =
    "Serves the CSI Identity and Controller services of the EBS CSI driver (ebs.csi.aws.com)\n"
    "on --endpoint: volumes, attachments, snapshots, expansion and modification through the\n"
    "EC2 API. A drop-in for the upstream driver's `controller` mode: same flags, same\n"
    "environment (AWS_REGION, AWS_EC2_ENDPOINT, the AWS credential chain), same tags. The\n"
    "upstream mode argument `controller` is accepted (`aws-ebs-csi-driver controller ...`\n"
    "through a symlink, or `aws-k8s ebs-csi-driver controller ...`); --version prints the\n"
    "upstream driver's JSON. The region comes from AWS_REGION; else from --metadata-sources\n"
    "in order: imds (the instance metadata service, retried for --metadata-retry-timeout),\n"
    "kubernetes (the Node $CSI_NODE_NAME through --kubeconfig or the in-cluster config: its\n"
    "topology.kubernetes.io/region label or the zone of its providerID), metadata-labeler\n"
    "(the same, when the Node carries the metadata labeler's counts). Without a region it\n"
    "exits 1, naming each source's failure. The metadata labeler itself is\n"
    "`aws-k8s ebs-csi-driver metadataLabeler`.";

static char **f_extra_tags, **f_extra_volume_tags;
static char *f_cluster_id, *f_user_agent;
static bool f_sdk_debug, f_warn_invalid_tag, f_batching, f_deprecated_metrics;
static int64_t f_modify_timeout, f_imds_retry, f_detach_metric_after;
static char **f_sources;

const struct flag csi_controller_flags[] = {
    CSI_COMMON_FLAGS,
    {"extra-tags", FLAG_MAP, &f_extra_tags, NULL, NULL,
     "Extra tags to attach to each dynamically provisioned resource (key1=value1,key2=value2)."},
    {"extra-volume-tags", FLAG_MAP, &f_extra_volume_tags, NULL, NULL,
     "DEPRECATED: use --extra-tags."},
    {"k8s-tag-cluster-id", FLAG_STRING, &f_cluster_id, "", NULL,
     "ID of the Kubernetes cluster used for tagging provisioned EBS volumes (optional)."},
    {"aws-sdk-debug-log", FLAG_BOOL, &f_sdk_debug, "false", NULL, "Log AWS calls (as -v 4 does)."},
    {"warn-on-invalid-tag", FLAG_BOOL, &f_warn_invalid_tag, "false", NULL,
     "Warn and skip an invalid tag instead of failing the request."},
    {"user-agent-extra", FLAG_STRING, &f_user_agent, "", NULL,
     "Extra string appended to the user agent."},
    {"batching", FLAG_BOOL, &f_batching, "true", NULL,
     "Merge concurrent Describe calls by ID into one call (on by default here)."},
    {"modify-volume-request-handler-timeout", FLAG_DURATION, &f_modify_timeout, "2s", NULL,
     "Window in which ControllerExpandVolume and ControllerModifyVolume calls for one volume "
     "are merged into one ModifyVolume."},
    {"deprecated-metrics", FLAG_BOOL, &f_deprecated_metrics, "false", NULL,
     "Emit the deprecated metric names too.", .no_effect = true},
    {"enable-node-local-volumes", FLAG_BOOL, NULL, "false", NULL,
     "Enable node-local volumes (volume handles local-ebs://...).", .no_effect = true},
    {"kubeconfig", FLAG_STRING, &kube_flag_kubeconfig, NULL, NULL,
     "Absolute path to a kubeconfig file. The default is the empty string, which causes the "
     "in-cluster config to be used (for the kubernetes metadata source)."},
    {"metadata-sources", FLAG_STRLIST, &f_sources, "imds,kubernetes", NULL,
     "Which sources are asked for instance metadata (the region when AWS_REGION is unset), "
     "in order: 'imds', 'kubernetes', 'metadata-labeler' (the Node's labels, as kubernetes, "
     "and the metadata labeler's count labels).",
     .choices = "imds,kubernetes,metadata-labeler"},
    {"metadata-retry-timeout", FLAG_DURATION, &f_imds_retry, "10s", NULL,
     "(aws-k8s) How long the instance metadata service is retried, with backoff, before the "
     "next metadata source is asked."},
    {"detach-pending-metric-after", FLAG_DURATION, &f_detach_metric_after, "60s", NULL,
     "(aws-k8s) A detach still pending after this long shows in the metric "
     "aws_ebs_csi_ec2_detach_pending_seconds_total (upstream: 60s, fixed)."},
    LOG_FLAGS,
    {NULL},
};

/* --extra-tags key=value,... into the controller's tags (a key given twice keeps the last). */
static int push_tags(struct csi_ctrl *c, char **kv)
{
	for (char **p = kv; p && *p; p++) {
		const char *eq = strchr(*p, '=');
		char err[256];
		_cleanup_free_ char *key = eq ? strndup(*p, (size_t)(eq - *p)) : NULL;
		if (!eq)
			continue;
		if (!key)
			return -ENOMEM;
		if (csi_tag_check(key, eq + 1, err, sizeof(err)) < 0) {
			fprintf(stderr, "aws-k8s csi-controller: --extra-tags: %s\n", err);
			return -EINVAL;
		}
		if (csi_kv_set(&c->extra_tags, &c->n_extra_tags, CTRL_MAX_EXTRA_TAGS, key, eq + 1) <
		    0)
			return -ENOMEM;
	}
	return 0;
}

int csi_controller_configure(struct csi_ctrl *c, const char *component)
{
	return csi_controller_configure_region(c, component, NULL);
}

int csi_controller_configure_region(struct csi_ctrl *c, const char *component,
				    const char *known_region)
{
	char ua[160], err[256];
	int r;

	if (f_sdk_debug && log_verbosity < 4)
		log_verbosity = 4;
	if (push_tags(c, f_extra_volume_tags) < 0 || push_tags(c, f_extra_tags) < 0)
		return 2;
	c->cluster_id = f_cluster_id && *f_cluster_id ? f_cluster_id : NULL;
	if (c->cluster_id && aws_cluster_id_check(c->cluster_id, err, sizeof(err)) < 0) {
		/* the tag key kubernetes.io/cluster/<ID> must be one AWS accepts */
		fprintf(stderr, "aws-k8s %s: --k8s-tag-cluster-id: %s\n", component, err);
		return 2;
	}
	c->tag_opts.warn_on_invalid_tag = f_warn_invalid_tag;
	c->modify_window_ns = f_modify_timeout;
	c->batching = f_batching;
	c->detach_metric_after_ns = f_detach_metric_after > 0 ? f_detach_metric_after : -1;
	/* the region: AWS_REGION, else the first of --metadata-sources that answers */
	const char *env_region = getenv("AWS_REGION");
	char region[CSI_REGION_MAX] = "", why[2048];
	if ((!env_region || !*env_region) && known_region && *known_region) {
		snprintf(region, sizeof(region), "%s", known_region);
		log_info("region from the node's metadata", KV_S("region", region));
	} else if (!env_region || !*env_region) {
		struct csi_ctrl_meta_opts mo = {.sources = f_sources,
						.node_name = getenv("CSI_NODE_NAME"),
						.driver = csi_flags.driver_name,
						.imds_budget_ns = f_imds_retry};
		if ((r = csi_ctrl_find_region(&mo, region, why, sizeof(why))) < 0) {
			log_error("could not determine the region from any metadata source; set "
				  "AWS_REGION, or make a source of --metadata-sources answer",
				  KV_S("sources", why), KV_E(r));
			return 1;
		}
	}
	snprintf(ua, sizeof(ua), "%s%s%s", component, f_user_agent && *f_user_agent ? " " : "",
		 f_user_agent ? f_user_agent : "");
	/* the controller counts its calls in the EBS CSI driver's names (csi_controller_ec2.c) */
	aws_metrics_family_set(AWS_METRICS_OWN);
	if ((r = csi_ctrl_setup(c, &(struct aws_client_opts){.user_agent = ua,
							    .region = region[0] ? region : NULL})) < 0) {
		log_error("failed to set up the controller (AWS client, region, AWS_EC2_ENDPOINT)",
			  KV_E(r));
		return 1;
	}
	return 0;
}

int csi_controller_main(int argc, char **argv)
{
	struct csi_ctrl c = {0};
	struct csi_identity id = {.controller = true, .probe = csi_ctrl_probe, .probe_ud = &c};
	int r, n;

	n = flags_parse("csi-controller", ctrl_usage, csi_controller_flags, argc, argv);
	if (n < 0)
		return flags_exit_code(n);
	if (n > 1 || (n == 1 && strcmp(argv[0], "controller") != 0)) {
		fprintf(stderr,
			"aws-k8s csi-controller: unexpected argument '%s' (the mode is always "
			"controller; "
			"run csi-node for the node service)\n",
			n > 1 ? argv[1] : argv[0]);
		flags_free(csi_controller_flags);
		return 2;
	}
	if ((r = csi_controller_configure(&c, "csi-controller")) == 0)
		r = csi_serve("csi-controller", &id, csi_ctrl_methods, &c);
	csi_ctrl_release(&c);
	flags_free(csi_controller_flags);
	return r;
}
