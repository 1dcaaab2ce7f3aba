#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "modules/ccm/ccm_cloud.h"
#include "modules/ccm/ccm_routes.h"
#include "tests/unit/harness.h"

TEST(ccm_routes_cidr)
{
	struct ccm_cidr a, b, cl[2];
	char buf[64];
	ASSERT_OK(ccm_cidr_parse("10.244.1.7/24", &a));
	ASSERT_OK(ccm_cidr_format(&a, buf, sizeof(buf)));
	ASSERT_STREQ(buf, "10.244.1.0/24");
	ASSERT_OK(ccm_cidr_parse("10.244.1.0/24", &b));
	ASSERT_TRUE(ccm_cidr_equal(&a, &b));
	ASSERT_OK(ccm_cidr_parse("10.244.1.0/25", &b));
	ASSERT_FALSE(ccm_cidr_equal(&a, &b));
	ASSERT_OK(ccm_cidr_parse("FD00:0:0:1::/64", &b));
	ASSERT_EQ(b.family, AF_INET6);
	ASSERT_OK(ccm_cidr_format(&b, buf, sizeof(buf)));
	ASSERT_STREQ(buf, "fd00:0:0:1::/64");
	ASSERT_ERR(ccm_cidr_parse("10.0.0.0", &b), EINVAL);
	ASSERT_ERR(ccm_cidr_parse("10.0.0.0/33", &b), EINVAL);
	ASSERT_ERR(ccm_cidr_parse("10.0.0/8", &b), EINVAL);
	ASSERT_ERR(ccm_cidr_parse("pl-123", &b), EINVAL);

	/* isResponsibleForRoute: first or last address inside a cluster CIDR */
	ASSERT_OK(ccm_cidr_parse("10.244.0.0/16", &cl[0]));
	ASSERT_OK(ccm_cidr_parse("fd00::/48", &cl[1]));
	ASSERT_OK(ccm_cidr_parse("10.244.3.0/24", &a));
	ASSERT_TRUE(ccm_cidr_in_cluster(&a, cl, 2));
	ASSERT_OK(ccm_cidr_parse("10.0.0.0/8", &a)); /* contains the cluster: last IP outside */
	ASSERT_FALSE(ccm_cidr_in_cluster(&a, cl, 2));
	ASSERT_OK(ccm_cidr_parse("10.244.0.0/15", &a)); /* starts inside */
	ASSERT_TRUE(ccm_cidr_in_cluster(&a, cl, 2));
	ASSERT_OK(ccm_cidr_parse("0.0.0.0/0", &a));
	ASSERT_FALSE(ccm_cidr_in_cluster(&a, cl, 2));
	ASSERT_OK(ccm_cidr_parse("fd00:0:0:5::/64", &a));
	ASSERT_TRUE(ccm_cidr_in_cluster(&a, cl, 2));
	ASSERT_FALSE(ccm_cidr_in_cluster(&a, cl, 1));

	struct ccm_cidr *l;
	size_t n;
	ASSERT_OK(ccm_cidrs_parse("10.244.0.0/16,fd00::/48", &l, &n));
	ASSERT_EQ(n, 2);
	free(l);
	ASSERT_ERR(ccm_cidrs_parse("10.0.0.0/8,10.1.0.0/16", &l, &n), EINVAL);
	ASSERT_ERR(ccm_cidrs_parse("", &l, &n), EINVAL);
	ASSERT_ERR(ccm_cidrs_parse("bad", &l, &n), EINVAL);
}

