/* client-go's EventCorrelator: spam filter, aggregation of similar events, counting of repeats
 * (see events.h). Three bounded LRU caches. */
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

struct lru_node {
	struct lru_node *prev, *next;
	char *key;
	void *val;
};

struct lru {
	struct kmap map; /* key -> struct lru_node * */
	struct lru_node head;
	size_t cap;
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
};

static void lru_init(struct lru *l, size_t cap, void (*free_val)(void *))
{
	l->head.prev = l->head.next = &l->head;
	l->cap = cap;
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

static void lru_drop(struct lru *l, struct lru_node *n)
{
	lru_unlink(n);
	kmap_remove(&l->map, n->key);
	l->free_val(n->val);
	free(n->key);
	free(n);
}

static void *lru_get(struct lru *l, const char *key)
{
	struct lru_node *n = kmap_get(&l->map, key);
	if (!n)
		return NULL;
	lru_unlink(n);
	lru_push_front(l, n);
	return n->val;
}

/* Stores val (taken, freed on failure) under key, evicting the least recently used entry. */
static int lru_put(struct lru *l, const char *key, void *val)
{
	struct lru_node *n = kmap_get(&l->map, key);

	if (n) {
		l->free_val(n->val);
		n->val = val;
		lru_unlink(n);
		lru_push_front(l, n);
		return 0;
	}
	if (!(n = calloc(1, sizeof(*n))) || !(n->key = strdup(key)) ||
	    kmap_put(&l->map, key, n, NULL) < 0) {
		if (n)
			free(n->key);
		free(n);
		l->free_val(val);
		return -ENOMEM;
	}
	n->val = val;
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
	lru_init(&c->spam, cache_size, free);
	lru_init(&c->agg, cache_size, free_agg);
	lru_init(&c->log, cache_size, free_log);
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

static bool spam_allows(struct kube_correlator *c, const char *key, int64_t now)
{
	struct spam_rec *sp = lru_get(&c->spam, key);

	if (!sp) {
		if (!(sp = malloc(sizeof(*sp))))
			return true;
		*sp = (struct spam_rec){SPAM_BURST, now};
		if (lru_put(&c->spam, key, sp) < 0)
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
static bool aggregate(struct kube_correlator *c, const char *key, const char *message, int64_t now)
{
	struct agg_rec *a = lru_get(&c->agg, key);

	if (!a || now - a->last_ns > WINDOW_NS) {
		if (!(a = calloc(1, sizeof(*a))) || lru_put(&c->agg, key, a) < 0)
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
	_cleanup_buf_ struct buf key = BUF_INIT(0);
	struct log_rec *g;
	char *name;

	if (make_key(ev, 0, &key) < 0 || !spam_allows(c, key.data, now))
		return KUBE_EV_DROP;
	buf_reset(&key);
	if (make_key(ev, 1, &key) < 0)
		return KUBE_EV_DROP;
	if (aggregate(c, key.data, s(ev->message), now)) {
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
	g = lru_get(&c->log, key.data);
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
		lru_put(&c->log, key.data, g);
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
