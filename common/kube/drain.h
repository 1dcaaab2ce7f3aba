/* Node maintenance through the Kubernetes API: cordon, taints, labels and a drain that evicts
 * the node's pods the way `kubectl drain` (drain.Helper) does.
 *
 *   struct kube_drain_opts o = KUBE_DRAIN_OPTS_INIT;   // kubectl's defaults
 *   struct kube_drain_result res;
 *   o.timeout_s = 120;
 *   if ((r = kube_node_cordon(kc, "ip-10-0-0-1", true)) < 0) ...
 *   r = kube_drain_node(kc, "ip-10-0-0-1", &o, ct, &res);
 *   if (r == -ETIMEDOUT) log_error("drain: %s", res.err);      // names the pods still there
 *
 * Every function returns 0 on success or a -errno (see rest.h for the mapping of API errors);
 * -ECANCELED as soon as the token is cancelled. Nothing here logs above V(2) except a drain's
 * progress (one line per PDB-blocked pod when it first blocks); the caller logs the result. */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>

#include "common/base/cancel.h"
#include "common/kube/rest.h"

/* spec.unschedulable = unschedulable, by a strategic merge patch; a node already in that state
 * is not written. -ENOENT when the node does not exist. */
int kube_node_cordon(struct kube_client *c, const char *node, bool unschedulable);

/* Adds (add = true) the taint key[=value]:effect, or removes it (add = false), keeping the
 * node's other taints. Written by a GET/PUT on the node's resourceVersion, retried on conflict
 * (kube_update_retry). A taint with the same key and effect but another value is replaced.
 * Removing matches the key and, when effect is not NULL, the effect. value may be NULL or ""
 * (no value). Idempotent: nothing is written when the node is already as asked.
 * effect: NoSchedule, PreferNoSchedule or NoExecute (-EINVAL otherwise, when adding). */
int kube_node_taint(struct kube_client *c, const char *node, const char *key, const char *value,
		    const char *effect, bool add);

/* Sets metadata.labels[key] = value, or removes the label when value is NULL, by a merge
 * patch. -EINVAL for an empty key. */
int kube_node_label(struct kube_client *c, const char *node, const char *key, const char *value);

/* Which pods a drain leaves alone or refuses (kubectl's filters). */
enum kube_drain_verdict {
	KUBE_DRAIN_EVICT,	   /* evict it */
	KUBE_DRAIN_SKIP_MIRROR,	   /* static pod (kubernetes.io/config.mirror annotation) */
	KUBE_DRAIN_SKIP_DAEMONSET, /* controlled by a DaemonSet, with ignore_daemonsets */
	KUBE_DRAIN_SKIP_DONE,	   /* already gone: terminal phase and being deleted */
	KUBE_DRAIN_SKIP_CALLER,	   /* opts.skip said so (for example the caller's own pod) */
	KUBE_DRAIN_REFUSE_DAEMONSET, /* DaemonSet pod without ignore_daemonsets */
	KUBE_DRAIN_REFUSE_EMPTYDIR,  /* has an emptyDir volume, without delete_emptydir_data */
	KUBE_DRAIN_REFUSE_UNMANAGED, /* no controller owner reference, without force */
};

struct kube_drain_opts {
	int pod_grace_s;	   /* eviction's gracePeriodSeconds; -1: the pod's own */
	int timeout_s;		   /* whole drain, evictions and wait; 0: no deadline */
	bool ignore_daemonsets;	   /* skip DaemonSet pods (else the drain is refused) */
	bool delete_emptydir_data; /* evict pods with emptyDir volumes (else refused) */
	bool force;		   /* evict pods no controller manages (else refused) */
	int eviction_retry_ms;	   /* wait after a 429 (PDB) or 5xx answer; 0: 5000 */
	int poll_ms;		   /* how often the pods still there are listed; 0: 1000 */
	int parallel;		   /* evictions in flight at once; 0: 8 */
	bool dry_run;		   /* classify and count, evict nothing */
	/* Optional: true to leave a pod alone (KUBE_DRAIN_SKIP_CALLER). */
	bool (*skip)(void *ud, const cJSON *pod);
	/* Optional: called (from the drain's thread) once per pod whose eviction was accepted. */
	void (*on_evicted)(void *ud, const cJSON *pod);
	void *ud;
};
/* kubectl drain's defaults, except ignore_daemonsets and delete_emptydir_data which NTH sets. */
#define KUBE_DRAIN_OPTS_INIT                                                                       \
	((struct kube_drain_opts){.pod_grace_s = -1, .timeout_s = 0, .ignore_daemonsets = true,  \
				  .delete_emptydir_data = false, .force = false})

struct kube_drain_result {
	int evicted;	    /* evictions accepted (dry run: pods that would be evicted) */
	int skipped;	    /* mirror, DaemonSet, finished or caller-skipped pods */
	int refused;	    /* pods that made the drain refuse (-EPERM), nothing evicted */
	int blocked_by_pdb; /* pods whose last eviction answer was a 429 */
	int remaining;	    /* pods still on the node when the drain ended */
	char err[256];	    /* on failure: what and which pods ("ns/name, ...") */
};

/* Classifies one pod (a Pod object) against the options; why (may be NULL) gets a short
 * reason for skips and refusals. Pure: no API call. */
enum kube_drain_verdict kube_drain_classify(const cJSON *pod, const struct kube_drain_opts *o,
					    char *why, size_t why_len);

/* Drains node: lists its pods (fieldSelector spec.nodeName), classifies each one; if any is
 * refused, returns -EPERM before evicting anything (ret->err names them). Otherwise evicts the
 * others through policy/v1 Evictions, o->parallel at a time; a 429 (PodDisruptionBudget) or 5xx
 * answer retries that pod after o->eviction_retry_ms (or the answer's Retry-After if longer)
 * while the others go on; a 404 counts as gone. Then lists the node's pods every o->poll_ms
 * until each evicted pod is gone or replaced (another UID).
 * Does not cordon: call kube_node_cordon first.
 * Returns 0 when every pod is gone; -ETIMEDOUT at the deadline (ret->err names the pods still
 * there, ret->blocked_by_pdb says how many a PDB held); -ECANCELED promptly when ct (NULL: the
 * client's token) is cancelled; another -errno when an eviction fails for another reason (403,
 * 400...) or the pods cannot be listed. ret is filled in every case. */
int kube_drain_node(struct kube_client *c, const char *node, const struct kube_drain_opts *o,
		    struct cancel *ct, struct kube_drain_result *ret);
