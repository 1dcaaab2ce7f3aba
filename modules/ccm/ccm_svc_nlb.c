/* The service controller's network load balancer and Deckhouse's `none` (see ccm_svc.h). One
 * ensure of an NLB:
 *
 *   1. the load balancer a<uid> (DescribeLoadBalancers by name; created with its subnet
 *      mappings and tags when missing, replaced when the scheme changed); an existing one's
 *      subnets: new zones added (SetSubnets), what AWS cannot change refused with an Event;
 *   2. its listeners and the target groups they forward to (one Describe each); a wanted
 *      target group missing from them is looked up by name (adopting one made before a crash)
 *      or created; one whose name is wanted but whose protocol, port or type differ is
 *      replaced; health checks are changed in place; target groups no listener wants any more
 *      are deleted after the listeners moved;
 *   3. the targets of each group (DescribeTargetHealth), registered and deregistered;
 *   4. the tags of the load balancer and its groups when additional-resource-tags changed
 *      (ccm_svc_tags_sync, also used for the classic ELB), the attributes of the groups and of
 *      the load balancer;
 *   5. the rules on the nodes' security group (client, health, mtu), stale ones revoked.
 * `none` makes step 2's target groups only, named <lb name>-<index>, and step 3. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/kube/events.h"
#include "modules/ccm/ccm_svc.h"

/* kubernetes.io/service-name, the cluster tag, additional-resource-tags */
static size_t tags_of(const struct ccm *m, const struct ccm_lb_spec *s, char ctag[160],
		      struct elbv2_kv *kv)
{
	size_t n = 0;
	kv[n++] = (struct elbv2_kv){CCM_LB_SVC_TAG, s->svc};
	if (m->cluster_id && *m->cluster_id) {
		snprintf(ctag, 160, "%s%s", CCM_CLUSTER_TAG_PREFIX, m->cluster_id);
		kv[n++] = (struct elbv2_kv){ctag, "owned"};
	}
	for (size_t i = 0; i < s->n_tags; i++)
		kv[n++] = (struct elbv2_kv){s->tags[i].key, s->tags[i].value};
	return n;
}

static bool cluster_or_svc_tag(const char *key)
{
	return strcmp(key, CCM_LB_SVC_TAG) == 0 ||
	       strncmp(key, CCM_CLUSTER_TAG_PREFIX, strlen(CCM_CLUSTER_TAG_PREFIX)) == 0;
}

int ccm_svc_tags_sync(struct ccm_svc_ctl *ctl, const struct ccm_svc_ensure *e, bool classic,
		      const char *id, struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(ctl->m->cloud);
	const struct ccm_lb_spec *s = &e->spec;
	struct ccm_lb_kv prev[CCM_LB_MAX_TAGS];
	struct elbv2_tag *have = calloc(ELBV2_MAX_TAGS, sizeof(*have));
	struct elbv2_kv add[CCM_LB_MAX_TAGS];
	const char *del[CCM_LB_MAX_TAGS];
	size_t n_prev = 0, n_have = 0, n_add = 0, n_del = 0;
	int r;

	if (!have)
		return -ENOMEM;
	if (!e->prev_tags || ccm_lb_split_kv(e->prev_tags, prev, CCM_LB_MAX_TAGS, &n_prev) < 0)
		n_prev = 0; /* unknown: remove nothing */
	if ((r = elbv2_tags_describe(c, classic, id, have, ELBV2_MAX_TAGS, &n_have, err)) < 0)
		goto out;
	for (size_t i = 0; i < s->n_tags; i++) {
		bool same = false;
		for (size_t k = 0; k < n_have && !same; k++)
			same = strcmp(have[k].key, s->tags[i].key) == 0 &&
			       strcmp(have[k].value, s->tags[i].value) == 0;
		if (!same)
			add[n_add++] = (struct elbv2_kv){s->tags[i].key, s->tags[i].value};
	}
	for (size_t p = 0; p < n_prev; p++) {
		bool wanted = cluster_or_svc_tag(prev[p].key), present = false;
		for (size_t i = 0; i < s->n_tags && !wanted; i++)
			wanted = strcmp(s->tags[i].key, prev[p].key) == 0;
		for (size_t k = 0; k < n_have && !present; k++)
			present = strcmp(have[k].key, prev[p].key) == 0;
		if (!wanted && present)
			del[n_del++] = prev[p].key;
	}
	if ((r = elbv2_tags_add(c, classic, id, add, n_add, err)) < 0 ||
	    (r = elbv2_tags_remove(c, classic, id, del, n_del, err)) < 0)
		goto out;
	if (n_add || n_del)
		log_info("updated the load balancer's tags", KV_S("service", s->svc),
			 KV_S("resource", id), KV_I("added", (long long)n_add),
			 KV_I("removed", (long long)n_del));
out:
	free(have);
	return r;
}

