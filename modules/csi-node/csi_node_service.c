/* The node service: set-up, shared checks, NodeStageVolume and NodeUnstageVolume. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/keylock.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/csi-node/csi_node_exec.h"
#include "modules/csi-node/csi_node_internal.h"

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

int csi_node_new(const struct csi_node_config *cfg, struct csi_node **ret)
{
	struct csi_node *n = calloc(1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	n->cfg = *cfg;
	if (keylock_new(CSI_NODE_MAX_INFLIGHT, &n->inflight) < 0) {
		free(n);
		return -ENOMEM;
	}
	n->by_id_dir = dup_or_null(cfg->devices.by_id_dir);
	n->sysfs = dup_or_null(cfg->devices.sysfs);
	n->node_id = dup_or_null(cfg->node_id);
	if ((cfg->devices.by_id_dir && !n->by_id_dir) || (cfg->devices.sysfs && !n->sysfs) ||
	    (cfg->node_id && !n->node_id))
		goto oom;
	n->cfg.devices.by_id_dir = n->by_id_dir;
	n->cfg.devices.sysfs = n->sysfs;
	n->cfg.node_id = n->node_id;
	n->cfg.topology = NULL;
	n->cfg.n_topology = 0;
	if (cfg->n_topology) {
		if (!(n->topology = calloc(cfg->n_topology, sizeof(*n->topology))))
			goto oom;
		n->cfg.topology = n->topology;
		for (size_t i = 0; i < cfg->n_topology; i++) {
			n->topology[i].key = strdup(cfg->topology[i].key);
			n->topology[i].value =
			    strdup(cfg->topology[i].value ? cfg->topology[i].value : "");
			n->cfg.n_topology++;
			if (!n->topology[i].key || !n->topology[i].value)
				goto oom;
		}
	}
	if (n->cfg.mkfs_timeout_ns <= 0)
		n->cfg.mkfs_timeout_ns = 600 * NSEC_PER_SEC;
	if (!n->cfg.cancel)
		n->cfg.cancel = cancel_root();
	*ret = n;
	return 0;
oom:
	csi_node_free(n);
	return -ENOMEM;
}

void csi_node_free(struct csi_node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->cfg.n_topology; i++) {
		free((char *)n->topology[i].key);
		free((char *)n->topology[i].value);
	}
	free(n->topology);
	keylock_free(n->inflight);
	free(n->by_id_dir);
	free(n->sysfs);
	free(n->node_id);
	free(n);
}

const struct csi_node_config *csi_node_get_config(const struct csi_node *n)
{
	return &n->cfg;
}

enum csi_code csi_node_lock(struct csi_node *n, const char *volume_id, struct csi_error *st)
{
	int r = keylock_try(n->inflight, volume_id);

	if (r == -ENOSPC)
		return csi_error_set(
		    st, CSI_ABORTED,
		    "too many operations in flight (%d): try volume %s again later",
		    CSI_NODE_MAX_INFLIGHT, volume_id);
	if (r < 0)
		return csi_error_set(st, CSI_ABORTED,
				     "an operation on volume %s is already in progress", volume_id);
	return csi_error_ok(st);
}

void csi_node_unlock(struct csi_node *n, const char *volume_id)
{
	keylock_release(n->inflight, volume_id);
}

enum csi_code csi_node_release_path(struct csi_node *n, const char *volume_id, const char *what,
				    const char *path, struct csi_error *st)
{
	bool staging = strcmp(what, "staging target path") == 0;
	enum csi_code code;

	if ((code = csi_node_check_id(volume_id, st)) != CSI_OK ||
	    (code = csi_node_check_path(what, path, st)) != CSI_OK ||
	    (code = csi_node_lock(n, volume_id, st)) != CSI_OK)
		return code;
	code = csi_node_cleanup_path(n, volume_id, path, true, st);
	if (code == CSI_OK)
		log_info(staging ? "volume unstaged" : "volume unpublished",
			 KV_S("volume", volume_id), KV_S(staging ? "path" : "target", path));
	csi_node_unlock(n, volume_id);
	return code;
}

enum csi_code csi_node_check_id(const char *volume_id, struct csi_error *st)
{
	if (!volume_id || !*volume_id)
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "volume id is missing");
	if (!csi_volume_id_valid(volume_id))
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "invalid volume id \"%.80s\"",
				     volume_id);
	return CSI_OK;
}

enum csi_code csi_node_check_path(const char *what, const char *path, struct csi_error *st)
{
	if (!path || !*path)
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "%s is missing", what);
	if (path[0] != '/')
		return csi_error_set(st, CSI_INVALID_ARGUMENT,
				     "%s \"%.200s\" is not an absolute path", what, path);
	if (strlen(path) >= PATH_MAX - 16)
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "%s \"%.200s...\" is too long", what,
				     path);
	for (const char *p = path; *p; p++)
		if (p[0] == '/' && p[1] == '.' && p[2] == '.' && (p[3] == '/' || p[3] == '\0'))
			return csi_error_set(st, CSI_INVALID_ARGUMENT,
					     "%s \"%.200s\" contains \"..\"", what, path);
	return CSI_OK;
}

bool csi_node_access_mode_valid(int mode, bool block)
{
	switch (mode) {
	case 1: /* SINGLE_NODE_WRITER */
	case 2: /* SINGLE_NODE_READER_ONLY */
	case 6: /* SINGLE_NODE_SINGLE_WRITER */
	case 7: /* SINGLE_NODE_MULTI_WRITER */
		return true;
	case 5: /* MULTI_NODE_MULTI_WRITER: io2 Multi-Attach, block only */
		return block;
	default:
		return false;
	}
}

