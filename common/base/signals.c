#include "common/base/signals.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/base/timeutil.h"

static atomic_bool stopping;
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cond;
static pthread_once_t stop_once = PTHREAD_ONCE_INIT;
static int efd = -1;

static void stop_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&stop_cond, &a);
	pthread_condattr_destroy(&a);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

void stop_request(void)
{
	pthread_once(&stop_once, stop_init);
	pthread_mutex_lock(&stop_lock);
	atomic_store(&stopping, true);
	pthread_cond_broadcast(&stop_cond);
	pthread_mutex_unlock(&stop_lock);
	if (efd >= 0) {
		uint64_t one = 1;
		ssize_t w = write(efd, &one, sizeof(one));
		(void)w;
	}
}

bool stop_requested(void)
{
	return atomic_load(&stopping);
}

void stop_reset(void)
{
	pthread_once(&stop_once, stop_init);
	pthread_mutex_lock(&stop_lock);
	atomic_store(&stopping, false);
	if (efd >= 0) {
		uint64_t v;
		ssize_t r = read(efd, &v, sizeof(v));
		(void)r;
	}
	pthread_mutex_unlock(&stop_lock);
}

int stop_fd(void)
{
	pthread_once(&stop_once, stop_init);
	return efd;
}

bool stop_wait(int64_t timeout_ns)
{
	pthread_once(&stop_once, stop_init);
	pthread_mutex_lock(&stop_lock);
	if (timeout_ns < 0) {
		while (!atomic_load(&stopping))
			pthread_cond_wait(&stop_cond, &stop_lock);
	} else {
		struct timespec ts;
		int64_t deadline = now_mono_ns() + timeout_ns;
		ts.tv_sec = deadline / NSEC_PER_SEC;
		ts.tv_nsec = deadline % NSEC_PER_SEC;
		while (!atomic_load(&stopping))
			if (pthread_cond_timedwait(&stop_cond, &stop_lock, &ts) == ETIMEDOUT)
				break;
	}
	bool s = atomic_load(&stopping);
	pthread_mutex_unlock(&stop_lock);
	return s;
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

	pthread_once(&stop_once, stop_init);
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
