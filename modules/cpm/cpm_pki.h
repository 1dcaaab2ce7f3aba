/* The control-plane PKI and kubeconfigs as kubeadm writes them, converged on Deckhouse's rules.
 *
 * The input is a plain struct (cpm_config_pki_input fills it from a kubeadm ClusterConfiguration /
 * InitConfiguration). Everything is written under input->root (as kubeadm's --rootfs):
 * ROOT/etc/kubernetes/pki/NAME.{crt,key}, ROOT/etc/kubernetes/NAME.conf. Keys are PKCS#8 PEM
 * ("PRIVATE KEY"), which every Kubernetes component reads; kubeadm writes PKCS#1 / SEC1.
 *
 *   struct cpm_pki_input in = {.root = dir, .node_name = "master-0",
 *                              .advertise_address = "10.0.0.5",
 *                              .service_subnet = "10.96.0.0/12",
 *                              .control_plane_endpoint = "127.0.0.1:6445", .kube_minor = 33};
 *   struct cpm_report rep = {0};
 *   r = cpm_pki_converge(&in, false, &rep);
 *   if (r >= 0) r = cpm_sa_converge(&in, false, &rep);
 *   if (r >= 0) r = cpm_kubeconfigs_converge(&in, false, &rep);
 *
 * The CAs (ca, front-proxy-ca, etcd/ca) are inputs, as Deckhouse installs them from the Secret
 * d8-pki: read, never made or rotated (a missing one is -ENOENT with its path). sa.key/sa.pub
 * are made as kubeadm does only when both are missing; sa.pub is rewritten from sa.key when it
 * is missing or does not match it.
 *
 * A leaf certificate (apiserver, apiserver-kubelet-client, apiserver-etcd-client,
 * front-proxy-client, etcd/server, etcd/peer, etcd/healthcheck-client) is (re)made with a new
 * key when: its .crt or .key is missing or unreadable, the key does not match, it was not issued
 * by the current CA, its subject (CN, O) or SANs differ from kubeadm's table, or fewer than
 * CPM_RENEW_BEFORE_S remain (an expired one included: nothing here needs an API server). A
 * kubeconfig is recreated when it does not parse, lacks its cluster/user/certificate, names
 * another server or CA, its user (CN/O) differs, or its certificate is within CPM_RENEW_BEFORE_S
 * of expiring. Files: certificates 0644, keys and kubeconfigs 0600, replaced atomically.
 *
 * dry_run: nothing is written; each step that would change says so (CPM_STEP_WOULD_CHANGE and
 * why). Each file is one step in the report, named by its path under ROOT/etc/kubernetes
 * ("pki/apiserver.crt", "admin.conf"); the detail says why it changed. Returns 0 when nothing
 * changed (or would), 1 when something did (or would), -errno on the first failure (a FAILED
 * step says which and why; later steps are not attempted). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "modules/cpm/cpm_report.h"

#define CPM_RENEW_BEFORE_S ((int64_t)30 * 24 * 3600)
#define CPM_DEFAULT_CERT_VALIDITY_S ((int64_t)365 * 24 * 3600)
/* kubeadm's CertificateBackdate: a leaf's not-before is 5 minutes before it was made. */
#define CPM_CERT_BACKDATE_S ((int64_t)5 * 60)
/* kubeadm's CertificateBackdate: a new certificate's not-before is this long before now. */
#define CPM_CERT_BACKDATE_S ((int64_t)5 * 60)

enum cpm_key_algo {
	CPM_KEY_RSA2048 = 0, /* kubeadm's default */
	CPM_KEY_ECDSA_P256,
	CPM_KEY_RSA3072,
	CPM_KEY_RSA4096,
};

struct cpm_pki_input {
	const char *root;		    /* NULL or "": "/" */
	const char *node_name;		    /* required */
	const char *advertise_address;	    /* required: the node's IP (MY_IP) */
	int bind_port;			    /* the apiserver's port; 0: 6443 */
	const char *cluster_name;	    /* the kubeconfigs' cluster name; NULL: "kubernetes" */
	const char *service_subnet;	    /* "10.96.0.0/12" (first of "a,b"); NULL: 10.96.0.0/12 */
	const char *dns_domain;		    /* NULL: "cluster.local" */
	const char *control_plane_endpoint; /* "host[:port]"; NULL/"": advertise:bind_port */
	const char *const *apiserver_cert_sans;	  /* NULL-terminated DNS names or IPs; may be NULL */
	const char *const *etcd_server_cert_sans; /* idem */
	const char *const *etcd_peer_cert_sans;	  /* idem */
	enum cpm_key_algo algo;
	int64_t cert_validity_s; /* 0: CPM_DEFAULT_CERT_VALIDITY_S */
	int64_t ca_validity_s;	 /* informational: CAs are inputs; 0: 10 years */
	int64_t now;		 /* unix seconds; 0: the clock */
	int kube_minor;		 /* 1.<minor>; >= 29: group kubeadm:cluster-admins; 0: 33 */
	bool write_kubelet_conf;	/* also converge kubelet.conf (system:node:<name>) */
	bool root_kubeconfig_symlink;	/* ROOT/root/.kube/config -> /etc/kubernetes/admin.conf */
};

struct x509_cert;
struct x509_key;

/* The leaf certificates and keys under ROOT/etc/kubernetes/pki. */
int cpm_pki_converge(const struct cpm_pki_input *in, bool dry_run, struct cpm_report *rep);
/* sa.key and sa.pub (steps "pki/sa.key", "pki/sa.pub"), same return values. */
int cpm_sa_converge(const struct cpm_pki_input *in, bool dry_run, struct cpm_report *rep);
/* admin.conf, super-admin.conf, controller-manager.conf, scheduler.conf (and kubelet.conf, the
 * symlink when asked) under ROOT/etc/kubernetes, on the rules above (cpm_kubeconfig.c); needs
 * the CA from ROOT/etc/kubernetes/pki. Same return values as cpm_pki_converge. */
int cpm_kubeconfigs_converge(const struct cpm_pki_input *in, bool dry_run,
			     struct cpm_report *rep);
/* `kubeadm certs renew FILE` for one leaf ("apiserver", "etcd/server"): unconditionally a new
 * key and certificate with the names of the one on disk, signed by the current CA. */
int cpm_pki_renew(const struct cpm_pki_input *in, const char *file, char *err, size_t errlen);
/* The kubeconfig NAME ("admin.conf") renewed the same way: its server and CA kept, a new key and
 * client certificate with the names of the current one (cpm_kubeconfig.c). */
int cpm_kubeconfig_renew(const struct cpm_pki_input *in, const char *name, char *err,
			 size_t errlen);
/* The CA pair "ca", "front-proxy-ca" or "etcd/ca" (the key must match; a CA). */
int cpm_ca_load(const struct cpm_pki_input *in, const char *name, struct x509_cert **ret_crt,
		struct x509_key **ret_key, char *err, size_t errlen);
/* A new key of the algorithm. */
int cpm_key_new(enum cpm_key_algo algo, struct x509_key **ret, char *err, size_t errlen);
/* The client certificate of the kubeconfig NAME ("admin.conf"): -ENOENT when the file is
 * missing, -EBADMSG when it holds none (cpm_kubeconfig.c). */
int cpm_kubeconfig_cert(const struct cpm_pki_input *in, const char *name,
			struct x509_cert **ret);
