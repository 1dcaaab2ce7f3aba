/* Cancellation tokens (see cancel.h). One lock guards the tree: tokens are few and change
 * rarely, and a cancel walks the subtree under it. */
#include "common/base/cancel.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/base/timeutil.h"

struct cancel {
	atomic_bool cancelled;
	int efd;
	pthread_cond_t cond;
	struct cancel *parent;
	struct cancel *child, *next; /* first child; next sibling */
};

static pthread_mutex_t tree_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t root_once = PTHREAD_ONCE_INIT;
static struct cancel *root;

static int token_init(struct cancel *c)
{
	pthread_condattr_t a;

	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->efd < 0)
		return -errno;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &a);
	pthread_condattr_destroy(&a);
	return 0;
}

static void root_init(void)
{
	static struct cancel r;

	if (token_init(&r) == 0)
		root = &r;
}

struct cancel *cancel_root(void)
{
	pthread_once(&root_once, root_init);
	return root;
}

/* Marks c and its subtree; tree_lock held. */
static void cancel_locked(struct cancel *c)
{
	uint64_t one = 1;

	if (!atomic_exchange(&c->cancelled, true)) {
		ssize_t w = write(c->efd, &one, sizeof(one));
		(void)w;
		pthread_cond_broadcast(&c->cond);
	}
	for (struct cancel *k = c->child; k; k = k->next)
		cancel_locked(k);
}

int cancel_new(struct cancel *parent, struct cancel **ret)
{
	struct cancel *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	if ((r = token_init(c)) < 0) {
		free(c);
		return r;
	}
	pthread_mutex_lock(&tree_lock);
	if (parent) {
		c->parent = parent;
		c->next = parent->child;
		parent->child = c;
		if (atomic_load(&parent->cancelled))
			cancel_locked(c);
	}
	pthread_mutex_unlock(&tree_lock);
	*ret = c;
	return 0;
}

void cancel_free(struct cancel *c)
{
	if (!c || c == root)
		return;
	pthread_mutex_lock(&tree_lock);
	if (c->parent) {
		struct cancel **p = &c->parent->child;
		while (*p && *p != c)
			p = &(*p)->next;
		if (*p)
			*p = c->next;
	}
	for (struct cancel *k = c->child; k; k = k->next)
		k->parent = NULL;
	pthread_mutex_unlock(&tree_lock);
	close(c->efd);
	pthread_cond_destroy(&c->cond);
	free(c);
}

void cancel_cancel(struct cancel *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&tree_lock);
	cancel_locked(c);
	pthread_mutex_unlock(&tree_lock);
}

bool cancel_is_cancelled(const struct cancel *c)
{
	return c && atomic_load(&c->cancelled);
}

bool cancel_wait(struct cancel *c, int64_t timeout_ns)
{
	struct timespec ts;
	bool cancelled;

	if (!c) {
		if (timeout_ns > 0)
			sleep_ns(timeout_ns);
		return false;
	}
	pthread_mutex_lock(&tree_lock);
	if (timeout_ns < 0) {
		while (!atomic_load(&c->cancelled))
			pthread_cond_wait(&c->cond, &tree_lock);
	} else {
		int64_t deadline = now_mono_ns() + timeout_ns;
		ts.tv_sec = deadline / NSEC_PER_SEC;
		ts.tv_nsec = deadline % NSEC_PER_SEC;
		while (!atomic_load(&c->cancelled))
			if (pthread_cond_timedwait(&c->cond, &tree_lock, &ts) == ETIMEDOUT)
				break;
	}
	cancelled = atomic_load(&c->cancelled);
	pthread_mutex_unlock(&tree_lock);
	return cancelled;
}

int cancel_fd(struct cancel *c)
{
	return c ? c->efd : -1;
}

void cancel_reset(struct cancel *c)
{
	uint64_t v;

	if (!c)
		return;
	pthread_mutex_lock(&tree_lock);
	if (atomic_exchange(&c->cancelled, false)) {
		ssize_t r = read(c->efd, &v, sizeof(v));
		(void)r;
	}
	pthread_mutex_unlock(&tree_lock);
}
