/* Status codes, endpoints and message helpers shared by the gRPC server and client. */
#include "common/grpc/rpc.h"

#include <errno.h>
#include <grpc/grpc.h>
#include <grpc/support/log.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/base/buf.h"
#include "common/base/log.h"

static const char *const code_names[] = {
    "OK",	"Canceled",	   "Unknown",	       "InvalidArgument",   "DeadlineExceeded",
    "NotFound", "AlreadyExists",   "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
    "Aborted",	"OutOfRange",	   "Unimplemented",    "Internal",	    "Unavailable",
    "DataLoss", "Unauthenticated",
};

static const char *const code_upper[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *rpc_code_name(int code)
{
	static __thread char other[24];

	if (code >= 0 && code <= RPC_CODE_MAX)
		return code_names[code];
	snprintf(other, sizeof(other), "Code(%d)", code);
	return other;
}

int rpc_code_from_name(const char *name)
{
	long long v;

	if (!name)
		return -EINVAL;
	for (int i = 0; i <= RPC_CODE_MAX; i++)
		if (strcmp(name, code_names[i]) == 0 || strcasecmp(name, code_upper[i]) == 0)
			return i;
	if (strcmp(name, "Cancelled") == 0)
		return RPC_CANCELLED;
	if (str_to_ll(name, 0, RPC_CODE_MAX, &v) == 0)
		return (int)v;
	return -EINVAL;
}

int rpc_endpoint_parse(const char *endpoint, char *ret_target, size_t target_len, char *ret_path,
		       size_t path_len)
{
	char path[4096];
	const char *p;
	int r;

	if (!endpoint || !*endpoint)
		return -EINVAL;
	if (str_has_prefix(endpoint, "unix://")) {
		p = endpoint + 7;
		if (*p == '/')
			r = str_copy(path, sizeof(path), p);
		else /* unix://tmp/csi.sock: Go's url.Parse gives host "tmp", path "/csi.sock" */
			r = str_printf(path, sizeof(path), "/%s", p);
	} else if (str_has_prefix(endpoint, "unix:")) {
		p = endpoint + 5;
		if (*p != '/')
			return -EINVAL;
		r = str_copy(path, sizeof(path), p);
	} else if (endpoint[0] == '/') {
		r = str_copy(path, sizeof(path), endpoint);
	} else {
		p = str_has_prefix(endpoint, "tcp://") ? endpoint + 6 : endpoint;
		const char *colon = strrchr(p, ':');
		long long port;
		if (!colon || colon == p || strchr(p, '/') || strstr(p, "://") ||
		    str_to_ll(colon + 1, 0, 65535, &port) < 0)
			return -EINVAL;
		if ((r = str_copy(ret_target, target_len, p)) < 0)
			return r;
		if (path_len)
			ret_path[0] = 0;
		return 0;
	}
	if (r < 0)
		return r;
	if (strlen(path) < 2 || path[strlen(path) - 1] == '/')
		return -EINVAL;
	/* sockaddr_un holds 108 bytes */
	if (strlen(path) >= 108)
		return -ENAMETOOLONG;
	if ((r = str_printf(ret_target, target_len, "unix:%s", path)) < 0)
		return r;
	return str_copy(ret_path, path_len, path) < 0 ? -ENAMETOOLONG : 0;
}

const char *rpc_msg_str(const ProtobufCMessage *m, const char *field)
{
	const ProtobufCFieldDescriptor *f;

	if (!m || !(f = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, field)))
		return NULL;
	if (f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED)
		return NULL;
	const char *s = *(const char *const *)((const char *)m + f->offset);
	return s && *s ? s : NULL;
}

const char *rpc_msg_map_get(const ProtobufCMessage *m, const char *field, const char *key)
{
	const ProtobufCFieldDescriptor *f;

	const ProtobufCFieldDescriptor *kf, *vf;

	if (!m || !key ||
	    !(f = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, field)) ||
	    !rpc_map_fields(f, &kf, &vf))
		return NULL;
	size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
	ProtobufCMessage *const *entries =
	    *(ProtobufCMessage *const *const *)((const char *)m + f->offset);
	for (size_t i = 0; i < n; i++) {
		const char *k = *(const char *const *)((const char *)entries[i] + kf->offset);
		if (k && strcmp(k, key) == 0)
			return *(const char *const *)((const char *)entries[i] + vf->offset);
	}
	return NULL;
}

bool rpc_map_fields(const ProtobufCFieldDescriptor *f, const ProtobufCFieldDescriptor **ret_key,
		    const ProtobufCFieldDescriptor **ret_value)
{
	const ProtobufCFieldDescriptor *kf, *vf;

	if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE || f->label != PROTOBUF_C_LABEL_REPEATED)
		return false;
	kf = protobuf_c_message_descriptor_get_field_by_name(f->descriptor, "key");
	vf = protobuf_c_message_descriptor_get_field_by_name(f->descriptor, "value");
	if (!kf || !vf || kf->type != PROTOBUF_C_TYPE_STRING || vf->type != PROTOBUF_C_TYPE_STRING)
		return false;
	*ret_key = kf;
	*ret_value = vf;
	return true;
}

size_t rpc_field_elem_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	}
	return 0;
}

static void grpc_log_to_ours(gpr_log_func_args *a)
{
	if (a->severity == GPR_LOG_SEVERITY_ERROR)
		log_v(2, "grpc core", KV_S("file", a->file), KV_I("line", a->line),
		      KV_S("msg", a->message));
	else
		log_v(6, "grpc core", KV_S("file", a->file), KV_I("line", a->line),
		      KV_S("msg", a->message));
}

static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned global_refs;

void rpc_global_acquire(void)
{
	pthread_mutex_lock(&global_lock);
	if (global_refs++ == 0) {
		gpr_set_log_function(grpc_log_to_ours);
		gpr_set_log_verbosity(log_enabled(6) ? GPR_LOG_SEVERITY_DEBUG
						     : GPR_LOG_SEVERITY_ERROR);
		grpc_init();
	}
	pthread_mutex_unlock(&global_lock);
}

void rpc_global_release(void)
{
	pthread_mutex_lock(&global_lock);
	if (global_refs > 0 && --global_refs == 0)
		grpc_shutdown();
	pthread_mutex_unlock(&global_lock);
}
