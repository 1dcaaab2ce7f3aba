/* aws-k8s ccm: the AWS cloud-controller-manager. This file holds the usage text, the flags
 * (every flag of the upstream binary is accepted, so that an existing manifest runs unchanged;
 * the ones without an effect here say so in --help), the start-up checks and the wiring: the
 * health endpoints, the Node informer and the table of controllers that controllers_run
 * (common/kube/controller.h) runs once this replica leads, until SIGTERM (releasing the Lease)
 * or at once when the Lease is lost. The controllers are in ccm_node.c, ccm_lifecycle.c,
 * ccm_route.c, ccm_svc.c and ccm_tagging.c; what they share in ccm_ctx.c. */
#include "modules/ccm/ccm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/http/server.h"
#include "common/kube/events.h"
#include "common/kube/informer.h"
#include "common/kube/kubeflags.h"
#include "common/kube/leaderelection.h"
#include "common/kube/rest.h"
#include "common/metrics/metrics.h"
#include "modules/ccm/ccm_controllers.h"
#include "modules/ccm/ccm_internal.h"

static const char ccm_usage[] =
    "The AWS cloud-controller-manager: the cloud-node, cloud-node-lifecycle, route and service\n"
    "controllers (classic ELBs; NLBs with service.beta.kubernetes.io/aws-load-balancer-type:\n"
    "nlb; target groups only with Deckhouse's type none), and the tagging controller when\n"
    "asked for (--controllers=*,tagging --tags=k=v --resources=instance), with the upstream\n"
    "flags and cloud config (--cloud-config, INI [Global] and [ServiceOverride \"N\"]\n"
    "sections; [Global] NLBSecurityGroupMode = Managed gives each new NLB a security group of\n"
    "its own, as upstream). Credentials come from the AWS SDKs' chain\n"
    "(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, web identity, shared files, container and\n"
    "instance-profile credentials); [Global] RoleARN is assumed on top. Called as\n"
    "aws-cloud-controller-manager (a symlink), it takes the upstream command line unchanged;\n"
    "--version prints \"Kubernetes v<version>\" as the upstream binary does (--version=raw too).";

static struct {
	char *cloud_provider, *cloud_config, *cluster_name, *cluster_cidr;
	bool allocate_node_cidrs, configure_cloud_routes, allow_untagged;
	char **controllers;
	int64_t node_monitor_period, node_status_update_frequency, route_period;
	long long node_syncs, service_syncs;
	int64_t min_resync;
	char *bind_address, *cert_dir, *tls_cert_file, *tls_key_file;
	long long secure_port;
	char **tags, **resources;
	double tag_rate;
	long long tag_burst, tag_workers;
	bool tag_batching;
} f;

/* clang-format off */
#define IGNORED(name, type, def, help) \
	{ name, type, NULL, def, NULL, help, .no_effect = true }

