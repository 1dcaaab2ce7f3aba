#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "modules/ccm/ccm_nlb.h"
#include "tests/unit/harness.h"

#define ANN "\"service.beta.kubernetes.io/aws-load-balancer-"

/* An NLB Service prod/web-1 (ports 80 -> 30080, 443 -> 30443) with annotations and spec extras;
 * parsed into s and n. */
static int parse_nlb(const char *ann, const char *extra, struct ccm_lb_spec *s,
		     struct ccm_nlb_spec *n, char *err, size_t errlen)
{
	char text[4096];
	cJSON *j = NULL;
	int r;

	snprintf(text, sizeof(text),
		 "{\"metadata\":{\"name\":\"web-1\",\"namespace\":\"prod\","
		 "\"uid\":\"01234567-89ab-cdef-0123-456789abcdef\",\"annotations\":{" ANN
		 "type\":\"nlb\"%s}},"
		 "\"spec\":{\"type\":\"LoadBalancer\",\"ports\":["
		 "{\"name\":\"http\",\"port\":80,\"nodePort\":30080,\"protocol\":\"TCP\"},"
		 "{\"name\":\"https\",\"port\":443,\"nodePort\":30443,\"protocol\":\"TCP\"}]%s}}",
		 ann, extra);
	if (json_parse(text, strlen(text), &j, NULL) < 0)
		return -1000;
	r = ccm_lb_spec_parse(j, s, err, errlen);
	if (r == 0)
		r = ccm_nlb_spec_parse(j, s, "c1", n, err, errlen);
	cJSON_Delete(j);
	return r;
}

/* expected values from Python's hashlib.sha1 over the same fields, as upstream hashes them */
TEST(ccm_nlb_tg_names)
{
	char name[ELBV2_NAME_MAX];
	ccm_nlb_tg_name("c1", "prod", "web-1", 80, 30080, "TCP", "TCP", 30, name);
	ASSERT_STREQ(name, "k8s-prod-web1-c685d9d681");
	ccm_nlb_tg_name("c1", "prod", "web-1", 443, 30443, "TLS", "HTTP", 10, name);
	ASSERT_STREQ(name, "k8s-prod-web1-1b06993a2e");
	ccm_none_tg_name("a0123456789abcdef0123456789abcde", 0, name);
	ASSERT_STREQ(name, "a0123456789abcdef0123456789abc-0");
	ccm_none_tg_name("a0123456789abcdef0123456789abcde", 12, name);
	ASSERT_STREQ(name, "a0123456789abcdef0123456789ab-12");
}

TEST(ccm_nlb_spec_defaults_and_tls)
{
	struct ccm_lb_spec *s = calloc(1, sizeof(*s));
	struct ccm_nlb_spec *n = calloc(1, sizeof(*n));
	char err[512] = "";

	ASSERT_OK(parse_nlb("," ANN "ssl-cert\":\"arn:cert\"," ANN "ssl-ports\":\"https\"", "", s,
			    n, err, sizeof(err)));
	ASSERT_EQ(n->n_p, 2);
	ASSERT_STREQ(n->p[0].proto, "TCP");
	ASSERT_STREQ(n->p[1].proto, "TLS");
	ASSERT_STREQ(n->p[1].tg_proto, "TCP");
	ASSERT_STREQ(n->p[1].cert, "arn:cert");
	ASSERT_STREQ(n->p[0].tg_name, "k8s-prod-web1-c685d9d681");
	ASSERT_STREQ(n->hc.protocol, "TCP");
	ASSERT_STREQ(n->hc.port, "traffic-port");
	ASSERT_EQ(n->hc.interval, 30);
	ASSERT_EQ(n->hc.healthy, 3);

	ASSERT_OK(parse_nlb("," ANN "ssl-cert\":\"arn:cert\"," ANN "backend-protocol\":\"ssl\"",
			    ",\"externalTrafficPolicy\":\"Local\",\"healthCheckNodePort\":32000", s,
			    n, err, sizeof(err)));
	ASSERT_STREQ(n->p[0].tg_proto, "TLS");
	ASSERT_STREQ(n->hc.protocol, "HTTP");
	ASSERT_STREQ(n->hc.port, "32000");
	ASSERT_STREQ(n->hc.path, "/healthz");
	ASSERT_EQ(n->hc.interval, 10);
	ASSERT_EQ(n->hc.unhealthy, 2);
	free(s);
	free(n);
}

