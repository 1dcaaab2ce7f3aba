/* The classic ELB as DescribeLoadBalancers describes it, and the plan that makes it what the
 * Service asks for (see ccm_lb.h). Nothing here makes a call. */
#include "modules/ccm/ccm_lb.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"

/* The ELB as described ----------------------------------------------------------------- */

void ccm_elb_release(struct ccm_elb *e)
{
	if (!e)
		return;
	free(e->instances);
	*e = (struct ccm_elb){0};
}

static void copy_text(const xmlNode *n, const char *path, char *dst, size_t len)
{
	const char *t = aws_xml_text(n, path);
	str_copy(dst, len, t ? t : "");
}

int ccm_elb_parse(const xmlNode *m, struct ccm_elb *e)
{
	long long v;
	size_t k;

	*e = (struct ccm_elb){0};
	copy_text(m, "LoadBalancerName", e->name, sizeof(e->name));
	if (!e->name[0])
		return -EBADMSG;
	copy_text(m, "DNSName", e->dns, sizeof(e->dns));
	copy_text(m, "Scheme", e->scheme, sizeof(e->scheme));
	copy_text(m, "VPCId", e->vpc, sizeof(e->vpc));
	for (xmlNode *d = aws_xml_list(m, "ListenerDescriptions"); d && e->n_l < CCM_LB_MAX_PORTS;
	     d = aws_xml_next(d)) {
		xmlNode *l = aws_xml_child(d, "Listener");
		struct ccm_lb_listener *x = &e->l[e->n_l++];
		if (aws_xml_int(l, "LoadBalancerPort", &v) == 0)
			x->port = (int)v;
		if (aws_xml_int(l, "InstancePort", &v) == 0)
			x->node_port = (int)v;
		copy_text(l, "Protocol", x->proto, sizeof(x->proto));
		copy_text(l, "InstanceProtocol", x->iproto, sizeof(x->iproto));
		copy_text(l, "SSLCertificateId", x->cert, sizeof(x->cert));
		for (char *c = x->proto; *c; c++)
			*c = (char)toupper((unsigned char)*c);
		for (char *c = x->iproto; *c; c++)
			*c = (char)toupper((unsigned char)*c);
	}
	xmlNode *hc = aws_xml_child(m, "HealthCheck");
	copy_text(hc, "Target", e->hc.target, sizeof(e->hc.target));
	aws_xml_int(hc, "HealthyThreshold", &e->hc.healthy);
	aws_xml_int(hc, "UnhealthyThreshold", &e->hc.unhealthy);
	aws_xml_int(hc, "Timeout", &e->hc.timeout);
	aws_xml_int(hc, "Interval", &e->hc.interval);
	for (xmlNode *s = aws_xml_list(m, "Subnets"); s && e->n_subnets < CCM_LB_MAX_SUBNETS;
	     s = aws_xml_next(s))
		copy_text(s, NULL, e->subnets[e->n_subnets++], 32);
	for (xmlNode *s = aws_xml_list(m, "SecurityGroups"); s && e->n_sgs < CCM_LB_MAX_SGS;
	     s = aws_xml_next(s))
		copy_text(s, NULL, e->sgs[e->n_sgs++], 32);
	k = aws_xml_count(m, "Instances");
	if (k > CCM_LB_MAX_INSTANCES)
		return -E2BIG;
	if (!(e->instances = calloc(k + 1, sizeof(*e->instances))))
		return -ENOMEM;
	for (xmlNode *i = aws_xml_list(m, "Instances"); i; i = aws_xml_next(i))
		copy_text(i, "InstanceId", e->instances[e->n_instances++], 32);
	for (xmlNode *b = aws_xml_list(m, "BackendServerDescriptions"); b; b = aws_xml_next(b))
		if (aws_xml_int(b, "InstancePort", &v) == 0 && aws_xml_count(b, "PolicyNames") > 0)
			for (size_t i = 0; i < e->n_l; i++)
				if (e->l[i].node_port == v)
					e->proxy_ports[i] = true;
	return 0;
}

