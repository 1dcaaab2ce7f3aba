/* protobuf-c <-> JSON through descriptors. See pbjson.h for the mapping. */
#include "common/grpc/pbjson.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/base64.h"
#include "common/base/buf.h"
#include "common/base/timeutil.h"
#include "common/grpc/rpc.h"

#define PBJSON_MAX_DEPTH 32

#define FIELD_PTR(m, f) ((void *)((char *)(m) + (f)->offset))
#define FIELD_CPTR(m, f) ((const void *)((const char *)(m) + (f)->offset))
#define QUANT(m, f) ((const char *)(m) + (f)->quantifier_offset)

static bool is_map_entry(const ProtobufCMessageDescriptor *d)
{
	return d && d->n_fields == 2 && str_has_suffix(d->name, "Entry") &&
	       strcmp(d->fields[0].name, "key") == 0 && strcmp(d->fields[1].name, "value") == 0;
}

static bool wrapper_kind(const ProtobufCMessageDescriptor *d, const char *what)
{
	const char *dot = strrchr(d->name, '.');
	return strcmp(dot ? dot + 1 : d->name, what) == 0;
}

static bool field_is_secret(const ProtobufCFieldDescriptor *f)
{
	return strcmp(f->name, "secrets") == 0 || strcmp(f->name, "mount_flags") == 0;
}

static cJSON *b64_json(const ProtobufCBinaryData *b)
{
	_cleanup_free_ char *s = NULL;

	if (base64_encode(b->data, b->len, BASE64_STD, &s) < 0)
		return NULL;
	return cJSON_CreateString(s);
}

static cJSON *msg_json(const ProtobufCMessage *m, unsigned flags, int depth);

/* One value of field f stored at p (for repeated fields, one element). */
static cJSON *value_json(const ProtobufCFieldDescriptor *f, const void *p, unsigned flags,
			 int depth)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		return cJSON_CreateNumber(*(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return cJSON_CreateNumber(*(const uint32_t *)p);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		return cJSON_CreateNumber((double)*(const int64_t *)p);
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return cJSON_CreateNumber((double)*(const uint64_t *)p);
	case PROTOBUF_C_TYPE_FLOAT: {
		float v = *(const float *)p;
		return isfinite(v) ? cJSON_CreateNumber(v)
				   : cJSON_CreateString(isnan(v) ? "NaN"
							: v > 0	 ? "Infinity"
								 : "-Infinity");
	}
	case PROTOBUF_C_TYPE_DOUBLE: {
		double v = *(const double *)p;
		return isfinite(v) ? cJSON_CreateNumber(v)
				   : cJSON_CreateString(isnan(v) ? "NaN"
							: v > 0	 ? "Infinity"
								 : "-Infinity");
	}
	case PROTOBUF_C_TYPE_BOOL:
		return cJSON_CreateBool(*(const protobuf_c_boolean *)p);
	case PROTOBUF_C_TYPE_ENUM: {
		int v = *(const int *)p;
		const ProtobufCEnumValue *ev =
		    protobuf_c_enum_descriptor_get_value(f->descriptor, v);
		return ev ? cJSON_CreateString(ev->name) : cJSON_CreateNumber(v);
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(const char *const *)p;
		return cJSON_CreateString(s ? s : "");
	}
	case PROTOBUF_C_TYPE_BYTES:
		return b64_json(p);
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)p;
		if (!sub)
			return cJSON_CreateNull();
		return msg_json(sub, flags, depth + 1);
	}
	}
	return cJSON_CreateNull();
}

static bool scalar_is_default(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(const char *const *)p;
		return !s || !*s;
	}
	case PROTOBUF_C_TYPE_BYTES:
		return ((const ProtobufCBinaryData *)p)->len == 0;
	case PROTOBUF_C_TYPE_MESSAGE:
		return *(const void *const *)p == NULL;
	default: {
		static const char zero[8];
		return memcmp(p, zero, rpc_field_elem_size(f->type)) == 0;
	}
	}
}

