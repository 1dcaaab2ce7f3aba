/* client-go's EventCorrelator: spam filter, aggregation of similar events, counting of repeats
 * (see events.h). Three LRU caches, each bounded in entries (cache_size) and in age: an entry
 * unused for longer than its window can change no decision (a spam bucket refills in 125
 * minutes, aggregation and repeats look 10 minutes back), so it is dropped. The entries of one
 * involved object are linked together, so that all of them go when the object is deleted
 * (kube_correlator_forget_object): with Nodes or Pods created and deleted all day, the caches
 * otherwise fill with objects that are gone. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/timeutil.h"
#include "common/kube/events.h"
#include "common/kube/kmap.h"

#define SPAM_BURST 25.0
#define SPAM_REFILL_NS (300 * NSEC_PER_SEC) /* one token every 5 minutes */
#define AGG_MAX_EVENTS 10
#define WINDOW_NS (600 * NSEC_PER_SEC) /* 10 minutes */
#define COMBINED "(combined from similar events): "

struct lru;

struct lru_node {
	struct lru_node *prev, *next;	/* in its cache, most recently used first */
	struct lru_node *oprev, *onext; /* the entries of the same object, in any cache */
	struct kmap_entry *obj;		/* in kube_correlator.objects */
	struct lru *lru;
	int64_t used_ns;
	const char *key; /* the cache's map entry's key */
	void *val;
};

struct lru {
	struct kube_correlator *c;
	struct kmap map; /* key -> struct lru_node * */
	struct lru_node head;
	size_t cap;
	int64_t ttl_ns; /* an entry unused that long is dropped */
	void (*free_val)(void *);
};

struct spam_rec {
	double tokens;
	int64_t last_ns;
};

struct agg_rec {
	char *messages[AGG_MAX_EVENTS];
	size_t n;
	int64_t last_ns;
};

struct log_rec {
	long count;
	int64_t first_ns, last_ns;
	char *name;
};

struct kube_correlator {
	struct lru spam, agg, log;
	/* the involved object (kind, namespace, name, uid) -> its first struct lru_node */
	struct kmap objects;
};

static void lru_init(struct kube_correlator *c, struct lru *l, size_t cap, int64_t ttl_ns,
		     void (*free_val)(void *))
{
	l->c = c;
	l->head.prev = l->head.next = &l->head;
	l->cap = cap;
	l->ttl_ns = ttl_ns;
	l->free_val = free_val;
}

static void lru_unlink(struct lru_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
}

static void lru_push_front(struct lru *l, struct lru_node *n)
{
	n->next = l->head.next;
	n->prev = &l->head;
	l->head.next->prev = n;
	l->head.next = n;
}

static int obj_link(struct kube_correlator *c, struct lru_node *n, const char *obj)
{
	struct kmap_entry *e = kmap_find(&c->objects, obj);

	if (!e &&
	    (kmap_put(&c->objects, obj, NULL, NULL) < 0 || !(e = kmap_find(&c->objects, obj))))
		return -ENOMEM;
	n->obj = e;
	n->oprev = NULL;
	n->onext = e->val;
	if (n->onext)
		n->onext->oprev = n;
	e->val = n;
	return 0;
}

/* The object's record goes with its last entry. */
static void obj_unlink(struct kube_correlator *c, struct lru_node *n)
{
	if (!n->obj)
		return;
	if (n->oprev)
		n->oprev->onext = n->onext;
	else
		n->obj->val = n->onext;
	if (n->onext)
		n->onext->oprev = n->oprev;
	if (!n->obj->val)
		kmap_remove(&c->objects, n->obj->key);
	n->obj = NULL;
}

static void lru_drop(struct lru *l, struct lru_node *n)
{
	lru_unlink(n);
	obj_unlink(l->c, n);
	l->free_val(n->val);
	kmap_remove(&l->map, n->key); /* frees the key */
	free(n);
}

static void lru_touch(struct lru *l, struct lru_node *n, int64_t now)
{
	n->used_ns = now;
	lru_unlink(n);
	lru_push_front(l, n);
}

static void *lru_get(struct lru *l, const char *key, int64_t now)
{
	struct lru_node *n = kmap_get(&l->map, key);
	if (!n)
		return NULL;
	lru_touch(l, n, now);
	return n->val;
}

/* Stores val (taken, freed on failure) under key for object obj, evicting the least recently
 * used entry when the cache is full. */
