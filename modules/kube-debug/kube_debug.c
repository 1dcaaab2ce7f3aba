/* aws-k8s kube-debug: one action of the Kubernetes client core per invocation, for tests and for
 * debugging a connection to a cluster. The REST actions are here; the long-running ones
 * (watch, informer, sync, leader, event) are in kube_debug_run.c. */
#include "modules/kube-debug/kube_debug.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/flags.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/kube/config.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"
#include "common/kube/store.h"
#include "common/kube/yaml.h"
#include "modules/kube-debug/kube_debug_int.h"

struct dbg_opts dbg;

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
    "                               MESSAGE: the repeat's number)";

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
    {"quiet", FLAG_BOOL, &dbg.quiet, "false", NULL, "Print summaries only."},
    LOG_FLAGS,
    {NULL},
};

static const struct {
	const char *name;
	const struct kube_resource *res;
} known[] = {
    {"namespaces", &kube_namespaces},
    {"nodes", &kube_nodes},
    {"pods", &kube_pods},
    {"services", &kube_services},
    {"endpoints", &kube_endpoints},
    {"secrets", &kube_secrets},
    {"configmaps", &kube_configmaps},
    {"events", &kube_events},
    {"persistentvolumes", &kube_pvs},
    {"persistentvolumeclaims", &kube_pvcs},
    {"serviceaccounts", &kube_serviceaccounts},
    {"endpointslices", &kube_endpointslices},
    {"leases", &kube_leases},
    {"volumeattachments", &kube_volumeattachments},
    {"csinodes", &kube_csinodes},
    {"csidrivers", &kube_csidrivers},
    {"storageclasses", &kube_storageclasses},
    {"daemonsets", &kube_daemonsets},
    {"deployments", &kube_deployments},
    {"poddisruptionbudgets", &kube_pdbs},
    {"customresourcedefinitions", &kube_crds},
};

int dbg_resource(const char *spec, struct kube_resource *ret)
{
	static char copy[256];
	char *a, *b;

	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (strcmp(spec, known[i].name) == 0) {
			*ret = *known[i].res;
			return 0;
		}
	if (str_copy(copy, sizeof(copy), spec) < 0 || !(a = strchr(copy, '/')) ||
	    !(b = strchr(a + 1, '/')) || strchr(b + 1, '/'))
		return -EINVAL;
	*a = *b = 0;
	*ret = (struct kube_resource){
	    .group = copy, .version = a + 1, .plural = b + 1, .namespaced = !dbg.cluster_scoped};
	return 0;
}

/* "ns/name" or "name" (in --namespace or the context's namespace). */
void dbg_ref(struct kube_client *kc, const struct kube_resource *res, const char *arg,
	     struct kube_ref *ref, char *buf, size_t n)
{
	const char *slash = strchr(arg, '/');

	*ref = (struct kube_ref){.res = res, .name = arg};
	if (!res->namespaced)
		return;
	if (slash && (size_t)(slash - arg) < n) {
		memcpy(buf, arg, (size_t)(slash - arg));
		buf[slash - arg] = 0;
		ref->ns = buf;
		ref->name = slash + 1;
	} else
		ref->ns = dbg.ns ? dbg.ns : kube_client_namespace(kc);
}

int dbg_fail(int r, const struct kube_status *st, const char *what)
{
	printf("error: %s: errno=%s code=%d reason=%s message=\"%s\"\n", what, errno_name(r),
	       st ? st->code : 0, st && st->reason[0] ? st->reason : "-", st ? st->message : "");
	return 1;
}

void dbg_print(const cJSON *v)
{
	_cleanup_free_ char *s = json_print(v);
	puts(s ? s : "null");
}

static int read_object(const char *path, cJSON **ret)
{
	_cleanup_free_ char *data = NULL;
	char err[256];
	size_t len;
	int r;

	if (strcmp(path, "-") == 0) {
		_cleanup_buf_ struct buf b = BUF_INIT(16 << 20);
		char chunk[4096];
		size_t n;
		while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0)
			if ((r = buf_append(&b, chunk, n)) < 0)
				return r;
		len = b.len;
		data = buf_steal(&b);
		r = data ? 0 : -ENOMEM;
	} else
		r = kube_read_file(path, 16 << 20, &data, &len);
	if (r < 0) {
		fprintf(stderr, "kube-debug: cannot read '%s': %s\n", path, strerror(-r));
		return r;
	}
	if ((r = kube_yaml_parse(data, len, KUBE_YAML_TYPED, ret, err, sizeof(err))) < 0)
		fprintf(stderr, "kube-debug: '%s': %s\n", path, err);
	return r;
}

static int act_get(struct kube_client *kc, const struct kube_resource *res, char **args)
{
	struct kube_ref ref;
	struct kube_status st;
	char nsbuf[128];
	cJSON *obj = NULL;
	int r;

	dbg_ref(kc, res, args[0], &ref, nsbuf, sizeof(nsbuf));
	if ((r = kube_get(kc, &ref, &obj, &st)) < 0)
		return dbg_fail(r, &st, "get");
	dbg_print(obj);
	cJSON_Delete(obj);
	return 0;
}

