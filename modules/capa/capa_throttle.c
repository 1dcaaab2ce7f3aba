/* CAPA's per-family token buckets. */
#include <errno.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/timeutil.h"
#include "modules/capa/capa_throttle.h"

/* One family: the prefixes it matches (NULL-terminated; an empty list matches anything). */
struct family {
	const char *name;
	double rate, burst;
	const char *prefixes[6];
};

static const struct family ec2_families[] = {
	{ "ec2/describe", 20, 100, { "Describe", "Get", NULL } },
	{ "ec2/sg-key-spot", 20, 100,
	  { "AuthorizeSecurityGroupIngress", "CancelSpotInstanceRequests", "CreateKeyPair",
	    "RequestSpotInstances", NULL } },
	{ "ec2/run", 2, 5, { "RunInstances", NULL } },
	{ "ec2/start", 2, 5, { "StartInstances", NULL } },
	{ "ec2/other", 5, 200, { NULL } },
	{ NULL, 0, 0, { NULL } },
};

#define READ_WRITE(svc)                                                                            \
	{ { svc "/read", 20, 100, { "Describe", "Get", "List", NULL } },                           \
	  { svc "/other", 5, 200, { NULL } },                                                      \
	  { NULL, 0, 0, { NULL } } }

static const struct family elb_families[] = READ_WRITE("elb");
static const struct family elbv2_families[] = READ_WRITE("elbv2");
static const struct family tagging_families[] = READ_WRITE("tagging");
static const struct family secrets_families[] = READ_WRITE("secretsmanager");

static const struct family *const families[CAPA_SVC__MAX] = {
	[CAPA_SVC_EC2] = ec2_families,	       [CAPA_SVC_ELB] = elb_families,
	[CAPA_SVC_ELBV2] = elbv2_families,     [CAPA_SVC_TAGGING] = tagging_families,
	[CAPA_SVC_SECRETS] = secrets_families,
};

void capa_limiter_init(struct capa_limiter *l, int64_t now_ns)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	for (int s = 0; s < CAPA_SVC__MAX; s++)
		for (int i = 0; families[s][i].name && i < CAPA_LIMITER_MAX_FAMILIES; i++)
			l->b[s][i] = (struct capa_bucket){ .name = families[s][i].name,
							   .rate = families[s][i].rate,
							   .burst = families[s][i].burst,
							   .tokens = families[s][i].burst,
							   .last_ns = now_ns };
}

void capa_limiter_release(struct capa_limiter *l)
{
	if (l)
		pthread_mutex_destroy(&l->lock);
}

static bool family_matches(const struct family *f, const char *op)
{
	if (!f->prefixes[0])
		return true;
	for (int k = 0; f->prefixes[k]; k++)
		if (str_has_prefix(op, f->prefixes[k]))
			return true;
	return false;
}

struct capa_bucket *capa_limiter_bucket(struct capa_limiter *l, enum capa_svc s, const char *op)
{
	if ((unsigned)s >= CAPA_SVC__MAX || !op)
		return NULL;
	for (int i = 0; families[s][i].name; i++)
		if (family_matches(&families[s][i], op))
			return &l->b[s][i];
	return NULL;
}

static void refill(struct capa_bucket *b, int64_t now_ns)
{
	if (now_ns > b->last_ns) {
		b->tokens += b->rate * (double)(now_ns - b->last_ns) / 1e9;
		if (b->tokens > b->burst)
			b->tokens = b->burst;
		b->last_ns = now_ns;
	}
}

int capa_limiter_try(struct capa_limiter *l, enum capa_svc s, const char *op, int64_t now_ns,
		     int64_t *ret_wait_ns)
{
	struct capa_bucket *b = capa_limiter_bucket(l, s, op);
	if (!b)
		return -EINVAL;
	pthread_mutex_lock(&l->lock);
	refill(b, now_ns);
	int64_t wait = 0;
	if (b->tokens >= 1.0)
		b->tokens -= 1.0;
	else
		wait = (int64_t)((1.0 - b->tokens) / b->rate * 1e9) + 1;
	pthread_mutex_unlock(&l->lock);
	*ret_wait_ns = wait;
	return 0;
}

int capa_limiter_wait(struct capa_limiter *l, enum capa_svc s, const char *op, struct cancel *c)
{
	bool waited = false;
	for (;;) {
		int64_t wait;
		int r = capa_limiter_try(l, s, op, now_mono_ns(), &wait);
		if (r < 0)
			return r;
		if (wait == 0)
			break;
		if (!waited) {
			pthread_mutex_lock(&l->lock);
			l->waits++;
			pthread_mutex_unlock(&l->lock);
			waited = true;
		}
		if (cancel_wait(c ? c : cancel_root(), wait))
			return -ECANCELED;
	}
	return 0;
}

void capa_limiter_throttled(struct capa_limiter *l, enum capa_svc s, const char *op, int64_t now_ns)
{
	struct capa_bucket *b = capa_limiter_bucket(l, s, op);
	if (!b)
		return;
	pthread_mutex_lock(&l->lock);
	refill(b, now_ns);
	b->tokens = 0;
	pthread_mutex_unlock(&l->lock);
}
