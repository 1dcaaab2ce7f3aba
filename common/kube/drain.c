/* kube_drain_node: evictions with PodDisruptionBudget retries, then a wait (drain.h).
 *
 * One thread runs the drain as rounds: evict the pods whose turn has come (a few threads at
 * once, each taking the next pod), then list the node's pods once to see which are gone, then
 * wait on the token until the next retry or poll. A PDB-blocked pod waits for its own retry
 * time while the others go on; nothing loops faster than the retry delay or the poll period. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/drain.h"

#define DRAIN_MAX_PODS 20000	 /* pods on one node: far above the kubelet's limit */
#define DRAIN_MAX_THREADS 64
#define DRAIN_CALL_TIMEOUT_NS (60 * NSEC_PER_SEC)

enum dpod_state { DP_PENDING, DP_EVICTED, DP_GONE };

struct dpod {
	char key[320]; /* "namespace/name" */
	char uid[64];
	const char *ns, *name; /* into obj */
	cJSON *obj;
	enum dpod_state state;
	int64_t next_try_ns;
	bool blocked;	 /* the last answer was a 429 */
	bool told;	 /* the block was logged */
	bool in_round;	 /* evicted in the current round */
	int result;	 /* of the round's eviction */
	struct kube_status st;
	bool seen;	 /* in the last listing */
};

struct drain {
	struct kube_client *c;
	const char *node;
	const struct kube_drain_opts *o;
	struct cancel *ct;
	int64_t deadline_ns; /* 0: none */
	struct dpod *pods;   /* sorted by key */
	size_t n, cap;
	struct dpod **round; /* the pods of one eviction round */
	size_t round_n;
	atomic_size_t round_next;
	int refused, skipped;
	struct buf refused_names;
};

static int dpod_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dpod *)a)->key, ((const struct dpod *)b)->key);
}

static struct dpod *dpod_find(struct drain *d, const char *ns, const char *name)
{
	struct dpod k = {0};

	if (d->n == 0 || str_printf(k.key, sizeof(k.key), "%s/%s", ns, name) < 0)
		return NULL;
	return bsearch(&k, d->pods, d->n, sizeof(*d->pods), dpod_cmp);
}

static int64_t call_timeout(const struct drain *d)
{
	int64_t left;

	if (!d->deadline_ns)
		return DRAIN_CALL_TIMEOUT_NS;
	left = d->deadline_ns - now_mono_ns();
	if (left < NSEC_PER_SEC)
		left = NSEC_PER_SEC;
	return left < DRAIN_CALL_TIMEOUT_NS ? left : DRAIN_CALL_TIMEOUT_NS;
}

/* Lists the node's pods. */
static int list_pods(struct drain *d, int (*on_item)(void *ud, cJSON *item))
{
	_cleanup_buf_ struct buf sel = BUF_INIT(512);
	struct kube_status st = {0};
	int r;

	if ((r = buf_printf(&sel, "spec.nodeName=%s", d->node)) < 0)
		return r;
	r = kube_list_each(d->c, KUBE_REF(&kube_pods, NULL, NULL),
			   &(struct kube_list_opts){.field_selector = sel.data, .cancel = d->ct},
			   on_item, d, NULL, &st);
	if (r < 0 && r != -ECANCELED)
		log_v(2, "failed to list the node's pods", KV_S("node", d->node),
		      KV_S("error", st.message), KV_E(r));
	return r;
}

static void refuse(struct drain *d, const cJSON *pod, const char *why)
{
	d->refused++;
	if (d->refused_names.len)
		(void)buf_puts(&d->refused_names, ", ");
	(void)buf_printf(&d->refused_names, "%s/%s (%s)", json_str(pod, "metadata.namespace"),
			 json_str(pod, "metadata.name"), why);
}

