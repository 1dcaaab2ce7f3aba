/* The managed network of an AWSCluster, in CAPA's order (pkg/cloud/services/network): VPC,
 * subnets, internet gateway, then NAT gateways and route tables (capa_net_nat.c). Every
 * Describe is filtered by the cluster's VPC or its owned tag, never the whole account; a
 * resource is created only when no resource of the cluster fills its role, so a restart after a
 * crash finds what it made (the VPC by Name tag, subnets by CIDR, the gateway by tag). */
#include <arpa/inet.h>
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

/* ---- CAPA's default subnet layout ---- */

static int bits_for(int n)
{
	int b = 0;
	while ((1 << b) < n)
		b++;
	return b;
}

static void cidr_fmt(uint32_t addr, int prefix, char out[20])
{
	struct in_addr a = {.s_addr = htonl(addr)};
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	str_printf(out, 20, "%s/%d", ip, prefix);
}

int capa_default_subnets(const char *vpc_cidr, int zones, char pub[][20], char priv[][20])
{
	char ip[INET_ADDRSTRLEN];
	const char *slash = strchr(vpc_cidr, '/');
	long long prefix;
	struct in_addr a;

	if (zones < 1 || zones > CAPA_MAX_ZONES || !slash ||
	    (size_t)(slash - vpc_cidr) >= sizeof(ip) ||
	    str_to_ll(slash + 1, 0, 32, &prefix) < 0)
		return -EINVAL;
	memcpy(ip, vpc_cidr, (size_t)(slash - vpc_cidr));
	ip[slash - vpc_cidr] = 0;
	if (inet_pton(AF_INET, ip, &a) != 1)
		return -EINVAL;
	int b1 = bits_for(zones + 1), b2 = bits_for(zones);
	int p1 = (int)prefix + b1, p2 = p1 + b2;
	if (p2 > 28)
		return -EINVAL; /* AWS's smallest subnet is a /28 */
	uint32_t base = ntohl(a.s_addr) & (prefix ? ~0u << (32 - prefix) : 0);
	for (int i = 0; i < zones; i++) {
		cidr_fmt(base + ((uint32_t)i << (32 - p2)), p2, pub[i]);
		cidr_fmt(base + ((uint32_t)(i + 1) << (32 - p1)), p1, priv[i]);
	}
	return 0;
}

/* ---- VPC (vpc.go) ---- */

static int vpc_dns(struct capa_scope *s, const char *vpc, const char *attr)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	bool on = false;
	char key[64];
	int r;

	aws_query_add(&q, "VpcId", vpc);
	aws_query_add(&q, "Attribute", attr);
	r = capa_scope_ec2(s, "DescribeVpcAttribute", &q, &rep);
	aws_query_release(&q);
	if (r < 0)
		return r;
	snprintf(key, sizeof(key), "%s/value", attr);
	aws_xml_bool(rep.result, key, &on);
	aws_reply_release(&rep);
	if (on)
		return 0;
	aws_query_init(&q);
	aws_query_add(&q, "VpcId", vpc);
	snprintf(key, sizeof(key), "%c%s.Value", attr[0] - 'a' + 'A', attr + 1);
	aws_query_add(&q, key, "true");
	r = capa_net_create(s, "ModifyVpcAttribute", &q, NULL, NULL, &rep);
	aws_query_release(&q);
	aws_reply_release(&rep);
	return r;
}

