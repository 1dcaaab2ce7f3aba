/* The mount table (read through libmount) and mount(2) / umount2(2) wrappers for the node
 * service. */
#include "modules/csi-node/csi_node_mount.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <libmount.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/fileutil.h"
#include "common/base/log.h"

void csi_mount_table_release(struct csi_mount_table *t)
{
	if (!t)
		return;
	free(t->mounts);
	mnt_unref_table(t->tb);
	*t = (struct csi_mount_table){ 0 };
}

/* A malformed line fails the whole parse (libmount would skip it). */
static int parse_error(struct libmnt_table *tb, const char *filename, int line)
{
	return -EBADMSG;
}

/* True when the first non-empty line starts with the two ids of a mountinfo line: libmount
 * guesses the format from the first line and must not read the text as fstab. */
static bool looks_like_mountinfo(const char *text)
{
	unsigned a, b;

	text += strspn(text, "\n");
	return !*text || sscanf(text, "%u %u", &a, &b) == 2;
}

/* The mounts of a parsed table as csi_mount entries (strings owned by the table). */
static int fill(struct csi_mount_table *t)
{
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	int r = 0;

	if (!it || !(t->mounts = calloc((size_t)mnt_table_get_nents(t->tb) + 1,
					sizeof(*t->mounts)))) {
		mnt_free_iter(it);
		return -ENOMEM;
	}
	while (r == 0 && mnt_table_next_fs(t->tb, it, &fs) == 0) {
		struct csi_mount *m = &t->mounts[t->n++];
		dev_t dev = mnt_fs_get_devno(fs);
		const char *src = mnt_fs_get_source(fs), *opts = mnt_fs_get_vfs_options(fs),
			   *super = mnt_fs_get_fs_options(fs);
		m->id = mnt_fs_get_id(fs);
		m->parent_id = mnt_fs_get_parent_id(fs);
		m->major = major(dev);
		m->minor = minor(dev);
		m->root = mnt_fs_get_root(fs);
		m->target = mnt_fs_get_target(fs);
		m->fstype = mnt_fs_get_fstype(fs);
		m->options = opts ? opts : "";
		m->source = src ? src : "";
		m->super_options = super ? super : "";
		if (!m->root || !m->target || !m->fstype)
			r = -EBADMSG;
	}
	mnt_free_iter(it);
	return r;
}

int csi_mount_table_parse(const char *text, size_t len, struct csi_mount_table *ret)
{
	struct csi_mount_table t = { 0 };
	_cleanup_free_ char *copy = NULL;
	size_t lines = 0;
	FILE *f;
	int r;

	if (len > CSI_MOUNTINFO_MAX_BYTES)
		return -E2BIG;
	for (size_t i = 0; i < len; i++)
		if (text[i] == '\n')
			lines++;
	if (lines + 1 > CSI_MOUNTINFO_MAX_LINES)
		return -E2BIG;
	if (!(copy = strndup(text, len)))
		return -ENOMEM;
	if (strlen(copy) != len || !looks_like_mountinfo(copy))
		return -EBADMSG;
	if (!(t.tb = mnt_new_table()))
		return -ENOMEM;
	mnt_table_set_parser_errcb(t.tb, parse_error);
	if (strspn(copy, "\n") < len) { /* fmemopen refuses an empty buffer */
		if (!(f = fmemopen(copy, len, "r"))) {
			r = -errno;
			goto out;
		}
		r = mnt_table_parse_stream(t.tb, f, "mountinfo");
		fclose(f);
		if (r < 0) {
			r = r == -ENOMEM ? -ENOMEM : -EBADMSG;
			goto out;
		}
	}
	if ((r = fill(&t)) < 0)
		goto out;
	*ret = t;
	return 0;
out:
	csi_mount_table_release(&t);
	return r;
}

int csi_mount_table_load(const char *path, struct csi_mount_table *ret)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r;

	r = file_read_all(path ? path : "/proc/self/mountinfo", CSI_MOUNTINFO_MAX_BYTES, &text,
			  &len);
	if (r < 0)
		return r == -EFBIG ? -E2BIG : r;
	return csi_mount_table_parse(text, len, ret);
}

const struct csi_mount *csi_mount_table_find(const struct csi_mount_table *t, const char *target)
{
	for (size_t i = t->n; i > 0; i--)
		if (strcmp(t->mounts[i - 1].target, target) == 0)
			return &t->mounts[i - 1];
	return NULL;
}

size_t csi_mount_table_count_dev(const struct csi_mount_table *t, unsigned major, unsigned minor)
{
	size_t n = 0;

	for (size_t i = 0; i < t->n; i++)
		if (t->mounts[i].major == major && t->mounts[i].minor == minor)
			n++;
	return n;
}

