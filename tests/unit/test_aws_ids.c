/* Unit tests: format checks of AWS identifiers and metadata values (common/aws/ids.c). */
#include <stdlib.h>
#include <string.h>

#include "common/aws/ids.h"
#include "tests/unit/harness.h"

/* Values no check may accept: empty, a newline and a shell command, HTML, spaces, upper
 * case, a 100 KB string. */
static const char *const garbage[] = {
    "",
    "\n",
    "i-123\n;rm",
    "i-0123456789abcdef0\n",
    " i-0123456789abcdef0",
    "i-0123456789abcdef0;rm -rf /",
    "<html><body>404 - Not Found</body></html>",
    "<?xml version=\"1.0\"?><Error/>",
    "us-east-1a<script>",
    "US-EAST-1A",
    "I-0123456789ABCDEF0",
    "M5.LARGE",
    "../../etc/passwd",
    "vol-0123456789abcdef0\t",
    "\xc3\xa9",
};

static char *big_string(size_t n, const char *prefix)
{
	char *s = malloc(n + 1);
	if (!s)
		return NULL;
	memset(s, 'a', n);
	memcpy(s, prefix, strlen(prefix));
	s[n] = '\0';
	return s;
}

typedef bool (*check_fn)(const char *);

static bool all_refuse(check_fn f)
{
	char *big = big_string(100 * 1024, "i-0123456789abcdef0"),
	     *big2 = big_string(100 * 1024, "us-east-1");
	bool ok = big && big2 && !f(NULL) && !f(big) && !f(big2);

	for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++)
		if (f(garbage[i])) {
			fprintf(stderr, "accepted garbage[%zu]\n", i);
			ok = false;
		}
	free(big);
	free(big2);
	return ok;
}

TEST(aws_ids_ec2_ids)
{
	ASSERT_TRUE(aws_instance_id_valid("i-0123456789abcdef0"));
	ASSERT_TRUE(aws_instance_id_valid("i-12345678"));
	ASSERT_FALSE(aws_instance_id_valid("i-1234567"));	     /* 7 */
	ASSERT_FALSE(aws_instance_id_valid("i-123456789"));	     /* 9 */
	ASSERT_FALSE(aws_instance_id_valid("i-0123456789abcdef"));   /* 16 */
	ASSERT_FALSE(aws_instance_id_valid("i-0123456789abcdef01")); /* 18 */
	ASSERT_FALSE(aws_instance_id_valid("i-0123456789abcdefg"));
	ASSERT_FALSE(aws_instance_id_valid("i-0123456789ABCDEF0"));
	ASSERT_FALSE(aws_instance_id_valid("vol-0123456789abcdef0"));
	ASSERT_FALSE(aws_instance_id_valid("i-"));
	ASSERT_FALSE(aws_instance_id_valid("i0123456789abcdef0"));
	ASSERT_TRUE(all_refuse(aws_instance_id_valid));

	ASSERT_TRUE(aws_volume_id_valid("vol-0123456789abcdef0"));
	ASSERT_TRUE(aws_volume_id_valid("vol-1234abcd"));
	ASSERT_FALSE(aws_volume_id_valid("vol-0123"));
	ASSERT_FALSE(aws_volume_id_valid("snap-0123456789abcdef0"));
	ASSERT_FALSE(aws_volume_id_valid("vol-0123456789abcdef0vol"));
	ASSERT_FALSE(aws_volume_id_valid("vol-../../etc/pa"));
	ASSERT_TRUE(all_refuse(aws_volume_id_valid));

	ASSERT_TRUE(aws_snapshot_id_valid("snap-0123456789abcdef0"));
	ASSERT_TRUE(aws_snapshot_id_valid("snap-1234abcd"));
	ASSERT_FALSE(aws_snapshot_id_valid("snap-1"));
	ASSERT_FALSE(aws_snapshot_id_valid("snapshot-0123456789abcdef0"));
	ASSERT_FALSE(aws_snapshot_id_valid("snap-0123456789abcdef0 "));
	ASSERT_TRUE(all_refuse(aws_snapshot_id_valid));

	ASSERT_TRUE(aws_ec2_id_valid("op-0123456789abcdef0", "op-"));
	ASSERT_FALSE(aws_ec2_id_valid("op-0123456789abcdef0", ""));
	ASSERT_FALSE(aws_ec2_id_valid("op-0123456789abcdef0", NULL));
}

