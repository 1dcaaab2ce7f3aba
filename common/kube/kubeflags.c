/* The shared Kubernetes flags (see kubeflags.h). */
#include "common/kube/kubeflags.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/kube/config.h"
#include "common/kube/rest.h"

char *kube_flag_kubeconfig;
char *kube_flag_master;
double kube_flag_qps;
long long kube_flag_burst;
char *kube_flag_content_type;

bool kube_flag_leader_elect;
int64_t kube_flag_le_lease_duration;
int64_t kube_flag_le_renew_deadline;
int64_t kube_flag_le_retry_period;
char *kube_flag_le_resource_lock;
char *kube_flag_le_resource_name;
char *kube_flag_le_resource_namespace;

int kube_client_from_flags(const char *component, struct kube_client **ret, char *err,
			   size_t errlen)
{
	_cleanup_kube_config_ struct kube_config *cfg = NULL;
	struct kube_config_opts o = {.kubeconfig = kube_flag_kubeconfig,
				     .master = kube_flag_master};
	int r;

	if ((r = kube_config_load(&o, &cfg, err, errlen)) < 0)
		return r;
	struct kube_client_opts co = {
	    .component = component,
	    .qps = kube_flag_qps,
	    .burst = (int)kube_flag_burst,
	};
	if ((r = kube_client_new(cfg, &co, ret)) < 0)
		snprintf(err, errlen, "cannot create a Kubernetes client for %s (%s): %s",
			 cfg->server, cfg->source, strerror(-r));
	return r;
}

int kube_le_flags_check(char *err, size_t errlen)
{
	const char *lock = kube_flag_le_resource_lock ? kube_flag_le_resource_lock : "leases";

	if (strcmp(lock, "leases") != 0) {
		snprintf(err, errlen,
			 "--leader-elect-resource-lock: '%s' is not supported (only 'leases')",
			 lock);
		return -EINVAL;
	}
	if (kube_flag_le_retry_period <= 0 || kube_flag_le_renew_deadline <= 0 ||
	    kube_flag_le_lease_duration <= 0) {
		snprintf(err, errlen, "the leader-election durations must be positive");
		return -EINVAL;
	}
	if (kube_flag_le_lease_duration <= kube_flag_le_renew_deadline) {
		snprintf(err, errlen,
			 "--leader-elect-lease-duration must be greater than "
			 "--leader-elect-renew-deadline");
		return -EINVAL;
	}
	if ((double)kube_flag_le_renew_deadline <= 1.2 * (double)kube_flag_le_retry_period) {
		snprintf(err, errlen,
			 "--leader-elect-renew-deadline must be greater than 1.2 x "
			 "--leader-elect-retry-period");
		return -EINVAL;
	}
	if (!kube_flag_le_resource_name || !*kube_flag_le_resource_name) {
		snprintf(err, errlen, "--leader-elect-resource-name must not be empty");
		return -EINVAL;
	}
	return 0;
}