static cJSON *wrapper_json(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	if (wrapper_kind(d, "Timestamp") && d->n_fields == 2) {
		int64_t s = *(const int64_t *)FIELD_CPTR(m, &d->fields[0]);
		int32_t ns = *(const int32_t *)FIELD_CPTR(m, &d->fields[1]);
		char t[64];
		if (rfc3339_format(s * NSEC_PER_SEC + ns, ns ? 9 : 0, t, sizeof(t)) < 0)
			return cJSON_CreateNumber((double)s);
		return cJSON_CreateString(t);
	}
	return value_json(&d->fields[0], FIELD_CPTR(m, &d->fields[0]), 0, 0);
}

static cJSON *msg_json(const ProtobufCMessage *m, unsigned flags, int depth)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	cJSON *o;

	if (depth > PBJSON_MAX_DEPTH)
		return cJSON_CreateString("<too deep>");
	if (d->n_fields >= 1 && d->n_fields <= 2 &&
	    (wrapper_kind(d, "BoolValue") || wrapper_kind(d, "Int64Value") ||
	     wrapper_kind(d, "Timestamp")))
		return wrapper_json(m);
	if (!(o = cJSON_CreateObject()))
		return NULL;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const void *p = FIELD_CPTR(m, f);
		cJSON *v = NULL;

		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (*(const uint32_t *)QUANT(m, f) != f->id)
				continue;
		} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
			   f->type != PROTOBUF_C_TYPE_MESSAGE &&
			   f->type != PROTOBUF_C_TYPE_STRING) {
			if (!*(const protobuf_c_boolean *)QUANT(m, f) && !(flags & PBJSON_DEFAULTS))
				continue;
		}
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)QUANT(m, f);
			const char *arr = *(const char *const *)p;
			if (n == 0 && !(flags & PBJSON_DEFAULTS))
				continue;
			if ((flags & PBJSON_REDACT) && field_is_secret(f)) {
				v = cJSON_CreateString("<redacted>");
			} else if (f->type == PROTOBUF_C_TYPE_MESSAGE &&
				   is_map_entry(f->descriptor)) {
				const ProtobufCMessageDescriptor *ed = f->descriptor;
				v = cJSON_CreateObject();
				for (size_t k = 0; v && k < n; k++) {
					const ProtobufCMessage *e =
					    ((const ProtobufCMessage *const *)arr)[k];
					const char *key =
					    *(const char *const *)FIELD_CPTR(e, &ed->fields[0]);
					cJSON *ev =
					    value_json(&ed->fields[1],
						       FIELD_CPTR(e, &ed->fields[1]), flags, depth);
					if (!ev) {
						cJSON_Delete(v);
						v = NULL;
						break;
					}
					cJSON_AddItemToObject(v, key ? key : "", ev);
				}
			} else {
				v = cJSON_CreateArray();
				size_t sz = rpc_field_elem_size(f->type);
				for (size_t k = 0; v && k < n; k++) {
					cJSON *ev = value_json(f, arr + k * sz, flags, depth);
					if (!ev) {
						cJSON_Delete(v);
						v = NULL;
						break;
					}
					cJSON_AddItemToArray(v, ev);
				}
			}
		} else {
			bool oneof = f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF;
			if (!oneof && scalar_is_default(f, p) && !(flags & PBJSON_DEFAULTS))
				continue;
			if (f->type == PROTOBUF_C_TYPE_MESSAGE && !*(const void *const *)p &&
			    !oneof)
				continue;
			v = value_json(f, p, flags, depth);
		}
		if (!v) {
			cJSON_Delete(o);
			return NULL;
		}
		cJSON_AddItemToObject(o, f->name, v);
	}
	return o;
}

cJSON *pbjson_from_msg(const ProtobufCMessage *m, unsigned flags)
{
	if (!m)
		return NULL;
	return msg_json(m, flags, 0);
}

