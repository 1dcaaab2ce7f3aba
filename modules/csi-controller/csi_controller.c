/* aws-k8s csi-controller: the EBS CSI driver's controller service (the upstream driver's
 * `aws-ebs-csi-driver controller`), with its flags and metrics. The handlers live in
 * csi_controller_{volume,publish,modify,snapshot}.c; this file sets things up. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/batch.h"
#include "common/aws/client.h"
#include "common/aws/ids.h"
#include "common/aws/query.h"
#include "common/aws/tags.h"
#include "common/base/flags.h"
#include "common/base/keylock.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/csi/plugin.h"
#include "common/metrics/metrics.h"
#include "modules/csi-controller/csi_controller.h"
#include "modules/csi-controller/csi_controller_internal.h"

static const char ctrl_usage[] =
    "Serves the CSI Identity and Controller services of the EBS CSI driver (ebs.csi.aws.com)\n"
    "on --endpoint: volumes, attachments, snapshots, expansion and modification through the\n"
    "EC2 API. A drop-in for the upstream driver's `controller` mode: same flags, same\n"
    "environment (AWS_REGION, AWS_EC2_ENDPOINT, the AWS credential chain), same tags. The\n"
    "upstream mode argument `controller` is accepted and ignored.";

static char **f_extra_tags, **f_extra_volume_tags;
static char *f_cluster_id, *f_user_agent;
static bool f_sdk_debug, f_warn_invalid_tag, f_batching, f_deprecated_metrics;
static int64_t f_modify_timeout;

static const struct flag ctrl_flags[] = {
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
     "Accepted for compatibility; no effect."},
    LOG_FLAGS,
    {NULL},
};

/* ---- helpers shared by the handlers ---- */

int ctrl_inflight_add(struct csi_ctrl *c, const char *key)
{
	return keylock_try(c->inflight, key);
}

void ctrl_inflight_del(struct csi_ctrl *c, const char *key)
{
	keylock_release(c->inflight, key);
}

bool ctrl_sleep(struct rpc_call *call, int64_t ns)
{
	int64_t left = rpc_call_time_left_ns(call), until;

	if (ns > left - 50 * NSEC_PER_MSEC)
		ns = left - 50 * NSEC_PER_MSEC;
	until = now_mono_ns() + ns;
	while (!rpc_call_stopping(call)) {
		int64_t now = now_mono_ns();
		if (now >= until)
			return true;
		sleep_ns(until - now < 20 * NSEC_PER_MSEC ? until - now : 20 * NSEC_PER_MSEC);
	}
	return false;
}

const char *ctrl_id_str(struct rpc_call *call, const char *id)
{
	char esc[CTRL_ID_STR_MAX];
	const char *s = rpc_call_strdup(call, aws_value_escape(id, esc, sizeof(esc)));

	return s ? s : "";
}

int ctrl_bad_id(struct rpc_call *call, const char *what, const char *id)
{
	return rpc_call_error(call, RPC_INVALID_ARGUMENT, "%s \"%s\" is malformed", what,
			      ctrl_id_str(call, id));
}

int ctrl_aws_fail(struct rpc_call *call, int r, const struct aws_error *e, const char *what,
		  int not_found_code, int fallback_code)
{
	char msg[768];
	int code = fallback_code;

	aws_error_str(e, msg, sizeof(msg));
	switch (r) {
	case -ENOENT:
		code = not_found_code;
		break;
	case -EAGAIN:
	case -ETIMEDOUT:
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -ECONNABORTED:
	case -EPIPE:
		code = RPC_UNAVAILABLE;
		break;
	default:
		break;
	}
	return rpc_call_error(call, code, "%s: %s", what, *msg ? msg : strerror(-r));
}

struct csi_kv *ctrl_map_kv(struct rpc_call *call, ProtobufCMessage *const *entries, size_t n)
{
	struct csi_kv *kv = rpc_call_alloc(call, (n ? n : 1) * sizeof(*kv));

