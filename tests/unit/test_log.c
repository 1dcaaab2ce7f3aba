#include <ctype.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "common/base/log.h"
#include "tests/unit/harness.h"

/* Runs fn with the log going to a temporary file and returns what was written. */
static char *capture(void (*fn)(void))
{
	char path[256];
	snprintf(path, sizeof(path), "%s/log.txt", test_tmpdir());
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return NULL;
	log_set_output(fd);
	fn();
	log_set_output(2);
	close(fd);
	return test_read_file(path, NULL);
}

static void emit_basic(void)
{
	log_info("initialized node", KV_S("node", "ip-10-0-0-1"), KV_I("count", 3), KV_B("ok", true));
}

TEST(log_text_is_klog_format)
{
	int v = log_verbosity;
	log_format = LOG_FORMAT_TEXT;
	_cleanup_free_ char *out = capture(emit_basic);
	log_verbosity = v;
	ASSERT_NOT_NULL(out);
	ASSERT_EQ(out[0], 'I');
	/* I1202 15:04:05.123456 <tid> test_log.c:NN] "initialized node" node="ip-10-0-0-1" ... */
	ASSERT_TRUE(out[5] == ' ' && out[8] == ':' && out[11] == ':' && out[14] == '.');
	ASSERT_CONTAINS(out, " test_log.c:");
	ASSERT_CONTAINS(out, "] \"initialized node\" node=\"ip-10-0-0-1\" count=3 ok=true\n");
}

static void emit_json(void)
{
	log_error("failed", KV_E(-ENOENT), KV_S("quote", "a\"b\nc"));
}

TEST(log_json_format_is_valid_json)
{
	log_format = LOG_FORMAT_JSON;
	_cleanup_free_ char *out = capture(emit_json);
	log_format = LOG_FORMAT_TEXT;
	ASSERT_NOT_NULL(out);
	ASSERT_CONTAINS(out, "\"msg\":\"failed\"");
	ASSERT_CONTAINS(out, "\"err\":\"No such file or directory (ENOENT)\"");
	ASSERT_CONTAINS(out, "\"quote\":\"a\\\"b\\nc\"");
	cJSON *j = cJSON_Parse(out);
	ASSERT_NOT_NULL(j);
	cJSON_Delete(j);
}

static int evaluated;
static const char *side_effect(void)
{
	evaluated++;
	return "x";
}

static void emit_verbose(void)
{
	log_v(4, "debug detail", KV_S("x", side_effect()));
}

TEST(log_v_does_not_evaluate_below_verbosity)
{
	int v = log_verbosity;
	evaluated = 0;
	log_verbosity = 2;
	_cleanup_free_ char *out = capture(emit_verbose);
	ASSERT_EQ(evaluated, 0);
	ASSERT_STREQ(out, "");
	log_verbosity = 4;
	_cleanup_free_ char *out2 = capture(emit_verbose);
	log_verbosity = v;
	ASSERT_EQ(evaluated, 1);
	ASSERT_CONTAINS(out2, "debug detail");
}

static void emit_secrets(void)
{
	log_info("request", KV_S("headers", "Authorization: AWS4-HMAC-SHA256 Credential=AKID/20240101/us-east-1/ec2/aws4_request, Signature=deadbeef\nHost: ec2"),
		 KV_S("token", "s3cr3t-token"), KV_S("url", "https://x/?X-Amz-Security-Token=FQoG123&X-Amz-Signature=abcd&Action=Describe"),
		 KV_S("body", "{\"SecretAccessKey\":\"wJalr\",\"AccessKeyId\":\"AKIA\"}"));
	log_info("Bearer eyJhbGciOi.payload.sig used");
}

