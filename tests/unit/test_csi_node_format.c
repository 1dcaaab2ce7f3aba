/* Unit tests: format options, mkfs and resize commands, blkid probing and superblock sizes
 * (csi-node). Probing and sizes run on regular files formatted by the real mkfs. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "modules/csi-node/csi_node_exec.h"
#include "modules/csi-node/csi_node_format.h"
#include "tests/unit/harness.h"

static char *joined(char **v)
{
	static char out[1024];
	size_t k = 0;

	out[0] = '\0';
	for (size_t i = 0; v && v[i]; i++) {
		int n = snprintf(out + k, sizeof(out) - k, "%s%s", i ? " " : "", v[i]);
		if (n < 0 || (size_t)n >= sizeof(out) - k)
			break;
		k += (size_t)n;
	}
	return out;
}

TEST(csi_node_format_opts)
{
	struct csi_format_opts o;
	char msg[256];
	struct csi_kv ctx[] = {
	    {"blocksize", "4096"},	  {"InodeSize", "512"},	    {"bytesPerInode", "16384"},
	    {"numberofinodes", "100000"}, {"ext4bigalloc", "true"}, {"ext4ClusterSize", "65536"},
	    {"unrelated", "x"},
	};

	ASSERT_OK(csi_format_opts_parse("ext4", ctx, ARRAY_SIZE(ctx), &o, msg, sizeof(msg)));
	ASSERT_STREQ(o.block_size, "4096");
	ASSERT_STREQ(o.inode_size, "512");
	ASSERT_STREQ(o.bytes_per_inode, "16384");
	ASSERT_STREQ(o.number_of_inodes, "100000");
	ASSERT_STREQ(o.cluster_size, "65536");
	ASSERT_TRUE(o.bigalloc);
	ASSERT_FALSE(o.encrypt);

	char **argv = NULL;
	ASSERT_OK(csi_mkfs_argv("ext4", "/dev/nvme1n1", &o, false, &argv));
	ASSERT_STREQ(
	    joined(argv),
	    "mkfs.ext4 -F -m0 -b 4096 -I 512 -i 16384 -N 100000 -O bigalloc -C 65536 /dev/nvme1n1");
	strv_free(argv);

	/* xfs takes only the sizes, in its own syntax */
	ASSERT_ERR(csi_format_opts_parse("xfs", ctx, ARRAY_SIZE(ctx), &o, msg, sizeof(msg)),
		   EINVAL);
	ASSERT_CONTAINS(msg, "not supported for fstype xfs");
	ASSERT_OK(csi_format_opts_parse("xfs", ctx, 2, &o, msg, sizeof(msg)));
	ASSERT_OK(csi_mkfs_argv("xfs", "/dev/nvme1n1", &o, false, &argv));
	ASSERT_STREQ(joined(argv), "mkfs.xfs -f -b size=4096 -i size=512 /dev/nvme1n1");
	strv_free(argv);
	ASSERT_OK(csi_mkfs_argv("xfs", "/dev/nvme1n1", &o, true, &argv));
	ASSERT_STREQ(joined(argv), "mkfs.xfs -f -b size=4096 -i size=512,nrext64=0 -m "
				   "bigtime=0,inobtcount=0,reflink=0 /dev/nvme1n1");
	strv_free(argv);
	struct csi_format_opts none = { 0 };
	ASSERT_OK(csi_mkfs_argv("xfs", "/dev/x", &none, true, &argv));
	ASSERT_STREQ(joined(argv),
		     "mkfs.xfs -f -i nrext64=0 -m bigtime=0,inobtcount=0,reflink=0 /dev/x");
	strv_free(argv);
	ASSERT_OK(csi_mkfs_argv("ext3", "/dev/x", &none, false, &argv));
	ASSERT_STREQ(joined(argv), "mkfs.ext3 -F -m0 /dev/x");
	strv_free(argv);
	ASSERT_ERR(csi_mkfs_argv("ntfs", "/dev/x", &none, false, &argv), EINVAL);
}

