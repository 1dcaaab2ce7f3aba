/* common/aws/ec2: the items of EC2 replies as structs, and the evidence rules. The instance
 * parser's recorded replies are exercised by test_ccm_model.c. */
#include <stdlib.h>
#include <string.h>

#include "common/aws/ec2.h"
#include "common/aws/xml.h"
#include "tests/unit/harness.h"

static xmlDoc *doc_of(const char *xml)
{
	xmlDoc *doc = NULL;

	if (aws_xml_parse(xml, strlen(xml), &doc, NULL, 0) < 0)
		return NULL;
	return doc;
}

/* A volume item whose state or attachment is incomplete is refused, never read as "not
 * attached": ControllerUnpublish would otherwise report a detach that never happened. */
TEST(ec2_volume_parse_needs_evidence)
{
	static const struct {
		const char *xml;
		int r;
	} cases[] = {
	    {"<item><volumeId>vol-1</volumeId><status>in-use</status><attachmentSet><item>"
	     "<instanceId>i-1</instanceId><status>attached</status></item></attachmentSet></item>",
	     0},
	    {"<item><volumeId>vol-1</volumeId><status>available</status><attachmentSet/></item>", 0},
	    {"<item><volumeId>vol-1</volumeId><attachmentSet/></item>", -EBADMSG},
	    {"<item><volumeId>vol-1</volumeId><status>in-use</status><attachmentSet><item>"
	     "<status>attached</status></item></attachmentSet></item>",
	     -EBADMSG},
	    {"<item><volumeId>vol-1</volumeId><status>in-use</status><attachmentSet><item>"
	     "<instanceId>i-1</instanceId></item></attachmentSet></item>",
	     -EBADMSG},
	    {"<item><status>in-use</status></item>", -EBADMSG},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		xmlDoc *doc = NULL;
		struct ec2_volume v = {0};
		ASSERT_OK(aws_xml_parse(cases[i].xml, strlen(cases[i].xml), &doc, NULL, 0));
		int r = ec2_volume_parse(xmlDocGetRootElement(doc), &v);
		xmlFreeDoc(doc);
		if (r == 0)
			ec2_volume_release(&v);
		ASSERT_EQ(r, cases[i].r);
	}
}

