/* Cancellation tokens: the tree, waiting, the descriptor. */
#include <poll.h>
#include <pthread.h>

#include "common/base/cancel.h"
#include "common/base/timeutil.h"
#include "tests/unit/harness.h"

TEST(cancel_tree)
{
	struct cancel *a, *b, *c, *other;

	ASSERT_OK(cancel_new(NULL, &a));
	ASSERT_OK(cancel_new(a, &b));
	ASSERT_OK(cancel_new(b, &c));
	ASSERT_OK(cancel_new(a, &other));
	ASSERT_FALSE(cancel_is_cancelled(a));
	cancel_cancel(b); /* b and c, not a nor b's sibling */
	ASSERT_TRUE(cancel_is_cancelled(b));
	ASSERT_TRUE(cancel_is_cancelled(c));
	ASSERT_FALSE(cancel_is_cancelled(a));
	ASSERT_FALSE(cancel_is_cancelled(other));
	cancel_cancel(a);
	ASSERT_TRUE(cancel_is_cancelled(other));
	/* a child made under a cancelled parent starts cancelled */
	struct cancel *late;
	ASSERT_OK(cancel_new(a, &late));
	ASSERT_TRUE(cancel_is_cancelled(late));
	cancel_free(b); /* c loses its parent, stays cancelled */
	ASSERT_TRUE(cancel_is_cancelled(c));
	cancel_free(c);
	cancel_free(late);
	cancel_free(other);
	cancel_free(a);
	ASSERT_FALSE(cancel_is_cancelled(NULL));
	cancel_cancel(NULL);
	cancel_free(NULL);
	ASSERT_EQ(cancel_fd(NULL), -1);
}

static void *cancel_later(void *arg)
{
	sleep_ns(50 * NSEC_PER_MSEC);
	cancel_cancel(arg);
	return NULL;
}

TEST(cancel_wait_and_fd)
{
	struct cancel *p, *k;
	pthread_t th;
	int64_t t0;

	ASSERT_OK(cancel_new(NULL, &p));
	ASSERT_OK(cancel_new(p, &k));
	t0 = now_mono_ns();
	ASSERT_FALSE(cancel_wait(k, 30 * NSEC_PER_MSEC)); /* times out */
	ASSERT_GE(now_mono_ns() - t0, 25 * NSEC_PER_MSEC);
	struct pollfd pfd = {.fd = cancel_fd(k), .events = POLLIN};
	ASSERT_EQ(poll(&pfd, 1, 0), 0);
	ASSERT_OK(-pthread_create(&th, NULL, cancel_later, p));
	t0 = now_mono_ns();
	ASSERT_TRUE(cancel_wait(k, 10 * NSEC_PER_SEC)); /* the parent's cancel wakes the child */
	ASSERT_LT(now_mono_ns() - t0, 2 * NSEC_PER_SEC);
	pthread_join(th, NULL);
	ASSERT_EQ(poll(&pfd, 1, 0), 1); /* readable, and stays so */
	ASSERT_EQ(poll(&pfd, 1, 0), 1);
	ASSERT_TRUE(cancel_wait(k, -1));
	cancel_reset(k);
	ASSERT_FALSE(cancel_is_cancelled(k));
	ASSERT_EQ(poll(&pfd, 1, 0), 0);
	ASSERT_FALSE(cancel_wait(NULL, NSEC_PER_MSEC));
	cancel_free(k);
	cancel_free(p);
}

/* A wait of 0 returns at once; a negative one has no limit (callers clamp a computed time left
 * to 0, never pass it negative). */
TEST(cancel_wait_zero_and_without_limit)
{
	struct cancel *p, *k[64];
	pthread_t th;
	int64_t t0;

	ASSERT_OK(cancel_new(NULL, &p));
	for (int i = 0; i < 64; i++)
		ASSERT_OK(cancel_new(p, &k[i]));
	t0 = now_mono_ns();
	ASSERT_FALSE(cancel_wait(k[0], 0));
	ASSERT_LT(now_mono_ns() - t0, 20 * NSEC_PER_MSEC);
	ASSERT_OK(-pthread_create(&th, NULL, cancel_later, p));
	t0 = now_mono_ns();
	ASSERT_TRUE(cancel_wait(k[63], -1));
	ASSERT_GE(now_mono_ns() - t0, 40 * NSEC_PER_MSEC);
	pthread_join(th, NULL);
	for (int i = 0; i < 64; i++) {
		ASSERT_TRUE(cancel_is_cancelled(k[i])); /* every child, at once */
		ASSERT_TRUE(cancel_wait(k[i], 0));
		cancel_free(k[i]);
	}
	cancel_free(p);
}
