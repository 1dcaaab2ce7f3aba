/* The decision for one request (kube-rbac-proxy's filters): who it is (client certificate, else
 * bearer token by TokenReview), then what it may do (static rules, else SubjectAccessReview, once
 * per rewrite value). The event loops call rbac_decide with may_block false, which answers from
 * the caches; a miss goes to the worker pool below, whose threads make the blocking calls. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "modules/rbac-proxy/rbac_proxy.h"

#define MAX_QUEUE 4096
#define FIELD_MAX 512

struct rbac_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rbac_job *head, *tail;
	size_t n;
	bool stop;
	pthread_t *threads;
	unsigned nthreads;
};

void rbac_ask_release(struct rbac_ask *a)
{
	if (a->token) {
		memset(a->token, 0, strlen(a->token));
		free(a->token);
	}
	free(a->cert_user);
	strv_free(a->cert_groups);
	free(a->verb);
	free(a->path);
	strv_free(a->rewrite_values);
	*a = (struct rbac_ask){0};
}

/* "{{.Value}}" (spaces allowed inside the braces) replaced by value. */
static const char *subst(const char *tpl, const char *value, char *out, size_t outlen)
{
	const char *open, *close;
	size_t o = 0;

	if (!tpl || !value || !strstr(tpl, "{{"))
		return tpl;
	for (const char *p = tpl; *p;) {
		open = strstr(p, "{{");
		close = open ? strstr(open, "}}") : NULL;
		if (!open || !close) {
			str_copy(out + o, outlen - o, p);
			return out;
		}
		const char *s = open + 2, *e = close;
		while (*s == ' ')
			s++;
		while (e > s && e[-1] == ' ')
			e--;
		size_t pre = (size_t)(open - p);
		if (o + pre >= outlen)
			return "";
		memcpy(out + o, p, pre);
		o += pre;
		if ((size_t)(e - s) == 6 && memcmp(s, ".Value", 6) == 0) {
			size_t vl = strlen(value);
			if (o + vl >= outlen)
				return "";
			memcpy(out + o, value, vl);
			o += vl;
		}
		out[o] = 0;
		p = close + 2;
	}
	return out;
}

static bool eq_or_any(const char *want, const char *have)
{
	return !want || !*want || strcmp(want, have ? have : "") == 0;
}

static bool static_allows(const struct rbac_authz_cfg *az, const struct kube_user *u,
			  const struct kube_authz_attrs *at)
{
	for (size_t i = 0; i < az->nstatics; i++) {
		const struct rbac_static *s = &az->statics[i];
		bool group_ok = !s->groups || !*s->groups;
		for (char **g = s->groups; !group_ok && *g; g++)
			group_ok = strv_contains(u->groups, *g);
		if (group_ok && eq_or_any(s->user, u->name) && eq_or_any(s->verb, at->verb) &&
		    s->resource_request == at->resource && eq_or_any(s->path, at->path) &&
		    (!at->resource ||
		     (eq_or_any(s->ns, at->ns) && eq_or_any(s->group, at->group) &&
		      eq_or_any(s->res, at->res) && eq_or_any(s->subresource, at->subresource) &&
		      eq_or_any(s->name, at->name))))
			return true;
	}
	return false;
}

/* 1 allowed, 0 denied, -EAGAIN (not cached, inline), < 0 error. */
static int authorize_one(struct rbac *p, const struct rbac_ask *a, const struct kube_user *u,
			 const char *value, bool may_block)
{
	const struct rbac_authz_cfg *az = a->authz;
	char b[6][FIELD_MAX], why[256] = "";
	struct kube_authz_attrs at = {.verb = a->verb, .path = a->path, .resource = az->resource};
	int r;

	if (az->resource) {
		at.ns = subst(az->ns, value, b[0], FIELD_MAX);
		at.group = subst(az->group, value, b[1], FIELD_MAX);
		at.version = subst(az->version, value, b[2], FIELD_MAX);
		at.res = subst(az->res, value, b[3], FIELD_MAX);
		at.subresource = subst(az->subresource, value, b[4], FIELD_MAX);
		at.name = subst(az->name, value, b[5], FIELD_MAX);
	}
	if (static_allows(az, u, &at))
		return 1;
	if (!may_block)
		return kube_authz_cached(p->authz, u, &at);
	r = kube_authz_check(p->authz, u, &at, why, sizeof(why));
	if (r == 0)
		log_v(2, "forbidden", KV_S("user", u->name), KV_S("verb", at.verb),
		      KV_S("path", a->path), KV_S("reason", why));
	else if (r < 0)
		log_error("authorization failed", KV_S("user", u->name), KV_S("path", a->path),
			  KV_S("error", why), KV_E(r));
	return r;
}