TEST(ccm_routes_parse_moto)
{
	size_t len;
	_cleanup_free_ char *data =
	    test_read_file(test_data("ccm/describe-route-tables-moto.xml"), &len);
	ASSERT_NOT_NULL(data);
	xmlDoc *doc;
	ASSERT_OK(aws_xml_parse(data, len, &doc, NULL, 0));
	struct ccm_route_table *t = NULL;
	size_t n = 0;
	ASSERT_OK(ccm_route_tables_from_reply(xmlDocGetRootElement(doc), &t, &n));
	xmlFreeDoc(doc);
	ASSERT_EQ(n, 1);
	ASSERT_STREQ(t[0].id, "rtb-84bc92ba2ea4138ea");
	ASSERT_STREQ(t[0].vpc_id, "vpc-c916f7de72c3b5dc1");
	ASSERT_EQ(t[0].n_routes, 5);
	ASSERT_STREQ(t[0].routes[0].other_target, "local");
	ASSERT_STREQ(t[0].routes[0].origin, "CreateRouteTable");
	ASSERT_STREQ(t[0].routes[1].other_target, "igw-a9f8fdd6a26964da1");
	ASSERT_STREQ(t[0].routes[2].instance_id, "i-527750eaf978ecc34");
	ASSERT_STREQ(t[0].routes[3].eni_id, "eni-9d5393b787b2dee61");
	ASSERT_STREQ(t[0].routes[4].cidr, "fd00:1::/64");
	ASSERT_TRUE(t[0].routes[4].parsed);
	ASSERT_TRUE(ccm_tags_have_cluster(t[0].tags, t[0].n_tags, "c1"));
	ccm_route_tables_free(t, n);
}

/* A route table built by hand. */
static struct ccm_route R(const char *cidr, const char *inst, const char *eni, const char *other,
			  const char *state, const char *origin) {
	struct ccm_route r = {.cidr = (char *)cidr,
			      .instance_id = (char *)inst,
			      .eni_id = (char *)eni,
			      .other_target = (char *)other,
			      .state = (char *)state,
			      .origin = (char *)origin};
	r.parsed = ccm_cidr_parse(cidr, &r.net) == 0;
	return r;
}

static const char *
node_of(void *ud, const char *id)
{
	/* Nodes n1 (i-1), n2 (i-2), n3 (i-3, eni-3) exist */
	(void)ud;
	if (strcmp(id, "i-1") == 0)
		return "n1";
	if (strcmp(id, "i-2") == 0)
		return "n2";
	if (strcmp(id, "i-3") == 0 || strcmp(id, "eni-3") == 0)
		return "n3";
	return NULL;
}

static const struct ccm_route_op *find_op(const struct ccm_route_plan *p, const char *table,
					  const char *cidr)
{
	for (size_t k = 0; k < p->n_ops; k++)
		if (strcmp(p->ops[k].table, table) == 0 && strcmp(p->ops[k].cidr, cidr) == 0)
			return &p->ops[k];
	return NULL;
}

