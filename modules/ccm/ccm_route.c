/* The route controller: a pass every --route-reconciliation-period, and soon after a Node's
 * pod CIDRs or providerID change or a Node goes away. One pass:
 *
 *   1. DescribeRouteTables: the cluster's tables (all of them, not just one as upstream);
 *   2. the plan (ccm_routes.c) from the Nodes in the informer's store;
 *   3. only when the plan creates or replaces routes, or finds routes to instances no Node
 *      names: one DescribeInstances for those instances (100 IDs per call);
 *   4. the changes, deletes first; the source/destination check is turned off before an
 *      instance gets its first route. A route whose target cannot be mapped is skipped, and a
 *      failed change does not stop the others: the pass reports an error and is retried with
 *      backoff, and the next pass starts again from what AWS says. */
#include <errno.h>
#include <pthread.h>
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
#include "common/kube/workqueue.h"
#include "common/metrics/metrics.h"
#include "modules/ccm/ccm_controllers.h"

#define TRIGGER_DELAY_NS (500 * NSEC_PER_MSEC)
/* how long an instance found to belong to someone else is not described again */
#define FOREIGN_TTL_NS (10 * 60 * NSEC_PER_SEC)
#define FOREIGN_MAX 10000
#define ENIS_MAX 100000

struct ccm_route_ctl {
	struct ccm *m;
	pthread_mutex_t lock;
	struct kmap enis;    /* ENI ID -> instance ID (malloc'd), learned from descriptions */
	struct kmap foreign; /* instance ID -> int64_t expiry (malloc'd): routes left alone */
};

static bool foreign_known(struct ccm_route_ctl *ctl, const char *id)
{
	pthread_mutex_lock(&ctl->lock);
	int64_t *exp = kmap_get(&ctl->foreign, id);
	bool r = exp && *exp > now_mono_ns();
	pthread_mutex_unlock(&ctl->lock);
	return r;
}

static void foreign_add(struct ccm_route_ctl *ctl, const char *id)
{
	int64_t *exp = malloc(sizeof(*exp)), *old = NULL;
	if (!exp)
		return;
	*exp = now_mono_ns() + FOREIGN_TTL_NS;
	pthread_mutex_lock(&ctl->lock);
	if (ctl->foreign.size >= FOREIGN_MAX)
		kmap_clear(&ctl->foreign, free);
	if (kmap_put(&ctl->foreign, id, exp, (void **)&old) < 0)
		free(exp);
	free(old);
	pthread_mutex_unlock(&ctl->lock);
}

static struct metric *route_ops;

/* The Nodes' routes and the instance -> Node map of one pass. */
struct pass {
	struct ccm_route_ctl *ctl;
	struct kube_obj **objs;
	size_t n_objs;
	struct ccm_route_want *want;
	size_t n_want;
	char (*want_ids)[64];
	struct kmap node_of_id; /* instance ID -> Node name (pointers into objs) */
};

static const char *node_of(void *ud, const char *id)
{
	struct pass *p = ud;
	const char *n = kmap_get(&p->node_of_id, id);
	if (n || !id || strncmp(id, "eni-", 4) != 0)
		return n;
	/* an ENI route: through the interfaces seen in earlier descriptions */
	pthread_mutex_lock(&p->ctl->lock);
	const char *inst = kmap_get(&p->ctl->enis, id);
	n = inst ? kmap_get(&p->node_of_id, inst) : NULL;
	pthread_mutex_unlock(&p->ctl->lock);
	return n;
}

static void pass_release(struct pass *p)
{
	kmap_clear(&p->node_of_id, NULL);
	free(p->want);
	free(p->want_ids);
	kube_objv_free(p->objs, p->n_objs);
}

static const cJSON *pass_node(const struct pass *p, const char *name)
{
	for (size_t i = 0; i < p->n_objs; i++) {
		const char *n = json_str(p->objs[i]->json, "metadata.name");
		if (n && strcmp(n, name) == 0)
			return p->objs[i]->json;
	}
	return NULL;
}