TEST(ccm_nlb_spec_rejections)
{
	struct ccm_lb_spec *s = calloc(1, sizeof(*s));
	struct ccm_nlb_spec *n = calloc(1, sizeof(*n));
	char err[512] = "";

	ASSERT_ERR(parse_nlb("," ANN "target-group-attributes\":\"stickiness.enabled=true\"", "", s,
			     n, err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "stickiness.enabled=true is not supported");
	ASSERT_ERR(parse_nlb("," ANN "healthcheck-protocol\":\"SSL\"", "", s, n, err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "Unsupported health check protocol SSL");
	ASSERT_ERR(parse_nlb("," ANN "internal\":\"true\"," ANN "eip-allocations\":\"eipalloc-1\"",
			     "", s, n, err, sizeof(err)),
		   EINVAL);
	ASSERT_ERR(parse_nlb("," ANN "private-ipv4-addresses\":\"10.0.0.300\"", "", s, n, err,
			     sizeof(err)),
		   EINVAL);
	ASSERT_OK(
	    parse_nlb("," ANN "extra-security-groups\":\"sg-1\"", "", s, n, err, sizeof(err)));
	ASSERT_EQ(s->n_extra_sgs, 1);
	ASSERT_OK(parse_nlb("," ANN "eip-allocations\":\"eipalloc-1, eipalloc-2\"", "", s, n, err,
			    sizeof(err)));
	ASSERT_ERR(ccm_nlb_check_mappings(n, false, 3, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "Must have same number of EIP AllocationIDs (2) and SubnetIDs (3)");
	ASSERT_OK(ccm_nlb_check_mappings(n, false, 2, err, sizeof(err)));
	ASSERT_OK(parse_nlb("," ANN "proxy-protocol\":\"*\"," ANN
			    "target-group-attributes\":\"preserve_client_ip.enabled=false\"",
			    "", s, n, err, sizeof(err)));
	ASSERT_EQ(n->n_tg_attrs, 2);
	ASSERT_STREQ(n->tg_attrs[0].key, "proxy_protocol_v2.enabled");
	ASSERT_STREQ(n->tg_attrs[1].value, "false");
	free(s);
	free(n);
}

TEST(ccm_nlb_node_rules_described)
{
	struct ccm_lb_spec *s = calloc(1, sizeof(*s));
	struct ccm_nlb_spec *n = calloc(1, sizeof(*n));
	struct ccm_sg_perm p[32];
	const char clients[2][64] = {"10.0.0.0/8", "192.168.0.0/16"};
	const char health[2][64] = {"10.0.0.0/8", "172.31.0.0/20"};
	char err[512] = "";

	ASSERT_OK(parse_nlb("", "", s, n, err, sizeof(err)));
	size_t k = ccm_nlb_node_rules(n, "alb", "c1", clients, 2, health, 2, p, 32);
	/* 2 ports x 2 clients, 2 health ports from 172.31 (10/8 already admitted), 2 mtu */
	ASSERT_EQ(k, 8);
	ASSERT_STREQ(p[0].desc, "kubernetes.io/rule/nlb/client=alb");
	ASSERT_EQ(p[0].from, 30080);
	ASSERT_STREQ(p[4].cidr, "172.31.0.0/20");
	ASSERT_STREQ(p[4].desc, "kubernetes.io/rule/nlb/health=alb");
	ASSERT_STREQ(p[7].proto, "icmp");
	ASSERT_STREQ(p[7].desc,
		     "kubernetes.io/rule/nlb/mtu=c1"); /* shared: named for the cluster */
	ASSERT_TRUE(ccm_nlb_rule_ours(&p[0], "alb"));
	ASSERT_FALSE(ccm_nlb_rule_ours(&p[0], "al"));
	ASSERT_FALSE(ccm_nlb_rule_ours(&p[7], "alb"));
	free(s);
	free(n);
}

/* An existing NLB in zones a (subnet-a, EIP eipalloc-1) and b (subnet-b). */
static void two_zone_lb(struct elbv2_lb *lb)
{
	*lb = (struct elbv2_lb){.n_subnets = 2};
	str_copy(lb->subnets[0], sizeof(lb->subnets[0]), "subnet-a");
	str_copy(lb->zones[0], sizeof(lb->zones[0]), "us-east-1a");
	str_copy(lb->allocations[0], sizeof(lb->allocations[0]), "eipalloc-1");
	str_copy(lb->subnets[1], sizeof(lb->subnets[1]), "subnet-b");
	str_copy(lb->zones[1], sizeof(lb->zones[1]), "us-east-1b");
	str_copy(lb->allocations[1], sizeof(lb->allocations[1]), "eipalloc-2");
}

static struct ccm_nlb_subnet sub(const char *id, const char *az, const char *eip)
{
	struct ccm_nlb_subnet s = {{0}};
	str_copy(s.id, sizeof(s.id), id);
	str_copy(s.az, sizeof(s.az), az);
	str_copy(s.allocation, sizeof(s.allocation), eip);
	return s;
}

TEST(ccm_nlb_subnets_plan_adds_refuses)
{
	struct elbv2_lb lb;
	struct ccm_nlb_subnet ret[8], want[3];
	size_t n = 0;
	char why[256] = "";

	two_zone_lb(&lb);
	/* the same subnets and EIPs: nothing */
	want[0] = sub("subnet-a", "us-east-1a", "eipalloc-1");
	want[1] = sub("subnet-b", "us-east-1b", "eipalloc-2");
	ASSERT_EQ(ccm_nlb_subnets_plan(&lb, want, 2, true, ret, 8, &n, why, sizeof(why)),
		  CCM_NLB_SUBNETS_SAME);
	ASSERT_EQ(n, 2);
	/* a subnet in a new zone: every subnet as it is, then the new one */
	want[2] = sub("subnet-c", "us-east-1c", "eipalloc-3");
	ASSERT_EQ(ccm_nlb_subnets_plan(&lb, want, 3, true, ret, 8, &n, why, sizeof(why)),
		  CCM_NLB_SUBNETS_ADD);
	ASSERT_EQ(n, 3);
	ASSERT_STREQ(ret[0].id, "subnet-a");
	ASSERT_STREQ(ret[0].allocation, "eipalloc-1");
	ASSERT_STREQ(ret[2].id, "subnet-c");
	ASSERT_STREQ(ret[2].allocation, "eipalloc-3");
	/* removing one is refused */
	ASSERT_EQ(ccm_nlb_subnets_plan(&lb, want, 1, true, ret, 8, &n, why, sizeof(why)),
		  CCM_NLB_SUBNETS_REFUSED);
	ASSERT_CONTAINS(why, "subnet subnet-b (us-east-1b) cannot be removed");
	/* another subnet in a zone the load balancer has is refused */
	want[1] = sub("subnet-b2", "us-east-1b", "eipalloc-2");
	ASSERT_EQ(ccm_nlb_subnets_plan(&lb, want, 2, true, ret, 8, &n, why, sizeof(why)),
		  CCM_NLB_SUBNETS_REFUSED);
	ASSERT_CONTAINS(why, "zone us-east-1b has subnet subnet-b, which cannot be replaced by "
			     "subnet-b2");
	/* a changed EIP is refused */
	want[1] = sub("subnet-b", "us-east-1b", "eipalloc-9");
	ASSERT_EQ(ccm_nlb_subnets_plan(&lb, want, 2, true, ret, 8, &n, why, sizeof(why)),
		  CCM_NLB_SUBNETS_REFUSED);
	ASSERT_CONTAINS(why, "elastic IP of subnet subnet-b cannot be changed (eipalloc-2, wanted "
			     "eipalloc-9)");
}

TEST(ccm_nlb_subnets_plan_discovered)
{
	struct elbv2_lb lb;
	struct ccm_nlb_subnet ret[8], want[3];
	size_t n = 0;
	char why[256] = "";

	two_zone_lb(&lb);
	lb.allocations[0][0] = lb.allocations[1][0] = 0;
	/* discovery chose another subnet in zone b and a new zone c: b kept, c added, a kept */
	want[0] = sub("subnet-b2", "us-east-1b", "");
	want[1] = sub("subnet-c", "us-east-1c", "");
	ASSERT_EQ(ccm_nlb_subnets_plan(&lb, want, 2, false, ret, 8, &n, why, sizeof(why)),
		  CCM_NLB_SUBNETS_ADD);
	ASSERT_EQ(n, 3);
	ASSERT_STREQ(ret[0].id, "subnet-a");
	ASSERT_STREQ(ret[1].id, "subnet-b");
	ASSERT_STREQ(ret[2].id, "subnet-c");
	/* only a different choice in a zone it has: nothing */
	ASSERT_EQ(ccm_nlb_subnets_plan(&lb, want, 1, false, ret, 8, &n, why, sizeof(why)),
		  CCM_NLB_SUBNETS_SAME);
	ASSERT_EQ(n, 2);
	/* named, the zone-b replacement is refused */
	want[0] = sub("subnet-a", "us-east-1a", "");
	want[1] = sub("subnet-b2", "us-east-1b", "");
	want[2] = sub("subnet-b", "us-east-1b", "");
	ASSERT_EQ(ccm_nlb_subnets_plan(&lb, want, 3, true, ret, 8, &n, why, sizeof(why)),
		  CCM_NLB_SUBNETS_REFUSED);
	ASSERT_CONTAINS(why, "zone us-east-1b has subnet subnet-b, which cannot be replaced by "
			     "subnet-b2");
}

/* clients from anywhere: the health ports are admitted already, no health rule (a 3-port NLB in
 * 6 subnets made 18 of them: 50 NLBs put 1,101 rules on one node group, past the 512 the
 * controller reads back, and every re-check then failed on a duplicate rule) */
TEST(ccm_nlb_node_rules_no_health_when_open)
{
	struct ccm_lb_spec *s = calloc(1, sizeof(*s));
	struct ccm_nlb_spec *n = calloc(1, sizeof(*n));
	struct ccm_sg_perm p[32];
	const char any[1][64] = {"0.0.0.0/0"};
	const char health[3][64] = {"172.31.0.0/20", "172.31.16.0/20", "172.31.32.0/20"};
	char err[512] = "";

	ASSERT_OK(parse_nlb("", "", s, n, err, sizeof(err)));
	size_t k = ccm_nlb_node_rules(n, "alb", "c1", any, 1, health, 3, p, 32);
	ASSERT_EQ(k, 3); /* 2 client rules, 1 mtu */
	for (size_t i = 0; i < k; i++)
		ASSERT_CONTAINS(p[i].desc, i < 2 ? "/client=alb" : "/mtu=c1");
	/* a health-check port that no client rule opens keeps its rules */
	ASSERT_OK(parse_nlb(", " ANN "healthcheck-port\":\"31000\"", "", s, n, err, sizeof(err)));
	k = ccm_nlb_node_rules(n, "alb", "c1", any, 1, health, 3, p, 32);
	ASSERT_EQ(k, 6); /* 2 client, 3 health on 31000, 1 mtu */
	ASSERT_EQ(p[2].from, 31000);
	ASSERT_STREQ(p[4].cidr, "172.31.32.0/20");
	ASSERT_CONTAINS(p[4].desc, "/health=alb");
	/* the health-check port is one of the open NodePorts: none */
	ASSERT_OK(parse_nlb(", " ANN "healthcheck-port\":\"30443\"", "", s, n, err, sizeof(err)));
	ASSERT_EQ(ccm_nlb_node_rules(n, "alb", "c1", any, 1, health, 3, p, 32), 3);
	free(s);
	free(n);
}

/* The mtu rule (ICMP 3/4 from a client CIDR) is one rule for every NLB whose clients come from
 * that CIDR: deleting the NLB that made it (its name in the description, as upstream writes it)
 * keeps it while another NLB's client rule needs it, and revokes it with the last one. */
TEST(ccm_nlb_mtu_rule_shared)
{
	struct ccm_lb_spec *s = calloc(1, sizeof(*s));
	struct ccm_nlb_spec *n = calloc(1, sizeof(*n));
	struct ccm_sg_perm a[16], b[16], have[40];
	const char any[1][64] = {"0.0.0.0/0"}, other[1][64] = {"10.0.0.0/8"};
	char err[512] = "";
	size_t n_have = 0;

	ASSERT_OK(parse_nlb("", "", s, n, err, sizeof(err)));
	size_t n_a = ccm_nlb_node_rules(n, "aaa", "c1", any, 1, NULL, 0, a, 16);
	n->p[0].node_port = 31080; /* the second Service's NodePorts */
	n->p[1].node_port = 31443;
	size_t n_b = ccm_nlb_node_rules(n, "bbb", "c1", any, 1, NULL, 0, b, 16);
	ASSERT_EQ(n_a, 3);
	ASSERT_EQ(n_b, 3);
	/* the group as AWS keeps it: a's rules, b's client rules (b's mtu rule was a's already),
	 * the mtu rule still carrying a's name as upstream made it */
	for (size_t i = 0; i < n_a; i++)
		have[n_have++] = a[i];
	snprintf(have[2].desc, sizeof(have[2].desc), "kubernetes.io/rule/nlb/mtu=aaa");
	for (size_t i = 0; i < 2; i++)
		have[n_have++] = b[i];
	/* a deleted (nothing wanted): its client rules go, the mtu rule stays for b */
	ASSERT_TRUE(ccm_nlb_rule_stale(&have[0], "aaa", NULL, 0, have, n_have));
	ASSERT_TRUE(ccm_nlb_rule_stale(&have[1], "aaa", NULL, 0, have, n_have));
	ASSERT_FALSE(ccm_nlb_rule_stale(&have[2], "aaa", NULL, 0, have, n_have));
	ASSERT_FALSE(ccm_nlb_rule_stale(&have[3], "aaa", NULL, 0, have, n_have)); /* b's */
	/* b re-checked: it wants the mtu rule whoever's name it carries */
	ASSERT_FALSE(ccm_nlb_rule_stale(&have[2], "bbb", b, n_b, have, n_have));
	/* b deleted after a: no other client rule from 0.0.0.0/0 is left, the mtu rule goes */
	have[0] = have[2];
	have[1] = have[3];
	have[2] = have[4];
	n_have = 3;
	ASSERT_TRUE(ccm_nlb_rule_stale(&have[0], "bbb", NULL, 0, have, n_have));
	/* another NLB's client rule from another CIDR does not keep it */
	size_t n_o = ccm_nlb_node_rules(n, "ccc", "c1", other, 1, NULL, 0, b, 16);
	ASSERT_EQ(n_o, 3);
	have[1] = b[0];
	n_have = 2;
	ASSERT_TRUE(ccm_nlb_rule_stale(&have[0], "bbb", NULL, 0, have, n_have));
	/* a rule that is none of ours stays */
	struct ccm_sg_perm foreign = {.proto = "tcp", .from = 22, .to = 22, .cidr = "0.0.0.0/0"};
	ASSERT_FALSE(ccm_nlb_rule_stale(&foreign, "bbb", NULL, 0, have, n_have));
	free(s);
	free(n);
}

/* NLBSecurityGroupMode = Managed: the group's name (as the AWS Load Balancer Controller names
 * one: Python's hashlib.sha256 over cluster, name, namespace, uid), its ingress, and node rules
 * that admit the group instead of client CIDRs */
TEST(ccm_nlb_managed_sg)
{
	struct ccm_lb_spec *s = calloc(1, sizeof(*s));
	struct ccm_nlb_spec *n = calloc(1, sizeof(*n));
	struct ccm_sg_perm p[16];
	const char clients[2][64] = {"10.0.0.0/8", "192.168.0.0/16"};
	char name[CCM_NLB_SG_NAME_MAX], err[512] = "";

	ccm_nlb_sg_name("c1", "prod", "web-1", "01234567-89ab-cdef-0123-456789abcdef", name);
	ASSERT_STREQ(name, "k8s-prod-web1-9741a173a0");
	ccm_nlb_sg_name("", "kube-system", "my.long-service-name", "u", name);
	ASSERT_STREQ(name, "k8s-kubesyst-mylongse-308fcfc8e5");

	ASSERT_OK(parse_nlb("", "", s, n, err, sizeof(err)));
	size_t k = ccm_nlb_sg_rules(n, clients, 2, p, 16);
	ASSERT_EQ(k, 6); /* (80, 443, icmp) x 2 */
	ASSERT_EQ(p[0].from, 80);
	ASSERT_EQ(p[1].from, 443);
	ASSERT_STREQ(p[2].proto, "icmp");
	ASSERT_STREQ(p[5].cidr, "192.168.0.0/16");

	k = ccm_nlb_node_rules_from(n, "alb", "sg-1", p, 16);
	ASSERT_EQ(k, 2); /* the NodePorts; the health check is on the traffic port */
	ASSERT_STREQ(p[0].group, "sg-1");
	ASSERT_STREQ(p[0].cidr, "");
	ASSERT_EQ(p[1].from, 30443);
	ASSERT_TRUE(ccm_nlb_rule_ours(&p[1], "alb"));
	ASSERT_OK(parse_nlb(", " ANN "healthcheck-port\":\"10256\"", "", s, n, err, sizeof(err)));
	k = ccm_nlb_node_rules_from(n, "alb", "sg-1", p, 16);
	ASSERT_EQ(k, 3);
	ASSERT_EQ(p[2].from, 10256);
	ASSERT_STREQ(p[2].desc, "kubernetes.io/rule/nlb/health=alb");
	/* a rule from the group that the NLB no longer wants is stale; one from another group is
	 * not ours */
	struct ccm_sg_perm old = p[2];
	ASSERT_TRUE(ccm_nlb_rule_stale(&old, "alb", p, 2, p, 3));
	ASSERT_FALSE(ccm_nlb_rule_stale(&old, "blb", p, 2, p, 3));
	free(s);
	free(n);
}