static int act_list(struct kube_client *kc, const struct kube_resource *res)
{
	struct kube_ref ref = {.res = res, .ns = dbg.ns};
	struct kube_list_opts lo = {
	    .label_selector = dbg.label, .field_selector = dbg.field, .limit = dbg.limit};
	_cleanup_free_ char *cont = NULL;
	long total = 0, pages = 0;
	struct kube_status st;
	int r;

	do {
		cJSON *page = NULL, *item;
		lo.continue_token = cont;
		if ((r = kube_list(kc, &ref, &lo, &page, &st)) < 0)
			return dbg_fail(r, &st, "list");
		pages++;
		cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(page, "items"))
		{
			char key[KUBE_KEY_MAX];
			total++;
			if (!dbg.quiet && kube_obj_key(item, key, sizeof(key)) == 0)
				printf("%s %s\n", key, json_str(item, "metadata.resourceVersion"));
		}
		const char *c = json_str(page, "metadata.continue");
		free(cont);
		cont = c && *c ? strdup(c) : NULL;
		printf("page %ld items %d resourceVersion %s continue %s\n", pages,
		       cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(page, "items")),
		       json_str(page, "metadata.resourceVersion"), cont ? "yes" : "no");
		cJSON_Delete(page);
	} while (cont);
	printf("total %ld pages %ld\n", total, pages);
	return 0;
}

static int act_write(struct kube_client *kc, const struct kube_resource *res, const char *file,
		     bool update)
{
	struct kube_ref ref = {.res = res, .ns = dbg.ns};
	struct kube_status st;
	cJSON *obj = NULL, *out = NULL;
	int r;

	if (read_object(file, &obj) < 0)
		return 1;
	if (!ref.ns && !json_str(obj, "metadata.namespace"))
		ref.ns = kube_client_namespace(kc);
	r = update ? kube_update(kc, &ref, obj, &out, &st) : kube_create(kc, &ref, obj, &out, &st);
	cJSON_Delete(obj);
	if (r < 0)
		return dbg_fail(r, &st, update ? "update" : "create");
	dbg_print(out);
	cJSON_Delete(out);
	return 0;
}

static int set_label(cJSON *obj, const char *key, const char *value)
{
	cJSON *labels = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "labels");
	if (!cJSON_IsObject(labels)) {
		if (json_set_str(obj, "metadata.labels.x", "") < 0)
			return -ENOMEM;
		labels = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "labels");
		cJSON_DeleteItemFromObjectCaseSensitive(labels, "x");
	}
	return json_put(labels, key, cJSON_CreateString(value));
}

static int mutate_retried(void *ud, cJSON *obj)
{
	int *calls = ud;
	(*calls)++;
	return set_label(obj, "kube-debug/retried", "true");
}

/* A stale update must fail with a conflict; RetryOnConflict must then succeed. */
static int act_conflict(struct kube_client *kc, const struct kube_resource *res, const char *arg)
{
	struct kube_ref ref;
	struct kube_status st;
	char nsbuf[128];
	cJSON *stale = NULL, *fresh = NULL, *out = NULL;
	int r, calls = 0;

	dbg_ref(kc, res, arg, &ref, nsbuf, sizeof(nsbuf));
	if ((r = kube_get(kc, &ref, &stale, &st)) < 0 ||
	    (r = kube_get(kc, &ref, &fresh, &st)) < 0) {
		cJSON_Delete(stale);
		return dbg_fail(r, &st, "get");
	}
	set_label(fresh, "kube-debug/step", "fresh");
	r = kube_update(kc, &ref, fresh, NULL, &st);
	cJSON_Delete(fresh);
	if (r < 0) {
		cJSON_Delete(stale);
		return dbg_fail(r, &st, "first update");
	}
	set_label(stale, "kube-debug/step", "stale");
	r = kube_update(kc, &ref, stale, NULL, &st);
	cJSON_Delete(stale);
	if (r != -KUBE_ECONFLICT) {
		printf("error: the stale update gave %s, not a conflict\n",
		       r < 0 ? errno_name(r) : "success");
		return 1;
	}
	printf("conflict: code=%d reason=%s\n", st.code, st.reason);
	if ((r = kube_update_retry(kc, &ref, mutate_retried, &calls, &out, &st)) < 0)
		return dbg_fail(r, &st, "retry on conflict");
	printf("retried: ok calls=%d resourceVersion=%s\n", calls,
	       json_str(out, "metadata.resourceVersion"));
	cJSON_Delete(out);
	return 0;
}

