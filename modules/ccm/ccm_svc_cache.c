/* The service controller's shared pieces (see ccm_svc.h): Events on the Service, the caches
 * of instances and subnets, and where a load balancer goes. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/timeutil.h"
#include "common/kube/events.h"
#include "common/kube/rest.h"
#include "modules/ccm/ccm_svc.h"

#define CACHE_TTL_NS (10 * 60 * NSEC_PER_SEC)
#define CACHE_MAX 100000

struct cached_inst {
	struct ccm_lb_inst i;
	int64_t at;
};

struct cached_subnets {
	struct ccm_subnet *s;
	size_t n;
	int64_t at;
};


static void subnets_free(void *p)
{
	struct cached_subnets *cs = p;
	if (cs)
		free(cs->s);
	free(cs);
}

/* Events --------------------------------------------------------------------------------- */

void ccm_svc_event(struct ccm *m, const cJSON *svc, const char *type, const char *reason,
		   const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ccm_eventv(m, svc, &kube_services, type, reason, fmt, ap);
	va_end(ap);
}

/* Caches ---------------------------------------------------------------------------------- */

/* The instances' VPC and groups: described only when not cached (or the cache is old). One
 * refill at a time (workers re-checking together would each describe the same instances): a
 * worker that misses while another refills waits for that refill, then looks again and
 * refills only what is still missing; a failed refill fails its waiters with its error. */
int ccm_svc_instances(struct ccm_svc_ctl *ctl, const char (*ids)[32], size_t n,
		      struct ccm_lb_inst **ret, size_t *ret_n, struct aws_error *err)
{
	char(*miss)[32] = calloc(n + 1, 32);
	struct ccm_lb_inst *out = calloc(n + 1, sizeof(*out)), *got = NULL;
	size_t n_miss = 0, n_got = 0, k = 0;
	int64_t now = now_mono_ns();
	int r = 0;

	if (!miss || !out) {
		r = -ENOMEM;
		goto out;
	}
	pthread_mutex_lock(&ctl->lock);
	for (;;) {
		k = n_miss = 0;
		for (size_t i = 0; i < n; i++) {
			struct cached_inst *c = kmap_get(&ctl->insts, ids[i]);
			if (c && now - c->at < CACHE_TTL_NS)
				out[k++] = c->i;
			else
				str_copy(miss[n_miss++], 32, ids[i]);
		}
		if (!n_miss || !ctl->refilling)
			break;
		for (uint64_t gen = ctl->refill_gen; ctl->refilling && ctl->refill_gen == gen;)
			pthread_cond_wait(&ctl->refill_cv, &ctl->lock);
		if (ctl->refill_r < 0) {
			r = ctl->refill_r;
			*err = ctl->refill_err;
			pthread_mutex_unlock(&ctl->lock);
			goto out;
		}
		now = now_mono_ns();
	}
	ctl->refilling = n_miss > 0;
	pthread_mutex_unlock(&ctl->lock);
	if (!n_miss)
		goto done;
	r = ccm_lb_describe_instances(ccm_cloud_client(ctl->m->cloud), (const char(*)[32])miss,
				      n_miss, &got, &n_got, err);
	pthread_mutex_lock(&ctl->lock);
	if (r == 0 && ctl->insts.size + n_got >= CACHE_MAX)
		kmap_clear(&ctl->insts, free);
	for (size_t i = 0; r == 0 && i < n_got; i++) {
		struct cached_inst *c = malloc(sizeof(*c)), *old = NULL;
		out[k++] = got[i];
		if (!c)
			continue;
		*c = (struct cached_inst){got[i], now};
		if (kmap_put(&ctl->insts, got[i].id, c, (void **)&old) < 0)
			free(c);
		free(old);
	}
	ctl->refilling = false;
	ctl->refill_gen++;
	ctl->refill_r = r;
	if (r < 0)
		ctl->refill_err = *err;
	pthread_cond_broadcast(&ctl->refill_cv);
	pthread_mutex_unlock(&ctl->lock);
	if (r < 0)
		goto out;
done:
	*ret = out;
	*ret_n = k;
	out = NULL;
out:
	free(out);
	free(got);
	free(miss);
	return r;
}

static int subnets(struct ccm_svc_ctl *ctl, const char *vpc, struct ccm_subnet **ret, size_t *n,
		   struct aws_error *err)
{
	struct cached_subnets *cs, *old = NULL;
	int64_t now = now_mono_ns();
	int r;

	pthread_mutex_lock(&ctl->lock);
	cs = kmap_get(&ctl->subnets, vpc);
	if (cs && now - cs->at < CACHE_TTL_NS && (*ret = calloc(cs->n + 1, sizeof(**ret)))) {
		memcpy(*ret, cs->s, cs->n * sizeof(**ret));
		*n = cs->n;
		pthread_mutex_unlock(&ctl->lock);
		return 0;
	}
	pthread_mutex_unlock(&ctl->lock);
	if ((r = ccm_lb_subnets(ccm_cloud_client(ctl->m->cloud), vpc, ctl->m->cluster_id, ret, n,
				err)) < 0)
		return r;
	if (!(cs = calloc(1, sizeof(*cs))) || !(cs->s = calloc(*n + 1, sizeof(*cs->s)))) {
		free(cs);
		return 0;
	}
	memcpy(cs->s, *ret, *n * sizeof(**ret));
	cs->n = *n;
	cs->at = now;
	pthread_mutex_lock(&ctl->lock);
	if (kmap_put(&ctl->subnets, vpc, cs, (void **)&old) < 0)
		subnets_free(cs);
	subnets_free(old);
	pthread_mutex_unlock(&ctl->lock);
	return 0;
}

/* Placement ------------------------------------------------------------------------------- */

int ccm_svc_vpc(struct ccm_svc_ctl *ctl, struct ccm_svc_ensure *e, struct aws_error *err)
{
	const char *vpc = ctl->m->cfg->vpc;
	int r;

	if ((r = ccm_svc_instances(ctl, (const char(*)[32])e->ids, e->n_ids, &e->inst, &e->n_inst,
				   err)) < 0)
		return r;
	for (size_t i = 0; (!vpc || !*vpc) && i < e->n_inst; i++)
		if (e->inst[i].vpc[0])
			vpc = e->inst[i].vpc;
	if (!vpc || !*vpc) {
		snprintf(e->err, sizeof(e->err), "no VPC: set [Global] VPC or add a Node");
		return -ENOENT;
	}
	e->vpc = vpc;
	return 0;
}

int ccm_svc_place(struct ccm_svc_ctl *ctl, struct ccm_svc_ensure *e, struct aws_error *err)
{
	int r;

	if ((r = ccm_svc_vpc(ctl, e, err)) < 0 ||
	    (r = subnets(ctl, e->vpc, &e->subnets, &e->n_subnets, err)) < 0)
		return r;
	return ccm_lb_pick_subnets(e->subnets, e->n_subnets, &e->spec, e->chosen,
				   CCM_LB_MAX_SUBNETS, &e->n_chosen, e->err, sizeof(e->err));
}

void ccm_svc_cache_clear(struct ccm_svc_ctl *ctl)
{
	kmap_clear(&ctl->insts, free);
	kmap_clear(&ctl->subnets, subnets_free);
}
