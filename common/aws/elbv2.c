/* Elastic Load Balancing v2 for network load balancers (see elbv2.h). */
#include "common/aws/elbv2.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/query.h"
#include "common/aws/xml.h"
#include "common/base/buf.h"

/* One call whose reply is not read; q released. */
static int call(struct aws_client *c, const char *action, struct aws_query *q,
		struct aws_error *err)
{
	struct aws_reply rep = {0};
	int r = aws_call_query(c, AWS_SVC_ELBV2, action, q, &rep, err);
	aws_reply_release(&rep);
	aws_query_release(q);
	return r;
}

static void text(const xmlNode *n, const char *path, char *dst, size_t len)
{
	const char *t = aws_xml_text(n, path);
	str_copy(dst, len, t ? t : "");
}

static void lb_parse(const xmlNode *m, struct elbv2_lb *lb)
{
	*lb = (struct elbv2_lb){0};
	text(m, "LoadBalancerArn", lb->arn, sizeof(lb->arn));
	text(m, "LoadBalancerName", lb->name, sizeof(lb->name));
	text(m, "DNSName", lb->dns, sizeof(lb->dns));
	text(m, "Scheme", lb->scheme, sizeof(lb->scheme));
	text(m, "Type", lb->type, sizeof(lb->type));
	text(m, "State/Code", lb->state, sizeof(lb->state));
	text(m, "VpcId", lb->vpc, sizeof(lb->vpc));
	for (xmlNode *z = aws_xml_list(m, "AvailabilityZones"); z && lb->n_subnets < 16;
	     z = aws_xml_next(z)) {
		size_t i = lb->n_subnets++;
		xmlNode *a = aws_xml_list(z, "LoadBalancerAddresses");
		text(z, "SubnetId", lb->subnets[i], sizeof(lb->subnets[i]));
		text(z, "ZoneName", lb->zones[i], sizeof(lb->zones[i]));
		if (a) {
			text(a, "AllocationId", lb->allocations[i], sizeof(lb->allocations[i]));
			text(a, "PrivateIPv4Address", lb->private_ips[i], sizeof(lb->private_ips[i]));
		}
	}
	for (xmlNode *g = aws_xml_list(m, "SecurityGroups"); g && lb->n_sgs < 16;
	     g = aws_xml_next(g))
		str_copy(lb->sgs[lb->n_sgs++], sizeof(lb->sgs[0]), aws_xml_text(g, NULL) ?: "");
}

int elbv2_lb_describe(struct aws_client *c, const char *name, struct elbv2_lb *ret,
		      struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if ((r = aws_query_add(&q, "Names.member.1", name)) == 0 &&
	    (r = aws_call_query(c, AWS_SVC_ELBV2, "DescribeLoadBalancers", &q, &rep, err)) == 0) {
		xmlNode *m = aws_xml_list(rep.result, "LoadBalancers");
		if (m)
			lb_parse(m, ret);
		r = m ? 0 : -ENOENT;
	}
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static int add_kv(struct aws_query *q, const char *prefix, const struct elbv2_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r;
		if ((r = aws_query_addf(q, kv[i].key, "%s.member.%zu.Key", prefix, i + 1)) < 0 ||
		    (r = aws_query_addf(q, kv[i].value ? kv[i].value : "", "%s.member.%zu.Value",
					prefix, i + 1)) < 0)
			return r;
	}
	return 0;
}

static int add_mappings(struct aws_query *q, const struct elbv2_subnet_mapping *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r;
		if ((r = aws_query_addf(q, m[i].subnet, "SubnetMappings.member.%zu.SubnetId",
					i + 1)) < 0 ||
		    (m[i].allocation && *m[i].allocation &&
		     (r = aws_query_addf(q, m[i].allocation,
					 "SubnetMappings.member.%zu.AllocationId", i + 1)) < 0) ||
		    (m[i].private_ip && *m[i].private_ip &&
		     (r = aws_query_addf(q, m[i].private_ip,
					 "SubnetMappings.member.%zu.PrivateIPv4Address", i + 1)) < 0))
			return r;
	}
	return 0;
}

int elbv2_lb_set_subnets(struct aws_client *c, const char *arn,
			 const struct elbv2_subnet_mapping *m, size_t n_m, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r;
	if ((r = aws_query_add(&q, "LoadBalancerArn", arn)) < 0 ||
	    (r = add_mappings(&q, m, n_m)) < 0) {
		aws_query_release(&q);
		return r;
	}
	return call(c, "SetSubnets", &q, err);
}