const struct flag ccm_flag_table[] = {
	/* generic */
	{ "cloud-provider", FLAG_STRING, &f.cloud_provider, NULL, NULL,
	  "The provider for cloud services: aws." },
	{ "cloud-config", FLAG_STRING, &f.cloud_config, NULL, NULL,
	  "The path to the cloud provider configuration file. Empty string for no configuration "
	  "file." },
	{ "cluster-name", FLAG_STRING, &f.cluster_name, "kubernetes", NULL,
	  "The instance prefix for the cluster." },
	{ "cluster-cidr", FLAG_STRING, &f.cluster_cidr, NULL, NULL,
	  "CIDR Range for Pods in cluster. Requires --allocate-node-cidrs to be true" },
	{ "allocate-node-cidrs", FLAG_BOOL, &f.allocate_node_cidrs, "false", NULL,
	  "Should CIDRs for Pods be allocated and set on the cloud provider." },
	{ "configure-cloud-routes", FLAG_BOOL, &f.configure_cloud_routes, "true", NULL,
	  "Should CIDRs allocated by allocate-node-cidrs be configured on the cloud provider." },
	{ "controllers", FLAG_STRLIST, &f.controllers, "*", NULL,
	  "A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' "
	  "enables the controller named 'foo', '-foo' disables the controller named 'foo'. All "
	  "controllers: cloud-node-controller, cloud-node-lifecycle-controller, "
	  "node-route-controller, service-lb-controller, tagging-controller, "
	  "node-ipam-controller. Disabled-by-default controllers: tagging-controller, "
	  "node-ipam-controller." },
	{ "node-monitor-period", FLAG_DURATION, &f.node_monitor_period, "5s", NULL,
	  "The period for syncing NodeStatus in NodeController." },
	{ "node-status-update-frequency", FLAG_DURATION, &f.node_status_update_frequency, "5m",
	  NULL, "Specifies how often the controller updates nodes' status." },
	{ "route-reconciliation-period", FLAG_DURATION, &f.route_period, "10s", NULL,
	  "The period for reconciling routes created for Nodes by cloud provider." },
	{ "concurrent-node-syncs", FLAG_INT, &f.node_syncs, "1", NULL,
	  "Number of workers concurrently synchronizing nodes.", 1, 64 },
	IGNORED("concurrent-node-status-updates", FLAG_INT, "0",
		"Number of workers concurrently updating node statuses"),
	{ "concurrent-service-syncs", FLAG_INT, &f.service_syncs, "1", NULL,
	  "The number of services that are allowed to sync concurrently.", 1, 64 },
	{ "allow-untagged-cloud", FLAG_BOOL, &f.allow_untagged, "false", NULL,
	  "Allow the cluster to run without the cluster-id on cloud instances (deprecated)." },
	IGNORED("cidr-allocator-type", FLAG_STRING, "RangeAllocator",
		"Type of CIDR allocator to use"),
	{ "min-resync-period", FLAG_DURATION, &f.min_resync, "12h", NULL,
	  "The resync period in reflectors will be random between MinResyncPeriod and "
	  "2*MinResyncPeriod. Here: the service controller fully re-checks each unchanged load "
	  "balancer (security groups and rules, attributes, listeners, targets) once between "
	  "MinResyncPeriod and 2*MinResyncPeriod, and 72 times per MinResyncPeriod (every 10 min "
	  "by default) compares every load balancer with AWS's description (DescribeLoadBalancers, "
	  "20 a call), re-checking at once those that differ." },
	IGNORED("node-sync-period", FLAG_DURATION, "0", "Deprecated"),
	IGNORED("use-service-account-credentials", FLAG_BOOL, "false",
		"If true, use individual service account credentials for each controller"),
	IGNORED("external-cloud-volume-plugin", FLAG_STRING, NULL,
		"The plugin to use when cloud provider is set to external"),
	IGNORED("controller-start-interval", FLAG_DURATION, "0",
		"Interval between starting controller managers"),
	IGNORED("feature-gates", FLAG_MAP, NULL,
		"A set of key=value pairs for alpha/experimental features"),
	IGNORED("profiling", FLAG_BOOL, "true",
		"Enable profiling via web interface host:port/debug/pprof/"),
	IGNORED("contention-profiling", FLAG_BOOL, "false", "Enable lock contention profiling"),
	KUBE_FLAGS,
	LEADER_ELECT_FLAGS("cloud-controller-manager"),
	/* secure serving */
	{ "bind-address", FLAG_STRING, &f.bind_address, "0.0.0.0", NULL,
	  "The IP address on which to listen for the --secure-port port." },
	{ "secure-port", FLAG_INT, &f.secure_port, "10258", NULL,
	  "The port on which to serve HTTPS with authentication and authorization. If 0, don't "
	  "serve HTTPS at all.", 0, 65535 },
	{ "cert-dir", FLAG_STRING, &f.cert_dir, NULL, NULL,
	  "The directory where the TLS certs are located. If --tls-cert-file and "
	  "--tls-private-key-file are provided, this flag will be ignored." },
	{ "tls-cert-file", FLAG_STRING, &f.tls_cert_file, NULL, NULL,
	  "File containing the default x509 Certificate for HTTPS." },
	{ "tls-private-key-file", FLAG_STRING, &f.tls_key_file, NULL, NULL,
	  "File containing the default x509 private key matching --tls-cert-file." },
	IGNORED("tls-cipher-suites", FLAG_STRLIST, NULL, "Comma-separated list of cipher suites"),
	IGNORED("tls-min-version", FLAG_STRING, NULL, "Minimum TLS version supported"),
	IGNORED("tls-sni-cert-key", FLAG_STRLIST, NULL,
		"A pair of x509 certificate and private key file paths"),
	IGNORED("http2-max-streams-per-connection", FLAG_INT, "0",
		"The limit that the server gives to clients for the maximum number of streams"),
	IGNORED("permit-port-sharing", FLAG_BOOL, "false", "Use SO_REUSEPORT"),
	IGNORED("permit-address-sharing", FLAG_BOOL, "false", "Use SO_REUSEADDR"),
	/* authentication and authorization of the secure port */
	IGNORED("authentication-kubeconfig", FLAG_STRING, NULL, "kubeconfig for tokenreviews"),
	IGNORED("authentication-skip-lookup", FLAG_BOOL, "false",
		"Skip the authentication config lookup"),
	IGNORED("authentication-token-webhook-cache-ttl", FLAG_DURATION, "10s",
		"The duration to cache responses from the webhook token authenticator"),
	IGNORED("authentication-tolerate-lookup-failure", FLAG_BOOL, "false",
		"Tolerate a failed authentication config lookup"),
	IGNORED("client-ca-file", FLAG_STRING, NULL, "Client certificate authority bundle"),
	IGNORED("requestheader-allowed-names", FLAG_STRLIST, NULL,
		"Front-proxy client common names"),
	IGNORED("requestheader-client-ca-file", FLAG_STRING, NULL, "Front-proxy client CA bundle"),
	IGNORED("requestheader-extra-headers-prefix", FLAG_STRLIST, "x-remote-extra-",
		"Request header prefixes to inspect"),
	IGNORED("requestheader-group-headers", FLAG_STRLIST, "x-remote-group",
		"Request headers for groups"),
	IGNORED("requestheader-username-headers", FLAG_STRLIST, "x-remote-user",
		"Request headers for usernames"),
	IGNORED("requestheader-uid-headers", FLAG_STRLIST, NULL, "Request headers for UIDs"),
	IGNORED("authorization-always-allow-paths", FLAG_STRLIST, "/healthz,/readyz,/livez",
		"HTTP paths to skip during authorization"),
	IGNORED("authorization-kubeconfig", FLAG_STRING, NULL,
		"kubeconfig for subjectaccessreviews"),
	IGNORED("authorization-webhook-cache-authorized-ttl", FLAG_DURATION, "10s",
		"The duration to cache 'authorized' responses"),
	IGNORED("authorization-webhook-cache-unauthorized-ttl", FLAG_DURATION, "10s",
		"The duration to cache 'unauthorized' responses"),
	/* webhooks */
	IGNORED("webhooks", FLAG_STRLIST, NULL, "A list of webhooks to enable"),
	IGNORED("webhook-bind-address", FLAG_STRING, "0.0.0.0", "The webhook server's IP address"),
	IGNORED("webhook-secure-port", FLAG_INT, "10260", "The webhook server's port"),
	IGNORED("webhook-cert-dir", FLAG_STRING, NULL,
		"The webhook server's TLS certificate directory"),
	IGNORED("webhook-tls-cert-file", FLAG_STRING, NULL, "The webhook server's certificate"),
	IGNORED("webhook-tls-private-key-file", FLAG_STRING, NULL, "The webhook server's key"),
	IGNORED("webhook-tls-cipher-suites", FLAG_STRLIST, NULL,
		"The webhook server's cipher suites"),
	IGNORED("webhook-tls-min-version", FLAG_STRING, NULL,
		"The webhook server's minimum TLS version"),
	IGNORED("webhook-tls-sni-cert-key", FLAG_STRLIST, NULL,
		"The webhook server's SNI certificates"),
	IGNORED("webhook-http2-max-streams-per-connection", FLAG_INT, "0",
		"The webhook server's HTTP/2 limit"),
	IGNORED("webhook-permit-port-sharing", FLAG_BOOL, "false",
		"The webhook server's SO_REUSEPORT"),
	IGNORED("webhook-permit-address-sharing", FLAG_BOOL, "false",
		"The webhook server's SO_REUSEADDR"),
	/* the AWS provider's own controllers */
	{ "tags", FLAG_MAP, &f.tags, NULL, NULL,
	  "Tags to apply to AWS resources in the tagging controller, in a form of key=value." },
	{ "resources", FLAG_STRLIST, &f.resources, NULL, NULL,
	  "AWS resources name to add/remove tags in the tagging controller: instance." },
	{ "tagging-controller-rate-limit", FLAG_FLOAT, &f.tag_rate, "0", NULL,
	  "Steady-state rate (per second) at which the tagging controller takes Nodes from its "
	  "queue. Zero (the default), or a zero burst, disables rate limiting." },
	{ "tagging-controller-burst-limit", FLAG_INT, &f.tag_burst, "0", NULL,
	  "Burst of the tagging controller's rate limit. Zero (the default) disables rate "
	  "limiting.", 0, INT32_MAX },
	{ "tagging-controller-concurrent-node-syncs", FLAG_INT, &f.tag_workers, "1", NULL,
	  "Number of workers of the tagging controller.", 1, 64 },
	{ "tagging-controller-enable-batching", FLAG_BOOL, &f.tag_batching, "true", NULL,
	  "Tag and untag the instances of Nodes that come or go together in one CreateTags or "
	  "DeleteTags call (up to 100 instances), instead of one call per Node." },
	IGNORED("nodeipam-controller-rate-limit", FLAG_FLOAT, "0",
		"The node IPAM controller's rate limit"),
	IGNORED("nodeipam-controller-burst-limit", FLAG_INT, "0",
		"The node IPAM controller's burst limit"),
	IGNORED("dualstack", FLAG_BOOL, "false", "The node IPAM controller's IP mode"),
	IGNORED("node-cidr-mask-size", FLAG_INT, "0", "Mask size for node cidr in cluster"),
	/* metrics and logs */
	IGNORED("allow-metric-labels", FLAG_MAP, NULL,
		"The map from metric-label to allowed values"),
	IGNORED("allow-metric-labels-manifest", FLAG_STRING, NULL,
		"The path to the allow-list manifest"),
	IGNORED("disabled-metrics", FLAG_STRLIST, NULL, "Metrics to disable"),
	IGNORED("show-hidden-metrics-for-version", FLAG_STRING, NULL,
		"Show hidden metrics of a version"),
	LOG_FLAGS,
	{ NULL },
};
/* clang-format on */

