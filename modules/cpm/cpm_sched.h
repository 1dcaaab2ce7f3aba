/* kube-scheduler's configuration as Deckhouse renders it: the two profiles (default-scheduler
 * with zone spreading, high-node-utilization with MostAllocated) and one extender per webhook
 * of every KubeSchedulerWebhookConfiguration (deckhouse.io/v1alpha1, cluster-scoped).
 *
 *   struct cpm_sched_extenders e = {0};
 *   char err[300], *yaml;
 *   r = cpm_sched_parse(text, len, "cluster.local", cluster_ca_pem, &e, err, sizeof(err));
 *   r = cpm_sched_render(33, &e, &yaml);      // kubescheduler.config.k8s.io/v1 (v1beta3 < 1.29)
 *   cpm_sched_extenders_release(&e);
 *
 * The input is YAML: one CR, a sequence of CRs, a List (items[], as `kubectl get -o yaml`
 * prints it), or several of those as documents separated by "---". A CR is checked as its CRD
 * says (webhooks required; weight an integer >= 1, required; failurePolicy Fail or Ignore,
 * default Fail; clientConfig.service.{name,namespace,port,path} and clientConfig.caBundle
 * required; timeoutSeconds an integer, default 5) and a little more, so that the URL is one
 * (name a DNS-1035 label, namespace a DNS-1123 label, port 1-65535, timeoutSeconds >= 0, a path
 * without spaces, '?' or '#'); a refused CR names the field: `KubeSchedulerWebhookConfiguration
 * "x": webhooks[0].weight: must be an integer of at least 1`. Nothing is rendered then.
 *
 * Each webhook gives urlPrefix https://NAME.NAMESPACE.svc.CLUSTER_DOMAIN:PORT/PATH (the path
 * cleaned as Go's url.JoinPath does), filterVerb filter, prioritizeVerb prioritize, weight,
 * enableHTTPS true, httpTimeout TIMEOUTs, nodeCacheCapable true, ignorable (failurePolicy
 * Ignore) and tlsConfig.caData: the caBundle, or when that is not base64 of a PEM certificate
 * the cluster CA (base64 of cluster_ca_pem; with none given such a CR is refused). CRs come
 * sorted by name, webhooks in their order, so the same CRs always give the same file. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "modules/cpm/cpm_report.h"

#define CPM_SCHED_MAX_FILE ((size_t)1 << 20)
#define CPM_SCHED_MAX_EXTENDERS 256
/* Where Deckhouse installs the extra file (the kubeadm configuration's scheduler extraArgs
 * give it as --config). */
#define CPM_SCHED_CONFIG_PATH "/etc/kubernetes/deckhouse/extra-files/scheduler-config.yaml"

struct cpm_sched_extender {
	char *cr;	  /* the CR's metadata.name */
	size_t index;	  /* in its webhooks[] */
	char *url_prefix; /* https://name.ns.svc.cluster.local:8099/scheduler */
	long long weight, timeout_s;
	bool ignorable;
	char *ca_data;	  /* base64 */
	bool ca_fallback; /* the caBundle was not a certificate: the cluster CA */
};

struct cpm_sched_extenders {
	struct cpm_sched_extender *v;
	size_t n;
};

/* "kubescheduler.config.k8s.io/v1" from 1.29, ".../v1beta3" before. */
const char *cpm_sched_api_version(int kube_minor);
/* 0, or -EINVAL (bad YAML, a refused CR), -E2BIG, -ENOMEM with a sentence in err. */
int cpm_sched_parse(const char *text, size_t len, const char *cluster_domain,
		    const char *cluster_ca_pem, struct cpm_sched_extenders *ret, char *err,
		    size_t errlen);
int cpm_sched_load(const char *path, const char *cluster_domain, const char *cluster_ca_pem,
		   struct cpm_sched_extenders *ret, char *err, size_t errlen);
/* The KubeSchedulerConfiguration text (malloc'd). */
int cpm_sched_render(int kube_minor, const struct cpm_sched_extenders *e, char **ret);
void cpm_sched_extenders_release(struct cpm_sched_extenders *e);
/* Writes text to ROOT + CPM_SCHED_CONFIG_PATH (0600) when it differs, as a report step;
 * detail (may be NULL) is added to the step's line. 0 unchanged, 1 changed, -errno. */
int cpm_sched_write(const char *root, const char *text, bool dry_run, const char *detail,
		    struct cpm_report *rep);
/* `aws-k8s cpm scheduler-config ...` (argv[0] is "scheduler-config"); the exit code. */
int cpm_sched_main(int argc, char **argv);
