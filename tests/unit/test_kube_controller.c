/* The controller contract without a cluster: controllers_run with no informer and no election
 * runs the table's workers, its periodic keys and start hooks, drops keys queued before a
 * controller runs, leaves disabled controllers out, and stops on its cancellation token. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common/base/cancel.h"
#include "common/base/timeutil.h"
#include "common/kube/controller.h"
#include "tests/unit/harness.h"

struct probe {
	atomic_int passes, early, later, from_start, starts, bad_requeue;
	int start_ret;
};

static int probe_reconcile(void *ud, const char *key, int64_t *requeue_after_ns)
{
	struct probe *p = ud;

	if (strcmp(key, "pass") == 0) {
		if (*requeue_after_ns != 20 * NSEC_PER_MSEC)
			atomic_fetch_add(&p->bad_requeue, 1);
		atomic_fetch_add(&p->passes, 1);
	} else if (strcmp(key, "early") == 0) {
		atomic_fetch_add(&p->early, 1);
	} else if (strcmp(key, "later") == 0) {
		atomic_fetch_add(&p->later, 1);
	} else if (strcmp(key, "from-start") == 0) {
		if (*requeue_after_ns != 0)
			atomic_fetch_add(&p->bad_requeue, 1);
		atomic_fetch_add(&p->from_start, 1);
	}
	return 0;
}

static int probe_start(struct controller *c)
{
	struct probe *p = c->ud;

	atomic_fetch_add(&p->starts, 1);
	if (p->start_ret < 0)
		return p->start_ret;
	return controller_add(c, "from-start");
}

struct runner {
	pthread_t t;
	struct controllers *cs;
	int r;
};

static void *run_main(void *arg)
{
	struct runner *rn = arg;
	rn->r = controllers_run(rn->cs);
	return NULL;
}

/* Waits up to 5 s for *v to reach at least want. */
static bool wait_for(atomic_int *v, int want)
{
	for (int i = 0; i < 500 && atomic_load(v) < want; i++)
		sleep_ns(10 * NSEC_PER_MSEC);
	return atomic_load(v) >= want;
}

TEST(kube_controllers_run_periodic_keys_hooks_and_stop)
{
	struct probe p = {0}, off = {0};
	struct cancel *ct;
	struct controller ctls[] = {
	    {.name = "t-ctl-periodic",
	     .reconcile = probe_reconcile,
	     .ud = &p,
	     .workers = 2,
	     .start = probe_start,
	     .resync_key = "pass",
	     .resync_ns = 20 * NSEC_PER_MSEC,
	     .queue = {.base_delay_ns = NSEC_PER_MSEC}},
	    {.name = "t-ctl-disabled",
	     .reconcile = probe_reconcile,
	     .ud = &off,
	     .start = probe_start,
	     .resync_key = "pass",
	     .resync_ns = 20 * NSEC_PER_MSEC,
	     .disabled = true},
	};

	ASSERT_OK(cancel_new(NULL, &ct));
	struct controllers cs = {.ctls = ctls, .n = 2, .cancel = ct};
	struct runner rn = {.cs = &cs};

	/* before the run: dropped */
	ASSERT_FALSE(controller_running(&ctls[0]));
	ASSERT_OK(controller_add(&ctls[0], "early"));
	ASSERT_EQ(pthread_create(&rn.t, NULL, run_main, &rn), 0);
	ASSERT_TRUE(wait_for(&p.passes, 3)); /* the periodic key comes back by itself */
	ASSERT_TRUE(controller_running(&ctls[0]));
	ASSERT_TRUE(controllers_may_act(&cs));
	ASSERT_OK(controller_add(&ctls[0], "later"));
	ASSERT_TRUE(wait_for(&p.later, 1));
	ASSERT_TRUE(wait_for(&p.from_start, 1));
	cancel_cancel(ct);
	ASSERT_EQ(pthread_join(rn.t, NULL), 0);
	ASSERT_OK(rn.r);
	ASSERT_FALSE(controllers_may_act(&cs));
	ASSERT_FALSE(controller_running(&ctls[0]));
	ASSERT_OK(controller_add(&ctls[0], "later")); /* after the stop: dropped again */
	ASSERT_EQ(atomic_load(&p.early), 0);
	ASSERT_EQ(atomic_load(&p.starts), 1);
	ASSERT_EQ(atomic_load(&p.bad_requeue), 0);
	ASSERT_EQ(atomic_load(&off.starts), 0); /* a disabled controller does not run */
	ASSERT_EQ(atomic_load(&off.passes), 0);
	ASSERT_FALSE(controllers_election_ended(&cs)); /* no election */
	cancel_free(ct);
}

TEST(kube_controllers_run_fails_when_a_start_hook_fails)
{
	struct probe p = {.start_ret = -EIO};
	struct cancel *ct;
	struct controller c = {.name = "t-ctl-failing", .reconcile = probe_reconcile, .ud = &p,
			       .start = probe_start};

	ASSERT_OK(cancel_new(NULL, &ct));
	struct controllers cs = {.ctls = &c, .n = 1, .cancel = ct};
	/* returns at once, without waiting for the token */
	ASSERT_ERR(controllers_run(&cs), EIO);
	ASSERT_FALSE(controller_running(&c));
	ASSERT_EQ(atomic_load(&p.starts), 1);
	cancel_free(ct);
}

TEST(kube_controllers_run_returns_at_once_when_cancelled_before)
{
	struct probe p = {0};
	struct cancel *ct;
	struct controller c = {.name = "t-ctl-cancelled", .reconcile = probe_reconcile, .ud = &p,
			       .start = probe_start, .resync_key = "pass", .resync_ns = NSEC_PER_SEC};

	ASSERT_OK(cancel_new(NULL, &ct));
	cancel_cancel(ct);
	struct controllers cs = {.ctls = &c, .n = 1, .cancel = ct};
	ASSERT_OK(controllers_run(&cs));
	ASSERT_FALSE(controller_running(&c));
	ASSERT_EQ(atomic_load(&p.starts), 0); /* nothing started */
	cancel_free(ct);
}
