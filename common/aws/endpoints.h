/* The services used here, their protocols and API versions, and endpoint resolution.
 *
 * Endpoint precedence, as in the AWS SDKs: an override set through the API (the ccm's
 * [ServiceOverride] sections, or a --endpoint-url flag) > AWS_ENDPOINT_URL_<SERVICE> >
 * AWS_ENDPOINT_URL > the standard endpoint of the region's partition. Setting
 * AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true ignores the two environment variables.
 *
 * The standard endpoint has variants, chosen as the SDKs do by AWS_USE_FIPS_ENDPOINT and
 * AWS_USE_DUALSTACK_ENDPOINT ("true"/"false", any case; anything else is -EINVAL), else by
 * use_fips_endpoint and use_dualstack_endpoint in the profile of the shared config file
 * (aws_endpoints_load_profile):
 *   standard            https://ec2.us-east-1.amazonaws.com
 *   FIPS                https://ec2-fips.us-east-1.amazonaws.com
 *   dual-stack          https://ec2.us-east-1.api.aws  (China: api.amazonwebservices.com.cn)
 *   FIPS + dual-stack   https://ec2-fips.us-east-1.api.aws
 * In GovCloud (us-gov-*) the standard host names of EC2, ELB, Auto Scaling, STS, SQS and
 * EventBridge are FIPS endpoints already, and FIPS alone keeps them (as the services' endpoint
 * rules say); the ISO partitions have no dual-stack endpoints (-EOPNOTSUPP). An explicit URL
 * (override, --endpoint-url, AWS_ENDPOINT_URL[_<SERVICE>]) wins over both settings. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/aws/ids.h" /* aws_region_valid */

enum aws_service {
	AWS_SVC_EC2,
	AWS_SVC_ELB,   /* classic load balancers, API 2012-06-01 */
	AWS_SVC_ELBV2, /* network/application load balancers, API 2015-12-01 */
	AWS_SVC_AUTOSCALING,
	AWS_SVC_STS,
	AWS_SVC_SQS,
	AWS_SVC_EVENTS,
	AWS_SVC_EBS, /* EBS direct APIs (REST-JSON; endpoints only) */
	AWS_SVC_SECRETSMANAGER, /* JSON 1.1 (capa's bootstrap data) */
	AWS_SVC__MAX,
};

enum aws_protocol { AWS_PROTO_QUERY, AWS_PROTO_JSON, AWS_PROTO_REST };

struct aws_service_info {
	enum aws_service id;
	const char *name;	     /* our name: "ec2", "elb", "elbv2", "autoscaling", "sts"... */
	const char *signing_name;    /* SigV4 service: "ec2", "elasticloadbalancing", ... */
	const char *endpoint_prefix; /* host prefix: "ec2", "elasticloadbalancing", ... */
	const char *env_name;	     /* AWS_ENDPOINT_URL_<env_name> */
	enum aws_protocol protocol;
	const char *version;	   /* Query API version */
	const char *target_prefix; /* JSON: X-Amz-Target prefix ("AmazonSQS") */
	const char *content_type;  /* JSON: "application/x-amz-json-1.0" */
	const char *description;
};

const struct aws_service_info *aws_service_info(enum aws_service s);
/* By our name ("ec2", "elb", "elbv2", "autoscaling", "sts", "sqs", "events", "ebs",
 * "secretsmanager"), also
 * accepting "elasticloadbalancing" (classic), "eventbridge"; NULL when unknown. */
const struct aws_service_info *aws_service_by_name(const char *name);

/* The partition of a region: "aws", "aws-cn", "aws-us-gov", "aws-iso", "aws-iso-b". */
const char *aws_partition(const char *region);
/* Its DNS suffix: amazonaws.com, amazonaws.com.cn, c2s.ic.gov, sc2s.sgov.gov. */
const char *aws_partition_dns_suffix(const char *region);

/* Per-service settings that replace the standard ones (all optional). */
struct aws_endpoint_override {
	char *url;
	char *signing_region;
	char *signing_name;
};

/* A boolean setting that may be absent. */
enum aws_setting { AWS_SETTING_UNSET, AWS_SETTING_FALSE, AWS_SETTING_TRUE };

struct aws_endpoints {
	struct aws_endpoint_override over[AWS_SVC__MAX];
	char *all_url; /* one URL for every service (the --endpoint-url flag) */
	/* from the shared config; the environment variables win */
	enum aws_setting use_fips, use_dualstack;
};

void aws_endpoints_init(struct aws_endpoints *e);
void aws_endpoints_release(struct aws_endpoints *e);
/* Sets (replaces) the override of one service; NULL parts are left unset. */
int aws_endpoints_set_override(struct aws_endpoints *e, enum aws_service s, const char *url,
			       const char *signing_region, const char *signing_name);
int aws_endpoints_set_all(struct aws_endpoints *e, const char *url);
/* Reads use_fips_endpoint and use_dualstack_endpoint of profile (NULL: AWS_PROFILE, else
 * "default") from the shared config/credentials files. -EINVAL when one is not a boolean. */
int aws_endpoints_load_profile(struct aws_endpoints *e, const char *profile);
/* Parses "true"/"false" (any case); NULL or "" is AWS_SETTING_UNSET; -EINVAL otherwise. */
int aws_setting_parse(const char *v, enum aws_setting *ret);

struct aws_endpoint {
	char url[512]; /* without a trailing '/', e.g. "https://ec2.us-east-1.amazonaws.com" */
	char signing_region[64];
	char signing_name[64];
	bool custom; /* from an override or the environment */
};

/* Resolves the endpoint of service s in region. -EINVAL for a bad region, URL or
 * AWS_USE_*_ENDPOINT value, -EOPNOTSUPP for dual-stack in a partition without it,
 * -ENAMETOOLONG. */
int aws_endpoint_resolve(const struct aws_endpoints *e, enum aws_service s, const char *region,
			 struct aws_endpoint *ret);
