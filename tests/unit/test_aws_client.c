/* Endpoints, retry policy, shared files and the credential chain's offline sources. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/creds.h"
#include "common/aws/endpoints.h"
#include "common/aws/imds.h"
#include "common/base/timeutil.h"
#include "tests/unit/harness.h"
#include "tests/unit/peer.h"

static const char *const env_vars[] = {
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_EC2",
    "AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2",
    "AWS_ENDPOINT_URL_SQS",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_MAX_ATTEMPTS",
};

static void unset_env(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(env_vars); i++)
		unsetenv(env_vars[i]);
}

static void clean_env(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(env_vars); i++)
		unsetenv(env_vars[i]);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
	setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
}

TEST(aws_endpoints_standard_and_partitions)
{
	struct aws_endpoints e;
	struct aws_endpoint ep;

	clean_env();
	aws_endpoints_init(&e);
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_EC2, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "https://ec2.us-east-1.amazonaws.com");
	ASSERT_STREQ(ep.signing_name, "ec2");
	ASSERT_FALSE(ep.custom);
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_ELBV2, "cn-north-1", &ep));
	ASSERT_STREQ(ep.url, "https://elasticloadbalancing.cn-north-1.amazonaws.com.cn");
	ASSERT_STREQ(ep.signing_name, "elasticloadbalancing");
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_STS, "us-gov-west-1", &ep));
	ASSERT_STREQ(ep.url, "https://sts.us-gov-west-1.amazonaws.com");
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_EVENTS, "eu-central-1", &ep));
	ASSERT_STREQ(ep.url, "https://events.eu-central-1.amazonaws.com");
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_AUTOSCALING, "us-iso-east-1", &ep));
	ASSERT_STREQ(ep.url, "https://autoscaling.us-iso-east-1.c2s.ic.gov");
	ASSERT_STREQ(aws_partition("cn-northwest-1"), "aws-cn");
	ASSERT_STREQ(aws_partition("us-gov-east-1"), "aws-us-gov");
	ASSERT_STREQ(aws_partition("eu-west-1"), "aws");
	ASSERT_ERR(aws_endpoint_resolve(&e, AWS_SVC_EC2, "US-EAST-1", &ep), EINVAL);
	ASSERT_ERR(aws_endpoint_resolve(&e, AWS_SVC_EC2, "us-east-1/../x", &ep), EINVAL);
	ASSERT_ERR(aws_endpoint_resolve(&e, AWS_SVC_EC2, "", &ep), EINVAL);
	aws_endpoints_release(&e);
	unset_env();
}

TEST(aws_endpoints_overrides_precedence)
{
	struct aws_endpoints e;
	struct aws_endpoint ep;

	clean_env();
	aws_endpoints_init(&e);
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1/", 1);
	setenv("AWS_ENDPOINT_URL_EC2", "http://127.0.0.1:2", 1);
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_EC2, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "http://127.0.0.1:2");
	ASSERT_TRUE(ep.custom);
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_SQS, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "http://127.0.0.1:1"); /* trailing '/' dropped */
	ASSERT_STREQ(ep.signing_region, "us-east-1");
	setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true", 1);
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_EC2, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "https://ec2.us-east-1.amazonaws.com");
	unsetenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
	ASSERT_OK(aws_endpoints_set_all(&e, "http://127.0.0.1:3"));
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_EC2, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "http://127.0.0.1:3");
	/* [ServiceOverride]: URL, SigningRegion, SigningName */
	ASSERT_OK(aws_endpoints_set_override(&e, AWS_SVC_EC2, "https://ec2.example.internal",
					     "eu-west-1", "ec2-custom"));
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_EC2, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "https://ec2.example.internal");
	ASSERT_STREQ(ep.signing_region, "eu-west-1");
	ASSERT_STREQ(ep.signing_name, "ec2-custom");
	ASSERT_ERR(aws_endpoints_set_override(&e, AWS_SVC_EC2, "ftp://x", NULL, NULL), EINVAL);
	ASSERT_ERR(aws_endpoints_set_all(&e, "http://a b"), EINVAL);
	aws_endpoints_release(&e);
	unset_env();
}

