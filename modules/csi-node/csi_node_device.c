/* Device discovery and volume identity checks for the node service. */
#include "modules/csi-node/csi_node_device.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/log.h"

static const char *by_id_dir(const struct csi_node_devices *d)
{
	return d && d->by_id_dir && *d->by_id_dir ? d->by_id_dir : "/dev/disk/by-id";
}

static const char *sysfs(const struct csi_node_devices *d)
{
	return d && d->sysfs && *d->sysfs ? d->sysfs : "/sys";
}

bool csi_volume_id_valid(const char *volume_id)
{
	size_t n = volume_id ? strlen(volume_id) : 0;

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)volume_id[i]) && volume_id[i] != '-')
			return false;
	return true;
}

int csi_volume_serial(const char *volume_id, char *ret, size_t n)
{
	size_t k = 0;

	if (!csi_volume_id_valid(volume_id))
		return -EINVAL;
	for (const char *p = volume_id; *p; p++) {
		if (*p == '-')
			continue;
		if (k + 1 >= n)
			return -ENAMETOOLONG;
		ret[k++] = *p;
	}
	ret[k] = '\0';
	return 0;
}

/* /dev/<one or more alphanumerics>, nothing else (upstream's check). */
static bool dev_path_valid(const char *p)
{
	if (!str_has_prefix(p, "/dev/") || !p[5])
		return false;
	for (const char *c = p + 5; *c; c++)
		if (!isalnum((unsigned char)*c))
			return false;
	return true;
}

/* Reads a small sysfs attribute, trimmed; -ENOENT when absent or empty. */
static int read_attr(const char *path, char *ret, size_t n)
{
	char buf[256];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t k;

	if (fd < 0)
		return -errno;
	k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (k < 0)
		return -EIO;
	buf[k] = '\0';
	char *s = str_strip(buf);
	if (!*s)
		return -ENOENT;
	return str_copy(ret, n, s);
}

int csi_node_device_name(const struct csi_node_devices *d, dev_t dev, char *ret, size_t n)
{
	char path[PATH_MAX], target[PATH_MAX];
	ssize_t k;

	if (str_printf(path, sizeof(path), "%s/dev/block/%u:%u", sysfs(d), major(dev), minor(dev)) <
	    0)
		return -ENAMETOOLONG;
	if ((k = readlink(path, target, sizeof(target) - 1)) < 0)
		return -errno;
	target[k] = '\0';
	const char *slash = strrchr(target, '/');
	return str_copy(ret, n, slash ? slash + 1 : target);
}

/* The whole disk that holds block device `name` (itself when it is not a partition). */
static int whole_disk(const struct csi_node_devices *d, const char *name, char *ret, size_t n)
{
	char path[PATH_MAX], real[PATH_MAX];

	if (str_printf(path, sizeof(path), "%s/class/block/%s/partition", sysfs(d), name) < 0)
		return -ENAMETOOLONG;
	if (access(path, F_OK) < 0)
		return str_copy(ret, n, name);
	if (str_printf(path, sizeof(path), "%s/class/block/%s", sysfs(d), name) < 0)
		return -ENAMETOOLONG;
	if (!realpath(path, real))
		return -errno;
	char *slash = strrchr(real, '/');
	if (!slash)
		return -EINVAL;
	*slash = '\0';
	slash = strrchr(real, '/');
	return str_copy(ret, n, slash ? slash + 1 : real);
}

static int disk_dev(const struct csi_node_devices *d, const char *disk, dev_t *ret)
{
	char path[PATH_MAX], v[64];
	unsigned ma, mi;
	int r;

	if (str_printf(path, sizeof(path), "%s/class/block/%s/dev", sysfs(d), disk) < 0)
		return -ENAMETOOLONG;
	if ((r = read_attr(path, v, sizeof(v))) < 0)
		return r;
	if (sscanf(v, "%u:%u", &ma, &mi) != 2)
		return -EBADMSG;
	*ret = makedev(ma, mi);
	return 0;
}

