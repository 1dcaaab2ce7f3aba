/* NodePublishVolume and NodeUnpublishVolume. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "modules/csi-node/csi_node_internal.h"

/* A mount found on the target: same source and same read-only setting is success, anything
 * else is ALREADY_EXISTS (the CSI code for "published, but incompatibly"). */
static enum csi_code target_existing(const struct csi_node_volume_req *req, bool same, bool ro_now,
				     bool want_ro, struct csi_error *st)
{
	if (!same)
		return csi_error_set(st, CSI_ALREADY_EXISTS, "target %s already has another mount",
				     req->target_path);
	if (ro_now != want_ro)
		return csi_error_set(st, CSI_ALREADY_EXISTS,
				     "volume %s is already published at %s %s", req->volume_id,
				     req->target_path, ro_now ? "read-only" : "read-write");
	log_v(2, "volume already published", KV_S("volume", req->volume_id),
	      KV_S("target", req->target_path));
	return csi_error_ok(st);
}

/* Reads the mount table into t and the state of path; *ret_missing (with CSI_OK) when path
 * does not exist. */
static enum csi_code load_state(const char *path, struct csi_mount_table *t,
				enum csi_mount_state *ret_state, struct csi_mount *m,
				bool *ret_missing, struct csi_error *st)
{
	int r;

	*ret_missing = false;
	csi_mount_table_release(t);
	if ((r = csi_mount_table_load(NULL, t)) < 0)
		return csi_error_set(st, CSI_INTERNAL, "reading mountinfo: %s", strerror(-r));
	r = csi_mount_state(path, t, ret_state, m);
	if (r == -ENOENT)
		*ret_missing = true;
	else if (r < 0)
		return csi_error_set(st, CSI_INTERNAL, "checking %s: %s", path, strerror(-r));
	return csi_error_ok(st);
}

/* The state of the target, which exists by now. */
static enum csi_code target_state(const struct csi_node_volume_req *req, struct csi_mount_table *t,
				  enum csi_mount_state *ret_state, struct csi_mount *m,
				  struct csi_error *st)
{
	bool missing;

	if (load_state(req->target_path, t, ret_state, m, &missing, st) != CSI_OK)
		return st->code;
	if (missing)
		return csi_error_set(st, CSI_INTERNAL, "the target %s vanished", req->target_path);
	return CSI_OK;
}

/* Binds source onto the target, unmounting a corrupted mount there first. */
static enum csi_code bind_target(const struct csi_node_volume_req *req, enum csi_mount_state state,
				 const char *source, unsigned long flags, struct csi_error *st)
{
	int r;

	if (state == CSI_MOUNT_CORRUPT) {
		log_warn("unmounting a corrupted target", KV_S("volume", req->volume_id),
			 KV_S("target", req->target_path));
		if ((r = csi_umount(req->target_path)) < 0 && r != -EINVAL)
			return csi_error_set(st, CSI_INTERNAL, "unmounting the corrupted %s: %s",
					     req->target_path, strerror(-r));
	}
	if ((r = csi_mount_bind(source, req->target_path, flags)) < 0)
		return csi_error_set(st, CSI_INTERNAL, "bind-mounting %s at %s: %s", source,
				     req->target_path, strerror(-r));
	return csi_error_ok(st);
}

static enum csi_code publish_fs(struct csi_node *n, const struct csi_node_volume_req *req,
				unsigned long flags, struct csi_error *st)
{
	struct csi_mount_table t = { 0 };
	enum csi_mount_state state;
	struct csi_mount sm, tm;
	char sroot[PATH_MAX];
	enum csi_code code;
	bool missing;
	int r;

	if ((code = load_state(req->staging_path, &t, &state, &sm, &missing, st)) != CSI_OK)
		goto out;
	if (missing || state != CSI_MOUNT_MOUNTED) {
		code = csi_error_set(st, CSI_FAILED_PRECONDITION, "volume %s is not staged at %s",
				     req->volume_id, req->staging_path);
		goto out;
	}
	dev_t sdev = makedev(sm.major, sm.minor);
	(void)str_copy(sroot, sizeof(sroot), sm.root);
	if ((code = csi_node_check_owner(n, sdev, req->volume_id, req->staging_path, st)) != CSI_OK)
		goto out;
	if ((r = csi_node_mkdir_p(req->target_path, 0750)) < 0) {
		code = csi_error_set(st, CSI_INTERNAL, "creating the target %s: %s",
				     req->target_path, strerror(-r));
		goto out;
	}
	if ((code = target_state(req, &t, &state, &tm, st)) != CSI_OK)
		goto out;
	if (state == CSI_MOUNT_MOUNTED) {
		bool same = makedev(tm.major, tm.minor) == sdev && strcmp(tm.root, sroot) == 0;
		code = target_existing(req, same, csi_mount_has_option(tm.options, "ro"),
				       flags & MS_RDONLY, st);
		goto out;
	}
	if ((code = bind_target(req, state, req->staging_path, flags, st)) != CSI_OK)
		goto out;
	log_info("volume published", KV_S("volume", req->volume_id),
		 KV_S("target", req->target_path), KV_B("readonly", flags & MS_RDONLY));
out:
	csi_mount_table_release(&t);
	return code;
}

