/* Unit tests: what csi-node reports about its instance (provider ids, topology, the opt-in EC2
 * facts from a recorded reply under tests/data/csi_node/). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "modules/csi-node/csi_node.h"
#include "tests/unit/harness.h"

static xmlDoc *load(const char *name)
{
	size_t len;
	char *text = test_read_file(test_data(name), &len);
	xmlDoc *doc = NULL;
	char err[256];

	if (text && aws_xml_parse(text, len, &doc, err, sizeof(err)) < 0)
		doc = NULL;
	free(text);
	return doc;
}

TEST(csi_node_meta_type_facts)
{
	xmlDoc *doc = load("csi_node/describe_instance_types.xml");
	struct csi_node_type_facts f;

	ASSERT_NOT_NULL(doc);
	xmlNode *root = xmlDocGetRootElement(doc);
	ASSERT_OK(csi_node_parse_type_facts(root, "c5d.large", &f));
	ASSERT_EQ(f.max_ebs_attachments, 26);
	ASSERT_FALSE(f.dedicated);
	ASSERT_FALSE(f.xen);
	ASSERT_OK(csi_node_parse_type_facts(root, "m7i.48xlarge", &f));
	ASSERT_EQ(f.max_ebs_attachments, 128);
	ASSERT_TRUE(f.dedicated);
	ASSERT_OK(csi_node_parse_type_facts(root, "t2.micro", &f));
	ASSERT_TRUE(f.xen);
	ASSERT_EQ(f.max_ebs_attachments, 40);
	ASSERT_OK(csi_node_parse_type_facts(root, "m5.metal", &f));
	ASSERT_EQ(f.max_ebs_attachments, 31);
	ASSERT_FALSE(f.xen);
	/* a figure that is not a number is ignored (the defaults apply) */
	ASSERT_OK(csi_node_parse_type_facts(root, "x9.weird", &f));
	ASSERT_EQ(f.max_ebs_attachments, 0);
	ASSERT_ERR(csi_node_parse_type_facts(root, "m5.large", &f), ENOENT);
	xmlFreeDoc(doc);
}

TEST(csi_node_meta_provider_id)
{
	char zone[64], id[64];

	ASSERT_OK(csi_node_parse_provider_id("aws:///us-east-1a/i-0123456789abcdef0", zone,
					     sizeof(zone), id, sizeof(id)));
	ASSERT_STREQ(zone, "us-east-1a");
	ASSERT_STREQ(id, "i-0123456789abcdef0");
	ASSERT_OK(csi_node_parse_provider_id("aws:////i-0abc", zone, sizeof(zone), id, sizeof(id)));
	ASSERT_STREQ(zone, "");
	ASSERT_STREQ(id, "i-0abc");
	ASSERT_OK(csi_node_parse_provider_id("i-0abc", zone, sizeof(zone), id, sizeof(id)));
	ASSERT_STREQ(id, "i-0abc");
	ASSERT_ERR(csi_node_parse_provider_id("gce://p/z/n", zone, sizeof(zone), id, sizeof(id)),
		   EINVAL);
	ASSERT_ERR(csi_node_parse_provider_id("", zone, sizeof(zone), id, sizeof(id)), EINVAL);
	ASSERT_ERR(csi_node_parse_provider_id("aws:///a-very-long-zone-name/i-0abc", zone, 4, id,
					      sizeof(id)),
		   ENAMETOOLONG);
}

/* Checks that kv holds exactly the pairs of want ("key=value" strings, NULL-terminated): no
 * key more, none less, as the CSINode object's topology keys come from this map. */
static bool topo_is(const struct csi_kv *kv, size_t n, const char *const *want)
{
	size_t nwant = 0;

	for (; want[nwant]; nwant++) {
		bool found = false;
		for (size_t i = 0; i < n && !found; i++) {
			size_t kl = strlen(kv[i].key);
			found = strncmp(want[nwant], kv[i].key, kl) == 0 && want[nwant][kl] == '=' &&
				strcmp(want[nwant] + kl + 1, kv[i].value) == 0;
		}
		if (!found) {
			fprintf(stderr, "    topology lacks %s\n", want[nwant]);
			return false;
		}
	}
	if (nwant != n)
		fprintf(stderr, "    topology has %zu keys, %zu wanted\n", n, nwant);
	return nwant == n;
}

