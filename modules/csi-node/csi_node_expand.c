/* NodeExpandVolume and NodeGetVolumeStats. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "modules/csi-node/csi_node_internal.h"

/* The volume path of NodeExpandVolume and NodeGetVolumeStats. Missing: INVALID_ARGUMENT. A
 * relative one names nothing in our root file system (the spec wants absolute paths; it is
 * never resolved against our working directory), so no volume is there: NOT_FOUND, as for a
 * path that does not exist (the spec's "volume does not exist"; csi-sanity sends "some/path"). */
static enum csi_code check_volume_path(const char *path, struct csi_error *st)
{
	if (path && *path && path[0] != '/')
		return csi_error_set(st, CSI_NOT_FOUND,
				     "volume path \"%.200s\" does not exist: not an absolute path",
				     path);
	return csi_node_check_path("volume path", path, st);
}

/* The device node of a mounted file system's major:minor. */
static int dev_node(struct csi_node *n, dev_t dev, char *ret, size_t len)
{
	char name[NAME_MAX + 1];
	struct stat sb;
	int r;

	if ((r = csi_node_device_name(&n->cfg.devices, dev, name, sizeof(name))) < 0)
		return r;
	if (str_printf(ret, len, "/dev/%s", name) < 0)
		return -ENAMETOOLONG;
	if (stat(ret, &sb) < 0)
		return -errno;
	return S_ISBLK(sb.st_mode) && sb.st_rdev == dev ? 0 : -ENODEV;
}

static enum csi_code expand_block(struct csi_node *n, const struct csi_node_expand_req *req,
				  dev_t dev, int64_t *ret_bytes, struct csi_error *st)
{
	unsigned long long size;
	int r;

	if ((r = csi_node_check_owner(n, dev, req->volume_id, req->volume_path, st)) != CSI_OK)
		return r;
	if ((r = csi_block_size(req->volume_path, &size)) < 0)
		return csi_error_set(st, CSI_INTERNAL, "reading the size of %s: %s",
				     req->volume_path, strerror(-r));
	*ret_bytes = (int64_t)size;
	return csi_error_ok(st);
}

