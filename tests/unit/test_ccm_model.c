#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/json.h"
#include "modules/ccm/ccm_model.h"
#include "tests/unit/harness.h"

#define TAG(k, v)                                                                                  \
	{                                                                                          \
		(char *)(k), (char *)(v)                                                           \
	}

/* Loads a recorded DescribeInstances reply. */
static int load_instances(const char *name, struct ec2_instance **list, size_t *n)
{
	size_t len;
	_cleanup_free_ char *data = test_read_file(test_data(name), &len);
	xmlDoc *doc;
	char err[256];
	int r;

	if (!data)
		return -ENOENT;
	if ((r = aws_xml_parse(data, len, &doc, err, sizeof(err))) < 0)
		return r;
	*list = NULL;
	*n = 0;
	r = ec2_instances_parse(xmlDocGetRootElement(doc), list, n);
	xmlFreeDoc(doc);
	return r;
}

static void free_instances(struct ec2_instance *l, size_t n)
{
	for (size_t k = 0; k < n; k++)
		ec2_instance_release(&l[k]);
	free(l);
}

static char *addr_str(const cJSON *a)
{
	struct buf b = BUF_INIT(0);
	const cJSON *x;
	cJSON_ArrayForEach(x, a)
	{
		buf_printf(&b, "%s%s=%s", b.len ? " " : "", json_str(x, "type"),
			   json_str(x, "address"));
	}
	return b.len ? buf_steal(&b) : strdup("");
}

TEST(ccm_model_parse_moto)
{
	struct ec2_instance *l;
	size_t n;
	ASSERT_OK(load_instances("ccm/describe-instances-moto.xml", &l, &n));
	ASSERT_EQ(n, 1);
	struct ec2_instance *i = &l[0];
	ASSERT_STREQ(i->id, "i-527750eaf978ecc34");
	ASSERT_STREQ(i->state, "running");
	ASSERT_STREQ(i->type, "m5.large");
	ASSERT_STREQ(i->zone, "us-east-1a");
	ASSERT_STREQ(i->private_dns, "ip-172-31-0-4.ec2.internal");
	ASSERT_STREQ(i->public_dns, "ec2-54-214-90-146.compute-1.amazonaws.com");
	ASSERT_STREQ(i->public_ip, "54.214.90.146");
	ASSERT_STREQ(i->vpc_id, "vpc-c916f7de72c3b5dc1");
	ASSERT_TRUE(i->source_dest_check);
	ASSERT_EQ(i->n_enis, 2);
	ASSERT_EQ(i->enis[1].device_index, 1);
	ASSERT_EQ(strv_len(i->enis[1].private_ips), 3);
	ASSERT_STREQ(ec2_instance_tag(i, "Name"), "node-a");
	ASSERT_TRUE(ccm_tags_have_cluster(i->tags, i->n_tags, "c1"));
	ASSERT_TRUE(ccm_tags_cluster_owned(i->tags, i->n_tags, "c1"));
	ASSERT_FALSE(ccm_tags_have_cluster(i->tags, i->n_tags, "c2"));

	cJSON *a;
	ASSERT_OK(ccm_instance_addresses(i, NULL, &a));
	_cleanup_free_ char *s = addr_str(a);
	ASSERT_STREQ(s,
		     "InternalIP=172.31.0.4 InternalIP=172.31.4.160 InternalIP=172.31.13.122 "
		     "InternalIP=172.31.10.75 InternalIP=172.31.6.156 ExternalIP=54.214.90.146 "
		     "InternalDNS=ip-172-31-0-4.ec2.internal Hostname=ip-172-31-0-4.ec2.internal "
		     "ExternalDNS=ec2-54-214-90-146.compute-1.amazonaws.com");
	cJSON_Delete(a);

	struct ec2_instance c;
	ASSERT_OK(ec2_instance_copy(i, &c));
	ASSERT_STREQ(c.enis[1].private_ips[2], "172.31.6.156");
	ASSERT_STREQ(c.tags[0].value, "node-a");
	ec2_instance_release(&c);
	free_instances(l, n);
}

