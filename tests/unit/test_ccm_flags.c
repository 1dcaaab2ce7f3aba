#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/base/flags.h"
#include "common/base/secret.h"
#include "common/x509/x509.h"
#include "modules/ccm/ccm_internal.h"
#include "tests/unit/harness.h"

static int parse(int argc, const char **argv)
{
	char *copy[128];
	for (int i = 0; i < argc; i++)
		copy[i] = (char *)argv[i];
	/* keep --help output and errors out of the test log */
	int saved = dup(2), devnull = open("/dev/null", O_WRONLY);
	dup2(devnull, 2);
	int r = flags_parse("ccm", "", ccm_flag_table, argc, copy);
	dup2(saved, 2);
	close(saved);
	close(devnull);
	return r;
}

TEST(ccm_flags_deckhouse_manifest)
{
	/* the arguments Deckhouse's Deployment passes */
	const char *argv[] = {"ccm",
			      "--leader-elect=true",
			      "--bind-address=127.0.0.1",
			      "--secure-port=10471",
			      "--cluster-cidr=10.111.0.0/16",
			      "--allocate-node-cidrs=true",
			      "--configure-cloud-routes=true",
			      "--cloud-config=/etc/cloud-contoller-manager-config/cloud-config",
			      "--cloud-provider=aws",
			      "--v=2"};
	ASSERT_EQ(parse(ARRAY_SIZE(argv), argv), 0);
	flags_free(ccm_flag_table);
}

TEST(ccm_flags_every_upstream_flag)
{
	/* a flag of each kind the upstream binary has, in both syntaxes */
	const char *argv[] = {
	    "ccm",
	    "--cloud-provider",
	    "aws",
	    "--cloud-config=/x",
	    "--cluster-name=k",
	    "--controllers=*,-service,cloud-node",
	    "--node-monitor-period=5s",
	    "--node-status-update-frequency=5m",
	    "--route-reconciliation-period=10s",
	    "--concurrent-node-syncs=2",
	    "--concurrent-node-status-updates=3",
	    "--concurrent-service-syncs=1",
	    "--allow-untagged-cloud",
	    "--cidr-allocator-type=RangeAllocator",
	    "--min-resync-period=12h",
	    "--use-service-account-credentials=false",
	    "--external-cloud-volume-plugin=aws",
	    "--feature-gates=A=true,B=false",
	    "--profiling=false",
	    "--contention-profiling",
	    "--kubeconfig=/k",
	    "--master=https://x",
	    "--kube-api-qps=50",
	    "--kube-api-burst=100",
	    "--kube-api-content-type=application/json",
	    "--leader-elect-lease-duration=15s",
	    "--leader-elect-renew-deadline=10s",
	    "--leader-elect-retry-period=2s",
	    "--leader-elect-resource-lock=leases",
	    "--leader-elect-resource-name=cloud-controller-manager",
	    "--leader-elect-resource-namespace=kube-system",
	    "--cert-dir=/tmp/c",
	    "--tls-cert-file=/c",
	    "--tls-private-key-file=/k",
	    "--tls-cipher-suites=A,B",
	    "--tls-min-version=VersionTLS12",
	    "--http2-max-streams-per-connection=0",
	    "--permit-port-sharing",
	    "--authentication-kubeconfig=/a",
	    "--authentication-skip-lookup",
	    "--authentication-token-webhook-cache-ttl=10s",
	    "--authentication-tolerate-lookup-failure",
	    "--client-ca-file=/ca",
	    "--requestheader-allowed-names=a",
	    "--requestheader-client-ca-file=/r",
	    "--requestheader-extra-headers-prefix=x-remote-extra-",
	    "--requestheader-group-headers=x-remote-group",
	    "--requestheader-username-headers=x-remote-user",
	    "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
	    "--authorization-kubeconfig=/z",
	    "--authorization-webhook-cache-authorized-ttl=10s",
	    "--authorization-webhook-cache-unauthorized-ttl=10s",
	    "--webhooks=*",
	    "--webhook-secure-port=10260",
	    "--tags=a=b",
	    "--resources=instance",
	    "--disabled-metrics=x",
	    "--log-flush-frequency=5s",
	    "--vmodule=x=2",
	    "--logging-format=text",
	    "-v=2",
	};
	ASSERT_EQ(parse(ARRAY_SIZE(argv), argv), 0);
	flags_free(ccm_flag_table);
}