/* Controller selection ----------------------------------------------------------------- */

static const struct {
	const char *name, *alias;
	unsigned bit;
	bool on_by_default;
} controllers[] = {
    {"cloud-node-controller", "cloud-node", CCM_CTL_NODE, true},
    {"cloud-node-lifecycle-controller", "cloud-node-lifecycle", CCM_CTL_LIFECYCLE, true},
    {"node-route-controller", "route", CCM_CTL_ROUTE, true},
    {"service-lb-controller", "service", CCM_CTL_SERVICE, true},
    {"tagging-controller", "tagging", CCM_CTL_TAGGING, false},
    {"node-ipam-controller", NULL, CCM_CTL_NODE_IPAM, false},
};

static int controller_index(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(controllers); i++)
		if (strcmp(controllers[i].name, name) == 0 ||
		    (controllers[i].alias && strcmp(controllers[i].alias, name) == 0))
			return (int)i;
	return -1;
}

int ccm_controllers_parse(char *const *list, unsigned *ret, char *err, size_t errlen)
{
	unsigned on = 0, decided = 0;
	bool star = false;

	for (char *const *p = list; p && *p; p++) {
		const char *s = *p;
		bool neg = s[0] == '-';
		if (strcmp(s, "*") == 0) {
			star = true;
			continue;
		}
		int i = controller_index(neg ? s + 1 : s);
		if (i < 0) {
			snprintf(err, errlen,
				 "--controllers: '%s' is not in the list of known controllers",
				 neg ? s + 1 : s);
			return -EINVAL;
		}
		unsigned bit = controllers[i].bit;
		if (decided & bit)
			continue; /* the first explicit mention wins */
		decided |= bit;
		if (!neg)
			on |= bit;
	}
	for (size_t i = 0; i < ARRAY_SIZE(controllers); i++)
		if (star && !(decided & controllers[i].bit) && controllers[i].on_by_default)
			on |= controllers[i].bit;
	*ret = on;
	return 0;
}