/* Targets: the eligible instances on the NodePort. *changed counts the registrations. */
static int ensure_targets(struct aws_client *c, const struct ccm_svc_ensure *e,
			  const char *tg_arn, int port, size_t *reg, size_t *dereg,
			  struct aws_error *err)
{
	char(*have)[32] = NULL, (*add)[32] = NULL, (*del)[32] = NULL;
	size_t n_have = 0, n_add = 0, n_del = 0;
	int r;

	if ((r = elbv2_targets(c, tg_arn, &have, &n_have, err)) < 0)
		return r;
	if (!(add = calloc(e->n_ids + 1, 32)) || !(del = calloc(n_have + 1, 32))) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < e->n_ids; i++)
		if (!ccm_lb_in_ids((const char(*)[32])have, n_have, e->ids[i]))
			str_copy(add[n_add++], 32, e->ids[i]);
	for (size_t i = 0; i < n_have; i++)
		if (!ccm_lb_in_ids((const char(*)[32])e->ids, e->n_ids, have[i]))
			str_copy(del[n_del++], 32, have[i]);
	if ((r = elbv2_targets_set(c, tg_arn, (const char(*)[32])add, n_add, port, true, err)) <
		0 ||
	    (r = elbv2_targets_set(c, tg_arn, (const char(*)[32])del, n_del, port, false, err)) < 0)
		goto out;
	*reg += n_add;
	*dereg += n_del;
out:
	free(have);
	free(add);
	free(del);
	return r;
}

static const struct elbv2_tg *tg_by_name(const struct elbv2_tg *tgs, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(tgs[i].name, name) == 0)
			return &tgs[i];
	return NULL;
}

/* The target group of one port into ret: found among have, else by name, else created; one
 * that differs in what AWS cannot change is replaced. */
static int ensure_tg(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
		     const struct ccm_nlb_port *p, const struct elbv2_tg *have, size_t n_have,
		     struct elbv2_tg *ret, struct aws_error *err)
{
	struct ccm *m = ctl->m;
	struct aws_client *c = ccm_cloud_client(m->cloud);
	const struct elbv2_tg *found = tg_by_name(have, n_have, p->tg_name);
	struct elbv2_tg *byname = NULL;
	struct elbv2_kv kv[CCM_LB_MAX_TAGS + 2];
	char ctag[160];
	size_t n = 0;
	int r = 0;

	if (!found) {
		r = elbv2_tgs_describe(c, NULL, p->tg_name, &byname, &n, err);
		if (r < 0 && r != -ENOENT)
			return r;
		found = r == 0 && n ? &byname[0] : NULL;
		r = 0;
	}
	if (found && (strcmp(found->protocol, p->tg_proto) != 0 || found->port != p->node_port ||
		      strcmp(found->vpc, e->vpc) != 0 ||
		      (found->target_type[0] && strcmp(found->target_type, "instance") != 0))) {
		ccm_svc_event(m, svc, KUBE_EVENT_NORMAL, "ReplacingTargetGroup",
			      "Replacing target group %s: protocol, port or VPC changed",
			      p->tg_name);
		if ((r = elbv2_tg_delete(c, found->arn, err)) < 0)
			goto out;
		found = NULL;
	}
	if (found) {
		*ret = *found;
		if (!ccm_nlb_hc_equal(&found->hc, &e->nlb.hc)) {
			if ((r = elbv2_tg_modify_hc(c, found->arn, &e->nlb.hc, err)) < 0)
				goto out;
			ret->hc = e->nlb.hc;
		}
		goto out;
	}
	*ret = (struct elbv2_tg){.port = p->node_port, .hc = e->nlb.hc};
	str_copy(ret->name, sizeof(ret->name), p->tg_name);
	str_copy(ret->protocol, sizeof(ret->protocol), p->tg_proto);
	str_copy(ret->vpc, sizeof(ret->vpc), e->vpc);
	str_copy(ret->target_type, sizeof(ret->target_type), "instance");
	if ((r = elbv2_tg_create(c, ret, kv, tags_of(m, &e->spec, ctag, kv), err)) < 0)
		goto out;
	log_info("created a target group", KV_S("service", e->spec.svc), KV_S("name", p->tg_name));
out:
	free(byname);
	return r;
}

