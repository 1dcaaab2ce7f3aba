/* Informers: list, then watch, into a store (see informer.h). */
#include "common/kube/informer.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"

#define STAT_INC(f) __atomic_fetch_add(&inf->stats.f, 1, __ATOMIC_RELAXED)

struct kube_informer {
	struct kube_client *c;
	struct kube_informer_opts o;
	char *ns, *label_selector, *field_selector, *name; /* copies of the options' strings */
	struct kube_store *store;
	size_t max_objects;

	pthread_t thread, resync_thread;
	bool running, resync_running;
	struct cancel *cancel; /* while running: a child of o.cancel */

	pthread_mutex_t lock; /* guards synced, ended, rv; with cond for waits */
	pthread_cond_t cond;
	bool synced;
	bool ended; /* the informer's thread has ended (cancelled) */
	char *rv;

	pthread_mutex_t handler_lock; /* one handler call at a time */
	struct kube_informer_stats stats;
};

void kube_strip_managed_fields(cJSON *obj)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	if (cJSON_IsObject(meta))
		cJSON_DeleteItemFromObjectCaseSensitive(meta, "managedFields");
}

/* Puts item at a dotted path of root, creating objects on the way (item is always taken). */
static int set_path(cJSON *root, const char *path, cJSON *item)
{
	char seg[256];
	cJSON *cur = root;

	for (const char *p = path;;) {
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);
		if (len == 0 || len >= sizeof(seg)) {
			cJSON_Delete(item);
			return -EINVAL;
		}
		memcpy(seg, p, len);
		seg[len] = 0;
		if (!dot)
			return json_put(cur, seg, item);
		cJSON *next = cJSON_GetObjectItemCaseSensitive(cur, seg);
		if (!next) {
			if (!(next = cJSON_AddObjectToObject(cur, seg))) {
				cJSON_Delete(item);
				return -ENOMEM;
			}
		} else if (!cJSON_IsObject(next)) {
			cJSON_Delete(item);
			return -EINVAL;
		}
		cur = next;
		p = dot + 1;
	}
}

cJSON *kube_project(const cJSON *obj, const char *const *paths)
{
	static const char *const always[] = {"metadata.name", "metadata.namespace",
					     "metadata.resourceVersion", NULL};
	const char *const *lists[] = {always, paths};
	cJSON *out = cJSON_CreateObject();

	for (size_t l = 0; out && l < ARRAY_SIZE(lists); l++)
		for (const char *const *p = lists[l]; p && *p; p++) {
			const cJSON *v = json_find(obj, *p);
			if (!v)
				continue;
			cJSON *copy = cJSON_Duplicate(v, true);
			if (!copy || set_path(out, *p, copy) < 0) {
				cJSON_Delete(out);
				return NULL;
			}
		}
	return out;
}

static struct kube_obj *prepare(struct kube_informer *inf, cJSON *json)
{
	struct kube_obj *o;

	kube_strip_managed_fields(json);
	if (inf->o.transform && !(json = inf->o.transform(inf->o.transform_ud, json)))
		return NULL;
	/* stored objects are read-only: one block each (about half the memory of a tree) */
	o = kube_obj_new_frozen(json);
	return o;
}

static void call_add_update(struct kube_informer *inf, struct kube_obj *old, struct kube_obj *o)
{
	const struct kube_handlers *h = &inf->o.handlers;

	pthread_mutex_lock(&inf->handler_lock);
	if (old && h->on_update)
		h->on_update(h->ud, old->json, o->json);
	else if (!old && h->on_add)
		h->on_add(h->ud, o->json);
	pthread_mutex_unlock(&inf->handler_lock);
}

static void call_delete(struct kube_informer *inf, const cJSON *json)
{
	const struct kube_handlers *h = &inf->o.handlers;

	if (!h->on_delete)
		return;
	pthread_mutex_lock(&inf->handler_lock);
	h->on_delete(h->ud, json);
	pthread_mutex_unlock(&inf->handler_lock);
}