/* The wiring ---------------------------------------------------------------------------- */

/* The Node informer's handlers feeding the controller table (struct ccm_wiring). */
static void on_add(void *ud, const cJSON *obj)
{
	struct ccm_wiring *w = ud;
	ccm_node_changed(&w->ctls[CCM_C_NODE], NULL, obj);
	ccm_route_changed(&w->ctls[CCM_C_ROUTE], NULL, obj);
	ccm_svc_node_changed(&w->ctls[CCM_C_SERVICE], NULL, obj);
	ccm_tag_changed(&w->ctls[CCM_C_TAGGING], NULL, obj);
}

static void on_update(void *ud, const cJSON *old, const cJSON *obj)
{
	struct ccm_wiring *w = ud;
	ccm_node_changed(&w->ctls[CCM_C_NODE], old, obj);
	ccm_route_changed(&w->ctls[CCM_C_ROUTE], old, obj);
	ccm_svc_node_changed(&w->ctls[CCM_C_SERVICE], old, obj);
	ccm_tag_changed(&w->ctls[CCM_C_TAGGING], old, obj);
}

static void on_delete(void *ud, const cJSON *obj)
{
	struct ccm_wiring *w = ud;
	struct kube_event_ref ref;

	ccm_node_deleted(&w->ctls[CCM_C_NODE], obj);
	ccm_route_changed(&w->ctls[CCM_C_ROUTE], obj, NULL);
	ccm_svc_node_changed(&w->ctls[CCM_C_SERVICE], obj, NULL);
	ccm_tag_deleted(&w->ctls[CCM_C_TAGGING], obj);
	/* its Events cannot repeat: the recorder's caches let the Node go */
	if (w->m.rec) {
		kube_event_ref_from(obj, &kube_nodes, &ref);
		kube_recorder_forget(w->m.rec, &ref);
	}
}

