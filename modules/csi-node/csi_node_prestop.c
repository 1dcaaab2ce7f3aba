/* aws-k8s csi-node pre-stop-hook: the node DaemonSet's preStop hook, as upstream's
 * `aws-ebs-csi-driver pre-stop-hook`. When the Node ($CSI_NODE_NAME) is being drained - cordoned
 * (spec.unschedulable, or the node.kubernetes.io/unschedulable or Karpenter's disruption taint
 * with NoSchedule), being deleted, or gone - it waits until no VolumeAttachment of the driver
 * names the node any more, so that the plugin outlives the unmounts and detaches of the drain.
 * The list is read again after every watch event about the node's attachments. Not draining:
 * it exits 0 at once. The wait ends with SIGTERM, with --timeout, or when kubelet kills the hook
 * at the end of the pod's termination grace period (upstream has no other bound). */
#include "modules/csi-node/csi_node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/flags.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/csi/identity.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"
#include "common/kube/watch.h"

static const char prestop_usage[] =
	"The preStop hook of the node plugin's container, as upstream's `pre-stop-hook` mode:\n"
	"when the Node named by $CSI_NODE_NAME is being drained (cordoned, being deleted or\n"
	"gone), waits until no VolumeAttachment of the driver (spec.attacher) names the node\n"
	"(spec.nodeName), then exits 0; a node that is not draining exits 0 at once. SIGTERM or\n"
	"--timeout end the wait with exit 1; kubelet bounds it by the pod's termination grace\n"
	"period.";

static int64_t prestop_timeout;
static char *prestop_driver;

static const struct flag prestop_flags[] = {
	{ "kubeconfig", FLAG_STRING, &kube_flag_kubeconfig, NULL, NULL,
	  "Absolute path to a kubeconfig file. The default is the empty string, which causes the "
	  "in-cluster config to be used." },
	{ "driver-name", FLAG_STRING, &prestop_driver, CSI_DRIVER_NAME_DEFAULT, NULL,
	  "The attacher whose VolumeAttachments are waited for." },
	{ "timeout", FLAG_DURATION, &prestop_timeout, "0s", NULL,
	  "(aws-k8s) The longest wait; 0 waits until kubelet ends the hook (the pod's "
	  "termination grace period), as upstream." },
	LOG_FLAGS,
	{ NULL },
};

static const char *const drain_taints[] = {
	"node.kubernetes.io/unschedulable",
	"karpenter.sh/disrupted",  /* Karpenter v1 */
	"karpenter.sh/disruption", /* Karpenter before v1 */
};

static bool node_draining(const cJSON *node)
{
	const cJSON *t;
	bool unschedulable = false;

	if (json_find(node, "metadata.deletionTimestamp"))
		return true;
	if (json_get_bool(node, "spec.unschedulable", &unschedulable) == 0 && unschedulable)
		return true;
	cJSON_ArrayForEach(t, json_find(node, "spec.taints"))
	{
		const char *key = json_str(t, "key"), *effect = json_str(t, "effect");
		if (!key || !effect || strcmp(effect, "NoSchedule") != 0)
			continue;
		for (size_t i = 0; i < sizeof(drain_taints) / sizeof(drain_taints[0]); i++)
			if (strcmp(key, drain_taints[i]) == 0)
				return true;
	}
	return false;
}

struct prestop {
	struct kube_client *kc;
	struct cancel *ct;
	const char *node, *driver;
	long long count;
};

static bool is_ours(const struct prestop *p, const cJSON *va)
{
	const char *node = json_str(va, "spec.nodeName"), *attacher = json_str(va, "spec.attacher");

	return node && attacher && strcmp(node, p->node) == 0 && strcmp(attacher, p->driver) == 0;
}

static int count_item(void *ud, cJSON *va)
{
	struct prestop *p = ud;

	p->count += is_ours(p, va);
	cJSON_Delete(va);
	return 0;
}

/* Any event about one of the node's attachments ends the stream: the caller lists again. */
static int on_event(void *ud, enum kube_event_type type, cJSON *va)
{
	bool ours = is_ours(ud, va);

	cJSON_Delete(va);
	return ours ? -EALREADY : 0;
}

/* Waits until the node has no attachment: 0, -ETIMEDOUT at the deadline (0: none),
 * -ECANCELED on SIGTERM. */
