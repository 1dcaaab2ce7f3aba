/* Unit tests: the metadata labeler. The controller's counting rule on a DescribeInstances reply
 * recorded from moto (tests/data/csi_labeler/describe_instances.xml: instance A with two
 * interfaces, its root volume, a data volume, a volume of a CSI PersistentVolume and one of an
 * in-tree PersistentVolume; instance B with its root volume alone) and on hand-made items; the
 * labels' parsing on the node's side, where missing or malformed labels make the
 * metadata-labeler source give nothing; and the attach limit from the counts. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/csi/labeler.h"
#include "modules/csi-controller/csi_controller_labeler.h"
#include "modules/csi-node/csi_node.h"
#include "modules/csi-node/csi_node_limits.h"
#include "tests/unit/harness.h"

#define DRIVER "ebs.csi.aws.com"
#define INST_A "i-d5fde779179e8da63"
#define INST_B "i-34861c0aa8749c51d"
#define VOL_ROOT_A "vol-0f92e3eb5cbbc2cf2"
#define VOL_DATA_A "vol-959768a02c0c831a5"
#define VOL_CSI_A "vol-610bd6261c02908c0"
#define VOL_INTREE_A "vol-458e81eb0b87efbf2"

/* PersistentVolumes as the API serves them. */
static const char *const pv_json[] = {
    /* A's CSI volume */
    "{\"metadata\":{\"name\":\"pv-csi\"},\"spec\":{\"csi\":{\"driver\":\"ebs.csi.aws.com\","
    "\"volumeHandle\":\"" VOL_CSI_A "\"}}}",
    /* A's in-tree volume, in the aws://zone/id form */
    "{\"metadata\":{\"name\":\"pv-intree\"},\"spec\":{\"awsElasticBlockStore\":{\"volumeID\":"
    "\"aws://us-east-1a/" VOL_INTREE_A "\",\"fsType\":\"ext4\"}}}",
    /* another CSI driver's PV naming A's data volume: not ours, so the volume counts */
    "{\"metadata\":{\"name\":\"pv-other\"},\"spec\":{\"csi\":{\"driver\":\"other.csi.example\","
    "\"volumeHandle\":\"" VOL_DATA_A "\"}}}",
    /* not EBS at all */
    "{\"metadata\":{\"name\":\"pv-nfs\"},\"spec\":{\"nfs\":{\"server\":\"x\",\"path\":\"/\"}}}",
};

struct pvs {
	cJSON *pv[ARRAY_SIZE(pv_json)];
	size_t n;
};

static bool is_pv(void *ud, const char *volume_id)
{
	struct pvs *p = ud;

	for (size_t i = 0; i < p->n; i++) {
		const char *v = csi_labeler_pv_volume(p->pv[i], DRIVER);
		if (v && strcmp(v, volume_id) == 0)
			return true;
	}
	return false;
}

static void pvs_load(struct pvs *p)
{
	p->n = 0;
	for (size_t i = 0; i < ARRAY_SIZE(pv_json); i++)
		p->pv[p->n++] = cJSON_Parse(pv_json[i]);
}

static void pvs_free(struct pvs *p)
{
	for (size_t i = 0; i < p->n; i++)
		cJSON_Delete(p->pv[i]);
}

/* The instance item of id in a DescribeInstances reply. */
static xmlNode *instance_of(xmlDoc *doc, const char *id)
{
	for (xmlNode *rs = aws_xml_list(xmlDocGetRootElement(doc), "reservationSet"); rs;
	     rs = aws_xml_next(rs))
		for (xmlNode *i = aws_xml_list(rs, "instancesSet"); i; i = aws_xml_next(i)) {
			const char *t = aws_xml_text(i, "instanceId");
			if (t && strcmp(t, id) == 0)
				return i;
		}
	return NULL;
}

TEST(csi_labeler_pv_volume)
{
	struct pvs p;

	pvs_load(&p);
	ASSERT_STREQ(csi_labeler_pv_volume(p.pv[0], DRIVER), VOL_CSI_A);
	ASSERT_STREQ(csi_labeler_pv_volume(p.pv[1], DRIVER), VOL_INTREE_A); /* the id, not aws:// */
	ASSERT_NULL(csi_labeler_pv_volume(p.pv[2], DRIVER));		    /* another driver's */
	ASSERT_STREQ(csi_labeler_pv_volume(p.pv[2], NULL), VOL_DATA_A);	    /* any driver */
	ASSERT_NULL(csi_labeler_pv_volume(p.pv[3], DRIVER));
	ASSERT_NULL(csi_labeler_pv_volume(p.pv[3], NULL));
	pvs_free(&p);
}

