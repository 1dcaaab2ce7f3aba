/* The discoverer's AWS calls (disc_internal.h). Each returns 0 or -errno and logs its failure
 * once, naming the call and AWS's error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/xml.h"
#include "common/base/log.h"
#include "modules/discoverer/disc_internal.h"

static int call_failed(const char *action, int r, const struct aws_error *e)
{
	char buf[800];
	log_error("AWS call failed", KV_S("action", action), KV_S("error", aws_error_str(e, buf, sizeof(buf))),
		  KV_E(r));
	return r;
}

/* The cluster tag filter every discovery call uses. */
static int cluster_filter(struct disc *d, struct aws_query *q)
{
	char key[200];
	int w = snprintf(key, sizeof(key), "kubernetes.io/cluster/%s", d->cfg.cluster_uuid);
	if (w < 0 || (size_t)w >= sizeof(key))
		return -ENAMETOOLONG;
	return aws_query_add_filter(q, "tag-key", (const char *const[]){ key }, 1);
}

/* A DryRun call: 0 allowed, 1 a condition, < 0 the call could not tell (throttled, 5xx,
 * transport: retried next period, never a condition). */
static int dry_run(struct disc *d, const char *action, const char *attr, bool unsupported_ok)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	struct aws_error e;
	char buf[800];
	int r;

	if ((r = aws_query_add(&q, "DryRun", "true")) < 0 ||
	    (attr && (r = aws_query_add(&q, "Attribute", attr)) < 0)) {
		aws_query_release(&q);
		return r;
	}
	aws_error_clear(&e);
	r = aws_call_query(d->aws, AWS_SVC_EC2, action, &q, &rep, &e);
	aws_query_release(&q);
	aws_reply_release(&rep);
	if (r == -EALREADY || (r < 0 && aws_error_is(&e, "DryRunOperation")))
		return 0;
	if (r < 0 && unsupported_ok && aws_error_is(&e, "UnsupportedOperation"))
		return 0;
	if (r < 0 && e.http_status >= 400 && e.http_status < 500 && *e.code &&
	    !aws_error_retryable(&e)) {
		log_info("permission condition", KV_S("action", action),
			 KV_S("error", aws_error_str(&e, buf, sizeof(buf))));
		return 1;
	}
	if (r == 0) { /* a DryRun call that succeeded: the API ignored DryRun; it is allowed */
		return 0;
	}
	return call_failed(action, r, &e);
}

int disc_conditions(struct disc *d, struct disc_condition *ret, size_t *ret_n)
{
	static const struct {
		const char *action, *attr;
		bool unsupported_ok;
	} calls[] = {
		{ "DescribeAddressesAttribute", "domain-name", false },
		{ "DescribeInstanceTopology", NULL, true },
	};
	size_t n = 0;

	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		int r = dry_run(d, calls[i].action, calls[i].attr, calls[i].unsupported_ok);
		if (r < 0)
			return r;
		if (r == 1)
			snprintf(ret[n++].api, sizeof(ret[0].api), "%s", calls[i].action);
	}
	*ret_n = n;
	return 0;
}

struct itypes {
	struct disc_itype *t;
	size_t n;
};

static int itypes_page(void *ud, const struct aws_reply *page)
{
	struct itypes *it = ud;
	for (xmlNode *x = aws_xml_list(page->result, "instanceTypeSet"); x; x = aws_xml_next(x)) {
		const char *name = aws_xml_text(x, "instanceType");
		long long cpu, mem;
		if (!name || !*name || strlen(name) >= sizeof(it->t[0].name) ||
		    aws_xml_int(x, "vCpuInfo/defaultVCpus", &cpu) < 0 ||
		    aws_xml_int(x, "memoryInfo/sizeInMiB", &mem) < 0) {
			log_error("DescribeInstanceTypes: an item without instanceType, "
				  "vCpuInfo.defaultVCpus or memoryInfo.sizeInMiB",
				  KV_S("instanceType", name ? name : ""));
			return -EBADMSG;
		}
		if (it->n == DISC_MAX_TYPES)
			return -E2BIG;
		struct disc_itype *e = &it->t[it->n++];
		snprintf(e->name, sizeof(e->name), "%s", name);
		e->vcpus = cpu;
		e->mem_mib = mem;
	}
	return 0;
}