TEST(ccm_model_addresses_families)
{
	struct ec2_instance *l;
	size_t n;
	ASSERT_OK(load_instances("ccm/describe-instances-aws.xml", &l, &n));
	ASSERT_EQ(n, 3);
	struct ec2_instance *i = &l[0];
	ASSERT_FALSE(i->source_dest_check);
	ASSERT_NULL(i->public_dns); /* <dnsName/> */

	char *v4[] = {(char *)"ipv4", NULL}, *v6[] = {(char *)"ipv6", NULL};
	char *both[] = {(char *)"ipv6", (char *)"ipv4", NULL};
	cJSON *a;
	/* ENIs by device index, the detaching one skipped, primary IP first */
	ASSERT_OK(ccm_instance_addresses(i, v4, &a));
	char *s = addr_str(a);
	ASSERT_STREQ(s, "InternalIP=10.0.1.10 InternalIP=10.0.1.11 InternalIP=10.0.2.20 "
			"InternalDNS=ip-10-0-1-10.eu-central-1.compute.internal "
			"Hostname=ip-10-0-1-10.eu-central-1.compute.internal");
	free(s);
	cJSON_Delete(a);
	/* IPv6: the first address of each in-use ENI */
	ASSERT_OK(ccm_instance_addresses(i, v6, &a));
	s = addr_str(a);
	ASSERT_STREQ(s, "InternalIP=2a05:d014:0:1::10 InternalIP=2a05:d014:0:2::20");
	free(s);
	cJSON_Delete(a);
	ASSERT_OK(ccm_instance_addresses(i, both, &a));
	ASSERT_EQ(cJSON_GetArraySize(a), 7);
	ASSERT_STREQ(json_str(a, "0.address"), "2a05:d014:0:1::10");
	ASSERT_STREQ(json_str(a, "2.address"), "10.0.1.10");
	cJSON_Delete(a);
	/* no ENIs: PrivateIpAddress */
	ASSERT_OK(ccm_instance_addresses(&l[1], v4, &a));
	s = addr_str(a);
	ASSERT_STREQ(s,
		     "InternalIP=10.0.1.12 InternalDNS=ip-10-0-1-12.eu-central-1.compute.internal "
		     "Hostname=ip-10-0-1-12.eu-central-1.compute.internal");
	free(s);
	cJSON_Delete(a);
	/* a bad address is an error */
	free(l[1].private_ip);
	l[1].private_ip = strdup("10.0.0.999");
	ASSERT_ERR(ccm_instance_addresses(&l[1], v4, &a), EINVAL);
	free_instances(l, n);
}

TEST(ccm_model_prefer_node_ip)
{
	cJSON *a, *out;
	const char *json = "[{\"type\":\"InternalIP\",\"address\":\"10.0.1.10\"},"
			   "{\"type\":\"InternalIP\",\"address\":\"10.0.2.20\"},"
			   "{\"type\":\"ExternalIP\",\"address\":\"1.2.3.4\"},"
			   "{\"type\":\"InternalIP\",\"address\":\"fd00::5\"},"
			   "{\"type\":\"Hostname\",\"address\":\"h\"}]";
	ASSERT_OK(json_parse(json, strlen(json), &a, NULL));
	ASSERT_OK(ccm_addresses_prefer_node_ip(a, "10.0.2.20", &out));
	_cleanup_free_ char *s = addr_str(out);
	ASSERT_STREQ(s, "InternalIP=10.0.2.20 ExternalIP=1.2.3.4 Hostname=h");
	cJSON_Delete(out);

	ASSERT_OK(json_parse(json, strlen(json), &a, NULL));
	ASSERT_OK(ccm_addresses_prefer_node_ip(a, "10.0.2.20,fd00::5", &out));
	_cleanup_free_ char *s2 = addr_str(out);
	ASSERT_CONTAINS(s2, "InternalIP=10.0.2.20");
	ASSERT_CONTAINS(s2, "InternalIP=fd00::5");
	ASSERT_NOT_CONTAINS(s2, "10.0.1.10");
	cJSON_Delete(out);

	ASSERT_OK(json_parse(json, strlen(json), &a, NULL));
	ASSERT_ERR(ccm_addresses_prefer_node_ip(a, "10.9.9.9", &out), ENOENT);
	ASSERT_OK(json_parse(json, strlen(json), &a, NULL));
	ASSERT_ERR(ccm_addresses_prefer_node_ip(a, "bogus", &out), EINVAL);
	ASSERT_OK(json_parse(json, strlen(json), &a, NULL));
	ASSERT_OK(ccm_addresses_prefer_node_ip(a, NULL, &out));
	ASSERT_EQ(cJSON_GetArraySize(out), 5);

	cJSON *b = cJSON_Duplicate(out, true);
	ASSERT_FALSE(ccm_addresses_differ(out, b));
	cJSON_DeleteItemFromArray(b, 4);
	ASSERT_TRUE(ccm_addresses_differ(out, b));
	/* the old Hostname is kept when the cloud gives none */
	const char *old = "[{\"type\":\"Hostname\",\"address\":\"kept\"}]";
	cJSON *o;
	ASSERT_OK(json_parse(old, strlen(old), &o, NULL));
	ASSERT_OK(ccm_addresses_keep_hostname(b, o));
	ASSERT_STREQ(json_str(b, "4.address"), "kept");
	ASSERT_OK(ccm_addresses_keep_hostname(out, o));
	ASSERT_EQ(cJSON_GetArraySize(out), 5);
	cJSON_Delete(o);
	cJSON_Delete(b);
	cJSON_Delete(out);
}