static int add_sgs(struct aws_query *q, const char (*sgs)[32], size_t n)
{
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++)
		r = aws_query_addf(q, sgs[i], "SecurityGroups.member.%zu", i + 1);
	return r;
}

int elbv2_lb_set_sgs(struct aws_client *c, const char *arn, const char (*sgs)[32], size_t n,
		     struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r;
	if ((r = aws_query_add(&q, "LoadBalancerArn", arn)) < 0 || (r = add_sgs(&q, sgs, n)) < 0) {
		aws_query_release(&q);
		return r;
	}
	return call(c, "SetSecurityGroups", &q, err);
}

int elbv2_lb_create(struct aws_client *c, const char *name, bool internal,
		    const struct elbv2_subnet_mapping *m, size_t n_m, const char (*sgs)[32],
		    size_t n_sgs, const struct elbv2_kv *tags, size_t n_tags, struct elbv2_lb *ret,
		    struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if ((r = aws_query_add(&q, "Name", name)) < 0 ||
	    (r = aws_query_add(&q, "Type", "network")) < 0 ||
	    (r = aws_query_add(&q, "Scheme", internal ? "internal" : "internet-facing")) < 0 ||
	    (r = add_kv(&q, "Tags", tags, n_tags)) < 0)
		goto out;
	if ((r = add_mappings(&q, m, n_m)) < 0 || (r = add_sgs(&q, sgs, n_sgs)) < 0)
		goto out;
	if ((r = aws_call_query(c, AWS_SVC_ELBV2, "CreateLoadBalancer", &q, &rep, err)) == 0) {
		xmlNode *lb = aws_xml_list(rep.result, "LoadBalancers");
		if (lb)
			lb_parse(lb, ret);
		r = lb && ret->arn[0] ? 0 : -EBADMSG;
	}
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

/* One parameter ARN, one call. */
static int by_arn(struct aws_client *c, const char *action, const char *param, const char *arn,
		  struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r = aws_query_add(&q, param, arn);
	if (r < 0) {
		aws_query_release(&q);
		return r;
	}
	return call(c, action, &q, err);
}

int elbv2_lb_delete(struct aws_client *c, const char *arn, struct aws_error *err)
{
	int r = by_arn(c, "DeleteLoadBalancer", "LoadBalancerArn", arn, err);
	return r == -ENOENT ? 0 : r;
}

static int attributes(struct aws_client *c, const char *action, const char *param,
		      const char *arn, const struct elbv2_kv *kv, size_t n, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r;
	if (n == 0)
		return 0;
	if ((r = aws_query_add(&q, param, arn)) < 0 || (r = add_kv(&q, "Attributes", kv, n)) < 0) {
		aws_query_release(&q);
		return r;
	}
	return call(c, action, &q, err);
}

int elbv2_lb_attributes(struct aws_client *c, const char *arn, const struct elbv2_kv *kv,
			size_t n, struct aws_error *err)
{
	return attributes(c, "ModifyLoadBalancerAttributes", "LoadBalancerArn", arn, kv, n, err);
}

int elbv2_tg_attributes(struct aws_client *c, const char *arn, const struct elbv2_kv *kv,
			size_t n, struct aws_error *err)
{
	return attributes(c, "ModifyTargetGroupAttributes", "TargetGroupArn", arn, kv, n, err);
}

int elbv2_attributes_describe(struct aws_client *c, bool tg, const char *arn,
			      struct elbv2_attr *ret, size_t max, size_t *n, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	*n = 0;
	if ((r = aws_query_add(&q, tg ? "TargetGroupArn" : "LoadBalancerArn", arn)) == 0 &&
	    (r = aws_call_query(c, AWS_SVC_ELBV2,
				tg ? "DescribeTargetGroupAttributes"
				   : "DescribeLoadBalancerAttributes",
				&q, &rep, err)) == 0)
		for (xmlNode *a = aws_xml_list(rep.result, "Attributes"); a && *n < max;
		     a = aws_xml_next(a)) {
			text(a, "Key", ret[*n].key, sizeof(ret[*n].key));
			text(a, "Value", ret[*n].value, sizeof(ret[*n].value));
			(*n)++;
		}
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int elbv2_add_tags(struct aws_client *c, const char *arn, const struct elbv2_kv *tags, size_t n,
		   struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r;
	if (n == 0)
		return 0;
	if ((r = aws_query_add(&q, "ResourceArns.member.1", arn)) < 0 ||
	    (r = add_kv(&q, "Tags", tags, n)) < 0) {
		aws_query_release(&q);
		return r;
	}
	return call(c, "AddTags", &q, err);
}

static int tags_query(struct aws_query *q, bool classic, const char *id)
{
	return aws_query_add(q, classic ? "LoadBalancerNames.member.1" : "ResourceArns.member.1",
			     id);
}

int elbv2_tags_describe(struct aws_client *c, bool classic, const char *id,
			struct elbv2_tag *ret, size_t max, size_t *n, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	*n = 0;
	if ((r = tags_query(&q, classic, id)) == 0)
		r = aws_call_query(c, classic ? AWS_SVC_ELB : AWS_SVC_ELBV2, "DescribeTags", &q,
				   &rep, err);
	if (r == 0)
		for (xmlNode *d = aws_xml_list(rep.result, "TagDescriptions"); d; d = aws_xml_next(d))
			for (xmlNode *t = aws_xml_list(d, "Tags"); t && *n < max;
			     t = aws_xml_next(t)) {
				text(t, "Key", ret[*n].key, sizeof(ret[*n].key));
				text(t, "Value", ret[*n].value, sizeof(ret[*n].value));
				(*n)++;
			}
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static int tags_call(struct aws_client *c, bool classic, const char *action,
		     struct aws_query *q, struct aws_error *err)
{
	struct aws_reply rep = {0};
	int r = aws_call_query(c, classic ? AWS_SVC_ELB : AWS_SVC_ELBV2, action, q, &rep, err);
	aws_reply_release(&rep);
	aws_query_release(q);
	return r;
}

int elbv2_tags_add(struct aws_client *c, bool classic, const char *id,
		   const struct elbv2_kv *tags, size_t n, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r;
	if (n == 0)
		return 0;
	if ((r = tags_query(&q, classic, id)) < 0 || (r = add_kv(&q, "Tags", tags, n)) < 0) {
		aws_query_release(&q);
		return r;
	}
	return tags_call(c, classic, "AddTags", &q, err);
}

int elbv2_tags_remove(struct aws_client *c, bool classic, const char *id,
		      const char *const *keys, size_t n, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r;
	if (n == 0)
		return 0;
	r = tags_query(&q, classic, id);
	for (size_t i = 0; i < n && r == 0; i++)
		r = classic ? aws_query_addf(&q, keys[i], "Tags.member.%zu.Key", i + 1)
			    : aws_query_addf(&q, keys[i], "TagKeys.member.%zu", i + 1);
	if (r < 0) {
		aws_query_release(&q);
		return r;
	}
	return tags_call(c, classic, "RemoveTags", &q, err);
}

/* A zeroed table for the members of list in result (at most ELBV2_MAX_ITEMS, *count). */
static void *items(const xmlNode *result, const char *list, size_t size, size_t *count)
{
	*count = aws_xml_count(result, list);
	if (*count > ELBV2_MAX_ITEMS)
		*count = ELBV2_MAX_ITEMS;
	return calloc(*count + 1, size);
}

/* Listeners ------------------------------------------------------------------------------ */

int elbv2_listeners_describe(struct aws_client *c, const char *lb_arn,
			     struct elbv2_listener **ret, size_t *n, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct elbv2_listener *out = NULL;
	int r;

	*n = 0;
	if ((r = aws_query_add(&q, "LoadBalancerArn", lb_arn)) < 0 ||
	    (r = aws_call_query(c, AWS_SVC_ELBV2, "DescribeListeners", &q, &rep, err)) < 0)
		goto out;
	size_t count;
	if (!(out = items(rep.result, "Listeners", sizeof(*out), &count))) {
		r = -ENOMEM;
		goto out;
	}
	for (xmlNode *m = aws_xml_list(rep.result, "Listeners"); m && *n < count;
	     m = aws_xml_next(m)) {
		struct elbv2_listener *l = &out[(*n)++];
		long long port = 0;
		text(m, "ListenerArn", l->arn, sizeof(l->arn));
		aws_xml_int(m, "Port", &port);
		l->port = (int)port;
		text(m, "Protocol", l->protocol, sizeof(l->protocol));
		text(m, "SslPolicy", l->ssl_policy, sizeof(l->ssl_policy));
		xmlNode *a = aws_xml_list(m, "DefaultActions");
		if (a)
			text(a, "TargetGroupArn", l->tg_arn, sizeof(l->tg_arn));
		xmlNode *cert = aws_xml_list(m, "Certificates");
		if (cert)
			text(cert, "CertificateArn", l->cert, sizeof(l->cert));
	}
	*ret = out;
	out = NULL;
out:
	free(out);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int elbv2_listener_put(struct aws_client *c, const char *lb_arn, struct elbv2_listener *l,
		       const struct elbv2_listener *have, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if (have) {
		if ((r = aws_query_add(&q, "ListenerArn", have->arn)) < 0 ||
		    (strcmp(have->protocol, l->protocol) != 0 &&
		     (r = aws_query_add(&q, "Protocol", l->protocol)) < 0))
			goto out;
	} else if ((r = aws_query_add(&q, "LoadBalancerArn", lb_arn)) < 0 ||
		   (r = aws_query_add(&q, "Protocol", l->protocol)) < 0 ||
		   (r = aws_query_add_int(&q, "Port", l->port)) < 0) {
		goto out;
	}
	if ((r = aws_query_add(&q, "DefaultActions.member.1.Type", "forward")) < 0 ||
	    (r = aws_query_add(&q, "DefaultActions.member.1.TargetGroupArn", l->tg_arn)) < 0 ||
	    (l->cert[0] && (!have || strcmp(have->cert, l->cert) != 0) &&
	     (r = aws_query_add(&q, "Certificates.member.1.CertificateArn", l->cert)) < 0) ||
	    (l->ssl_policy[0] && (!have || strcmp(have->ssl_policy, l->ssl_policy) != 0) &&
	     (r = aws_query_add(&q, "SslPolicy", l->ssl_policy)) < 0))
		goto out;
	r = aws_call_query(c, AWS_SVC_ELBV2, have ? "ModifyListener" : "CreateListener", &q, &rep,
			   err);
	if (r == 0 && have) {
		str_copy(l->arn, sizeof(l->arn), have->arn);
	} else if (r == 0) {
		xmlNode *m = aws_xml_list(rep.result, "Listeners");
		if (m)
			text(m, "ListenerArn", l->arn, sizeof(l->arn));
		r = l->arn[0] ? 0 : -EBADMSG;
	}
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int elbv2_listener_delete(struct aws_client *c, const char *arn, struct aws_error *err)
{
	int r = by_arn(c, "DeleteListener", "ListenerArn", arn, err);
	return r == -ENOENT ? 0 : r;
}

/* Target groups -------------------------------------------------------------------------- */

static void tg_parse(const xmlNode *m, struct elbv2_tg *t)
{
	long long v = 0;
	*t = (struct elbv2_tg){0};
	text(m, "TargetGroupArn", t->arn, sizeof(t->arn));
	text(m, "TargetGroupName", t->name, sizeof(t->name));
	text(m, "Protocol", t->protocol, sizeof(t->protocol));
	text(m, "TargetType", t->target_type, sizeof(t->target_type));
	text(m, "VpcId", t->vpc, sizeof(t->vpc));
	if (aws_xml_int(m, "Port", &v) == 0)
		t->port = (int)v;
	text(m, "HealthCheckProtocol", t->hc.protocol, sizeof(t->hc.protocol));
	text(m, "HealthCheckPort", t->hc.port, sizeof(t->hc.port));
	text(m, "HealthCheckPath", t->hc.path, sizeof(t->hc.path));
	aws_xml_int(m, "HealthCheckIntervalSeconds", &t->hc.interval);
	aws_xml_int(m, "HealthCheckTimeoutSeconds", &t->hc.timeout);
	aws_xml_int(m, "HealthyThresholdCount", &t->hc.healthy);
	aws_xml_int(m, "UnhealthyThresholdCount", &t->hc.unhealthy);
}

int elbv2_tgs_describe(struct aws_client *c, const char *lb_arn, const char *name,
		       struct elbv2_tg **ret, size_t *n, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct elbv2_tg *out = NULL;
	int r;

	*n = 0;
	if ((r = lb_arn ? aws_query_add(&q, "LoadBalancerArn", lb_arn)
			: aws_query_add(&q, "Names.member.1", name)) < 0)
		goto out;
	r = aws_call_query(c, AWS_SVC_ELBV2, "DescribeTargetGroups", &q, &rep, err);
	/* moto: TargetGroupNotFound for a load balancer without any; only that code means none
	 * (LoadBalancerNotFound or another not-found stays an error) */
	if (r == -ENOENT && lb_arn && aws_error_is(err, "TargetGroupNotFound"))
		r = 0;
	if (r < 0)
		goto out;
	size_t count;
	if (!(out = items(rep.result, "TargetGroups", sizeof(*out), &count))) {
		r = -ENOMEM;
		goto out;
	}
	for (xmlNode *m = aws_xml_list(rep.result, "TargetGroups"); m && *n < count;
	     m = aws_xml_next(m))
		tg_parse(m, &out[(*n)++]);
	*ret = out;
	out = NULL;
out:
	free(out);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static int add_hc(struct aws_query *q, const struct elbv2_hc *hc)
{
	int r;
	if ((r = aws_query_add(q, "HealthCheckProtocol", hc->protocol)) < 0 ||
	    (r = aws_query_add(q, "HealthCheckPort", hc->port)) < 0 ||
	    (hc->path[0] && strcmp(hc->protocol, "TCP") != 0 &&
	     (r = aws_query_add(q, "HealthCheckPath", hc->path)) < 0) ||
	    (r = aws_query_add_int(q, "HealthCheckIntervalSeconds", hc->interval)) < 0 ||
	    (r = aws_query_add_int(q, "HealthCheckTimeoutSeconds", hc->timeout)) < 0 ||
	    (r = aws_query_add_int(q, "HealthyThresholdCount", hc->healthy)) < 0 ||
	    (r = aws_query_add_int(q, "UnhealthyThresholdCount", hc->unhealthy)) < 0)
		return r;
	return 0;
}

int elbv2_tg_create(struct aws_client *c, struct elbv2_tg *tg, const struct elbv2_kv *tags,
		    size_t n_tags, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if ((r = aws_query_add(&q, "Name", tg->name)) < 0 ||
	    (r = aws_query_add(&q, "Protocol", tg->protocol)) < 0 ||
	    (r = aws_query_add_int(&q, "Port", tg->port)) < 0 ||
	    (r = aws_query_add(&q, "VpcId", tg->vpc)) < 0 ||
	    (r = aws_query_add(&q, "TargetType", "instance")) < 0 || (r = add_hc(&q, &tg->hc)) < 0 ||
	    (r = add_kv(&q, "Tags", tags, n_tags)) < 0)
		goto out;
	if ((r = aws_call_query(c, AWS_SVC_ELBV2, "CreateTargetGroup", &q, &rep, err)) == 0) {
		xmlNode *m = aws_xml_list(rep.result, "TargetGroups");
		if (m)
			text(m, "TargetGroupArn", tg->arn, sizeof(tg->arn));
		r = tg->arn[0] ? 0 : -EBADMSG;
	}
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int elbv2_tg_modify_hc(struct aws_client *c, const char *arn, const struct elbv2_hc *hc,
		       struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r;
	if ((r = aws_query_add(&q, "TargetGroupArn", arn)) < 0 || (r = add_hc(&q, hc)) < 0) {
		aws_query_release(&q);
		return r;
	}
	return call(c, "ModifyTargetGroup", &q, err);
}

int elbv2_tg_delete(struct aws_client *c, const char *arn, struct aws_error *err)
{
	int r = by_arn(c, "DeleteTargetGroup", "TargetGroupArn", arn, err);
	return r == -ENOENT ? 0 : r;
}

int elbv2_targets(struct aws_client *c, const char *tg_arn, char (**ret)[32], size_t *n,
		  struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	char(*out)[32] = NULL;
	int r;

	*n = 0;
	if ((r = aws_query_add(&q, "TargetGroupArn", tg_arn)) < 0 ||
	    (r = aws_call_query(c, AWS_SVC_ELBV2, "DescribeTargetHealth", &q, &rep, err)) < 0)
		goto out;
	size_t count = aws_xml_count(rep.result, "TargetHealthDescriptions");
	if (!(out = calloc(count + 1, sizeof(*out)))) {
		r = -ENOMEM;
		goto out;
	}
	for (xmlNode *m = aws_xml_list(rep.result, "TargetHealthDescriptions"); m && *n < count;
	     m = aws_xml_next(m))
		text(m, "Target/Id", out[(*n)++], 32);
	*ret = out;
	out = NULL;
out:
	free(out);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int elbv2_targets_set(struct aws_client *c, const char *tg_arn, const char (*ids)[32], size_t n,
		      int port, bool reg, struct aws_error *err)
{
	for (size_t off = 0; off < n; off += 100) {
		struct aws_query q = AWS_QUERY_INIT;
		size_t k = n - off < 100 ? n - off : 100;
		int r = aws_query_add(&q, "TargetGroupArn", tg_arn);
		for (size_t i = 0; r == 0 && i < k; i++)
			if ((r = aws_query_addf(&q, ids[off + i], "Targets.member.%zu.Id", i + 1)) ==
			    0) {
				char p[16];
				snprintf(p, sizeof(p), "%d", port);
				r = aws_query_addf(&q, p, "Targets.member.%zu.Port", i + 1);
			}
		if (r < 0) {
			aws_query_release(&q);
			return r;
		}
		if ((r = call(c, reg ? "RegisterTargets" : "DeregisterTargets", &q, err)) < 0)
			return r;
	}
	return 0;
}