/* The Service informer's handlers. */
static void svc_add(void *ud, const cJSON *obj)
{
	struct ccm_wiring *w = ud;
	ccm_svc_changed(&w->ctls[CCM_C_SERVICE], NULL, obj);
}

static void svc_update(void *ud, const cJSON *old, const cJSON *obj)
{
	struct ccm_wiring *w = ud;
	ccm_svc_changed(&w->ctls[CCM_C_SERVICE], old, obj);
}

static void svc_delete(void *ud, const cJSON *obj)
{
	struct ccm_wiring *w = ud;
	struct kube_event_ref ref;
	if (w->m.rec) {
		kube_event_ref_from(obj, &kube_services, &ref);
		kube_recorder_forget(w->m.rec, &ref);
	}
}

static void informer_synced(void *ud)
{
	struct ccm *m = ud;
	log_info("node informer synced", KV_U("nodes", kube_store_len(ccm_node_store(m))));
}

/* The table: one row per controller, run by controllers_run once this replica leads. */
int ccm_wire(struct ccm_wiring *w)
{
	struct ccm *m = &w->m;
	const struct ccm_settings *set = &m->set;
	bool route = (m->controllers & CCM_CTL_ROUTE) && set->routes;
	int r;

	bool tagging = m->controllers & CCM_CTL_TAGGING;

	if ((r = ccm_node_new(m, &w->node)) < 0 || (route && (r = ccm_route_new(m, &w->route)) < 0) ||
	    (r = ccm_svc_new(m, &w->svc)) < 0 ||
	    (r = ccm_tag_new(m, tagging ? &w->tag_opts : NULL, &w->tagging)) < 0)
		return r;
	/* clang-format off */
	w->ctls[CCM_C_NODE] = (struct controller){
	    .name = "cloud-node", .informers = {m->nodes},
	    .reconcile = ccm_node_reconcile, .start = ccm_node_start, .ud = w->node,
	    .workers = set->node_workers,
	    /* failures retry from 500 ms, doubling up to 5 minutes */
	    .queue = {.base_delay_ns = 500 * NSEC_PER_MSEC, .max_delay_ns = 300 * NSEC_PER_SEC},
	    .disabled = !(m->controllers & CCM_CTL_NODE)};
	w->ctls[CCM_C_NODE_STATUS] = (struct controller){
	    .name = "cloud-node-status", .informers = {m->nodes},
	    .reconcile = ccm_node_resync, .ud = w->node,
	    /* the first re-sync after one period, as upstream's UpdateNodeStatus loop */
	    .resync_key = "resync", .resync_ns = set->node_status_update_frequency,
	    .resync_first_ns = set->node_status_update_frequency,
	    .queue = {.base_delay_ns = NSEC_PER_SEC, .max_delay_ns = 300 * NSEC_PER_SEC},
	    .disabled = !(m->controllers & CCM_CTL_NODE)};
	w->ctls[CCM_C_LIFECYCLE] = (struct controller){
	    .name = "cloud-node-lifecycle", .informers = {m->nodes},
	    .reconcile = ccm_lc_monitor, .start = ccm_lc_start, .ud = m,
	    .resync_key = "monitor", .resync_ns = set->node_monitor_period,
	    .queue = {.base_delay_ns = NSEC_PER_SEC, .max_delay_ns = 60 * NSEC_PER_SEC},
	    .disabled = !(m->controllers & CCM_CTL_LIFECYCLE)};
	w->ctls[CCM_C_ROUTE] = (struct controller){
	    .name = "route", .informers = {m->nodes},
	    .reconcile = ccm_route_pass, .start = ccm_route_start, .ud = w->route,
	    .resync_key = "routes", .resync_ns = set->route_period,
	    .queue = {.base_delay_ns = NSEC_PER_SEC, .max_delay_ns = 120 * NSEC_PER_SEC},
	    .disabled = !route};
	w->ctls[CCM_C_SERVICE] = (struct controller){
	    .name = "service", .informers = {m->nodes, m->services},
	    .reconcile = ccm_svc_reconcile, .start = ccm_svc_start, .ud = w->svc,
	    .workers = set->service_workers,
	    .queue = {.base_delay_ns = 5 * NSEC_PER_SEC, .max_delay_ns = 300 * NSEC_PER_SEC},
	    .disabled = !(m->controllers & CCM_CTL_SERVICE)};
	w->ctls[CCM_C_TAGGING] = (struct controller){
	    .name = "tagging-controller", .informers = {m->nodes},
	    .reconcile = ccm_tag_reconcile, .start = ccm_tag_start, .ud = w->tagging,
	    .workers = (int)f.tag_workers,
	    /* failures retry from 500 ms, doubling up to 5 minutes; rate-limited (both
	     * --tagging-controller-rate-limit and -burst-limit set), every Node goes through
	     * upstream's limiter: that bucket, and 5 ms doubling up to 1000 s per key */
	    .queue = w->tag_opts.rate_limited
			 ? (struct kube_wq_opts){.base_delay_ns = 5 * NSEC_PER_MSEC,
						 .max_delay_ns = 1000 * NSEC_PER_SEC,
						 .qps = f.tag_rate, .burst = (int)f.tag_burst}
			 : (struct kube_wq_opts){.base_delay_ns = 500 * NSEC_PER_MSEC,
						 .max_delay_ns = 300 * NSEC_PER_SEC},
	    .disabled = !tagging};
	/* clang-format on */
	m->run = (struct controllers){.ctls = w->ctls,
				      .n = CCM_C_N,
				      .informers = {m->nodes}, /* /readyz waits for its sync */
				      .kc = m->kc,
				      .leader_elect = kube_flag_leader_elect,
				      .synced = informer_synced,
				      .ud = m};
	kube_le_config_from_flags(&m->run.le);
	return 0;
}