	if (!kv)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const Csi__V1__CreateVolumeRequest__ParametersEntry *e = (const void *)entries[i];
		kv[i].key = e->key;
		kv[i].value = e->value;
	}
	return kv;
}

/* ---- small handlers ---- */

static int get_capabilities(struct rpc_call *call, const ProtobufCMessage *in,
			    ProtobufCMessage **out)
{
	static const int caps[] = {
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES_PUBLISHED_NODES,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_SNAPSHOT,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_SNAPSHOTS,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CLONE_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__MODIFY_VOLUME,
	};
	Csi__V1__ControllerGetCapabilitiesResponse *rep =
	    rpc_call_new(call, &csi__v1__controller_get_capabilities_response__descriptor);

	if (!rep)
		return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
	for (size_t i = 0; i < ARRAY_SIZE(caps); i++) {
		Csi__V1__ControllerServiceCapability *cap =
		    rpc_call_new(call, &csi__v1__controller_service_capability__descriptor);
		Csi__V1__ControllerServiceCapability__RPC *rpc =
		    rpc_call_new(call, &csi__v1__controller_service_capability__rpc__descriptor);
		if (!cap || !rpc)
			return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		rpc->type = caps[i];
		cap->type_case = CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
		cap->rpc = rpc;
		if (rpc_call_array_add(call, &rep->base, "capabilities", cap) < 0)
			return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
	}
	*out = &rep->base;
	return RPC_OK;
}

#define PROBE_CACHE_NS (10 * NSEC_PER_SEC)

