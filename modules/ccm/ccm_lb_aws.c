/* The service controller's AWS calls (see ccm_lb_aws.h). */
#include "modules/ccm/ccm_lb_aws.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "modules/ccm/ccm_model.h"

#define PROXY_POLICY "k8s-proxyprotocol-enabled"

/* One call whose reply is not read. */
static int call(struct aws_client *c, enum aws_service s, const char *action, struct aws_query *q,
		struct aws_error *err)
{
	struct aws_reply rep = {0};
	int r = aws_call_query(c, s, action, q, &rep, err);
	aws_reply_release(&rep);
	aws_query_release(q);
	return r;
}

int ccm_elb_describe(struct aws_client *c, const char *name, struct ccm_elb *ret,
		     struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if ((r = aws_query_add(&q, "LoadBalancerNames.member.1", name)) < 0)
		goto out;
	r = aws_call_query(c, AWS_SVC_ELB, "DescribeLoadBalancers", &q, &rep, err);
	if (r < 0)
		goto out;
	xmlNode *m = aws_xml_list(rep.result, "LoadBalancerDescriptions");
	r = m ? ccm_elb_parse(m, ret) : -ENOENT;
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static int add_listener(struct aws_query *q, int i, const struct ccm_lb_listener *l)
{
	int r;
	if ((r = aws_query_addf(q, l->proto, "Listeners.member.%d.Protocol", i)) < 0 ||
	    (r = aws_query_addf(q, l->iproto, "Listeners.member.%d.InstanceProtocol", i)) < 0)
		return r;
	char port[16], np[16];
	snprintf(port, sizeof(port), "%d", l->port);
	snprintf(np, sizeof(np), "%d", l->node_port);
	if ((r = aws_query_addf(q, port, "Listeners.member.%d.LoadBalancerPort", i)) < 0 ||
	    (r = aws_query_addf(q, np, "Listeners.member.%d.InstancePort", i)) < 0)
		return r;
	if (l->cert[0])
		r = aws_query_addf(q, l->cert, "Listeners.member.%d.SSLCertificateId", i);
	return r;
}

static int add_ids(struct aws_query *q, const char *prefix, const char (*ids)[32], size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = aws_query_addf(q, ids[i], "%s.%zu", prefix, i + 1);
		if (r < 0)
			return r;
	}
	return 0;
}

int ccm_elb_create(struct aws_client *c, const struct ccm_lb_spec *s, const char *cluster_id,
		   const char (*subnets)[32], size_t n_subnets, const char (*sgs)[32], size_t n_sgs,
		   struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	const char *keys[CCM_LB_MAX_TAGS + 2], *vals[CCM_LB_MAX_TAGS + 2];
	char ctag[160];
	size_t nt = 0;
	int r;

	keys[nt] = CCM_LB_SVC_TAG;
	vals[nt++] = s->svc;
	if (cluster_id && *cluster_id) {
		snprintf(ctag, sizeof(ctag), "%s%s", CCM_CLUSTER_TAG_PREFIX, cluster_id);
		keys[nt] = ctag;
		vals[nt++] = "owned";
	}
	for (size_t i = 0; i < s->n_tags; i++) {
		keys[nt] = s->tags[i].key;
		vals[nt++] = s->tags[i].value;
	}
	if ((r = aws_query_add(&q, "LoadBalancerName", s->name)) < 0 ||
	    (s->internal && (r = aws_query_add(&q, "Scheme", "internal")) < 0) ||
	    (r = add_ids(&q, "Subnets.member", subnets, n_subnets)) < 0 ||
	    (r = add_ids(&q, "SecurityGroups.member", sgs, n_sgs)) < 0 ||
	    (r = aws_query_add_tags(&q, "Tags.member", keys, vals, nt)) < 0) {
		aws_query_release(&q);
		return r;
	}
	for (size_t i = 0; i < s->n_l; i++)
		if ((r = add_listener(&q, (int)i + 1, &s->l[i])) < 0) {
			aws_query_release(&q);
			return r;
		}
	return call(c, AWS_SVC_ELB, "CreateLoadBalancer", &q, err);
}