/* The attributes of a load balancer (tg false) or target group that differ from want, written
 * in one Modify call; none when AWS already has them all (a re-check writes nothing). */
static int attrs_sync(struct aws_client *c, bool tg, const char *arn, const struct elbv2_kv *want,
		      size_t n_want, struct aws_error *err)
{
	struct elbv2_attr *have;
	struct elbv2_kv diff[8];
	size_t n_have = 0, n_diff = 0;
	int r;

	if (n_want == 0)
		return 0;
	if (!(have = calloc(ELBV2_MAX_ATTRS, sizeof(*have))))
		return -ENOMEM;
	if ((r = elbv2_attributes_describe(c, tg, arn, have, ELBV2_MAX_ATTRS, &n_have, err)) < 0)
		goto out;
	for (size_t i = 0; i < n_want && n_diff < sizeof(diff) / sizeof(diff[0]); i++) {
		bool same = false;
		for (size_t k = 0; k < n_have && !same; k++)
			same = strcmp(have[k].key, want[i].key) == 0 &&
			       strcmp(have[k].value, want[i].value ? want[i].value : "") == 0;
		if (!same)
			diff[n_diff++] = want[i];
	}
	r = tg ? elbv2_tg_attributes(c, arn, diff, n_diff, err)
	       : elbv2_lb_attributes(c, arn, diff, n_diff, err);
out:
	free(have);
	return r;
}

static int tg_attributes(struct aws_client *c, const struct ccm_svc_ensure *e, const char *arn,
			 struct aws_error *err)
{
	struct elbv2_kv kv[2];
	for (size_t i = 0; i < e->nlb.n_tg_attrs; i++)
		kv[i] = (struct elbv2_kv){e->nlb.tg_attrs[i].key, e->nlb.tg_attrs[i].value};
	return attrs_sync(c, true, arn, kv, e->nlb.n_tg_attrs, err);
}

/* Every port's target group and targets; arns[i] for port i. */
static int ensure_tgs(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
		      const struct elbv2_tg *have, size_t n_have, char (*arns)[ELBV2_ARN_MAX],
		      struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(ctl->m->cloud);
	size_t reg = 0, dereg = 0;
	bool created = false;
	int r;

	for (size_t i = 0; i < e->nlb.n_p; i++) {
		struct elbv2_tg tg;
		if ((r = ensure_tg(ctl, svc, e, &e->nlb.p[i], have, n_have, &tg, err)) < 0)
			return r;
		created |= !tg_by_name(have, n_have, tg.name);
		str_copy(arns[i], ELBV2_ARN_MAX, tg.arn);
		if ((r = tg_attributes(c, e, tg.arn, err)) < 0 ||
		    (r = ensure_targets(c, e, tg.arn, e->nlb.p[i].node_port, &reg, &dereg, err)) <
			0)
			return r;
	}
	if ((reg || dereg) && !created)
		ccm_svc_event(ctl->m, svc, KUBE_EVENT_NORMAL, "UpdatedLoadBalancer",
			      "Updated load balancer with new hosts (%zu registered, %zu "
			      "deregistered)",
			      reg, dereg);
	return 0;
}

/* Listeners ------------------------------------------------------------------------------- */

static int ensure_listeners(struct aws_client *c, struct ccm_svc_ensure *e, const char *lb_arn,
			    const char (*arns)[ELBV2_ARN_MAX], const struct elbv2_listener *have,
			    size_t n_have, struct aws_error *err)
{
	int r;
	for (size_t i = 0; i < e->nlb.n_p; i++) {
		const struct ccm_nlb_port *p = &e->nlb.p[i];
		struct elbv2_listener want = {.port = p->port};
		const char *policy = strcmp(p->proto, "TLS") == 0 ? e->nlb.ssl_policy : "";
		str_copy(want.protocol, sizeof(want.protocol), p->proto);
		str_copy(want.tg_arn, sizeof(want.tg_arn), arns[i]);
		str_copy(want.cert, sizeof(want.cert), p->cert);
		str_copy(want.ssl_policy, sizeof(want.ssl_policy), policy);
		const struct elbv2_listener *l = NULL;
		for (size_t k = 0; k < n_have && !l; k++)
			if (have[k].port == p->port)
				l = &have[k];
		if (l && strcmp(l->protocol, want.protocol) == 0 &&
		    strcmp(l->tg_arn, want.tg_arn) == 0 && strcmp(l->cert, want.cert) == 0 &&
		    (!policy[0] || strcmp(l->ssl_policy, policy) == 0))
			continue;
		if ((r = elbv2_listener_put(c, lb_arn, &want, l, err)) < 0)
			return r;
	}
	for (size_t k = 0; k < n_have; k++) {
		bool keep = false;
		for (size_t i = 0; i < e->nlb.n_p && !keep; i++)
			keep = e->nlb.p[i].port == have[k].port;
		if (!keep && (r = elbv2_listener_delete(c, have[k].arn, err)) < 0)
			return r;
	}
	return 0;
}

