#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "modules/ccm/ccm_lb.h"
#include "tests/unit/harness.h"

static cJSON *svc_json(const char *annotations, const char *spec_extra)
{
	char text[4096];
	cJSON *j = NULL;
	snprintf(text, sizeof(text),
		 "{\"metadata\":{\"name\":\"web\",\"namespace\":\"prod\","
		 "\"uid\":\"01234567-89ab-cdef-0123-456789abcdef\",\"annotations\":{%s}},"
		 "\"spec\":{\"type\":\"LoadBalancer\",\"ports\":["
		 "{\"name\":\"http\",\"port\":80,\"nodePort\":30080,\"protocol\":\"TCP\"},"
		 "{\"name\":\"https\",\"port\":443,\"nodePort\":30443,\"protocol\":\"TCP\"},"
		 "{\"name\":\"noport\",\"port\":9,\"protocol\":\"TCP\"}]%s}}",
		 annotations, spec_extra);
	json_parse(text, strlen(text), &j, NULL);
	return j;
}

static int parse(const char *ann, const char *extra, struct ccm_lb_spec *s, char *err, size_t n)
{
	cJSON *j = svc_json(ann, extra);
	if (!j)
		return -1000;
	int r = ccm_lb_spec_parse(j, s, err, n);
	cJSON_Delete(j);
	return r;
}

#define ANN "\"service.beta.kubernetes.io/aws-load-balancer-"

TEST(ccm_lb_name_and_defaults)
{
	struct ccm_lb_spec *s = calloc(1, sizeof(*s));
	char err[512] = "", name[33];

	ccm_lb_name("01234567-89ab-cdef-0123-456789abcdef", name);
	ASSERT_STREQ(name, "a0123456789abcdef0123456789abcde");
	ASSERT_EQ(strlen(name), 32);
	ccm_lb_name("ab-c", name);
	ASSERT_STREQ(name, "aabc");

	ASSERT_OK(parse("", "", s, err, sizeof(err)));
	ASSERT_EQ(s->type, CCM_LB_CLASSIC);
	ASSERT_STREQ(s->name, "a0123456789abcdef0123456789abcde");
	ASSERT_STREQ(s->svc, "prod/web");
	ASSERT_FALSE(s->internal);
	/* the port without a NodePort is skipped */
	ASSERT_EQ(s->n_l, 2);
	ASSERT_EQ(s->l[0].port, 80);
	ASSERT_EQ(s->l[0].node_port, 30080);
	ASSERT_STREQ(s->l[0].proto, "TCP");
	ASSERT_STREQ(s->l[0].iproto, "TCP");
	/* Cluster: TCP on the first NodePort, 2/6/5/10 */
	ASSERT_STREQ(s->hc.target, "TCP:30080");
	ASSERT_EQ(s->hc.healthy, 2);
	ASSERT_EQ(s->hc.unhealthy, 6);
	ASSERT_EQ(s->hc.timeout, 5);
	ASSERT_EQ(s->hc.interval, 10);
	ASSERT_EQ(s->n_ranges, 1);
	ASSERT_STREQ(s->ranges[0], "0.0.0.0/0");
	free(s);
}

