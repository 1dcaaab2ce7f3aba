/* aws-k8s discoverer: Deckhouse's cloud-data-discoverer for AWS, plus what Deckhouse's leaves
 * out for AWS (the discovery data, the node-manager Secret, orphaned disks). See
 * disc_internal.h for the steps of one period. */
#include "modules/discoverer/discoverer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/base/base64.h"
#include "common/base/cancel.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/http/server.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"
#include "common/metrics/metrics.h"
#include "modules/discoverer/disc_internal.h"

static const char disc_usage[] =
	"Discovers the cloud's data for the cluster every --discovery-period, as Deckhouse's\n"
	"cloud-data-discoverer does, and writes an object only when it changed:\n"
	"  - permission conditions: DryRun DescribeAddressesAttribute and DescribeInstanceTopology;\n"
	"    an AWS 4xx reply with an error code other than DryRunOperation is a condition\n"
	"    (UnsupportedOperation on the topology call is not), in ConfigMap\n"
	"    kube-system/d8-cloud-provider-conditions (not created while empty);\n"
	"  - the instance-type catalog: InstanceTypesCatalog for-cluster-autoscaler;\n"
	"  - the discovery data (Secret kube-system/d8-cloud-provider-discovery-data,\n"
	"    AWSCloudDiscoveryData from the cluster-tagged subnets and the prefix's security groups)\n"
	"    and from it the node-manager Secret kube-system/d8-node-manager-cloud-provider;\n"
	"  - metrics: orphaned EBS volumes (the CSI driver's volumes of the cluster without a\n"
	"    PersistentVolume), instances of the node profile allowing IMDSv1.\n"
	"Kubernetes writes are retried (--write-retries, --write-retry-initial, --write-retry-max);\n"
	"/healthz answers 503 while the last period's writes failed after every retry. The\n"
	"cluster's UUID, prefix and layout come from the flags, else from Deckhouse's ConfigMap\n"
	"kube-system/d8-cluster-uuid and Secrets d8-cluster-configuration and\n"
	"d8-provider-cluster-configuration. With --once: one period, exit 0 when every step\n"
	"succeeded, else 1.\n"
	"\n"
	"Environment:\n"
	"  AWS_REGION, AWS_DEFAULT_REGION           the region (else the instance metadata's)\n"
	"  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY static keys (also copied into the node-manager\n"
	"                                           Secret, as Deckhouse's), AWS_SESSION_TOKEN\n"
	"  AWS_PROFILE, AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, AWS_ROLE_ARN,\n"
	"  AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_SESSION_NAME, AWS_CONTAINER_CREDENTIALS_FULL_URI,\n"
	"  AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE),\n"
	"  AWS_EC2_METADATA_DISABLED                the rest of the SDKs' credential chain (IRSA,\n"
	"                                           shared files, container, instance profile)\n"
	"  AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_EC2, AWS_IGNORE_CONFIGURED_ENDPOINT_URLS,\n"
	"  AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT, AWS_CA_BUNDLE, AWS_MAX_ATTEMPTS\n"
	"                                           endpoints and retries, as the SDKs read them\n"
	"  AWS_EC2_METADATA_SERVICE_ENDPOINT(_MODE) the instance metadata service\n"
	"  KUBECONFIG, KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT\n"
	"                                           the Kubernetes API (else the in-cluster config)\n"
	"and the variables named after the flags below ([$NAME]); a flag on the command line wins.";

static int64_t period_ns;
static char *listen_address;
static bool once;
static long long write_tries;
static int64_t write_initial_ns, write_max_ns;
static char *f_uuid, *f_prefix, *f_layout, *f_profile;

static const struct flag disc_flags[] = {
	{ "discovery-period", FLAG_DURATION, &period_ns, "1h", "DISCOVERY_PERIOD",
	  "Period of the cloud discovery." },
	{ "listen-address", FLAG_STRING, &listen_address, "127.0.0.1:8081", "LISTEN_ADDRESS",
	  "Address to serve /metrics and /healthz on." },
	{ "once", FLAG_BOOL, &once, "false", NULL,
	  "Run one discovery period and exit with its status (0: every step succeeded)." },
	{ "cluster-uuid", FLAG_STRING, &f_uuid, "", "CLUSTER_UUID",
	  "The cluster's UUID (the tag kubernetes.io/cluster/<uuid>); empty: the ConfigMap "
	  "kube-system/d8-cluster-uuid." },
	{ "cluster-prefix", FLAG_STRING, &f_prefix, "", "CLUSTER_PREFIX",
	  "The prefix of the cluster's cloud resources; empty: cloud.prefix of the Secret "
	  "kube-system/d8-cluster-configuration." },
	{ "layout", FLAG_STRING, &f_layout, "", "AWS_LAYOUT",
	  "WithoutNAT, WithNAT or Standard; empty: the AWSClusterConfiguration's, else WithoutNAT." },
	{ "node-iam-instance-profile", FLAG_STRING, &f_profile, "", "AWS_NODE_IAM_INSTANCE_PROFILE",
	  "The nodes' IAM instance profile, for aws_instances_imdsv1_allowed; empty: <prefix>-node." },
	{ "write-retries", FLAG_INT, &write_tries, "15", NULL,
	  "Tries of each Kubernetes write.", 1, 1000 },
	{ "write-retry-initial", FLAG_DURATION, &write_initial_ns, "3s", NULL,
	  "Wait after the first failed write, doubled after each." },
	{ "write-retry-max", FLAG_DURATION, &write_max_ns, "30s", NULL, "Longest wait between writes." },
	KUBE_FLAGS_QPS("5", "10"),
	LOG_FLAGS,
	{ NULL },
};

