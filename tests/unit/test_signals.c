#include <pthread.h>
#include <unistd.h>

#include "common/base/cancel.h"
#include "common/base/signals.h"
#include "common/base/timeutil.h"
#include "tests/unit/harness.h"

static void *request_later(void *arg)
{
	sleep_ns(50 * NSEC_PER_MSEC);
	stop_request();
	return NULL;
}

TEST(signals_stop_wait_times_out_then_wakes)
{
	stop_reset();
	int64_t t0 = now_mono_ns();
	ASSERT_FALSE(stop_wait(30 * NSEC_PER_MSEC));
	ASSERT_GE(now_mono_ns() - t0, 30 * NSEC_PER_MSEC);
	pthread_t t;
	pthread_create(&t, NULL, request_later, NULL);
	t0 = now_mono_ns();
	ASSERT_TRUE(stop_wait(5 * NSEC_PER_SEC));
	ASSERT_LT(now_mono_ns() - t0, 2 * NSEC_PER_SEC);
	pthread_join(t, NULL);
	ASSERT_TRUE(stop_requested());
	uint64_t v = 0;
	ASSERT_EQ(read(stop_fd(), &v, sizeof(v)), (long)sizeof(v));
	ASSERT_EQ(v, 1);
	stop_reset();
	ASSERT_FALSE(stop_requested());
}

/* The stop_* names act on the process's token, and so on its children. */
TEST(signals_stop_is_the_root_token)
{
	struct cancel *child;

	stop_reset();
	ASSERT_OK(cancel_new(cancel_root(), &child));
	ASSERT_EQ(stop_fd(), cancel_fd(cancel_root()));
	ASSERT_FALSE(cancel_is_cancelled(child));
	stop_request();
	ASSERT_TRUE(cancel_is_cancelled(cancel_root()));
	ASSERT_TRUE(cancel_wait(child, 0));
	stop_reset(); /* the root only: a cancelled child stays cancelled */
	ASSERT_FALSE(stop_requested());
	ASSERT_TRUE(cancel_is_cancelled(child));
	cancel_free(child);
}
