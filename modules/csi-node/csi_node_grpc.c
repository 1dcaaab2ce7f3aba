/* The CSI Node service over gRPC: each handler turns the protobuf request into the plain
 * request of csi_node_service.h, calls it, and turns the result into the reply or, through
 * common/csi/grpc.h, the csi_error into a gRPC status. */
#include "modules/csi-node/csi_node.h"

#include <errno.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/csi/grpc.h"
#include "modules/csi-node/csi_node_service.h"

/* The maps and the capability NodeStage and NodePublish share; false when out of memory. */
static bool volume_req_of(struct rpc_call *call, struct csi_node_volume_req *req,
			  void *const *pctx, size_t n_pctx, void *const *vctx, size_t n_vctx,
			  const Csi__V1__VolumeCapability *cap)
{
	req->n_publish_context = n_pctx;
	req->n_volume_context = n_vctx;
	req->publish_context = csi_kv_of_pb(call, pctx, n_pctx);
	req->volume_context = csi_kv_of_pb(call, vctx, n_vctx);
	if (!req->publish_context || !req->volume_context)
		return false;
	csi_cap_of_pb(cap, &req->cap);
	return true;
}

/* The reply of a call whose reply has no fields, or its error status. */
static int finish(struct rpc_call *call, const struct csi_error *err,
		  const ProtobufCMessageDescriptor *d, ProtobufCMessage **out)
{
	ProtobufCMessage *rep;

	if (err->code != CSI_OK)
		return csi_rpc_error(call, err);
	if (!(rep = rpc_call_new(call, d)))
		return csi_rpc_oom(call);
	*out = rep;
	return RPC_OK;
}

static int node_stage(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__NodeStageVolumeRequest *q = (const void *)in;
	struct csi_node_volume_req req = {
		.volume_id = q->volume_id,
		.staging_path = q->staging_target_path,
	};
	struct csi_error st;

	if (!volume_req_of(call, &req, (void *const *)q->publish_context, q->n_publish_context,
			   (void *const *)q->volume_context, q->n_volume_context,
			   q->volume_capability))
		return csi_rpc_oom(call);
	csi_node_stage(rpc_call_userdata(call), &req, &st);
	return finish(call, &st, &csi__v1__node_stage_volume_response__descriptor, out);
}

static int node_unstage(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__NodeUnstageVolumeRequest *q = (const void *)in;
	struct csi_error st;

	csi_node_unstage(rpc_call_userdata(call), q->volume_id, q->staging_target_path, &st);
	return finish(call, &st, &csi__v1__node_unstage_volume_response__descriptor, out);
}

static int node_publish(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__NodePublishVolumeRequest *q = (const void *)in;
	struct csi_node_volume_req req = {
		.volume_id = q->volume_id,
		.staging_path = q->staging_target_path,
		.target_path = q->target_path,
		.readonly = q->readonly,
	};
	struct csi_error st;

	if (!volume_req_of(call, &req, (void *const *)q->publish_context, q->n_publish_context,
			   (void *const *)q->volume_context, q->n_volume_context,
			   q->volume_capability))
		return csi_rpc_oom(call);
	csi_node_publish(rpc_call_userdata(call), &req, &st);
	return finish(call, &st, &csi__v1__node_publish_volume_response__descriptor, out);
}

static int node_unpublish(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__NodeUnpublishVolumeRequest *q = (const void *)in;
	struct csi_error st;

	csi_node_unpublish(rpc_call_userdata(call), q->volume_id, q->target_path, &st);
	return finish(call, &st, &csi__v1__node_unpublish_volume_response__descriptor, out);
}

static int node_expand(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__NodeExpandVolumeRequest *q = (const void *)in;
	struct csi_node_expand_req req = {
		.volume_id = q->volume_id,
		.volume_path = q->volume_path,
		.staging_path = q->staging_target_path,
		.required_bytes = q->capacity_range ? q->capacity_range->required_bytes : 0,
	};
	struct csi_error st;
	int64_t bytes = 0;

	csi_cap_of_pb(q->volume_capability, &req.cap);
	if (csi_node_expand(rpc_call_userdata(call), &req, &bytes, &st) != CSI_OK)
		return csi_rpc_error(call, &st);
	Csi__V1__NodeExpandVolumeResponse *rep =
	    rpc_call_new(call, &csi__v1__node_expand_volume_response__descriptor);
	if (!rep)
		return csi_rpc_oom(call);
	rep->capacity_bytes = bytes;
	*out = &rep->base;
	return RPC_OK;
}

