/* Paths under the root and writes that change nothing when nothing changed (cpm_files.h). */
#include "modules/cpm/cpm_files.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/base/fileutil.h"

int cpm_path(const char *root, const char *abs, char *buf, size_t n)
{
	const char *r = root && root[0] && strcmp(root, "/") != 0 ? root : "";
	size_t rl = strlen(r);
	int w;

	while (rl > 0 && r[rl - 1] == '/')
		rl--;
	w = snprintf(buf, n, "%.*s%s", (int)rl, r, abs);
	return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

int cpm_mkdirs(const char *path)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n == 0)
		return 0;
	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdir(buf, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

int cpm_mkdirs_for(const char *path)
{
	char buf[4096];
	char *slash;
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	slash = strrchr(buf, '/');
	if (!slash || slash == buf)
		return 0;
	*slash = 0;
	return cpm_mkdirs(buf);
}

int cpm_write_if_changed(const char *path, const void *data, size_t len, mode_t mode)
{
	struct stat st;
	char *old = NULL;
	size_t olen = 0;
	int r;

	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == mode &&
	    (size_t)st.st_size == len && file_read_all(path, len + 1, &old, &olen) >= 0) {
		bool same = olen == len && memcmp(old, data, len) == 0;
		free(old);
		if (same)
			return 0;
	}
	r = cpm_mkdirs_for(path);
	if (r >= 0)
		r = file_write_atomic(path, data, len, mode);
	return r < 0 ? r : 1;
}
