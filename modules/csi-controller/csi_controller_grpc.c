/* The CSI Controller service over gRPC: each handler turns the protobuf request into the plain
 * request of csi_controller_service.h, calls the service, and turns its result into the reply
 * or, through common/csi/grpc.h, its csi_error into a gRPC status. Nothing here decides. */
#include "modules/csi-controller/csi_controller_grpc.h"

#include <errno.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/timeutil.h"
#include "common/csi/grpc.h"
#include "modules/csi-controller/csi_controller_service.h"

#define NSEC_PER_SEC_I64 ((int64_t)NSEC_PER_SEC)

/* The deadline and the stop of a call, for the service's waits. */
static struct csi_ctrl_call call_of(struct rpc_call *call)
{
	int64_t left = rpc_call_time_left_ns(call);

	return (struct csi_ctrl_call){
	    .deadline_ns = left == INT64_MAX ? INT64_MAX : now_mono_ns() + left,
	    .cancel = rpc_call_cancel(call),
	};
}

static struct csi_cap *caps_of(struct rpc_call *call, Csi__V1__VolumeCapability *const *pb,
			       size_t n)
{
	struct csi_cap *caps = rpc_call_alloc(call, (n ? n : 1) * sizeof(*caps));

	for (size_t i = 0; caps && i < n; i++)
		csi_cap_of_pb(pb[i], &caps[i]);
	return caps;
}

static struct csi_ctrl_topology *topologies_of(struct rpc_call *call, Csi__V1__Topology *const *pb,
					       size_t n)
{
	struct csi_ctrl_topology *t = rpc_call_alloc(call, (n ? n : 1) * sizeof(*t));

	for (size_t i = 0; t && i < n; i++) {
		t[i].n_segments = pb[i]->n_segments;
		if (!(t[i].segments =
			  csi_kv_of_pb(call, (void *const *)pb[i]->segments, pb[i]->n_segments)))
			return NULL;
	}
	return t;
}

/* The accessibility requirements of a CreateVolume; false when out of memory. */
static bool topology_of(struct rpc_call *call, const Csi__V1__TopologyRequirement *pb,
			const struct csi_ctrl_topology_req **ret)
{
	struct csi_ctrl_topology_req *t;

	*ret = NULL;
	if (!pb)
		return true;
	if (!(t = rpc_call_alloc(call, sizeof(*t))) ||
	    !(t->requisite = topologies_of(call, pb->requisite, pb->n_requisite)) ||
	    !(t->preferred = topologies_of(call, pb->preferred, pb->n_preferred)))
		return false;
	t->n_requisite = pb->n_requisite;
	t->n_preferred = pb->n_preferred;
	*ret = t;
	return true;
}

static void source_of(const Csi__V1__VolumeContentSource *src, struct csi_ctrl_create_req *req)
{
	if (!src)
		return;
	req->source = CSI_SOURCE_BAD;
	if (src->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT && src->snapshot &&
	    *src->snapshot->snapshot_id) {
		req->source = CSI_SOURCE_SNAPSHOT;
		req->source_id = src->snapshot->snapshot_id;
	} else if (src->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME && src->volume &&
		   *src->volume->volume_id) {
		req->source = CSI_SOURCE_VOLUME;
		req->source_id = src->volume->volume_id;
	}
}

/* The CSI Volume of the service's volume: capacity, id, context, the zone as its topology. */
static Csi__V1__Volume *volume_msg(struct rpc_call *call, const struct csi_ctrl_volume *v)
{
	Csi__V1__Volume *vol = rpc_call_new(call, &csi__v1__volume__descriptor);
	Csi__V1__Topology *t = rpc_call_new(call, &csi__v1__topology__descriptor);

	if (!vol || !t || !(vol->volume_id = rpc_call_strdup(call, v->id)))
		return NULL;
	vol->capacity_bytes = v->capacity_bytes;
	for (size_t i = 0; i < v->n_ctx; i++)
		if (rpc_call_map_add(call, &vol->base, "volume_context", v->ctx[i].key,
				     v->ctx[i].value) < 0)
			return NULL;
	if (*v->zone &&
	    (rpc_call_map_add(call, &t->base, "segments", CSI_WELL_KNOWN_ZONE_KEY, v->zone) < 0 ||
	     rpc_call_array_add(call, &vol->base, "accessible_topology", t) < 0))
		return NULL;
	return vol;
}

