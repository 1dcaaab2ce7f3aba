/* What the ccm's files share: the running process (struct ccm), the controller entry points,
 * and the pure pieces of start-up (controller selection). Each controller is a workqueue with
 * one reconcile function, client-go style:
 *
 *   cloud-node            keys = Node names; initializes Nodes with the uninitialized taint
 *   cloud-node (status)   one key, every --node-status-update-frequency: addresses and labels
 *                         of initialized Nodes
 *   cloud-node-lifecycle  one key, every --node-monitor-period: NotReady Nodes
 *   route                 one key, every --route-reconciliation-period and on Node changes
 *
 * They all read one Node informer, and start only once this replica leads. */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/flags.h"
#include "modules/ccm/ccm_cloud.h"
#include "modules/ccm/ccm_config.h"
#include "modules/ccm/ccm_routes.h"

struct kube_client;
struct kube_recorder;
struct kube_informer;
struct kube_store;
struct kube_le;
struct kube_wq;

enum {
	CCM_CTL_NODE = 1 << 0,
	CCM_CTL_LIFECYCLE = 1 << 1,
	CCM_CTL_ROUTE = 1 << 2,
	CCM_CTL_SERVICE = 1 << 3,
	CCM_CTL_TAGGING = 1 << 4,
	CCM_CTL_NODE_IPAM = 1 << 5,
};

/* --controllers: "*", names, "-name" (the first explicit mention of a name wins, as
 * k8s.io/cloud-provider's IsControllerEnabled); old and new names are both accepted
 * (cloud-node / cloud-node-controller, cloud-node-lifecycle /
 * cloud-node-lifecycle-controller, route / node-route-controller, service /
 * service-lb-controller, tagging-controller, node-ipam-controller). "*" enables those on by
 * default (all but tagging and node-ipam). An unknown name is an error. */
int ccm_controllers_parse(char *const *list, unsigned *ret, char *err, size_t errlen);

/* The flag table (every upstream flag; exposed for tests). */
extern const struct flag ccm_flag_table[];

/* Settings from the command line that the controllers use. */
struct ccm_settings {
	int64_t node_monitor_period;
	int64_t node_status_update_frequency;
	int64_t route_period;
	int node_workers;
	bool routes; /* --allocate-node-cidrs and --configure-cloud-routes */
	char *cluster_name;
};

struct ccm_node_ctl;
struct ccm_lc_ctl;
struct ccm_route_ctl;

struct ccm {
	struct ccm_settings set;
	struct ccm_config *cfg;
	struct ccm_cloud *cloud;
	char *cluster_id; /* NULL in untagged mode */
	struct ccm_cidr *cluster_cidrs;
	size_t n_cluster_cidrs;
	unsigned controllers;

	struct kube_client *kc;
	struct kube_recorder *rec;
	struct kube_informer *nodes;
	struct kube_le *le; /* NULL without --leader-elect */

	/* published (atomically) once running, for the informer's hooks; *_alloc own them */
	struct ccm_node_ctl *node, *node_alloc;
	struct ccm_lc_ctl *lc;
	struct ccm_route_ctl *route, *route_alloc;
};

/* False once a stop was asked for or this replica stopped leading: nothing may be changed. */
bool ccm_may_act(struct ccm *m);
struct kube_store *ccm_node_store(struct ccm *m);
/* An Event on a Node (from the store's JSON). */
void ccm_node_event(struct ccm *m, const cJSON *node, const char *type, const char *reason,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The instance ID a Node's spec.providerID names: 0, -ENOENT (none), -ENOTSUP (foreign). */
int ccm_node_instance_id(const cJSON *node, char *buf, size_t n);

/* Controllers (each file): start after leadership, stop before exit; the informer calls the
 * on_* hooks. */
int ccm_node_start(struct ccm *m);
void ccm_node_stop(struct ccm *m);
void ccm_node_changed(struct ccm *m, const cJSON *old, const cJSON *node);
void ccm_node_deleted(struct ccm *m, const cJSON *node);

int ccm_lc_start(struct ccm *m);
void ccm_lc_stop(struct ccm *m);

int ccm_route_start(struct ccm *m);
void ccm_route_stop(struct ccm *m);
void ccm_route_changed(struct ccm *m, const cJSON *old, const cJSON *node);

/* The HTTPS endpoint (/healthz, /readyz, /livez, /metrics) on --bind-address:--secure-port,
 * with --tls-cert-file/--tls-private-key-file or a self-signed certificate made at start
 * (written to --cert-dir when set, kept in memory otherwise, as upstream). */
struct http_server;
struct ccm_serve_opts {
	const char *bind_address;
	long long port;
	const char *cert_dir;
	const char *cert_file;
	const char *key_file;
};
int ccm_serve_start(const struct ccm_serve_opts *o, struct ccm *m, struct http_server **ret,
		    char *err, size_t errlen);
/* A self-signed certificate and key (PEM) for the given host names and IPs (ECDSA P-256, one
 * year), as client-go's GenerateSelfSignedCertKey. */
int ccm_self_signed(const char *cn, const char *const *dns, const char *const *ips, char **ret_cert,
		    char **ret_key);
