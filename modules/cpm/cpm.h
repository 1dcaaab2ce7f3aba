/* aws-k8s cpm: the control-plane manager (Deckhouse's control-plane-manager without kubeadm).
 * Today: `cpm render` (PKI, kubeconfigs and static-pod manifests under a root, then stop) and
 * `cpm certs check-expiration|renew`. */
#pragma once

int cpm_main(int argc, char **argv);
