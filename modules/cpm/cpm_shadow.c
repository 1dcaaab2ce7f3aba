/* The shadow root of `cpm converge --dry-run` (cpm_shadow.h). */
#include "modules/cpm/cpm_shadow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/fileutil.h"
#include "common/base/textdiff.h"
#include "modules/cpm/cpm_backup.h"
#include "modules/cpm/cpm_files.h"

#define KUBE_DIR "/etc/kubernetes"
#define SHADOW_FILE_MAX ((size_t)16 << 20)

/* The folder that is never copied nor compared (relative to /etc/kubernetes). */
static bool skipped(const char *rel)
{
	return strcmp(rel, "deckhouse/backup") == 0;
}

/* cp -a of the tree src to dst (regular files, folders, symbolic links). */
static int copy_tree(const char *src, const char *dst, const char *rel)
{
	DIR *d = opendir(src);
	struct dirent *e;
	int r = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	if (mkdir(dst, 0755) < 0 && errno != EEXIST) {
		closedir(d);
		return -errno;
	}
	while (r >= 0 && (e = readdir(d))) {
		char s[4096], t[4096], sub[4096], *data = NULL;
		struct stat st;
		size_t len = 0;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (snprintf(s, sizeof(s), "%s/%s", src, e->d_name) >= (int)sizeof(s) ||
		    snprintf(t, sizeof(t), "%s/%s", dst, e->d_name) >= (int)sizeof(t) ||
		    snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", e->d_name) >=
			(int)sizeof(sub)) {
			r = -ENAMETOOLONG;
			break;
		}
		if (lstat(s, &st) < 0) {
			r = -errno;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			if (!skipped(sub))
				r = copy_tree(s, t, sub);
		} else if (S_ISLNK(st.st_mode)) {
			char lnk[4096];
			ssize_t k = readlink(s, lnk, sizeof(lnk) - 1);
			if (k < 0 || (lnk[k] = 0, symlink(lnk, t) < 0))
				r = -errno;
		} else if (S_ISREG(st.st_mode)) {
			r = file_read_all(s, SHADOW_FILE_MAX, &data, &len);
			if (r >= 0)
				r = file_write_atomic(t, data, len, st.st_mode & 07777);
			free(data);
		}
	}
	closedir(d);
	return r < 0 ? r : 0;
}

int cpm_shadow_make(const char *root, char *shadow, size_t n)
{
	char src[4096], dst[4096];
	const char *tmp = getenv("TMPDIR");
	int r;

	if (snprintf(shadow, n, "%s/cpm-dry-run.XXXXXX", tmp && *tmp ? tmp : "/tmp") >= (int)n)
		return -ENAMETOOLONG;
	if (!mkdtemp(shadow))
		return -errno;
	r = cpm_path(root, KUBE_DIR, src, sizeof(src));
	if (r >= 0)
		r = cpm_path(shadow, KUBE_DIR, dst, sizeof(dst));
	if (r >= 0)
		r = cpm_mkdirs_for(dst);
	if (r >= 0)
		r = copy_tree(src, dst, "");
	if (r < 0)
		cpm_shadow_remove(shadow);
	return r;
}

void cpm_shadow_remove(const char *shadow)
{
	cpm_remove_tree(shadow);
}

/* Files whose change is shown as a diff: no key in them. */
static bool shown(const char *rel)
{
	return strncmp(rel, "manifests/", 10) == 0 || strncmp(rel, "deckhouse/kubeadm/", 18) == 0;
}

