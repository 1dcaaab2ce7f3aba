/* The rate-limited work queue (see workqueue.h). One mutex guards everything; getters wait on a
 * condition variable, with a timeout when a delayed key is due. */
#include "common/kube/workqueue.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/kmap.h"
#include "common/metrics/metrics.h"

struct qnode {
	struct qnode *next;
	char key[];
};

struct delayed {
	int64_t when;
	char *key;
};

struct kube_wq {
	char *name;
	int64_t base_ns, max_ns;
	double qps, burst, tokens;
	int64_t bucket_last;
	size_t max_keys;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct qnode *head, *tail;
	size_t len;
	struct kmap dirty;	/* key -> time added (ns) */
	struct kmap processing; /* key -> time started (ns) */
	struct kmap waiting;	/* key -> when (ns), the earliest delayed add */
	struct kmap failures;	/* key -> count */
	struct delayed *heap;
	size_t n_heap, cap_heap;
	bool shutting_down, drain;

	kube_reconcile_fn fn;
	void *ud;
	pthread_t workers[KUBE_WQ_MAX_WORKERS];
	int n_workers;
};

static struct metric *m_depth, *m_adds, *m_retries, *m_queue_dur, *m_work_dur;

static void metrics_once(void)
{
	static const double b[] = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10};
	const char *const labels[] = {"name", NULL};
	m_depth = metric_gauge("workqueue_depth", "Current depth of workqueue", labels);
	m_adds = metric_counter("workqueue_adds_total", "Total number of adds handled by workqueue",
				labels);
	m_retries = metric_counter("workqueue_retries_total",
				   "Total number of retries handled by workqueue", labels);
	m_queue_dur =
	    metric_histogram("workqueue_queue_duration_seconds",
			     "How long in seconds an item stays in workqueue before being "
			     "requested.",
			     labels, b, ARRAY_SIZE(b));
	m_work_dur =
	    metric_histogram("workqueue_work_duration_seconds",
			     "How long in seconds processing an item from workqueue takes.", labels,
			     b, ARRAY_SIZE(b));
}

int kube_wq_new(const struct kube_wq_opts *o, struct kube_wq **ret)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct kube_wq_opts def = {0};
	pthread_condattr_t ca;
	struct kube_wq *q;

	if (!o)
		o = &def;
	pthread_once(&once, metrics_once);
	if (!(q = calloc(1, sizeof(*q))))
		return -ENOMEM;
	if (!(q->name = strdup(o->name ? o->name : "workqueue"))) {
		free(q);
		return -ENOMEM;
	}
	q->base_ns = o->base_delay_ns > 0 ? o->base_delay_ns : 5 * NSEC_PER_MSEC;
	q->max_ns = o->max_delay_ns > 0 ? o->max_delay_ns : 1000 * NSEC_PER_SEC;
	q->qps = o->qps == 0 ? 10 : o->qps;
	q->burst = o->burst > 0 ? o->burst : 100;
	q->tokens = q->burst;
	q->bucket_last = now_mono_ns();
	q->max_keys = o->max_keys ? o->max_keys : KUBE_WQ_MAX_KEYS;
	pthread_mutex_init(&q->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cond, &ca);
	pthread_condattr_destroy(&ca);
	*ret = q;
	return 0;
}

static void heap_clear(struct kube_wq *q)
{
	for (size_t i = 0; i < q->n_heap; i++)
		free(q->heap[i].key);
	free(q->heap);
	q->heap = NULL;
	q->n_heap = q->cap_heap = 0;
}

void kube_wq_free(struct kube_wq *q)
{
	if (!q)
		return;
	kube_wq_stop(q);
	while (q->head) {
		struct qnode *n = q->head;
		q->head = n->next;
		free(n);
	}
	heap_clear(q);
	kmap_clear(&q->dirty, NULL);
	kmap_clear(&q->processing, NULL);
	kmap_clear(&q->waiting, NULL);
	kmap_clear(&q->failures, NULL);
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->lock);
	free(q->name);
	free(q);
}

static int push_locked(struct kube_wq *q, const char *key)
{
	size_t len = strlen(key);
	struct qnode *n = malloc(sizeof(*n) + len + 1);

	if (!n)
		return -ENOMEM;
	memcpy(n->key, key, len + 1);
	n->next = NULL;
	if (q->tail)
		q->tail->next = n;
	else
		q->head = n;
	q->tail = n;
	q->len++;
	metric_set(m_depth, (double)q->len, q->name);
	pthread_cond_signal(&q->cond);
	return 0;
}

static int add_locked(struct kube_wq *q, const char *key)
{
	int r;

	if (q->shutting_down)
		return -ESHUTDOWN;
	if (kmap_find(&q->dirty, key))
		return 0;
	if (q->dirty.size + q->waiting.size >= q->max_keys)
		return -ENOSPC;
	if ((r = kmap_put(&q->dirty, key, (void *)(intptr_t)now_mono_ns(), NULL)) < 0)
		return r;
	metric_inc(m_adds, q->name);
	if (kmap_find(&q->processing, key))
		return 0; /* queued again by kube_wq_done */
	if ((r = push_locked(q, key)) < 0)
		kmap_remove(&q->dirty, key);
	return r;
}