static enum csi_code expand_locked(struct csi_node *n, const struct csi_node_expand_req *req,
				   int64_t *ret_bytes, struct csi_error *st)
{
	struct csi_mount_table t = { 0 };
	enum csi_mount_state state;
	struct csi_mount m;
	char dev[PATH_MAX], fstype[32], msg[768];
	unsigned long long size;
	struct stat sb;
	int r;

	if (stat(req->volume_path, &sb) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return csi_error_set(st, CSI_NOT_FOUND, "volume path %s does not exist",
					     req->volume_path);
		return csi_error_set(st, CSI_FAILED_PRECONDITION, "volume path %s: %s",
				     req->volume_path, strerror(errno));
	}
	if (S_ISBLK(sb.st_mode))
		return expand_block(n, req, sb.st_rdev, ret_bytes, st);
	if (req->cap.present && req->cap.block)
		return csi_error_set(st, CSI_INVALID_ARGUMENT,
				     "volume path %s of a block volume is not a device",
				     req->volume_path);
	if ((r = csi_mount_table_load(NULL, &t)) < 0)
		return csi_error_set(st, CSI_INTERNAL, "reading mountinfo: %s", strerror(-r));
	r = csi_mount_state(req->volume_path, &t, &state, &m);
	if (r == 0 && state == CSI_MOUNT_MOUNTED)
		(void)str_copy(fstype, sizeof(fstype), m.fstype);
	csi_mount_table_release(&t);
	if (r < 0)
		return csi_error_set(st, r == -ENOENT ? CSI_NOT_FOUND : CSI_INTERNAL,
				     "checking %s: %s", req->volume_path, strerror(-r));
	if (state == CSI_MOUNT_NONE)
		return csi_error_set(st, CSI_NOT_FOUND, "no volume is mounted at %s",
				     req->volume_path);
	if (state != CSI_MOUNT_MOUNTED)
		return csi_error_set(st, CSI_FAILED_PRECONDITION,
				     "volume path %s is a corrupted mount", req->volume_path);
	dev_t d = makedev(m.major, m.minor);
	if ((r = csi_node_check_owner(n, d, req->volume_id, req->volume_path, st)) != CSI_OK)
		return r;
	if ((r = dev_node(n, d, dev, sizeof(dev))) < 0)
		return csi_error_set(st, CSI_INTERNAL,
				     "finding the device node of %u:%u mounted at %s: %s", m.major,
				     m.minor, req->volume_path, strerror(-r));
	if (!csi_fs_type_supported(fstype))
		return csi_error_set(st, CSI_FAILED_PRECONDITION, "cannot grow a %s file system",
				     fstype);
	if ((r = csi_block_size(dev, &size)) < 0)
		return csi_error_set(st, CSI_INTERNAL, "reading the size of %s: %s", dev,
				     strerror(-r));
	if (req->required_bytes > 0 && size < (unsigned long long)req->required_bytes)
		return csi_error_set(
		    st, CSI_FAILED_PRECONDITION,
		    "device %s has %llu bytes, less than the %lld required: the new size has "
		    "not reached the node yet",
		    dev, size, (long long)req->required_bytes);

	_cleanup_strv_ char **argv = NULL;
	if ((r = csi_resize_argv(fstype, dev, req->volume_path, &argv)) < 0)
		return csi_error_set(st, CSI_INTERNAL, "building the resize command: %s",
				     strerror(-r));
	if ((r = csi_node_run(n, (const char *const *)argv, req->volume_id, msg, sizeof(msg))) !=
	    0) {
		log_error("growing the file system failed", KV_S("volume", req->volume_id),
			  KV_S("device", dev), KV_S("error", msg));
		return csi_error_set(st, CSI_INTERNAL, "growing %s on %s: %s", fstype, dev, msg);
	}
	log_info("file system grown", KV_S("volume", req->volume_id), KV_S("device", dev),
		 KV_S("fstype", fstype), KV_U("bytes", size));
	*ret_bytes = (int64_t)size;
	return csi_error_ok(st);
}

enum csi_code csi_node_expand(struct csi_node *n, const struct csi_node_expand_req *req,
			      int64_t *ret_bytes, struct csi_error *st)
{
	const char *fstype;
	int r;

	if ((r = csi_node_check_id(req->volume_id, st)) != CSI_OK ||
	    (r = check_volume_path(req->volume_path, st)) != CSI_OK)
		return r;
	if (req->cap.present && (r = csi_node_check_cap(&req->cap, &fstype, st)) != CSI_OK)
		return r;
	if (req->required_bytes < 0)
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "negative required bytes");
	if ((r = csi_node_lock(n, req->volume_id, st)) != CSI_OK)
		return r;
	r = expand_locked(n, req, ret_bytes, st);
	csi_node_unlock(n, req->volume_id);
	return r;
}

/* ---- NodeGetVolumeStats ---- */

static void abnormal(struct csi_node_stats *s, const char *fmt, const char *a, const char *b)
{
	s->abnormal = true;
	(void)str_printf(s->message, sizeof(s->message), fmt, a, b);
}

/* The usage of the file system mounted at volume_path, into *s (abnormal when the mount is
 * corrupted, its device gone or it turned read-only): CSI_OK, or NOT_FOUND when nothing is
 * mounted there, INTERNAL when the mount table cannot be read. */
static enum csi_code mounted_stats(struct csi_node *n, const char *volume_path,
				   struct csi_node_stats *s, struct csi_error *st)
{
	struct csi_mount_table t = { 0 };
	enum csi_mount_state state;
	struct csi_mount m;
	struct statvfs sv;
	char path[PATH_MAX];
	int r;

