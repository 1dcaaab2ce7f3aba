/* The cluster's security groups (pkg/cloud/services/securitygroup): one per role, named
 * "<c>-<role>", made in a first pass and given their ingress rules in a second (rules name
 * other groups as sources); rules not wanted are revoked, missing ones authorized, egress is
 * never touched. Delete: every cluster-owned group's ingress is revoked first, then the groups
 * are deleted (a rule naming a deleted peer cannot be revoked any more). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "modules/capa/capa_cluster.h"
#include "modules/capa/capa_net.h"

enum { SG_APILB, SG_LB, SG_CP, SG_NODE, SG_BASTION, SG_N };
static const char *const sg_roles[SG_N] = {"apiserver-lb", "lb", "controlplane", "node",
					   "bastion"};

#define SG_MAX_RULES 32

/* One flat rule: a protocol and port range from one source (a CIDR or a group). */
struct sg_rule {
	char desc[256];
	char proto[8];
	long long from, to;
	char cidr[48];
	char group[32];
};

struct sg {
	char id[32];
	char name[300];
	struct sg_rule have[SG_MAX_RULES], want[SG_MAX_RULES];
	size_t n_have, n_want;
};

static bool rule_eq(const struct sg_rule *a, const struct sg_rule *b)
{
	/* ports mean nothing for IP protocols other than TCP, UDP and ICMP */
	bool ports = strcmp(a->proto, "tcp") == 0 || strcmp(a->proto, "udp") == 0;
	return strcmp(a->proto, b->proto) == 0 && (!ports || (a->from == b->from && a->to == b->to)) &&
	       strcmp(a->cidr, b->cidr) == 0 && strcmp(a->group, b->group) == 0;
}

static bool rule_in(const struct sg_rule *r, const struct sg_rule *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (rule_eq(r, &v[i]))
			return true;
	return false;
}

static void want(struct sg *g, const char *desc, const char *proto, long long from, long long to,
		 const char *cidr, const char *group)
{
	if (g->n_want >= SG_MAX_RULES)
		return;
	struct sg_rule *r = &g->want[g->n_want++];
	*r = (struct sg_rule){.from = from, .to = to};
	capa_strcpy(r->desc, sizeof(r->desc), desc);
	capa_strcpy(r->proto, sizeof(r->proto), proto);
	capa_strcpy(r->cidr, sizeof(r->cidr), cidr ? cidr : "");
	capa_strcpy(r->group, sizeof(r->group), group ? group : "");
}

/* The CNI rules (Calico, CAPA's default): BGP and IP-in-IP from control plane and nodes. */
static void want_cni(struct sg *g, struct sg *all)
{
	for (int src = SG_CP; src <= SG_NODE; src++) {
		want(g, "bgp (calico)", "tcp", 179, 179, NULL, all[src].id);
		/* moto refuses protocol 4 without ports; AWS ignores them for it */
		want(g, "IP-in-IP (calico)", "4", -1, 65535, NULL, all[src].id);
	}
}

/* The bastion's: TCP 22 from spec.bastion.allowedCIDRBlocks (default 0.0.0.0/0; none with
 * disableIngressRules), and TCP 22 from the bastion on the control plane and the nodes. */
static void want_bastion(struct capa_scope *s, struct sg *all)
{
	const cJSON *cidrs = json_find(s->obj, "spec.bastion.allowedCIDRBlocks"), *c;
	struct sg *b = &all[SG_BASTION];

	want(&all[SG_CP], "SSH", "tcp", 22, 22, NULL, b->id);
	want(&all[SG_NODE], "SSH", "tcp", 22, 22, NULL, b->id);
	if (cJSON_IsTrue(json_find(s->obj, "spec.bastion.disableIngressRules")))
		return;
	if (cJSON_GetArraySize(cidrs) == 0)
		want(b, "SSH", "tcp", 22, 22, "0.0.0.0/0", NULL);
	cJSON_ArrayForEach(c, cidrs)
	{
		if (cJSON_IsString(c))
			want(b, "SSH", "tcp", 22, 22, c->valuestring, NULL);
	}
}

