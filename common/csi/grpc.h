/* The gRPC side of the CSI services, for their thin adapters (csi_node_grpc.c,
 * csi_controller_grpc.c): a csi_error (error.h) as a gRPC status, a protobuf capability or map
 * as the plain types of volume.h. The services themselves never see gRPC.
 *
 *   static int node_stage(struct rpc_call *call, const ProtobufCMessage *in,
 *                         ProtobufCMessage **out)
 *   {
 *           const Csi__V1__NodeStageVolumeRequest *q = (const void *)in;
 *           struct csi_node_volume_req req = { .volume_id = q->volume_id, ... };
 *           struct csi_error err;
 *
 *           csi_cap_of_pb(q->volume_capability, &req.cap);
 *           if (csi_node_stage(rpc_call_userdata(call), &req, &err) != CSI_OK)
 *                   return csi_rpc_error(call, &err);
 *           ...build the reply...
 *   }
 */
#pragma once
#include <stddef.h>

#include "common/csi/csi.pb-c.h"
#include "common/csi/error.h"
#include "common/csi/volume.h"
#include "common/grpc/server.h"

/* The gRPC status code (enum rpc_code) of a CSI code. */
int csi_rpc_code(enum csi_code code);
/* Sets the call's status from e (code and message; the message is redacted as every status
 * message is) and returns the gRPC code. */
int csi_rpc_error(struct rpc_call *call, const struct csi_error *e);
/* RESOURCE_EXHAUSTED "out of memory" on the call; returns its code. */
int csi_rpc_oom(struct rpc_call *call);
/* A capability of a request (NULL: not present). */
void csi_cap_of_pb(const Csi__V1__VolumeCapability *c, struct csi_cap *ret);
/* The entries of a protobuf map<string,string> field (q->parameters, q->n_parameters) as a
 * csi_kv array on the call's arena, pointing into the request (which outlives the handler).
 * Never NULL unless out of memory, also for n == 0. */
struct csi_kv *csi_kv_of_pb(struct rpc_call *call, void *const *entries, size_t n);