/* The recorded reply: A has 4 mappings, of which the CSI and the in-tree volumes are left out,
 * and the root volume is not counted: 1; B has its root volume only: 0. */
TEST(csi_labeler_counts_of_a_moto_reply)
{
	size_t len;
	char *xml = test_read_file(test_data("csi_labeler/describe_instances.xml"), &len);
	struct csi_labeler_counts k = {-1, -1};
	xmlDoc *doc = NULL;
	struct pvs p;

	ASSERT_NOT_NULL(xml);
	ASSERT_OK(aws_xml_parse(xml, len, &doc, NULL, 0));
	free(xml);
	pvs_load(&p);
	xmlNode *a = instance_of(doc, INST_A), *b = instance_of(doc, INST_B);
	ASSERT_NOT_NULL(a);
	ASSERT_NOT_NULL(b);
	ASSERT_EQ(aws_xml_count(a, "blockDeviceMapping"), 4);
	ASSERT_OK(csi_labeler_count_instance(a, is_pv, &p, &k));
	ASSERT_EQ(k.enis, 2);
	ASSERT_EQ(k.volumes, 1);
	ASSERT_OK(csi_labeler_count_instance(b, is_pv, &p, &k));
	ASSERT_EQ(k.enis, 1);
	ASSERT_EQ(k.volumes, 0);
	/* with no PersistentVolume, A's four mappings less the root */
	ASSERT_OK(csi_labeler_count_instance(a, NULL, NULL, &k));
	ASSERT_EQ(k.volumes, 3);
	pvs_free(&p);
	xmlFreeDoc(doc);
}

TEST(csi_labeler_count_rule_edges)
{
	static const struct {
		const char *xml;
		int r, enis, volumes;
	} cases[] = {
	    /* no networkInterfaceSet at all: 1 interface, as upstream */
	    {"<item><instanceId>i-1</instanceId><blockDeviceMapping><item><ebs><volumeId>vol-r"
	     "</volumeId></ebs></item></blockDeviceMapping></item>",
	     0, 1, 0},
	    /* an empty one too */
	    {"<item><instanceId>i-1</instanceId><networkInterfaceSet/></item>", 0, 1, 0},
	    /* three interfaces; no mapping (an instance-store root): 0 volumes */
	    {"<item><instanceId>i-1</instanceId><networkInterfaceSet><item/><item/><item/>"
	     "</networkInterfaceSet></item>",
	     0, 3, 0},
	    /* root + a mapping without ebs (counted, as upstream counts every mapping) */
	    {"<item><instanceId>i-1</instanceId><blockDeviceMapping><item><ebs><volumeId>vol-r"
	     "</volumeId></ebs></item><item><deviceName>/dev/sdb</deviceName></item>"
	     "</blockDeviceMapping></item>",
	     0, 1, 1},
	    /* root + the CSI volume: the CSI volume is left out */
	    {"<item><instanceId>i-1</instanceId><blockDeviceMapping><item><ebs><volumeId>vol-r"
	     "</volumeId></ebs></item><item><ebs><volumeId>" VOL_CSI_A "</volumeId></ebs></item>"
	     "</blockDeviceMapping></item>",
	     0, 1, 0},
	    /* only PV volumes (no root among them): never below 0 */
	    {"<item><instanceId>i-1</instanceId><blockDeviceMapping><item><ebs><volumeId>" VOL_CSI_A
	     "</volumeId></ebs></item><item><ebs><volumeId>" VOL_INTREE_A "</volumeId></ebs></item>"
	     "</blockDeviceMapping></item>",
	     0, 1, 0},
	    /* root + another driver's volume + data: both count */
	    {"<item><instanceId>i-1</instanceId><blockDeviceMapping><item><ebs><volumeId>vol-r"
	     "</volumeId></ebs></item><item><ebs><volumeId>" VOL_DATA_A "</volumeId></ebs></item>"
	     "<item><ebs><volumeId>vol-d2</volumeId></ebs></item></blockDeviceMapping></item>",
	     0, 1, 2},
	    {"<item><blockDeviceMapping/></item>", -EBADMSG, 0, 0},
	};
	struct pvs p;

	pvs_load(&p);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct csi_labeler_counts k = {-7, -7};
		xmlDoc *doc = NULL;
		ASSERT_OK(aws_xml_parse(cases[i].xml, strlen(cases[i].xml), &doc, NULL, 0));
		int r = csi_labeler_count_instance(xmlDocGetRootElement(doc), is_pv, &p, &k);
		xmlFreeDoc(doc);
		ASSERT_EQ(r, cases[i].r);
		if (r < 0) {
			ASSERT_EQ(k.enis, -7); /* untouched */
			continue;
		}
		ASSERT_EQ(k.enis, cases[i].enis);
		ASSERT_EQ(k.volumes, cases[i].volumes);
	}
	pvs_free(&p);
}