/* CAPA's ingress rules per role (getSecurityGroupIngressRules), for a classic API LB. */
static void sg_desired(struct capa_scope *s, struct sg *all)
{
	const long long api = 6443;
	struct sg *cp = &all[SG_CP], *node = &all[SG_NODE], *apilb = &all[SG_APILB];
	const cJSON *rules = json_find(s->obj, "spec.controlPlaneLoadBalancer.ingressRules"), *ir;
	const char *scheme = json_str(s->obj, "spec.controlPlaneLoadBalancer.scheme");

	for (int src = SG_APILB; src <= SG_NODE; src++)
		if (src != SG_LB)
			want(cp, "Kubernetes API", "tcp", api, api, NULL, all[src].id);
	want(cp, "etcd", "tcp", 2379, 2379, NULL, cp->id);
	want(cp, "etcd peer", "tcp", 2380, 2380, NULL, cp->id);
	want_cni(cp, all);
	want(node, "Node Port Services", "tcp", 30000, 32767, "0.0.0.0/0", NULL);
	want(node, "Kubelet API", "tcp", 10250, 10250, NULL, cp->id);
	want(node, "Kubelet API", "tcp", 10250, 10250, NULL, node->id);
	want_cni(node, all);
	if (strcmp(capa_lb_type(s), "nlb") == 0) /* the NLB passes traffic to the nodes' lb group */
		want(&all[SG_LB], "Kubernetes API", "tcp", api, api,
		     cJSON_IsTrue(json_find(s->obj, "spec.controlPlaneLoadBalancer.preserveClientIP"))
			 ? "0.0.0.0/0"
			 : json_str(s->obj, "spec.network.vpc.cidrBlock"),
		     NULL);
	if (capa_bastion_enabled(s) && all[SG_BASTION].id[0])
		want_bastion(s, all);
	if (scheme && strcmp(scheme, "internal") == 0) {
		want(apilb, "Kubernetes API", "tcp", api, api,
		     json_str(s->obj, "spec.network.vpc.cidrBlock"), NULL);
		return;
	}
	for (size_t i = 0; i < s->n_nat_ips; i++) {
		char c[64];
		snprintf(c, sizeof(c), "%s/32", s->nat_ips[i]);
		want(apilb, "Kubernetes API", "tcp", api, api, c, NULL);
	}
	if (!rules)
		want(apilb, "Kubernetes API", "tcp", api, api, "0.0.0.0/0", NULL);
	cJSON_ArrayForEach(ir, rules)
	{
		const cJSON *c;
		long long from = api, to = api;
		json_get_int(ir, "fromPort", &from);
		json_get_int(ir, "toPort", &to);
		const char *proto = json_str(ir, "protocol");
		cJSON_ArrayForEach(c, json_find(ir, "cidrBlocks"))
		{
			if (cJSON_IsString(c))
				want(apilb, json_str(ir, "description") ? json_str(ir, "description")
									 : "Kubernetes API",
				     proto ? proto : "tcp", from, to, c->valuestring, NULL);
		}
	}
}

/* The flat ingress rules of a DescribeSecurityGroups item. */
static void sg_parse(struct sg *g, const xmlNode *item)
{
	g->n_have = 0;
	for (const xmlNode *p = aws_xml_list(item, "ipPermissions"); p; p = aws_xml_next(p)) {
		struct sg_rule base = {.from = -1, .to = -1};
		capa_strcpy(base.proto, sizeof(base.proto), aws_xml_text(p, "ipProtocol"));
		aws_xml_int(p, "fromPort", &base.from);
		aws_xml_int(p, "toPort", &base.to);
		for (const xmlNode *c = aws_xml_list(p, "ipRanges"); c && g->n_have < SG_MAX_RULES;
		     c = aws_xml_next(c)) {
			struct sg_rule *r = &g->have[g->n_have++];
			*r = base;
			capa_strcpy(r->cidr, sizeof(r->cidr), aws_xml_text(c, "cidrIp"));
			capa_strcpy(r->desc, sizeof(r->desc), aws_xml_text(c, "description"));
		}
		for (const xmlNode *c = aws_xml_list(p, "groups"); c && g->n_have < SG_MAX_RULES;
		     c = aws_xml_next(c)) {
			struct sg_rule *r = &g->have[g->n_have++];
			*r = base;
			capa_strcpy(r->group, sizeof(r->group), aws_xml_text(c, "groupId"));
			capa_strcpy(r->desc, sizeof(r->desc), aws_xml_text(c, "description"));
		}
	}
}

/* Authorize or revoke rules (one call per group, each rule its own IpPermissions.N). A revoke
 * names a rule as described, description included (moto matches a source group with it; AWS
 * ignores it). */
