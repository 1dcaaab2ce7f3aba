/* Informers, as client-go's SharedIndexInformer: a thread lists the resource (in pages), fills
 * the store, then watches from the list's resourceVersion, applying every event to the store
 * and calling the handlers; it watches again from the last version seen when a stream ends,
 * and lists again on 410 Gone (objects gone meanwhile are delivered as deletions).
 *
 *   static const struct kube_indexer by_node[] = { { "node", kube_index_by_node_name } };
 *   struct kube_informer *inf;
 *   struct kube_informer_opts o = {
 *           .res = &kube_pods,
 *           .transform = pod_projection,                // keep only what the controller reads
 *           .indexers = by_node,                        // kept by the store: must outlive it
 *           .n_indexers = 1,
 *           .handlers = { .on_add = pod_added, .on_update = pod_updated,
 *                         .on_delete = pod_deleted, .ud = ctl },
 *           .cancel = ctl->cancel,                      // stops with its controller
 *   };
 *   kube_informer_new(kc, &o, &inf);
 *   kube_informer_start(inf);
 *   if (!kube_informer_wait_synced(inf, 60 * NSEC_PER_SEC)) ...
 *   kube_store_by_index(kube_informer_store(inf), "node", "ip-10-0-0-1", &pods, &n);
 *
 * Memory is what the store holds: metadata.managedFields is always dropped before an object is
 * stored, and a transform may drop or project more (kube_project keeps listed paths only).
 * Handlers run on the informer's thread (and the resync timer's, never at the same time), with
 * objects valid during the call only; they should be quick, typically adding a key to a
 * workqueue. */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/kube/rest.h"
#include "common/kube/store.h"
#include "common/kube/watch.h"

#define KUBE_INFORMER_MAX_OBJECTS 2000000 /* default cap on one store */

struct kube_handlers {
	void (*on_add)(void *ud, const cJSON *obj);
	/* also called for every object at each resync, and on a relist, with old == new when the
	 * object did not change */
	void (*on_update)(void *ud, const cJSON *old, const cJSON *obj);
	void (*on_delete)(void *ud, const cJSON *obj);
	void *ud;
};

struct kube_informer_opts {
	const struct kube_resource *res;
	const char *ns; /* NULL: every namespace */
	const char *label_selector;
	const char *field_selector;
	long long page_size; /* 0: 500 */
	int64_t resync_ns;   /* 0: no resync */
	/* Called with each object (managedFields already dropped) before it is stored; returns
	 * what to store: obj changed in place, or a new object (then obj is freed by the
	 * transform). NULL drops the object. */
	cJSON *(*transform)(void *ud, cJSON *obj);
	void *transform_ud;
	const struct kube_indexer *indexers; /* the store keeps the pointer: static storage */
	size_t n_indexers;
	struct kube_handlers handlers;
	long long watch_timeout_seconds; /* 0: 5 to 10 min at random */
	size_t max_event;		 /* 0: KUBE_WATCH_MAX_EVENT */
	size_t max_objects;		 /* 0: KUBE_INFORMER_MAX_OBJECTS */
	const char *name;		 /* for logs; NULL: the plural */
	/* A parent token: cancelling it stops the informer's list, watch and resync at once, as
	 * kube_informer_stop does (which must still be called). NULL: the client's token
	 * (kube_client_cancel: by default the process's, so a stop ends the informer). */
	struct cancel *cancel;
};

struct kube_informer_stats {
	unsigned long lists;   /* full lists (the first one and every relist) */
	unsigned long relists; /* lists after a 410 or an error */
	unsigned long list_errors;
	unsigned long dropped; /* objects over max_objects */
	struct kube_watch_stats watch;
};

struct kube_informer;

int kube_informer_new(struct kube_client *c, const struct kube_informer_opts *o,
		      struct kube_informer **ret);
/* Starts the informer's threads under a new token (a child of o->cancel, or of the client's). */
int kube_informer_start(struct kube_informer *inf);
/* Cancels the informer's token (a list or watch in flight ends at once) and waits for its
 * threads; the store stays readable until free. */
void kube_informer_stop(struct kube_informer *inf);
void kube_informer_free(struct kube_informer *inf);
bool kube_informer_has_synced(struct kube_informer *inf);
/* Waits until the first list is in the store; false on timeout (negative: no limit), or at once
 * when the informer was cancelled or stopped before. */
bool kube_informer_wait_synced(struct kube_informer *inf, int64_t timeout_ns);
struct kube_store *kube_informer_store(struct kube_informer *inf);
/* The resourceVersion of the last list or of the last watch that ended (malloc'd), or NULL. */
char *kube_informer_last_rv(struct kube_informer *inf);
void kube_informer_get_stats(struct kube_informer *inf, struct kube_informer_stats *ret);

/* Drops metadata.managedFields (done for every stored object). */
void kube_strip_managed_fields(cJSON *obj);
/* A new object holding only the given dotted paths of obj (missing ones are skipped); the
 * paths end with NULL. metadata.name, .namespace and .resourceVersion are always kept. */
cJSON *kube_project(const cJSON *obj, const char *const *paths);
