/* aws-k8s capa: Cluster API Provider AWS's controller manager. This file holds the usage text,
 * the flags (every flag of CAPA's manager is accepted, so that its Deployment runs unchanged;
 * the ones without an effect here say so in --help), the AWS and Kubernetes clients, the health
 * endpoints and the table of controllers (capa_controllers[]) that controllers_run runs once
 * this replica leads. */
#include "modules/capa/capa.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/cancel.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/http/server.h"
#include "common/kube/informer.h"
#include "common/kube/kubeflags.h"
#include "common/kube/leaderelection.h"
#include "common/metrics/metrics.h"

static const char capa_usage[] =
    "Cluster API Provider AWS's controller manager: reconciles AWSCluster objects\n"
    "(infrastructure.cluster.x-k8s.io/v1beta2) into a managed VPC (subnets per zone in CAPA's\n"
    "default layout, internet gateway, NAT gateways with Elastic IPs, route tables, security\n"
    "groups per role) with CAPA's names, tags, conditions and failure domains, and deletes them\n"
    "in reverse order. Credentials and region come from the AWS SDKs' chain; the AWSCluster's\n"
    "spec.region picks the region of its calls. Webhooks, EKS, ROSA and machine pools are not\n"
    "built: their flags are accepted and ignored.";

static struct {
	char *namespace, *watch_filter, *health_addr, *metrics_addr, *diag_addr;
	bool insecure_diag;
	long long cluster_conc, machine_conc;
	int64_t sync_period;
	char **feature_gates;
} f;

/* clang-format off */
#define IGNORED(name, type, def, help) \
	{ name, type, NULL, def, NULL, help, .no_effect = true }