enum csi_code csi_node_check_cap(const struct csi_cap *cap, const char **ret_fstype,
				 struct csi_error *st)
{
	if (!cap->present)
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "volume capability is missing");
	int mode = cap->no_access_type ? -1 : cap->access_mode;

	if (!csi_node_access_mode_valid(mode, cap->block))
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "access mode %d is not supported%s",
				     mode, mode == 5 ? " for a file system volume" : "");
	if (cap->block) {
		*ret_fstype = NULL;
		return CSI_OK;
	}
	const char *fs = cap->fs_type && *cap->fs_type ? cap->fs_type : "ext4";
	static const char *const known[] = { "ext2", "ext3", "ext4", "xfs" };
	for (size_t i = 0; i < ARRAY_SIZE(known); i++) {
		if (strcasecmp(fs, known[i]) == 0) {
			*ret_fstype = known[i];
			return CSI_OK;
		}
	}
	if (strcasecmp(fs, "ntfs") == 0)
		return csi_error_set(st, CSI_INVALID_ARGUMENT,
				     "fstype ntfs is supported on Windows nodes only");
	return csi_error_set(st, CSI_INVALID_ARGUMENT,
			     "fstype \"%.40s\" is not supported (ext2, ext3, ext4, xfs)", fs);
}

int csi_node_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	struct stat st;

	if (str_copy(buf, sizeof(buf), path) < 0)
		return -ENAMETOOLONG;
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = c;
		if (!c)
			break;
	}
	if (stat(path, &st) < 0)
		/* a dead mount point: the caller's state check repairs it */
		return csi_mount_error_is_corrupted(errno) ? 0 : -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

enum csi_code csi_node_device_for(struct csi_node *n, const char *volume_id,
				  const struct csi_kv *pctx, size_t npctx,
				  const struct csi_kv *vctx, size_t nvctx, char *dev, size_t devlen,
				  struct csi_error *st)
{
	char msg[768];
	const char *dp = csi_kv_get(pctx, npctx, "devicePath");
	const char *part = csi_kv_get(vctx, nvctx, "partition");
	int r = csi_node_find_device(&n->cfg.devices, volume_id, dp, part, dev, devlen, msg,
				     sizeof(msg));