static int pass_collect(struct pass *p, struct ccm *m)
{
	size_t cap = 0;
	int r;

	if ((r = kube_store_list(ccm_node_store(m), &p->objs, &p->n_objs)) < 0)
		return r;
	if (p->n_objs && !(p->want_ids = calloc(p->n_objs, sizeof(*p->want_ids))))
		return -ENOMEM;
	for (size_t i = 0; i < p->n_objs; i++) {
		const cJSON *n = p->objs[i]->json;
		const char *name = json_str(n, "metadata.name");
		if (!name || ccm_node_instance_id(n, p->want_ids[i], sizeof(p->want_ids[i])) < 0)
			continue; /* no providerID yet (or another provider's): no route */
		if ((r = kmap_put(&p->node_of_id, p->want_ids[i], (void *)name, NULL)) < 0)
			return r;
		const cJSON *cidrs = json_find(n, "spec.podCIDRs"), *c;
		const char *single = json_str(n, "spec.podCIDR");
		size_t k = cJSON_GetArraySize(cidrs);
		if (k == 0 && single && *single)
			k = 1;
		if (p->n_want + k > cap) {
			cap = (p->n_want + k) * 2;
			struct ccm_route_want *w = reallocarray(p->want, cap, sizeof(*w));
			if (!w)
				return -ENOMEM;
			p->want = w;
		}
		if (cJSON_GetArraySize(cidrs) > 0) {
			cJSON_ArrayForEach(c, cidrs)
			{
				if (cJSON_IsString(c))
					p->want[p->n_want++] = (struct ccm_route_want){
					    name, p->want_ids[i], c->valuestring};
			}
		} else if (single && *single) {
			p->want[p->n_want++] =
			    (struct ccm_route_want){name, p->want_ids[i], single};
		}
	}
	return 0;
}

static void learn_enis(struct ccm_route_ctl *ctl, const struct ec2_instance *inst, size_t n)
{
	pthread_mutex_lock(&ctl->lock);
	if (ctl->enis.size > ENIS_MAX)
		kmap_clear(&ctl->enis, free); /* relearned from the next descriptions */
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < inst[i].n_enis; k++) {
			char *v = inst[i].enis[k].id ? strdup(inst[i].id) : NULL, *old = NULL;
			if (!v || kmap_put(&ctl->enis, inst[i].enis[k].id, v, (void **)&old) < 0)
				free(v);
			free(old);
		}
	pthread_mutex_unlock(&ctl->lock);
}

static const struct ec2_instance *find_inst(const struct ec2_instance *l, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(l[i].id, id) == 0)
			return &l[i];
	return NULL;
}

/* Upstream's updateNetworkingCondition: NetworkUnavailable False (RouteCreated) on a Node whose
 * routes are all in place, True (NoRouteCreated) on one whose route could not be made; only
 * when the condition says otherwise. Returns the number of failed patches. */
static unsigned update_conditions(struct ccm *m, struct pass *p, const struct ccm_route_plan *plan,
				  const bool *op_ok)
{
	struct kmap unrouted = KMAP_INIT, wanted = KMAP_INIT;
	unsigned failed = 0;
	char now[40];

	for (size_t k = 0; k < p->n_want; k++)
		kmap_put(&wanted, p->want[k].node, (void *)1, NULL);
	rfc3339_format(now_real_ns(), 0, now, sizeof(now));
	for (size_t i = 0; i < plan->n_ops; i++)
		if (plan->ops[i].kind != CCM_ROP_DELETE && !op_ok[i] && plan->ops[i].node[0])
			kmap_put(&unrouted, plan->ops[i].node, (void *)1, NULL);
	for (size_t i = 0; i < plan->n_blocked; i++)
		kmap_put(&unrouted, plan->blocked[i].node, (void *)1, NULL);
	for (size_t i = 0; i < p->n_objs; i++) {
		const cJSON *n = p->objs[i]->json;
		const char *name = json_str(n, "metadata.name");
		if (!name || !kmap_get(&wanted, name))
			continue;
		bool created = !kmap_get(&unrouted, name);
		const char *cur = NULL;
		const cJSON *c;
		cJSON_ArrayForEach(c, json_find(n, "status.conditions"))
		{
			const char *t = json_str(c, "type");
			if (t && strcmp(t, "NetworkUnavailable") == 0)
				cur = json_str(c, "status");
		}
		if (cur && strcmp(cur, created ? "False" : "True") == 0)
			continue;
		_cleanup_buf_ struct buf patch = BUF_INIT(0);
		struct kube_status st = {0};
		if (buf_printf(&patch,
			       "{\"status\":{\"conditions\":[{\"type\":\"NetworkUnavailable\","
			       "\"status\":\"%s\",\"reason\":\"%s\",\"message\":\"%s\","
			       "\"lastTransitionTime\":\"%s\"}]}}",
			       created ? "False" : "True",
			       created ? "RouteCreated" : "NoRouteCreated",
			       created ? "RouteController created a route"
				       : "RouteController failed to create a route",
			       now) < 0) {
			failed++;
			continue;
		}
		int r = kube_patch(m->kc, KUBE_REF_SUB(&kube_nodes, NULL, name, "status"),
				   KUBE_PATCH_STRATEGIC, patch.data, NULL, &st);
		if (r < 0 && r != -ENOENT) {
			log_error("failed to set the NetworkUnavailable condition",
				  KV_S("node", name), KV_S("error", st.message), KV_E(r));
			failed++;
		} else if (r == 0) {
			log_v(2, "set the NetworkUnavailable condition", KV_S("node", name),
			      KV_B("routes_created", created));
		}
	}
	kmap_clear(&unrouted, NULL);
	kmap_clear(&wanted, NULL);
	return failed;
}

