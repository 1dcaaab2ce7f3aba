/* SQS through the JSON protocol (see sqs.h). */
#include "common/aws/sqs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/ids.h"
#include "common/base/buf.h"
#include "common/base/json.h"

#define NS_PER_S 1000000000LL

void sqs_messages_free(struct sqs_message *m, size_t n)
{
	for (size_t i = 0; m && i < n; i++) {
		free(m[i].id);
		free(m[i].receipt_handle);
		free(m[i].body);
	}
	free(m);
}

/* A decimal attribute ("1", "1712345678901"); 0 when absent or not a number. */
static long long attr_ll(const cJSON *msg, const char *name)
{
	const cJSON *attrs = cJSON_GetObjectItemCaseSensitive(msg, "Attributes");
	const char *s = json_str_key(attrs, name);
	char *end;
	long long v;

	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoll(s, &end, 10);
	return errno || *end || v < 0 ? 0 : v;
}

static int message_parse(const cJSON *it, struct sqs_message *m)
{
	const char *id = json_str_key(it, "MessageId"), *h = json_str_key(it, "ReceiptHandle");
	const cJSON *body = cJSON_GetObjectItemCaseSensitive(it, "Body");

	if (!cJSON_IsObject(it) || !id || !*id || !h || !*h)
		return -EBADMSG;
	if (body && !cJSON_IsString(body) && !cJSON_IsNull(body))
		return -EBADMSG;
	m->id = strdup(id);
	m->receipt_handle = strdup(h);
	m->body = strdup(cJSON_IsString(body) ? body->valuestring : "");
	if (!m->id || !m->receipt_handle || !m->body)
		return -ENOMEM;
	m->body_len = strlen(m->body);
	m->receive_count = attr_ll(it, "ApproximateReceiveCount");
	m->sent_ms = attr_ll(it, "SentTimestamp");
	return 0;
}

int sqs_messages_parse(const cJSON *reply, struct sqs_message **ret, size_t *ret_n)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(reply, "Messages"), *it;
	struct sqs_message *m = NULL;
	size_t n = 0, cap;
	int r;

	*ret = NULL;
	*ret_n = 0;
	if (!cJSON_IsObject(reply))
		return -EBADMSG;
	if (!list || cJSON_IsNull(list))
		return 0;
	if (!cJSON_IsArray(list))
		return -EBADMSG;
	cap = (size_t)cJSON_GetArraySize(list);
	if (cap > SQS_MAX_MESSAGES)
		return -E2BIG;
	if (cap == 0)
		return 0;
	if (!(m = calloc(cap, sizeof(*m))))
		return -ENOMEM;
	cJSON_ArrayForEach(it, list)
	{
		if ((r = message_parse(it, &m[n++])) < 0) {
			sqs_messages_free(m, n);
			return r;
		}
	}
	*ret = m;
	*ret_n = n;
	return 0;
}

int sqs_receive(struct aws_client *c, const struct sqs_receive_opts *o, struct sqs_message **ret,
		size_t *ret_n, struct aws_error *err)
{
	int max = o->max_messages ? o->max_messages : SQS_MAX_MESSAGES;
	cJSON *in = NULL, *names;
	_cleanup_free_ char *body = NULL;
	struct aws_reply rep = {0};
	int r;

	*ret = NULL;
	*ret_n = 0;
	if (!o->queue_url || !*o->queue_url || max < 1 || max > SQS_MAX_MESSAGES || o->wait_s < 0 ||
	    o->wait_s > SQS_MAX_WAIT_S || o->visibility_s < 0 || o->visibility_s > 43200)
		return -EINVAL;
	if (!(in = cJSON_CreateObject()) || !cJSON_AddStringToObject(in, "QueueUrl", o->queue_url) ||
	    !cJSON_AddNumberToObject(in, "MaxNumberOfMessages", max) ||
	    !cJSON_AddNumberToObject(in, "WaitTimeSeconds", o->wait_s) ||
	    (o->visibility_s && !cJSON_AddNumberToObject(in, "VisibilityTimeout", o->visibility_s)) ||
	    !(names = cJSON_AddArrayToObject(in, "AttributeNames")) ||
	    !cJSON_AddItemToArray(names, cJSON_CreateString("SentTimestamp")) ||
	    !cJSON_AddItemToArray(names, cJSON_CreateString("ApproximateReceiveCount")) ||
	    !(body = json_print(in))) {
		cJSON_Delete(in);
		return -ENOMEM;
	}
	cJSON_Delete(in);
	struct aws_request rq = {
	    .service = AWS_SVC_SQS,
	    .action = "ReceiveMessage",
	    .json = body,
	    .timeout_ns = ((int64_t)o->wait_s + 10) * NS_PER_S,
	    .max_reply = SQS_RECEIVE_REPLY_MAX,
	    .cancel = o->cancel,
	};
	if ((r = aws_do(c, &rq, &rep, err)) < 0)
		return r;
	r = sqs_messages_parse(rep.json, ret, ret_n);
	if (r == -EBADMSG && err)
		aws_error_set(err, rep.status, "", "unusable reply from sqs ReceiveMessage: a message "
						   "without MessageId or ReceiptHandle");
	else if (r == -E2BIG && err)
		aws_error_set(err, rep.status, "", "sqs ReceiveMessage returned more than %d messages",
			      SQS_MAX_MESSAGES);
	aws_reply_release(&rep);
	return r;
}

