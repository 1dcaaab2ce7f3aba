/* The ccm's controllers, each a row of ccm.c's controller table (common/kube/controller.h):
 *
 *   cloud-node            keys = Node names; initializes Nodes with the uninitialized taint
 *   cloud-node-status     one key, every --node-status-update-frequency: addresses and labels
 *                         of initialized Nodes
 *   cloud-node-lifecycle  one key, every --node-monitor-period: NotReady Nodes
 *   route                 one key, every --route-reconciliation-period and on Node changes
 *   service               keys = Services of type LoadBalancer (and those with the finalizer)
 *   tagging               keys = Node names (tag) and "untag/<instance ID>"; off by default
 *
 * They all read the one Node informer, and run only while this replica leads. The informer's
 * handlers (in ccm.c) pass each Node event to the *_changed / *_deleted hooks below. */
#pragma once
#include <cjson/cJSON.h>
#include <stdint.h>

#include "modules/ccm/ccm_ctx.h"
#include "modules/ccm/ccm_tags.h"

/* cloud-node and cloud-node-status (ccm_node.c); ud of both: the struct ccm_node_ctl */
struct ccm_node_ctl;
int ccm_node_new(struct ccm *m, struct ccm_node_ctl **ret);
void ccm_node_free(struct ccm_node_ctl *ctl);
int ccm_node_reconcile(void *ud, const char *key, int64_t *requeue_after_ns);
int ccm_node_start(struct controller *c); /* queues the tainted Nodes of the store */
int ccm_node_resync(void *ud, const char *key, int64_t *requeue_after_ns);
/* c: the cloud-node controller */
void ccm_node_changed(struct controller *c, const cJSON *old, const cJSON *node);
void ccm_node_deleted(struct controller *c, const cJSON *node);

/* What initializing a Node writes (exposed for tests): the providerID when it has none, the
 * labels, and the uninitialized taint gone. */
struct ccm_node_init {
	const char *provider_id;
	const cJSON *labels; /* an object of strings */
};
/* Applies it to a copy of the Node (a kube_update_retry mutate function; ud: the init). */
int ccm_node_init_mutate(void *ud, cJSON *obj);
/* The same as a JSON merge patch against the stored node, carrying rv (malloc'd text). */
int ccm_node_init_patch(const cJSON *node, const char *rv, const struct ccm_node_init *im,
			char **ret_text);

/* cloud-node-lifecycle (ccm_lifecycle.c); ud: the struct ccm */
int ccm_lc_monitor(void *ud, const char *key, int64_t *requeue_after_ns);
int ccm_lc_start(struct controller *c);

/* service (ccm_svc.c); ud: the struct ccm_svc_ctl; keys: Services (namespace/name) */
struct ccm_svc_ctl;
int ccm_svc_new(struct ccm *m, struct ccm_svc_ctl **ret);
void ccm_svc_free(struct ccm_svc_ctl *ctl);
int ccm_svc_reconcile(void *ud, const char *key, int64_t *requeue_after_ns);
int ccm_svc_start(struct controller *c);
/* c: the service controller; from the Service informer (svc NULL for a deletion) */
void ccm_svc_changed(struct controller *c, const cJSON *old, const cJSON *svc);
/* from the Node informer: every load-balanced Service again when eligibility changed */
void ccm_svc_node_changed(struct controller *c, const cJSON *old, const cJSON *node);
cJSON *ccm_svc_transform(void *ud, cJSON *obj);

/* route (ccm_route.c); ud: the struct ccm_route_ctl */
struct ccm_route_ctl;
int ccm_route_new(struct ccm *m, struct ccm_route_ctl **ret);
void ccm_route_free(struct ccm_route_ctl *ctl);
int ccm_route_pass(void *ud, const char *key, int64_t *requeue_after_ns);
int ccm_route_start(struct controller *c);
/* c: the route controller; node NULL for a deletion */
void ccm_route_changed(struct controller *c, const cJSON *old, const cJSON *node);

/* tagging (ccm_tagging.c); ud: the struct ccm_tag_ctl */
struct ccm_tagging_opts {
	struct ccm_tagset tags; /* moved into the controller */
	bool batching;		/* false: one instance per call */
	bool rate_limited;	/* keys queued through the queue's bucket (qps, burst) */
	unsigned max_ids;	/* instances per call; 0: 100 */
	int64_t window_ns;	/* 0: 100 ms after the last Node that came */
	int64_t max_wait_ns;	/* 0: at most 1 s */
};
struct ccm_tag_ctl;
/* Also registers the tagging metrics, which upstream exports whether the controller runs or
 * not. o may be NULL (the controller is disabled). */
int ccm_tag_new(struct ccm *m, struct ccm_tagging_opts *o, struct ccm_tag_ctl **ret);
void ccm_tag_free(struct ccm_tag_ctl *ctl);
int ccm_tag_reconcile(void *ud, const char *key, int64_t *requeue_after_ns);
int ccm_tag_start(struct controller *c); /* queues the store's Nodes that need tagging */
/* c: the tagging controller */
void ccm_tag_changed(struct controller *c, const cJSON *old, const cJSON *node);
void ccm_tag_deleted(struct controller *c, const cJSON *node);
