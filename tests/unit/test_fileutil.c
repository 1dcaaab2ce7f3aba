/* Secret files: private folders, atomic writes that never follow a link, capped reads. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/fileutil.h"
#include "tests/unit/harness.h"

static const char *tpath(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", test_tmpdir(), name);
	return buf;
}

static int put(const char *path, const char *data, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, data, strlen(data));
	close(fd);
	if (w != (ssize_t)strlen(data))
		return -EIO;
	return chmod(path, mode) < 0 ? -errno : 0;
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	return lstat(path, &st) < 0 ? (mode_t)-1 : st.st_mode & 07777;
}

/* Entries of dir whose name ends in ".tmp". */
static int tmp_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += str_has_suffix(e->d_name, ".tmp");
	closedir(d);
	return n;
}

static bool content_is(const char *path, const char *want)
{
	_cleanup_free_ char *got = test_read_file(path, NULL);
	return got && strcmp(got, want) == 0;
}

TEST(fileutil_write_new_file)
{
	char p[512];
	tpath(p, sizeof(p), "key");
	ASSERT_OK(file_write_atomic(p, "secret\n", 7, FILE_MODE_SECRET));
	ASSERT_TRUE(content_is(p, "secret\n"));
	ASSERT_EQ(mode_of(p), 0600);
	ASSERT_EQ(tmp_files(test_tmpdir()), 0);
	/* empty content is a valid file */
	ASSERT_OK(file_write_atomic(p, "", 0, FILE_MODE_SECRET));
	ASSERT_TRUE(content_is(p, ""));
}

TEST(fileutil_existing_0644_file_becomes_0600)
{
	char p[512];
	tpath(p, sizeof(p), "key");
	ASSERT_OK(put(p, "old public content that is longer", 0644));
	ASSERT_OK(file_write_atomic(p, "new-key", 7, FILE_MODE_SECRET));
	ASSERT_EQ(mode_of(p), 0600);
	ASSERT_TRUE(content_is(p, "new-key"));
	ASSERT_EQ(tmp_files(test_tmpdir()), 0);
}

TEST(fileutil_mode_is_exact_whatever_the_umask)
{
	char p[512];
	tpath(p, sizeof(p), "cert");
	mode_t old = umask(077);
	int r = file_write_atomic(p, "cert", 4, 0644);
	umask(old);
	ASSERT_OK(r);
	ASSERT_EQ(mode_of(p), 0644);
	ASSERT_ERR(file_write_atomic(p, "cert", 4, 010000), EINVAL);
}

TEST(fileutil_symlink_target_refused_and_untouched)
{
	char link[512], victim[512];
	tpath(victim, sizeof(victim), "victim");
	tpath(link, sizeof(link), "key");
	ASSERT_OK(put(victim, "victim content", 0644));
	ASSERT_OK(symlink(victim, link) < 0 ? -errno : 0);

	ASSERT_ERR(file_write_atomic(link, "new-key", 7, FILE_MODE_SECRET), ELOOP);
	ASSERT_TRUE(content_is(victim, "victim content"));
	ASSERT_EQ(mode_of(victim), 0644);
	struct stat st;
	ASSERT_OK(lstat(link, &st));
	ASSERT_TRUE(S_ISLNK(st.st_mode));
	ASSERT_EQ(tmp_files(test_tmpdir()), 0);

	/* a dangling link too: it would create the file it names */
	char dangling[512], target[512];
	tpath(target, sizeof(target), "nowhere");
	tpath(dangling, sizeof(dangling), "dangling");
	ASSERT_OK(symlink(target, dangling) < 0 ? -errno : 0);
	ASSERT_ERR(file_write_atomic(dangling, "x", 1, FILE_MODE_SECRET), ELOOP);
	ASSERT_ERR(access(target, F_OK) < 0 ? -errno : 0, ENOENT);
}

