/* Unit tests: finding and identifying EBS volume devices (csi-node). The devices are the
 * unattached /dev/loopN nodes (any block device node will do: nothing is opened), the by-id
 * directory and sysfs are fake trees in the test's scratch directory. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "modules/csi-node/csi_node_device.h"
#include "tests/unit/harness.h"

static char byid[512], sys[512];

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n < 0 ? -errno : 0;
}

/* A fake sysfs entry for block device /dev/<name> with an optional serial. */
static int fake_sysfs(const char *name, const char *serial)
{
	char p[1024], t[1024];
	struct stat st;

	(void)str_printf(p, sizeof(p), "/dev/%s", name);
	if (stat(p, &st) < 0)
		return -errno;
	(void)str_printf(p, sizeof(p), "%s/devices/virtual/block/%s/device", sys, name);
	if (mkdir(sys, 0755) < 0 && errno != EEXIST)
		return -errno;
	const char *mk[] = { "devices", "devices/virtual", "devices/virtual/block", NULL };
	for (int i = 0; mk[i]; i++) {
		(void)str_printf(t, sizeof(t), "%s/%s", sys, mk[i]);
		(void)mkdir(t, 0755);
	}
	(void)str_printf(t, sizeof(t), "%s/devices/virtual/block/%s", sys, name);
	(void)mkdir(t, 0755);
	(void)mkdir(p, 0755);
	(void)str_printf(t, sizeof(t), "%s/devices/virtual/block/%s/dev", sys, name);
	char dev[32];
	(void)str_printf(dev, sizeof(dev), "%u:%u\n", major(st.st_rdev), minor(st.st_rdev));
	if (write_file(t, dev) < 0)
		return -EIO;
	if (serial) {
		(void)str_printf(t, sizeof(t), "%s/devices/virtual/block/%s/device/serial", sys,
				 name);
		if (write_file(t, serial) < 0)
			return -EIO;
	}
	(void)str_printf(t, sizeof(t), "%s/dev", sys);
	(void)mkdir(t, 0755);
	(void)str_printf(t, sizeof(t), "%s/dev/block", sys);
	(void)mkdir(t, 0755);
	(void)str_printf(t, sizeof(t), "%s/class", sys);
	(void)mkdir(t, 0755);
	(void)str_printf(t, sizeof(t), "%s/class/block", sys);
	(void)mkdir(t, 0755);
	char target[1024];
	(void)str_printf(target, sizeof(target), "../../devices/virtual/block/%s", name);
	(void)str_printf(t, sizeof(t), "%s/dev/block/%u:%u", sys, major(st.st_rdev),
			 minor(st.st_rdev));
	if (symlink(target, t) < 0 && errno != EEXIST)
		return -errno;
	(void)str_printf(t, sizeof(t), "%s/class/block/%s", sys, name);
	if (symlink(target, t) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int link_volume(const char *serial, const char *dev)
{
	char p[1024];

	(void)str_printf(p, sizeof(p), "%s/" CSI_EBS_BY_ID_PREFIX "%s", byid, serial);
	return symlink(dev, p) < 0 ? -errno : 0;
}

static bool setup(void)
{
	(void)str_printf(byid, sizeof(byid), "%s/by-id", test_tmpdir());
	(void)str_printf(sys, sizeof(sys), "%s/sys", test_tmpdir());
	mkdir(byid, 0755);
	/* the three must be block devices, or the tests would fail rather than skip */
	const char *devs[] = { "/dev/loop0", "/dev/loop1", "/dev/loop2" };
	for (size_t i = 0; i < 3; i++) {
		struct stat st;
		if (stat(devs[i], &st) < 0 || !S_ISBLK(st.st_mode))
			return false;
	}
	return true;
}

TEST(csi_node_volume_id)
{
	char s[80];

	ASSERT_TRUE(csi_volume_id_valid("vol-0123456789abcdef0"));
	ASSERT_FALSE(csi_volume_id_valid(""));
	ASSERT_FALSE(csi_volume_id_valid(NULL));
	ASSERT_FALSE(csi_volume_id_valid("vol-../../etc"));
	ASSERT_FALSE(csi_volume_id_valid("vol/x"));
	ASSERT_FALSE(csi_volume_id_valid(
	    "vol-0123456789abcdef0vol-0123456789abcdef0vol-0123456789abcdef0123"));
	ASSERT_OK(csi_volume_serial("vol-0abc", s, sizeof(s)));
	ASSERT_STREQ(s, "vol0abc");
	ASSERT_ERR(csi_volume_serial("vol-0abc", s, 4), ENAMETOOLONG);
	ASSERT_ERR(csi_volume_serial("a b", s, sizeof(s)), EINVAL);
}

TEST(csi_node_find_by_link)
{
	struct csi_node_devices d = { .by_id_dir = byid, .sysfs = sys };
	char dev[256], msg[512];

	if (!setup())
		TEST_SKIP("no block devices /dev/loop0..2");
	ASSERT_OK(fake_sysfs("loop0", NULL));
	ASSERT_OK(link_volume("vol0aaa", "/dev/loop0"));
	/* the link wins, a missing devicePath is fine */
	ASSERT_OK(csi_node_find_device(&d, "vol-0aaa", "/dev/xvdba", NULL, dev, sizeof(dev), msg,
				       sizeof(msg)));
	ASSERT_STREQ(dev, "/dev/loop0");
	ASSERT_OK(
	    csi_node_find_device(&d, "vol-0aaa", NULL, "0", dev, sizeof(dev), msg, sizeof(msg)));
	ASSERT_STREQ(dev, "/dev/loop0");
	/* nothing at all */
	ASSERT_ERR(csi_node_find_device(&d, "vol-0bbb", "/dev/xvdbb", NULL, dev, sizeof(dev), msg,
					sizeof(msg)),
		   ENOENT);
	ASSERT_CONTAINS(msg, "vol-0bbb");
	/* the by-id form with a namespace suffix */
	ASSERT_OK(link_volume("vol0ccc_1", "/dev/loop1"));
	ASSERT_OK(fake_sysfs("loop1", NULL));
	ASSERT_OK(
	    csi_node_find_device(&d, "vol-0ccc", NULL, NULL, dev, sizeof(dev), msg, sizeof(msg)));
	ASSERT_STREQ(dev, "/dev/loop1");
	/* a partition that does not exist */
	ASSERT_ERR(
	    csi_node_find_device(&d, "vol-0aaa", NULL, "7", dev, sizeof(dev), msg, sizeof(msg)),
	    ENOENT);
	ASSERT_CONTAINS(msg, "/dev/loop0p7");
	ASSERT_ERR(
	    csi_node_find_device(&d, "vol-0aaa", NULL, "x1", dev, sizeof(dev), msg, sizeof(msg)),
	    EINVAL);
	ASSERT_ERR(csi_node_find_device(&d, "../x", NULL, NULL, dev, sizeof(dev), msg, sizeof(msg)),
		   EINVAL);
}

TEST(csi_node_find_by_device_path)
{
	struct csi_node_devices d = { .by_id_dir = byid, .sysfs = sys };
	char dev[256], msg[512];

	if (!setup())
		TEST_SKIP("no block devices /dev/loop0..2");
	ASSERT_OK(fake_sysfs("loop2", NULL));
	/* a device with no identity (a Xen instance) is accepted from devicePath */
	ASSERT_OK(csi_node_find_device(&d, "vol-0ddd", "/dev/loop2", NULL, dev, sizeof(dev), msg,
				       sizeof(msg)));
	ASSERT_STREQ(dev, "/dev/loop2");
	/* a symlink devicePath is resolved */
	char l[1024];
	(void)str_printf(l, sizeof(l), "%s/xvdba", test_tmpdir());
	ASSERT_OK(symlink("/dev/loop2", l) < 0 ? -errno : 0);
	ASSERT_OK(
	    csi_node_find_device(&d, "vol-0ddd", l, NULL, dev, sizeof(dev), msg, sizeof(msg)));
	ASSERT_STREQ(dev, "/dev/loop2");
	/* not a block device */
	ASSERT_ERR(csi_node_find_device(&d, "vol-0ddd", "/dev/null", NULL, dev, sizeof(dev), msg,
					sizeof(msg)),
		   ENOTBLK);
	ASSERT_ERR(csi_node_find_device(&d, "vol-0ddd", test_tmpdir(), NULL, dev, sizeof(dev), msg,
					sizeof(msg)),
		   ENOTBLK);
}

TEST(csi_node_wrong_volume_refused)
{
	struct csi_node_devices d = { .by_id_dir = byid, .sysfs = sys };
	char dev[256], msg[512], id[64];
	struct stat st;

	if (!setup())
		TEST_SKIP("no block devices /dev/loop0..2");
	/* loop0 is vol-0aaa by its link: as devicePath of vol-0eee it is refused */
	ASSERT_OK(fake_sysfs("loop0", NULL));
	ASSERT_OK(link_volume("vol0aaa", "/dev/loop0"));
	ASSERT_ERR(csi_node_find_device(&d, "vol-0eee", "/dev/loop0", NULL, dev, sizeof(dev), msg,
					sizeof(msg)),
		   EMEDIUMTYPE);
	ASSERT_CONTAINS(msg, "vol-0aaa");
	ASSERT_CONTAINS(msg, "vol-0eee");
	ASSERT_OK(stat("/dev/loop0", &st));
	ASSERT_OK(csi_node_device_identity(&d, st.st_rdev, id, sizeof(id)));
	ASSERT_STREQ(id, "vol0aaa");
	ASSERT_OK(csi_node_device_check(&d, st.st_rdev, "vol-0aaa", msg, sizeof(msg)));
	ASSERT_ERR(csi_node_device_check(&d, st.st_rdev, "vol-0fff", msg, sizeof(msg)),
		   EMEDIUMTYPE);

	/* the NVMe serial in sysfs is the identity, before any link */
	ASSERT_OK(fake_sysfs("loop1", "vol0123   \n"));
	ASSERT_OK(stat("/dev/loop1", &st));
	ASSERT_OK(csi_node_device_identity(&d, st.st_rdev, id, sizeof(id)));
	ASSERT_STREQ(id, "vol0123");
	ASSERT_OK(csi_node_find_device(&d, "vol-0123", "/dev/loop1", NULL, dev, sizeof(dev), msg,
				       sizeof(msg)));
	ASSERT_ERR(csi_node_find_device(&d, "vol-0456", "/dev/loop1", NULL, dev, sizeof(dev), msg,
					sizeof(msg)),
		   EMEDIUMTYPE);
	/* a by-id link that points at another volume's device is refused too */
	ASSERT_OK(link_volume("vol0456", "/dev/loop1"));
	ASSERT_ERR(
	    csi_node_find_device(&d, "vol-0456", NULL, NULL, dev, sizeof(dev), msg, sizeof(msg)),
	    EMEDIUMTYPE);
	char name[64];
	ASSERT_OK(csi_node_device_name(&d, st.st_rdev, name, sizeof(name)));
	ASSERT_STREQ(name, "loop1");
}
