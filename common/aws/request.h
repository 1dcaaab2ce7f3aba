/* One AWS call as values: the request (struct aws_request) that aws_do() sends and the reply
 * (struct aws_reply) it fills. Apart from client.h so that the code below the client (the
 * credential provider's STS calls, made through struct aws_creds_io) can build a request and
 * read a reply without calling the client by name. */
#pragma once
#include <cjson/cJSON.h>
#include <libxml/tree.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/aws/creds.h"
#include "common/aws/endpoints.h"
#include "common/aws/query.h"
#include "common/http/client.h"

struct cancel;

/* What aws_do() sends. */
struct aws_request {
	enum aws_service service;
	const char *action;		     /* "DescribeInstances", "SendMessage" */
	const struct aws_query *query;	     /* Query protocol parameters (may be NULL) */
	const char *json;		     /* JSON protocol body; NULL is "{}" */
	int64_t timeout_ns;		     /* per attempt; 0: the client's */
	int max_attempts;		     /* 0: the client's; 1: no retry */
	bool anonymous;			     /* not signed (AssumeRoleWithWebIdentity) */
	const struct aws_credentials *creds; /* sign with these, not with the provider's */
	const char *region;		     /* instead of the client's */
	const struct http_header *headers;   /* extra headers, signed (e.g. x-amz-source-arn) */
	size_t n_headers;
	size_t max_reply;		     /* cap on the reply body; 0: aws_reply_max() */
	struct cancel *cancel; /* ends the call in flight and its retry waits; NULL: cancel_root() */
};

/* What a successful call gives back. */
struct aws_reply {
	long status;
	char request_id[128];
	unsigned attempts;
	xmlDoc *doc;	 /* Query protocol: the parsed reply */
	xmlNode *root;	 /* its root element (<DescribeInstancesResponse>) */
	xmlNode *result; /* <ActionResult> when present (ELB, ASG, STS), else root (EC2) */
	cJSON *json;	 /* JSON protocol: the parsed body ({} for an empty one) */
};

/* Frees the parsed body and clears the struct; NULL is fine. */
void aws_reply_release(struct aws_reply *r);
