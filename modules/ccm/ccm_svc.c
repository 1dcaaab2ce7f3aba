/* The service controller: keys are Services ("namespace/name") from the Service informer; every
 * Service is queued again when the set of Nodes a load balancer sends traffic to changes. One
 * reconcile of a Service of type LoadBalancer:
 *
 *   1. the spec (ccm_lb.c, and ccm_nlb.c for nlb and none): a rejected one gets a Warning
 *      Event and nothing is made;
 *   2. when the Service, its annotations and the eligible Nodes are what the last successful
 *      sync saw and its full re-check is not due, nothing is called at all (at most the status
 *      written then is written again, when the Service does not show it: our own patch's echo
 *      not in the informer yet, or someone changed it);
 *   3. the finalizer, before anything is made;
 *   4. the load balancer: ccm_svc_elb.c for a classic ELB, ccm_svc_nlb.c for an NLB and for
 *      Deckhouse's target groups without one (none); the instances (DescribeInstances by ID)
 *      and the subnets (per VPC) they need come cached from ccm_svc_cache.c;
 *   5. status.loadBalancer.ingress[] (hostname; ip 0.0.0.0 and hostname none for none).
 * A Service no longer of type LoadBalancer, or being deleted, with the finalizer: whatever was
 * made for it, of any kind (the type may have changed), is deleted, then the finalizer is
 * removed; a Service queued again before the informer shows the finalizer gone (our own status
 * patch's echo) is not deleted twice.
 *
 * Drift: every probe_ns (--min-resync-period / 72, 10 min by default) one pass, the key
 * PROBE_KEY, describes every synced classic ELB and NLB, 20 names a DescribeLoadBalancers
 * (ccm_svc_probe.c), and queues a full re-check of those whose description differs from the
 * last pass's (or that are missing); an unchanged Service is also fully re-checked once every
 * deep_ns..2*deep_ns (--min-resync-period, 12 h by default, as upstream's informers resync),
 * for what no Describe of the load balancer shows (security-group rules, attributes, tags, an
 * NLB's listeners and targets). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/events.h"
#include "common/kube/informer.h"
#include "common/kube/kmap.h"
#include "common/kube/rest.h"
#include "modules/ccm/ccm_model.h"
#include "modules/ccm/ccm_svc.h"

#define DEFAULT_DEEP_NS (12 * 3600 * NSEC_PER_SEC)
#define PROBES_PER_DEEP 72 /* 10 min at the default 12 h */
#define PROBE_KEY "probe"  /* not a Service key: those have a slash */
#define NODE_TRIGGER_NS (NSEC_PER_SEC)
#define CACHE_MAX 100000

/* What the last successful sync of a Service did, or that its load balancer was deleted. */
struct synced {
	uint64_t fp;
	int64_t due; /* the full re-check's time (monotonic); 0: due now */
	char *tags;  /* additional-resource-tags as applied ("" without the annotation) */
	char *host;  /* the status hostname written */
	enum ccm_lb_type type;
	char name[33];
	uint64_t probe; /* the digest of its load balancer at the last probe; 0: none yet */
	char uid[64];	/* deleted: the Service whose load balancer was deleted */
	bool deleted, finalized; /* ... and its finalizer's removal was sent */
};

static void synced_free(void *p)
{
	struct synced *s = p;
	if (s) {
		free(s->tags);
		free(s->host);
	}
	free(s);
}

/* Kubernetes writes ----------------------------------------------------------------------- */

/* A merge patch of metadata.finalizers guarded by the stored resourceVersion (a conflict is
 * retried with backoff once the informer has the newer object): no GET, so the ClusterRole
 * of upstream's chart (services: list, watch, patch, update) is enough. */
