/* The service controller's pure part: what a Service of type LoadBalancer asks for (its ports,
 * annotations and traffic policy, checked as upstream checks them), the classic ELB that
 * follows (name, listeners, health check, attributes), the subnets it goes into, the rules of
 * its security group, which Nodes it sends traffic to, and the plan that turns what AWS has
 * into what is wanted. Nothing here makes a call; ccm_svc*.c and ccm_lb_aws.c act on it.
 * ccm_lb.c: the spec and the Nodes; ccm_lb_net.c: subnets and security-group rules;
 * ccm_elb.c: the classic ELB as described and its plan. */
#pragma once
#include <cjson/cJSON.h>
#include <libxml/tree.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/aws/ec2.h"

#define CCM_LB_FINALIZER "service.kubernetes.io/load-balancer-cleanup"
#define CCM_LB_ANN "service.beta.kubernetes.io/aws-load-balancer-"
#define CCM_LB_EXCLUDE_LABEL "node.kubernetes.io/exclude-from-external-load-balancers"
#define CCM_LB_ROLE_ELB "kubernetes.io/role/elb"
#define CCM_LB_ROLE_INTERNAL "kubernetes.io/role/internal-elb"
#define CCM_LB_SVC_TAG "kubernetes.io/service-name"

#define CCM_LB_MAX_PORTS 100
#define CCM_LB_MAX_RANGES 100
#define CCM_LB_MAX_TAGS 50
#define CCM_LB_MAX_SGS 16
#define CCM_LB_MAX_SUBNETS 32
#define CCM_LB_MAX_LABELS 16
#define CCM_LB_MAX_INSTANCES 10000
#define CCM_LB_MAX_PERMS 1024 /* a group holds at most 1,000 ingress rules (AWS quota) */

enum ccm_lb_type { CCM_LB_CLASSIC, CCM_LB_NLB, CCM_LB_NONE };

struct ccm_lb_listener {
	int port;	 /* LoadBalancerPort */
	char proto[8];	 /* TCP, SSL, HTTP, HTTPS */
	int node_port;	 /* InstancePort */
	char iproto[8];	 /* InstanceProtocol */
	char cert[2048]; /* SSLCertificateId, "" for none */
};

struct ccm_lb_hc {
	char target[128]; /* "TCP:30080", "HTTP:31000/healthz" */
	long long healthy, unhealthy, timeout, interval;
};

struct ccm_lb_attrs {
	bool cross_zone;
	bool drain;
	long long drain_timeout;
	long long idle_timeout;
	bool log;
	long long log_interval;
	char log_bucket[256];
	char log_prefix[256];
};

struct ccm_lb_kv {
	char key[128];
	char value[256];
};

/* What one Service asks for. */
struct ccm_lb_spec {
	enum ccm_lb_type type;
	char name[33]; /* the load balancer's name */
	char svc[320]; /* namespace/name */
	bool internal;
	bool local; /* externalTrafficPolicy Local */
	struct ccm_lb_listener l[CCM_LB_MAX_PORTS];
	size_t n_l;
	struct ccm_lb_hc hc;
	struct ccm_lb_attrs attrs;
	bool proxy_protocol;
	char ranges[CCM_LB_MAX_RANGES][64]; /* loadBalancerSourceRanges, else 0.0.0.0/0 */
	size_t n_ranges;
	struct ccm_lb_kv tags[CCM_LB_MAX_TAGS]; /* additional-resource-tags */
	size_t n_tags;
	char sgs[CCM_LB_MAX_SGS][32]; /* security-groups: replaces the managed group */
	size_t n_sgs;
	char extra_sgs[CCM_LB_MAX_SGS][32];
	size_t n_extra_sgs;
	char subnets[CCM_LB_MAX_SUBNETS][256]; /* subnets: IDs or Name tags */
	size_t n_subnets;
	struct ccm_lb_kv node_labels[CCM_LB_MAX_LABELS]; /* target-node-labels */
	size_t n_node_labels;
};

/* "a" + the UID without dashes, cut to 32 (upstream's DefaultLoadBalancerName). */
void ccm_lb_name(const char *uid, char buf[33]);
/* True when the Service is (still) one the controller must make a load balancer for: type
 * LoadBalancer, no spec.loadBalancerClass, not being deleted. */
bool ccm_lb_wanted(const cJSON *svc);
bool ccm_lb_has_finalizer(const cJSON *svc);
/* Reads the Service. 0; -EINVAL when upstream rejects it (the reason in err, as the Event
 * says it); -ENOTSUP for the types another controller implements (nlb-ip, external). */
int ccm_lb_spec_parse(const cJSON *svc, struct ccm_lb_spec *ret, char *err, size_t errlen);
/* "k=v,k2=v2" (additional-resource-tags, target-node-labels) into at most max pairs. */
int ccm_lb_split_kv(const char *s, struct ccm_lb_kv *out, size_t max, size_t *n);
/* The annotation service.beta.kubernetes.io/aws-load-balancer-<suffix>, or NULL. */
const char *ccm_lb_ann(const cJSON *svc, const char *suffix);
/* "a, b ,c" -> trimmed items into a table of max rows of width bytes; -E2BIG past it. */
int ccm_lb_split_list(const char *s, char *out, size_t width, size_t max, size_t *n);
/* The port (by number or name) is in the ssl-ports annotation (NULL: every port). */
bool ccm_lb_in_ssl_ports(const char *ssl_ports, int port, const char *name);
/* A Node the load balancer sends traffic to: Ready, schedulable, not excluded by the label,
 * carrying every target-node-label, with an AWS providerID (its instance ID to *id). */