TEST(csi_node_format_opts_rejected)
{
	struct csi_format_opts o;
	char msg[256];
	static const struct csi_kv bad[][1] = {
	    {{"blockSize", "4096 -O metadata_csum"}},
	    {{"blockSize", "-1"}},
	    {{"blockSize", ""}},
	    {{"blockSize", "0"}},
	    {{"inodeSize", "1e3"}},
	    {{"numberOfInodes", "12345678901234567890123"}},
	    {{"ext4BigAlloc", "maybe"}},
	    {{"ext4ClusterSize", "16384"}}, /* without bigalloc */
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ASSERT_ERR(csi_format_opts_parse("ext4", bad[i], 1, &o, msg, sizeof(msg)), EINVAL);
	const struct csi_kv e3[] = {{"ext4BigAlloc", "true"}};
	ASSERT_ERR(csi_format_opts_parse("ext3", e3, 1, &o, msg, sizeof(msg)), EINVAL);
	const struct csi_kv off[] = {{"ext4BigAlloc", "false"}, {"ext4EncryptionSupport", "true"}};
	ASSERT_OK(csi_format_opts_parse("ext4", off, 2, &o, msg, sizeof(msg)));
	ASSERT_FALSE(o.bigalloc);
	ASSERT_TRUE(o.encrypt);
}

TEST(csi_node_fs_types)
{
	ASSERT_TRUE(csi_fs_type_supported("ext4"));
	ASSERT_TRUE(csi_fs_type_supported("xfs"));
	ASSERT_FALSE(csi_fs_type_supported("ntfs"));
	ASSERT_FALSE(csi_fs_type_supported(NULL));
	ASSERT_TRUE(csi_fs_compatible("ext4", "ext3"));
	ASSERT_TRUE(csi_fs_compatible("xfs", "xfs"));
	ASSERT_FALSE(csi_fs_compatible("ext4", "xfs"));
	ASSERT_FALSE(csi_fs_compatible("ext3", "ext4"));
	ASSERT_FALSE(csi_fs_compatible("xfs", "ext4"));
	const struct csi_kv kv[] = {{"DevicePath", "/dev/x"}, {"a", NULL}};
	ASSERT_STREQ(csi_kv_get(kv, 2, "devicepath"), "/dev/x");
	ASSERT_STREQ(csi_kv_get(kv, 2, "a"), "");
	ASSERT_NULL(csi_kv_get(kv, 2, "b"));
}

TEST(csi_node_resize_argv)
{
	char **argv = NULL;

	ASSERT_OK(csi_resize_argv("ext4", "/dev/nvme1n1", "/mnt", &argv));
	ASSERT_STREQ(joined(argv), "resize2fs /dev/nvme1n1");
	strv_free(argv);
	ASSERT_OK(csi_resize_argv("xfs", "/dev/nvme1n1", "/mnt", &argv));
	ASSERT_STREQ(joined(argv), "xfs_growfs -d /mnt");
	strv_free(argv);
	ASSERT_ERR(csi_resize_argv("btrfs", "/dev/x", "/mnt", &argv), EOPNOTSUPP);
}

TEST(csi_node_superblock_sizes)
{
	unsigned char buf[4096] = { 0 };
	uint64_t bytes, bs;

	ASSERT_ERR(csi_fs_size_from_buf(buf, sizeof(buf), &bytes, &bs), EMEDIUMTYPE);
	/* ext4, 64-bit: 0x1_00000010 blocks of 4 KiB */
	unsigned char *sb = buf + 1024;
	sb[0x38] = 0x53;
	sb[0x39] = 0xEF;
	sb[0x18] = 2;
	sb[0x04] = 0x10;
	sb[0x60] = 0x80;
	sb[0x150] = 1;
	ASSERT_OK(csi_fs_size_from_buf(buf, sizeof(buf), &bytes, &bs));
	ASSERT_EQ(bs, 4096);
	ASSERT_EQ(bytes, (0x100000010ULL) * 4096);
	sb[0x60] = 0; /* without the 64-bit feature the high word is ignored */
	ASSERT_OK(csi_fs_size_from_buf(buf, sizeof(buf), &bytes, &bs));
	ASSERT_EQ(bytes, 0x10ULL * 4096);
	sb[0x18] = 40;
	ASSERT_ERR(csi_fs_size_from_buf(buf, sizeof(buf), &bytes, &bs), EBADMSG);
	/* xfs: big-endian block size and data blocks */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, "XFSB", 4);
	buf[6] = 0x10;           /* 4096 */
	buf[13] = 0x01; /* dblocks = 0x1_0000 */
	ASSERT_OK(csi_fs_size_from_buf(buf, sizeof(buf), &bytes, &bs));
	ASSERT_EQ(bs, 4096);
	ASSERT_EQ(bytes, 0x10000ULL * 4096);
	ASSERT_ERR(csi_fs_size_from_buf(buf, 100, &bytes, &bs), EMEDIUMTYPE);
}