static int set_finalizer(struct ccm *m, const cJSON *svc, bool add)
{
	cJSON *patch = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(patch, "metadata");
	cJSON *list = md ? cJSON_AddArrayToObject(md, "finalizers") : NULL;
	const char *rv = json_str(svc, "metadata.resourceVersion");
	struct kube_status st = {0};
	const cJSON *f;
	char *text = NULL;
	int r = -ENOMEM;

	if (add == ccm_lb_has_finalizer(svc)) {
		cJSON_Delete(patch);
		return 0;
	}
	if (!list || (rv && !cJSON_AddStringToObject(md, "resourceVersion", rv)))
		goto out;
	cJSON_ArrayForEach(f, json_find(svc, "metadata.finalizers"))
	{
		if (cJSON_IsString(f) && strcmp(f->valuestring, CCM_LB_FINALIZER) != 0)
			cJSON_AddItemToArray(list, cJSON_CreateString(f->valuestring));
	}
	if (add)
		cJSON_AddItemToArray(list, cJSON_CreateString(CCM_LB_FINALIZER));
	if (!(text = json_print(patch)))
		goto out;
	r = kube_patch(m->kc,
		       KUBE_REF(&kube_services, json_str(svc, "metadata.namespace"),
				json_str(svc, "metadata.name")),
		       KUBE_PATCH_MERGE, text, NULL, &st);
	if (r == -ENOENT && !add)
		r = 0;
	if (r < 0)
		log_error(add ? "failed to add the finalizer" : "failed to remove the finalizer",
			  KV_S("service", json_str(svc, "metadata.name")), KV_S("error", st.message),
			  KV_E(r));
out:
	free(text);
	cJSON_Delete(patch);
	return r;
}

/* With ret, *ret is the Service as the server holds it after the patch (NULL when nothing was
 * patched), so a following write can carry its resourceVersion. */
static int set_status(struct ccm *m, const cJSON *svc, const char *hostname, cJSON **ret)
{
	const char *cur = json_str(svc, "status.loadBalancer.ingress.0.hostname");
	_cleanup_buf_ struct buf patch = BUF_INIT(0);
	struct kube_status st = {0};
	int r;

	if ((hostname && cur && strcmp(cur, hostname) == 0) ||
	    (!hostname && !json_find(svc, "status.loadBalancer.ingress")))
		return 0;
	if (hostname && strcmp(hostname, "none") == 0) /* Deckhouse's `none` */
		r = buf_printf(&patch, "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":"
				       "\"0.0.0.0\",\"hostname\":\"none\"}]}}}");
	else if (hostname)
		r = buf_printf(&patch, "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"hostname\":"
				       "\"%s\"}]}}}",
			       hostname);
	else
		r = buf_printf(&patch, "{\"status\":{\"loadBalancer\":{\"ingress\":null}}}");
	if (r < 0)
		return r;
	r = kube_patch(m->kc,
		       KUBE_REF_SUB(&kube_services, json_str(svc, "metadata.namespace"),
				    json_str(svc, "metadata.name"), "status"),
		       KUBE_PATCH_MERGE, patch.data, ret, &st);
	if (r < 0 && r != -ENOENT)
		log_error("failed to update the load balancer status",
			  KV_S("service", json_str(svc, "metadata.name")), KV_S("error", st.message),
			  KV_E(r));
	return r == -ENOENT ? 0 : r;
}

/* Caches ---------------------------------------------------------------------------------- */

/* The eligible Nodes' instance IDs, sorted; with all, every Node's that has a providerID. */
static int node_ids(struct ccm *m, const struct ccm_lb_spec *s, bool all, char (**ret)[32],
		    size_t *n)
{
	struct kube_obj **objs = NULL;
	size_t n_objs = 0;
	int r;

	*n = 0;
	if ((r = kube_store_list(ccm_node_store(m), &objs, &n_objs)) < 0)
		return r;
	if (!(*ret = calloc(n_objs + 1, sizeof(**ret)))) {
		kube_objv_free(objs, n_objs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n_objs; i++)
		if (all ? ccm_parse_provider_id(json_str(objs[i]->json, "spec.providerID") ?: "",
						(*ret)[*n], 32) == 0
			: ccm_lb_node_eligible(objs[i]->json, s, (*ret)[*n], 32))
			(*n)++;
	kube_objv_free(objs, n_objs);
	qsort(*ret, *n, 32, (int (*)(const void *, const void *))strcmp);
	return 0;
}

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (h ^ 0xff) * 1099511628211ULL;
}

