/* Base64 over OpenSSL (see base64.h). OpenSSL knows the standard alphabet only: the URL-safe
 * form is translated before and after. */
#include "common/base/base64.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int base64_encode(const void *data, size_t len, enum base64_alphabet a, char **ret)
{
	size_t n;
	char *out;
	int w;

	if (len > BASE64_MAX_INPUT)
		return -E2BIG;
	n = 4 * ((len + 2) / 3);
	if (!(out = malloc(n + 1)))
		return -ENOMEM;
	w = EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	if (w < 0 || (size_t)w != n) {
		free(out);
		return -EINVAL;
	}
	out[n] = '\0';
	if (a == BASE64_URL) {
		for (size_t i = 0; i < n; i++) {
			if (out[i] == '+')
				out[i] = '-';
			else if (out[i] == '/')
				out[i] = '_';
			else if (out[i] == '=')
				out[i] = '\0';
		}
	}
	*ret = out;
	return 0;
}

static bool alnum(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int base64_decode(const char *s, size_t len, enum base64_alphabet a, void **ret, size_t *ret_len)
{
	size_t pad = 0, n;
	unsigned char *in, *out;
	int w;

	if (len > BASE64_MAX_INPUT)
		return -E2BIG;
	if (a == BASE64_STD) {
		if (len % 4)
			return -EINVAL;
		while (pad < 2 && pad < len && s[len - 1 - pad] == '=')
			pad++;
	} else if (len % 4 == 1) {
		return -EINVAL;
	}
	n = len - pad;
	/* the padded copy OpenSSL decodes: 4 characters per 3 bytes */
	size_t full = a == BASE64_URL ? (len + 3) / 4 * 4 : len;
	if (!(in = malloc(full + 1)))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (a == BASE64_URL && (c == '-' || c == '_'))
			c = c == '-' ? '+' : '/';
		else if (!alnum(c) && (a == BASE64_URL || (c != '+' && c != '/'))) {
			free(in);
			return -EINVAL;
		}
		in[i] = (unsigned char)c;
	}
	for (size_t i = n; i < full; i++)
		in[i] = '=';
	in[full] = '\0';
	pad = full - n;
	if (!(out = malloc(full / 4 * 3 + 1))) {
		free(in);
		return -ENOMEM;
	}
	w = full ? EVP_DecodeBlock(out, in, (int)full) : 0;
	free(in);
	if (w < 0 || (size_t)w < pad) {
		free(out);
		return -EINVAL;
	}
	/* EVP_DecodeBlock counts the bytes the padding stands for: drop them */
	out[w - pad] = '\0';
	*ret = out;
	if (ret_len)
		*ret_len = (size_t)w - pad;
	return 0;
}