TEST(aws_service_table)
{
	const struct aws_service_info *s;

	ASSERT_STREQ(aws_service_by_name("ec2")->version, "2016-11-15");
	ASSERT_STREQ(aws_service_by_name("elb")->version, "2012-06-01");
	ASSERT_STREQ(aws_service_by_name("elbv2")->version, "2015-12-01");
	ASSERT_STREQ(aws_service_by_name("autoscaling")->version, "2011-01-01");
	ASSERT_STREQ(aws_service_by_name("sts")->version, "2011-06-15");
	s = aws_service_by_name("sqs");
	ASSERT_EQ(s->protocol, AWS_PROTO_JSON);
	ASSERT_STREQ(s->target_prefix, "AmazonSQS");
	ASSERT_STREQ(s->content_type, "application/x-amz-json-1.0");
	s = aws_service_by_name("eventbridge");
	ASSERT_STREQ(s->target_prefix, "AWSEvents");
	ASSERT_STREQ(s->content_type, "application/x-amz-json-1.1");
	ASSERT_STREQ(s->env_name, "EVENTBRIDGE");
	ASSERT_STREQ(aws_service_by_name("elbv2")->env_name, "ELASTIC_LOAD_BALANCING_V2");
	ASSERT_STREQ(aws_service_by_name("autoscaling")->env_name, "AUTO_SCALING");
	ASSERT_NULL(aws_service_by_name("s3"));
}

TEST(aws_retry_bucket_and_delay)
{
	struct aws_retry_bucket b = {AWS_RETRY_TOKENS};
	unsigned cost = 0, n = 0;

	/* 500 tokens: 100 plain retries, then nothing */
	while (aws_retry_bucket_take(&b, false, &cost))
		n++;
	ASSERT_EQ(n, 100);
	ASSERT_EQ(b.tokens, 0);
	ASSERT_FALSE(aws_retry_bucket_take(&b, true, &cost));
	/* a success without retries gives 1 back, one with retries what they took */
	aws_retry_bucket_refund(&b, 0);
	ASSERT_EQ(b.tokens, 1);
	aws_retry_bucket_refund(&b, 15);
	ASSERT_EQ(b.tokens, 16);
	cost = 0;
	ASSERT_TRUE(aws_retry_bucket_take(&b, true, &cost));
	ASSERT_EQ(cost, 10);
	ASSERT_EQ(b.tokens, 6);
	b.tokens = 499;
	aws_retry_bucket_refund(&b, 50);
	ASSERT_EQ(b.tokens, AWS_RETRY_TOKENS);

	for (int i = 0; i < 200; i++) {
		int64_t d1 = aws_retry_delay(1, 100 * NSEC_PER_MSEC, 20 * NSEC_PER_SEC);
		int64_t d3 = aws_retry_delay(3, 100 * NSEC_PER_MSEC, 20 * NSEC_PER_SEC);
		int64_t d20 = aws_retry_delay(20, NSEC_PER_SEC, 20 * NSEC_PER_SEC);
		ASSERT_TRUE(d1 >= 0 && d1 < 100 * NSEC_PER_MSEC);
		ASSERT_TRUE(d3 >= 0 && d3 < 400 * NSEC_PER_MSEC);
		ASSERT_TRUE(d20 >= 0 && d20 < 20 * NSEC_PER_SEC);
	}
	ASSERT_EQ(aws_retry_delay(0, NSEC_PER_SEC, NSEC_PER_SEC), 0);
}

/* The bound of the first retry's delay: 1 s after throttling, 100 ms after another error. */
TEST(aws_client_retry_cap_throttling_base)
{
	struct aws_client *c = NULL;

	clean_env();
	ASSERT_OK(aws_client_new(&(struct aws_client_opts){.region = "us-east-1"}, &c));
	int64_t thr1 = aws_client_retry_cap(c, 1, true), err1 = aws_client_retry_cap(c, 1, false);
	int64_t thr3 = aws_client_retry_cap(c, 3, true), err3 = aws_client_retry_cap(c, 3, false);
	int64_t thr9 = aws_client_retry_cap(c, 9, true);
	aws_client_free(c);
	ASSERT_EQ(thr1, NSEC_PER_SEC);
	ASSERT_EQ(err1, 100 * NSEC_PER_MSEC);
	ASSERT_EQ(thr3, 4 * NSEC_PER_SEC);
	ASSERT_EQ(err3, 400 * NSEC_PER_MSEC);
	ASSERT_EQ(thr9, 20 * NSEC_PER_SEC);
}

