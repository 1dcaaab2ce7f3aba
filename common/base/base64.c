/* Base64 over OpenSSL (see base64.h). OpenSSL knows the standard alphabet only: the URL-safe
 * form is translated before and after, and the text is checked before OpenSSL sees it. */
#include "common/base/base64.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/base/secret.h"

int base64_encode(const void *data, size_t len, unsigned flags, char **ret)
{
	size_t n;
	char *out;

	if (len > BASE64_MAX_INPUT)
		return -E2BIG;
	n = 4 * ((len + 2) / 3);
	if (!(out = malloc(n + 1)))
		return -ENOMEM;
	if ((size_t)EVP_EncodeBlock((unsigned char *)out, data, (int)len) != n) {
		free(out);
		return -EINVAL;
	}
	out[n] = '\0';
	if (flags & BASE64_URL) {
		for (size_t i = 0; i < n; i++)
			out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
		while (n > 0 && out[n - 1] == '=')
			out[--n] = '\0';
	}
	*ret = out;
	return 0;
}

/* The character of the standard alphabet for c, or 0 if c is not in the alphabets flags allow. */
static char std_char(char c, unsigned flags)
{
	bool any = flags & BASE64_ANY_ALPHABET, url = flags & BASE64_URL;

	if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
		return c;
	if ((c == '+' || c == '/') && (!url || any))
		return c;
	if ((c == '-' || c == '_') && (url || any))
		return c == '-' ? '+' : '/';
	return 0;
}

static int fail(struct base64_error *err, const char *what, size_t offset)
{
	if (err) {
		err->what = what;
		err->offset = offset;
	}
	return -EINVAL;
}

/* Checks the text and, when clean is not NULL, writes its data characters there in the
 * standard alphabet followed by the '=' that complete the last group; *ret_n is that length. */
static int scan(const char *s, size_t len, unsigned flags, char *clean, size_t *ret_n,
		struct base64_error *err)
{
	size_t n = 0, pad = 0, pad_at = 0, fill;
	bool pad_ok = !(flags & BASE64_URL) || (flags & BASE64_PAD_OPTIONAL);

	if (len > BASE64_MAX_INPUT)
		return -E2BIG;
	for (size_t i = 0; i < len; i++) {
		char c = s[i], v;
		if ((flags & BASE64_SKIP_SPACE) &&
		    (c == ' ' || c == '\t' || c == '\r' || c == '\n'))
			continue;
		if (c == '=') {
			if (!pad_ok)
				return fail(err, "padding where none is allowed", i);
			if (!pad++)
				pad_at = i;
			continue;
		}
		if (!(v = std_char(c, flags)))
			return fail(err, "invalid character", i);
		if (pad)
			return fail(err, "data after the padding", i);
		if (clean)
			clean[n] = v;
		n++;
	}
	fill = (4 - n % 4) % 4;
	if (fill == 3)
		return fail(err, "a lone character in the last group", len);
	if (pad && pad != fill)
		return fail(err, "wrong padding", pad_at);
	if (!pad && fill && !(flags & (BASE64_URL | BASE64_PAD_OPTIONAL)))
		return fail(err, "missing padding", len);
	if (clean)
		memset(clean + n, '=', fill);
	*ret_n = n + fill;
	return 0;
}

int base64_check(const char *s, size_t len, unsigned flags, struct base64_error *err)
{
	size_t n;
	return scan(s, len, flags, NULL, &n, err);
}

int base64_decode(const char *s, size_t len, unsigned flags, void **ret, size_t *ret_len)
{
	char *clean;
	unsigned char *out = NULL;
	size_t n = 0, fill, size = 0;
	int m, r;

	if (len > BASE64_MAX_INPUT)
		return -E2BIG;
	if (!(clean = malloc(len + 4)))
		return -ENOMEM;
	if ((r = scan(s, len, flags, clean, &n, NULL)) < 0)
		goto out;
	/* the '=' scan() added stand for no bytes, but OpenSSL decodes them as zeros */
	for (fill = 0; fill < n && clean[n - 1 - fill] == '='; fill++)
		;
	size = n / 4 * 3 + 1;
	if (!(out = malloc(size))) {
		r = -ENOMEM;
		goto out;
	}
	m = n ? EVP_DecodeBlock(out, (unsigned char *)clean, (int)n) : 0;
	if (m < (int)fill) { /* the text was checked: cannot happen */
		r = -EINVAL;
		goto out;
	}
	m -= (int)fill;
	out[m] = '\0';
	if (ret_len)
		*ret_len = (size_t)m;
	*ret = out;
	out = NULL;
	r = 0;
out:
	secret_wipe(clean, len + 4);
	free(clean);
	if (out) {
		secret_wipe(out, size);
		free(out);
	}
	return r;
}
