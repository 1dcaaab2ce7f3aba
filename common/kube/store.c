/* The informer's store and its indexes (see store.h). */
#include "common/kube/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/kube/frozen.h"
#include "common/kube/kmap.h"

struct index {
	const struct kube_indexer *def;
	struct kmap values; /* value -> struct kmap * (key -> struct kube_obj *) */
};

struct kube_store {
	pthread_rwlock_t lock;
	struct kmap items; /* key -> struct kube_obj * */
	struct index idx[KUBE_STORE_MAX_INDEXES];
	size_t n_idx;
	uint32_t mark;
};

struct kube_obj *kube_obj_new(cJSON *json)
{
	struct kube_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->refs = 1;
	o->json = json;
	return o;
}

struct kube_obj *kube_obj_new_frozen(cJSON *json)
{
	cJSON *f = kube_json_freeze(json);
	struct kube_obj *o = f ? kube_obj_new(f) : NULL;

	cJSON_Delete(json);
	if (!o) {
		free(f);
		return NULL;
	}
	o->frozen = true;
	return o;
}

struct kube_obj *kube_obj_ref(struct kube_obj *o)
{
	if (o)
		__atomic_add_fetch(&o->refs, 1, __ATOMIC_RELAXED);
	return o;
}

void kube_obj_unref(struct kube_obj *o)
{
	if (o && __atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		if (o->frozen)
			free(o->json);
		else
			cJSON_Delete(o->json);
		free(o);
	}
}

void kube_objv_free(struct kube_obj **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		kube_obj_unref(v[i]);
	free(v);
}

int kube_obj_key(const cJSON *obj, char *buf, size_t n)
{
	const char *name = json_str(obj, "metadata.name");
	const char *ns = json_str(obj, "metadata.namespace");

	if (!name || !*name)
		return -EINVAL;
	if (ns && *ns)
		return str_printf(buf, n, "%s/%s", ns, name) < 0 ? -ENAMETOOLONG : 0;
	return str_copy(buf, n, name);
}

static size_t one_value(const char *v, const char **out, size_t max)
{
	if (!v || !*v || max == 0)
		return 0;
	out[0] = v;
	return 1;
}

size_t kube_index_by_node_name(const cJSON *obj, const char **out, size_t max)
{
	return one_value(json_str(obj, "spec.nodeName"), out, max);
}

size_t kube_index_by_provider_id(const cJSON *obj, const char **out, size_t max)
{
	return one_value(json_str(obj, "spec.providerID"), out, max);
}

size_t kube_index_by_namespace(const cJSON *obj, const char **out, size_t max)
{
	return one_value(json_str(obj, "metadata.namespace"), out, max);
}

int kube_store_new(const struct kube_indexer *idx, size_t n_idx, struct kube_store **ret)
{
	struct kube_store *s;

	if (n_idx > KUBE_STORE_MAX_INDEXES)
		return -E2BIG;
	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	pthread_rwlock_init(&s->lock, NULL);
	for (size_t i = 0; i < n_idx; i++) {
		if (!idx[i].name || !idx[i].fn) {
			free(s);
			return -EINVAL;
		}
		s->idx[i].def = &idx[i];
	}
	s->n_idx = n_idx;
	*ret = s;
	return 0;
}

static void free_set(void *set)
{
	kmap_clear(set, NULL);
	free(set);
}

static void unref_value(void *o)
{
	kube_obj_unref(o);
}

void kube_store_free(struct kube_store *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_idx; i++)
		kmap_clear(&s->idx[i].values, free_set);
	kmap_clear(&s->items, unref_value);
	pthread_rwlock_destroy(&s->lock);
	free(s);
}

static void index_remove(struct index *ix, const char *key, const struct kube_obj *o)
{
	const char *vals[KUBE_INDEX_MAX_VALUES];
	size_t n = ix->def->fn(o->json, vals, KUBE_INDEX_MAX_VALUES);

	for (size_t i = 0; i < n; i++) {
		struct kmap *set = kmap_get(&ix->values, vals[i]);
		if (!set)
			continue;
		kmap_remove(set, key);
		if (set->size == 0)
			free_set(kmap_remove(&ix->values, vals[i]));
	}
}

static int index_add(struct index *ix, const char *key, struct kube_obj *o)
{
	const char *vals[KUBE_INDEX_MAX_VALUES];
	size_t n = ix->def->fn(o->json, vals, KUBE_INDEX_MAX_VALUES);

	for (size_t i = 0; i < n; i++) {
		struct kmap *set = kmap_get(&ix->values, vals[i]);
		if (!set) {
			if (!(set = calloc(1, sizeof(*set))))
				return -ENOMEM;
			if (kmap_put(&ix->values, vals[i], set, NULL) < 0) {
				free(set);
				return -ENOMEM;
			}
		}
		if (kmap_put(set, key, o, NULL) < 0)
			return -ENOMEM;
	}
	return 0;
}

