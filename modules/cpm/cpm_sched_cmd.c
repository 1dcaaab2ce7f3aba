/* `aws-k8s cpm scheduler-config` and the scheduler configuration of `cpm render`
 * (cpm_sched.h, cpm_sched_cmd.h). */
#include "modules/cpm/cpm_sched_cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/fileutil.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "modules/cpm/cpm_files.h"
#include "modules/cpm/cpm_sched.h"
#include "modules/cpm/cpm_version.h"

static const char sched_usage[] =
    "Prints kube-scheduler's configuration as Deckhouse renders it into the extra file\n"
    "scheduler-config.yaml: the profiles default-scheduler (PodTopologySpread over zones,\n"
    "maxSkew 1, ScheduleAnyway) and high-node-utilization (NodeResourcesFit MostAllocated),\n"
    "and one extender per webhook of the KubeSchedulerWebhookConfigurations given:\n"
    "\n"
    "  aws-k8s cpm scheduler-config --kubernetes-version 1.33 [--webhooks FILE]\n"
    "      [--cluster-domain cluster.local] [--cluster-ca /etc/kubernetes/pki/ca.crt]\n"
    "\n"
    "FILE holds the CRs (deckhouse.io/v1alpha1, as `kubectl get\n"
    "kubeschedulerwebhookconfigurations -o yaml` prints them, one CR, a YAML list of them, or\n"
    "documents separated by ---). Each webhook becomes: urlPrefix\n"
    "https://NAME.NAMESPACE.svc.DOMAIN:PORT/PATH, filterVerb filter, prioritizeVerb\n"
    "prioritize, weight, enableHTTPS true, httpTimeout <timeoutSeconds>s (default 5),\n"
    "nodeCacheCapable true, ignorable when failurePolicy is Ignore, and tlsConfig.caData: the\n"
    "caBundle, or the cluster CA when the caBundle is not a certificate (a warning says so).\n"
    "apiVersion kubescheduler.config.k8s.io/v1 from 1.29, v1beta3 before.\n"
    "\n"
    "`aws-k8s cpm render --scheduler-webhooks FILE` writes the same to\n" CPM_SCHED_CONFIG_PATH
    "\n(0600) with the configuration's version and DNS domain and the CA under --root.\n"
    "\n"
    "Exit codes: 0 printed, 1 a CR refused (the field is named) or a file unreadable, 2 usage.";

static char *webhooks_path, *kube_version, *cluster_domain, *cluster_ca;

static const struct flag sched_flags[] = {
    {"webhooks", FLAG_STRING, &webhooks_path, NULL, NULL,
     "YAML file of KubeSchedulerWebhookConfiguration objects (none: no extenders)."},
    {"kubernetes-version", FLAG_STRING, &kube_version, NULL, NULL,
     "The cluster's Kubernetes version (1.MINOR[.PATCH]): picks the config's apiVersion."},
    {"cluster-domain", FLAG_STRING, &cluster_domain, "cluster.local", NULL,
     "The cluster's DNS domain, for the extenders' Service URLs."},
    {"cluster-ca", FLAG_STRING, &cluster_ca, NULL, NULL,
     "The cluster CA certificate (PEM), used for a webhook whose caBundle is invalid."},
    LOG_FLAGS,
    {NULL},
};

static void warn_fallbacks(const struct cpm_sched_extenders *e, FILE *f)
{
	for (size_t i = 0; i < e->n; i++)
		if (e->v[i].ca_fallback)
			fprintf(f,
				"warning: KubeSchedulerWebhookConfiguration \"%s\": "
				"webhooks[%zu].clientConfig.caBundle is not a PEM certificate: "
				"the cluster CA is used\n",
				e->v[i].cr, e->v[i].index);
}

static int read_ca(const char *path, char **ret, char *err, size_t errlen, bool optional)
{
	int r = file_read_all(path, 1 << 20, ret, NULL);

	if (r == -ENOENT && optional) {
		*ret = NULL;
		return 0;
	}
	if (r < 0)
		snprintf(err, errlen, "cannot read the cluster CA \"%s\": %s", path, strerror(-r));
	return r;
}

int cpm_sched_for_render(const struct cpm_config *c, const char *root, const char *path,
			 char **ret_text, char *detail, size_t detail_len, char *err, size_t errlen)
{
	struct cpm_sched_extenders e = {0};
	char ca_path[4096], *ca = NULL;
	size_t fallbacks = 0;
	bool has_config = false;
	int r = cpm_path(root, "/etc/kubernetes/pki/ca.crt", ca_path, sizeof(ca_path));

	if (r >= 0)
		r = read_ca(ca_path, &ca, err, errlen, true);
	if (r >= 0)
		r = cpm_sched_load(path, c->dns_domain, ca, &e, err, errlen);
	if (r >= 0)
		r = cpm_sched_render(c->kube_minor, &e, ret_text);
	free(ca);
	if (r < 0) {
		if (!err[0])
			snprintf(err, errlen, "%s", strerror(-r));
		cpm_sched_extenders_release(&e);
		return r;
	}
	for (size_t i = 0; i < e.n; i++)
		fallbacks += e.v[i].ca_fallback;
	for (size_t i = 0; i < c->scheduler.nargs; i++)
		has_config |= strcmp(c->scheduler.args[i].name, "config") == 0 &&
			      strcmp(c->scheduler.args[i].value, CPM_SCHED_CONFIG_PATH) == 0;
	warn_fallbacks(&e, stderr);
	snprintf(detail, detail_len, "%zu extenders%s%s", e.n,
		 fallbacks ? ", an invalid caBundle replaced by the cluster CA" : "",
		 has_config ? ""
			    : "; scheduler.extraArgs has no config=" CPM_SCHED_CONFIG_PATH
			      ": kube-scheduler does not read it");
	cpm_sched_extenders_release(&e);
	return 0;
}

static int print_config(void)
{
	struct cpm_sched_extenders e = {0};
	char err[600] = "", *ca = NULL, *text = NULL;
	int minor = 0, r = 0;

	if (!kube_version || cpm_version_parse(kube_version, &minor) < 0 || minor < 25) {
		fprintf(stderr,
			"aws-k8s cpm scheduler-config: --kubernetes-version \"%s\" is not "
			"1.MINOR (1.25 or newer)\n",
			kube_version ? kube_version : "");
		return 2;
	}
	if (cluster_ca && cluster_ca[0])
		r = read_ca(cluster_ca, &ca, err, sizeof(err), false);
	if (r >= 0 && webhooks_path && webhooks_path[0])
		r = cpm_sched_load(webhooks_path, cluster_domain, ca, &e, err, sizeof(err));
	if (r >= 0)
		r = cpm_sched_render(minor, &e, &text);
	if (r >= 0) {
		warn_fallbacks(&e, stderr);
		fputs(text, stdout);
	} else {
		fprintf(stderr, "aws-k8s cpm scheduler-config: %s\n", err[0] ? err : strerror(-r));
	}
	free(text);
	free(ca);
	cpm_sched_extenders_release(&e);
	return r < 0 ? 1 : 0;
}

int cpm_sched_main(int argc, char **argv)
{
	int r, n = flags_parse("cpm scheduler-config", sched_usage, sched_flags, argc, argv);

	if (n < 0)
		return flags_exit_code(n);
	if (n > 0) {
		fprintf(stderr, "aws-k8s cpm scheduler-config: unexpected argument '%s'\n",
			argv[0]);
		r = 2;
	} else {
		r = print_config();
	}
	flags_free(sched_flags);
	return r;
}