/* Milliseconds aws_do takes against a peer that always answers reply, with 8 retries. */
static int64_t retries_ms(const char *reply, int64_t retry_base, int64_t throttle_base)
{
	struct peer *p = peer_start(reply);
	struct aws_request rq = {.service = AWS_SVC_EC2, .action = "DescribeInstances"};
	struct aws_reply rep = {0};
	struct aws_client *c = NULL;
	struct aws_error err;
	char url[64];
	int64_t ms = -1;

	if (!p)
		return -1;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", p->port);
	struct aws_client_opts o = {
	    .region = "us-east-1",
	    .endpoint_url = url,
	    .creds = {.access_key_id = "AKIDEXAMPLE", .secret_access_key = "secret"},
	    .max_attempts = 9,
	    .retry_base_ns = retry_base,
	    .throttle_base_ns = throttle_base,
	    .max_backoff_ns = 100 * NSEC_PER_MSEC};
	if (aws_client_new(&o, &c) == 0) {
		int64_t t0 = now_mono_ns();
		if (aws_do(c, &rq, &rep, &err) < 0 && atomic_load(&p->requests) == 9)
			ms = elapsed_ms(t0);
		aws_client_free(c);
	}
	peer_stop(p);
	return ms;
}

/* A throttled call waits on the throttling base, another failure on the retry base: 8 waits,
 * each uniform below 100 ms on the base that applies, add up to 40 ms or more (the odds of
 * less are 1e-8), and to nearly nothing on a 1 ns base. */
TEST(aws_call_throttled_waits_on_the_throttling_base)
{
#define ERR_REPLY(status, code)                                                                    \
	"HTTP/1.1 " status "\r\nContent-Type: text/xml\r\nConnection: close\r\n\r\n"               \
	"<Response><Errors><Error><Code>" code "</Code><Message>m</Message></Error></Errors>"      \
	"<RequestID>r</RequestID></Response>"
	static const char throttled[] =
	    ERR_REPLY("503 Service Unavailable", "RequestLimitExceeded");
	static const char failed[] = ERR_REPLY("500 Internal Server Error", "InternalError");

	clean_env();
	ASSERT_GE(retries_ms(throttled, 1, 100 * NSEC_PER_MSEC), 40);
	ASSERT_GE(retries_ms(failed, 100 * NSEC_PER_MSEC, 1), 40);
}

