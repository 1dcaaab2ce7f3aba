/* ControllerPublishVolume and ControllerUnpublishVolume: EC2 attachments.
 *
 * The device name comes from the per-node allocator (csi_controller_devices.c): free in the
 * instance's block-device mappings and among the attachments in flight, with the names AWS
 * refused tried last. A name AWS says is in use is marked and the next one tried, within the
 * call. After AttachVolume the volume is polled (the Describe calls are batched) until it
 * shows attached at that device, with backoff and a bound. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/error.h"
#include "common/aws/ids.h"
#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/csi-controller/csi_controller_internal.h"

#define ATTACH_TRIES 4

static const struct ec2_attachment *find_att(const struct ec2_volume *v, const char *node)
{
	for (size_t i = 0; i < v->n_att; i++)
		if (strcmp(v->att[i].instance, node) == 0)
			return &v->att[i];
	return NULL;
}

/* EC2 keeps some released names "defined": an attachment to such a name never completes.
 * Undo it; the next try uses another name. */
static enum csi_code undo_stuck(struct csi_ctrl *c, const char *volume, const char *node,
				const char *device, struct csi_error *err)
{
	struct aws_error aerr = {0};
	char dev[32];

	str_copy(dev, sizeof(dev), device);
	ec2_detach_volume(c, volume, node, &aerr);
	csi_devices_mark_bad(c->devices, node, dev);
	csi_devices_release(c->devices, node, volume);
	log_warn("attachment stuck, detached it", KV_S("volume", volume), KV_S("node", node),
		 KV_S("device", dev));
	return csi_error_set(err, CSI_ABORTED,
			     "volume %s was stuck attaching to %s at %s; detached it, the next "
			     "try uses another device name",
			     volume, node, dev);
}

/* One look at the attachment for wait_attachment(): true when the wait is over (err set,
 * CSI_OK with ret_device when attached), false to look again. */
static bool attachment_settled(struct csi_ctrl *c, const struct ec2_volume *v, const char *node,
			       const char *want, const char *device, char ret_device[32],
			       struct csi_error *err)
{
	const struct ec2_attachment *a = find_att(v, node);

	if (!want) {
		if (!a || strcmp(a->state, "detached") == 0)
			return csi_error_ok(err) == CSI_OK;
		return false;
	}
	if (!a) {
		csi_error_set(err, CSI_INTERNAL,
			      "volume %s did not attach to %s (the attachment is gone)", v->id,
			      node);
		return true;
	}
	int64_t since = csi_devices_held_since(c->devices, node, v->id);
	if (strcmp(a->state, "attaching") == 0 && since &&
	    now_mono_ns() - since > c->stuck_attaching_ns) {
		undo_stuck(c, v->id, node, a->device, err);
		return true;
	}
	/* attached at the device asked for, or at another one: report the real one */
	if ((strcmp(a->state, want) == 0 && (!device || strcmp(a->device, device) == 0)) ||
	    (strcmp(a->state, "attached") == 0 && device && strcmp(a->device, device) != 0)) {
		if (ret_device)
			str_copy(ret_device, 32, a->device);
		csi_error_ok(err);
		return true;
	}
	return false;
}

/* Polls until the volume's attachment to node is in state `want` ("attached") at device (NULL:
 * any), or gone when want is NULL; a detach's polls go to the detach-pending metric (which
 * keeps a detach the wait gave up on until a later poll sees it done). */
