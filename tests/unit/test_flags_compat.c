/* The parser as a drop-in for Go's flag package and pflag: both dashes, =value and a separate
 * value, bools, '_' for '-', the klog and component-base logging flags on every table (and the
 * one warning line naming those without an effect), --log-file, --version, and value lists. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/ccm/ccm_internal.h"
#include "tests/unit/harness.h"

static bool f_bool;
static long long f_int;
static int64_t f_dur;
static char *f_str, *f_mode;
static char **f_sources;

static const struct flag table[] = {
	{ "batching", FLAG_BOOL, &f_bool, "false", NULL, "A bool." },
	{ "volume-attach-limit", FLAG_INT, &f_int, "-1", NULL, "An int.", -1, 1000 },
	{ "modify-volume-request-handler-timeout", FLAG_DURATION, &f_dur, "2s", NULL, "A duration." },
	{ "endpoint", FLAG_STRING, &f_str, "unix:///csi/csi.sock", NULL, "A string." },
	{ "mode", FLAG_STRING, &f_mode, "a", NULL, "One of a list.", .choices = "a,b" },
	{ "metadata-sources", FLAG_STRLIST, &f_sources, "imds,kubernetes", NULL, "A list.",
	  .choices = "imds,kubernetes,metadata-labeler" },
	{ "enable-node-local-volumes", FLAG_BOOL, NULL, "false", NULL, "Not here.",
	  .no_effect = true },
	LOG_FLAGS,
	{ NULL },
};

/* a table without LOG_FLAGS, like `aws-k8s version`'s */
static const struct flag bare[] = { { NULL } };

static int parse_table(const struct flag *t, int argc, const char **argv)
{
	char *copy[64];
	for (int i = 0; i < argc; i++)
		copy[i] = (char *)argv[i];
	/* keep usage errors out of the test output */
	int saved = dup(2), devnull = open("/dev/null", O_WRONLY);
	dup2(devnull, 2);
	int r = flags_parse("test", "usage", t, argc, copy);
	dup2(saved, 2);
	close(saved);
	close(devnull);
	return r;
}

#define PARSE(...)                                                                                 \
	parse_table(table, ARRAY_SIZE(((const char *[]){ "test", __VA_ARGS__ })),                 \
		    (const char *[]){ "test", __VA_ARGS__ })

/* The harness sends library logs to $TEST_LOG or /dev/null; a test that moved them puts them
 * back there. */
static void log_back_to_harness(void)
{
	const char *p = getenv("TEST_LOG") ? getenv("TEST_LOG") : "/dev/null";
	int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	log_set_output(fd >= 0 ? fd : 2);
}

static void reset_log_flags(void)
{
	flags_free(table);
	log_flag_v = 0;
	log_apply_flags();
}

/* What the log got while parsing argv with the table (its return value in *ret). */
static char *parse_capturing(int *ret, int argc, const char **argv)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/log.txt", test_tmpdir());
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return NULL;
	log_set_output(fd);
	*ret = parse_table(table, argc, argv);
	log_back_to_harness();
	close(fd);
	return test_read_file(path, NULL);
}

TEST(flags_go_both_dashes_and_both_value_forms)
{
	/* --name=value, --name value, -name=value, -name value */
	ASSERT_EQ(PARSE("--volume-attach-limit=25", "-endpoint", "unix:///a.sock",
			"-modify-volume-request-handler-timeout=5s", "--mode", "b"),
		  0);
	ASSERT_EQ(f_int, 25);
	ASSERT_STREQ(f_str, "unix:///a.sock");
	ASSERT_EQ(f_dur, 5 * NSEC_PER_SEC);
	ASSERT_STREQ(f_mode, "b");
	ASSERT_EQ(PARSE("-volume-attach-limit", "7", "--endpoint=unix:///b.sock"), 0);
	ASSERT_EQ(f_int, 7);
	ASSERT_STREQ(f_str, "unix:///b.sock");
	/* an empty value after '=' is a value (Go takes --endpoint= as "") */
	ASSERT_EQ(PARSE("--endpoint="), 0);
	ASSERT_STREQ(f_str, "");
	reset_log_flags();
}

TEST(flags_go_bools)
{
	ASSERT_EQ(PARSE("--batching"), 0);
	ASSERT_TRUE(f_bool);
	ASSERT_EQ(PARSE("-batching"), 0);
	ASSERT_TRUE(f_bool);
	ASSERT_EQ(PARSE("--batching=false"), 0);
	ASSERT_FALSE(f_bool);
	/* Go's ParseBool words: 1, t, T, TRUE, true, True and their opposites */
	const char *yes[] = { "1", "t", "T", "TRUE", "true", "True" };
	const char *no[] = { "0", "f", "F", "FALSE", "false", "False" };
	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		char a[64], b[64];
		snprintf(a, sizeof(a), "--batching=%s", yes[i]);
		snprintf(b, sizeof(b), "-batching=%s", no[i]);
		ASSERT_EQ(PARSE(a), 0);
		ASSERT_TRUE(f_bool);
		ASSERT_EQ(PARSE(b), 0);
		ASSERT_FALSE(f_bool);
	}
	/* as in Go, a bool never takes the next word: "false" is a positional argument */
	const char *argv[] = { "test", "--batching", "false" };
	char *copy[] = { (char *)argv[0], (char *)argv[1], (char *)argv[2] };
	ASSERT_EQ(flags_parse("test", "", table, 3, copy), 1);
	ASSERT_TRUE(f_bool);
	ASSERT_STREQ(copy[0], "false");
	ASSERT_ERR(PARSE("--batching=maybe"), EINVAL);
	reset_log_flags();
}

