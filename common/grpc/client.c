/* The blocking unary gRPC client. */
#include "common/grpc/client.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"

#define CLIENT_MAX_MESSAGE (16 << 20)

struct rpc_client {
	grpc_channel *ch;
};

int rpc_client_new(const char *endpoint, struct rpc_client **ret)
{
	char target[4200], path[4096];
	grpc_channel_credentials *creds;
	struct rpc_client *c;
	int r;

	if ((r = rpc_endpoint_parse(endpoint, target, sizeof(target), path, sizeof(path))) < 0)
		return r;
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	rpc_global_acquire();
	grpc_arg args[2] = {
	    {.type = GRPC_ARG_INTEGER,
	     .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
	     .value.integer = CLIENT_MAX_MESSAGE},
	    {.type = GRPC_ARG_INTEGER, .key = (char *)GRPC_ARG_ENABLE_RETRIES, .value.integer = 0},
	};
	grpc_channel_args ca = {.num_args = 2, .args = args};
	creds = grpc_insecure_credentials_create();
	c->ch = grpc_channel_create(target, creds, &ca);
	grpc_channel_credentials_release(creds);
	if (!c->ch) {
		free(c);
		rpc_global_release();
		return -EIO;
	}
	*ret = c;
	return 0;
}

void rpc_client_free(struct rpc_client *c)
{
	if (!c)
		return;
	grpc_channel_destroy(c->ch);
	free(c);
	rpc_global_release();
}

static void status_set(struct rpc_status *st, int code, grpc_slice details)
{
	size_t n = GRPC_SLICE_LENGTH(details);

	st->code = code;
	if (n >= sizeof(st->message))
		n = sizeof(st->message) - 1;
	memcpy(st->message, GRPC_SLICE_START_PTR(details), n);
	st->message[n] = 0;
}

int rpc_client_call_raw(struct rpc_client *c, const char *path, const void *data, size_t len,
			int64_t timeout_ns, struct buf *ret_reply, struct rpc_status *st)
{
	grpc_completion_queue *cq;
	grpc_call *call;
	gpr_timespec deadline = timeout_ns > 0
				    ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
						   gpr_time_from_nanos(timeout_ns, GPR_TIMESPAN))
				    : gpr_inf_future(GPR_CLOCK_MONOTONIC);
	grpc_metadata_array initial_md, trailing_md;
	grpc_byte_buffer *send, *recv = NULL;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	grpc_slice method = grpc_slice_from_copied_string(path);
	grpc_slice payload = grpc_slice_from_copied_buffer(data, len);
	grpc_op ops[6];
	int r = 0;

	cq = grpc_completion_queue_create_for_pluck(NULL);
	call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL,
					deadline, NULL);
	grpc_slice_unref(method);
	send = grpc_raw_byte_buffer_create(&payload, 1);
	grpc_slice_unref(payload);
	grpc_metadata_array_init(&initial_md);
	grpc_metadata_array_init(&trailing_md);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &trailing_md;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	if (grpc_call_start_batch(call, ops, 6, (void *)1, NULL) != GRPC_CALL_OK) {
		r = -EIO;
	} else {
		grpc_event ev = grpc_completion_queue_pluck(
		    cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		if (ev.type != GRPC_OP_COMPLETE)
			r = -EIO;
	}
	if (r == 0) {
		status_set(st, (int)status, details);
		if (status == GRPC_STATUS_OK && recv) {
			grpc_byte_buffer_reader rd;
			if (!grpc_byte_buffer_reader_init(&rd, recv)) {
				r = -EBADMSG;
			} else {
				grpc_slice sl = grpc_byte_buffer_reader_readall(&rd);
				grpc_byte_buffer_reader_destroy(&rd);
				r = buf_append(ret_reply, GRPC_SLICE_START_PTR(sl),
					       GRPC_SLICE_LENGTH(sl));
				grpc_slice_unref(sl);
			}
		}
	}
	grpc_slice_unref(details);
	if (recv)
		grpc_byte_buffer_destroy(recv);
	grpc_byte_buffer_destroy(send);
	grpc_metadata_array_destroy(&initial_md);
	grpc_metadata_array_destroy(&trailing_md);
	grpc_call_unref(call);
	grpc_completion_queue_shutdown(cq);
	while (
	    grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	    GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	return r < 0 ? r : 0;
}

int rpc_client_call(struct rpc_client *c, const char *path, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *reply_desc, int64_t timeout_ns,
		    ProtobufCMessage **ret_reply, struct rpc_status *st)
{
	size_t n = protobuf_c_message_get_packed_size(req);
	uint8_t *data = malloc(n ? n : 1);
	struct buf rep = BUF_INIT(CLIENT_MAX_MESSAGE);
	int r;

	if (!data)
		return -ENOMEM;
	protobuf_c_message_pack(req, data);
	r = rpc_client_call_raw(c, path, data, n, timeout_ns, &rep, st);
	free(data);
	if (r < 0) {
		buf_release(&rep);
		return r;
	}
	if (st->code == RPC_OK) {
		ProtobufCMessage *m = protobuf_c_message_unpack(
		    reply_desc, NULL, rep.len, (const uint8_t *)(rep.data ? rep.data : ""));
		buf_release(&rep);
		if (!m)
			return -EBADMSG;
		*ret_reply = m;
		return 0;
	}
	buf_release(&rep);
	return 0;
}
