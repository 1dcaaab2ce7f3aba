#include "common/base/timeutil.h"
#include "tests/unit/harness.h"

TEST(duration_parse_go_syntax)
{
	int64_t ns = 0;
	ASSERT_OK(duration_parse("30s", &ns));
	ASSERT_EQ(ns, 30 * NSEC_PER_SEC);
	ASSERT_OK(duration_parse("1h30m", &ns));
	ASSERT_EQ(ns, 5400 * NSEC_PER_SEC);
	ASSERT_OK(duration_parse("1.5s", &ns));
	ASSERT_EQ(ns, 1500 * NSEC_PER_MSEC);
	ASSERT_OK(duration_parse("250ms", &ns));
	ASSERT_EQ(ns, 250 * NSEC_PER_MSEC);
	ASSERT_OK(duration_parse("2us", &ns));
	ASSERT_EQ(ns, 2000);
	ASSERT_OK(duration_parse("3\xc2\xb5s", &ns));
	ASSERT_EQ(ns, 3000);
	ASSERT_OK(duration_parse("-1m", &ns));
	ASSERT_EQ(ns, -60 * NSEC_PER_SEC);
	ASSERT_OK(duration_parse("0", &ns));
	ASSERT_EQ(ns, 0);
	ASSERT_OK(duration_parse(".5h", &ns));
	ASSERT_EQ(ns, 1800 * NSEC_PER_SEC);
}

TEST(duration_parse_rejects_bad)
{
	int64_t ns = 42;
	const char *bad[] = { "", "5", "s", "5x", "1h 30m", "--1s", "1.s.", "1e3s", "." };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ASSERT_ERR(duration_parse(bad[i], &ns), EINVAL);
	ASSERT_ERR(duration_parse("9999999999h", &ns), ERANGE);
	ASSERT_EQ(ns, 42);
}

TEST(duration_format_like_go)
{
	char b[32];
	ASSERT_OK(duration_format(0, b, sizeof(b)));
	ASSERT_STREQ(b, "0s");
	duration_format(90 * 60 * NSEC_PER_SEC, b, sizeof(b));
	ASSERT_STREQ(b, "1h30m0s");
	duration_format(1500 * NSEC_PER_MSEC, b, sizeof(b));
	ASSERT_STREQ(b, "1.5s");
	duration_format(250 * NSEC_PER_MSEC, b, sizeof(b));
	ASSERT_STREQ(b, "250ms");
	duration_format(-2 * NSEC_PER_SEC, b, sizeof(b));
	ASSERT_STREQ(b, "-2s");
	duration_format(1500, b, sizeof(b));
	ASSERT_STREQ(b, "1.5\xc2\xb5s");
	ASSERT_ERR(duration_format(90 * 60 * NSEC_PER_SEC, b, 4), ENAMETOOLONG);
}

TEST(rfc3339_parse_fractions_and_zones)
{
	int64_t ns = 0;
	ASSERT_OK(rfc3339_parse("2024-01-02T03:04:05Z", &ns));
	ASSERT_EQ(ns, 1704164645LL * NSEC_PER_SEC);
	ASSERT_OK(rfc3339_parse("2024-01-02T03:04:05.123456789Z", &ns));
	ASSERT_EQ(ns, 1704164645LL * NSEC_PER_SEC + 123456789);
	ASSERT_OK(rfc3339_parse("2024-01-02T05:04:05.5+02:00", &ns));
	ASSERT_EQ(ns, 1704164645LL * NSEC_PER_SEC + 500000000);
	ASSERT_OK(rfc3339_parse("2024-01-01t22:04:05-05:00", &ns));
	ASSERT_EQ(ns, 1704164645LL * NSEC_PER_SEC);
}

TEST(rfc3339_rejects_bad)
{
	int64_t ns = 1;
	const char *bad[] = { "", "2024-01-02", "2024-01-02T03:04:05", "2024-13-02T03:04:05Z",
			      "2024-02-30T03:04:05Z", "2024-01-02T03:04:05.Z", "2024-01-02T03:04:05+0200",
			      "2024-01-02T03:04:05Zjunk", "2024-01-02T25:04:05Z" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ASSERT_ERR(rfc3339_parse(bad[i], &ns), EINVAL);
	ASSERT_EQ(ns, 1);
}

TEST(rfc3339_format_round_trip)
{
	char b[64];
	int64_t ns = 1704164645LL * NSEC_PER_SEC + 123456789, back = 0;
	rfc3339_format(ns, 0, b, sizeof(b));
	ASSERT_STREQ(b, "2024-01-02T03:04:05Z");
	rfc3339_format(ns, 6, b, sizeof(b));
	ASSERT_STREQ(b, "2024-01-02T03:04:05.123456Z");
	rfc3339_format(ns, 9, b, sizeof(b));
	ASSERT_OK(rfc3339_parse(b, &back));
	ASSERT_EQ(back, ns);
}

TEST(backoff_full_jitter_bounds)
{
	struct backoff b = { .base_ns = 100 * NSEC_PER_MSEC, .max_ns = 20 * NSEC_PER_SEC, .full_jitter = true };
	for (unsigned i = 0; i < 20; i++) {
		int64_t cap = 100 * NSEC_PER_MSEC << (i < 8 ? i : 8);
		if (cap > 20 * NSEC_PER_SEC)
			cap = 20 * NSEC_PER_SEC;
		int64_t d = backoff_next(&b);
		ASSERT_GE(d, 0);
		ASSERT_LE(d, cap);
	}
	backoff_reset(&b);
	ASSERT_EQ(b.attempt, 0);
}

TEST(backoff_exponential_with_jitter)
{
	struct backoff b = { .base_ns = 5 * NSEC_PER_MSEC, .max_ns = 1000 * NSEC_PER_SEC, .jitter = 0.1 };
	int64_t d0 = backoff_next(&b), d1 = backoff_next(&b), d2 = backoff_next(&b);
	ASSERT_TRUE(d0 >= 5 * NSEC_PER_MSEC && d0 <= 5500 * NSEC_PER_USEC);
	ASSERT_TRUE(d1 >= 10 * NSEC_PER_MSEC && d1 <= 11 * NSEC_PER_MSEC);
	ASSERT_TRUE(d2 >= 20 * NSEC_PER_MSEC && d2 <= 22 * NSEC_PER_MSEC);
	for (int i = 0; i < 100; i++)
		backoff_next(&b);
	ASSERT_LE(backoff_next(&b), 1100 * NSEC_PER_SEC);
}

TEST(random_below_spreads)
{
	int seen[10] = { 0 };
	for (int i = 0; i < 2000; i++)
		seen[random_below(10)]++;
	for (int i = 0; i < 10; i++)
		ASSERT_GT(seen[i], 100);
}
