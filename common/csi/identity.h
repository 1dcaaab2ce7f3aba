/* The CSI Identity service (GetPluginInfo, GetPluginCapabilities, Probe), shared by
 * csi-controller and csi-node; csi_serve() (plugin.h) registers it with the defaults filled in.
 *
 *   struct csi_identity id = { .name = "ebs.csi.aws.com", .controller = true,
 *                              .probe = probe, .probe_ud = ctrl };
 *   rpc_server_register(srv, csi_identity_methods, &id);
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/grpc/server.h"

#define CSI_DRIVER_NAME_DEFAULT "ebs.csi.aws.com"

/* The Identity service. */
struct csi_identity {
	const char *name;    /* NULL: CSI_DRIVER_NAME_DEFAULT (csi_serve: --driver-name) */
	const char *version; /* NULL: the binary's version */
	bool controller;     /* report CONTROLLER_SERVICE */
	/* Probe: 0 ready, or -errno with a reason (FAILED_PRECONDITION). NULL: always ready. */
	int (*probe)(void *ud, char *why, size_t n);
	void *probe_ud;
};
extern const struct rpc_method csi_identity_methods[];
