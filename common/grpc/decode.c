/* The request decoding path: protobuf-c unpacking, after a walk over the wire form that
 * refuses strings that are not valid UTF-8 or hold a NUL (protobuf-c checks neither). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/grpc/server.h"

/* ---- decoding ---- */

static bool utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t b = s[i];
		size_t len;
		uint32_t cp;
		if (b == 0)
			return false;
		if (b < 0x80) {
			i++;
			continue;
		}
		if ((b & 0xE0) == 0xC0) {
			len = 2;
			cp = b & 0x1F;
		} else if ((b & 0xF0) == 0xE0) {
			len = 3;
			cp = b & 0x0F;
		} else if ((b & 0xF8) == 0xF0) {
			len = 4;
			cp = b & 0x07;
		} else {
			return false;
		}
		if (i + len > n)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3F);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

static int varint(const uint8_t *p, size_t n, size_t *pos, uint64_t *ret)
{
	uint64_t v = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		if (*pos >= n)
			return -EBADMSG;
		uint8_t b = p[(*pos)++];
		v |= (uint64_t)(b & 0x7F) << shift;
		if (!(b & 0x80)) {
			*ret = v;
			return 0;
		}
	}
	return -EBADMSG;
}

/* Walks the wire form: every string field (at any depth the descriptors describe) must be
 * valid UTF-8 without NUL, which protobuf-c does not check (a NUL would silently cut the
 * string short). Unknown fields are skipped; malformed framing is left to protobuf-c. */
static int check_strings(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n, int depth)
{
	size_t pos = 0;
	uint64_t key, len, skip;

	if (depth > 32)
		return -EBADMSG;
	while (pos < n) {
		if (varint(p, n, &pos, &key) < 0)
			return -EBADMSG;
		switch (key & 7) {
		case 0:
			if (varint(p, n, &pos, &skip) < 0)
				return -EBADMSG;
			break;
		case 1:
			if (n - pos < 8)
				return -EBADMSG;
			pos += 8;
			break;
		case 5:
			if (n - pos < 4)
				return -EBADMSG;
			pos += 4;
			break;
		case 2: {
			if (varint(p, n, &pos, &len) < 0 || len > n - pos)
				return -EBADMSG;
			const ProtobufCFieldDescriptor *f =
			    key >> 3 <= UINT32_MAX
				? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3))
				: NULL;
			if (f && f->type == PROTOBUF_C_TYPE_STRING && !utf8_valid(p + pos, len))
				return -EBADMSG;
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
			    check_strings(f->descriptor, p + pos, len, depth + 1) < 0)
				return -EBADMSG;
			pos += len;
			break;
		}
		default:
			return -EBADMSG;
		}
	}
	return 0;
}

int rpc_decode(const ProtobufCMessageDescriptor *desc, const void *data, size_t len, size_t max,
	       ProtobufCMessage **ret)
{
	ProtobufCMessage *m;

	if (max && len > max)
		return -EMSGSIZE;
	if (check_strings(desc, data, len, 0) < 0)
		return -EBADMSG;
	m = protobuf_c_message_unpack(desc, NULL, len, data);
	if (!m)
		return -EBADMSG;
	*ret = m;
	return 0;
}
