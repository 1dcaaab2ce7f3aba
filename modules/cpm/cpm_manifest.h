/* kubeadm's static-pod manifests for the control plane, rendered from the configuration:
 * ROOT/etc/kubernetes/manifests/{kube-apiserver,kube-controller-manager,kube-scheduler,etcd}.yaml
 * (mode 0600), in Deckhouse's converge order.
 *
 *   r = cpm_manifests_converge(&cfg, root, false, &rep);   // 0 unchanged, 1 changed, -errno
 *
 * Each holds kubeadm's default flags for the version (sorted by name, as kubeadm writes them)
 * with the configuration's extraArgs over them (a v1beta4 argument given twice stays twice),
 * kubeadm's probes, resources and hostPath volumes plus extraVolumes, and the annotation
 * control-plane-manager.deckhouse.io/checksum: the sha256 of the manifest without it followed
 * by every file it references as "=/etc/kubernetes/..." (read under ROOT, sorted by path; a
 * missing one counts by its name), as Deckhouse computes it: a renewed certificate or
 * kubeconfig changes the checksum, so the kubelet restarts the pod. A manifest is written only
 * when its text differs (a second run changes no file, mtime included). */
#pragma once
#include <stdbool.h>

#include "modules/cpm/cpm_config.h"
#include "modules/cpm/cpm_report.h"

#define CPM_CHECKSUM_ANNOTATION "control-plane-manager.deckhouse.io/checksum"

/* The components in converge order. */
enum cpm_component_id {
	CPM_KUBE_APISERVER,
	CPM_KUBE_CONTROLLER_MANAGER,
	CPM_KUBE_SCHEDULER,
	CPM_ETCD,
	CPM_COMPONENT_COUNT,
};

const char *cpm_component_name(enum cpm_component_id id);
/* The manifest text of one component (malloc'd), checksum annotation included. */
int cpm_manifest_render(const struct cpm_config *c, const char *root, enum cpm_component_id id,
			char **ret, char *err, size_t errlen);
int cpm_manifests_converge(const struct cpm_config *c, const char *root, bool dry_run,
			   struct cpm_report *rep);