/* kube_list_each's callback of the first listing: classify and keep the pods to evict. */
static int take_pod(void *ud, cJSON *pod)
{
	struct drain *d = ud;
	const char *ns = json_str(pod, "metadata.namespace"), *name = json_str(pod, "metadata.name");
	char why[64];
	enum kube_drain_verdict v;
	struct dpod *p;

	if (!ns || !name || !json_str(pod, "metadata.uid")) {
		cJSON_Delete(pod);
		return -EBADMSG;
	}
	v = kube_drain_classify(pod, d->o, why, sizeof(why));
	if (v >= KUBE_DRAIN_REFUSE_DAEMONSET)
		refuse(d, pod, why);
	if (v != KUBE_DRAIN_EVICT) {
		if (v < KUBE_DRAIN_REFUSE_DAEMONSET)
			log_v(3, "drain: leaving pod", KV_S("namespace", ns), KV_S("pod", name),
			      KV_S("why", why));
		d->skipped += v < KUBE_DRAIN_REFUSE_DAEMONSET;
		cJSON_Delete(pod);
		return 0;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 32;
		if (d->n >= DRAIN_MAX_PODS || !(p = reallocarray(d->pods, cap, sizeof(*p)))) {
			cJSON_Delete(pod);
			return d->n >= DRAIN_MAX_PODS ? -E2BIG : -ENOMEM;
		}
		d->pods = p;
		d->cap = cap;
	}
	p = &d->pods[d->n];
	memset(p, 0, sizeof(*p));
	if (str_printf(p->key, sizeof(p->key), "%s/%s", ns, name) < 0 ||
	    str_copy(p->uid, sizeof(p->uid), json_str(pod, "metadata.uid")) < 0) {
		cJSON_Delete(pod);
		return -EBADMSG;
	}
	p->obj = pod;
	p->ns = ns;
	p->name = name;
	d->n++;
	return 0;
}

/* The eviction of one pod, on the round's token and deadline. */
static int evict_one(struct drain *d, struct dpod *p)
{
	_cleanup_buf_ struct buf path = BUF_INIT(0), body = BUF_INIT(0);
	int r;

	if ((r = kube_path(KUBE_REF_SUB(&kube_pods, p->ns, p->name, "eviction"), &path)) < 0)
		return r;
	/* the names come from the API server's own JSON: no escaping needed beyond cJSON's */
	cJSON *ev = cJSON_CreateObject(), *md, *opts;
	if (!ev || !cJSON_AddStringToObject(ev, "apiVersion", "policy/v1") ||
	    !cJSON_AddStringToObject(ev, "kind", "Eviction") ||
	    !(md = cJSON_AddObjectToObject(ev, "metadata")) ||
	    !cJSON_AddStringToObject(md, "name", p->name) ||
	    !cJSON_AddStringToObject(md, "namespace", p->ns) ||
	    (d->o->pod_grace_s >= 0 &&
	     (!(opts = cJSON_AddObjectToObject(ev, "deleteOptions")) ||
	      !cJSON_AddNumberToObject(opts, "gracePeriodSeconds", d->o->pod_grace_s)))) {
		cJSON_Delete(ev);
		return -ENOMEM;
	}
	char *text = json_print(ev);
	cJSON_Delete(ev);
	if (!text)
		return -ENOMEM;
	r = kube_call_do(d->c,
			 &(struct kube_call){.method = "POST", .path = path.data, .body = text,
					     .timeout_ns = call_timeout(d), .cancel = d->ct},
			 NULL, &p->st);
	free(text);
	return r;
}

static void *round_worker(void *ud)
{
	struct drain *d = ud;
	size_t i;

	while ((i = atomic_fetch_add(&d->round_next, 1)) < d->round_n) {
		struct dpod *p = d->round[i];
		memset(&p->st, 0, sizeof(p->st));
		p->result = cancel_is_cancelled(d->ct) ? -ECANCELED : evict_one(d, p);
	}
	return NULL;
}