char *pbjson_print(const ProtobufCMessage *m, unsigned flags, bool pretty)
{
	cJSON *j = pbjson_from_msg(m, flags);
	char *s;

	if (!j)
		return NULL;
	s = pretty ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

/* ---- JSON -> message ---- */

struct jerr {
	char *buf;
	size_t n;
};

static int jfail(struct jerr *e, const char *path, const char *fmt, const char *arg)
{
	char what[256];

	snprintf(what, sizeof(what), fmt, arg);
	snprintf(e->buf, e->n, "field '%s': %s", path, what);
	return -EINVAL;
}

/* Does a JSON key name the field (proto name or lowerCamelCase)? */
static bool name_matches(const char *key, const char *proto_name)
{
	if (strcmp(key, proto_name) == 0)
		return true;
	const char *p = proto_name;
	const char *k = key;
	while (*p && *k) {
		if (*p == '_' && p[1]) {
			p++;
			if (*k != (*p >= 'a' && *p <= 'z' ? *p - 32 : *p))
				return false;
		} else if (*k != *p) {
			return false;
		}
		p++;
		k++;
	}
	return !*p && !*k;
}

/* proto3 JSON: either alphabet, padding optional */
static int b64_decode(const char *s, ProtobufCBinaryData *out)
{
	void *d;
	size_t n;
	int r = base64_decode(s, strlen(s), BASE64_ANY_ALPHABET | BASE64_PAD_OPTIONAL, &d, &n);

	if (r < 0)
		return r;
	out->data = d;
	out->len = n;
	return 0;
}

static int json_msg(const cJSON *j, const ProtobufCMessageDescriptor *d, ProtobufCMessage **ret,
		    struct jerr *e, const char *path, int depth);

static int json_number(const cJSON *v, double *ret)
{
	if (cJSON_IsNumber(v)) {
		*ret = v->valuedouble;
		return 0;
	}
	if (cJSON_IsString(v))
		return str_to_double(v->valuestring, ret);
	return -EINVAL;
}

/* Parses one value of field f into p (an element slot for repeated fields). */
static int json_value(const cJSON *v, const ProtobufCFieldDescriptor *f, void *p, struct jerr *e,
		      const char *path, int depth)
{
	double x;
	long long ll;

	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		if (cJSON_IsString(v)
			? str_to_ll(v->valuestring, INT32_MIN, INT32_MAX, &ll) < 0
			: (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
			   v->valuedouble < INT32_MIN || v->valuedouble > INT32_MAX))
			return jfail(e, path, "%s", "not a 32-bit integer");
		*(int32_t *)p = cJSON_IsString(v) ? (int32_t)ll : (int32_t)v->valuedouble;
		return 0;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		if (cJSON_IsString(v)
			? str_to_ll(v->valuestring, 0, UINT32_MAX, &ll) < 0
			: (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
			   v->valuedouble < 0 || v->valuedouble > UINT32_MAX))
			return jfail(e, path, "%s", "not an unsigned 32-bit integer");
		*(uint32_t *)p = cJSON_IsString(v) ? (uint32_t)ll : (uint32_t)v->valuedouble;
		return 0;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (cJSON_IsString(v)) {
			if (str_to_ll(v->valuestring,
				      f->type == PROTOBUF_C_TYPE_UINT64 ||
					      f->type == PROTOBUF_C_TYPE_FIXED64
					  ? 0
					  : INT64_MIN,
				      INT64_MAX, &ll) < 0)
				return jfail(e, path, "%s", "not a 64-bit integer");
		} else if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
			   fabs(v->valuedouble) <= 9007199254740992.0) {
			ll = (long long)v->valuedouble;
			if (ll < 0 && (f->type == PROTOBUF_C_TYPE_UINT64 ||
				       f->type == PROTOBUF_C_TYPE_FIXED64))
				return jfail(e, path, "%s", "negative");
		} else {
			return jfail(e, path, "%s", "not an integer (quote numbers above 2^53)");
		}
		*(int64_t *)p = ll;
		return 0;
	case PROTOBUF_C_TYPE_FLOAT:
		if (json_number(v, &x) < 0)
			return jfail(e, path, "%s", "not a number");
		*(float *)p = (float)x;
		return 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		if (json_number(v, &x) < 0)
			return jfail(e, path, "%s", "not a number");
		*(double *)p = x;
		return 0;
	case PROTOBUF_C_TYPE_BOOL:
		if (!cJSON_IsBool(v))
			return jfail(e, path, "%s", "not a boolean");
		*(protobuf_c_boolean *)p = cJSON_IsTrue(v);
		return 0;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *ev = NULL;
		if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
		    v->valuedouble >= INT32_MIN && v->valuedouble <= INT32_MAX) {
			*(int *)p =
			    (int)v->valuedouble; /* proto3 enums are open: any number goes */
			return 0;
		}
		if (cJSON_IsString(v))
			ev = protobuf_c_enum_descriptor_get_value_by_name(f->descriptor,
									  v->valuestring);
		if (!ev)
			return jfail(e, path, "not a value of %s",
				     ((const ProtobufCEnumDescriptor *)f->descriptor)->name);
		*(int *)p = ev->value;
		return 0;
	}
	case PROTOBUF_C_TYPE_STRING: {
		if (!cJSON_IsString(v))
			return jfail(e, path, "%s", "not a string");
		char *s = strdup(v->valuestring);
		if (!s)
			return -ENOMEM;
		*(char **)p = s;
		return 0;
	}
	case PROTOBUF_C_TYPE_BYTES:
		if (!cJSON_IsString(v) || b64_decode(v->valuestring, p) < 0)
			return jfail(e, path, "%s", "not base64");
		return 0;
	case PROTOBUF_C_TYPE_MESSAGE:
		return json_msg(v, f->descriptor, (ProtobufCMessage **)p, e, path, depth + 1);
	}
	return jfail(e, path, "%s", "unsupported type");
}

