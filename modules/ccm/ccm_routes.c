/* Route tables, CIDRs and the route plan: pure functions. */
#include "modules/ccm/ccm_routes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"

/* CIDRs -------------------------------------------------------------------------------- */

int ccm_cidr_parse(const char *s, struct ccm_cidr *ret)
{
	char addr[INET6_ADDRSTRLEN];
	struct ccm_cidr c = {0};
	long long prefix;
	const char *slash;

	if (!s || !(slash = strchr(s, '/')) || (size_t)(slash - s) >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, s, (size_t)(slash - s));
	addr[slash - s] = 0;
	c.family = strchr(addr, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(c.family, addr, c.ip) != 1)
		return -EINVAL;
	unsigned bits = c.family == AF_INET ? 32 : 128;
	if (str_to_ll(slash + 1, 0, bits, &prefix) < 0)
		return -EINVAL;
	c.prefix = (unsigned)prefix;
	size_t bytes = bits / 8;
	for (size_t k = 0; k < bytes; k++) {
		unsigned keep = c.prefix > k * 8 ? c.prefix - (unsigned)k * 8 : 0;
		unsigned char mask = keep >= 8 ? 0xff : (unsigned char)(0xff << (8 - keep));
		c.ip[k] &= mask;
	}
	*ret = c;
	return 0;
}

int ccm_cidr_format(const struct ccm_cidr *c, char *buf, size_t n)
{
	char a[INET6_ADDRSTRLEN];
	if (!inet_ntop(c->family, c->ip, a, sizeof(a)))
		return -EINVAL;
	int r = str_printf(buf, n, "%s/%u", a, c->prefix);
	return r < 0 ? r : 0;
}

bool ccm_cidr_equal(const struct ccm_cidr *a, const struct ccm_cidr *b)
{
	size_t len = a->family == AF_INET ? 4 : 16;
	return a->family == b->family && a->prefix == b->prefix && memcmp(a->ip, b->ip, len) == 0;
}

static bool contains(const struct ccm_cidr *net, const unsigned char *ip)
{
	unsigned full = net->prefix / 8, rest = net->prefix % 8;
	if (memcmp(net->ip, ip, full) != 0)
		return false;
	if (rest == 0)
		return true;
	unsigned char mask = (unsigned char)(0xff << (8 - rest));
	return (net->ip[full] & mask) == (ip[full] & mask);
}

bool ccm_cidr_in_cluster(const struct ccm_cidr *c, const struct ccm_cidr *cluster, size_t n)
{
	unsigned char last[16];
	size_t len = c->family == AF_INET ? 4 : 16;

	memcpy(last, c->ip, len);
	for (size_t k = 0; k < len; k++) {
		unsigned keep = c->prefix > k * 8 ? c->prefix - (unsigned)k * 8 : 0;
		unsigned char mask = keep >= 8 ? 0xff : (unsigned char)(0xff << (8 - keep));
		last[k] |= (unsigned char)~mask;
	}
	for (size_t k = 0; k < n; k++)
		if (cluster[k].family == c->family &&
		    (contains(&cluster[k], c->ip) || contains(&cluster[k], last)))
			return true;
	return false;
}

int ccm_cidrs_parse(const char *s, struct ccm_cidr **ret, size_t *ret_n)
{
	_cleanup_strv_ char **parts = NULL;
	struct ccm_cidr *out;
	size_t n;
	int r;

	if ((r = strv_split(s ? s : "", ',', &parts)) < 0)
		return r;
	n = strv_len(parts);
	if (n == 0 || n > 2)
		return -EINVAL;
	if (!(out = calloc(n, sizeof(*out))))
		return -ENOMEM;
	for (size_t k = 0; k < n; k++)
		if (ccm_cidr_parse(parts[k], &out[k]) < 0) {
			free(out);
			return -EINVAL;
		}
	if (n == 2 && out[0].family == out[1].family) {
		free(out); /* upstream: dual-stack needs one of each family */
		return -EINVAL;
	}
	*ret = out;
	*ret_n = n;
	return 0;
}

/* Route tables ------------------------------------------------------------------------- */

static void route_release(struct ccm_route *r)
{
	free(r->cidr);
	free(r->instance_id);
	free(r->eni_id);
	free(r->other_target);
	free(r->state);
	free(r->origin);
}

