/* What ccm.c exposes besides ccm_main, for tests: the flag table and the --controllers
 * selection (and, through ccm_serve.h, the serving code's certificate helper). */
#pragma once
#include <stddef.h>

#include "common/base/flags.h"
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