/* Evicts the pods whose turn has come; returns the first error that ends the drain. */
static int evict_round(struct drain *d, struct kube_drain_result *res)
{
	int64_t now = now_mono_ns(), retry_ns;
	int want = d->o->parallel > 0 ? d->o->parallel : 8, r = 0;
	pthread_t th[DRAIN_MAX_THREADS];
	int started = 0;

	retry_ns = (d->o->eviction_retry_ms > 0 ? d->o->eviction_retry_ms : 5000) * NSEC_PER_MSEC;
	d->round_n = 0;
	for (size_t i = 0; i < d->n; i++)
		if (d->pods[i].state == DP_PENDING && d->pods[i].next_try_ns <= now)
			d->round[d->round_n++] = &d->pods[i];
	if (!d->round_n)
		return 0;
	atomic_store(&d->round_next, 0);
	if (want > DRAIN_MAX_THREADS)
		want = DRAIN_MAX_THREADS;
	if ((size_t)want > d->round_n)
		want = (int)d->round_n;
	for (; started < want - 1; started++)
		if (pthread_create(&th[started], NULL, round_worker, d) != 0)
			break;
	round_worker(d); /* this thread works too: at least one worker whatever happens */
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);

	now = now_mono_ns();
	for (size_t i = 0; i < d->round_n; i++) {
		struct dpod *p = d->round[i];
		switch (p->result) {
		case 0:
			p->state = DP_EVICTED;
			p->blocked = false;
			res->evicted++;
			log_v(2, "evicted pod", KV_S("namespace", p->ns), KV_S("pod", p->name),
			      KV_S("node", d->node));
			if (d->o->on_evicted)
				d->o->on_evicted(d->o->ud, p->obj);
			break;
		case -ENOENT: /* already gone */
			p->state = DP_GONE;
			break;
		case -EAGAIN: /* 429 (a PodDisruptionBudget, or throttling) or 5xx: retry later */
			p->blocked = p->st.code == 429;
			p->next_try_ns = now + (p->st.retry_after_ns > retry_ns ? p->st.retry_after_ns
										 : retry_ns);
			if (p->blocked && !p->told) {
				p->told = true;
				log_info("eviction blocked, will retry", KV_S("namespace", p->ns),
					 KV_S("pod", p->name), KV_S("node", d->node),
					 KV_S("error", p->st.message),
					 KV_I("retry_ms", (p->next_try_ns - now) / NSEC_PER_MSEC));
			} else {
				log_v(2, "eviction refused, will retry", KV_S("namespace", p->ns),
				      KV_S("pod", p->name), KV_S("error", p->st.message),
				      KV_I("http", p->st.http));
			}
			break;
		default:
			if (!r) {
				r = p->result;
				if (r != -ECANCELED)
					str_printf(res->err, sizeof(res->err),
						   "eviction of pod %s failed: %s (%s)", p->key,
						   p->st.message[0] ? p->st.message : "no answer",
						   errno_name(-r));
			}
		}
	}
	return r;
}

/* kube_list_each's callback of the later listings: marks the pods still there. */
static int mark_seen(void *ud, cJSON *pod)
{
	struct drain *d = ud;
	const char *ns = json_str(pod, "metadata.namespace"), *name = json_str(pod, "metadata.name");
	const char *uid = json_str(pod, "metadata.uid");
	struct dpod *p = ns && name ? dpod_find(d, ns, name) : NULL;

	if (p && uid && strcmp(uid, p->uid) == 0)
		p->seen = true;
	cJSON_Delete(pod);
	return 0;
}

/* One listing: pods absent, or present with another UID (replaced), are gone. */
static int check_gone(struct drain *d)
{
	int r;

	for (size_t i = 0; i < d->n; i++)
		d->pods[i].seen = false;
	if ((r = list_pods(d, mark_seen)) < 0)
		return r;
	for (size_t i = 0; i < d->n; i++)
		if (d->pods[i].state != DP_GONE && !d->pods[i].seen) {
			log_v(2, "pod is gone", KV_S("pod", d->pods[i].key), KV_S("node", d->node));
			d->pods[i].state = DP_GONE;
		}
	return 0;
}

static void tally(struct drain *d, struct kube_drain_result *res, bool name_them)
{
	struct buf names = BUF_INIT(sizeof(res->err));
	int shown = 0;

	res->remaining = res->blocked_by_pdb = 0;
	for (size_t i = 0; i < d->n; i++) {
		const struct dpod *p = &d->pods[i];
		if (p->state == DP_GONE)
			continue;
		res->remaining++;
		res->blocked_by_pdb += p->state == DP_PENDING && p->blocked;
		if (name_them && shown < 8 &&
		    buf_printf(&names, "%s%s%s", shown ? ", " : "", p->key,
			       p->state == DP_PENDING && p->blocked ? " (disruption budget)" : "") >= 0)
			shown++;
	}
	if (name_them)
		str_printf(res->err, sizeof(res->err), "%d pod(s) still on node %s: %s%s",
			   res->remaining, d->node, names.data ? names.data : "",
			   res->remaining > shown ? ", ..." : "");
	buf_release(&names);
}

