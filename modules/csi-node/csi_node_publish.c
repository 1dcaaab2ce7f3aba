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
#include "common/grpc/rpc.h"
#include "modules/csi-node/csi_node_internal.h"

/* A mount found on the target: same source and same read-only setting is success, anything
 * else is ALREADY_EXISTS (the CSI code for "published, but incompatibly"). */
static int target_existing(const struct csi_node_volume_req *req, bool same, bool ro_now,
			   bool want_ro, struct csi_node_status *st)
{
	if (!same)
		return csi_node_fail(st, RPC_ALREADY_EXISTS, "target %s already has another mount",
				     req->target_path);
	if (ro_now != want_ro)
		return csi_node_fail(st, RPC_ALREADY_EXISTS,
				     "volume %s is already published at %s %s", req->volume_id,
				     req->target_path, ro_now ? "read-only" : "read-write");
	log_v(2, "volume already published", KV_S("volume", req->volume_id),
	      KV_S("target", req->target_path));
	return csi_node_ok(st);
}

static int load_state(const char *path, struct csi_mount_table *t, enum csi_mount_state *state,
		      struct csi_mount *m, struct csi_node_status *st)
{
	int r;

	csi_mount_table_release(t);
	if ((r = csi_mount_table_load(NULL, t)) < 0)
		return csi_node_fail(st, RPC_INTERNAL, "reading mountinfo: %s", strerror(-r));
	r = csi_mount_state(path, t, state, m);
	if (r == -ENOENT)
		return -ENOENT;
	if (r < 0)
		return csi_node_fail(st, RPC_INTERNAL, "checking %s: %s", path, strerror(-r));
	return RPC_OK;
}

static int unmount_corrupted(const struct csi_node_volume_req *req, struct csi_node_status *st)
{
	int r;

	log_warn("unmounting a corrupted target", KV_S("volume", req->volume_id),
		 KV_S("target", req->target_path));
	if ((r = csi_umount(req->target_path)) < 0 && r != -EINVAL)
		return csi_node_fail(st, RPC_INTERNAL, "unmounting the corrupted %s: %s",
				     req->target_path, strerror(-r));
	return RPC_OK;
}

static int publish_fs(struct csi_node *n, const struct csi_node_volume_req *req,
		      unsigned long flags, struct csi_node_status *st)
{
	struct csi_mount_table t = { 0 };
	enum csi_mount_state state;
	struct csi_mount sm, tm;
	char sroot[PATH_MAX];
	int r;

	r = load_state(req->staging_path, &t, &state, &sm, st);
	if (r == -ENOENT || (r == RPC_OK && state != CSI_MOUNT_MOUNTED)) {
		r = csi_node_fail(st, RPC_FAILED_PRECONDITION, "volume %s is not staged at %s",
				  req->volume_id, req->staging_path);
		goto out;
	}
	if (r != RPC_OK)
		goto out;
	dev_t sdev = makedev(sm.major, sm.minor);
	(void)str_copy(sroot, sizeof(sroot), sm.root);
	if ((r = csi_node_check_owner(n, sdev, req->volume_id, req->staging_path, st)) != RPC_OK)
		goto out;
	if ((r = csi_node_mkdir_p(req->target_path, 0750)) < 0) {
		r = csi_node_fail(st, RPC_INTERNAL, "creating the target %s: %s", req->target_path,
				  strerror(-r));
		goto out;
	}
	if ((r = load_state(req->target_path, &t, &state, &tm, st)) != RPC_OK) {
		if (r == -ENOENT)
			r = csi_node_fail(st, RPC_INTERNAL, "the target %s vanished",
					  req->target_path);
		goto out;
	}
	if (state == CSI_MOUNT_MOUNTED) {
		bool same = makedev(tm.major, tm.minor) == sdev && strcmp(tm.root, sroot) == 0;
		r = target_existing(req, same, csi_mount_has_option(tm.options, "ro"),
				    flags & MS_RDONLY, st);
		goto out;
	}
	if (state == CSI_MOUNT_CORRUPT && (r = unmount_corrupted(req, st)) != RPC_OK)
		goto out;
	if ((r = csi_mount_bind(req->staging_path, req->target_path, flags)) < 0) {
		r = csi_node_fail(st, RPC_INTERNAL, "bind-mounting %s at %s: %s", req->staging_path,
				  req->target_path, strerror(-r));
		goto out;
	}
	log_info("volume published", KV_S("volume", req->volume_id),
		 KV_S("target", req->target_path), KV_B("readonly", flags & MS_RDONLY));
	r = csi_node_ok(st);
out:
	csi_mount_table_release(&t);
	return r;
}

