/* The in-house unit-test harness. A test file defines tests with TEST(name) { ... } and uses
 * the ASSERT_* macros, which print the expression, the values and, for errno results, the
 * errno name. Tests register themselves; harness.c runs them all (or those whose name contains
 * one of the arguments) and ends with the line "N passed, N failed, N skipped". A test that
 * cannot run here says why with TEST_SKIP("reason"): it prints "skip - NAME: reason" and counts
 * as skipped, never as passed (tests/run fails it under TEST_STRICT_SKIPS=1 unless
 * tests/skips.allow lists it). */
#pragma once
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/log.h"

struct test_case {
	const char *name;
	const char *file;
	void (*fn)(void);
};

void test_register(const char *name, const char *file, void (*fn)(void));
void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A scratch directory for this test, removed after it. */
const char *test_tmpdir(void);
/* Path of a file under tests/data/. */
const char *test_data(const char *name);
/* Reads a whole file into a malloc'd, NUL-terminated buffer (NULL on error). */
char *test_read_file(const char *path, size_t *ret_len);
extern bool test_failed;

#define TEST(name)                                                                                 \
	static void test_##name(void);                                                             \
	__attribute__((constructor)) static void test_reg_##name(void)                             \
	{                                                                                          \
		test_register(#name, __FILE__, test_##name);                                       \
	}                                                                                          \
	static void test_##name(void)

/* Ends the test as skipped, with a reason: TEST_SKIP("no /dev/loop0: %s", why). */
#define TEST_SKIP(...)                                                                             \
	do {                                                                                       \
		test_skip(__VA_ARGS__);                                                            \
		return;                                                                            \
	} while (0)

#define ASSERT_TRUE(e)                                                                             \
	do {                                                                                       \
		if (!(e)) {                                                                        \
			test_fail(__FILE__, __LINE__, "ASSERT_TRUE(%s)", #e);                       \
			return;                                                                    \
		}                                                                                  \
	} while (0)
#define ASSERT_FALSE(e) ASSERT_TRUE(!(e))

#define ASSERT_INT_OP(a, op, b)                                                                    \
	do {                                                                                       \
		long long a_ = (long long)(a), b_ = (long long)(b);                                \
		if (!(a_ op b_)) {                                                                 \
			test_fail(__FILE__, __LINE__, "%s %s %s: %lld vs %lld", #a, #op, #b, a_,    \
				  b_);                                                             \
			return;                                                                    \
		}                                                                                  \
	} while (0)
#define ASSERT_EQ(a, b) ASSERT_INT_OP(a, ==, b)
#define ASSERT_NE(a, b) ASSERT_INT_OP(a, !=, b)
#define ASSERT_LT(a, b) ASSERT_INT_OP(a, <, b)
#define ASSERT_LE(a, b) ASSERT_INT_OP(a, <=, b)
#define ASSERT_GT(a, b) ASSERT_INT_OP(a, >, b)
#define ASSERT_GE(a, b) ASSERT_INT_OP(a, >=, b)

/* r is a 0-or-positive / -errno result: passes when r >= 0. */
#define ASSERT_OK(r)                                                                               \
	do {                                                                                       \
		long long r_ = (long long)(r);                                                     \
		if (r_ < 0) {                                                                      \
			test_fail(__FILE__, __LINE__, "ASSERT_OK(%s): %lld (%s: %s)", #r, r_,       \
				  errno_name((int)r_), strerror((int)-r_));                        \
			return;                                                                    \
		}                                                                                  \
	} while (0)
/* r must be exactly the negative errno e (pass e as a positive constant, e.g. ENOENT). */
#define ASSERT_ERR(r, e)                                                                           \
	do {                                                                                       \
		long long r_ = (long long)(r);                                                     \
		if (r_ != -(long long)(e)) {                                                       \
			test_fail(__FILE__, __LINE__, "ASSERT_ERR(%s, %s): got %lld (%s)", #r, #e,  \
				  r_, r_ < 0 ? errno_name((int)r_) : "success");                   \
			return;                                                                    \
		}                                                                                  \
	} while (0)

#define ASSERT_STREQ(a, b)                                                                         \
	do {                                                                                       \
		const char *a_ = (a), *b_ = (b);                                                   \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                           \
			test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" vs \"%s\"", #a, #b,         \
				  a_ ? a_ : "(null)", b_ ? b_ : "(null)");                         \
			return;                                                                    \
		}                                                                                  \
	} while (0)
#define ASSERT_CONTAINS(hay, needle)                                                               \
	do {                                                                                       \
		const char *h_ = (hay), *n_ = (needle);                                            \
		if (!h_ || !strstr(h_, n_)) {                                                      \
			test_fail(__FILE__, __LINE__, "%s contains \"%s\": \"%s\"", #hay, n_,       \
				  h_ ? h_ : "(null)");                                             \
			return;                                                                    \
		}                                                                                  \
	} while (0)
#define ASSERT_NOT_CONTAINS(hay, needle)                                                           \
	do {                                                                                       \
		const char *h_ = (hay), *n_ = (needle);                                            \
		if (h_ && strstr(h_, n_)) {                                                        \
			test_fail(__FILE__, __LINE__, "%s lacks \"%s\": \"%s\"", #hay, n_, h_);    \
			return;                                                                    \
		}                                                                                  \
	} while (0)
#define ASSERT_NULL(p) ASSERT_TRUE((p) == NULL)
#define ASSERT_NOT_NULL(p) ASSERT_TRUE((p) != NULL)
