/* The AWSCluster controller's internal contract: capa_cluster.c (the Kubernetes side: store,
 * owner, pause, finalizer, status writes) hands one reconcile's scope to capa_net.c (VPC,
 * subnets, gateways, route tables), capa_sg.c (security groups) and their delete paths. */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/aws/client.h"
#include "common/aws/xml.h"
#include "modules/capa/capa.h"

#define CAPA_MAX_ZONES 16
#define CAPA_MAX_SUBNETS 64

/* AWSCluster condition types (api/v1beta2/conditions_consts.go) */
#define CAPA_COND_VPC "VpcReady"
#define CAPA_COND_SUBNETS "SubnetsReady"
#define CAPA_COND_IGW "InternetGatewayReady"
#define CAPA_COND_NAT "NatGatewaysReady"
#define CAPA_COND_RT "RouteTablesReady"
#define CAPA_COND_SG "ClusterSecurityGroupsReady"
#define CAPA_COND_LB "LoadBalancerReady"
#define CAPA_COND_BASTION "BastionHostReady"

/* One reconcile of one AWSCluster. */
struct capa_scope {
	struct capa_ctx *x;
	cJSON *obj;		 /* a working copy of the AWSCluster: spec and status change */
	const cJSON *cluster;	 /* the owner Cluster */
	const char *name;	 /* the Cluster's name: <c> of every AWS name and tag */
	const char *region;	 /* spec.region (NULL: the client's) */
	bool spec_changed;	 /* spec.network was filled: written back */
	/* found or made by the network steps, read by the later ones */
	char igw[32];
	char sg_apilb[32];		  /* the apiserver-lb group */
	char nat_ips[CAPA_MAX_ZONES][48]; /* public IPs of the NAT gateways */
	size_t n_nat_ips;
	char err[512];		 /* what failed, for the condition message and the log */
	char code[128];		 /* the AWS error code of the last failed call */
	bool unmanaged;		 /* spec.network.vpc.id is not the cluster's (capa_net_byo.c) */
};

/* The network (capa_net.c): VPC, subnets, IGW, NAT gateways, route tables, in CAPA's order,
 * each step setting its condition. 0 when all are in place; < 0 with s->err. */
int capa_net_reconcile(struct capa_scope *s);
/* Deletes what capa_net_reconcile made, in reverse (route tables, NAT gateways, EIPs, IGW,
 * subnets, VPC). 0 when nothing is left; < 0 with s->err (retry). */
int capa_net_delete(struct capa_scope *s);

/* Security groups (capa_sg.c): CAPA's groups per role with their rules; their IDs in
 * status.networkStatus.securityGroups. */
int capa_sg_reconcile(struct capa_scope *s);
/* Revokes every cluster-owned group's ingress, then deletes them. */
int capa_sg_delete(struct capa_scope *s);

/* Helpers of the network steps (capa_net.c). */
/* The cluster's owned tag key ("sigs.k8s.io/cluster-api-provider-aws/cluster/<c>"). */
void capa_owned_key(const struct capa_scope *s, char *buf, size_t n);
/* A Describe call in the scope's region whose error is written to s->err. */
int capa_scope_ec2(struct capa_scope *s, const char *action, const struct aws_query *q,
		   struct aws_reply *rep);
/* spec.network.vpc.id, or NULL. */
const char *capa_vpc_id(const struct capa_scope *s);
/* The working copy's status and spec.network objects (made when absent; NULL: no memory). */
cJSON *capa_scope_status(struct capa_scope *s);
cJSON *capa_scope_network(struct capa_scope *s);
/* Sets a condition on the working copy's status. */
void capa_scope_condition(struct capa_scope *s, const char *type, bool ok, const char *reason);

/* BLAKE2b (RFC 7693, unkeyed) with an outlen-byte digest (1..64). */
void capa_blake2b(const void *data, size_t len, uint8_t *out, size_t outlen);
/* CAPA's hashed load-balancer name of a name (28 base-36 characters and "-k8s"). */
void capa_lb_hashed_name(const char *name, char out[33]);
/* The classic API load balancer's name: spec.controlPlaneLoadBalancer.name, else
 * "<c>-apiserver" (dots as dashes), hashed when longer than 32. */
