/* What the gRPC server and client share: status codes, endpoints, message helpers.
 *
 * The project speaks gRPC through gRPC's C core (Debian's libgrpc) and protobuf-c. The C core
 * owns the "grpc_" prefix, so this layer uses "rpc_". Messages are protobuf-c messages; their
 * descriptors come from the code protoc-c generates at build time (e.g.
 * "common/csi/csi.pb-c.h"). */
#pragma once
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>

/* gRPC status codes (grpc/status.h), under names that do not clash with the C core's. */
enum rpc_code {
	RPC_OK = 0,
	RPC_CANCELLED = 1,
	RPC_UNKNOWN = 2,
	RPC_INVALID_ARGUMENT = 3,
	RPC_DEADLINE_EXCEEDED = 4,
	RPC_NOT_FOUND = 5,
	RPC_ALREADY_EXISTS = 6,
	RPC_PERMISSION_DENIED = 7,
	RPC_RESOURCE_EXHAUSTED = 8,
	RPC_FAILED_PRECONDITION = 9,
	RPC_ABORTED = 10,
	RPC_OUT_OF_RANGE = 11,
	RPC_UNIMPLEMENTED = 12,
	RPC_INTERNAL = 13,
	RPC_UNAVAILABLE = 14,
	RPC_DATA_LOSS = 15,
	RPC_UNAUTHENTICATED = 16,
};
#define RPC_CODE_MAX 16

/* "OK", "InvalidArgument", ... as grpc-go spells them (also the metric label); "Code(n)" for an
 * unknown code. */
const char *rpc_code_name(int code);
/* The code for a name as rpc_code_name() writes it, or an upper-case name ("INVALID_ARGUMENT"),
 * or a number; -EINVAL otherwise. */
int rpc_code_from_name(const char *name);

/* Parses a CSI endpoint into the gRPC target to bind or dial:
 *   unix:///csi/csi.sock, unix:/csi/csi.sock  -> unix socket /csi/csi.sock
 *   unix://tmp/csi.sock                        -> /tmp/csi.sock (the upstream default spelled
 *                                                  with two slashes, read as Go's url does)
 *   /csi/csi.sock                              -> unix socket
 *   tcp://127.0.0.1:10000, 127.0.0.1:10000     -> TCP
 * ret_target gets "unix:/abs/path" or "host:port"; ret_path the socket path ("" for TCP).
 * -EINVAL for anything else (a relative unix path, an empty one, another scheme). */
int rpc_endpoint_parse(const char *endpoint, char *ret_target, size_t target_len, char *ret_path,
		       size_t path_len);

/* Finds a top-level string field of a message by its proto name; NULL when absent or empty. */
const char *rpc_msg_str(const ProtobufCMessage *m, const char *field);
/* Looks key up in a map<string,string> field (by proto name) of a decoded message; NULL when
 * the map or the key is absent. */
const char *rpc_msg_map_get(const ProtobufCMessage *m, const char *field, const char *key);
/* For a map<string,string> field: the "key" and "value" fields of its entry message; false for
 * NULL or any other field. */
bool rpc_map_fields(const ProtobufCFieldDescriptor *f, const ProtobufCFieldDescriptor **ret_key,
		    const ProtobufCFieldDescriptor **ret_value);
/* The bytes one element of a repeated field of type t takes in protobuf-c's array. */
size_t rpc_field_elem_size(ProtobufCType t);

/* Sets up gRPC's C core once per process (routes its logs to ours, at -v 6 and above);
 * rpc_global_release() undoes one rpc_global_acquire(). */
void rpc_global_acquire(void);
void rpc_global_release(void);