static int json_wrapper(const cJSON *j, const ProtobufCMessageDescriptor *d, ProtobufCMessage *m,
			struct jerr *e, const char *path)
{
	if (wrapper_kind(d, "Timestamp")) {
		int64_t ns;
		if (!cJSON_IsString(j) || rfc3339_parse(j->valuestring, &ns) < 0)
			return jfail(e, path, "%s", "not an RFC 3339 time");
		*(int64_t *)FIELD_PTR(m, &d->fields[0]) = ns / NSEC_PER_SEC;
		*(int32_t *)FIELD_PTR(m, &d->fields[1]) = (int32_t)(ns % NSEC_PER_SEC);
		return 0;
	}
	return json_value(j, &d->fields[0], FIELD_PTR(m, &d->fields[0]), e, path, 0);
}

/* Frees what a singular field holds (a string, bytes, a message) and resets it. */
static void clear_value(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	void *p = FIELD_PTR(m, f);

	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		char **s = p;
		if (*s && *s != (const char *)f->default_value)
			free(*s);
		*s = (char *)f->default_value;
		break;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData *b = p;
		free(b->data);
		b->data = NULL;
		b->len = 0;
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		ProtobufCMessage **sub = p;
		if (*sub)
			protobuf_c_message_free_unpacked(*sub, NULL);
		*sub = NULL;
		break;
	}
	default:
		break;
	}
}

static int json_field(const cJSON *v, const ProtobufCFieldDescriptor *f, ProtobufCMessage *m,
		      struct jerr *e, const char *path, int depth)
{
	void *p = FIELD_PTR(m, f);
	int r;

