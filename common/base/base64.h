/* Base64 (RFC 4648) through OpenSSL's EVP_EncodeBlock / EVP_DecodeBlock: the standard alphabet
 * with padding, or the URL-safe one ("-" and "_") without padding, for tokens that travel in
 * URLs and JSON.
 *
 *   char *s;
 *   r = base64_encode(data, len, BASE64_URL, &s);         // "MTox..." (malloc'd)
 *   void *raw;
 *   size_t n;
 *   r = base64_decode(s, strlen(s), BASE64_URL, &raw, &n); // NUL-terminated copy, n bytes
 *
 * Decoding is strict: characters of the other alphabet, white space, misplaced or (in the
 * URL-safe form) any padding give -EINVAL. Both return 0 or -EINVAL, -E2BIG (over
 * BASE64_MAX_INPUT bytes in), -ENOMEM; neither logs. */
#pragma once
#include <stddef.h>

#define BASE64_MAX_INPUT ((size_t)256 << 20)

enum base64_alphabet {
	BASE64_STD, /* A-Z a-z 0-9 + /, padded with = */
	BASE64_URL, /* A-Z a-z 0-9 - _, no padding */
};

/* Encodes len bytes into a malloc'd, NUL-terminated string. */
int base64_encode(const void *data, size_t len, enum base64_alphabet a, char **ret);
/* Decodes len characters into a malloc'd buffer (NUL-terminated, *ret_len bytes without the
 * NUL). */
int base64_decode(const char *s, size_t len, enum base64_alphabet a, void **ret, size_t *ret_len);