TEST(ccm_model_provider_ids)
{
	char id[64];
	ASSERT_OK(ccm_parse_provider_id("aws:///us-east-1a/i-0123456789abcdef0", id, sizeof(id)));
	ASSERT_STREQ(id, "i-0123456789abcdef0");
	ASSERT_OK(ccm_parse_provider_id("aws:////i-0abc", id, sizeof(id)));
	ASSERT_STREQ(id, "i-0abc");
	ASSERT_OK(ccm_parse_provider_id("i-0abc", id, sizeof(id)));
	ASSERT_STREQ(id, "i-0abc");
	ASSERT_OK(ccm_parse_provider_id("aws://us-east-1a/i-0abc", id, sizeof(id)));
	ASSERT_STREQ(id, "i-0abc");
	ASSERT_OK(ccm_parse_provider_id("us-east-1a/i-0abc", id, sizeof(id)));
	ASSERT_STREQ(id, "i-0abc");
	ASSERT_ERR(ccm_parse_provider_id("aws:///a/b/i-0abc", id, sizeof(id)), EINVAL);
	ASSERT_ERR(ccm_parse_provider_id("aws:///us-east-1a/vol-1", id, sizeof(id)), EINVAL);
	ASSERT_ERR(ccm_parse_provider_id("aws:///us-east-1a/", id, sizeof(id)), EINVAL);
	ASSERT_ERR(ccm_parse_provider_id("", id, sizeof(id)), EINVAL);
	ASSERT_ERR(ccm_parse_provider_id("static:///node-1", id, sizeof(id)), ENOTSUP);
	ASSERT_ERR(ccm_parse_provider_id("aws:///us-east-1a/fargate-ip-10-0-0-1", id, sizeof(id)),
		   ENOTSUP);
	ASSERT_ERR(ccm_parse_provider_id("aws:///z/i-0123456789abcdef0", id, 8), ENAMETOOLONG);

	char buf[128];
	ASSERT_OK(ccm_format_provider_id("us-east-1a", "i-1", buf, sizeof(buf)));
	ASSERT_STREQ(buf, "aws:///us-east-1a/i-1");

	ASSERT_OK(ccm_instance_id_from_node_name("i-0abc.ec2.internal", id, sizeof(id)));
	ASSERT_STREQ(id, "i-0abc");
	ASSERT_OK(ccm_instance_id_from_node_name("i-0abc", id, sizeof(id)));
	ASSERT_ERR(ccm_instance_id_from_node_name("ip-10-0-0-1.ec2.internal", id, sizeof(id)),
		   ENOENT);

	struct ccm_node_ref n1 = {.name = "ip-1", .provider_id = "aws:///z/i-9"};
	ASSERT_OK(ccm_node_lookup_id(&n1, id, sizeof(id)));
	ASSERT_STREQ(id, "i-9");
	struct ccm_node_ref n2 = {.name = "i-77.x", .provider_id = ""};
	ASSERT_OK(ccm_node_lookup_id(&n2, id, sizeof(id)));
	ASSERT_STREQ(id, "i-77");
	struct ccm_node_ref n3 = {.name = "worker-1"};
	ASSERT_ERR(ccm_node_lookup_id(&n3, id, sizeof(id)), ENOENT);
	struct ccm_node_ref n4 = {.name = "worker-1", .provider_id = "static:///x"};
	ASSERT_ERR(ccm_node_lookup_id(&n4, id, sizeof(id)), ENOTSUP);
}

