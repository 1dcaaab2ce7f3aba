/* The service controller's network planning (see ccm_lb.h): the subnets a load balancer goes
 * into and the security-group rules it needs. Nothing here makes a call. */
#include "modules/ccm/ccm_lb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "modules/ccm/ccm_model.h"

/* Subnets ------------------------------------------------------------------------------ */

static void subnet_tags(const xmlNode *item, const char *cluster_id, struct ccm_subnet *s)
{
	bool any_cluster = false;
	for (xmlNode *t = aws_xml_list(item, "tagSet"); t; t = aws_xml_next(t)) {
		const char *k = aws_xml_text(t, "key"), *v = aws_xml_text(t, "value");
		if (!k)
			continue;
		if (strcmp(k, "Name") == 0 && v)
			str_copy(s->name, sizeof(s->name), v);
		else if (strcmp(k, CCM_LB_ROLE_ELB) == 0)
			s->role_elb = true;
		else if (strcmp(k, CCM_LB_ROLE_INTERNAL) == 0)
			s->role_internal = true;
		else if (strncmp(k, CCM_CLUSTER_TAG_PREFIX, strlen(CCM_CLUSTER_TAG_PREFIX)) == 0) {
			any_cluster = true;
			if (!cluster_id ||
			    strcmp(k + strlen(CCM_CLUSTER_TAG_PREFIX), cluster_id) == 0)
				s->cluster_tagged = true;
		}
	}
	s->other_cluster = any_cluster && !s->cluster_tagged;
}

/* The route table of a subnet: its explicit association, else the VPC's main table. */
static const xmlNode *table_of(const xmlNode *tables, const char *subnet)
{
	const xmlNode *main_t = NULL;
	for (xmlNode *t = aws_xml_list(tables, "routeTableSet"); t; t = aws_xml_next(t))
		for (xmlNode *a = aws_xml_list(t, "associationSet"); a; a = aws_xml_next(a)) {
			const char *sid = aws_xml_text(a, "subnetId"), *m = aws_xml_text(a, "main");
			if (sid && strcmp(sid, subnet) == 0)
				return t;
			if (m && strcmp(m, "true") == 0)
				main_t = t;
		}
	return main_t;
}

static bool table_public(const xmlNode *t)
{
	for (xmlNode *r = aws_xml_list(t, "routeSet"); r; r = aws_xml_next(r)) {
		const char *g = aws_xml_text(r, "gatewayId");
		if (g && strncmp(g, "igw", 3) == 0)
			return true;
	}
	return false;
}

int ccm_subnets_from_replies(const xmlNode *subnets, const xmlNode *tables,
			     const char *cluster_id, struct ccm_subnet **ret, size_t *ret_n)
{
	size_t n = aws_xml_count(subnets, "subnetSet"), k = 0;
	struct ccm_subnet *out = calloc(n + 1, sizeof(*out));

	if (!out)
		return -ENOMEM;
	for (xmlNode *it = aws_xml_list(subnets, "subnetSet"); it && k < n; it = aws_xml_next(it)) {
		struct ccm_subnet *s = &out[k];
		const char *id = aws_xml_text(it, "subnetId"), *az = aws_xml_text(it, "availabilityZone");
		if (!id || !az) {
			free(out);
			return -EBADMSG;
		}
		str_copy(s->id, sizeof(s->id), id);
		str_copy(s->az, sizeof(s->az), az);
		const char *vpc = aws_xml_text(it, "vpcId");
		str_copy(s->vpc, sizeof(s->vpc), vpc ? vpc : "");
		const char *cidr = aws_xml_text(it, "cidrBlock");
		str_copy(s->cidr, sizeof(s->cidr), cidr ? cidr : "");
		subnet_tags(it, cluster_id, s);
		const xmlNode *t = table_of(tables, id);
		s->public_ = t && table_public(t);
		k++;
	}
	*ret = out;
	*ret_n = k;
	return 0;
}

/* upstream's tie-break between two candidates of one zone: true when b beats a */
static bool subnet_better(const struct ccm_subnet *a, const struct ccm_subnet *b, bool internal)
{
	bool ra = internal ? a->role_internal : a->role_elb;
	bool rb = internal ? b->role_internal : b->role_elb;
	if (ra != rb)
		return rb;
	if (a->cluster_tagged != b->cluster_tagged)
		return b->cluster_tagged;
	return strcmp(b->id, a->id) < 0;
}

static int cmp_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

