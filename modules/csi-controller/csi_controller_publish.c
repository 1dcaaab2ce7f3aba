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

static int publish_reply(struct rpc_call *call, const char *device, ProtobufCMessage **out)
{
	Csi__V1__ControllerPublishVolumeResponse *rep =
	    rpc_call_new(call, &csi__v1__controller_publish_volume_response__descriptor);

	if (!rep ||
	    rpc_call_map_add(call, &rep->base, "publish_context", CSI_CTX_DEVICE_PATH, device) < 0)
		return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
	rpc_call_log_kv(call, "device", device);
	*out = &rep->base;
	return RPC_OK;
}

/* Polls until the volume's attachment to node is in state `want` ("attached") at device (NULL:
 * any), or gone when want is NULL. 0, or the gRPC code set on the call. */
static int wait_attachment(struct rpc_call *call, struct csi_ctrl *c, const char *volume,
			   const char *node, const char *want, const char *device,
			   char ret_device[32])
{
	int64_t deadline = now_mono_ns() + c->attach_timeout_ns, delay = 250 * NSEC_PER_MSEC;
	struct aws_error err;
	int r;

	for (;;) {
		struct ec2_volume v = {0};
		aws_error_clear(&err);
		r = ec2_describe_volume(c, volume, &v, &err);
		if (r == -ENOENT && !want)
			return 0;
		if (r < 0)
			return ctrl_aws_fail(call, r, &err, "describing the volume", RPC_NOT_FOUND,
					     RPC_INTERNAL);
		const struct ec2_attachment *a = find_att(&v, node);
		if (!want) {
			bool gone = !a || strcmp(a->state, "detached") == 0;
			ec2_volume_release(&v);
			if (gone)
				return 0;
		} else {
			if (!a) {
				ec2_volume_release(&v);
				return rpc_call_error(
				    call, RPC_INTERNAL,
				    "volume %s did not attach to %s (the attachment is gone)",
				    volume, node);
			}
			int64_t since = csi_devices_held_since(c->devices, node, volume);
			if (strcmp(a->state, "attaching") == 0 && since &&
			    now_mono_ns() - since > c->stuck_attaching_ns) {
				/* EC2 keeps some released names "defined": an attachment to such a
				 * name never completes. Undo it; the next try uses another name. */
				char dev[32];
				str_copy(dev, sizeof(dev), a->device);
				ec2_volume_release(&v);
				aws_error_clear(&err);
				ec2_detach_volume(c, volume, node, &err);
				csi_devices_mark_bad(c->devices, node, dev);
				csi_devices_release(c->devices, node, volume);
				log_warn("attachment stuck, detached it", KV_S("volume", volume),
					 KV_S("node", node), KV_S("device", dev));
				return rpc_call_error(
				    call, RPC_ABORTED,
				    "volume %s was stuck attaching to %s at %s; detached "
				    "it, the next try uses another device name",
				    volume, node, dev);
			}
			if (strcmp(a->state, want) == 0 &&
			    (!device || strcmp(a->device, device) == 0)) {
				if (ret_device)
					str_copy(ret_device, 32, a->device);
				ec2_volume_release(&v);
				return 0;
			}
			if (strcmp(a->state, "attached") == 0 && device &&
			    strcmp(a->device, device) != 0) {
				/* attached, but at another device than asked: report the real one
				 */
				if (ret_device)
					str_copy(ret_device, 32, a->device);
				ec2_volume_release(&v);
				return 0;
			}
			ec2_volume_release(&v);
		}
		if (now_mono_ns() > deadline || !ctrl_sleep(call, delay / c->poll_scale))
			return rpc_call_error(call, RPC_DEADLINE_EXCEEDED,
					      "volume %s is still %s on %s", volume,
					      want ? "attaching" : "detaching", node);
		delay = delay * 18 / 10 > 5 * NSEC_PER_SEC ? 5 * NSEC_PER_SEC : delay * 18 / 10;
	}
}

static bool name_in_use_error(const struct aws_error *e)
{
	return (str_has_prefix(e->code, "InvalidParameterValue") ||
		aws_error_is(e, "InvalidDevice.InUse") || aws_error_is(e, "InvalidParameter")) &&
	       strstr(e->message, "already in use");
}

