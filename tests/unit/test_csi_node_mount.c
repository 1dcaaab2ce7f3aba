/* Unit tests: mountinfo parsing and mount option handling of csi-node. */
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "modules/csi-node/csi_node_mount.h"
#include "tests/unit/harness.h"

static const char mountinfo[] =
	"22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw,discard\n"
	"23 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs devtmpfs rw,size=4k,mode=755\n"
	"40 22 259:3 / /var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/abc/globalmount "
	"rw,relatime shared:30 - xfs /dev/nvme1n1 rw,attr2,inode64,nouuid\n"
	"41 22 259:3 / /var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pvc-1/mount ro,relatime "
	"shared:30 master:7 - xfs /dev/nvme1n1 rw,attr2,inode64,nouuid\n"
	"42 22 0:44 /loop0 /target\\040with\\040space rw - devtmpfs dev\\134name rw\n"
	"43 22 7:0 / /stack rw - ext4 /dev/loop0 rw\n"
	"44 43 7:1 / /stack rw - ext4 /dev/loop1 ro,errors=remount-ro\n";

TEST(csi_node_mountinfo_parse)
{
	struct csi_mount_table t;

	ASSERT_OK(csi_mount_table_parse(mountinfo, sizeof(mountinfo) - 1, &t));
	ASSERT_EQ(t.n, 7);
	ASSERT_EQ(t.mounts[0].id, 22);
	ASSERT_EQ(t.mounts[0].parent_id, 1);
	ASSERT_EQ(t.mounts[0].major, 259);
	ASSERT_EQ(t.mounts[0].minor, 1);
	ASSERT_STREQ(t.mounts[0].fstype, "ext4");
	ASSERT_STREQ(t.mounts[0].source, "/dev/nvme0n1p1");
	ASSERT_STREQ(t.mounts[0].super_options, "rw,discard");
	/* several optional fields before the separator */
	ASSERT_STREQ(t.mounts[3].fstype, "xfs");
	ASSERT_STREQ(t.mounts[3].options, "ro,relatime");
	/* octal escapes decoded in the mount point and the source */
	ASSERT_STREQ(t.mounts[4].target, "/target with space");
	ASSERT_STREQ(t.mounts[4].source, "dev\\name");
	ASSERT_STREQ(t.mounts[4].root, "/loop0");
	csi_mount_table_release(&t);
}

TEST(csi_node_mountinfo_find_topmost)
{
	struct csi_mount_table t;

	ASSERT_OK(csi_mount_table_parse(mountinfo, sizeof(mountinfo) - 1, &t));
	const struct csi_mount *m = csi_mount_table_find(&t, "/stack");
	ASSERT_NOT_NULL(m);
	ASSERT_EQ(m->minor, 1); /* the later, stacked mount */
	ASSERT_NULL(csi_mount_table_find(&t, "/stack/"));
	ASSERT_NULL(csi_mount_table_find(&t, "/nothing"));
	ASSERT_EQ(csi_mount_table_count_dev(&t, 259, 3), 2);
	csi_mount_table_release(&t);
}

