/* cpm_sched: KubeSchedulerWebhookConfiguration -> kube-scheduler extenders (a table of CRs and
 * the extenders expected), the config's apiVersion per Kubernetes version, the caBundle
 * fallback to the cluster CA, and invalid CRs refused with the field named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/base64.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/secret.h"
#include "common/kube/yaml.h"
#include "common/x509/x509.h"
#include "modules/cpm/cpm_sched.h"
#include "tests/unit/harness.h"

/* A PEM certificate and its base64 (made once). */
static char *ca_pem, *ca_b64, *cluster_pem, *cluster_b64;

static int make_cas(void)
{
	struct x509_spec s = {.cn = "ext-ca", .ca = true, .duration_s = 86400};
	char *key = NULL, err[128];
	int r;

	if (ca_pem)
		return 0;
	r = x509_self_signed_pem(&s, &ca_pem, &key, err, sizeof(err));
	secret_free(key);
	key = NULL;
	s.cn = "kubernetes";
	if (r >= 0)
		r = x509_self_signed_pem(&s, &cluster_pem, &key, err, sizeof(err));
	secret_free(key);
	if (r >= 0)
		r = base64_encode(ca_pem, strlen(ca_pem), BASE64_STD, &ca_b64);
	if (r >= 0)
		r = base64_encode(cluster_pem, strlen(cluster_pem), BASE64_STD, &cluster_b64);
	return r;
}

/* The text with every "%CA%" replaced by the valid caBundle. */
static char *cr_text(const char *fmt)
{
	struct buf b = BUF_INIT(1 << 20);
	const char *at;

	while ((at = strstr(fmt, "%CA%")) != NULL) {
		buf_append(&b, fmt, (size_t)(at - fmt));
		buf_puts(&b, ca_b64);
		fmt = at + 4;
	}
	buf_puts(&b, fmt);
	return buf_steal(&b);
}

#define HDR "apiVersion: deckhouse.io/v1alpha1\nkind: KubeSchedulerWebhookConfiguration\n"

struct want {
	const char *url;
	long long weight, timeout;
	bool ignorable, fallback;
};