TEST(aws_ini_parsing)
{
	static const char cfg[] = "# comment\n"
				  "[default]\n"
				  "region = us-west-2 ; inline comment\n"
				  "[profile dev]\n"
				  "role_arn=arn:aws:iam::1:role/x#not-a-comment\n"
				  "source_profile = base\n"
				  "s3 =\n"
				  "  max_concurrent_requests = 20\n"
				  "output = json\n"
				  "[sso-session x]\n"
				  "region = nope\n"
				  "[profile   spaced  ]\n"
				  "Region = eu-west-1\n"
				  "[broken\n"
				  "key = ignored\n";
	struct aws_ini *ini = NULL;

	ASSERT_OK(aws_ini_parse(cfg, strlen(cfg), true, &ini));
	ASSERT_STREQ(aws_ini_get(ini, "default", "region"), "us-west-2");
	ASSERT_STREQ(aws_ini_get(ini, "dev", "role_arn"), "arn:aws:iam::1:role/x#not-a-comment");
	ASSERT_STREQ(aws_ini_get(ini, "dev", "source_profile"), "base");
	ASSERT_NULL(aws_ini_get(ini, "dev", "max_concurrent_requests"));
	ASSERT_STREQ(aws_ini_get(ini, "dev", "output"), "json");
	ASSERT_NULL(aws_ini_get(ini, "x", "region"));
	ASSERT_STREQ(aws_ini_get(ini, "spaced", "region"), "eu-west-1");
	ASSERT_FALSE(aws_ini_has_section(ini, "broken"));
	aws_ini_free(ini);
	/* the credentials file takes section names as they are */
	ASSERT_OK(aws_ini_parse("[profile x]\na=1\n[y]\nb=2\n", 24, false, &ini));
	ASSERT_STREQ(aws_ini_get(ini, "profile x", "a"), "1");
	ASSERT_STREQ(aws_ini_get(ini, "y", "b"), "2");
	aws_ini_free(ini);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

TEST(aws_creds_chain_offline_sources)
{
	struct aws_client *c = NULL;
	struct aws_client_opts o = {.region = "us-east-1"};
	struct aws_credentials cr = {0};
	char cred_path[512], cfg_path[512];
	const char *region;

	clean_env();
	/* nothing configured (metadata disabled): -ENOKEY */
	ASSERT_OK(aws_client_new(&o, &c));
	ASSERT_ERR(aws_creds_get(aws_client_creds(c), &cr), ENOKEY);
	aws_client_free(c);

	/* flags first */
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	o.creds.access_key_id = "AKIDFLAG";
	o.creds.secret_access_key = "flagsecret";
	ASSERT_OK(aws_client_new(&o, &c));
	ASSERT_OK(aws_creds_get(aws_client_creds(c), &cr));
	ASSERT_STREQ(cr.access_key_id, "AKIDFLAG");
	ASSERT_EQ(aws_creds_source(aws_client_creds(c)), AWS_CREDS_STATIC);
	aws_credentials_release(&cr);
	aws_client_free(c);

	/* then the environment */
	o.creds.access_key_id = o.creds.secret_access_key = NULL;
	setenv("AWS_SESSION_TOKEN", "envtoken", 1);
	ASSERT_OK(aws_client_new(&o, &c));
	ASSERT_OK(aws_creds_get(aws_client_creds(c), &cr));
	ASSERT_STREQ(cr.access_key_id, "AKIDENV");
	ASSERT_STREQ(cr.session_token, "envtoken");
	ASSERT_EQ(cr.expiration_ns, 0);
	ASSERT_EQ(aws_creds_source(aws_client_creds(c)), AWS_CREDS_ENV);
	aws_credentials_release(&cr);
	aws_client_free(c);

	/* then the shared files; a profile named explicitly wins over the environment */
	snprintf(cred_path, sizeof(cred_path), "%s/credentials", test_tmpdir());
	snprintf(cfg_path, sizeof(cfg_path), "%s/config", test_tmpdir());
	write_file(cred_path,
		   "[default]\naws_access_key_id = AKIDDEFAULT\n"
		   "aws_secret_access_key = defsecret\n"
		   "[team]\naws_access_key_id=AKIDTEAM\naws_secret_access_key=teamsecret\n"
		   "aws_session_token=teamtoken\n");
	write_file(cfg_path, "[profile team]\nregion = eu-north-1\n[default]\nregion = ap-south-1\n"
			     "[profile empty]\noutput = json\n");
	setenv("AWS_SHARED_CREDENTIALS_FILE", cred_path, 1);
	setenv("AWS_CONFIG_FILE", cfg_path, 1);
	setenv("AWS_PROFILE", "team", 1);
	o.region = NULL;
	ASSERT_OK(aws_client_new(&o, &c));
	ASSERT_OK(aws_client_region(c, &region));
	ASSERT_STREQ(region, "eu-north-1");
	ASSERT_OK(aws_creds_get(aws_client_creds(c), &cr));
	ASSERT_STREQ(cr.access_key_id, "AKIDTEAM");
	ASSERT_STREQ(cr.session_token, "teamtoken");
	ASSERT_EQ(aws_creds_source(aws_client_creds(c)), AWS_CREDS_PROFILE);
	aws_credentials_release(&cr);
	aws_client_free(c);

	/* the region: AWS_REGION beats the profile, AWS_DEFAULT_REGION comes after it */
	setenv("AWS_DEFAULT_REGION", "sa-east-1", 1);
	ASSERT_OK(aws_client_new(&o, &c));
	ASSERT_OK(aws_client_region(c, &region));
	ASSERT_STREQ(region, "sa-east-1");
	aws_client_free(c);
	setenv("AWS_REGION", "ca-central-1", 1);
	ASSERT_OK(aws_client_new(&o, &c));
	ASSERT_OK(aws_client_region(c, &region));
	ASSERT_STREQ(region, "ca-central-1");
	aws_client_free(c);
	unsetenv("AWS_REGION");
	unsetenv("AWS_DEFAULT_REGION");

	/* a named profile that does not exist, or has no keys, is an error */
	setenv("AWS_PROFILE", "nosuch", 1);
	ASSERT_OK(aws_client_new(&o, &c));
	ASSERT_ERR(aws_creds_get(aws_client_creds(c), &cr), ENOKEY);
	aws_client_free(c);
	o.creds.profile = "empty";
	ASSERT_OK(aws_client_new(&o, &c));
	ASSERT_ERR(aws_creds_get(aws_client_creds(c), &cr), ENOKEY);
	aws_client_free(c);
	o.creds.profile = NULL;

	/* without AWS_PROFILE the environment keys come before the default profile */
	unsetenv("AWS_PROFILE");
	ASSERT_OK(aws_client_new(&o, &c));
	ASSERT_OK(aws_creds_get(aws_client_creds(c), &cr));
	ASSERT_STREQ(cr.access_key_id, "AKIDENV");
	aws_credentials_release(&cr);
	aws_client_free(c);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	ASSERT_OK(aws_client_new(&o, &c));
	ASSERT_OK(aws_creds_get(aws_client_creds(c), &cr));
	ASSERT_STREQ(cr.access_key_id, "AKIDDEFAULT");
	aws_credentials_release(&cr);
	ASSERT_OK(aws_client_region(c, &region));
	ASSERT_STREQ(region, "ap-south-1");
	aws_client_free(c);
	unset_env();
}

struct fake_source {
	int calls;
	int64_t life_ns;
	int fail_after;
};

static int fake_fetch(void *ud, struct aws_credentials *ret)
{
	struct fake_source *f = ud;
	char ak[32];

	f->calls++;
	if (f->fail_after && f->calls > f->fail_after)
		return -ETIMEDOUT;
	snprintf(ak, sizeof(ak), "AKID%d", f->calls);
	return aws_credentials_set(ret, ak, "s", "t", now_real_ns() + f->life_ns);
}

TEST(aws_creds_refresh_before_expiry)
{
	struct fake_source f = {.life_ns = NSEC_PER_SEC};
	struct aws_creds *p;
	struct aws_credentials cr = {0};

	ASSERT_OK(aws_creds_new_custom(fake_fetch, &f, &p));
	ASSERT_OK(aws_creds_get(p, &cr));
	ASSERT_STREQ(cr.access_key_id, "AKID1");
	aws_credentials_release(&cr);
	ASSERT_OK(aws_creds_get(p, &cr)); /* cached */
	ASSERT_STREQ(cr.access_key_id, "AKID1");
	aws_credentials_release(&cr);
	ASSERT_EQ(f.calls, 1);
	/* half of a short lifetime: refreshed */
	sleep_ns(600 * NSEC_PER_MSEC);
	ASSERT_OK(aws_creds_get(p, &cr));
	ASSERT_STREQ(cr.access_key_id, "AKID2");
	aws_credentials_release(&cr);
	ASSERT_EQ(aws_creds_fetch_count(p), 2);
	/* a failing refresh keeps the old ones while they last */
	f.fail_after = 2;
	sleep_ns(600 * NSEC_PER_MSEC);
	ASSERT_OK(aws_creds_get(p, &cr));
	ASSERT_STREQ(cr.access_key_id, "AKID2");
	aws_credentials_release(&cr);
	/* invalidate forces a fetch, and a failing one is an error then */
	f.fail_after = 0;
	aws_creds_invalidate(p);
	ASSERT_OK(aws_creds_get(p, &cr));
	ASSERT_STREQ(cr.access_key_id, "AKID4");
	aws_credentials_release(&cr);
	f.fail_after = 4;
	aws_creds_invalidate(p);
	ASSERT_ERR(aws_creds_get(p, &cr), ETIMEDOUT);
	/* once they expired and cannot be renewed: -EKEYEXPIRED */
	f.fail_after = 0;
	f.life_ns = 300 * NSEC_PER_MSEC;
	ASSERT_OK(aws_creds_get(p, &cr));
	ASSERT_STREQ(cr.access_key_id, "AKID6");
	aws_credentials_release(&cr);
	f.fail_after = 6;
	sleep_ns(350 * NSEC_PER_MSEC);
	ASSERT_ERR(aws_creds_get(p, &cr), EKEYEXPIRED);
	aws_creds_free(p);
}

TEST(aws_imds_identity_document)
{
	static const char doc[] =
	    "{\"accountId\":\"123456789012\",\"architecture\":\"x86_64\","
	    "\"availabilityZone\":\"us-east-1a\",\"imageId\":\"ami-1\","
	    "\"instanceId\":\"i-1234567890abcdef0\",\"instanceType\":\"m5.large\","
	    "\"pendingTime\":\"2024-01-01T00:00:00Z\",\"privateIp\":\"10.0.0.1\","
	    "\"region\":\"us-east-1\",\"version\":\"2017-09-30\"}";
	struct aws_imds_identity id;

	ASSERT_OK(aws_imds_identity_parse(doc, strlen(doc), &id));
	ASSERT_STREQ(id.instance_id, "i-1234567890abcdef0");
	ASSERT_STREQ(id.region, "us-east-1");
	ASSERT_STREQ(id.availability_zone, "us-east-1a");
	ASSERT_STREQ(id.private_ip, "10.0.0.1");
	ASSERT_ERR(aws_imds_identity_parse("{\"instanceId\":\"i-1\"}", 18, &id), EBADMSG);
	ASSERT_ERR(aws_imds_identity_parse("[1]", 3, &id), EBADMSG);
	ASSERT_ERR(aws_imds_identity_parse("{", 1, &id), EBADMSG);
}

TEST(aws_imds_disabled_and_endpoint)
{
	struct aws_imds *m;
	struct aws_imds_opts o = {.endpoint = "http://127.0.0.1:9/"};
	char *v;

	clean_env();
	ASSERT_OK(aws_imds_new(&o, &m));
	ASSERT_TRUE(aws_imds_disabled(m));
	ASSERT_ERR(aws_imds_get(m, "meta-data/instance-id", &v), ENODEV);
	aws_imds_free(m);
	unsetenv("AWS_EC2_METADATA_DISABLED");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:8/", 1);
	ASSERT_OK(aws_imds_new(NULL, &m));
	ASSERT_STREQ(aws_imds_endpoint(m), "http://127.0.0.1:8");
	ASSERT_FALSE(aws_imds_disabled(m));
	aws_imds_free(m);
	unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	ASSERT_ERR(aws_imds_new(&(struct aws_imds_opts){.endpoint = "169.254.169.254"}, &m),
		   EINVAL);
	unset_env();
}

struct slow_source {
	int calls;
	int64_t slow_ns;
};

static int slow_fetch(void *ud, struct aws_credentials *ret)
{
	struct slow_source *s = ud;
	char ak[32];
	int n = __atomic_add_fetch(&s->calls, 1, __ATOMIC_SEQ_CST);

	if (n > 1)
		sleep_ns(s->slow_ns);
	snprintf(ak, sizeof(ak), "AKID%d", n);
	/* valid for 1 s: due for refresh at 500 ms, usable until 900 ms */
	return aws_credentials_set(ret, ak, "s", "t", now_real_ns() + NSEC_PER_SEC);
}

static struct aws_creds *test_aws_creds_shared;

static void *get_thread(void *arg)
{
	struct aws_credentials *cr = arg;

	if (aws_creds_get(test_aws_creds_shared, cr) < 0)
		cr->access_key_id = NULL;
	return NULL;
}

TEST(aws_creds_refresh_does_not_block_others)
{
	struct slow_source s = {.slow_ns = 600 * NSEC_PER_MSEC};
	struct aws_credentials a = {0}, b = {0};
	pthread_t t;
	int64_t start;

	ASSERT_OK(aws_creds_new_custom(slow_fetch, &s, &test_aws_creds_shared));
	ASSERT_OK(aws_creds_get(test_aws_creds_shared, &a));
	ASSERT_STREQ(a.access_key_id, "AKID1");
	aws_credentials_release(&a);
	sleep_ns(550 * NSEC_PER_MSEC);
	/* one thread refreshes (slowly); another meanwhile gets the current keys at once */
	ASSERT_EQ(pthread_create(&t, NULL, get_thread, &a), 0);
	sleep_ns(100 * NSEC_PER_MSEC);
	start = now_mono_ns();
	ASSERT_OK(aws_creds_get(test_aws_creds_shared, &b));
	ASSERT_LT(now_mono_ns() - start, 200 * NSEC_PER_MSEC);
	ASSERT_STREQ(b.access_key_id, "AKID1");
	aws_credentials_release(&b);
	pthread_join(t, NULL);
	ASSERT_STREQ(a.access_key_id, "AKID2");
	aws_credentials_release(&a);
	ASSERT_EQ(s.calls, 2);
	aws_creds_free(test_aws_creds_shared);
	test_aws_creds_shared = NULL;
}

/* A call's token ends it in flight, and in the wait before a retry. */
TEST(aws_call_cancelled_in_flight_and_in_a_retry_wait)
{
	static const char unavailable[] =
	    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/xml\r\nContent-Length: 130\r\n"
	    "Connection: close\r\n\r\n"
	    "<Response><Errors><Error><Code>Unavailable</Code><Message>try later</Message>"
	    "</Error></Errors><RequestID>r1</RequestID></Response>";
	struct peer *held = peer_start(NULL), *failing = peer_start(unavailable);
	struct aws_reply rep = {0};
	struct aws_error err;
	struct cancel *ct = NULL;
	struct aws_client *c = NULL;
	struct later l;
	char url[64];

	clean_env();
	ASSERT_TRUE(held && failing);
	ASSERT_OK(cancel_new(NULL, &ct));
	struct aws_request rq = {.service = AWS_SVC_EC2, .action = "DescribeInstances", .cancel = ct};
	struct aws_client_opts o = {.region = "us-east-1",
				    .endpoint_url = url,
				    .creds = {.access_key_id = "AKIDEXAMPLE",
					      .secret_access_key = "secret"},
				    .retry_base_ns = 10 * NSEC_PER_SEC,
				    .timeout_ns = 30 * NSEC_PER_SEC};

	/* in flight: the peer never answers */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", held->port);
	ASSERT_OK(aws_client_new(&o, &c));
	cancel_later(&l, ct, 100);
	int64_t t0 = now_mono_ns();
	int r = aws_do(c, &rq, &rep, &err);
	int64_t ms = elapsed_ms(t0);
	later_join(&l);
	aws_client_free(c);
	ASSERT_ERR(r, ECANCELED);
	ASSERT_LT(ms, 1000);

	/* in the wait before the second attempt (up to 10 s; cancelled once the first reply came) */
	cancel_reset(ct);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", failing->port);
	ASSERT_OK(aws_client_new(&o, &c));
	cancel_on_request(&l, ct, failing);
	t0 = now_mono_ns();
	r = aws_do(c, &rq, &rep, &err);
	ms = elapsed_ms(t0);
	later_join(&l);
	int requests = atomic_load(&failing->requests);
	aws_client_free(c);
	peer_stop(held);
	peer_stop(failing);
	cancel_free(ct);
	ASSERT_ERR(r, ECANCELED);
	ASSERT_LT(ms, 1000);
	ASSERT_LE(requests, 2); /* 2 when the random delay was under a few ms */
	ASSERT_CONTAINS(err.message, "canceled");
}

/* cloud-provider-aws's request label values: snake case, DescribeInstances singular */
TEST(aws_metric_request_name_snake_case)
{
	char out[64];

	aws_metric_request_name("DescribeInstances", out, sizeof(out));
	ASSERT_STREQ(out, "describe_instance");
	aws_metric_request_name("DescribeRouteTables", out, sizeof(out));
	ASSERT_STREQ(out, "describe_route_tables");
	aws_metric_request_name("CreateTags", out, sizeof(out));
	ASSERT_STREQ(out, "create_tags");
	aws_metric_request_name("DescribeLoadBalancersV2", out, sizeof(out));
	ASSERT_STREQ(out, "describe_load_balancers_v2");
	aws_metric_request_name("DescribeVpcs", out, sizeof(out));
	ASSERT_STREQ(out, "describe_vpcs");
	aws_metric_request_name("CreateSecurityGroup", out, 8);
	ASSERT_STREQ(out, "create"); /* cut, never overrun */
}