TEST(csi_node_mountinfo_malformed)
{
	struct csi_mount_table t;
	static const char *const bad[] = {
		"22 1 259:1 / / rw,relatime shared:1 ext4 /dev/x rw\n", /* no separator */
		"22 1 259 / / rw - ext4 /dev/x rw\n",                     /* no minor */
		"x 1 259:1 / / rw - ext4 /dev/x rw\n",                    /* bad id */
		"22 1 259:1 / / rw - ext4\n",                             /* short tail */
		"22 1\n",
		"proc /proc proc rw 0 0\n",                                /* fstab, not mountinfo */
		"22 1 259:1 / / rw - ext4 /dev/x rw\n22 1 259 / / rw - ext4 /dev/x rw\n",
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ASSERT_ERR(csi_mount_table_parse(bad[i], strlen(bad[i]), &t), EBADMSG);
	ASSERT_OK(csi_mount_table_parse("", 0, &t));
	ASSERT_EQ(t.n, 0);
	csi_mount_table_release(&t);
}

TEST(csi_node_mountinfo_live)
{
	struct csi_mount_table t;

	ASSERT_OK(csi_mount_table_load(NULL, &t));
	ASSERT_GT(t.n, 0);
	ASSERT_NOT_NULL(csi_mount_table_find(&t, "/"));
	csi_mount_table_release(&t);

	enum csi_mount_state s;
	struct csi_mount m;
	ASSERT_OK(csi_mount_state("/", NULL, &s, &m));
	ASSERT_EQ(s, CSI_MOUNT_MOUNTED);
	ASSERT_OK(csi_mount_state(test_tmpdir(), NULL, &s, NULL));
	ASSERT_EQ(s, CSI_MOUNT_NONE);
	ASSERT_ERR(csi_mount_state("/nonexistent/path/x", NULL, &s, NULL), ENOENT);
}

TEST(csi_node_mount_has_option)
{
	ASSERT_TRUE(csi_mount_has_option("rw,relatime", "rw"));
	ASSERT_TRUE(csi_mount_has_option("rw,relatime", "relatime"));
	ASSERT_FALSE(csi_mount_has_option("rw,relatime", "ro"));
	ASSERT_FALSE(csi_mount_has_option("rwx", "rw"));
	ASSERT_FALSE(csi_mount_has_option("", "rw"));
	ASSERT_FALSE(csi_mount_has_option(NULL, "rw"));
}

TEST(csi_node_mount_options)
{
	unsigned long flags;
	char data[256];
	const char *o1[] = { "ro", "noatime,nodev", "discard", "defaults", "errors=remount-ro" };

	ASSERT_OK(csi_mount_options(o1, ARRAY_SIZE(o1), &flags, data, sizeof(data)));
	ASSERT_EQ(flags, MS_RDONLY | MS_NOATIME | MS_NODEV);
	ASSERT_STREQ(data, "discard,errors=remount-ro");
	ASSERT_EQ(csi_mount_bind_flags(flags | MS_SYNCHRONOUS), MS_RDONLY | MS_NOATIME | MS_NODEV);

	/* rw after ro clears it; duplicates are dropped; quotes keep commas */
	const char *o2[] = {"ro", "rw", "discard", "discard",
			    "context=\"system_u:object_r:x:s0:c1,c2\""};
	ASSERT_OK(csi_mount_options(o2, ARRAY_SIZE(o2), &flags, data, sizeof(data)));
	ASSERT_EQ(flags, 0);
	ASSERT_STREQ(data, "discard,context=\"system_u:object_r:x:s0:c1,c2\"");

	static const char *const refused[] = {"bind", "remount", "rshared", "a\nb", "context=\"x"};
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		const char *o[] = { refused[i] };
		ASSERT_ERR(csi_mount_options(o, 1, &flags, data, sizeof(data)), EINVAL);
	}
	const char *o3[] = { "a-long-option-name" };
	ASSERT_ERR(csi_mount_options(o3, 1, &flags, data, 8), ENAMETOOLONG);
	ASSERT_OK(csi_mount_options(NULL, 0, &flags, data, sizeof(data)));
	ASSERT_STREQ(data, "");
}

TEST(csi_node_mount_canonical)
{
	char p[4096], want[4096];

	ASSERT_OK(csi_mount_canonical("/", p, sizeof(p)));
	ASSERT_STREQ(p, "/");
	(void)str_printf(want, sizeof(want), "%s/a", test_tmpdir());
	ASSERT_OK(mkdir(want, 0755) < 0 ? -errno : 0);
	(void)str_printf(p, sizeof(p), "%s/./a/../a", test_tmpdir());
	char got[4096];
	ASSERT_OK(csi_mount_canonical(p, got, sizeof(got)));
	char *real = realpath(want, NULL);
	ASSERT_STREQ(got, real);
	free(real);
	ASSERT_ERR(csi_mount_canonical("relative/path", p, sizeof(p)), EINVAL);
	ASSERT_ERR(csi_mount_canonical("/nonexistent/x/y", p, sizeof(p)), ENOENT);
	ASSERT_TRUE(csi_mount_error_is_corrupted(ENOTCONN));
	ASSERT_TRUE(csi_mount_error_is_corrupted(ESTALE));
	ASSERT_FALSE(csi_mount_error_is_corrupted(ENOENT));
}

TEST(csi_node_block_size_not_block)
{
	unsigned long long s;

	ASSERT_ERR(csi_block_size("/nonexistent", &s), ENOENT);
	ASSERT_ERR(csi_block_size("/dev/null", &s), ENOTBLK);
}