int kube_wq_add(struct kube_wq *q, const char *key)
{
	pthread_mutex_lock(&q->lock);
	int r = add_locked(q, key);
	pthread_mutex_unlock(&q->lock);
	return r;
}

static void heap_up(struct delayed *h, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (h[p].when <= h[i].when)
			break;
		struct delayed t = h[p];
		h[p] = h[i];
		h[i] = t;
		i = p;
	}
}

static void heap_down(struct delayed *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < n && h[l].when < h[m].when)
			m = l;
		if (l + 1 < n && h[l + 1].when < h[m].when)
			m = l + 1;
		if (m == i)
			return;
		struct delayed t = h[m];
		h[m] = h[i];
		h[i] = t;
		i = m;
	}
}

int kube_wq_add_after(struct kube_wq *q, const char *key, int64_t delay_ns)
{
	int64_t when = now_mono_ns() + delay_ns;
	struct kmap_entry *e;
	int r = 0;

	if (delay_ns <= 0)
		return kube_wq_add(q, key);
	pthread_mutex_lock(&q->lock);
	if (q->shutting_down) {
		r = -ESHUTDOWN;
		goto out;
	}
	/* an earlier delayed add of the same key wins, as in client-go */
	if ((e = kmap_find(&q->waiting, key))) {
		if ((int64_t)(intptr_t)e->val <= when)
			goto out;
	} else if (q->dirty.size + q->waiting.size >= q->max_keys) {
		r = -ENOSPC;
		goto out;
	}
	if (q->n_heap == q->cap_heap) {
		size_t nc = q->cap_heap ? q->cap_heap * 2 : 16;
		struct delayed *h = realloc(q->heap, nc * sizeof(*h));
		if (!h) {
			r = -ENOMEM;
			goto out;
		}
		q->heap = h;
		q->cap_heap = nc;
	}
	char *k = strdup(key);
	if (!k || (r = kmap_put(&q->waiting, key, (void *)(intptr_t)when, NULL)) < 0) {
		free(k);
		r = -ENOMEM;
		goto out;
	}
	q->heap[q->n_heap] = (struct delayed){when, k};
	heap_up(q->heap, q->n_heap++);
	pthread_cond_broadcast(&q->cond); /* a getter may now have to wake earlier */
out:
	pthread_mutex_unlock(&q->lock);
	return r;
}

/* Moves due delayed keys into the queue; returns when the next one is due (INT64_MAX: none). */
static int64_t promote_locked(struct kube_wq *q)
{
	int64_t now = now_mono_ns();

	while (q->n_heap) {
		struct delayed d = q->heap[0];
		struct kmap_entry *e = kmap_find(&q->waiting, d.key);
		bool current = e && (int64_t)(intptr_t)e->val == d.when;
		if (current && d.when > now)
			return d.when;
		q->heap[0] = q->heap[--q->n_heap];
		heap_down(q->heap, q->n_heap, 0);
		if (current) {
			kmap_remove(&q->waiting, d.key);
			if (add_locked(q, d.key) < 0)
				log_v(2, "dropped a delayed key", KV_S("queue", q->name),
				      KV_S("key", d.key));
		}
		free(d.key);
	}
	return INT64_MAX;
}

int64_t kube_wq_when(struct kube_wq *q, const char *key)
{
	int64_t now = now_mono_ns(), d = q->base_ns, bucket = 0;
	uintptr_t n;

	pthread_mutex_lock(&q->lock);
	n = (uintptr_t)kmap_get(&q->failures, key);
	kmap_put(&q->failures, key, (void *)(n + 1), NULL);
	for (uintptr_t i = 0; i < n && d < q->max_ns; i++)
		d *= 2;
	if (d > q->max_ns)
		d = q->max_ns;
	if (q->qps > 0) {
		q->tokens += (double)(now - q->bucket_last) * q->qps / 1e9;
		if (q->tokens > q->burst)
			q->tokens = q->burst;
		q->bucket_last = now;
		q->tokens -= 1;
		if (q->tokens < 0)
			bucket = (int64_t)(-q->tokens / q->qps * 1e9);
	}
	pthread_mutex_unlock(&q->lock);
	return d > bucket ? d : bucket;
}

int kube_wq_add_rate_limited(struct kube_wq *q, const char *key)
{
	metric_inc(m_retries, q->name);
	return kube_wq_add_after(q, key, kube_wq_when(q, key));
}

void kube_wq_forget(struct kube_wq *q, const char *key)
{
	pthread_mutex_lock(&q->lock);
	kmap_remove(&q->failures, key);
	pthread_mutex_unlock(&q->lock);
}

unsigned kube_wq_num_requeues(struct kube_wq *q, const char *key)
{
	pthread_mutex_lock(&q->lock);
	unsigned n = (unsigned)(uintptr_t)kmap_get(&q->failures, key);
	pthread_mutex_unlock(&q->lock);
	return n;
}

