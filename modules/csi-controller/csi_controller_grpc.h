/* The Controller service over gRPC (csi_controller_grpc.c): the thin adapter between the
 * protobuf messages and the plain-C service of csi_controller_service.h.
 *
 *   rpc_server_register(srv, csi_ctrl_methods, &ctrl);   // ctrl: a struct csi_ctrl set up
 */
#pragma once
#include "common/grpc/server.h"

/* /csi.v1.Controller/...; userdata is the struct csi_ctrl. */
extern const struct rpc_method csi_ctrl_methods[];