	if ((r = csi_mount_table_load(NULL, &t)) < 0)
		return csi_error_set(st, CSI_INTERNAL, "reading mountinfo: %s", strerror(-r));
	r = csi_mount_state(volume_path, &t, &state, &m);
	if (r < 0 || state != CSI_MOUNT_MOUNTED) {
		csi_mount_table_release(&t);
		if (r < 0)
			return csi_error_set(st, r == -ENOENT ? CSI_NOT_FOUND : CSI_INTERNAL,
					     "checking %s: %s", volume_path, strerror(-r));
		/* an empty mount point: statfs would give the numbers of the file system below */
		if (state == CSI_MOUNT_NONE)
			return csi_error_set(st, CSI_NOT_FOUND, "no volume is mounted at %s",
					     volume_path);
		abnormal(s, "%s is a corrupted mount%s", volume_path, "");
		return csi_error_ok(st);
	}
	/* ext4 with errors=remount-ro turns the whole file system read-only on an I/O error */
	bool fs_ro =
	    csi_mount_has_option(m.super_options, "ro") && !csi_mount_has_option(m.options, "ro");
	(void)str_printf(path, sizeof(path), "%s/dev/block/%u:%u",
			 n->cfg.devices.sysfs ? n->cfg.devices.sysfs : "/sys", m.major, m.minor);
	bool gone = m.major != 0 && access(path, F_OK) < 0;
	csi_mount_table_release(&t);
	if (statvfs(volume_path, &sv) < 0) {
		abnormal(s, "statfs of %s failed: %s", volume_path, strerror(errno));
		return csi_error_ok(st);
	}
	s->has_bytes = s->has_inodes = true;
	s->bytes_total = (int64_t)(sv.f_blocks * sv.f_frsize);
	s->bytes_available = (int64_t)(sv.f_bavail * sv.f_frsize);
	s->bytes_used = (int64_t)((sv.f_blocks - sv.f_bfree) * sv.f_frsize);
	s->inodes_total = (int64_t)sv.f_files;
	s->inodes_free = (int64_t)sv.f_ffree;
	s->inodes_used = (int64_t)(sv.f_files - sv.f_ffree);
	if (gone)
		abnormal(s, "the device of %s is gone%s", volume_path, "");
	else if (fs_ro)
		abnormal(s, "the file system at %s has turned read-only%s", volume_path,
			 " (errors=remount-ro after an I/O error?)");
	return csi_error_ok(st);
}

enum csi_code csi_node_get_stats(struct csi_node *n, const char *volume_id, const char *volume_path,
				 struct csi_node_stats *ret, struct csi_error *st)
{
	struct csi_node_stats s = { 0 };
	struct stat sb;
	int r;

	if (!volume_id || !*volume_id)
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "volume id is missing");
	if ((r = check_volume_path(volume_path, st)) != CSI_OK)
		return r;
	if (stat(volume_path, &sb) < 0) {
		int e = errno;
		if (e == ENOENT || e == ENOTDIR)
			return csi_error_set(st, CSI_NOT_FOUND, "volume path %s does not exist",
					     volume_path);
		if (!csi_mount_error_is_corrupted(e))
			return csi_error_set(st, CSI_INTERNAL, "volume path %s: %s", volume_path,
					     strerror(e));
		abnormal(&s, "the mount at %s is corrupted: %s", volume_path, strerror(e));
	} else if (S_ISBLK(sb.st_mode)) {
		unsigned long long size;
		if ((r = csi_block_size(volume_path, &size)) < 0) {
			abnormal(&s, "the device at %s cannot be read: %s", volume_path,
				 strerror(-r));
		} else {
			s.has_bytes = true;
			s.bytes_total = (int64_t)size;
		}
	} else if ((r = mounted_stats(n, volume_path, &s, st)) != CSI_OK) {
		return r;
	}
	if (!s.abnormal)
		(void)str_copy(s.message, sizeof(s.message), "volume is healthy");
	*ret = s;
	return csi_error_ok(st);
}
