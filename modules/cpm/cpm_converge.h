/* One component's converge, as Deckhouse's converge.go: the manifest kubeadm would write (with
 * the kubeadm patches of ROOT/etc/kubernetes/deckhouse/kubeadm/patches applied) and its checksum;
 * when the live manifest does not carry that checksum it is backed up and replaced; then the
 * mirror pod <component>-<node> must show the checksum and be Ready. For kube-apiserver a wait
 * that times out moves the manifest out of the folder and back once (kubernetes#109596) and
 * waits again.
 *
 *   struct cpm_converge c = { .cfg = &cfg, .root = root, .backup = &b, .kc = kc,
 *                             .node_name = "master-0", .pod_tries = 42,
 *                             .pod_interval_ns = NSEC_PER_SEC, .ct = ct };
 *   r = cpm_component_converge(&c, CPM_KUBE_APISERVER, err, sizeof(err));
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "modules/cpm/cpm_backup.h"
#include "modules/cpm/cpm_config.h"
#include "modules/cpm/cpm_manifest.h"

#define CPM_PATCHES_DIR "/etc/kubernetes/deckhouse/kubeadm/patches"

struct kube_client;
struct cancel;

struct cpm_converge {
	const struct cpm_config *cfg;
	const char *root;
	const struct cpm_backup *backup;
	struct kube_client *kc;
	const char *node_name;
	int pod_tries;		  /* 42 */
	int64_t pod_interval_ns;  /* 1 s */
	int64_t reread_pause_ns;  /* the manifest stays out this long; 0: 2 s */
	struct cancel *ct;
	struct cpm_report *rep;	  /* may be NULL */
	/* etcd only: a join's --initial-cluster (with --initial-cluster-state=existing; the
	 * manifest is written when its text differs, its checksum stays the configuration's:
	 * etcd reads these flags on its first start only), or a start with --force-new-cluster
	 * (its checksum annotation is another, so that the manifest without the flag is written
	 * by the next converge of etcd) */
	const char *etcd_initial_cluster;
	bool etcd_force_new_cluster;
};

/* The manifest to write for id (malloc'd) and its checksum; applied lists the patch files. */
int cpm_component_desired(const struct cpm_config *cfg, const char *root,
			  enum cpm_component_id id, char **ret_text, char ret_sum[65],
			  char *applied, size_t applied_len, char *err, size_t errlen);
/* The command of a static pod's first container (an array), or NULL. */
struct cJSON *cpm_pod_command(const struct cJSON *pod);
/* The checksum annotation of a --force-new-cluster start of the manifest whose checksum is sum. */
int cpm_force_new_cluster_sum(const char *sum, char ret[65]);
/* Writes (when needed) and waits; 0 or -errno with a sentence naming the component in err. */
int cpm_component_converge(const struct cpm_converge *c, enum cpm_component_id id, char *err,
			   size_t errlen);
