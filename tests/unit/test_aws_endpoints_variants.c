/* Unit tests: the FIPS and dual-stack endpoint variants (common/aws/endpoints.c), chosen by
 * AWS_USE_FIPS_ENDPOINT / AWS_USE_DUALSTACK_ENDPOINT or the shared config. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/aws/endpoints.h"
#include "tests/unit/harness.h"

static const char *const variant_env[] = {
    "AWS_USE_FIPS_ENDPOINT",      "AWS_USE_DUALSTACK_ENDPOINT", "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_EC2",	      "AWS_ENDPOINT_URL_STS",	    "AWS_PROFILE",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
};

static void variant_env_reset(void)
{
	for (size_t i = 0; i < sizeof(variant_env) / sizeof(variant_env[0]); i++)
		unsetenv(variant_env[i]);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
	setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
}

static const struct {
	enum aws_service svc;
	const char *region, *fips, *dualstack, *url;
} variants[] = {
    {AWS_SVC_EC2, "us-east-1", "true", NULL, "https://ec2-fips.us-east-1.amazonaws.com"},
    {AWS_SVC_EC2, "us-east-1", NULL, "true", "https://ec2.us-east-1.api.aws"},
    {AWS_SVC_EC2, "us-east-1", "TRUE", "True", "https://ec2-fips.us-east-1.api.aws"},
    {AWS_SVC_EC2, "us-east-1", "false", "false", "https://ec2.us-east-1.amazonaws.com"},
    {AWS_SVC_EC2, "eu-west-1", NULL, "true", "https://ec2.eu-west-1.api.aws"},
    {AWS_SVC_ELB, "us-west-2", "true", NULL,
     "https://elasticloadbalancing-fips.us-west-2.amazonaws.com"},
    {AWS_SVC_ELBV2, "us-east-2", "true", "true",
     "https://elasticloadbalancing-fips.us-east-2.api.aws"},
    {AWS_SVC_ELBV2, "us-east-2", NULL, "true", "https://elasticloadbalancing.us-east-2.api.aws"},
    {AWS_SVC_AUTOSCALING, "us-east-1", "true", NULL,
     "https://autoscaling-fips.us-east-1.amazonaws.com"},
    {AWS_SVC_STS, "us-east-1", "true", NULL, "https://sts-fips.us-east-1.amazonaws.com"},
    {AWS_SVC_STS, "us-west-2", NULL, "true", "https://sts.us-west-2.api.aws"},
    {AWS_SVC_SQS, "us-east-1", "true", NULL, "https://sqs-fips.us-east-1.amazonaws.com"},
    {AWS_SVC_EVENTS, "us-east-1", "true", NULL, "https://events-fips.us-east-1.amazonaws.com"},
    {AWS_SVC_EBS, "us-east-1", "true", NULL, "https://ebs-fips.us-east-1.amazonaws.com"},
    /* GovCloud: the standard names are FIPS endpoints; dual-stack ones have -fips */
    {AWS_SVC_EC2, "us-gov-west-1", "true", NULL, "https://ec2.us-gov-west-1.amazonaws.com"},
    {AWS_SVC_STS, "us-gov-east-1", "true", NULL, "https://sts.us-gov-east-1.amazonaws.com"},
    {AWS_SVC_EC2, "us-gov-west-1", "true", "true", "https://ec2-fips.us-gov-west-1.api.aws"},
    {AWS_SVC_EC2, "us-gov-west-1", NULL, "true", "https://ec2.us-gov-west-1.api.aws"},
    {AWS_SVC_EBS, "us-gov-west-1", "true", NULL, "https://ebs-fips.us-gov-west-1.amazonaws.com"},
    /* China */
    {AWS_SVC_EC2, "cn-north-1", NULL, "true", "https://ec2.cn-north-1.api.amazonwebservices.com.cn"},
    {AWS_SVC_EC2, "cn-northwest-1", "true", NULL, "https://ec2-fips.cn-northwest-1.amazonaws.com.cn"},
    /* ISO: FIPS yes, dual-stack no */
    {AWS_SVC_EC2, "us-iso-east-1", "true", NULL, "https://ec2-fips.us-iso-east-1.c2s.ic.gov"},
    {AWS_SVC_EC2, "us-iso-east-1", NULL, "true", NULL},
    {AWS_SVC_EC2, "us-isob-east-1", "true", "true", NULL},
};

