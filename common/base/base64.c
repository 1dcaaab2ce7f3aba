#include "common/base/base64.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/base/secret.h"

int base64_encode(const void *data, size_t len, unsigned flags, char **ret)
{
	char *out;
	size_t n;

	if (len > BASE64_MAX_INPUT)
		return -EMSGSIZE;
	out = malloc((len + 2) / 3 * 4 + 1);
	if (!out)
		return -ENOMEM;
	n = (size_t)EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	if (flags & BASE64_URL)
		for (size_t i = 0; i < n; i++)
			out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	if (flags & BASE64_NOPAD)
		while (n > 0 && out[n - 1] == '=')
			out[--n] = 0;
	*ret = out;
	return 0;
}

/* The character of the standard alphabet for c, or 0 if c is not in the alphabets flags allow. */
static char std_char(char c, unsigned flags)
{
	bool url = flags & (BASE64_URL | BASE64_ANY_ALPHABET);
	bool std = !(flags & BASE64_URL) || (flags & BASE64_ANY_ALPHABET);

	if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
		return c;
	if ((c == '+' || c == '/') && std)
		return c;
	if (c == '-' && url)
		return '+';
	if (c == '_' && url)
		return '/';
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

int base64_decode(const char *s, size_t len, unsigned flags, char **ret, size_t *ret_len,
		  struct base64_error *err)
{
	char *clean, *out = NULL;
	size_t n = 0, pad = 0, pad_at = 0, fill, out_size = 0;
	int m, r;

	if (len > BASE64_MAX_INPUT)
		return -EMSGSIZE;
	/* the data characters in the standard alphabet, then '=' to a whole group */
	clean = malloc(len + 4);
	if (!clean)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		char c = s[i], v;
		if ((flags & BASE64_SKIP_SPACE) &&
		    (c == ' ' || c == '\t' || c == '\r' || c == '\n'))
			continue;
		if (c == '=') {
			if (flags & BASE64_NOPAD) {
				r = fail(err, "padding where none is allowed", i);
				goto out;
			}
			if (!pad++)
				pad_at = i;
			continue;
		}
		if (!(v = std_char(c, flags))) {
			r = fail(err, "invalid character", i);
			goto out;
		}
		if (pad) {
			r = fail(err, "data after the padding", i);
			goto out;
		}
		clean[n++] = v;
	}
	fill = (4 - n % 4) % 4;
	if (fill == 3) {
		r = fail(err, "a lone character in the last group", len);
		goto out;
	}
	if (pad && pad != fill) {
		r = fail(err, "wrong padding", pad_at);
		goto out;
	}
	if (!pad && fill && !(flags & (BASE64_PAD_OPTIONAL | BASE64_NOPAD))) {
		r = fail(err, "missing padding", len);
		goto out;
	}
	memset(clean + n, '=', fill);
	out_size = (n + fill) / 4 * 3 + 1;
	out = malloc(out_size);
	if (!out) {
		r = -ENOMEM;
		goto out;
	}
	m = n ? EVP_DecodeBlock((unsigned char *)out, (unsigned char *)clean, (int)(n + fill)) : 0;
	if (m < (int)fill) { /* the text was checked above: cannot happen */
		r = fail(err, "refused by OpenSSL", 0);
		goto out;
	}
	m -= (int)fill; /* OpenSSL decodes the padding as zero bytes */
	out[m] = 0;
	if (ret_len)
		*ret_len = (size_t)m;
	*ret = out;
	out = NULL;
	r = 0;
out:
	secret_wipe(clean, len + 4);
	free(clean);
	if (out) {
		secret_wipe(out, out_size);
		free(out);
	}
	return r;
}
