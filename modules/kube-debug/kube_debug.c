/* aws-k8s kube-debug: one action of the Kubernetes client core per invocation, for tests and for
 * debugging a connection to a cluster. This file holds the usage text, the flags, the table of
 * actions and main; the REST actions are in kube_debug_rest.c, the long-running ones (watch,
 * informer, sync, leader, event) in kube_debug_run.c, the options and helpers they share in
 * kube_debug_common.c. */
#include "modules/kube-debug/kube_debug.h"

#include <stdio.h>
#include <string.h>

#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"
#include "modules/kube-debug/kube_debug_int.h"

static const char kube_debug_usage[] =
    "Drives the Kubernetes client core, one action per run (for tests and debugging).\n\n"
    "Actions (RES is a plural such as pods, nodes, leases, or GROUP/VERSION/PLURAL; NAME may\n"
    "be NAMESPACE/NAME):\n"
    "  get RES NAME                 print the object\n"
    "  list RES                     list page by page (--limit), print keys and a summary\n"
    "  create RES FILE              create from a JSON or YAML file ('-': stdin)\n"
    "  update RES FILE              replace (PUT) with the file's resourceVersion\n"
    "  conflict RES NAME            a stale update (must conflict) and then RetryOnConflict\n"
    "  patch RES NAME TYPE PATCH    TYPE: merge, strategic or json\n"
    "  delete RES NAME              with --propagation, --grace-period, --precondition-*\n"
    "  evict NAME                   evict a pod (policy/v1 Eviction)\n"
    "  token-review TOKEN           TokenReview: print the status\n"
    "  access-review USER VERB RES  SubjectAccessReview (--namespace, --group): print status\n"
    "  raw PATH                     GET any path\n"
    "  watch RES                    print events (--count, --duration, --resource-version)\n"
    "  informer RES                 run an informer, print its events and statistics\n"
    "  sync RES[,RES...]            list+sync informers, print time and resident memory\n"
    "  leader                       take part in leader election (--out FILE: write\n"
    "                               'IDENTITY NANOSECONDS' lines while leading)\n"
    "  event RES NAME TYPE REASON MESSAGE   record an Event --count times ('{i}' in\n"
    "                               MESSAGE: the repeat's number)\n"
    "  drain NODE                   evict the node's pods (--duration: deadline, --grace-period,\n"
    "                               --ignore-daemonsets, --delete-emptydir-data, --force,\n"
    "                               --eviction-retry, --parallel, --dry-run); does not cordon\n"
    "  cordon NODE | uncordon NODE  set or clear spec.unschedulable\n"
    "  taint NODE KEY[=VALUE]:EFFECT   add a taint; KEY[:EFFECT]- removes it\n"
    "  label NODE KEY=VALUE         set a node label; KEY- removes it";

static const struct flag kube_debug_flags[] = {
    KUBE_FLAGS,
    LEADER_ELECT_FLAGS("aws-k8s-kube-debug"),
    {"namespace", FLAG_STRING, &dbg.ns, NULL, NULL, "Namespace (default: the context's)."},
    {"cluster-scoped", FLAG_BOOL, &dbg.cluster_scoped, "false", NULL,
     "A GROUP/VERSION/PLURAL resource is cluster-scoped."},
    {"selector", FLAG_STRING, &dbg.label, NULL, NULL, "Label selector."},
    {"field-selector", FLAG_STRING, &dbg.field, NULL, NULL, "Field selector."},
    {"limit", FLAG_INT, &dbg.limit, "0", NULL, "Page size of lists.", 0, 100000},
    {"resource-version", FLAG_STRING, &dbg.rv, NULL, NULL, "Watch from this version."},
    {"count", FLAG_INT, &dbg.count, "0", NULL, "Stop after this many events (or repeats).", 0,
     100000000},
    {"duration", FLAG_DURATION, &dbg.duration, "0s", NULL, "Stop after this long (0: never)."},
    {"watch-timeout", FLAG_INT, &dbg.watch_timeout, "0", NULL,
     "timeoutSeconds of watch requests (0: 5-10 min).", 0, 86400},
    {"max-event", FLAG_INT, &dbg.max_event, "0", NULL,
     "Cap on one watch event in bytes (0: the default, 16 MiB).", 0, 1LL << 30},
    {"resync", FLAG_DURATION, &dbg.resync, "0s", NULL, "Informer resync period."},
    {"transform", FLAG_STRING, &dbg.transform, "strip", NULL,
     "What informers keep: strip (everything but managedFields) or project (what a "
     "controller typically reads; managedFields are always dropped)."},
    {"propagation", FLAG_STRING, &dbg.propagation, NULL, NULL, "Delete propagation policy."},
    {"grace-period", FLAG_INT, &dbg.grace, "-1", NULL, "Delete grace period (-1: default).", -1,
     86400},
    {"precondition-uid", FLAG_STRING, &dbg.pre_uid, NULL, NULL, "Delete precondition uid."},
    {"precondition-rv", FLAG_STRING, &dbg.pre_rv, NULL, NULL,
     "Delete precondition resourceVersion."},
    {"group", FLAG_STRING, &dbg.group, NULL, NULL, "API group of an access review."},
    {"out", FLAG_STRING, &dbg.out, NULL, NULL, "Leader: file to append 'ID NS' lines to."},
    {"identity", FLAG_STRING, &dbg.identity, NULL, NULL, "Leader identity (default: host_uuid)."},
    {"ignore-daemonsets", FLAG_BOOL, &dbg.ignore_daemonsets, "true", NULL,
     "Drain: skip DaemonSet pods (else the drain is refused)."},
    {"delete-emptydir-data", FLAG_BOOL, &dbg.delete_emptydir, "false", NULL,
     "Drain: evict pods with emptyDir volumes (else the drain is refused)."},
    {"force", FLAG_BOOL, &dbg.force, "false", NULL,
     "Drain: evict pods no controller manages (else the drain is refused)."},
    {"dry-run", FLAG_BOOL, &dbg.dry_run, "false", NULL, "Drain: count, evict nothing."},
    {"eviction-retry", FLAG_DURATION, &dbg.eviction_retry, "5s", NULL,
     "Drain: wait after an eviction refused by a PodDisruptionBudget."},
    {"parallel", FLAG_INT, &dbg.parallel, "8", NULL, "Drain: evictions in flight at once.", 1,
     64},
    {"quiet", FLAG_BOOL, &dbg.quiet, "false", NULL, "Print summaries only."},
    LOG_FLAGS,
    {NULL},
};