TEST(ccm_routes_plan)
{
	struct ccm_route ra[] = {
	    R("10.0.0.0/16", NULL, NULL, "local", "active", "CreateRouteTable"),
	    R("0.0.0.0/0", NULL, NULL, "igw-1", "active", "CreateRoute"),
	    R("10.244.1.0/24", "i-1", NULL, NULL, "active", "CreateRoute"),	    /* in place */
	    R("10.244.2.0/24", NULL, NULL, NULL, "blackhole", "CreateRoute"),	    /* replace */
	    R("10.244.9.0/24", "i-9", NULL, NULL, "active", "CreateRoute"),	    /* orphan */
	    R("10.244.8.0/24", "i-2", NULL, NULL, "active", "CreateRoute"),	    /* n2 moved */
	    R("10.244.7.0/24", NULL, NULL, NULL, "blackhole", "CreateRoute"),	    /* delete */
	    R("192.168.0.0/24", "i-77", NULL, NULL, "active", "CreateRoute"),	    /* not ours */
	    R("10.244.6.0/24", NULL, NULL, "pcx-1", "active", "CreateRoute"),	    /* peering */
	    R("10.244.5.0/24", NULL, "eni-unknown", NULL, "active", "CreateRoute"), /* unmappable */
	    R("10.244.4.0/24", NULL, NULL, NULL, "blackhole", "EnableVgwRoutePropagation"),
	};
	struct ccm_route rb[] = {
	    R("10.244.3.0/24", NULL, "eni-3", NULL, "active", "CreateRoute"), /* in place by ENI */
	    R("10.244.1.0/24", "i-2", NULL, NULL, "active", "CreateRoute"),   /* wrong target */
	};
	struct ccm_route_table tables[] = {
	    {.id = (char *)"rtb-a", .routes = ra, .n_routes = ARRAY_SIZE(ra)},
	    {.id = (char *)"rtb-b", .routes = rb, .n_routes = ARRAY_SIZE(rb)},
	};
	struct ccm_route_want want[] = {
	    {"n1", "i-1", "10.244.1.0/24"},
	    {"n2", "i-2", "10.244.2.0/24"},
	    {"n3", "i-3", "10.244.3.0/24"},
	    {"n3", "i-3", "10.244.6.0/24"},   /* held by a peering route */
	    {"n3", "i-3", "fd00:0:0:3::/64"}, /* IPv6 */
	    {"nx", "", "10.244.30.0/24"},     /* no instance: skipped */
	};
	struct ccm_cidr cl[2];
	ASSERT_OK(ccm_cidr_parse("10.244.0.0/16", &cl[0]));
	ASSERT_OK(ccm_cidr_parse("fd00::/48", &cl[1]));
	struct ccm_route_plan p;
	ASSERT_OK(ccm_route_plan_make(tables, 2, want, ARRAY_SIZE(want), cl, 2, node_of, NULL, &p));

	const struct ccm_route_op *o;
	/* table a */
	ASSERT_NULL(find_op(&p, "rtb-a", "10.244.1.0/24"));
	ASSERT_NOT_NULL(o = find_op(&p, "rtb-a", "10.244.2.0/24"));
	ASSERT_EQ(o->kind, CCM_ROP_REPLACE);
	ASSERT_STREQ(o->instance_id, "i-2");
	ASSERT_STREQ(o->why, "blackhole");
	ASSERT_NOT_NULL(o = find_op(&p, "rtb-a", "10.244.3.0/24"));
	ASSERT_EQ(o->kind, CCM_ROP_CREATE);
	ASSERT_STREQ(o->node, "n3");
	ASSERT_NOT_NULL(o = find_op(&p, "rtb-a", "fd00:0:0:3::/64"));
	ASSERT_EQ(o->kind, CCM_ROP_CREATE);
	ASSERT_TRUE(o->v6);
	ASSERT_NOT_NULL(o = find_op(&p, "rtb-a", "10.244.8.0/24"));
	ASSERT_EQ(o->kind, CCM_ROP_DELETE);
	ASSERT_NOT_NULL(o = find_op(&p, "rtb-a", "10.244.7.0/24"));
	ASSERT_EQ(o->kind, CCM_ROP_DELETE);
	ASSERT_NULL(find_op(&p, "rtb-a", "10.244.9.0/24")); /* orphan: decided by the caller */
	ASSERT_NULL(find_op(&p, "rtb-a", "192.168.0.0/24"));
	ASSERT_NULL(find_op(&p, "rtb-a", "0.0.0.0/0"));
	ASSERT_NULL(find_op(&p, "rtb-a", "10.244.6.0/24"));
	ASSERT_NULL(find_op(&p, "rtb-a", "10.244.5.0/24"));
	ASSERT_NULL(find_op(&p, "rtb-a", "10.244.4.0/24"));
	ASSERT_NULL(find_op(&p, "rtb-a", "10.244.30.0/24"));
	/* table b */
	ASSERT_NULL(find_op(&p, "rtb-b", "10.244.3.0/24"));
	ASSERT_NOT_NULL(o = find_op(&p, "rtb-b", "10.244.1.0/24"));
	ASSERT_EQ(o->kind, CCM_ROP_REPLACE);
	ASSERT_STREQ(o->instance_id, "i-1");
	ASSERT_NOT_NULL(o = find_op(&p, "rtb-b", "10.244.2.0/24"));
	ASSERT_EQ(o->kind, CCM_ROP_CREATE);
	ASSERT_NOT_NULL(o = find_op(&p, "rtb-b", "10.244.6.0/24"));
	ASSERT_EQ(o->kind, CCM_ROP_CREATE);

	ASSERT_EQ(p.n_ops, 9);
	ASSERT_EQ(p.n_orphans, 1);
	ASSERT_STREQ(p.orphans[0].instance_id, "i-9");
	ASSERT_STREQ(p.orphans[0].table, "rtb-a");
	ASSERT_EQ(p.conflicts, 1);
	ASSERT_EQ(p.n_blocked, 1);
	ASSERT_STREQ(p.blocked[0].node, "n3");
	ASSERT_STREQ(p.blocked[0].cidr, "10.244.6.0/24");
	ASSERT_STREQ(p.blocked[0].table, "rtb-a");
	ASSERT_EQ(p.invalid, 1);
	/* deletes come first in each table */
	ASSERT_EQ(p.ops[0].kind, CCM_ROP_DELETE);
	ASSERT_EQ(p.ops[1].kind, CCM_ROP_DELETE);
	ASSERT_TRUE(p.ops[2].kind != CCM_ROP_DELETE);
	ccm_route_plan_release(&p);
}

