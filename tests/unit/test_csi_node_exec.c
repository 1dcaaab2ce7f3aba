/* Unit tests: running external programs for csi-node (argument vector, timeout, cancellation,
 * output). */
#include <signal.h>
#include <unistd.h>

#include <pthread.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/timeutil.h"
#include "modules/csi-node/csi_node_exec.h"
#include "tests/unit/harness.h"

TEST(csi_node_exec_status_and_output)
{
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	const char *ok[] = { "sh", "-c", "echo out; echo err >&2; exit 3", NULL };

	ASSERT_EQ(csi_exec(ok, 0, NULL, &out), 3);
	ASSERT_CONTAINS(out.data, "out\n");
	ASSERT_CONTAINS(out.data, "err\n");
	char msg[256];
	csi_exec_describe(ok, 3, &out, msg, sizeof(msg));
	ASSERT_STREQ(msg, "sh exited with status 3: out err");

	/* arguments are passed as they are: no shell sees them */
	buf_reset(&out);
	const char *lit[] = { "echo", "$(id) ; rm -rf /", NULL };
	ASSERT_EQ(csi_exec(lit, 0, NULL, &out), 0);
	ASSERT_STREQ(out.data, "$(id) ; rm -rf /\n");

	/* a clean environment and no inherited stdin */
	buf_reset(&out);
	const char *env[] = { "sh", "-c", "echo \"$LC_ALL:$HOME\"; cat", NULL };
	ASSERT_EQ(csi_exec(env, 0, NULL, &out), 0);
	ASSERT_STREQ(out.data, "C:\n");
}

TEST(csi_node_exec_not_found)
{
	const char *argv[] = { "no-such-program-here", NULL };
	char path[256], msg[128];

	ASSERT_ERR(csi_exec(argv, 0, NULL, NULL), ENOENT);
	ASSERT_ERR(csi_exec_find("no-such-program-here", path, sizeof(path)), ENOENT);
	ASSERT_ERR(csi_exec_find("relative/sh", path, sizeof(path)), ENOENT);
	ASSERT_OK(csi_exec_find("sh", path, sizeof(path)));
	ASSERT_EQ(path[0], '/');
	csi_exec_describe(argv, -ENOENT, NULL, msg, sizeof(msg));
	ASSERT_STREQ(msg, "no-such-program-here is not installed");
	const char *none[] = { NULL };
	ASSERT_ERR(csi_exec(none, 0, NULL, NULL), EINVAL);
}

TEST(csi_node_exec_timeout_kills_group)
{
	/* the child and its own child must both be gone after the timeout */
	const char *argv[] = { "sh", "-c", "sleep 30 & sleep 30; echo never", NULL };
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	int64_t t0 = now_mono_ns();

	ASSERT_ERR(csi_exec(argv, 200 * NSEC_PER_MSEC, NULL, &out), ETIMEDOUT);
	ASSERT_LT(now_mono_ns() - t0, 5 * NSEC_PER_SEC);
	ASSERT_NOT_CONTAINS(out.data ? out.data : "", "never");
}

TEST(csi_node_exec_output_capped)
{
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	const char *argv[] = {"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo; echo tail",
			      NULL};

	ASSERT_EQ(csi_exec(argv, 0, NULL, &out), 0);
	ASSERT_EQ(out.len, CSI_EXEC_MAX_OUTPUT);
}

TEST(csi_node_exec_signal)
{
	const char *argv[] = { "sh", "-c", "kill -9 $$", NULL };

	ASSERT_ERR(csi_exec(argv, 0, NULL, NULL), EINTR);
}

static void *cancel_soon(void *arg)
{
	sleep_ns(100 * NSEC_PER_MSEC);
	cancel_cancel(arg);
	return NULL;
}

TEST(csi_node_exec_cancelled)
{
	/* a cancelled token stops the program at once (SIGTERM), its own child included */
	const char *argv[] = { "sh", "-c", "sleep 30 & sleep 30; echo never", NULL };
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	struct cancel *ct;
	pthread_t th;
	int64_t t0 = now_mono_ns();
	char msg[256];

	ASSERT_OK(cancel_new(NULL, &ct));
	ASSERT_EQ(pthread_create(&th, NULL, cancel_soon, ct), 0);
	ASSERT_ERR(csi_exec(argv, 0, ct, &out), ECANCELED);
	pthread_join(th, NULL);
	ASSERT_LT(now_mono_ns() - t0, CSI_EXEC_KILL_GRACE_NS);
	ASSERT_NOT_CONTAINS(out.data ? out.data : "", "never");
	csi_exec_describe(argv, -ECANCELED, &out, msg, sizeof(msg));
	ASSERT_STREQ(msg, "sh was stopped: the call was cancelled");
	/* an already cancelled token starts nothing */
	const char *touch[] = { "sh", "-c", "echo ran", NULL };
	buf_reset(&out);
	ASSERT_ERR(csi_exec(touch, 0, ct, &out), ECANCELED);
	ASSERT_EQ(out.len, 0);
	cancel_free(ct);
}

TEST(csi_node_exec_cancel_kills_what_ignores_sigterm)
{
	const char *argv[] = { "sh", "-c", "trap '' TERM; sleep 30; echo never", NULL };
	struct cancel *ct;
	pthread_t th;
	int64_t t0 = now_mono_ns();

	ASSERT_OK(cancel_new(NULL, &ct));
	ASSERT_EQ(pthread_create(&th, NULL, cancel_soon, ct), 0);
	ASSERT_ERR(csi_exec(argv, 0, ct, NULL), ECANCELED);
	pthread_join(th, NULL);
	int64_t took = now_mono_ns() - t0;
	ASSERT_GE(took, CSI_EXEC_KILL_GRACE_NS); /* it had its grace period */
	ASSERT_LT(took, CSI_EXEC_KILL_GRACE_NS + 3 * NSEC_PER_SEC);
	cancel_free(ct);
}
