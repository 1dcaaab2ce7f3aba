/* The EBS CSI driver: `aws-k8s csi-controller` (this module's controller service, see
 * csi_controller.c) and `aws-k8s csi-node` (csi_node.c). */
#pragma once
int csi_controller_main(int argc, char **argv);
int csi_node_main(int argc, char **argv);
