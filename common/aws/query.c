/* Query protocol parameters (see query.h). */
#include "common/aws/query.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void aws_query_init(struct aws_query *q)
{
	*q = (struct aws_query)AWS_QUERY_INIT;
}

void aws_query_release(struct aws_query *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < q->n; i++) {
		free(q->keys[i]);
		free(q->values[i]);
	}
	free(q->keys);
	free(q->values);
	aws_query_init(q);
}

int aws_query_add(struct aws_query *q, const char *key, const char *value)
{
	char *k, *v;

	if (!q || !key || !*key || !value)
		return -EINVAL;
	if (q->n >= AWS_QUERY_MAX_PARAMS)
		return -E2BIG;
	if (q->n == q->cap) {
		size_t ncap = q->cap ? q->cap * 2 : 16;
		char **nk = realloc(q->keys, ncap * sizeof(*nk)), **nv;
		if (!nk)
			return -ENOMEM;
		q->keys = nk;
		nv = realloc(q->values, ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		q->values = nv;
		q->cap = ncap;
	}
	k = strdup(key);
	v = strdup(value);
	if (!k || !v) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	q->keys[q->n] = k;
	q->values[q->n] = v;
	q->n++;
	return 0;
}

int aws_query_set(struct aws_query *q, const char *key, const char *value)
{
	if (!q || !key || !value)
		return -EINVAL;
	for (size_t i = 0; i < q->n; i++) {
		if (strcmp(q->keys[i], key) == 0) {
			char *v = strdup(value);
			if (!v)
				return -ENOMEM;
			free(q->values[i]);
			q->values[i] = v;
			return 0;
		}
	}
	return aws_query_add(q, key, value);
}

int aws_query_addf(struct aws_query *q, const char *value, const char *keyfmt, ...)
{
	char key[256];
	va_list ap;
	int n;

	va_start(ap, keyfmt);
	n = vsnprintf(key, sizeof(key), keyfmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(key))
		return -ENAMETOOLONG;
	return aws_query_add(q, key, value);
}

int aws_query_add_int(struct aws_query *q, const char *key, long long v)
{
	char s[32];

	snprintf(s, sizeof(s), "%lld", v);
	return aws_query_add(q, key, s);
}

int aws_query_add_bool(struct aws_query *q, const char *key, bool v)
{
	return aws_query_add(q, key, v ? "true" : "false");
}

int aws_query_add_list(struct aws_query *q, const char *prefix, const char *const *values, size_t n)
{
	int r;

	for (size_t i = 0; i < n; i++)
		if ((r = aws_query_addf(q, values[i], "%s.%zu", prefix, i + 1)) < 0)
			return r;
	return 0;
}

int aws_query_add_filter(struct aws_query *q, const char *name, const char *const *values, size_t n)
{
	unsigned f;
	int r;

	if (!q || !name)
		return -EINVAL;
	f = q->n_filters + 1;
	if ((r = aws_query_addf(q, name, "Filter.%u.Name", f)) < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if ((r = aws_query_addf(q, values[i], "Filter.%u.Value.%zu", f, i + 1)) < 0)
			return r;
	q->n_filters = f;
	return 0;
}

int aws_query_add_tags(struct aws_query *q, const char *prefix, const char *const *keys,
		       const char *const *values, size_t n)
{
	int r;

	for (size_t i = 0; i < n; i++) {
		if ((r = aws_query_addf(q, keys[i], "%s.%zu.Key", prefix, i + 1)) < 0)
			return r;
		if (values && values[i] &&
		    (r = aws_query_addf(q, values[i], "%s.%zu.Value", prefix, i + 1)) < 0)
			return r;
	}
	return 0;
}

const char *aws_query_get(const struct aws_query *q, const char *key)
{
	for (size_t i = 0; q && i < q->n; i++)
		if (strcmp(q->keys[i], key) == 0)
			return q->values[i];
	return NULL;
}

int aws_query_add_kv(struct aws_query *q, const char *kv)
{
	const char *eq = kv ? strchr(kv, '=') : NULL;
	char key[256];

	if (!eq || eq == kv)
		return -EINVAL;
	if ((size_t)(eq - kv) >= sizeof(key))
		return -ENAMETOOLONG;
	memcpy(key, kv, (size_t)(eq - kv));
	key[eq - kv] = 0;
	return aws_query_add(q, key, eq + 1);
}

/* Form encoding as botocore sends a Query body (Python's urlencode): the RFC 3986 unreserved
 * bytes kept, a space as '+', every other byte as %XX. A space must be '+', not %20: AWS hashes
 * the body as sent, but a peer that re-encodes the parsed form to check the signature (moto)
 * gets '+' and refuses %20 with AuthFailure. */
static int put_form(struct buf *out, const char *s)
{
	int r;

	for (;;) {
		size_t n = strcspn(s, " ");
		if ((r = buf_put_urlencoded(out, s, n, false)) < 0)
			return r;
		if (!s[n])
			return 0;
		if ((r = buf_putc(out, '+')) < 0)
			return r;
		s += n + 1;
	}
}

static int put_pair(struct buf *out, size_t start, const char *k, const char *v)
{
	int r;

	if (out->len > start && (r = buf_putc(out, '&')) < 0)
		return r;
	if ((r = put_form(out, k)) < 0 || (r = buf_putc(out, '=')) < 0)
		return r;
	return put_form(out, v);
}

int aws_query_encode(const struct aws_query *q, const char *action, const char *version,
		     struct buf *out)
{
	size_t start = out->len;
	int r = 0;

	if (aws_query_get(q, "Version"))
		version = NULL;
	if (aws_query_get(q, "Action"))
		action = NULL;
	if (action && (r = put_pair(out, start, "Action", action)) < 0)
		goto fail;
	if (version && (r = put_pair(out, start, "Version", version)) < 0)
		goto fail;
	for (size_t i = 0; q && i < q->n; i++)
		if ((r = put_pair(out, start, q->keys[i], q->values[i])) < 0)
			goto fail;
	return 0;
fail:
	out->len = start;
	if (out->data)
		out->data[start] = 0;
	return r;
}