bool ccm_lb_node_eligible(const cJSON *node, const struct ccm_lb_spec *s, char *id, size_t n);

/* Subnets, from DescribeSubnets and the route tables (public: its table, or the main one,
 * routes to an igw-). */
struct ccm_subnet {
	char id[32];
	char az[64];
	char vpc[32];
	char cidr[64];
	char name[256]; /* the Name tag */
	bool public_;
	bool cluster_tagged; /* kubernetes.io/cluster/<this cluster> */
	bool other_cluster;  /* only kubernetes.io/cluster/<another> */
	bool role_elb, role_internal;
};
/* Parses a DescribeSubnets reply and marks public subnets from a DescribeRouteTables reply of
 * the same VPC. */
int ccm_subnets_from_replies(const xmlNode *subnets, const xmlNode *tables,
			     const char *cluster_id, struct ccm_subnet **ret, size_t *ret_n);
/* Upstream's subnet choice: cluster-tagged or untagged, public only for internet-facing, one
 * per zone (role tag, then cluster tag, then lowest ID); with the subnets annotation those
 * named (by ID or Name tag). Sorted by ID. -ENOENT (err says why) when none fits. */
int ccm_lb_pick_subnets(const struct ccm_subnet *s, size_t n, const struct ccm_lb_spec *spec,
			char (*ret)[32], size_t max, size_t *ret_n, char *err, size_t errlen);

/* A security group rule: one protocol/port range from one CIDR or one group. */
struct ccm_sg_perm {
	char proto[8]; /* "tcp", "icmp", "-1" */
	int from, to;
	char cidr[64];
	char group[32];
	char desc[96]; /* the rule's description (NLB node rules); not compared */
};
/* The ingress of the ELB's own group: each listener port from each source range, and ICMP
 * type 3 code 4 (fragmentation needed) from each. */
size_t ccm_lb_sg_rules(const struct ccm_lb_spec *s, struct ccm_sg_perm *ret, size_t max);
/* Every ingress rule of a DescribeSecurityGroups item (ipPermissions). */
size_t ccm_sg_perms_parse(const xmlNode *group, struct ccm_sg_perm *ret, size_t max);
bool ccm_sg_perm_equal(const struct ccm_sg_perm *a, const struct ccm_sg_perm *b);

/* A classic ELB as DescribeLoadBalancers describes it. */
struct ccm_elb {
	char name[33];
	char dns[256];
	char scheme[32];
	char vpc[32];
	struct ccm_lb_listener l[CCM_LB_MAX_PORTS];
	size_t n_l;
	struct ccm_lb_hc hc;
	char subnets[CCM_LB_MAX_SUBNETS][32];
	size_t n_subnets;
	char sgs[CCM_LB_MAX_SGS][32];
	size_t n_sgs;
	char (*instances)[32];
	size_t n_instances;
	bool proxy_ports[CCM_LB_MAX_PORTS]; /* per listener: its backend has the policy */
};
void ccm_elb_release(struct ccm_elb *e);
/* One <member> of LoadBalancerDescriptions. */
int ccm_elb_parse(const xmlNode *member, struct ccm_elb *ret);

/* The changes that make an existing ELB what spec wants (everything is compared; nothing is
 * kept from an earlier sync). */
struct ccm_elb_plan {
	bool recreate; /* the scheme differs: AWS cannot change it */
	int del_ports[CCM_LB_MAX_PORTS]; /* listeners to delete, by LoadBalancerPort */
	size_t n_del;
	size_t add[CCM_LB_MAX_PORTS]; /* indexes into spec->l of listeners to create */
	size_t n_add;
	bool hc;			      /* ConfigureHealthCheck */
	char attach[CCM_LB_MAX_SUBNETS][32];  /* AttachLoadBalancerToSubnets */
	size_t n_attach;
	char detach[CCM_LB_MAX_SUBNETS][32];  /* DetachLoadBalancerFromSubnets */
	size_t n_detach;
	bool sgs;			      /* ApplySecurityGroupsToLoadBalancer */
	char (*reg)[32];		      /* instances to register */
	size_t n_reg;
	char (*dereg)[32];		      /* and to deregister */
	size_t n_dereg;
};
void ccm_elb_plan_release(struct ccm_elb_plan *p);
/* subnets and sgs: the chosen ones; ids: the eligible instances. */
int ccm_elb_plan_make(const struct ccm_lb_spec *spec, const struct ccm_elb *have,
		      const char (*subnets)[32], size_t n_subnets, const char (*sgs)[32],
		      size_t n_sgs, const char (*ids)[32], size_t n_ids, struct ccm_elb_plan *ret);
bool ccm_elb_plan_empty(const struct ccm_elb_plan *p);
/* id is one of ids. */
bool ccm_lb_in_ids(const char (*ids)[32], size_t n, const char *id);
