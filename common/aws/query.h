/* Query protocol parameters (EC2, ELB, ELBv2, Auto Scaling, STS): an ordered list of
 * key=value pairs, flattened the way each service expects, and form-encoded for the body.
 *
 *   EC2 lists:       InstanceId.1=i-a  InstanceId.2=i-b
 *   EC2 filters:     Filter.1.Name=tag:Name  Filter.1.Value.1=a  Filter.1.Value.2=b
 *   EC2 tags:        TagSpecification.1.ResourceType=volume
 *                    TagSpecification.1.Tag.1.Key=k  TagSpecification.1.Tag.1.Value=v
 *   ELB/ASG lists:   Listeners.member.1.Protocol=TCP  Subnets.member.1=subnet-1
 *   ELB/ASG tags:    Tags.member.1.Key=k  Tags.member.1.Value=v
 *
 *   struct aws_query q = AWS_QUERY_INIT;
 *   aws_query_add_list(&q, "InstanceId", ids, n);
 *   aws_query_add_filter(&q, "instance-state-name", (const char *[]){ "running" }, 1);
 *   ... aws_call_query(client, AWS_SVC_EC2, "DescribeInstances", &q, &reply, &err);
 *   aws_query_release(&q);
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/base/buf.h"

#define AWS_QUERY_MAX_PARAMS 20000

struct aws_query {
	char **keys;
	char **values;
	size_t n, cap;
	unsigned n_filters; /* filters added with aws_query_add_filter */
};

#define AWS_QUERY_INIT                                                                             \
	{                                                                                          \
		0                                                                                  \
	}

void aws_query_init(struct aws_query *q);
void aws_query_release(struct aws_query *q);
/* Appends key=value (both copied). Keys are not checked for duplicates: a later
 * aws_query_set replaces. -E2BIG past AWS_QUERY_MAX_PARAMS. */
int aws_query_add(struct aws_query *q, const char *key, const char *value);
/* Replaces the value of key, or appends it. */
int aws_query_set(struct aws_query *q, const char *key, const char *value);
/* The key formatted printf-style: aws_query_addf(&q, "TCP", "Listeners.member.%d.Protocol", 1). */
int aws_query_addf(struct aws_query *q, const char *value, const char *keyfmt, ...)
    __attribute__((format(printf, 3, 4)));
int aws_query_add_int(struct aws_query *q, const char *key, long long v);
int aws_query_add_bool(struct aws_query *q, const char *key, bool v);
/* prefix.1=values[0], prefix.2=values[1]...: pass "InstanceId" for EC2, "Subnets.member" for
 * ELB and Auto Scaling. */
int aws_query_add_list(struct aws_query *q, const char *prefix, const char *const *values,
		       size_t n);
/* EC2 Filter.N.Name / Filter.N.Value.M, N counting up from 1 with each call. */
int aws_query_add_filter(struct aws_query *q, const char *name, const char *const *values,
			 size_t n);
/* Tags as prefix.i.Key / prefix.i.Value, e.g. prefix "Tags.member" (ELB),
 * "TagSpecification.1.Tag" (EC2), "Tag" (EC2 CreateTags). */
int aws_query_add_tags(struct aws_query *q, const char *prefix, const char *const *keys,
		       const char *const *values, size_t n);
/* The value of key, or NULL. */
const char *aws_query_get(const struct aws_query *q, const char *key);
/* Adds "Key=Value" text (the debugging subcommand's arguments); -EINVAL without '='. */
int aws_query_add_kv(struct aws_query *q, const char *kv);

/* Appends "Action=A&Version=V&k=v..." form-encoded byte for byte as botocore sends it: the
 * RFC 3986 unreserved set kept, a space as '+', any other byte (UTF-8 included) as %XX in upper
 * case. Action and Version given here come first; a Version among the params wins. */
int aws_query_encode(const struct aws_query *q, const char *action, const char *version,
		     struct buf *out);
