/* Files that hold secrets: written so that no one else can read them, never through a symbolic
 * link, and replaced atomically; read with a size cap.
 *
 *   int dfd = dir_open_private("/var/lib/x/certs");      // made 0700, or tightened to 0700
 *   if (dfd < 0) return log_error_errno(dfd, ...);
 *   r = file_write_atomic_at(dfd, "tls.key", key, strlen(key), FILE_MODE_SECRET);
 *   if (r >= 0) r = file_write_atomic_at(dfd, "tls.crt", crt, strlen(crt), 0644);
 *   close(dfd);
 *
 * A write goes to a new temporary file in the same folder (".NAME.PID.N.tmp", opened with
 * O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 while it is written), is fsync'ed, given its final mode,
 * renamed over NAME, and the folder is fsync'ed: a reader sees the old content or the new, never
 * a mix, and a crash leaves at worst a stale temporary file (never removed by us: another
 * process may own it; the next write picks another name). The temporary file is removed on
 * every failure.
 *
 * Symbolic links: the file written must not be one (-ELOOP, nothing written, the link's target
 * untouched); a link put there after the check is replaced by rename(2), not followed. The
 * folder given to dir_open_private() must not be one either (-ELOOP): it would be chmod'ed and
 * written into at a place the caller did not name; pass the resolved path. Links in the
 * components above the folder are followed. Reading follows links (Kubernetes Secret volumes
 * are made of them).
 *
 * Every function returns 0 (or an fd) on success and -errno on failure; none logs. */
#pragma once
#include <stddef.h>
#include <sys/types.h>

#define FILE_MODE_SECRET 0600
#define FILE_MODE_PRIVATE_DIR 0700

/* Opens the folder path for file_write_atomic_at(), making it (mode 0700, missing parents 0755)
 * when it does not exist. An existing folder that its group or others can access is chmod'ed
 * to 0700. Returns the folder's fd (O_DIRECTORY|O_CLOEXEC; the caller closes it) or -ELOOP when
 * path is a symbolic link, -ENOTDIR when it is not a folder, -EPERM when it has the sticky bit
 * and would need tightening (a shared folder such as /tmp is never chmod'ed) or cannot be
 * chmod'ed, -EINVAL for an empty path, other -errno from mkdir/open/fchmod. */
int dir_open_private(const char *path);

/* Writes len bytes of data to the file name (a plain name: no '/', not "." or "..") in the
 * folder dfd, as described above; the file ends with exactly mode (not filtered by the umask).
 * -ELOOP when name is a symbolic link, -EISDIR when it is a folder, -EINVAL for a bad name or
 * mode, -EEXIST when 100 temporary names are all taken, -ENAMETOOLONG, other -errno from the
 * system calls (-ENOSPC, -EDQUOT, -EFBIG...). Only an error from the folder's final fsync comes
 * after the rename: the new file is then in place but may not survive a crash. */
int file_write_atomic_at(int dfd, const char *name, const void *data, size_t len, mode_t mode);

/* The same for a path: its folder is opened as it is (not made, not chmod'ed; links in it are
 * followed), the last component must not be a symbolic link. */
int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

/* Reads a whole regular file of at most max bytes into a malloc'd, NUL-terminated buffer
 * (*ret_len, when not NULL, gets the length). Symbolic links are followed. -EFBIG when larger
 * than max, -EISDIR for a folder, -EINVAL for a device, a FIFO or a socket (opened
 * non-blocking, so a FIFO does not hang), other -errno. */
int file_read_all(const char *path, size_t max, char **ret, size_t *ret_len);