/* Node security-group rules ----------------------------------------------------------------- */

/* Makes the rules on each instance's node group what want says (want NULL: none of ours). */
static int node_rules(struct ccm_svc_ctl *ctl, struct ccm_svc_ensure *e,
		      const struct ccm_lb_inst *inst, size_t n_inst, const struct ccm_sg_perm *want,
		      size_t n_want, struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(ctl->m->cloud);
	int r;

	for (size_t i = 0; i < n_inst; i++) {
		char id[32];
		size_t n_perms = 0, n_add = 0, n_del = 0;
		bool dup = false;
		for (size_t k = 0; k < i && !dup; k++)
			dup = inst[k].n_sgs == inst[i].n_sgs &&
			      memcmp(inst[k].sgs, inst[i].sgs, inst[i].n_sgs * 32) == 0;
		if (dup)
			continue;
		r = ccm_lb_node_sg(c, &inst[i], ctl->m->cluster_id, id, e->perms, CCM_LB_MAX_PERMS,
				   &n_perms, err);
		if (r < 0) {
			log_warn("no single node security group for an instance; its rules are not "
				 "made",
				 KV_S("instance", inst[i].id), KV_E(r));
			continue;
		}
		for (size_t w = 0; w < n_want; w++) {
			bool have = false;
			for (size_t k = 0; k < n_perms && !have; k++)
				have = ccm_sg_perm_equal(&want[w], &e->perms[k]);
			if (!have)
				e->add[n_add++] = want[w];
		}
		for (size_t k = 0; k < n_perms; k++)
			if (ccm_nlb_rule_stale(&e->perms[k], e->spec.name, want, n_want, e->perms,
					       n_perms))
				e->del[n_del++] = e->perms[k];
		if ((r = ccm_sg_ingress(c, id, e->add, n_add, false, err)) < 0 ||
		    (r = ccm_sg_ingress(c, id, e->del, n_del, true, err)) < 0)
			return r;
	}
	return 0;
}

/* The node rules: from the load balancer's first security group when it has groups
 * (NLBSecurityGroupMode = Managed), else from the client and health CIDRs. */
static int ensure_node_rules(struct ccm_svc_ctl *ctl, struct ccm_svc_ensure *e,
			     struct aws_error *err)
{
	char clients[CCM_LB_MAX_RANGES][64], health[CCM_LB_MAX_SUBNETS][64];
	size_t n_clients, n_health = 0;

	if (e->n_sgs) {
		size_t n_want = ccm_nlb_node_rules_from(&e->nlb, e->spec.name, e->sgs[0], e->want,
							CCM_LB_MAX_PERMS);
		return node_rules(ctl, e, e->inst, e->n_inst, e->want, n_want, err);
	}
	n_clients = ccm_svc_nlb_clients(ctl->m, e, clients, CCM_LB_MAX_RANGES);
	for (size_t i = 0; i < e->n_chosen; i++)
		for (size_t k = 0; k < e->n_subnets; k++)
			if (strcmp(e->subnets[k].id, e->chosen[i]) == 0 && e->subnets[k].cidr[0])
				str_copy(health[n_health++], 64, e->subnets[k].cidr);
	size_t n_want = ccm_nlb_node_rules(
	    &e->nlb, e->spec.name, ctl->m->cluster_id, (const char(*)[64])clients, n_clients,
	    (const char(*)[64])health, n_health, e->want, CCM_LB_MAX_PERMS);
	return node_rules(ctl, e, e->inst, e->n_inst, e->want, n_want, err);
}

/* Ensure ------------------------------------------------------------------------------------ */