	switch (r) {
	case 0:
		return CSI_OK;
	case -EINVAL:
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "%s", msg);
	case -ENOENT:
		return csi_error_set(st, CSI_NOT_FOUND, "%s", msg);
	case -EMEDIUMTYPE:
		return csi_error_set(st, CSI_FAILED_PRECONDITION, "refusing to use the device: %s",
				     msg);
	case -ENOTBLK:
		return csi_error_set(st, CSI_FAILED_PRECONDITION, "%s", msg);
	default:
		return csi_error_set(st, CSI_INTERNAL, "finding the device of volume %s: %s",
				     volume_id, strerror(-r));
	}
}

enum csi_code csi_node_check_owner(struct csi_node *n, dev_t dev, const char *volume_id,
				   const char *path, struct csi_error *st)
{
	char msg[512];
	int r;

	if (major(dev) == 0)
		return csi_error_set(st, CSI_FAILED_PRECONDITION,
				     "%s is not a block device mount, not touching it", path);
	r = csi_node_device_check(&n->cfg.devices, dev, volume_id, msg, sizeof(msg));
	if (r == -EMEDIUMTYPE)
		return csi_error_set(st, CSI_FAILED_PRECONDITION,
				     "%s is not volume %s, not touching it: %s", path, volume_id,
				     msg);
	/* a device that has gone away, or one we cannot identify, is accepted */
	return CSI_OK;
}

int csi_node_run(struct csi_node *n, const char *const *argv, const char *volume_id, char *msg,
		 size_t msglen)
{
	_cleanup_buf_ struct buf out = BUF_INIT(CSI_EXEC_MAX_OUTPUT + 1);
	int64_t t0 = now_mono_ns();
	int r = csi_exec(argv, n->cfg.mkfs_timeout_ns, n->cfg.cancel, &out);

	log_v(4, "ran program", KV_S("program", argv[0]), KV_S("volume", volume_id),
	      KV_I("result", r), KV_D("seconds", (double)(now_mono_ns() - t0) / 1e9));
	if (msglen)
		msg[0] = '\0';
	if (r != 0)
		csi_exec_describe(argv, r, &out, msg, msglen);
	return r;
}

/* Removes an empty directory or an empty regular file (a block-volume target). */
static void remove_path(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return;
	if (S_ISDIR(st.st_mode)) {
		if (rmdir(path) < 0 && errno != ENOENT)
			log_v(4, "target directory kept", KV_S("path", path), KV_E(-errno));
	} else if (S_ISREG(st.st_mode) && st.st_size == 0) {
		if (unlink(path) < 0 && errno != ENOENT)
			log_v(4, "target file kept", KV_S("path", path), KV_E(-errno));
	}
}

enum csi_code csi_node_cleanup_path(struct csi_node *n, const char *volume_id, const char *path,
				    bool remove, struct csi_error *st)
{
	struct csi_mount_table t = { 0 };
	enum csi_mount_state state;
	struct csi_mount m;
	struct stat sb;
	int r;

	for (int round = 0; round < 4; round++) {
		csi_mount_table_release(&t);
		if ((r = csi_mount_table_load(NULL, &t)) < 0) {
			csi_error_set(st, CSI_INTERNAL, "reading mountinfo: %s", strerror(-r));
			goto out;
		}
		r = csi_mount_state(path, &t, &state, &m);
		if (r == -ENOENT) {
			r = csi_error_ok(st);
			goto out;
		}
		if (r < 0) {
			csi_error_set(st, CSI_INTERNAL, "checking %s: %s", path, strerror(-r));
			goto out;
		}
		if (state == CSI_MOUNT_NONE)
			break;
		if (state == CSI_MOUNT_MOUNTED) {
			dev_t dev = makedev(m.major, m.minor);
			/* a block volume's target: the device node bound onto a file */
			if (stat(path, &sb) == 0 && S_ISBLK(sb.st_mode))
				dev = sb.st_rdev;
			if ((r = csi_node_check_owner(n, dev, volume_id, path, st)) != CSI_OK)
				goto out;
		} else {
			log_warn("unmounting a corrupted mount point", KV_S("volume", volume_id),
				 KV_S("path", path));
		}
		if ((r = csi_umount(path)) < 0 && r != -EINVAL) {
			csi_error_set(st, CSI_INTERNAL, "unmounting %s: %s", path, strerror(-r));
			goto out;
		}
		log_v(2, "unmounted", KV_S("volume", volume_id), KV_S("path", path));
	}
	if (remove)
		remove_path(path);
	r = csi_error_ok(st);
out:
	csi_mount_table_release(&t);
	return r;
}