/* One file: rel under both trees. 1 when it would change. */
static int compare(const char *real, const char *shadow, const char *rel, FILE *out)
{
	char *a = NULL, *b = NULL, na[4200], nb[4200];
	size_t la = 0, lb = 0;
	struct stat sa, sb;
	bool has_a = lstat(real, &sa) == 0, has_b = lstat(shadow, &sb) == 0;
	int r = 0;

	if (has_a && S_ISREG(sa.st_mode) && file_read_all(real, SHADOW_FILE_MAX, &a, &la) < 0)
		has_a = false;
	if (has_b && S_ISREG(sb.st_mode) && file_read_all(shadow, SHADOW_FILE_MAX, &b, &lb) < 0)
		has_b = false;
	if (has_a && has_b && la == lb && (!la || memcmp(a, b, la) == 0) &&
	    (sa.st_mode & 07777) == (sb.st_mode & 07777))
		goto out;
	r = 1;
	fprintf(out, "[would %s] %s%s\n", !has_a ? "create" : !has_b ? "remove" : "replace",
		KUBE_DIR "/", rel);
	if (has_a && has_b && la == lb && (!la || memcmp(a, b, la) == 0)) {
		fprintf(out, "  mode %04o -> %04o\n", sa.st_mode & 07777, sb.st_mode & 07777);
	} else if (shown(rel) && (!a || !memchr(a, 0, la)) && (!b || !memchr(b, 0, lb))) {
		_cleanup_buf_ struct buf d = BUF_INIT(0);
		str_printf(na, sizeof(na), "a" KUBE_DIR "/%s", rel);
		str_printf(nb, sizeof(nb), "b" KUBE_DIR "/%s", rel);
		int k = text_diff(a ? a : "", b ? b : "", has_a ? na : "/dev/null",
				  has_b ? nb : "/dev/null", 3, &d);
		if (k == 1)
			fwrite(d.data, 1, d.len, out);
		else if (k < 0)
			fprintf(out, "  (no diff: %s)\n", strerror(-k));
	} else {
		fprintf(out, "  (content not shown: it may hold keys)\n");
	}
out:
	free(a);
	free(b);
	return r;
}

/* Walks rel in the shadow (real_side false: every file compared with the real one) or in the
 * real tree (true: only the files the shadow no longer has, which would be removed). */
static int walk(const char *root, const char *shadow, const char *rel, bool real_side, FILE *out)
{
	char dir[4096], top[4096];
	DIR *d;
	struct dirent *e;
	int n = 0, r = cpm_path(real_side ? root : shadow, KUBE_DIR, top, sizeof(top));

	if (r < 0)
		return r;
	if (str_printf(dir, sizeof(dir), "%s%s%s", top, *rel ? "/" : "", rel) < 0)
		return -ENAMETOOLONG;
	if (!(d = opendir(dir)))
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		char sub[4096], p[4096], ra[4200], rb[4200], ta[4096], tb[4096];
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (str_printf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", e->d_name) < 0 ||
		    str_printf(p, sizeof(p), "%s/%s", dir, e->d_name) < 0 || lstat(p, &st) < 0 ||
		    skipped(sub))
			continue;
		if (S_ISDIR(st.st_mode)) {
			int k = walk(root, shadow, sub, real_side, out);
			if (k < 0) {
				n = k;
				break;
			}
			n += k;
			continue;
		}
		if (cpm_path(root, KUBE_DIR, ta, sizeof(ta)) < 0 ||
		    cpm_path(shadow, KUBE_DIR, tb, sizeof(tb)) < 0 ||
		    str_printf(ra, sizeof(ra), "%s/%s", ta, sub) < 0 ||
		    str_printf(rb, sizeof(rb), "%s/%s", tb, sub) < 0)
			continue;
		if (real_side) { /* the second walk: only what the shadow lost */
			struct stat x;
			if (lstat(rb, &x) == 0)
				continue;
		}
		n += compare(ra, rb, sub, out);
	}
	closedir(d);
	return n;
}

int cpm_shadow_diff(const char *root, const char *shadow, FILE *out)
{
	int a = walk(root, shadow, "", false, out), b;

	if (a < 0)
		return a;
	b = walk(root, shadow, "", true, out);
	return b < 0 ? b : a + b;
}
