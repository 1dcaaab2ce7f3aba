/* The kubeadm-style configuration cpm renders from, as Deckhouse's Secret
 * d8-control-plane-manager-config holds it (kubeadm-config.yaml): YAML documents separated by
 * "---", of which cpm reads ClusterConfiguration and InitConfiguration (kubeadm.k8s.io/v1beta3
 * or v1beta4); the others (JoinConfiguration, KubeletConfiguration, ...) are skipped.
 *
 *   struct cpm_config c = {0};
 *   char err[256];
 *   r = cpm_config_load("/config/kubeadm-config.yaml", getenv("NODE_NAME"), getenv("MY_IP"),
 *                       &c, err, sizeof(err));
 *   if (r < 0) fprintf(stderr, "%s\n", err);
 *   struct cpm_pki_input in;
 *   cpm_config_pki_input(&c, "/", &in);        // points into c
 *   ...
 *   cpm_config_release(&c);
 *
 * node_name / my_ip (NODE_NAME, MY_IP), when not NULL or empty, win over
 * InitConfiguration's nodeRegistration.name and localAPIEndpoint.advertiseAddress; one of each
 * is required. extraArgs are a map in v1beta3 and a list of {name, value} in v1beta4; both end
 * up as one ordered list. Fields cpm cannot honour (certificatesDir other than
 * /etc/kubernetes/pki, external etcd) are refused with -ENOTSUP and the field named, rather
 * than rendered wrong. Returns 0 or -errno with a sentence in err. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "modules/cpm/cpm_pki.h"

#define CPM_CONFIG_MAX_FILE ((size_t)1 << 20)
#define CPM_CONFIG_MAX_ARGS 256
#define CPM_CONFIG_MAX_VOLUMES 64
#define CPM_CONFIG_MAX_SANS 60

struct cpm_arg {
	char *name; /* without "--" */
	char *value;
};

struct cpm_volume {
	char *name, *host_path, *mount_path, *path_type; /* path_type may be NULL */
	bool read_only;
};

/* One component's part of the ClusterConfiguration. */
struct cpm_component {
	struct cpm_arg *args; /* extraArgs, in the order given */
	size_t nargs;
	struct cpm_volume *vols; /* extraVolumes */
	size_t nvols;
};

struct cpm_config {
	char *api_version;	  /* "kubeadm.k8s.io/v1beta4" */
	char *kubernetes_version; /* "v1.33.4" */
	int kube_minor;		  /* 33 */
	char *cluster_name;	  /* default "kubernetes" */
	char *control_plane_endpoint; /* may be NULL */
	char *image_repository;	      /* default "registry.k8s.io" */
	char *service_subnet;	      /* default "10.96.0.0/12" */
	char *pod_subnet;	      /* may be NULL */
	char *dns_domain;	      /* default "cluster.local" */
	char **apiserver_cert_sans;   /* NULL-terminated, may be NULL */
	char **etcd_server_cert_sans, **etcd_peer_cert_sans;
	char *etcd_data_dir;	      /* default "/var/lib/etcd" */
	char *etcd_image_repository; /* NULL: image_repository */
	char *etcd_image_tag;	      /* NULL: the version kubeadm pairs with kube_minor */
	char *node_name, *advertise_address;
	int bind_port; /* default 6443 */
	enum cpm_key_algo algo;
	int64_t cert_validity_s, ca_validity_s;
	struct cpm_component apiserver, controller_manager, scheduler, etcd;
};

int cpm_config_load(const char *path, const char *node_name, const char *my_ip,
		    struct cpm_config *ret, char *err, size_t errlen);
/* The same from text (tests, the Secret's value). */
int cpm_config_parse(const char *text, size_t len, const char *node_name, const char *my_ip,
		     struct cpm_config *ret, char *err, size_t errlen);
/* The PKI input of the config (its strings point into c). */
void cpm_config_pki_input(const struct cpm_config *c, const char *root,
			  struct cpm_pki_input *ret);
void cpm_config_release(struct cpm_config *c);