/* One pass; its period is *requeue_after's default, 0 on a failure (the backoff decides). */
int ccm_route_pass(void *ud, const char *key, int64_t *requeue_after)
{
	struct ccm_route_ctl *ctl = ud;
	struct ccm *m = ctl->m;
	struct pass p = {.ctl = ctl};
	struct ccm_route_table *tables = NULL;
	struct ccm_route_plan plan = {0};
	struct ec2_instance *inst = NULL;
	const char **ids = NULL;
	char(*done_sdc)[64] = NULL;
	size_t n_tables = 0, n_inst = 0, n_ids = 0, n_done = 0;
	struct aws_error err = {0};
	unsigned failed = 0, applied = 0, skipped = 0;
	bool *op_ok = NULL;
	int r;

	(void)key;
	if ((r = pass_collect(&p, m)) < 0)
		goto out;
	if ((r = ccm_cloud_route_tables(m->cloud, m->cluster_id, &tables, &n_tables, &err)) < 0) {
		log_error("listing the route tables failed", KV_S("error", err.message), KV_E(r));
		goto fail;
	}
	if (n_tables == 0) {
		log_warn("no route table is tagged for this cluster; routes are not configured",
			 KV_S("cluster", m->cluster_id ? m->cluster_id : ""));
		goto out;
	}
	if ((r = ccm_route_plan_make(tables, n_tables, p.want, p.n_want, m->cluster_cidrs,
				     m->n_cluster_cidrs, node_of, &p, &plan)) < 0)
		goto out;

	/* the instances to describe: targets of new routes, and orphans' instances */
	if (!(ids = calloc(plan.n_ops + plan.n_orphans + 1, sizeof(*ids))) ||
	    !(done_sdc = calloc(plan.n_ops + 1, sizeof(*done_sdc)))) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < plan.n_ops + plan.n_orphans; i++) {
		const char *id =
		    i < plan.n_ops
			? (plan.ops[i].kind == CCM_ROP_DELETE ? NULL : plan.ops[i].instance_id)
			: plan.orphans[i - plan.n_ops].instance_id;
		bool dup = !id || !*id || (i >= plan.n_ops && foreign_known(ctl, id));
		for (size_t k = 0; k < n_ids && !dup; k++)
			dup = strcmp(ids[k], id) == 0;
		if (!dup)
			ids[n_ids++] = id;
	}
	if (n_ids && (r = ccm_cloud_describe_ids(m->cloud, ids, n_ids, &inst, &n_inst, &err)) < 0) {
		log_error("describing route targets failed", KV_S("error", err.message), KV_E(r));
		goto fail;
	}
	learn_enis(ctl, inst, n_inst);

	/* orphans: delete when the instance is gone or is this cluster's (its Node is gone) */
	for (size_t i = 0; i < plan.n_orphans && ccm_may_act(m); i++) {
		const struct ccm_route_orphan *o = &plan.orphans[i];
		if (foreign_known(ctl, o->instance_id)) {
			skipped++;
			continue;
		}
		const struct ec2_instance *in = find_inst(inst, n_inst, o->instance_id);
		if (!ccm_route_orphan_delete(in, m->cluster_id)) {
			log_info("leaving a route to an instance of another owner",
				 KV_S("table", o->table), KV_S("cidr", o->cidr),
				 KV_S("instance", o->instance_id));
			foreign_add(ctl, o->instance_id);
			skipped++;
			continue;
		}
		log_info("deleting route of a node that is gone", KV_S("table", o->table),
			 KV_S("cidr", o->cidr), KV_S("instance", o->instance_id));
		if ((r = ccm_cloud_delete_route(m->cloud, o->table, o->cidr, o->v6, &err)) < 0) {
			log_error("failed to delete route", KV_S("table", o->table),
				  KV_S("cidr", o->cidr), KV_S("error", err.message), KV_E(r));
			failed++;
		} else {
			applied++;
			metric_inc(route_ops, "delete");
		}
	}
	if (!(op_ok = calloc(plan.n_ops + 1, sizeof(*op_ok)))) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < plan.n_ops && ccm_may_act(m); i++) {
		const struct ccm_route_op *op = &plan.ops[i];
		if (op->kind == CCM_ROP_DELETE) {
			log_info("deleting route", KV_S("table", op->table), KV_S("cidr", op->cidr),
				 KV_S("reason", op->why));
			r = ccm_cloud_delete_route(m->cloud, op->table, op->cidr, op->v6, &err);
		} else {
			const struct ec2_instance *in = find_inst(inst, n_inst, op->instance_id);
			if (!in || !ccm_instance_exists(in)) {
				log_warn("skipping a route to an instance that cannot be found",
					 KV_S("node", op->node), KV_S("instance", op->instance_id),
					 KV_S("cidr", op->cidr));
				skipped++;
				continue;
			}
			bool sdc_done = false;
			for (size_t k = 0; k < n_done && !sdc_done; k++)
				sdc_done = strcmp(done_sdc[k], in->id) == 0;
			if (!sdc_done) {
				if ((r = ccm_cloud_disable_src_dst_check(m->cloud, in, &err)) < 0) {
					log_error("failed to turn the source/destination check off",
						  KV_S("instance", in->id),
						  KV_S("error", err.message), KV_E(r));
					failed++;
					continue;
				}
				if (r > 0)
					log_info("turned the source/destination check off",
						 KV_S("instance", in->id));
				str_copy(done_sdc[n_done++], sizeof(done_sdc[0]), in->id);
			}
			log_info(op->kind == CCM_ROP_CREATE ? "creating route" : "replacing route",
				 KV_S("table", op->table), KV_S("cidr", op->cidr),
				 KV_S("node", op->node), KV_S("instance", in->id),
				 KV_S("reason", op->why));
			r = ccm_cloud_put_route(m->cloud, op->table, op->cidr, op->v6, in,
						op->kind == CCM_ROP_REPLACE, &err);
		}
		if (r < 0) {
			log_error("route change failed", KV_S("table", op->table),
				  KV_S("cidr", op->cidr), KV_S("op", ccm_route_op_name(op->kind)),
				  KV_S("error", err.message), KV_E(r));
			failed++;
			const cJSON *n = op->node[0] ? pass_node(&p, op->node) : NULL;
			if (n)
				ccm_node_event(m, n, KUBE_EVENT_WARNING, "FailedToCreateRoute",
					       "Could not create route %s in %s for node %s: %s",
					       op->cidr, op->table, op->node, err.message);
		} else {
			applied++;
			op_ok[i] = true;
			metric_inc(route_ops, ccm_route_op_name(op->kind));
		}
	}
	if (ccm_may_act(m))
		failed += update_conditions(m, &p, &plan, op_ok);
	log_v(applied || failed ? 1 : 4, "route pass done", KV_U("tables", n_tables),
	      KV_U("routes_wanted", p.n_want), KV_U("applied", applied), KV_U("failed", failed),
	      KV_U("skipped", skipped), KV_U("conflicts", plan.conflicts),
	      KV_U("invalid", plan.invalid));
	r = failed ? -EAGAIN : 0;
	if (failed)
		goto fail;
	goto out;