static int lru_put(struct lru *l, const char *key, const char *obj, void *val, int64_t now)
{
	struct lru_node *n = kmap_get(&l->map, key);

	if (n) {
		l->free_val(n->val);
		n->val = val;
		lru_touch(l, n, now);
		return 0;
	}
	if (!(n = calloc(1, sizeof(*n))) || obj_link(l->c, n, obj) < 0 ||
	    kmap_put(&l->map, key, n, NULL) < 0) {
		if (n)
			obj_unlink(l->c, n);
		free(n);
		l->free_val(val);
		return -ENOMEM;
	}
	n->lru = l;
	n->key = kmap_find(&l->map, key)->key;
	n->val = val;
	n->used_ns = now;
	lru_push_front(l, n);
	if (l->map.size > l->cap)
		lru_drop(l, l->head.prev);
	return 0;
}

static void lru_remove(struct lru *l, const char *key)
{
	struct lru_node *n = kmap_get(&l->map, key);
	if (n)
		lru_drop(l, n);
}

/* Drops the entries unused for longer than the cache's window (from the least recently used
 * end; a clock that went back only keeps entries longer). */
static void lru_expire(struct lru *l, int64_t now)
{
	while (l->head.prev != &l->head && now - l->head.prev->used_ns > l->ttl_ns)
		lru_drop(l, l->head.prev);
}

static void lru_clear(struct lru *l)
{
	while (l->head.next != &l->head)
		lru_drop(l, l->head.next);
	kmap_clear(&l->map, NULL);
}

static void free_agg(void *p)
{
	struct agg_rec *a = p;
	for (size_t i = 0; a && i < a->n; i++)
		free(a->messages[i]);
	free(a);
}

static void free_log(void *p)
{
	struct log_rec *g = p;
	if (g)
		free(g->name);
	free(g);
}

int kube_correlator_new(size_t cache_size, struct kube_correlator **ret)
{
	struct kube_correlator *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (!cache_size)
		cache_size = KUBE_EVENT_CACHE;
	/* a bucket unused that long is full again, as good as none */
	lru_init(c, &c->spam, cache_size, (int64_t)SPAM_BURST * SPAM_REFILL_NS, free);
	lru_init(c, &c->agg, cache_size, WINDOW_NS, free_agg);
	lru_init(c, &c->log, cache_size, WINDOW_NS, free_log);
	*ret = c;
	return 0;
}

void kube_correlator_free(struct kube_correlator *c)
{
	if (!c)
		return;
	lru_clear(&c->spam);
	lru_clear(&c->agg);
	lru_clear(&c->log);
	kmap_clear(&c->objects, NULL); /* empty by now */
	free(c);
}

void kube_ev_free(struct kube_ev *ev)
{
	if (!ev)
		return;
	free(ev->kind);
	free(ev->api_version);
	free(ev->ns);
	free(ev->name);
	free(ev->uid);
	free(ev->resource_version);
	free(ev->field_path);
	free(ev->type);
	free(ev->reason);
	free(ev->message);
	free(ev->component);
	free(ev->host);
	free(ev->event_name);
	free(ev);
}

static const char *s(const char *v)
{
	return v ? v : "";
}

/* The keys client-go builds: the source and the object; + type and reason; + message. */
static int make_key(const struct kube_ev *ev, int level, struct buf *b)
{
	int r = buf_printf(b, "%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", s(ev->component),
			   s(ev->host), s(ev->kind), s(ev->ns), s(ev->name), s(ev->uid),
			   s(ev->api_version), s(ev->field_path));
	if (r >= 0 && level >= 1)
		r = buf_printf(b, "\x1f%s\x1f%s", s(ev->type), s(ev->reason));
	if (r >= 0 && level >= 2)
		r = buf_printf(b, "\x1f%s", s(ev->message));
	return r;
}

/* The involved object, whatever the source, field path, type, reason and message. */
static int make_obj_key(const struct kube_ev *ev, struct buf *b)
{
	return buf_printf(b, "%s\x1f%s\x1f%s\x1f%s", s(ev->kind), s(ev->ns), s(ev->name),
			  s(ev->uid));
}