static const struct {
	const char *name, *yaml, *domain;
	size_t n;
	struct want w[3];
} table[] = {
    {"defaults: failurePolicy Fail, timeout 5",
     HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  clientConfig:\n    service: {name: "
	 "ext, namespace: d8-x, port: 8099, path: /scheduler}\n    caBundle: %CA%\n",
     NULL,
     1,
     {{"https://ext.d8-x.svc.cluster.local:8099/scheduler", 1, 5, false, false}}},
    {"Ignore, timeout 12, another cluster domain",
     HDR "metadata: {name: b}\nwebhooks:\n- weight: 7\n  failurePolicy: Ignore\n  "
	 "timeoutSeconds: 12\n  clientConfig:\n    service: {name: sds, namespace: d8-sds, "
	 "port: 443, path: /api/v1}\n    caBundle: %CA%\n",
     "k8s.example",
     1,
     {{"https://sds.d8-sds.svc.k8s.example:443/api/v1", 7, 12, true, false}}},
    {"an invalid caBundle falls back to the cluster CA",
     HDR "metadata: {name: c}\nwebhooks:\n- weight: 2\n  clientConfig:\n    service: {name: "
	 "s, namespace: n, port: 1, path: /}\n    caBundle: bm90IGEgY2VydA==\n",
     NULL,
     1,
     {{"https://s.n.svc.cluster.local:1/", 2, 5, false, true}}},
    {"paths cleaned as url.JoinPath: no slash, '..', '//', trailing slash kept",
     HDR "metadata: {name: d}\nwebhooks:\n- weight: 1\n  clientConfig:\n    service: {name: "
	 "s, namespace: n, port: 9, path: \"x//y/../z/\"}\n    caBundle: %CA%\n- weight: 3\n  "
	 "clientConfig:\n    service: {name: t, namespace: n, port: 9, path: \"\"}\n    "
	 "caBundle: \"\"\n",
     NULL,
     2,
     {{"https://s.n.svc.cluster.local:9/x/z/", 1, 5, false, false},
      {"https://t.n.svc.cluster.local:9", 3, 5, false, true}}},
    {"a List of two CRs comes sorted by name, webhooks in order",
     "apiVersion: v1\nkind: List\nitems:\n"
     "- {apiVersion: deckhouse.io/v1alpha1, kind: KubeSchedulerWebhookConfiguration, metadata: "
     "{name: z}, webhooks: [{weight: 3, failurePolicy: Ignore, timeoutSeconds: 0, clientConfig: "
     "{service: {name: z, namespace: n, port: 3, path: /z}, caBundle: %CA%}}]}\n"
     "- {apiVersion: deckhouse.io/v1alpha1, kind: KubeSchedulerWebhookConfiguration, metadata: "
     "{name: a}, webhooks: [{weight: 1, clientConfig: {service: {name: a1, namespace: n, port: "
     "1, path: a}, caBundle: %CA%}}, {weight: 2, clientConfig: {service: {name: a2, namespace: "
     "n, port: 2, path: /a}, caBundle: %CA%}}]}\n",
     NULL,
     3,
     {{"https://a1.n.svc.cluster.local:1/a", 1, 5, false, false},
      {"https://a2.n.svc.cluster.local:2/a", 2, 5, false, false},
      {"https://z.n.svc.cluster.local:3/z", 3, 0, true, false}}},
    {"two documents and a CR without webhooks entries",
     HDR "metadata: {name: y}\nwebhooks: []\n---\n" HDR
	 "metadata: {name: x}\nwebhooks:\n- weight: 4\n  clientConfig:\n    service: {name: "
	 "q, namespace: n, port: 4, path: /q}\n    caBundle: %CA%\n",
     NULL,
     1,
     {{"https://q.n.svc.cluster.local:4/q", 4, 5, false, false}}},
};

TEST(cpm_sched_extenders_table)
{
	ASSERT_OK(make_cas());
	for (size_t t = 0; t < sizeof(table) / sizeof(table[0]); t++) {
		struct cpm_sched_extenders e = {0};
		char err[300] = "", *text = cr_text(table[t].yaml);

		fprintf(stderr, "  case: %s\n", table[t].name);
		ASSERT_NOT_NULL(text);
		int r = cpm_sched_parse(text, strlen(text), table[t].domain, cluster_pem, &e, err,
					sizeof(err));
		free(text);
		if (r < 0)
			fprintf(stderr, "  error: %s\n", err);
		ASSERT_OK(r);
		ASSERT_EQ(e.n, table[t].n);
		for (size_t i = 0; i < e.n; i++) {
			const struct want *w = &table[t].w[i];
			ASSERT_STREQ(e.v[i].url_prefix, w->url);
			ASSERT_EQ(e.v[i].weight, w->weight);
			ASSERT_EQ(e.v[i].timeout_s, w->timeout);
			ASSERT_EQ(e.v[i].ignorable, w->ignorable);
			ASSERT_EQ(e.v[i].ca_fallback, w->fallback);
			ASSERT_STREQ(e.v[i].ca_data, w->fallback ? cluster_b64 : ca_b64);
		}
		cpm_sched_extenders_release(&e);
	}
}

TEST(cpm_sched_render_versions_and_fields)
{
	struct cpm_sched_extenders e = {0};
	char err[300], *text = NULL, *yaml = NULL, *y28 = NULL;
	cJSON *j = NULL;
	const cJSON *x;

	ASSERT_OK(make_cas());
	text = cr_text(table[1].yaml);
	ASSERT_OK(cpm_sched_parse(text, strlen(text), "k8s.example", NULL, &e, err, sizeof(err)));
	free(text);
	ASSERT_OK(cpm_sched_render(33, &e, &yaml));
	ASSERT_OK(cpm_sched_render(28, &e, &y28));
	ASSERT_CONTAINS(y28, "apiVersion: kubescheduler.config.k8s.io/v1beta3\n");
	ASSERT_OK(kube_yaml_parse(yaml, strlen(yaml), KUBE_YAML_TYPED, &j, err, sizeof(err)));
	ASSERT_STREQ(json_str(j, "apiVersion"), "kubescheduler.config.k8s.io/v1");
	ASSERT_STREQ(json_str(j, "kind"), "KubeSchedulerConfiguration");
	ASSERT_STREQ(json_str(j, "clientConnection.kubeconfig"), "/etc/kubernetes/scheduler.conf");
	x = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "profiles"), 0);
	ASSERT_STREQ(json_str(x, "schedulerName"), "high-node-utilization");
	x = cJSON_GetArrayItem(cJSON_GetObjectItem(x, "pluginConfig"), 0);
	ASSERT_STREQ(json_str(x, "name"), "NodeResourcesFit");
	ASSERT_STREQ(json_str(x, "args.scoringStrategy.type"), "MostAllocated");
	x = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "profiles"), 1);
	ASSERT_STREQ(json_str(x, "schedulerName"), "default-scheduler");
	x = cJSON_GetArrayItem(cJSON_GetObjectItem(x, "pluginConfig"), 0);
	ASSERT_STREQ(json_str(x, "name"), "PodTopologySpread");
	x = cJSON_GetArrayItem(json_find(x, "args.defaultConstraints"), 0);
	ASSERT_STREQ(json_str(x, "topologyKey"), "topology.kubernetes.io/zone");
	ASSERT_STREQ(json_str(x, "whenUnsatisfiable"), "ScheduleAnyway");
	ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(j, "extenders")), 1);
	x = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "extenders"), 0);
	ASSERT_STREQ(json_str(x, "urlPrefix"), "https://sds.d8-sds.svc.k8s.example:443/api/v1");
	ASSERT_STREQ(json_str(x, "filterVerb"), "filter");
	ASSERT_STREQ(json_str(x, "prioritizeVerb"), "prioritize");
	ASSERT_STREQ(json_str(x, "httpTimeout"), "12s");
	ASSERT_STREQ(json_str(x, "tlsConfig.caData"), ca_b64);
	ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItem(x, "enableHTTPS")));
	ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItem(x, "nodeCacheCapable")));
	ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItem(x, "ignorable")));
	ASSERT_EQ(cJSON_GetObjectItem(x, "weight")->valueint, 7);
	cJSON_Delete(j);
	free(yaml);
	free(y28);
	/* no webhooks: the profiles alone, no extenders key */
	ASSERT_OK(cpm_sched_render(29, NULL, &yaml));
	ASSERT_NOT_CONTAINS(yaml, "extenders");
	ASSERT_CONTAINS(yaml, "schedulerName: default-scheduler");
	free(yaml);
	cpm_sched_extenders_release(&e);
}

