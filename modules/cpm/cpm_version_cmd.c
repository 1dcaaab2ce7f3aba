/* `aws-k8s cpm version plan`: the planner of cpm_version.h on versions given as flags. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "modules/cpm/cpm_version.h"
#include "modules/cpm/cpm_version_cluster.h"

static const char version_usage[] =
    "Plans a Kubernetes version change as Deckhouse makes it, one step per line, without\n"
    "changing anything:\n"
    "\n"
    "  aws-k8s cpm version plan --target 1.34|Default --control-plane master-0=1.32 ...\n"
    "      --kubelet worker-0=v1.32.5 ... [--max-used 1.33]\n"
    "  aws-k8s cpm version plan --target 1.34 --kubeconfig /etc/kubernetes/admin.conf\n"
    "      (the versions read from the cluster: Nodes' status.nodeInfo.kubeletVersion, the\n"
    "      mirror pods kube-system/<component>-<node> of the control-plane Nodes, and\n"
    "      maxUsedControlPlaneKubernetesVersion from the Secret d8-cluster-configuration)\n"
    "\n"
    "One step moves one component of one node by one minor. Upgrade: every master's control\n"
    "plane first (master by master: kube-apiserver, kube-controller-manager, kube-scheduler),\n"
    "then the kubelets, then the next minor. Downgrade: the kubelets first, then the control\n"
    "plane, never more than one minor below maxUsedControlPlaneKubernetesVersion. Every state\n"
    "between two steps keeps upstream's version skew policy: kube-apiservers within 1 minor;\n"
    "kube-controller-manager and kube-scheduler not newer than the kube-apiserver of their\n"
    "master (the one their kubeconfig names) and at most 1 minor older; kubelets not newer\n"
    "than any kube-apiserver and at most 3 minors older than the newest.\n"
    "\n"
    "Version map (Deckhouse's): 1.31 end of life, 1.32, 1.33 default, 1.34, 1.35 preview.\n"
    "\n"
    "A refused change prints the rule that refuses it (version-map, downgrade-floor,\n"
    "apiserver-skew, kcm-scheduler-skew, kubelet-skew) and exits 1; nothing is planned.\n"
    "Exit codes: 0 planned (or nothing to do), 1 refused, 2 usage error.";

static char *target_s, *max_used_s, *kubeconfig;
static char **cp_v, **kubelet_v;

static const struct flag version_flags[] = {
    {"target", FLAG_STRING, &target_s, NULL, NULL,
     "The version wanted: 1.MINOR (in the version map, not end of life) or Default."},
    {"control-plane", FLAG_MAP, &cp_v, NULL, NULL,
     "A master's control-plane version: NODE=VERSION (its kube-apiserver, "
     "kube-controller-manager and kube-scheduler), or NODE/COMPONENT=VERSION for one of them; "
     "repeatable."},
    {"kubelet", FLAG_MAP, &kubelet_v, NULL, NULL,
     "A node's kubelet version (status.nodeInfo.kubeletVersion): NODE=VERSION; repeatable."},
    {"max-used", FLAG_STRING, &max_used_s, NULL, NULL,
     "maxUsedControlPlaneKubernetesVersion (Secret d8-cluster-configuration); default: the "
     "newest control-plane version given."},
    {"kubeconfig", FLAG_STRING, &kubeconfig, NULL, NULL,
     "Read the versions from this cluster instead: the kubelets from the Nodes, the control "
     "plane from the mirror pods of the control-plane Nodes, --max-used from the Secret "
     "kube-system/d8-cluster-configuration (unless given)."},
    LOG_FLAGS,
    {NULL},
};

/* "NODE[/COMPONENT]=VERSION" -> node (in buf), component (-1: all), minor */
static int split(const char *kv, char *node, size_t n, int *comp, int *minor)
{
	const char *eq = strchr(kv, '='), *slash;
	size_t len;

	if (!eq || eq == kv || cpm_version_parse(eq + 1, minor) < 0)
		return -EINVAL;
	slash = memchr(kv, '/', (size_t)(eq - kv));
	len = (size_t)((slash ? slash : eq) - kv);
	if (len == 0 || len >= n)
		return -EINVAL;
	memcpy(node, kv, len);
	node[len] = 0;
	*comp = -1;
	if (slash) {
		for (int c = 0; c < CPM_VC_COUNT; c++)
			if (strlen(cpm_vcomp_name((enum cpm_vcomp)c)) == (size_t)(eq - slash - 1) &&
			    strncmp(slash + 1, cpm_vcomp_name((enum cpm_vcomp)c),
				    (size_t)(eq - slash - 1)) == 0)
				*comp = c;
		if (*comp < 0)
			return -EINVAL;
	}
	return 0;
}