int ccm_svc_refuse_other(struct ccm_svc_ctl *ctl, struct ccm_svc_ensure *e,
			 enum ccm_lb_type want, struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(ctl->m->cloud);
	const char *kind = NULL;
	int r;

	if (want != CCM_LB_CLASSIC) {
		struct ccm_elb old = {0};
		r = ccm_elb_describe(c, e->spec.name, &old, err);
		ccm_elb_release(&old);
		if (r == 0)
			kind = "a classic load balancer";
		else if (r != -ENOENT)
			return r;
	}
	if (!kind && want != CCM_LB_NLB) {
		struct elbv2_lb lb;
		r = elbv2_lb_describe(c, e->spec.name, &lb, err);
		if (r == 0)
			kind = "a network load balancer";
		else if (r != -ENOENT)
			return r;
	}
	if (!kind && want != CCM_LB_NONE) {
		struct elbv2_tg *one = NULL;
		size_t n = 0;
		char name[ELBV2_NAME_MAX];
		ccm_none_tg_name(e->spec.name, 0, name);
		r = elbv2_tgs_describe(c, NULL, name, &one, &n, err);
		free(one);
		if (r == 0 && n)
			kind = "target groups of type none";
		else if (r < 0 && r != -ENOENT)
			return r;
	}
	if (!kind)
		return 0;
	snprintf(e->err, sizeof(e->err),
		 "the load balancer type cannot be changed (to %s): %s %s exists; delete the "
		 "Service to change it",
		 want == CCM_LB_CLASSIC ? "classic" : want == CCM_LB_NLB ? "nlb" : "none", kind,
		 e->spec.name);
	return -EINVAL;
}

static int lb_attributes(struct aws_client *c, const struct ccm_lb_spec *s, const char *arn,
			 struct aws_error *err)
{
	const struct ccm_lb_attrs *a = &s->attrs;
	struct elbv2_kv kv[4] = {
	    {"load_balancing.cross_zone.enabled", a->cross_zone ? "true" : "false"},
	    {"access_logs.s3.enabled", a->log ? "true" : "false"},
	    {"access_logs.s3.bucket", a->log_bucket},
	    {"access_logs.s3.prefix", a->log_prefix},
	};
	return attrs_sync(c, false, arn, kv, a->log ? 4 : 2, err);
}

/* The load balancer's state (*state: 0 when it exists as it may stay, -ENOENT when it must be
 * made), after DescribeLoadBalancers into lb: one of another kind is refused, one whose scheme
 * changed deleted. */
static int lb_state(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
		    struct elbv2_lb *lb, int *state, struct aws_error *err)
{
	struct ccm *m = ctl->m;
	struct aws_client *c = ccm_cloud_client(m->cloud);
	int r;

	r = elbv2_lb_describe(c, e->spec.name, lb, err);
	if (r == -ENOENT) {
		int o = ccm_svc_refuse_other(ctl, e, CCM_LB_NLB, err);
		if (o < 0)
			return o;
	}
	if (r == 0 && strcmp(lb->scheme, e->spec.internal ? "internal" : "internet-facing") != 0) {
		ccm_svc_event(m, svc, KUBE_EVENT_NORMAL, "DeletingLoadBalancer",
			      "Deleting load balancer: the scheme changed");
		if ((r = elbv2_lb_delete(c, lb->arn, err)) < 0)
			return r;
		r = -ENOENT;
	}
	if (r < 0 && r != -ENOENT)
		return r;
	*state = r;
	return 0;
}

/* Makes the load balancer when state says it is missing, with the groups of e->sgs. */
static int ensure_lb(struct ccm_svc_ctl *ctl, struct ccm_svc_ensure *e, int state,
		     struct elbv2_lb *lb, bool *created, struct aws_error *err)
{
	struct ccm *m = ctl->m;
	struct aws_client *c = ccm_cloud_client(m->cloud);
	struct elbv2_subnet_mapping map[CCM_LB_MAX_SUBNETS];
	struct elbv2_kv kv[CCM_LB_MAX_TAGS + 2];
	char ctag[160];
	int r;

	if (state == 0)
		return 0;
	for (size_t i = 0; i < e->n_chosen; i++)
		map[i] = (struct elbv2_subnet_mapping){
		    e->chosen[i], e->nlb.n_eips ? e->nlb.eips[i] : NULL,
		    e->nlb.n_ips ? e->nlb.ips[i] : NULL};
	if ((r = elbv2_lb_create(c, e->spec.name, e->spec.internal, map, e->n_chosen,
				 (const char(*)[32])e->sgs, e->n_sgs, kv,
				 tags_of(m, &e->spec, ctag, kv), lb, err)) < 0)
		return r;
	log_info("created the network load balancer", KV_S("service", e->spec.svc),
		 KV_S("name", e->spec.name));
	*created = true;
	return 0;
}

/* An existing load balancer's subnets (see ccm_nlb_subnets_plan): new zones added with
 * SetSubnets; what AWS cannot change in place gets a Warning Event and is left as it is, and the
 * rest of the sync goes on. e->chosen becomes the subnets the load balancer has. */
