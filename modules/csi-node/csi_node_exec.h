/* Running the external file-system programs of the node service (mkfs, fsck, resize2fs,
 * xfs_growfs) safely: an argument vector, never a shell; the program looked up in a fixed list
 * of system directories; a clean environment; a timeout after which the whole process group is
 * killed; a cancellation token (common/base/cancel.h) that stops it (SIGTERM, then SIGKILL);
 * standard output and error captured together, up to a cap, for the error message. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"
#include "common/base/timeutil.h"

/* The most output kept from one program (the rest is read and dropped). */
#define CSI_EXEC_MAX_OUTPUT ((size_t)64 << 10)

/* After SIGTERM, how long a cancelled program has before SIGKILL. */
#define CSI_EXEC_KILL_GRACE_NS (2 * NSEC_PER_SEC)

struct cancel;

/* Runs argv[0] (a bare name, looked up in /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:
 * /sbin:/bin, or an absolute path) with argv, stdin from /dev/null, and a timeout (ns; <= 0
 * means 10 minutes). When ct is cancelled (NULL: the process token, cancel_root(), which
 * SIGTERM cancels) the program's process group gets SIGTERM, and SIGKILL after
 * CSI_EXEC_KILL_GRACE_NS. The combined output is appended to *output when it is not NULL.
 * Returns the exit status (0..255), or -ENOENT when the program is not installed, -ETIMEDOUT
 * when it was killed after the timeout, -ECANCELED when ct was cancelled (before the start or
 * while it ran), -EINTR when it died of a signal, another -errno when it could not be
 * started. */
int csi_exec(const char *const *argv, int64_t timeout_ns, struct cancel *ct, struct buf *output);

/* Finds a program in the fixed search path: 0 and the absolute path in ret (size n), or
 * -ENOENT. */
int csi_exec_find(const char *name, char *ret, size_t n);

/* Writes a one-line description of a failed run for an error message: "mkfs.ext4 exited with
 * status 1: <the last part of the output, on one line>". r is csi_exec's result. */
void csi_exec_describe(const char *const *argv, int r, const struct buf *output, char *msg,
		       size_t n);
