/* aws-k8s kube-debug: drives the Kubernetes client core from the command line (for tests and
 * for debugging a cluster connection). */
#pragma once

int kube_debug_main(int argc, char **argv);