void capa_lb_name(const struct capa_scope *s, char out[64]);

/* The control-plane load balancer (capa_lb.c): a classic ELB, its attributes and health check,
 * spec.controlPlaneEndpoint and status.networkStatus.apiServerElb. */
int capa_lb_reconcile(struct capa_scope *s);
int capa_lb_delete(struct capa_scope *s);
/* spec.controlPlaneLoadBalancer.loadBalancerType ("classic" when not set). */
const char *capa_lb_type(const struct capa_scope *s);
/* The NLB (capa_lb_nlb.c): the load balancer, its target group and listener; its delete. */
int capa_lb_nlb_reconcile(struct capa_scope *s);
int capa_lb_nlb_delete(struct capa_scope *s);
/* Of a new API load balancer: Scheme, one subnet per zone, the apiserver-lb group, tags. */
int capa_lb_create_query(struct capa_scope *s, const char *name, bool internal,
			 struct aws_query *q);
/* spec.controlPlaneEndpoint from the load balancer's DNS name (port 6443). */
int capa_lb_endpoint(struct capa_scope *s, const char *dns);
/* status.networkStatus.apiServerElb of a found load balancer (d: its description; subnets:
 * the list of its subnets, subnet_field: the ID in each item, NULL for the item's text), then
 * spec.controlPlaneEndpoint (capa_lb_util.c). */
struct capa_lb_desc {
	const char *name, *arn, *dns, *type, *subnets, *subnet_field;
};
int capa_lb_publish(struct capa_scope *s, const struct capa_lb_desc *l, const xmlNode *d);
/* A call to any Query service in the scope's region, its error in s->err (and its code in
 * s->code). */
int capa_scope_call(struct capa_scope *s, enum aws_service svc, const char *action,
		    const struct aws_query *q, struct aws_reply *rep);

/* CAPA's default subnet layout (pkg/internal/cidr): the VPC CIDR cut into zones+1 blocks, the
 * first cut again into `zones` public subnets, the others the private ones. -EINVAL for a bad
 * or too small CIDR. Each out string holds "a.b.c.d/n". */
int capa_default_subnets(const char *vpc_cidr, int zones, char pub[][20], char priv[][20]);

/* What the ccm made for the cluster's Services (capa_gc.c): its load balancers (classic and v2,
 * tagged kubernetes.io/cluster/<c>=owned, in the VPC) polled until gone, then its security
 * groups after the rules naming them; skipped when the AWSCluster has the annotation
 * CAPA_GC_ANNOTATION: "false". 0 when nothing is left; < 0 with s->err (retry). */
#define CAPA_GC_ANNOTATION "aws.cluster.x-k8s.io/external-resource-gc"
int capa_gc_delete(struct capa_scope *s);
/* How many AWSMachines labelled cluster.x-k8s.io/cluster-name=<c> are left in the AWSCluster's
 * namespace (0 or 1: one is enough to wait), or -errno with s->err. */
int capa_gc_machines_left(struct capa_scope *s);

/* The bastion host (capa_bastion.c): made, kept or (disabled) terminated; status.bastion and
 * BastionHostReady. The delete terminates it and waits for it. */
int capa_bastion_reconcile(struct capa_scope *s);
int capa_bastion_delete(struct capa_scope *s);
/* spec.bastion.enabled */
bool capa_bastion_enabled(const struct capa_scope *s);

/* After a failed step: the Ready condition False with the reason and severity of the most
 * severe failed step, status.ready unchanged, as CAPA (capa_summary.c). */
void capa_cluster_ready_false(struct capa_scope *s);

/* The ID at path (e.g. "vpc/vpcId") of a create reply copied into out (n bytes): -EBADMSG with
 * "<what> reply without a <field>" in s->err when it is missing, empty or too long
 * (capa_reply.c). */
int capa_reply_id(struct capa_scope *s, const xmlNode *result, const char *path,
		  const char *what, char *out, size_t n);