static int run_action(struct kube_client *kc, int n, char **args)
{
	const char *a = args[0];
	struct kube_resource res;
	static const struct {
		const char *name;
		int nargs; /* after the action, RES included */
		bool res;
	} actions[] = {
	    {"get", 2, true},		{"list", 1, true},
	    {"create", 2, true},	{"update", 2, true},
	    {"conflict", 2, true},	{"patch", 4, true},
	    {"delete", 2, true},	{"evict", 1, false},
	    {"token-review", 1, false}, {"access-review", 3, false},
	    {"raw", 1, false},		{"watch", 1, true},
	    {"informer", 1, true},	{"sync", 1, false},
	    {"leader", 0, false},	{"event", 5, true},
	    {"drain", 1, false},	{"cordon", 1, false},
	    {"uncordon", 1, false},	{"taint", 2, false},
	    {"label", 2, false},
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(actions); i++)
		if (strcmp(actions[i].name, a) == 0)
			break;
	if (i == ARRAY_SIZE(actions) || n - 1 < actions[i].nargs) {
		fprintf(stderr, "kube-debug: %s '%s' (see 'aws-k8s kube-debug --help')\n",
			i == ARRAY_SIZE(actions) ? "unknown action" : "missing arguments for", a);
		return 2;
	}
	if (actions[i].res && dbg_resource(args[1], &res) < 0) {
		fprintf(stderr, "kube-debug: unknown resource '%s'\n", args[1]);
		return 2;
	}
	args++;
	n--;
	if (!strcmp(a, "get"))
		return dbg_get(kc, &res, args + 1);
	if (!strcmp(a, "list"))
		return dbg_list(kc, &res);
	if (!strcmp(a, "create") || !strcmp(a, "update"))
		return dbg_write(kc, &res, args[1], a[0] == 'u');
	if (!strcmp(a, "conflict"))
		return dbg_conflict(kc, &res, args[1]);
	if (!strcmp(a, "patch"))
		return dbg_patch(kc, &res, args + 1);
	if (!strcmp(a, "delete"))
		return dbg_delete(kc, &res, args[1], false);
	if (!strcmp(a, "evict"))
		return dbg_delete(kc, &kube_pods, args[0], true);
	if (!strcmp(a, "token-review") || !strcmp(a, "access-review"))
		return dbg_review(kc, args, n, a[0] == 't');
	if (!strcmp(a, "raw"))
		return dbg_raw(kc, args[0]);
	if (!strcmp(a, "watch"))
		return dbg_watch(kc, &res);
	if (!strcmp(a, "informer"))
		return dbg_informer(kc, &res);
	if (!strcmp(a, "sync"))
		return dbg_sync(kc, args[0]);
	if (!strcmp(a, "leader"))
		return dbg_leader(kc);
	if (!strcmp(a, "drain"))
		return dbg_drain(kc, args[0]);
	if (!strcmp(a, "cordon") || !strcmp(a, "uncordon"))
		return dbg_cordon(kc, args[0], a[0] == 'c');
	if (!strcmp(a, "taint"))
		return dbg_taint(kc, args[0], args[1]);
	if (!strcmp(a, "label"))
		return dbg_label(kc, args[0], args[1]);
	return dbg_event(kc, &res, args + 1);
}

int kube_debug_main(int argc, char **argv)
{
	struct kube_client *kc = NULL;
	char err[512];
	int n, r;

	n = flags_parse("kube-debug", kube_debug_usage, kube_debug_flags, argc, argv);
	if (n < 0)
		return flags_exit_code(n);
	if (n < 1) {
		fprintf(stderr, "kube-debug: missing action (see 'aws-k8s kube-debug --help')\n");
		flags_free(kube_debug_flags);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((r = kube_client_from_flags("kube-debug", &kc, err, sizeof(err))) < 0) {
		log_error("cannot configure the Kubernetes client", KV_S("error", err), KV_E(r));
		flags_free(kube_debug_flags);
		return 1;
	}
	r = run_action(kc, n, argv);
	kube_client_free(kc);
	flags_free(kube_debug_flags);
	return r;
}