static const struct flag capa_flag_table[] = {
	{ "kubeconfig", FLAG_STRING, &kube_flag_kubeconfig, NULL, NULL,
	  "Paths to a kubeconfig. Only required if out-of-cluster." },
	{ "kube-api-qps", FLAG_FLOAT, &kube_flag_qps, "20", NULL,
	  "Maximum queries per second from the controller client to the Kubernetes API server." },
	{ "kube-api-burst", FLAG_INT, &kube_flag_burst, "30", NULL,
	  "Maximum number of queries that should be allowed in one burst from the controller "
	  "client to the Kubernetes API server.", 0, 1000000 },
	{ "leader-elect", FLAG_BOOL, &kube_flag_leader_elect, "false", NULL,
	  "Enable leader election for controller manager. Enabling this will ensure there is only "
	  "one active controller manager." },
	{ "leader-elect-namespace", FLAG_STRING, &kube_flag_le_resource_namespace, NULL, NULL,
	  "Namespace that the controller performs leader election in. If unspecified, the "
	  "controller will discover which namespace it is running in." },
	{ "leader-elect-lease-duration", FLAG_DURATION, &kube_flag_le_lease_duration, "15s", NULL,
	  "Interval at which non-leader candidates will wait to force acquire leadership." },
	{ "leader-elect-renew-deadline", FLAG_DURATION, &kube_flag_le_renew_deadline, "10s", NULL,
	  "Duration that the leading controller manager will retry refreshing leadership before "
	  "giving up." },
	{ "leader-elect-retry-period", FLAG_DURATION, &kube_flag_le_retry_period, "2s", NULL,
	  "Duration the LeaderElector clients should wait between tries of actions." },
	{ "namespace", FLAG_STRING, &f.namespace, NULL, NULL,
	  "Namespace that the controller watches to reconcile cluster-api objects. If "
	  "unspecified, the controller watches for cluster-api objects across all namespaces." },
	{ "watch-filter", FLAG_STRING, &f.watch_filter, NULL, NULL,
	  "Label value that the controller watches to reconcile cluster-api objects. Label key is "
	  "always cluster.x-k8s.io/watch-filter. If unspecified, the controller watches for all "
	  "cluster-api objects." },
	{ "awscluster-concurrency", FLAG_INT, &f.cluster_conc, "5", NULL,
	  "Number of AWSClusters to process simultaneously", 1, 256 },
	{ "awsmachine-concurrency", FLAG_INT, &f.machine_conc, "10", NULL,
	  "Number of AWSMachines to process simultaneously", 1, 256 },
	IGNORED("instance-state-concurrency", FLAG_INT, "5",
		"Number of concurrent watches for instance state changes"),
	IGNORED("awsmachinepool-concurrency", FLAG_INT, "5",
		"Number of AWSMachinePools to process simultaneously"),
	{ "sync-period", FLAG_DURATION, &f.sync_period, "10m", NULL,
	  "The minimum interval at which watched resources are reconciled." },
	IGNORED("wait-infra-period", FLAG_DURATION, "1m",
		"The minimum interval at which reconcile process wait for infrastructure to be "
		"ready."),
	{ "health-addr", FLAG_STRING, &f.health_addr, ":9440", NULL,
	  "The address the health endpoint binds to." },
	{ "metrics-bind-addr", FLAG_STRING, &f.metrics_addr, NULL, NULL,
	  "The address the metric endpoint binds to (plain HTTP; empty or 0: not served)." },
	{ "diagnostics-address", FLAG_STRING, &f.diag_addr, ":8443", NULL,
	  "The address the diagnostics endpoint binds to. Served (metrics, plain HTTP) only with "
	  "--insecure-diagnostics: the authenticated HTTPS form is not built." },
	{ "insecure-diagnostics", FLAG_BOOL, &f.insecure_diag, "false", NULL,
	  "Enable insecure diagnostics serving." },
	{ "feature-gates", FLAG_MAP, &f.feature_gates, NULL, NULL,
	  "A set of key=value pairs that describe feature gates for alpha/experimental features." },
	IGNORED("profiler-address", FLAG_STRING, NULL,
		"Bind address to expose the pprof profiler (e.g. localhost:6060)"),
	IGNORED("webhook-port", FLAG_INT, "9443", "Webhook Server port."),
	IGNORED("webhook-cert-dir", FLAG_STRING, "/tmp/k8s-webhook-server/serving-certs/",
		"Webhook cert dir, only used when webhook-port is specified."),
	IGNORED("service-endpoints", FLAG_STRING, NULL,
		"Set custom AWS service endpoins in semi-colon separated format (use "
		"AWS_ENDPOINT_URL here)"),
	IGNORED("tls-min-version", FLAG_STRING, NULL, "The minimum TLS version in use by the "
		"webhook server."),
	IGNORED("tls-cipher-suites", FLAG_STRLIST, NULL, "Comma-separated list of cipher suites "
		"for the webhook server."),
	IGNORED("enable-leader-election", FLAG_BOOL, "false", "Deprecated: use --leader-elect."),
	IGNORED("disable-controllers", FLAG_STRLIST, NULL, "Controllers to disable."),
	IGNORED("external-resource-gc", FLAG_BOOL, "true",
		"Garbage-collect load balancers and security groups of Services (a feature gate "
		"in CAPA)"),
	IGNORED("alternative-gc-strategy", FLAG_BOOL, "false",
		"Use the alternative garbage collection strategy."),
	LOG_FLAGS,
	{ NULL },
};
/* clang-format on */

/* The table of controllers: one start function per controller. The machine controller's row
 * is { "awsmachine", capa_machine_controller_start }. */
static const struct {
	const char *name;
	int (*start)(struct capa_ctx *x);
} capa_controllers[] = {
    {"awscluster", capa_cluster_controller_start},
    {"awsmachine", capa_machine_controller_start},
};

static int serve(const char *addr, struct http_server **ret)
{
	int r;

	if ((r = http_server_new(&(struct http_server_opts){.bind = addr}, ret)) < 0 ||
	    (r = http_server_add_standard(*ret)) < 0 || (r = http_server_start(*ret)) < 0)
		return r;
	log_info("serving", KV_S("address", addr), KV_I("port", http_server_port(*ret)));
	return 0;
}

static bool addr_set(const char *a)
{
	return a && *a && strcmp(a, "0") != 0;
}

