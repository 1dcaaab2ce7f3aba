/* Mount state and mount operations of the node service: /proc/self/mountinfo (never
 * /etc/mtab) read through libmount, with caps, a malformed line failing the whole read; mount
 * options turned into mount(2) flags and data; file-system and bind mounts through the syscall
 * (read-only bind mounts done as the kernel requires: bind, then remount); unmounting; telling
 * a healthy mount point from a stale or corrupted one. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* One line of mountinfo. The strings belong to the table (libmount's), with the kernel's
 * octal escapes (\040 ...) decoded. */
struct csi_mount {
	int id, parent_id;
	unsigned major, minor;
	const char *root;          /* the path inside the file system that is mounted */
	const char *target;        /* the mount point */
	const char *options;       /* per-mount options: "rw,nosuid,relatime" */
	const char *fstype;        /* "ext4", "xfs", "devtmpfs" */
	const char *source;        /* "/dev/nvme1n1" */
	const char *super_options; /* per-superblock options: "rw,errors=remount-ro" */
};

struct libmnt_table;

struct csi_mount_table {
	struct csi_mount *mounts;
	size_t n;
	struct libmnt_table *tb; /* owns the strings */
};

/* Caps on what we accept from the kernel (or a test file). */
#define CSI_MOUNTINFO_MAX_BYTES ((size_t)32 << 20)
#define CSI_MOUNTINFO_MAX_LINES 200000

/* Parses mountinfo text. -EBADMSG on a malformed line, -E2BIG past the caps. */
int csi_mount_table_parse(const char *text, size_t len, struct csi_mount_table *ret);
/* Reads and parses a mountinfo file (NULL: /proc/self/mountinfo). */
int csi_mount_table_load(const char *path, struct csi_mount_table *ret);
void csi_mount_table_release(struct csi_mount_table *t);
/* The top-most mount whose mount point is exactly target (a canonical path), or NULL. */
const struct csi_mount *csi_mount_table_find(const struct csi_mount_table *t, const char *target);
/* How many mounts have the device major:minor as their source. */
size_t csi_mount_table_count_dev(const struct csi_mount_table *t, unsigned major, unsigned minor);

/* True when the comma-separated option list holds opt exactly ("ro" in "ro,relatime"). */
bool csi_mount_has_option(const char *options, const char *opt);

/* The canonical absolute form of path, also when its last component is a dead mount point
 * (the parent is resolved, the last name appended). -ENOENT when it does not exist,
 * -EINVAL for a relative path. */
int csi_mount_canonical(const char *path, char *ret, size_t n);

/* True for the errors a stale or corrupted mount point gives on stat (ENOTCONN, ESTALE, EIO,
 * EACCES, EHOSTDOWN, as Kubernetes' mount-utils counts them); e is positive. */
bool csi_mount_error_is_corrupted(int e);

enum csi_mount_state {
	CSI_MOUNT_NONE,     /* exists, nothing is mounted on it */
	CSI_MOUNT_MOUNTED,  /* a mount point, healthy */
	CSI_MOUNT_CORRUPT,  /* stat fails with a corrupted-mount error */
};

/* The state of path, from mountinfo (t, or the live table when NULL). For a mounted path the
 * mount is copied into *ret_mount when it is not NULL (strings valid while t lives; with a NULL
 * t only the numbers are set and the strings are NULL). -ENOENT when path does not exist. */
int csi_mount_state(const char *path, const struct csi_mount_table *t,
		    enum csi_mount_state *ret_state, struct csi_mount *ret_mount);

/* Turns mount option strings (each may itself be a comma-separated list; double quotes protect
 * commas, as in an SELinux context=) into mount(2) flags and a data string. "defaults" is
 * dropped; bind, rbind, move, remount and the propagation options are refused (-EINVAL), as are
 * options with control characters. data gets the file-system options, comma-separated.
 * -ENAMETOOLONG when data does not fit. */
int csi_mount_options(const char *const *opts, size_t nopts, unsigned long *ret_flags, char *data,
		      size_t datalen);

/* The flags of ret_flags that apply to a bind mount (ro, nosuid, nodev, noexec, atime ones). */
unsigned long csi_mount_bind_flags(unsigned long flags);

/* mount(2) of a file system; -errno. */
int csi_mount_fs(const char *source, const char *target, const char *fstype, unsigned long flags,
		 const char *data);
/* Bind-mounts source onto target, then remounts it with the per-mount flags (read-only ...)
 * when there are any; a failed remount undoes the bind, so a read-only request never leaves
 * a writable mount behind. -errno. */
int csi_mount_bind(const char *source, const char *target, unsigned long flags);
/* Unmounts target (not following a symlink); a stale mount is detached lazily when a normal
 * unmount fails with a corrupted-mount error. -EINVAL when target is not a mount point. */
int csi_umount(const char *target);

/* The block device size in bytes (BLKGETSIZE64) of a device node or of a bind-mounted
 * device file. */
int csi_block_size(const char *path, unsigned long long *ret);