static uint64_t fingerprint(const cJSON *svc, const char (*ids)[32], size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	char *a = json_print(json_find(svc, "metadata.annotations"));
	char *sp = json_print(json_find(svc, "spec"));
	h = fnv(fnv(fnv(h, json_str(svc, "metadata.uid")), a), sp);
	free(a);
	free(sp);
	for (size_t i = 0; i < n; i++)
		h = fnv(h, ids[i]);
	return h;
}

/* The full re-check's time: deep_ns..2*deep_ns from now, spread by the Service's key. */
static int64_t deep_due(struct ccm_svc_ctl *ctl, const char *key)
{
	return now_mono_ns() + ctl->deep_ns + (int64_t)(fnv(0, key) % (uint64_t)ctl->deep_ns);
}

/* The last sync saw fp and the re-check is not due: the hostname it wrote (a copy), else NULL. */
static char *synced_fresh(struct ccm_svc_ctl *ctl, const char *key, uint64_t fp)
{
	pthread_mutex_lock(&ctl->lock);
	struct synced *s = kmap_get(&ctl->synced, key);
	char *r =
	    s && !s->deleted && s->fp == fp && now_mono_ns() < s->due ? strdup(s->host) : NULL;
	pthread_mutex_unlock(&ctl->lock);
	return r;
}

static int synced_put(struct ccm_svc_ctl *ctl, const char *key, struct synced *s)
{
	struct synced *old = NULL;
	if (ctl->synced.size >= CACHE_MAX)
		kmap_clear(&ctl->synced, synced_free);
	if (kmap_put(&ctl->synced, key, s, (void **)&old) < 0)
		return -ENOMEM;
	synced_free(old);
	return 0;
}

/* The time of the next full re-check (monotonic). */
static int64_t synced_set(struct ccm_svc_ctl *ctl, const char *key, uint64_t fp, const char *tags,
			  const struct ccm_svc_ensure *e)
{
	struct synced *s = calloc(1, sizeof(*s));
	char *t = strdup(tags), *h = strdup(e->dns);
	int64_t due = deep_due(ctl, key);
	pthread_mutex_lock(&ctl->lock);
	if (s && t && h) {
		*s = (struct synced){
		    .fp = fp, .due = due, .tags = t, .host = h, .type = e->spec.type};
		str_copy(s->name, sizeof(s->name), e->spec.name);
		s->probe = e->digest;
		if (synced_put(ctl, key, s) < 0)
			synced_free(s);
	} else {
		free(s);
		free(t);
		free(h);
		synced_free(kmap_remove(&ctl->synced, key)); /* the tags applied are unknown */
	}
	pthread_mutex_unlock(&ctl->lock);
	return due;
}

/* The load balancer of the Service uid was deleted (finalized: and the finalizer's removal
 * sent); what a sync had recorded goes. */
static void synced_deleted(struct ccm_svc_ctl *ctl, const char *key, const char *uid,
			   bool finalized)
{
	struct synced *s = calloc(1, sizeof(*s));
	pthread_mutex_lock(&ctl->lock);
	if (s) {
		*s = (struct synced){.deleted = true, .finalized = finalized};
		str_copy(s->uid, sizeof(s->uid), uid ?: "");
		if (synced_put(ctl, key, s) < 0)
			synced_free(s);
	} else {
		synced_free(kmap_remove(&ctl->synced, key));
	}
	pthread_mutex_unlock(&ctl->lock);
}

/* 1: the load balancer of the Service uid was deleted by this process, 2: and the finalizer's
 * removal was sent; 0: not known. */