void ccm_route_table_release(struct ccm_route_table *t)
{
	if (!t)
		return;
	free(t->id);
	free(t->vpc_id);
	for (size_t k = 0; k < t->n_routes; k++)
		route_release(&t->routes[k]);
	free(t->routes);
	for (size_t k = 0; k < t->n_tags; k++) {
		free(t->tags[k].key);
		free(t->tags[k].value);
	}
	free(t->tags);
	*t = (struct ccm_route_table){0};
}

void ccm_route_tables_free(struct ccm_route_table *t, size_t n)
{
	for (size_t k = 0; k < n; k++)
		ccm_route_table_release(&t[k]);
	free(t);
}

static int dup_text(const xmlNode *n, const char *path, char **dst)
{
	const char *t = aws_xml_text(n, path);
	if (!t || !*t)
		return 0;
	return (*dst = strdup(t)) ? 0 : -ENOMEM;
}

static const char *const other_targets[] = {
    "gatewayId",
    "natGatewayId",
    "transitGatewayId",
    "vpcPeeringConnectionId",
    "egressOnlyInternetGatewayId",
    "carrierGatewayId",
    "localGatewayId",
    "coreNetworkArn",
    "vpcEndpointId",
};

static int route_from_xml(const xmlNode *it, struct ccm_route *r)
{
	int e;

	if ((e = dup_text(it, "destinationCidrBlock", &r->cidr)) < 0 ||
	    (!r->cidr && (e = dup_text(it, "destinationIpv6CidrBlock", &r->cidr)) < 0) ||
	    (e = dup_text(it, "instanceId", &r->instance_id)) < 0 ||
	    (e = dup_text(it, "networkInterfaceId", &r->eni_id)) < 0 ||
	    (e = dup_text(it, "state", &r->state)) < 0 ||
	    (e = dup_text(it, "origin", &r->origin)) < 0)
		return e;
	for (size_t k = 0; k < ARRAY_SIZE(other_targets) && !r->other_target; k++)
		if ((e = dup_text(it, other_targets[k], &r->other_target)) < 0)
			return e;
	if (r->cidr && ccm_cidr_parse(r->cidr, &r->net) == 0)
		r->parsed = true;
	return 0;
}

static int table_from_xml(const xmlNode *it, struct ccm_route_table *t)
{
	size_t n;
	int e;

	if ((e = dup_text(it, "routeTableId", &t->id)) < 0 ||
	    (e = dup_text(it, "vpcId", &t->vpc_id)) < 0)
		return e;
	if (!t->id)
		return -EBADMSG;
	n = aws_xml_count(it, "routeSet");
	if (n > CCM_MAX_ROUTES_PER_TABLE)
		return -E2BIG;
	if (n && !(t->routes = calloc(n, sizeof(*t->routes))))
		return -ENOMEM;
	for (xmlNode *r = aws_xml_list(it, "routeSet"); r && t->n_routes < n; r = aws_xml_next(r))
		if ((e = route_from_xml(r, &t->routes[t->n_routes++])) < 0)
			return e;
	n = aws_xml_count(it, "tagSet");
	if (n > EC2_MAX_TAGS)
		return -E2BIG;
	if (n && !(t->tags = calloc(n, sizeof(*t->tags))))
		return -ENOMEM;
	for (xmlNode *g = aws_xml_list(it, "tagSet"); g && t->n_tags < n; g = aws_xml_next(g)) {
		const char *k = aws_xml_text(g, "key"), *v = aws_xml_text(g, "value");
		if (!k)
			continue;
		struct ec2_tag *tag = &t->tags[t->n_tags++];
		if (!(tag->key = strdup(k)) || !(tag->value = strdup(v ? v : "")))
			return -ENOMEM;
	}
	return 0;
}

int ccm_route_tables_from_reply(const xmlNode *root, struct ccm_route_table **list, size_t *n)
{
	int r;

	for (xmlNode *it = aws_xml_list(root, "routeTableSet"); it; it = aws_xml_next(it)) {
		if (*n >= CCM_MAX_ROUTE_TABLES)
			return -E2BIG;
		struct ccm_route_table *l = reallocarray(*list, *n + 1, sizeof(**list));
		if (!l)
			return -ENOMEM;
		*list = l;
		l[*n] = (struct ccm_route_table){0};
		r = table_from_xml(it, &l[*n]);
		(*n)++; /* released by the caller even when half filled */
		if (r < 0)
			return r;
	}
	return 0;
}

bool ccm_route_is_blackhole(const struct ccm_route *r)
{
	return r->state && strcmp(r->state, "blackhole") == 0;
}

/* The plan ----------------------------------------------------------------------------- */

void ccm_route_plan_release(struct ccm_route_plan *p)
{
	free(p->ops);
	free(p->orphans);
	free(p->blocked);
	*p = (struct ccm_route_plan){0};
}