int kube_store_put(struct kube_store *s, struct kube_obj *o, struct kube_obj **ret_old)
{
	char key[KUBE_KEY_MAX];
	void *old = NULL;
	int r;

	if ((r = kube_obj_key(o->json, key, sizeof(key))) < 0)
		return r;
	pthread_rwlock_wrlock(&s->lock);
	o->mark = s->mark;
	if ((r = kmap_put(&s->items, key, o, &old)) < 0) {
		pthread_rwlock_unlock(&s->lock);
		return r;
	}
	for (size_t i = 0; i < s->n_idx; i++) {
		if (old)
			index_remove(&s->idx[i], key, old);
		if (r >= 0)
			r = index_add(&s->idx[i], key, o);
	}
	pthread_rwlock_unlock(&s->lock);
	if (ret_old)
		*ret_old = old;
	else
		kube_obj_unref(old);
	return r;
}

int kube_store_delete(struct kube_store *s, const char *key, struct kube_obj **ret_old)
{
	struct kube_obj *old;

	pthread_rwlock_wrlock(&s->lock);
	old = kmap_remove(&s->items, key);
	for (size_t i = 0; old && i < s->n_idx; i++)
		index_remove(&s->idx[i], key, old);
	pthread_rwlock_unlock(&s->lock);
	if (!old)
		return -ENOENT;
	if (ret_old)
		*ret_old = old;
	else
		kube_obj_unref(old);
	return 0;
}

void kube_store_begin_replace(struct kube_store *s)
{
	pthread_rwlock_wrlock(&s->lock);
	s->mark++;
	pthread_rwlock_unlock(&s->lock);
}

/* Grows a vector of object references by one. */
static int objv_push(struct kube_obj ***v, size_t *n, size_t *cap, struct kube_obj *o)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct kube_obj **p = realloc(*v, nc * sizeof(*p));
		if (!p)
			return -ENOMEM;
		*v = p;
		*cap = nc;
	}
	(*v)[(*n)++] = o;
	return 0;
}

int kube_store_sweep(struct kube_store *s, struct kube_obj ***ret, size_t *ret_n)
{
	struct kube_obj **v = NULL;
	size_t n = 0, cap = 0, i;
	_cleanup_strv_ char **stale = NULL;
	int r = 0;

	pthread_rwlock_wrlock(&s->lock);
	for (struct kmap_entry *e = kmap_first(&s->items, &i); e && r >= 0;
	     e = kmap_next(&s->items, e, &i))
		if (((struct kube_obj *)e->val)->mark != s->mark)
			r = strv_push(&stale, e->key);
	for (char **k = stale; r >= 0 && k && *k; k++) {
		struct kube_obj *old = kmap_remove(&s->items, *k);
		for (size_t j = 0; j < s->n_idx; j++)
			index_remove(&s->idx[j], *k, old);
		if ((r = objv_push(&v, &n, &cap, old)) < 0)
			kube_obj_unref(old);
	}
	pthread_rwlock_unlock(&s->lock);
	if (r < 0) {
		kube_objv_free(v, n);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

int kube_store_get(struct kube_store *s, const char *key, struct kube_obj **ret)
{
	struct kube_obj *o;

	pthread_rwlock_rdlock(&s->lock);
	o = kube_obj_ref(kmap_get(&s->items, key));
	pthread_rwlock_unlock(&s->lock);
	if (!o)
		return -ENOENT;
	*ret = o;
	return 0;
}

static int collect(const struct kmap *m, struct kube_obj ***ret, size_t *ret_n)
{
	struct kube_obj **v = NULL;
	size_t n = 0, i;

	if (m && m->size && !(v = malloc(m->size * sizeof(*v))))
		return -ENOMEM;
	for (struct kmap_entry *e = m ? kmap_first(m, &i) : NULL; e; e = kmap_next(m, e, &i))
		v[n++] = kube_obj_ref(e->val);
	*ret = v;
	*ret_n = n;
	return 0;
}

int kube_store_by_index(struct kube_store *s, const char *index, const char *value,
			struct kube_obj ***ret, size_t *ret_n)
{
	int r = -ENOENT;

	pthread_rwlock_rdlock(&s->lock);
	for (size_t i = 0; i < s->n_idx; i++)
		if (strcmp(s->idx[i].def->name, index) == 0) {
			r = collect(kmap_get(&s->idx[i].values, value), ret, ret_n);
			break;
		}
	pthread_rwlock_unlock(&s->lock);
	return r;
}

int kube_store_list(struct kube_store *s, struct kube_obj ***ret, size_t *ret_n)
{
	pthread_rwlock_rdlock(&s->lock);
	int r = collect(&s->items, ret, ret_n);
	pthread_rwlock_unlock(&s->lock);
	return r;
}

int kube_store_keys(struct kube_store *s, char ***ret)
{
	char **v;
	size_t n = 0, i;

	pthread_rwlock_rdlock(&s->lock);
	v = calloc(s->items.size + 1, sizeof(*v));
	for (struct kmap_entry *e = v ? kmap_first(&s->items, &i) : NULL; e;
	     e = kmap_next(&s->items, e, &i))
		if (!(v[n++] = strdup(e->key))) {
			strv_free(v);
			v = NULL;
			break;
		}
	pthread_rwlock_unlock(&s->lock);
	if (!v)
		return -ENOMEM;
	*ret = v;
	return 0;
}

size_t kube_store_len(struct kube_store *s)
{
	pthread_rwlock_rdlock(&s->lock);
	size_t n = s->items.size;
	pthread_rwlock_unlock(&s->lock);
	return n;
}
