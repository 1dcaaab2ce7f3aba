#include <pthread.h>
#include <unistd.h>

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