fail:
	*requeue_after = 0; /* the workqueue retries with backoff */
	if (r >= 0)
		r = -EAGAIN;
out:
	ccm_instances_free(inst, n_inst);
	free(ids);
	free(done_sdc);
	free(op_ok);
	ccm_route_plan_release(&plan);
	ccm_route_tables_free(tables, n_tables);
	pass_release(&p);
	return r;
}

int ccm_route_new(struct ccm *m, struct ccm_route_ctl **ret)
{
	struct ccm_route_ctl *ctl = calloc(1, sizeof(*ctl));

	if (!ctl)
		return -ENOMEM;
	ctl->m = m;
	pthread_mutex_init(&ctl->lock, NULL);
	*ret = ctl;
	return 0;
}

void ccm_route_free(struct ccm_route_ctl *ctl)
{
	if (!ctl)
		return;
	kmap_clear(&ctl->enis, free);
	kmap_clear(&ctl->foreign, free);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl);
}

int ccm_route_start(struct controller *c)
{
	struct ccm_route_ctl *ctl = c->ud;

	if (!route_ops)
		route_ops = metric_counter("aws_k8s_ccm_route_changes_total",
					   "Route table changes made by the route controller.",
					   (const char *[]){"op", NULL});
	log_info("started the route controller", KV_U("cluster_cidrs", ctl->m->n_cluster_cidrs));
	return 0;
}

static bool same_json(const cJSON *a, const cJSON *b)
{
	if (!a || !b)
		return a == b;
	return cJSON_Compare(a, b, true);
}

void ccm_route_changed(struct controller *c, const cJSON *old, const cJSON *node)
{
	if (!controller_running(c))
		return;
	/* deletions (node NULL), new Nodes and changed CIDRs or providerIDs trigger a pass */
	if (old && node && old != node &&
	    same_json(json_find(old, "spec.podCIDRs"), json_find(node, "spec.podCIDRs")) &&
	    same_json(json_find(old, "spec.podCIDR"), json_find(node, "spec.podCIDR")) &&
	    same_json(json_find(old, "spec.providerID"), json_find(node, "spec.providerID")))
		return;
	if (old && node && old == node)
		return;
	controller_add_after(c, c->resync_key, TRIGGER_DELAY_NS);
}
