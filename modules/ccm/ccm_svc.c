/* The service controller: keys are Services ("namespace/name") from the Service informer; every
 * Service is queued again when the set of Nodes a load balancer sends traffic to changes. One
 * reconcile of a Service of type LoadBalancer:
 *
 *   1. the spec (ccm_lb.c): a rejected one gets a Warning Event and nothing is made;
 *   2. when the Service, its annotations and the eligible Nodes are what the last successful
 *      sync saw (less than VERIFY_NS ago), nothing is called at all;
 *   3. the finalizer, before anything is made;
 *   4. the instances (DescribeInstances by ID, cached), the subnets (cached per VPC), the ELB's
 *      security group k8s-elb-<name> and its rules, the ELB (created, or planned against its
 *      description and changed), its attributes, the node security-group rules;
 *   5. status.loadBalancer.ingress[].hostname.
 * A Service no longer of type LoadBalancer, or being deleted, with the finalizer: the ELB, the
 * node rules and the group are deleted, then the finalizer is removed. */
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
#include "modules/ccm/ccm_controllers.h"
#include "modules/ccm/ccm_lb.h"
#include "modules/ccm/ccm_lb_aws.h"

#define VERIFY_NS (10 * 60 * NSEC_PER_SEC)
#define CACHE_TTL_NS (10 * 60 * NSEC_PER_SEC)
#define NODE_TRIGGER_NS (NSEC_PER_SEC)
#define CACHE_MAX 100000

struct synced {
	uint64_t fp;
	int64_t at;
};

struct cached_inst {
	struct ccm_lb_inst i;
	int64_t at;
};

struct cached_subnets {
	struct ccm_subnet *s;
	size_t n;
	int64_t at;
};

struct ccm_svc_ctl {
	struct ccm *m;
	struct controller *c;
	pthread_mutex_t lock;
	struct kmap synced;  /* Service key -> struct synced */
	struct kmap insts;   /* instance ID -> struct cached_inst */
	struct kmap subnets; /* VPC ID -> struct cached_subnets */
};

static void subnets_free(void *p)
{
	struct cached_subnets *cs = p;
	if (cs)
		free(cs->s);
	free(cs);
}

/* Events --------------------------------------------------------------------------------- */