static int vpc_reconcile(struct capa_scope *s)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct capa_tags t = {0};
	char name[300], vpc[32] = "";
	cJSON *net = capa_scope_network(s);
	const char *id = capa_vpc_id(s);
	const char *cidr = json_str(s->obj, "spec.network.vpc.cidrBlock");
	int r;

	if (!net)
		return -ENOMEM;
	if (!cidr)
		cidr = "10.0.0.0/16";
	snprintf(name, sizeof(name), "%s-vpc", s->name);
	if (id && *id) {
		aws_query_add(&q, "VpcId.1", id);
	} else {
		aws_query_add_filter(&q, "tag:Name", (const char *[]){name}, 1);
		aws_query_add_filter(&q, "state", (const char *[]){"pending", "available"}, 2);
	}
	if ((r = capa_scope_ec2(s, "DescribeVpcs", &q, &rep)) < 0)
		goto out;
	const xmlNode *it = aws_xml_list(rep.result, "vpcSet");
	if (it) {
		if (!capa_net_owned(s, it)) {
			r = capa_byo_vpc(s, it, id); /* unmanaged: read, never changed */
			goto out;
		}
		capa_strcpy(vpc, sizeof(vpc), aws_xml_text(it, "vpcId"));
		const char *c = aws_xml_text(it, "cidrBlock");
		if (c)
			cidr = c;
	} else if (id && *id) {
		str_printf(s->err, sizeof(s->err), "VPC %s not found", id);
		r = -ENOENT;
		goto out;
	} else {
		aws_reply_release(&rep);
		aws_query_release(&q);
		aws_query_add(&q, "CidrBlock", cidr);
		if ((r = capa_net_tags(s, &t, "common", name)) < 0 ||
		    (r = capa_net_create(s, "CreateVpc", &q, "vpc", &t, &rep)) < 0)
			goto out;
		capa_strcpy(vpc, sizeof(vpc), aws_xml_text(rep.result, "vpc/vpcId"));
		log_info("created VPC", KV_S("cluster", s->name), KV_S("vpc", vpc),
			 KV_S("cidr", cidr));
	}
	if (!vpc[0]) {
		str_printf(s->err, sizeof(s->err), "VPC reply without a vpcId");
		r = -EBADMSG;
		goto out;
	}
	if ((r = capa_net_set(s, net, "vpc.id", vpc)) < 0 ||
	    (r = capa_net_set(s, net, "vpc.cidrBlock", cidr)) < 0)
		goto out;
	if ((r = vpc_dns(s, vpc, "enableDnsHostnames")) < 0 ||
	    (r = vpc_dns(s, vpc, "enableDnsSupport")) < 0)
		goto out;
out:
	capa_tags_release(&t);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

/* ---- subnets (subnets.go) ---- */

/* The zones of the default layout: available, no opt-in, sorted by name, the first `limit`. */
static int zones_pick(struct capa_scope *s, int limit, char zones[][64], int *ret_n)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int n = 0, r;

	aws_query_add_filter(&q, "state", (const char *[]){"available"}, 1);
	aws_query_add_filter(&q, "opt-in-status", (const char *[]){"opt-in-not-required"}, 1);
	r = capa_scope_ec2(s, "DescribeAvailabilityZones", &q, &rep);
	aws_query_release(&q);
	if (r < 0)
		return r;
	for (const xmlNode *it = aws_xml_list(rep.result, "availabilityZoneInfo"); it;
	     it = aws_xml_next(it)) {
		const char *z = aws_xml_text(it, "zoneName");
		if (!z || n >= CAPA_MAX_ZONES)
			continue;
		/* insertion sort by name */
		int i = n++;
		while (i > 0 && strcmp(zones[i - 1], z) > 0) {
			memcpy(zones[i], zones[i - 1], 64);
			i--;
		}
		capa_strcpy(zones[i], 64, z);
	}
	aws_reply_release(&rep);
	*ret_n = n < limit ? n : limit;
	if (*ret_n == 0) {
		str_printf(s->err, sizeof(s->err), "no available zone in the region");
		return -ENOENT;
	}
	return 0;
}

/* spec.network.subnets, filled with CAPA's defaults when empty (persisted, as CAPA does). */
static int subnets_desired(struct capa_scope *s, cJSON **ret)
{
	cJSON *net = capa_scope_network(s), *list = net ? cJSON_GetObjectItemCaseSensitive(net, "subnets") : NULL;
	char zones[CAPA_MAX_ZONES][64], pub[CAPA_MAX_ZONES][20], priv[CAPA_MAX_ZONES][20];
	long long limit = 3;
	int n = 0, r;

	if (!net)
		return -ENOMEM;
	if (list && cJSON_GetArraySize(list) > 0) {
		*ret = list;
		return 0;
	}
	json_get_int(s->obj, "spec.network.vpc.availabilityZoneUsageLimit", &limit);
	if (limit < 1 || limit > CAPA_MAX_ZONES)
		limit = 3;
	if ((r = zones_pick(s, (int)limit, zones, &n)) < 0)
		return r;
	if ((r = capa_preset_subnets(s, net, zones, n)) != 0) { /* a layout's (capa_preset.c) */
		*ret = cJSON_GetObjectItemCaseSensitive(net, "subnets");
		return r < 0 ? r : 0;
	}
	if ((r = capa_default_subnets(json_str(net, "vpc.cidrBlock"), n, pub, priv)) < 0) {
		str_printf(s->err, sizeof(s->err), "cannot split VPC CIDR %s into %d zones",
			 json_str(net, "vpc.cidrBlock"), n);
		return r;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(net, "subnets");
	if (!(list = cJSON_AddArrayToObject(net, "subnets")))
		return -ENOMEM;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			cJSON *sn = cJSON_CreateObject();
			if (!sn)
				return -ENOMEM;
			cJSON_AddItemToArray(list, sn);
			cJSON_AddStringToObject(sn, "availabilityZone", zones[i]);
			cJSON_AddStringToObject(sn, "cidrBlock", pass == 0 ? pub[i] : priv[i]);
			cJSON_AddBoolToObject(sn, "isPublic", pass == 0);
		}
	s->spec_changed = true;
	*ret = list;
	return 0;
}