/* ---- NodeStageVolume ---- */

struct stage_ctx {
	const struct csi_node_volume_req *req;
	const char *fstype;
	char dev[PATH_MAX];
	struct stat dev_st;
	unsigned long flags;
	char data[4096];
	struct csi_format_opts fmt;
	bool readonly;
};

/* The staging path is already mounted: fine when it is this device with compatible settings. */
static enum csi_code stage_existing(struct csi_node *n, struct stage_ctx *c,
				    const struct csi_mount *m, struct csi_error *st)
{
	const char *vol = c->req->volume_id, *path = c->req->staging_path;

	if (makedev(m->major, m->minor) != c->dev_st.st_rdev) {
		return csi_error_set(
		    st, CSI_FAILED_PRECONDITION,
		    "staging path %s already holds another device (%u:%u, %s), not %s", path,
		    m->major, m->minor, m->source, c->dev);
	}
	if (!csi_fs_compatible(c->fstype, m->fstype))
		return csi_error_set(st, CSI_ALREADY_EXISTS,
				     "volume %s is staged at %s as %s, not %s", vol, path,
				     m->fstype, c->fstype);
	if (!c->readonly && csi_mount_has_option(m->options, "ro"))
		return csi_error_set(st, CSI_ALREADY_EXISTS, "volume %s is staged read-only at %s",
				     vol, path);
	log_v(2, "volume already staged", KV_S("volume", vol), KV_S("path", path),
	      KV_S("device", c->dev));
	return csi_error_ok(st);
}

/* Formats a blank device, or checks the file system already on it. */
static enum csi_code stage_prepare_fs(struct csi_node *n, struct stage_ctx *c, struct csi_error *st)
{
	const char *vol = c->req->volume_id;
	struct csi_probe p;
	int r = csi_fs_probe(c->dev, &p);