static struct metric *m_req_err, *m_update_err, *m_orphan, *m_cond, *m_imds;

static void metrics_init(void)
{
	m_req_err = metric_gauge("cloud_data_discovery_cloud_request_error",
				 "Indicator of an error during the request to the cloud",
				 (const char *[]){ "type", NULL });
	m_update_err = metric_gauge("cloud_data_discovery_update_resource_error",
				    "Indicator of an error during the update of a resource in the cluster",
				    (const char *[]){ NULL });
	m_orphan = metric_gauge("cloud_data_discovery_orphaned_disk_info",
				"A disk of the cluster that no PersistentVolume uses",
				(const char *[]){ "id", "name", NULL });
	m_cond = metric_gauge("cloud_data_discovery_cloud_conditions_error",
			      "A condition of the cloud that needs attention (a missing permission)",
			      (const char *[]){ "name", "message", NULL });
	m_imds = metric_gauge("cloud_data_discovery_aws_instances_imdsv1_allowed",
			      "Instances of the nodes' IAM profile that allow IMDSv1 (http-tokens optional)",
			      (const char *[]){ NULL });
}

/* The series of the last period, to remove the ones that are gone. */
static struct disc_orphan *last_orphans;
static size_t n_last_orphans;
static struct disc_condition last_conds[4];
static size_t n_last_conds;

static int step_conditions(struct disc *d)
{
	struct disc_condition c[4];
	size_t n = 0;
	char msg[128];
	int r = disc_conditions(d, c, &n);

	metric_set(m_req_err, r < 0 ? 1 : 0, "conditions");
	if (r < 0)
		return r;
	for (size_t i = 0; i < n_last_conds; i++) {
		snprintf(msg, sizeof(msg), "%.63s is not allowed", last_conds[i].api);
		metric_remove(m_cond, DISC_COND_NAME, msg);
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(msg, sizeof(msg), "%.63s is not allowed", c[i].api);
		metric_set(m_cond, 1, DISC_COND_NAME, msg);
	}
	memcpy(last_conds, c, sizeof(c));
	n_last_conds = n;

	char *json = disc_conditions_json(c, n);
	cJSON *cm = cJSON_CreateObject(), *md, *data;
	r = -ENOMEM;
	if (json && cm && cJSON_AddStringToObject(cm, "apiVersion", "v1") &&
	    cJSON_AddStringToObject(cm, "kind", "ConfigMap") &&
	    (md = cJSON_AddObjectToObject(cm, "metadata")) &&
	    cJSON_AddStringToObject(md, "name", DISC_CONDITIONS_CM) &&
	    cJSON_AddStringToObject(md, "namespace", DISC_NS) &&
	    (data = cJSON_AddObjectToObject(cm, "data")) &&
	    cJSON_AddStringToObject(data, "conditions", json))
		r = disc_apply(d, &kube_configmaps, cm, (const char *const[]){ "data", NULL }, n == 0);
	free(json);
	cJSON_Delete(cm);
	return r < 0 ? r : 0;
}

static int step_catalog(struct disc *d)
{
	struct disc_itype *t;
	size_t n;
	int r = disc_instance_types(d, &t, &n);

	metric_set(m_req_err, r < 0 ? 1 : 0, "instance_types");
	if (r < 0)
		return r;
	cJSON *cat = disc_catalog(t, n);
	free(t);
	log_info("instance types", KV_U("types", n));
	if (!cat)
		return -ENOMEM;
	static const struct kube_resource catalogs = { "deckhouse.io", "v1alpha1",
						       "instancetypescatalogs",
						       "InstanceTypesCatalog", false };
	r = disc_apply(d, &catalogs, cat, (const char *const[]){ "instanceTypes", NULL }, false);
	cJSON_Delete(cat);
	return r < 0 ? r : 0;
}