static int sg_rules_call(struct capa_scope *s, const char *action, const struct sg *g,
			 const struct sg_rule *const *rules, size_t n)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if (n == 0)
		return 0;
	aws_query_add(&q, "GroupId", g->id);
	for (size_t i = 0; i < n; i++) {
		const struct sg_rule *u = rules[i];
		int k = (int)i + 1;
		aws_query_addf(&q, u->proto, "IpPermissions.%d.IpProtocol", k);
		char from[24], to[24];
		snprintf(from, sizeof(from), "%lld", u->from);
		snprintf(to, sizeof(to), "%lld", u->to);
		aws_query_addf(&q, from, "IpPermissions.%d.FromPort", k);
		aws_query_addf(&q, to, "IpPermissions.%d.ToPort", k);
		if (u->cidr[0]) {
			aws_query_addf(&q, u->cidr, "IpPermissions.%d.IpRanges.1.CidrIp", k);
			if (u->desc[0])
				aws_query_addf(&q, u->desc, "IpPermissions.%d.IpRanges.1.Description", k);
		} else {
			aws_query_addf(&q, u->group, "IpPermissions.%d.Groups.1.GroupId", k);
			if (u->desc[0])
				aws_query_addf(&q, u->desc,
					       "IpPermissions.%d.Groups.1.Description", k);
		}
	}
	r = capa_net_create(s, action, &q, NULL, NULL, &rep);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static int sg_create(struct capa_scope *s, int role, struct sg *g)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct capa_tags t = {0};
	char desc[400], k8s[320];
	int r;

	snprintf(desc, sizeof(desc), "Kubernetes cluster %s: %s", s->name, sg_roles[role]);
	snprintf(k8s, sizeof(k8s), CAPA_TAG_K8S_CLUSTER_PREFIX "%s", s->name);
	aws_query_add(&q, "GroupName", g->name);
	aws_query_add(&q, "GroupDescription", desc);
	aws_query_add(&q, "VpcId", capa_vpc_id(s));
	if ((r = capa_net_tags(s, &t, sg_roles[role], g->name)) < 0 ||
	    (role == SG_LB && (r = capa_tags_set(&t, k8s, "owned")) < 0) ||
	    (r = capa_net_create(s, "CreateSecurityGroup", &q, "security-group", &t, &rep)) < 0)
		goto out;
	if ((r = capa_reply_id(s, rep.result, "groupId", "security group", g->id, sizeof(g->id))) < 0)
		goto out;
	log_info("created security group", KV_S("cluster", s->name), KV_S("group", g->id),
		 KV_S("name", g->name));
out:
	capa_tags_release(&t);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

/* status.networkStatus.securityGroups.<role>: id, name, ingressRule. */
static int sg_status(struct capa_scope *s, struct sg *all)
{
	cJSON *st = cJSON_GetObjectItemCaseSensitive(s->obj, "status");
	cJSON *groups = cJSON_CreateObject();

	if (!st || !groups) {
		cJSON_Delete(groups);
		return -ENOMEM;
	}
	for (int i = 0; i < SG_N; i++) {
		if (!all[i].id[0])
			continue; /* the bastion's, when there is none */
		cJSON *g = cJSON_AddObjectToObject(groups, sg_roles[i]);
		cJSON *rules = g ? cJSON_AddArrayToObject(g, "ingressRule") : NULL;
		if (!rules)
			break;
		cJSON_AddStringToObject(g, "id", all[i].id);
		cJSON_AddStringToObject(g, "name", all[i].name);
		for (size_t k = 0; k < all[i].n_want; k++) {
			const struct sg_rule *u = &all[i].want[k];
			cJSON *o = cJSON_CreateObject();
			if (!o)
				break;
			cJSON_AddItemToArray(rules, o);
			cJSON_AddStringToObject(o, "description", u->desc);
			cJSON_AddStringToObject(o, "protocol", u->proto);
			cJSON_AddNumberToObject(o, "fromPort", (double)u->from);
			cJSON_AddNumberToObject(o, "toPort", (double)u->to);
			const char *v = u->cidr[0] ? u->cidr : u->group;
			cJSON *arr = cJSON_AddArrayToObject(
			    o, u->cidr[0] ? "cidrBlocks" : "sourceSecurityGroupIds");
			if (arr)
				cJSON_AddItemToArray(arr, cJSON_CreateString(v));
		}
	}
	cJSON *ns = cJSON_GetObjectItemCaseSensitive(st, "networkStatus");
	if (!ns)
		ns = cJSON_AddObjectToObject(st, "networkStatus");
	return ns ? json_put(ns, "securityGroups", groups) : -ENOMEM;
}