/* The plan ------------------------------------------------------------------------------ */

void ccm_elb_plan_release(struct ccm_elb_plan *p)
{
	if (!p)
		return;
	free(p->reg);
	free(p->dereg);
	*p = (struct ccm_elb_plan){0};
}

static bool listener_equal(const struct ccm_lb_listener *a, const struct ccm_lb_listener *b)
{
	return a->port == b->port && a->node_port == b->node_port &&
	       strcmp(a->proto, b->proto) == 0 && strcmp(a->iproto, b->iproto) == 0 &&
	       strcmp(a->cert, b->cert) == 0;
}

bool ccm_lb_in_ids(const char (*ids)[32], size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ids[i], id) == 0)
			return true;
	return false;
}

bool ccm_elb_plan_empty(const struct ccm_elb_plan *p)
{
	return !p->recreate && !p->n_del && !p->n_add && !p->hc && !p->n_attach && !p->n_detach &&
	       !p->sgs && !p->n_reg && !p->n_dereg;
}

int ccm_elb_plan_make(const struct ccm_lb_spec *spec, const struct ccm_elb *have,
		      const char (*subnets)[32], size_t n_subnets, const char (*sgs)[32],
		      size_t n_sgs, const char (*ids)[32], size_t n_ids, struct ccm_elb_plan *p)
{
	*p = (struct ccm_elb_plan){0};
	if (!(p->reg = calloc(n_ids + 1, sizeof(*p->reg))) ||
	    !(p->dereg = calloc(have->n_instances + 1, sizeof(*p->dereg)))) {
		ccm_elb_plan_release(p);
		return -ENOMEM;
	}
	p->recreate = strcmp(have->scheme, spec->internal ? "internal" : "internet-facing") != 0;
	/* listeners: a changed one is deleted and made again (by its port) */
	for (size_t i = 0; i < have->n_l; i++) {
		bool keep = false;
		for (size_t k = 0; k < spec->n_l && !keep; k++)
			keep = listener_equal(&have->l[i], &spec->l[k]);
		if (!keep)
			p->del_ports[p->n_del++] = have->l[i].port;
	}
	for (size_t k = 0; k < spec->n_l; k++) {
		bool found = false;
		for (size_t i = 0; i < have->n_l && !found; i++)
			found = listener_equal(&have->l[i], &spec->l[k]);
		if (!found)
			p->add[p->n_add++] = k;
	}
	p->hc = strcmp(have->hc.target, spec->hc.target) != 0 ||
		have->hc.healthy != spec->hc.healthy || have->hc.unhealthy != spec->hc.unhealthy ||
		have->hc.timeout != spec->hc.timeout || have->hc.interval != spec->hc.interval;
	for (size_t i = 0; i < n_subnets; i++)
		if (!ccm_lb_in_ids(have->subnets, have->n_subnets, subnets[i]))
			str_copy(p->attach[p->n_attach++], 32, subnets[i]);
	for (size_t i = 0; i < have->n_subnets; i++)
		if (!ccm_lb_in_ids(subnets, n_subnets, have->subnets[i]))
			str_copy(p->detach[p->n_detach++], 32, have->subnets[i]);
	p->sgs = n_sgs != have->n_sgs;
	for (size_t i = 0; i < n_sgs && !p->sgs; i++)
		p->sgs = !ccm_lb_in_ids(have->sgs, have->n_sgs, sgs[i]);
	for (size_t i = 0; i < n_ids; i++)
		if (!ccm_lb_in_ids(have->instances, have->n_instances, ids[i]) &&
		    !ccm_lb_in_ids(p->reg, p->n_reg, ids[i]))
			str_copy(p->reg[p->n_reg++], 32, ids[i]);
	for (size_t i = 0; i < have->n_instances; i++)
		if (!ccm_lb_in_ids(ids, n_ids, have->instances[i]))
			str_copy(p->dereg[p->n_dereg++], 32, have->instances[i]);
	return 0;
}
