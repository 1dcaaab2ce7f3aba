/* Running external programs with an argument vector, a timeout, a cancellation token and
 * captured output. Everything
 * the child needs is prepared before fork(); the child calls only async-signal-safe functions,
 * so this is safe in a multi-threaded server. */
#include "modules/csi-node/csi_node_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/base/cancel.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"

#define DEFAULT_TIMEOUT_NS (600 * NSEC_PER_SEC)

static const char *const search_path[] = {
	"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
};

int csi_exec_find(const char *name, char *ret, size_t n)
{
	char path[PATH_MAX];

	if (!name || !*name)
		return -EINVAL;
	if (strchr(name, '/')) {
		if (name[0] != '/' || access(name, X_OK) < 0)
			return -ENOENT;
		return str_copy(ret, n, name);
	}
	for (size_t i = 0; i < ARRAY_SIZE(search_path); i++) {
		if (str_printf(path, sizeof(path), "%s/%s", search_path[i], name) < 0)
			continue;
		if (access(path, X_OK) == 0)
			return str_copy(ret, n, path);
	}
	return -ENOENT;
}

/* The child: only async-signal-safe calls from here to execve. */
static void __attribute__((noreturn))
child(const char *path, char *const *argv, char *const *envp, int devnull, int out, int err)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigset_t all;
	int e;

	setpgid(0, 0);
	sigaction(SIGPIPE, &sa, NULL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	if (dup2(devnull, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
	    dup2(out, STDERR_FILENO) < 0)
		goto fail;
	/* Whatever other threads opened without O_CLOEXEC must not leak into the program. */
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	execve(path, argv, envp);
fail:
	e = errno;
	if (write(err, &e, sizeof(e)) < 0) {
		/* nothing to do: the parent sees status 127 */
	}
	_exit(127);
}

static void collect(struct buf *output, const char *data, size_t len)
{
	if (!output || output->len >= CSI_EXEC_MAX_OUTPUT)
		return;
	if (len > CSI_EXEC_MAX_OUTPUT - output->len)
		len = CSI_EXEC_MAX_OUTPUT - output->len;
	(void)buf_append(output, data, len);
}

static int wait_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return -EINTR;
}

/* Reaps pid when it has exited: 1 with *status, 0 while it runs, -errno. */
static int try_reap(pid_t pid, int *status)
{
	pid_t w;

	while ((w = waitpid(pid, status, WNOHANG)) < 0 && errno == EINTR)
		;
	if (w < 0)
		return -errno;
	return w == pid;
}

/* Waits up to ns for pid to exit, ending early when ct is cancelled (NULL: never): 1 with
 * *status once it has exited, 0 otherwise, -errno. Without a pidfd (an old kernel) the wait
 * polls every 10 ms. */
static int wait_exit(pid_t pid, int pidfd, int64_t ns, struct cancel *ct, int *status)
{
	int64_t deadline = now_mono_ns() + ns;

	for (;;) {
		int r = try_reap(pid, status);
		if (r != 0)
			return r;
		int64_t left = deadline - now_mono_ns();
		if (left <= 0 || cancel_is_cancelled(ct))
			return 0;
		struct pollfd p[2] = { { .fd = pidfd, .events = POLLIN },
				       { .fd = cancel_fd(ct), .events = POLLIN } };
		int ms = pidfd >= 0 ? (int)(left / NSEC_PER_MSEC) + 1 : 10;
		(void)poll(p, 2, ms > 1000 ? 1000 : ms);
	}
}

/* Collects the child's output until it closes it, then waits for its exit: its exit status,
 * or -ETIMEDOUT at the deadline, -ECANCELED once ct is cancelled, -errno. *ret_reaped tells
 * whether the child is gone (else the caller stops it). */
static int supervise(pid_t pid, int pidfd, int out, int64_t deadline, struct cancel *ct,
		     struct buf *output, bool *ret_reaped)
{
	char chunk[4096];
	bool eof = false;
	int status, r;

	*ret_reaped = false;
	for (;;) {
		int64_t left = deadline - now_mono_ns();
		if (cancel_is_cancelled(ct))
			return -ECANCELED;
		if (left <= 0)
			return -ETIMEDOUT;
		if (eof) {
			if ((r = wait_exit(pid, pidfd, left, ct, &status)) == 0)
				continue;
			*ret_reaped = true; /* or waitpid failed: nothing left to reap */
			return r < 0 ? r : wait_status(status);
		}
		struct pollfd p[2] = { { .fd = out, .events = POLLIN },
				       { .fd = cancel_fd(ct), .events = POLLIN } };
		int ms = (int)(left / NSEC_PER_MSEC) + 1;
		int pr = poll(p, 2, ms > 1000 ? 1000 : ms);
		if (pr < 0 && errno != EINTR)
			return -errno;
		if (pr <= 0 || !p[0].revents)
			continue;
		ssize_t n = read(out, chunk, sizeof(chunk));
		if (n > 0)
			collect(output, chunk, (size_t)n);
		else if (n == 0 || (errno != EINTR && errno != EAGAIN))
			eof = true;
	}
}

