/* The control-plane load balancer as a network load balancer (reference capa.md §6,
 * spec.controlPlaneLoadBalancer.loadBalancerType: nlb; pkg/cloud/services/elb/loadbalancer.go
 * for v2 load balancers).
 *
 * Name "<namespace>-<c>-apiserver" (spec.controlPlaneLoadBalancer.name when set), CAPA's hashed
 * form of "<namespace>-<c>" past 32 characters. Found by name or created (Type network, the
 * scheme, one subnet per zone, public ones when internet-facing, the apiserver-lb group, CAPA's
 * tags), then its attribute load_balancing.cross_zone.enabled (from crossZoneLoadBalancing),
 * then waited for until active. Its listener TCP 6443 forwards to the target group
 * "apiserver-target-<5 characters>" (TCP 6443, instance targets, health check TCP 6443, 5 s,
 * 4 s, healthy 2, unhealthy 6). The group is found again through the listeners; the five
 * characters come from a hash of the load balancer's ARN, so a controller stopped between the
 * group's create and the listener's finds the same group by name instead of making another.
 * An unchanged load balancer costs two reads per reconcile (DescribeLoadBalancers,
 * DescribeListeners). Delete: listeners, target groups, the load balancer (polled until
 * gone). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/capa/capa_cluster.h"
#include "modules/capa/capa_net.h"

#define API_PORT 6443
#define ACTIVE_WAIT_NS (60 * NSEC_PER_SEC) /* then the queue retries: CAPA waits 30 min */
#define GONE_WAIT_NS (120 * NSEC_PER_SEC)
#define MAX_TGS 16

struct nlb {
	char name[64];
	char arn[256];
	char dns[256];
	char state[32];
	char scheme[32];
	char tg[256]; /* the listener's target group */
};

static int v2(struct capa_scope *s, const char *action, const struct aws_query *q,
	      struct aws_reply *rep)
{
	if (!str_has_prefix(action, "Describe") && !controllers_may_act(&s->x->run))
		return -ECANCELED;
	return capa_scope_call(s, AWS_SVC_ELBV2, action, q, rep);
}

/* A call whose reply is not needed. */
static int v2_do(struct capa_scope *s, const char *action, struct aws_query *q)
{
	struct aws_reply rep = {0};
	int r = v2(s, action, q, &rep);
	aws_reply_release(&rep);
	aws_query_release(q);
	return r;
}

static void nlb_name(const struct capa_scope *s, char out[64])
{
	const char *set = json_str(s->obj, "spec.controlPlaneLoadBalancer.name");
	const char *ns = json_str(s->obj, "metadata.namespace");
	char base[300], name[320];

	if (set && *set) {
		capa_strcpy(out, 64, set);
		return;
	}
	snprintf(base, sizeof(base), "%s-%s", ns ? ns : "default", s->name);
	snprintf(name, sizeof(name), "%s-apiserver", base);
	if (strlen(name) <= 32)
		capa_strcpy(out, 64, name);
	else
		capa_lb_hashed_name(base, out);
}

/* "apiserver-target-" and 5 base-36 characters of the load balancer's ARN's hash. */
static void tg_name(const char *lb_arn, char out[33])
{
	static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
	uint8_t d[5];

	capa_blake2b(lb_arn, strlen(lb_arn), d, sizeof(d));
	memcpy(out, "apiserver-target-", 17);
	for (size_t i = 0; i < sizeof(d); i++)
		out[17 + i] = alphabet[d[i] % 36];
	out[22] = '\0';
}

static void nlb_parse(struct nlb *l, const xmlNode *d)
{
	capa_strcpy(l->arn, sizeof(l->arn), aws_xml_text(d, "LoadBalancerArn"));
	capa_strcpy(l->dns, sizeof(l->dns), aws_xml_text(d, "DNSName"));
	capa_strcpy(l->state, sizeof(l->state), aws_xml_text(d, "State/Code"));
	capa_strcpy(l->scheme, sizeof(l->scheme), aws_xml_text(d, "Scheme"));
}

/* DescribeLoadBalancers of l->name: 0 with l filled (and the reply for the status when rep),
 * -ENOENT when there is none. */
