/* Unit tests: the attach limit csi-node reports (figures from DescribeInstanceTypes). */
#include "modules/csi-node/csi_node_limits.h"
#include "tests/unit/harness.h"

static struct csi_node_limits_input base(void)
{
	return (struct csi_node_limits_input){
	    .attach_limit = -1, .reserved = -1, .non_csi_volumes = -1};
}

TEST(csi_node_limits_flag)
{
	struct csi_node_limits_input in = base();
	char why[256];

	in.attach_limit = 10;
	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 10);
	ASSERT_CONTAINS(why, "--volume-attach-limit");
	in.attach_limit = 0;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 0);
}

TEST(csi_node_limits_shared_nitro)
{
	/* m5.large: MaximumEbsAttachments 27, shared (AWS already counts one interface) */
	struct csi_node_type_facts m5 = { .max_ebs_attachments = 27 };
	struct csi_node_limits_input in = base();
	char why[256];

	/* one interface, root only: 27 - 1 */
	in.instance_type = "m5.large";
	in.facts = &m5;
	in.enis = 1;
	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 26);
	ASSERT_CONTAINS(why, "27 shared");
	/* the VPC CNI attached two more interfaces */
	in.enis = 3;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 24);
	/* metadata: root + ebs1 (a data disk given at launch) + ebs2 (a CSI volume, xvdba) */
	char *bdm[] = {(char *)"ami=xvda",   (char *)"root=/dev/xvda", (char *)"ebs1=sdf",
		       (char *)"ebs2=xvdba", (char *)"ephemeral0=sdb", NULL};
	in.enis = 1;
	in.bdm = bdm;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 25);
	ASSERT_EQ(csi_node_reserved_from_bdm(bdm), 2);
	/* EC2 says which attached volumes are not CSI's: that wins over metadata */
	in.non_csi_volumes = 1;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 26);
	/* and the flag wins over both */
	in.reserved = 5;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 22);
	/* c5d.large: AWS's 26 already leaves out the instance-store volume */
	struct csi_node_type_facts c5d = { .max_ebs_attachments = 26 };
	in = base();
	in.facts = &c5d;
	in.enis = 2;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 24);
}

TEST(csi_node_limits_dedicated)
{
	/* m7i.48xlarge: 128 dedicated, interfaces do not count */
	struct csi_node_type_facts m7i = { .max_ebs_attachments = 128, .dedicated = true };
	struct csi_node_limits_input in = base();
	char why[256];

	in.facts = &m7i;
	in.enis = 15;
	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 127);
	ASSERT_CONTAINS(why, "dedicated");
	/* Xen: interfaces do not count either (t2.micro: 40 in DescribeInstanceTypes) */
	struct csi_node_type_facts t2 = { .max_ebs_attachments = 40, .xen = true };
	in.facts = &t2;
	in.enis = 2;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 39);
}

TEST(csi_node_limits_without_facts)
{
	struct csi_node_limits_input in = base();

	in.instance_type = "m4.xlarge";
	in.enis = 2;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 38);
	in.instance_type = "m6i.large";
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 25);
	in.instance_type = NULL;
	in.enis = 0;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 26);
	ASSERT_TRUE(csi_node_type_is_xen("t2.micro"));
	ASSERT_TRUE(csi_node_type_is_xen("i3.large"));
	ASSERT_FALSE(csi_node_type_is_xen("i3en.large"));
	ASSERT_FALSE(csi_node_type_is_xen("i3.metal"));
	ASSERT_FALSE(csi_node_type_is_xen("t3.micro"));
	ASSERT_FALSE(csi_node_type_is_xen("garbage"));
	/* never below 1 */
	in.instance_type = "m6i.large";
	in.enis = 40;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 1);
}