TEST(aws_ids_regions)
{
	static const char *const good[] = {"us-east-1",	     "us-west-2",      "eu-central-1",
					   "ap-southeast-7", "us-gov-west-1",  "cn-northwest-1",
					   "us-isob-east-1", "eu-isoe-west-1", "il-central-1",
					   "eusc-de-east-1", "mx-central-1"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ASSERT_TRUE(aws_region_valid(good[i]));
	ASSERT_FALSE(aws_region_valid("us-east"));
	ASSERT_FALSE(aws_region_valid("us-east-1a"));
	ASSERT_FALSE(aws_region_valid("useast1"));
	ASSERT_FALSE(aws_region_valid("-us-east-1"));
	ASSERT_FALSE(aws_region_valid("us-east-1-"));
	ASSERT_FALSE(aws_region_valid("us--east-1"));
	ASSERT_FALSE(aws_region_valid("us-east-123"));
	ASSERT_FALSE(aws_region_valid("Not_A_Region"));
	ASSERT_FALSE(aws_region_valid("us-east-1\n"));
	ASSERT_FALSE(aws_region_valid("u-east-1"));
	ASSERT_TRUE(all_refuse(aws_region_valid));
}

TEST(aws_ids_zones)
{
	static const char *const good[] = {"us-east-1a",
					   "eu-central-1c",
					   "us-gov-west-1b",
					   "us-west-2-lax-1a",
					   "us-west-2-lax-1b",
					   "us-east-1-bos-1a",
					   "ap-northeast-1-tpe-1a",
					   "us-east-1-wl1-bos-wlz-1",
					   "ap-northeast-1-wl1-kix-wlz-1",
					   "us-east-1-wl1-nyc-wlz-1"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ASSERT_TRUE(aws_zone_valid(good[i]));
	ASSERT_FALSE(aws_zone_valid("us-east-1"));
	ASSERT_FALSE(aws_zone_valid("us-east-1ab"));
	ASSERT_FALSE(aws_zone_valid("us-east-1A"));
	ASSERT_FALSE(aws_zone_valid("us-east-1-"));
	ASSERT_FALSE(aws_zone_valid("us-west-2-lax-1"));
	ASSERT_FALSE(aws_zone_valid("us-west-2-lax1a"));
	ASSERT_FALSE(aws_zone_valid("us-east-1-wl1-bos-wlz"));
	ASSERT_FALSE(aws_zone_valid("us-east-1-wl1-bos-wlz-1a"));
	ASSERT_FALSE(aws_zone_valid("use1-az1"));
	ASSERT_FALSE(aws_zone_valid("a"));
	ASSERT_TRUE(all_refuse(aws_zone_valid));

	ASSERT_TRUE(aws_zone_in_region("us-east-1a", "us-east-1"));
	ASSERT_TRUE(aws_zone_in_region("us-east-1-bos-1a", "us-east-1"));
	ASSERT_TRUE(aws_zone_in_region("us-east-1-wl1-bos-wlz-1", "us-east-1"));
	ASSERT_FALSE(aws_zone_in_region("us-east-1a", "us-east-2"));
	ASSERT_FALSE(aws_zone_in_region("us-east-11a", "us-east-1"));
	ASSERT_FALSE(aws_zone_in_region("us-west-2-lax-1a", "us-west-1"));
	ASSERT_FALSE(aws_zone_in_region("us-east-1a", "us-east-1a"));
	ASSERT_FALSE(aws_zone_in_region("<html>", "us-east-1"));

	static const char *const ids[] = {
	    "use1-az1",	     "usw2-az4",      "apne1-az2",	   "usgw1-az1",		"cnn1-az1",
	    "usw2-lax1-az1", "use1-bos1-az1", "use1-wl1-bos-wlz1", "apne1-wl1-kix-wlz1"};
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		ASSERT_TRUE(aws_zone_id_valid(ids[i]));
	ASSERT_FALSE(aws_zone_id_valid("use1"));
	ASSERT_FALSE(aws_zone_id_valid("use1-az"));
	ASSERT_FALSE(aws_zone_id_valid("use-az1"));
	ASSERT_FALSE(aws_zone_id_valid("USE1-AZ1"));
	ASSERT_FALSE(aws_zone_id_valid("us-east-1a"));
	ASSERT_FALSE(aws_zone_id_valid("use1-az1 "));
	ASSERT_FALSE(aws_zone_id_valid("use1-wl1-bos-wlz"));
	ASSERT_TRUE(all_refuse(aws_zone_id_valid));
}

TEST(aws_ids_instance_types)
{
	static const char *const good[] = {
	    "m5.large",		"t3.micro",	     "m7i-flex.2xlarge",    "u-6tb1.metal",
	    "mac2-m2pro.metal", "c6i.metal-32xl",    "u7in-32tb.224xlarge", "p5en.48xlarge",
	    "x2iedn.metal",	"u-24tb1.112xlarge", "r7iz.metal-16xl",	    "g6e.xlarge"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ASSERT_TRUE(aws_instance_type_valid(good[i]));
	ASSERT_FALSE(aws_instance_type_valid("m5"));
	ASSERT_FALSE(aws_instance_type_valid("m5."));
	ASSERT_FALSE(aws_instance_type_valid(".large"));
	ASSERT_FALSE(aws_instance_type_valid("m5.large.x"));
	ASSERT_FALSE(aws_instance_type_valid("m5..large"));
	ASSERT_FALSE(aws_instance_type_valid("m5-.large"));
	ASSERT_FALSE(aws_instance_type_valid("m5.-large"));
	ASSERT_FALSE(aws_instance_type_valid("m5--x.large"));
	ASSERT_FALSE(aws_instance_type_valid("5m.large"));
	ASSERT_FALSE(aws_instance_type_valid("m5_large"));
	ASSERT_FALSE(aws_instance_type_valid("m5.large;"));
	ASSERT_FALSE(aws_instance_type_valid("m5.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
	ASSERT_TRUE(all_refuse(aws_instance_type_valid));
}

TEST(aws_ids_outpost_arn)
{
	ASSERT_TRUE(aws_outpost_arn_valid(
	    "arn:aws:outposts:us-west-2:123456789012:outpost/op-0123456789abcdef0"));
	ASSERT_TRUE(aws_outpost_arn_valid(
	    "arn:aws-us-gov:outposts:us-gov-west-1:123456789012:outpost/op-12345678"));
	ASSERT_TRUE(aws_outpost_arn_valid(
	    "arn:aws-iso-b:outposts:us-isob-east-1:123456789012:outpost/op-0123456789abcdef0"));
	ASSERT_FALSE(aws_outpost_arn_valid("not-an-arn"));
	ASSERT_FALSE(aws_outpost_arn_valid(
	    "arn:aws:outposts:us-west-2:12345678901:outpost/op-0123456789abcdef0"));
	ASSERT_FALSE(aws_outpost_arn_valid(
	    "arn:aws:ec2:us-west-2:123456789012:outpost/op-0123456789abcdef0"));
	ASSERT_FALSE(aws_outpost_arn_valid(
	    "arn:aws:outposts:us-west-2a:123456789012:outpost/op-0123456789abcdef0"));
	ASSERT_FALSE(aws_outpost_arn_valid(
	    "arn:aws:outposts:us-west-2:123456789012:outpost/op-0123456789abcdef0/x"));
	ASSERT_FALSE(aws_outpost_arn_valid(
	    "arn:aws:outposts:us-west-2:123456789012:outpost/op-0123456789abcdef0\n"));
	ASSERT_FALSE(aws_outpost_arn_valid("arn:aws:outposts:us-west-2:123456789012:outpost/"));
	ASSERT_FALSE(
	    aws_outpost_arn_valid("arn:aws-:outposts:us-west-2:123456789012:outpost/op-12345678"));
	ASSERT_TRUE(all_refuse(aws_outpost_arn_valid));
}

TEST(aws_ids_escape)
{
	char buf[64], small[16];

	ASSERT_STREQ(aws_value_escape("i-0123456789abcdef0", buf, sizeof(buf)),
		     "i-0123456789abcdef0");
	ASSERT_STREQ(aws_value_escape("i-123\n;rm", buf, sizeof(buf)), "i-123\\n;rm");
	ASSERT_STREQ(aws_value_escape("a\"b\\c\td\r\x01\xff", buf, sizeof(buf)),
		     "a\\\"b\\\\c\\td\\r\\x01\\xff");
	ASSERT_STREQ(aws_value_escape(NULL, buf, sizeof(buf)), "");
	ASSERT_STREQ(aws_value_escape("", buf, sizeof(buf)), "");
	/* cut: what fits, then how long the value was */
	ASSERT_STREQ(aws_value_escape("<html><body>x</body></html>", small, sizeof(small)),
		     "<h...(27 bytes)");
	char *big = big_string(100 * 1024, "\n\n");
	ASSERT_NOT_NULL(big);
	aws_value_escape(big, buf, sizeof(buf));
	ASSERT_LT(strlen(buf), sizeof(buf));
	ASSERT_TRUE(strncmp(buf, "\\n\\naaaa", 8) == 0);
	ASSERT_CONTAINS(buf, "...(102400 bytes)");
	ASSERT_NULL(strchr(buf, '\n'));
	free(big);
	/* an escape is never cut in half */
	ASSERT_STREQ(aws_value_escape("\n\n\n\n\n\n\n\n\n\n", small, 16), "\\n...(10 bytes)");
	char tiny[4];
	ASSERT_STREQ(aws_value_escape("abcdef", tiny, sizeof(tiny)), "abc");
	ASSERT_STREQ(aws_value_escape("abc", tiny, sizeof(tiny)), "abc");
}
