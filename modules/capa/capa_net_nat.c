/* NAT gateways with their Elastic IPs (natgateways.go, eips.go) and the route tables of the
 * subnets (routetables.go): one NAT per zone that has both a public and a private subnet,
 * placed in the public one; one route table per subnet, public ones routing 0.0.0.0/0 to the
 * internet gateway, private ones to their zone's NAT. */
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

static bool is_public(const cJSON *sn)
{
	bool pub = false;
	json_get_bool(sn, "isPublic", &pub);
	return pub;
}

/* The subnet of the spec in zone az that is public (or private), or NULL. */
static cJSON *subnet_in(struct capa_scope *s, const char *az, bool pub)
{
	cJSON *sn;
	cJSON_ArrayForEach(sn, json_find(s->obj, "spec.network.subnets"))
	{
		const char *z = json_str(sn, "availabilityZone");
		if (z && strcmp(z, az) == 0 && is_public(sn) == pub && json_str(sn, "id"))
			return sn;
	}
	return NULL;
}

/* ---- NAT gateways ---- */

struct eips {
	struct aws_reply rep; /* DescribeAddresses, asked once */
	bool asked;
	char used[CAPA_MAX_ZONES * 2][32]; /* allocation IDs taken by gateways */
	size_t n_used;
};

static bool eip_used(const struct eips *e, const char *alloc)
{
	for (size_t i = 0; i < e->n_used; i++)
		if (strcmp(e->used[i], alloc) == 0)
			return true;
	return false;
}

static void eip_take(struct eips *e, const char *alloc)
{
	if (alloc && e->n_used < ARRAY_SIZE(e->used))
		capa_strcpy(e->used[e->n_used++], sizeof(e->used[0]), alloc);
}

/* A free EIP of the cluster with role common (reused, as CAPA does), or a new one. */
static int eip_get(struct capa_scope *s, struct eips *e, char alloc[32])
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct capa_tags t = {0};
	char name[300];
	int r;

	if (!e->asked) {
		capa_net_filter_owned(s, &q);
		r = capa_scope_ec2(s, "DescribeAddresses", &q, &e->rep);
		aws_query_release(&q);
		if (r < 0)
			return r;
		e->asked = true;
	}
	for (const xmlNode *it = aws_xml_list(e->rep.result, "addressesSet"); it;
	     it = aws_xml_next(it)) {
		const char *a = aws_xml_text(it, "allocationId");
		bool common = false;
		for (const xmlNode *tg = aws_xml_list(it, "tagSet"); tg; tg = aws_xml_next(tg)) {
			const char *k = aws_xml_text(tg, "key"), *v = aws_xml_text(tg, "value");
			common |= k && v && strcmp(k, CAPA_TAG_ROLE) == 0 && strcmp(v, "common") == 0;
		}
		if (a && common && !aws_xml_text(it, "associationId") && !eip_used(e, a)) {
			capa_strcpy(alloc, 32, a);
			eip_take(e, a);
			return 0;
		}
	}
	snprintf(name, sizeof(name), "%s-eip-common", s->name);
	aws_query_add(&q, "Domain", "vpc");
	if ((r = capa_net_tags(s, &t, "common", name)) < 0 ||
	    (r = capa_net_create(s, "AllocateAddress", &q, "elastic-ip", &t, &rep)) < 0)
		goto out;
	if ((r = capa_reply_id(s, rep.result, "allocationId", "Elastic IP", alloc, 32)) < 0)
		goto out;
	eip_take(e, alloc);
	log_info("allocated Elastic IP", KV_S("cluster", s->name), KV_S("allocation", alloc),
		 KV_S("ip", aws_xml_text(rep.result, "publicIp")));
out:
	capa_tags_release(&t);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

/* Gateways not yet available: CAPA waits for them before the route tables point at them. */
struct nat_pending {
	char ids[CAPA_MAX_ZONES][32];
	size_t n;
};

static void nat_pending_note(struct nat_pending *p, const xmlNode *gw, const char *id)
{
	const char *st = aws_xml_text(gw, "state");
	if (st && strcmp(st, "available") != 0 && p->n < CAPA_MAX_ZONES)
		capa_strcpy(p->ids[p->n++], sizeof(p->ids[0]), id);
}

static void nat_ip(struct capa_scope *s, const xmlNode *gw)
{
	const char *ip = aws_xml_text(aws_xml_list(gw, "natGatewayAddressSet"), "publicIp");
	if (ip && s->n_nat_ips < CAPA_MAX_ZONES)
		capa_strcpy(s->nat_ips[s->n_nat_ips++], sizeof(s->nat_ips[0]), ip);
}