static int fail(const char *fmt, const char *a)
{
	log_error(fmt, KV_S("error", a));
	return 1;
}

/* The tagging controller's flags, checked as upstream's TaggingControllerOptions.Validate
 * (which stops the process) when the controller is enabled. */
static int tagging_apply(struct ccm_wiring *w)
{
	char err[256] = "";

	ccm_tagset_release(&w->tag_opts.tags);
	if (ccm_tagset_parse(f.tags, &w->tag_opts.tags, err, sizeof(err)) < 0 ||
	    ccm_tagging_resources_check(f.resources, err, sizeof(err)) < 0) {
		fprintf(stderr, "aws-k8s ccm: tagging controller inputs are not properly set: %s\n",
			err);
		return -EINVAL;
	}
	if (f.tag_rate < 0) {
		fprintf(stderr, "aws-k8s ccm: --tagging-controller-rate-limit should not be less "
				"than zero\n");
		return -EINVAL;
	}
	w->tag_opts.batching = f.tag_batching;
	w->tag_opts.rate_limited = f.tag_rate > 0 && f.tag_burst > 0;
	return 0;
}

int ccm_flags_apply(struct ccm_wiring *w)
{
	struct ccm *m = &w->m;
	char err[512] = "";

	if (!f.cloud_provider || !*f.cloud_provider)
		return fail("--cloud-provider cannot be empty", "");
	if (strcmp(f.cloud_provider, "aws") != 0)
		return fail("unsupported --cloud-provider: only aws", f.cloud_provider);
	if (kube_le_flags_check(err, sizeof(err)) < 0 ||
	    ccm_controllers_parse(f.controllers, &m->controllers, err, sizeof(err)) < 0) {
		fprintf(stderr, "aws-k8s ccm: %s\n", err);
		return 2;
	}
	if (f.node_monitor_period <= 0 || f.route_period <= 0 ||
	    f.node_status_update_frequency <= 0 || f.min_resync <= 0) {
		fprintf(stderr, "aws-k8s ccm: periods must be positive\n");
		return 2;
	}
	m->set = (struct ccm_settings){
	    .node_monitor_period = f.node_monitor_period,
	    .node_status_update_frequency = f.node_status_update_frequency,
	    .route_period = f.route_period,
	    .node_workers = (int)f.node_syncs,
	    .service_workers = (int)f.service_syncs,
	    .min_resync_period = f.min_resync,
	    .routes = f.allocate_node_cidrs && f.configure_cloud_routes,
	    .cluster_name = f.cluster_name,
	};
	if (m->controllers & CCM_CTL_NODE_IPAM)
		log_info("controller not available in this build; skipped",
			 KV_S("controller", "node-ipam-controller"));
	if ((m->controllers & CCM_CTL_TAGGING) && tagging_apply(w) < 0)
		return 2;
	if ((m->controllers & CCM_CTL_ROUTE) && !m->set.routes)
		log_info("will not configure cloud provider routes",
			 KV_B("allocate-node-cidrs", f.allocate_node_cidrs),
			 KV_B("configure-cloud-routes", f.configure_cloud_routes));
	if ((m->controllers & CCM_CTL_ROUTE) && m->set.routes &&
	    ccm_cidrs_parse(f.cluster_cidr, &m->cluster_cidrs, &m->n_cluster_cidrs) < 0)
		return fail(
		    "the route controller needs a valid --cluster-cidr (one CIDR, or an IPv4 "
		    "and an IPv6 one)",
		    f.cluster_cidr ? f.cluster_cidr : "");
	w->serve = (struct ccm_serve_opts){.bind_address = f.bind_address,
					   .port = f.secure_port,
					   .cert_dir = f.cert_dir,
					   .cert_file = f.tls_cert_file,
					   .key_file = f.tls_key_file};
	return -1;
}