struct names {
	char (*v)[254];
	size_t n;
};

static size_t name_index(struct names *nm, const char *node)
{
	for (size_t i = 0; i < nm->n; i++)
		if (strcmp(nm->v[i], node) == 0)
			return i;
	snprintf(nm->v[nm->n], sizeof(nm->v[0]), "%s", node);
	return nm->n++;
}

static int load(char **cp, char **kl, struct cpm_vstate *s, struct names *mn, struct names *kn)
{
	size_t ncp = 0, nk = 0;
	char node[254];
	int comp, minor;

	while (cp && cp[ncp])
		ncp++;
	while (kl && kl[nk])
		nk++;
	if (ncp == 0 || ncp > CPM_VERSION_MAX_NODES || nk > CPM_VERSION_MAX_NODES) {
		fprintf(stderr,
			"aws-k8s cpm version plan: --control-plane is required (1 to %d "
			"entries; --kubelet at most %d)\n",
			CPM_VERSION_MAX_NODES, CPM_VERSION_MAX_NODES);
		return -EINVAL;
	}
	mn->v = calloc(ncp, sizeof(*mn->v));
	kn->v = calloc(nk + 1, sizeof(*kn->v));
	s->masters = calloc(ncp, sizeof(*s->masters));
	s->kubelets = calloc(nk + 1, sizeof(*s->kubelets));
	if (!mn->v || !kn->v || !s->masters || !s->kubelets)
		return -ENOMEM;
	/* NODE=V first, then NODE/COMPONENT=V over it, whatever the order given */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < ncp; i++) {
			if (split(cp[i], node, sizeof(node), &comp, &minor) < 0) {
				fprintf(stderr,
					"aws-k8s cpm version plan: --control-plane \"%s\" is not "
					"NODE=1.MINOR or NODE/COMPONENT=1.MINOR (COMPONENT: "
					"kube-apiserver, kube-controller-manager, "
					"kube-scheduler)\n",
					cp[i]);
				return -EINVAL;
			}
			if ((comp < 0) != (pass == 0))
				continue;
			size_t m = name_index(mn, node);
			if (!s->masters[m].node) {
				s->masters[m].node = mn->v[m];
				for (int c = 0; c < CPM_VC_COUNT; c++)
					s->masters[m].minor[c] = -1;
			}
			for (int c = 0; c < CPM_VC_COUNT; c++)
				if (comp < 0 || comp == c)
					s->masters[m].minor[c] = minor;
		}
	s->nmasters = mn->n;
	for (size_t i = 0; i < s->nmasters; i++)
		for (int c = 0; c < CPM_VC_COUNT; c++)
			if (s->masters[i].minor[c] < 0) {
				fprintf(stderr,
					"aws-k8s cpm version plan: %s: no version for %s (give "
					"--control-plane %s=VERSION)\n",
					s->masters[i].node, cpm_vcomp_name((enum cpm_vcomp)c),
					s->masters[i].node);
				return -EINVAL;
			}
	for (size_t i = 0; i < nk; i++) {
		if (split(kl[i], node, sizeof(node), &comp, &minor) < 0 || comp >= 0) {
			fprintf(stderr,
				"aws-k8s cpm version plan: --kubelet \"%s\" is not "
				"NODE=1.MINOR\n",
				kl[i]);
			return -EINVAL;
		}
		size_t k = name_index(kn, node);
		s->kubelets[k].node = kn->v[k];
		s->kubelets[k].minor = minor;
	}
	s->nkubelets = kn->n;
	return 0;
}

static void notes(const struct cpm_vstate *s, int target)
{
	if (cpm_version_status(target) == CPM_VMAP_PREVIEW)
		printf("note: 1.%d is a preview version\n", target);
	for (size_t i = 0; i < s->nmasters; i++)
		for (int c = 0; c < CPM_VC_COUNT; c++) {
			enum cpm_vmap_status st = cpm_version_status(s->masters[i].minor[c]);
			if (st == CPM_VMAP_EOL || st == CPM_VMAP_UNKNOWN) {
				printf("note: %s runs 1.%d (%s)\n", s->masters[i].node,
				       s->masters[i].minor[c], cpm_vmap_status_name(st));
				c = CPM_VC_COUNT;
			}
		}
}