TEST(ccm_routes_plan_duplicate_claims)
{
	struct ccm_route_table t = {.id = (char *)"rtb-a"};
	struct ccm_route_want want[] = {
	    {"n1", "i-1", "10.244.1.0/24"},
	    {"n2", "i-2", "10.244.1.0/24"}, /* IPAM bug: both left without a route */
	    {"n1", "i-1", "10.244.1.0/24"}, /* a plain duplicate */
	    {"n3", "i-3", "10.244.3.0/24"},
	};
	struct ccm_cidr cl;
	ASSERT_OK(ccm_cidr_parse("10.244.0.0/16", &cl));
	struct ccm_route_plan p;
	ASSERT_OK(ccm_route_plan_make(&t, 1, want, 4, &cl, 1, node_of, NULL, &p));
	ASSERT_EQ(p.n_ops, 1);
	ASSERT_STREQ(p.ops[0].cidr, "10.244.3.0/24");
	ASSERT_GE(p.invalid, 2);
	ccm_route_plan_release(&p);
	/* nothing wanted, nothing there */
	ASSERT_OK(ccm_route_plan_make(&t, 1, NULL, 0, &cl, 1, node_of, NULL, &p));
	ASSERT_EQ(p.n_ops, 0);
	ccm_route_plan_release(&p);
}

TEST(ccm_routes_orphans)
{
	struct ec2_tag mine[] = {{(char *)"kubernetes.io/cluster/c1", (char *)"owned"}};
	struct ec2_tag other[] = {{(char *)"kubernetes.io/cluster/c2", (char *)"owned"}};
	struct ec2_instance a = {
	    .id = (char *)"i-1", .state = (char *)"running", .tags = mine, .n_tags = 1};
	struct ec2_instance b = {
	    .id = (char *)"i-2", .state = (char *)"running", .tags = other, .n_tags = 1};
	struct ec2_instance c = {
	    .id = (char *)"i-3", .state = (char *)"terminated", .tags = other, .n_tags = 1};
	ASSERT_TRUE(ccm_route_orphan_delete(NULL, "c1"));
	ASSERT_TRUE(ccm_route_orphan_delete(&a, "c1"));
	ASSERT_FALSE(ccm_route_orphan_delete(&b, "c1"));
	ASSERT_TRUE(ccm_route_orphan_delete(&c, "c1"));
	ASSERT_FALSE(ccm_route_orphan_delete(&a, NULL));
}

TEST(ccm_routes_target_eni)
{
	struct ec2_eni one[] = { { .id = (char *)"eni-a", .device_index = 0 } };
	struct ec2_eni two[] = { { .id = (char *)"eni-b", .device_index = 1 },
				 { .id = (char *)"eni-a", .device_index = 0 } };
	struct ec2_instance i = { .id = (char *)"i-1", .enis = one, .n_enis = 1 };
	/* one interface: routes by instance ID, as upstream */
	ASSERT_NULL(ccm_route_target_eni(&i));
	/* several: the primary interface (device index 0), wherever it is listed */
	i.enis = two;
	i.n_enis = 2;
	ASSERT_STREQ(ccm_route_target_eni(&i), "eni-a");
	i.n_enis = 0;
	ASSERT_NULL(ccm_route_target_eni(&i));
}