/* The target of a block volume is a file the device node is bound onto. */
static int make_target_file(const char *path, struct csi_node_status *st)
{
	char parent[PATH_MAX];
	struct stat sb;
	int r, fd;

	if (str_copy(parent, sizeof(parent), path) < 0)
		return csi_node_fail(st, RPC_INVALID_ARGUMENT, "target path too long");
	if ((r = csi_node_mkdir_p(dirname(parent), 0750)) < 0)
		return csi_node_fail(st, RPC_INTERNAL, "creating the parent of %s: %s", path,
				     strerror(-r));
	if (lstat(path, &sb) == 0) {
		if (S_ISDIR(sb.st_mode))
			return csi_node_fail(st, RPC_FAILED_PRECONDITION,
					     "the target %s of a block volume is a directory",
					     path);
		return RPC_OK;
	}
	if (errno != ENOENT)
		return RPC_OK; /* a corrupted mount: the state check handles it */
	if ((fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0640)) < 0 &&
	    errno != EEXIST)
		return csi_node_fail(st, RPC_INTERNAL, "creating the target file %s: %s", path,
				     strerror(errno));
	if (fd >= 0)
		close(fd);
	return RPC_OK;
}

static int publish_block(struct csi_node *n, const struct csi_node_volume_req *req,
			 unsigned long flags, struct csi_node_status *st)
{
	struct csi_mount_table t = { 0 };
	enum csi_mount_state state;
	struct csi_mount tm;
	char dev[PATH_MAX];
	struct stat dsb, tsb;
	int r;

	if ((r = csi_node_device_for(n, req->volume_id, req->publish_context,
				     req->n_publish_context, req->volume_context,
				     req->n_volume_context, dev, sizeof(dev), st)) != RPC_OK)
		return r;
	if (stat(dev, &dsb) < 0)
		return csi_node_fail(st, RPC_NOT_FOUND, "%s: %s", dev, strerror(errno));
	if ((r = make_target_file(req->target_path, st)) != RPC_OK)
		return r;
	if ((r = load_state(req->target_path, &t, &state, &tm, st)) != RPC_OK) {
		if (r == -ENOENT)
			r = csi_node_fail(st, RPC_INTERNAL, "the target %s vanished",
					  req->target_path);
		goto out;
	}
	if (state == CSI_MOUNT_MOUNTED) {
		bool same = stat(req->target_path, &tsb) == 0 && S_ISBLK(tsb.st_mode) &&
			    tsb.st_rdev == dsb.st_rdev;
		r = target_existing(req, same, csi_mount_has_option(tm.options, "ro"),
				    flags & MS_RDONLY, st);
		goto out;
	}
	if (state == CSI_MOUNT_CORRUPT && (r = unmount_corrupted(req, st)) != RPC_OK)
		goto out;
	if ((r = csi_mount_bind(dev, req->target_path, flags)) < 0) {
		r = csi_node_fail(st, RPC_INTERNAL, "bind-mounting %s at %s: %s", dev,
				  req->target_path, strerror(-r));
		goto out;
	}
	log_info("block volume published", KV_S("volume", req->volume_id), KV_S("device", dev),
		 KV_S("target", req->target_path), KV_B("readonly", flags & MS_RDONLY));
	r = csi_node_ok(st);
out:
	csi_mount_table_release(&t);
	return r;
}

int csi_node_publish(struct csi_node *n, const struct csi_node_volume_req *req,
		     struct csi_node_status *st)
{
	const char *fstype;
	unsigned long flags = 0;
	char data[4096];
	int r;

	if ((r = csi_node_check_id(req->volume_id, st)) != RPC_OK ||
	    (r = csi_node_check_path("staging target path", req->staging_path, st)) != RPC_OK ||
	    (r = csi_node_check_path("target path", req->target_path, st)) != RPC_OK ||
	    (r = csi_node_check_cap(&req->cap, &fstype, st)) != RPC_OK)
		return r;
	if (strcmp(req->staging_path, req->target_path) == 0)
		return csi_node_fail(st, RPC_INVALID_ARGUMENT,
				     "target path and staging path are the same");
	/* file-system options were applied at stage; the per-mount ones apply to the bind too */
	if (csi_mount_options(req->cap.mount_flags, req->cap.n_mount_flags, &flags, data,
			      sizeof(data)) < 0)
		return csi_node_fail(st, RPC_INVALID_ARGUMENT, "invalid mount flags");
	flags = csi_mount_bind_flags(flags);
	if (req->readonly || req->cap.access_mode == 2)
		flags |= MS_RDONLY;
	if (!csi_node_inflight_begin(n, req->volume_id))
		return csi_node_fail(st, RPC_ABORTED,
				     "an operation on volume %s is already in progress",
				     req->volume_id);
	r = req->cap.block ? publish_block(n, req, flags, st) : publish_fs(n, req, flags, st);
	csi_node_inflight_end(n, req->volume_id);
	return r;
}

int csi_node_unpublish(struct csi_node *n, const char *volume_id, const char *target_path,
		       struct csi_node_status *st)
{
	int r;

	if ((r = csi_node_check_id(volume_id, st)) != RPC_OK ||
	    (r = csi_node_check_path("target path", target_path, st)) != RPC_OK)
		return r;
	if (!csi_node_inflight_begin(n, volume_id))
		return csi_node_fail(st, RPC_ABORTED,
				     "an operation on volume %s is already in progress", volume_id);
	r = csi_node_cleanup_path(n, volume_id, target_path, true, st);
	if (r == RPC_OK)
		log_info("volume unpublished", KV_S("volume", volume_id),
			 KV_S("target", target_path));
	csi_node_inflight_end(n, volume_id);
	return r;
}
