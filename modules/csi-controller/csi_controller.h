/* aws-k8s csi-controller: the EBS CSI driver's controller plugin (csi_controller.c). */
#pragma once
int csi_controller_main(int argc, char **argv);
