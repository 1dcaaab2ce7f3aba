/* The CSI services' gRPC glue (see grpc.h). */
#include "common/csi/grpc.h"

#include "common/grpc/rpc.h"

int csi_rpc_code(enum csi_code code)
{
	switch (code) {
	case CSI_OK:
		return RPC_OK;
	case CSI_INVALID_ARGUMENT:
		return RPC_INVALID_ARGUMENT;
	case CSI_NOT_FOUND:
		return RPC_NOT_FOUND;
	case CSI_ALREADY_EXISTS:
		return RPC_ALREADY_EXISTS;
	case CSI_FAILED_PRECONDITION:
		return RPC_FAILED_PRECONDITION;
	case CSI_OUT_OF_RANGE:
		return RPC_OUT_OF_RANGE;
	case CSI_RESOURCE_EXHAUSTED:
		return RPC_RESOURCE_EXHAUSTED;
	case CSI_ABORTED:
		return RPC_ABORTED;
	case CSI_DEADLINE_EXCEEDED:
		return RPC_DEADLINE_EXCEEDED;
	case CSI_UNAVAILABLE:
		return RPC_UNAVAILABLE;
	case CSI_UNIMPLEMENTED:
		return RPC_UNIMPLEMENTED;
	case CSI_CANCELLED:
		return RPC_CANCELLED;
	case CSI_INTERNAL:
	default:
		return RPC_INTERNAL;
	}
}

int csi_rpc_error(struct rpc_call *call, const struct csi_error *e)
{
	return rpc_call_error(call, csi_rpc_code(e->code), "%s", e->message);
}

int csi_rpc_oom(struct rpc_call *call)
{
	return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
}

#define SAME_MODE(m) ((int)CSI_MODE_##m == (int)CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__##m)
_Static_assert(SAME_MODE(SINGLE_NODE_WRITER) && SAME_MODE(SINGLE_NODE_READER_ONLY) &&
		   SAME_MODE(MULTI_NODE_MULTI_WRITER) && SAME_MODE(SINGLE_NODE_SINGLE_WRITER) &&
		   SAME_MODE(SINGLE_NODE_MULTI_WRITER),
	       "volume.h's CSI_MODE_* are the protobuf's access modes");

void csi_cap_of_pb(const Csi__V1__VolumeCapability *c, struct csi_cap *ret)
{
	*ret = (struct csi_cap){0};
	if (!c)
		return;
	ret->present = true;
	ret->access_mode = c->access_mode ? (int)c->access_mode->mode : 0;
	if (c->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK) {
		ret->block = true;
	} else if (c->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT &&
		   c->mount) {
		ret->fs_type = c->mount->fs_type;
		ret->mount_flags = (const char *const *)c->mount->mount_flags;
		ret->n_mount_flags = c->mount->n_mount_flags;
	} else {
		ret->no_access_type = true;
	}
}

/* The entry types of all CSI maps share this layout. */
struct pb_entry {
	ProtobufCMessage base;
	char *key;
	char *value;
};

struct csi_kv *csi_kv_of_pb(struct rpc_call *call, void *const *entries, size_t n)
{
	struct csi_kv *kv = rpc_call_alloc(call, (n ? n : 1) * sizeof(*kv));

	if (!kv)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const struct pb_entry *e = entries[i];
		kv[i].key = e->key;
		kv[i].value = e->value;
	}
	return kv;
}
