/* Backups of replaced and removed files, newest 5 folders kept (cpm_backup.h). */
#include "modules/cpm/cpm_backup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/fileutil.h"
#include "modules/cpm/cpm_files.h"

#define BACKUP_FILE_MAX ((size_t)64 << 20)

int cpm_backup_folder(const struct cpm_backup *b, char *buf, size_t n)
{
	char abs[512];
	struct tm tm;
	time_t now = b->now ? b->now : time(NULL);

	if (!gmtime_r(&now, &tm))
		return -EINVAL;
	snprintf(abs, sizeof(abs), "%s/%04d-%02d-%02d_%s", CPM_BACKUP_DIR, tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, b->config_checksum ? b->config_checksum : "unknown");
	return cpm_path(b->root, abs, buf, n);
}

int cpm_backup_file(const struct cpm_backup *b, const char *abs)
{
	char src[4096], dir[4096], dst[8192];
	struct stat st;
	char *data = NULL;
	size_t len = 0;
	int r;

	if ((r = cpm_path(b->root, abs, src, sizeof(src))) < 0)
		return r;
	if (lstat(src, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((r = cpm_backup_folder(b, dir, sizeof(dir))) < 0)
		return r;
	if ((size_t)snprintf(dst, sizeof(dst), "%s%s", dir, abs) >= sizeof(dst))
		return -ENAMETOOLONG;
	r = file_read_all(src, BACKUP_FILE_MAX, &data, &len);
	if (r >= 0)
		r = cpm_mkdirs(dir);
	if (r >= 0)
		r = chmod(dir, 0700) < 0 ? -errno : 0;
	if (r >= 0)
		r = cpm_mkdirs_for(dst);
	if (r >= 0)
		r = file_write_atomic(dst, data, len, st.st_mode & 07777);
	free(data);
	return r;
}

int cpm_remove_tree(const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int r = 0;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 ? -errno : 0;
	if (!(d = opendir(path)))
		return -errno;
	while (r >= 0 && (e = readdir(d))) {
		char sub[4096];
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name) >= sizeof(sub))
			r = -ENAMETOOLONG;
		else
			r = cpm_remove_tree(sub);
	}
	closedir(d);
	if (r >= 0 && rmdir(path) < 0)
		r = -errno;
	return r;
}

struct entry {
	char name[256];
	struct timespec mtime;
};

static int newest_first(const void *pa, const void *pb)
{
	const struct entry *a = pa, *b = pb;

	if (a->mtime.tv_sec != b->mtime.tv_sec)
		return a->mtime.tv_sec > b->mtime.tv_sec ? -1 : 1;
	if (a->mtime.tv_nsec != b->mtime.tv_nsec)
		return a->mtime.tv_nsec > b->mtime.tv_nsec ? -1 : 1;
	return -strcmp(a->name, b->name);
}

int cpm_backup_prune(const char *root)
{
	char base[4096], sub[4400];
	struct entry *es = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d;
	int r = 0, removed = 0;

	if ((r = cpm_path(root, CPM_BACKUP_DIR, base, sizeof(base))) < 0)
		return r;
	if (!(d = opendir(base)))
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof(es->name))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", base, e->d_name);
		if (lstat(sub, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		if (n == cap) {
			struct entry *ne = realloc(es, (cap = cap ? cap * 2 : 16) * sizeof(*es));
			if (!ne) {
				r = -ENOMEM;
				break;
			}
			es = ne;
		}
		snprintf(es[n].name, sizeof(es[n].name), "%s", e->d_name);
		es[n++].mtime = st.st_mtim;
	}
	closedir(d);
	if (r >= 0 && n > CPM_BACKUP_KEEP) {
		qsort(es, n, sizeof(*es), newest_first);
		for (size_t i = CPM_BACKUP_KEEP; r >= 0 && i < n; i++) {
			snprintf(sub, sizeof(sub), "%s/%s", base, es[i].name);
			r = cpm_remove_tree(sub);
			removed += r >= 0;
		}
	}
	free(es);
	return r < 0 ? r : removed;
}
