#include <stdlib.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "tests/unit/harness.h"

static bool f_bool;
static long long f_int;
static double f_float;
static int64_t f_dur;
static char *f_str;
static char **f_list;
static char **f_map;

static const struct flag table[] = {
	{ "leader-elect", FLAG_BOOL, &f_bool, "true", NULL, "Start a leader election client." },
	{ "concurrent-workers", FLAG_INT, &f_int, "5", NULL, "Workers.", 1, 100 },
	{ "kube-api-qps", FLAG_FLOAT, &f_float, "20", NULL, "QPS." },
	{ "node-monitor-period", FLAG_DURATION, &f_dur, "5s", NULL, "Period." },
	{ "cloud-config", FLAG_STRING, &f_str, NULL, "TEST_FLAGS_CLOUD_CONFIG", "Config path." },
	{ "controllers", FLAG_STRLIST, &f_list, "*", "TEST_FLAGS_CONTROLLERS", "Controllers." },
	{ "labels", FLAG_MAP, &f_map, NULL, NULL, "Labels." },
	{ "ignored", FLAG_STRING, NULL, NULL, NULL, "Accepted, no effect." },
	LOG_FLAGS,
	{ NULL },
};

static int parse(int argc, const char **argv)
{
	char *copy[32];
	for (int i = 0; i < argc; i++)
		copy[i] = (char *)argv[i];
	return flags_parse("test", "usage", table, argc, copy);
}

TEST(flags_defaults)
{
	unsetenv("TEST_FLAGS_CLOUD_CONFIG");
	ASSERT_EQ(parse(1, (const char *[]){ "test" }), 0);
	ASSERT_TRUE(f_bool);
	ASSERT_EQ(f_int, 5);
	ASSERT_TRUE(f_float == 20.0);
	ASSERT_EQ(f_dur, 5 * NSEC_PER_SEC);
	ASSERT_NULL(f_str);
	ASSERT_EQ(strv_len(f_list), 1);
	ASSERT_STREQ(f_list[0], "*");
	flags_free(table);
}

TEST(flags_both_forms_and_positional)
{
	const char *argv[] = { "test",	 "--concurrent-workers=7", "pos1", "--cloud-config", "/etc/c.conf",
			       "-leader-elect=false", "--node-monitor-period", "1h30m", "--", "--pos2" };
	int n = parse(10, argv);
	ASSERT_EQ(n, 2);
	ASSERT_EQ(f_int, 7);
	ASSERT_STREQ(f_str, "/etc/c.conf");
	ASSERT_FALSE(f_bool);
	ASSERT_EQ(f_dur, 90LL * 60 * NSEC_PER_SEC);
	flags_free(table);
}

TEST(flags_list_replaces_default_then_appends)
{
	const char *argv[] = { "test", "--controllers=cloud-node,-route", "--controllers", "service",
			       "--labels=a=1,b=x=y", "--labels", "c=3" };
	ASSERT_EQ(parse(7, argv), 0);
	ASSERT_EQ(strv_len(f_list), 3);
	ASSERT_STREQ(f_list[0], "cloud-node");
	ASSERT_STREQ(f_list[1], "-route");
	ASSERT_STREQ(f_list[2], "service");
	ASSERT_STREQ(flags_map_get(f_map, "b"), "x=y");
	ASSERT_STREQ(flags_map_get(f_map, "c"), "3");
	ASSERT_NULL(flags_map_get(f_map, "d"));
	flags_free(table);
}

TEST(flags_environment_then_command_line)
{
	setenv("TEST_FLAGS_CLOUD_CONFIG", "/from/env", 1);
	ASSERT_EQ(parse(1, (const char *[]){ "test" }), 0);
	ASSERT_STREQ(f_str, "/from/env");
	ASSERT_EQ(parse(3, (const char *[]){ "test", "--cloud-config", "/from/flag" }), 0);
	ASSERT_STREQ(f_str, "/from/flag");
	unsetenv("TEST_FLAGS_CLOUD_CONFIG");
	flags_free(table);
}

/* an environment value replaces a list flag's default (it is not appended to it), and the
 * command line replaces the environment's value */