TEST(fileutil_failures_leave_no_temporary_file)
{
	char p[512], d[512];

	/* the target is a folder */
	tpath(d, sizeof(d), "adir");
	ASSERT_OK(mkdir(d, 0700) < 0 ? -errno : 0);
	ASSERT_ERR(file_write_atomic(d, "x", 1, FILE_MODE_SECRET), EISDIR);
	ASSERT_EQ(tmp_files(test_tmpdir()), 0);

	/* a write that fails half-way (file size limit): the old file stays as it was */
	tpath(p, sizeof(p), "key");
	ASSERT_OK(put(p, "old", 0600));
	char big[4096];
	memset(big, 'k', sizeof(big));
	struct rlimit old, lim;
	ASSERT_OK(getrlimit(RLIMIT_FSIZE, &old));
	void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
	lim = old;
	lim.rlim_cur = 100;
	ASSERT_OK(setrlimit(RLIMIT_FSIZE, &lim));
	int r = file_write_atomic(p, big, sizeof(big), FILE_MODE_SECRET);
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, prev);
	ASSERT_ERR(r, EFBIG);
	ASSERT_TRUE(content_is(p, "old"));
	ASSERT_EQ(tmp_files(test_tmpdir()), 0);

	/* bad names */
	ASSERT_ERR(file_write_atomic("", "x", 1, FILE_MODE_SECRET), EINVAL);
	snprintf(p, sizeof(p), "%s/..", test_tmpdir());
	ASSERT_ERR(file_write_atomic(p, "x", 1, FILE_MODE_SECRET), EINVAL);
	snprintf(p, sizeof(p), "%s/missing/key", test_tmpdir());
	ASSERT_ERR(file_write_atomic(p, "x", 1, FILE_MODE_SECRET), ENOENT);
	int dfd = open(test_tmpdir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(dfd, 0);
	r = file_write_atomic_at(dfd, "a/b", "x", 1, FILE_MODE_SECRET);
	int r2 = file_write_atomic_at(dfd, ".", "x", 1, FILE_MODE_SECRET);
	close(dfd);
	ASSERT_ERR(r, EINVAL);
	ASSERT_ERR(r2, EINVAL);
}

TEST(fileutil_stale_temporary_names_are_skipped)
{
	char p[512], stale0[512], stale1[512], victim[512], name[128];

	tpath(p, sizeof(p), "key");
	snprintf(name, sizeof(name), ".key.%d.0.tmp", (int)getpid());
	tpath(stale0, sizeof(stale0), name);
	snprintf(name, sizeof(name), ".key.%d.1.tmp", (int)getpid());
	tpath(stale1, sizeof(stale1), name);
	tpath(victim, sizeof(victim), "victim");
	/* a crashed writer's leftover, and a link planted where the next name would be */
	ASSERT_OK(put(stale0, "stale", 0600));
	ASSERT_OK(put(victim, "victim content", 0644));
	ASSERT_OK(symlink(victim, stale1) < 0 ? -errno : 0);

	ASSERT_OK(file_write_atomic(p, "new-key", 7, FILE_MODE_SECRET));
	ASSERT_TRUE(content_is(p, "new-key"));
	ASSERT_EQ(mode_of(p), 0600);
	ASSERT_TRUE(content_is(stale0, "stale"));
	ASSERT_TRUE(content_is(victim, "victim content"));
	struct stat st;
	ASSERT_OK(lstat(stale1, &st));
	ASSERT_TRUE(S_ISLNK(st.st_mode));
	ASSERT_EQ(tmp_files(test_tmpdir()), 2); /* the two planted ones, not ours */
}

