/* The service controller's cheap drift check (see ccm_svc.h): the load balancers of many
 * Services described together, 20 names a DescribeLoadBalancers (the most either API takes),
 * each reduced to a digest that does not depend on the order AWS lists things in. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/query.h"
#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "modules/ccm/ccm_svc.h"

#define PROBE_BATCH 20

static uint64_t h_str(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (h ^ 0xff) * 1099511628211ULL;
}

static uint64_t h_int(uint64_t h, long long v)
{
	char b[32];
	snprintf(b, sizeof(b), "%lld", v);
	return h_str(h, b);
}

#define H0 1469598103934665603ULL

/* A set's part: the sum of its members' hashes (order-free), folded in. */
static uint64_t h_set(uint64_t h, const char (*items)[32], size_t n)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += h_str(H0, items[i]);
	return h_int(h, (long long)(sum >> 1)) ^ n;
}

uint64_t ccm_svc_elb_digest(const struct ccm_elb *e)
{
	uint64_t h = h_str(h_str(h_str(h_str(H0, e->name), e->dns), e->scheme), e->vpc), sum = 0;
	for (size_t i = 0; i < e->n_l; i++) {
		const struct ccm_lb_listener *l = &e->l[i];
		uint64_t x = h_int(h_int(h_str(h_str(h_str(H0, l->proto), l->iproto), l->cert), l->port),
				   l->node_port);
		sum += h_int(x, e->proxy_ports[i]);
	}
	h = h_int(h, (long long)(sum >> 1)) ^ e->n_l;
	h = h_int(h_int(h_int(h_int(h_str(h, e->hc.target), e->hc.healthy), e->hc.unhealthy),
			e->hc.timeout),
		  e->hc.interval);
	h = h_set(h, (const char(*)[32])e->subnets, e->n_subnets);
	h = h_set(h, (const char(*)[32])e->sgs, e->n_sgs);
	h = h_set(h, (const char(*)[32])e->instances, e->n_instances);
	return h ? h : 1;
}

/* The parts of an ELBv2 load balancer's description the digest covers, as strings: ARN, DNS
 * name, scheme, state, VPC; per subnet its ID and first address's EIP allocation and private
 * address (the same from the XML of a reply and from struct elbv2_lb). */
static uint64_t v2_head(const char *arn, const char *dns, const char *scheme, const char *state,
			const char *vpc)
{
	return h_str(h_str(h_str(h_str(h_str(H0, arn), dns), scheme), state), vpc);
}

static uint64_t v2_subnet(const char *id, const char *alloc, const char *ip)
{
	return h_str(h_str(h_str(H0, id), alloc), ip);
}

static uint64_t v2_end(uint64_t h, uint64_t sum, size_t n)
{
	h = h_int(h, (long long)(sum >> 1)) ^ n;
	return h ? h : 1;
}

uint64_t ccm_svc_v2_digest(const struct elbv2_lb *lb)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < lb->n_subnets; i++)
		sum += v2_subnet(lb->subnets[i], lb->allocations[i], lb->private_ips[i]);
	return v2_end(v2_head(lb->arn, lb->dns, lb->scheme, lb->state, lb->vpc), sum, lb->n_subnets);
}

static uint64_t v2_digest(const xmlNode *m)
{
	uint64_t sum = 0;
	size_t n = 0;
	for (xmlNode *z = aws_xml_list(m, "AvailabilityZones"); z && n < 16; z = aws_xml_next(z), n++) {
		xmlNode *a = aws_xml_list(z, "LoadBalancerAddresses");
		sum += v2_subnet(aws_xml_text(z, "SubnetId"), a ? aws_xml_text(a, "AllocationId") : "",
				 a ? aws_xml_text(a, "PrivateIPv4Address") : "");
	}
	return v2_end(v2_head(aws_xml_text(m, "LoadBalancerArn"), aws_xml_text(m, "DNSName"),
			      aws_xml_text(m, "Scheme"), aws_xml_text(m, "State/Code"),
			      aws_xml_text(m, "VpcId")),
		      sum, n);
}

/* One call for the items idx[0..n) (one kind); -ENOENT when one of the names does not exist
 * (the APIs then describe none of the others either). */
static int probe_batch(struct aws_client *c, struct ccm_svc_probe *items, const size_t *idx,
		       size_t n, struct ccm_elb *elb, struct aws_error *err)
{
	bool classic = items[idx[0]].type == CCM_LB_CLASSIC;
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r = 0;

	for (size_t i = 0; i < n && r == 0; i++)
		r = aws_query_addf(&q, items[idx[i]].name,
				   classic ? "LoadBalancerNames.member.%zu" : "Names.member.%zu", i + 1);
	if (r < 0 || (r = aws_call_query(c, classic ? AWS_SVC_ELB : AWS_SVC_ELBV2,
					 "DescribeLoadBalancers", &q, &rep, err)) < 0)
		goto out;
	for (xmlNode *m = aws_xml_list(rep.result,
				       classic ? "LoadBalancerDescriptions" : "LoadBalancers");
	     m; m = aws_xml_next(m)) {
		const char *name = aws_xml_text(m, "LoadBalancerName");
		uint64_t d = 0;
		if (!name)
			continue;
		if (classic) {
			if (ccm_elb_parse(m, elb) == 0)
				d = ccm_svc_elb_digest(elb);
			ccm_elb_release(elb);
		} else {
			d = v2_digest(m);
		}
		for (size_t i = 0; i < n; i++)
			if (strcmp(items[idx[i]].name, name) == 0)
				items[idx[i]].digest = d;
	}
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int ccm_svc_probe(struct ccm_svc_ctl *ctl, struct ccm_svc_probe *items, size_t n,
		  struct aws_error *err)
{
	struct aws_client *c = ccm_cloud_client(ctl->m->cloud);
	struct ccm_elb *elb = calloc(1, sizeof(*elb));
	size_t idx[PROBE_BATCH];
	int r = elb ? 0 : -ENOMEM;

	for (size_t i = 0; i < n; i++)
		items[i].digest = 0;
	for (int kind = CCM_LB_CLASSIC; kind <= CCM_LB_NLB && r == 0; kind++) {
		size_t nb = 0;
		for (size_t i = 0; i <= n && r == 0; i++) {
			if (i < n && items[i].type == (enum ccm_lb_type)kind)
				idx[nb++] = i;
			if (nb == 0 || (i < n && nb < PROBE_BATCH))
				continue;
			r = probe_batch(c, items, idx, nb, elb, err);
			/* a name missing: the others one by one (the missing one keeps digest 0) */
			if (r == -ENOENT && nb > 1) {
				r = 0;
				for (size_t k = 0; k < nb && r == 0; k++)
					if ((r = probe_batch(c, items, &idx[k], 1, elb, err)) == -ENOENT)
						r = 0;
			}
			if (r == -ENOENT)
				r = 0;
			nb = 0;
		}
	}
	free(elb);
	return r;
}
