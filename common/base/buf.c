#include "common/base/buf.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void buf_init(struct buf *b, size_t max)
{
	*b = (struct buf)BUF_INIT(max);
}

void buf_release(struct buf *b)
{
	if (!b)
		return;
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = 0;
}

static size_t buf_max(const struct buf *b)
{
	return b->max ? b->max : BUF_DEFAULT_MAX;
}

int buf_reserve(struct buf *b, size_t extra)
{
	size_t need, ncap;
	char *p;

	if (extra > buf_max(b) || b->len > buf_max(b) - extra)
		return -EMSGSIZE;
	need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	ncap = b->cap ? b->cap : 64;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
	if (ncap > buf_max(b) + 1)
		ncap = buf_max(b) + 1;
	p = realloc(b->data, ncap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = ncap;
	return 0;
}

int buf_append(struct buf *b, const void *data, size_t len)
{
	int r = buf_reserve(b, len);
	if (r < 0)
		return r;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = 0;
	return 0;
}

int buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_putc(struct buf *b, char c)
{
	return buf_append(b, &c, 1);
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	int n, r;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return -EINVAL;
	r = buf_reserve(b, (size_t)n);
	if (r < 0)
		return r;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return r;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		buf_reset(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = 0;
}

char *buf_steal(struct buf *b)
{
	char *p;

	if (!b->data) {
		if (buf_reserve(b, 0) < 0)
			return NULL;
		b->data[0] = 0;
	}
	p = b->data;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

int buf_put_urlencoded(struct buf *b, const char *s, size_t len, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	int r;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
		    (keep_slash && c == '/')) {
			r = buf_putc(b, (char)c);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };
			r = buf_append(b, e, 3);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

int str_copy(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);

	if (n == 0)
		return -ENAMETOOLONG;
	if (l >= n) {
		memcpy(dst, src, n - 1);
		dst[n - 1] = 0;
		return -ENAMETOOLONG;
	}
	memcpy(dst, src, l + 1);
	return 0;
}

int str_printf(char *dst, size_t n, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(dst, n, fmt, ap);
	va_end(ap);
	if (r < 0)
		return -EINVAL;
	if ((size_t)r >= n)
		return -ENAMETOOLONG;
	return r;
}

bool str_has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool str_has_suffix(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

int str_to_ll(const char *s, long long min, long long max, long long *ret)
{
	char *end;
	long long v;

	if (!s || !*s || isspace((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

int str_to_double(const char *s, double *ret)
{
	char *end;
	double v;

	if (!s || !*s || isspace((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE)
		return -ERANGE;
	*ret = v;
	return 0;
}

int str_to_bool(const char *s, bool *ret)
{
	static const char *const yes[] = { "true", "1", "yes", "on", "t", NULL };
	static const char *const no[] = { "false", "0", "no", "off", "f", NULL };

	for (int i = 0; yes[i]; i++)
		if (strcasecmp(s, yes[i]) == 0) {
			*ret = true;
			return 0;
		}
	for (int i = 0; no[i]; i++)
		if (strcasecmp(s, no[i]) == 0) {
			*ret = false;
			return 0;
		}
	return -EINVAL;
}

void strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

size_t strv_len(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

int strv_push(char ***v, const char *s)
{
	size_t n = strv_len(*v);
	char *c = strdup(s);
	char **nv;

	if (!c)
		return -ENOMEM;
	nv = realloc(*v, (n + 2) * sizeof(char *));
	if (!nv) {
		free(c);
		return -ENOMEM;
	}
	nv[n] = c;
	nv[n + 1] = NULL;
	*v = nv;
	return 0;
}

bool strv_contains(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

char *str_strip(char *s)
{
	size_t l;
	char *p = s;

	while (isspace((unsigned char)*p))
		p++;
	if (p != s)
		memmove(s, p, strlen(p) + 1);
	l = strlen(s);
	while (l && isspace((unsigned char)s[l - 1]))
		s[--l] = 0;
	return s;
}

int strv_split(const char *s, char sep, char ***ret)
{
	char **v = calloc(1, sizeof(char *));
	const char *p = s;

	if (!v)
		return -ENOMEM;
	while (p && *p) {
		const char *e = strchr(p, sep);
		size_t l = e ? (size_t)(e - p) : strlen(p);
		char *f = strndup(p, l);
		if (!f) {
			strv_free(v);
			return -ENOMEM;
		}
		str_strip(f);
		int r = *f ? strv_push(&v, f) : 0;
		free(f);
		if (r < 0) {
			strv_free(v);
			return r;
		}
		p = e ? e + 1 : NULL;
	}
	*ret = v;
	return 0;
}

bool str_equal_ct(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = (unsigned char)(la != lb);

	for (size_t i = 0; i < la; i++)
		d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
	return d == 0;
}