TEST(ec2_volumes_and_snapshots_of_a_reply)
{
	static const char volumes[] =
	    "<DescribeVolumesResponse><volumeSet>"
	    "<item><volumeId>vol-1</volumeId><status>available</status><size>10</size>"
	    "<volumeType>gp3</volumeType><iops>3000</iops><encrypted>true</encrypted>"
	    "<tagSet><item><key>CSIVolumeName</key><value>pvc-1</value></item>"
	    "<item><key>empty</key></item></tagSet></item>"
	    "<item><volumeId>vol-2</volumeId><status>deleting</status></item>"
	    "<item><volumeId>vol-3</volumeId><status>in-use</status><multiAttachEnabled>true"
	    "</multiAttachEnabled><attachmentSet><item><instanceId>i-1</instanceId>"
	    "<device>/dev/xvdaa</device><status>attached</status></item></attachmentSet></item>"
	    "</volumeSet></DescribeVolumesResponse>";
	static const char snapshots[] =
	    "<DescribeSnapshotsResponse><snapshotSet>"
	    "<item><snapshotId>snap-1</snapshotId><volumeId>vol-1</volumeId><status>completed"
	    "</status><volumeSize>10</volumeSize><startTime>2024-01-02T03:04:05.000Z</startTime>"
	    "</item><item><volumeId>vol-1</volumeId></item>"
	    "</snapshotSet></DescribeSnapshotsResponse>";
	struct ec2_volume *v;
	struct ec2_snapshot *s;
	size_t n;
	xmlDoc *doc = doc_of(volumes);

	ASSERT_NOT_NULL(doc);
	ASSERT_OK(ec2_volumes_parse(xmlDocGetRootElement(doc), false, &v, &n));
	ASSERT_EQ(n, 3);
	ASSERT_EQ(v[0].size_gib, 10);
	ASSERT_TRUE(v[0].encrypted);
	ASSERT_STREQ(ec2_tags_get(v[0].tags, v[0].n_tags, "CSIVolumeName"), "pvc-1");
	ASSERT_STREQ(ec2_tags_get(v[0].tags, v[0].n_tags, "empty"), "");
	ASSERT_NULL(ec2_tags_get(v[0].tags, v[0].n_tags, "other"));
	ASSERT_TRUE(v[2].multi_attach);
	ASSERT_EQ(v[2].n_att, 1);
	ASSERT_STREQ(v[2].att[0].device, "/dev/xvdaa");
	ec2_volumes_free(v, n);
	ASSERT_OK(ec2_volumes_parse(xmlDocGetRootElement(doc), true, &v, &n));
	ASSERT_EQ(n, 2); /* the volume being deleted is left out */
	ASSERT_STREQ(v[1].id, "vol-3");
	ec2_volumes_free(v, n);
	xmlFreeDoc(doc);

	ASSERT_NOT_NULL(doc = doc_of(snapshots));
	/* a snapshot without its id makes the whole reply unusable */
	ASSERT_ERR(ec2_snapshots_parse(xmlDocGetRootElement(doc), &s, &n), EBADMSG);
	xmlNode *first = aws_xml_list(xmlDocGetRootElement(doc), "snapshotSet");
	struct ec2_snapshot one;
	ASSERT_OK(ec2_snapshot_parse(first, &one));
	ASSERT_STREQ(one.id, "snap-1");
	ASSERT_STREQ(one.state, "completed");
	ASSERT_EQ(one.start_ns, 1704164645LL * 1000000000LL);
	ec2_snapshot_release(&one);
	xmlFreeDoc(doc);

	ASSERT_NOT_NULL(doc = doc_of("<r><snapshotSet/></r>"));
	ASSERT_OK(ec2_snapshots_parse(xmlDocGetRootElement(doc), &s, &n));
	ASSERT_EQ(n, 0);
	ec2_snapshots_free(s, n);
	xmlFreeDoc(doc);
}

TEST(ec2_modification_and_instance_evidence)
{
	struct ec2_modification m;
	struct ec2_instance i;
	xmlDoc *doc = doc_of("<item><modificationState>optimizing</modificationState>"
			     "<targetSize>20</targetSize><targetVolumeType>io2</targetVolumeType>"
			     "<targetIops>4000</targetIops></item>");

	ASSERT_NOT_NULL(doc);
	ec2_modification_parse(xmlDocGetRootElement(doc), &m);
	ASSERT_STREQ(m.state, "optimizing");
	ASSERT_EQ(m.target_size, 20);
	ASSERT_EQ(m.target_iops, 4000);
	ASSERT_STREQ(m.target_type, "io2");
	ASSERT_EQ(m.target_throughput, 0);
	xmlFreeDoc(doc);

	/* an instance without a state proves nothing about it */
	ASSERT_NOT_NULL(doc = doc_of("<item><instanceId>i-1</instanceId><instanceState><code>16"
				     "</code></instanceState></item>"));
	ASSERT_ERR(ec2_instance_parse(xmlDocGetRootElement(doc), &i), EBADMSG);
	xmlFreeDoc(doc);
	ASSERT_NOT_NULL(doc = doc_of("<item><instanceId>i-1</instanceId><instanceState><name>"
				     "stopped</name></instanceState></item>"));
	ASSERT_OK(ec2_instance_parse(xmlDocGetRootElement(doc), &i));
	ASSERT_STREQ(i.state, "stopped");
	ASSERT_EQ(i.n_enis, 0);
	ASSERT_TRUE(i.source_dest_check);
	ec2_instance_release(&i);
	xmlFreeDoc(doc);
}
