/* SQS replies and queue URLs (common/aws/sqs.h). */
#include <stdlib.h>
#include <string.h>

#include "common/aws/sqs.h"
#include "common/base/json.h"
#include "harness.h"

static cJSON *J(const char *s)
{
	cJSON *j = NULL;

	json_parse(s, strlen(s), &j, NULL);
	return j;
}

TEST(aws_sqs_messages_parse)
{
	cJSON *j = J("{\"Messages\":[{\"MessageId\":\"m1\",\"ReceiptHandle\":\"h1\",\"Body\":\"{}\","
		     "\"Attributes\":{\"SentTimestamp\":\"1712345678901\",\"ApproximateReceiveCount\":\"3\"}},"
		     "{\"MessageId\":\"m2\",\"ReceiptHandle\":\"h2\"}]}");
	struct sqs_message *m;
	size_t n;

	ASSERT_NOT_NULL(j);
	ASSERT_OK(sqs_messages_parse(j, &m, &n));
	cJSON_Delete(j);
	ASSERT_EQ(n, 2);
	ASSERT_STREQ(m[0].id, "m1");
	ASSERT_STREQ(m[0].receipt_handle, "h1");
	ASSERT_STREQ(m[0].body, "{}");
	ASSERT_EQ(m[0].sent_ms, 1712345678901LL);
	ASSERT_EQ(m[0].receive_count, 3);
	ASSERT_STREQ(m[1].body, "");
	ASSERT_EQ(m[1].receive_count, 0);
	sqs_messages_free(m, n);
}

TEST(aws_sqs_messages_parse_empty_and_bad)
{
	static const char *bad[] = {
	    "{\"Messages\":{}}",
	    "{\"Messages\":[{\"MessageId\":\"m1\",\"Body\":\"x\"}]}",
	    "{\"Messages\":[{\"ReceiptHandle\":\"h\",\"Body\":\"x\"}]}",
	    "{\"Messages\":[{\"MessageId\":\"m\",\"ReceiptHandle\":\"h\",\"Body\":5}]}",
	    "{\"Messages\":[7]}",
	    "[]",
	};
	struct sqs_message *m;
	size_t n;
	cJSON *j;

	ASSERT_NOT_NULL((j = J("{}")));
	ASSERT_OK(sqs_messages_parse(j, &m, &n));
	ASSERT_EQ(n, 0);
	ASSERT_NULL(m);
	cJSON_Delete(j);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ASSERT_NOT_NULL((j = J(bad[i])));
		ASSERT_ERR(sqs_messages_parse(j, &m, &n), EBADMSG);
		ASSERT_NULL(m);
		ASSERT_EQ(n, 0);
		cJSON_Delete(j);
	}
	ASSERT_NOT_NULL((j = J("{\"Messages\":[{},{},{},{},{},{},{},{},{},{},{}]}")));
	ASSERT_ERR(sqs_messages_parse(j, &m, &n), E2BIG);
	cJSON_Delete(j);
}

TEST(aws_sqs_queue_region)
{
	char r[32];

	ASSERT_OK(sqs_queue_region("https://sqs.eu-west-1.amazonaws.com/123456789012/q", r, sizeof(r)));
	ASSERT_STREQ(r, "eu-west-1");
	ASSERT_OK(sqs_queue_region("https://sqs-fips.us-gov-west-1.amazonaws.com/1/q", r, sizeof(r)));
	ASSERT_STREQ(r, "us-gov-west-1");
	ASSERT_OK(sqs_queue_region("https://sqs.cn-north-1.amazonaws.com.cn/1/q", r, sizeof(r)));
	ASSERT_STREQ(r, "cn-north-1");
	ASSERT_OK(sqs_queue_region("https://ap-south-1.queue.amazonaws.com/1/q", r, sizeof(r)));
	ASSERT_STREQ(r, "ap-south-1");
	ASSERT_OK(sqs_queue_region("https://queue.amazonaws.com/1/q", r, sizeof(r)));
	ASSERT_STREQ(r, "us-east-1");
	ASSERT_ERR(sqs_queue_region("http://127.0.0.1:5055/123456789012/q", r, sizeof(r)), ENOENT);
	ASSERT_ERR(sqs_queue_region("https://sqs.notaregion.amazonaws.com/1/q", r, sizeof(r)), ENOENT);
	ASSERT_ERR(sqs_queue_region("nothing", r, sizeof(r)), EINVAL);
	ASSERT_ERR(sqs_queue_region("https://sqs.eu-west-1.amazonaws.com/1/q", r, 4), ENOBUFS);
}