static int synced_was_deleted(struct ccm_svc_ctl *ctl, const char *key, const char *uid)
{
	pthread_mutex_lock(&ctl->lock);
	struct synced *s = kmap_get(&ctl->synced, key);
	int r = s && s->deleted && uid && strcmp(s->uid, uid) == 0 ? 1 + s->finalized : 0;
	pthread_mutex_unlock(&ctl->lock);
	return r;
}

/* The tags this process last applied for the Service (a copy), NULL when unknown. */
static char *synced_tags(struct ccm_svc_ctl *ctl, const char *key)
{
	pthread_mutex_lock(&ctl->lock);
	struct synced *s = kmap_get(&ctl->synced, key);
	char *r = s && !s->deleted ? strdup(s->tags) : NULL;
	pthread_mutex_unlock(&ctl->lock);
	return r;
}

static void synced_forget(struct ccm_svc_ctl *ctl, const char *key)
{
	pthread_mutex_lock(&ctl->lock);
	synced_free(kmap_remove(&ctl->synced, key));
	pthread_mutex_unlock(&ctl->lock);
}

static void ensure_free(struct ccm_svc_ensure *e)
{
	free(e->ids);
	free(e->inst);
	free(e->subnets);
	free(e->prev_tags);
	ccm_elb_release(&e->elb);
	ccm_elb_plan_release(&e->plan);
	free(e);
}

/* Reconcile ------------------------------------------------------------------------------- */

/* Whatever was made for the Service, of any type (the type may have changed since). */
static int delete_all(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
		      struct aws_error *err)
{
	char(*all)[32] = NULL;
	size_t n_all = 0;
	int r;

	/* best effort: the target-group names need the ports and annotations as they are */
	if (ccm_lb_spec_parse(svc, &e->spec, e->err, sizeof(e->err)) < 0 ||
	    ccm_nlb_spec_parse(svc, &e->spec, ctl->m->cluster_id, &e->nlb, e->err,
			       sizeof(e->err)) < 0)
		e->nlb.n_p = 0;
	e->err[0] = 0;
	ccm_lb_name(json_str(svc, "metadata.uid"), e->spec.name);
	if ((r = ccm_svc_elb_delete(ctl, svc, err)) < 0 || (r = node_ids(ctl->m, NULL, true, &all, &n_all)) < 0)
		return r;
	if ((r = ccm_svc_nlb_delete(ctl, svc, e, (const char(*)[32])all, n_all, err)) == 0)
		r = ccm_svc_none_delete(ctl, svc, e, err);
	free(all);
	return r;
}

static int reconcile_delete(struct ccm_svc_ctl *ctl, const char *key, const cJSON *svc)
{
	struct ccm *m = ctl->m;
	struct aws_error err = {0};
	const char *uid = json_str(svc, "metadata.uid");
	struct ccm_svc_ensure *e;
	int r, done;

	if (!ccm_lb_has_finalizer(svc)) {
		synced_forget(ctl, key);
		return 0;
	}
	/* queued again by our own status patch before the informer has the finalizer's removal:
	 * nothing more to do (2), or only the Kubernetes writes that failed (1) */
	if ((done = synced_was_deleted(ctl, key, uid)) == 2)
		return 0;
	if (!ccm_may_act(m))
		return -ECANCELED;
	if (done)
		goto finalize;
	synced_forget(ctl, key);
	if (!(e = calloc(1, sizeof(*e))))
		return -ENOMEM;
	ccm_svc_event(m, svc, KUBE_EVENT_NORMAL, "DeletingLoadBalancer", "Deleting load balancer");
	r = delete_all(ctl, svc, e, &err);
	ensure_free(e);
	if (r < 0) {
		ccm_svc_event(m, svc, KUBE_EVENT_WARNING, "SyncLoadBalancerFailed",
			      "Error deleting load balancer (will retry): %s", err.message);
		log_error("deleting the load balancer failed", KV_S("service", key),
			  KV_S("error", err.message), KV_E(r));
		return r;
	}
	/* The upstream service controller's order: the Event, then the status, then the
	 * finalizer, which may let the Service go at once. The finalizer patch carries the
	 * resourceVersion the status patch returned, not the informer's, now stale. */
	ccm_svc_event(m, svc, KUBE_EVENT_NORMAL, "DeletedLoadBalancer", "Deleted load balancer");
	log_info("deleted the load balancer", KV_S("service", key));
	synced_deleted(ctl, key, uid, false);
finalize:;
	cJSON *fresh = NULL;
	if ((r = set_status(m, svc, NULL, &fresh)) >= 0)
		r = set_finalizer(m, fresh ?: svc, false);
	cJSON_Delete(fresh);
	if (r >= 0)
		synced_deleted(ctl, key, uid, true);
	return r;
}

