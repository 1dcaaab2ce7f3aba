/* The service controller's classic ELB (see ccm_svc.h): its security group k8s-elb-<name> and
 * rules, the ELB (created, or planned against its description and changed), its attributes,
 * the node security-group rules; and their deletion. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/kube/events.h"
#include "modules/ccm/ccm_svc.h"

/* The ELB's own group k8s-elb-<name> and its ingress. */
static int ensure_elb_sg(struct ccm *m, struct ccm_svc_ensure *e, const char *vpc, struct aws_error *err)
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
static int ensure_node_rules(struct ccm *m, struct ccm_svc_ensure *e, struct aws_error *err)
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

int ccm_svc_elb_ensure(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
		       struct aws_error *err)
{
	struct ccm *m = ctl->m;
	struct aws_client *c = ccm_cloud_client(m->cloud);
	const char *vpc;
	bool created = false;
	int r;

	if ((r = ccm_svc_place(ctl, e, err)) < 0)
		return r;
	vpc = e->vpc;
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
			ccm_svc_event(m, svc, KUBE_EVENT_NORMAL, "DeletingLoadBalancer",
				  "Deleting load balancer: the scheme changed");
			if ((r = ccm_elb_delete(c, e->spec.name, err)) < 0)
				return r;
			ccm_elb_release(&e->elb);
			ccm_elb_plan_release(&e->plan);
			r = -ENOENT;
		}
	}
	if (r == -ENOENT && !e->plan.recreate) {
		int o = ccm_svc_refuse_other(ctl, e, CCM_LB_CLASSIC, err);
		if (o < 0)
			return o;
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
	if (!created && ccm_elb_plan_empty(&e->plan))
		e->digest = ccm_svc_elb_digest(&e->elb);
	if ((r = ccm_elb_apply(c, &e->spec, &e->plan, (const char(*)[32])e->sgs, e->n_sgs, err)) <
	    0)
		return r;
	if (hosts && !created)
		ccm_svc_event(m, svc, KUBE_EVENT_NORMAL, "UpdatedLoadBalancer",
			  "Updated load balancer with new hosts (%zu registered, %zu deregistered)",
			  e->plan.n_reg, e->plan.n_dereg);
	if (!created && e->tags_changed &&
	    (r = ccm_svc_tags_sync(ctl, e, true, e->spec.name, err)) < 0)
		return r;
	/* written only where AWS has other values */
	if ((r = ccm_elb_attributes(c, &e->spec, &e->elb, err)) < 0)
		return r;
	if (!m->cfg->disable_sg_ingress && (r = ensure_node_rules(m, e, err)) < 0)
		return r;
	str_copy(e->dns, sizeof(e->dns), e->elb.dns);
	return 0;
}

/* Delete ---------------------------------------------------------------------------------- */

int ccm_svc_elb_delete(struct ccm_svc_ctl *ctl, const cJSON *svc, struct aws_error *err)
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