static int ensure_subnets(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
			  const struct elbv2_lb *lb, struct aws_error *err)
{
	struct ccm_nlb_subnet want[CCM_LB_MAX_SUBNETS], have[CCM_LB_MAX_SUBNETS];
	struct elbv2_subnet_mapping map[CCM_LB_MAX_SUBNETS];
	_cleanup_buf_ struct buf added = BUF_INIT(1024);
	char why[256] = "";
	size_t n_have = 0;
	bool named = e->spec.n_subnets || e->nlb.n_eips || e->nlb.n_ips;
	int r;

	for (size_t i = 0; i < e->n_chosen; i++) {
		want[i] = (struct ccm_nlb_subnet){{0}};
		str_copy(want[i].id, sizeof(want[i].id), e->chosen[i]);
		for (size_t k = 0; k < e->n_subnets; k++)
			if (strcmp(e->subnets[k].id, e->chosen[i]) == 0)
				str_copy(want[i].az, sizeof(want[i].az), e->subnets[k].az);
		if (e->nlb.n_eips)
			str_copy(want[i].allocation, sizeof(want[i].allocation), e->nlb.eips[i]);
		if (e->nlb.n_ips)
			str_copy(want[i].private_ip, sizeof(want[i].private_ip), e->nlb.ips[i]);
	}
	switch (ccm_nlb_subnets_plan(lb, want, e->n_chosen, named, have, CCM_LB_MAX_SUBNETS,
				     &n_have, why, sizeof(why))) {
	case CCM_NLB_SUBNETS_REFUSED:
		ccm_svc_event(ctl->m, svc, KUBE_EVENT_WARNING, "SubnetChangeRefused",
			      "The subnets of network load balancer %s cannot be changed in place: "
			      "%s; they are left as they are (delete and re-create the Service to "
			      "move it)",
			      e->spec.name, why);
		log_warn("subnet change refused", KV_S("service", e->spec.svc), KV_S("reason", why));
		n_have = 0;
		for (size_t i = 0;
		     i < lb->n_subnets && i < sizeof(lb->subnets) / sizeof(lb->subnets[0]); i++)
			str_copy(have[n_have++].id, sizeof(have[0].id), lb->subnets[i]);
		break;
	case CCM_NLB_SUBNETS_ADD:
		for (size_t i = 0; i < n_have; i++) {
			map[i] = (struct elbv2_subnet_mapping){have[i].id, have[i].allocation,
							       have[i].private_ip};
			if (!ccm_lb_in_ids((const char(*)[32])lb->subnets, lb->n_subnets, have[i].id) &&
			    (r = buf_printf(&added, "%s%s", added.len ? ", " : "", have[i].id)) < 0)
				return r;
		}
		if ((r = elbv2_lb_set_subnets(ccm_cloud_client(ctl->m->cloud), lb->arn, map, n_have,
					      err)) < 0)
			return r;
		ccm_svc_event(ctl->m, svc, KUBE_EVENT_NORMAL, "UpdatedLoadBalancer",
			      "Added subnets %s to the load balancer", added.data);
		log_info("added subnets to the network load balancer", KV_S("service", e->spec.svc),
			 KV_S("subnets", added.data));
		break;
	case CCM_NLB_SUBNETS_SAME:
		break;
	}
	e->n_chosen = 0;
	for (size_t i = 0; i < n_have; i++)
		str_copy(e->chosen[e->n_chosen++], 32, have[i].id);
	return 0;
}

/* An existing NLB's groups made e->sgs (SetSecurityGroups) when they differ as sets. */
static int ensure_lb_sgs(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
			 const struct elbv2_lb *lb, struct aws_error *err)
{
	bool same = lb->n_sgs == e->n_sgs;
	int r;

	for (size_t i = 0; i < e->n_sgs && same; i++)
		same = ccm_lb_in_ids((const char(*)[32])lb->sgs, lb->n_sgs, e->sgs[i]);
	if (same)
		return 0;
	if ((r = elbv2_lb_set_sgs(ccm_cloud_client(ctl->m->cloud), lb->arn,
				  (const char(*)[32])e->sgs, e->n_sgs, err)) < 0)
		return r;
	ccm_svc_event(ctl->m, svc, KUBE_EVENT_NORMAL, "UpdatedLoadBalancer",
		      "Set the security groups of the load balancer to %zu group(s)", e->n_sgs);
	log_info("set the network load balancer's security groups", KV_S("service", e->spec.svc),
		 KV_I("groups", (long long)e->n_sgs));
	return 0;
}

