/* The EC2 instance metadata service (IMDS) client.
 *
 * IMDSv2: a session token from PUT /latest/api/token (TTL 21600 s by default) is sent in
 * X-aws-ec2-metadata-token; it is renewed a minute before it expires, and fetched again once
 * when a GET answers 401. If the token PUT answers 403, 404 or 405 (IMDSv1-only servers and
 * some proxies), requests go without a token for ten minutes before a token is tried again.
 * Each attempt has a short timeout (1 s) and failures are retried (3 attempts) with a small
 * jittered backoff; 404 is not retried. The endpoint, as the SDKs choose it: the option, else
 * AWS_EC2_METADATA_SERVICE_ENDPOINT, else ec2_metadata_service_endpoint in the shared config's
 * profile, else by the endpoint mode (the option, AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE, the
 * profile's ec2_metadata_service_endpoint_mode; "IPv4" or "IPv6", any case, IPv4 when unset):
 * http://169.254.169.254 or http://[fd00:ec2::254]. Another mode is -EINVAL (and logged).
 * AWS_EC2_METADATA_DISABLED=true turns the client off (-ENODEV).
 * Thread-safe. The token and the replies are never logged. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"

struct aws_imds_opts {
	const char *endpoint; /* NULL: see above */
	const char *endpoint_mode; /* "IPv4" or "IPv6"; NULL: see above */
	int64_t timeout_ns;   /* per attempt; 0: 1 s */
	int attempts;	      /* 0: 3 */
	int token_ttl_s;      /* 0: 21600 */
	bool disabled;	      /* also when AWS_EC2_METADATA_DISABLED=true */
	bool no_v1_fallback;  /* fail instead of going without a token */
};

struct aws_imds;

int aws_imds_new(const struct aws_imds_opts *o, struct aws_imds **ret);
void aws_imds_free(struct aws_imds *m);
bool aws_imds_disabled(const struct aws_imds *m);
const char *aws_imds_endpoint(const struct aws_imds *m);

/* GETs /latest/<path> (e.g. "meta-data/instance-id", "dynamic/instance-identity/document")
 * into out (appended; capped at 1 MiB). -ENOENT for 404, -ENODEV when disabled, -EACCES for
 * 401/403 after the token retry, -ETIMEDOUT..., -EREMOTEIO for other statuses. */
int aws_imds_get_buf(struct aws_imds *m, const char *path, struct buf *out);
/* The same as a malloc'd string with trailing white space removed. */
int aws_imds_get(struct aws_imds *m, const char *path, char **ret);
/* Number of token PUTs and GETs done (tests). */
void aws_imds_counters(struct aws_imds *m, unsigned *ret_token_puts, unsigned *ret_gets);

/* Helpers (malloc'd strings). */
int aws_imds_instance_id(struct aws_imds *m, char **ret);
int aws_imds_instance_type(struct aws_imds *m, char **ret);
int aws_imds_zone(struct aws_imds *m, char **ret);
int aws_imds_zone_id(struct aws_imds *m, char **ret);
/* placement/region, or the zone without its letter when the path is missing. */
int aws_imds_region(struct aws_imds *m, char **ret);
int aws_imds_local_hostname(struct aws_imds *m, char **ret);
int aws_imds_local_ipv4(struct aws_imds *m, char **ret);
/* The MAC addresses of the interfaces (network/interfaces/macs/), NULL-terminated. */
int aws_imds_macs(struct aws_imds *m, char ***ret);
/* One field of one interface: network/interfaces/macs/<mac>/<field> (device-number,
 * interface-id, subnet-id, vpc-id, local-ipv4s, ...). */
int aws_imds_interface(struct aws_imds *m, const char *mac, const char *field, char **ret);

struct aws_imds_identity {
	char account_id[32];
	char instance_id[64];
	char instance_type[64];
	char image_id[64];
	char region[32];
	char availability_zone[40];
	char private_ip[64];
	char architecture[16];
	char pending_time[40];
};
/* dynamic/instance-identity/document, parsed. -EBADMSG when it is not the expected JSON. */
int aws_imds_identity(struct aws_imds *m, struct aws_imds_identity *ret);
/* Parses an identity document (exposed for tests and fuzzing). */
int aws_imds_identity_parse(const char *json, size_t len, struct aws_imds_identity *ret);
