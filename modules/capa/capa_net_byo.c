/* Bring-your-own VPC: CAPA's unmanaged mode (vpc.go, subnets.go, network.go). An AWSCluster
 * whose spec.network.vpc.id names a VPC without the cluster's owned tag uses that network as
 * it is: its CIDR is read, nothing of it is created, changed or deleted (no subnet, internet
 * gateway, NAT gateway, route table, no DNS attribute). The subnets listed in
 * spec.network.subnets must exist in it; their zone, CIDR and whether they are public (their
 * route table, or the VPC's main one, routes to an internet gateway) are recorded in the spec,
 * and they only get the cloud-provider tag kubernetes.io/cluster/<c>=shared (gate
 * TagUnmanagedNetworkResources, on by default). The security groups and the API load balancer
 * are still made and deleted by their own steps. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "modules/capa/capa_byo.h"
#include "modules/capa/capa_cluster.h"
#include "modules/capa/capa_net.h"

int capa_byo_vpc(struct capa_scope *s, const xmlNode *vpc, const char *id)
{
	const char *have = aws_xml_text(vpc, "vpcId"), *cidr = aws_xml_text(vpc, "cidrBlock");
	cJSON *net = capa_scope_network(s);
	int r;

	if (!net)
		return -ENOMEM;
	if (!id || !*id) {
		/* found by the Name tag <c>-vpc: someone else's VPC with our name */
		str_printf(s->err, sizeof(s->err),
			   "VPC %s is named %s-vpc but is not owned by cluster %s",
			   have ? have : "?", s->name, s->name);
		return -EPERM;
	}
	if (!cidr) {
		str_printf(s->err, sizeof(s->err), "VPC %s: reply without a cidrBlock", id);
		return -EBADMSG;
	}
	s->unmanaged = true;
	if ((r = capa_net_set(s, net, "vpc.cidrBlock", cidr)) < 0)
		return r;
	log_v(4, "unmanaged VPC", KV_S("cluster", s->name), KV_S("vpc", id), KV_S("cidr", cidr));
	return 0;
}

int capa_byo_skip(struct capa_scope *s)
{
	return 0;
}

/* A subnet is public when its route table (its own, else the VPC's main one) has a route to
 * an internet gateway (CAPA's describeVpcSubnets). */
static bool subnet_public(const xmlNode *rts, const char *sid)
{
	const xmlNode *own = NULL, *main_rt = NULL;

	for (const xmlNode *rt = rts; rt && !own; rt = aws_xml_next(rt))
		for (const xmlNode *a = aws_xml_list(rt, "associationSet"); a; a = aws_xml_next(a)) {
			const char *as = aws_xml_text(a, "subnetId");
			bool m = false;
			aws_xml_bool(a, "main", &m);
			if (as && strcmp(as, sid) == 0)
				own = rt;
			else if (m)
				main_rt = rt;
		}
	const xmlNode *rt = own ? own : main_rt;
	for (const xmlNode *ro = rt ? aws_xml_list(rt, "routeSet") : NULL; ro; ro = aws_xml_next(ro)) {
		const char *gw = aws_xml_text(ro, "gatewayId");
		if (gw && strncmp(gw, "igw-", 4) == 0)
			return true;
	}
	return false;
}

static const xmlNode *subnet_find(const xmlNode *first, const cJSON *want)
{
	const char *id = json_str(want, "id"), *cidr = json_str(want, "cidrBlock");

	if (id && !*id)
		id = NULL;
	for (const xmlNode *it = first; it; it = aws_xml_next(it)) {
		const char *i = aws_xml_text(it, "subnetId"), *c = aws_xml_text(it, "cidrBlock");
		if (id ? i && strcmp(id, i) == 0 : cidr && c && strcmp(cidr, c) == 0)
			return it;
	}
	return NULL;
}

static bool has_tag(const xmlNode *item, const char *key)
{
	for (const xmlNode *t = aws_xml_list(item, "tagSet"); t; t = aws_xml_next(t)) {
		const char *k = aws_xml_text(t, "key");
		if (k && strcmp(k, key) == 0)
			return true;
	}
	return false;
}

static int set_bool(struct capa_scope *s, cJSON *where, const char *key, bool v)
{
	const cJSON *was = cJSON_GetObjectItemCaseSensitive(where, key);

	if (cJSON_IsBool(was) && cJSON_IsTrue(was) == v)
		return 0;
	s->spec_changed = true;
	return json_set_bool(where, key, v);
}

