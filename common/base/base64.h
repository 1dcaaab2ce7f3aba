/* base64 (RFC 4648) through OpenSSL's EVP_EncodeBlock and EVP_DecodeBlock, standard ("+/") or
 * URL-safe ("-_"), with and without '=' padding. OpenSSL's decoder takes '=' anywhere and says
 * nothing of what is wrong; base64_decode() checks the text first and says what and where:
 *
 *   char *s, *data;
 *   size_t n;
 *   struct base64_error e;
 *   r = base64_encode(buf, len, BASE64_STD, &s);                  // "aGVsbG8="
 *   r = base64_encode(buf, len, BASE64_URL | BASE64_NOPAD, &s);   // "aGVsbG8" (tokens, URLs)
 *   r = base64_decode(s, strlen(s), BASE64_STD, &data, &n, &e);   // strict
 *   if (r == -EINVAL)
 *           return log_error_errno(r, "bad base64", KV_S("why", e.what), KV_U("at", e.offset));
 *
 * Decoding is strict unless a flag relaxes it: only the alphabet's 64 characters, then the
 * padding that completes the last group of four and nothing after it; a lone character in the
 * last group is refused. Unused low bits of the last character are not checked (as OpenSSL, Go
 * and the old decoders here). The decoded bytes are followed by a NUL that ret_len does not
 * count, so that decoded text is a C string. The buffer of a decode is wiped before it is freed:
 * the input may be a private key. */
#pragma once
#include <stddef.h>

enum base64_flags {
	BASE64_STD = 0,			 /* "+/" alphabet; '=' padding written, and required */
	BASE64_URL = 1 << 0,		 /* "-_" alphabet (RFC 4648 section 5) instead */
	BASE64_NOPAD = 1 << 1,		 /* encode without '='; decoding refuses '=' */
	BASE64_PAD_OPTIONAL = 1 << 2,	 /* decode: padding may be left out (if there, exact) */
	BASE64_ANY_ALPHABET = 1 << 3,	 /* decode: "+/" and "-_" both, even mixed (proto3 JSON) */
	BASE64_SKIP_SPACE = 1 << 4,	 /* decode: ' ', '\t', '\r', '\n' anywhere are ignored */
};

/* Inputs past this are refused with -EMSGSIZE (OpenSSL counts in int). */
#define BASE64_MAX_INPUT ((size_t)1 << 30)

/* Why a decode failed: what (a constant, "invalid character"...) at offset (in the input). */
struct base64_error {
	const char *what;
	size_t offset;
};

/* Encodes len bytes at data into a malloc'd, NUL-terminated string. 0, -ENOMEM, -EMSGSIZE. */
int base64_encode(const void *data, size_t len, unsigned flags, char **ret);
/* Decodes len characters at s into a malloc'd buffer (NUL after the ret_len bytes; ret_len may
 * be NULL). 0, -EINVAL (malformed: err, if not NULL, says why and where), -ENOMEM, -EMSGSIZE.
 * *ret is set only on success. */
int base64_decode(const char *s, size_t len, unsigned flags, char **ret, size_t *ret_len,
		  struct base64_error *err);
