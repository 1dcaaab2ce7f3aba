/* The control-plane load balancer (pkg/cloud/services/elb/loadbalancer.go), classic ELB: found
 * by name or created with its listener (TCP 6443 to the instances' 6443), one subnet per zone
 * (public when internet-facing), the apiserver-lb group and CAPA's tags; after a create its
 * attributes (idle timeout 600 s, cross-zone from the spec) and health check (TCP:6443, 5 s,
 * 4 s, 2, 6). Its DNS name becomes spec.controlPlaneEndpoint (port 6443). A load balancer gone
 * while the endpoint is set is not made again (CAPA: unrecoverable). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

void capa_lb_name(const struct capa_scope *s, char out[64])
{
	const char *set = json_str(s->obj, "spec.controlPlaneLoadBalancer.name");
	char name[320];

	if (set && *set) {
		capa_strcpy(out, 64, set);
		return;
	}
	snprintf(name, sizeof(name), "%s-apiserver", s->name);
	for (char *p = name; *p; p++)
		if (*p == '.')
			*p = '-';
	if (strlen(name) <= 32) {
		capa_strcpy(out, 64, name);
		return;
	}
	capa_lb_hashed_name(s->name, out);
}

static int elb(struct capa_scope *s, const char *action, const struct aws_query *q,
	       struct aws_reply *rep)
{
	if (!str_has_prefix(action, "Describe") && !controllers_may_act(&s->x->run))
		return -ECANCELED;
	return capa_scope_call(s, AWS_SVC_ELB, action, q, rep);
}

/* DescribeLoadBalancers of one name: 0 with the reply, -ENOENT when there is none. */
static int lb_describe(struct capa_scope *s, const char *name, struct aws_reply *rep)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r;

	aws_query_add(&q, "LoadBalancerNames.member.1", name);
	r = elb(s, "DescribeLoadBalancers", &q, rep);
	aws_query_release(&q);
	if (r == -ENOENT && strcmp(s->code, "LoadBalancerNotFound") != 0)
		r = -EREMOTEIO; /* a NotFound of something else proves nothing */
	if (r == 0 && !aws_xml_list(rep->result, "LoadBalancerDescriptions")) {
		aws_reply_release(rep);
		r = -ENOENT;
	}
	return r;
}

