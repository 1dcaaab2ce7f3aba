/* Format checks of AWS identifiers and metadata values, for values that come from outside
 * (instance metadata, Kubernetes objects, CSI requests) before they are used as a node id, a
 * topology segment, a file name or a parameter of an AWS call.
 *
 * Each check takes a NUL-terminated string (NULL allowed) and answers true only for the exact
 * form, within a length bound: no surrounding space, no upper case, no control character.
 * They do not allocate and do not log. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* Length bounds (characters, without the NUL): a buffer of AWS_*_MAX + 1 holds any valid
 * value. */
#define AWS_EC2_ID_MAX 32	 /* "snap-" + 17 hex is the longest id checked here */
#define AWS_REGION_MAX 32	 /* us-gov-west-1, eusc-de-east-1 */
#define AWS_ZONE_MAX 64		 /* us-east-1-wl1-bos-wlz-1 */
#define AWS_ZONE_ID_MAX 64	 /* use1-wl1-bos-wlz1 */
#define AWS_INSTANCE_TYPE_MAX 40 /* u7in-32tb.224xlarge, m7i-flex.12xlarge */
#define AWS_OUTPOST_ARN_MAX 128

/* prefix (with its dash: "i-", "vol-", "snap-", "op-"), then 8 or 17 lower-case hex digits. */
bool aws_ec2_id_valid(const char *id, const char *prefix);
/* i-0123456789abcdef0, i-12345678 */
bool aws_instance_id_valid(const char *id);
/* vol-0123456789abcdef0, vol-12345678 */
bool aws_volume_id_valid(const char *id);
/* snap-0123456789abcdef0, snap-12345678 */
bool aws_snapshot_id_valid(const char *id);

/* A region: letters, then dash-separated words, then a number: us-east-1, us-gov-west-1,
 * cn-northwest-1, us-isob-east-1. */
bool aws_region_valid(const char *region);
/* An availability zone: a region and one letter (us-east-1a), a Local Zone (us-west-2-lax-1a)
 * or a Wavelength Zone (us-east-1-wl1-bos-wlz-1). */
bool aws_zone_valid(const char *zone);
/* True when zone is a zone of region (us-east-1a and us-east-1-bos-1a are in us-east-1). */
bool aws_zone_in_region(const char *zone, const char *region);
/* An availability zone id: use1-az1, usw2-lax1-az1, use1-wl1-bos-wlz1. */
bool aws_zone_id_valid(const char *zone_id);
/* An instance type: family.size in lower-case letters, digits and dashes, one dot: m5.large,
 * m7i-flex.2xlarge, u-6tb1.metal, mac2-m2pro.metal, c6i.metal-32xl. */
bool aws_instance_type_valid(const char *type);
/* arn:<partition>:outposts:<region>:<12-digit account>:outpost/op-<8 or 17 hex>. */
bool aws_outpost_arn_valid(const char *arn);

/* A rendering of an untrusted value fit for a log line or an error message: printable ASCII
 * is copied, a backslash, a double quote, control characters and other bytes are escaped
 * (\\, \", \n, \t, \xHH), and a value that does not fit in n bytes is cut and ends with
 * "...(N bytes)". Returns buf (always terminated when n > 0). */
const char *aws_value_escape(const char *value, char *buf, size_t n);
