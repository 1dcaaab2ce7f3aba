/* The tagging controller's pure pieces (see ccm_tags.h). */
#include "modules/ccm/ccm_tags.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/tags.h"
#include "common/base/buf.h"

#define ID_MAX 128

void ccm_tagset_release(struct ccm_tagset *t)
{
	if (!t)
		return;
	strv_free(t->keys);
	strv_free(t->values);
	*t = (struct ccm_tagset){0};
}

/* Unicode characters of a UTF-8 string (its bytes but continuation bytes). */
static size_t u8_chars(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

struct pair {
	const char *k, *v;
	char *joined; /* "k=v" */
};

static int pair_cmp(const void *a, const void *b)
{
	return strcmp(((const struct pair *)a)->joined, ((const struct pair *)b)->joined);
}

static void pairs_free(struct pair *p, size_t n)
{
	for (size_t i = 0; p && i < n; i++)
		free(p[i].joined);
	free(p);
}

/* The pairs sorted by "k=v" (Go's sort.Strings over the same strings: byte order). */
static int pairs_sorted(const char *const *keys, const char *const *values, size_t n,
			struct pair **ret)
{
	struct pair *p = calloc(n ? n : 1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		p[i].k = keys[i];
		p[i].v = values[i];
		if (asprintf(&p[i].joined, "%s=%s", keys[i], values[i]) < 0) {
			p[i].joined = NULL;
			pairs_free(p, n);
			return -ENOMEM;
		}
	}
	qsort(p, n, sizeof(*p), pair_cmp);
	*ret = p;
	return 0;
}

int ccm_tags_checksum(const char *const *keys, const char *const *values, size_t n, char *out)
{
	struct pair *p = NULL;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_MD_CTX *ctx = NULL;
	int r;

	if ((r = pairs_sorted(keys, values, n, &p)) < 0)
		return r;
	r = -EIO;
	if (!(ctx = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(ctx, EVP_md5(), NULL))
		goto out;
	for (size_t i = 0; i < n; i++)
		if ((i && !EVP_DigestUpdate(ctx, ",", 1)) ||
		    !EVP_DigestUpdate(ctx, p[i].joined, strlen(p[i].joined)))
			goto out;
	if (!EVP_DigestFinal_ex(ctx, md, &mdlen) || mdlen * 2 != CCM_TAGGING_CHECKSUM_LEN)
		goto out;
	for (unsigned i = 0; i < mdlen; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	r = 0;
out:
	EVP_MD_CTX_free(ctx);
	pairs_free(p, n);
	return r;
}

/* Sets key to value in t (a later item wins). */
static int tagset_put(struct ccm_tagset *t, const char *key, const char *value)
{
	for (size_t i = 0; i < t->n; i++) {
		if (strcmp(t->keys[i], key) == 0) {
			char *v = strdup(value);
			if (!v)
				return -ENOMEM;
			free(t->values[i]);
			t->values[i] = v;
			return 0;
		}
	}
	int r = strv_push(&t->keys, key);
	if (r < 0)
		return r;
	if ((r = strv_push(&t->values, value)) < 0)
		return r;
	t->n++;
	return 0;
}

static int tagset_check(const struct ccm_tagset *t, char *err, size_t errlen)
{
	char why[160];

	if (t->n == 0) {
		snprintf(err, errlen, "--tags must not be empty and must be a form of key=value");
		return -EINVAL;
	}
	if (t->n > CCM_TAGGING_MAX_TAGS) {
		snprintf(err, errlen, "--tags: %zu tags, AWS allows at most %d per resource", t->n,
			 CCM_TAGGING_MAX_TAGS);
		return -EINVAL;
	}
	for (size_t i = 0; i < t->n; i++) {
		if (strlen(t->keys[i]) > CCM_TAGGING_KEY_MAX) {
			snprintf(err, errlen, "Tag keys must not be more than %d characters long",
				 CCM_TAGGING_KEY_MAX);
			return -EINVAL;
		}
		if (aws_tag_key_check(t->keys[i], why, sizeof(why)) < 0) {
			snprintf(err, errlen, "--tags: %s", why);
			return -EINVAL;
		}
		if (u8_chars(t->values[i]) > CCM_TAGGING_VALUE_MAX) {
			snprintf(err, errlen, "--tags: the value of '%s' is longer than %d characters",
				 t->keys[i], CCM_TAGGING_VALUE_MAX);
			return -EINVAL;
		}
	}
	return 0;
}

int ccm_tagset_parse(char *const *items, struct ccm_tagset *ret, char *err, size_t errlen)
{
	struct ccm_tagset t = {0};
	struct pair *p = NULL;
	int r = 0;

	for (char *const *it = items; it && *it; it++) {
		const char *eq = strchr(*it, '=');
		if (!eq || eq == *it) {
			snprintf(err, errlen, "--tags: '%s' must be formatted as key=value", *it);
			r = -EINVAL;
			goto fail;
		}
		_cleanup_free_ char *key = strndup(*it, (size_t)(eq - *it));
		if (!key || (r = tagset_put(&t, key, eq + 1)) < 0) {
			r = r < 0 ? r : -ENOMEM;
			goto fail;
		}
	}
	if ((r = tagset_check(&t, err, errlen)) < 0)
		goto fail;
	/* kept in the checksum's order, which is also the order of Tag.N in the calls */
	if ((r = pairs_sorted((const char *const *)t.keys, (const char *const *)t.values, t.n,
			      &p)) < 0)
		goto fail;
	struct ccm_tagset s = {0};
	for (size_t i = 0; i < t.n && r >= 0; i++)
		r = tagset_put(&s, p[i].k, p[i].v);
	pairs_free(p, t.n);
	if (r < 0 || (r = ccm_tags_checksum((const char *const *)s.keys,
					     (const char *const *)s.values, s.n, s.checksum)) < 0) {
		ccm_tagset_release(&s);
		goto fail;
	}
	ccm_tagset_release(&t);
	*ret = s;
	return 0;
fail:
	ccm_tagset_release(&t);
	return r;
}

int ccm_tagging_resources_check(char *const *list, char *err, size_t errlen)
{
	if (!list || !*list) {
		snprintf(err, errlen, "--resources must not be empty");
		return -EINVAL;
	}
	for (char *const *p = list; *p; p++)
		if (strcmp(*p, "instance") != 0) {
			snprintf(err, errlen,
				 "%s is not a supported resource. Current supported resources "
				 "[instance]",
				 *p);
			return -EINVAL;
		}
	return 0;
}

static bool id_in(const char *id, const struct ccm_tag_cand *cand, const size_t *picked,
		  size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(cand[picked[i]].id, id) == 0)
			return true;
	return false;
}

size_t ccm_tag_plan(const struct ccm_tag_cand *cand, size_t n, size_t own, size_t max,
		    size_t *out, size_t *ret_ids)
{
	size_t k = 0, ids = 0;

	for (size_t pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			/* the first pass takes the own candidate, the second the others */
			if ((pass == 0) != (i == own) || !cand[i].eligible || !cand[i].id)
				continue;
			bool seen = id_in(cand[i].id, cand, out, k);
			if (!seen && ids >= max)
				continue;
			out[k++] = i;
			ids += !seen;
		}
	}
	*ret_ids = ids;
	return k;
}

size_t ccm_tag_notfound_ids(const char *msg, const char *const *ids, size_t n, bool *named)
{
	size_t found = 0;

	for (const char *p = msg ? strstr(msg, "i-") : NULL; p; p = strstr(p, "i-")) {
		char id[ID_MAX];
		size_t l = 2;
		/* an ID starts a word: not the "i-" inside another token */
		if (p > msg && (isalnum((unsigned char)p[-1]) || p[-1] == '-')) {
			p += 2;
			continue;
		}
		while ((isalnum((unsigned char)p[l]) || p[l] == '-') && l + 1 < sizeof(id))
			l++;
		memcpy(id, p, l);
		id[l] = 0;
		for (size_t i = 0; i < n; i++)
			if (!named[i] && strcmp(ids[i], id) == 0) {
				named[i] = true;
				found++;
			}
		p += l;
	}
	return found;
}
