/* What handlers use on a call: userdata, errors, deadlines, log fields, and the arena the
 * reply is built in (freed after the reply is encoded). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/grpc/server_internal.h"

/* ---- arena ---- */

void *rpc_call_alloc(struct rpc_call *c, size_t n)
{
	struct arena_blk *b;

	if (n > ((size_t)1 << 30))
		return NULL;
	if (!(b = calloc(1, sizeof(*b) + n)))
		return NULL;
	b->next = c->arena;
	c->arena = b;
	return b->data;
}

void rpc_call_arena_free(struct rpc_call *c)
{
	while (c->arena) {
		struct arena_blk *n = c->arena->next;
		free(c->arena);
		c->arena = n;
	}
	c->n_caps = 0;
}

char *rpc_call_strdup(struct rpc_call *c, const char *s)
{
	size_t n = strlen(s ? s : "");
	char *d = rpc_call_alloc(c, n + 1);
	if (d && n)
		memcpy(d, s, n);
	return d;
}

char *rpc_call_printf(struct rpc_call *c, const char *fmt, ...)
{
	va_list ap;
	char *tmp = NULL, *d;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&tmp, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	d = rpc_call_strdup(c, tmp);
	free(tmp);
	return d;
}

void *rpc_call_new(struct rpc_call *c, const ProtobufCMessageDescriptor *desc)
{
	ProtobufCMessage *m = rpc_call_alloc(c, desc->sizeof_message);
	if (m)
		desc->message_init(m);
	return m;
}

/* Grows a repeated field stored in the arena by one slot; returns the slot. */
static void *array_grow(struct rpc_call *c, ProtobufCMessage *msg,
			const ProtobufCFieldDescriptor *f, size_t elt)
{
	size_t *n = (size_t *)((char *)msg + f->quantifier_offset);
	void **arr = (void **)((char *)msg + f->offset);
	struct array_cap *cap = NULL;

	for (unsigned i = 0; i < c->n_caps; i++)
		if (c->caps[i].arr == *arr && *arr)
			cap = &c->caps[i];
	if (!cap || cap->cap <= *n) {
		size_t ncap = *n < 4 ? 8 : *n * 2;
		char *na = rpc_call_alloc(c, ncap * elt);
		if (!na)
			return NULL;
		if (*n)
			memcpy(na, *arr, *n * elt);
		if (!cap && c->n_caps < ARRAY_CAPS)
			cap = &c->caps[c->n_caps++];
		if (cap) {
			cap->arr = na;
			cap->cap = ncap;
		}
		*arr = na;
	}
	return (char *)*arr + (*n)++ * elt;
}

int rpc_call_map_add(struct rpc_call *c, ProtobufCMessage *msg, const char *field, const char *key,
		     const char *value)
{
	const ProtobufCFieldDescriptor *f =
	    protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, field);
	const ProtobufCFieldDescriptor *kf, *vf;

	if (!rpc_map_fields(f, &kf, &vf))
		return -EINVAL;
	ProtobufCMessage *e = rpc_call_new(c, f->descriptor);
	char *k = rpc_call_strdup(c, key), *v = rpc_call_strdup(c, value);
	if (!e || !k || !v)
		return -ENOMEM;
	*(char **)((char *)e + kf->offset) = k;
	*(char **)((char *)e + vf->offset) = v;
	void **slot = array_grow(c, msg, f, sizeof(void *));
	if (!slot)
		return -ENOMEM;
	*slot = e;
	return 0;
}

int rpc_call_array_add(struct rpc_call *c, ProtobufCMessage *msg, const char *field,
		       const void *elem)
{
	const ProtobufCFieldDescriptor *f =
	    protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, field);

	if (!f || f->label != PROTOBUF_C_LABEL_REPEATED)
		return -EINVAL;
	size_t elt = rpc_field_elem_size(f->type);
	void *slot;
	if (f->type == PROTOBUF_C_TYPE_STRING) {
		char *s = rpc_call_strdup(c, elem);
		if (!s || !(slot = array_grow(c, msg, f, elt)))
			return -ENOMEM;
		*(char **)slot = s;
		return 0;
	}
	if (!(slot = array_grow(c, msg, f, elt)))
		return -ENOMEM;
	if (f->type == PROTOBUF_C_TYPE_MESSAGE)
		*(const void **)slot = elem;
	else
		memcpy(slot, elem, elt);
	return 0;
}

/* ---- handler API ---- */

void *rpc_call_userdata(const struct rpc_call *c)
{
	return c->ud;
}

const char *rpc_call_method(const struct rpc_call *c)
{
	return c->path;
}

int rpc_call_error(struct rpc_call *c, int code, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (s) {
		/* a status message goes to the caller and into logs: never a secret in it */
		size_t n = strlen(s) + 64;
		char *red = malloc(n);
		if (red)
			log_redact(s, red, n);
		free(s);
		s = red;
	}
	free(c->message);
	c->message = s;
	c->code = code;
	return code;
}

int64_t rpc_call_time_left_ns(const struct rpc_call *c)
{
	if (c->deadline_ns == INT64_MAX)
		return INT64_MAX;
	return c->deadline_ns - now_mono_ns();
}

bool rpc_call_stopping(const struct rpc_call *c)
{
	return cancel_is_cancelled(c->srv->cancel) || rpc_call_time_left_ns(c) <= 0;
}

struct cancel *rpc_call_cancel(const struct rpc_call *c)
{
	return c->srv->cancel;
}

void rpc_call_log_kv(struct rpc_call *c, const char *key, const char *value)
{
	if (c->n_kv >= MAX_CALL_KV || !key || !value)
		return;
	char *k = strdup(key), *v = strdup(value);
	if (!k || !v) {
		free(k);
		free(v);
		return;
	}
	c->kv_key[c->n_kv] = k;
	c->kv_val[c->n_kv++] = v;
}