static int instances(struct aws_client *c, const char *name, const char (*ids)[32], size_t n,
		     bool reg, struct aws_error *err)
{
	for (size_t off = 0; off < n; off += 100) {
		struct aws_query q = AWS_QUERY_INIT;
		int r;
		size_t k = n - off < 100 ? n - off : 100;
		if ((r = aws_query_add(&q, "LoadBalancerName", name)) < 0)
			return r;
		for (size_t i = 0; i < k; i++)
			if ((r = aws_query_addf(&q, ids[off + i], "Instances.member.%zu.InstanceId",
						i + 1)) < 0) {
				aws_query_release(&q);
				return r;
			}
		r = call(c, AWS_SVC_ELB,
			 reg ? "RegisterInstancesWithLoadBalancer"
			     : "DeregisterInstancesFromLoadBalancer",
			 &q, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int subnets_call(struct aws_client *c, const char *name, const char (*ids)[32], size_t n,
			const char *action, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r;
	if (n == 0)
		return 0;
	if ((r = aws_query_add(&q, "LoadBalancerName", name)) < 0 ||
	    (r = add_ids(&q, "Subnets.member", ids, n)) < 0) {
		aws_query_release(&q);
		return r;
	}
	return call(c, AWS_SVC_ELB, action, &q, err);
}

int ccm_elb_apply(struct aws_client *c, const struct ccm_lb_spec *s,
		  const struct ccm_elb_plan *p, const char (*sgs)[32], size_t n_sgs,
		  struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r;

	if (p->n_del) {
		if ((r = aws_query_add(&q, "LoadBalancerName", s->name)) < 0)
			return r;
		for (size_t i = 0; i < p->n_del; i++) {
			char port[16];
			snprintf(port, sizeof(port), "%d", p->del_ports[i]);
			if ((r = aws_query_addf(&q, port, "LoadBalancerPorts.member.%zu", i + 1)) < 0)
				break;
		}
		if ((r = call(c, AWS_SVC_ELB, "DeleteLoadBalancerListeners", &q, err)) < 0)
			return r;
	}
	if (p->n_add) {
		if ((r = aws_query_add(&q, "LoadBalancerName", s->name)) < 0)
			return r;
		for (size_t i = 0; i < p->n_add; i++)
			if ((r = add_listener(&q, (int)i + 1, &s->l[p->add[i]])) < 0)
				break;
		if ((r = call(c, AWS_SVC_ELB, "CreateLoadBalancerListeners", &q, err)) < 0)
			return r;
	}
	if ((r = subnets_call(c, s->name, p->attach, p->n_attach, "AttachLoadBalancerToSubnets",
			      err)) < 0 ||
	    (r = subnets_call(c, s->name, p->detach, p->n_detach, "DetachLoadBalancerFromSubnets",
			      err)) < 0)
		return r;
	if (p->sgs) {
		if ((r = aws_query_add(&q, "LoadBalancerName", s->name)) < 0 ||
		    (r = add_ids(&q, "SecurityGroups.member", sgs, n_sgs)) < 0) {
			aws_query_release(&q);
			return r;
		}
		if ((r = call(c, AWS_SVC_ELB, "ApplySecurityGroupsToLoadBalancer", &q, err)) < 0)
			return r;
	}
	if (p->hc && (r = ccm_elb_health_check(c, s, err)) < 0)
		return r;
	if ((r = instances(c, s->name, p->reg, p->n_reg, true, err)) < 0 ||
	    (r = instances(c, s->name, p->dereg, p->n_dereg, false, err)) < 0)
		return r;
	return 0;
}

int ccm_elb_health_check(struct aws_client *c, const struct ccm_lb_spec *s,
			 struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r;
	if ((r = aws_query_add(&q, "LoadBalancerName", s->name)) < 0 ||
	    (r = aws_query_add(&q, "HealthCheck.Target", s->hc.target)) < 0 ||
	    (r = aws_query_add_int(&q, "HealthCheck.HealthyThreshold", s->hc.healthy)) < 0 ||
	    (r = aws_query_add_int(&q, "HealthCheck.UnhealthyThreshold", s->hc.unhealthy)) < 0 ||
	    (r = aws_query_add_int(&q, "HealthCheck.Timeout", s->hc.timeout)) < 0 ||
	    (r = aws_query_add_int(&q, "HealthCheck.Interval", s->hc.interval)) < 0) {
		aws_query_release(&q);
		return r;
	}
	return call(c, AWS_SVC_ELB, "ConfigureHealthCheck", &q, err);
}

/* key, value, key, value..., NULL into q (released on failure) */
static int query_pairs(struct aws_query *q, const char *const *kv)
{
	for (; kv[0]; kv += 2) {
		int r = aws_query_add(q, kv[0], kv[1]);
		if (r < 0) {
			aws_query_release(q);
			return r;
		}
	}
	return 0;
}

static int proxy_protocol(struct aws_client *c, const struct ccm_lb_spec *s,
			  struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	const char *const policy[] = {
	    "LoadBalancerName", s->name,
	    "PolicyName", PROXY_POLICY,
	    "PolicyTypeName", "ProxyProtocolPolicyType",
	    "PolicyAttributes.member.1.AttributeName", "ProxyProtocol",
	    "PolicyAttributes.member.1.AttributeValue", "true",
	    NULL,
	};
	int r;

	if ((r = query_pairs(&q, policy)) < 0)
		return r;
	r = call(c, AWS_SVC_ELB, "CreateLoadBalancerPolicy", &q, err);
	if (r < 0 && r != -EEXIST)
		return r;
	for (size_t i = 0; i < s->n_l; i++) {
		if ((r = aws_query_add(&q, "LoadBalancerName", s->name)) < 0 ||
		    (r = aws_query_add_int(&q, "InstancePort", s->l[i].node_port)) < 0 ||
		    (r = aws_query_add(&q, "PolicyNames.member.1", PROXY_POLICY)) < 0) {
			aws_query_release(&q);
			return r;
		}
		if ((r = call(c, AWS_SVC_ELB, "SetLoadBalancerPoliciesForBackendServer", &q, err)) <
		    0)
			return r;
	}
	return 0;
}

/* The attributes the ELB has (DescribeLoadBalancerAttributes) are those s sets: *same. */
static int attrs_same(struct aws_client *c, const struct ccm_lb_spec *s, bool *same,
		      struct aws_error *err)
{
	const struct ccm_lb_attrs *a = &s->attrs;
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	bool cross = false, drain = false, log = false;
	long long drain_timeout = -1, idle = -1, interval = -1;
	int r;

	if ((r = aws_query_add(&q, "LoadBalancerName", s->name)) == 0 &&
	    (r = aws_call_query(c, AWS_SVC_ELB, "DescribeLoadBalancerAttributes", &q, &rep, err)) ==
		0) {
		const xmlNode *x = aws_xml_get(rep.result, "LoadBalancerAttributes");
		const char *bucket = aws_xml_text(x, "AccessLog/S3BucketName");
		const char *prefix = aws_xml_text(x, "AccessLog/S3BucketPrefix");
		aws_xml_bool(x, "CrossZoneLoadBalancing/Enabled", &cross);
		aws_xml_bool(x, "ConnectionDraining/Enabled", &drain);
		aws_xml_int(x, "ConnectionDraining/Timeout", &drain_timeout);
		aws_xml_int(x, "ConnectionSettings/IdleTimeout", &idle);
		aws_xml_bool(x, "AccessLog/Enabled", &log);
		aws_xml_int(x, "AccessLog/EmitInterval", &interval);
		*same = x && cross == a->cross_zone && drain == a->drain &&
			(!a->drain || drain_timeout == a->drain_timeout) &&
			idle == a->idle_timeout && log == a->log &&
			(!a->log || (interval == a->log_interval &&
				     strcmp(bucket ? bucket : "", a->log_bucket) == 0 &&
				     strcmp(prefix ? prefix : "", a->log_prefix) == 0));
	}
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

/* Every listener's backend port has the proxy-protocol policy already. */
static bool proxy_everywhere(const struct ccm_lb_spec *s, const struct ccm_elb *have)
{
	for (size_t i = 0; i < s->n_l; i++) {
		bool on = false;
		for (size_t k = 0; have && k < have->n_l && !on; k++)
			on = have->l[k].node_port == s->l[i].node_port && have->proxy_ports[k];
		if (!on)
			return false;
	}
	return true;
}

int ccm_elb_attributes(struct aws_client *c, const struct ccm_lb_spec *s,
		       const struct ccm_elb *have, struct aws_error *err)
{
	const struct ccm_lb_attrs *a = &s->attrs;
	struct aws_query q = AWS_QUERY_INIT;
	bool same = false;
	int r;

	if ((r = attrs_same(c, s, &same, err)) < 0)
		return r;
	if (same)
		goto proxy;
	if ((r = aws_query_add(&q, "LoadBalancerName", s->name)) < 0 ||
	    (r = aws_query_add_bool(&q, "LoadBalancerAttributes.CrossZoneLoadBalancing.Enabled",
				    a->cross_zone)) < 0 ||
	    (r = aws_query_add_bool(&q, "LoadBalancerAttributes.ConnectionDraining.Enabled",
				    a->drain)) < 0 ||
	    (r = aws_query_add_int(&q, "LoadBalancerAttributes.ConnectionDraining.Timeout",
				   a->drain_timeout)) < 0 ||
	    (r = aws_query_add_int(&q, "LoadBalancerAttributes.ConnectionSettings.IdleTimeout",
				   a->idle_timeout)) < 0 ||
	    (r = aws_query_add_bool(&q, "LoadBalancerAttributes.AccessLog.Enabled", a->log)) < 0 ||
	    (a->log &&
	     ((r = aws_query_add_int(&q, "LoadBalancerAttributes.AccessLog.EmitInterval",
				     a->log_interval)) < 0 ||
	      (r = aws_query_add(&q, "LoadBalancerAttributes.AccessLog.S3BucketName",
				 a->log_bucket)) < 0 ||
	      (r = aws_query_add(&q, "LoadBalancerAttributes.AccessLog.S3BucketPrefix",
				 a->log_prefix)) < 0))) {
		aws_query_release(&q);
		return r;
	}
	if ((r = call(c, AWS_SVC_ELB, "ModifyLoadBalancerAttributes", &q, err)) < 0)
		return r;
proxy:
	return s->proxy_protocol && !proxy_everywhere(s, have) ? proxy_protocol(c, s, err) : 0;
}

int ccm_elb_delete(struct aws_client *c, const char *name, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r = aws_query_add(&q, "LoadBalancerName", name);
	if (r < 0)
		return r;
	r = call(c, AWS_SVC_ELB, "DeleteLoadBalancer", &q, err);
	return r == -ENOENT ? 0 : r;
}

/* Security groups ----------------------------------------------------------------------- */

static int describe_sgs(struct aws_client *c, struct aws_query *q, struct aws_reply *rep,
			struct aws_error *err)
{
	int r = aws_call_query(c, AWS_SVC_EC2, "DescribeSecurityGroups", q, rep, err);
	aws_query_release(q);
	return r;
}

/* DescribeSecurityGroups with one filter */
static int describe_sgs_by(struct aws_client *c, const char *filter, const char *const *values,
			   size_t n, struct aws_reply *rep, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r = aws_query_add_filter(&q, filter, values, n);
	if (r < 0) {
		aws_query_release(&q);
		return r;
	}
	return describe_sgs(c, &q, rep, err);
}

int ccm_sg_find(struct aws_client *c, const char *vpc, const char *name, char id[32],
		struct ccm_sg_perm *perms, size_t max, size_t *n_perms, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if ((r = aws_query_add_filter(&q, "group-name", &name, 1)) < 0 ||
	    (vpc && *vpc && (r = aws_query_add_filter(&q, "vpc-id", &vpc, 1)) < 0)) {
		aws_query_release(&q);
		return r;
	}
	if ((r = describe_sgs(c, &q, &rep, err)) < 0)
		return r;
	xmlNode *g = aws_xml_list(rep.result, "securityGroupInfo");
	if (!g) {
		r = -ENOENT;
	} else {
		str_copy(id, 32, aws_xml_text(g, "groupId") ?: "");
		*n_perms = ccm_sg_perms_parse(g, perms, max);
		r = id[0] ? 0 : -EBADMSG;
	}
	aws_reply_release(&rep);
	return r;
}

int ccm_sg_create(struct aws_client *c, const char *vpc, const char *name, const char *desc,
		  const char *cluster_id, const char *svc, char id[32], struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	char ctag[160];
	const char *keys[2] = {CCM_LB_SVC_TAG, ctag}, *vals[2] = {svc, "owned"};
	int r;

	snprintf(ctag, sizeof(ctag), "%s%s", CCM_CLUSTER_TAG_PREFIX, cluster_id ? cluster_id : "");
	if ((r = aws_query_add(&q, "GroupName", name)) < 0 ||
	    (r = aws_query_add(&q, "GroupDescription", desc)) < 0 ||
	    (r = aws_query_add(&q, "VpcId", vpc)) < 0 ||
	    (r = aws_query_add(&q, "TagSpecification.1.ResourceType", "security-group")) < 0 ||
	    (r = aws_query_add_tags(&q, "TagSpecification.1.Tag", keys, vals,
				    cluster_id && *cluster_id ? 2 : 1)) < 0) {
		aws_query_release(&q);
		return r;
	}
	r = aws_call_query(c, AWS_SVC_EC2, "CreateSecurityGroup", &q, &rep, err);
	aws_query_release(&q);
	if (r == 0) {
		str_copy(id, 32, aws_xml_text(rep.result, "groupId") ?: "");
		r = id[0] ? 0 : -EBADMSG;
	}
	aws_reply_release(&rep);
	return r;
}

int ccm_sg_ingress(struct aws_client *c, const char *id, const struct ccm_sg_perm *p, size_t n,
		   bool revoke, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r;

	if (n == 0)
		return 0;
	if ((r = aws_query_add(&q, "GroupId", id)) < 0)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		size_t k = i + 1;
		if ((r = aws_query_addf(&q, p[i].proto, "IpPermissions.%zu.IpProtocol", k)) < 0)
			goto fail;
		if (strcmp(p[i].proto, "-1") != 0) {
			char f[16], t[16];
			snprintf(f, sizeof(f), "%d", p[i].from);
			snprintf(t, sizeof(t), "%d", p[i].to);
			if ((r = aws_query_addf(&q, f, "IpPermissions.%zu.FromPort", k)) < 0 ||
			    (r = aws_query_addf(&q, t, "IpPermissions.%zu.ToPort", k)) < 0)
				goto fail;
		}
		if (p[i].cidr[0]) {
			r = aws_query_addf(&q, p[i].cidr, "IpPermissions.%zu.IpRanges.1.CidrIp", k);
			if (r == 0 && p[i].desc[0] && !revoke)
				r = aws_query_addf(&q, p[i].desc, "IpPermissions.%zu.IpRanges.1.Description",
						   k);
		} else {
			r = aws_query_addf(&q, p[i].group, "IpPermissions.%zu.Groups.1.GroupId", k);
			if (r == 0 && p[i].desc[0] && !revoke)
				r = aws_query_addf(&q, p[i].desc,
						   "IpPermissions.%zu.Groups.1.Description", k);
		}
		if (r < 0)
			goto fail;
	}
	return call(c, AWS_SVC_EC2,
		    revoke ? "RevokeSecurityGroupIngress" : "AuthorizeSecurityGroupIngress", &q,
		    err);
fail:
	aws_query_release(&q);
	return r;
}

int ccm_sg_delete(struct aws_client *c, const char *id, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r = aws_query_add(&q, "GroupId", id);
	if (r < 0)
		return r;
	r = call(c, AWS_SVC_EC2, "DeleteSecurityGroup", &q, err);
	return r == -ENOENT ? 0 : r;
}

int ccm_sg_perms_of(struct aws_client *c, const char *id, struct ccm_sg_perm *perms, size_t max,
		    size_t *n_perms, struct aws_error *err)
{
	struct aws_reply rep = {0};
	int r;

	*n_perms = 0;
	if ((r = describe_sgs_by(c, "group-id", &id, 1, &rep, err)) < 0)
		return r;
	xmlNode *g = aws_xml_list(rep.result, "securityGroupInfo");
	if (g)
		*n_perms = ccm_sg_perms_parse(g, perms, max);
	aws_reply_release(&rep);
	return g ? 0 : -ENOENT;
}

int ccm_sg_referencing(struct aws_client *c, const char *group, char (*ret)[32], size_t max,
		       size_t *n, struct aws_error *err)
{
	struct aws_reply rep = {0};
	int r;

	*n = 0;
	if ((r = describe_sgs_by(c, "ip-permission.group-id", &group, 1, &rep, err)) < 0)
		return r;
	for (xmlNode *g = aws_xml_list(rep.result, "securityGroupInfo"); g && *n < max;
	     g = aws_xml_next(g))
		str_copy(ret[(*n)++], 32, aws_xml_text(g, "groupId") ?: "");
	aws_reply_release(&rep);
	return 0;
}

/* Instances and subnets ----------------------------------------------------------------- */

int ccm_lb_describe_instances(struct aws_client *c, const char (*ids)[32], size_t n,
			      struct ccm_lb_inst **ret, size_t *ret_n, struct aws_error *err)
{
	struct ccm_lb_inst *out = calloc(n + 1, sizeof(*out));
	size_t k = 0;
	int r = 0;

	if (!out)
		return -ENOMEM;
	for (size_t off = 0; off < n && r == 0; off += 100) {
		struct aws_query q = AWS_QUERY_INIT;
		struct aws_reply rep = {0};
		const char *chunk[100];
		size_t m = n - off < 100 ? n - off : 100;
		for (size_t i = 0; i < m; i++)
			chunk[i] = ids[off + i];
		if ((r = aws_query_add_filter(&q, "instance-id", chunk, m)) == 0)
			r = aws_call_query(c, AWS_SVC_EC2, "DescribeInstances", &q, &rep, err);
		aws_query_release(&q);
		for (xmlNode *rs = r == 0 ? aws_xml_list(rep.result, "reservationSet") : NULL; rs;
		     rs = aws_xml_next(rs))
			for (xmlNode *it = aws_xml_list(rs, "instancesSet"); it && k < n;
			     it = aws_xml_next(it)) {
				struct ccm_lb_inst *x = &out[k++];
				str_copy(x->id, sizeof(x->id), aws_xml_text(it, "instanceId") ?: "");
				str_copy(x->vpc, sizeof(x->vpc), aws_xml_text(it, "vpcId") ?: "");
				for (xmlNode *g = aws_xml_list(it, "groupSet");
				     g && x->n_sgs < CCM_LB_MAX_SGS; g = aws_xml_next(g))
					str_copy(x->sgs[x->n_sgs++], 32,
						 aws_xml_text(g, "groupId") ?: "");
			}
		aws_reply_release(&rep);
	}
	if (r < 0) {
		free(out);
		return r;
	}
	*ret = out;
	*ret_n = k;
	return 0;
}

int ccm_lb_node_sg(struct aws_client *c, const struct ccm_lb_inst *i, const char *cluster_id,
		   char id[32], struct ccm_sg_perm *perms, size_t max, size_t *n_perms,
		   struct aws_error *err)
{
	struct aws_reply rep = {0};
	const char *ids[CCM_LB_MAX_SGS];
	const xmlNode *tagged = NULL, *untagged = NULL;
	unsigned n_tagged = 0, n_untagged = 0;
	int r;

	if (i->n_sgs == 0)
		return -ENOENT;
	for (size_t k = 0; k < i->n_sgs; k++)
		ids[k] = i->sgs[k];
	if ((r = describe_sgs_by(c, "group-id", ids, i->n_sgs, &rep, err)) < 0)
		return r;
	for (xmlNode *g = aws_xml_list(rep.result, "securityGroupInfo"); g; g = aws_xml_next(g)) {
		bool is_tagged = false;
		for (xmlNode *t = aws_xml_list(g, "tagSet"); t; t = aws_xml_next(t)) {
			const char *k = aws_xml_text(t, "key"), *v = aws_xml_text(t, "value");
			struct ec2_tag tag = {(char *)k, (char *)v};
			if (k && ccm_tags_have_cluster(&tag, 1, cluster_id) &&
			    (strncmp(k, CCM_CLUSTER_TAG_PREFIX, strlen(CCM_CLUSTER_TAG_PREFIX)) == 0 ||
			     strcmp(k, CCM_CLUSTER_TAG_LEGACY) == 0))
				is_tagged = true;
		}
		if (is_tagged) {
			tagged = g;
			n_tagged++;
		} else {
			untagged = g;
			n_untagged++;
		}
	}
	const xmlNode *g = n_tagged == 1 ? tagged : n_tagged == 0 && n_untagged == 1 ? untagged : NULL;
	if (!g) {
		r = n_tagged > 1 || n_untagged > 1 ? -ENOTUNIQ : -ENOENT;
	} else {
		str_copy(id, 32, aws_xml_text(g, "groupId") ?: "");
		*n_perms = ccm_sg_perms_parse(g, perms, max);
		r = 0;
	}
	aws_reply_release(&rep);
	return r;
}

int ccm_lb_subnets(struct aws_client *c, const char *vpc, const char *cluster_id,
		   struct ccm_subnet **ret, size_t *ret_n, struct aws_error *err)
{
	struct aws_query q1 = AWS_QUERY_INIT, q2 = AWS_QUERY_INIT;
	struct aws_reply s = {0}, t = {0};
	int r;

	if ((r = aws_query_add_filter(&q1, "vpc-id", &vpc, 1)) < 0 ||
	    (r = aws_query_add_filter(&q2, "vpc-id", &vpc, 1)) < 0 ||
	    (r = aws_call_query(c, AWS_SVC_EC2, "DescribeSubnets", &q1, &s, err)) < 0 ||
	    (r = aws_call_query(c, AWS_SVC_EC2, "DescribeRouteTables", &q2, &t, err)) < 0)
		goto out;
	r = ccm_subnets_from_replies(s.result, t.result, cluster_id, ret, ret_n);
out:
	aws_query_release(&q1);
	aws_query_release(&q2);
	aws_reply_release(&s);
	aws_reply_release(&t);
	return r;
}