/* Stores an object and tells the handlers; json is taken. */
static int upsert(struct kube_informer *inf, cJSON *json)
{
	struct kube_obj *o, *old = NULL, *cur = NULL;
	char key[KUBE_KEY_MAX];
	int r;

	if ((r = kube_obj_key(json, key, sizeof(key))) < 0) {
		cJSON_Delete(json);
		return 0; /* an object without a name can't be stored: skip it */
	}
	if (kube_store_len(inf->store) >= inf->max_objects &&
	    kube_store_get(inf->store, key, &cur) < 0) {
		if (STAT_INC(dropped) == 0)
			log_warn("informer store is full, dropping objects",
				 KV_S("informer", inf->name), KV_U("max", inf->max_objects));
		cJSON_Delete(json);
		return 0;
	}
	kube_obj_unref(cur);
	if (!(o = prepare(inf, json)))
		return 0;
	kube_obj_ref(o); /* ours, for the handlers */
	if ((r = kube_store_put(inf->store, o, &old)) < 0) {
		kube_obj_unref(o);
		kube_obj_unref(o);
		return r;
	}
	call_add_update(inf, old, o);
	kube_obj_unref(old);
	kube_obj_unref(o);
	return 0;
}

static int on_list_item(void *ud, cJSON *item)
{
	return upsert(ud, item);
}

static int on_event(void *ud, enum kube_event_type type, cJSON *json)
{
	struct kube_informer *inf = ud;
	struct kube_obj *old = NULL;
	char key[KUBE_KEY_MAX];

	if (type == KUBE_EVENT_ADDED || type == KUBE_EVENT_MODIFIED)
		return upsert(inf, json);
	if (type == KUBE_EVENT_DELETED && kube_obj_key(json, key, sizeof(key)) == 0 &&
	    kube_store_delete(inf->store, key, &old) == 0) {
		/* the handlers see the final state the event carries, as in client-go */
		struct kube_obj *last = prepare(inf, json);
		call_delete(inf, last ? last->json : old->json);
		kube_obj_unref(last);
		kube_obj_unref(old);
		return 0;
	}
	cJSON_Delete(json);
	return 0;
}

static void set_rv(struct kube_informer *inf, char *rv)
{
	pthread_mutex_lock(&inf->lock);
	free(inf->rv);
	inf->rv = rv;
	pthread_mutex_unlock(&inf->lock);
}

static const struct kube_ref *informer_ref(struct kube_informer *inf, struct kube_ref *ref)
{
	*ref = (struct kube_ref){.res = inf->o.res, .ns = inf->ns};
	return ref;
}

