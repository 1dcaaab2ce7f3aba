/* Unit tests: the attach limit csi-node reports, from the built-in instance-type table
 * (csi_node_limits_table.c) and upstream's rules, with no EC2 call. */
#include <errno.h>
#include <string.h>

#include "common/aws/ids.h"
#include "modules/csi-node/csi_node_limits.h"
#include "tests/unit/harness.h"

static struct csi_node_limits_input base(const char *type, int enis)
{
	return (struct csi_node_limits_input){
	    .attach_limit = -1, .reserved = -1, .instance_type = type, .enis = enis};
}

static long long limit_of(const char *type, int enis)
{
	struct csi_node_limits_input in = base(type, enis);

	return csi_node_max_volumes(&in, NULL, 0);
}

TEST(csi_node_limits_dedicated_types)
{
	struct csi_node_limits_input in = base("m7i.large", 1);
	char why[256];

	/* 32 dedicated, less the root volume (the old code under-counted these as 27 shared) */
	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 31);
	ASSERT_CONTAINS(why, "instance-type table: 32 dedicated, 1 reserved (root volume)");
	ASSERT_EQ(limit_of("c7i.large", 1), 31);
	ASSERT_EQ(limit_of("r7i.2xlarge", 1), 31);
	ASSERT_EQ(limit_of("m7i-flex.large", 1), 31);
	ASSERT_EQ(limit_of("c7i.16xlarge", 1), 47);
	ASSERT_EQ(limit_of("r7iz.32xlarge", 1), 87);
	/* interfaces do not count on a dedicated type */
	ASSERT_EQ(limit_of("m7i.48xlarge", 15), 127);
	ASSERT_EQ(limit_of("m7i.48xlarge", 1), 127);
	/* GPU, Trainium and other accelerated types with their own EBS limit */
	ASSERT_EQ(limit_of("g6.xlarge", 4), 31);
	ASSERT_EQ(limit_of("p5.48xlarge", 32), 63);
	ASSERT_EQ(limit_of("trn2.48xlarge", 8), 63);
	ASSERT_EQ(limit_of("p4d.24xlarge", 4), 27);
	ASSERT_EQ(limit_of("u7i-12tb.224xlarge", 2), 127);
	/* a metal type the API calls shared, dedicated in fact (upstream's correction) */
	ASSERT_EQ(limit_of("i7i.metal-24xl", 3), 38);
	/* metadata's block-device mappings: root + a data disk at sdf; the CSI volume at xvdba
	 * and the instance-store volume do not count */
	char *bdm[] = {(char *)"ami=xvda",   (char *)"root=/dev/xvda", (char *)"ebs1=sdf",
		       (char *)"ebs2=xvdba", (char *)"ephemeral0=sdb", NULL};
	in.bdm = bdm;
	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 30);
	ASSERT_CONTAINS(why, "2 reserved (metadata block-device mappings)");
}

TEST(csi_node_limits_shared_nitro)
{
	struct csi_node_limits_input in = base("c5d.large", 1);
	char why[256];

	/* c5d.large: 28 slots less the primary interface and its NVMe instance-store volume: 26 */
	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 25);
	ASSERT_CONTAINS(why, "instance-type table: 26 shared, 1 reserved (root volume), 0 extra");
	/* the VPC CNI attached two more interfaces: each takes a slot */
	in.enis = 3;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 23);
	/* two NVMe instance-store volumes (m5d.24xlarge: 4 of them, 23) */
	ASSERT_EQ(limit_of("m5d.24xlarge", 2), 21);
	/* accelerators that take slots: g5.48xlarge 9, inf1.24xlarge 11 */
	ASSERT_EQ(limit_of("g5.48xlarge", 2), 7);
	ASSERT_EQ(limit_of("inf1.24xlarge", 1), 10);
	/* d3en.12xlarge: 3 with its 24 disks */
	ASSERT_EQ(limit_of("d3en.12xlarge", 1), 2);
	/* a Nitro type the table does not list (it has the default): m5.large 27 */
	ASSERT_EQ(limit_of("m5.large", 1), 26);
	ASSERT_EQ(limit_of("m6i.large", 3), 24);
	ASSERT_EQ(limit_of("m5.metal", 1), 30);
	/* unknown interface count: taken as 1 */
	ASSERT_EQ(limit_of("c5d.large", 0), 25);
	ASSERT_EQ(limit_of("c5d.large", -1), 25);
}

TEST(csi_node_limits_non_nitro)
{
	struct csi_node_type_facts f;
	struct csi_node_limits_input in = base("m4.large", 3);
	char why[256];

	ASSERT_OK(csi_node_type_lookup("m4.large", &f));
	ASSERT_EQ(f.max_ebs_attachments, 39);
	ASSERT_TRUE(f.dedicated);
	ASSERT_TRUE(f.xen);
	/* 39 dedicated, interfaces do not count; the root volume does */
	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 38);
	ASSERT_CONTAINS(why, "non-Nitro: 39 dedicated");
	in.reserved = 0;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 39);
	ASSERT_EQ(limit_of("t2.micro", 2), 38);
	ASSERT_EQ(limit_of("i3.large", 2), 38);
	ASSERT_EQ(limit_of("p3.2xlarge", 1), 38);
	/* i3en and i3.metal are Nitro */
	ASSERT_EQ(limit_of("i3en.large", 1), 25);
	ASSERT_EQ(limit_of("i3.metal", 1), 26);
}