TEST(ccm_flags_rejected)
{
	const char *a1[] = {"ccm", "--no-such-flag=1"};
	ASSERT_ERR(parse(2, a1), EINVAL);
	const char *a2[] = {"ccm", "--node-monitor-period=5"};
	ASSERT_ERR(parse(2, a2), EINVAL);
	const char *a3[] = {"ccm", "--concurrent-node-syncs=0"};
	ASSERT_ERR(parse(2, a3), EINVAL);
	const char *a4[] = {"ccm", "--secure-port=70000"};
	ASSERT_ERR(parse(2, a4), EINVAL);
	const char *a5[] = {"ccm", "--leader-elect=maybe"};
	ASSERT_ERR(parse(2, a5), EINVAL);
	const char *a6[] = {"ccm", "--help"};
	ASSERT_ERR(parse(2, a6), ECANCELED);
	flags_free(ccm_flag_table);
}

static unsigned ctl(const char *list, int *ret)
{
	char **v = NULL;
	unsigned mask = 0;
	char err[256];
	strv_split(list, ',', &v);
	*ret = ccm_controllers_parse(v, &mask, err, sizeof(err));
	strv_free(v);
	return mask;
}

TEST(ccm_flags_controllers)
{
	int r;
	unsigned def = CCM_CTL_NODE | CCM_CTL_LIFECYCLE | CCM_CTL_ROUTE | CCM_CTL_SERVICE;
	ASSERT_EQ(ctl("*", &r), def);
	ASSERT_OK(r);
	ASSERT_EQ(ctl("*,-service", &r), def & ~CCM_CTL_SERVICE);
	ASSERT_EQ(ctl("*,-service-lb-controller,-route", &r), CCM_CTL_NODE | CCM_CTL_LIFECYCLE);
	ASSERT_EQ(ctl("cloud-node,route", &r), CCM_CTL_NODE | CCM_CTL_ROUTE);
	ASSERT_EQ(ctl("cloud-node-controller", &r), CCM_CTL_NODE);
	ASSERT_EQ(ctl("*,tagging-controller", &r), def | CCM_CTL_TAGGING);
	/* the first explicit mention wins */
	ASSERT_EQ(ctl("-route,route,*", &r), def & ~CCM_CTL_ROUTE);
	ASSERT_EQ(ctl("route,-route", &r), CCM_CTL_ROUTE);
	ASSERT_EQ(ctl("", &r), 0);
	ctl("*,-bogus", &r);
	ASSERT_ERR(r, EINVAL);
	ctl("bogus", &r);
	ASSERT_ERR(r, EINVAL);
}

TEST(ccm_flags_self_signed)
{
	char *cert = NULL, *key = NULL, err[256];
	const char *dns[] = {"localhost", NULL}, *ips[] = {"127.0.0.1", NULL};
	ASSERT_OK(ccm_self_signed("localhost", dns, ips, &cert, &key, err, sizeof(err)));
	ASSERT_CONTAINS(cert, "-----BEGIN CERTIFICATE-----");
	ASSERT_CONTAINS(key, "PRIVATE KEY-----");

	/* as before common/x509: a P-256 key, CN "localhost@<time>", the SANs, one year,
	 * CA:TRUE with serverAuth */
	struct x509_cert *c = NULL;
	struct x509_key *k = NULL;
	struct x509_names n = {0};
	int64_t nb = 0, na = 0;
	int r = x509_cert_from_pem(cert, &c, err, sizeof(err));
	if (r >= 0)
		r = x509_key_from_pem(key, &k, err, sizeof(err));
	if (r >= 0)
		r = x509_cert_key_match(c, k, err, sizeof(err));
	if (r >= 0)
		r = x509_cert_names(c, &n, err, sizeof(err));
	if (r >= 0)
		r = x509_cert_validity(c, &nb, &na, err, sizeof(err));
	bool ok = r >= 0 && x509_key_type(k) == X509_KEY_EC_P256 && x509_cert_is_ca(c) &&
		  str_has_prefix(n.cn, "localhost@") && n.dns && !strcmp(n.dns[0], "localhost") &&
		  !n.dns[1] && n.ips && !strcmp(n.ips[0], "127.0.0.1") && !n.ips[1] &&
		  na - nb == X509_YEAR + X509_SKEW_S;
	x509_names_release(&n);
	x509_key_free(k);
	x509_cert_free(c);
	free(cert);
	secret_free(key);
	ASSERT_OK(r);
	ASSERT_TRUE(ok);
}