/* A Secret in kube-system whose data holds the values of kv, base64-encoded. */
static cJSON *secret_of(const char *name, const cJSON *kv)
{
	cJSON *s = cJSON_CreateObject(), *md, *data;
	const cJSON *x;

	if (!s || !cJSON_AddStringToObject(s, "apiVersion", "v1") ||
	    !cJSON_AddStringToObject(s, "kind", "Secret") || !(md = cJSON_AddObjectToObject(s, "metadata")) ||
	    !cJSON_AddStringToObject(md, "name", name) || !cJSON_AddStringToObject(md, "namespace", DISC_NS) ||
	    !cJSON_AddStringToObject(s, "type", "Opaque") || !(data = cJSON_AddObjectToObject(s, "data")))
		goto fail;
	cJSON_ArrayForEach(x, kv)
	{
		char *b64 = NULL;
		if (!cJSON_IsString(x) ||
		    base64_encode(x->valuestring, strlen(x->valuestring), BASE64_STD, &b64) < 0)
			goto fail;
		bool ok = cJSON_AddStringToObject(data, x->string, b64) != NULL;
		free(b64);
		if (!ok)
			goto fail;
	}
	return s;
fail:
	cJSON_Delete(s);
	return NULL;
}

static int write_secret(struct disc *d, const char *name, const cJSON *kv)
{
	cJSON *s = secret_of(name, kv);
	if (!s)
		return -ENOMEM;
	int r = disc_apply(d, &kube_secrets, s, (const char *const[]){ "data", NULL }, false);
	cJSON_Delete(s);
	return r;
}

static int step_data(struct disc *d)
{
	struct disc_subnet *s = NULL;
	struct disc_sgs sg = { 0 };
	size_t n = 0;
	cJSON *data = NULL, *kv = NULL, *nm = NULL;
	char err[256];
	int r = disc_subnets(d, &s, &n);

	if (r == 0 && n > 0)
		r = disc_groups(d, s[0].vpc, &sg);
	metric_set(m_req_err, r < 0 ? 1 : 0, "discovery_data");
	if (r < 0)
		goto out;
	if ((r = disc_data(&d->cfg, s, n, &sg, &data, err, sizeof(err))) < 0) {
		log_error("no discovery data", KV_S("reason", err), KV_E(r));
		goto out;
	}
	char *json = cJSON_PrintUnformatted(data);
	kv = cJSON_CreateObject();
	if (!json || !kv || !cJSON_AddStringToObject(kv, "discovery-data.json", json)) {
		free(json);
		r = -ENOMEM;
		goto out;
	}
	free(json);
	if ((r = write_secret(d, DISC_DATA_SECRET, kv)) < 0)
		goto out;
	if (!(nm = disc_node_manager_data(&d->cfg, data))) {
		r = -ENOMEM;
		goto out;
	}
	r = write_secret(d, DISC_NODE_MANAGER_SECRET, nm);
out:
	free(s);
	cJSON_Delete(data);
	cJSON_Delete(kv);
	cJSON_Delete(nm);
	return r < 0 ? r : 0;
}

static int step_orphans(struct disc *d)
{
	struct ec2_volume *v = NULL;
	struct disc_orphan *o = NULL;
	char **h = NULL;
	size_t nv = 0, nh = 0, no = 0;
	int r = disc_volumes(d, &v, &nv);

	metric_set(m_req_err, r < 0 ? 1 : 0, "disks");
	/* only a complete list of PersistentVolumes decides that a disk has none */
	if (r == 0 && (r = disc_pv_handles(d, &h, &nh)) == 0 &&
	    (r = disc_orphans(v, nv, h, nh, &o, &no)) == 0) {
		for (size_t i = 0; i < n_last_orphans; i++)
			metric_remove(m_orphan, last_orphans[i].id, last_orphans[i].name);
		for (size_t i = 0; i < no; i++)
			metric_set(m_orphan, 1, o[i].id, o[i].name);
		free(last_orphans);
		last_orphans = o;
		n_last_orphans = no;
		log_info("orphaned disks", KV_U("volumes", nv), KV_U("persistentVolumes", nh),
			 KV_U("orphaned", no));
	}
	ec2_volumes_free(v, nv);
	for (size_t i = 0; i < nh; i++)
		free(h[i]);
	free(h);
	return r;
}

static int step_imds(struct disc *d)
{
	long long n = 0;
	int r = disc_imdsv1(d, &n);
	metric_set(m_req_err, r < 0 ? 1 : 0, "instances");
	if (r == 0)
		metric_set(m_imds, (double)n);
	return r;
}

static bool healthy = true;

