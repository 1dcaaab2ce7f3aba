/* Kubernetes version changes of the control plane and the kubelets, as Deckhouse's
 * effective_kubernetes_version hook makes them, planned without touching anything.
 *
 *   struct cpm_vmaster m[] = { { "master-0", { 32, 32, 32 } }, { "master-1", { 32, 32, 32 } } };
 *   struct cpm_vkubelet k[] = { { "master-0", 32 }, { "worker-0", 32 } };
 *   struct cpm_vstate s = { m, 2, k, 2, 0 };
 *   struct cpm_vstep *steps; size_t n; struct cpm_vrefusal why;
 *   r = cpm_version_plan(&s, 34, &steps, &n, &why);   // 0 (s is now at 1.34), -EPERM: why
 *   ...
 *   free(steps);
 *
 * One step moves one component of one node by one minor. Upgrade: the control plane of every
 * master first (master by master: kube-apiserver, then kube-controller-manager, then
 * kube-scheduler), then the kubelets, then the next minor. Downgrade: the kubelets first, then
 * the control plane (kube-controller-manager and kube-scheduler before their kube-apiserver),
 * and never more than one minor below maxUsedControlPlaneKubernetesVersion. Every state
 * between two steps keeps upstream's version skew policy; a change that cannot is refused with
 * the rule named (CPM_RULE_*) and a sentence.
 *
 * Versions are minors of Kubernetes 1.x ("1.33", "v1.33.4" -> 33); patch versions follow the
 * Deckhouse release and are not planned here. */
#pragma once
#include <stddef.h>

/* The rules a refusal names. */
#define CPM_RULE_VERSION_MAP "version-map" /* not in the map, or end of life as a target */
#define CPM_RULE_DOWNGRADE_FLOOR                                                                   \
	"downgrade-floor"			 /* below maxUsedControlPlaneKubernetesVersion-1 */
#define CPM_RULE_APISERVER_SKEW "apiserver-skew" /* kube-apiservers within 1 minor */
#define CPM_RULE_CM_SKEW "kcm-scheduler-skew"	 /* <= its kube-apiserver, at most 1 older */
#define CPM_RULE_KUBELET_SKEW "kubelet-skew"	 /* <= every kube-apiserver, at most 3 older */

enum cpm_vmap_status {
	CPM_VMAP_UNKNOWN = 0, /* not in the map */
	CPM_VMAP_EOL,	      /* still runs, can no longer be chosen */
	CPM_VMAP_SUPPORTED,
	CPM_VMAP_DEFAULT, /* what "Default" means */
	CPM_VMAP_PREVIEW,
};

struct cpm_vmap_entry {
	int minor;
	enum cpm_vmap_status status;
};

/* Deckhouse's version map (candi/version_map.yml), oldest first, ended by { 0 }. */
extern const struct cpm_vmap_entry cpm_version_map[];

/* The control-plane components of a master, in upgrade order. */
enum cpm_vcomp {
	CPM_VC_APISERVER,
	CPM_VC_KCM,
	CPM_VC_SCHEDULER,
	CPM_VC_COUNT,
	CPM_VC_KUBELET = CPM_VC_COUNT, /* in a step: the kubelet of a node */
};

struct cpm_vmaster {
	const char *node;
	int minor[CPM_VC_COUNT]; /* by enum cpm_vcomp */
};

struct cpm_vkubelet {
	const char *node;
	int minor;
};

struct cpm_vstate {
	struct cpm_vmaster *masters; /* at least one */
	size_t nmasters;
	struct cpm_vkubelet *kubelets;
	size_t nkubelets;
	int max_used; /* maxUsedControlPlaneKubernetesVersion; 0 or older: the newest component */
};

struct cpm_vstep {
	size_t index; /* into masters, or kubelets for CPM_VC_KUBELET */
	enum cpm_vcomp comp;
	int from, to;
};

struct cpm_vrefusal {
	const char *rule; /* CPM_RULE_* */
	char why[300];
};

#define CPM_VERSION_MAX_NODES 5000

/* "1.33", "v1.33", "1.33.4", "v1.33.4", with a "-..." or "+..." suffix after the patch: the
 * minor (1.x only); -EINVAL otherwise. */
int cpm_version_parse(const char *s, int *ret_minor);
enum cpm_vmap_status cpm_version_status(int minor);
const char *cpm_vmap_status_name(enum cpm_vmap_status s);
/* The map's default minor. */
int cpm_version_default(void);
const char *cpm_vcomp_name(enum cpm_vcomp c);
/* The target a person asks for: "Default" or a version in the map that is not end of life;
 * -EPERM (rule version-map) otherwise, -EINVAL for a text that is no version. */
int cpm_version_target(const char *s, int *ret_minor, struct cpm_vrefusal *why);
/* 0 when the state keeps upstream's skew policy, else -EPERM with the first rule broken. */
int cpm_version_check(const struct cpm_vstate *s, struct cpm_vrefusal *why);
/* The next step towards target: 1 with *ret, 0 when everything is at target, -EPERM refused
 * (why), -EINVAL for an empty or too large state. s is not changed. */
int cpm_version_next(const struct cpm_vstate *s, int target, struct cpm_vstep *ret,
		     struct cpm_vrefusal *why);
/* Applies a step to s (and raises max_used with the control plane). */
void cpm_version_apply(struct cpm_vstate *s, const struct cpm_vstep *st);
/* Every step from s to target (s ends at target; on a refusal s and *ret are untouched and
 * nothing is planned: a change is refused whole). *ret is malloc'd (NULL when n is 0). */
int cpm_version_plan(struct cpm_vstate *s, int target, struct cpm_vstep **ret, size_t *ret_n,
		     struct cpm_vrefusal *why);
/* `aws-k8s cpm version plan ...` (argv[0] is "version"); returns the exit code. */
int cpm_version_main(int argc, char **argv);