TEST(ccm_model_cluster_tags)
{
	struct ec2_tag t1[] = {TAG("Name", "x"), TAG("kubernetes.io/cluster/c1", "shared")};
	const char *id;
	ASSERT_OK(ccm_cluster_id_from_tags(t1, 2, &id));
	ASSERT_STREQ(id, "c1");
	ASSERT_TRUE(ccm_tags_have_cluster(t1, 2, "c1"));
	ASSERT_FALSE(ccm_tags_cluster_owned(t1, 2, "c1"));
	struct ec2_tag t2[] = {TAG("KubernetesCluster", "old")};
	ASSERT_OK(ccm_cluster_id_from_tags(t2, 1, &id));
	ASSERT_STREQ(id, "old");
	ASSERT_TRUE(ccm_tags_have_cluster(t2, 1, "old"));
	ASSERT_TRUE(ccm_tags_cluster_owned(t2, 1, "old"));
	ASSERT_FALSE(ccm_tags_have_cluster(t2, 1, "other"));
	struct ec2_tag t3[] = {TAG("kubernetes.io/cluster/a", "owned"),
			       TAG("kubernetes.io/cluster/b", "owned")};
	ASSERT_ERR(ccm_cluster_id_from_tags(t3, 2, &id), ENOTUNIQ);
	struct ec2_tag t4[] = {TAG("kubernetes.io/cluster/a", "owned"),
			       TAG("KubernetesCluster", "b")};
	ASSERT_ERR(ccm_cluster_id_from_tags(t4, 2, &id), ENOTUNIQ);
	struct ec2_tag t5[] = {TAG("kubernetes.io/cluster/a", "owned"),
			       TAG("KubernetesCluster", "a")};
	ASSERT_OK(ccm_cluster_id_from_tags(t5, 2, &id));
	ASSERT_STREQ(id, "a");
	ASSERT_ERR(ccm_cluster_id_from_tags(t1, 1, &id), ENOENT);
	/* untagged mode matches everything */
	ASSERT_TRUE(ccm_tags_have_cluster(t1, 1, NULL));
	ASSERT_TRUE(ccm_tags_have_cluster(NULL, 0, ""));
}

TEST(ccm_model_states)
{
	struct ec2_instance i = {0};
	const char *states[] = {"pending", "running",	    "stopping",
				"stopped", "shutting-down", "terminated"};
	bool exists[] = {true, true, true, true, true, false};
	bool shut[] = {false, false, false, true, false, false};
	for (size_t k = 0; k < ARRAY_SIZE(states); k++) {
		i.state = (char *)states[k];
		ASSERT_EQ(ccm_instance_exists(&i), exists[k]);
		ASSERT_EQ(ccm_instance_shutdown(&i), shut[k]);
	}
	i.state = NULL;
	ASSERT_FALSE(ccm_instance_exists(&i));

	/* an item without a state is refused when read, never taken for a terminated one */
	static const char *const items[] = {
	    "<item><instanceId>i-0123456789abcdef0</instanceId></item>",
	    "<item><instanceId>i-0123456789abcdef0</instanceId><instanceState><code>16</code>"
	    "</instanceState></item>",
	    "<item><instanceId>i-0123456789abcdef0</instanceId><instanceState><name></name>"
	    "</instanceState></item>",
	    "<item><instanceState><name>running</name></instanceState></item>",
	};
	for (size_t k = 0; k < ARRAY_SIZE(items); k++) {
		xmlDoc *doc = NULL;
		struct ec2_instance x = {0};
		ASSERT_OK(aws_xml_parse(items[k], strlen(items[k]), &doc, NULL, 0));
		ASSERT_ERR(ec2_instance_parse(xmlDocGetRootElement(doc), &x), EBADMSG);
		xmlFreeDoc(doc);
	}
	ASSERT_FALSE(ccm_instance_exists(NULL));
	ASSERT_FALSE(ccm_instance_shutdown(NULL));
}