/* The drift probe (PROBE_KEY): see the top of the file. */
static int probe_pass(struct ccm_svc_ctl *ctl, int64_t *requeue_after_ns)
{
	struct ccm_svc_probe *items = NULL;
	struct aws_error err = {0};
	struct kmap_entry *it;
	size_t n = 0, n_diff = 0, i;
	int r;

	*requeue_after_ns = ctl->probe_ns;
	if (!ccm_may_act(ctl->m))
		return 0;
	pthread_mutex_lock(&ctl->lock);
	items = calloc(ctl->synced.size + 1, sizeof(*items));
	for (it = kmap_first(&ctl->synced, &i); items && it; it = kmap_next(&ctl->synced, it, &i)) {
		const struct synced *s = it->val;
		if (s->deleted || (s->type != CCM_LB_CLASSIC && s->type != CCM_LB_NLB))
			continue;
		items[n].type = s->type;
		str_copy(items[n].name, sizeof(items[n].name), s->name);
		str_copy(items[n++].key, sizeof(items[0].key), it->key);
	}
	pthread_mutex_unlock(&ctl->lock);
	if (!items)
		return -ENOMEM;
	if (n && (r = ccm_svc_probe(ctl, items, n, &err)) < 0) {
		log_warn("describing the load balancers for drift failed; again next period",
			 KV_S("error", err.message), KV_E(r));
		free(items);
		return 0;
	}
	pthread_mutex_lock(&ctl->lock);
	for (size_t k = 0; k < n; k++) {
		struct synced *s = kmap_get(&ctl->synced, items[k].key);
		if (!s || s->deleted || s->type != items[k].type ||
		    strcmp(s->name, items[k].name) ||
		    (items[k].digest && items[k].digest == s->probe)) {
			items[k].key[0] = 0;
			continue;
		}
		s->probe = items[k].digest;
		s->due = 0;
		n_diff++;
	}
	pthread_mutex_unlock(&ctl->lock);
	for (size_t k = 0; k < n; k++)
		if (items[k].key[0])
			controller_add(ctl->c, items[k].key);
	if (n_diff)
		log_info("load balancers differ from the last look (or were not looked at yet); "
			 "re-checking them",
			 KV_I("count", (long long)n_diff), KV_I("looked_at", (long long)n));
	free(items);
	return 0;
}

