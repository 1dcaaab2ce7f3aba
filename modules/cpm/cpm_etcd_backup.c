/* cpm etcd backup: etcd's snapshot to a file, as `etcdctl snapshot save` writes it (the db, then
 * its sha256), checked, gzip'ed or tar.gz'ed by the name, written only when the free-space rule
 * of Deckhouse's backup script holds (the file system keeps min_free_percent free with the file
 * written), the older files kept (cpm_etcd.h). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/cpm/cpm_etcd.h"

#define SPACE_CHECK_EVERY ((uint64_t)1 << 20)
#define COPY_CHUNK (64 * 1024)
#define TAR_BLOCK 512
#define TAR_RECORD (20 * TAR_BLOCK)
#define MAX_KEEP 100

enum out_kind { OUT_RAW, OUT_GZ, OUT_TARGZ };

struct space {
	char dir[4096];
	int min_pct;
	uint64_t total;
};

#define fail cpm_etcd_fail

/* Free bytes of the folder's file system and its size. */
static int space_now(const struct space *sp, uint64_t *ret_avail, uint64_t *ret_total)
{
	struct statvfs v;

	if (statvfs(sp->dir, &v) < 0)
		return -errno;
	*ret_avail = (uint64_t)v.f_bavail * v.f_frsize;
	*ret_total = (uint64_t)v.f_blocks * v.f_frsize;
	return 0;
}

/* Whether `avail` free bytes, once `more` are written and `freed` released, keep min_pct of
 * the file system free (Deckhouse: df's available - size*pct >= the archive's size). */
static bool space_ok(const struct space *sp, uint64_t avail, uint64_t more, uint64_t freed)
{
	unsigned __int128 need = (unsigned __int128)sp->total * (unsigned)sp->min_pct;
	unsigned __int128 left = (unsigned __int128)(avail + freed) * 100;

	if (more * (unsigned __int128)100 > left)
		return false;
	return left - (unsigned __int128)more * 100 >= need;
}