int disc_instance_types(struct disc *d, struct disc_itype **ret, size_t *ret_n)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct itypes it = { .t = calloc(DISC_MAX_TYPES, sizeof(struct disc_itype)) };
	struct aws_error e;
	int r;

	if (!it.t)
		return -ENOMEM;
	aws_error_clear(&e);
	if ((r = aws_query_add(&q, "MaxResults", "100")) == 0)
		r = aws_paginate_query(d->aws, AWS_SVC_EC2, "DescribeInstanceTypes", &q,
				       &(struct aws_paginate){ .token_param = "NextToken",
							       .reply_field = "nextToken",
							       .on_page = itypes_page,
							       .ud = &it },
				       &e);
	aws_query_release(&q);
	if (r < 0) {
		free(it.t);
		return call_failed("DescribeInstanceTypes", r, &e);
	}
	*ret = it.t;
	*ret_n = it.n;
	return 0;
}

int disc_subnets(struct disc *d, struct disc_subnet **ret, size_t *ret_n)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	struct aws_error e;
	int r;

	aws_error_clear(&e);
	if ((r = cluster_filter(d, &q)) == 0)
		r = aws_call_query(d->aws, AWS_SVC_EC2, "DescribeSubnets", &q, &rep, &e);
	aws_query_release(&q);
	if (r < 0)
		return call_failed("DescribeSubnets", r, &e);
	size_t cap = aws_xml_count(rep.result, "subnetSet"), n = 0;
	struct disc_subnet *s = calloc(cap ? cap : 1, sizeof(*s));
	if (!s) {
		aws_reply_release(&rep);
		return -ENOMEM;
	}
	for (xmlNode *x = aws_xml_list(rep.result, "subnetSet"); x && n < cap; x = aws_xml_next(x)) {
		const char *id = aws_xml_text(x, "subnetId"), *az = aws_xml_text(x, "availabilityZone"),
			   *vpc = aws_xml_text(x, "vpcId");
		if (!id || !az || !vpc || strlen(id) >= sizeof(s->id) || strlen(az) >= sizeof(s->zone) ||
		    strlen(vpc) >= sizeof(s->vpc)) {
			log_error("DescribeSubnets: an item without subnetId, availabilityZone or vpcId");
			free(s);
			aws_reply_release(&rep);
			return -EBADMSG;
		}
		snprintf(s[n].id, sizeof(s[n].id), "%s", id);
		snprintf(s[n].zone, sizeof(s[n].zone), "%s", az);
		snprintf(s[n].vpc, sizeof(s[n].vpc), "%s", vpc);
		for (xmlNode *t = aws_xml_list(x, "tagSet"); t; t = aws_xml_next(t)) {
			const char *k = aws_xml_text(t, "key");
			if (k && strcmp(k, "kubernetes.io/role/elb") == 0)
				s[n].role = 1;
			else if (k && strcmp(k, "kubernetes.io/role/internal-elb") == 0)
				s[n].role = 2;
		}
		n++;
	}
	aws_reply_release(&rep);
	*ret = s;
	*ret_n = n;
	return 0;
}

int disc_groups(struct disc *d, const char *vpc, struct disc_sgs *ret)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	struct aws_error e;
	char names[3][160];
	static const char *const sfx[] = { "node", "ssh-accessible", "loadbalancer" };
	char *dst[] = { ret->node, ret->ssh, ret->lb };
	int r;

	memset(ret, 0, sizeof(*ret));
	for (size_t i = 0; i < 3; i++)
		snprintf(names[i], sizeof(names[i]), "%s-%s", d->cfg.prefix, sfx[i]);
	aws_error_clear(&e);
	if ((r = aws_query_add_filter(&q, "vpc-id", (const char *const[]){ vpc }, 1)) == 0 &&
	    (r = aws_query_add_filter(&q, "group-name",
				      (const char *const[]){ names[0], names[1], names[2] }, 3)) == 0)
		r = aws_call_query(d->aws, AWS_SVC_EC2, "DescribeSecurityGroups", &q, &rep, &e);
	aws_query_release(&q);
	if (r < 0)
		return call_failed("DescribeSecurityGroups", r, &e);
	for (xmlNode *x = aws_xml_list(rep.result, "securityGroupInfo"); x; x = aws_xml_next(x)) {
		const char *id = aws_xml_text(x, "groupId"), *name = aws_xml_text(x, "groupName");
		for (size_t i = 0; id && name && i < 3; i++)
			if (strcmp(name, names[i]) == 0 && strlen(id) < sizeof(ret->node))
				snprintf(dst[i], sizeof(ret->node), "%s", id);
	}
	aws_reply_release(&rep);
	return 0;
}