static const xmlNode *subnet_match(const xmlNode *first, const cJSON *want)
{
	const char *id = json_str(want, "id"), *cidr = json_str(want, "cidrBlock");
	for (const xmlNode *it = first; it; it = aws_xml_next(it)) {
		const char *i = aws_xml_text(it, "subnetId"), *c = aws_xml_text(it, "cidrBlock");
		if ((id && i && strcmp(id, i) == 0) || (!id && cidr && c && strcmp(cidr, c) == 0))
			return it;
	}
	return NULL;
}

static int subnet_create(struct capa_scope *s, const char *vpc, cJSON *want, char id[32])
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct capa_tags t = {0};
	bool pub = false;
	char name[320], k8s[320];
	const char *az = json_str(want, "availabilityZone"), *cidr = json_str(want, "cidrBlock");
	int r;

	json_get_bool(want, "isPublic", &pub);
	if (!az || !cidr) {
		str_printf(s->err, sizeof(s->err), "a subnet of the spec has no %s",
			 az ? "cidrBlock" : "availabilityZone");
		return -EINVAL;
	}
	snprintf(name, sizeof(name), "%s-subnet-%s-%s", s->name, pub ? "public" : "private", az);
	snprintf(k8s, sizeof(k8s), CAPA_TAG_K8S_CLUSTER_PREFIX "%s", s->name);
	aws_query_add(&q, "VpcId", vpc);
	aws_query_add(&q, "CidrBlock", cidr);
	aws_query_add(&q, "AvailabilityZone", az);
	if ((r = capa_net_tags(s, &t, pub ? "public" : "private", name)) < 0 ||
	    (r = capa_tags_set(&t, k8s, "owned")) < 0 ||
	    (r = capa_tags_set(&t, pub ? "kubernetes.io/role/elb" : "kubernetes.io/role/internal-elb",
			       "1")) < 0 ||
	    (r = capa_net_create(s, "CreateSubnet", &q, "subnet", &t, &rep)) < 0)
		goto out;
	capa_strcpy(id, 32, aws_xml_text(rep.result, "subnet/subnetId"));
	log_info("created subnet", KV_S("cluster", s->name), KV_S("subnet", id), KV_S("cidr", cidr),
		 KV_S("zone", az), KV_B("public", pub));
out:
	capa_tags_release(&t);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static int subnet_map_public(struct capa_scope *s, const char *id)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	aws_query_add(&q, "SubnetId", id);
	aws_query_add(&q, "MapPublicIpOnLaunch.Value", "true");
	r = capa_net_create(s, "ModifySubnetAttribute", &q, NULL, NULL, &rep);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static int subnets_reconcile(struct capa_scope *s)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	const char *vpc = capa_vpc_id(s);
	cJSON *list, *want;
	int r, n_pub = 0;

	if ((r = subnets_desired(s, &list)) < 0)
		return r;
	aws_query_add_filter(&q, "vpc-id", (const char *[]){vpc}, 1);
	r = capa_scope_ec2(s, "DescribeSubnets", &q, &rep);
	aws_query_release(&q);
	if (r < 0)
		return r;
	const xmlNode *first = aws_xml_list(rep.result, "subnetSet");
	cJSON_ArrayForEach(want, list)
	{
		const xmlNode *have = subnet_match(first, want);
		bool pub = false, mapped = false;
		char id[32] = "";

		json_get_bool(want, "isPublic", &pub);
		n_pub += pub;
		if (have) {
			capa_strcpy(id, sizeof(id), aws_xml_text(have, "subnetId"));
			aws_xml_bool(have, "mapPublicIpOnLaunch", &mapped);
		} else if ((r = subnet_create(s, vpc, want, id)) < 0) {
			break;
		}
		if (!id[0]) {
			str_printf(s->err, sizeof(s->err), "subnet reply without a subnetId");
			r = -EBADMSG;
			break;
		}
		if (pub && !mapped && (r = subnet_map_public(s, id)) < 0)
			break;
		if ((r = capa_net_set(s, want, "id", id)) < 0 ||
		    (r = capa_net_set(s, want, "resourceID", id)) < 0)
			break;
	}
	aws_reply_release(&rep);
	if (r >= 0 && n_pub == 0) {
		str_printf(s->err, sizeof(s->err), "expected at least 1 public subnet but got 0");
		r = -EINVAL;
	}
	return r;
}

