/* Workqueue semantics: dedup, processing set, delayed adds, backoff, workers, shutdown. */
#include <pthread.h>
#include <stdlib.h>

#include "common/base/timeutil.h"
#include "common/kube/workqueue.h"
#include "tests/unit/harness.h"

TEST(kube_wq_dedup_and_fifo)
{
	struct kube_wq *q;
	char *k;

	ASSERT_OK(kube_wq_new(&(struct kube_wq_opts){.name = "t1"}, &q));
	ASSERT_OK(kube_wq_add(q, "a"));
	ASSERT_OK(kube_wq_add(q, "b"));
	ASSERT_OK(kube_wq_add(q, "a"));
	ASSERT_EQ(kube_wq_len(q), 2);
	ASSERT_OK(kube_wq_get(q, &k));
	ASSERT_STREQ(k, "a");
	free(k);
	ASSERT_OK(kube_wq_get(q, &k));
	ASSERT_STREQ(k, "b");
	free(k);
	ASSERT_ERR(kube_wq_get_timeout(q, 10 * NSEC_PER_MSEC, &k), ETIMEDOUT);
	kube_wq_free(q);
}

TEST(kube_wq_processing_key_not_handed_out_twice)
{
	struct kube_wq *q;
	char *k, *k2;

	ASSERT_OK(kube_wq_new(NULL, &q));
	ASSERT_OK(kube_wq_add(q, "x"));
	ASSERT_OK(kube_wq_get(q, &k));
	/* added again while processing: held back until done */
	ASSERT_OK(kube_wq_add(q, "x"));
	ASSERT_OK(kube_wq_add(q, "x"));
	ASSERT_EQ(kube_wq_len(q), 0);
	ASSERT_ERR(kube_wq_get_timeout(q, 20 * NSEC_PER_MSEC, &k2), ETIMEDOUT);
	kube_wq_done(q, k);
	ASSERT_EQ(kube_wq_len(q), 1);
	ASSERT_OK(kube_wq_get_timeout(q, 0, &k2));
	ASSERT_STREQ(k2, "x");
	kube_wq_done(q, k2);
	ASSERT_EQ(kube_wq_len(q), 0);
	free(k);
	free(k2);
	kube_wq_free(q);
}

TEST(kube_wq_add_after_orders_by_time_and_keeps_earliest)
{
	struct kube_wq *q;
	char *k;
	int64_t t0 = now_mono_ns();

	ASSERT_OK(kube_wq_new(NULL, &q));
	ASSERT_OK(kube_wq_add_after(q, "late", 80 * NSEC_PER_MSEC));
	ASSERT_OK(kube_wq_add_after(q, "early", 30 * NSEC_PER_MSEC));
	ASSERT_OK(kube_wq_add_after(q, "early", 500 * NSEC_PER_MSEC)); /* later: ignored */
	ASSERT_EQ(kube_wq_len(q), 0);
	ASSERT_OK(kube_wq_get(q, &k));
	ASSERT_STREQ(k, "early");
	ASSERT_GE(now_mono_ns() - t0, 30 * NSEC_PER_MSEC);
	ASSERT_LT(now_mono_ns() - t0, 300 * NSEC_PER_MSEC);
	kube_wq_done(q, k);
	free(k);
	ASSERT_OK(kube_wq_get(q, &k));
	ASSERT_STREQ(k, "late");
	ASSERT_GE(now_mono_ns() - t0, 80 * NSEC_PER_MSEC);
	free(k);
	/* a non-positive delay is a plain add */
	ASSERT_OK(kube_wq_add_after(q, "now", 0));
	ASSERT_EQ(kube_wq_len(q), 1);
	kube_wq_free(q);
}

TEST(kube_wq_exponential_backoff)
{
	struct kube_wq *q;

	/* no overall bucket, to see the per-key delays alone */
	ASSERT_OK(kube_wq_new(&(struct kube_wq_opts){.qps = -1}, &q));
	ASSERT_EQ(kube_wq_when(q, "k"), 5 * NSEC_PER_MSEC);
	ASSERT_EQ(kube_wq_when(q, "k"), 10 * NSEC_PER_MSEC);
	ASSERT_EQ(kube_wq_when(q, "k"), 20 * NSEC_PER_MSEC);
	ASSERT_EQ(kube_wq_num_requeues(q, "k"), 3);
	ASSERT_EQ(kube_wq_when(q, "other"), 5 * NSEC_PER_MSEC);
	for (int i = 0; i < 40; i++)
		kube_wq_when(q, "k");
	ASSERT_EQ(kube_wq_when(q, "k"), 1000 * NSEC_PER_SEC);
	kube_wq_forget(q, "k");
	ASSERT_EQ(kube_wq_num_requeues(q, "k"), 0);
	ASSERT_EQ(kube_wq_when(q, "k"), 5 * NSEC_PER_MSEC);
	kube_wq_free(q);

	/* the overall bucket: past the burst, delays grow by 1/qps */
	ASSERT_OK(
	    kube_wq_new(&(struct kube_wq_opts){.qps = 10, .burst = 2, .base_delay_ns = 1}, &q));
	ASSERT_LT(kube_wq_when(q, "a"), 1000);
	ASSERT_LT(kube_wq_when(q, "b"), 1000);
	int64_t d = kube_wq_when(q, "c");
	ASSERT_GT(d, 90 * NSEC_PER_MSEC);
	ASSERT_LE(d, 100 * NSEC_PER_MSEC);
	kube_wq_free(q);
}

