/* The scheduler configuration as `cpm render --scheduler-webhooks FILE` makes it: the CRs of
 * FILE with the configuration's DNS domain and Kubernetes version, and ROOT's cluster CA
 * (/etc/kubernetes/pki/ca.crt, when there) for an invalid caBundle.
 *
 *   char *text, detail[300], err[600] = "";
 *   r = cpm_sched_for_render(&cfg, root, path, &text, detail, sizeof(detail), err, sizeof(err));
 *   ... cpm_sched_write(root, text, dry_run, detail, &rep); free(text);
 *
 * detail says how many extenders, whether a caBundle fell back to the cluster CA (a warning
 * line on stderr names each), and when the configuration's scheduler.extraArgs lack
 * config=CPM_SCHED_CONFIG_PATH (kube-scheduler would not read the file). */
#pragma once
#include <stddef.h>

#include "modules/cpm/cpm_config.h"

int cpm_sched_for_render(const struct cpm_config *c, const char *root, const char *path,
			 char **ret_text, char *detail, size_t detail_len, char *err,
			 size_t errlen);