int ccm_svc_nlb_ensure(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
		       struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(ctl->m->cloud);
	struct elbv2_lb lb;
	struct elbv2_listener *ls = NULL;
	struct elbv2_tg *tgs = NULL;
	size_t n_ls = 0, n_tgs = 0;
	char(*arns)[ELBV2_ARN_MAX] = calloc(e->nlb.n_p + 1, ELBV2_ARN_MAX);
	bool created = false, managed = ccm_svc_nlb_sg_managed(ctl->m);
	int r, state = 0;

	if (!arns)
		return -ENOMEM;
	e->n_sgs = 0;
	if (!managed && e->spec.n_extra_sgs) {
		snprintf(e->err, sizeof(e->err),
			 "annotation %sextra-security-groups is not supported for NLB (only with "
			 "NLBSecurityGroupMode = Managed)",
			 CCM_LB_ANN);
		r = -EINVAL;
		goto out;
	}
	if ((r = ccm_svc_place(ctl, e, err)) < 0 ||
	    (r = ccm_nlb_check_mappings(&e->nlb, e->spec.internal, e->n_chosen, e->err,
					sizeof(e->err))) < 0 ||
	    (r = lb_state(ctl, svc, e, &lb, &state, err)) < 0)
		goto out;
	/* groups only on an NLB made with them: AWS cannot add groups to one made without */
	if (managed && (state == -ENOENT || lb.n_sgs) &&
	    (r = ccm_svc_nlb_sgs(ctl, svc, e, err)) < 0)
		goto out;
	if ((r = ensure_lb(ctl, e, state, &lb, &created, err)) < 0 ||
	    (!created && (r = ensure_subnets(ctl, svc, e, &lb, err)) < 0) ||
	    (!created && e->n_sgs && (r = ensure_lb_sgs(ctl, svc, e, &lb, err)) < 0) ||
	    (r = elbv2_listeners_describe(c, lb.arn, &ls, &n_ls, err)) < 0 ||
	    (r = elbv2_tgs_describe(c, lb.arn, NULL, &tgs, &n_tgs, err)) < 0)
		goto out;
	if ((r = ensure_tgs(ctl, svc, e, tgs, n_tgs, arns, err)) < 0 ||
	    (r = ensure_listeners(c, e, lb.arn, (const char(*)[ELBV2_ARN_MAX])arns, ls, n_ls,
				  err)) < 0)
		goto out;
	for (size_t i = 0; i < n_tgs; i++) {
		bool keep = false;
		for (size_t k = 0; k < e->nlb.n_p && !keep; k++)
			keep = strcmp(arns[k], tgs[i].arn) == 0;
		if (!keep && (r = elbv2_tg_delete(c, tgs[i].arn, err)) < 0)
			goto out;
		if (!keep)
			log_info("deleted a target group no listener uses",
				 KV_S("service", e->spec.svc), KV_S("name", tgs[i].name));
	}
	/* the load balancer's and its target groups' tags (made with them when new) */
	if (!created && e->tags_changed) {
		if ((r = ccm_svc_tags_sync(ctl, e, false, lb.arn, err)) < 0)
			goto out;
		for (size_t i = 0; i < e->nlb.n_p; i++)
			if ((r = ccm_svc_tags_sync(ctl, e, false, arns[i], err)) < 0)
				goto out;
	}
	if ((r = lb_attributes(c, &e->spec, lb.arn, err)) < 0)
		goto out;
	if (!ctl->m->cfg->disable_sg_ingress && (r = ensure_node_rules(ctl, e, err)) < 0)
		goto out;
	/* the security-groups annotation replaced the managed group: it goes once unused */
	if (e->n_sgs && e->spec.n_sgs && (r = ccm_svc_nlb_sg_delete(ctl, svc, e->vpc, err)) < 0)
		goto out;
	str_copy(e->dns, sizeof(e->dns), lb.dns);
	e->digest = created ? 0 : ccm_svc_v2_digest(&lb); /* for the drift probe (ccm_svc.c) */
out:
	free(arns);
	free(ls);
	free(tgs);
	return r;
}

/* Delete ------------------------------------------------------------------------------------ */