bool csi_mount_has_option(const char *options, const char *opt)
{
	size_t l = strlen(opt);

	for (const char *p = options; p && *p;) {
		const char *c = strchr(p, ',');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		if (n == l && strncmp(p, opt, l) == 0)
			return true;
		p = c ? c + 1 : NULL;
	}
	return false;
}

bool csi_mount_error_is_corrupted(int e)
{
	return e == ENOTCONN || e == ESTALE || e == EIO || e == EACCES || e == EHOSTDOWN;
}

int csi_mount_canonical(const char *path, char *ret, size_t n)
{
	char buf[PATH_MAX], parent[PATH_MAX], tmp[PATH_MAX];

	if (!path || path[0] != '/')
		return -EINVAL;
	if (realpath(path, buf))
		return str_copy(ret, n, buf);
	if (errno == ENOENT || errno == ENOTDIR)
		return -ENOENT;
	if (!csi_mount_error_is_corrupted(errno))
		return -errno;
	/* A dead mount point: resolve the parent and keep the last name as it is. */
	if (str_copy(tmp, sizeof(tmp), path) < 0)
		return -ENAMETOOLONG;
	const char *dir = dirname(tmp);
	if (!realpath(dir, parent))
		return -errno;
	if (str_copy(tmp, sizeof(tmp), path) < 0)
		return -ENAMETOOLONG;
	const char *base = basename(tmp);
	if (strcmp(parent, "/") == 0)
		return str_printf(ret, n, "/%s", base) < 0 ? -ENAMETOOLONG : 0;
	return str_printf(ret, n, "%s/%s", parent, base) < 0 ? -ENAMETOOLONG : 0;
}

int csi_mount_state(const char *path, const struct csi_mount_table *t,
		    enum csi_mount_state *ret_state, struct csi_mount *ret_mount)
{
	struct csi_mount_table own = { 0 };
	char canon[PATH_MAX];
	struct stat st;
	int r;

	if (stat(path, &st) < 0) {
		int e = errno;
		if (e == ENOENT || e == ENOTDIR)
			return -ENOENT;
		if (!csi_mount_error_is_corrupted(e))
			return -e;
		if (ret_mount)
			*ret_mount = (struct csi_mount){ 0 };
		*ret_state = CSI_MOUNT_CORRUPT;
		return 0;
	}
	if ((r = csi_mount_canonical(path, canon, sizeof(canon))) < 0)
		return r;
	if (!t) {
		if ((r = csi_mount_table_load(NULL, &own)) < 0)
			return r;
		t = &own;
	}
	const struct csi_mount *m = csi_mount_table_find(t, canon);
	*ret_state = m ? CSI_MOUNT_MOUNTED : CSI_MOUNT_NONE;
	if (ret_mount) {
		*ret_mount = m ? *m : (struct csi_mount){ 0 };
		if (m && t == &own) {
			ret_mount->root = ret_mount->target = ret_mount->options = NULL;
			ret_mount->fstype = ret_mount->source = ret_mount->super_options = NULL;
		}
	}
	csi_mount_table_release(&own);
	return 0;
}

struct opt_flag {
	const char *name;
	unsigned long set, clear;
};

static const struct opt_flag opt_flags[] = {
	{ "ro", MS_RDONLY, 0 },
	{ "rw", 0, MS_RDONLY },
	{ "nosuid", MS_NOSUID, 0 },
	{ "suid", 0, MS_NOSUID },
	{ "nodev", MS_NODEV, 0 },
	{ "dev", 0, MS_NODEV },
	{ "noexec", MS_NOEXEC, 0 },
	{ "exec", 0, MS_NOEXEC },
	{ "sync", MS_SYNCHRONOUS, 0 },
	{ "async", 0, MS_SYNCHRONOUS },
	{ "dirsync", MS_DIRSYNC, 0 },
	{ "noatime", MS_NOATIME, 0 },
	{ "atime", 0, MS_NOATIME },
	{ "nodiratime", MS_NODIRATIME, 0 },
	{ "diratime", 0, MS_NODIRATIME },
	{ "relatime", MS_RELATIME, 0 },
	{ "norelatime", 0, MS_RELATIME },
	{ "strictatime", MS_STRICTATIME, 0 },
	{ "nostrictatime", 0, MS_STRICTATIME },
	{ "lazytime", MS_LAZYTIME, 0 },
	{ "nolazytime", 0, MS_LAZYTIME },
	{ "silent", MS_SILENT, 0 },
	{ "loud", 0, MS_SILENT },
	{ "mand", MS_MANDLOCK, 0 },
	{ "nomand", 0, MS_MANDLOCK },
	{ "defaults", 0, 0 },
};