TEST(kube_wq_caps_and_shutdown)
{
	struct kube_wq *q;
	char *k;

	ASSERT_OK(kube_wq_new(&(struct kube_wq_opts){.max_keys = 2}, &q));
	ASSERT_OK(kube_wq_add(q, "a"));
	ASSERT_OK(kube_wq_add_after(q, "b", NSEC_PER_SEC));
	ASSERT_ERR(kube_wq_add(q, "c"), ENOSPC);
	ASSERT_OK(kube_wq_add(q, "a")); /* already queued: fine */
	kube_wq_shutdown(q, false);
	ASSERT_TRUE(kube_wq_shutting_down(q));
	ASSERT_ERR(kube_wq_add(q, "d"), ESHUTDOWN);
	ASSERT_ERR(kube_wq_get(q, &k), ESHUTDOWN);
	kube_wq_free(q);

	/* drain: queued keys are still handed out */
	ASSERT_OK(kube_wq_new(NULL, &q));
	ASSERT_OK(kube_wq_add(q, "a"));
	kube_wq_shutdown(q, true);
	ASSERT_OK(kube_wq_get(q, &k));
	ASSERT_STREQ(k, "a");
	kube_wq_done(q, k);
	free(k);
	ASSERT_ERR(kube_wq_get(q, &k), ESHUTDOWN);
	kube_wq_free(q);
}

/* Workers: keys are never reconciled twice at once, failures are retried, all are done. */
struct wstate {
	pthread_mutex_t lock;
	int active[16];
	int done[16];
	int fails_left[16];
	int overlap;
	int calls;
};

static int reconcile(void *ud, const char *key, int64_t *after)
{
	struct wstate *s = ud;
	int i = (int)(strtol(key + 1, NULL, 10) % 16), r = 0;

	pthread_mutex_lock(&s->lock);
	if (s->active[i]++)
		s->overlap++;
	s->calls++;
	pthread_mutex_unlock(&s->lock);
	sleep_ns(200 * NSEC_PER_USEC);
	pthread_mutex_lock(&s->lock);
	s->active[i]--;
	if (s->fails_left[i] > 0) {
		s->fails_left[i]--;
		r = -EAGAIN;
	} else
		s->done[i]++;
	pthread_mutex_unlock(&s->lock);
	return r;
}

TEST(kube_wq_workers_never_overlap_a_key)
{
	struct wstate s = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct kube_wq *q;
	char key[16];

	for (int i = 0; i < 16; i++)
		s.fails_left[i] = i % 3;
	ASSERT_OK(kube_wq_new(&(struct kube_wq_opts){.base_delay_ns = NSEC_PER_MSEC}, &q));
	ASSERT_OK(kube_wq_run(q, 4, reconcile, &s));
	for (int round = 0; round < 50; round++)
		for (int i = 0; i < 16; i++) {
			snprintf(key, sizeof(key), "k%d", i);
			ASSERT_OK(kube_wq_add(q, key));
		}
	/* wait until every key succeeded at least once and the queue is idle */
	int64_t end = now_mono_ns() + 5 * NSEC_PER_SEC;
	for (;;) {
		bool all = true;
		pthread_mutex_lock(&s.lock);
		for (int i = 0; i < 16; i++)
			all &= s.done[i] > 0 && s.active[i] == 0;
		pthread_mutex_unlock(&s.lock);
		if ((all && kube_wq_len(q) == 0) || now_mono_ns() > end)
			break;
		sleep_ns(5 * NSEC_PER_MSEC);
	}
	kube_wq_stop(q);
	ASSERT_EQ(s.overlap, 0);
	for (int i = 0; i < 16; i++)
		ASSERT_GT(s.done[i], 0);
	/* 800 adds were deduplicated into far fewer reconciles */
	ASSERT_LT(s.calls, 800);
	kube_wq_free(q);
}

struct periodic {
	pthread_mutex_t lock;
	int calls;
	int64_t at[8];
};

/* Fails every time, asking to come back after 100 ms (a periodic loop). */
static int failing_periodic(void *ud, const char *key, int64_t *requeue_after_ns)
{
	struct periodic *p = ud;
	(void)key;
	pthread_mutex_lock(&p->lock);
	if (p->calls < 8)
		p->at[p->calls] = now_mono_ns();
	p->calls++;
	pthread_mutex_unlock(&p->lock);
	*requeue_after_ns = 100 * NSEC_PER_MSEC;
	return -EAGAIN;
}

/* A failing periodic key backs off, but never waits longer than its period: with a 2 s base
 * delay (doubling), the retries would wait 2 s, 4 s, 8 s...; they come every 100 ms. The bounds
 * are far apart (100 ms to 1 s against 2 s and more) and the test waits for the calls rather
 * than for a fixed time, so that a loaded machine cannot fail it. */
TEST(kube_wq_failing_periodic_key_keeps_its_period)
{
	struct periodic p = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct kube_wq *q;
	int64_t deadline = now_mono_ns() + 10 * NSEC_PER_SEC;
	int calls = 0;

	ASSERT_OK(kube_wq_new(&(struct kube_wq_opts){.base_delay_ns = 2 * NSEC_PER_SEC}, &q));
	ASSERT_OK(kube_wq_run(q, 1, failing_periodic, &p));
	ASSERT_OK(kube_wq_add(q, "monitor"));
	while (calls < 5 && now_mono_ns() < deadline) {
		sleep_ns(10 * NSEC_PER_MSEC);
		pthread_mutex_lock(&p.lock);
		calls = p.calls;
		pthread_mutex_unlock(&p.lock);
	}
	kube_wq_stop(q);
	ASSERT_GE(p.calls, 5);
	for (int i = 1; i < 5; i++) {
		int64_t gap = p.at[i] - p.at[i - 1];
		ASSERT_GE(gap, 100 * NSEC_PER_MSEC);
		ASSERT_LT(gap, 1 * NSEC_PER_SEC);
	}
	kube_wq_free(q);
}