static void wait_until(struct kube_wq *q, int64_t deadline)
{
	struct timespec ts;

	if (deadline == INT64_MAX) {
		pthread_cond_wait(&q->cond, &q->lock);
		return;
	}
	ts.tv_sec = deadline / NSEC_PER_SEC;
	ts.tv_nsec = deadline % NSEC_PER_SEC;
	pthread_cond_timedwait(&q->cond, &q->lock, &ts);
}

static bool finished_locked(struct kube_wq *q)
{
	return q->shutting_down && (!q->drain || (!q->head && q->processing.size == 0));
}

int kube_wq_get_timeout(struct kube_wq *q, int64_t timeout_ns, char **ret_key)
{
	int64_t deadline = timeout_ns < 0 ? INT64_MAX : now_mono_ns() + timeout_ns;
	struct qnode *n;
	int r;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		int64_t next = q->shutting_down ? INT64_MAX : promote_locked(q);
		if (finished_locked(q)) {
			pthread_mutex_unlock(&q->lock);
			return -ESHUTDOWN;
		}
		if (q->head)
			break;
		if (now_mono_ns() >= deadline) {
			pthread_mutex_unlock(&q->lock);
			return -ETIMEDOUT;
		}
		wait_until(q, next < deadline ? next : deadline);
	}
	n = q->head;
	q->head = n->next;
	if (!q->head)
		q->tail = NULL;
	q->len--;
	metric_set(m_depth, (double)q->len, q->name);
	int64_t added = (int64_t)(intptr_t)kmap_remove(&q->dirty, n->key);
	int64_t now = now_mono_ns();
	if (added)
		metric_observe(m_queue_dur, (double)(now - added) / 1e9, q->name);
	r = kmap_put(&q->processing, n->key, (void *)(intptr_t)now, NULL);
	pthread_mutex_unlock(&q->lock);
	if (r < 0) {
		free(n);
		return r;
	}
	/* the node's memory becomes the returned string */
	memmove(n, n->key, strlen(n->key) + 1);
	*ret_key = (char *)n;
	return 0;
}

int kube_wq_get(struct kube_wq *q, char **ret_key)
{
	return kube_wq_get_timeout(q, -1, ret_key);
}

void kube_wq_done(struct kube_wq *q, const char *key)
{
	pthread_mutex_lock(&q->lock);
	int64_t started = (int64_t)(intptr_t)kmap_remove(&q->processing, key);
	if (started)
		metric_observe(m_work_dur, (double)(now_mono_ns() - started) / 1e9, q->name);
	if (kmap_find(&q->dirty, key) && push_locked(q, key) < 0)
		kmap_remove(&q->dirty, key);
	if (q->shutting_down)
		pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

size_t kube_wq_len(struct kube_wq *q)
{
	pthread_mutex_lock(&q->lock);
	size_t n = q->len;
	pthread_mutex_unlock(&q->lock);
	return n;
}

void kube_wq_shutdown(struct kube_wq *q, bool drain)
{
	pthread_mutex_lock(&q->lock);
	if (!q->shutting_down) {
		q->shutting_down = true;
		q->drain = drain;
	}
	heap_clear(q);
	kmap_clear(&q->waiting, NULL);
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

bool kube_wq_shutting_down(struct kube_wq *q)
{
	pthread_mutex_lock(&q->lock);
	bool s = q->shutting_down;
	pthread_mutex_unlock(&q->lock);
	return s;
}

static void *worker_main(void *p)
{
	struct kube_wq *q = p;
	char *key;

	while (kube_wq_get(q, &key) == 0) {
		int64_t after = 0;
		int r = q->fn(q->ud, key, &after);
		if (r < 0) {
			/* backoff, but a periodic key never waits longer than its period */
			int64_t d = kube_wq_when(q, key);
			metric_inc(m_retries, q->name);
			kube_wq_add_after(q, key, after > 0 && after < d ? after : d);
		} else {
			kube_wq_forget(q, key);
			if (after > 0)
				kube_wq_add_after(q, key, after);
		}
		kube_wq_done(q, key);
		free(key);
	}
	return NULL;
}

int kube_wq_run(struct kube_wq *q, int workers, kube_reconcile_fn fn, void *ud)
{
	if (workers < 1 || workers > KUBE_WQ_MAX_WORKERS || q->n_workers)
		return -EINVAL;
	q->fn = fn;
	q->ud = ud;
	for (int i = 0; i < workers; i++) {
		int r = pthread_create(&q->workers[i], NULL, worker_main, q);
		if (r) {
			kube_wq_stop(q);
			return -r;
		}
		q->n_workers++;
	}
	return 0;
}

void kube_wq_stop(struct kube_wq *q)
{
	kube_wq_shutdown(q, false);
	for (int i = 0; i < q->n_workers; i++)
		pthread_join(q->workers[i], NULL);
	q->n_workers = 0;
}