TEST(flags_environment_replaces_list_default)
{
	setenv("TEST_FLAGS_CONTROLLERS", "route,service", 1);
	ASSERT_EQ(parse(1, (const char *[]){ "test" }), 0);
	ASSERT_EQ(strv_len(f_list), 2);
	ASSERT_STREQ(f_list[0], "route");
	ASSERT_STREQ(f_list[1], "service");
	ASSERT_EQ(parse(2, (const char *[]){ "test", "--controllers=cloud-node" }), 0);
	ASSERT_EQ(strv_len(f_list), 1);
	ASSERT_STREQ(f_list[0], "cloud-node");
	unsetenv("TEST_FLAGS_CONTROLLERS");
	flags_free(table);
}

TEST(flags_errors_are_usage_errors)
{
	ASSERT_ERR(parse(2, (const char *[]){ "test", "--nope" }), EINVAL);
	ASSERT_ERR(parse(2, (const char *[]){ "test", "--concurrent-workers=0" }), EINVAL);
	ASSERT_ERR(parse(2, (const char *[]){ "test", "--concurrent-workers=abc" }), EINVAL);
	ASSERT_ERR(parse(2, (const char *[]){ "test", "--node-monitor-period=5x" }), EINVAL);
	ASSERT_ERR(parse(2, (const char *[]){ "test", "--leader-elect=maybe" }), EINVAL);
	ASSERT_ERR(parse(2, (const char *[]){ "test", "--cloud-config" }), EINVAL);
	ASSERT_ERR(parse(2, (const char *[]){ "test", "--labels=novalue" }), EINVAL);
	ASSERT_ERR(parse(2, (const char *[]){ "test", "--v=-1" }), EINVAL);
	ASSERT_ERR(parse(2, (const char *[]){ "test", "--logging-format=xml" }), EINVAL);
	ASSERT_EQ(flags_exit_code(-EINVAL), 2);
	ASSERT_EQ(flags_exit_code(-ECANCELED), 0);
	flags_free(table);
	log_flag_v = 0;
	free(log_flag_format);
	log_flag_format = NULL;
	log_apply_flags();
}

TEST(flags_ignored_flag_is_checked_not_stored)
{
	ASSERT_EQ(parse(3, (const char *[]){ "test", "--ignored", "value" }), 0);
	flags_free(table);
}

TEST(flags_verbosity_applies_to_log)
{
	int before = log_verbosity;
	ASSERT_EQ(parse(2, (const char *[]){ "test", "--v=3" }), 0);
	ASSERT_EQ(log_verbosity, 3);
	flags_free(table);
	log_flag_v = before;
	log_apply_flags();
}

/* flags-check (check mode): the real parse, then -ECANCELED (exit 0) instead of a count */
TEST(flags_check_mode_accepts_and_stops)
{
	char log_path[512];
	snprintf(log_path, sizeof(log_path), "%s/check.log", test_tmpdir());
	unlink(log_path);
	flags_set_check_only(true);
	ASSERT_FALSE(flags_check_parsed());
	int r = parse(5, (const char *[]){ "test", "--concurrent-workers=7", "--logtostderr=false",
					   "--log-file", log_path });
	ASSERT_ERR(r, ECANCELED);
	ASSERT_EQ(flags_exit_code(r), 0);
	ASSERT_TRUE(flags_check_parsed());
	ASSERT_EQ(f_int, 7); /* parsed as for a run */
	ASSERT_EQ(access(log_path, F_OK), -1); /* --log-file is not opened */
	flags_set_check_only(false);
	ASSERT_FALSE(flags_check_parsed());
	ASSERT_EQ(parse(2, (const char *[]){ "test", "pos" }), 1); /* check mode off again */
	flags_free(table);
}

TEST(flags_check_mode_refuses_what_a_run_refuses)
{
	flags_set_check_only(true);
	ASSERT_ERR(parse(2, (const char *[]){ "test", "--nope" }), EINVAL);
	ASSERT_ERR(parse(2, (const char *[]){ "test", "--concurrent-workers=0" }), EINVAL);
	ASSERT_ERR(parse(3, (const char *[]){ "test", "--node-monitor-period", "5x" }), EINVAL);
	ASSERT_ERR(parse(2, (const char *[]){ "test", "--cloud-config" }), EINVAL);
	/* a positional argument, which a run would hand to the command */
	int r = parse(3, (const char *[]){ "test", "--leader-elect", "controller" });
	ASSERT_ERR(r, EINVAL);
	ASSERT_EQ(flags_exit_code(r), 2);
	ASSERT_TRUE(flags_check_parsed());
	flags_set_check_only(false);
	flags_free(table);
}