int capa_sg_reconcile(struct capa_scope *s)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct sg *all = calloc(SG_N, sizeof(*all));
	int r;

	if (!all)
		return -ENOMEM;
	aws_query_add_filter(&q, "vpc-id", (const char *[]){capa_vpc_id(s)}, 1);
	capa_net_filter_owned(s, &q);
	r = capa_scope_ec2(s, "DescribeSecurityGroups", &q, &rep);
	aws_query_release(&q);
	if (r < 0)
		goto out;
	/* first pass: the groups */
	for (int i = 0; i < SG_N && r >= 0; i++) {
		/* CAPA: a cluster name starting with "sg-" gets an '@' prefix */
		snprintf(all[i].name, sizeof(all[i].name), "%s%s-%s",
			 strncmp(s->name, "sg-", 3) == 0 ? "@" : "", s->name, sg_roles[i]);
		for (const xmlNode *it = aws_xml_list(rep.result, "securityGroupInfo"); it;
		     it = aws_xml_next(it)) {
			const char *n = aws_xml_text(it, "groupName");
			if (n && strcmp(n, all[i].name) == 0) {
				capa_strcpy(all[i].id, sizeof(all[i].id), aws_xml_text(it, "groupId"));
				sg_parse(&all[i], it);
			}
		}
		/* the bastion's group only once the bastion is enabled (kept, emptied, after) */
		if (!all[i].id[0] && (i != SG_BASTION || capa_bastion_enabled(s)))
			r = sg_create(s, i, &all[i]);
	}
	if (r < 0)
		goto out;
	/* second pass: the rules (revoke what is not wanted, then authorize what is missing) */
	sg_desired(s, all);
	for (int i = 0; i < SG_N && r >= 0; i++) {
		const struct sg_rule *rev[SG_MAX_RULES], *add[SG_MAX_RULES];
		size_t n_rev = 0, n_add = 0;
		for (size_t k = 0; k < all[i].n_have; k++)
			if (!rule_in(&all[i].have[k], all[i].want, all[i].n_want))
				rev[n_rev++] = &all[i].have[k];
		for (size_t k = 0; k < all[i].n_want; k++)
			if (!rule_in(&all[i].want[k], all[i].have, all[i].n_have) &&
			    !rule_in(&all[i].want[k], all[i].want, k))
				add[n_add++] = &all[i].want[k];
		if ((r = sg_rules_call(s, "RevokeSecurityGroupIngress", &all[i], rev, n_rev)) >= 0)
			r = sg_rules_call(s, "AuthorizeSecurityGroupIngress", &all[i], add, n_add);
	}
	if (r >= 0)
		r = sg_status(s, all);
	capa_strcpy(s->sg_apilb, sizeof(s->sg_apilb), all[SG_APILB].id);
out:
	capa_scope_condition(s, CAPA_COND_SG, r >= 0, "ClusterSecurityGroupReconciliationFailed");
	aws_reply_release(&rep);
	free(all);
	return r;
}

int capa_sg_delete(struct capa_scope *s)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct sg *g = calloc(1, sizeof(*g));
	const char *vpc = capa_vpc_id(s);
	int r;

	if (!g)
		return -ENOMEM;
	capa_net_filter_owned(s, &q);
	if (vpc)
		aws_query_add_filter(&q, "vpc-id", (const char *[]){vpc}, 1);
	r = capa_scope_ec2(s, "DescribeSecurityGroups", &q, &rep);
	aws_query_release(&q);
	if (r < 0)
		goto out;
	/* every group's ingress first: rules name the other groups */
	for (const xmlNode *it = aws_xml_list(rep.result, "securityGroupInfo"); it && r >= 0;
	     it = aws_xml_next(it)) {
		const struct sg_rule *rev[SG_MAX_RULES];
		if (!capa_net_owned(s, it))
			continue;
		capa_strcpy(g->id, sizeof(g->id), aws_xml_text(it, "groupId"));
		sg_parse(g, it);
		for (size_t k = 0; k < g->n_have; k++)
			rev[k] = &g->have[k];
		r = sg_rules_call(s, "RevokeSecurityGroupIngress", g, rev, g->n_have);
	}
	for (const xmlNode *it = aws_xml_list(rep.result, "securityGroupInfo"); it && r >= 0;
	     it = aws_xml_next(it)) {
		if (!capa_net_owned(s, it))
			continue;
		const char *id = aws_xml_text(it, "groupId");
		aws_query_init(&q);
		aws_query_add(&q, "GroupId", id);
		struct aws_reply d = {0};
		r = capa_net_create(s, "DeleteSecurityGroup", &q, NULL, NULL, &d);
		aws_reply_release(&d);
		aws_query_release(&q);
		if (r < 0 && strcmp(s->code, "InvalidGroup.NotFound") == 0) {
			/* already gone (a retry after a lost reply): done, as CAPA */
			log_info("security group already deleted", KV_S("cluster", s->name),
				 KV_S("group", id));
			s->err[0] = s->code[0] = 0;
			r = 0;
		} else if (r >= 0) {
			log_info("deleted security group", KV_S("cluster", s->name), KV_S("group", id));
		}
	}
out:
	aws_reply_release(&rep);
	free(g);
	return r;
}