static int do_publish(struct rpc_call *call, struct csi_ctrl *c,
		      const Csi__V1__ControllerPublishVolumeRequest *req, ProtobufCMessage **out)
{
	const char *vol = req->volume_id, *node = req->node_id;
	struct ec2_volume v = {0};
	struct aws_error err = {0};
	char **used = NULL, state[16] = "", az[48] = "", dev[CSI_DEVICE_NAME_MAX], got[32];
	int r, code;

	if ((r = ec2_describe_volume(c, vol, &v, &err)) < 0)
		return ctrl_aws_fail(call, r, &err, "looking up the volume", RPC_NOT_FOUND,
				     RPC_INTERNAL);
	if (!ctrl_cap_supported(req->volume_capability, v.multi_attach)) {
		ec2_volume_release(&v);
		return rpc_call_error(call, RPC_INVALID_ARGUMENT,
				      "the volume capability is not supported for %s", vol);
	}
	const struct ec2_attachment *a = find_att(&v, node);
	if (a && strcmp(a->state, "attached") == 0) {
		str_copy(got, sizeof(got), a->device);
		ec2_volume_release(&v);
		csi_devices_release(c->devices, node, vol);
		return publish_reply(call, got, out);
	}
	if (a && strcmp(a->state, "attaching") == 0) {
		ec2_volume_release(&v);
		if ((code = wait_attachment(call, c, vol, node, "attached", NULL, got)) != 0)
			return code;
		csi_devices_release(c->devices, node, vol);
		return publish_reply(call, got, out);
	}
	if (a && strcmp(a->state, "detaching") == 0) {
		ec2_volume_release(&v);
		if ((code = wait_attachment(call, c, vol, node, NULL, NULL, NULL)) != 0)
			return code;
		if ((r = ec2_describe_volume(c, vol, &v, &err)) < 0)
			return ctrl_aws_fail(call, r, &err, "looking up the volume", RPC_NOT_FOUND,
					     RPC_INTERNAL);
	}
	if (!v.multi_attach)
		for (size_t i = 0; i < v.n_att; i++)
			if (strcmp(v.att[i].instance, node) != 0 &&
			    strcmp(v.att[i].state, "detached") != 0) {
				code = rpc_call_error(call, RPC_FAILED_PRECONDITION,
						      "volume %s is attached to %s", vol,
						      v.att[i].instance);
				ec2_volume_release(&v);
				return code;
			}
	char vol_az[48];
	str_copy(vol_az, sizeof(vol_az), v.az);
	ec2_volume_release(&v);

	aws_error_clear(&err);
	if ((r = ec2_describe_instance(c, node, &used, state, az, &err)) < 0)
		return ctrl_aws_fail(call, r, &err, "looking up the node", RPC_NOT_FOUND,
				     RPC_INTERNAL);
	if (strcmp(state, "terminated") == 0 || strcmp(state, "shutting-down") == 0) {
		strv_free(used);
		return rpc_call_error(call, RPC_NOT_FOUND, "node %s is %s", node, state);
	}
	if (*az && *vol_az && strcmp(az, vol_az) != 0) {
		strv_free(used);
		return rpc_call_error(call, RPC_FAILED_PRECONDITION,
				      "volume %s is in %s, node %s in %s", vol, vol_az, node, az);
	}
	for (int attempt = 0;; attempt++) {
		r = csi_devices_pick(c->devices, node, vol, (const char *const *)used,
				     strv_len(used), dev);
		if (r == -ENOSPC) {
			strv_free(used);
			return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED,
					      "no free device name left on node %s", node);
		}
		if (r < 0) {
			strv_free(used);
			return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		}
		aws_error_clear(&err);
		r = ec2_attach_volume(c, vol, node, dev, &err);
		if (r == 0)
			break;
		csi_devices_release(c->devices, node, vol);
		if (name_in_use_error(&err) && attempt + 1 < ATTACH_TRIES) {
			log_info("device name in use, trying another", KV_S("node", node),
				 KV_S("device", dev));
			csi_devices_mark_bad(c->devices, node, dev);
			continue;
		}
		strv_free(used);
		if (aws_error_is(&err, "AttachmentLimitExceeded"))
			return ctrl_aws_fail(call, r, &err, "attaching the volume",
					     RPC_RESOURCE_EXHAUSTED, RPC_RESOURCE_EXHAUSTED);
		if (aws_error_is(&err, "VolumeInUse"))
			return ctrl_aws_fail(call, r, &err, "attaching the volume",
					     RPC_FAILED_PRECONDITION, RPC_FAILED_PRECONDITION);
		if (aws_error_is(&err, "IncorrectState") ||
		    aws_error_is(&err, "IncorrectInstanceState"))
			return ctrl_aws_fail(call, r, &err, "attaching the volume", RPC_ABORTED,
					     RPC_ABORTED);
		if (aws_error_is(&err, "InvalidVolume.ZoneMismatch"))
			return ctrl_aws_fail(call, r, &err, "attaching the volume",
					     RPC_FAILED_PRECONDITION, RPC_FAILED_PRECONDITION);
		return ctrl_aws_fail(call, r, &err, "attaching the volume", RPC_NOT_FOUND,
				     RPC_INTERNAL);
	}
	strv_free(used);
	log_info("volume attaching", KV_S("volume", vol), KV_S("node", node), KV_S("device", dev));
	if ((code = wait_attachment(call, c, vol, node, "attached", dev, got)) != 0)
		return code; /* the name stays held: the attachment may still complete */
	csi_devices_release(c->devices, node, vol);
	return publish_reply(call, got, out);
}