static const char *const refused_opts[] = {
	"bind", "rbind", "move", "remount", "shared", "rshared", "slave", "rslave",
	"private", "rprivate", "unbindable", "runbindable", "make-shared", "make-private",
};

static int add_option(const char *o, size_t len, unsigned long *flags, struct buf *data)
{
	char name[256];

	if (len == 0)
		return 0;
	if (len >= sizeof(name))
		return -EINVAL;
	memcpy(name, o, len);
	name[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return -EINVAL;
	for (size_t i = 0; i < ARRAY_SIZE(refused_opts); i++)
		if (strcmp(name, refused_opts[i]) == 0)
			return -EINVAL;
	for (size_t i = 0; i < ARRAY_SIZE(opt_flags); i++) {
		if (strcmp(name, opt_flags[i].name) == 0) {
			*flags = (*flags & ~opt_flags[i].clear) | opt_flags[i].set;
			return 0;
		}
	}
	/* a file-system option: kept once */
	if (data->len && csi_mount_has_option(data->data, name))
		return 0;
	if (data->len && buf_putc(data, ',') < 0)
		return -ENAMETOOLONG;
	return buf_append(data, name, len) < 0 ? -ENAMETOOLONG : 0;
}

int csi_mount_options(const char *const *opts, size_t nopts, unsigned long *ret_flags, char *data,
		      size_t datalen)
{
	_cleanup_buf_ struct buf d = BUF_INIT(datalen > 0 ? datalen - 1 : 0);
	unsigned long flags = 0;
	int r;

	if (datalen == 0)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < nopts; i++) {
		const char *s = opts[i], *start = s;
		bool quoted = false;
		if (!s)
			continue;
		for (const char *p = s;; p++) {
			if (*p == '"')
				quoted = !quoted;
			if (*p == '\0' || (*p == ',' && !quoted)) {
				if ((r = add_option(start, (size_t)(p - start), &flags, &d)) < 0)
					return r;
				if (*p == '\0')
					break;
				start = p + 1;
			}
		}
		if (quoted)
			return -EINVAL;
	}
	if ((r = str_copy(data, datalen, d.data ? d.data : "")) < 0)
		return r;
	*ret_flags = flags;
	return 0;
}

unsigned long csi_mount_bind_flags(unsigned long flags)
{
	return flags & (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME |
			MS_RELATIME | MS_STRICTATIME);
}

int csi_mount_fs(const char *source, const char *target, const char *fstype, unsigned long flags,
		 const char *data)
{
	if (mount(source, target, fstype, flags, data && *data ? data : NULL) < 0)
		return -errno;
	return 0;
}

/* The per-mount flags a mount point has now, so that a remount keeps the locked ones. */
static unsigned long current_flags(const char *target)
{
	struct statvfs sv;
	unsigned long f = 0;

	if (statvfs(target, &sv) < 0)
		return 0;
	if (sv.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

int csi_mount_bind(const char *source, const char *target, unsigned long flags)
{
	flags = csi_mount_bind_flags(flags);
	if (mount(source, target, NULL, MS_BIND, NULL) < 0)
		return -errno;
	if (!flags)
		return 0;
	unsigned long f = current_flags(target) | flags;
	if ((flags & (MS_NOATIME | MS_RELATIME | MS_STRICTATIME)) != 0)
		f = (f & ~(unsigned long)(MS_NOATIME | MS_RELATIME | MS_STRICTATIME)) |
		    (flags & (MS_NOATIME | MS_RELATIME | MS_STRICTATIME));
	if (mount("none", target, NULL, MS_REMOUNT | MS_BIND | f, NULL) < 0) {
		int e = errno;
		(void)umount2(target, UMOUNT_NOFOLLOW);
		return -e;
	}
	return 0;
}

int csi_umount(const char *target)
{
	if (umount2(target, UMOUNT_NOFOLLOW) == 0)
		return 0;
	int e = errno;
	if (csi_mount_error_is_corrupted(e) && umount2(target, UMOUNT_NOFOLLOW | MNT_DETACH) == 0)
		return 0;
	return -e;
}

int csi_block_size(const char *path, unsigned long long *ret)
{
	uint64_t size;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (ioctl(fd, BLKGETSIZE64, &size) < 0) {
		int e = errno;
		close(fd);
		return e == ENOTTY ? -ENOTBLK : -e;
	}
	close(fd);
	*ret = size;
	return 0;
}
