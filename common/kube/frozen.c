/* Frozen JSON (see frozen.h). */
#include "common/kube/frozen.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/kube/kmap.h"

static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kmap intern_map = KMAP_INIT; /* string -> itself (the entry's key) */
static size_t intern_bytes;

/* The shared copy of s, or NULL when the table is full. The table lives as long as the
 * process: its strings are the entries' own keys. */
static const char *intern(const char *s)
{
	struct kmap_entry *e;
	size_t len = strlen(s);

	pthread_mutex_lock(&intern_lock);
	e = kmap_find(&intern_map, s);
	if (!e && intern_map.size < KUBE_INTERN_MAX_STRINGS &&
	    intern_bytes + len + 1 <= KUBE_INTERN_MAX_BYTES &&
	    kmap_put(&intern_map, s, NULL, NULL) == 0) {
		intern_bytes += len + 1;
		e = kmap_find(&intern_map, s);
	}
	pthread_mutex_unlock(&intern_lock);
	return e ? e->key : NULL;
}

void kube_intern_stats(size_t *ret_strings, size_t *ret_bytes)
{
	pthread_mutex_lock(&intern_lock);
	*ret_strings = intern_map.size;
	*ret_bytes = intern_bytes;
	pthread_mutex_unlock(&intern_lock);
}

struct plan {
	size_t nodes, bytes;
	const char **keys; /* per node in walk order: the interned key, or NULL */
	size_t cap;
	bool failed;
};

/* Pass 1: counts nodes and string bytes, interning keys. */
static void measure(struct plan *p, const cJSON *v)
{
	for (; v; v = v->next) {
		if (p->nodes == p->cap) {
			size_t nc = p->cap ? p->cap * 2 : 64;
			const char **k = realloc(p->keys, nc * sizeof(*k));
			if (!k) {
				p->failed = true;
				return;
			}
			p->keys = k;
			p->cap = nc;
		}
		const char *ik = v->string ? intern(v->string) : NULL;
		p->keys[p->nodes++] = ik;
		if (v->string && !ik)
			p->bytes += strlen(v->string) + 1;
		if ((cJSON_IsString(v) || cJSON_IsRaw(v)) && v->valuestring)
			p->bytes += strlen(v->valuestring) + 1;
		if (v->child)
			measure(p, v->child);
	}
}

struct fill {
	cJSON *nodes;
	size_t next;
	char *strings;
	const char **keys;
};

static char *put_string(struct fill *f, const char *s)
{
	size_t len = strlen(s) + 1;
	char *d = memcpy(f->strings, s, len);
	f->strings += len;
	return d;
}

/* Pass 2: copies the siblings from v on (same walk order as measure); returns the first. */
static cJSON *copy(struct fill *f, const cJSON *v)
{
	cJSON *first = NULL, *prev = NULL;

	for (; v; v = v->next) {
		size_t i = f->next++;
		cJSON *n = &f->nodes[i];
		*n = (cJSON){.type = (v->type & 0xff) | cJSON_StringIsConst,
			     .valueint = v->valueint,
			     .valuedouble = v->valuedouble};
		if (v->string)
			n->string = (char *)(f->keys[i] ? f->keys[i] : put_string(f, v->string));
		if ((cJSON_IsString(v) || cJSON_IsRaw(v)) && v->valuestring)
			n->valuestring = put_string(f, v->valuestring);
		if (v->child)
			n->child = copy(f, v->child);
		if (prev) {
			prev->next = n;
			n->prev = prev;
		} else
			first = n;
		prev = n;
	}
	if (first)
		first->prev = prev; /* cJSON keeps the last sibling in the first's prev */
	return first;
}

cJSON *kube_json_freeze(const cJSON *v)
{
	struct plan p = {0};
	cJSON *root = NULL;

	if (!v)
		return NULL;
	/* the root alone: not its siblings */
	cJSON top = *v;
	top.next = top.prev = NULL;
	measure(&p, &top);
	if (!p.failed) {
		void *block = malloc(p.nodes * sizeof(cJSON) + p.bytes);
		if (block) {
			struct fill f = {.nodes = block,
					 .strings = (char *)block + p.nodes * sizeof(cJSON),
					 .keys = p.keys};
			root = copy(&f, &top);
			root->prev = NULL;
		}
	}
	free(p.keys);
	return root;
}

size_t kube_json_frozen_size(const cJSON *v)
{
	struct plan p = {0};
	cJSON top;

	if (!v)
		return 0;
	top = *v;
	top.next = top.prev = NULL;
	measure(&p, &top);
	free(p.keys);
	return p.failed ? 0 : p.nodes * sizeof(cJSON) + p.bytes;
}