TEST(csi_node_limits_unknown_type)
{
	struct csi_node_type_facts f;
	struct csi_node_limits_input in = base("zz9.large", 2);
	char why[256];

	ASSERT_ERR(csi_node_type_lookup("zz9.large", &f), ENOENT);
	ASSERT_EQ(f.max_ebs_attachments, 27);
	ASSERT_FALSE(f.dedicated);
	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 25);
	ASSERT_CONTAINS(why, "table default (type not listed): 27 shared");
	/* no instance type at all (metadata without it) */
	ASSERT_ERR(csi_node_type_lookup(NULL, &f), ENOENT);
	ASSERT_EQ(limit_of(NULL, 1), 26);
	/* a prefix or a family is not a type */
	ASSERT_ERR(csi_node_type_lookup("m7i", &f), ENOENT);
	ASSERT_ERR(csi_node_type_lookup("m7i.larg", &f), ENOENT);
	/* never below 1 */
	ASSERT_EQ(limit_of("zz9.large", 40), 1);
	ASSERT_EQ(limit_of("d3.8xlarge", 3), 1);
}

TEST(csi_node_limits_reserved_flag)
{
	char *bdm[] = {(char *)"root=/dev/xvda", (char *)"ebs1=sdf", (char *)"ebs2=sdg", NULL};
	struct csi_node_limits_input in = base("m7i.large", 1);
	char why[256];

	in.bdm = bdm;
	ASSERT_EQ(csi_node_reserved_from_bdm(bdm), 3);
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 29);
	/* the flag replaces the count from metadata */
	in.reserved = 5;
	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 27);
	ASSERT_CONTAINS(why, "5 reserved (--reserved-volume-attachments)");
	in.reserved = 0;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 32);
	/* shared: the interfaces still count */
	in = base("m5.large", 3);
	in.reserved = 0;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 25);
	in.reserved = 100;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 1);
	ASSERT_EQ(csi_node_reserved_from_bdm(NULL), 1);
}

TEST(csi_node_limits_override_flag)
{
	struct csi_node_type_facts ec2 = {.max_ebs_attachments = 128, .dedicated = true};
	struct csi_node_limits_input in = base("m7i.48xlarge", 15);
	char why[256];

	/* --volume-attach-limit wins over the table, the interfaces and EC2's figure */
	in.attach_limit = 10;
	in.ec2 = &ec2;
	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 10);
	ASSERT_STREQ(why, "--volume-attach-limit");
	in.attach_limit = 0;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 0);
	in = base("zz9.large", 40);
	in.attach_limit = 200;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 200);
}

TEST(csi_node_limits_ec2_facts)
{
	/* the opt-in DescribeInstanceTypes figure replaces the table's */
	struct csi_node_type_facts ec2 = {.max_ebs_attachments = 30, .dedicated = false};
	struct csi_node_limits_input in = base("zz9.large", 2);
	char why[256];

	in.ec2 = &ec2;
	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 28);
	ASSERT_CONTAINS(why, "EC2 DescribeInstanceTypes: 30 shared");
	/* the table's correction still makes a metal type dedicated */
	in.instance_type = "i7i.metal-24xl";
	ec2.max_ebs_attachments = 39;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 38);
	/* Xen: 39 dedicated, whatever EC2 says (t2.micro: 40 shared in the API) */
	struct csi_node_type_facts t2 = {.max_ebs_attachments = 40, .xen = true};
	in = base("t2.micro", 2);
	in.ec2 = &t2;
	ASSERT_EQ(csi_node_max_volumes(&in, NULL, 0), 38);
	/* no figure from EC2: the table */
	struct csi_node_type_facts none = {0};
	in = base("c7i.large", 2);
	in.ec2 = &none;
	ASSERT_EQ(csi_node_max_volumes(&in, why, sizeof(why)), 31);
	ASSERT_CONTAINS(why, "instance-type table");
}

TEST(csi_node_limits_table_sane)
{
	const struct csi_node_type_limit *t = csi_node_type_limits;
	size_t n = 0, dedicated = 0;

	for (; t[n].type; n++) {
		ASSERT_TRUE(aws_instance_type_valid(t[n].type));
		ASSERT_GE(t[n].max_attachments, 1);
		ASSERT_LE(t[n].max_attachments, 128);
		dedicated += t[n].dedicated;
		/* sorted and unique, and not also a non-Nitro type */
		if (n)
			ASSERT_LT(strcmp(t[n - 1].type, t[n].type), 0);
		for (size_t j = 0; csi_node_non_nitro_types[j]; j++)
			ASSERT_NE(strcmp(csi_node_non_nitro_types[j], t[n].type), 0);
	}
	ASSERT_EQ(n, 782);
	ASSERT_EQ(dedicated, 458);
	for (n = 0; csi_node_non_nitro_types[n]; n++) {
		ASSERT_TRUE(aws_instance_type_valid(csi_node_non_nitro_types[n]));
		if (n)
			ASSERT_LT(strcmp(csi_node_non_nitro_types[n - 1], csi_node_non_nitro_types[n]),
				  0);
	}
	ASSERT_EQ(n, 80);
}