TEST(log_redacts_secrets_everywhere)
{
	_cleanup_free_ char *out = capture(emit_secrets);
	ASSERT_NOT_NULL(out);
	ASSERT_NOT_CONTAINS(out, "deadbeef");
	ASSERT_NOT_CONTAINS(out, "s3cr3t-token");
	ASSERT_NOT_CONTAINS(out, "FQoG123");
	ASSERT_NOT_CONTAINS(out, "abcd&");
	ASSERT_NOT_CONTAINS(out, "wJalr");
	ASSERT_NOT_CONTAINS(out, "eyJhbGciOi");
	ASSERT_CONTAINS(out, "Host: ec2");
	ASSERT_CONTAINS(out, "Action=Describe");
	ASSERT_CONTAINS(out, "AKIA");
	ASSERT_CONTAINS(out, "<redacted>");
}

TEST(log_redact_url_userinfo)
{
	char out[256];
	log_redact("DescribeVolumes http://user:pa55w0rd@127.0.0.1:5000: refused", out, sizeof(out));
	ASSERT_STREQ(out, "DescribeVolumes http://user:<redacted>@127.0.0.1:5000: refused");
	log_redact("url=\"https://ghp_T0KEN@host/x\"", out, sizeof(out));
	ASSERT_STREQ(out, "url=\"https://<redacted>@host/x\"");
	log_redact("server https://a:b:c@[::1]:6443/api?x=1", out, sizeof(out));
	ASSERT_STREQ(out, "server https://a:<redacted>@[::1]:6443/api?x=1");
	/* no userinfo: unchanged, an '@' in the path is not userinfo */
	log_redact("http://[::1]:8080/a@b and https://h:443", out, sizeof(out));
	ASSERT_STREQ(out, "http://[::1]:8080/a@b and https://h:443");
	/* the same through a log line */
	log_redact("x://:p@h", out, sizeof(out));
	ASSERT_STREQ(out, "x://:<redacted>@h");
}

TEST(log_redact_leaves_plain_text)
{
	char out[256];
	log_redact("token expired, refreshing; tokens=3 are fine?", out, sizeof(out));
	ASSERT_STREQ(out, "token expired, refreshing; tokens=<redacted> are fine?");
	log_redact("x-aws-ec2-metadata-token: AQAEAabc\r\nnext", out, sizeof(out));
	ASSERT_STREQ(out, "x-aws-ec2-metadata-token: <redacted>\r\nnext");
	log_redact("zone=us-east-1a node=a", out, sizeof(out));
	ASSERT_STREQ(out, "zone=us-east-1a node=a");
	log_redact("abcdef", out, 4);
	ASSERT_STREQ(out, "abc");
}

/* Issue 12: the words of a message are never replaced, even a word that names a secret and is
 * followed by ':' or another word. */
TEST(log_redact_keeps_words_of_messages)
{
	static const char *const plain[] = {
		"no usable AWS credentials: none configured",
		"token expired",
		"secret not found",
		"password expired for user admin",
		"refreshing credentials: the old ones expire at 12:00",
		"tokens: 3 left, secrets: none mounted",
		"Bearer token rejected",
		"the web identity token file is empty",
	};
	char out[256];

	for (size_t k = 0; k < ARRAY_SIZE(plain); k++)
		ASSERT_STREQ(log_redact(plain[k], out, sizeof(out)), plain[k]);
}

