/* Deleting the managed network (network.go DeleteNetwork), in reverse of the create: route
 * tables (disassociated, then deleted), NAT gateways (polled until deleted), Elastic IPs
 * (disassociated, then released), the internet gateway (detached, then deleted), subnets, the
 * VPC. Each step finds its resources by the cluster's owned tag, not only by what the spec
 * recorded, so what an interrupted create made is deleted too; the first error stops the pass
 * (retried by the queue). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/capa/capa_byo.h"
#include "modules/capa/capa_cluster.h"
#include "modules/capa/capa_net.h"

/* Describe with the owned filter (and the VPC's when known). */
static int owned_describe(struct capa_scope *s, const char *action, bool by_vpc,
			  struct aws_reply *rep)
{
	struct aws_query q = AWS_QUERY_INIT;
	const char *vpc = capa_vpc_id(s);
	int r;

	capa_net_filter_owned(s, &q);
	if (by_vpc && vpc)
		aws_query_add_filter(&q, "vpc-id", (const char *[]){vpc}, 1);
	r = capa_scope_ec2(s, action, &q, rep);
	aws_query_release(&q);
	return r;
}

static int call1(struct capa_scope *s, const char *action, const char *k1, const char *v1,
		 const char *k2, const char *v2)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	aws_query_add(&q, k1, v1);
	if (k2)
		aws_query_add(&q, k2, v2);
	r = capa_net_create(s, action, &q, NULL, NULL, &rep);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static int rt_delete(struct capa_scope *s)
{
	struct aws_reply rep = {0};
	int r;

	if ((r = owned_describe(s, "DescribeRouteTables", true, &rep)) < 0)
		return r;
	for (const xmlNode *rt = aws_xml_list(rep.result, "routeTableSet"); rt && r >= 0;
	     rt = aws_xml_next(rt)) {
		const char *id = aws_xml_text(rt, "routeTableId");
		for (const xmlNode *a = aws_xml_list(rt, "associationSet"); a && r >= 0;
		     a = aws_xml_next(a)) {
			bool main = false;
			aws_xml_bool(a, "main", &main);
			if (!main)
				r = call1(s, "DisassociateRouteTable", "AssociationId",
					  aws_xml_text(a, "routeTableAssociationId"), NULL, NULL);
		}
		if (r >= 0 && (r = call1(s, "DeleteRouteTable", "RouteTableId", id, NULL, NULL)) >= 0)
			log_info("deleted route table", KV_S("cluster", s->name),
				 KV_S("routeTable", id));
	}
	aws_reply_release(&rep);
	return r;
}

/* NAT gateways not yet deleted: deleted, then polled (up to 2 min, as CAPA) until gone. */
static int nat_delete(struct capa_scope *s)
{
	int64_t deadline = now_mono_ns() + 120 * NSEC_PER_SEC;
	int r;

	for (;;) {
		struct aws_reply rep = {0};
		size_t left = 0;
		if ((r = owned_describe(s, "DescribeNatGateways", false, &rep)) < 0)
			return r;
		for (const xmlNode *gw = aws_xml_list(rep.result, "natGatewaySet"); gw && r >= 0;
		     gw = aws_xml_next(gw)) {
			const char *id = aws_xml_text(gw, "natGatewayId");
			const char *st = aws_xml_text(gw, "state");
			if (!st || strcmp(st, "deleted") == 0)
				continue;
			left++;
			if (strcmp(st, "deleting") != 0 &&
			    (r = call1(s, "DeleteNatGateway", "NatGatewayId", id, NULL, NULL)) >= 0)
				log_info("deleting NAT gateway", KV_S("cluster", s->name),
					 KV_S("nat", id));
		}
		aws_reply_release(&rep);
		if (r < 0 || left == 0)
			return r;
		if (now_mono_ns() > deadline) {
			str_printf(s->err, sizeof(s->err), "%zu NAT gateways still deleting", left);
			return -EAGAIN;
		}
		if (cancel_wait(s->x->cancel, 2 * NSEC_PER_SEC))
			return -ECANCELED;
	}
}

static int eip_delete(struct capa_scope *s)
{
	struct aws_reply rep = {0};
	int r;

	if ((r = owned_describe(s, "DescribeAddresses", false, &rep)) < 0)
		return r;
	for (const xmlNode *a = aws_xml_list(rep.result, "addressesSet"); a && r >= 0;
	     a = aws_xml_next(a)) {
		const char *alloc = aws_xml_text(a, "allocationId");
		const char *assoc = aws_xml_text(a, "associationId");
		if (assoc && *assoc &&
		    (r = call1(s, "DisassociateAddress", "AssociationId", assoc, NULL, NULL)) < 0)
			break;
		if ((r = call1(s, "ReleaseAddress", "AllocationId", alloc, NULL, NULL)) >= 0)
			log_info("released Elastic IP", KV_S("cluster", s->name),
				 KV_S("allocation", alloc));
	}
	aws_reply_release(&rep);
	return r;
}

static int igw_delete(struct capa_scope *s)
{
	struct aws_reply rep = {0};
	int r;

	if ((r = owned_describe(s, "DescribeInternetGateways", false, &rep)) < 0)
		return r;
	for (const xmlNode *g = aws_xml_list(rep.result, "internetGatewaySet"); g && r >= 0;
	     g = aws_xml_next(g)) {
		const char *id = aws_xml_text(g, "internetGatewayId");
		for (const xmlNode *a = aws_xml_list(g, "attachmentSet"); a && r >= 0;
		     a = aws_xml_next(a))
			r = call1(s, "DetachInternetGateway", "InternetGatewayId", id, "VpcId",
				  aws_xml_text(a, "vpcId"));
		if (r >= 0 &&
		    (r = call1(s, "DeleteInternetGateway", "InternetGatewayId", id, NULL, NULL)) >= 0)
			log_info("deleted internet gateway", KV_S("cluster", s->name),
				 KV_S("igw", id));
	}
	aws_reply_release(&rep);
	return r;
}

static int each_delete(struct capa_scope *s, const char *describe, const char *set,
		       const char *id_field, const char *del, const char *param)
{
	struct aws_reply rep = {0};
	int r;

	if ((r = owned_describe(s, describe, false, &rep)) < 0)
		return r;
	for (const xmlNode *it = aws_xml_list(rep.result, set); it && r >= 0; it = aws_xml_next(it)) {
		const char *id = aws_xml_text(it, id_field);
		/* only what the cluster owns: a shared tag is not ours to delete */
		if (!capa_net_owned(s, it))
			continue;
		if ((r = call1(s, del, param, id, NULL, NULL)) >= 0)
			log_info("deleted", KV_S("cluster", s->name), KV_S("id", id));
	}
	aws_reply_release(&rep);
	return r;
}

int capa_net_delete(struct capa_scope *s)
{
	int r;

	if ((r = capa_byo_unmanaged(s)) != 0)
		return r < 0 ? r : 0; /* the user's network: nothing of it is deleted */
	if ((r = rt_delete(s)) < 0 || (r = nat_delete(s)) < 0 || (r = eip_delete(s)) < 0 ||
	    (r = igw_delete(s)) < 0 ||
	    (r = each_delete(s, "DescribeSubnets", "subnetSet", "subnetId", "DeleteSubnet",
			     "SubnetId")) < 0 ||
	    (r = each_delete(s, "DescribeVpcs", "vpcSet", "vpcId", "DeleteVpc", "VpcId")) < 0)
		return r;
	return 0;
}