static int call_handle(struct aws_client *c, const char *action, const char *queue_url,
		       const char *handle, int visibility_s, struct aws_error *err)
{
	cJSON *in;
	struct aws_reply rep = {0};
	int r;

	if (!queue_url || !*queue_url || !handle || !*handle)
		return -EINVAL;
	if (!(in = cJSON_CreateObject()) || !cJSON_AddStringToObject(in, "QueueUrl", queue_url) ||
	    !cJSON_AddStringToObject(in, "ReceiptHandle", handle) ||
	    (visibility_s >= 0 && !cJSON_AddNumberToObject(in, "VisibilityTimeout", visibility_s))) {
		cJSON_Delete(in);
		return -ENOMEM;
	}
	r = aws_call_json(c, AWS_SVC_SQS, action, in, &rep, err);
	cJSON_Delete(in);
	aws_reply_release(&rep);
	return r;
}

int sqs_delete(struct aws_client *c, const char *queue_url, const char *receipt_handle,
	       struct aws_error *err)
{
	return call_handle(c, "DeleteMessage", queue_url, receipt_handle, -1, err);
}

int sqs_change_visibility(struct aws_client *c, const char *queue_url, const char *receipt_handle,
			  int visibility_s, struct aws_error *err)
{
	if (visibility_s < 0 || visibility_s > 43200)
		return -EINVAL;
	return call_handle(c, "ChangeMessageVisibility", queue_url, receipt_handle, visibility_s,
			   err);
}

int sqs_queue_region(const char *url, char *out, size_t n)
{
	const char *h = strstr(url ? url : "", "://"), *end, *dot;
	char host[256], region[64];
	size_t len;

	if (!h)
		return -EINVAL;
	h += 3;
	len = strcspn(h, "/:?");
	if (len == 0 || len >= sizeof(host))
		return -EINVAL;
	memcpy(host, h, len);
	host[len] = '\0';
	if (strcmp(host, "queue.amazonaws.com") == 0) {
		if (n <= strlen("us-east-1"))
			return -ENOBUFS;
		memcpy(out, "us-east-1", sizeof("us-east-1"));
		return 0;
	}
	/* sqs.REGION.amazonaws.com, sqs-fips.REGION..., sqs.REGION.api.aws, REGION.queue.amazonaws.com */
	if (strncmp(host, "sqs.", 4) == 0 || strncmp(host, "sqs-fips.", 9) == 0) {
		h = strchr(host, '.') + 1;
	} else if ((dot = strstr(host, ".queue.amazonaws.com")) != NULL && dot[20] == '\0') {
		h = host;
	} else {
		return -ENOENT;
	}
	end = strchr(h, '.');
	len = end ? (size_t)(end - h) : strlen(h);
	if (len == 0 || len >= sizeof(region))
		return -ENOENT;
	memcpy(region, h, len);
	region[len] = '\0';
	if (!aws_region_valid(region))
		return -ENOENT;
	if (n <= len)
		return -ENOBUFS;
	memcpy(out, region, len + 1);
	return 0;
}