/* ... while the values of secret fields still go, and the field names stay. */
TEST(log_redact_secret_values)
{
	static const char *const cases[][2] = {
		{"password: hunter2", "password: <redacted>"},
		{"secret: s3cr3t and more", "secret: <redacted> and more"},
		{"Authorization: Bearer abc.def", "Authorization: <redacted>"},
		{"Authorization: Bearer abc.def\r\nHost: h", "Authorization: <redacted>\r\nHost: h"},
		{"sent Bearer abc.def", "sent Bearer <redacted>"},
		{"{\"SecretAccessKey\":\"wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY\",\"AccessKeyId\":"
		 "\"AKIDEXAMPLE\"}",
		 "{\"SecretAccessKey\":\"<redacted>\",\"AccessKeyId\":\"AKIDEXAMPLE\"}"},
		{"{\"Token\": \"IQoJb3\\\"x\", \"Expiration\": \"2030-01-01T00:00:00Z\"}",
		 "{\"Token\": \"<redacted>\", \"Expiration\": \"2030-01-01T00:00:00Z\"}"},
		{"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
		 "aws_secret_access_key = <redacted>"},
		{"AWS_SECRET_ACCESS_KEY=wJalr AWS_REGION=us-east-1",
		 "AWS_SECRET_ACCESS_KEY=<redacted> AWS_REGION=us-east-1"},
		{"aws_session_token: IQoJb3JpZ2lu", "aws_session_token: <redacted>"},
		{"SessionToken: IQoJb3JpZ2lu", "SessionToken: <redacted>"},
		{"X-Amz-Security-Token: FQoGZXIvYXdzE\r\nHost: ec2",
		 "X-Amz-Security-Token: <redacted>\r\nHost: ec2"},
		{"x-amz-security-token:FQoGZXIvYXdzE\nx-amz-date:20150830T123600Z",
		 "x-amz-security-token:<redacted>\nx-amz-date:20150830T123600Z"},
		{"https://x/?X-Amz-Credential=AKID%2F20240101&X-Amz-Signature=abcd&Action=Describe",
		 "https://x/?X-Amz-Credential=<redacted>&X-Amz-Signature=<redacted>&Action=Describe"},
		{"pull https://admin:hunter2@registry.example.com/v2 failed",
		 "pull https://admin:<redacted>@registry.example.com/v2 failed"},
	};
	char out[256];

	for (size_t k = 0; k < ARRAY_SIZE(cases); k++)
		ASSERT_STREQ(log_redact(cases[k][0], out, sizeof(out)), cases[k][1]);
}

static void emit_issue12(void)
{
	log_error("no usable AWS credentials: none configured", KV_S("why", "token expired"),
		  KV_S("password", "hunter2"));
}

/* The same through whole lines, text and JSON. */
TEST(log_lines_keep_words_of_messages)
{
	log_format = LOG_FORMAT_TEXT;
	_cleanup_free_ char *text = capture(emit_issue12);
	log_format = LOG_FORMAT_JSON;
	_cleanup_free_ char *json = capture(emit_issue12);
	log_format = LOG_FORMAT_TEXT;
	ASSERT_NOT_NULL(text);
	ASSERT_NOT_NULL(json);
	ASSERT_CONTAINS(text, "] \"no usable AWS credentials: none configured\" "
			      "why=\"token expired\" password=\"<redacted>\"\n");
	ASSERT_CONTAINS(json, "\"msg\":\"no usable AWS credentials: none configured\","
			      "\"why\":\"token expired\",\"password\":\"<redacted>\"}\n");
	ASSERT_NOT_CONTAINS(text, "hunter2");
	ASSERT_NOT_CONTAINS(json, "hunter2");
}

TEST(log_key_is_secret_names)
{
	ASSERT_TRUE(log_key_is_secret("token"));
	ASSERT_TRUE(log_key_is_secret("SecretAccessKey"));
	ASSERT_TRUE(log_key_is_secret("X-Amz-Security-Token"));
	ASSERT_FALSE(log_key_is_secret("token_file"));
	ASSERT_FALSE(log_key_is_secret("node"));
	ASSERT_FALSE(log_key_is_secret(NULL));
}

TEST(log_errno_name)
{
	ASSERT_STREQ(errno_name(-ENOENT), "ENOENT");
	ASSERT_STREQ(errno_name(EAGAIN), "EAGAIN");
	ASSERT_STREQ(errno_name(99999), "E?");
}

/* Golden lines: every byte of a text and a JSON line but the clock, for each kind of value. The
 * typed log API must keep these exactly. */
static int golden_line, golden_info_line;

static void emit_golden(void)
{
	golden_line = __LINE__ + 1;
	log_warn("golden \"msg\"\twith Bearer abc.def", KV_S("s", "v a\x01l"), KV_S("nil", NULL),
		 KV_S("password", "hunter2"), KV_I("i", -42), KV_U("u", 18446744073709551615ULL),
		 KV_D("d", 0.25), KV_D("tiny", 1e-7), KV_B("yes", true), KV_B("no", false),
		 KV_E(-EACCES));
}

