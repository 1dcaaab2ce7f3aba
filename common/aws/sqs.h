/* SQS through the JSON protocol (AmazonSQS.*, application/x-amz-json-1.0): the calls a queue
 * consumer makes (node-termination-handler's queue mode).
 *
 *   struct sqs_receive_opts o = { .queue_url = url, .max_messages = 10, .wait_s = 20,
 *                                 .visibility_s = 20, .cancel = ct };
 *   struct sqs_message *m;
 *   size_t n;
 *   if ((r = sqs_receive(c, &o, &m, &n, &err)) < 0) ...
 *   for (size_t i = 0; i < n; i++) use(m[i].body), sqs_delete(c, url, m[i].receipt_handle, &err);
 *   sqs_messages_free(m, n);
 *
 * A long poll holds the call for wait_s: the attempt's timeout is wait_s + 10 s, and the call
 * is made once per attempt (no SDK retry of a long poll that was cancelled). Nothing logs. */
#pragma once
#include <cjson/cJSON.h>
#include <stddef.h>

#include "common/aws/client.h"

#define SQS_MAX_MESSAGES 10 /* per ReceiveMessage */
#define SQS_MAX_WAIT_S 20
#define SQS_BODY_MAX ((size_t)1 << 20)		 /* SQS's largest message */
#define SQS_RECEIVE_REPLY_MAX ((size_t)24 << 20) /* 10 bodies, JSON-escaped */

struct sqs_message {
	char *id;
	char *receipt_handle;
	char *body; /* "" when the message had none */
	size_t body_len;
	long long receive_count; /* ApproximateReceiveCount; 0 when not asked or absent */
	long long sent_ms;	 /* SentTimestamp; 0 when absent */
};

struct sqs_receive_opts {
	const char *queue_url;
	int max_messages; /* 1..10; 0: 10 */
	int wait_s;	  /* 0..20 */
	int visibility_s; /* 0: the queue's */
	struct cancel *cancel;
};

/* The messages of a ReceiveMessage reply. -EBADMSG when an item is not an object or lacks a
 * MessageId or a ReceiptHandle (nothing is returned then: the messages come back after their
 * visibility timeout), -E2BIG with more than SQS_MAX_MESSAGES items. A body over
 * SQS_BODY_MAX is kept (the caller decides). *ret is NULL when *ret_n is 0. */
int sqs_messages_parse(const cJSON *reply, struct sqs_message **ret, size_t *ret_n);
void sqs_messages_free(struct sqs_message *m, size_t n);

/* ReceiveMessage with the attributes SentTimestamp and ApproximateReceiveCount. -EINVAL for
 * bad options; the client's errors otherwise (-ECANCELED when o->cancel was cancelled). */
int sqs_receive(struct aws_client *c, const struct sqs_receive_opts *o, struct sqs_message **ret,
		size_t *ret_n, struct aws_error *err);
/* DeleteMessage; the client's errors (ReceiptHandleIsInvalid is -EINVAL, err->code says it). */
int sqs_delete(struct aws_client *c, const char *queue_url, const char *receipt_handle,
	       struct aws_error *err);
/* ChangeMessageVisibility (0..43200 s). */
int sqs_change_visibility(struct aws_client *c, const char *queue_url, const char *receipt_handle,
			  int visibility_s, struct aws_error *err);

/* The region of a queue URL (https://sqs.eu-west-1.amazonaws.com/123/q -> eu-west-1; the
 * legacy https://queue.amazonaws.com/... -> us-east-1). -ENOENT when the host names none
 * (a local endpoint), -EINVAL for something that is not a URL. */
int sqs_queue_region(const char *url, char *out, size_t n);