/* The published_node_ids of a volume status message. */
static int add_published(struct rpc_call *call, ProtobufCMessage *status,
			 const struct csi_ctrl_volume *v)
{
	for (char **p = v->published; p && *p; p++)
		if (rpc_call_array_add(call, status, "published_node_ids", *p) < 0)
			return -ENOMEM;
	return 0;
}

static Csi__V1__Snapshot *snapshot_msg(struct rpc_call *call, const struct csi_ctrl_snapshot *s)
{
	Csi__V1__Snapshot *m = rpc_call_new(call, &csi__v1__snapshot__descriptor);
	Csi__V1__Timestamp *ts = rpc_call_new(call, &csi__v1__timestamp__descriptor);

	if (!m || !ts || !(m->snapshot_id = rpc_call_strdup(call, s->id)) ||
	    !(m->source_volume_id = rpc_call_strdup(call, s->source_volume)))
		return NULL;
	m->size_bytes = s->size_bytes;
	ts->seconds = s->created_ns / NSEC_PER_SEC_I64;
	ts->nanos = (int32_t)(s->created_ns % NSEC_PER_SEC_I64);
	m->creation_time = ts;
	m->ready_to_use = s->ready;
	return m;
}

static int create_volume(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__CreateVolumeRequest *q = (const void *)in;
	struct csi_ctrl_call cc = call_of(call);
	struct csi_ctrl_create_req req = {
	    .name = q->name,
	    .n_caps = q->n_volume_capabilities,
	    .n_params = q->n_parameters,
	    .n_mutable_params = q->n_mutable_parameters,
	    .has_range = q->capacity_range != NULL,
	    .required_bytes = q->capacity_range ? q->capacity_range->required_bytes : 0,
	    .limit_bytes = q->capacity_range ? q->capacity_range->limit_bytes : 0,
	};
	struct csi_ctrl_volume vol;
	struct csi_error err;
	int code = RPC_OK;

	if (!(req.caps = caps_of(call, q->volume_capabilities, q->n_volume_capabilities)) ||
	    !(req.params = csi_kv_of_pb(call, (void *const *)q->parameters, q->n_parameters)) ||
	    !(req.mutable_params = csi_kv_of_pb(call, (void *const *)q->mutable_parameters,
						q->n_mutable_parameters)) ||
	    !topology_of(call, q->accessibility_requirements, &req.topology))
		return csi_rpc_oom(call);
	source_of(q->volume_content_source, &req);
	if (csi_ctrl_create_volume(rpc_call_userdata(call), &cc, &req, &vol, &err) != CSI_OK)
		return csi_rpc_error(call, &err);
	Csi__V1__CreateVolumeResponse *rep =
	    rpc_call_new(call, &csi__v1__create_volume_response__descriptor);
	if (!rep || !(rep->volume = volume_msg(call, &vol))) {
		code = csi_rpc_oom(call);
	} else {
		/* the reply is sent before the request is freed */
		rep->volume->content_source = q->volume_content_source;
		rpc_call_log_kv(call, "volume", vol.id);
		*out = &rep->base;
	}
	csi_ctrl_volume_release(&vol);
	return code;
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

static int delete_volume(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__DeleteVolumeRequest *q = (const void *)in;
	struct csi_ctrl_call cc = call_of(call);
	struct csi_error err;

	csi_ctrl_delete_volume(rpc_call_userdata(call), &cc, q->volume_id, &err);
	return finish(call, &err, &csi__v1__delete_volume_response__descriptor, out);
}

static int validate(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ValidateVolumeCapabilitiesRequest *q = (const void *)in;
	struct csi_ctrl_call cc = call_of(call);
	struct csi_cap *caps = caps_of(call, q->volume_capabilities, q->n_volume_capabilities);
	const char *why = NULL;
	struct csi_error err;

	if (!caps)
		return csi_rpc_oom(call);
	if (csi_ctrl_validate(rpc_call_userdata(call), &cc, q->volume_id, caps,
			      q->n_volume_capabilities, &why, &err) != CSI_OK)
		return csi_rpc_error(call, &err);
	Csi__V1__ValidateVolumeCapabilitiesResponse *rep =
	    rpc_call_new(call, &csi__v1__validate_volume_capabilities_response__descriptor);
	if (!rep)
		return csi_rpc_oom(call);
	if (why) {
		rep->message = rpc_call_strdup(call, why);
	} else {
		Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed *cf = rpc_call_new(
		    call, &csi__v1__validate_volume_capabilities_response__confirmed__descriptor);
		if (!cf)
			return csi_rpc_oom(call);
		/* echo what was confirmed; the reply is encoded before the request is freed */
		cf->n_volume_context = q->n_volume_context;
		cf->volume_context = (void *)q->volume_context;
		cf->n_volume_capabilities = q->n_volume_capabilities;
		cf->volume_capabilities = q->volume_capabilities;
		cf->n_parameters = q->n_parameters;
		cf->parameters = (void *)q->parameters;
		cf->n_mutable_parameters = q->n_mutable_parameters;
		cf->mutable_parameters = (void *)q->mutable_parameters;
		rep->confirmed = cf;
	}
	*out = &rep->base;
	return RPC_OK;
}

static int list_volumes(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ListVolumesRequest *q = (const void *)in;
	struct csi_ctrl_call cc = call_of(call);
	struct csi_ctrl_page_req page = {q->max_entries, q->starting_token};
	struct csi_ctrl_volume_list l = {0};
	struct csi_error err;
	int code = RPC_OK;

	if (csi_ctrl_list_volumes(rpc_call_userdata(call), &cc, &page, &l, &err) != CSI_OK)
		return csi_rpc_error(call, &err);
	Csi__V1__ListVolumesResponse *rep =
	    rpc_call_new(call, &csi__v1__list_volumes_response__descriptor);
	if (!rep || (l.next_token && !(rep->next_token = rpc_call_strdup(call, l.next_token))))
		code = csi_rpc_oom(call);
	for (size_t i = 0; i < l.n && code == RPC_OK; i++) {
		Csi__V1__ListVolumesResponse__Entry *e =
		    rpc_call_new(call, &csi__v1__list_volumes_response__entry__descriptor);
		Csi__V1__ListVolumesResponse__VolumeStatus *st =
		    rpc_call_new(call, &csi__v1__list_volumes_response__volume_status__descriptor);
		if (!e || !st || !(e->volume = volume_msg(call, &l.v[i])) ||
		    add_published(call, &st->base, &l.v[i]) < 0 ||
		    rpc_call_array_add(call, &rep->base, "entries", e) < 0)
			code = csi_rpc_oom(call);
		else
			e->status = st;
	}
	csi_ctrl_volume_list_release(&l);
	if (code == RPC_OK)
		*out = &rep->base;
	return code;
}

static int get_volume(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ControllerGetVolumeRequest *q = (const void *)in;
	struct csi_ctrl_call cc = call_of(call);
	struct csi_ctrl_volume v;
	struct csi_error err;
	int code = RPC_OK;

	if (csi_ctrl_get_volume(rpc_call_userdata(call), &cc, q->volume_id, &v, &err) != CSI_OK)
		return csi_rpc_error(call, &err);
	Csi__V1__ControllerGetVolumeResponse *rep =
	    rpc_call_new(call, &csi__v1__controller_get_volume_response__descriptor);
	Csi__V1__ControllerGetVolumeResponse__VolumeStatus *st =
	    rpc_call_new(call, &csi__v1__controller_get_volume_response__volume_status__descriptor);
	if (!rep || !st || !(rep->volume = volume_msg(call, &v)) ||
	    add_published(call, &st->base, &v) < 0)
		code = csi_rpc_oom(call);
	else
		rep->status = st;
	csi_ctrl_volume_release(&v);
	if (code == RPC_OK)
		*out = &rep->base;
	return code;
}

static int publish(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ControllerPublishVolumeRequest *q = (const void *)in;
	struct csi_ctrl_call cc = call_of(call);
	struct csi_cap cap;
	struct csi_error err;
	char device[32];

	csi_cap_of_pb(q->volume_capability, &cap);
	if (csi_ctrl_publish(rpc_call_userdata(call), &cc, q->volume_id, q->node_id, &cap, device,
			     &err) != CSI_OK)
		return csi_rpc_error(call, &err);
	Csi__V1__ControllerPublishVolumeResponse *rep =
	    rpc_call_new(call, &csi__v1__controller_publish_volume_response__descriptor);
	if (!rep ||
	    rpc_call_map_add(call, &rep->base, "publish_context", CSI_CTX_DEVICE_PATH, device) < 0)
		return csi_rpc_oom(call);
	rpc_call_log_kv(call, "device", device);
	*out = &rep->base;
	return RPC_OK;
}

static int unpublish(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ControllerUnpublishVolumeRequest *q = (const void *)in;
	struct csi_ctrl_call cc = call_of(call);
	struct csi_error err;

	csi_ctrl_unpublish(rpc_call_userdata(call), &cc, q->volume_id, q->node_id, &err);
	return finish(call, &err, &csi__v1__controller_unpublish_volume_response__descriptor, out);
}

static int expand(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ControllerExpandVolumeRequest *q = (const void *)in;
	struct csi_ctrl_call cc = call_of(call);
	const Csi__V1__CapacityRange *range = q->capacity_range;
	struct csi_cap cap;
	struct csi_error err;
	long long bytes;
	bool node;

	csi_cap_of_pb(q->volume_capability, &cap);
	if (csi_ctrl_expand(rpc_call_userdata(call), &cc, q->volume_id, range != NULL,
			    range ? range->required_bytes : 0, range ? range->limit_bytes : 0, &cap,
			    &bytes, &node, &err) != CSI_OK)
		return csi_rpc_error(call, &err);
	Csi__V1__ControllerExpandVolumeResponse *rep =
	    rpc_call_new(call, &csi__v1__controller_expand_volume_response__descriptor);
	if (!rep)
		return csi_rpc_oom(call);
	rep->capacity_bytes = bytes;
	rep->node_expansion_required = node;
	*out = &rep->base;
	return RPC_OK;
}

static int modify(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ControllerModifyVolumeRequest *q = (const void *)in;
	struct csi_ctrl_call cc = call_of(call);
	struct csi_kv *params =
	    csi_kv_of_pb(call, (void *const *)q->mutable_parameters, q->n_mutable_parameters);
	struct csi_error err;

	if (!params)
		return csi_rpc_oom(call);
	csi_ctrl_modify(rpc_call_userdata(call), &cc, q->volume_id, params, q->n_mutable_parameters,
			&err);
	return finish(call, &err, &csi__v1__controller_modify_volume_response__descriptor, out);
}

static int create_snapshot(struct rpc_call *call, const ProtobufCMessage *in,
			   ProtobufCMessage **out)
{
	const Csi__V1__CreateSnapshotRequest *q = (const void *)in;
	struct csi_ctrl_call cc = call_of(call);
	struct csi_kv *params = csi_kv_of_pb(call, (void *const *)q->parameters, q->n_parameters);
	struct csi_ctrl_snapshot s;
	struct csi_error err;

	if (!params)
		return csi_rpc_oom(call);
	if (csi_ctrl_create_snapshot(rpc_call_userdata(call), &cc, q->name, q->source_volume_id,
				     params, q->n_parameters, &s, &err) != CSI_OK)
		return csi_rpc_error(call, &err);
	Csi__V1__CreateSnapshotResponse *rep =
	    rpc_call_new(call, &csi__v1__create_snapshot_response__descriptor);
	if (!rep || !(rep->snapshot = snapshot_msg(call, &s)))
		return csi_rpc_oom(call);
	rpc_call_log_kv(call, "snapshot", s.id);
	*out = &rep->base;
	return RPC_OK;
}

static int delete_snapshot(struct rpc_call *call, const ProtobufCMessage *in,
			   ProtobufCMessage **out)
{
	const Csi__V1__DeleteSnapshotRequest *q = (const void *)in;
	struct csi_ctrl_call cc = call_of(call);
	struct csi_error err;

	csi_ctrl_delete_snapshot(rpc_call_userdata(call), &cc, q->snapshot_id, &err);
	return finish(call, &err, &csi__v1__delete_snapshot_response__descriptor, out);
}

static int list_snapshots(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ListSnapshotsRequest *q = (const void *)in;
	struct csi_ctrl_call cc = call_of(call);
	struct csi_ctrl_page_req page = {q->max_entries, q->starting_token};
	struct csi_ctrl_snapshot_list l = {0};
	struct csi_error err;
	int code = RPC_OK;

	if (csi_ctrl_list_snapshots(rpc_call_userdata(call), &cc, &page, q->snapshot_id,
				    q->source_volume_id, &l, &err) != CSI_OK)
		return csi_rpc_error(call, &err);
	Csi__V1__ListSnapshotsResponse *rep =
	    rpc_call_new(call, &csi__v1__list_snapshots_response__descriptor);
	if (!rep || (l.next_token && !(rep->next_token = rpc_call_strdup(call, l.next_token))))
		code = csi_rpc_oom(call);
	for (size_t i = 0; i < l.n && code == RPC_OK; i++) {
		Csi__V1__ListSnapshotsResponse__Entry *e =
		    rpc_call_new(call, &csi__v1__list_snapshots_response__entry__descriptor);
		if (!e || !(e->snapshot = snapshot_msg(call, &l.s[i])) ||
		    rpc_call_array_add(call, &rep->base, "entries", e) < 0)
			code = csi_rpc_oom(call);
	}
	csi_ctrl_snapshot_list_release(&l);
	if (code == RPC_OK)
		*out = &rep->base;
	return code;
}

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
		return csi_rpc_oom(call);
	for (size_t i = 0; i < ARRAY_SIZE(caps); i++) {
		Csi__V1__ControllerServiceCapability *cap =
		    rpc_call_new(call, &csi__v1__controller_service_capability__descriptor);
		Csi__V1__ControllerServiceCapability__RPC *rpc =
		    rpc_call_new(call, &csi__v1__controller_service_capability__rpc__descriptor);
		if (!cap || !rpc)
			return csi_rpc_oom(call);
		rpc->type = caps[i];
		cap->type_case = CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
		cap->rpc = rpc;
		if (rpc_call_array_add(call, &rep->base, "capabilities", cap) < 0)
			return csi_rpc_oom(call);
	}
	*out = &rep->base;
	return RPC_OK;
}

