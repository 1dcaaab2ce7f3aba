/* aws-k8s ccm: the AWS cloud-controller-manager (cloud-node, node-lifecycle and route
 * controllers), flag- and config-compatible with the upstream one. */
#pragma once
int ccm_main(int argc, char **argv);