int ccm_lb_pick_subnets(const struct ccm_subnet *s, size_t n, const struct ccm_lb_spec *spec,
			char (*ret)[32], size_t max, size_t *ret_n, char *err, size_t errlen)
{
	const struct ccm_subnet *best[CCM_LB_MAX_SUBNETS] = {0};
	size_t nb = 0;

	if (spec->n_subnets) {
		for (size_t i = 0; i < spec->n_subnets; i++) {
			const struct ccm_subnet *f = NULL;
			for (size_t k = 0; k < n && !f; k++)
				if (strcmp(s[k].id, spec->subnets[i]) == 0 ||
				    strcmp(s[k].name, spec->subnets[i]) == 0)
					f = &s[k];
			if (!f) {
				snprintf(err, errlen, "subnet %s of annotation %ssubnets not found",
					 spec->subnets[i], CCM_LB_ANN);
				return -ENOENT;
			}
			if (nb < max && nb < CCM_LB_MAX_SUBNETS)
				best[nb++] = f;
		}
	} else {
		for (size_t k = 0; k < n; k++) {
			const struct ccm_subnet *c = &s[k];
			if (c->other_cluster || (!spec->internal && !c->public_))
				continue;
			size_t z = 0;
			while (z < nb && strcmp(best[z]->az, c->az) != 0)
				z++;
			if (z == nb) {
				if (nb < max && nb < CCM_LB_MAX_SUBNETS)
					best[nb++] = c;
			} else if (subnet_better(best[z], c, spec->internal)) {
				best[z] = c;
			}
		}
	}
	if (nb == 0) {
		snprintf(err, errlen, "could not find any suitable subnets for creating the %s "
				      "load balancer",
			 spec->internal ? "internal" : "internet-facing");
		return -ENOENT;
	}
	for (size_t i = 0; i < nb; i++)
		str_copy(ret[i], 32, best[i]->id);
	qsort(ret, nb, 32, cmp_id);
	*ret_n = nb;
	return 0;
}

/* Security group rules ------------------------------------------------------------------ */

size_t ccm_lb_sg_rules(const struct ccm_lb_spec *s, struct ccm_sg_perm *ret, size_t max)
{
	size_t n = 0;
	for (size_t r = 0; r < s->n_ranges; r++) {
		for (size_t i = 0; i < s->n_l && n < max; i++) {
			bool dup = false;
			for (size_t k = 0; k < i && !dup; k++)
				dup = s->l[k].port == s->l[i].port;
			if (dup)
				continue;
			ret[n] = (struct ccm_sg_perm){.proto = "tcp", .from = s->l[i].port,
						      .to = s->l[i].port};
			str_copy(ret[n++].cidr, 64, s->ranges[r]);
		}
		if (n < max) {
			ret[n] = (struct ccm_sg_perm){.proto = "icmp", .from = 3, .to = 4};
			str_copy(ret[n++].cidr, 64, s->ranges[r]);
		}
	}
	return n;
}

size_t ccm_sg_perms_parse(const xmlNode *group, struct ccm_sg_perm *ret, size_t max)
{
	size_t n = 0;
	for (xmlNode *p = aws_xml_list(group, "ipPermissions"); p; p = aws_xml_next(p)) {
		struct ccm_sg_perm base = {0};
		long long from = -1, to = -1;
		const char *proto = aws_xml_text(p, "ipProtocol");
		str_copy(base.proto, sizeof(base.proto), proto ? proto : "");
		aws_xml_int(p, "fromPort", &from);
		aws_xml_int(p, "toPort", &to);
		base.from = (int)from;
		base.to = (int)to;
		if (strcmp(base.proto, "-1") == 0)
			base.from = base.to = -1;
		for (xmlNode *r = aws_xml_list(p, "ipRanges"); r && n < max; r = aws_xml_next(r)) {
			ret[n] = base;
			str_copy(ret[n].desc, sizeof(ret[n].desc), aws_xml_text(r, "description") ?: "");
			str_copy(ret[n++].cidr, 64, aws_xml_text(r, "cidrIp") ?: "");
		}
		for (xmlNode *g = aws_xml_list(p, "groups"); g && n < max; g = aws_xml_next(g)) {
			ret[n] = base;
			str_copy(ret[n].desc, sizeof(ret[n].desc),
				 aws_xml_text(g, "description") ?: "");
			str_copy(ret[n++].group, 32, aws_xml_text(g, "groupId") ?: "");
		}
	}
	return n;
}

bool ccm_sg_perm_equal(const struct ccm_sg_perm *a, const struct ccm_sg_perm *b)
{
	bool all = strcmp(a->proto, "-1") == 0;
	return strcmp(a->proto, b->proto) == 0 && (all || (a->from == b->from && a->to == b->to)) &&
	       strcmp(a->cidr, b->cidr) == 0 && strcmp(a->group, b->group) == 0;
}
