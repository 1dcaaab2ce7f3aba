/* Elastic Load Balancing v2 (API 2015-12-01, the Query protocol) for network load balancers:
 * the load balancer, its listeners, instance target groups and their targets, attributes and
 * tags. Each call is one blocking request through aws_call_query (ELB classic shares the
 * signing name; the Version field tells them apart). Nothing logs; AWS's code and message are
 * in err, mapped onto -errno by the client (LoadBalancerNotFound, TargetGroupNotFound:
 * -ENOENT; Duplicate*: -EEXIST; ResourceInUse: -EBUSY).
 *
 *   struct elbv2_lb lb;
 *   if ((r = elbv2_lb_describe(c, "a1b2...", &lb, &err)) == -ENOENT) ... create
 *   struct elbv2_listener *ls; size_t n;
 *   elbv2_listeners_describe(c, lb.arn, &ls, &n, &err); ... free(ls);
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/aws/client.h"

#define ELBV2_ARN_MAX 256
#define ELBV2_NAME_MAX 33 /* 32 characters */
#define ELBV2_MAX_ITEMS 400 /* listeners, target groups, targets per reply that we keep */

struct elbv2_lb {
	char arn[ELBV2_ARN_MAX];
	char name[ELBV2_NAME_MAX];
	char dns[256];
	char scheme[32]; /* internet-facing, internal */
	char type[16];	 /* network, application */
	char state[32];	 /* provisioning, active, failed... */
	char vpc[32];
	/* per subnet: its zone, and the first address's EIP allocation and private address */
	char subnets[16][32];
	char zones[16][64];
	char allocations[16][32];
	char private_ips[16][64];
	size_t n_subnets;
	char sgs[16][32]; /* SecurityGroups: none when made without (AWS cannot add them later) */
	size_t n_sgs;
};

struct elbv2_hc {
	char protocol[8]; /* TCP, HTTP, HTTPS */
	char port[16];	  /* "traffic-port" or a number */
	char path[256];	  /* HTTP(S) only */
	long long interval, timeout, healthy, unhealthy;
};

struct elbv2_tg {
	char arn[ELBV2_ARN_MAX];
	char name[ELBV2_NAME_MAX];
	char protocol[8]; /* TCP, UDP, TCP_UDP, TLS */
	int port;
	char target_type[16];
	char vpc[32];
	struct elbv2_hc hc;
};

struct elbv2_listener {
	char arn[ELBV2_ARN_MAX];
	int port;
	char protocol[8];
	char tg_arn[ELBV2_ARN_MAX]; /* the forward action's target group */
	char cert[2048];	    /* the first certificate, TLS only */
	char ssl_policy[128];
};

struct elbv2_kv {
	const char *key, *value;
};

/* One subnet of a new load balancer, with an optional EIP or private address. */
struct elbv2_subnet_mapping {
	const char *subnet;
	const char *allocation; /* eipalloc-..., or NULL */
	const char *private_ip; /* or NULL */
};

int elbv2_lb_describe(struct aws_client *c, const char *name, struct elbv2_lb *ret,
		      struct aws_error *err);
/* CreateLoadBalancer Type=network, with security groups when n_sgs; the created one into ret. */
int elbv2_lb_create(struct aws_client *c, const char *name, bool internal,
		    const struct elbv2_subnet_mapping *m, size_t n_m, const char (*sgs)[32],
		    size_t n_sgs, const struct elbv2_kv *tags, size_t n_tags, struct elbv2_lb *ret,
		    struct aws_error *err);
/* SetSecurityGroups (only on a load balancer made with some). */
int elbv2_lb_set_sgs(struct aws_client *c, const char *arn, const char (*sgs)[32], size_t n,
		     struct aws_error *err);
/* SetSubnets with mappings: for a network load balancer every subnet it has, as it has it,
 * plus the ones added (AWS cannot remove one, nor change one's addresses). */
int elbv2_lb_set_subnets(struct aws_client *c, const char *arn,
			 const struct elbv2_subnet_mapping *m, size_t n_m, struct aws_error *err);
