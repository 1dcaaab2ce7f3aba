/* The AWS client: one struct aws_client per process (or per account/region), shared by all
 * threads. A call goes through the same pipeline whatever the service:
 *   endpoint (endpoints.h) -> body (Query form or JSON) -> credentials (creds.h) -> SigV4
 *   -> HTTP (common/http/client.h) -> reply parsing (xml.h / JSON) or error (error.h)
 *   -> retries in the SDKs' standard mode -> metrics.
 *
 * Replies: a 2xx reply is used only when it is the reply to the action (shape.h: the root
 * <ActionResponse> and the result sets callers depend on, or a JSON object of the documented
 * shape); anything else (an HTML page from a proxy, another root, a reply without its
 * reservationSet, truncated XML) is an "unusable reply from <service> <Action>" error
 * (-EBADMSG), retried like a 5xx and counted, and never read as "no items". A reply body is
 * capped per action (aws_reply_max: 32 MiB for DescribeInstances, 16 MiB for other
 * Describe/List/Get, 2 MiB for the rest): past it the call fails with -EMSGSIZE, not retried.
 * A call's token (aws_request.cancel; by default the process's, which a stop cancels) aborts it
 * in flight, and in a retry's wait, with -ECANCELED.
 *
 * Retries: at most max_attempts attempts (3 by default, AWS_MAX_ATTEMPTS), on throttling
 * codes, transient codes, HTTP 500/502/503/504/429, unusable replies and transport errors
 * (timeouts, refused or reset connections); never on other 4xx replies.
 * The delay before retry i (1, 2, ...) is uniform in [0, min(20 s, base * 2^(i-1))) ("full
 * jitter"), with base 100 ms, or 1 s after a throttling reply. A retry costs tokens from a
 * bucket shared by the client (500 tokens, 5 per retry, 10 per retry after a timeout); a
 * success gives back what its retries took, or 1 token when it needed none. With the bucket
 * empty a failure is returned at once: a storm of failures cannot become a storm of calls.
 * A reply saying the request time is skewed (RequestTimeTooSkewed, RequestExpired...) sets a
 * clock offset from the reply's Date header and retries. An ExpiredToken reply drops the
 * cached credentials and retries once.
 *
 * Metrics (the upstream cloud provider's names): cloudprovider_aws_api_request_duration_seconds
 * {request} (successful calls, retries included), cloudprovider_aws_api_request_errors{request}
 * (failed calls), cloudprovider_aws_api_throttled_requests_total{operation_name} (each
 * throttled reply); and aws_k8s_aws_api_retries_total{request} (retries made),
 * aws_k8s_aws_api_unusable_replies_total{request} (2xx replies that were not usable),
 * aws_k8s_aws_api_retry_quota_exhausted_total (retries refused by the token bucket). */
#pragma once
#include <cjson/cJSON.h>
#include <libxml/tree.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/aws/creds.h"
#include "common/aws/endpoints.h"
#include "common/aws/error.h"
#include "common/aws/imds.h"
#include "common/aws/query.h"
#include "common/aws/request.h"
#include "common/http/client.h"

#define AWS_RETRY_TOKENS 500
#define AWS_RETRY_COST 5
#define AWS_RETRY_TIMEOUT_COST 10

struct aws_client_opts {
	const char *region;	     /* NULL: AWS_REGION, AWS_DEFAULT_REGION, profile, metadata */
	const char *endpoint_url;    /* one endpoint for every service (a --endpoint-url flag) */
	struct aws_creds_opts creds; /* explicit keys, profile, role to assume */
	int max_attempts;	     /* 0: AWS_MAX_ATTEMPTS or 3 */
	int64_t timeout_ns;	     /* per attempt; 0: 30 s */
	int64_t connect_timeout_ns;  /* 0: 5 s */
	int64_t retry_base_ns;	     /* 0: 100 ms */
	int64_t throttle_base_ns;    /* 0: 1 s */
	int64_t max_backoff_ns;	     /* 0: 20 s */
	const char *user_agent;	     /* appended to "aws-k8s/<version>", e.g. "ccm" */
	const char *ca_file;	     /* NULL: AWS_CA_BUNDLE, else the system's */
	size_t max_response;	     /* 0: 256 MiB */
	struct aws_imds_opts imds;
};

/* The metric names a process exports for its AWS calls, chosen once before its first client:
 * the ccm's (cloudprovider_aws_api_*, request values in snake case as cloud-provider-aws:
 * "describe_instance"), the EBS CSI driver's (aws_ebs_csi_api_request_*, request values the
 * action names), or none (the module counts its calls itself). The aws_k8s_aws_api_* extras
 * are exported in every case. */
