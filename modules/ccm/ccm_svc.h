/* The service controller's parts: ccm_svc.c holds the controller (Kubernetes writes, the
 * reconcile of one Service); ccm_svc_elb.c makes and deletes a classic ELB; below them both,
 * ccm_svc_cache.c holds the Events, the instance and subnet caches and the placement. */
#pragma once
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/aws/error.h"
#include "common/kube/kmap.h"
#include "modules/ccm/ccm_controllers.h"
#include "modules/ccm/ccm_lb.h"
#include "modules/ccm/ccm_lb_aws.h"
#include "modules/ccm/ccm_nlb.h"

struct ccm_svc_ctl {
	struct ccm *m;
	struct controller *c;
	pthread_mutex_t lock;
	struct kmap synced;  /* Service key -> struct synced */
	struct kmap insts;   /* instance ID -> struct cached_inst */
	struct kmap subnets; /* VPC ID -> struct cached_subnets */
	/* the instance cache's refill, single-flight: one worker describes, the others wait for
	 * its result (refill_gen moves on when it ends; refill_r, refill_err its outcome) */
	pthread_cond_t refill_cv;
	bool refilling;
	uint64_t refill_gen;
	int refill_r;
	struct aws_error refill_err;
	int64_t probe_ns; /* the drift probe's period */
	int64_t deep_ns;  /* the full re-check of an unchanged Service: every deep_ns..2*deep_ns */
};

/* One reconcile's working set. */
struct ccm_svc_ensure {
	struct ccm_lb_spec spec;
	char (*ids)[32]; /* the eligible Nodes' instances, sorted */
	size_t n_ids;
	struct ccm_lb_inst *inst;
	size_t n_inst;
	const char *vpc;
	struct ccm_subnet *subnets;
	size_t n_subnets;
	char chosen[CCM_LB_MAX_SUBNETS][32];
	size_t n_chosen;
	char sgs[CCM_LB_MAX_SGS + 1][32];
	size_t n_sgs;
	char managed_sg[32];
	struct ccm_sg_perm perms[CCM_LB_MAX_PERMS];
	struct ccm_sg_perm want[CCM_LB_MAX_PERMS];
	struct ccm_sg_perm add[CCM_LB_MAX_PERMS], del[CCM_LB_MAX_PERMS];
	struct ccm_elb elb;
	struct ccm_elb_plan plan;
	struct ccm_nlb_spec nlb; /* nlb and none */
	char dns[256]; /* the status hostname once ensured */
	char err[512]; /* a reason for the Event, when not AWS's */
	/* additional-resource-tags as this process last applied them (NULL: unknown, as after a
	 * start); tags_changed: not known to be the annotation's value now */
	char *prev_tags;
	bool tags_changed;
	/* the load balancer's digest (ccm_svc_probe) when the sync's own description of it is
	 * still what AWS has (nothing of it changed since); 0: unknown */
	uint64_t digest;
};

void ccm_svc_event(struct ccm *m, const cJSON *svc, const char *type, const char *reason,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The instances (cached), the VPC (the config's, else the instances'), its subnets (cached)
 * and the chosen ones, into e. */
int ccm_svc_place(struct ccm_svc_ctl *ctl, struct ccm_svc_ensure *e, struct aws_error *err);
/* Only the instances and the VPC. */
int ccm_svc_vpc(struct ccm_svc_ctl *ctl, struct ccm_svc_ensure *e, struct aws_error *err);
/* The instances (cached) of ids. */
int ccm_svc_instances(struct ccm_svc_ctl *ctl, const char (*ids)[32], size_t n,
		      struct ccm_lb_inst **ret, size_t *ret_n, struct aws_error *err);

void ccm_svc_cache_clear(struct ccm_svc_ctl *ctl);

/* ccm_svc_probe.c: the drift probe. Describes the load balancers of items (classic ELBs and
 * NLBs by name, 20 a call) and sets each digest (of what AWS describes, in any order; 0 when
 * the load balancer does not exist). A failed call ends it (<0). */
struct ccm_svc_probe {
	enum ccm_lb_type type; /* CCM_LB_CLASSIC or CCM_LB_NLB */
	char name[33];
	char key[320]; /* the Service */
	uint64_t digest;
};
int ccm_svc_probe(struct ccm_svc_ctl *ctl, struct ccm_svc_probe *items, size_t n,
		  struct aws_error *err);
/* The probe's digest of a classic ELB or an NLB as a sync described it. */
uint64_t ccm_svc_elb_digest(const struct ccm_elb *e);
uint64_t ccm_svc_v2_digest(const struct elbv2_lb *lb);

/* ccm_svc_nlb.c: an NLB, and Deckhouse's target groups without a load balancer (none); the
 * status (hostname, and ip for none) into e->dns / the ip. all_ids: every Node's instance
 * (node rules are revoked from their groups). */
int ccm_svc_nlb_ensure(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
		       struct aws_error *err);
int ccm_svc_nlb_delete(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
		       const char (*all_ids)[32], size_t n_all, struct aws_error *err);
/* ccm_svc_nlb_sg.c: the client CIDRs of an NLB: the source ranges; by default Deckhouse's
 * PublicNetworkAllowList, or for an internal load balancer the VPC's subnets. */
size_t ccm_svc_nlb_clients(const struct ccm *m, const struct ccm_svc_ensure *e, char (*out)[64],
			   size_t max);
/* ccm_svc_nlb_sg.c: NLBSecurityGroupMode = Managed. The groups of the NLB into e->sgs (the
 * security-groups annotation's, else the managed group, made and its ingress kept as the
 * Service says; then extra-security-groups); ccm_svc_nlb_sg_delete deletes the managed group
 * (0 when there is none; -EBUSY while AWS still holds it). */
bool ccm_svc_nlb_sg_managed(const struct ccm *m);
int ccm_svc_nlb_sgs(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
		    struct aws_error *err);
int ccm_svc_nlb_sg_delete(struct ccm_svc_ctl *ctl, const cJSON *svc, const char *vpc,
			  struct aws_error *err);
int ccm_svc_none_ensure(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
			struct aws_error *err);
int ccm_svc_none_delete(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
			struct aws_error *err);
/* Makes the tags of a classic ELB (by name) or an ELBv2 resource (by ARN) hold the
 * additional-resource-tags: adds what is missing or different, removes the keys of e->prev_tags
 * the annotation no longer names (never the cluster or service-name tags, nor a key this
 * process did not apply). */
int ccm_svc_tags_sync(struct ccm_svc_ctl *ctl, const struct ccm_svc_ensure *e, bool classic,
		      const char *id, struct aws_error *err);
/* Upstream refuses to change the type of an existing load balancer: -EINVAL with e->err set
 * when another kind than want exists under the Service's name (a classic ELB, an NLB, or
 * none's first target group <name>-0), 0 when none does. */
int ccm_svc_refuse_other(struct ccm_svc_ctl *ctl, struct ccm_svc_ensure *e,
			 enum ccm_lb_type want, struct aws_error *err);

/* ccm_svc_elb.c */
int ccm_svc_elb_ensure(struct ccm_svc_ctl *ctl, const cJSON *svc, struct ccm_svc_ensure *e,
		       struct aws_error *err);
int ccm_svc_elb_delete(struct ccm_svc_ctl *ctl, const cJSON *svc, struct aws_error *err);