static int nlb_describe(struct capa_scope *s, struct nlb *l, struct aws_reply *keep)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	aws_query_add(&q, "Names.member.1", l->name);
	r = v2(s, "DescribeLoadBalancers", &q, &rep);
	aws_query_release(&q);
	if (r == -ENOENT && strcmp(s->code, "LoadBalancerNotFound") != 0)
		r = -EREMOTEIO; /* a NotFound of something else proves nothing */
	const xmlNode *d = r >= 0 ? aws_xml_list(rep.result, "LoadBalancers") : NULL;
	if (r >= 0 && !d)
		r = -ENOENT;
	if (r >= 0)
		nlb_parse(l, d);
	if (r >= 0 && keep)
		*keep = rep;
	else
		aws_reply_release(&rep);
	return r;
}

static int nlb_create(struct capa_scope *s, struct nlb *l, bool internal)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	bool cross = false;
	int r;

	aws_query_add(&q, "Name", l->name);
	aws_query_add(&q, "Type", "network");
	aws_query_add(&q, "IpAddressType", "ipv4");
	if ((r = capa_lb_create_query(s, l->name, internal, &q)) < 0 ||
	    (r = v2(s, "CreateLoadBalancer", &q, &rep)) < 0)
		goto out;
	nlb_parse(l, aws_xml_list(rep.result, "LoadBalancers"));
	aws_query_release(&q);
	if (!l->arn[0]) {
		str_printf(s->err, sizeof(s->err), "CreateLoadBalancer: no ARN in the reply");
		r = -EBADMSG;
		goto out;
	}
	log_info("created load balancer", KV_S("cluster", s->name), KV_S("name", l->name),
		 KV_S("type", "nlb"), KV_S("dns", l->dns));
	json_get_bool(s->obj, "spec.controlPlaneLoadBalancer.crossZoneLoadBalancing", &cross);
	aws_query_add(&q, "LoadBalancerArn", l->arn);
	aws_query_add(&q, "Attributes.member.1.Key", "load_balancing.cross_zone.enabled");
	aws_query_add(&q, "Attributes.member.1.Value", cross ? "true" : "false");
	r = v2(s, "ModifyLoadBalancerAttributes", &q, &rep);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

/* Polls until the load balancer is active; -EAGAIN past the bound (the queue retries). */
static int nlb_wait_active(struct capa_scope *s, struct nlb *l)
{
	int64_t deadline = now_mono_ns() + ACTIVE_WAIT_NS;
	int r = 0;

	while (strcmp(l->state, "active") != 0) {
		if (strcmp(l->state, "failed") == 0 || now_mono_ns() > deadline) {
			str_printf(s->err, sizeof(s->err), "load balancer %s is %s, not active",
				   l->name, l->state);
			return strcmp(l->state, "failed") == 0 ? -EIO : -EAGAIN;
		}
		if (cancel_wait(s->x->cancel, NSEC_PER_SEC))
			return -ECANCELED;
		if ((r = nlb_describe(s, l, NULL)) < 0)
			return r;
	}
	return 0;
}

/* The target group of the listener on API_PORT into l->tg; *ret_has_listener. */
static int nlb_listener(struct capa_scope *s, struct nlb *l, bool *ret_has_listener)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	*ret_has_listener = false;
	aws_query_add(&q, "LoadBalancerArn", l->arn);
	r = v2(s, "DescribeListeners", &q, &rep);
	aws_query_release(&q);
	for (const xmlNode *it = r >= 0 ? aws_xml_list(rep.result, "Listeners") : NULL; it;
	     it = aws_xml_next(it)) {
		long long port = 0;
		aws_xml_int(it, "Port", &port);
		const char *tg = aws_xml_text(aws_xml_list(it, "DefaultActions"), "TargetGroupArn");
		if (port == API_PORT && tg) {
			capa_strcpy(l->tg, sizeof(l->tg), tg);
			*ret_has_listener = true;
		}
	}
	aws_reply_release(&rep);
	return r;
}

