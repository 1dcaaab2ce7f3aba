/* The bounded per-key lock table. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "common/base/keylock.h"
#include "tests/unit/harness.h"

TEST(keylock_try_release_and_cap)
{
	struct keylock *kl;
	char big[KEYLOCK_KEY_MAX + 2];

	ASSERT_ERR(keylock_new(0, &kl), EINVAL);
	ASSERT_OK(keylock_new(3, &kl));
	ASSERT_OK(keylock_try(kl, "a"));
	ASSERT_ERR(keylock_try(kl, "a"), EBUSY); /* held: turned away, not blocked */
	ASSERT_OK(keylock_try(kl, "b"));
	ASSERT_OK(keylock_try(kl, "c"));
	ASSERT_ERR(keylock_try(kl, "d"), ENOSPC); /* the cap */
	ASSERT_ERR(keylock_try(kl, "a"), EBUSY);  /* a busy key is still busy when full */
	ASSERT_EQ(keylock_count(kl), 3);
	keylock_release(kl, "b");
	keylock_release(kl, "not-held"); /* ignored */
	ASSERT_EQ(keylock_count(kl), 2);
	ASSERT_OK(keylock_try(kl, "d"));
	keylock_release(kl, "a");
	ASSERT_OK(keylock_try(kl, "a"));
	ASSERT_ERR(keylock_try(kl, ""), EINVAL);
	ASSERT_ERR(keylock_try(kl, NULL), EINVAL);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ASSERT_ERR(keylock_try(kl, big), EINVAL);
	keylock_free(kl); /* with keys still held */
	keylock_free(NULL);
}

struct race {
	struct keylock *kl;
	atomic_int held, max_held, got;
};

static void *racer(void *arg)
{
	struct race *r = arg;

	for (int i = 0; i < 2000; i++) {
		if (keylock_try(r->kl, "same") < 0)
			continue;
		int h = atomic_fetch_add(&r->held, 1) + 1;
		int m = atomic_load(&r->max_held);
		while (h > m && !atomic_compare_exchange_weak(&r->max_held, &m, h))
			;
		atomic_fetch_add(&r->got, 1);
		atomic_fetch_sub(&r->held, 1);
		keylock_release(r->kl, "same");
	}
	return NULL;
}

TEST(keylock_one_holder_at_a_time)
{
	struct race r = {0};
	pthread_t th[4];

	ASSERT_OK(keylock_new(16, &r.kl));
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(pthread_create(&th[i], NULL, racer, &r), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	ASSERT_EQ(atomic_load(&r.max_held), 1);
	ASSERT_GT(atomic_load(&r.got), 0);
	ASSERT_EQ(keylock_count(r.kl), 0);
	keylock_free(r.kl);
}