/* The target of a block volume is a file the device node is bound onto. */
static enum csi_code make_target_file(const char *path, struct csi_error *st)
{
	char parent[PATH_MAX];
	struct stat sb;
	int r, fd;

	if (str_copy(parent, sizeof(parent), path) < 0)
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "target path too long");
	if ((r = csi_node_mkdir_p(dirname(parent), 0750)) < 0)
		return csi_error_set(st, CSI_INTERNAL, "creating the parent of %s: %s", path,
				     strerror(-r));
	if (lstat(path, &sb) == 0) {
		if (S_ISDIR(sb.st_mode))
			return csi_error_set(st, CSI_FAILED_PRECONDITION,
					     "the target %s of a block volume is a directory",
					     path);
		return CSI_OK;
	}
	if (errno != ENOENT)
		return CSI_OK; /* a corrupted mount: the state check handles it */
	if ((fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0640)) < 0 &&
	    errno != EEXIST)
		return csi_error_set(st, CSI_INTERNAL, "creating the target file %s: %s", path,
				     strerror(errno));
	if (fd >= 0)
		close(fd);
	return CSI_OK;
}

static enum csi_code publish_block(struct csi_node *n, const struct csi_node_volume_req *req,
				   unsigned long flags, struct csi_error *st)
{
	struct csi_mount_table t = { 0 };
	enum csi_mount_state state;
	struct csi_mount tm;
	char dev[PATH_MAX];
	struct stat dsb, tsb;
	enum csi_code code;

	if ((code = csi_node_device_for(n, req->volume_id, req->publish_context,
					req->n_publish_context, req->volume_context,
					req->n_volume_context, dev, sizeof(dev), st)) != CSI_OK)
		return code;
	if (stat(dev, &dsb) < 0)
		return csi_error_set(st, CSI_NOT_FOUND, "%s: %s", dev, strerror(errno));
	if ((code = make_target_file(req->target_path, st)) != CSI_OK)
		return code;
	if ((code = target_state(req, &t, &state, &tm, st)) != CSI_OK)
		goto out;
	if (state == CSI_MOUNT_MOUNTED) {
		bool same = stat(req->target_path, &tsb) == 0 && S_ISBLK(tsb.st_mode) &&
			    tsb.st_rdev == dsb.st_rdev;
		code = target_existing(req, same, csi_mount_has_option(tm.options, "ro"),
				       flags & MS_RDONLY, st);
		goto out;
	}
	if ((code = bind_target(req, state, dev, flags, st)) != CSI_OK)
		goto out;
	log_info("block volume published", KV_S("volume", req->volume_id), KV_S("device", dev),
		 KV_S("target", req->target_path), KV_B("readonly", flags & MS_RDONLY));
out:
	csi_mount_table_release(&t);
	return code;
}

enum csi_code csi_node_publish(struct csi_node *n, const struct csi_node_volume_req *req,
			       struct csi_error *st)
{
	const char *fstype;
	unsigned long flags = 0;
	char data[4096];
	int r;

	if ((r = csi_node_check_id(req->volume_id, st)) != CSI_OK ||
	    (r = csi_node_check_path("staging target path", req->staging_path, st)) != CSI_OK ||
	    (r = csi_node_check_path("target path", req->target_path, st)) != CSI_OK ||
	    (r = csi_node_check_cap(&req->cap, &fstype, st)) != CSI_OK)
		return r;
	if (strcmp(req->staging_path, req->target_path) == 0)
		return csi_error_set(st, CSI_INVALID_ARGUMENT,
				     "target path and staging path are the same");
	/* file-system options were applied at stage; the per-mount ones apply to the bind too */
	if (csi_mount_options(req->cap.mount_flags, req->cap.n_mount_flags, &flags, data,
			      sizeof(data)) < 0)
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "invalid mount flags");
	flags = csi_mount_bind_flags(flags);
	if (req->readonly || req->cap.access_mode == 2)
		flags |= MS_RDONLY;
	if ((r = csi_node_lock(n, req->volume_id, st)) != CSI_OK)
		return r;
	r = req->cap.block ? publish_block(n, req, flags, st) : publish_fs(n, req, flags, st);
	csi_node_unlock(n, req->volume_id);
	return r;
}

enum csi_code csi_node_unpublish(struct csi_node *n, const char *volume_id, const char *target_path,
				 struct csi_error *st)
{
	return csi_node_release_path(n, volume_id, "target path", target_path, st);
}