static int drain_wait(struct drain *d)
{
	int64_t now = now_mono_ns(), poll_ns, wake;
	bool evicted = false;

	poll_ns = (d->o->poll_ms > 0 ? d->o->poll_ms : 1000) * NSEC_PER_MSEC;
	wake = INT64_MAX;
	for (size_t i = 0; i < d->n; i++) {
		if (d->pods[i].state == DP_EVICTED)
			evicted = true;
		if (d->pods[i].state == DP_PENDING && d->pods[i].next_try_ns < wake)
			wake = d->pods[i].next_try_ns;
	}
	if (evicted && now + poll_ns < wake)
		wake = now + poll_ns;
	if (d->deadline_ns && d->deadline_ns < wake)
		wake = d->deadline_ns;
	if (cancel_wait(d->ct, wake > now ? wake - now : 0))
		return -ECANCELED;
	if (d->deadline_ns && now_mono_ns() >= d->deadline_ns)
		return -ETIMEDOUT;
	return 0;
}

static int drain_run(struct drain *d, struct kube_drain_result *res)
{
	int r;

	if ((r = list_pods(d, take_pod)) < 0) {
		if (r != -ECANCELED)
			str_printf(res->err, sizeof(res->err), "listing the pods of node %s: %s",
				   d->node, errno_name(-r));
		return r;
	}
	res->skipped = d->skipped;
	if (d->refused) {
		res->refused = d->refused;
		str_printf(res->err, sizeof(res->err), "cannot drain node %s: %s", d->node,
			   d->refused_names.data);
		return -EPERM;
	}
	if (d->n > 1) /* d->pods is NULL on a node without pods */
		qsort(d->pods, d->n, sizeof(*d->pods), dpod_cmp);
	for (size_t i = 1; i < d->n; i++)
		if (strcmp(d->pods[i - 1].key, d->pods[i].key) == 0) {
			str_printf(res->err, sizeof(res->err), "pod %s listed twice", d->pods[i].key);
			return -EBADMSG;
		}
	if (d->o->dry_run) {
		res->evicted = (int)d->n;
		return 0;
	}
	if (!(d->round = calloc(d->n ? d->n : 1, sizeof(*d->round))))
		return -ENOMEM;
	for (;;) {
		if ((r = evict_round(d, res)) < 0)
			break;
		if ((r = check_gone(d)) < 0) {
			if (r != -ECANCELED)
				str_printf(res->err, sizeof(res->err),
					   "listing the pods of node %s: %s", d->node,
					   errno_name(-r));
			break;
		}
		tally(d, res, false);
		if (!res->remaining)
			return 0;
		if ((r = drain_wait(d)) < 0)
			break;
	}
	tally(d, res, r == -ETIMEDOUT || r == -ECANCELED);
	return r;
}

int kube_drain_node(struct kube_client *c, const char *node, const struct kube_drain_opts *o,
		    struct cancel *ct, struct kube_drain_result *ret)
{
	struct drain d = {.c = c, .node = node, .o = o, .ct = ct ? ct : kube_client_cancel(c),
			  .refused_names = BUF_INIT(4096)};
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!node || !*node || !o) {
		str_copy(ret->err, sizeof(ret->err), "no node named");
		return -EINVAL;
	}
	if (o->timeout_s > 0)
		d.deadline_ns = now_mono_ns() + o->timeout_s * NSEC_PER_SEC;
	r = drain_run(&d, ret);
	if (r == -ECANCELED && !ret->err[0])
		str_printf(ret->err, sizeof(ret->err), "drain of node %s cancelled", node);
	for (size_t i = 0; i < d.n; i++)
		cJSON_Delete(d.pods[i].obj);
	free(d.pods);
	free(d.round);
	buf_release(&d.refused_names);
	return r;
}
