/* The service controller's AWS calls: the classic ELB (API 2012-06-01), its security group and
 * the node security-group rules, subnets and instances, each a plain blocking call of the
 * Query API through common/aws. Describes are always filtered (by name, ID or VPC). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/aws/client.h"
#include "modules/ccm/ccm_lb.h"

/* DescribeLoadBalancers by name: 0, -ENOENT when there is none. */
int ccm_elb_describe(struct aws_client *c, const char *name, struct ccm_elb *ret,
		     struct aws_error *err);
/* CreateLoadBalancer with the spec's listeners, the subnets and groups, its tags
 * (kubernetes.io/service-name, the cluster tag, additional-resource-tags). */
int ccm_elb_create(struct aws_client *c, const struct ccm_lb_spec *s, const char *cluster_id,
		   const char (*subnets)[32], size_t n_subnets, const char (*sgs)[32], size_t n_sgs,
		   struct aws_error *err);
/* The plan's changes, listeners first, instances last. */
int ccm_elb_apply(struct aws_client *c, const struct ccm_lb_spec *s,
		  const struct ccm_elb_plan *p, const char (*sgs)[32], size_t n_sgs,
		  struct aws_error *err);
int ccm_elb_health_check(struct aws_client *c, const struct ccm_lb_spec *s,
			 struct aws_error *err);
/* ModifyLoadBalancerAttributes when the attributes the ELB has (described first) differ from
 * s's, and the proxy-protocol policy on every backend port unless have (the ELB as described)
 * has it on each already: a re-check of an unchanged ELB writes nothing. */
int ccm_elb_attributes(struct aws_client *c, const struct ccm_lb_spec *s,
		       const struct ccm_elb *have, struct aws_error *err);
/* DeleteLoadBalancer (AWS answers success for a missing one). */
int ccm_elb_delete(struct aws_client *c, const char *name, struct aws_error *err);

/* A security group found by name (and VPC when given): 0 with its ID and ingress, -ENOENT. */
int ccm_sg_find(struct aws_client *c, const char *vpc, const char *name, char id[32],
		struct ccm_sg_perm *perms, size_t max, size_t *n_perms, struct aws_error *err);
int ccm_sg_create(struct aws_client *c, const char *vpc, const char *name, const char *desc,
		  const char *cluster_id, const char *svc, char id[32], struct aws_error *err);
/* AuthorizeSecurityGroupIngress (revoke false) or RevokeSecurityGroupIngress, one call. */
int ccm_sg_ingress(struct aws_client *c, const char *id, const struct ccm_sg_perm *p, size_t n,
		   bool revoke, struct aws_error *err);
int ccm_sg_delete(struct aws_client *c, const char *id, struct aws_error *err);
/* The ingress rules of one group by ID: 0, -ENOENT when there is none. */
int ccm_sg_perms_of(struct aws_client *c, const char *id, struct ccm_sg_perm *perms, size_t max,
		    size_t *n_perms, struct aws_error *err);
/* The groups whose ingress names group as a source: their IDs. */
int ccm_sg_referencing(struct aws_client *c, const char *group, char (*ret)[32], size_t max,
		       size_t *n, struct aws_error *err);

/* What the controller needs of an instance: its VPC and its security groups. */
struct ccm_lb_inst {
	char id[32];
	char vpc[32];
	char sgs[CCM_LB_MAX_SGS][32];
	size_t n_sgs;
};
/* DescribeInstances with an instance-id filter (100 per call); unknown IDs are absent. */
int ccm_lb_describe_instances(struct aws_client *c, const char (*ids)[32], size_t n,
			      struct ccm_lb_inst **ret, size_t *ret_n, struct aws_error *err);
/* Upstream's findSecurityGroupForInstance over a set of groups: the one cluster-tagged group,
 * else the one untagged group. DescribeSecurityGroups by ID. -ENOENT / -ENOTUNIQ. */
int ccm_lb_node_sg(struct aws_client *c, const struct ccm_lb_inst *i, const char *cluster_id,
		   char id[32], struct ccm_sg_perm *perms, size_t max, size_t *n_perms,
		   struct aws_error *err);
/* The VPC's subnets and route tables (two filtered Describes). */
int ccm_lb_subnets(struct aws_client *c, const char *vpc, const char *cluster_id,
		   struct ccm_subnet **ret, size_t *ret_n, struct aws_error *err);