static int lb_create(struct capa_scope *s, const char *name, bool internal, char dns[256])
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	aws_query_add(&q, "LoadBalancerName", name);
	aws_query_add(&q, "Listeners.member.1.Protocol", "TCP");
	aws_query_add_int(&q, "Listeners.member.1.LoadBalancerPort", API_PORT);
	aws_query_add(&q, "Listeners.member.1.InstanceProtocol", "TCP");
	aws_query_add_int(&q, "Listeners.member.1.InstancePort", API_PORT);
	if ((r = capa_lb_create_query(s, name, internal, &q)) < 0)
		goto out;
	if ((r = elb(s, "CreateLoadBalancer", &q, &rep)) < 0)
		goto out;
	capa_strcpy(dns, 256, aws_xml_text(rep.result, "DNSName"));
	aws_reply_release(&rep);
	aws_query_release(&q);
	log_info("created load balancer", KV_S("cluster", s->name), KV_S("name", name),
		 KV_S("dns", dns));
	/* always after a create: attributes, then the health check */
	bool cross = false;
	json_get_bool(s->obj, "spec.controlPlaneLoadBalancer.crossZoneLoadBalancing", &cross);
	aws_query_add(&q, "LoadBalancerName", name);
	aws_query_add_int(&q, "LoadBalancerAttributes.ConnectionSettings.IdleTimeout", 600);
	aws_query_add_bool(&q, "LoadBalancerAttributes.CrossZoneLoadBalancing.Enabled", cross);
	if ((r = elb(s, "ModifyLoadBalancerAttributes", &q, &rep)) < 0)
		goto out;
	aws_reply_release(&rep);
	aws_query_release(&q);
	aws_query_add(&q, "LoadBalancerName", name);
	aws_query_add(&q, "HealthCheck.Target", "TCP:6443");
	aws_query_add_int(&q, "HealthCheck.Interval", 5);
	aws_query_add_int(&q, "HealthCheck.Timeout", 4);
	aws_query_add_int(&q, "HealthCheck.HealthyThreshold", 2);
	aws_query_add_int(&q, "HealthCheck.UnhealthyThreshold", 6);
	r = elb(s, "ConfigureHealthCheck", &q, &rep);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int capa_lb_reconcile(struct capa_scope *s)
{
	struct aws_reply rep = {0};
	const char *scheme = json_str(s->obj, "spec.controlPlaneLoadBalancer.scheme");
	const char *endpoint = json_str(s->obj, "spec.controlPlaneEndpoint.host");
	bool internal = scheme && strcmp(scheme, "internal") == 0;
	char name[64], dns[256] = "";
	int r;

	if (strcmp(capa_lb_type(s), "disabled") == 0)
		return 0;
	if (strcmp(capa_lb_type(s), "nlb") == 0)
		return capa_lb_nlb_reconcile(s);
	if (strcmp(capa_lb_type(s), "classic") != 0 && strcmp(capa_lb_type(s), "elb") != 0) {
		str_printf(s->err, sizeof(s->err),
			   "loadBalancerType %s is not supported by this build (classic, nlb, disabled)",
			   capa_lb_type(s));
		r = -EOPNOTSUPP;
		goto out;
	}
	capa_lb_name(s, name);
	r = lb_describe(s, name, &rep);
	if (r == -ENOENT && endpoint && *endpoint) {
		str_printf(s->err, sizeof(s->err),
			   "load balancer %s is gone while the control plane endpoint %s is set: "
			   "unrecoverable",
			   name, endpoint);
		r = -EHOSTDOWN;
		goto out;
	}
	if (r == -ENOENT) {
		if ((r = lb_create(s, name, internal, dns)) < 0 ||
		    (r = lb_describe(s, name, &rep)) < 0)
			goto out;
	} else if (r < 0) {
		goto out;
	}
	const xmlNode *d = aws_xml_list(rep.result, "LoadBalancerDescriptions");
	capa_strcpy(dns, sizeof(dns), aws_xml_text(d, "DNSName"));
	if (!dns[0]) {
		str_printf(s->err, sizeof(s->err), "load balancer %s has no DNS name yet", name);
		r = -EAGAIN;
		goto out;
	}
	/* CAPA waits for the name to resolve (dnsResolutionCheck); moto's names never do, and
	 * the host is a name clients resolve themselves: not checked here */
	r = capa_lb_publish(s, &(struct capa_lb_desc){.name = name, .dns = dns, .type = "classic",
						     .subnets = "Subnets"},
			    d);
out:
	capa_scope_condition(s, CAPA_COND_LB, r >= 0,
			     r == -EOPNOTSUPP ? "LoadBalancerTypeNotSupported"
					      : "LoadBalancerFailed");
	aws_reply_release(&rep);
	return r;
}

int capa_lb_delete(struct capa_scope *s)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int64_t deadline = now_mono_ns() + 120 * NSEC_PER_SEC;
	char name[64];
	int r;

	if (strcmp(capa_lb_type(s), "disabled") == 0)
		return 0;
	if (strcmp(capa_lb_type(s), "nlb") == 0)
		return capa_lb_nlb_delete(s);
	capa_lb_name(s, name);
	if ((r = lb_describe(s, name, &rep)) == -ENOENT)
		return 0;
	aws_reply_release(&rep);
	if (r < 0)
		return r;
	aws_query_add(&q, "LoadBalancerName", name);
	r = elb(s, "DeleteLoadBalancer", &q, &rep);
	aws_reply_release(&rep);
	aws_query_release(&q);
	if (r < 0)
		return r;
	log_info("deleting load balancer", KV_S("cluster", s->name), KV_S("name", name));
	/* polled until gone, as CAPA */
	while ((r = lb_describe(s, name, &rep)) == 0) {
		aws_reply_release(&rep);
		if (now_mono_ns() > deadline) {
			str_printf(s->err, sizeof(s->err), "load balancer %s still exists", name);
			return -EAGAIN;
		}
		if (cancel_wait(s->x->cancel, 2 * NSEC_PER_SEC))
			return -ECANCELED;
	}
	return r == -ENOENT ? 0 : r;
}
