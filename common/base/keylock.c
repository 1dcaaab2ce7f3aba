/* Per-key try-locks in a bounded table (see keylock.h). The keys held at once are few (the
 * calls in flight), so a flat array searched under one mutex is enough. */
#include "common/base/keylock.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct keylock {
	pthread_mutex_t lock;
	char **keys;
	size_t n, cap, max;
};

int keylock_new(size_t max, struct keylock **ret)
{
	struct keylock *kl;

	if (max == 0)
		return -EINVAL;
	if (!(kl = calloc(1, sizeof(*kl))))
		return -ENOMEM;
	pthread_mutex_init(&kl->lock, NULL);
	kl->max = max;
	*ret = kl;
	return 0;
}

void keylock_free(struct keylock *kl)
{
	if (!kl)
		return;
	for (size_t i = 0; i < kl->n; i++)
		free(kl->keys[i]);
	free(kl->keys);
	pthread_mutex_destroy(&kl->lock);
	free(kl);
}

/* The index of key, or n; lock held. */
static size_t find(const struct keylock *kl, const char *key)
{
	size_t i;

	for (i = 0; i < kl->n; i++)
		if (strcmp(kl->keys[i], key) == 0)
			break;
	return i;
}

int keylock_try(struct keylock *kl, const char *key)
{
	int r = 0;

	if (!key || !*key || strnlen(key, KEYLOCK_KEY_MAX + 1) > KEYLOCK_KEY_MAX)
		return -EINVAL;
	pthread_mutex_lock(&kl->lock);
	if (find(kl, key) < kl->n) {
		r = -EBUSY;
		goto out;
	}
	if (kl->n >= kl->max) {
		r = -ENOSPC;
		goto out;
	}
	if (kl->n == kl->cap) {
		size_t nc = kl->cap ? kl->cap * 2 : 16;
		if (nc > kl->max)
			nc = kl->max;
		char **k = realloc(kl->keys, nc * sizeof(*k));
		if (!k) {
			r = -ENOMEM;
			goto out;
		}
		kl->keys = k;
		kl->cap = nc;
	}
	if (!(kl->keys[kl->n] = strdup(key)))
		r = -ENOMEM;
	else
		kl->n++;
out:
	pthread_mutex_unlock(&kl->lock);
	return r;
}

void keylock_release(struct keylock *kl, const char *key)
{
	size_t i;

	if (!key)
		return;
	pthread_mutex_lock(&kl->lock);
	if ((i = find(kl, key)) < kl->n) {
		free(kl->keys[i]);
		kl->keys[i] = kl->keys[--kl->n];
	}
	pthread_mutex_unlock(&kl->lock);
}

size_t keylock_count(struct keylock *kl)
{
	size_t n;

	pthread_mutex_lock(&kl->lock);
	n = kl->n;
	pthread_mutex_unlock(&kl->lock);
	return n;
}
