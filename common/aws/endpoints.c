/* Services and endpoints (see endpoints.h). */
#include "common/aws/endpoints.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/creds.h" /* aws_profile_get */
#include "common/base/buf.h"

static const struct aws_service_info services[AWS_SVC__MAX] = {
    [AWS_SVC_EC2] = {AWS_SVC_EC2, "ec2", "ec2", "ec2", "EC2", AWS_PROTO_QUERY, "2016-11-15", NULL,
		     NULL, "Amazon EC2"},
    [AWS_SVC_ELB] = {AWS_SVC_ELB, "elb", "elasticloadbalancing", "elasticloadbalancing",
		     "ELASTIC_LOAD_BALANCING", AWS_PROTO_QUERY, "2012-06-01", NULL, NULL,
		     "Elastic Load Balancing (classic)"},
    [AWS_SVC_ELBV2] = {AWS_SVC_ELBV2, "elbv2", "elasticloadbalancing", "elasticloadbalancing",
		       "ELASTIC_LOAD_BALANCING_V2", AWS_PROTO_QUERY, "2015-12-01", NULL, NULL,
		       "Elastic Load Balancing v2 (NLB/ALB)"},
    [AWS_SVC_AUTOSCALING] = {AWS_SVC_AUTOSCALING, "autoscaling", "autoscaling", "autoscaling",
			     "AUTO_SCALING", AWS_PROTO_QUERY, "2011-01-01", NULL, NULL,
			     "EC2 Auto Scaling"},
    [AWS_SVC_STS] = {AWS_SVC_STS, "sts", "sts", "sts", "STS", AWS_PROTO_QUERY, "2011-06-15", NULL,
		     NULL, "AWS Security Token Service"},
    [AWS_SVC_SQS] = {AWS_SVC_SQS, "sqs", "sqs", "sqs", "SQS", AWS_PROTO_JSON, "2012-11-05",
		     "AmazonSQS", "application/x-amz-json-1.0", "Amazon SQS"},
    [AWS_SVC_EVENTS] = {AWS_SVC_EVENTS, "events", "events", "events", "EVENTBRIDGE", AWS_PROTO_JSON,
			"2015-10-07", "AWSEvents", "application/x-amz-json-1.1",
			"Amazon EventBridge"},
    [AWS_SVC_EBS] = {AWS_SVC_EBS, "ebs", "ebs", "ebs", "EBS", AWS_PROTO_REST, "2019-11-02", NULL,
		     NULL, "EBS direct APIs"},
    [AWS_SVC_SECRETSMANAGER] = {AWS_SVC_SECRETSMANAGER, "secretsmanager", "secretsmanager",
				"secretsmanager", "SECRETS_MANAGER", AWS_PROTO_JSON, "2017-10-17",
				"secretsmanager", "application/x-amz-json-1.1",
				"AWS Secrets Manager"},
};

const struct aws_service_info *aws_service_info(enum aws_service s)
{
	if ((int)s < 0 || s >= AWS_SVC__MAX)
		return NULL;
	return &services[s];
}

const struct aws_service_info *aws_service_by_name(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < AWS_SVC__MAX; i++)
		if (strcasecmp(services[i].name, name) == 0)
			return &services[i];
	if (strcasecmp(name, "elasticloadbalancing") == 0)
		return &services[AWS_SVC_ELB];
	if (strcasecmp(name, "elasticloadbalancingv2") == 0)
		return &services[AWS_SVC_ELBV2];
	if (strcasecmp(name, "eventbridge") == 0)
		return &services[AWS_SVC_EVENTS];
	return NULL;
}

/* A SigV4 signing region given in an override: any credential-scope label (a custom endpoint
 * may sign with a name that is not an AWS region): lower-case letters, digits and inner
 * dashes, 1-32 characters. Regions themselves are checked with aws_region_valid (ids.h). */