static enum csi_code wait_attachment(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				     const char *volume, const char *node, const char *want,
				     const char *device, char ret_device[32], struct csi_error *err)
{
	int64_t deadline = now_mono_ns() + c->attach_timeout_ns, delay = 250 * NSEC_PER_MSEC;
	struct aws_error aerr;
	int r;

	for (;;) {
		struct ec2_volume v = {0};
		aws_error_clear(&aerr);
		r = ec2_describe_volume(c, volume, &v, &aerr);
		if (r == -ENOENT && !want) {
			csi_detaching_seen(c->detaching, volume, node, NULL);
			return csi_error_ok(err);
		}
		if (r < 0)
			return ctrl_aws_fail(err, r, &aerr, "describing the volume", CSI_NOT_FOUND,
					     CSI_INTERNAL);
		if (!want) {
			const struct ec2_attachment *a = find_att(&v, node);
			csi_detaching_seen(c->detaching, volume, node, a ? a->state : NULL);
		}
		bool settled = attachment_settled(c, &v, node, want, device, ret_device, err);
		ec2_volume_release(&v);
		if (settled)
			return err->code;
		if (now_mono_ns() > deadline || !ctrl_sleep(call, delay / c->poll_scale))
			return csi_error_set(err, CSI_DEADLINE_EXCEEDED,
					     "volume %s is still %s on %s", volume,
					     want ? "attaching" : "detaching", node);
		delay = delay * 18 / 10 > 5 * NSEC_PER_SEC ? 5 * NSEC_PER_SEC : delay * 18 / 10;
	}
}

/* The volume as it stands, for a new attachment: *ret_done with ret_device when it is
 * attached to node already (or was attaching and now is); else *v holds it, a detach to node
 * in progress waited for, and no other node holding it unless it is multi-attach. */
static enum csi_code volume_for_attach(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				       const char *vol, const char *node, const struct csi_cap *cap,
				       struct ec2_volume *v, char ret_device[32], bool *ret_done,
				       struct csi_error *err)
{
	struct aws_error aerr = {0};
	int r;

	*ret_done = false;
	if ((r = ec2_describe_volume(c, vol, v, &aerr)) < 0)
		return ctrl_aws_fail(err, r, &aerr, "looking up the volume", CSI_NOT_FOUND,
				     CSI_INTERNAL);
	if (!csi_cap_supported(cap, v->multi_attach))
		return csi_error_set(err, CSI_INVALID_ARGUMENT,
				     "the volume capability is not supported for %s", vol);
	const struct ec2_attachment *a = find_att(v, node);
	const char *state = a ? a->state : "";
	if (strcmp(state, "attached") == 0) {
		str_copy(ret_device, 32, a->device);
		*ret_done = true;
		return csi_error_ok(err);
	}
	if (strcmp(state, "attaching") == 0) {
		*ret_done = true;
		return wait_attachment(c, call, vol, node, "attached", NULL, ret_device, err);
	}
	if (strcmp(state, "detaching") == 0) {
		ec2_volume_release(v);
		if (wait_attachment(c, call, vol, node, NULL, NULL, NULL, err) != CSI_OK)
			return err->code;
		if ((r = ec2_describe_volume(c, vol, v, &aerr)) < 0)
			return ctrl_aws_fail(err, r, &aerr, "looking up the volume", CSI_NOT_FOUND,
					     CSI_INTERNAL);
	}
	for (size_t i = 0; !v->multi_attach && i < v->n_att; i++)
		if (strcmp(v->att[i].instance, node) != 0 &&
		    strcmp(v->att[i].state, "detached") != 0)
			return csi_error_set(err, CSI_FAILED_PRECONDITION,
					     "volume %s is attached to %s", vol,
					     v->att[i].instance);
	return csi_error_ok(err);
}

/* The node (alive, in the volume's zone) and the device names it uses. */
static enum csi_code node_for_attach(struct csi_ctrl *c, const char *vol, const char *vol_az,
				     const char *node, char ***ret_used, struct csi_error *err)
{
	struct aws_error aerr = {0};
	char state[16] = "", az[48] = "";
	int r;

	if ((r = ec2_describe_instance(c, node, ret_used, state, az, &aerr)) < 0)
		return ctrl_aws_fail(err, r, &aerr, "looking up the node", CSI_NOT_FOUND,
				     CSI_INTERNAL);
	if (strcmp(state, "terminated") == 0 || strcmp(state, "shutting-down") == 0)
		return csi_error_set(err, CSI_NOT_FOUND, "node %s is %s", node, state);
	if (*az && *vol_az && strcmp(az, vol_az) != 0)
		return csi_error_set(err, CSI_FAILED_PRECONDITION,
				     "volume %s is in %s, node %s in %s", vol, vol_az, node, az);
	return csi_error_ok(err);
}

