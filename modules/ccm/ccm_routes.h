/* The route controller's pure part: route tables parsed from DescribeRouteTables, CIDRs, and
 * the plan that turns the routes the Nodes need into CreateRoute / ReplaceRoute / DeleteRoute
 * operations on every cluster route table.
 *
 * A route is "ours" (the route controller may change or delete it) when it was made by
 * CreateRoute (origin CreateRoute, or no origin given), its destination overlaps a cluster
 * CIDR (upstream's isResponsibleForRoute: the first or last address of the route's CIDR lies in
 * a --cluster-cidr), and it targets an instance or is a blackhole. Everything else (local,
 * propagated, gateway, NAT, peering routes, and routes outside the cluster CIDRs) is left
 * alone. */
#pragma once
#include <libxml/tree.h>
#include <stdbool.h>
#include <stddef.h>

#include "modules/ccm/ccm_model.h"

#define CCM_MAX_ROUTES_PER_TABLE 10000
#define CCM_MAX_ROUTE_TABLES 200

struct ccm_cidr {
	int family; /* AF_INET or AF_INET6 */
	unsigned char ip[16];
	unsigned prefix;
};

/* "10.244.1.0/24", "fd00::/64". The address is masked to the prefix (Go's ParseCIDR). */
int ccm_cidr_parse(const char *s, struct ccm_cidr *ret);
int ccm_cidr_format(const struct ccm_cidr *c, char *buf, size_t n);
bool ccm_cidr_equal(const struct ccm_cidr *a, const struct ccm_cidr *b);
/* upstream's isResponsibleForRoute: the first or the last address of c in one of cluster. */
bool ccm_cidr_in_cluster(const struct ccm_cidr *c, const struct ccm_cidr *cluster, size_t n);
/* --cluster-cidr: one CIDR or a comma-separated dual-stack pair. */
int ccm_cidrs_parse(const char *s, struct ccm_cidr **ret, size_t *ret_n);

struct ccm_route {
	char *cidr; /* destinationCidrBlock or destinationIpv6CidrBlock, as AWS wrote it */
	struct ccm_cidr net;
	bool parsed; /* net is valid */
	char *instance_id;
	char *eni_id;
	char *other_target; /* gateway, NAT, peering... ID when the target is not an instance */
	char *state;	    /* "active", "blackhole" */
	char *origin;	    /* "CreateRouteTable", "CreateRoute", "EnableVgwRoutePropagation" */
};

struct ccm_route_table {
	char *id;
	char *vpc_id;
	struct ccm_route *routes;
	size_t n_routes;
	struct ec2_tag *tags;
	size_t n_tags;
};

void ccm_route_table_release(struct ccm_route_table *t);
void ccm_route_tables_free(struct ccm_route_table *t, size_t n);
/* Every table of a DescribeRouteTables reply, appended to *list. */
int ccm_route_tables_from_reply(const xmlNode *root, struct ccm_route_table **list, size_t *n);
bool ccm_route_is_blackhole(const struct ccm_route *r);

/* One route a Node needs: its pod CIDR to its instance. */
struct ccm_route_want {
	const char *node;
	const char *instance_id;
	const char *cidr;
};

enum ccm_route_op_kind { CCM_ROP_CREATE, CCM_ROP_REPLACE, CCM_ROP_DELETE };

struct ccm_route_op {
	enum ccm_route_op_kind kind;
	char table[64];
	char cidr[64]; /* as the route table has it (delete, replace) or the Node has it (create) */
	bool v6;
	char instance_id[32]; /* the target (create, replace); the old target (delete) */
	char node[256];	      /* the Node (create, replace) */
	const char *why;      /* "missing", "blackhole", "wrong target", "node gone", ... */
};

/* A route of ours to an instance that no Node names: the caller looks the instance up and
 * deletes the route when the instance is gone or carries the cluster tag (its Node is gone),
 * and leaves it alone when it belongs to someone else. */
struct ccm_route_orphan {
	char table[64];
	char cidr[64];
	bool v6;
	char instance_id[32];
};

/* A wanted route that a route of someone else's holds: left alone, the Node is not routed. */
struct ccm_route_blocked {
	char table[64];
	char cidr[64];
	char node[256];
};

struct ccm_route_plan {
	struct ccm_route_op *ops; /* deletes first, then replaces and creates, table by table */
	size_t n_ops;
	struct ccm_route_orphan *orphans;
	size_t n_orphans;
	struct ccm_route_blocked *blocked;
	size_t n_blocked;
	unsigned conflicts; /* = n_blocked: wanted CIDRs held by a route that is not ours */
	unsigned invalid;   /* wanted routes with a bad CIDR or two Nodes claiming one CIDR */
};

void ccm_route_plan_release(struct ccm_route_plan *p);
/* node_of(ud, instance_id): the Node whose providerID names that instance, or NULL. */
int ccm_route_plan_make(const struct ccm_route_table *tables, size_t nt,
			const struct ccm_route_want *want, size_t nw,
			const struct ccm_cidr *cluster, size_t nc,
			const char *(*node_of)(void *ud, const char *instance_id), void *ud,
			struct ccm_route_plan *ret);
/* What to do with an orphan once its instance is known: inst NULL (not found) or terminated,
 * or cluster-tagged -> delete (true); otherwise (another cluster's or untagged instance) ->
 * leave it (false). */
bool ccm_route_orphan_delete(const struct ec2_instance *inst, const char *cluster_id);
const char *ccm_route_op_name(enum ccm_route_op_kind k);