static void emit_golden_info(void)
{
	golden_info_line = __LINE__ + 1;
	log_info("plain");
}

/* Checks "LMMDD HH:MM:SS.uuuuuu " at the start of a text line and returns what follows. */
static const char *skip_klog_clock(const char *s, char level)
{
	static const char shape[] = "L0000 00:00:00.000000 ";

	for (size_t i = 0; i < sizeof(shape) - 1; i++) {
		if (shape[i] == 'L' ? s[i] != level
		    : shape[i] == '0' ? (s[i] < '0' || s[i] > '9')
				      : s[i] != shape[i])
			return NULL;
	}
	return s + sizeof(shape) - 1;
}

/* Checks `{"ts":<digits>.<3 digits>,` at the start of a JSON line and returns what follows. */
static const char *skip_json_ts(const char *s)
{
	if (strncmp(s, "{\"ts\":", 6) != 0)
		return NULL;
	s += 6;
	if (*s < '0' || *s > '9')
		return NULL;
	while (*s >= '0' && *s <= '9')
		s++;
	if (s[0] != '.' || !isdigit((unsigned char)s[1]) || !isdigit((unsigned char)s[2]) ||
	    !isdigit((unsigned char)s[3]) || s[4] != ',')
		return NULL;
	return s + 5;
}

TEST(log_golden_text_lines)
{
	char want[512];
	log_format = LOG_FORMAT_TEXT;
	_cleanup_free_ char *out = capture(emit_golden);
	ASSERT_NOT_NULL(out);
	const char *rest = skip_klog_clock(out, 'W');
	ASSERT_NOT_NULL(rest);
	snprintf(want, sizeof(want),
		 "%7d test_log.c:%d] \"golden \\\"msg\\\"\\twith Bearer <redacted>\" s=\"v a\\u0001l\" "
		 "nil=\"<nil>\" password=\"<redacted>\" i=-42 u=18446744073709551615 d=0.25 "
		 "tiny=1e-07 yes=true no=false err=\"Permission denied (EACCES)\"\n",
		 (int)gettid(), golden_line);
	ASSERT_STREQ(rest, want);

	_cleanup_free_ char *out2 = capture(emit_golden_info);
	ASSERT_NOT_NULL(out2);
	rest = skip_klog_clock(out2, 'I');
	ASSERT_NOT_NULL(rest);
	snprintf(want, sizeof(want), "%7d test_log.c:%d] \"plain\"\n", (int)gettid(),
		 golden_info_line);
	ASSERT_STREQ(rest, want);
}

TEST(log_golden_json_lines)
{
	char want[512];
	log_format = LOG_FORMAT_JSON;
	_cleanup_free_ char *out = capture(emit_golden);
	_cleanup_free_ char *out2 = capture(emit_golden_info);
	log_format = LOG_FORMAT_TEXT;
	ASSERT_NOT_NULL(out);
	const char *rest = skip_json_ts(out);
	ASSERT_NOT_NULL(rest);
	snprintf(want, sizeof(want),
		 "\"caller\":\"test_log.c:%d\",\"msg\":\"golden \\\"msg\\\"\\twith Bearer <redacted>\","
		 "\"s\":\"v a\\u0001l\",\"nil\":\"<nil>\",\"password\":\"<redacted>\",\"i\":-42,"
		 "\"u\":18446744073709551615,\"d\":0.25,\"tiny\":1e-07,\"yes\":true,\"no\":false,"
		 "\"err\":\"Permission denied (EACCES)\"}\n",
		 golden_line);
	ASSERT_STREQ(rest, want);
	ASSERT_NOT_NULL(out2);
	rest = skip_json_ts(out2);
	ASSERT_NOT_NULL(rest);
	snprintf(want, sizeof(want), "\"caller\":\"test_log.c:%d\",\"msg\":\"plain\",\"v\":0}\n",
		 golden_info_line);
	ASSERT_STREQ(rest, want);
}
