/* A small blocking unary gRPC client on gRPC's C core, for `aws-k8s csi-client`, the tests
 * and the benchmarks.
 *
 *   struct rpc_client *c;
 *   r = rpc_client_new("unix:///csi/csi.sock", &c);
 *   ProtobufCMessage *rep;
 *   struct rpc_status st;
 *   r = rpc_client_call(c, "/csi.v1.Identity/GetPluginInfo", &req.base,
 *                       &csi__v1__get_plugin_info_response__descriptor, 10 * NSEC_PER_SEC,
 *                       &rep, &st);
 *   // r == 0: the call completed; st.code says how (rep is set only for RPC_OK, free it with
 *   // protobuf_c_message_free_unpacked(rep, NULL)). r < 0: a local failure (bad endpoint,
 *   // out of memory, a reply that does not decode: -EBADMSG).
 *   rpc_client_free(c);
 *
 * A client may be used by several threads at once (the channel is shared; each call has its
 * own completion queue). */
#pragma once
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"
#include "common/grpc/rpc.h"

struct rpc_client;

struct rpc_status {
	int code; /* enum rpc_code */
	char message[1024];
};

int rpc_client_new(const char *endpoint, struct rpc_client **ret);
void rpc_client_free(struct rpc_client *c);

/* timeout_ns <= 0 means none. */
int rpc_client_call(struct rpc_client *c, const char *path, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *reply_desc, int64_t timeout_ns,
		    ProtobufCMessage **ret_reply, struct rpc_status *ret_status);
/* The same with raw bytes both ways (for garbage-input tests); the reply is appended to
 * ret_reply when the status is OK. */
int rpc_client_call_raw(struct rpc_client *c, const char *path, const void *data, size_t len,
			int64_t timeout_ns, struct buf *ret_reply, struct rpc_status *ret_status);