TEST(ccm_lb_listeners_and_health_checks)
{
	struct ccm_lb_spec *s = calloc(1, sizeof(*s));
	char err[512] = "";

	/* a certificate on the https port only, backend http */
	ASSERT_OK(parse(ANN "ssl-cert\":\"arn:cert\"," ANN "ssl-ports\":\"https\"," ANN
			    "backend-protocol\":\"http\"",
			"", s, err, sizeof(err)));
	ASSERT_STREQ(s->l[0].proto, "HTTP");
	ASSERT_STREQ(s->l[0].iproto, "HTTP");
	ASSERT_STREQ(s->l[0].cert, "");
	ASSERT_STREQ(s->l[1].proto, "HTTPS");
	ASSERT_STREQ(s->l[1].iproto, "HTTP");
	ASSERT_STREQ(s->l[1].cert, "arn:cert");
	/* a certificate on every port without a backend protocol: SSL to TCP */
	ASSERT_OK(parse(ANN "ssl-cert\":\"arn:cert\"", "", s, err, sizeof(err)));
	ASSERT_STREQ(s->l[0].proto, "SSL");
	ASSERT_STREQ(s->l[0].iproto, "TCP");
	ASSERT_STREQ(s->l[1].proto, "SSL");
	/* backend ssl: the health check is SSL */
	ASSERT_OK(parse(ANN "ssl-cert\":\"arn:cert\"," ANN "backend-protocol\":\"ssl\"", "", s, err,
			sizeof(err)));
	ASSERT_STREQ(s->hc.target, "SSL:30080");
	/* Local: HTTP on the healthCheckNodePort /healthz */
	ASSERT_OK(parse("", ",\"externalTrafficPolicy\":\"Local\",\"healthCheckNodePort\":32000", s,
			err, sizeof(err)));
	ASSERT_TRUE(s->local);
	ASSERT_STREQ(s->hc.target, "HTTP:32000/healthz");
	/* the health-check family */
	ASSERT_OK(parse(ANN "healthcheck-protocol\":\"http\"," ANN "healthcheck-path\":\"/ready\"," ANN
			    "healthcheck-port\":\"31999\"," ANN "healthcheck-interval\":\"30\"," ANN
			    "healthcheck-healthy-threshold\":\"3\"",
			"", s, err, sizeof(err)));
	ASSERT_STREQ(s->hc.target, "HTTP:31999/ready");
	ASSERT_EQ(s->hc.interval, 30);
	ASSERT_EQ(s->hc.healthy, 3);
	/* internal, source ranges, tags, target labels, attributes */
	ASSERT_OK(parse(ANN "internal\":\"true\"," ANN "additional-resource-tags\":\"a=1, b=2\"," ANN
			    "target-node-labels\":\"role=lb\"," ANN
			    "connection-draining-enabled\":\"true\"," ANN
			    "connection-idle-timeout\":\"120\"",
			",\"loadBalancerSourceRanges\":[\"10.1.2.3/16\"]", s, err, sizeof(err)));
	ASSERT_TRUE(s->internal);
	ASSERT_STREQ(s->ranges[0], "10.1.0.0/16");
	ASSERT_EQ(s->n_tags, 2);
	ASSERT_STREQ(s->tags[1].key, "b");
	ASSERT_STREQ(s->tags[1].value, "2");
	ASSERT_STREQ(s->node_labels[0].key, "role");
	ASSERT_TRUE(s->attrs.drain);
	ASSERT_EQ(s->attrs.idle_timeout, 120);
	ASSERT_OK(parse(ANN "internal\":\"false\"", "", s, err, sizeof(err)));
	ASSERT_FALSE(s->internal);
	free(s);
}