static int wait_detached(struct prestop *p, int64_t deadline)
{
	struct kube_status st = { 0 };
	int r;

	for (;;) {
		_cleanup_free_ char *rv = NULL;
		int64_t left = deadline ? deadline - now_mono_ns() : 60 * NSEC_PER_SEC;

		if (left <= 0)
			return -ETIMEDOUT;
		p->count = 0;
		struct kube_list_opts lo = { .cancel = p->ct };
		r = kube_list_each(p->kc, KUBE_REF(&kube_volumeattachments, NULL, NULL), &lo,
				   count_item, p, &rv, &st);
		if (r == -ECANCELED)
			return r;
		if (r == 0 && p->count == 0)
			return 0;
		if (r < 0) {
			log_warn("cannot list VolumeAttachments, retrying", KV_E(r),
				 KV_S("error", st.message));
			if (cancel_wait(p->ct, left < NSEC_PER_SEC ? left : NSEC_PER_SEC))
				return -ECANCELED;
			continue;
		}
		log_info("waiting for the node's VolumeAttachments to go", KV_S("node", p->node),
			 KV_I("count", p->count));
		struct kube_watch_opts wo = {
			.timeout_seconds = (left + NSEC_PER_SEC - 1) / NSEC_PER_SEC,
			.idle_timeout_ns = left,
			.no_bookmarks = true,
			.cancel = p->ct,
			.on_event = on_event,
			.ud = p,
		};
		r = kube_watch_stream(p->kc, KUBE_REF(&kube_volumeattachments, NULL, NULL), &wo, &rv,
				      &st, NULL);
		if (r == -ECANCELED)
			return r;
		if (r < 0 && r != -EALREADY && r != -KUBE_EGONE && r != -ETIMEDOUT &&
		    cancel_wait(p->ct, NSEC_PER_SEC / 2))
			return -ECANCELED;
	}
}

/* 1 when the node is draining (or gone), 0 when not, < 0 on an API error. */
static int draining(struct prestop *p)
{
	struct kube_status st = { 0 };
	cJSON *node = NULL;
	int r = kube_get(p->kc, KUBE_REF(&kube_nodes, NULL, p->node), &node, &st);

	if (r == -ENOENT) {
		log_info("the Node is gone: taken as a termination, checking its VolumeAttachments",
			 KV_S("node", p->node));
		return 1;
	}
	if (r < 0) {
		log_error("cannot read the Node", KV_S("node", p->node), KV_E(r),
			  KV_S("error", st.message));
		return r;
	}
	r = node_draining(node);
	cJSON_Delete(node);
	return r;
}

int csi_node_prestop_main(int argc, char **argv)
{
	struct prestop p = { .node = getenv("CSI_NODE_NAME") };
	char err[512];
	int r, ret = 1, n = flags_parse("csi-node pre-stop-hook", prestop_usage, prestop_flags,
					argc, argv);

	if (n < 0)
		return flags_exit_code(n);
	if (n > 0) {
		fprintf(stderr, "aws-k8s csi-node pre-stop-hook: unexpected argument '%s'\n",
			argv[0]);
		ret = 2;
		goto out;
	}
	if (!p.node || !*p.node) {
		log_error("CSI_NODE_NAME is not set: the hook cannot tell its Node");
		goto out;
	}
	p.driver = prestop_driver;
	int64_t deadline = prestop_timeout > 0 ? now_mono_ns() + prestop_timeout : 0;
	if ((r = kube_client_from_flags("csi-node", &p.kc, err, sizeof(err))) < 0) {
		log_error("cannot reach Kubernetes", KV_S("error", err));
		goto out;
	}
	if ((r = cancel_new(kube_client_cancel(p.kc), &p.ct)) < 0)
		goto out;
	if ((r = draining(&p)) < 0)
		goto out;
	if (r == 0) {
		log_info("the node is not being drained: nothing to wait for", KV_S("node", p.node));
		ret = 0;
		goto out;
	}
	log_info("the node is being drained: waiting for its VolumeAttachments",
		 KV_S("node", p.node));
	r = wait_detached(&p, deadline);
	if (r == 0) {
		log_info("no VolumeAttachment left on the node", KV_S("node", p.node));
		ret = 0;
	} else if (r == -ETIMEDOUT) {
		log_warn("gave up waiting for the node's VolumeAttachments (--timeout)",
			 KV_S("node", p.node), KV_I("count", p.count));
	} else {
		log_warn("stopped waiting for the node's VolumeAttachments", KV_S("node", p.node),
			 KV_E(r));
	}
out:
	cancel_free(p.ct);
	kube_client_free(p.kc);
	flags_free(prestop_flags);
	return ret;
}