#define SVC "    service: {name: s, namespace: n, port: 1, path: /p}\n"
static const struct {
	const char *yaml, *want;
} invalid[] = {
    {HDR "metadata: {name: a}\n", "\"a\": webhooks: required"},
    {HDR "metadata: {name: a}\nwebhooks: {}\n", "\"a\": webhooks: must be a list"},
    {HDR "metadata: {name: a}\nwebhooks:\n- clientConfig:\n" SVC "    caBundle: %CA%\n",
     "webhooks[0].weight: required"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 0\n  clientConfig:\n" SVC
	 "    caBundle: %CA%\n",
     "webhooks[0].weight: must be an integer of at least 1"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: \"5\"\n  clientConfig:\n" SVC
	 "    caBundle: %CA%\n",
     "webhooks[0].weight: must be an integer of at least 1"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1.5\n  clientConfig:\n" SVC
	 "    caBundle: %CA%\n",
     "webhooks[0].weight: must be an integer"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  failurePolicy: Never\n  "
	 "clientConfig:\n" SVC "    caBundle: %CA%\n",
     "webhooks[0].failurePolicy: must be Fail or Ignore (got \"Never\")"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n", "webhooks[0].clientConfig: required"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  clientConfig: {caBundle: %CA%}\n",
     "webhooks[0].clientConfig.service: required"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  clientConfig:\n    service: "
	 "{namespace: n, port: 1, path: /}\n    caBundle: %CA%\n",
     "webhooks[0].clientConfig.service.name: required"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  clientConfig:\n    service: "
	 "{name: s, port: 1, path: /}\n    caBundle: %CA%\n",
     "webhooks[0].clientConfig.service.namespace: required"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  clientConfig:\n    service: "
	 "{name: s, namespace: n, path: /}\n    caBundle: %CA%\n",
     "webhooks[0].clientConfig.service.port: required"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  clientConfig:\n    service: "
	 "{name: s, namespace: n, port: 70000, path: /}\n    caBundle: %CA%\n",
     "webhooks[0].clientConfig.service.port: must be an integer from 1 to 65535"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  clientConfig:\n    service: "
	 "{name: s, namespace: n, port: 1}\n    caBundle: %CA%\n",
     "webhooks[0].clientConfig.service.path: required"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  clientConfig:\n    service: "
	 "{name: s, namespace: n, port: 1, path: \"/a?b\"}\n    caBundle: %CA%\n",
     "webhooks[0].clientConfig.service.path: \"/a?b\" is not a URL path"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  clientConfig:\n    service: "
	 "{name: S_1, namespace: n, port: 1, path: /}\n    caBundle: %CA%\n",
     "webhooks[0].clientConfig.service.name: \"S_1\" is not a Service name"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  clientConfig:\n    service: "
	 "{name: s, namespace: n.x, port: 1, path: /}\n    caBundle: %CA%\n",
     "webhooks[0].clientConfig.service.namespace: \"n.x\" is not a namespace name"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  clientConfig:\n" SVC,
     "webhooks[0].clientConfig.caBundle: required"},
    {HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  timeoutSeconds: -1\n  "
	 "clientConfig:\n" SVC "    caBundle: %CA%\n",
     "(see the test)"},
    {HDR "webhooks: []\n", "metadata.name: required"},
    {HDR "metadata: {name: a}\nwebhooks: []\n---\n" HDR "metadata: {name: a}\nwebhooks: []\n",
     "\"a\": metadata.name: given twice"},
    {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
     "only deckhouse.io/v1alpha1 KubeSchedulerWebhookConfiguration is taken"},
    {"a: [b\n", "document 1: "},
};