TEST(flags_go_positional_and_terminator)
{
	const char *argv[] = { "test", "node", "--endpoint", "unix:///c.sock", "-", "--", "--batching" };
	char *copy[ARRAY_SIZE(argv)];
	for (size_t i = 0; i < ARRAY_SIZE(argv); i++)
		copy[i] = (char *)argv[i];
	ASSERT_EQ(flags_parse("test", "", table, ARRAY_SIZE(argv), copy), 3);
	ASSERT_STREQ(copy[0], "node");
	ASSERT_STREQ(copy[1], "-");
	ASSERT_STREQ(copy[2], "--batching");
	ASSERT_FALSE(f_bool);
	reset_log_flags();
}

TEST(flags_underscore_is_dash)
{
	ASSERT_EQ(PARSE("--volume_attach_limit=3", "-log_dir=/tmp", "--add_dir_header"), 0);
	ASSERT_EQ(f_int, 3);
	/* only '_' for '-': no other fuzzy matching */
	ASSERT_ERR(PARSE("--volume.attach.limit=3"), EINVAL);
	ASSERT_ERR(PARSE("--volume-attach-limi=3"), EINVAL);
	ASSERT_ERR(PARSE("--volume-attach-limits=3"), EINVAL);
	reset_log_flags();
}

TEST(flags_every_klog_flag_on_every_table)
{
	/* klog.InitFlags' flags and component-base's logging flags, each form once */
	const char *argv[] = { "test",
			       "-v=2",
			       "--v",
			       "3",
			       "-v",
			       "4",
			       "--vmodule=x=2",
			       "--log-flush-frequency=5s",
			       "--logtostderr",
			       "--alsologtostderr=false",
			       "--log-file=",
			       "--log-file-max-size=1800",
			       "--skip-headers=false",
			       "--skip-log-headers=false",
			       "--one-output=false",
			       "--stderrthreshold=ERROR",
			       "--log-dir=",
			       "--add-dir-header=false",
			       "--log-backtrace-at=:0",
			       "--logging-format=text",
			       "--log-text-split-stream=false",
			       "--log-text-info-buffer-size=0",
			       "--log-json-split-stream=false",
			       "--log-json-info-buffer-size=0" };
	ASSERT_EQ(parse_table(table, ARRAY_SIZE(argv), argv), 0);
	ASSERT_EQ(log_verbosity, 4);
	ASSERT_EQ(parse_table(bare, ARRAY_SIZE(argv), argv), 0);
	ASSERT_EQ(log_verbosity, 4);
	/* and the ccm's own table, with the upstream chart's arguments */
	const char *chart[] = { "ccm", "--v=2", "--cloud-provider=aws", "--logtostderr=true",
				"--log_flush_frequency=5s", "--vmodule=" };
	ASSERT_EQ(parse_table(ccm_flag_table, ARRAY_SIZE(chart), chart), 0);
	flags_free(ccm_flag_table);
	reset_log_flags();
}

TEST(flags_v_above_ten_is_ten)
{
	/* klog takes any level; ours ends at 10 */
	ASSERT_EQ(PARSE("--v=11"), 0);
	ASSERT_EQ(log_verbosity, 10);
	ASSERT_EQ(PARSE("--v=2147483647"), 0);
	ASSERT_EQ(log_verbosity, 10);
	ASSERT_ERR(PARSE("--v=-1"), EINVAL);
	ASSERT_ERR(PARSE("-v"), EINVAL);
	reset_log_flags();
}

