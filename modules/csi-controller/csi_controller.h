/* aws-k8s csi-controller: the EBS CSI driver's controller plugin (csi_controller.c).
 *
 * What a command serving the controller among other services needs (ebs-csi-driver all):
 * the flag table, and the set-up of a struct csi_ctrl (csi_controller_service.h) from the
 * parsed flags.
 *
 *   n = flags_parse(cmd, usage, csi_controller_flags, argc, argv);   // or a union of tables
 *   struct csi_ctrl c = {0};
 *   if ((r = csi_controller_configure(&c, "ebs-csi-driver")) == 0)
 *           ... serve csi_ctrl_methods with &c ...
 *   csi_ctrl_release(&c);
 */
#pragma once
#include "common/base/flags.h"

struct csi_ctrl;

int csi_controller_main(int argc, char **argv);

/* csi-controller's flags (CSI_COMMON_FLAGS, its own, LOG_FLAGS); --kubeconfig and
 * --metadata-sources have no effect here. */
extern const struct flag csi_controller_flags[];
/* Fills c from the parsed flags (tags, cluster id, batching, windows) and sets it up with the
 * user agent "<component> [--user-agent-extra]": 0, or the exit code after printing why (2 a
 * bad flag value, 1 a set-up failure). Release c with csi_ctrl_release in every case. */
int csi_controller_configure(struct csi_ctrl *c, const char *component);
/* The same, with the region to use when AWS_REGION is not set instead of asking
 * --metadata-sources (mode all: the node's metadata, as upstream's one metadata service
 * serves both); NULL or "": ask them. */
int csi_controller_configure_region(struct csi_ctrl *c, const char *component,
				    const char *known_region);
