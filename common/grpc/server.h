/* A small, generic unary-call gRPC server on gRPC's C core, shared by csi-controller and
 * csi-node (and anything else that needs to serve unary gRPC on a socket).
 *
 *   static int node_stage(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage
 * **out)
 *   {
 *           const Csi__V1__NodeStageVolumeRequest *req = (const void *)in;
 *           struct node *n = rpc_call_userdata(call);
 *           if (!*req->volume_id)
 *                   return rpc_call_error(call, RPC_INVALID_ARGUMENT, "volume id is missing");
 *           Csi__V1__NodeStageVolumeResponse *rep = rpc_call_new(call,
 *                   &csi__v1__node_stage_volume_response__descriptor);
 *           if (!rep)
 *                   return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
 *           ...
 *           *out = &rep->base;
 *           return RPC_OK;
 *   }
 *
 *   static const struct rpc_method node_methods[] = {
 *           { "/csi.v1.Node/NodeStageVolume", &csi__v1__node_stage_volume_request__descriptor,
 *             &csi__v1__node_stage_volume_response__descriptor, node_stage },
 *           ...
 *           { NULL },
 *   };
 *
 *   struct rpc_server *s;
 *   r = rpc_server_new(&(struct rpc_server_opts){ .endpoint = "unix:///csi/csi.sock" }, &s);
 *   r = rpc_server_register(s, node_methods, node);      // several tables may be registered
 *   r = rpc_server_start(s);                             // removes a stale socket, binds
 *   cancel_wait(cancel_root(), -1);
 *   rpc_server_free(s);  // graceful: no new calls, calls in flight finish, socket removed
 *
 * Each call: the request is decoded from protobuf with the method's request descriptor (a
 * message that does not decode gets INVALID_ARGUMENT, an unknown method UNIMPLEMENTED), the
 * handler runs on a worker thread (handlers may block: waiting on AWS, running mkfs), its reply
 * is encoded with the reply descriptor and sent, or its status code and message are. Every
 * call is counted in the metrics (grpc_server_started_total, grpc_server_handled_total with
 * grpc_code, grpc_server_handling_seconds, labelled grpc_service / grpc_method as
 * go-grpc-prometheus does) and logged once (method, the volume/node/snapshot ids and paths found
 * in the request, duration, code, error message). Secrets are never logged: a request is
 * printed in full only at -v 5 and above, with every "secrets" map and mount flags redacted.
 *
 * Memory: everything a handler allocates for its reply should come from the call's arena
 * (rpc_call_alloc, rpc_call_new, rpc_call_strdup, rpc_call_printf, rpc_call_map_add,
 * rpc_call_array_add); it is freed after the reply is encoded. The request is freed by the
 * server after the reply is encoded, so a reply may point into the request (e.g. echo its
 * capabilities); copy what must outlive the call. */
#pragma once
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/cancel.h"
#include "common/grpc/rpc.h"

struct rpc_server;
struct rpc_call;

/* Returns RPC_OK with *ret_reply set (a message of the method's reply type), or a status code
 * set through rpc_call_error(). A reply left NULL with RPC_OK is sent as an empty message. */
typedef int (*rpc_handler_fn)(struct rpc_call *call, const ProtobufCMessage *req,
			      ProtobufCMessage **ret_reply);

struct rpc_method {
	const char *path; /* "/csi.v1.Node/NodeStageVolume"; NULL ends a table */
	const ProtobufCMessageDescriptor *request;
	const ProtobufCMessageDescriptor *reply;
	rpc_handler_fn handler;
	/* A quick call made every few seconds (Probe, GetPluginInfo, NodeGetCapabilities...):
	 * successes are logged at -v 4 instead of info, and it is served ahead of queued calls
	 * (with up to two workers past max_workers), so that health checks never wait behind
	 * handlers blocked on slow work. */
	bool quiet;
};

struct rpc_server_opts {
	const char *endpoint; /* see rpc_endpoint_parse(); required */
	unsigned
	    max_workers; /* handler threads, started on demand; default 16 (+2 for quiet calls) */
	unsigned max_queued;  /* calls waiting for a worker; past it RESOURCE_EXHAUSTED; 256 */
	size_t max_message;   /* bytes, both directions; default 4 MiB */
	int64_t grace_ns;     /* on stop, how long calls in flight may run; default 30 s */
	unsigned socket_mode; /* chmod of a unix socket; default 0660 */
	/* A parent token (e.g. cancel_root()): once it is cancelled the server takes no new call
	 * and its handlers see rpc_call_cancel() cancelled; rpc_server_stop (or _free) then waits
	 * for the calls in flight and removes the socket. NULL: rpc_server_stop alone. */
	struct cancel *cancel;
};

