/* aws-k8s csi-controller: the EBS CSI driver's controller plugin (csi_controller.c), and its
 * Controller service over gRPC (csi_controller_grpc.c) for the plain-C service of
 * csi_controller_service.h. */
#pragma once
#include "common/grpc/server.h"

int csi_controller_main(int argc, char **argv);

/* /csi.v1.Controller/...; userdata is the struct csi_ctrl. */
extern const struct rpc_method csi_ctrl_methods[];