TEST(csi_node_meta_topology_exact)
{
	/* the zone id is known but not published: upstream's map has no such key */
	struct csi_node_meta m = {
	    .zone = (char *)"us-west-2a", .zone_id = (char *)"usw2-az1", .enis = 1};
	struct csi_kv *kv;
	size_t n;

	ASSERT_OK(csi_node_topology(&m, &kv, &n));
	ASSERT_TRUE(topo_is(kv, n,
			    (const char *const[]){"topology.ebs.csi.aws.com/zone=us-west-2a",
						  "topology.kubernetes.io/zone=us-west-2a",
						  "kubernetes.io/os=linux", NULL}));
	csi_node_topology_free(kv, n);

	/* on an outpost: the four outpost keys as well, the outpost id without "outpost/" */
	m.outpost_arn =
	    (char *)"arn:aws:outposts:us-west-2:123456789012:outpost/op-0123456789abcdef0";
	ASSERT_OK(csi_node_topology(&m, &kv, &n));
	ASSERT_TRUE(topo_is(
	    kv, n,
	    (const char *const[]){"topology.ebs.csi.aws.com/zone=us-west-2a",
				  "topology.kubernetes.io/zone=us-west-2a", "kubernetes.io/os=linux",
				  "topology.ebs.csi.aws.com/region=us-west-2",
				  "topology.ebs.csi.aws.com/partition=aws",
				  "topology.ebs.csi.aws.com/account-id=123456789012",
				  "topology.ebs.csi.aws.com/outpost-id=op-0123456789abcdef0", NULL}));
	csi_node_topology_free(kv, n);

	/* an ARN that cannot be parsed gives no outpost keys */
	m.outpost_arn = (char *)"not-an-arn";
	ASSERT_OK(csi_node_topology(&m, &kv, &n));
	ASSERT_EQ(n, 3);
	csi_node_topology_free(kv, n);

	/* no zone known: the os key alone */
	m = (struct csi_node_meta){.enis = -1};
	ASSERT_OK(csi_node_topology(&m, &kv, &n));
	ASSERT_TRUE(topo_is(kv, n, (const char *const[]){"kubernetes.io/os=linux", NULL}));
	csi_node_topology_free(kv, n);
}

TEST(csi_node_meta_check_values)
{
	struct csi_node_meta m = {.instance_id = (char *)"i-0123456789abcdef0",
				  .instance_type = (char *)"m7i-flex.2xlarge",
				  .zone = (char *)"us-west-2-lax-1a",
				  .zone_id = (char *)"usw2-lax1-az1",
				  .region = (char *)"us-west-2",
				  .outpost_arn =
				      (char *)"arn:aws:outposts:us-west-2:123456789012:outpost/"
					      "op-0123456789abcdef0",
				  .enis = 1};
	struct csi_node_meta_fault f = {0};

	ASSERT_OK(csi_node_meta_check(&m, &f));
	/* nothing known is fine too: missing values are not malformed */
	ASSERT_OK(csi_node_meta_check(&(struct csi_node_meta){.enis = -1}, &f));

	m.instance_id = (char *)"i-123\n;rm";
	ASSERT_ERR(csi_node_meta_check(&m, &f), EBADMSG);
	ASSERT_STREQ(f.field, "instance-id");
	ASSERT_STREQ(f.value, "i-123\n;rm");
	ASSERT_STREQ(f.problem, "malformed");
	m.instance_id = (char *)"i-0123456789abcdef0";

	m.zone = (char *)"<html><body><h1>404 - Not Found</h1></body></html>";
	ASSERT_ERR(csi_node_meta_check(&m, &f), EBADMSG);
	ASSERT_STREQ(f.field, "availability-zone");
	m.zone = (char *)"us-east-1a"; /* well formed, but not in us-west-2 */
	ASSERT_ERR(csi_node_meta_check(&m, &f), EBADMSG);
	ASSERT_STREQ(f.field, "availability-zone");
	ASSERT_STREQ(f.problem, "not a zone of the region");
	m.region = NULL; /* no region: nothing to compare with */
	ASSERT_OK(csi_node_meta_check(&m, &f));
	m.region = (char *)"US-WEST-2";
	ASSERT_ERR(csi_node_meta_check(&m, &f), EBADMSG);
	ASSERT_STREQ(f.field, "region");
	m.region = (char *)"us-east-1";

	m.instance_type = (char *)"m5.large; rm -rf /";
	ASSERT_ERR(csi_node_meta_check(&m, &f), EBADMSG);
	ASSERT_STREQ(f.field, "instance-type");
	m.instance_type = (char *)"m5.large";
	m.zone_id = (char *)"use1-az1\n";
	ASSERT_ERR(csi_node_meta_check(&m, &f), EBADMSG);
	ASSERT_STREQ(f.field, "availability-zone-id");
	m.zone_id = (char *)"use1-az1";
	m.outpost_arn = (char *)"not-an-arn";
	ASSERT_ERR(csi_node_meta_check(&m, &f), EBADMSG);
	ASSERT_STREQ(f.field, "outpost-arn");
	m.outpost_arn = NULL;
	ASSERT_OK(csi_node_meta_check(&m, &f));
	/* a providerID that is not an AWS one is kept whole as the instance id */
	m.instance_id = (char *)"gce://project/zone/name";
	ASSERT_ERR(csi_node_meta_check(&m, &f), EBADMSG);
	ASSERT_STREQ(f.field, "instance-id");
}