/* A sparse file of size bytes in the scratch directory. */
static int make_image(const char *name, off_t size, char *path, size_t n)
{
	(void)str_printf(path, n, "%s/%s", test_tmpdir(), name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	int r = ftruncate(fd, size) < 0 ? -errno : 0;
	close(fd);
	return r;
}

TEST(csi_node_probe_and_size_real_mkfs)
{
	char img[1024], found[256];
	struct csi_probe p;
	uint64_t bytes, bs;

	if (csi_exec_find("mkfs.ext4", found, sizeof(found)) < 0 ||
	    csi_exec_find("mkfs.xfs", found, sizeof(found)) < 0)
		TEST_SKIP("mkfs.ext4 or mkfs.xfs is not installed (e2fsprogs, xfsprogs)");
	ASSERT_OK(make_image("blank.img", 64 << 20, img, sizeof(img)));
	ASSERT_EQ(csi_fs_probe(img, &p), 0);
	ASSERT_STREQ(p.type, "");
	ASSERT_ERR(csi_fs_size(img, &bytes, &bs), EMEDIUMTYPE);

	const char *ext4[] = { "mkfs.ext4", "-q", "-F", "-m0", "-b", "4096", img, NULL };
	ASSERT_EQ(csi_exec(ext4, 0, NULL, NULL), 0);
	ASSERT_EQ(csi_fs_probe(img, &p), 1);
	ASSERT_STREQ(p.type, "ext4");
	ASSERT_OK(csi_fs_size(img, &bytes, &bs));
	ASSERT_EQ(bs, 4096);
	ASSERT_EQ(bytes, 64 << 20);

	ASSERT_OK(make_image("xfs.img", 320 << 20, img, sizeof(img)));
	const char *xfs[] = { "mkfs.xfs", "-q", "-f", img, NULL };
	ASSERT_EQ(csi_exec(xfs, 0, NULL, NULL), 0);
	ASSERT_EQ(csi_fs_probe(img, &p), 1);
	ASSERT_STREQ(p.type, "xfs");
	ASSERT_OK(csi_fs_size(img, &bytes, &bs));
	ASSERT_EQ(bytes, 320 << 20);

	ASSERT_ERR(csi_fs_probe("/nonexistent/dev", &p), ENOENT);
}

TEST(csi_node_probe_partition_table)
{
	char img[1024], found[256];
	struct csi_probe p;

	if (csi_exec_find("sfdisk", found, sizeof(found)) < 0)
		TEST_SKIP("sfdisk is not installed (fdisk)");
	ASSERT_OK(make_image("pt.img", 16 << 20, img, sizeof(img)));
	/* sfdisk reads the layout from standard input: write it to a file, run through csi_exec
	 * is not possible (stdin is /dev/null), so use sfdisk's --label with a script file */
	char script[1024];
	(void)str_printf(script, sizeof(script), "%s/layout", test_tmpdir());
	int fd = open(script, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ASSERT_TRUE(fd >= 0);
	ASSERT_TRUE(write(fd, "label: dos\n,,L\n", 15) == 15);
	close(fd);
	pid_t pid = fork();
	if (pid == 0) {
		int in = open(script, O_RDONLY);
		int out = open("/dev/null", O_WRONLY);
		dup2(in, 0);
		dup2(out, 1);
		dup2(out, 2);
		execl(found, "sfdisk", img, (char *)NULL); /* the one the skip check found */
		_exit(127);
	}
	int status;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ASSERT_EQ(csi_fs_probe(img, &p), 1);
	ASSERT_STREQ(p.pttype, "dos");
}