/* ---- internet gateway ---- */

static int igw_reconcile(struct capa_scope *s)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct capa_tags t = {0};
	const char *vpc = capa_vpc_id(s);
	char name[300], id[32] = "";
	bool attached = false;
	int r;

	capa_net_filter_owned(s, &q);
	if ((r = capa_scope_ec2(s, "DescribeInternetGateways", &q, &rep)) < 0)
		goto out;
	/* the one attached to the VPC, or one left unattached by an interrupted create */
	for (const xmlNode *it = aws_xml_list(rep.result, "internetGatewaySet"); it;
	     it = aws_xml_next(it)) {
		const xmlNode *a = aws_xml_list(it, "attachmentSet");
		const char *av = a ? aws_xml_text(a, "vpcId") : NULL;
		if (av && strcmp(av, vpc) == 0) {
			capa_strcpy(id, sizeof(id), aws_xml_text(it, "internetGatewayId"));
			attached = true;
			break;
		}
		if (!a && !id[0])
			capa_strcpy(id, sizeof(id), aws_xml_text(it, "internetGatewayId"));
	}
	aws_reply_release(&rep);
	aws_query_release(&q);
	if (!id[0]) {
		snprintf(name, sizeof(name), "%s-igw", s->name);
		if ((r = capa_net_tags(s, &t, "common", name)) < 0 ||
		    (r = capa_net_create(s, "CreateInternetGateway", &q, "internet-gateway", &t,
					 &rep)) < 0)
			goto out;
		if ((r = capa_reply_id(s, rep.result, "internetGateway/internetGatewayId",
				       "internet gateway", id, sizeof(id))) < 0)
			goto out;
		aws_reply_release(&rep);
		aws_query_release(&q);
		log_info("created internet gateway", KV_S("cluster", s->name), KV_S("igw", id));
	}
	if (!attached) {
		aws_query_add(&q, "InternetGatewayId", id);
		aws_query_add(&q, "VpcId", vpc);
		if ((r = capa_net_create(s, "AttachInternetGateway", &q, NULL, NULL, &rep)) < 0)
			goto out;
	}
	capa_strcpy(s->igw, sizeof(s->igw), id);
	r = capa_net_set(s, capa_scope_network(s), "vpc.internetGatewayId", id);
out:
	capa_tags_release(&t);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int capa_net_reconcile(struct capa_scope *s)
{
	/* CAPA's order; each step sets its condition, and a failed step stops the pass */
	static const struct {
		int (*fn)(struct capa_scope *);
		int (*byo)(struct capa_scope *); /* for an unmanaged VPC (capa_net_byo.c) */
		const char *cond;
		const char *reason;
	} steps[] = {
		{ vpc_reconcile, vpc_reconcile, CAPA_COND_VPC, "VpcReconciliationFailed" },
		{ subnets_reconcile, capa_byo_subnets, CAPA_COND_SUBNETS, "SubnetsReconciliationFailed" },
		{ igw_reconcile, capa_byo_skip, CAPA_COND_IGW, "InternetGatewayFailed" },
		{ capa_nat_reconcile, capa_byo_skip, CAPA_COND_NAT, "NatGatewaysReconciliationFailed" },
		{ capa_rt_reconcile, capa_byo_skip, CAPA_COND_RT, "RouteTableReconciliationFailed" },
	};
	int r = capa_preset_apply(s); /* a layout named by the annotation fills the spec */

	if (r < 0)
		capa_scope_condition(s, CAPA_COND_VPC, false, "InvalidLayout");
	for (size_t i = 0; i < ARRAY_SIZE(steps) && r >= 0; i++) {
		r = (s->unmanaged ? steps[i].byo : steps[i].fn)(s);
		capa_scope_condition(s, steps[i].cond, r >= 0, steps[i].reason);
	}
	return r;
}
