#include "tests/unit/harness.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TESTS 4096

static struct test_case tests[MAX_TESTS];
static size_t ntests;
bool test_failed;
static char skip_reason[512];
static char tmpdir[PATH_MAX];
static char data_path[PATH_MAX];

void test_register(const char *name, const char *file, void (*fn)(void))
{
	if (ntests == MAX_TESTS) {
		fprintf(stderr, "too many tests: raise MAX_TESTS\n");
		abort();
	}
	tests[ntests++] = (struct test_case){ name, file, fn };
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	test_failed = true;
	fprintf(stdout, "    %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
}

void test_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(skip_reason, sizeof(skip_reason), fmt, ap);
	va_end(ap);
	if (!skip_reason[0])
		snprintf(skip_reason, sizeof(skip_reason), "(no reason given)");
}

const char *test_tmpdir(void)
{
	if (!tmpdir[0]) {
		const char *base = getenv("TMPDIR");
		snprintf(tmpdir, sizeof(tmpdir), "%s/awsk8s-unit.XXXXXX", base ? base : "/tmp");
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			abort();
		}
	}
	return tmpdir;
}

const char *test_data(const char *name)
{
	const char *root = getenv("TEST_DATA_DIR");
	snprintf(data_path, sizeof(data_path), "%s/%s", root ? root : "tests/data", name);
	return data_path;
}

char *test_read_file(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
			buf[n] = 0;
			if (ret_len)
				*ret_len = (size_t)n;
		} else {
			free(buf);
			buf = NULL;
		}
	}
	fclose(f);
	return buf;
}

static void remove_tmpdir(void)
{
	if (tmpdir[0]) {
		/* the test's own scratch directory; no shell, rm with an argument vector */
		pid_t pid = fork();
		if (pid == 0) {
			execlp("rm", "rm", "-rf", tmpdir, (char *)NULL);
			_exit(127);
		}
		if (pid > 0) {
			int st;
			waitpid(pid, &st, 0);
		}
		tmpdir[0] = 0;
	}
}

/* With arguments, a test runs when its name contains one of them. */
static bool selected(const char *name, int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strstr(name, argv[i]))
			return true;
	return argc < 2;
}

int main(int argc, char **argv)
{
	size_t passed = 0, failed = 0, skipped = 0;

	const char *v = getenv("TEST_V");
	if (v) {
		log_verbosity = (int)strtol(v, NULL, 10);
	} else {
		/* keep the test output readable: library logs go to unit-tests.log unless TEST_V */
		int fd = open(getenv("TEST_LOG") ? getenv("TEST_LOG") : "/dev/null",
			      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0)
			log_set_output(fd);
	}
	for (size_t i = 0; i < ntests; i++) {
		struct timespec a, b;
		if (!selected(tests[i].name, argc, argv))
			continue;
		test_failed = false;
		skip_reason[0] = 0;
		clock_gettime(CLOCK_MONOTONIC, &a);
		tests[i].fn();
		clock_gettime(CLOCK_MONOTONIC, &b);
		remove_tmpdir();
		double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
		/* a failure before the skip still fails */
		if (test_failed) {
			printf("FAIL - %s (%.1f ms)\n", tests[i].name, ms);
			failed++;
		} else if (skip_reason[0]) {
			printf("skip - %s: %s\n", tests[i].name, skip_reason);
			skipped++;
		} else {
			printf("ok - %s (%.1f ms)\n", tests[i].name, ms);
			passed++;
		}
		fflush(stdout);
	}
	printf("%zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}