int csi_ctrl_publish(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ControllerPublishVolumeRequest *req = (const void *)in;
	struct csi_ctrl *c = rpc_call_userdata(call);
	char key[128];
	int code;

	if (!*req->volume_id)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "volume id is missing");
	if (!*req->node_id)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "node id is missing");
	if (!req->volume_capability)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "volume capability is missing");
	if (!ctrl_cap_supported(req->volume_capability, true))
		return rpc_call_error(call, RPC_INVALID_ARGUMENT,
				      "the volume capability is not supported");
	if (!aws_volume_id_valid(req->volume_id))
		return ctrl_bad_id(call, "volume id", req->volume_id);
	if (!aws_instance_id_valid(req->node_id))
		return ctrl_bad_id(call, "node id (an EC2 instance id)", req->node_id);
	snprintf(key, sizeof(key), "pub/%s/%s", req->volume_id, req->node_id);
	if (ctrl_inflight_add(c, key) < 0)
		return rpc_call_error(
		    call, RPC_ABORTED,
		    "an operation for volume %s on node %s is already in progress", req->volume_id,
		    req->node_id);
	code = do_publish(call, c, req, out);
	ctrl_inflight_del(c, key);
	return code;
}

static int detach_one(struct rpc_call *call, struct csi_ctrl *c, const char *vol, const char *node)
{
	struct aws_error err = {0};
	int r;

	r = ec2_detach_volume(c, vol, node, &err);
	if (r == -ENOENT || aws_error_is(&err, "InvalidAttachment.NotFound")) {
		csi_devices_release(c->devices, node, vol);
		return 0; /* already detached (or the volume or node is gone) */
	}
	if (r < 0) {
		if (aws_error_is(&err, "IncorrectState"))
			return ctrl_aws_fail(call, r, &err, "detaching the volume", RPC_ABORTED,
					     RPC_ABORTED);
		return ctrl_aws_fail(call, r, &err, "detaching the volume", RPC_NOT_FOUND,
				     RPC_INTERNAL);
	}
	log_info("volume detaching", KV_S("volume", vol), KV_S("node", node));
	if ((r = wait_attachment(call, c, vol, node, NULL, NULL, NULL)) != 0)
		return r;
	csi_devices_release(c->devices, node, vol);
	return 0;
}

int csi_ctrl_unpublish(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ControllerUnpublishVolumeRequest *req = (const void *)in;
	struct csi_ctrl *c = rpc_call_userdata(call);
	struct ec2_volume v = {0};
	struct aws_error err = {0};
	char key[128];
	int r, code = RPC_OK;

	if (!*req->volume_id)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "volume id is missing");
	/* no such volume can be attached anywhere, nothing to such a node */
	if (!aws_volume_id_valid(req->volume_id) ||
	    (*req->node_id && !aws_instance_id_valid(req->node_id))) {
		log_v(2, "malformed volume or node id: nothing to detach",
		      KV_S("volume", ctrl_id_str(call, req->volume_id)),
		      KV_S("node", ctrl_id_str(call, req->node_id)));
		return RPC_OK;
	}
	snprintf(key, sizeof(key), "pub/%s/%s", req->volume_id, req->node_id);
	if (ctrl_inflight_add(c, key) < 0)
		return rpc_call_error(
		    call, RPC_ABORTED,
		    "an operation for volume %s on node %s is already in progress", req->volume_id,
		    req->node_id);
	r = ec2_describe_volume(c, req->volume_id, &v, &err);
	if (r == -ENOENT) {
		log_v(2, "volume gone, so detached", KV_S("volume", req->volume_id));
	} else if (r < 0) {
		code = ctrl_aws_fail(call, r, &err, "looking up the volume", RPC_NOT_FOUND,
				     RPC_INTERNAL);
	} else {
		/* node_id unset: detach from every node (CSI spec) */
		for (size_t i = 0; i < v.n_att && code == RPC_OK; i++) {
			if (*req->node_id && strcmp(v.att[i].instance, req->node_id) != 0)
				continue;
			if (strcmp(v.att[i].state, "detached") == 0)
				continue;
			code = detach_one(call, c, req->volume_id, v.att[i].instance);
		}
		if (code == RPC_OK && *req->node_id)
			csi_devices_release(c->devices, req->node_id, req->volume_id);
	}
	ec2_volume_release(&v);
	ctrl_inflight_del(c, key);
	return code;
}
