/* Unit tests: how the instance metadata client picks its endpoint (common/aws/imds.c):
 * AWS_EC2_METADATA_SERVICE_ENDPOINT, AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE and the shared
 * config's ec2_metadata_service_endpoint[_mode]. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/aws/imds.h"
#include "tests/unit/harness.h"

static void imds_env_reset(void)
{
	unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
	unsetenv("AWS_EC2_METADATA_DISABLED");
	unsetenv("AWS_PROFILE");
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
	setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
}

/* The endpoint the client picks with these options, or "" when it refuses them. */
static const char *picked(const struct aws_imds_opts *o, char *out, size_t n)
{
	struct aws_imds *m = NULL;

	out[0] = 0;
	if (aws_imds_new(o, &m) == 0)
		snprintf(out, n, "%s", aws_imds_endpoint(m));
	aws_imds_free(m);
	return out;
}

TEST(aws_imds_endpoint_mode)
{
	char got[256];
	struct aws_imds *m;

	imds_env_reset();
	ASSERT_STREQ(picked(NULL, got, sizeof(got)), "http://169.254.169.254");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv6", 1);
	ASSERT_STREQ(picked(NULL, got, sizeof(got)), "http://[fd00:ec2::254]");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "ipv6", 1);
	ASSERT_STREQ(picked(NULL, got, sizeof(got)), "http://[fd00:ec2::254]");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv4", 1);
	ASSERT_STREQ(picked(NULL, got, sizeof(got)), "http://169.254.169.254");
	/* the endpoint wins over the mode */
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv6", 1);
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://[::1]:1338/", 1);
	ASSERT_STREQ(picked(NULL, got, sizeof(got)), "http://[::1]:1338");
	/* the options win over the environment */
	ASSERT_STREQ(picked(&(struct aws_imds_opts){.endpoint_mode = "IPv4",
						    .endpoint = "http://127.0.0.1:7"},
			    got, sizeof(got)),
		     "http://127.0.0.1:7");
	unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	ASSERT_STREQ(picked(&(struct aws_imds_opts){.endpoint_mode = "IPv4"}, got, sizeof(got)),
		     "http://169.254.169.254");
	/* a mode that is neither: refused */
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv5", 1);
	ASSERT_ERR(aws_imds_new(NULL, &m), EINVAL);
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "ipv6 ", 1);
	ASSERT_ERR(aws_imds_new(NULL, &m), EINVAL);
	imds_env_reset();
}

TEST(aws_imds_endpoint_from_shared_config)
{
	char path[] = "/tmp/aws-k8s-imds-config-XXXXXX", got[256];
	const char text[] = "[default]\nec2_metadata_service_endpoint_mode = IPv6\n"
			    "[profile ep]\nec2_metadata_service_endpoint = http://127.0.0.1:9/\n"
			    "ec2_metadata_service_endpoint_mode = IPv6\n"
			    "[profile bad]\nec2_metadata_service_endpoint_mode = v6\n";
	int fd = mkstemp(path);

	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
	close(fd);
	imds_env_reset();
	setenv("AWS_CONFIG_FILE", path, 1);
	ASSERT_STREQ(picked(NULL, got, sizeof(got)), "http://[fd00:ec2::254]");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv4", 1); /* environment first */
	ASSERT_STREQ(picked(NULL, got, sizeof(got)), "http://169.254.169.254");
	unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
	setenv("AWS_PROFILE", "ep", 1);
	ASSERT_STREQ(picked(NULL, got, sizeof(got)), "http://127.0.0.1:9");
	setenv("AWS_PROFILE", "bad", 1);
	ASSERT_STREQ(picked(NULL, got, sizeof(got)), "");
	unlink(path);
	imds_env_reset();
}