/* Start-up checks and set-up that need no server. Returns an exit code, or -1 to go on. */
static int setup(struct ccm_wiring *w)
{
	struct ccm *m = &w->m;
	char err[512] = "";
	int r;

	if ((r = ccm_flags_apply(w)) >= 0)
		return r;
	if ((r = ccm_config_load(f.cloud_config, &m->cfg, err, sizeof(err))) < 0)
		return fail("cannot read the cloud config", err);
	if ((r = ccm_cloud_new(&(struct ccm_cloud_opts){.cfg = m->cfg}, &m->cloud, err,
			       sizeof(err))) < 0)
		return fail("cannot set up AWS", err);
	r = ccm_cloud_cluster_id(m->cloud, ccm_config_cluster_id(m->cfg), &m->cluster_id, err,
				 sizeof(err));
	if (r < 0 && !(f.allow_untagged && r == -ENOENT))
		return fail("no cluster ID: a ClusterID is required for the cloud provider to "
			    "function properly (tag the instances or set KubernetesClusterID)",
			    err);
	if (r < 0)
		log_warn("running without a cluster ID (--allow-untagged-cloud): every instance is "
			 "considered part of the cluster");
	log_info("AWS cloud provider", KV_S("region", ccm_cloud_region(m->cloud)),
		 KV_S("cluster", m->cluster_id ? m->cluster_id : ""),
		 KV_S("ipFamilies", m->cfg->node_ip_families[0]));
	if ((r = kube_client_from_flags("ccm", &m->kc, err, sizeof(err))) < 0)
		return fail("cannot reach the Kubernetes API", err);
	return -1;
}