struct vols {
	struct ec2_volume *v;
	size_t n;
};

static int vols_page(void *ud, const struct aws_reply *page)
{
	struct vols *vs = ud;
	struct ec2_volume *v;
	size_t n;
	int r = ec2_volumes_parse(page->result, true, &v, &n);
	if (r < 0)
		return r;
	if (vs->n + n > DISC_MAX_VOLUMES) {
		ec2_volumes_free(v, n);
		return -E2BIG;
	}
	struct ec2_volume *g = realloc(vs->v, (vs->n + n + 1) * sizeof(*g));
	if (!g) {
		ec2_volumes_free(v, n);
		return -ENOMEM;
	}
	memcpy(g + vs->n, v, n * sizeof(*v));
	free(v); /* the items moved into g */
	vs->v = g;
	vs->n += n;
	return 0;
}

int disc_volumes(struct disc *d, struct ec2_volume **ret, size_t *ret_n)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct vols vs = { 0 };
	struct aws_error e;
	int r;

	aws_error_clear(&e);
	if ((r = aws_query_add_filter(&q, "tag:ebs.csi.aws.com/cluster",
				      (const char *const[]){ "true" }, 1)) == 0 &&
	    (r = cluster_filter(d, &q)) == 0 && (r = aws_query_add(&q, "MaxResults", "500")) == 0)
		r = aws_paginate_query(d->aws, AWS_SVC_EC2, "DescribeVolumes", &q,
				       &(struct aws_paginate){ .token_param = "NextToken",
							       .reply_field = "nextToken",
							       .on_page = vols_page,
							       .ud = &vs },
				       &e);
	aws_query_release(&q);
	if (r < 0) {
		ec2_volumes_free(vs.v, vs.n);
		return call_failed("DescribeVolumes", r, &e);
	}
	*ret = vs.v;
	*ret_n = vs.n;
	return 0;
}

static bool ends_with_profile(const char *arn, const char *profile)
{
	size_t la = strlen(arn), lp = strlen(profile);
	return la > lp && arn[la - lp - 1] == '/' && strcmp(arn + la - lp, profile) == 0;
}

struct imds_count {
	const char *profile;
	long long n;
};

static int imds_page(void *ud, const struct aws_reply *page)
{
	struct imds_count *c = ud;
	for (xmlNode *rs = aws_xml_list(page->result, "reservationSet"); rs; rs = aws_xml_next(rs))
		for (xmlNode *i = aws_xml_list(rs, "instancesSet"); i; i = aws_xml_next(i)) {
			const char *arn = aws_xml_text(i, "iamInstanceProfile/arn");
			const char *tokens = aws_xml_text(i, "metadataOptions/httpTokens");
			if (arn && tokens && strcmp(tokens, "optional") == 0 &&
			    ends_with_profile(arn, c->profile))
				c->n++;
		}
	return 0;
}

int disc_imdsv1(struct disc *d, long long *ret)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct imds_count c = { .profile = d->cfg.node_profile };
	struct aws_error e;
	static const char *const states[] = { "pending", "running", "stopping", "stopped" };
	int r;

	aws_error_clear(&e);
	if ((r = cluster_filter(d, &q)) == 0 &&
	    (r = aws_query_add_filter(&q, "instance-state-name", states, 4)) == 0 &&
	    (r = aws_query_add(&q, "MaxResults", "1000")) == 0)
		r = aws_paginate_query(d->aws, AWS_SVC_EC2, "DescribeInstances", &q,
				       &(struct aws_paginate){ .token_param = "NextToken",
							       .reply_field = "nextToken",
							       .on_page = imds_page,
							       .ud = &c },
				       &e);
	aws_query_release(&q);
	if (r < 0)
		return call_failed("DescribeInstances", r, &e);
	*ret = c.n;
	return 0;
}