static int nat_create(struct capa_scope *s, const char *subnet, const char *alloc, char id[32],
		      struct nat_pending *pend)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct capa_tags t = {0};
	const char *uid = json_str(s->obj, "metadata.uid");
	char name[300], token[80];
	int r;

	snprintf(name, sizeof(name), "%s-nat", s->name);
	aws_query_add(&q, "SubnetId", subnet);
	aws_query_add(&q, "AllocationId", alloc);
	/* better than CAPA: a retry after a lost reply, or a restart after a kill, gets the same
	 * gateway back from EC2 instead of a second one (64 ASCII characters at most) */
	if (uid && strlen(uid) + strlen(subnet) + 1 <= 64) {
		str_printf(token, sizeof(token), "%s-%s", uid, subnet);
		aws_query_add(&q, "ClientToken", token);
	}
	if ((r = capa_net_tags(s, &t, "common", name)) < 0 ||
	    (r = capa_net_create(s, "CreateNatGateway", &q, "natgateway", &t, &rep)) < 0)
		goto out;
	const xmlNode *gw = aws_xml_get(rep.result, "natGateway");
	if ((r = capa_reply_id(s, gw, "natGatewayId", "NAT gateway", id, 32)) < 0)
		goto out;
	nat_ip(s, gw);
	nat_pending_note(pend, gw, id);
	log_info("created NAT gateway", KV_S("cluster", s->name), KV_S("nat", id),
		 KV_S("subnet", subnet), KV_S("allocation", alloc));
out:
	capa_tags_release(&t);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

/* The existing gateway of a public subnet (its ID in id), or "" when it needs one. */
static void nat_find(struct capa_scope *s, const xmlNode *first, const char *sid, char id[32],
		     struct nat_pending *pend)
{
	id[0] = 0;
	for (const xmlNode *gw = first; gw; gw = aws_xml_next(gw)) {
		const char *gs = aws_xml_text(gw, "subnetId");
		if (gs && strcmp(gs, sid) == 0) {
			capa_strcpy(id, 32, aws_xml_text(gw, "natGatewayId"));
			nat_ip(s, gw);
			nat_pending_note(pend, gw, id);
			return;
		}
	}
}

int capa_nat_reconcile(struct capa_scope *s)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct eips e = {0};
	struct nat_pending pend = {0};
	cJSON *pub, *need[CAPA_MAX_ZONES];
	char alloc[CAPA_MAX_ZONES][32];
	size_t n_need = 0;
	int r;

	s->n_nat_ips = 0;
	aws_query_add_filter(&q, "vpc-id", (const char *[]){capa_vpc_id(s)}, 1);
	aws_query_add_filter(&q, "state", (const char *[]){"pending", "available"}, 2);
	r = capa_scope_ec2(s, "DescribeNatGateways", &q, &rep);
	aws_query_release(&q);
	if (r < 0)
		return r;
	const xmlNode *first = aws_xml_list(rep.result, "natGatewaySet");
	for (const xmlNode *gw = first; gw; gw = aws_xml_next(gw))
		eip_take(&e, aws_xml_text(aws_xml_list(gw, "natGatewayAddressSet"), "allocationId"));
	/* the public subnets of zones with a private one: their gateway, or a need for one */
	cJSON_ArrayForEach(pub, json_find(s->obj, "spec.network.subnets"))
	{
		const char *az = json_str(pub, "availabilityZone"), *sid = json_str(pub, "id");
		char id[32];
		if (!is_public(pub) || !az || !sid || !subnet_in(s, az, false))
			continue;
		nat_find(s, first, sid, id, &pend);
		if (id[0])
			r = capa_net_set(s, pub, "natGatewayId", id);
		else if (n_need < CAPA_MAX_ZONES)
			need[n_need++] = pub;
		if (r < 0)
			goto out;
	}
	/* as CAPA: the addresses first, then the gateways */
	for (size_t i = 0; i < n_need; i++)
		if ((r = eip_get(s, &e, alloc[i])) < 0)
			goto out;
	for (size_t i = 0; i < n_need; i++) {
		char id[32] = "";
		if ((r = nat_create(s, json_str(need[i], "id"), alloc[i], id, &pend)) < 0 ||
		    (r = capa_net_set(s, need[i], "natGatewayId", id)) < 0)
			goto out;
	}
	/* as CAPA (which waits up to 2 minutes in the reconcile): no route to a gateway that is
	 * not available yet; the pass ends here and the queue retries (1 s, doubling), each retry
	 * one filtered DescribeNatGateways */
	if (pend.n) {
		str_printf(s->err, sizeof(s->err), "%zu NAT gateway(s) not available yet (%s%s)",
			   pend.n, pend.ids[0], pend.n > 1 ? ", ..." : "");
		r = -EAGAIN;
	}
out:
	aws_reply_release(&e.rep);
	aws_reply_release(&rep);
	return r;
}

/* ---- route tables ---- */