static int cert_user(const struct rbac_ask *a, struct kube_user *u)
{
	if (!(u->name = strdup(a->cert_user)))
		return -ENOMEM;
	for (char **g = a->cert_groups; g && *g; g++)
		if (strv_push(&u->groups, *g) < 0)
			return -ENOMEM;
	if (!strv_contains(u->groups, "system:authenticated") &&
	    strv_push(&u->groups, "system:authenticated") < 0)
		return -ENOMEM;
	return 0;
}

int rbac_decide(struct rbac *p, const struct rbac_ask *a, bool may_block, struct rbac_verdict *v)
{
	struct kube_user u = {0};
	char why[256] = "";
	int r;

	*v = (struct rbac_verdict){0};
	if (a->cert_user) {
		if ((r = cert_user(a, &u)) < 0)
			goto fail;
	} else if (a->token) {
		r = may_block ? kube_authn_token(p->authn, a->token, &u, why, sizeof(why))
			      : kube_authn_cached(p->authn, a->token, &u);
		if (r == -EAGAIN && !may_block)
			return -EAGAIN;
		if (r < 0)
			log_error("authentication failed", KV_S("error", why), KV_E(r));
		if (r != 1) {
			kube_user_release(&u);
			v->status = 401;
			return 1;
		}
	} else {
		v->status = 401;
		return 1;
	}
	if (a->authz->rewrite_query || a->authz->rewrite_header) {
		if (!a->rewrite_values || !*a->rewrite_values) {
			v->status = 400;
			goto done;
		}
		for (char **val = a->rewrite_values; *val; val++) {
			r = authorize_one(p, a, &u, *val, may_block);
			if (r != 1)
				break;
		}
	} else {
		r = authorize_one(p, a, &u, NULL, may_block);
	}
	if (r == -EAGAIN && !may_block) {
		kube_user_release(&u);
		return -EAGAIN;
	}
	v->status = r == 1 ? 0 : r == 0 ? 403 : 500;
done:
	v->user = u;
	return 1;
fail:
	kube_user_release(&u);
	return r;
}

static void *worker(void *arg)
{
	struct rbac *p = arg;
	struct rbac_pool *pl = p->pool;

	for (;;) {
		pthread_mutex_lock(&pl->mu);
		while (!pl->head && !pl->stop)
			pthread_cond_wait(&pl->cv, &pl->mu);
		if (pl->stop) {
			pthread_mutex_unlock(&pl->mu);
			return NULL;
		}
		struct rbac_job *j = pl->head;
		pl->head = j->next;
		if (!pl->head)
			pl->tail = NULL;
		pl->n--;
		pthread_mutex_unlock(&pl->mu);
		j->next = NULL;
		if (rbac_decide(p, &j->ask, true, &j->verdict) < 0)
			j->verdict.status = 500;
		j->done(j->loop, j);
	}
}

int rbac_pool_start(struct rbac *p, unsigned threads)
{
	struct rbac_pool *pl = calloc(1, sizeof(*pl));

	if (!pl || !(pl->threads = calloc(threads, sizeof(*pl->threads)))) {
		free(pl);
		return -ENOMEM;
	}
	pthread_mutex_init(&pl->mu, NULL);
	pthread_cond_init(&pl->cv, NULL);
	p->pool = pl;
	for (; pl->nthreads < threads; pl->nthreads++) {
		int r = pthread_create(&pl->threads[pl->nthreads], NULL, worker, p);
		if (r) {
			rbac_pool_stop(p);
			return -r;
		}
	}
	return 0;
}

void rbac_pool_stop(struct rbac *p)
{
	struct rbac_pool *pl = p->pool;

	if (!pl)
		return;
	pthread_mutex_lock(&pl->mu);
	pl->stop = true;
	pthread_cond_broadcast(&pl->cv);
	pthread_mutex_unlock(&pl->mu);
	for (unsigned i = 0; i < pl->nthreads; i++)
		pthread_join(pl->threads[i], NULL);
	/* jobs never taken go back to their loops, which close their connections */
	for (struct rbac_job *j = pl->head, *next; j; j = next) {
		next = j->next;
		j->verdict.status = 503;
		j->done(j->loop, j);
	}
	free(pl->threads);
	pthread_mutex_destroy(&pl->mu);
	pthread_cond_destroy(&pl->cv);
	free(pl);
	p->pool = NULL;
}

int rbac_pool_submit(struct rbac *p, struct rbac_job *j)
{
	struct rbac_pool *pl = p->pool;
	int r = 0;

	pthread_mutex_lock(&pl->mu);
	if (pl->n >= MAX_QUEUE || pl->stop) {
		r = -EAGAIN;
	} else {
		j->next = NULL;
		if (pl->tail)
			pl->tail->next = j;
		else
			pl->head = j;
		pl->tail = j;
		pl->n++;
		pthread_cond_signal(&pl->cv);
	}
	pthread_mutex_unlock(&pl->mu);
	return r;
}