enum aws_metrics_family { AWS_METRICS_CLOUDPROVIDER, AWS_METRICS_EBS_CSI, AWS_METRICS_OWN };
void aws_metrics_family_set(enum aws_metrics_family f);
/* The cloudprovider_aws_* request label value of an action ("DescribeRouteTables" ->
 * "describe_route_tables"). */
void aws_metric_request_name(const char *action, char *out, size_t n);

struct aws_client;

/* Creates a client. The region is resolved now from the options, the environment and the
 * config file; when none gives it, it is asked from the metadata service at the first call
 * (aws_client_region). Credentials are fetched at the first call. */
int aws_client_new(const struct aws_client_opts *o, struct aws_client **ret);
void aws_client_free(struct aws_client *c);

/* The region (may ask the metadata service the first time): -EDESTADDRREQ when unknown. */
int aws_client_region(struct aws_client *c, const char **ret);
/* The shared metadata client and credential provider. */
struct aws_imds *aws_client_imds(struct aws_client *c);
struct aws_creds *aws_client_creds(struct aws_client *c);
/* A per-service endpoint override ([ServiceOverride] of the ccm's cloud config). */
int aws_client_set_override(struct aws_client *c, enum aws_service s, const char *url,
			    const char *signing_region, const char *signing_name);
/* The endpoint a call to s would use now. */
int aws_client_endpoint(struct aws_client *c, enum aws_service s, struct aws_endpoint *ret);
/* Tokens left in the retry bucket (tests). */
unsigned aws_client_retry_tokens(struct aws_client *c);


/* Makes the call; on success fills *ret (release it), on failure fills *err (when not NULL)
 * and returns the errno of aws_error_errno() for AWS error replies, -EBADMSG for an unusable
 * reply, -EMSGSIZE for one over the cap, -ECANCELED when its token was cancelled (a stop), the
 * transport error (-ETIMEDOUT, -ECONNREFUSED...), -ENOKEY without credentials, -EDESTADDRREQ
 * without a region. err->message always says what happened. */
int aws_do(struct aws_client *c, const struct aws_request *rq, struct aws_reply *ret,
	   struct aws_error *err);
/* Shorthands. */
int aws_call_query(struct aws_client *c, enum aws_service s, const char *action,
		   const struct aws_query *q, struct aws_reply *ret, struct aws_error *err);
int aws_call_json(struct aws_client *c, enum aws_service s, const char *action, const cJSON *input,
		  struct aws_reply *ret, struct aws_error *err);

/* Pagination: calls the action again with the token of the last reply until there is none.
 * on_page gets each reply's result element (Query) or JSON body and returns 0 to go on, 1 to
 * stop early, or a negative errno. Query: token_param "NextToken" (EC2, ASG) or "Marker"
 * (ELB, ELBv2), reply_field "nextToken" (EC2), "NextToken" (ASG), "NextMarker" (ELB).
 * JSON: both "NextToken". A token repeated twice (a looping server) gives -ELOOP; more than
 * max_pages pages (0: 10000) gives -E2BIG. */
struct aws_paginate {
	const char *token_param;
	const char *reply_field;
	unsigned max_pages;
	int (*on_page)(void *ud, const struct aws_reply *page);
	void *ud;
};
int aws_paginate_query(struct aws_client *c, enum aws_service s, const char *action,
		       const struct aws_query *q, const struct aws_paginate *p,
		       struct aws_error *err);
int aws_paginate_json(struct aws_client *c, enum aws_service s, const char *action,
		      const cJSON *input, const struct aws_paginate *p, struct aws_error *err);

/* The retry policy as pure functions (exposed for tests). */
struct aws_retry_bucket {
	unsigned tokens;
};
/* Takes the cost of one retry; false (nothing taken) when the bucket has too few tokens. */
bool aws_retry_bucket_take(struct aws_retry_bucket *b, bool timeout, unsigned *ret_cost);
/* After a success: gives back cost (the tokens its retries took) or 1 when it had none. */
void aws_retry_bucket_refund(struct aws_retry_bucket *b, unsigned cost);
/* The delay before retry number `retry` (1 for the first retry): uniform in
 * [0, min(max, base * 2^(retry-1))). */
int64_t aws_retry_delay(int retry, int64_t base_ns, int64_t max_ns);
/* The bound of this client's delay before retry number `retry` (the delay is uniform below it):
 * after a throttling error from the throttling base (1 s by default), after any other from the
 * retry base (100 ms), doubled per retry up to the max (20 s). */
int64_t aws_client_retry_cap(const struct aws_client *c, int retry, bool throttled);