static int space_refuse(const struct space *sp, struct etcd_error *err, uint64_t avail,
			uint64_t size, const char *when)
{
	return fail(err, -ENOSPC,
		    "not written: %s (%llu bytes) would leave %llu of %llu bytes free in %s, under "
		    "the %d%% to keep free (--min-free-percent)",
		    when, (unsigned long long)size,
		    (unsigned long long)(avail > size ? avail - size : 0),
		    (unsigned long long)sp->total, sp->dir, sp->min_pct);
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The snapshot's bytes to the raw temporary file, the space checked every MiB. */
struct raw_writer {
	int fd;
	uint64_t written, next_check;
	const struct space *sp;
	struct etcd_error *err;
	bool refused;
};

static int raw_write(void *ud, const void *data, size_t len)
{
	struct raw_writer *w = ud;
	uint64_t avail = 0, total = 0;
	int r = write_all(w->fd, data, len);

	if (r < 0)
		return r;
	w->written += len;
	if (w->written >= w->next_check) {
		w->next_check = w->written + SPACE_CHECK_EVERY;
		if ((r = space_now(w->sp, &avail, &total)) < 0)
			return r;
		if (!space_ok(w->sp, avail, 0, 0)) {
			w->refused = true;
			return space_refuse(w->sp, w->err, avail + w->written, w->written,
					    "the snapshot written so far");
		}
	}
	return 0;
}

static int open_temp(const char *dir, const char *base, const char *what, char *path, size_t n)
{
	int fd, r = str_printf(path, n, "%s/.%s.%ld.%s.tmp", dir, base, (long)getpid(), what);

	if (r < 0)
		return r;
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}

/* ---- gzip and tar ---- */

static void tar_octal(char *field, size_t n, uint64_t v)
{
	/* n-1 octal digits and a NUL; base-256 (GNU) when it does not fit (sizes of 8 GiB up) */
	if (n - 1 < 22 && v >> (3 * (n - 1))) {
		memset(field, 0, n);
		field[0] = (char)0x80;
		for (size_t i = n - 1; i > 0 && v; i--, v >>= 8)
			field[i] = (char)(v & 0xff);
		return;
	}
	for (size_t i = n - 1; i-- > 0; v >>= 3)
		field[i] = (char)('0' + (v & 7));
	field[n - 1] = 0;
}

static int tar_header(const char *name, uint64_t size, unsigned char h[TAR_BLOCK])
{
	unsigned sum = 0;

	memset(h, 0, TAR_BLOCK);
	if (strlen(name) >= 100)
		return -ENAMETOOLONG;
	memcpy(h, name, strlen(name));
	tar_octal((char *)h + 100, 8, 0600);		/* mode */
	tar_octal((char *)h + 108, 8, 0);		/* uid */
	tar_octal((char *)h + 116, 8, 0);		/* gid */
	tar_octal((char *)h + 124, 12, size);		/* size */
	tar_octal((char *)h + 136, 12, (uint64_t)time(NULL)); /* mtime */
	memset(h + 148, ' ', 8);			/* chksum, counted as spaces */
	h[156] = '0';					/* a regular file */
	memcpy(h + 257, "ustar", 6);			/* magic, NUL-ended */
	memcpy(h + 263, "00", 2);			/* version */
	memcpy(h + 265, "root", 4);			/* uname */
	memcpy(h + 297, "root", 4);			/* gname */
	for (size_t i = 0; i < TAR_BLOCK; i++)
		sum += h[i];
	str_printf((char *)h + 148, 8, "%06o", sum & 0777777);
	h[155] = ' ';
	return 0;
}

struct gz {
	z_stream z;
	int fd;
	unsigned char out[COPY_CHUNK];
	uint64_t in_bytes;
};

static int gz_put(struct gz *g, const void *data, size_t len, int flush)
{
	g->z.next_in = (Bytef *)(uintptr_t)data;
	g->z.avail_in = (uInt)len;
	g->in_bytes += len;
	do {
		int zr;

		g->z.next_out = g->out;
		g->z.avail_out = sizeof(g->out);
		zr = deflate(&g->z, flush);
		if (zr == Z_STREAM_ERROR)
			return -EIO;
		int r = write_all(g->fd, g->out, sizeof(g->out) - g->z.avail_out);
		if (r < 0)
			return r;
	} while (g->z.avail_out == 0 || (flush == Z_FINISH && g->z.avail_in));
	return 0;
}

/* raw (len bytes) -> fd as gzip, inside a one-file tar when tar_name is set; the space is
 * checked as it goes. */
static int compress_file(int raw_fd, uint64_t len, int fd, const char *tar_name,
			 const struct space *sp, struct etcd_error *err)
{
	static const unsigned char zeros[TAR_RECORD];
	struct gz *g = calloc(1, sizeof(*g));
	unsigned char *buf = malloc(COPY_CHUNK);
	uint64_t done = 0, next_check = SPACE_CHECK_EVERY, avail = 0, total = 0;
	int r = 0;

	if (!g || !buf) {
		free(g);
		free(buf);
		return -ENOMEM;
	}
	g->fd = fd;
	if (deflateInit2(&g->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g);
		free(buf);
		return -ENOMEM;
	}
	if (tar_name) {
		unsigned char h[TAR_BLOCK];

		if ((r = tar_header(tar_name, len, h)) >= 0)
			r = gz_put(g, h, sizeof(h), Z_NO_FLUSH);
	}
	if (r >= 0 && lseek(raw_fd, 0, SEEK_SET) < 0)
		r = -errno;
	while (r >= 0 && done < len) {
		ssize_t n = read(raw_fd, buf, COPY_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			break;
		}
		done += (uint64_t)n;
		r = gz_put(g, buf, (size_t)n, Z_NO_FLUSH);
		if (r >= 0 && done >= next_check) {
			next_check = done + SPACE_CHECK_EVERY;
			if ((r = space_now(sp, &avail, &total)) >= 0 && !space_ok(sp, avail, 0, 0))
				r = space_refuse(sp, err, avail, 0,
						 "the compressed file and the snapshot so far");
		}
	}
	if (r >= 0 && tar_name) {
		/* the file padded to a block, two zero blocks, the archive padded to a record */
		uint64_t used = TAR_BLOCK + (len + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
		uint64_t end = used + 2 * TAR_BLOCK;

		end = (end + TAR_RECORD - 1) / TAR_RECORD * TAR_RECORD;
		for (uint64_t pad = end - TAR_BLOCK - len; r >= 0 && pad;) {
			size_t n = pad > sizeof(zeros) ? sizeof(zeros) : (size_t)pad;

			r = gz_put(g, zeros, n, Z_NO_FLUSH);
			pad -= n;
		}
	}
	if (r >= 0)
		r = gz_put(g, "", 0, Z_FINISH);
	deflateEnd(&g->z);
	free(g);
	free(buf);
	return r;
}

/* ---- names and rotation ---- */

static enum out_kind out_kind(const char *out)
{
	if (str_has_suffix(out, ".tar.gz"))
		return OUT_TARGZ;
	if (str_has_suffix(out, ".gz"))
		return OUT_GZ;
	return OUT_RAW;
}

/* Where the extension starts: ".tar.gz", ".gz", or the last ".x" of the base name. */
static size_t ext_start(const char *out)
{
	const char *slash = strrchr(out, '/'), *base = slash ? slash + 1 : out, *dot;

	if (str_has_suffix(base, ".tar.gz") && strlen(base) > 7)
		return strlen(out) - 7;
	if (str_has_suffix(base, ".gz") && strlen(base) > 3) {
		size_t n = strlen(out) - 3;
		const char *d2 = NULL;

		for (const char *p = base; p < out + n; p++)
			if (*p == '.')
				d2 = p;
		return d2 && d2 > base ? (size_t)(d2 - out) : n;
	}
	dot = strrchr(base, '.');
	return dot && dot > base ? (size_t)(dot - out) : strlen(out);
}

int cpm_etcd_backup_name(const char *out, unsigned n, char *buf, size_t size)
{
	size_t e = ext_start(out);

	if (n == 0)
		return str_copy(buf, size, out);
	return str_printf(buf, size, "%.*s.%u%s", (int)e, out, n, out + e);
}

static uint64_t file_size_at(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
}

/* Shifts out -> out.1 -> ... -> out.(keep-1) (the last one dropped by the rename over it) and
 * removes copies past keep. */
static int rotate(const char *out, int keep, struct cpm_etcd_backup_result *res)
{
	char from[4200], to[4200];

	for (unsigned n = (unsigned)keep; n < MAX_KEEP + 1; n++) {
		if (cpm_etcd_backup_name(out, n, to, sizeof(to)) < 0)
			return -ENAMETOOLONG;
		if (unlink(to) == 0)
			res->removed++;
	}
	for (int n = keep - 1; n >= 1; n--) {
		if (cpm_etcd_backup_name(out, (unsigned)n - 1, from, sizeof(from)) < 0 ||
		    cpm_etcd_backup_name(out, (unsigned)n, to, sizeof(to)) < 0)
			return -ENAMETOOLONG;
		if (rename(from, to) == 0)
			res->rotated++;
		else if (errno != ENOENT)
			return -errno;
	}
	return 0;
}

static void fsync_dir(const char *dir)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
}

/* ---- the backup ---- */

int cpm_etcd_backup(struct etcd_client *c, const struct cpm_etcd_backup_opts *o,
		    struct cpm_etcd_backup_result *ret, struct etcd_error *err)
{
	struct cpm_etcd_backup_result res = { 0 };
	struct etcd_snapshot_info info = { 0 };
	struct etcd_status st;
	struct space sp = { .min_pct = o->min_free_percent };
	struct raw_writer w = { .fd = -1, .sp = &sp, .err = err, .next_check = SPACE_CHECK_EVERY };
	char raw_path[4200] = "", gz_path[4200] = "", base[256], tar_name[256], last[4200];
	char dcopy[4096], bcopy[4096];
	enum out_kind kind = out_kind(o->out ? o->out : "");
	int64_t t0 = now_mono_ns();
	uint64_t avail = 0, freed;
	int gz_fd = -1, r;

	if (!o->out || !o->out[0] || str_has_suffix(o->out, "/") || o->keep < 1 ||
	    o->keep > MAX_KEEP || o->min_free_percent < 0 || o->min_free_percent > 100)
		return fail(err, -EINVAL, "bad backup options");
	if (str_copy(dcopy, sizeof(dcopy), o->out) < 0 || str_copy(bcopy, sizeof(bcopy), o->out) < 0 ||
	    str_copy(sp.dir, sizeof(sp.dir), dirname(dcopy)) < 0 ||
	    str_copy(base, sizeof(base), basename(bcopy)) < 0)
		return fail(err, -ENAMETOOLONG, "the output name is too long");
	if ((r = space_now(&sp, &avail, &sp.total)) < 0)
		return fail(err, r, "cannot read the free space of %s: %s", sp.dir, strerror(-r));

	/* 1. before anything is written: the db's size against the rule */
	if ((r = etcd_status(c, o->endpoint, &st, err)) < 0)
		return r;
	freed = o->keep == 1 ? file_size_at(o->out) : 0;
	if (!space_ok(&sp, avail, (uint64_t)st.db_size + 32, freed))
		return space_refuse(&sp, err, avail + freed, (uint64_t)st.db_size + 32,
				    "a snapshot of the db's size");

	/* 2. the snapshot, checked, to a temporary file next to the output */
	if ((w.fd = open_temp(sp.dir, base, "snapshot", raw_path, sizeof(raw_path))) < 0) {
		r = fail(err, w.fd, "cannot create a file in %s: %s", sp.dir, strerror(-w.fd));
		raw_path[0] = 0;
		goto out;
	}
	r = etcd_snapshot(c, o->endpoint, o->total_timeout_ns, raw_write, &w, &info, err);
	if (r >= 0 && fsync(w.fd) < 0)
		r = fail(err, -errno, "fsync %s: %s", raw_path, strerror(errno));
	if (r < 0)
		goto out;
	res.db_size = info.db_size;
	res.messages = info.messages;
	res.file_size = w.written;

	/* 3. compressed by the name */
	if (kind != OUT_RAW) {
		size_t e = strlen(base) - (kind == OUT_TARGZ ? 7 : 0);

		str_printf(tar_name, sizeof(tar_name), "%.*s.snapshot", (int)e, base);
		if ((gz_fd = open_temp(sp.dir, base, "gz", gz_path, sizeof(gz_path))) < 0) {
			r = fail(err, gz_fd, "cannot create a file in %s: %s", sp.dir,
				 strerror(-gz_fd));
			gz_path[0] = 0;
			goto out;
		}
		r = compress_file(w.fd, w.written, gz_fd, kind == OUT_TARGZ ? tar_name : NULL,
				  &sp, err);
		if (r < 0 && !err->message[0])
			fail(err, r, "compressing: %s", strerror(-r));
		if (r >= 0 && fsync(gz_fd) < 0)
			r = fail(err, -errno, "fsync: %s", strerror(errno));
		if (r < 0)
			goto out;
		res.file_size = file_size_at(gz_path);
		unlink(raw_path);
		raw_path[0] = 0;
	}

	/* 4. the rule, with the file written (and the file it replaces counted as freed) */
	if ((r = space_now(&sp, &avail, &sp.total)) < 0)
		goto out;
	if (o->keep > 1 && cpm_etcd_backup_name(o->out, (unsigned)o->keep - 1, last, sizeof(last)) >= 0)
		freed = file_size_at(last);
	else
		freed = file_size_at(o->out);
	if (!space_ok(&sp, avail + res.file_size, res.file_size, freed)) {
		r = space_refuse(&sp, err, avail + res.file_size + freed, res.file_size, "the backup file");
		goto out;
	}

	/* 5. the older files shifted, the new one renamed into place */
	if ((r = rotate(o->out, o->keep, &res)) < 0) {
		fail(err, r, "keeping the older files: %s", strerror(-r));
		goto out;
	}
	if (rename(kind == OUT_RAW ? raw_path : gz_path, o->out) < 0) {
		r = fail(err, -errno, "rename to %s: %s", o->out, strerror(errno));
		goto out;
	}
	if (kind == OUT_RAW)
		raw_path[0] = 0;
	else
		gz_path[0] = 0;
	fsync_dir(sp.dir);
out:
	if (w.fd >= 0)
		close(w.fd);
	if (gz_fd >= 0)
		close(gz_fd);
	if (raw_path[0])
		unlink(raw_path);
	if (gz_path[0])
		unlink(gz_path);
	res.duration_ms = (now_mono_ns() - t0) / NSEC_PER_MSEC;
	if (r >= 0 && ret)
		*ret = res;
	return r;
}