/* The volume serial of a by-id link name, or NULL when the name is not an EBS link. */
static int link_serial(const char *name, char *ret, size_t n)
{
	size_t pl = strlen(CSI_EBS_BY_ID_PREFIX), k = 0;

	if (!str_has_prefix(name, CSI_EBS_BY_ID_PREFIX))
		return -ENOENT;
	for (const char *p = name + pl; *p && *p != '_'; p++) {
		if (k + 1 >= n)
			return -ENAMETOOLONG;
		ret[k++] = *p;
	}
	ret[k] = '\0';
	return k ? 0 : -ENOENT;
}

/* The serial of the by-id link that points at dev. */
static int identity_from_links(const struct csi_node_devices *d, dev_t dev, char *ret, size_t n)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct stat st;
	size_t seen = 0;
	int r = -ENOENT;
	DIR *dir = opendir(by_id_dir(d));

	if (!dir)
		return -ENOENT;
	while ((de = readdir(dir)) && seen++ < CSI_BY_ID_MAX_ENTRIES) {
		if (!str_has_prefix(de->d_name, CSI_EBS_BY_ID_PREFIX))
			continue;
		if (str_printf(path, sizeof(path), "%s/%s", by_id_dir(d), de->d_name) < 0)
			continue;
		if (stat(path, &st) < 0 || !S_ISBLK(st.st_mode) || st.st_rdev != dev)
			continue;
		if ((r = link_serial(de->d_name, ret, n)) == 0)
			break;
	}
	closedir(dir);
	return r;
}

int csi_node_device_identity(const struct csi_node_devices *d, dev_t dev, char *ret, size_t n)
{
	char name[NAME_MAX + 1], disk[NAME_MAX + 1], path[PATH_MAX], serial[128];
	dev_t ddev = dev;
	int r;

	if ((r = csi_node_device_name(d, dev, name, sizeof(name))) < 0)
		return r == -ENOENT ? -ENOENT : r;
	if ((r = whole_disk(d, name, disk, sizeof(disk))) < 0)
		return r;
	if (strcmp(disk, name) != 0 && disk_dev(d, disk, &ddev) < 0)
		ddev = dev;
	/* NVMe: the controller's serial; virtio: the disk's own. */
	static const char *const attrs[] = { "device/serial", "serial" };
	for (size_t i = 0; i < ARRAY_SIZE(attrs); i++) {
		if (str_printf(path, sizeof(path), "%s/class/block/%s/%s", sysfs(d), disk,
			       attrs[i]) < 0)
			return -ENAMETOOLONG;
		if (read_attr(path, serial, sizeof(serial)) == 0)
			return str_copy(ret, n, serial);
	}
	return identity_from_links(d, ddev, ret, n);
}

/* "vol0abc" -> "vol-0abc" for messages. */
static void serial_to_id(const char *serial, char *ret, size_t n)
{
	if (str_has_prefix(serial, "vol") && serial[3] && serial[3] != '-')
		(void)str_printf(ret, n, "vol-%s", serial + 3);
	else
		(void)str_copy(ret, n, serial);
}

int csi_node_device_check(const struct csi_node_devices *d, dev_t dev, const char *volume_id,
			  char *msg, size_t n)
{
	char want[80], have[128], name[NAME_MAX + 1], other[140];
	int r;

	if ((r = csi_volume_serial(volume_id, want, sizeof(want))) < 0)
		return r;
	if ((r = csi_node_device_identity(d, dev, have, sizeof(have))) < 0)
		return r == -ENOENT ? 0 : r;
	if (strcmp(have, want) == 0 || strcmp(have, volume_id) == 0)
		return 0;
	if (csi_node_device_name(d, dev, name, sizeof(name)) < 0)
		(void)str_printf(name, sizeof(name), "%u:%u", major(dev), minor(dev));
	serial_to_id(have, other, sizeof(other));
	(void)str_printf(msg, n, "device /dev/%s is volume %s, not %s", name, other, volume_id);
	return -EMEDIUMTYPE;
}