TEST(csi_labeler_instance_id)
{
	char id[32];

	ASSERT_OK(csi_labeler_instance_id("aws:///us-east-1a/i-0123456789abcdef0", id, sizeof(id)));
	ASSERT_STREQ(id, "i-0123456789abcdef0");
	ASSERT_OK(csi_labeler_instance_id("aws:////i-12345678", id, sizeof(id)));
	ASSERT_STREQ(id, "i-12345678");
	ASSERT_OK(csi_labeler_instance_id("i-0123456789abcdef0", id, sizeof(id)));
	ASSERT_ERR(csi_labeler_instance_id("aws:///us-east-1a/fargate-ip-10-0-0-1", id, sizeof(id)),
		   EINVAL);
	ASSERT_ERR(csi_labeler_instance_id("static:///static-1", id, sizeof(id)), EINVAL);
	ASSERT_ERR(csi_labeler_instance_id("aws:///us-east-1a/i-XYZ", id, sizeof(id)), EINVAL);
	ASSERT_ERR(csi_labeler_instance_id("", id, sizeof(id)), EINVAL);
	ASSERT_ERR(csi_labeler_instance_id(NULL, id, sizeof(id)), EINVAL);
}

/* A Node as the labeler leaves it, with the two count labels as given (NULL: absent). */
static cJSON *labeled_node(const char *driver, const char *enis, const char *volumes)
{
	cJSON *n = cJSON_Parse(
	    "{\"metadata\":{\"name\":\"n1\",\"labels\":{\"topology.kubernetes.io/zone\":"
	    "\"us-east-1c\",\"topology.kubernetes.io/region\":\"us-east-1\","
	    "\"node.kubernetes.io/instance-type\":\"m5.large\"}},"
	    "\"spec\":{\"providerID\":\"aws:///us-east-1c/i-0123456789abcdef0\"}}");
	cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(n, "metadata"), "labels");
	char key[CSI_LABEL_KEY_MAX];

	if (enis && csi_labeler_key(driver, CSI_LABEL_ENIS, key, sizeof(key)) == 0)
		cJSON_AddStringToObject(labels, key, enis);
	if (volumes && csi_labeler_key(driver, CSI_LABEL_VOLUMES, key, sizeof(key)) == 0)
		cJSON_AddStringToObject(labels, key, volumes);
	return n;
}

TEST(csi_labeler_counts_of_node)
{
	static const struct {
		const char *enis, *volumes;
		int r;
		const char *why;
	} cases[] = {
	    {"2", "1", 0, NULL},
	    {"1", "0", 0, NULL},
	    {NULL, "1", -ENODATA, "no label ebs.csi.aws.com/enis-count"},
	    {"2", NULL, -ENODATA, "no label ebs.csi.aws.com/non-csi-ebs-volumes-count"},
	    {"two", "1", -EBADMSG, "label ebs.csi.aws.com/enis-count \"two\" is not a count"},
	    {"2", "-1", -EBADMSG, "non-csi-ebs-volumes-count \"-1\" is not a count"},
	    {"2", "1.5", -EBADMSG, "\"1.5\""},
	    {"2", " 1", -EBADMSG, "\" 1\""},
	    {"2", "", -EBADMSG, "\"\""},
	    {"1001", "1", -EBADMSG, "\"1001\""},
	    {"2\n;rm", "1", -EBADMSG, "\"2\\n;rm\""},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		cJSON *node = labeled_node(DRIVER, cases[i].enis, cases[i].volumes);
		struct csi_labeler_counts k = {-1, -1};
		char why[256] = "";
		int r = csi_labeler_counts_of_node(node, DRIVER, &k, why, sizeof(why));
		cJSON_Delete(node);
		ASSERT_EQ(r, cases[i].r);
		if (cases[i].why)
			ASSERT_CONTAINS(why, cases[i].why);
		if (r == 0) {
			ASSERT_EQ(k.enis, atoi(cases[i].enis));
			ASSERT_EQ(k.volumes, atoi(cases[i].volumes));
		} else {
			ASSERT_EQ(k.enis, -1);
		}
	}
	/* the keys follow the driver name: another driver's labels are not ours */
	cJSON *node = labeled_node("other.csi.example", "2", "1");
	struct csi_labeler_counts k;
	char why[256];
	ASSERT_ERR(csi_labeler_counts_of_node(node, DRIVER, &k, why, sizeof(why)), ENODATA);
	ASSERT_OK(csi_labeler_counts_of_node(node, "other.csi.example", &k, why, sizeof(why)));
	cJSON_Delete(node);
}

