#include <stdlib.h>
#include <string.h>

#include "modules/ccm/ccm_config.h"
#include "tests/unit/harness.h"

static int parse(const char *text, struct ccm_config **ret, char *err, size_t n)
{
	return ccm_config_parse(text, strlen(text), "test.ini", ret, err, n);
}

TEST(ccm_config_deckhouse)
{
	_cleanup_ccm_config_ struct ccm_config *c = NULL;
	char err[256];
	ASSERT_OK(
	    ccm_config_load(test_data("ccm/cloud-config-deckhouse.ini"), &c, err, sizeof(err)));
	ASSERT_STREQ(c->cluster_id, "8a3e2c1b-5d4f-4e6a-9b7c-0d1e2f3a4b5c");
	ASSERT_STREQ(c->elb_security_group, "sg-0123456789abcdef0");
	ASSERT_STREQ(ccm_config_cluster_id(c), "8a3e2c1b-5d4f-4e6a-9b7c-0d1e2f3a4b5c");
	ASSERT_EQ(strv_len(c->node_ip_families), 1);
	ASSERT_STREQ(c->node_ip_families[0], "ipv4");
	ASSERT_NULL(c->region);
	ASSERT_FALSE(c->disable_sg_ingress);
	ASSERT_EQ(c->n_overrides, 0);
}

TEST(ccm_config_every_key)
{
	_cleanup_ccm_config_ struct ccm_config *c = NULL;
	char err[256];
	ASSERT_OK(ccm_config_load(test_data("ccm/cloud-config-full.ini"), &c, err, sizeof(err)));
	ASSERT_STREQ(c->zone, "us-east-1a");
	ASSERT_STREQ(c->region, "us-east-1");
	ASSERT_STREQ(c->vpc, "vpc-0abc");
	ASSERT_STREQ(c->subnet_id, "subnet-0abc");
	ASSERT_STREQ(c->route_table_id, "rtb-0abc");
	ASSERT_STREQ(c->role_arn, "arn:aws:iam::123456789012:role/ccm");
	ASSERT_STREQ(c->source_arn, "arn:aws:eks:us-east-1:123456789012:cluster/c1");
	ASSERT_STREQ(c->cluster_tag, "legacy-cluster");
	ASSERT_STREQ(c->cluster_id, "cluster-1");
	ASSERT_STREQ(ccm_config_cluster_id(c), "cluster-1");
	ASSERT_TRUE(c->disable_sg_ingress);
	ASSERT_STREQ(c->elb_security_group, "sg-1");
	ASSERT_EQ(strv_len(c->node_ip_families), 2);
	ASSERT_STREQ(c->node_ip_families[0], "ipv6");
	ASSERT_STREQ(c->node_ip_families[1], "ipv4");
	ASSERT_TRUE(ccm_config_has_family(c, "ipv6"));
	ASSERT_STREQ(c->health_probe_mode, "Shared");
	ASSERT_EQ(c->shared_probe_port, 10256);
	ASSERT_STREQ(c->shared_probe_path, "/healthz");
	ASSERT_STREQ(c->topology_pattern, "^(p|trn)[0-9]+");
	ASSERT_STREQ(c->nlb_sg_mode, "Managed");
	ASSERT_STREQ(c->public_network_allow_list, "10.0.0.0/8, 192.168.0.0/16");
	ASSERT_EQ(c->n_overrides, 2);
	ASSERT_STREQ(c->overrides[0].name, "1");
	ASSERT_STREQ(c->overrides[0].service, "ec2");
	ASSERT_STREQ(c->overrides[0].url, "https://ec2.example.com");
	ASSERT_STREQ(c->overrides[0].signing_method, "v4");
	ASSERT_STREQ(c->overrides[0].signing_name, "ec2");
	ASSERT_STREQ(c->overrides[1].service, "Elastic Load Balancing v2");
	ASSERT_STREQ(c->overrides[1].signing_region, "us-west-2");
}

TEST(ccm_config_values)
{
	_cleanup_ccm_config_ struct ccm_config *c = NULL;
	char err[256];
	/* quotes keep blanks, escapes, inline comments, continuation, CRLF, case-insensitive keys
	 */
	ASSERT_OK(parse("[GLOBAL]\r\n"
			"zone = \"  a b \" ; comment\r\n"
			"REGION=us-west-2#c\n"
			"vpc = vpc-\\\n1\n"
			"SubnetID = \"x;#y\"\n"
			"RoleARN = a\\tb\\\"c\\\\\n"
			"DisableSecurityGroupIngress\n"
			"ElbSecurityGroup =   sg  with  inner   \n"
			"NodeIPFamilies = ipv4,ipv6\n",
			&c, err, sizeof(err)));
	ASSERT_STREQ(c->zone, "  a b ");
	ASSERT_STREQ(c->region, "us-west-2");
	ASSERT_STREQ(c->vpc, "vpc-1");
	ASSERT_STREQ(c->subnet_id, "x;#y");
	ASSERT_STREQ(c->role_arn, "a\tb\"c\\");
	ASSERT_TRUE(c->disable_sg_ingress);
	ASSERT_STREQ(c->elb_security_group, "sg  with  inner");
	ASSERT_EQ(strv_len(c->node_ip_families), 2);
	ASSERT_STREQ(c->node_ip_families[1], "ipv6");
}