static bool name_in_use_error(const struct aws_error *e)
{
	return (str_has_prefix(e->code, "InvalidParameterValue") ||
		aws_error_is(e, "InvalidDevice.InUse") || aws_error_is(e, "InvalidParameter")) &&
	       strstr(e->message, "already in use");
}

/* AttachVolume's error as a CSI code. */
static enum csi_code attach_error(struct csi_error *err, int r, const struct aws_error *e)
{
	enum csi_code nf = CSI_NOT_FOUND, other = CSI_INTERNAL;

	if (aws_error_is(e, "AttachmentLimitExceeded"))
		nf = other = CSI_RESOURCE_EXHAUSTED;
	else if (aws_error_is(e, "VolumeInUse") || aws_error_is(e, "InvalidVolume.ZoneMismatch"))
		nf = other = CSI_FAILED_PRECONDITION;
	else if (aws_error_is(e, "IncorrectState") || aws_error_is(e, "IncorrectInstanceState"))
		nf = other = CSI_ABORTED;
	return ctrl_aws_fail(err, r, e, "attaching the volume", nf, other);
}

/* AttachVolume at a free device name, another one while AWS says a name is in use. */
static enum csi_code attach(struct csi_ctrl *c, const char *vol, const char *node,
			    char *const *used, char dev[CSI_DEVICE_NAME_MAX], struct csi_error *err)
{
	struct aws_error aerr;
	int r;

	for (int attempt = 0;; attempt++) {
		r = csi_devices_pick(c->devices, node, vol, (const char *const *)used,
				     strv_len(used), dev);
		if (r == -ENOSPC)
			return csi_error_set(err, CSI_RESOURCE_EXHAUSTED,
					     "no free device name left on node %s", node);
		if (r < 0)
			return csi_error_set(err, CSI_RESOURCE_EXHAUSTED, "out of memory");
		aws_error_clear(&aerr);
		if ((r = ec2_attach_volume(c, vol, node, dev, &aerr)) == 0)
			return csi_error_ok(err);
		csi_devices_release(c->devices, node, vol);
		if (!name_in_use_error(&aerr) || attempt + 1 >= ATTACH_TRIES)
			return attach_error(err, r, &aerr);
		log_info("device name in use, trying another", KV_S("node", node),
			 KV_S("device", dev));
		csi_devices_mark_bad(c->devices, node, dev);
	}
}

static enum csi_code publish_locked(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				    const char *vol, const char *node, const struct csi_cap *cap,
				    char ret_device[32], struct csi_error *err)
{
	struct ec2_volume v = {0};
	_cleanup_strv_ char **used = NULL;
	char vol_az[48], dev[CSI_DEVICE_NAME_MAX];
	bool done;

	volume_for_attach(c, call, vol, node, cap, &v, ret_device, &done, err);
	str_copy(vol_az, sizeof(vol_az), v.az);
	ec2_volume_release(&v);
	if (err->code != CSI_OK || done) {
		if (err->code == CSI_OK)
			csi_devices_release(c->devices, node, vol);
		return err->code;
	}
	if (node_for_attach(c, vol, vol_az, node, &used, err) != CSI_OK ||
	    attach(c, vol, node, used, dev, err) != CSI_OK)
		return err->code;
	log_info("volume attaching", KV_S("volume", vol), KV_S("node", node), KV_S("device", dev));
	if (wait_attachment(c, call, vol, node, "attached", dev, ret_device, err) != CSI_OK)
		return err->code; /* the name stays held: the attachment may still complete */
	csi_devices_release(c->devices, node, vol);
	return CSI_OK;
}

enum csi_code csi_ctrl_publish(struct csi_ctrl *c, const struct csi_ctrl_call *call,
			       const char *volume_id, const char *node_id,
			       const struct csi_cap *cap, char ret_device[32],
			       struct csi_error *err)
{
	char key[128];