int ccm_svc_reconcile(void *ud, const char *key, int64_t *requeue_after_ns)
{
	struct ccm_svc_ctl *ctl = ud;
	struct ccm *m = ctl->m;
	struct kube_obj *o = NULL;
	struct ccm_svc_ensure *e = NULL;
	struct aws_error err = {0};
	int r;

	if (strcmp(key, PROBE_KEY) == 0)
		return probe_pass(ctl, requeue_after_ns);
	if (!m->services || kube_store_get(kube_informer_store(m->services), key, &o) < 0) {
		synced_forget(ctl, key);
		return 0;
	}
	const cJSON *svc = o->json;
	if (!ccm_lb_wanted(svc)) {
		r = reconcile_delete(ctl, key, svc);
		goto out;
	}
	if (!(e = calloc(1, sizeof(*e)))) {
		r = -ENOMEM;
		goto out;
	}
	r = ccm_lb_spec_parse(svc, &e->spec, e->err, sizeof(e->err));
	if (r == -ENOTSUP) {
		r = 0; /* another controller's */
		goto out;
	}
	if (r == 0 && e->spec.type != CCM_LB_CLASSIC)
		r = ccm_nlb_spec_parse(svc, &e->spec, m->cluster_id, &e->nlb, e->err,
				       sizeof(e->err));
	if (r < 0) {
		ccm_svc_event(m, svc, KUBE_EVENT_WARNING, "SyncLoadBalancerFailed",
			  "Error syncing load balancer: %s", e->err);
		log_warn("load balancer rejected", KV_S("service", key), KV_S("reason", e->err));
		r = 0; /* again when the Service changes */
		goto out;
	}
	if ((r = node_ids(m, &e->spec, false, &e->ids, &e->n_ids)) < 0)
		goto out;
	uint64_t fp = fingerprint(svc, (const char(*)[32])e->ids, e->n_ids);
	char *host = ccm_lb_has_finalizer(svc) ? synced_fresh(ctl, key, fp) : NULL;
	if (host) {
		/* our own status patch's echo may not have reached the informer: the status as
		 * written then (a patch only when the Service shows another), no AWS call */
		r = set_status(m, svc, host, NULL);
		free(host);
		goto out;
	}
	if (!ccm_may_act(m)) {
		r = -ECANCELED;
		goto out;
	}
	if ((r = set_finalizer(m, svc, true)) < 0)
		goto out;
	const char *tags = ccm_lb_ann(svc, "additional-resource-tags") ?: "";
	e->prev_tags = synced_tags(ctl, key);
	e->tags_changed = !e->prev_tags || strcmp(e->prev_tags, tags) != 0;
	ccm_svc_event(m, svc, KUBE_EVENT_NORMAL, "EnsuringLoadBalancer", "Ensuring load balancer");
	if (e->n_ids == 0)
		ccm_svc_event(m, svc, KUBE_EVENT_WARNING, "UnAvailableLoadBalancer",
			  "There are no available nodes for LoadBalancer");
	r = e->spec.type == CCM_LB_NLB	   ? ccm_svc_nlb_ensure(ctl, svc, e, &err)
	    : e->spec.type == CCM_LB_NONE ? ccm_svc_none_ensure(ctl, svc, e, &err)
					  : ccm_svc_elb_ensure(ctl, svc, e, &err);
	if (r < 0) {
		ccm_svc_event(m, svc, KUBE_EVENT_WARNING, "SyncLoadBalancerFailed",
			  "Error syncing load balancer: %s", e->err[0] ? e->err : err.message);
		log_error("syncing the load balancer failed", KV_S("service", key),
			  KV_S("error", e->err[0] ? e->err : err.message), KV_E(r));
		if (r == -EINVAL && e->err[0])
			r = 0; /* rejected once AWS's state was known: again when the Service changes */
		goto out;
	}
	/* the drift probe's reference: the load balancer as AWS describes it now, when what the
	 * sync described changed since (made, or changed); a failure leaves it unknown (the next
	 * probe then re-checks the Service) */
	if (!e->digest && (e->spec.type == CCM_LB_CLASSIC || e->spec.type == CCM_LB_NLB)) {
		struct ccm_svc_probe one = {.type = e->spec.type};
		str_copy(one.name, sizeof(one.name), e->spec.name);
		if (ccm_svc_probe(ctl, &one, 1, &err) == 0)
			e->digest = one.digest;
	}
	if ((r = set_status(m, svc, e->dns, NULL)) < 0)
		goto out;
	int64_t due = synced_set(ctl, key, fp, tags, e);
	ccm_svc_event(m, svc, KUBE_EVENT_NORMAL, "EnsuredLoadBalancer", "Ensured load balancer");
	*requeue_after_ns = due - now_mono_ns() + NSEC_PER_SEC;
out:
	if (e)
		ensure_free(e);
	kube_obj_unref(o);
	return r;
}

/* Wiring ----------------------------------------------------------------------------------- */