TEST(ccm_lb_validation)
{
	struct ccm_lb_spec *s = calloc(1, sizeof(*s));
	char err[512] = "";

	ASSERT_ERR(parse(ANN "proxy-protocol\":\"yes\"", "", s, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "the only value supported currently is '*'");
	ASSERT_OK(parse(ANN "proxy-protocol\":\"*\"", "", s, err, sizeof(err)));
	ASSERT_TRUE(s->proxy_protocol);
	ASSERT_ERR(parse("", ",\"loadBalancerIP\":\"1.2.3.4\"", s, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "LoadBalancerIP cannot be specified");
	ASSERT_ERR(parse("", ",\"sessionAffinity\":\"ClientIP\"", s, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "unsupported load balancer affinity: ClientIP");
	ASSERT_ERR(parse("", ",\"loadBalancerSourceRanges\":[\"nope\"]", s, err, sizeof(err)),
		   EINVAL);
	ASSERT_ERR(parse(ANN "healthcheck-interval\":\"x\"", "", s, err, sizeof(err)), EINVAL);
	ASSERT_ERR(parse(ANN "ssl-cert\":\"c\"," ANN "backend-protocol\":\"udp\"", "", s, err,
			 sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "Invalid backend protocol udp");
	ASSERT_ERR(parse(ANN "type\":\"alb\"", "", s, err, sizeof(err)), EINVAL);
	ASSERT_ERR(parse(ANN "type\":\"nlb-ip\"", "", s, err, sizeof(err)), ENOTSUP);
	ASSERT_ERR(parse(ANN "type\":\"external\"", "", s, err, sizeof(err)), ENOTSUP);
	/* extra-security-groups on an NLB: only with NLBSecurityGroupMode = Managed, which the
	 * NLB's ensure checks (ccm_svc_nlb.c); on none never */
	ASSERT_OK(parse(ANN "type\":\"nlb\"," ANN "extra-security-groups\":\"sg-1\"", "", s, err,
			sizeof(err)));
	ASSERT_ERR(parse(ANN "type\":\"none\"," ANN "extra-security-groups\":\"sg-1\"", "", s, err,
			 sizeof(err)),
		   EINVAL);
	ASSERT_ERR(parse(ANN "security-groups\":\"default\"", "", s, err, sizeof(err)), EINVAL);
	ASSERT_ERR(parse(ANN "access-log-enabled\":\"true\"", "", s, err, sizeof(err)), EINVAL);
	ASSERT_ERR(parse("", ",\"externalTrafficPolicy\":\"Local\"", s, err, sizeof(err)), EINVAL);

	/* UDP on a classic ELB; mixed protocols */
	const char *udp = "{\"metadata\":{\"uid\":\"u\"},\"spec\":{\"type\":\"LoadBalancer\","
			  "\"ports\":[{\"port\":53,\"nodePort\":30053,\"protocol\":\"UDP\"}]}}";
	cJSON *j = NULL;
	ASSERT_OK(json_parse(udp, strlen(udp), &j, NULL));
	ASSERT_ERR(ccm_lb_spec_parse(j, s, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "Only TCP LoadBalancer is supported for AWS ELB");
	cJSON_Delete(j);
	free(s);
}

TEST(ccm_lb_wanted_and_nodes)
{
	const char *t = "{\"metadata\":{\"finalizers\":[\"x\",\"service.kubernetes.io/"
			"load-balancer-cleanup\"]},\"spec\":{\"type\":\"LoadBalancer\","
			"\"loadBalancerClass\":\"other\"}}";
	cJSON *j = NULL;
	ASSERT_OK(json_parse(t, strlen(t), &j, NULL));
	ASSERT_TRUE(ccm_lb_has_finalizer(j));
	ASSERT_FALSE(ccm_lb_wanted(j)); /* another class */
	cJSON_Delete(j);

	char id[32];
	const char *nodes[] = {
	    /* 0: eligible */
	    "{\"metadata\":{\"labels\":{\"role\":\"lb\"}},\"spec\":{\"providerID\":"
	    "\"aws:///us-east-1a/i-1\"},\"status\":{\"conditions\":[{\"type\":\"Ready\","
	    "\"status\":\"True\"}]}}",
	    /* 1: not ready */
	    "{\"metadata\":{},\"spec\":{\"providerID\":\"aws:///us-east-1a/i-2\"},\"status\":"
	    "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}",
	    /* 2: unschedulable */
	    "{\"metadata\":{},\"spec\":{\"unschedulable\":true,\"providerID\":\"aws:///a/i-3\"},"
	    "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
	    /* 3: excluded */
	    "{\"metadata\":{\"labels\":{\"node.kubernetes.io/exclude-from-external-load-"
	    "balancers\":\"\"}},\"spec\":{\"providerID\":\"aws:///a/i-4\"},\"status\":"
	    "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
	    /* 4: no providerID */
	    "{\"metadata\":{},\"spec\":{},\"status\":{\"conditions\":[{\"type\":\"Ready\","
	    "\"status\":\"True\"}]}}",
	};
	bool want[] = {true, false, false, false, false};
	for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
		ASSERT_OK(json_parse(nodes[i], strlen(nodes[i]), &j, NULL));
		ASSERT_EQ(ccm_lb_node_eligible(j, NULL, id, sizeof(id)), want[i]);
		cJSON_Delete(j);
	}
	/* target-node-labels */
	struct ccm_lb_spec *s = calloc(1, sizeof(*s));
	s->n_node_labels = 1;
	snprintf(s->node_labels[0].key, sizeof(s->node_labels[0].key), "%s", "role");
	snprintf(s->node_labels[0].value, sizeof(s->node_labels[0].value), "%s", "lb");
	ASSERT_OK(json_parse(nodes[0], strlen(nodes[0]), &j, NULL));
	ASSERT_TRUE(ccm_lb_node_eligible(j, s, id, sizeof(id)));
	ASSERT_STREQ(id, "i-1");
	snprintf(s->node_labels[0].value, sizeof(s->node_labels[0].value), "%s", "web");
	ASSERT_FALSE(ccm_lb_node_eligible(j, s, id, sizeof(id)));
	cJSON_Delete(j);
	free(s);
}

static xmlDoc *load(const char *name)
{
	size_t len;
	xmlDoc *doc = NULL;
	_cleanup_free_ char *data = test_read_file(test_data(name), &len);
	if (data && aws_xml_parse(data, len, &doc, NULL, 0) < 0)
		return NULL;
	return doc;
}

TEST(ccm_lb_subnets)
{
	xmlDoc *sd = load("ccm/lb/subnets.xml"), *td = load("ccm/lb/route_tables.xml");
	struct ccm_subnet *sn = NULL;
	struct ccm_lb_spec *s = calloc(1, sizeof(*s));
	char chosen[8][32], err[256];
	size_t n = 0, nc = 0;

	ASSERT_NOT_NULL(sd);
	ASSERT_NOT_NULL(td);
	ASSERT_OK(ccm_subnets_from_replies(xmlDocGetRootElement(sd), xmlDocGetRootElement(td),
					   "c1", &sn, &n));
	ASSERT_EQ(n, 6);
	ASSERT_TRUE(sn[0].cluster_tagged);
	ASSERT_TRUE(sn[0].public_); /* the main table routes to an igw */
	ASSERT_FALSE(sn[4].public_); /* its own table routes to a NAT gateway */
	ASSERT_TRUE(sn[5].other_cluster);

	/* internet-facing: public ones, one per zone; the role tag wins in us-east-1a */
	ASSERT_OK(ccm_lb_pick_subnets(sn, n, s, chosen, 8, &nc, err, sizeof(err)));
	ASSERT_EQ(nc, 2);
	ASSERT_STREQ(chosen[0], "subnet-0c");
	ASSERT_STREQ(chosen[1], "subnet-1a");
	/* without the role tag, the cluster tag wins over the lower ID */
	snprintf(sn[2].id, sizeof(sn[2].id), "%s", "subnet-zz");
	sn[2].role_elb = false;
	ASSERT_OK(ccm_lb_pick_subnets(sn, n, s, chosen, 8, &nc, err, sizeof(err)));
	ASSERT_STREQ(chosen[0], "subnet-0b");
	/* internal: private ones too; internal-elb role in us-east-1b */
	s->internal = true;
	ASSERT_OK(ccm_lb_pick_subnets(sn, n, s, chosen, 8, &nc, err, sizeof(err)));
	ASSERT_EQ(nc, 2);
	ASSERT_STREQ(chosen[1], "subnet-1p");
	/* the subnets annotation: by ID and by Name */
	s->n_subnets = 2;
	snprintf(s->subnets[0], sizeof(s->subnets[0]), "%s", "private-b");
	snprintf(s->subnets[1], sizeof(s->subnets[1]), "%s", "subnet-0a");
	ASSERT_OK(ccm_lb_pick_subnets(sn, n, s, chosen, 8, &nc, err, sizeof(err)));
	ASSERT_EQ(nc, 2);
	ASSERT_STREQ(chosen[0], "subnet-0a");
	ASSERT_STREQ(chosen[1], "subnet-1p");
	snprintf(s->subnets[1], sizeof(s->subnets[1]), "%s", "missing");
	ASSERT_ERR(ccm_lb_pick_subnets(sn, n, s, chosen, 8, &nc, err, sizeof(err)), ENOENT);
	/* nothing public */
	s->n_subnets = 0;
	s->internal = false;
	for (size_t i = 0; i < n; i++)
		sn[i].public_ = false;
	ASSERT_ERR(ccm_lb_pick_subnets(sn, n, s, chosen, 8, &nc, err, sizeof(err)), ENOENT);
	ASSERT_CONTAINS(err, "could not find any suitable subnets");
	free(sn);
	free(s);
	xmlFreeDoc(sd);
	xmlFreeDoc(td);
}

TEST(ccm_lb_sg_rules_and_plan)
{
	struct ccm_lb_spec *s = calloc(1, sizeof(*s));
	struct ccm_elb *e = calloc(1, sizeof(*e));
	struct ccm_elb_plan *p = calloc(1, sizeof(*p));
	struct ccm_sg_perm perms[16];
	char err[256];

	ASSERT_OK(parse("", ",\"loadBalancerSourceRanges\":[\"10.0.0.0/8\",\"1.2.3.4/32\"]", s,
			err, sizeof(err)));
	size_t n = ccm_lb_sg_rules(s, perms, 16);
	ASSERT_EQ(n, 6); /* (80, 443, icmp) x 2 ranges */
	ASSERT_STREQ(perms[2].proto, "icmp");
	ASSERT_EQ(perms[2].from, 3);
	ASSERT_EQ(perms[2].to, 4);
	ASSERT_STREQ(perms[3].cidr, "1.2.3.4/32");

	xmlDoc *d = load("ccm/lb/describe_elb.xml");
	ASSERT_NOT_NULL(d);
	xmlNode *res = aws_xml_get(xmlDocGetRootElement(d), "DescribeLoadBalancersResult");
	ASSERT_OK(ccm_elb_parse(aws_xml_list(res, "LoadBalancerDescriptions"), e));
	xmlFreeDoc(d);
	ASSERT_EQ(e->n_l, 2);
	ASSERT_EQ(e->n_instances, 2);
	ASSERT_STREQ(e->hc.target, "TCP:30080");

	const char subnets[2][32] = {"subnet-0c", "subnet-1a"}, sgs[1][32] = {"sg-elb"};
	const char ids[2][32] = {"i-1", "i-2"};
	ASSERT_OK(ccm_elb_plan_make(s, e, subnets, 2, sgs, 1, ids, 2, p));
	ASSERT_FALSE(p->recreate);
	/* 443 -> 30999 is wrong: deleted and made again */
	ASSERT_EQ(p->n_del, 1);
	ASSERT_EQ(p->del_ports[0], 443);
	ASSERT_EQ(p->n_add, 1);
	ASSERT_EQ(s->l[p->add[0]].node_port, 30443);
	ASSERT_FALSE(p->hc);
	ASSERT_FALSE(p->sgs);
	ASSERT_EQ(p->n_attach, 1);
	ASSERT_STREQ(p->attach[0], "subnet-1a");
	ASSERT_EQ(p->n_detach, 1);
	ASSERT_STREQ(p->detach[0], "subnet-9z");
	ASSERT_EQ(p->n_reg, 1);
	ASSERT_STREQ(p->reg[0], "i-2");
	ASSERT_EQ(p->n_dereg, 1);
	ASSERT_STREQ(p->dereg[0], "i-gone");
	ccm_elb_plan_release(p);

	/* internal now: a new scheme needs a new ELB; health check changed */
	s->internal = true;
	s->hc.interval = 30;
	ASSERT_OK(ccm_elb_plan_make(s, e, subnets, 2, sgs, 1, ids, 2, p));
	ASSERT_TRUE(p->recreate);
	ASSERT_TRUE(p->hc);
	ccm_elb_plan_release(p);

	/* what it describes after the changes: an empty plan */
	s->internal = false;
	s->hc.interval = 10;
	e->l[1].node_port = 30443;
	e->n_subnets = 2;
	snprintf(e->subnets[1], sizeof(e->subnets[1]), "%s", "subnet-1a");
	snprintf(e->instances[1], sizeof(e->instances[1]), "%s", "i-2");
	ASSERT_OK(ccm_elb_plan_make(s, e, subnets, 2, sgs, 1, ids, 2, p));
	ASSERT_TRUE(ccm_elb_plan_empty(p));
	ccm_elb_plan_release(p);
	ccm_elb_release(e);
	free(e);
	free(p);
	free(s);
}

/* A group holds up to 1,000 ingress rules (AWS's quota at its maximum): every one is read back,
 * or the controller misses its own rules past the cap, asks for them again (a duplicate-rule
 * error on every re-check) and leaves them behind on delete. */
TEST(ccm_sg_perms_parse_reads_a_full_group)
{
	struct buf x = BUF_INIT(0);
	struct ccm_sg_perm *perms = calloc(CCM_LB_MAX_PERMS, sizeof(*perms));
	xmlDoc *d = NULL;

	ASSERT_NOT_NULL(perms);
	ASSERT_OK(buf_printf(&x, "<g><ipPermissions>"));
	for (int i = 0; i < 1000; i++)
		ASSERT_OK(buf_printf(&x,
				     "<item><ipProtocol>tcp</ipProtocol><fromPort>%d</fromPort>"
				     "<toPort>%d</toPort><ipRanges><item><cidrIp>10.%d.0.0/16</cidrIp>"
				     "<description>kubernetes.io/rule/nlb/client=a%d</description>"
				     "</item></ipRanges></item>",
				     30000 + i, 30000 + i, i % 256, i));
	ASSERT_OK(buf_printf(&x, "</ipPermissions></g>"));
	ASSERT_OK(aws_xml_parse(x.data, x.len, &d, NULL, 0));
	ASSERT_EQ(ccm_sg_perms_parse(xmlDocGetRootElement(d), perms, CCM_LB_MAX_PERMS), 1000);
	ASSERT_EQ(perms[999].from, 30999);
	ASSERT_STREQ(perms[999].desc, "kubernetes.io/rule/nlb/client=a999");
	xmlFreeDoc(d);
	buf_release(&x);
	free(perms);
}