TEST(flags_one_warning_names_the_flags_without_effect)
{
	int r = -1;
	const char *argv[] = { "test",	      "--vmodule=x=2",	  "--skip-headers",
			       "--v=0",	      "--logtostderr",	  "--enable-node-local-volumes",
			       "--batching", "--log-dir=/var/log", "--skip-headers" };
	_cleanup_free_ char *out = parse_capturing(&r, ARRAY_SIZE(argv), argv);
	ASSERT_EQ(r, 0);
	ASSERT_NOT_NULL(out);
	ASSERT_EQ(out[0], 'W');
	ASSERT_CONTAINS(out, "have no effect here");
	ASSERT_CONTAINS(out,
			"flags=\"--vmodule, --skip-headers, --enable-node-local-volumes, --log-dir\"");
	/* one line */
	ASSERT_TRUE(strchr(out, '\n') == out + strlen(out) - 1);

	/* the defaults given explicitly have the effect they say: no warning */
	const char *quiet[] = { "test",
				"--skip-headers=false",
				"--stderrthreshold=2",
				"--log-file-max-size=1800",
				"--log-backtrace-at=:0",
				"--enable-node-local-volumes=false",
				"--alsologtostderr=0",
				"--log-flush-frequency=1s",
				"--logtostderr=true" };
	_cleanup_free_ char *none = parse_capturing(&r, ARRAY_SIZE(quiet), quiet);
	ASSERT_EQ(r, 0);
	ASSERT_NOT_NULL(none);
	ASSERT_STREQ(none, "");

	/* --logtostderr=false has an effect only with --log-file */
	const char *files[] = { "test", "--logtostderr=false" };
	_cleanup_free_ char *lf = parse_capturing(&r, ARRAY_SIZE(files), files);
	ASSERT_EQ(r, 0);
	ASSERT_CONTAINS(lf, "--logtostderr=false without --log-file");
	reset_log_flags();
}

TEST(flags_log_file_with_logtostderr_false)
{
	char path[256], arg[300];
	snprintf(path, sizeof(path), "%s/klog.log", test_tmpdir());
	snprintf(arg, sizeof(arg), "--log_file=%s", path);
	ASSERT_EQ(PARSE("--logtostderr=false", arg), 0);
	log_warn("to the log file", KV_S("k", "v"));
	_cleanup_free_ char *got = test_read_file(path, NULL);
	ASSERT_NOT_NULL(got);
	ASSERT_CONTAINS(got, "\"to the log file\" k=\"v\"");
	/* appended to, and back on stderr after a parse without it */
	ASSERT_EQ(PARSE("--logtostderr=false", arg), 0);
	log_warn("second line");
	ASSERT_EQ(PARSE("--v=0"), 0);
	log_back_to_harness();
	log_warn("not in the file");
	_cleanup_free_ char *again = test_read_file(path, NULL);
	ASSERT_CONTAINS(again, "\"to the log file\"");
	ASSERT_CONTAINS(again, "\"second line\"");
	ASSERT_NOT_CONTAINS(again, "not in the file");
	/* klog exits when it cannot create its file: a usage error here */
	ASSERT_ERR(PARSE("--logtostderr=false", "--log-file=/nonexistent-dir/x/klog.log"), EINVAL);
	log_back_to_harness();
	reset_log_flags();
}

static char version_seen[32];

static int fake_version(const char *how)
{
	snprintf(version_seen, sizeof(version_seen), "%s", how);
	return strcmp(how, "true") == 0 || strcmp(how, "raw") == 0 ? 0 : -EINVAL;
}

TEST(flags_version)
{
	/* without a printer --version is an unknown flag */
	ASSERT_ERR(PARSE("--version"), EINVAL);
	flags_set_version(fake_version);
	ASSERT_ERR(PARSE("--version"), ECANCELED);
	ASSERT_STREQ(version_seen, "true");
	version_seen[0] = 0;
	ASSERT_ERR(PARSE("-version=true"), ECANCELED);
	ASSERT_STREQ(version_seen, "true");
	ASSERT_ERR(PARSE("--version=raw"), ECANCELED);
	ASSERT_STREQ(version_seen, "raw");
	version_seen[0] = 0;
	ASSERT_ERR(PARSE("--version=other"), EINVAL);
	ASSERT_EQ(PARSE("--version=false"), 0);
	ASSERT_EQ(PARSE("--version", "--version=false"), 0);
	/* the whole line is parsed first: a bad flag wins, as upstream */
	version_seen[0] = 0;
	ASSERT_ERR(PARSE("--version", "--nope"), EINVAL);
	ASSERT_STREQ(version_seen, "");
	ASSERT_EQ(flags_exit_code(PARSE("--version")), 0);
	flags_set_version(NULL);
	reset_log_flags();
}

TEST(flags_choices)
{
	ASSERT_EQ(PARSE("--metadata-sources=kubernetes,imds"), 0);
	ASSERT_EQ(strv_len(f_sources), 2);
	ASSERT_STREQ(f_sources[0], "kubernetes");
	ASSERT_EQ(PARSE("--metadata-sources", "metadata-labeler"), 0);
	ASSERT_EQ(strv_len(f_sources), 1);
	ASSERT_ERR(PARSE("--metadata-sources=imds,ec2"), EINVAL);
	ASSERT_ERR(PARSE("--metadata-sources=im"), EINVAL);
	ASSERT_ERR(PARSE("--metadata-sources=imdsx"), EINVAL);
	ASSERT_ERR(PARSE("--mode=c"), EINVAL);
	ASSERT_ERR(PARSE("--mode=a,b"), EINVAL);
	ASSERT_EQ(PARSE("--mode=a"), 0);
	reset_log_flags();
}