/* The target group named name: found (a controller stopped before the listener) or made. */
static int nlb_target_group(struct capa_scope *s, struct nlb *l)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct capa_tags t = {0};
	char name[33];
	int r;

	tg_name(l->arn, name);
	aws_query_add(&q, "Names.member.1", name);
	r = v2(s, "DescribeTargetGroups", &q, &rep);
	aws_query_release(&q);
	if (r >= 0) {
		capa_strcpy(l->tg, sizeof(l->tg),
			    aws_xml_text(aws_xml_list(rep.result, "TargetGroups"), "TargetGroupArn"));
		aws_reply_release(&rep);
		if (l->tg[0])
			return 0;
	}
	aws_reply_release(&rep);
	if (r < 0 && r != -ENOENT)
		return r;
	aws_query_add(&q, "Name", name);
	aws_query_add(&q, "Protocol", "TCP");
	aws_query_add_int(&q, "Port", API_PORT);
	aws_query_add(&q, "VpcId", capa_vpc_id(s) ? capa_vpc_id(s) : "");
	aws_query_add(&q, "TargetType", "instance");
	aws_query_add(&q, "IpAddressType", "ipv4");
	aws_query_add(&q, "HealthCheckProtocol", "TCP");
	aws_query_add(&q, "HealthCheckPort", "6443");
	aws_query_add_int(&q, "HealthCheckIntervalSeconds", 5);
	aws_query_add_int(&q, "HealthCheckTimeoutSeconds", 4);
	aws_query_add_int(&q, "HealthyThresholdCount", 2);
	aws_query_add_int(&q, "UnhealthyThresholdCount", 6);
	if ((r = capa_net_tags(s, &t, "apiserver", l->name)) >= 0 &&
	    (r = aws_query_add_tags(&q, "Tags.member", (const char *const *)t.key,
				    (const char *const *)t.value, t.n)) >= 0 &&
	    (r = v2(s, "CreateTargetGroup", &q, &rep)) >= 0)
		capa_strcpy(l->tg, sizeof(l->tg),
			    aws_xml_text(aws_xml_list(rep.result, "TargetGroups"), "TargetGroupArn"));
	capa_tags_release(&t);
	aws_reply_release(&rep);
	aws_query_release(&q);
	if (r >= 0 && !l->tg[0]) {
		str_printf(s->err, sizeof(s->err), "CreateTargetGroup: no ARN in the reply");
		r = -EBADMSG;
	}
	if (r >= 0)
		log_info("created target group", KV_S("cluster", s->name), KV_S("name", name));
	return r;
}

static int nlb_listener_create(struct capa_scope *s, struct nlb *l)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct capa_tags t = {0};
	int r;

	aws_query_add(&q, "LoadBalancerArn", l->arn);
	aws_query_add(&q, "Protocol", "TCP");
	aws_query_add_int(&q, "Port", API_PORT);
	aws_query_add(&q, "DefaultActions.member.1.Type", "forward");
	aws_query_add(&q, "DefaultActions.member.1.TargetGroupArn", l->tg);
	if ((r = capa_net_tags(s, &t, "apiserver", l->name)) >= 0 &&
	    (r = aws_query_add_tags(&q, "Tags.member", (const char *const *)t.key,
				    (const char *const *)t.value, t.n)) >= 0)
		r = v2_do(s, "CreateListener", &q);
	capa_tags_release(&t);
	aws_query_release(&q);
	return r;
}

int capa_lb_nlb_reconcile(struct capa_scope *s)
{
	const char *scheme = json_str(s->obj, "spec.controlPlaneLoadBalancer.scheme");
	const char *endpoint = json_str(s->obj, "spec.controlPlaneEndpoint.host");
	bool internal = scheme && strcmp(scheme, "internal") == 0, has_listener = false;
	struct aws_reply rep = {0};
	struct nlb l = {0};
	int r;

	nlb_name(s, l.name);
	r = nlb_describe(s, &l, &rep);
	if (r == -ENOENT && endpoint && *endpoint) {
		str_printf(s->err, sizeof(s->err),
			   "load balancer %s is gone while the control plane endpoint %s is set: "
			   "unrecoverable",
			   l.name, endpoint);
		r = -EHOSTDOWN;
		goto out;
	}
	if (r == -ENOENT)
		r = nlb_create(s, &l, internal);
	/* an active one found by the first read: that description is the status's */
	bool fresh = r >= 0 && rep.doc && strcmp(l.state, "active") == 0;
	if (r < 0 || (r = nlb_wait_active(s, &l)) < 0 ||
	    (r = nlb_listener(s, &l, &has_listener)) < 0)
		goto out;
	if (!has_listener &&
	    ((r = nlb_target_group(s, &l)) < 0 || (r = nlb_listener_create(s, &l)) < 0))
		goto out;
	if (!fresh) { /* made or waited for in this pass: read once more */
		aws_reply_release(&rep);
		if ((r = nlb_describe(s, &l, &rep)) < 0)
			goto out;
	}
	if (!l.dns[0]) {
		str_printf(s->err, sizeof(s->err), "load balancer %s has no DNS name yet", l.name);
		r = -EAGAIN;
		goto out;
	}
	r = capa_lb_publish(s,
			    &(struct capa_lb_desc){.name = l.name, .arn = l.arn, .dns = l.dns,
						   .type = "nlb", .subnets = "AvailabilityZones",
						   .subnet_field = "SubnetId"},
			    aws_xml_list(rep.result, "LoadBalancers"));
out:
	capa_scope_condition(s, CAPA_COND_LB, r >= 0, "LoadBalancerFailed");
	aws_reply_release(&rep);
	return r;
}

