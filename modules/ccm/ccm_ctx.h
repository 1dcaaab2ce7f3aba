/* What the ccm's controllers share: the running process (struct ccm: the settings, the cloud,
 * the Kubernetes client, the Node informer, the controller run) and the helpers each
 * controller calls (may it act, the Node store, Events on Nodes, a Node's instance ID), with
 * the Node informer's projection.
 *
 * Calls go one way: ccm.c (usage, flags, main, wiring) -> the controllers (ccm_node.c,
 * ccm_lifecycle.c, ccm_route.c) and the serving code (ccm_serve.c) -> this file and the
 * pure pieces (ccm_cloud, ccm_config, ccm_model, ccm_routes) -> common/. */
#pragma once
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/kube/controller.h"
#include "modules/ccm/ccm_cloud.h"
#include "modules/ccm/ccm_config.h"
#include "modules/ccm/ccm_routes.h"

struct kube_client;
struct kube_resource;
struct kube_recorder;
struct kube_informer;
struct kube_store;

/* Settings from the command line that the controllers use. */
struct ccm_settings {
	int64_t node_monitor_period;
	int64_t node_status_update_frequency;
	int64_t route_period;
	int node_workers;
	int service_workers; /* --concurrent-service-syncs */
	int64_t min_resync_period; /* the service controller's full re-check of an unchanged one */
	bool routes; /* --allocate-node-cidrs and --configure-cloud-routes */
	char *cluster_name;
};

struct ccm {
	struct ccm_settings set;
	struct ccm_config *cfg;
	struct ccm_cloud *cloud;
	char *cluster_id; /* NULL in untagged mode */
	struct ccm_cidr *cluster_cidrs;
	size_t n_cluster_cidrs;
	unsigned controllers; /* --controllers: CCM_CTL_* bits */

	struct kube_client *kc;
	struct kube_recorder *rec;
	struct kube_informer *nodes; /* the one Node informer every controller reads */
	struct kube_informer *services; /* the service controller's; NULL when it is off */
	struct controllers run;	     /* the controller table and the election */
};

/* False once a stop was asked for or this replica stopped leading: nothing may be changed. */
bool ccm_may_act(struct ccm *m);
struct kube_store *ccm_node_store(struct ccm *m);
/* An Event on an object of res (from the store's JSON). */
void ccm_eventv(struct ccm *m, const cJSON *obj, const struct kube_resource *res,
		const char *type, const char *reason, const char *fmt, va_list ap)
    __attribute__((format(printf, 6, 0)));
/* An Event on a Node (from the store's JSON). */
void ccm_node_event(struct ccm *m, const cJSON *node, const char *type, const char *reason,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The instance ID a Node's spec.providerID names: 0, -ENOENT (none), -ENOTSUP (foreign). */
int ccm_node_instance_id(const cJSON *node, char *buf, size_t n);
/* The Node informer's transform: what the controllers read of a Node, the rest dropped before
 * it is stored. */
cJSON *ccm_node_transform(void *ud, cJSON *obj);
