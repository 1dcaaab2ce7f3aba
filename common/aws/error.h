/* AWS error replies as values: the HTTP status, the service's error code and message and the
 * request ID, extracted from the EC2 shape
 *   <Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/></Response>,
 * the ELB / Auto Scaling / STS shape
 *   <ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/></ErrorResponse>,
 * the JSON shape {"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "..."} (with the
 * x-amzn-query-error header of query-compatible services), or a reply that is neither (an HTML
 * 500 page from a proxy or from moto), which gets an empty code and a message saying so.
 * The classification functions follow the AWS SDKs' standard retry mode. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct aws_error {
	long http_status; /* 0 when no reply arrived (transport error) */
	char code[128];	  /* "InvalidInstanceID.NotFound"; "" when the reply had none */
	char message[512];
	char request_id[128];
};

void aws_error_clear(struct aws_error *e);
/* Fills e from a reply body (XML or JSON, detected by content, not by content type). A body
 * that carries no recognizable error still gives a message naming the status, the content
 * type and the start of the body (sanitized, at most 120 bytes). Always succeeds. */
void aws_error_parse(struct aws_error *e, long status, const char *content_type, const char *body,
		     size_t len, const char *query_error_header);
/* Sets a local error (no reply, or a reply we could not use): status 0 or the reply's. */
void aws_error_set(struct aws_error *e, long status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

bool aws_error_is(const struct aws_error *e, const char *code);
/* Throttling codes of the SDKs' standard mode (Throttling, RequestLimitExceeded, SlowDown...). */
bool aws_error_code_is_throttle(const char *code);
/* Transient codes (RequestTimeout, InternalError...) retried like 5xx. */
bool aws_error_code_is_transient(const char *code);
/* True when a reply with this status and code should be retried: throttling codes, transient
 * codes, HTTP 500/502/503/504 and 429. Never a 4xx validation error. */
bool aws_error_retryable(const struct aws_error *e);
/* The errno for an error reply: throttling and 5xx -EAGAIN, not found (codes ending in
 * NotFound, NoSuch*, NonExistent*, DoesNotExist, 404 with an AWS code) -ENOENT, auth (AuthFailure,
 * UnauthorizedOperation, AccessDenied, SignatureDoesNotMatch, ExpiredToken..., 401, 403)
 * -EACCES, duplicates (AlreadyExists, Duplicate, IdempotentParameterMismatch, 409) -EEXIST,
 * in use (VolumeInUse, ResourceInUse, DependencyViolation) -EBUSY, DryRunOperation -EALREADY
 * (the call would have succeeded), other 4xx -EINVAL, anything else -EREMOTEIO. */
int aws_error_errno(const struct aws_error *e);
/* "Code: message (HTTP 400, request id R)" into buf; returns buf. */
const char *aws_error_str(const struct aws_error *e, char *buf, size_t n);