static bool signing_region_valid(const char *region)
{
	size_t l = strnlen(region, AWS_REGION_MAX + 1);

	if (l == 0 || l > AWS_REGION_MAX || region[0] == '-' || region[l - 1] == '-')
		return false;
	for (size_t i = 0; i < l; i++)
		if (!((region[i] >= 'a' && region[i] <= 'z') ||
		      (region[i] >= '0' && region[i] <= '9') || region[i] == '-'))
			return false;
	return true;
}

const char *aws_partition(const char *region)
{
	if (!region)
		return "aws";
	if (str_has_prefix(region, "cn-"))
		return "aws-cn";
	if (str_has_prefix(region, "us-gov-"))
		return "aws-us-gov";
	if (str_has_prefix(region, "us-isob-"))
		return "aws-iso-b";
	if (str_has_prefix(region, "us-iso-"))
		return "aws-iso";
	return "aws";
}

const char *aws_partition_dns_suffix(const char *region)
{
	const char *p = aws_partition(region);

	if (strcmp(p, "aws-cn") == 0)
		return "amazonaws.com.cn";
	if (strcmp(p, "aws-iso") == 0)
		return "c2s.ic.gov";
	if (strcmp(p, "aws-iso-b") == 0)
		return "sc2s.sgov.gov";
	return "amazonaws.com";
}

void aws_endpoints_init(struct aws_endpoints *e)
{
	memset(e, 0, sizeof(*e));
}

void aws_endpoints_release(struct aws_endpoints *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < AWS_SVC__MAX; i++) {
		free(e->over[i].url);
		free(e->over[i].signing_region);
		free(e->over[i].signing_name);
	}
	free(e->all_url);
	aws_endpoints_init(e);
}

static int dup_opt(char **dst, const char *src)
{
	char *c = NULL;

	if (src && *src && !(c = strdup(src)))
		return -ENOMEM;
	free(*dst);
	*dst = c;
	return 0;
}

static bool url_ok(const char *u)
{
	return u && (str_has_prefix(u, "http://") || str_has_prefix(u, "https://")) &&
	       strlen(u) > 8 && strlen(u) < 500 && !strpbrk(u, " \t\r\n");
}

int aws_endpoints_set_override(struct aws_endpoints *e, enum aws_service s, const char *url,
			       const char *signing_region, const char *signing_name)
{
	int r;

	if (!e || (int)s < 0 || s >= AWS_SVC__MAX || (url && *url && !url_ok(url)) ||
	    (signing_region && *signing_region && !signing_region_valid(signing_region)))
		return -EINVAL;
	if ((r = dup_opt(&e->over[s].url, url)) < 0 ||
	    (r = dup_opt(&e->over[s].signing_region, signing_region)) < 0 ||
	    (r = dup_opt(&e->over[s].signing_name, signing_name)) < 0)
		return r;
	return 0;
}

int aws_endpoints_set_all(struct aws_endpoints *e, const char *url)
{
	if (!e || (url && *url && !url_ok(url)))
		return -EINVAL;
	return dup_opt(&e->all_url, url);
}

int aws_setting_parse(const char *v, enum aws_setting *ret)
{
	if (!v || !*v)
		*ret = AWS_SETTING_UNSET;
	else if (strcasecmp(v, "true") == 0)
		*ret = AWS_SETTING_TRUE;
	else if (strcasecmp(v, "false") == 0)
		*ret = AWS_SETTING_FALSE;
	else
		return -EINVAL;
	return 0;
}

static int profile_setting(const char *profile, const char *key, enum aws_setting *ret)
{
	_cleanup_free_ char *v = NULL;
	int r = aws_profile_get(profile, key, &v);

	if (r == -ENOENT) {
		*ret = AWS_SETTING_UNSET;
		return 0;
	}
	return r < 0 ? r : aws_setting_parse(v, ret);
}

int aws_endpoints_load_profile(struct aws_endpoints *e, const char *profile)
{
	enum aws_setting fips, dualstack;
	int r;

	if ((r = profile_setting(profile, "use_fips_endpoint", &fips)) < 0 ||
	    (r = profile_setting(profile, "use_dualstack_endpoint", &dualstack)) < 0)
		return r;
	e->use_fips = fips;
	e->use_dualstack = dualstack;
	return 0;
}