TEST(ccm_config_empty_and_merge)
{
	char err[256];
	struct ccm_config *c = NULL;
	ASSERT_OK(ccm_config_load(NULL, &c, err, sizeof(err)));
	ASSERT_NULL(ccm_config_cluster_id(c));
	ASSERT_STREQ(c->node_ip_families[0], "ipv4");
	ccm_config_free(c);
	c = NULL;
	/* an empty value clears a list; a repeated section merges */
	ASSERT_OK(parse("[Global]\nNodeIPFamilies = ipv6\nNodeIPFamilies =\nNodeIPFamilies = ipv4\n"
			"KubernetesClusterTag = old\n[Global]\nRegion = r\n",
			&c, err, sizeof(err)));
	ASSERT_EQ(strv_len(c->node_ip_families), 1);
	ASSERT_STREQ(c->node_ip_families[0], "ipv4");
	ASSERT_STREQ(ccm_config_cluster_id(c), "old");
	ASSERT_STREQ(c->region, "r");
	ccm_config_free(c);
}

TEST(ccm_config_errors)
{
	struct {
		const char *text, *msg;
	} cases[] = {
	    {"[Global]\nFoo = bar\n", "line 2: unknown key 'Foo' in section [Global]"},
	    {"[Global\nZone = a\n", "line 1: malformed section header"},
	    {"[Other]\n", "line 1: unknown section [Other]"},
	    {"Zone = a\n", "line 1: key 'Zone' outside of a section"},
	    {"[Global]\nZone = \"abc\n", "line 2: unterminated quoted value"},
	    {"[Global]\nZone = a\\qb\n", "line 2: invalid escape sequence"},
	    {"[Global]\nDisableSecurityGroupIngress = maybe\n", "invalid boolean 'maybe'"},
	    {"[Global]\nClusterServiceSharedLoadBalancerHealthProbePort = 99999999999\n",
	     "invalid integer"},
	    {"[Global]\nZone\n", "key 'Zone' needs a value"},
	    {"[Global]\nNodeIPFamilies = ipv5\n", "NodeIPFamilies: 'ipv5'"},
	    {"[Global]\nNLBSecurityGroupMode = managed\n",
	     "invalid NLB security group mode: \"managed\". Expected: \"Managed\""},
	    {"[Global]\n= x\n", "line 2: unexpected '='"},
	    {"[Global]\nZone = a \"b\" c\nRegion x\n", "line 3: unexpected 'x'"},
	    {"[ServiceOverride]\n", "needs a name"},
	    {"[ServiceOverride \"1\"]\nService = ec2\nRegion = r\nURL = https://x\n",
	     "[ServiceOverride \"1\"]: SigningRegion is missing"},
	    {"[ServiceOverride \"1\"]\nService = ec2\nRegion = r\nURL = ftp://x\nSigningRegion = "
	     "r\n",
	     "is not an http(s) URL"},
	    {"[ServiceOverride \"1\"]\nService=ec2\nRegion=r\nURL=http://a\nSigningRegion=r\n"
	     "[ServiceOverride \"2\"]\nService=ec2\nRegion=r\nURL=http://b\nSigningRegion=r\n",
	     "duplicate entry found for service override [2] (ec2 in r)"},
	    {"[ServiceOverride \"1\"]\nBogus = 1\n",
	     "unknown key 'Bogus' in section [ServiceOverride \"1\"]"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct ccm_config *c = NULL;
		char err[256] = "";
		int r = parse(cases[i].text, &c, err, sizeof(err));
		if (r != -EINVAL)
			test_fail(__FILE__, __LINE__, "case %zu: got %d", i, r);
		ASSERT_NULL(c);
		ASSERT_CONTAINS(err, cases[i].msg);
		ASSERT_CONTAINS(err, "cloud config 'test.ini'");
	}
	struct ccm_config *c = NULL;
	char err[256];
	ASSERT_ERR(ccm_config_parse("[Global]\0x", 10, NULL, &c, err, sizeof(err)), EINVAL);
	ASSERT_ERR(ccm_config_load("/nonexistent/cloud.ini", &c, err, sizeof(err)), ENOENT);
	ASSERT_CONTAINS(err, "/nonexistent/cloud.ini");
}

TEST(ccm_config_override_services)
{
	enum aws_service s[2];
	bool imds;
	ASSERT_EQ(ccm_override_services("ec2", s, &imds), 1);
	ASSERT_EQ(s[0], AWS_SVC_EC2);
	ASSERT_EQ(ccm_override_services("EC2", s, &imds), 1);
	ASSERT_EQ(ccm_override_services("elasticloadbalancing", s, &imds), 2);
	ASSERT_EQ(s[0], AWS_SVC_ELB);
	ASSERT_EQ(s[1], AWS_SVC_ELBV2);
	ASSERT_EQ(ccm_override_services("Elastic Load Balancing v2", s, &imds), 1);
	ASSERT_EQ(s[0], AWS_SVC_ELBV2);
	ASSERT_EQ(ccm_override_services("kms", s, &imds), 0);
	ASSERT_FALSE(imds);
	ASSERT_EQ(ccm_override_services("ec2imds", s, &imds), 0);
	ASSERT_TRUE(imds);
}

TEST(ccm_config_apply_overrides)
{
	_cleanup_ccm_config_ struct ccm_config *c = NULL;
	char err[256];
	ASSERT_OK(parse("[ServiceOverride \"1\"]\nService=ec2\nRegion=us-east-1\n"
			"URL=http://127.0.0.1:1\nSigningRegion=sr\nSigningName=ec2x\n"
			"[ServiceOverride \"2\"]\nService=ec2\nRegion=eu-west-1\n"
			"URL=http://127.0.0.1:2\nSigningRegion=eu-west-1\n"
			"[ServiceOverride \"3\"]\nService=ec2imds\nRegion=any\n"
			"URL=http://127.0.0.1:3\nSigningRegion=any\n",
			&c, err, sizeof(err)));
	struct aws_endpoints e;
	aws_endpoints_init(&e);
	_cleanup_free_ char *imds = NULL;
	ASSERT_OK(ccm_config_apply_overrides(c, "us-east-1", &e, &imds));
	ASSERT_STREQ(imds, "http://127.0.0.1:3");
	struct aws_endpoint ep;
	unsetenv("AWS_ENDPOINT_URL");
	unsetenv("AWS_ENDPOINT_URL_EC2");
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_EC2, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "http://127.0.0.1:1");
	ASSERT_STREQ(ep.signing_region, "sr");
	ASSERT_STREQ(ep.signing_name, "ec2x");
	aws_endpoints_release(&e);
}