static void svc_event(struct ccm *m, const cJSON *svc, const char *type, const char *reason,
		      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void svc_event(struct ccm *m, const cJSON *svc, const char *type, const char *reason,
		      const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ccm_eventv(m, svc, &kube_services, type, reason, fmt, ap);
	va_end(ap);
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

static int set_status(struct ccm *m, const cJSON *svc, const char *hostname)
{
	const char *cur = json_str(svc, "status.loadBalancer.ingress.0.hostname");
	_cleanup_buf_ struct buf patch = BUF_INIT(0);
	struct kube_status st = {0};
	int r;

	if ((hostname && cur && strcmp(cur, hostname) == 0) ||
	    (!hostname && !json_find(svc, "status.loadBalancer.ingress")))
		return 0;
	if (hostname)
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
		       KUBE_PATCH_MERGE, patch.data, NULL, &st);
	if (r < 0 && r != -ENOENT)
		log_error("failed to update the load balancer status",
			  KV_S("service", json_str(svc, "metadata.name")), KV_S("error", st.message),
			  KV_E(r));
	return r == -ENOENT ? 0 : r;
}

/* Caches ---------------------------------------------------------------------------------- */

/* The eligible Nodes' instance IDs, sorted. */
static int eligible_ids(struct ccm *m, const struct ccm_lb_spec *s, char (**ret)[32], size_t *n)
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
		if (ccm_lb_node_eligible(objs[i]->json, s, (*ret)[*n], 32))
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

static bool synced_fresh(struct ccm_svc_ctl *ctl, const char *key, uint64_t fp)
{
	pthread_mutex_lock(&ctl->lock);
	struct synced *s = kmap_get(&ctl->synced, key);
	bool r = s && s->fp == fp && now_mono_ns() - s->at < VERIFY_NS;
	pthread_mutex_unlock(&ctl->lock);
	return r;
}

static void synced_set(struct ccm_svc_ctl *ctl, const char *key, uint64_t fp)
{
	struct synced *s = malloc(sizeof(*s)), *old = NULL;
	pthread_mutex_lock(&ctl->lock);
	if (s) {
		*s = (struct synced){fp, now_mono_ns()};
		if (ctl->synced.size >= CACHE_MAX)
			kmap_clear(&ctl->synced, free);
		if (kmap_put(&ctl->synced, key, s, (void **)&old) < 0)
			free(s);
		free(old);
	}
	pthread_mutex_unlock(&ctl->lock);
}

static void synced_forget(struct ccm_svc_ctl *ctl, const char *key)
{
	pthread_mutex_lock(&ctl->lock);
	free(kmap_remove(&ctl->synced, key));
	pthread_mutex_unlock(&ctl->lock);
}

/* The instances' VPC and groups: described only when not cached (or the cache is old). */
static int instances(struct ccm_svc_ctl *ctl, const char (*ids)[32], size_t n,
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
	for (size_t i = 0; i < n; i++) {
		struct cached_inst *c = kmap_get(&ctl->insts, ids[i]);
		if (c && now - c->at < CACHE_TTL_NS)
			out[k++] = c->i;
		else
			str_copy(miss[n_miss++], 32, ids[i]);
	}
	pthread_mutex_unlock(&ctl->lock);
	if (n_miss &&
	    (r = ccm_lb_describe_instances(ccm_cloud_client(ctl->m->cloud), (const char(*)[32])miss,
					   n_miss, &got, &n_got, err)) < 0)
		goto out;
	pthread_mutex_lock(&ctl->lock);
	if (ctl->insts.size + n_got >= CACHE_MAX)
		kmap_clear(&ctl->insts, free);
	for (size_t i = 0; i < n_got; i++) {
		struct cached_inst *c = malloc(sizeof(*c)), *old = NULL;
		out[k++] = got[i];
		if (!c)
			continue;
		*c = (struct cached_inst){got[i], now};
		if (kmap_put(&ctl->insts, got[i].id, c, (void **)&old) < 0)
			free(c);
		free(old);
	}
	pthread_mutex_unlock(&ctl->lock);
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

/* Ensure ---------------------------------------------------------------------------------- */

struct ensure {
	struct ccm_lb_spec spec;
	char (*ids)[32];
	size_t n_ids;
	struct ccm_lb_inst *inst;
	size_t n_inst;
	struct ccm_subnet *subnets;
	size_t n_subnets;
	char chosen[CCM_LB_MAX_SUBNETS][32];
	size_t n_chosen;
	char sgs[CCM_LB_MAX_SGS + 1][32];
	size_t n_sgs;
	char managed_sg[32];
	struct ccm_sg_perm perms[CCM_LB_MAX_PERMS];
	struct ccm_sg_perm want[CCM_LB_MAX_PERMS];
	struct ccm_sg_perm add[CCM_LB_MAX_PERMS], del[CCM_LB_MAX_PERMS];
	struct ccm_elb elb;
	struct ccm_elb_plan plan;
	char err[512];
};

static void ensure_free(struct ensure *e)
{
	free(e->ids);
	free(e->inst);
	free(e->subnets);
	ccm_elb_release(&e->elb);
	ccm_elb_plan_release(&e->plan);
	free(e);
}

/* The ELB's own group k8s-elb-<name> and its ingress. */
static int ensure_elb_sg(struct ccm *m, struct ensure *e, const char *vpc, struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(m->cloud);
	char name[64], desc[400];
	size_t n_have = 0, n_want, n_add = 0, n_del = 0;
	struct ccm_sg_perm *add = e->add, *del = e->del;
	int r;

	snprintf(name, sizeof(name), "k8s-elb-%s", e->spec.name);
	r = ccm_sg_find(c, vpc, name, e->managed_sg, e->perms, CCM_LB_MAX_PERMS, &n_have, err);
	if (r == -ENOENT) {
		snprintf(desc, sizeof(desc), "Security group for Kubernetes ELB %s (%s)",
			 e->spec.name, e->spec.svc);
		r = ccm_sg_create(c, vpc, name, desc, m->cluster_id, e->spec.svc, e->managed_sg,
				  err);
		if (r == 0)
			log_info("created the load balancer's security group",
				 KV_S("service", e->spec.svc), KV_S("group", e->managed_sg));
	}
	if (r < 0)
		return r;
	n_want = ccm_lb_sg_rules(&e->spec, e->want, CCM_LB_MAX_PERMS);
	for (size_t i = 0; i < n_want; i++) {
		bool have = false;
		for (size_t k = 0; k < n_have && !have; k++)
			have = ccm_sg_perm_equal(&e->want[i], &e->perms[k]);
		if (!have)
			add[n_add++] = e->want[i];
	}
	for (size_t k = 0; k < n_have; k++) {
		bool want = false;
		for (size_t i = 0; i < n_want && !want; i++)
			want = ccm_sg_perm_equal(&e->want[i], &e->perms[k]);
		if (!want)
			del[n_del++] = e->perms[k];
	}
	if ((r = ccm_sg_ingress(c, e->managed_sg, add, n_add, false, err)) < 0 ||
	    (r = ccm_sg_ingress(c, e->managed_sg, del, n_del, true, err)) < 0)
		return r;
	return 0;
}

/* "All traffic from the ELB's group" on each instance's node group; stale ones revoked. */
static int ensure_node_rules(struct ccm *m, struct ensure *e, struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(m->cloud);
	char node_sgs[64][32], refs[64][32];
	size_t n_node_sgs = 0, n_refs = 0;
	struct ccm_sg_perm rule = {.proto = "-1", .from = -1, .to = -1};
	int r;

	str_copy(rule.group, sizeof(rule.group), e->sgs[0]);
	for (size_t i = 0; i < e->n_inst; i++) {
		char id[32];
		size_t n_perms = 0;
		bool dup = false, have = false;
		for (size_t k = 0; k < i && !dup; k++)
			dup = e->inst[k].n_sgs == e->inst[i].n_sgs &&
			      memcmp(e->inst[k].sgs, e->inst[i].sgs, e->inst[i].n_sgs * 32) == 0;
		if (dup)
			continue;
		r = ccm_lb_node_sg(c, &e->inst[i], m->cluster_id, id, e->perms, CCM_LB_MAX_PERMS,
				   &n_perms, err);
		if (r < 0) {
			log_warn("no single node security group for an instance; its rule is not "
				 "made",
				 KV_S("instance", e->inst[i].id), KV_E(r));
			continue;
		}
		for (size_t k = 0; k < n_perms && !have; k++)
			have = ccm_sg_perm_equal(&e->perms[k], &rule);
		if (!have && (r = ccm_sg_ingress(c, id, &rule, 1, false, err)) < 0 && r != -EEXIST)
			return r;
		if (n_node_sgs < 64)
			str_copy(node_sgs[n_node_sgs++], 32, id);
	}
	if ((r = ccm_sg_referencing(c, rule.group, refs, 64, &n_refs, err)) < 0)
		return r;
	for (size_t i = 0; i < n_refs; i++) {
		bool keep = strcmp(refs[i], rule.group) == 0;
		for (size_t k = 0; k < n_node_sgs && !keep; k++)
			keep = strcmp(refs[i], node_sgs[k]) == 0;
		if (!keep && (r = ccm_sg_ingress(c, refs[i], &rule, 1, true, err)) < 0 && r != -ENOENT)
			return r;
	}
	return 0;
}

static int ensure_lb(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ensure *e,
		     struct aws_error *err)
{
	struct ccm *m = ctl->m;
	struct aws_client *c = ccm_cloud_client(m->cloud);
	const char *vpc = m->cfg->vpc;
	bool created = false;
	int r;

	if ((r = instances(ctl, (const char(*)[32])e->ids, e->n_ids, &e->inst, &e->n_inst, err)) <
	    0)
		return r;
	for (size_t i = 0; (!vpc || !*vpc) && i < e->n_inst; i++)
		if (e->inst[i].vpc[0])
			vpc = e->inst[i].vpc;
	if (!vpc || !*vpc) {
		snprintf(e->err, sizeof(e->err), "no VPC: set [Global] VPC or add a Node");
		return -ENOENT;
	}
	if ((r = subnets(ctl, vpc, &e->subnets, &e->n_subnets, err)) < 0)
		return r;
	if ((r = ccm_lb_pick_subnets(e->subnets, e->n_subnets, &e->spec, e->chosen,
				     CCM_LB_MAX_SUBNETS, &e->n_chosen, e->err,
				     sizeof(e->err))) < 0)
		return r;
	if (e->spec.n_sgs) {
		for (size_t i = 0; i < e->spec.n_sgs; i++)
			str_copy(e->sgs[e->n_sgs++], 32, e->spec.sgs[i]);
	} else if (m->cfg->elb_security_group && *m->cfg->elb_security_group) {
		str_copy(e->sgs[e->n_sgs++], 32, m->cfg->elb_security_group);
	} else {
		if ((r = ensure_elb_sg(m, e, vpc, err)) < 0)
			return r;
		str_copy(e->sgs[e->n_sgs++], 32, e->managed_sg);
	}
	for (size_t i = 0; i < e->spec.n_extra_sgs && e->n_sgs <= CCM_LB_MAX_SGS; i++)
		str_copy(e->sgs[e->n_sgs++], 32, e->spec.extra_sgs[i]);

	r = ccm_elb_describe(c, e->spec.name, &e->elb, err);
	if (r == 0) {
		if ((r = ccm_elb_plan_make(&e->spec, &e->elb, (const char(*)[32])e->chosen,
					   e->n_chosen, (const char(*)[32])e->sgs, e->n_sgs,
					   (const char(*)[32])e->ids, e->n_ids, &e->plan)) < 0)
			return r;
		if (e->plan.recreate) {
			svc_event(m, svc, KUBE_EVENT_NORMAL, "DeletingLoadBalancer",
				  "Deleting load balancer: the scheme changed");
			if ((r = ccm_elb_delete(c, e->spec.name, err)) < 0)
				return r;
			ccm_elb_release(&e->elb);
			ccm_elb_plan_release(&e->plan);
			r = -ENOENT;
		}
	}
	if (r == -ENOENT) {
		if ((r = ccm_elb_create(c, &e->spec, m->cluster_id, (const char(*)[32])e->chosen,
					e->n_chosen, (const char(*)[32])e->sgs, e->n_sgs, err)) < 0)
			return r;
		log_info("created the load balancer", KV_S("service", e->spec.svc),
			 KV_S("name", e->spec.name));
		created = true;
		if ((r = ccm_elb_describe(c, e->spec.name, &e->elb, err)) < 0)
			return r;
		if ((r = ccm_elb_plan_make(&e->spec, &e->elb, (const char(*)[32])e->chosen,
					   e->n_chosen, (const char(*)[32])e->sgs, e->n_sgs,
					   (const char(*)[32])e->ids, e->n_ids, &e->plan)) < 0)
			return r;
		e->plan.hc = true;
	}
	if (r < 0)
		return r;
	bool hosts = e->plan.n_reg || e->plan.n_dereg;
	if ((r = ccm_elb_apply(c, &e->spec, &e->plan, (const char(*)[32])e->sgs, e->n_sgs, err)) <
	    0)
		return r;
	if (hosts && !created)
		svc_event(m, svc, KUBE_EVENT_NORMAL, "UpdatedLoadBalancer",
			  "Updated load balancer with new hosts (%zu registered, %zu deregistered)",
			  e->plan.n_reg, e->plan.n_dereg);
	/* attributes are not described back: set when made and whenever the Service changed */
	if ((r = ccm_elb_attributes(c, &e->spec, err)) < 0)
		return r;
	if (!m->cfg->disable_sg_ingress && (r = ensure_node_rules(m, e, err)) < 0)
		return r;
	return 0;
}

/* Delete ---------------------------------------------------------------------------------- */

static int delete_lb(struct ccm_svc_ctl *ctl, const cJSON *svc, struct aws_error *err)
{
	struct ccm *m = ctl->m;
	struct aws_client *c = ccm_cloud_client(m->cloud);
	char name[33], sg_name[64], sg[32], refs[64][32];
	struct ccm_sg_perm *perms = calloc(CCM_LB_MAX_PERMS, sizeof(*perms));
	size_t n_perms = 0, n_refs = 0;
	int r;

	if (!perms)
		return -ENOMEM;
	ccm_lb_name(json_str(svc, "metadata.uid"), name);
	if ((r = ccm_elb_delete(c, name, err)) < 0)
		goto out;
	snprintf(sg_name, sizeof(sg_name), "k8s-elb-%s", name);
	r = ccm_sg_find(c, NULL, sg_name, sg, perms, CCM_LB_MAX_PERMS, &n_perms, err);
	if (r == -ENOENT) {
		r = 0;
		goto out;
	}
	if (r < 0 || (r = ccm_sg_referencing(c, sg, refs, 64, &n_refs, err)) < 0)
		goto out;
	for (size_t i = 0; i < n_refs; i++) {
		struct ccm_sg_perm rule = {.proto = "-1", .from = -1, .to = -1};
		str_copy(rule.group, sizeof(rule.group), sg);
		if (strcmp(refs[i], sg) != 0 &&
		    (r = ccm_sg_ingress(c, refs[i], &rule, 1, true, err)) < 0 && r != -ENOENT)
			goto out;
	}
	/* DependencyViolation while the ELB's interfaces go away: retried with backoff */
	r = ccm_sg_delete(c, sg, err);
	if (r == 0)
		log_info("deleted the load balancer's security group",
			 KV_S("service", json_str(svc, "metadata.name")), KV_S("group", sg));
out:
	free(perms);
	return r;
}

/* Reconcile ------------------------------------------------------------------------------- */

static int reconcile_delete(struct ccm_svc_ctl *ctl, const char *key, const cJSON *svc)
{
	struct ccm *m = ctl->m;
	struct aws_error err = {0};
	int r;

	synced_forget(ctl, key);
	if (!ccm_lb_has_finalizer(svc))
		return 0;
	if (!ccm_may_act(m))
		return -ECANCELED;
	svc_event(m, svc, KUBE_EVENT_NORMAL, "DeletingLoadBalancer", "Deleting load balancer");
	if ((r = delete_lb(ctl, svc, &err)) < 0) {
		svc_event(m, svc, KUBE_EVENT_WARNING, "SyncLoadBalancerFailed",
			  "Error deleting load balancer (will retry): %s", err.message);
		log_error("deleting the load balancer failed", KV_S("service", key),
			  KV_S("error", err.message), KV_E(r));
		return r;
	}
	if ((r = set_status(m, svc, NULL)) < 0 || (r = set_finalizer(m, svc, false)) < 0)
		return r;
	svc_event(m, svc, KUBE_EVENT_NORMAL, "DeletedLoadBalancer", "Deleted load balancer");
	log_info("deleted the load balancer", KV_S("service", key));
	return 0;
}

int ccm_svc_reconcile(void *ud, const char *key, int64_t *requeue_after_ns)
{
	struct ccm_svc_ctl *ctl = ud;
	struct ccm *m = ctl->m;
	struct kube_obj *o = NULL;
	struct ensure *e = NULL;
	struct aws_error err = {0};
	int r;

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
	if (r == 0 && e->spec.type != CCM_LB_CLASSIC) {
		snprintf(e->err, sizeof(e->err), "load balancer type %s is not supported yet",
			 e->spec.type == CCM_LB_NLB ? "nlb" : "none");
		r = -EINVAL;
	}
	if (r < 0) {
		svc_event(m, svc, KUBE_EVENT_WARNING, "SyncLoadBalancerFailed",
			  "Error syncing load balancer: %s", e->err);
		log_warn("load balancer rejected", KV_S("service", key), KV_S("reason", e->err));
		r = 0; /* again when the Service changes */
		goto out;
	}
	if ((r = eligible_ids(m, &e->spec, &e->ids, &e->n_ids)) < 0)
		goto out;
	uint64_t fp = fingerprint(svc, (const char(*)[32])e->ids, e->n_ids);
	if (synced_fresh(ctl, key, fp) && json_str(svc, "status.loadBalancer.ingress.0.hostname") &&
	    ccm_lb_has_finalizer(svc)) {
		r = 0;
		goto out;
	}
	if (!ccm_may_act(m)) {
		r = -ECANCELED;
		goto out;
	}
	if ((r = set_finalizer(m, svc, true)) < 0)
		goto out;
	svc_event(m, svc, KUBE_EVENT_NORMAL, "EnsuringLoadBalancer", "Ensuring load balancer");
	if (e->n_ids == 0)
		svc_event(m, svc, KUBE_EVENT_WARNING, "UnAvailableLoadBalancer",
			  "There are no available nodes for LoadBalancer");
	if ((r = ensure_lb(ctl, svc, e, &err)) < 0) {
		svc_event(m, svc, KUBE_EVENT_WARNING, "SyncLoadBalancerFailed",
			  "Error syncing load balancer: %s", e->err[0] ? e->err : err.message);
		log_error("syncing the load balancer failed", KV_S("service", key),
			  KV_S("error", e->err[0] ? e->err : err.message), KV_E(r));
		goto out;
	}
	if ((r = set_status(m, svc, e->elb.dns)) < 0)
		goto out;
	synced_set(ctl, key, fp);
	svc_event(m, svc, KUBE_EVENT_NORMAL, "EnsuredLoadBalancer", "Ensured load balancer");
	*requeue_after_ns = VERIFY_NS + NSEC_PER_SEC;
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
	pthread_mutex_init(&ctl->lock, NULL);
	*ret = ctl;
	return 0;
}

void ccm_svc_free(struct ccm_svc_ctl *ctl)
{
	if (!ctl)
		return;
	kmap_clear(&ctl->synced, free);
	kmap_clear(&ctl->insts, free);
	kmap_clear(&ctl->subnets, subnets_free);
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
	log_info("started the service controller");
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