const char *ccm_route_op_name(enum ccm_route_op_kind k)
{
	switch (k) {
	case CCM_ROP_CREATE:
		return "create";
	case CCM_ROP_REPLACE:
		return "replace";
	case CCM_ROP_DELETE:
		return "delete";
	}
	return "?";
}

static bool route_is_ours(const struct ccm_route *r, const struct ccm_cidr *cluster, size_t nc)
{
	if (!r->parsed)
		return false;
	if (r->origin && strcmp(r->origin, "CreateRoute") != 0)
		return false;
	if (!ccm_cidr_in_cluster(&r->net, cluster, nc))
		return false;
	return r->instance_id || r->eni_id || ccm_route_is_blackhole(r);
}

static int push_op(struct ccm_route_plan *p, enum ccm_route_op_kind kind, const char *table,
		   const char *cidr, bool v6, const char *inst, const char *node, const char *why)
{
	struct ccm_route_op *o = reallocarray(p->ops, p->n_ops + 1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	p->ops = o;
	o = &o[p->n_ops++];
	*o = (struct ccm_route_op){.kind = kind, .v6 = v6, .why = why};
	str_copy(o->table, sizeof(o->table), table);
	str_copy(o->cidr, sizeof(o->cidr), cidr);
	str_copy(o->instance_id, sizeof(o->instance_id), inst ? inst : "");
	str_copy(o->node, sizeof(o->node), node ? node : "");
	return 0;
}

static int push_blocked(struct ccm_route_plan *p, const char *table, const char *cidr,
			const char *node)
{
	struct ccm_route_blocked *b = reallocarray(p->blocked, p->n_blocked + 1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	p->blocked = b;
	b = &b[p->n_blocked++];
	*b = (struct ccm_route_blocked){0};
	str_copy(b->table, sizeof(b->table), table);
	str_copy(b->cidr, sizeof(b->cidr), cidr);
	str_copy(b->node, sizeof(b->node), node);
	p->conflicts++;
	return 0;
}

struct want_parsed {
	const struct ccm_route_want *w;
	struct ccm_cidr net;
	bool ok, clash;
};

int ccm_route_plan_make(const struct ccm_route_table *tables, size_t nt,
			const struct ccm_route_want *want, size_t nw,
			const struct ccm_cidr *cluster, size_t nc,
			const char *(*node_of)(void *ud, const char *instance_id), void *ud,
			struct ccm_route_plan *ret)
{
	struct ccm_route_plan p = {0};
	_cleanup_free_ struct want_parsed *wp = NULL;
	_cleanup_free_ bool *used = NULL;
	int r = 0;

	if (nw && !(wp = calloc(nw, sizeof(*wp))))
		return -ENOMEM;
	for (size_t k = 0; k < nw; k++) {
		wp[k].w = &want[k];
		if (!want[k].instance_id || !*want[k].instance_id ||
		    ccm_cidr_parse(want[k].cidr, &wp[k].net) < 0) {
			p.invalid++;
			continue;
		}
		wp[k].ok = true;
	}
	/* two Nodes claiming one CIDR: neither gets a route until IPAM is fixed */
	for (size_t k = 0; k < nw; k++) {
		bool clash = false;
		for (size_t j = 0; j < nw && wp[k].ok && !clash; j++)
			clash = j != k && wp[j].ok && ccm_cidr_equal(&wp[j].net, &wp[k].net) &&
				strcmp(wp[j].w->instance_id, want[k].instance_id) != 0;
		if (clash) {
			wp[k].clash = true;
			p.invalid++;
		}
	}
	for (size_t k = 0; k < nw; k++)
		if (wp[k].clash)
			wp[k].ok = false;

	for (size_t t = 0; t < nt; t++) {
		const struct ccm_route_table *tb = &tables[t];
		size_t first_op = p.n_ops;
		free(used);
		if (!(used = calloc(tb->n_routes + 1, sizeof(*used)))) {
			r = -ENOMEM;
			goto fail;
		}
		/* creates and replaces: every wanted route */
		for (size_t k = 0; k < nw; k++) {
			if (!wp[k].ok)
				continue;
			/* a duplicate entry (same node, same CIDR) is handled once */
			bool dup = false;
			for (size_t j = 0; j < k && !dup; j++)
				dup = wp[j].ok && ccm_cidr_equal(&wp[j].net, &wp[k].net);
			if (dup)
				continue;
			const struct ccm_route *ex = NULL;
			for (size_t i = 0; i < tb->n_routes; i++)
				if (tb->routes[i].parsed &&
				    ccm_cidr_equal(&tb->routes[i].net, &wp[k].net)) {
					ex = &tb->routes[i];
					used[i] = true;
					break;
				}
			bool v6 = wp[k].net.family == AF_INET6;
			const char *inst = wp[k].w->instance_id, *node = wp[k].w->node;
			if (!ex) {
				r = push_op(&p, CCM_ROP_CREATE, tb->id, wp[k].w->cidr, v6, inst,
					    node, "missing");
			} else if (!route_is_ours(ex, cluster, nc)) {
				/* a gateway, peering, local... route: not ours */
				r = push_blocked(&p, tb->id, wp[k].w->cidr, node);
			} else if (ccm_route_is_blackhole(ex)) {
				r = push_op(&p, CCM_ROP_REPLACE, tb->id, ex->cidr, v6, inst, node,
					    "blackhole");
			} else if (ex->instance_id && strcmp(ex->instance_id, inst) == 0) {
				/* in place */
			} else if (ex->instance_id) {
				r = push_op(&p, CCM_ROP_REPLACE, tb->id, ex->cidr, v6, inst, node,
					    "wrong target");
			} else {
				/* an ENI-only route (an interface the instance may own): left alone
				 * unless the caller's node_of knows the interface */
				const char *owner = node_of ? node_of(ud, ex->eni_id) : NULL;
				if (!owner)
					r = push_blocked(&p, tb->id, wp[k].w->cidr, node);
				else if (strcmp(owner, node) != 0)
					r = push_op(&p, CCM_ROP_REPLACE, tb->id, ex->cidr, v6, inst,
						    node, "wrong target");
			}
			if (r < 0)
				goto fail;
		}
		/* deletes: routes of ours that no Node wants any more */
		for (size_t i = 0; i < tb->n_routes; i++) {
			const struct ccm_route *rt = &tb->routes[i];
			if (used[i] || !route_is_ours(rt, cluster, nc))
				continue;
			bool v6 = rt->net.family == AF_INET6;
			if (ccm_route_is_blackhole(rt)) {
				r = push_op(&p, CCM_ROP_DELETE, tb->id, rt->cidr, v6,
					    rt->instance_id, NULL, "blackhole");
			} else if (rt->instance_id) {
				if (node_of && node_of(ud, rt->instance_id)) {
					/* the Node exists and no longer has this CIDR */
					r = push_op(&p, CCM_ROP_DELETE, tb->id, rt->cidr, v6,
						    rt->instance_id, NULL, "not the node's CIDR");
				} else {
					struct ccm_route_orphan *o =
					    reallocarray(p.orphans, p.n_orphans + 1, sizeof(*o));
					if (!o) {
						r = -ENOMEM;
						goto fail;
					}
					p.orphans = o;
					o = &o[p.n_orphans++];
					*o = (struct ccm_route_orphan){.v6 = v6};
					str_copy(o->table, sizeof(o->table), tb->id);
					str_copy(o->cidr, sizeof(o->cidr), rt->cidr);
					str_copy(o->instance_id, sizeof(o->instance_id),
						 rt->instance_id);
				}
			} else if (node_of && node_of(ud, rt->eni_id)) {
				r = push_op(&p, CCM_ROP_DELETE, tb->id, rt->cidr, v6, NULL, NULL,
					    "not the node's CIDR");
			}
			/* else an ENI route nobody can map: skipped */
			if (r < 0)
				goto fail;
		}
		/* deletes first within the table: a CIDR freed by one node may be wanted by
		 * another only through a replace, so the order matters only for clarity */
		for (size_t a = first_op + 1; a < p.n_ops; a++) {
			struct ccm_route_op op = p.ops[a];
			size_t b = a;
			while (b > first_op && op.kind == CCM_ROP_DELETE &&
			       p.ops[b - 1].kind != CCM_ROP_DELETE) {
				p.ops[b] = p.ops[b - 1];
				b--;
			}
			p.ops[b] = op;
		}
	}
	*ret = p;
	return 0;
fail:
	ccm_route_plan_release(&p);
	return r;
}

bool ccm_route_orphan_delete(const struct ec2_instance *inst, const char *cluster_id)
{
	if (!inst || !ccm_instance_exists(inst))
		return true;
	if (!cluster_id || !*cluster_id)
		return false; /* untagged mode: we cannot tell whose it is */
	return ccm_tags_have_cluster(inst->tags, inst->n_tags, cluster_id);
}