	if (!*volume_id)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "volume id is missing");
	if (!*node_id)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "node id is missing");
	if (!cap->present)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "volume capability is missing");
	if (!csi_cap_supported(cap, true))
		return csi_error_set(err, CSI_INVALID_ARGUMENT,
				     "the volume capability is not supported");
	if (!aws_volume_id_valid(volume_id))
		return ctrl_bad_id(err, "volume id", volume_id);
	if (!aws_instance_id_valid(node_id))
		return ctrl_bad_id(err, "node id (an EC2 instance id)", node_id);
	snprintf(key, sizeof(key), "pub/%s/%s", volume_id, node_id);
	if (ctrl_lock(c, key, err, "volume %s on node %s", volume_id, node_id) != CSI_OK)
		return err->code;
	/* attached: a detach from this node seen pending before is over */
	if (publish_locked(c, call, volume_id, node_id, cap, ret_device, err) == CSI_OK)
		csi_detaching_seen(c->detaching, volume_id, node_id, NULL);
	ctrl_unlock(c, key);
	return err->code;
}

static enum csi_code detach_one(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				const char *vol, const char *node, struct csi_error *err)
{
	struct aws_error aerr = {0};
	int r;

	r = ec2_detach_volume(c, vol, node, &aerr);
	if (r == -ENOENT || aws_error_is(&aerr, "InvalidAttachment.NotFound")) {
		csi_devices_release(c->devices, node, vol);
		return csi_error_ok(err); /* already detached (or the volume or node is gone) */
	}
	if (r < 0) {
		enum csi_code nf = CSI_NOT_FOUND, other = CSI_INTERNAL;
		if (aws_error_is(&aerr, "IncorrectState"))
			nf = other = CSI_ABORTED;
		return ctrl_aws_fail(err, r, &aerr, "detaching the volume", nf, other);
	}
	log_info("volume detaching", KV_S("volume", vol), KV_S("node", node));
	if (wait_attachment(c, call, vol, node, NULL, NULL, NULL, err) != CSI_OK)
		return err->code;
	csi_devices_release(c->devices, node, vol);
	return CSI_OK;
}

static enum csi_code unpublish_locked(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				      const char *volume_id, const char *node_id,
				      struct csi_error *err)
{
	struct ec2_volume v = {0};
	struct aws_error aerr = {0};
	int r = ec2_describe_volume(c, volume_id, &v, &aerr);

	csi_error_ok(err);
	if (r == -ENOENT) {
		log_v(2, "volume gone, so detached", KV_S("volume", volume_id));
	} else if (r < 0) {
		ctrl_aws_fail(err, r, &aerr, "looking up the volume", CSI_NOT_FOUND, CSI_INTERNAL);
	} else {
		/* node_id unset: detach from every node (CSI spec) */
		for (size_t i = 0; i < v.n_att && err->code == CSI_OK; i++)
			if ((!*node_id || strcmp(v.att[i].instance, node_id) == 0) &&
			    strcmp(v.att[i].state, "detached") != 0)
				detach_one(c, call, volume_id, v.att[i].instance, err);
		if (err->code == CSI_OK && *node_id)
			csi_devices_release(c->devices, node_id, volume_id);
	}
	ec2_volume_release(&v);
	/* detached (or gone): no detach pending any more, whoever saw it end */
	if (err->code == CSI_OK && *node_id)
		csi_detaching_seen(c->detaching, volume_id, node_id, NULL);
	return err->code;
}

enum csi_code csi_ctrl_unpublish(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				 const char *volume_id, const char *node_id, struct csi_error *err)
{
	char key[128], esc_v[CTRL_ID_STR_MAX], esc_n[CTRL_ID_STR_MAX];

	if (!*volume_id)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "volume id is missing");
	/* no such volume can be attached anywhere, nothing to such a node */
	if (!aws_volume_id_valid(volume_id) || (*node_id && !aws_instance_id_valid(node_id))) {
		log_v(2, "malformed volume or node id: nothing to detach",
		      KV_S("volume", ctrl_id_str(volume_id, esc_v)),
		      KV_S("node", ctrl_id_str(node_id, esc_n)));
		return csi_error_ok(err);
	}
	snprintf(key, sizeof(key), "pub/%s/%s", volume_id, node_id);
	if (ctrl_lock(c, key, err, "volume %s on node %s", volume_id, node_id) != CSI_OK)
		return err->code;
	unpublish_locked(c, call, volume_id, node_id, err);
	ctrl_unlock(c, key);
	return err->code;
}