/* A full list into the store; objects gone since the last one are delivered as deletions. */
static int relist(struct kube_informer *inf, char **rv)
{
	struct kube_list_opts lo = {
	    .label_selector = inf->label_selector,
	    .field_selector = inf->field_selector,
	    .limit = inf->o.page_size > 0 ? inf->o.page_size : 500,
	    .cancel = inf->cancel,
	};
	struct kube_status st;
	struct kube_obj **gone = NULL;
	struct kube_ref ref;
	size_t n = 0;
	int64_t t0 = now_mono_ns();
	int r;

	kube_store_begin_replace(inf->store);
	r = kube_list_each(inf->c, informer_ref(inf, &ref), &lo, on_list_item, inf, rv, &st);
	if (r == -ECANCELED)
		return r; /* stopping: not an error */
	if (r < 0) {
		STAT_INC(list_errors);
		log_warn("failed to list", KV_S("informer", inf->name), KV_E(r),
			 KV_S("reason", st.reason), KV_S("message", st.message));
		return r;
	}
	if ((r = kube_store_sweep(inf->store, &gone, &n)) < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		call_delete(inf, gone[i]->json);
	kube_objv_free(gone, n);
	STAT_INC(lists);
	log_v(2, "listed", KV_S("informer", inf->name), KV_U("objects", kube_store_len(inf->store)),
	      KV_S("resourceVersion", *rv ? *rv : ""),
	      KV_I("milliseconds", (now_mono_ns() - t0) / NSEC_PER_MSEC));
	return 0;
}

static void *informer_main(void *p)
{
	struct kube_informer *inf = p;
	struct backoff b = {
	    .base_ns = 800 * NSEC_PER_MSEC, .max_ns = 30 * NSEC_PER_SEC, .jitter = 1.0};
	struct kube_watch_opts wo = {
	    .label_selector = inf->label_selector,
	    .field_selector = inf->field_selector,
	    .timeout_seconds = inf->o.watch_timeout_seconds,
	    .max_event = inf->o.max_event,
	    .cancel = inf->cancel,
	    .on_event = on_event,
	    .ud = inf,
	};
	struct kube_ref ref;
	bool listed_before = false;

	while (!cancel_is_cancelled(inf->cancel)) {
		char *rv = NULL;
		int r = relist(inf, &rv);
		if (r < 0) {
			free(rv);
			if (cancel_wait(inf->cancel, backoff_next(&b)))
				break;
			continue;
		}
		backoff_reset(&b);
		if (listed_before)
			STAT_INC(relists);
		listed_before = true;
		pthread_mutex_lock(&inf->lock);
		free(inf->rv);
		inf->rv = rv ? strdup(rv) : NULL;
		inf->synced = true;
		pthread_cond_broadcast(&inf->cond);
		pthread_mutex_unlock(&inf->lock);

		r = kube_watch_loop(inf->c, informer_ref(inf, &ref), &wo, &rv, &inf->stats.watch);
		set_rv(inf, rv);
		if (r == -ECANCELED)
			break;
		if (r == -KUBE_EGONE)
			log_v(2, "resource version too old, listing again",
			      KV_S("informer", inf->name));
		else {
			log_warn("watch failed, listing again", KV_S("informer", inf->name),
				 KV_E(r));
			if (cancel_wait(inf->cancel, backoff_next(&b)))
				break;
		}
	}
	pthread_mutex_lock(&inf->lock);
	inf->ended = true;
	pthread_cond_broadcast(&inf->cond);
	pthread_mutex_unlock(&inf->lock);
	return NULL;
}

static void *resync_main(void *p)
{
	struct kube_informer *inf = p;

	while (!cancel_wait(inf->cancel, inf->o.resync_ns)) {
		struct kube_obj **v = NULL;
		size_t n = 0;
		if (!kube_informer_has_synced(inf) || kube_store_list(inf->store, &v, &n) < 0)
			continue;
		for (size_t i = 0; i < n && !cancel_is_cancelled(inf->cancel); i++)
			call_add_update(inf, v[i], v[i]);
		kube_objv_free(v, n);
	}
	return NULL;
}

int kube_informer_new(struct kube_client *c, const struct kube_informer_opts *o,
		      struct kube_informer **ret)
{
	struct kube_informer *inf;
	pthread_condattr_t ca;
	int r;

	if (!o->res)
		return -EINVAL;
	if (!(inf = calloc(1, sizeof(*inf))))
		return -ENOMEM;
	inf->c = c;
	inf->o = *o;
	inf->max_objects = o->max_objects ? o->max_objects : KUBE_INFORMER_MAX_OBJECTS;
	pthread_mutex_init(&inf->lock, NULL);
	pthread_mutex_init(&inf->handler_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&inf->cond, &ca);
	pthread_condattr_destroy(&ca);
	if ((o->ns && !(inf->ns = strdup(o->ns))) ||
	    (o->label_selector && !(inf->label_selector = strdup(o->label_selector))) ||
	    (o->field_selector && !(inf->field_selector = strdup(o->field_selector))) ||
	    !(inf->name = strdup(o->name ? o->name : o->res->plural))) {
		kube_informer_free(inf);
		return -ENOMEM;
	}
	if ((r = kube_store_new(o->indexers, o->n_indexers, &inf->store)) < 0) {
		kube_informer_free(inf);
		return r;
	}
	*ret = inf;
	return 0;
}

int kube_informer_start(struct kube_informer *inf)
{
	int r;

	if (inf->running)
		return -EALREADY;
	if ((r = cancel_new(inf->o.cancel ? inf->o.cancel : kube_client_cancel(inf->c),
			    &inf->cancel)) < 0)
		return r;
	pthread_mutex_lock(&inf->lock);
	inf->ended = false;
	pthread_mutex_unlock(&inf->lock);
	if ((r = -pthread_create(&inf->thread, NULL, informer_main, inf)) < 0) {
		cancel_free(TAKE_PTR(inf->cancel));
		return r;
	}
	inf->running = true;
	if (inf->o.resync_ns > 0) {
		if ((r = -pthread_create(&inf->resync_thread, NULL, resync_main, inf)) < 0) {
			kube_informer_stop(inf);
			return r;
		}
		inf->resync_running = true;
	}
	return 0;
}

void kube_informer_stop(struct kube_informer *inf)
{
	if (!inf || !inf->running)
		return;
	cancel_cancel(inf->cancel);
	pthread_join(inf->thread, NULL);
	if (inf->resync_running)
		pthread_join(inf->resync_thread, NULL);
	inf->running = inf->resync_running = false;
	cancel_free(TAKE_PTR(inf->cancel));
}

void kube_informer_free(struct kube_informer *inf)
{
	if (!inf)
		return;
	kube_informer_stop(inf);
	kube_store_free(inf->store);
	free(inf->ns);
	free(inf->label_selector);
	free(inf->field_selector);
	free(inf->name);
	free(inf->rv);
	pthread_cond_destroy(&inf->cond);
	pthread_mutex_destroy(&inf->lock);
	pthread_mutex_destroy(&inf->handler_lock);
	free(inf);
}

bool kube_informer_has_synced(struct kube_informer *inf)
{
	pthread_mutex_lock(&inf->lock);
	bool s = inf->synced;
	pthread_mutex_unlock(&inf->lock);
	return s;
}

bool kube_informer_wait_synced(struct kube_informer *inf, int64_t timeout_ns)
{
	int64_t now = now_mono_ns();
	int64_t deadline = timeout_ns >= 0 && timeout_ns < INT64_MAX - now ? now + timeout_ns : -1;
	struct timespec ts = {.tv_sec = deadline / NSEC_PER_SEC,
			      .tv_nsec = deadline % NSEC_PER_SEC};
	bool s;

	/* the thread broadcasts when it has synced, and when it ends (cancelled) */
	pthread_mutex_lock(&inf->lock);
	while (!inf->synced && !inf->ended && inf->running)
		if (deadline < 0)
			pthread_cond_wait(&inf->cond, &inf->lock);
		else if (pthread_cond_timedwait(&inf->cond, &inf->lock, &ts) == ETIMEDOUT)
			break;
	s = inf->synced;
	pthread_mutex_unlock(&inf->lock);
	return s;
}

struct kube_store *kube_informer_store(struct kube_informer *inf)
{
	return inf->store;
}

char *kube_informer_last_rv(struct kube_informer *inf)
{
	pthread_mutex_lock(&inf->lock);
	char *rv = inf->rv ? strdup(inf->rv) : NULL;
	pthread_mutex_unlock(&inf->lock);
	return rv;
}

void kube_informer_get_stats(struct kube_informer *inf, struct kube_informer_stats *ret)
{
	__atomic_load(&inf->stats.lists, &ret->lists, __ATOMIC_RELAXED);
	__atomic_load(&inf->stats.relists, &ret->relists, __ATOMIC_RELAXED);
	__atomic_load(&inf->stats.list_errors, &ret->list_errors, __ATOMIC_RELAXED);
	__atomic_load(&inf->stats.dropped, &ret->dropped, __ATOMIC_RELAXED);
	__atomic_load(&inf->stats.watch.streams, &ret->watch.streams, __ATOMIC_RELAXED);
	__atomic_load(&inf->stats.watch.events, &ret->watch.events, __ATOMIC_RELAXED);
	__atomic_load(&inf->stats.watch.errors, &ret->watch.errors, __ATOMIC_RELAXED);
	__atomic_load(&inf->stats.watch.malformed, &ret->watch.malformed, __ATOMIC_RELAXED);
	__atomic_load(&inf->stats.watch.gone, &ret->watch.gone, __ATOMIC_RELAXED);
}
