/* The answer cache of delegated authentication and authorization (authn.h): a hash map of
 * SHA-256 keys under a read-write lock, bounded, the oldest entry evicted first. */
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/timeutil.h"
#include "common/kube/authn.h"

#define DEFAULT_MAX 4096

struct entry {
	unsigned char key[KUBE_AUTH_KEY_LEN];
	bool positive;
	int64_t expires, stale_until;
	void *value;
	struct entry *chain;	   /* next in the bucket */
	struct entry *older, *newer; /* insertion order */
};

struct kube_auth_cache {
	struct kube_auth_cache_opts o;
	pthread_rwlock_t lock;
	struct entry **buckets;
	size_t nbuckets, n;
	struct entry *oldest, *newest;
};

int kube_auth_cache_new(const struct kube_auth_cache_opts *o, struct kube_auth_cache **ret)
{
	struct kube_auth_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->o = *o;
	if (!c->o.max_entries)
		c->o.max_entries = DEFAULT_MAX;
	for (c->nbuckets = 16; c->nbuckets < 2 * c->o.max_entries; c->nbuckets *= 2)
		;
	if (!(c->buckets = calloc(c->nbuckets, sizeof(*c->buckets)))) {
		free(c);
		return -ENOMEM;
	}
	pthread_rwlock_init(&c->lock, NULL);
	*ret = c;
	return 0;
}

static void entry_free(struct kube_auth_cache *c, struct entry *e)
{
	if (c->o.free_value && e->value)
		c->o.free_value(e->value);
	free(e);
}

void kube_auth_cache_free(struct kube_auth_cache *c)
{
	if (!c)
		return;
	for (struct entry *e = c->oldest, *next; e; e = next) {
		next = e->newer;
		entry_free(c, e);
	}
	free(c->buckets);
	pthread_rwlock_destroy(&c->lock);
	free(c);
}

static size_t bucket_of(const struct kube_auth_cache *c, const unsigned char *key)
{
	size_t h;

	memcpy(&h, key, sizeof(h));
	return h & (c->nbuckets - 1);
}

static struct entry **find(struct kube_auth_cache *c, const unsigned char *key)
{
	struct entry **p = &c->buckets[bucket_of(c, key)];

	while (*p && memcmp((*p)->key, key, KUBE_AUTH_KEY_LEN) != 0)
		p = &(*p)->chain;
	return p;
}

int kube_auth_cache_get(struct kube_auth_cache *c, const unsigned char key[KUBE_AUTH_KEY_LEN],
			bool stale, void **ret_value)
{
	int64_t now = now_mono_ns();
	int r = -EAGAIN;

	pthread_rwlock_rdlock(&c->lock);
	struct entry *e = *find(c, key);
	if (e && now < e->expires)
		r = e->positive;
	else if (e && stale && e->positive && now < e->stale_until)
		r = 1;
	if (r >= 0 && ret_value) {
		*ret_value = NULL;
		if (e->value && c->o.copy_value && !(*ret_value = c->o.copy_value(e->value)))
			r = -ENOMEM;
	}
	pthread_rwlock_unlock(&c->lock);
	return r;
}

static void unlink_entry(struct kube_auth_cache *c, struct entry *e)
{
	struct entry **p = find(c, e->key);

	*p = e->chain;
	if (e->older)
		e->older->newer = e->newer;
	else
		c->oldest = e->newer;
	if (e->newer)
		e->newer->older = e->older;
	else
		c->newest = e->older;
	c->n--;
}

int kube_auth_cache_put(struct kube_auth_cache *c, const unsigned char key[KUBE_AUTH_KEY_LEN],
			bool positive, void *value)
{
	struct entry *e = calloc(1, sizeof(*e)), *old;
	int64_t now = now_mono_ns();

	if (!e) {
		if (c->o.free_value && value)
			c->o.free_value(value);
		return -ENOMEM;
	}
	memcpy(e->key, key, KUBE_AUTH_KEY_LEN);
	e->positive = positive;
	e->value = value;
	e->expires = now + (positive ? c->o.pos_ttl_ns : c->o.neg_ttl_ns);
	e->stale_until = positive ? now + c->o.stale_ns : 0;
	pthread_rwlock_wrlock(&c->lock);
	if ((old = *find(c, key))) {
		unlink_entry(c, old);
		entry_free(c, old);
	}
	while (c->n >= c->o.max_entries && (old = c->oldest)) {
		unlink_entry(c, old);
		entry_free(c, old);
	}
	struct entry **p = find(c, key);
	*p = e;
	e->older = c->newest;
	if (c->newest)
		c->newest->newer = e;
	else
		c->oldest = e;
	c->newest = e;
	c->n++;
	pthread_rwlock_unlock(&c->lock);
	return 0;
}

size_t kube_auth_cache_size(struct kube_auth_cache *c)
{
	size_t n;

	pthread_rwlock_rdlock(&c->lock);
	n = c->n;
	pthread_rwlock_unlock(&c->lock);
	return n;
}

int kube_auth_key(unsigned char key[KUBE_AUTH_KEY_LEN], const char *const *parts, size_t n)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned len = 0;
	int ok;

	if (!md)
		return -ENOMEM;
	ok = EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	for (size_t i = 0; ok && i < n; i++) {
		/* a part and its terminator, or a lone 0x01 for NULL: "a","" and "a",NULL differ */
		const char *p = parts[i] ? parts[i] : "\x01";
		ok = EVP_DigestUpdate(md, p, strlen(p) + 1);
	}
	ok = ok && EVP_DigestFinal_ex(md, key, &len) && len == KUBE_AUTH_KEY_LEN;
	EVP_MD_CTX_free(md);
	return ok ? 0 : -EIO;
}

bool kube_auth_error_is_transient(int r)
{
	switch (-r) {
	case EAGAIN:
	case ETIMEDOUT:
	case ECONNREFUSED:
	case ECONNRESET:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EIO:
	case EPIPE:
		return true;
	default:
		return false;
	}
}