void ccm_wiring_release(struct ccm_wiring *w)
{
	struct ccm *m = &w->m;

	ccm_route_free(w->route);
	ccm_svc_free(w->svc);
	kube_informer_free(m->services);
	ccm_node_free(w->node);
	ccm_tag_free(w->tagging);
	ccm_tagset_release(&w->tag_opts.tags);
	kube_informer_free(m->nodes);
	kube_recorder_free(m->rec);
	kube_client_free(m->kc);
	ccm_cloud_free(m->cloud);
	ccm_config_free(m->cfg);
	free(m->cluster_id);
	free(m->cluster_cidrs);
	*w = (struct ccm_wiring){0};
}

int ccm_main(int argc, char **argv)
{
	struct ccm_wiring w = {0};
	struct ccm *m = &w.m;
	struct http_server *srv = NULL;
	char err[512] = "";
	int r, code = 1;

	int n = flags_parse("ccm", ccm_usage, ccm_flag_table, argc, argv);
	if (n < 0)
		return flags_exit_code(n);
	if (n > 0) {
		fprintf(stderr, "aws-k8s ccm: unexpected argument '%s'\n", argv[0]);
		flags_free(ccm_flag_table);
		return 2;
	}
	if ((code = setup(&w)) >= 0)
		goto out;
	code = 1;
	metrics_register_process();
	if ((r = ccm_serve_start(&w.serve, m, &srv, err, sizeof(err))) < 0) {
		fail("cannot start the secure server", err);
		goto out;
	}
	if ((r = kube_recorder_new(
		 m->kc, &(struct kube_recorder_opts){.component = "cloud-node-controller"},
		 &m->rec)) < 0) {
		log_error("cannot create the event recorder", KV_E(r));
		goto out;
	}
	struct kube_informer_opts io = {
	    .res = &kube_nodes,
	    .transform = ccm_node_transform,
	    .handlers = {.on_add = on_add, .on_update = on_update, .on_delete = on_delete, .ud = &w},
	    .name = "nodes",
	    .cancel = cancel_root(),
	};
	if ((r = kube_informer_new(m->kc, &io, &m->nodes)) < 0) {
		log_error("cannot create the node informer", KV_E(r));
		goto out;
	}
	struct kube_informer_opts so = {
	    .res = &kube_services,
	    .transform = ccm_svc_transform,
	    .handlers = {.on_add = svc_add, .on_update = svc_update, .on_delete = svc_delete,
			 .ud = &w},
	    .name = "services",
	    .cancel = cancel_root(),
	};
	if ((m->controllers & CCM_CTL_SERVICE) &&
	    (r = kube_informer_new(m->kc, &so, &m->services)) < 0) {
		log_error("cannot create the service informer", KV_E(r));
		goto out;
	}
	if ((r = ccm_wire(&w)) < 0) {
		log_error("cannot start the controllers", KV_E(r));
		goto out;
	}
	/* until SIGTERM (0) or the Lease lost (-ENOLCK); a failure to start is logged */
	r = controllers_run(&m->run);
	code = r == 0 ? 0 : 1;
out:
	/* the server first: its handlers read the state the wiring holds */
	http_server_free(srv);
	ccm_wiring_release(&w);
	flags_free(ccm_flag_table);
	return code;
}
