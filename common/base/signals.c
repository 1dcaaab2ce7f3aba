#include "common/base/signals.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/base/cancel.h"
#include "common/base/log.h"

/* The stop is the process's cancellation token (cancel.h): these are its old names. */
void stop_request(void)
{
	cancel_cancel(cancel_root());
}

bool stop_requested(void)
{
	return cancel_is_cancelled(cancel_root());
}

void stop_reset(void)
{
	cancel_reset(cancel_root());
}

int stop_fd(void)
{
	return cancel_fd(cancel_root());
}

bool stop_wait(int64_t timeout_ns)
{
	return cancel_wait(cancel_root(), timeout_ns);
}

static void *signal_thread(void *arg)
{
	sigset_t *set = arg;
	int sig;

	for (;;) {
		if (sigwait(set, &sig) != 0)
			continue;
		if (stop_requested()) {
			log_warn("second signal, exiting at once", KV_I("signal", sig));
			_exit(1);
		}
		log_info("stop requested", KV_S("signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"));
		stop_request();
	}
	return NULL;
}

int signals_setup(void)
{
	static sigset_t set;
	pthread_t t;
	int r;

	if (!cancel_root())
		return -EMFILE;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if ((r = pthread_sigmask(SIG_BLOCK, &set, NULL)) != 0)
		return -r;
	if ((r = pthread_create(&t, NULL, signal_thread, &set)) != 0)
		return -r;
	pthread_detach(t);
	return 0;
}
