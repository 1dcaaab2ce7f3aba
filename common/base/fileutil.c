/* Secret files: private folders, atomic writes that never follow a link, capped reads (see
 * fileutil.h). */
#include "common/base/fileutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/secret.h"

#define TMP_TRIES 100

/* A copy of path without trailing slashes ("/" stays "/"): "dir/" would make lstat() follow a
 * link named dir. */
static int path_trim(const char *path, char *out, size_t n)
{
	int r = str_copy(out, n, path);
	if (r < 0)
		return r;
	for (size_t l = strlen(out); l > 1 && out[l - 1] == '/'; l--)
		out[l - 1] = 0;
	return 0;
}

/* mkdir -p for the parents of path (0755, as upstream's MkdirAll), then path itself (0700). */
static int mkdir_parents(char *path)
{
	for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
		if (p[-1] == '/')
			continue;
		*p = 0;
		int r = mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
		*p = '/';
		if (r < 0)
			return r;
	}
	return mkdir(path, FILE_MODE_PRIVATE_DIR) < 0 && errno != EEXIST ? -errno : 0;
}

int dir_open_private(const char *path)
{
	char p[PATH_MAX];
	struct stat st;
	int fd, r;

	if (!path || !*path)
		return -EINVAL;
	if ((r = path_trim(path, p, sizeof(p))) < 0)
		return r;
	if ((r = mkdir_parents(p)) < 0)
		return r;
	if (lstat(p, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		return -ELOOP;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	/* O_NOFOLLOW: a folder swapped for a link since the lstat() gives ENOTDIR */
	fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto fail;
	}
	if (st.st_mode & 077) {
		if (st.st_mode & S_ISVTX) {
			r = -EPERM;
			goto fail;
		}
		if (fchmod(fd, FILE_MODE_PRIVATE_DIR) < 0) {
			r = -errno;
			goto fail;
		}
	}
	return fd;
fail:
	close(fd);
	return r;
}

static bool name_ok(const char *name)
{
	return name && *name && !strchr(name, '/') && strcmp(name, ".") != 0 &&
	       strcmp(name, "..") != 0;
}

static int write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		data += w;
		len -= (size_t)w;
	}
	return 0;
}

int file_write_atomic_at(int dfd, const char *name, const void *data, size_t len, mode_t mode)
{
	char tmp[NAME_MAX + 1];
	struct stat st;
	int fd = -1, r;

	if (!name_ok(name) || (mode & ~(mode_t)07777) || (!data && len))
		return -EINVAL;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode))
			return -ELOOP;
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
	} else if (errno != ENOENT) {
		return -errno;
	}
	for (unsigned i = 0; fd < 0; i++) {
		if (i == TMP_TRIES)
			return -EEXIST;
		if ((r = str_printf(tmp, sizeof(tmp), ".%s.%d.%u.tmp", name, (int)getpid(), i)) < 0)
			return r;
		/* 0600 while it is written, whatever the final mode */
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    FILE_MODE_SECRET);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	r = write_all(fd, data, len);
	if (r >= 0 && fchmod(fd, mode) < 0)
		r = -errno;
	if (r >= 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r >= 0)
		r = -errno;
	/* rename(2) replaces a link that appeared since the check; it never follows it */
	if (r >= 0 && renameat(dfd, tmp, dfd, name) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dfd, tmp, 0);
		return r;
	}
	return fsync(dfd) < 0 ? -errno : 0;
}

int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
	char p[PATH_MAX];
	int dfd, r;

	if (!path || !*path)
		return -EINVAL;
	if ((r = path_trim(path, p, sizeof(p))) < 0)
		return r;
	char *slash = strrchr(p, '/');
	const char *name = slash ? slash + 1 : p;
	if (!name_ok(name))
		return -EINVAL;
	if (slash == p)
		dfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else if (slash) {
		*slash = 0;
		dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} else
		dfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	r = file_write_atomic_at(dfd, name, data, len, mode);
	close(dfd);
	return r;
}

int file_read_all(const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_buf_ struct buf b = BUF_INIT(max);
	char chunk[16384];
	struct stat st;
	int fd, r = 0;

	/* non-blocking: a FIFO named by a broken config must not hang us; then regular files only
	 */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if (S_ISDIR(st.st_mode))
		r = -EISDIR;
	else if (!S_ISREG(st.st_mode))
		r = -EINVAL;
	while (r == 0) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : 0;
			break;
		}
		r = buf_append(&b, chunk, (size_t)n);
	}
	secret_wipe(chunk, sizeof(chunk));
	close(fd);
	if (r < 0)
		return r == -EMSGSIZE ? -EFBIG : r;
	size_t len = b.len;
	char *p = buf_steal(&b);
	if (!p)
		return -ENOMEM;
	if (ret_len)
		*ret_len = len;
	*ret = p;
	return 0;
}
