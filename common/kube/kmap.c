/* String-keyed hash table (see kmap.h). */
#include "common/kube/kmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

struct kmap_entry *kmap_find(const struct kmap *m, const char *key)
{
	if (!m->n_buckets)
		return NULL;
	uint64_t h = hash_str(key);
	for (struct kmap_entry *e = m->buckets[h & (m->n_buckets - 1)]; e; e = e->next)
		if (e->hash == h && strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

void *kmap_get(const struct kmap *m, const char *key)
{
	struct kmap_entry *e = kmap_find(m, key);
	return e ? e->val : NULL;
}

static int grow(struct kmap *m)
{
	size_t n = m->n_buckets ? m->n_buckets * 2 : 16;
	struct kmap_entry **b = calloc(n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_buckets; i++)
		for (struct kmap_entry *e = m->buckets[i], *next; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	free(m->buckets);
	m->buckets = b;
	m->n_buckets = n;
	return 0;
}

int kmap_put(struct kmap *m, const char *key, void *val, void **ret_old)
{
	struct kmap_entry *e = kmap_find(m, key);
	size_t len;

	if (e) {
		if (ret_old)
			*ret_old = e->val;
		e->val = val;
		return 0;
	}
	if (m->size >= m->n_buckets && grow(m) < 0)
		return -ENOMEM;
	len = strlen(key);
	if (!(e = malloc(sizeof(*e) + len + 1)))
		return -ENOMEM;
	memcpy(e->key, key, len + 1);
	e->hash = hash_str(key);
	e->val = val;
	e->next = m->buckets[e->hash & (m->n_buckets - 1)];
	m->buckets[e->hash & (m->n_buckets - 1)] = e;
	m->size++;
	if (ret_old)
		*ret_old = NULL;
	return 0;
}

void *kmap_remove(struct kmap *m, const char *key)
{
	if (!m->n_buckets)
		return NULL;
	uint64_t h = hash_str(key);
	for (struct kmap_entry **p = &m->buckets[h & (m->n_buckets - 1)]; *p; p = &(*p)->next) {
		struct kmap_entry *e = *p;
		if (e->hash == h && strcmp(e->key, key) == 0) {
			void *v = e->val;
			*p = e->next;
			free(e);
			m->size--;
			return v;
		}
	}
	return NULL;
}

void kmap_clear(struct kmap *m, void (*free_val)(void *))
{
	for (size_t i = 0; i < m->n_buckets; i++)
		for (struct kmap_entry *e = m->buckets[i], *next; e; e = next) {
			next = e->next;
			if (free_val)
				free_val(e->val);
			free(e);
		}
	free(m->buckets);
	*m = (struct kmap)KMAP_INIT;
}

struct kmap_entry *kmap_first(const struct kmap *m, size_t *i)
{
	for (*i = 0; *i < m->n_buckets; (*i)++)
		if (m->buckets[*i])
			return m->buckets[*i];
	return NULL;
}

struct kmap_entry *kmap_next(const struct kmap *m, struct kmap_entry *e, size_t *i)
{
	if (e->next)
		return e->next;
	for ((*i)++; *i < m->n_buckets; (*i)++)
		if (m->buckets[*i])
			return m->buckets[*i];
	return NULL;
}