int ccm_svc_nlb_delete(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
		       const char (*all_ids)[32], size_t n_all, struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(ctl->m->cloud);
	struct elbv2_lb lb;
	struct elbv2_listener *ls = NULL;
	struct elbv2_tg *tgs = NULL, *one = NULL;
	struct ccm_lb_inst *inst = NULL;
	size_t n_ls = 0, n_tgs = 0, n_one = 0, n_inst = 0;
	bool had_sgs = false, lb_gone;
	int r;

	r = elbv2_lb_describe(c, e->spec.name, &lb, err);
	lb_gone = r == -ENOENT;
	if (r == 0) {
		if ((r = elbv2_listeners_describe(c, lb.arn, &ls, &n_ls, err)) < 0 ||
		    (r = elbv2_tgs_describe(c, lb.arn, NULL, &tgs, &n_tgs, err)) < 0)
			goto out;
		for (size_t i = 0; i < n_ls; i++)
			if ((r = elbv2_listener_delete(c, ls[i].arn, err)) < 0)
				goto out;
		for (size_t i = 0; i < n_tgs; i++)
			if ((r = elbv2_tg_delete(c, tgs[i].arn, err)) < 0)
				goto out;
		if ((r = elbv2_lb_delete(c, lb.arn, err)) < 0)
			goto out;
		had_sgs = lb.n_sgs > 0;
	} else if (r == -ENOENT && e->spec.type != CCM_LB_NLB) {
		r = 0; /* no NLB, and none was asked for: nothing of ours */
		goto out;
	} else if (r != -ENOENT) {
		goto out;
	}
	/* target groups made before a listener used them (a crash in between) */
	for (size_t i = 0; i < e->nlb.n_p; i++) {
		r = elbv2_tgs_describe(c, NULL, e->nlb.p[i].tg_name, &one, &n_one, err);
		if (r == 0 && n_one)
			r = elbv2_tg_delete(c, one[0].arn, err);
		free(one);
		one = NULL;
		if (r < 0 && r != -ENOENT)
			goto out;
	}
	r = 0;
	if (n_all && (r = ccm_svc_instances(ctl, all_ids, n_all, &inst, &n_inst, err)) == 0)
		r = node_rules(ctl, e, inst, n_inst, NULL, 0, err);
	/* the managed group, after the load balancer (also when the mode was turned off since,
	 * and on a retry once the load balancer is gone) */
	if (r == 0 && (had_sgs || ccm_svc_nlb_sg_managed(ctl->m) || lb_gone))
		r = ccm_svc_nlb_sg_delete(ctl, svc, NULL, err);
out:
	free(inst);
	free(ls);
	free(tgs);
	return r;
}

/* none ---------------------------------------------------------------------------------------- */

int ccm_svc_none_ensure(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
			struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(ctl->m->cloud);
	char(*arns)[ELBV2_ARN_MAX] = calloc(e->nlb.n_p + 1, ELBV2_ARN_MAX);
	struct elbv2_tg *have = calloc(e->nlb.n_p + 1, sizeof(*have));
	size_t n_have = 0;
	int r = 0;

	if (!arns || !have) {
		r = -ENOMEM;
		goto out;
	}
	/* the groups that exist (what ensure_tg would look up by name anyway) */
	for (size_t i = 0; i < e->nlb.n_p && r == 0; i++) {
		struct elbv2_tg *one = NULL;
		size_t n = 0;
		r = elbv2_tgs_describe(c, NULL, e->nlb.p[i].tg_name, &one, &n, err);
		if (r == 0 && n)
			have[n_have++] = one[0];
		free(one);
		if (r == -ENOENT)
			r = 0;
	}
	if (r == 0 && n_have == 0)
		r = ccm_svc_refuse_other(ctl, e, CCM_LB_NONE, err);
	if (r == 0 && (r = ccm_svc_vpc(ctl, e, err)) == 0 &&
	    (r = ensure_tgs(ctl, svc, e, have, n_have, arns, err)) == 0)
		str_copy(e->dns, sizeof(e->dns), "none");
out:
	free(arns);
	free(have);
	return r;
}

/* <name>-0, -1, ... up to the first that is missing (also when the ports were fewer or the
 * Service is no longer of type none). */
int ccm_svc_none_delete(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
			struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(ctl->m->cloud);
	int r = 0;

	for (size_t i = 0; r == 0; i++) {
		struct elbv2_tg *one = NULL;
		size_t n = 0;
		char name[ELBV2_NAME_MAX];
		ccm_none_tg_name(e->spec.name, i, name);
		r = elbv2_tgs_describe(c, NULL, name, &one, &n, err);
		if (r == 0 && n)
			r = elbv2_tg_delete(c, one[0].arn, err);
		else if (r == 0)
			r = -ENOENT;
		free(one);
	}
	(void)svc;
	return r == -ENOENT ? 0 : r;
}