static int add_usage(struct rpc_call *call, ProtobufCMessage *rep, Csi__V1__VolumeUsage__Unit unit,
		     int64_t total, int64_t avail, int64_t used)
{
	Csi__V1__VolumeUsage *u = rpc_call_new(call, &csi__v1__volume_usage__descriptor);

	if (!u)
		return -ENOMEM;
	u->unit = unit;
	u->total = total;
	u->available = avail;
	u->used = used;
	return rpc_call_array_add(call, rep, "usage", u);
}

static int node_stats(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__NodeGetVolumeStatsRequest *q = (const void *)in;
	struct csi_node_stats s;
	struct csi_error st;

	if (csi_node_get_stats(rpc_call_userdata(call), q->volume_id, q->volume_path, &s, &st) !=
	    CSI_OK)
		return csi_rpc_error(call, &st);
	Csi__V1__NodeGetVolumeStatsResponse *rep =
		rpc_call_new(call, &csi__v1__node_get_volume_stats_response__descriptor);
	Csi__V1__VolumeCondition *cond = rpc_call_new(call, &csi__v1__volume_condition__descriptor);
	if (!rep || !cond)
		return csi_rpc_oom(call);
	if (s.has_bytes && add_usage(call, &rep->base, CSI__V1__VOLUME_USAGE__UNIT__BYTES,
				     s.bytes_total, s.bytes_available, s.bytes_used) < 0)
		return csi_rpc_oom(call);
	if (s.has_inodes && add_usage(call, &rep->base, CSI__V1__VOLUME_USAGE__UNIT__INODES,
				      s.inodes_total, s.inodes_free, s.inodes_used) < 0)
		return csi_rpc_oom(call);
	cond->abnormal = s.abnormal;
	if (!(cond->message = rpc_call_strdup(call, s.message)))
		return csi_rpc_oom(call);
	rep->volume_condition = cond;
	*out = &rep->base;
	return RPC_OK;
}

static int node_caps(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	static const Csi__V1__NodeServiceCapability__RPC__Type types[] = {
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION,
	};
	Csi__V1__NodeGetCapabilitiesResponse *rep =
		rpc_call_new(call, &csi__v1__node_get_capabilities_response__descriptor);

	if (!rep)
		return csi_rpc_oom(call);
	for (size_t i = 0; i < ARRAY_SIZE(types); i++) {
		Csi__V1__NodeServiceCapability *c =
		    rpc_call_new(call, &csi__v1__node_service_capability__descriptor);
		Csi__V1__NodeServiceCapability__RPC *r =
			rpc_call_new(call, &csi__v1__node_service_capability__rpc__descriptor);
		if (!c || !r)
			return csi_rpc_oom(call);
		r->type = types[i];
		c->type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
		c->rpc = r;
		if (rpc_call_array_add(call, &rep->base, "capabilities", c) < 0)
			return csi_rpc_oom(call);
	}
	*out = &rep->base;
	return RPC_OK;
}

static int node_info(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const struct csi_node_config *cfg = csi_node_get_config(rpc_call_userdata(call));
	Csi__V1__NodeGetInfoResponse *rep =
	    rpc_call_new(call, &csi__v1__node_get_info_response__descriptor);
	Csi__V1__Topology *topo = rpc_call_new(call, &csi__v1__topology__descriptor);

	if (!rep || !topo ||
	    !(rep->node_id = rpc_call_strdup(call, cfg->node_id ? cfg->node_id : "")))
		return csi_rpc_oom(call);
	rep->max_volumes_per_node =
	    cfg->max_volumes_fn ? cfg->max_volumes_fn(cfg->max_volumes_ud) : cfg->max_volumes;
	for (size_t i = 0; i < cfg->n_topology; i++)
		if (rpc_call_map_add(call, &topo->base, "segments", cfg->topology[i].key,
				     cfg->topology[i].value) < 0)
			return csi_rpc_oom(call);
	rep->accessible_topology = topo;
	*out = &rep->base;
	return RPC_OK;
}

#define M(name, msg, fn, q)                                                                        \
	{ "/csi.v1.Node/" name, &csi__v1__##msg##_request__descriptor,                             \
	  &csi__v1__##msg##_response__descriptor, fn, q }

const struct rpc_method csi_node_methods[] = {
	M("NodeStageVolume", node_stage_volume, node_stage, false),
	M("NodeUnstageVolume", node_unstage_volume, node_unstage, false),
	M("NodePublishVolume", node_publish_volume, node_publish, false),
	M("NodeUnpublishVolume", node_unpublish_volume, node_unpublish, false),
	M("NodeExpandVolume", node_expand_volume, node_expand, false),
	M("NodeGetVolumeStats", node_get_volume_stats, node_stats, true),
	M("NodeGetCapabilities", node_get_capabilities, node_caps, true),
	M("NodeGetInfo", node_get_info, node_info, false),
	{ NULL },
};
