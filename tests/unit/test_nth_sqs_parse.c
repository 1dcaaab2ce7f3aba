/* The queue-mode parser over recorded message bodies (tests/data/nth/sqs_*). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "modules/nth/nth_sqs.h"

static int parse_file(const char *name, struct nth_sqs_parsed *p)
{
	char path[256];
	size_t len = 0;
	char *body;
	int r;

	snprintf(path, sizeof(path), "nth/%s", name);
	if (!(body = test_read_file(test_data(path), &len)))
		return -ENOENT;
	r = nth_sqs_parse(body, len, p);
	free(body);
	return r;
}

TEST(nth_sqs_spot)
{
	struct nth_sqs_parsed p;

	ASSERT_OK(parse_file("sqs_spot.json", &p));
	ASSERT_EQ(p.verdict, NTH_SQS_ACT);
	ASSERT_EQ(p.n_events, 1);
	ASSERT_EQ(p.events[0].kind, NTH_SQS_SPOT_ITN);
	ASSERT_STREQ(p.events[0].instance_id, "i-0123456789abcdef0");
	ASSERT_STREQ(p.events[0].detail, "terminate");
	/* upstream: "spot-itn-event-" + hex of the envelope id */
	ASSERT_STREQ(p.events[0].event_id, "spot-itn-event-31653535323764372d626233362d343630372d333"
					   "337302d343136346462353661343065");
	ASSERT_EQ(p.events[0].start_ns, 1796365800LL * 1000000000LL);
	ASSERT_STREQ(nth_sqs_kind_name(p.events[0].kind), "SPOT_ITN");
	nth_sqs_parsed_release(&p);
}

TEST(nth_sqs_rebalance_and_state)
{
	struct nth_sqs_parsed p;

	ASSERT_OK(parse_file("sqs_rebalance.json", &p));
	ASSERT_EQ(p.verdict, NTH_SQS_ACT);
	ASSERT_EQ(p.events[0].kind, NTH_SQS_REBALANCE);
	ASSERT_CONTAINS(p.events[0].event_id, "rebalance-recommendation-event-");
	nth_sqs_parsed_release(&p);

	ASSERT_OK(parse_file("sqs_state_stopping.json", &p));
	ASSERT_EQ(p.verdict, NTH_SQS_ACT);
	ASSERT_EQ(p.events[0].kind, NTH_SQS_STATE_CHANGE);
	ASSERT_STREQ(p.events[0].detail, "stopping");
	nth_sqs_parsed_release(&p);

	/* running is not acted on: a skip, the message is deleted */
	ASSERT_OK(parse_file("sqs_state_running.json", &p));
	ASSERT_EQ(p.verdict, NTH_SQS_SKIP);
	ASSERT_EQ(p.n_events, 0);
	ASSERT_CONTAINS(p.reason, "running");
	nth_sqs_parsed_release(&p);
}

static void check_asg(const char *file, const char *token)
{
	struct nth_sqs_parsed p;

	ASSERT_OK(parse_file(file, &p));
	ASSERT_EQ(p.verdict, NTH_SQS_ACT);
	ASSERT_EQ(p.n_events, 1);
	ASSERT_EQ(p.events[0].kind, NTH_SQS_ASG_TERMINATE);
	ASSERT_STREQ(p.events[0].instance_id, "i-0123456789abcdef0");
	ASSERT_STREQ(p.events[0].asg_group, "nodes");
	ASSERT_STREQ(p.events[0].asg_hook, "nth-hook");
	ASSERT_STREQ(p.events[0].asg_token, token);
	ASSERT_CONTAINS(p.events[0].event_id, "asg-lifecycle-term-");
	ASSERT_GT(p.events[0].start_ns, 0);
	nth_sqs_parsed_release(&p);
}

TEST(nth_sqs_asg_lifecycle)
{
	check_asg("sqs_asg_terminate.json", "0befcbdb-6ecd-498a-9ff7-ae9b54447cd6");
	if (test_failed)
		return;
	check_asg("sqs_asg_direct.json", "71514b9d-6a40-4b26-8523-05e7eEXAMPLE");
	if (test_failed)
		return;
	check_asg("sqs_asg_sns.json", "71514b9d-6a40-4b26-8523-05e7eEXAMPLE");
	if (test_failed)
		return;

	struct nth_sqs_parsed p;

	ASSERT_OK(parse_file("sqs_asg_launch.json", &p));
	ASSERT_EQ(p.verdict, NTH_SQS_ACT);
	ASSERT_EQ(p.events[0].kind, NTH_SQS_ASG_LAUNCH);
	nth_sqs_parsed_release(&p);
}