int rpc_server_new(const struct rpc_server_opts *opts, struct rpc_server **ret);
/* Adds a NULL-path-terminated table (kept by pointer: make it static); userdata is what
 * rpc_call_userdata() returns in its handlers. -EEXIST for a path registered twice. Before
 * rpc_server_start() only. */
int rpc_server_register(struct rpc_server *s, const struct rpc_method *table, void *userdata);
/* Removes a stale socket file at the endpoint (only a socket), binds and starts serving.
 * -EADDRINUSE when another process serves the socket, -errno otherwise. */
int rpc_server_start(struct rpc_server *s);
/* Graceful stop: cancels the server's token, so no new calls; calls in flight get grace_ns to
 * finish (rpc_call_cancel() is cancelled and rpc_call_stopping() turns true at once, so long
 * waits end early), then are cancelled; the socket file is removed. Idempotent;
 * rpc_server_free() calls it. */
void rpc_server_stop(struct rpc_server *s);
void rpc_server_free(struct rpc_server *s);
/* The unix socket path ("" for TCP). */
const char *rpc_server_socket_path(const struct rpc_server *s);
/* The bound TCP port (0 for a unix socket). */
int rpc_server_port(const struct rpc_server *s);
/* Calls being served right now (for tests and health). */
unsigned rpc_server_inflight(struct rpc_server *s);

/* ---- In a handler ---- */
void *rpc_call_userdata(const struct rpc_call *c);
/* "/csi.v1.Node/NodeStageVolume" */
const char *rpc_call_method(const struct rpc_call *c);
/* Sets the status (code != RPC_OK) and its message, and returns code. */
int rpc_call_error(struct rpc_call *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Nanoseconds until the caller's deadline (INT64_MAX when it set none; <= 0 when past). */
int64_t rpc_call_time_left_ns(const struct rpc_call *c);
/* True once the server is stopping (or the call's deadline has passed): long waits should end
 * and return ABORTED or DEADLINE_EXCEEDED. */
bool rpc_call_stopping(const struct rpc_call *c);
/* The server's token, cancelled when it stops: what a handler's blocking calls take
 * (cancel_wait with the call's time left, http_request.cancel, aws_request.cancel). */
struct cancel *rpc_call_cancel(const struct rpc_call *c);
/* Adds key=value to the call's log line (e.g. the id of the volume created, a device path);
 * copies both; at most 12 per call, the ids the server finds in the request included. */
void rpc_call_log_kv(struct rpc_call *c, const char *key, const char *value);

/* Arena allocations, zeroed, freed after the reply is encoded; NULL when out of memory. */
void *rpc_call_alloc(struct rpc_call *c, size_t n);
char *rpc_call_strdup(struct rpc_call *c, const char *s);
char *rpc_call_printf(struct rpc_call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A new, initialized message of the given type. */
void *rpc_call_new(struct rpc_call *c, const ProtobufCMessageDescriptor *desc);
/* Adds key -> value (copied) to the map<string,string> field named `field` of msg. -EINVAL
 * when msg has no such map field, -ENOMEM. */
int rpc_call_map_add(struct rpc_call *c, ProtobufCMessage *msg, const char *field, const char *key,
		     const char *value);
/* Appends an element to the repeated field named `field` of msg: a message pointer for a
 * repeated message, a `const char *` (copied) for repeated string, a pointer to the scalar
 * otherwise. -EINVAL when there is no such repeated field. */
int rpc_call_array_add(struct rpc_call *c, ProtobufCMessage *msg, const char *field,
		       const void *elem);

/* ---- For tests and the fuzz harness ---- */
/* Runs the decode path of a method on raw bytes: 0 with the decoded message (free with
 * protobuf_c_message_free_unpacked(m, NULL)), -EBADMSG when it does not decode or holds a
 * string that is not valid UTF-8 (or contains a NUL), -EMSGSIZE past max. */
int rpc_decode(const ProtobufCMessageDescriptor *desc, const void *data, size_t len, size_t max,
	       ProtobufCMessage **ret);