static bool spam_allows(struct kube_correlator *c, const char *key, const char *obj, int64_t now)
{
	struct spam_rec *sp = lru_get(&c->spam, key, now);

	if (!sp) {
		if (!(sp = malloc(sizeof(*sp))))
			return true;
		*sp = (struct spam_rec){SPAM_BURST, now};
		if (lru_put(&c->spam, key, obj, sp, now) < 0)
			return true;
	}
	if (now > sp->last_ns)
		sp->tokens += (double)(now - sp->last_ns) / (double)SPAM_REFILL_NS;
	if (sp->tokens > SPAM_BURST)
		sp->tokens = SPAM_BURST;
	sp->last_ns = now;
	if (sp->tokens < 1)
		return false;
	sp->tokens -= 1;
	return true;
}

/* True when the event must be combined with its similar ones. */
static bool aggregate(struct kube_correlator *c, const char *key, const char *obj,
		      const char *message, int64_t now)
{
	struct agg_rec *a = lru_get(&c->agg, key, now);

	if (!a || now - a->last_ns > WINDOW_NS) {
		if (!(a = calloc(1, sizeof(*a))) || lru_put(&c->agg, key, obj, a, now) < 0)
			return false;
	}
	a->last_ns = now;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->messages[i], message) == 0)
			return false;
	if (a->n < AGG_MAX_EVENTS)
		a->messages[a->n++] = strdup(message);
	return a->n >= AGG_MAX_EVENTS;
}

enum kube_ev_action kube_correlate(struct kube_correlator *c, struct kube_ev *ev, int64_t now)
{
	_cleanup_buf_ struct buf key = BUF_INIT(0), obj = BUF_INIT(0);
	struct log_rec *g;
	char *name;

	lru_expire(&c->spam, now);
	lru_expire(&c->agg, now);
	lru_expire(&c->log, now);
	if (make_obj_key(ev, &obj) < 0 || make_key(ev, 0, &key) < 0 ||
	    !spam_allows(c, key.data, obj.data, now))
		return KUBE_EV_DROP;
	buf_reset(&key);
	if (make_key(ev, 1, &key) < 0)
		return KUBE_EV_DROP;
	if (aggregate(c, key.data, obj.data, s(ev->message), now)) {
		char *m = NULL;
		if (asprintf(&m, COMBINED "%s", s(ev->message)) < 0)
			return KUBE_EV_DROP;
		free(ev->message);
		ev->message = m;
		/* the combined event is counted under the similar events' key */
	} else {
		buf_reset(&key);
		if (make_key(ev, 2, &key) < 0)
			return KUBE_EV_DROP;
	}
	g = lru_get(&c->log, key.data, now);
	if (g && now - g->last_ns <= WINDOW_NS && (name = strdup(g->name))) {
		g->count++;
		g->last_ns = now;
		free(ev->event_name);
		ev->event_name = name;
		ev->count = g->count;
		ev->first_ns = g->first_ns;
		ev->last_ns = now;
		return KUBE_EV_PATCH;
	}
	if (asprintf(&name, "%s.%llx", s(ev->name), (unsigned long long)now) < 0)
		return KUBE_EV_DROP;
	free(ev->event_name);
	ev->event_name = name;
	ev->count = 1;
	ev->first_ns = ev->last_ns = now;
	if ((g = calloc(1, sizeof(*g))) && (g->name = strdup(name))) {
		*g = (struct log_rec){1, now, now, g->name};
		lru_put(&c->log, key.data, obj.data, g, now);
	} else
		free(g);
	return KUBE_EV_CREATE;
}

void kube_correlator_forget(struct kube_correlator *c, const struct kube_ev *ev)
{
	_cleanup_buf_ struct buf key = BUF_INIT(0);
	bool combined = ev->message && str_has_prefix(ev->message, COMBINED);

	/* a combined event is counted under its similar events' key, without the message */
	if (make_key(ev, combined ? 1 : 2, &key) >= 0)
		lru_remove(&c->log, key.data);
}

void kube_correlator_forget_object(struct kube_correlator *c, const struct kube_ev *ev)
{
	_cleanup_buf_ struct buf obj = BUF_INIT(0);
	struct kmap_entry *e;

	if (make_obj_key(ev, &obj) < 0 || !(e = kmap_find(&c->objects, obj.data)))
		return;
	/* the entry e goes with the object's last cached entry */
	for (bool last = false; !last;) {
		struct lru_node *n = e->val;
		last = !n->onext;
		lru_drop(n->lru, n);
	}
}

void kube_correlator_get_stats(const struct kube_correlator *c, struct kube_correlator_stats *ret)
{
	*ret = (struct kube_correlator_stats){.spam = c->spam.map.size,
					      .agg = c->agg.map.size,
					      .log = c->log.map.size,
					      .objects = c->objects.size};
}