/* AWS answers success for a missing one. */
int elbv2_lb_delete(struct aws_client *c, const char *arn, struct aws_error *err);
/* ModifyLoadBalancerAttributes / ModifyTargetGroupAttributes: key=value pairs. */
int elbv2_lb_attributes(struct aws_client *c, const char *arn, const struct elbv2_kv *kv,
			size_t n, struct aws_error *err);
int elbv2_tg_attributes(struct aws_client *c, const char *arn, const struct elbv2_kv *kv,
			size_t n, struct aws_error *err);
/* DescribeLoadBalancerAttributes (tg false) / DescribeTargetGroupAttributes (tg true): at most
 * max pairs into ret. */
#define ELBV2_MAX_ATTRS 64
struct elbv2_attr {
	char key[129];
	char value[257];
};
int elbv2_attributes_describe(struct aws_client *c, bool tg, const char *arn,
			      struct elbv2_attr *ret, size_t max, size_t *n, struct aws_error *err);
/* Tags of one resource: a classic ELB by name (classic, Elastic Load Balancing's API) or an
 * ELBv2 resource by ARN; ret holds at most max (keys 128, values 256 characters). */
#define ELBV2_MAX_TAGS 50 /* per resource, AWS's limit */
struct elbv2_tag {
	char key[129];
	char value[257];
};
int elbv2_tags_describe(struct aws_client *c, bool classic, const char *id,
			struct elbv2_tag *ret, size_t max, size_t *n, struct aws_error *err);
/* AddTags (a key's value replaced) and RemoveTags on one resource, as above. */
int elbv2_tags_add(struct aws_client *c, bool classic, const char *id,
		   const struct elbv2_kv *tags, size_t n, struct aws_error *err);
int elbv2_tags_remove(struct aws_client *c, bool classic, const char *id,
		      const char *const *keys, size_t n, struct aws_error *err);
/* AddTags on one resource. */
int elbv2_add_tags(struct aws_client *c, const char *arn, const struct elbv2_kv *tags, size_t n,
		   struct aws_error *err);

int elbv2_listeners_describe(struct aws_client *c, const char *lb_arn,
			     struct elbv2_listener **ret, size_t *n, struct aws_error *err);
/* CreateListener (have NULL; l->arn filled in) or ModifyListener of have, sending only the
 * forward action and what differs from have. */
int elbv2_listener_put(struct aws_client *c, const char *lb_arn, struct elbv2_listener *l,
		       const struct elbv2_listener *have, struct aws_error *err);
int elbv2_listener_delete(struct aws_client *c, const char *arn, struct aws_error *err);

/* DescribeTargetGroups by the load balancer's ARN (lb_arn; none is an empty list) or by one
 * name (name; -ENOENT when there is none). */
int elbv2_tgs_describe(struct aws_client *c, const char *lb_arn, const char *name,
		       struct elbv2_tg **ret, size_t *n, struct aws_error *err);
/* CreateTargetGroup (instance targets); tg->arn filled in. */
int elbv2_tg_create(struct aws_client *c, struct elbv2_tg *tg, const struct elbv2_kv *tags,
		    size_t n_tags, struct aws_error *err);
/* ModifyTargetGroup: the health check's mutable fields. */
int elbv2_tg_modify_hc(struct aws_client *c, const char *arn, const struct elbv2_hc *hc,
		       struct aws_error *err);
int elbv2_tg_delete(struct aws_client *c, const char *arn, struct aws_error *err);
/* DescribeTargetHealth: the registered instance IDs. */
int elbv2_targets(struct aws_client *c, const char *tg_arn, char (**ret)[32], size_t *n,
		  struct aws_error *err);
/* RegisterTargets / DeregisterTargets (100 per call), each at port. */
int elbv2_targets_set(struct aws_client *c, const char *tg_arn, const char (*ids)[32], size_t n,
		      int port, bool reg, struct aws_error *err);