TEST(ccm_model_lifecycle)
{
	/* ready: only the shutdown taint matters */
	ASSERT_EQ(ccm_lifecycle_decide(true, false, false, false), CCM_LC_NONE);
	ASSERT_EQ(ccm_lifecycle_decide(true, true, true, true), CCM_LC_REMOVE_SHUTDOWN);
	/* not ready */
	ASSERT_EQ(ccm_lifecycle_decide(false, false, false, false), CCM_LC_DELETE);
	ASSERT_EQ(ccm_lifecycle_decide(false, true, false, true), CCM_LC_DELETE);
	ASSERT_EQ(ccm_lifecycle_decide(false, false, true, true), CCM_LC_ADD_SHUTDOWN);
	ASSERT_EQ(ccm_lifecycle_decide(false, true, true, true), CCM_LC_NONE);
	/* running but not ready (e.g. stopping, shutting-down): nothing, taint kept */
	ASSERT_EQ(ccm_lifecycle_decide(false, false, true, false), CCM_LC_NONE);
	ASSERT_EQ(ccm_lifecycle_decide(false, true, true, false), CCM_LC_NONE);
	ASSERT_STREQ(ccm_lifecycle_action_name(CCM_LC_DELETE), "delete");
}

static struct ec2_instance mk(const char *id, const char *state, const char *dns,
			      struct ec2_tag *tags, size_t nt)
{
	return (struct ec2_instance){.id = (char *)id,
				     .state = (char *)state,
				     .private_dns = (char *)dns,
				     .tags = tags,
				     .n_tags = nt};
}

TEST(ccm_model_match)
{
	struct ec2_tag ta[] = {TAG("kubernetes.io/cluster/c1", "owned"), TAG("Name", "worker-a")};
	struct ec2_tag tb[] = {TAG("kubernetes.io/cluster/c1", "owned"), TAG("Name", "worker-b")};
	struct ec2_tag tother[] = {TAG("kubernetes.io/cluster/c2", "owned"),
				   TAG("Name", "worker-b")};
	struct ec2_tag tdup[] = {TAG("KubernetesCluster", "c1"), TAG("Name", "dup")};
	struct ec2_instance c[] = {
	    mk("i-a", "running", "ip-10-0-0-1.ec2.internal", ta, 2),
	    mk("i-b", "stopped", "ip-10-0-0-2.ec2.internal", tb, 2),
	    mk("i-old", "terminated", "ip-10-0-0-3.ec2.internal", ta, 2),
	    mk("i-x", "running", "ip-10-0-0-3.ec2.internal", tother, 2),
	    mk("i-d1", "running", "ip-10-0-0-5.ec2.internal", tdup, 2),
	    mk("i-d2", "pending", "ip-10-0-0-6.ec2.internal", tdup, 2),
	};
	enum ccm_match_kind kind;
	struct ccm_node_ref n = {.name = "ip-10-0-0-1.ec2.internal"};
	ASSERT_EQ(ccm_match_instance(&n, c, 6, "c1", &kind), 0);
	ASSERT_EQ(kind, CCM_MATCH_PRIVATE_DNS);
	n = (struct ccm_node_ref){.name = "whatever", .provider_id = "aws:///z/i-b"};
	ASSERT_EQ(ccm_match_instance(&n, c, 6, "c1", &kind), 1);
	ASSERT_EQ(kind, CCM_MATCH_ID);
	n = (struct ccm_node_ref){.name = "i-b"};
	ASSERT_EQ(ccm_match_instance(&n, c, 6, "c1", &kind), 1);
	n = (struct ccm_node_ref){.name = "i-zzz"};
	ASSERT_ERR(ccm_match_instance(&n, c, 6, "c1", &kind), ENOENT);
	/* Name tag (Deckhouse), stopped counts as alive */
	n = (struct ccm_node_ref){.name = "worker-b"};
	ASSERT_EQ(ccm_match_instance(&n, c, 6, "c1", &kind), 1);
	ASSERT_EQ(kind, CCM_MATCH_NAME_TAG);
	/* terminated and foreign-cluster instances never match by name */
	n = (struct ccm_node_ref){.name = "ip-10-0-0-3.ec2.internal"};
	ASSERT_ERR(ccm_match_instance(&n, c, 6, "c1", &kind), ENOENT);
	/* two live matches: ambiguous, never a guess */
	n = (struct ccm_node_ref){.name = "dup"};
	ASSERT_ERR(ccm_match_instance(&n, c, 6, "c1", &kind), ENOTUNIQ);
	/* a foreign provider ID */
	n = (struct ccm_node_ref){.name = "x", .provider_id = "static:///x"};
	ASSERT_ERR(ccm_match_instance(&n, c, 6, "c1", &kind), ENOTSUP);
}

