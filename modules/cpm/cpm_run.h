/* `aws-k8s cpm` (no command) and `aws-k8s cpm converge`: Deckhouse's control-plane-manager run,
 * one-shot, ending in an idle wait (controller.go):
 *   remove orphan patch files; annotate the Node waiting-for-approval and wait for approved;
 *   with MY_POD_NAME, wait for that pod's image-holder containers to be ready;
 *   checkEtcdManifest; checkKubeletConfig; install the kubeadm config and patches under
 *   /etc/kubernetes/deckhouse/kubeadm/ and the base PKI from the d8-pki files; the leaf
 *   certificates and kubeconfigs (as render); the root kubeconfig symlink when asked; the extra
 *   files (0600) under /etc/kubernetes/deckhouse/extra-files/; converge kube-apiserver,
 *   kube-controller-manager, kube-scheduler, etcd (cpm_converge.h); write
 *   last_applied_configuration_checksum; prune the backups to 5; then /readyz turns ok and the
 *   process waits for SIGTERM (exit 0). A failed step ends the run with exit 1 and says why.
 *
 * The flags below are part of cpm's table (cpm.c), with KUBE_FLAGS. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

extern char *cpm_run_config_dir, *cpm_run_pki_dir, *cpm_run_healthz_addr;
extern long long cpm_run_approval_tries, cpm_run_pod_tries;
extern int64_t cpm_run_approval_interval, cpm_run_pod_interval;
extern bool cpm_run_etcd_membership;

/* clang-format off */
#define CPM_RUN_FLAGS                                                                              \
	{ "config-dir", FLAG_STRING, &cpm_run_config_dir, "/config", NULL,                         \
	  "converge: the Secret d8-control-plane-manager-config as files (kubeadm-config.yaml, "   \
	  "<component>.yaml.tpl patches, extra-file-*)." },                                        \
	{ "pki-dir", FLAG_STRING, &cpm_run_pki_dir, "/pki", NULL,                                  \
	  "converge: the Secret d8-pki as files (ca.crt/key, front-proxy-ca.crt/key, "             \
	  "etcd-ca.crt/key, sa.key, sa.pub)." },                                                   \
	{ "healthz-bind-address", FLAG_STRING, &cpm_run_healthz_addr, "127.0.0.1:8095", NULL,      \
	  "converge: where /healthz and /readyz (ok once converged) are served." },                \
	{ "approval-retries", FLAG_INT, &cpm_run_approval_tries, "42", NULL,                       \
	  "converge: how many times the Node is looked at for the approved annotation.", 1,        \
	  100000 },                                                                                \
	{ "approval-interval", FLAG_DURATION, &cpm_run_approval_interval, "10s", NULL,             \
	  "converge: the pause between two looks at the Node." },                                  \
	{ "pod-ready-retries", FLAG_INT, &cpm_run_pod_tries, "42", NULL,                           \
	  "converge: how many times a mirror pod is looked at for the checksum and Ready.", 1,     \
	  100000 },                                                                                \
	{ "pod-ready-interval", FLAG_DURATION, &cpm_run_pod_interval, "1s", NULL,                  \
	  "converge: the pause between two looks at a mirror pod." },                               \
	{ "etcd-membership", FLAG_BOOL, &cpm_run_etcd_membership, "true", NULL,                     \
	  "converge: join etcd as a learner and promote, fix the lone member's peer URL, "        \
	  "--force-new-cluster when safe; false: the etcd manifest as rendered, no etcd call." }
/* clang-format on */

struct cpm_run_opts {
	const char *root, *node_name, *my_ip;
	const char *pod_name; /* MY_POD_NAME: its image-holder containers are waited for */
	bool root_kubeconfig_symlink;
	bool dry_run; /* converge a copy of ROOT/etc/kubernetes, print what would change, exit */
};

/* Returns the exit code: 0 after SIGTERM, 1 when a step failed, 2 for a usage error. */
int cpm_run(const struct cpm_run_opts *o);