/* What the spec records of a found subnet. */
static int subnet_record(struct capa_scope *s, cJSON *want, const xmlNode *have, bool pub)
{
	const char *id = aws_xml_text(have, "subnetId"), *az = aws_xml_text(have, "availabilityZone");
	const char *cidr = aws_xml_text(have, "cidrBlock");
	int r;

	if (!id || !az || !cidr) {
		str_printf(s->err, sizeof(s->err), "DescribeSubnets: a subnet without id, zone or CIDR");
		return -EBADMSG;
	}
	if ((r = capa_net_set(s, want, "id", id)) < 0 ||
	    (r = capa_net_set(s, want, "resourceID", id)) < 0 ||
	    (r = capa_net_set(s, want, "availabilityZone", az)) < 0 ||
	    (r = capa_net_set(s, want, "cidrBlock", cidr)) < 0)
		return r;
	return set_bool(s, want, "isPublic", pub);
}

/* One CreateTags for the subnets without a tag of the cluster. */
static int subnets_tag(struct capa_scope *s, char ids[][32], size_t n)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	char key[320];
	int r = 0;

	if (n == 0)
		return 0;
	snprintf(key, sizeof(key), CAPA_TAG_K8S_CLUSTER_PREFIX "%s", s->name);
	for (size_t i = 0; i < n && r >= 0; i++)
		r = aws_query_addf(&q, ids[i], "ResourceId.%zu", i + 1);
	if (r >= 0 && (r = aws_query_add(&q, "Tag.1.Key", key)) >= 0)
		r = aws_query_add(&q, "Tag.1.Value", "shared");
	if (r >= 0 && (r = capa_net_create(s, "CreateTags", &q, NULL, NULL, &rep)) >= 0)
		log_info("tagged the subnets of an unmanaged VPC", KV_S("cluster", s->name),
			 KV_S("tag", key), KV_U("subnets", n));
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int capa_byo_subnets(struct capa_scope *s)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply subs = {0}, rts = {0};
	const char *vpc = capa_vpc_id(s);
	cJSON *list = (cJSON *)json_find(s->obj, "spec.network.subnets"), *want;
	bool tag = capa_feature(s->x, CAPA_GATE_TAG_UNMANAGED, true);
	char key[320], untagged[CAPA_MAX_SUBNETS][32];
	size_t n_untagged = 0;
	int r;

	if (cJSON_GetArraySize(list) < 1) {
		str_printf(s->err, sizeof(s->err),
			   "unmanaged VPC %s: spec.network.subnets lists no subnet (give the IDs of "
			   "existing subnets)", vpc);
		return -EINVAL;
	}
	snprintf(key, sizeof(key), CAPA_TAG_K8S_CLUSTER_PREFIX "%s", s->name);
	aws_query_add_filter(&q, "vpc-id", (const char *[]){vpc}, 1);
	if ((r = capa_scope_ec2(s, "DescribeSubnets", &q, &subs)) < 0 ||
	    (r = capa_scope_ec2(s, "DescribeRouteTables", &q, &rts)) < 0)
		goto out;
	const xmlNode *first = aws_xml_list(subs.result, "subnetSet");
	const xmlNode *rt_first = aws_xml_list(rts.result, "routeTableSet");
	cJSON_ArrayForEach(want, list)
	{
		const xmlNode *have = subnet_find(first, want);
		if (!have) {
			const char *id = json_str(want, "id"), *cidr = json_str(want, "cidrBlock");
			str_printf(s->err, sizeof(s->err),
				   "unmanaged VPC %s: subnet %s is not found in it", vpc,
				   id && *id ? id : cidr ? cidr : "(neither id nor cidrBlock given)");
			r = -ENOENT;
			goto out;
		}
		const char *sid = aws_xml_text(have, "subnetId");
		if ((r = subnet_record(s, want, have, subnet_public(rt_first, sid))) < 0)
			goto out;
		if (tag && !has_tag(have, key) && n_untagged < CAPA_MAX_SUBNETS)
			capa_strcpy(untagged[n_untagged++], sizeof(untagged[0]), sid);
	}
	r = subnets_tag(s, untagged, n_untagged);
out:
	aws_reply_release(&rts);
	aws_reply_release(&subs);
	aws_query_release(&q);
	return r;
}

int capa_byo_unmanaged(struct capa_scope *s)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	const char *id = capa_vpc_id(s);
	int r;

	if (!id || !*id)
		return 0;
	aws_query_add(&q, "VpcId.1", id);
	r = capa_scope_ec2(s, "DescribeVpcs", &q, &rep);
	aws_query_release(&q);
	if (r < 0) {
		if (strcmp(s->code, "InvalidVpcID.NotFound") != 0)
			return r;
		s->err[0] = s->code[0] = 0; /* gone: what the cluster owns is found by its tag */
		return 0;
	}
	const xmlNode *it = aws_xml_list(rep.result, "vpcSet");
	r = it && !capa_net_owned(s, it);
	aws_reply_release(&rep);
	return r;
}