TEST(ccm_model_labels)
{
	char reg[64];
	ASSERT_OK(ccm_zone_to_region("us-east-1a", reg, sizeof(reg)));
	ASSERT_STREQ(reg, "us-east-1");
	ASSERT_OK(ccm_zone_to_region("us-west-2-lax-1a", reg, sizeof(reg)));
	ASSERT_STREQ(reg, "us-west-2");
	ASSERT_OK(ccm_zone_to_region("us-gov-west-1b", reg, sizeof(reg)));
	ASSERT_STREQ(reg, "us-gov-west-1");
	ASSERT_ERR(ccm_zone_to_region("", reg, sizeof(reg)), EINVAL);
	ASSERT_ERR(ccm_zone_to_region("zone", reg, sizeof(reg)), EINVAL);

	struct ec2_instance i = {.type = (char *)"m5.large", .zone = (char *)"eu-central-1b"};
	cJSON *l;
	ASSERT_OK(ccm_instance_labels(&i, NULL, "euc1-az3", &l));
	ASSERT_STREQ(json_str_key(l, CCM_LABEL_INSTANCE_TYPE), "m5.large");
	ASSERT_STREQ(json_str_key(l, CCM_LABEL_INSTANCE_TYPE_BETA), "m5.large");
	ASSERT_STREQ(json_str_key(l, CCM_LABEL_ZONE), "eu-central-1b");
	ASSERT_STREQ(json_str_key(l, CCM_LABEL_ZONE_BETA), "eu-central-1b");
	ASSERT_STREQ(json_str_key(l, CCM_LABEL_REGION), "eu-central-1");
	ASSERT_STREQ(json_str_key(l, CCM_LABEL_REGION_BETA), "eu-central-1");
	ASSERT_STREQ(json_str_key(l, CCM_LABEL_ZONE_ID), "euc1-az3");
	ASSERT_EQ(cJSON_GetArraySize(l), 7);
	cJSON_Delete(l);
	ASSERT_OK(ccm_instance_labels(&i, "configured-1", NULL, &l));
	ASSERT_STREQ(json_str_key(l, CCM_LABEL_REGION), "configured-1");
	ASSERT_NULL(json_str_key(l, CCM_LABEL_ZONE_ID));
	cJSON_Delete(l);
}

TEST(ccm_model_node_helpers)
{
	const char *js = "{\"spec\":{\"taints\":[{\"key\":\"node.cloudprovider.kubernetes.io/"
			 "uninitialized\",\"value\":\"true\",\"effect\":\"NoSchedule\"}]},"
			 "\"status\":{\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":"
			 "\"False\"},{\"type\":\"Ready\",\"status\":\"False\"}]}}";
	cJSON *n;
	ASSERT_OK(json_parse(js, strlen(js), &n, NULL));
	ASSERT_TRUE(ccm_node_has_taint(n, CCM_TAINT_UNINITIALIZED));
	ASSERT_FALSE(ccm_node_has_taint(n, CCM_TAINT_SHUTDOWN));
	ASSERT_STREQ(ccm_node_ready_status(n), "False");
	cJSON_Delete(n);
	ASSERT_OK(json_parse("{}", 2, &n, NULL));
	ASSERT_STREQ(ccm_node_ready_status(n), "Unknown");
	ASSERT_FALSE(ccm_node_has_taint(n, CCM_TAINT_SHUTDOWN));
	cJSON_Delete(n);
}
