/* AWS Signature Version 4 as a pure function: request parts + credentials + time -> the headers
 * to add (X-Amz-Date, X-Amz-Security-Token when there is a session token, Authorization).
 *
 * The rules are those of the services used here (not S3): the path is normalized (dot segments
 * removed, repeated slashes collapsed) and then URI-encoded once more ("double encoding"), the
 * query parameters are decoded, re-encoded with RFC 3986's unreserved set and sorted by name
 * then value, header values are trimmed with inner runs of white space collapsed, repeated
 * headers are joined with ',', and the payload is always hashed. The result matches botocore's
 * SigV4Auth byte for byte (tests/data/aws/sigv4_vectors.json). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "common/aws/creds.h"
#include "common/base/buf.h"
#include "common/http/client.h"

#define SIGV4_MAX_HEADERS 64
#define SIGV4_AUTH_MAX 1024

struct sigv4_input {
	const char *method; /* upper case: "GET", "POST" */
	const char *host;   /* the Host header as sent: lower case, port only when not default */
	const char *path;   /* as sent on the wire (already percent-encoded); NULL or "" is "/" */
	const char *query;  /* as sent, without '?'; NULL or "" for none */
	const struct http_header *headers; /* other headers sent; hop-by-hop and User-Agent are */
	size_t n_headers;		   /* not signed; Host, X-Amz-Date, Authorization refused */
	const void *body;
	size_t body_len;
	const char *region;  /* signing region, e.g. "us-east-1" */
	const char *service; /* signing name, e.g. "ec2", "elasticloadbalancing" */
	int64_t time_ns;     /* wall clock, nanoseconds since the epoch */
};

struct sigv4_output {
	char amz_date[17];     /* "20150830T123600Z" */
	char payload_hash[65]; /* hex SHA-256 of the body */
	char authorization[SIGV4_AUTH_MAX];
	/* The headers to add to the request, in this order: X-Amz-Date, X-Amz-Security-Token (only
	 * with a session token; its value points into the credentials, which must outlive the
	 * request), Authorization. */
	struct http_header headers[3];
	size_t n_headers;
};

/* Signs. -EINVAL for a missing part or a header the signer owns, -ENAMETOOLONG when the
 * Authorization header would not fit, -E2BIG for more than SIGV4_MAX_HEADERS headers, -ENOMEM,
 * -EIO if OpenSSL fails. Never logs (the inputs hold secrets). */
int sigv4_sign(const struct sigv4_input *in, const struct aws_credentials *cr,
	       struct sigv4_output *out);
/* The same, also handing back the canonical request and the string to sign (for tests and
 * --v=9 debugging; neither holds a secret except a session token in the canonical request). */
int sigv4_sign_ex(const struct sigv4_input *in, const struct aws_credentials *cr,
		  struct sigv4_output *out, struct buf *ret_canonical,
		  struct buf *ret_string_to_sign);

/* Host header value for a URL, as botocore and libcurl compute it: the host lower-cased,
 * userinfo dropped, the port kept unless it is the scheme's default (80/443), IPv6 in
 * brackets. Also returns the path+query part ("/" when empty) in ret_rest when not NULL. */
int sigv4_host_from_url(const char *url, char *host, size_t n, const char **ret_rest);