static int plan(void)
{
	struct cpm_vstate s = {0};
	struct names mn = {0}, kn = {0};
	struct cpm_vrefusal why = {0};
	struct cpm_vstep *steps = NULL;
	char **cp = cp_v, **kl = kubelet_v, *used = max_used_s, err[700] = "";
	char **ccp = NULL, **ckl = NULL, *cused = NULL;
	size_t n = 0;
	int target = 0, r, from_lo, from_hi;

	if (!target_s || !target_s[0]) {
		fprintf(stderr, "aws-k8s cpm version plan: --target is required (1.MINOR or "
				"Default)\n");
		return 2;
	}
	r = cpm_version_target(target_s, &target, &why);
	if (r == -EINVAL) {
		fprintf(stderr,
			"aws-k8s cpm version plan: --target \"%s\" is not 1.MINOR or "
			"Default\n",
			target_s);
		return 2;
	}
	if (r >= 0 && kubeconfig && kubeconfig[0]) {
		if (cp_v || kubelet_v) {
			fprintf(stderr,
				"aws-k8s cpm version plan: --kubeconfig reads the versions: "
				"give it without --control-plane and --kubelet\n");
			return 2;
		}
		r = cpm_version_from_cluster(kubeconfig, &ccp, &ckl, &cused, err, sizeof(err));
		if (r < 0) {
			fprintf(stderr, "aws-k8s cpm version plan: %s: %s\n", kubeconfig, err);
			r = 1;
			goto out;
		}
		cp = ccp;
		kl = ckl;
		if (!used || !used[0])
			used = cused;
	}
	if (r >= 0 && (r = load(cp, kl, &s, &mn, &kn)) < 0) {
		r = r == -ENOMEM ? 1 : 2;
		goto out;
	}
	if (r >= 0 && used && used[0] && cpm_version_parse(used, &s.max_used) < 0) {
		fprintf(stderr, "aws-k8s cpm version plan: --max-used \"%s\" is not 1.MINOR\n",
			used);
		r = 2;
		goto out;
	}
	if (r >= 0) {
		notes(&s, target);
		from_lo = from_hi = s.masters[0].minor[CPM_VC_APISERVER];
		for (size_t i = 0; i < s.nmasters; i++)
			for (int c = 0; c < CPM_VC_COUNT; c++) {
				int v = s.masters[i].minor[c];
				from_lo = v < from_lo ? v : from_lo;
				from_hi = v > from_hi ? v : from_hi;
			}
		r = cpm_version_plan(&s, target, &steps, &n, &why);
	}
	if (r == -EPERM) {
		fprintf(stderr, "aws-k8s cpm version plan: refused by %s: %s\n", why.rule, why.why);
		r = 1;
		goto out;
	}
	if (r < 0) {
		fprintf(stderr, "aws-k8s cpm version plan: %s\n", strerror(-r));
		r = 1;
		goto out;
	}
	if (n == 0) {
		printf("plan: nothing to do, everything is at 1.%d\n", target);
	} else {
		char from[16];
		snprintf(from, sizeof(from), "1.%d-1.%d", from_lo, from_hi);
		if (from_lo == from_hi)
			snprintf(from, sizeof(from), "1.%d", from_lo);
		printf("plan: %s %s -> 1.%d%s, %zu steps\n",
		       target < from_hi	  ? "downgrade"
		       : target > from_lo ? "upgrade"
					  : "kubelets only, control plane at",
		       from, target, strcmp(target_s, "Default") == 0 ? " (Default)" : "", n);
		for (size_t i = 0; i < n; i++) {
			const struct cpm_vstep *st = &steps[i];
			printf("%4zu. %s %s 1.%d -> 1.%d\n", i + 1,
			       st->comp == CPM_VC_KUBELET ? s.kubelets[st->index].node
							  : s.masters[st->index].node,
			       cpm_vcomp_name(st->comp), st->from, st->to);
		}
	}
	printf("maxUsedControlPlaneKubernetesVersion: 1.%d\n", s.max_used);
	r = 0;
out:
	free(steps);
	free(s.masters);
	free(s.kubelets);
	free(mn.v);
	free(kn.v);
	strv_free(ccp);
	strv_free(ckl);
	free(cused);
	return r;
}

int cpm_version_main(int argc, char **argv)
{
	int r, n = flags_parse("cpm version", version_usage, version_flags, argc, argv);

	if (n < 0)
		return flags_exit_code(n);
	if (n != 1 || strcmp(argv[0], "plan") != 0) {
		fprintf(stderr, "aws-k8s cpm version: the command is 'plan' (see 'aws-k8s cpm "
				"version --help')\n");
		r = 2;
	} else {
		r = plan();
	}
	flags_free(version_flags);
	return r;
}