/* The ARNs of the load balancer's target groups (and of the one named after it, which a
 * stopped controller may have left without a listener). */
static size_t nlb_tgs(struct capa_scope *s, const struct nlb *l, char arns[][256], int *ret)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	char name[33];
	size_t n = 0;

	tg_name(l->arn, name);
	for (int pass = 0; pass < 2 && *ret >= 0; pass++) {
		if (pass == 0)
			aws_query_add(&q, "LoadBalancerArn", l->arn);
		else
			aws_query_add(&q, "Names.member.1", name);
		int r = v2(s, "DescribeTargetGroups", &q, &rep);
		aws_query_release(&q);
		if (r < 0 && r != -ENOENT)
			*ret = r;
		for (const xmlNode *it = r >= 0 ? aws_xml_list(rep.result, "TargetGroups") : NULL;
		     it && n < MAX_TGS; it = aws_xml_next(it)) {
			const char *arn = aws_xml_text(it, "TargetGroupArn");
			bool dup = false;
			for (size_t k = 0; arn && k < n; k++)
				dup |= strcmp(arns[k], arn) == 0;
			if (arn && !dup)
				capa_strcpy(arns[n++], 256, arn);
		}
		aws_reply_release(&rep);
	}
	return n;
}

int capa_lb_nlb_delete(struct capa_scope *s)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct nlb l = {0};
	char tgs[MAX_TGS][256];
	int64_t deadline = now_mono_ns() + GONE_WAIT_NS;
	size_t n;
	int r;

	nlb_name(s, l.name);
	if ((r = nlb_describe(s, &l, NULL)) == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	/* the groups first: once their listener is gone they no longer name the load balancer */
	n = nlb_tgs(s, &l, tgs, &r);
	if (r < 0)
		return r;
	aws_query_add(&q, "LoadBalancerArn", l.arn);
	r = v2(s, "DescribeListeners", &q, &rep);
	aws_query_release(&q);
	for (const xmlNode *it = r >= 0 ? aws_xml_list(rep.result, "Listeners") : NULL;
	     it && r >= 0; it = aws_xml_next(it)) {
		aws_query_add(&q, "ListenerArn", aws_xml_text(it, "ListenerArn"));
		r = v2_do(s, "DeleteListener", &q);
	}
	aws_reply_release(&rep);
	for (size_t k = 0; k < n && r >= 0; k++) {
		aws_query_add(&q, "TargetGroupArn", tgs[k]);
		if ((r = v2_do(s, "DeleteTargetGroup", &q)) == -ENOENT)
			r = 0;
	}
	if (r < 0)
		return r;
	aws_query_add(&q, "LoadBalancerArn", l.arn);
	if ((r = v2_do(s, "DeleteLoadBalancer", &q)) < 0)
		return r;
	log_info("deleting load balancer", KV_S("cluster", s->name), KV_S("name", l.name),
		 KV_S("type", "nlb"), KV_U("targetGroups", n));
	while ((r = nlb_describe(s, &l, NULL)) == 0) {
		if (now_mono_ns() > deadline) {
			str_printf(s->err, sizeof(s->err), "load balancer %s still exists", l.name);
			return -EAGAIN;
		}
		if (cancel_wait(s->x->cancel, 2 * NSEC_PER_SEC))
			return -ECANCELED;
	}
	return r == -ENOENT ? 0 : r;
}