	if (r < 0)
		return csi_error_set(st, CSI_INTERNAL, "probing %s: %s", c->dev, strerror(-r));
	if (r == 0) {
		_cleanup_strv_ char **argv = NULL;
		if (c->readonly)
			return csi_error_set(st, CSI_FAILED_PRECONDITION,
					     "%s is blank and the volume is to be mounted "
					     "read-only: not formatting it",
					     c->dev);
		if ((r = csi_mkfs_argv(c->fstype, c->dev, &c->fmt, n->cfg.legacy_xfs, &argv)) < 0)
			return csi_error_set(st, CSI_INTERNAL, "building the mkfs command: %s",
					     strerror(-r));
		log_info("formatting a blank volume", KV_S("volume", vol), KV_S("device", c->dev),
			 KV_S("fstype", c->fstype));
		char msg[768];
		if ((r = csi_node_run(n, (const char *const *)argv, vol, msg, sizeof(msg))) != 0) {
			log_error("formatting failed", KV_S("volume", vol), KV_S("device", c->dev),
				  KV_S("error", msg));
			return csi_error_set(st, CSI_INTERNAL, "formatting %s: %s", c->dev, msg);
		}
		return csi_error_ok(st);
	}
	if (p.ambiguous)
		return csi_error_set(st, CSI_FAILED_PRECONDITION,
				     "%s holds several signatures: not formatting or mounting it",
				     c->dev);
	if (p.pttype[0] && !p.type[0])
		return csi_error_set(
		    st, CSI_FAILED_PRECONDITION,
		    "%s holds a %s partition table: not formatting it (set the volume attribute "
		    "\"partition\" to mount one of its partitions)",
		    c->dev, p.pttype);
	if (!csi_fs_compatible(c->fstype, p.type))
		return csi_error_set(st, CSI_FAILED_PRECONDITION,
				     "%s already holds %s, not %s: not formatting it", c->dev,
				     p.type, c->fstype);
	if (csi_fs_is_ext(p.type) && !c->readonly) {
		const char *argv[] = { "e2fsck", "-p", c->dev, NULL };
		char msg[768];
		r = csi_node_run(n, argv, vol, msg, sizeof(msg));
		if (r < 0) {
			log_error("fsck failed", KV_S("volume", vol), KV_S("device", c->dev),
				  KV_S("error", msg));
			return csi_error_set(st, CSI_INTERNAL, "checking %s: %s", c->dev, msg);
		}
		if (r == 1 || r == 2)
			log_info("fsck corrected errors", KV_S("volume", vol),
				 KV_S("device", c->dev), KV_I("status", r));
		else if (r >= 4)
			return csi_error_set(
			    st, CSI_INTERNAL,
			    "e2fsck found errors on %s that it could not correct (status %d); "
			    "repair the file system by hand: %s",
			    c->dev, r, msg);
	}
	return csi_error_ok(st);
}

static void stage_grow(struct csi_node *n, struct stage_ctx *c)
{
	const char *vol = c->req->volume_id;
	unsigned long long dsize;
	uint64_t fsize, bsize;
	char msg[768];
	_cleanup_strv_ char **argv = NULL;

	if (c->readonly || csi_block_size(c->dev, &dsize) < 0 ||
	    csi_fs_size(c->dev, &fsize, &bsize) < 0)
		return;
	if (dsize <= fsize + bsize)
		return;
	if (csi_resize_argv(c->fstype, c->dev, c->req->staging_path, &argv) < 0)
		return;
	log_info("growing the file system to the device", KV_S("volume", vol),
		 KV_S("device", c->dev), KV_U("fs_bytes", fsize), KV_U("device_bytes", dsize));
	if (csi_node_run(n, (const char *const *)argv, vol, msg, sizeof(msg)) != 0)
		log_warn("growing the file system failed; NodeExpandVolume will retry",
			 KV_S("volume", vol), KV_S("error", msg));
}

static enum csi_code stage_locked(struct csi_node *n, struct stage_ctx *c, struct csi_error *st)
{
	const struct csi_node_volume_req *req = c->req;
	struct csi_mount_table t = { 0 };
	enum csi_mount_state state;
	struct csi_mount m;
	int r;

