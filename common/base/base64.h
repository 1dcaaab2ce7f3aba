/* Base64 (RFC 4648) through OpenSSL's EVP_EncodeBlock / EVP_DecodeBlock: the standard alphabet
 * with padding, or the URL-safe one ("-" and "_") without padding, for tokens that travel in
 * URLs and JSON. OpenSSL's decoder takes '=' anywhere and says nothing of what is wrong: the
 * text is checked first, and base64_check() says what and where.
 *
 *   char *s;
 *   r = base64_encode(data, len, BASE64_STD, &s);             // "aGVsbG8=" (malloc'd)
 *   r = base64_encode(data, len, BASE64_URL, &s);             // "aGVsbG8"
 *   void *raw;
 *   size_t n;
 *   r = base64_decode(s, strlen(s), BASE64_STD, &raw, &n);    // NUL-terminated copy, n bytes
 *   if (r == -EINVAL && base64_check(s, strlen(s), BASE64_STD, &e) < 0)
 *           log_error("bad base64", KV_S("why", e.what), KV_U("at", e.offset));
 *
 * Decoding is strict unless a flag relaxes it: only the alphabet's 64 characters, then (in the
 * standard form) the padding that completes the last group of four and nothing after it; a
 * lone character in the last group is refused. The unused low bits of the last character are
 * not checked (as OpenSSL and Go do). Both return 0 or -EINVAL, -E2BIG (over BASE64_MAX_INPUT
 * bytes in), -ENOMEM; neither logs. A decode wipes its scratch copy: the text may be a key. */
#pragma once
#include <stddef.h>

#define BASE64_MAX_INPUT ((size_t)256 << 20)

enum base64_flags {
	BASE64_STD = 0,		      /* A-Z a-z 0-9 + /, padded with '=' */
	BASE64_URL = 1 << 0,	      /* A-Z a-z 0-9 - _, no padding */
	BASE64_PAD_OPTIONAL = 1 << 1, /* decode: '=' may be left out, or (URL) be there */
	BASE64_ANY_ALPHABET = 1 << 2, /* decode: "+/" and "-_" both, even mixed (proto3 JSON) */
	BASE64_SKIP_SPACE = 1 << 3,   /* decode: ' ', '\t', '\r', '\n' anywhere are ignored */
};

/* Why a text is not base64: what (a constant, "invalid character"...) at offset (in the text). */
struct base64_error {
	const char *what;
	size_t offset;
};

/* Encodes len bytes into a malloc'd, NUL-terminated string. */
int base64_encode(const void *data, size_t len, unsigned flags, char **ret);
/* Decodes len characters into a malloc'd buffer (NUL-terminated, *ret_len bytes without the
 * NUL; ret_len may be NULL). *ret is set only on success. */
int base64_decode(const char *s, size_t len, unsigned flags, void **ret, size_t *ret_len);
/* 0 if base64_decode() would take the text, else -EINVAL with what is wrong and where in *err
 * (may be NULL), or -E2BIG. */
int base64_check(const char *s, size_t len, unsigned flags, struct base64_error *err);