static int act_patch(struct kube_client *kc, const struct kube_resource *res, char **args)
{
	struct kube_ref ref;
	struct kube_status st;
	enum kube_patch_type t;
	char nsbuf[128];
	cJSON *out = NULL;
	int r;

	if (strcmp(args[1], "merge") == 0)
		t = KUBE_PATCH_MERGE;
	else if (strcmp(args[1], "strategic") == 0)
		t = KUBE_PATCH_STRATEGIC;
	else if (strcmp(args[1], "json") == 0)
		t = KUBE_PATCH_JSON;
	else {
		fprintf(stderr, "kube-debug: unknown patch type '%s'\n", args[1]);
		return 2;
	}
	dbg_ref(kc, res, args[0], &ref, nsbuf, sizeof(nsbuf));
	if ((r = kube_patch(kc, &ref, t, args[2], &out, &st)) < 0)
		return dbg_fail(r, &st, "patch");
	dbg_print(out);
	cJSON_Delete(out);
	return 0;
}

static int act_delete(struct kube_client *kc, const struct kube_resource *res, const char *arg,
		      bool evict)
{
	struct kube_delete_opts o = {
	    .propagation = dbg.propagation,
	    .set_grace_period = dbg.grace >= 0,
	    .grace_period_seconds = dbg.grace,
	    .precondition_uid = dbg.pre_uid,
	    .precondition_rv = dbg.pre_rv,
	};
	bool any = o.propagation || o.set_grace_period || o.precondition_uid || o.precondition_rv;
	struct kube_ref ref;
	struct kube_status st;
	char nsbuf[128];
	int r;

	dbg_ref(kc, res, arg, &ref, nsbuf, sizeof(nsbuf));
	if (evict)
		r = kube_evict(kc, ref.ns, ref.name, any ? &o : NULL, &st);
	else
		r = kube_delete(kc, &ref, any ? &o : NULL, &st);
	if (r < 0)
		return dbg_fail(r, &st, evict ? "evict" : "delete");
	printf("%s %s/%s\n", evict ? "evicted" : "deleted", ref.ns ? ref.ns : "", ref.name);
	return 0;
}

static int act_review(struct kube_client *kc, char **args, int n, bool token)
{
	cJSON *req = cJSON_CreateObject(), *out = NULL;
	struct kube_status st;
	int r;

	if (!req)
		return 1;
	if (token) {
		cJSON_AddStringToObject(req, "apiVersion", "authentication.k8s.io/v1");
		cJSON_AddStringToObject(req, "kind", "TokenReview");
		json_set_str(req, "spec.token", args[0]);
	} else {
		if (n < 3) {
			cJSON_Delete(req);
			fprintf(stderr, "kube-debug: access-review USER VERB RESOURCE\n");
			return 2;
		}
		cJSON_AddStringToObject(req, "apiVersion", "authorization.k8s.io/v1");
		cJSON_AddStringToObject(req, "kind", "SubjectAccessReview");
		json_set_str(req, "spec.user", args[0]);
		json_set_str(req, "spec.resourceAttributes.verb", args[1]);
		json_set_str(req, "spec.resourceAttributes.resource", args[2]);
		if (dbg.ns)
			json_set_str(req, "spec.resourceAttributes.namespace", dbg.ns);
		if (dbg.group)
			json_set_str(req, "spec.resourceAttributes.group", dbg.group);
	}
	r = kube_create(
	    kc, KUBE_REF(token ? &kube_tokenreviews : &kube_subjectaccessreviews, NULL, NULL), req,
	    &out, &st);
	cJSON_Delete(req);
	if (r < 0)
		return dbg_fail(r, &st, token ? "token review" : "access review");
	dbg_print(cJSON_GetObjectItemCaseSensitive(out, "status"));
	cJSON_Delete(out);
	return 0;
}

static int act_raw(struct kube_client *kc, const char *path)
{
	struct kube_status st;
	cJSON *out = NULL;
	int r = kube_get_path(kc, path, &out, &st);
	if (r < 0)
		return dbg_fail(r, &st, "get");
	dbg_print(out);
	cJSON_Delete(out);
	return 0;
}

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
		return act_get(kc, &res, args + 1);
	if (!strcmp(a, "list"))
		return act_list(kc, &res);
	if (!strcmp(a, "create") || !strcmp(a, "update"))
		return act_write(kc, &res, args[1], a[0] == 'u');
	if (!strcmp(a, "conflict"))
		return act_conflict(kc, &res, args[1]);
	if (!strcmp(a, "patch"))
		return act_patch(kc, &res, args + 1);
	if (!strcmp(a, "delete"))
		return act_delete(kc, &res, args[1], false);
	if (!strcmp(a, "evict"))
		return act_delete(kc, &kube_pods, args[0], true);
	if (!strcmp(a, "token-review") || !strcmp(a, "access-review"))
		return act_review(kc, args, n, a[0] == 't');
	if (!strcmp(a, "raw"))
		return act_raw(kc, args[0]);
	if (!strcmp(a, "watch"))
		return dbg_watch(kc, &res);
	if (!strcmp(a, "informer"))
		return dbg_informer(kc, &res);
	if (!strcmp(a, "sync"))
		return dbg_sync(kc, args[0]);
	if (!strcmp(a, "leader"))
		return dbg_leader(kc);
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