/* One period: every step runs; the result is the first failure. */
static int disc_period(struct disc *d)
{
	int (*const steps[])(struct disc *) = { step_conditions, step_catalog, step_data,
						step_orphans, step_imds };
	unsigned long before = d->writes;
	int64_t t0 = now_mono_ns();
	int result = 0;

	d->write_failed = false;
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		if (cancel_is_cancelled(cancel_root()))
			return -ECANCELED;
		int r = steps[i](d);
		if (r < 0 && result == 0)
			result = r;
	}
	log_info("discovery period done", KV_U("writes", d->writes - before),
		 KV_D("seconds", (double)(now_mono_ns() - t0) / 1e9), KV_E(result));
	return result;
}

static int healthz(void *ud, const struct http_server_request *req, struct http_server_reply *rep)
{
	(void)ud;
	(void)req;
	return http_reply_text(rep, __atomic_load_n(&healthy, __ATOMIC_RELAXED) ? 200 : 503,
			       __atomic_load_n(&healthy, __ATOMIC_RELAXED) ? "ok\n"
									   : "writes to Kubernetes failed\n");
}

static int run(struct disc *d)
{
	struct http_server *srv = NULL;
	char err[256];
	int r;

	if ((r = kube_client_from_flags("discoverer", &d->kc, err, sizeof(err))) < 0) {
		log_error("no Kubernetes client", KV_S("error", err), KV_E(r));
		return r;
	}
	aws_metrics_family_set(AWS_METRICS_OWN);
	if ((r = aws_client_new(&(struct aws_client_opts){ .user_agent = "discoverer" }, &d->aws)) < 0 ||
	    (r = aws_client_region(d->aws, &d->cfg.region)) < 0) {
		log_error("no AWS client (region and credentials come from the environment)", KV_E(r));
		return r;
	}
	metrics_init();
	if ((r = http_server_new(&(struct http_server_opts){ .bind = listen_address }, &srv)) < 0 ||
	    (r = http_server_add_standard(srv)) < 0 ||
	    (r = http_server_handle(srv, "/healthz", false, healthz, NULL)) < 0 ||
	    (r = http_server_start(srv)) < 0) {
		log_error("failed to serve", KV_S("address", listen_address), KV_E(r));
		http_server_free(srv);
		return r;
	}
	log_info("serving", KV_S("address", listen_address), KV_I("port", http_server_port(srv)));
	for (;;) {
		if ((r = disc_read_config(d)) == 0)
			r = disc_period(d);
		metric_set(m_update_err, d->write_failed ? 1 : 0);
		__atomic_store_n(&healthy, !d->write_failed, __ATOMIC_RELAXED);
		if (once || r == -ECANCELED || cancel_wait(cancel_root(), period_ns))
			break;
	}
	http_server_free(srv);
	/* the daemon asked to stop (SIGTERM) stops cleanly, whatever its last period did; --once
	 * keeps the status of its one period */
	if (!once && cancel_is_cancelled(cancel_root()))
		return 0;
	return r;
}

int discoverer_main(int argc, char **argv)
{
	struct disc d = { 0 };
	int n = flags_parse("discoverer", disc_usage, disc_flags, argc, argv);

	if (n < 0)
		return flags_exit_code(n);
	if (n > 0) {
		fprintf(stderr, "aws-k8s discoverer: unexpected argument '%s'\n", argv[0]);
		flags_free(disc_flags);
		return 2;
	}
	if (period_ns <= 0 || write_initial_ns <= 0 || write_max_ns < write_initial_ns) {
		fprintf(stderr, "aws-k8s discoverer: --discovery-period and --write-retry-initial must "
				"be positive, --write-retry-max at least --write-retry-initial\n");
		flags_free(disc_flags);
		return 2;
	}
	d.write_tries = write_tries;
	d.write_initial_ns = write_initial_ns;
	d.write_max_ns = write_max_ns;
	d.cfg.cluster_uuid = *f_uuid ? strdup(f_uuid) : NULL;
	d.cfg.prefix = *f_prefix ? strdup(f_prefix) : NULL;
	d.cfg.layout = *f_layout ? strdup(f_layout) : NULL;
	d.cfg.node_profile = *f_profile ? strdup(f_profile) : NULL;
	d.cfg.access_key_id = getenv("AWS_ACCESS_KEY_ID");
	d.cfg.secret_key = getenv("AWS_SECRET_ACCESS_KEY");
	int r = run(&d);
	aws_client_free(d.aws);
	kube_client_free(d.kc);
	free(d.cfg.cluster_uuid);
	free(d.cfg.prefix);
	free(d.cfg.layout);
	free(d.cfg.ami);
	free(d.cfg.node_profile);
	cJSON_Delete(d.cfg.tags);
	free(last_orphans);
	flags_free(disc_flags);
	return r < 0 ? 1 : 0;
}