static int run(struct capa_ctx *x)
{
	struct http_server *health = NULL, *metrics = NULL;
	char err[512] = "";
	int r;

	if ((r = kube_client_from_flags("capa", &x->kc, err, sizeof(err))) < 0) {
		log_error("cannot reach the Kubernetes API", KV_S("error", err), KV_E(r));
		return r;
	}
	aws_metrics_family_set(AWS_METRICS_OWN);
	if ((r = aws_client_new(&(struct aws_client_opts){.user_agent = "capa"}, &x->aws)) < 0) {
		log_error("cannot create the AWS client", KV_E(r));
		return r;
	}
	metrics_register_process();
	if ((r = serve(f.health_addr, &health)) < 0) {
		log_error("cannot serve the health endpoints", KV_S("address", f.health_addr),
			  KV_E(r));
		goto out;
	}
	const char *maddr = addr_set(f.metrics_addr) ? f.metrics_addr
			    : f.insecure_diag	     ? f.diag_addr
						     : NULL;
	if (maddr && (r = serve(maddr, &metrics)) < 0) {
		log_error("cannot serve the metrics", KV_S("address", maddr), KV_E(r));
		goto out;
	}
	for (size_t i = 0; i < ARRAY_SIZE(capa_controllers); i++)
		if ((r = capa_controllers[i].start(x)) < 0) {
			log_error("cannot start the controller",
				  KV_S("controller", capa_controllers[i].name), KV_E(r));
			goto out;
		}
	x->run = (struct controllers){.ctls = x->ctls,
				      .n = x->n_ctls,
				      .informers = {x->awsclusters},
				      .kc = x->kc,
				      .leader_elect = kube_flag_leader_elect,
				      .cancel = x->cancel};
	kube_le_config_from_flags(&x->run.le);
	log_info("starting manager", KV_U("controllers", x->n_ctls));
	r = controllers_run(&x->run);
out:
	http_server_free(metrics);
	http_server_free(health);
	return r;
}

int capa_main(int argc, char **argv)
{
	struct capa_ctx x = {0};
	int n, r;

	/* CAPA's Lease: controller-leader-elect-capa in the pod's namespace */
	kube_flag_le_resource_name = strdup("controller-leader-elect-capa");
	n = flags_parse("capa", capa_usage, capa_flag_table, argc, argv);
	if (n < 0) {
		free(kube_flag_le_resource_name);
		kube_flag_le_resource_name = NULL;
		return flags_exit_code(n);
	}
	if (n > 0) {
		fprintf(stderr, "aws-k8s capa: unexpected argument '%s'\n", argv[0]);
		r = 2;
		goto out;
	}
	if (f.sync_period <= 0) {
		fprintf(stderr, "aws-k8s capa: --sync-period must be positive\n");
		r = 2;
		goto out;
	}
	if (!kube_flag_le_resource_namespace || !*kube_flag_le_resource_namespace) {
		const char *ns = getenv("POD_NAMESPACE");
		free(kube_flag_le_resource_namespace);
		kube_flag_le_resource_namespace = strdup(ns && *ns ? ns : "capa-system");
	}
	x.namespace = f.namespace && *f.namespace ? f.namespace : NULL;
	x.watch_filter = f.watch_filter && *f.watch_filter ? f.watch_filter : NULL;
	x.sync_period_ns = f.sync_period;
	x.cluster_workers = (int)f.cluster_conc;
	x.machine_workers = (int)f.machine_conc;
	x.feature_gates = f.feature_gates;
	x.cancel = cancel_root();
	capa_limiter_init(&x.lim, now_mono_ns());
	r = run(&x) < 0 ? 1 : 0;
	capa_machine_controller_stop(&x);
	capa_cluster_controller_stop(&x);
	kube_client_free(x.kc);
	aws_client_free(x.aws);
	capa_limiter_release(&x.lim);
out:
	flags_free(capa_flag_table);
	free(kube_flag_le_resource_name);
	kube_flag_le_resource_name = NULL;
	return r;
}