	if ((r = csi_node_device_for(n, req->volume_id, req->publish_context,
				     req->n_publish_context, req->volume_context,
				     req->n_volume_context, c->dev, sizeof(c->dev), st)) != CSI_OK)
		return r;
	if (stat(c->dev, &c->dev_st) < 0)
		return csi_error_set(st, CSI_NOT_FOUND, "%s: %s", c->dev, strerror(errno));
	if ((r = csi_node_mkdir_p(req->staging_path, 0750)) < 0)
		return csi_error_set(st, CSI_INTERNAL, "creating the staging path %s: %s",
				     req->staging_path, strerror(-r));
	if ((r = csi_mount_table_load(NULL, &t)) < 0)
		return csi_error_set(st, CSI_INTERNAL, "reading mountinfo: %s", strerror(-r));
	r = csi_mount_state(req->staging_path, &t, &state, &m);
	if (r < 0) {
		csi_mount_table_release(&t);
		return csi_error_set(st, CSI_INTERNAL, "checking %s: %s", req->staging_path,
				     strerror(-r));
	}
	if (state == CSI_MOUNT_MOUNTED) {
		r = stage_existing(n, c, &m, st);
		csi_mount_table_release(&t);
		return r;
	}
	csi_mount_table_release(&t);
	if (state == CSI_MOUNT_CORRUPT) {
		log_warn("unmounting a corrupted staging mount", KV_S("volume", req->volume_id),
			 KV_S("path", req->staging_path));
		if ((r = csi_umount(req->staging_path)) < 0 && r != -EINVAL)
			return csi_error_set(st, CSI_INTERNAL, "unmounting the corrupted %s: %s",
					     req->staging_path, strerror(-r));
	}
	if ((r = stage_prepare_fs(n, c, st)) != CSI_OK)
		return r;
	if ((r = csi_mount_fs(c->dev, req->staging_path, c->fstype, c->flags, c->data)) < 0)
		return csi_error_set(st, CSI_INTERNAL, "mounting %s (%s) at %s: %s", c->dev,
				     c->fstype, req->staging_path, strerror(-r));
	log_info("volume staged", KV_S("volume", req->volume_id), KV_S("device", c->dev),
		 KV_S("path", req->staging_path), KV_S("fstype", c->fstype));
	stage_grow(n, c);
	return csi_error_ok(st);
}

enum csi_code csi_node_stage(struct csi_node *n, const struct csi_node_volume_req *req,
			     struct csi_error *st)
{
	struct stage_ctx c = { .req = req };
	char msg[512];
	const char *const *flags = req->cap.mount_flags;
	int r;

	if ((r = csi_node_check_id(req->volume_id, st)) != CSI_OK ||
	    (r = csi_node_check_path("staging target path", req->staging_path, st)) != CSI_OK ||
	    (r = csi_node_check_cap(&req->cap, &c.fstype, st)) != CSI_OK)
		return r;
	if (req->cap.block)
		return csi_error_ok(st); /* a block volume is bound to its target at publish */
	if (csi_format_opts_parse(c.fstype, req->volume_context, req->n_volume_context, &c.fmt, msg,
				  sizeof(msg)) < 0)
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "%s", msg);
	const char *part = csi_kv_get(req->volume_context, req->n_volume_context, "partition");
	long long pn;
	if (part && *part && str_to_ll(part, 0, 999, &pn) < 0)
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "invalid partition \"%.20s\"", part);
	if (csi_mount_options(flags, req->cap.n_mount_flags, &c.flags, c.data, sizeof(c.data)) < 0)
		return csi_error_set(st, CSI_INVALID_ARGUMENT, "invalid mount flags");
	/* xfs refuses a second file system with the same UUID (a clone, a restored snapshot) */
	if (strcmp(c.fstype, "xfs") == 0) {
		const char *nouuid[] = { c.data, "nouuid" };
		char data[sizeof(c.data)];
		unsigned long extra;
		if (csi_mount_options(nouuid, 2, &extra, data, sizeof(data)) < 0)
			return csi_error_set(st, CSI_INVALID_ARGUMENT, "mount flags too long");
		memcpy(c.data, data, sizeof(data));
	}
	c.readonly = (c.flags & MS_RDONLY) || req->cap.access_mode == 2;
	if (c.readonly)
		c.flags |= MS_RDONLY;
	if ((r = csi_node_lock(n, req->volume_id, st)) != CSI_OK)
		return r;
	r = stage_locked(n, &c, st);
	csi_node_unlock(n, req->volume_id);
	return r;
}

/* ---- NodeUnstageVolume ---- */

enum csi_code csi_node_unstage(struct csi_node *n, const char *volume_id, const char *staging_path,
			       struct csi_error *st)
{
	return csi_node_release_path(n, volume_id, "staging target path", staging_path, st);
}