static const xmlNode *rt_find(const xmlNode *first, const char *subnet, const char *name)
{
	const xmlNode *spare = NULL;

	for (const xmlNode *rt = first; rt; rt = aws_xml_next(rt)) {
		bool associated = false;
		for (const xmlNode *a = aws_xml_list(rt, "associationSet"); a; a = aws_xml_next(a)) {
			const char *sn = aws_xml_text(a, "subnetId");
			if (sn && strcmp(sn, subnet) == 0)
				return rt;
			associated |= sn != NULL;
		}
		/* left unassociated by an interrupted reconcile: taken back by its Name */
		for (const xmlNode *t = aws_xml_list(rt, "tagSet"); t && !associated && !spare;
		     t = aws_xml_next(t)) {
			const char *k = aws_xml_text(t, "key"), *v = aws_xml_text(t, "value");
			if (k && v && strcmp(k, "Name") == 0 && strcmp(v, name) == 0)
				spare = rt;
		}
	}
	return spare;
}

static int rt_call(struct capa_scope *s, const char *action, const char *rt, const char *k2,
		   const char *v2, const char *k3, const char *v3)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	aws_query_add(&q, "RouteTableId", rt);
	aws_query_add(&q, k2, v2);
	if (k3)
		aws_query_add(&q, k3, v3);
	r = capa_net_create(s, action, &q, NULL, NULL, &rep);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static int rt_create(struct capa_scope *s, const char *name, char id[32])
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct capa_tags t = {0};
	char k8s[320];
	int r;

	snprintf(k8s, sizeof(k8s), CAPA_TAG_K8S_CLUSTER_PREFIX "%s", s->name);
	aws_query_add(&q, "VpcId", capa_vpc_id(s));
	if ((r = capa_net_tags(s, &t, "common", name)) < 0 ||
	    (r = capa_tags_set(&t, k8s, "owned")) < 0 ||
	    (r = capa_net_create(s, "CreateRouteTable", &q, "route-table", &t, &rep)) < 0)
		goto out;
	if ((r = capa_reply_id(s, rep.result, "routeTable/routeTableId", "route table", id, 32)) < 0)
		goto out;
	log_info("created route table", KV_S("cluster", s->name), KV_S("routeTable", id),
		 KV_S("name", name));
out:
	capa_tags_release(&t);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

/* The default route of one subnet's table: created, or replaced when it points elsewhere. */
static int rt_route(struct capa_scope *s, const xmlNode *have, const char *id, bool pub,
		    const char *target)
{
	const char *key = pub ? "GatewayId" : "NatGatewayId";

	for (const xmlNode *ro = aws_xml_list(have, "routeSet"); ro; ro = aws_xml_next(ro)) {
		const char *d = aws_xml_text(ro, "destinationCidrBlock");
		if (!d || strcmp(d, "0.0.0.0/0") != 0)
			continue;
		const char *cur = aws_xml_text(ro, pub ? "gatewayId" : "natGatewayId");
		if (cur && strcmp(cur, target) == 0)
			return 0;
		return rt_call(s, "ReplaceRoute", id, "DestinationCidrBlock", "0.0.0.0/0", key,
			       target);
	}
	return rt_call(s, "CreateRoute", id, "DestinationCidrBlock", "0.0.0.0/0", key, target);
}

int capa_rt_reconcile(struct capa_scope *s)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	cJSON *sn;
	int r;

	aws_query_add_filter(&q, "vpc-id", (const char *[]){capa_vpc_id(s)}, 1);
	capa_net_filter_owned(s, &q);
	r = capa_scope_ec2(s, "DescribeRouteTables", &q, &rep);
	aws_query_release(&q);
	if (r < 0)
		return r;
	const xmlNode *first = aws_xml_list(rep.result, "routeTableSet");
	cJSON_ArrayForEach(sn, json_find(s->obj, "spec.network.subnets"))
	{
		const char *sid = json_str(sn, "id"), *az = json_str(sn, "availabilityZone");
		bool pub = is_public(sn);
		char name[320], id[32] = "";
		const char *target = s->igw;

		if (!sid || !az)
			continue;
		if (!pub) {
			cJSON *p = subnet_in(s, az, true);
			target = p ? json_str(p, "natGatewayId") : NULL;
			if (!target) {
				str_printf(s->err, sizeof(s->err),
					 "no NAT gateway in zone %s for private subnet %s", az, sid);
				r = -ENOENT;
				break;
			}
		}
		snprintf(name, sizeof(name), "%s-rt-%s-%s", s->name, pub ? "public" : "private", az);
		const xmlNode *have = rt_find(first, sid, name);
		bool associated = false;
		if (have) {
			capa_strcpy(id, sizeof(id), aws_xml_text(have, "routeTableId"));
			for (const xmlNode *a = aws_xml_list(have, "associationSet"); a;
			     a = aws_xml_next(a)) {
				const char *as = aws_xml_text(a, "subnetId");
				associated |= as && strcmp(as, sid) == 0;
			}
		} else if ((r = rt_create(s, name, id)) < 0) {
			break;
		}
		/* CAPA's order: the table, its route, then the association */
		if ((r = rt_route(s, have, id, pub, target)) < 0)
			break;
		if (!associated && (r = rt_call(s, "AssociateRouteTable", id, "SubnetId", sid, NULL,
						NULL)) < 0)
			break;
		if ((r = capa_net_set(s, sn, "routeTableId", id)) < 0)
			break;
	}
	aws_reply_release(&rep);
	return r;
}