TEST(aws_endpoints_fips_dualstack_env)
{
	struct aws_endpoint ep;

	for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		variant_env_reset();
		if (variants[i].fips)
			setenv("AWS_USE_FIPS_ENDPOINT", variants[i].fips, 1);
		if (variants[i].dualstack)
			setenv("AWS_USE_DUALSTACK_ENDPOINT", variants[i].dualstack, 1);
		int r = aws_endpoint_resolve(NULL, variants[i].svc, variants[i].region, &ep);
		if (!variants[i].url) {
			ASSERT_ERR(r, EOPNOTSUPP);
			continue;
		}
		ASSERT_OK(r);
		ASSERT_STREQ(ep.url, variants[i].url);
		ASSERT_FALSE(ep.custom);
		ASSERT_STREQ(ep.signing_region, variants[i].region);
	}
	variant_env_reset();
}

TEST(aws_endpoints_variants_lose_to_explicit_urls)
{
	struct aws_endpoints e;
	struct aws_endpoint ep;

	variant_env_reset();
	aws_endpoints_init(&e);
	setenv("AWS_USE_FIPS_ENDPOINT", "true", 1);
	setenv("AWS_USE_DUALSTACK_ENDPOINT", "true", 1);
	setenv("AWS_ENDPOINT_URL_EC2", "http://127.0.0.1:5000", 1);
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_EC2, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "http://127.0.0.1:5000");
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_STS, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "https://sts-fips.us-east-1.api.aws");
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5001", 1);
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_STS, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "http://127.0.0.1:5001");
	ASSERT_OK(aws_endpoints_set_override(&e, AWS_SVC_SQS, "https://sqs.example.internal", NULL,
					     NULL));
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_SQS, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "https://sqs.example.internal");
	/* ignoring the configured URLs brings the variants back */
	setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true", 1);
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_EC2, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "https://ec2-fips.us-east-1.api.aws");
	aws_endpoints_release(&e);
	variant_env_reset();
}

TEST(aws_endpoints_variant_values)
{
	struct aws_endpoint ep;
	enum aws_setting s;

	variant_env_reset();
	ASSERT_OK(aws_setting_parse(NULL, &s));
	ASSERT_EQ(s, AWS_SETTING_UNSET);
	ASSERT_OK(aws_setting_parse("FaLsE", &s));
	ASSERT_EQ(s, AWS_SETTING_FALSE);
	ASSERT_ERR(aws_setting_parse("1", &s), EINVAL);
	ASSERT_ERR(aws_setting_parse("yes", &s), EINVAL);
	setenv("AWS_USE_FIPS_ENDPOINT", "yes", 1);
	ASSERT_ERR(aws_endpoint_resolve(NULL, AWS_SVC_EC2, "us-east-1", &ep), EINVAL);
	variant_env_reset();
	setenv("AWS_USE_DUALSTACK_ENDPOINT", "on", 1);
	ASSERT_ERR(aws_endpoint_resolve(NULL, AWS_SVC_EC2, "us-east-1", &ep), EINVAL);
	variant_env_reset();
}

TEST(aws_endpoints_variants_from_shared_config)
{
	char path[] = "/tmp/aws-k8s-endpoints-config-XXXXXX";
	const char text[] = "[default]\nuse_fips_endpoint = true\n"
			    "[profile ds]\nuse_dualstack_endpoint = TRUE\nuse_fips_endpoint=false\n"
			    "[profile bad]\nuse_fips_endpoint = maybe\n";
	struct aws_endpoints e;
	struct aws_endpoint ep;
	int fd = mkstemp(path);

	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
	close(fd);
	variant_env_reset();
	setenv("AWS_CONFIG_FILE", path, 1);
	aws_endpoints_init(&e);
	ASSERT_OK(aws_endpoints_load_profile(&e, NULL));
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_EC2, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "https://ec2-fips.us-east-1.amazonaws.com");
	/* the environment wins over the file */
	setenv("AWS_USE_FIPS_ENDPOINT", "false", 1);
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_EC2, "us-east-1", &ep));
	ASSERT_STREQ(ep.url, "https://ec2.us-east-1.amazonaws.com");
	unsetenv("AWS_USE_FIPS_ENDPOINT");
	ASSERT_OK(aws_endpoints_load_profile(&e, "ds"));
	ASSERT_OK(aws_endpoint_resolve(&e, AWS_SVC_ELBV2, "eu-west-1", &ep));
	ASSERT_STREQ(ep.url, "https://elasticloadbalancing.eu-west-1.api.aws");
	ASSERT_ERR(aws_endpoints_load_profile(&e, "bad"), EINVAL);
	aws_endpoints_release(&e);
	unlink(path);
	variant_env_reset();
}
