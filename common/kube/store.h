/* The informer's local cache: objects keyed "namespace/name" (or "name" for cluster-scoped
 * ones), with indexes, as client-go's cache.Indexer.
 *
 * Objects are shared, reference-counted and read-only once stored: a reader gets a reference
 * (kube_store_get, _by_index, _list), reads obj->json without any lock, and drops it with
 * kube_obj_unref. An update replaces the stored object; readers holding the old one keep it
 * until they drop it. Thread-safe (a read-write lock). */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KUBE_KEY_MAX 320 /* namespace (63) + '/' + name (253) */
#define KUBE_STORE_MAX_INDEXES 8
#define KUBE_INDEX_MAX_VALUES 16 /* values of one object in one index */

struct kube_obj {
	int refs; /* atomic */
	uint32_t mark;
	bool frozen; /* json is a frozen block (see frozen.h) */
	cJSON *json;
};

/* Wraps json (taking ownership) with one reference. */
struct kube_obj *kube_obj_new(cJSON *json);
/* The same with a frozen copy of json (json is freed): what informers store. */
struct kube_obj *kube_obj_new_frozen(cJSON *json);
struct kube_obj *kube_obj_ref(struct kube_obj *o);
void kube_obj_unref(struct kube_obj *o);
/* Drops a reference on each of n objects and frees the vector. */
void kube_objv_free(struct kube_obj **v, size_t n);
/* client-go's MetaNamespaceKeyFunc: "ns/name" or "name"; -EINVAL without a name. */
int kube_obj_key(const cJSON *obj, char *buf, size_t n);

struct kube_indexer {
	const char *name;
	/* Puts up to max values of obj into out (pointers into obj or static strings); returns
	 * how many. An object with no value is not in the index. */
	size_t (*fn)(const cJSON *obj, const char **out, size_t max);
};

/* Ready-made index functions. */
size_t kube_index_by_node_name(const cJSON *obj, const char **out, size_t max); /* spec.nodeName */
size_t kube_index_by_provider_id(const cJSON *obj, const char **out,
				 size_t max); /* spec.providerID */
size_t kube_index_by_namespace(const cJSON *obj, const char **out, size_t max);

struct kube_store;

int kube_store_new(const struct kube_indexer *idx, size_t n_idx, struct kube_store **ret);
void kube_store_free(struct kube_store *s);

/* Writers. put stores o (taking the caller's reference) under its key; the replaced object,
 * if any, goes to *ret_old (a reference for the caller) or is dropped when ret_old is NULL. */
int kube_store_put(struct kube_store *s, struct kube_obj *o, struct kube_obj **ret_old);
/* -ENOENT when absent. */
int kube_store_delete(struct kube_store *s, const char *key, struct kube_obj **ret_old);
/* A relist: begin, put every listed object, then sweep removes what was not put since begin
 * and returns those objects (references) to the caller. */
void kube_store_begin_replace(struct kube_store *s);
int kube_store_sweep(struct kube_store *s, struct kube_obj ***ret, size_t *ret_n);

/* Readers. */
int kube_store_get(struct kube_store *s, const char *key, struct kube_obj **ret);
int kube_store_by_index(struct kube_store *s, const char *index, const char *value,
			struct kube_obj ***ret, size_t *ret_n);
int kube_store_list(struct kube_store *s, struct kube_obj ***ret, size_t *ret_n);
/* Every key (a NULL-terminated vector). */
int kube_store_keys(struct kube_store *s, char ***ret);
size_t kube_store_len(struct kube_store *s);