/* Checks one candidate path: 0 and its device in ret, or an error with msg set. */
static int try_candidate(const struct csi_node_devices *d, const char *volume_id, const char *path,
			 char *ret, size_t retlen, char *msg, size_t n)
{
	char real[PATH_MAX];
	struct stat st;
	int r;

	if (lstat(path, &st) < 0)
		return -ENOENT;
	if (!realpath(path, real)) {
		(void)str_printf(msg, n, "cannot resolve %s: %s", path, strerror(errno));
		return -ENOENT;
	}
	if (!dev_path_valid(real) || stat(real, &st) < 0 || !S_ISBLK(st.st_mode)) {
		(void)str_printf(msg, n, "%s (%s) is not a block device under /dev", path, real);
		return -ENOTBLK;
	}
	if ((r = csi_node_device_check(d, st.st_rdev, volume_id, msg, n)) < 0)
		return r;
	return str_copy(ret, retlen, real);
}

static bool partition_valid(const char *p)
{
	size_t n = strlen(p);

	if (n == 0 || n > 3)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)p[i]))
			return false;
	return true;
}

int csi_node_find_device(const struct csi_node_devices *d, const char *volume_id,
			 const char *device_path, const char *partition, char *ret, size_t retlen,
			 char *msg, size_t n)
{
	char serial[80], links[2][PATH_MAX], dev[PATH_MAX], m[512] = "";
	const char *cands[3];
	size_t nc = 0;
	int r, best = -ENOENT;

	if (n)
		msg[0] = '\0';
	if ((r = csi_volume_serial(volume_id, serial, sizeof(serial))) < 0) {
		(void)str_printf(msg, n, "invalid volume id \"%s\"", volume_id ? volume_id : "");
		return -EINVAL;
	}
	if (partition && (!*partition || strcmp(partition, "0") == 0))
		partition = NULL;
	if (partition && !partition_valid(partition)) {
		(void)str_printf(msg, n, "invalid partition \"%s\"", partition);
		return -EINVAL;
	}
	if (str_printf(links[0], PATH_MAX, "%s/%s%s", by_id_dir(d), CSI_EBS_BY_ID_PREFIX, serial) <
		0 ||
	    str_printf(links[1], PATH_MAX, "%s/%s%s_1", by_id_dir(d), CSI_EBS_BY_ID_PREFIX,
		       serial) < 0)
		return -ENAMETOOLONG;
	cands[nc++] = links[0];
	cands[nc++] = links[1];
	if (device_path && *device_path)
		cands[nc++] = device_path;

	for (size_t i = 0; i < nc; i++) {
		m[0] = '\0';
		r = try_candidate(d, volume_id, cands[i], dev, sizeof(dev), m, sizeof(m));
		log_v(5, "device candidate", KV_S("volume", volume_id), KV_S("path", cands[i]),
		      KV_I("result", r));
		if (r == 0)
			goto found;
		/* keep the most telling failure: a wrong volume, then not a block device */
		if (r == -EMEDIUMTYPE || (r == -ENOTBLK && best != -EMEDIUMTYPE) ||
		    (best == -ENOENT && m[0])) {
			best = r;
			(void)str_copy(msg, n, m);
		}
	}
	if (best == -ENOENT && n && !msg[0])
		(void)str_printf(msg, n,
				 "no device found for volume %s (devicePath \"%s\", by-id link %s)",
				 volume_id, device_path ? device_path : "", links[0]);
	return best;

found:
	if (partition) {
		char part[PATH_MAX];
		struct stat st;
		size_t l = strlen(dev);
		bool digit = l > 0 && isdigit((unsigned char)dev[l - 1]);
		if (str_printf(part, sizeof(part), "%s%s%s", dev, digit ? "p" : "", partition) < 0)
			return -ENAMETOOLONG;
		if (stat(part, &st) < 0 || !S_ISBLK(st.st_mode)) {
			(void)str_printf(msg, n, "partition %s of %s (%s) not found", partition,
					 dev, part);
			return -ENOENT;
		}
		return str_copy(ret, retlen, part);
	}
	return str_copy(ret, retlen, dev);
}