/* The environment variable, else the shared config's setting, else false. */
static int variant_on(const char *env, enum aws_setting config, bool *ret)
{
	enum aws_setting s;
	int r = aws_setting_parse(getenv(env), &s);

	if (r < 0)
		return r;
	if (s == AWS_SETTING_UNSET)
		s = config;
	*ret = s == AWS_SETTING_TRUE;
	return 0;
}

/* GovCloud's standard host names that are FIPS endpoints already. */
static bool gov_standard_is_fips(enum aws_service s)
{
	return s != AWS_SVC_EBS;
}

/* The standard endpoint or its FIPS / dual-stack variant (see endpoints.h). */
static int standard_url(const struct aws_service_info *si, const char *region, bool fips,
			bool dualstack, char *out, size_t n)
{
	const char *part = aws_partition(region), *suffix = aws_partition_dns_suffix(region);

	if (dualstack) {
		if (str_has_prefix(part, "aws-iso"))
			return -EOPNOTSUPP;
		suffix = strcmp(part, "aws-cn") == 0 ? "api.amazonwebservices.com.cn" : "api.aws";
	} else if (fips && strcmp(part, "aws-us-gov") == 0 && gov_standard_is_fips(si->id)) {
		fips = false;
	}
	return str_printf(out, n, "https://%s%s.%s.%s", si->endpoint_prefix, fips ? "-fips" : "",
			  region, suffix);
}

static int set_url(struct aws_endpoint *ret, const char *url)
{
	size_t l;
	int r;

	if (!url_ok(url))
		return -EINVAL;
	if ((r = str_copy(ret->url, sizeof(ret->url), url)) < 0)
		return r;
	l = strlen(ret->url);
	while (l > 0 && ret->url[l - 1] == '/')
		ret->url[--l] = 0;
	ret->custom = true;
	return 0;
}

int aws_endpoint_resolve(const struct aws_endpoints *e, enum aws_service s, const char *region,
			 struct aws_endpoint *ret)
{
	const struct aws_service_info *si = aws_service_info(s);
	struct aws_endpoint ep = {0};
	const struct aws_endpoint_override *o = e ? &e->over[s] : NULL;
	const char *ignore = getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
	bool use_env = !(ignore && strcasecmp(ignore, "true") == 0);
	char envname[96];
	const char *v;
	bool fips, dualstack;
	int r;

	if (!si || !region || !aws_region_valid(region))
		return -EINVAL;
	if ((r = variant_on("AWS_USE_FIPS_ENDPOINT", e ? e->use_fips : AWS_SETTING_UNSET,
			    &fips)) < 0 ||
	    (r = variant_on("AWS_USE_DUALSTACK_ENDPOINT", e ? e->use_dualstack : AWS_SETTING_UNSET,
			    &dualstack)) < 0)
		return r;
	if ((r = str_copy(ep.signing_region, sizeof(ep.signing_region), region)) < 0 ||
	    (r = str_copy(ep.signing_name, sizeof(ep.signing_name), si->signing_name)) < 0)
		return r;
	str_printf(envname, sizeof(envname), "AWS_ENDPOINT_URL_%s", si->env_name);
	if (o && o->url)
		r = set_url(&ep, o->url);
	else if (e && e->all_url)
		r = set_url(&ep, e->all_url);
	else if (use_env && (v = getenv(envname)) && *v)
		r = set_url(&ep, v);
	else if (use_env && (v = getenv("AWS_ENDPOINT_URL")) && *v)
		r = set_url(&ep, v);
	else
		r = standard_url(si, region, fips, dualstack, ep.url, sizeof(ep.url));
	if (r < 0)
		return r;
	if (o && o->signing_region &&
	    (r = str_copy(ep.signing_region, sizeof(ep.signing_region), o->signing_region)) < 0)
		return r;
	if (o && o->signing_name &&
	    (r = str_copy(ep.signing_name, sizeof(ep.signing_name), o->signing_name)) < 0)
		return r;
	*ret = ep;
	return 0;
}
