/* A rate-limited work queue, as client-go's workqueue: a FIFO of keys with a dirty set (a key
 * queued twice is there once) and a processing set (a key being worked on is not handed out
 * again until kube_wq_done; if it was added meanwhile it is queued again then). Delayed adds
 * (add_after) wait in a heap. add_rate_limited delays a key by client-go's default controller
 * rate limiter: the larger of a per-key exponential backoff (5 ms doubling up to 1000 s) and an
 * overall token bucket (10 qps, burst 100); forget resets the key's backoff.
 *
 *   static int reconcile(void *ud, const char *key, int64_t *requeue_after_ns) { ... }
 *   kube_wq_new(&(struct kube_wq_opts){ .name = "node" }, &q);
 *   kube_wq_run(q, 2, reconcile, ctl);   // 2 workers: get, reconcile, forget/retry, done
 *   ...                                  // informer handlers call kube_wq_add(q, key)
 *   kube_wq_stop(q);                     // no more work; waits for running reconciles
 *
 * A reconcile returning < 0 is retried with add_rate_limited's delay, or after
 * *requeue_after_ns when that is set and shorter (a periodic loop never waits longer than its
 * period, even while it fails); >= 0 forgets the key's failures, and a *requeue_after_ns > 0
 * adds it again after that long.
 *
 * Metrics, with the queue's name as label "name": workqueue_depth, workqueue_adds_total,
 * workqueue_retries_total, workqueue_queue_duration_seconds, workqueue_work_duration_seconds. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KUBE_WQ_MAX_KEYS 1000000
#define KUBE_WQ_MAX_WORKERS 64

struct kube_wq_opts {
	const char *name;      /* metrics label and logs */
	int64_t base_delay_ns; /* 0: 5 ms */
	int64_t max_delay_ns;  /* 0: 1000 s */
	double qps;	       /* overall bucket; 0: 10; negative: none */
	int burst;	       /* 0: 100 */
	size_t max_keys;       /* queued + waiting keys; 0: KUBE_WQ_MAX_KEYS */
};

struct kube_wq;

typedef int (*kube_reconcile_fn)(void *ud, const char *key, int64_t *requeue_after_ns);

int kube_wq_new(const struct kube_wq_opts *o, struct kube_wq **ret);
/* Stops the workers if any, then frees. */
void kube_wq_free(struct kube_wq *q);

/* -ESHUTDOWN once shut down; -ENOSPC when max_keys keys are queued or waiting. */
int kube_wq_add(struct kube_wq *q, const char *key);
int kube_wq_add_after(struct kube_wq *q, const char *key, int64_t delay_ns);
int kube_wq_add_rate_limited(struct kube_wq *q, const char *key);
void kube_wq_forget(struct kube_wq *q, const char *key);
unsigned kube_wq_num_requeues(struct kube_wq *q, const char *key);
/* The delay add_rate_limited would use now for key (and counts it as a failure). */
int64_t kube_wq_when(struct kube_wq *q, const char *key);

/* Blocks until a key is ready (the caller frees it) or the queue is shut down: -ESHUTDOWN. */
int kube_wq_get(struct kube_wq *q, char **ret_key);
int kube_wq_get_timeout(struct kube_wq *q, int64_t timeout_ns, char **ret_key); /* -ETIMEDOUT */
void kube_wq_done(struct kube_wq *q, const char *key);
size_t kube_wq_len(struct kube_wq *q);
/* No more adds; kube_wq_get returns -ESHUTDOWN at once (drain: only once the queue is empty
 * and nothing is being processed; delayed keys are dropped). */
void kube_wq_shutdown(struct kube_wq *q, bool drain);
bool kube_wq_shutting_down(struct kube_wq *q);

/* N worker threads calling fn for each key. */
int kube_wq_run(struct kube_wq *q, int workers, kube_reconcile_fn fn, void *ud);
/* Shuts the queue down (no drain) and waits for the workers. */
void kube_wq_stop(struct kube_wq *q);