	if (cJSON_IsNull(v))
		return 0;
	if (f->label != PROTOBUF_C_LABEL_REPEATED) {
		/* A key given twice, or two members of one oneof (they share storage): drop the
		 * value there first. Then a oneof member belongs to the message (and is freed with
		 * it) only when the case names it: set the case before parsing, so that a failure
		 * below frees what was allocated. */
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			uint32_t cur = *(uint32_t *)QUANT(m, f);
			const ProtobufCFieldDescriptor *cf =
			    cur ? protobuf_c_message_descriptor_get_field(m->descriptor, cur)
				: NULL;
			if (cf)
				clear_value(m, cf);
			*(uint32_t *)QUANT(m, f) = f->id;
		} else {
			clear_value(m, f);
		}
		if ((r = json_value(v, f, p, e, path, depth)) < 0)
			return r;
		if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
		    f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING)
			*(protobuf_c_boolean *)QUANT(m, f) = 1;
		return 0;
	}
	if (*(size_t *)QUANT(m, f)) /* a repeated field given twice: the last one wins */
		return jfail(e, path, "%s", "given twice");
	bool map = f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor);
	if (map ? !cJSON_IsObject(v) : !cJSON_IsArray(v))
		return jfail(e, path, "%s", map ? "not an object" : "not an array");
	size_t n = (size_t)cJSON_GetArraySize(v), sz = rpc_field_elem_size(f->type), i = 0;
	char *arr = n ? calloc(n, sz) : NULL;
	if (n && !arr)
		return -ENOMEM;
	*(void **)p = arr;
	*(size_t *)QUANT(m, f) = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, v)
	{
		if (map) {
			const ProtobufCMessageDescriptor *ed = f->descriptor;
			ProtobufCMessage *ent = calloc(1, ed->sizeof_message);
			if (!ent)
				return -ENOMEM;
			ed->message_init(ent);
			((ProtobufCMessage **)arr)[i] = ent;
			*(size_t *)QUANT(m, f) = ++i;
			char *k = strdup(it->string ? it->string : "");
			if (!k)
				return -ENOMEM;
			*(char **)FIELD_PTR(ent, &ed->fields[0]) = k;
			if ((r = json_value(it, &ed->fields[1], FIELD_PTR(ent, &ed->fields[1]), e,
					    path, depth)) < 0)
				return r;
		} else if (f->type == PROTOBUF_C_TYPE_MESSAGE ||
			   f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES) {
			/* counted first: a half-built element is freed with the message */
			*(size_t *)QUANT(m, f) = ++i;
			if ((r = json_value(it, f, arr + (i - 1) * sz, e, path, depth)) < 0)
				return r;
		} else {
			if ((r = json_value(it, f, arr + i * sz, e, path, depth)) < 0)
				return r;
			*(size_t *)QUANT(m, f) = ++i;
		}
	}
	return 0;
}

static int json_msg(const cJSON *j, const ProtobufCMessageDescriptor *d, ProtobufCMessage **ret,
		    struct jerr *e, const char *path, int depth)
{
	ProtobufCMessage *m;
	int r;

	if (depth > PBJSON_MAX_DEPTH)
		return jfail(e, path, "%s", "nested too deep");
	if (!(m = calloc(1, d->sizeof_message)))
		return -ENOMEM;
	d->message_init(m);
	*ret = m; /* owned by the parent from here on, freed with it */
	if (d->n_fields >= 1 && d->n_fields <= 2 &&
	    (wrapper_kind(d, "BoolValue") || wrapper_kind(d, "Int64Value") ||
	     wrapper_kind(d, "Timestamp")))
		return json_wrapper(j, d, m, e, path);
	if (!cJSON_IsObject(j))
		return jfail(e, path, "%s", "not an object");
	const cJSON *it;
	cJSON_ArrayForEach(it, j)
	{
		const ProtobufCFieldDescriptor *f = NULL;
		for (unsigned i = 0; i < d->n_fields && !f; i++)
			if (name_matches(it->string, d->fields[i].name))
				f = &d->fields[i];
		char sub[512];
		snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", it->string);
		if (!f)
			return jfail(e, sub, "no such field in %s", d->name);
		if ((r = json_field(it, f, m, e, sub, depth)) < 0)
			return r;
	}
	return 0;
}

int pbjson_to_msg(const cJSON *j, const ProtobufCMessageDescriptor *d, ProtobufCMessage **ret,
		  char *err, size_t errlen)
{
	struct jerr e = {err, errlen};
	ProtobufCMessage *m = NULL;
	int r;

	if (errlen)
		err[0] = 0;
	r = json_msg(j, d, &m, &e, "", 0);
	if (r < 0) {
		if (m)
			protobuf_c_message_free_unpacked(m, NULL);
		if (r == -ENOMEM && errlen)
			snprintf(err, errlen, "out of memory");
		return r;
	}
	*ret = m;
	return 0;
}
