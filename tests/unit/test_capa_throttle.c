/* capa's per-family token buckets (CAPA's rate limits). */
#include <string.h>

#include "common/base/timeutil.h"
#include "modules/capa/capa_throttle.h"
#include "tests/unit/harness.h"

#define S 1000000000LL

TEST(capa_throttle_families)
{
	struct capa_limiter l;
	capa_limiter_init(&l, 0);
	ASSERT_STREQ(capa_limiter_bucket(&l, CAPA_SVC_EC2, "DescribeInstances")->name, "ec2/describe");
	ASSERT_STREQ(capa_limiter_bucket(&l, CAPA_SVC_EC2, "GetConsoleOutput")->name, "ec2/describe");
	ASSERT_STREQ(capa_limiter_bucket(&l, CAPA_SVC_EC2, "RunInstances")->name, "ec2/run");
	ASSERT_STREQ(capa_limiter_bucket(&l, CAPA_SVC_EC2, "StartInstances")->name, "ec2/start");
	ASSERT_STREQ(capa_limiter_bucket(&l, CAPA_SVC_EC2, "CreateKeyPair")->name, "ec2/sg-key-spot");
	ASSERT_STREQ(capa_limiter_bucket(&l, CAPA_SVC_EC2, "TerminateInstances")->name, "ec2/other");
	ASSERT_STREQ(capa_limiter_bucket(&l, CAPA_SVC_SECRETS, "ListSecrets")->name,
		     "secretsmanager/read");
	ASSERT_STREQ(capa_limiter_bucket(&l, CAPA_SVC_SECRETS, "CreateSecret")->name,
		     "secretsmanager/other");
	ASSERT_STREQ(capa_limiter_bucket(&l, CAPA_SVC_ELBV2, "DescribeTargetGroups")->name,
		     "elbv2/read");
	ASSERT_NULL(capa_limiter_bucket(&l, CAPA_SVC__MAX, "X"));
	capa_limiter_release(&l);
}

TEST(capa_throttle_burst_refill_and_throttle_reply)
{
	struct capa_limiter l;
	int64_t wait;
	capa_limiter_init(&l, 0);
	/* RunInstances: burst 5, then 2 per second */
	for (int i = 0; i < 5; i++) {
		ASSERT_OK(capa_limiter_try(&l, CAPA_SVC_EC2, "RunInstances", 0, &wait));
		ASSERT_EQ(wait, 0);
	}
	ASSERT_OK(capa_limiter_try(&l, CAPA_SVC_EC2, "RunInstances", 0, &wait));
	ASSERT_GT(wait, S / 2 - 1000);
	ASSERT_LE(wait, S / 2 + 1000);
	/* another family is untouched */
	ASSERT_OK(capa_limiter_try(&l, CAPA_SVC_EC2, "DescribeInstances", 0, &wait));
	ASSERT_EQ(wait, 0);
	ASSERT_OK(capa_limiter_try(&l, CAPA_SVC_EC2, "RunInstances", S / 2 + 1000, &wait));
	ASSERT_EQ(wait, 0);
	/* refill stops at the burst */
	ASSERT_OK(capa_limiter_try(&l, CAPA_SVC_EC2, "RunInstances", 3600 * S, &wait));
	ASSERT_EQ(wait, 0);
	ASSERT_TRUE(capa_limiter_bucket(&l, CAPA_SVC_EC2, "RunInstances")->tokens <= 4.0 + 1e-9);
	/* a throttling reply empties the bucket: the next Describe waits 1/20 s */
	capa_limiter_throttled(&l, CAPA_SVC_EC2, "DescribeInstances", 3600 * S);
	ASSERT_OK(capa_limiter_try(&l, CAPA_SVC_EC2, "DescribeSubnets", 3600 * S, &wait));
	ASSERT_GT(wait, S / 20 - 1000);
	ASSERT_LE(wait, S / 20 + 1000);
	ASSERT_OK(capa_limiter_try(&l, CAPA_SVC_EC2, "DescribeSubnets", 3600 * S + S / 20 + 1, &wait));
	ASSERT_EQ(wait, 0);
	capa_limiter_release(&l);
}

TEST(capa_throttle_wait_blocks_for_refill)
{
	struct capa_limiter l;
	capa_limiter_init(&l, 0); /* tokens as of time 0: the monotonic clock is far later */
	capa_limiter_throttled(&l, CAPA_SVC_EC2, "RunInstances", now_mono_ns());
	int64_t t0 = now_mono_ns();
	ASSERT_OK(capa_limiter_wait(&l, CAPA_SVC_EC2, "RunInstances", NULL));
	int64_t took = now_mono_ns() - t0;
	ASSERT_GE(took, S / 2 - S / 100);
	ASSERT_EQ(l.waits, 1u);
	capa_limiter_release(&l);
}