/* The node's metadata-labeler source: with both labels, the Node's values and the counts; with
 * a label missing or malformed, nothing at all (the next source is asked: the kubernetes
 * source still reads the same Node). */
TEST(csi_node_labeler_source)
{
	struct csi_node_meta m = {.enis = -1};
	char why[256] = "";
	cJSON *node = labeled_node(DRIVER, "3", "2");

	ASSERT_OK(csi_node_meta_from_labeled_node(node, DRIVER, &m, why, sizeof(why)));
	ASSERT_STREQ(m.instance_id, "i-0123456789abcdef0");
	ASSERT_STREQ(m.zone, "us-east-1c");
	ASSERT_STREQ(m.region, "us-east-1");
	ASSERT_STREQ(m.instance_type, "m5.large");
	ASSERT_EQ(m.enis, 3);
	ASSERT_EQ(m.reserved, 3); /* 2 volumes + the root */
	csi_node_meta_release(&m);
	cJSON_Delete(node);

	const char *bad[][2] = {{NULL, "2"}, {"3", NULL}, {"3", "lots"}, {"x", "2"}};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		node = labeled_node(DRIVER, bad[i][0], bad[i][1]);
		m = (struct csi_node_meta){.enis = -1};
		ASSERT_TRUE(csi_node_meta_from_labeled_node(node, DRIVER, &m, why, sizeof(why)) <
			    0);
		ASSERT_NULL(m.instance_id); /* nothing taken */
		ASSERT_NULL(m.zone);
		ASSERT_EQ(m.enis, -1);
		ASSERT_EQ(m.reserved, 0);
		/* the next source, kubernetes, reads the Node without the counts */
		ASSERT_OK(csi_node_meta_from_node(node, &m));
		ASSERT_STREQ(m.instance_id, "i-0123456789abcdef0");
		ASSERT_EQ(m.enis, -1);
		ASSERT_EQ(m.reserved, 0);
		csi_node_meta_release(&m);
		cJSON_Delete(node);
	}
	/* both labels, but no instance in the providerID: nothing either */
	node = cJSON_Parse("{\"metadata\":{\"labels\":{\"ebs.csi.aws.com/enis-count\":\"1\","
			   "\"ebs.csi.aws.com/non-csi-ebs-volumes-count\":\"0\"}}}");
	m = (struct csi_node_meta){.enis = -1};
	ASSERT_ERR(csi_node_meta_from_labeled_node(node, DRIVER, &m, why, sizeof(why)), ENODATA);
	ASSERT_EQ(m.enis, -1);
	cJSON_Delete(node);
}

/* The attach limit from the counts: m5.large is not in the table (27 shared); 2 interfaces take
 * one more slot, 2 volumes and the root 3. */
TEST(csi_node_limits_from_labeler_counts)
{
	struct csi_node_limits_input in = {.attach_limit = -1,
					   .reserved = -1,
					   .instance_type = "m5.large",
					   .enis = 2,
					   .counted_reserved = 3};
	char why[256];

	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 27 - 3 - 1);
	ASSERT_CONTAINS(why, "3 reserved (metadata-labeler Node labels), 1 extra interfaces");
	/* the counts win over metadata's block-device mappings... */
	char *bdm[] = {(char *)"root=/dev/xvda", NULL};
	in.bdm = bdm;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 23);
	/* ...and --reserved-volume-attachments over the counts */
	in.reserved = 1;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 25);
	/* a dedicated type: interfaces do not count */
	in = (struct csi_node_limits_input){.attach_limit = -1,
					    .reserved = -1,
					    .instance_type = "m7i.large",
					    .enis = 4,
					    .counted_reserved = 2};
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 30);
}
