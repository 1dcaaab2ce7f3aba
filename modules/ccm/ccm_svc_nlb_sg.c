/* NLBSecurityGroupMode = Managed (see ccm_svc.h): the security groups of a network load
 * balancer. Upstream's opt-in: every NLB made while the mode is on gets a group of its own,
 * k8s-<ns>-<name>-<hash> (ccm_nlb_sg_name), tagged kubernetes.io/cluster/<id>=owned and
 * kubernetes.io/service-name, whose ingress is each listener port and ICMP 3/4 from the client
 * CIDRs (loadBalancerSourceRanges, else 0.0.0.0/0), kept as the Service says; the nodes' groups
 * then admit that group instead of the client CIDRs. The security-groups annotation replaces
 * the managed group with the groups it names (never changed nor deleted by us), and
 * extra-security-groups adds groups to either. The managed group goes after the load balancer
 * (rules naming it in other groups first; AWS answers DependencyViolation while the load
 * balancer's interfaces go away, and the controller retries with backoff). An NLB made without
 * groups keeps none: AWS cannot add groups to it later. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "modules/ccm/ccm_svc.h"

bool ccm_svc_nlb_sg_managed(const struct ccm *m)
{
	return m->cfg->nlb_sg_mode && strcmp(m->cfg->nlb_sg_mode, "Managed") == 0;
}

size_t ccm_svc_nlb_clients(const struct ccm *m, const struct ccm_svc_ensure *e, char (*out)[64],
			   size_t max)
{
	const struct ccm_lb_spec *s = &e->spec;
	bool dflt = s->n_ranges == 1 && strcmp(s->ranges[0], "0.0.0.0/0") == 0;
	size_t n = 0;

	if (dflt && s->internal) {
		for (size_t i = 0; i < e->n_subnets && n < max; i++)
			if (e->subnets[i].cidr[0])
				str_copy(out[n++], 64, e->subnets[i].cidr);
	} else if (dflt && m->cfg->public_network_allow_list &&
		   *m->cfg->public_network_allow_list) {
		ccm_lb_split_list(m->cfg->public_network_allow_list, &out[0][0], 64, max, &n);
	}
	for (size_t i = 0; n == 0 && i < s->n_ranges && i < max; i++)
		str_copy(out[i], 64, s->ranges[i]);
	return n ? n : (s->n_ranges < max ? s->n_ranges : max);
}

static void sg_name(const struct ccm *m, const cJSON *svc, char out[CCM_NLB_SG_NAME_MAX])
{
	ccm_nlb_sg_name(m->cluster_id, json_str(svc, "metadata.namespace"),
			json_str(svc, "metadata.name"), json_str(svc, "metadata.uid"), out);
}

/* The managed group's ingress made what the Service asks for. */
static int sg_ingress(struct ccm_svc_ctl *ctl, struct ccm_svc_ensure *e, const char *id,
		      size_t n_perms, struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(ctl->m->cloud);
	char clients[CCM_LB_MAX_RANGES][64];
	size_t n_clients = ccm_svc_nlb_clients(ctl->m, e, clients, CCM_LB_MAX_RANGES);
	size_t n_want = ccm_nlb_sg_rules(&e->nlb, (const char(*)[64])clients, n_clients, e->want,
					 CCM_LB_MAX_PERMS);
	size_t n_add = 0, n_del = 0;
	int r;

	for (size_t w = 0; w < n_want; w++) {
		bool have = false;
		for (size_t k = 0; k < n_perms && !have; k++)
			have = ccm_sg_perm_equal(&e->want[w], &e->perms[k]);
		if (!have)
			e->add[n_add++] = e->want[w];
	}
	for (size_t k = 0; k < n_perms; k++) {
		bool wanted = false;
		for (size_t w = 0; w < n_want && !wanted; w++)
			wanted = ccm_sg_perm_equal(&e->want[w], &e->perms[k]);
		if (!wanted)
			e->del[n_del++] = e->perms[k];
	}
	if ((r = ccm_sg_ingress(c, id, e->add, n_add, false, err)) < 0 ||
	    (r = ccm_sg_ingress(c, id, e->del, n_del, true, err)) < 0)
		return r;
	if (n_add || n_del)
		log_info("updated the network load balancer's security group",
			 KV_S("service", e->spec.svc), KV_S("group", id),
			 KV_I("added", (long long)n_add), KV_I("revoked", (long long)n_del));
	return 0;
}

