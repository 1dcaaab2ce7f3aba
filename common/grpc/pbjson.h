/* protobuf-c messages to and from JSON, generically through their descriptors.
 *
 * The mapping follows proto3's JSON form with two choices made for people reading it in a
 * terminal: field names stay as written in the .proto (snake_case; lowerCamelCase is accepted
 * on input), and 64-bit integers are JSON numbers (exact up to 2^53, far above any size or
 * count here). Enums are their names (numbers accepted on input), bytes are base64, maps are
 * objects, oneofs appear as the member that is set, fields holding their default value are
 * left out unless PBJSON_DEFAULTS is given. Messages named BoolValue / Int64Value / Timestamp
 * (the wire twins of google.protobuf's, see common/csi/csi.proto) print as a bare bool,
 * number, and RFC 3339 string. */
#pragma once
#include <cjson/cJSON.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>

enum {
	PBJSON_REDACT = 1 << 0,	  /* maps named "secrets" and mount flags become "<redacted>" */
	PBJSON_DEFAULTS = 1 << 1, /* also print fields that hold their default value */
};

/* NULL when out of memory. */
cJSON *pbjson_from_msg(const ProtobufCMessage *m, unsigned flags);
/* Text of the message (malloc'd; NULL when out of memory). */
char *pbjson_print(const ProtobufCMessage *m, unsigned flags, bool pretty);

/* Builds a message of type d from a JSON object. 0, or -EINVAL with a sentence naming the
 * field in err. Free the message with protobuf_c_message_free_unpacked(m, NULL). */
int pbjson_to_msg(const cJSON *j, const ProtobufCMessageDescriptor *d, ProtobufCMessage **ret,
		  char *err, size_t errlen);
