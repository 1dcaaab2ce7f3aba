/* What ccm.c exposes besides ccm_main, for tests: the flag table and the --controllers
 * selection (and, through ccm_serve.h, the serving code's certificate helper). */
#pragma once
#include <stddef.h>

#include "common/base/flags.h"
#include "modules/ccm/ccm_controllers.h"
#include "modules/ccm/ccm_serve.h"

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

/* The controller table's rows. */
enum { CCM_C_NODE, CCM_C_NODE_STATUS, CCM_C_LIFECYCLE, CCM_C_ROUTE, CCM_C_SERVICE, CCM_C_TAGGING,
       CCM_C_N };

struct ccm_node_ctl;
struct ccm_route_ctl;
struct ccm_svc_ctl;
struct ccm_tag_ctl;

/* What ccm_main sets up: the process's state, the controllers' own state, the controller
 * table and the secure server's options. */
struct ccm_wiring {
	struct ccm m;
	struct ccm_node_ctl *node;
	struct ccm_route_ctl *route;
	struct ccm_svc_ctl *svc;
	struct ccm_tag_ctl *tagging;
	struct ccm_tagging_opts tag_opts; /* from the flags, moved into the controller */
	struct controller ctls[CCM_C_N];
	struct ccm_serve_opts serve;
};

/* After flags_parse: the start-up checks of the flags, and their values where the code reads
 * them (w->m.set, w->m.controllers, w->m.cluster_cidrs, w->serve). Returns -1 to go on, or the
 * exit code (the reason logged or printed). Needs no server. */
int ccm_flags_apply(struct ccm_wiring *w);
/* The controller table (w->ctls) and the run (w->m.run: leader election from the
 * LEADER_ELECT_FLAGS) from w->m. Needs no server. */
int ccm_wire(struct ccm_wiring *w);
/* Frees what the wiring holds (not w itself); fields may be NULL. */
void ccm_wiring_release(struct ccm_wiring *w);