#define M(path, msg, fn, quiet)                                                                    \
	{                                                                                          \
		"/csi.v1.Controller/" path, &csi__v1__##msg##_request__descriptor,                 \
		    &csi__v1__##msg##_response__descriptor, fn, quiet                              \
	}

const struct rpc_method csi_ctrl_methods[] = {
    M("CreateVolume", create_volume, create_volume, false),
    M("DeleteVolume", delete_volume, delete_volume, false),
    M("ControllerPublishVolume", controller_publish_volume, publish, false),
    M("ControllerUnpublishVolume", controller_unpublish_volume, unpublish, false),
    M("ValidateVolumeCapabilities", validate_volume_capabilities, validate, false),
    M("ListVolumes", list_volumes, list_volumes, false),
    M("ControllerGetVolume", controller_get_volume, get_volume, false),
    M("ControllerGetCapabilities", controller_get_capabilities, get_capabilities, true),
    M("CreateSnapshot", create_snapshot, create_snapshot, false),
    M("DeleteSnapshot", delete_snapshot, delete_snapshot, false),
    M("ListSnapshots", list_snapshots, list_snapshots, false),
    M("ControllerExpandVolume", controller_expand_volume, expand, false),
    M("ControllerModifyVolume", controller_modify_volume, modify, false),
    {NULL},
};