int ccm_svc_new(struct ccm *m, struct ccm_svc_ctl **ret)
{
	struct ccm_svc_ctl *ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -ENOMEM;
	ctl->m = m;
	ctl->deep_ns = m->set.min_resync_period > 0 ? m->set.min_resync_period : DEFAULT_DEEP_NS;
	ctl->probe_ns = ctl->deep_ns / PROBES_PER_DEEP;
	if (ctl->probe_ns < NSEC_PER_SEC)
		ctl->probe_ns = NSEC_PER_SEC;
	pthread_mutex_init(&ctl->lock, NULL);
	pthread_cond_init(&ctl->refill_cv, NULL);
	*ret = ctl;
	return 0;
}

void ccm_svc_free(struct ccm_svc_ctl *ctl)
{
	if (!ctl)
		return;
	kmap_clear(&ctl->synced, synced_free);
	ccm_svc_cache_clear(ctl);
	pthread_cond_destroy(&ctl->refill_cv);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl);
}

static void queue_all(struct controller *c, struct ccm *m, int64_t delay)
{
	struct kube_obj **objs = NULL;
	size_t n = 0;
	char key[KUBE_KEY_MAX];

	if (!m->services || kube_store_list(kube_informer_store(m->services), &objs, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		if ((ccm_lb_wanted(objs[i]->json) || ccm_lb_has_finalizer(objs[i]->json)) &&
		    kube_obj_key(objs[i]->json, key, sizeof(key)) == 0)
			controller_add_after(c, key, delay);
	kube_objv_free(objs, n);
}

int ccm_svc_start(struct controller *c)
{
	struct ccm_svc_ctl *ctl = c->ud;
	ctl->c = c;
	queue_all(c, ctl->m, 0);
	controller_add_after(c, PROBE_KEY, ctl->probe_ns);
	log_info("started the service controller",
		 KV_I("probe_period_s", ctl->probe_ns / NSEC_PER_SEC),
		 KV_I("recheck_period_s", ctl->deep_ns / NSEC_PER_SEC));
	if (ccm_svc_nlb_sg_managed(ctl->m))
		log_info("NLBSecurityGroupMode = Managed: network load balancers made from now on "
			 "get a security group of their own");
	return 0;
}

void ccm_svc_changed(struct controller *c, const cJSON *old, const cJSON *svc)
{
	char key[KUBE_KEY_MAX];
	if (!controller_running(c) || (old && old == svc))
		return;
	if (svc && kube_obj_key(svc, key, sizeof(key)) == 0 &&
	    (ccm_lb_wanted(svc) || ccm_lb_has_finalizer(svc)))
		controller_add(c, key);
}

void ccm_svc_node_changed(struct controller *c, const cJSON *old, const cJSON *node)
{
	char a[32], b[32];
	struct ccm_svc_ctl *ctl = c->ud;
	if (!controller_running(c) || (old && old == node))
		return;
	bool ea = old && ccm_lb_node_eligible(old, NULL, a, sizeof(a));
	bool eb = node && ccm_lb_node_eligible(node, NULL, b, sizeof(b));
	const cJSON *la = old ? json_find(old, "metadata.labels") : NULL;
	const cJSON *lb = node ? json_find(node, "metadata.labels") : NULL;
	bool same_labels = (!la && !lb) || (la && lb && cJSON_Compare(la, lb, true));
	if (ea == eb && (!ea || strcmp(a, b) == 0) && same_labels)
		return;
	queue_all(c, ctl->m, NODE_TRIGGER_NS);
}

/* The Service informer's transform: what the controller reads. */
cJSON *ccm_svc_transform(void *ud, cJSON *obj)
{
	static const char *const keep[] = {
	    "metadata.uid",	  "metadata.annotations", "metadata.finalizers",
	    "metadata.deletionTimestamp", "spec",	  "status.loadBalancer",
	    NULL,
	};
	cJSON *p = kube_project(obj, keep);
	cJSON_Delete(obj);
	(void)ud;
	return p;
}