TEST(nth_sqs_test_notifications_are_skips)
{
	struct nth_sqs_parsed p;

	ASSERT_OK(parse_file("sqs_asg_test.json", &p));
	ASSERT_EQ(p.verdict, NTH_SQS_SKIP);
	ASSERT_CONTAINS(p.reason, "test notification");
	nth_sqs_parsed_release(&p);
	ASSERT_OK(parse_file("sqs_asg_sns_test.json", &p));
	ASSERT_EQ(p.verdict, NTH_SQS_SKIP);
	ASSERT_CONTAINS(p.reason, "test notification");
	nth_sqs_parsed_release(&p);
}

TEST(nth_sqs_health)
{
	struct nth_sqs_parsed p;

	ASSERT_OK(parse_file("sqs_health.json", &p));
	ASSERT_EQ(p.verdict, NTH_SQS_ACT);
	ASSERT_EQ(p.n_events, 2);
	ASSERT_EQ(p.events[0].kind, NTH_SQS_SCHEDULED_CHANGE);
	ASSERT_STREQ(p.events[0].instance_id, "i-0123456789abcdef0");
	ASSERT_STREQ(p.events[1].instance_id, "i-0fedcba9876543210");
	ASSERT_STREQ(p.events[0].detail, "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED");
	nth_sqs_parsed_release(&p);

	ASSERT_OK(parse_file("sqs_health_other.json", &p));
	ASSERT_EQ(p.verdict, NTH_SQS_SKIP);
	ASSERT_CONTAINS(p.reason, "RDS");
	nth_sqs_parsed_release(&p);
}

TEST(nth_sqs_malformed)
{
	static const struct {
		const char *file, *reason;
	} cases[] = {
	    {"sqs_not_json.txt", "not JSON"},
	    {"sqs_truncated.json", "not JSON"},
	    {"sqs_array.json", "not an object"},
	    {"sqs_other_shape.json", "another shape"},
	    {"sqs_unknown_detail_type.json", "EC2 Fleet Spot Instance Request Error"},
	    {"sqs_unknown_source.json", "my.app"},
	    {"sqs_bad_instance.json", "no valid instance ID"},
	};
	struct nth_sqs_parsed p;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ASSERT_OK(parse_file(cases[i].file, &p));
		ASSERT_EQ(p.verdict, NTH_SQS_INVALID);
		ASSERT_EQ(p.n_events, 0);
		ASSERT_NULL(p.events);
		ASSERT_CONTAINS(p.reason, cases[i].reason);
		nth_sqs_parsed_release(&p);
	}
	ASSERT_OK(nth_sqs_parse("", 0, &p));
	ASSERT_EQ(p.verdict, NTH_SQS_INVALID);
}

TEST(nth_sqs_huge_body)
{
	size_t n = NTH_SQS_BODY_MAX + 1;
	char *big = malloc(n + 1);
	struct nth_sqs_parsed p;

	ASSERT_NOT_NULL(big);
	memset(big, ' ', n);
	memcpy(big, "{\"a\":1}", 7);
	big[n] = '\0';
	ASSERT_OK(nth_sqs_parse(big, n, &p));
	free(big);
	ASSERT_EQ(p.verdict, NTH_SQS_INVALID);
	ASSERT_CONTAINS(p.reason, "cap");
}

TEST(nth_sqs_asg_missing_hook)
{
	const char *b = "{\"LifecycleTransition\":\"autoscaling:EC2_INSTANCE_TERMINATING\","
			"\"EC2InstanceId\":\"i-0123456789abcdef0\",\"AutoScalingGroupName\":\"g\"}";
	struct nth_sqs_parsed p;

	ASSERT_OK(nth_sqs_parse(b, strlen(b), &p));
	ASSERT_EQ(p.verdict, NTH_SQS_INVALID);
	ASSERT_EQ(p.n_events, 0);
}
