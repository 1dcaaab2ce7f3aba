/* A small string-keyed hash table (separate chaining, FNV-1a, power-of-two buckets that double
 * when full). Keys are copied into the entry; values are the caller's. Not thread-safe: the
 * owner locks. Used by the store, its indexes, the workqueue and the event cache. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kmap_entry {
	struct kmap_entry *next;
	uint64_t hash;
	void *val;
	char key[];
};

struct kmap {
	struct kmap_entry **buckets;
	size_t n_buckets; /* 0 or a power of two */
	size_t size;
};

#define KMAP_INIT                                                                                  \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}

void *kmap_get(const struct kmap *m, const char *key);
struct kmap_entry *kmap_find(const struct kmap *m, const char *key);
/* Adds or replaces; the previous value (or NULL) goes to *ret_old when not NULL. */
int kmap_put(struct kmap *m, const char *key, void *val, void **ret_old);
/* Removes key; returns its value, or NULL when absent. */
void *kmap_remove(struct kmap *m, const char *key);
/* Frees every entry, calling free_val (may be NULL) on each value. */
void kmap_clear(struct kmap *m, void (*free_val)(void *));

/* Iteration: for (e = kmap_first(m, &i); e; e = kmap_next(m, e, &i)); the map must not change
 * meanwhile. */
struct kmap_entry *kmap_first(const struct kmap *m, size_t *i);
struct kmap_entry *kmap_next(const struct kmap *m, struct kmap_entry *e, size_t *i);