/* Ends a child that is still running: SIGTERM to its process group first when the call was
 * cancelled (mkfs and fsck end cleanly on it), SIGKILL after CSI_EXEC_KILL_GRACE_NS or right
 * away on a timeout; then reaps it. */
static void stop_child(pid_t pid, int pidfd, bool gently)
{
	int status;

	if (gently) {
		kill(-pid, SIGTERM);
		kill(pid, SIGTERM);
		if (wait_exit(pid, pidfd, CSI_EXEC_KILL_GRACE_NS, NULL, &status) > 0) {
			kill(-pid, SIGKILL); /* whatever of its group outlives it */
			return;
		}
	}
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}

int csi_exec(const char *const *argv, int64_t timeout_ns, struct cancel *ct, struct buf *output)
{
	static char *const envp[] = {
		(char *)"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		(char *)"LC_ALL=C",
		NULL,
	};
	char path[PATH_MAX];
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, devnull = -1, pidfd = -1, status, e, r;
	pid_t pid;

	if (!argv || !argv[0])
		return -EINVAL;
	if ((r = csi_exec_find(argv[0], path, sizeof(path))) < 0)
		return r;
	if (timeout_ns <= 0)
		timeout_ns = DEFAULT_TIMEOUT_NS;
	if (!ct)
		ct = cancel_root();
	if (cancel_is_cancelled(ct))
		return -ECANCELED;
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
	    (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
		r = -errno;
		goto out;
	}
	log_v(5, "running program", KV_S("program", path), KV_S("arg1", argv[1] ? argv[1] : ""));
	pid = fork();
	if (pid < 0) {
		r = -errno;
		goto out;
	}
	if (pid == 0)
		child(path, (char *const *)argv, envp, devnull, out[1], err[1]);

	close(out[1]);
	close(err[1]);
	out[1] = err[1] = -1;
	/* The error pipe closes on a successful exec, or carries the errno of a failed one. */
	ssize_t n;
	while ((n = read(err[0], &e, sizeof(e))) < 0 && errno == EINTR)
		;
	if (n == (ssize_t)sizeof(e)) {
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		r = e == ENOENT ? -ENOENT : -e;
		goto out;
	}
	pidfd = (int)pidfd_open(pid, 0); /* -1 on an old kernel: the waits poll instead */
	bool reaped;
	r = supervise(pid, pidfd, out[0], now_mono_ns() + timeout_ns, ct, output, &reaped);
	if (!reaped) {
		if (r == -ECANCELED)
			log_info("stopping a program: the call is cancelled",
				 KV_S("program", path));
		stop_child(pid, pidfd, r == -ECANCELED);
	}
out:
	if (out[0] >= 0)
		close(out[0]);
	if (out[1] >= 0)
		close(out[1]);
	if (err[0] >= 0)
		close(err[0]);
	if (err[1] >= 0)
		close(err[1]);
	if (devnull >= 0)
		close(devnull);
	if (pidfd >= 0)
		close(pidfd);
	return r;
}

void csi_exec_describe(const char *const *argv, int r, const struct buf *output, char *msg,
		       size_t n)
{
	char tail[512] = "";
	size_t k = 0;
	const char *name = argv && argv[0] ? argv[0] : "program";
	const char *p = output && output->data ? output->data : "";
	size_t len = output ? output->len : 0;

	if (len > sizeof(tail) - 1) {
		p += len - (sizeof(tail) - 1);
		len = sizeof(tail) - 1;
	}
	for (size_t i = 0; i < len; i++) {
		char c = p[i];
		if (c == '\n' || c == '\r' || c == '\t')
			c = ' ';
		if ((unsigned char)c < 0x20 || c == 0x7f)
			continue;
		if (c == ' ' && (k == 0 || tail[k - 1] == ' '))
			continue;
		tail[k++] = c;
	}
	while (k > 0 && tail[k - 1] == ' ')
		k--;
	tail[k] = '\0';
	if (r == -ENOENT)
		(void)str_printf(msg, n, "%s is not installed", name);
	else if (r == -ECANCELED)
		(void)str_printf(msg, n, "%s was stopped: the call was cancelled%s%s", name,
				 k ? ": " : "", tail);
	else if (r == -ETIMEDOUT)
		(void)str_printf(msg, n, "%s timed out%s%s", name, k ? ": " : "", tail);
	else if (r < 0)
		(void)str_printf(msg, n, "%s failed: %s%s%s", name, strerror(-r), k ? ": " : "",
				 tail);
	else
		(void)str_printf(msg, n, "%s exited with status %d%s%s", name, r, k ? ": " : "",
				 tail);
}