static int ctrl_probe(void *ud, char *why, size_t n)
{
	struct csi_ctrl *c = ud;
	struct aws_error err = {0};
	int64_t now = now_mono_ns();
	int r;

	pthread_mutex_lock(&c->lock);
	bool fresh = c->probe_at && now - c->probe_at < PROBE_CACHE_NS;
	pthread_mutex_unlock(&c->lock);
	if (fresh)
		return 0;
	if ((r = ec2_dry_run(c, &err)) < 0) {
		char msg[512];
		snprintf(why, n, "EC2 is not reachable: %s", aws_error_str(&err, msg, sizeof(msg)));
		return r;
	}
	pthread_mutex_lock(&c->lock);
	c->probe_at = now;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

#define M(path, req, rep, fn)                                                                      \
	{                                                                                          \
		"/csi.v1.Controller/" path, &csi__v1__##req##__descriptor,                         \
		    &csi__v1__##rep##__descriptor, fn                                              \
	}

const struct rpc_method csi_ctrl_methods[] = {
    M("CreateVolume", create_volume_request, create_volume_response, csi_ctrl_create_volume),
    M("DeleteVolume", delete_volume_request, delete_volume_response, csi_ctrl_delete_volume),
    M("ControllerPublishVolume", controller_publish_volume_request,
      controller_publish_volume_response, csi_ctrl_publish),
    M("ControllerUnpublishVolume", controller_unpublish_volume_request,
      controller_unpublish_volume_response, csi_ctrl_unpublish),
    M("ValidateVolumeCapabilities", validate_volume_capabilities_request,
      validate_volume_capabilities_response, csi_ctrl_validate),
    M("ListVolumes", list_volumes_request, list_volumes_response, csi_ctrl_list_volumes),
    M("ControllerGetVolume", controller_get_volume_request, controller_get_volume_response,
      csi_ctrl_get_volume),
    {"/csi.v1.Controller/ControllerGetCapabilities",
     &csi__v1__controller_get_capabilities_request__descriptor,
     &csi__v1__controller_get_capabilities_response__descriptor, get_capabilities, true},
    M("CreateSnapshot", create_snapshot_request, create_snapshot_response,
      csi_ctrl_create_snapshot),
    M("DeleteSnapshot", delete_snapshot_request, delete_snapshot_response,
      csi_ctrl_delete_snapshot),
    M("ListSnapshots", list_snapshots_request, list_snapshots_response, csi_ctrl_list_snapshots),
    M("ControllerExpandVolume", controller_expand_volume_request, controller_expand_volume_response,
      csi_ctrl_expand),
    M("ControllerModifyVolume", controller_modify_volume_request, controller_modify_volume_response,
      csi_ctrl_modify),
    {NULL},
};

/* The batcher's fetch: a real DescribeX call, counted in the driver's metrics. */
static int batch_fetch(void *ud, const char *const *ids, size_t n, struct aws_reply *rep,
		       struct aws_error *err)
{
	struct csi_batch_fetch *bf = ud;
	struct aws_query q = AWS_QUERY_INIT;
	int64_t t0 = now_mono_ns();
	int r;

	if ((r = aws_query_add_list(&q, bf->k->id_param, ids, n)) < 0)
		goto out;
	r = aws_call_query(bf->c->aws, AWS_SVC_EC2, bf->k->action, &q, rep, err);
	if (r < 0 && err && aws_error_code_is_throttle(err->code))
		metric_inc(bf->c->m_throttles, bf->k->action);
	if (r < 0)
		metric_inc(bf->c->m_errors, bf->k->action);
	else
		metric_observe(bf->c->m_requests, (double)(now_mono_ns() - t0) / 1e9,
			       bf->k->action);
out:
	aws_query_release(&q);
	return r;
}

static int make_batcher(struct csi_ctrl *c, int i, const struct aws_batch_kind *k,
			struct aws_batcher **ret)
{
	/* A wider window than the helper's default: every caller here then polls or waits for
	 * seconds anyway, and concurrent attachments and creations share far more calls. */
	c->fetchers[i] = (struct csi_batch_fetch){c, k};
	return aws_batcher_new(c->aws, k,
			       &(struct aws_batcher_opts){.window_ns = 50 * NSEC_PER_MSEC,
							  .max_wait_ns = 200 * NSEC_PER_MSEC,
							  .fetch = batch_fetch,
							  .fetch_ud = &c->fetchers[i]},
			       ret);
}

static int push_tags(struct csi_ctrl *c, char **kv)
{
	for (char **p = kv; p && *p; p++) {
		const char *eq = strchr(*p, '=');
		char err[256];
		if (!eq)
			continue;
		struct csi_kv *n = realloc(c->extra_tags, (c->n_extra_tags + 1) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		c->extra_tags = n;
		n[c->n_extra_tags].key = strndup(*p, (size_t)(eq - *p));
		n[c->n_extra_tags].value = strdup(eq + 1);
		if (!n[c->n_extra_tags].key || !n[c->n_extra_tags].value)
			return -ENOMEM;
		c->n_extra_tags++;
		if (csi_tag_check(n[c->n_extra_tags - 1].key, eq + 1, err, sizeof(err)) < 0) {
			fprintf(stderr, "aws-k8s csi-controller: --extra-tags: %s\n", err);
			return -EINVAL;
		}
	}
	return 0;
}

void csi_ctrl_release(struct csi_ctrl *c)
{
	aws_batcher_free(c->b_volumes);
	aws_batcher_free(c->b_instances);
	aws_batcher_free(c->b_snapshots);
	aws_batcher_free(c->b_mods);
	aws_client_free(c->aws);
	csi_devices_free(c->devices);
	csi_coalescer_free(c->coalescer);
	csi_kv_free(c->extra_tags, c->n_extra_tags);
	keylock_free(c->inflight);
	strv_free(c->zones);
	pthread_mutex_destroy(&c->lock);
}

int csi_ctrl_setup(struct csi_ctrl *c, const struct aws_client_opts *ao)
{
	int r;

	pthread_mutex_init(&c->lock, NULL);
	if (!c->attach_timeout_ns)
		c->attach_timeout_ns = 150 * NSEC_PER_SEC;
	if (!c->stuck_attaching_ns)
		c->stuck_attaching_ns = 90 * NSEC_PER_SEC;
	if (!c->create_timeout_ns)
		c->create_timeout_ns = 150 * NSEC_PER_SEC;
	if (!c->poll_scale)
		c->poll_scale = 1;
	c->m_requests = metric_histogram("aws_ebs_csi_api_request_duration_seconds",
					 "EBS CSI driver's AWS API request duration in seconds.",
					 (const char *[]){"request", NULL}, NULL, 0);
	c->m_errors = metric_counter("aws_ebs_csi_api_request_errors_total",
				     "EBS CSI driver's AWS API request errors.",
				     (const char *[]){"request", NULL});
	c->m_throttles = metric_counter(
	    "aws_ebs_csi_api_request_throttles_total",
	    "EBS CSI driver's AWS API requests that failed throttled (after the retries).",
	    (const char *[]){"request", NULL});
	if ((r = aws_client_new(ao, &c->aws)) < 0)
		return r;
	const char *ep = getenv("AWS_EC2_ENDPOINT");
	if (ep && *ep && (r = aws_client_set_override(c->aws, AWS_SVC_EC2, ep, NULL, NULL)) < 0)
		return r;
	if ((r = keylock_new(CSI_CTRL_MAX_INFLIGHT, &c->inflight)) < 0 ||
	    (r = csi_devices_new(&c->devices)) < 0 || (r = csi_coalescer_new(&c->coalescer)) < 0 ||
	    (r = make_batcher(c, 0, &aws_batch_volumes, &c->b_volumes)) < 0 ||
	    (r = make_batcher(c, 1, &aws_batch_instances, &c->b_instances)) < 0 ||
	    (r = make_batcher(c, 2, &aws_batch_snapshots, &c->b_snapshots)) < 0 ||
	    (r = make_batcher(c, 3, &aws_batch_volume_modifications, &c->b_mods)) < 0)
		return r;
	return 0;
}

int csi_ctrl_probe(void *ud, char *why, size_t n)
{
	return ctrl_probe(ud, why, n);
}

int csi_controller_main(int argc, char **argv)
{
	struct csi_ctrl c = {0};
	struct csi_identity id = {.controller = true, .probe = ctrl_probe, .probe_ud = &c};
	char ua[160], err[256];
	int r, n;

	n = flags_parse("csi-controller", ctrl_usage, ctrl_flags, argc, argv);
	if (n < 0)
		return flags_exit_code(n);
	if (n > 1 || (n == 1 && strcmp(argv[0], "controller") != 0)) {
		fprintf(stderr,
			"aws-k8s csi-controller: unexpected argument '%s' (the mode is always "
			"controller; "
			"run csi-node for the node service)\n",
			n > 1 ? argv[1] : argv[0]);
		flags_free(ctrl_flags);
		return 2;
	}
	if (f_sdk_debug && log_verbosity < 4)
		log_verbosity = 4;
	if (push_tags(&c, f_extra_volume_tags) < 0 || push_tags(&c, f_extra_tags) < 0) {
		r = 2;
		goto out;
	}
	c.cluster_id = f_cluster_id && *f_cluster_id ? f_cluster_id : NULL;
	if (c.cluster_id && aws_cluster_id_check(c.cluster_id, err, sizeof(err)) < 0) {
		/* the tag key kubernetes.io/cluster/<ID> must be one AWS accepts */
		fprintf(stderr, "aws-k8s csi-controller: --k8s-tag-cluster-id: %s\n", err);
		r = 2;
		goto out;
	}
	c.tag_opts.warn_on_invalid_tag = f_warn_invalid_tag;
	c.modify_window_ns = f_modify_timeout;
	c.batching = f_batching;
	snprintf(ua, sizeof(ua), "csi-controller%s%s", f_user_agent && *f_user_agent ? " " : "",
		 f_user_agent ? f_user_agent : "");
	if ((r = csi_ctrl_setup(&c, &(struct aws_client_opts){.user_agent = ua})) < 0) {
		log_error("failed to set up the controller (AWS client, region, AWS_EC2_ENDPOINT)",
			  KV_E(r));
		r = 1;
		goto out;
	}
	r = csi_serve("csi-controller", &id, csi_ctrl_methods, &c);
out:
	csi_ctrl_release(&c);
	flags_free(ctrl_flags);
	return r;
}