/* KubernetesClusterID / KubernetesClusterTag become the tag key kubernetes.io/cluster/<ID>:
 * one AWS would refuse is an error at its line. */
TEST(ccm_config_cluster_id_must_make_a_tag_key)
{
	_cleanup_ccm_config_ struct ccm_config *c = NULL;
	char err[512];
	_cleanup_buf_ struct buf b = BUF_INIT(4 << 20);

	/* 106 characters: the key has exactly 128 */
	ASSERT_OK(buf_puts(&b, "[Global]\nKubernetesClusterID = "));
	for (int i = 0; i < 106; i++)
		ASSERT_OK(buf_putc(&b, 'a'));
	ASSERT_OK(buf_puts(&b, "\n"));
	ASSERT_OK(parse(b.data, &c, err, sizeof(err)));
	ASSERT_EQ(strlen(ccm_config_cluster_id(c)), 106);
	ccm_config_free(c);
	c = NULL;

	/* 107, and a million */
	buf_reset(&b);
	ASSERT_OK(buf_puts(&b, "[Global]\nRegion = us-east-1\nKubernetesClusterID = "));
	for (int i = 0; i < 107; i++)
		ASSERT_OK(buf_putc(&b, 'a'));
	ASSERT_ERR(parse(b.data, &c, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "cloud config 'test.ini' line 3: KubernetesClusterID: cluster ID");
	ASSERT_CONTAINS(err, "more than 128 characters (the ID at most 106)");
	for (int i = 0; i < 1000000 - 107; i++)
		ASSERT_OK(buf_putc(&b, 'a'));
	ASSERT_ERR(parse(b.data, &c, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "line 3: KubernetesClusterID");
	ASSERT_LT(strlen(err), 300);

	/* characters AWS does not allow in a key */
	ASSERT_ERR(parse("[Global]\nKubernetesClusterTag = a,b\n", &c, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err,
			"line 2: KubernetesClusterTag: cluster ID \"a...\": the character ','");
	ASSERT_ERR(parse("[Global]\n\nKubernetesClusterID = \"a\\nb\"\n", &c, err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err,
			"line 3: KubernetesClusterID: cluster ID \"a...\": the character \\x0a");
	ASSERT_ERR(parse("[Global]\nKubernetesClusterID = \"a\xff\"\n", &c, err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "invalid UTF-8");

	/* what AWS allows: letters, digits, spaces, + - = . _ : / @, non-ASCII letters */
	ASSERT_OK(parse("[Global]\nKubernetesClusterID = \"my cluster+1=a.b_c:d/e@f-\xc3\xa9\"\n",
			&c, err, sizeof(err)));
	ASSERT_STREQ(c->cluster_id, "my cluster+1=a.b_c:d/e@f-\xc3\xa9");
	ccm_config_free(c);
	c = NULL;
	/* an empty value stays "not set" */
	ASSERT_OK(parse("[Global]\nKubernetesClusterID = \"\"\n", &c, err, sizeof(err)));
	ASSERT_NULL(ccm_config_cluster_id(c));
}