TEST(fileutil_dir_open_private_creates_and_tightens)
{
	char d[512], f[512];
	int fd;

	/* missing, with a missing parent: the folder 0700, the parent 0755 */
	snprintf(d, sizeof(d), "%s/parent/certs/", test_tmpdir());
	fd = dir_open_private(d);
	ASSERT_GE(fd, 0);
	ASSERT_OK(file_write_atomic_at(fd, "tls.key", "k", 1, FILE_MODE_SECRET));
	close(fd);
	d[strlen(d) - 1] = 0;
	ASSERT_EQ(mode_of(d), 0700);
	snprintf(f, sizeof(f), "%s/tls.key", d);
	ASSERT_TRUE(content_is(f, "k"));
	snprintf(f, sizeof(f), "%s/parent", test_tmpdir());
	ASSERT_EQ(mode_of(f), 0755);

	/* an existing 0755 folder is tightened to 0700; a 0700 one is left alone */
	tpath(d, sizeof(d), "open");
	ASSERT_OK(mkdir(d, 0755) < 0 ? -errno : 0);
	ASSERT_OK(chmod(d, 0755));
	fd = dir_open_private(d);
	ASSERT_GE(fd, 0);
	close(fd);
	ASSERT_EQ(mode_of(d), 0700);
	fd = dir_open_private(d);
	ASSERT_GE(fd, 0);
	close(fd);
	ASSERT_EQ(mode_of(d), 0700);
}

TEST(fileutil_dir_open_private_refuses)
{
	char d[512], link[512], file[512];

	/* a folder that is a symbolic link: refused, its target not chmod'ed */
	tpath(d, sizeof(d), "real");
	tpath(link, sizeof(link), "link");
	ASSERT_OK(mkdir(d, 0755) < 0 ? -errno : 0);
	ASSERT_OK(chmod(d, 0755));
	ASSERT_OK(symlink(d, link) < 0 ? -errno : 0);
	ASSERT_ERR(dir_open_private(link), ELOOP);
	snprintf(link + strlen(link), sizeof(link) - strlen(link), "/");
	ASSERT_ERR(dir_open_private(link), ELOOP); /* "link/" would follow it */
	ASSERT_EQ(mode_of(d), 0755);

	/* a file */
	tpath(file, sizeof(file), "file");
	ASSERT_OK(put(file, "x", 0600));
	ASSERT_ERR(dir_open_private(file), ENOTDIR);

	/* a shared sticky folder (as /tmp) is never chmod'ed */
	tpath(d, sizeof(d), "sticky");
	ASSERT_OK(mkdir(d, 0700) < 0 ? -errno : 0);
	ASSERT_OK(chmod(d, 01777));
	ASSERT_ERR(dir_open_private(d), EPERM);
	ASSERT_EQ(mode_of(d), 01777);

	ASSERT_ERR(dir_open_private(""), EINVAL);
}

TEST(fileutil_read_all)
{
	char p[512], link[512], fifo[512];
	char *data = NULL;
	size_t len = 0;

	tpath(p, sizeof(p), "f");
	tpath(link, sizeof(link), "l");
	tpath(fifo, sizeof(fifo), "fifo");
	ASSERT_OK(put(p, "hello", 0600));
	ASSERT_OK(symlink(p, link) < 0 ? -errno : 0);
	/* reading follows links: Kubernetes Secret volumes are made of them */
	ASSERT_OK(file_read_all(link, 100, &data, &len));
	ASSERT_EQ(len, 5);
	ASSERT_STREQ(data, "hello");
	free(data);
	data = NULL;
	ASSERT_ERR(file_read_all(p, 4, &data, &len), EFBIG);
	ASSERT_OK(file_read_all(p, 5, &data, NULL));
	free(data);
	data = NULL;
	ASSERT_ERR(file_read_all(test_tmpdir(), 100, &data, &len), EISDIR);
	ASSERT_OK(mkfifo(fifo, 0600) < 0 ? -errno : 0);
	ASSERT_ERR(file_read_all(fifo, 100, &data, &len), EINVAL);
	tpath(p, sizeof(p), "missing");
	ASSERT_ERR(file_read_all(p, 100, &data, &len), ENOENT);
	ASSERT_NULL(data);
}