TEST(cpm_sched_invalid_crs_name_the_field)
{
	ASSERT_OK(make_cas());
	for (size_t t = 0; t < sizeof(invalid) / sizeof(invalid[0]); t++) {
		struct cpm_sched_extenders e = {0};
		char err[300] = "", *text = cr_text(invalid[t].yaml);
		const char *want = invalid[t].want;

		ASSERT_NOT_NULL(text);
		if (strstr(invalid[t].yaml, "timeoutSeconds: -1"))
			want = "webhooks[0].timeoutSeconds: must be an integer from 0 to 3600";
		fprintf(stderr, "  want: %s\n", want);
		ASSERT_ERR(
		    cpm_sched_parse(text, strlen(text), NULL, cluster_pem, &e, err, sizeof(err)),
		    EINVAL);
		free(text);
		ASSERT_CONTAINS(err, want);
		ASSERT_EQ(e.n, 0);
	}
}

TEST(cpm_sched_invalid_ca_without_cluster_ca)
{
	struct cpm_sched_extenders e = {0};
	char err[300] = "";
	const char *y = HDR "metadata: {name: a}\nwebhooks:\n- weight: 1\n  clientConfig:\n" SVC
			    "    caBundle: \"!!\"\n";

	ASSERT_ERR(cpm_sched_parse(y, strlen(y), NULL, NULL, &e, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "webhooks[0].clientConfig.caBundle: not base64 of a PEM certificate");
	free(ca_pem);
	free(ca_b64);
	free(cluster_pem);
	free(cluster_b64);
	ca_pem = ca_b64 = cluster_pem = cluster_b64 = NULL;
}
