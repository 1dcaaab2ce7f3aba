/* The versions of a running cluster, for `cpm version plan --kubeconfig FILE`:
 *
 *   char **cp = NULL, **kubelets = NULL, *max_used = NULL, err[600];
 *   r = cpm_version_from_cluster("/etc/kubernetes/admin.conf", &cp, &kubelets, &max_used,
 *                                err, sizeof(err));
 *
 * kubelets gets NODE=VERSION from every Node's status.nodeInfo.kubeletVersion; cp gets
 * NODE/COMPONENT=VERSION for the kube-apiserver, kube-controller-manager and kube-scheduler
 * mirror pods (kube-system/<component>-<node>) of every Node labelled
 * node-role.kubernetes.io/control-plane, from their annotation
 * control-plane-manager.deckhouse.io/kubernetes-version (Deckhouse's patch sets it) or else
 * their image tag; max_used gets maxUsedControlPlaneKubernetesVersion from the Secret
 * kube-system/d8-cluster-configuration (left NULL when the Secret or the key is missing). A
 * missing mirror pod or no control-plane Node is an error (the sentence in err). */
#pragma once
#include <stddef.h>

int cpm_version_from_cluster(const char *kubeconfig, char ***cp, char ***kubelets,
			     char **max_used, char *err, size_t errlen);