TEST(csi_node_meta_merge_fills_only_unset)
{
	struct csi_node_meta m = {.enis = -1}, from = {.enis = 3};

	ASSERT_NOT_NULL(m.instance_id = strdup("i-0123456789abcdef0"));
	ASSERT_NOT_NULL(from.instance_id = strdup("i-0fedcba9876543210"));
	ASSERT_NOT_NULL(from.zone = strdup("us-east-1a"));
	ASSERT_NOT_NULL(from.region = strdup("us-east-1"));
	csi_node_meta_merge(&m, &from);
	ASSERT_STREQ(m.instance_id, "i-0123456789abcdef0");
	ASSERT_STREQ(m.zone, "us-east-1a");
	ASSERT_STREQ(m.region, "us-east-1");
	ASSERT_EQ(m.enis, 3);
	ASSERT_NULL(from.zone);				       /* moved */
	ASSERT_STREQ(from.instance_id, "i-0fedcba9876543210"); /* kept: m had one */
	csi_node_meta_release(&m);
	csi_node_meta_release(&from);
}

TEST(csi_node_untaint_patch)
{
	const char *with =
	    "{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"},"
	    "{\"key\":\"ebs.csi.aws.com/agent-not-ready\",\"effect\":\"NoExecute\"}]}}";
	cJSON *node = cJSON_Parse(with);
	char *patch = NULL;

	ASSERT_NOT_NULL(node);
	ASSERT_EQ(csi_node_untaint_patch(node, &patch), 1);
	ASSERT_STREQ(patch,
		     "[{\"op\":\"test\",\"path\":\"/spec/taints\",\"value\":[{\"key\":\"a\","
		     "\"effect\":\"NoSchedule\"},{\"key\":\"ebs.csi.aws.com/agent-not-ready\","
		     "\"effect\":\"NoExecute\"}]},{\"op\":\"replace\",\"path\":\"/spec/taints\","
		     "\"value\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"}]}]");
	free(patch);
	cJSON_Delete(node);
	node = cJSON_Parse("{\"spec\":{\"taints\":[{\"key\":\"a\"}]}}");
	patch = NULL;
	ASSERT_EQ(csi_node_untaint_patch(node, &patch), 0);
	ASSERT_NULL(patch);
	cJSON_Delete(node);
	node = cJSON_Parse("{\"spec\":{}}");
	ASSERT_EQ(csi_node_untaint_patch(node, &patch), 0);
	cJSON_Delete(node);
}
