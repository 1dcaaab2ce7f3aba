/* aws-k8s ebs-csi-driver: the EBS CSI driver as its upstream binary (aws-ebs-csi-driver) runs,
 * mode by mode (ebs_csi_driver.c). */
#pragma once
int ebs_csi_driver_main(int argc, char **argv);