int ccm_svc_nlb_sgs(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
		    struct aws_error *err)
{
	struct ccm *m = ctl->m;
	struct aws_client *c = ccm_cloud_client(m->cloud);
	char name[CCM_NLB_SG_NAME_MAX], id[32], desc[400];
	size_t n_perms = 0;
	int r;

	e->n_sgs = 0;
	e->managed_sg[0] = 0;
	if (e->spec.n_sgs) {
		for (size_t i = 0; i < e->spec.n_sgs; i++)
			str_copy(e->sgs[e->n_sgs++], 32, e->spec.sgs[i]);
	} else {
		sg_name(m, svc, name);
		r = ccm_sg_find(c, e->vpc, name, id, e->perms, CCM_LB_MAX_PERMS, &n_perms, err);
		if (r == -ENOENT) {
			snprintf(desc, sizeof(desc),
				 "Security group for Kubernetes NLB %s (%.180s)", e->spec.name,
				 e->spec.svc);
			if ((r = ccm_sg_create(c, e->vpc, name, desc, m->cluster_id, e->spec.svc,
					       id, err)) < 0)
				return r;
			n_perms = 0;
			log_info("created the network load balancer's security group",
				 KV_S("service", e->spec.svc), KV_S("name", name),
				 KV_S("group", id));
		} else if (r < 0) {
			return r;
		}
		if ((r = sg_ingress(ctl, e, id, n_perms, err)) < 0)
			return r;
		str_copy(e->managed_sg, sizeof(e->managed_sg), id);
		str_copy(e->sgs[e->n_sgs++], 32, id);
	}
	for (size_t i = 0; i < e->spec.n_extra_sgs && e->n_sgs <= CCM_LB_MAX_SGS; i++)
		if (!ccm_lb_in_ids((const char(*)[32])e->sgs, e->n_sgs, e->spec.extra_sgs[i]))
			str_copy(e->sgs[e->n_sgs++], 32, e->spec.extra_sgs[i]);
	return 0;
}

int ccm_svc_nlb_sg_delete(struct ccm_svc_ctl *ctl, const cJSON *svc, const char *vpc,
			  struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(ctl->m->cloud);
	char name[CCM_NLB_SG_NAME_MAX], id[32], refs[64][32];
	struct ccm_sg_perm *perms = calloc(CCM_LB_MAX_PERMS, sizeof(*perms));
	struct ccm_sg_perm *del = calloc(CCM_LB_MAX_PERMS, sizeof(*del));
	size_t n_perms = 0, n_refs = 0;
	int r;

	if (!perms || !del) {
		r = -ENOMEM;
		goto out;
	}
	sg_name(ctl->m, svc, name);
	r = ccm_sg_find(c, vpc, name, id, perms, CCM_LB_MAX_PERMS, &n_perms, err);
	if (r == -ENOENT) {
		r = 0;
		goto out;
	}
	if (r < 0 || (r = ccm_sg_referencing(c, id, refs, 64, &n_refs, err)) < 0)
		goto out;
	/* the rules of other groups (the nodes') that admit it */
	for (size_t i = 0; i < n_refs; i++) {
		size_t n_del = 0;
		if (strcmp(refs[i], id) == 0)
			continue;
		r = ccm_sg_perms_of(c, refs[i], perms, CCM_LB_MAX_PERMS, &n_perms, err);
		if (r == -ENOENT)
			continue;
		if (r < 0)
			goto out;
		for (size_t k = 0; k < n_perms; k++)
			if (strcmp(perms[k].group, id) == 0)
				del[n_del++] = perms[k];
		if ((r = ccm_sg_ingress(c, refs[i], del, n_del, true, err)) < 0 && r != -ENOENT)
			goto out;
	}
	/* -EBUSY (DependencyViolation) while the load balancer's interfaces go: the caller
	 * fails the sync and the controller retries it with backoff */
	if ((r = ccm_sg_delete(c, id, err)) == 0)
		log_info("deleted the network load balancer's security group",
			 KV_S("service", json_str(svc, "metadata.name")), KV_S("group", id));
out:
	free(perms);
	free(del);
	return r;
}
