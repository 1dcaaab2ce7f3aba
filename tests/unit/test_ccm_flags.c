#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/base/flags.h"
#include "common/base/secret.h"
#include "common/x509/x509.h"
#include "common/base/timeutil.h"
#include "modules/ccm/ccm_internal.h"
#include "modules/ccm/ccm_routes.h"
#include "tests/unit/harness.h"

static int parse(int argc, const char **argv)
{
	char *copy[128];
	for (int i = 0; i < argc; i++)
		copy[i] = (char *)argv[i];
	/* keep --help output and errors out of the test log */
	fflush(stdout);
	int saved1 = dup(1), saved2 = dup(2), devnull = open("/dev/null", O_WRONLY);
	dup2(devnull, 1);
	dup2(devnull, 2);
	int r = flags_parse("ccm", "", ccm_flag_table, argc, copy);
	fflush(stdout);
	dup2(saved1, 1);
	dup2(saved2, 2);
	close(saved1);
	close(saved2);
	close(devnull);
	return r;
}

/* flags_parse, then what ccm_main does with the values before it needs a server:
 * ccm_flags_apply (-1 to go on, else the exit code) and, when it goes on, ccm_wire. */
static int apply(int argc, const char **argv, struct ccm_wiring *w)
{
	int r = parse(argc, argv);
	if (r < 0)
		return r;
	int saved = dup(2), devnull = open("/dev/null", O_WRONLY);
	dup2(devnull, 2);
	r = ccm_flags_apply(w);
	dup2(saved, 2);
	close(saved);
	close(devnull);
	if (r >= 0)
		return 1000 + r; /* an exit code */
	return ccm_wire(w);
}

static const char *cidr(const struct ccm_wiring *w, size_t i, char *buf, size_t n)
{
	if (i >= w->m.n_cluster_cidrs || ccm_cidr_format(&w->m.cluster_cidrs[i], buf, n) < 0)
		return "(none)";
	return buf;
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
	struct ccm_wiring w = {0};
	char buf[64];
	ASSERT_OK(apply(ARRAY_SIZE(argv), argv, &w));
	/* the values given, where the code reads them */
	ASSERT_TRUE(w.m.set.routes); /* --allocate-node-cidrs and --configure-cloud-routes */
	ASSERT_EQ(w.m.n_cluster_cidrs, 1);
	ASSERT_STREQ(cidr(&w, 0, buf, sizeof(buf)), "10.111.0.0/16");
	ASSERT_STREQ(w.serve.bind_address, "127.0.0.1");
	ASSERT_EQ(w.serve.port, 10471);
	ASSERT_TRUE(w.m.run.leader_elect);
	/* and the defaults of the others: upstream's */
	ASSERT_EQ(w.m.controllers,
		  CCM_CTL_NODE | CCM_CTL_LIFECYCLE | CCM_CTL_ROUTE | CCM_CTL_SERVICE);
	ASSERT_EQ(w.m.set.node_monitor_period, 5 * NSEC_PER_SEC);
	ASSERT_EQ(w.ctls[CCM_C_LIFECYCLE].resync_ns, 5 * NSEC_PER_SEC);
	ASSERT_EQ(w.ctls[CCM_C_NODE_STATUS].resync_ns, 300 * NSEC_PER_SEC);
	ASSERT_EQ(w.ctls[CCM_C_ROUTE].resync_ns, 10 * NSEC_PER_SEC);
	ASSERT_EQ(w.ctls[CCM_C_NODE].workers, 1);
	ASSERT_EQ(w.ctls[CCM_C_SERVICE].workers, 1); /* --concurrent-service-syncs */
	for (int i = 0; i < CCM_C_N; i++)
		ASSERT_EQ(w.ctls[i].disabled, i == CCM_C_TAGGING); /* off by default, as upstream */
	ASSERT_NULL(w.serve.cert_dir);
	ASSERT_NULL(w.serve.cert_file);
	ASSERT_STREQ(w.m.set.cluster_name, "kubernetes");
	ASSERT_STREQ(w.m.run.le.lock_name, "cloud-controller-manager");
	ASSERT_STREQ(w.m.run.le.lock_namespace, "kube-system");
	ASSERT_EQ(w.m.run.le.lease_duration_ns, 15 * NSEC_PER_SEC);
	ASSERT_EQ(w.m.run.le.renew_deadline_ns, 10 * NSEC_PER_SEC);
	ASSERT_EQ(w.m.run.le.retry_period_ns, 2 * NSEC_PER_SEC);
	ccm_wiring_release(&w);
	flags_free(ccm_flag_table);
}

/* Each flag with an effect, set away from its default, is found where the code reads it: the
 * controllers' settings, their rows in the controller table, the leader election's config and
 * the secure server's options. */
TEST(ccm_flags_land_where_read)
{
	const char *argv[] = {"ccm",
			      "--cloud-provider=aws",
			      "--node-monitor-period=7s",
			      "--node-status-update-frequency=3m",
			      "--route-reconciliation-period=45s",
			      "--concurrent-node-syncs=4",
			      "--controllers=cloud-node,route",
			      "--allocate-node-cidrs=true",
			      "--configure-cloud-routes=true",
			      "--cluster-cidr=10.111.0.0/16,fd00:10::/56",
			      "--cluster-name=prod",
			      "--bind-address=127.0.0.9",
			      "--secure-port=10471",
			      "--cert-dir=/tmp/cd",
			      "--tls-cert-file=/c.crt",
			      "--tls-private-key-file=/k.key",
			      "--leader-elect=false",
			      "--leader-elect-lease-duration=33s",
			      "--leader-elect-renew-deadline=21s",
			      "--leader-elect-retry-period=4s",
			      "--leader-elect-resource-name=my-ccm",
			      "--leader-elect-resource-namespace=infra"};
	struct ccm_wiring w = {0};
	char buf[64];
	ASSERT_OK(apply(ARRAY_SIZE(argv), argv, &w));
	/* the settings */
	ASSERT_EQ(w.m.set.node_monitor_period, 7000000000LL);
	ASSERT_EQ(w.m.set.node_status_update_frequency, 180 * NSEC_PER_SEC);
	ASSERT_EQ(w.m.set.route_period, 45 * NSEC_PER_SEC);
	ASSERT_EQ(w.m.set.node_workers, 4);
	ASSERT_TRUE(w.m.set.routes);
	ASSERT_STREQ(w.m.set.cluster_name, "prod");
	ASSERT_EQ(w.m.controllers, CCM_CTL_NODE | CCM_CTL_ROUTE);
	ASSERT_EQ(w.m.n_cluster_cidrs, 2);
	ASSERT_STREQ(cidr(&w, 0, buf, sizeof(buf)), "10.111.0.0/16");
	ASSERT_STREQ(cidr(&w, 1, buf, sizeof(buf)), "fd00:10::/56");
	/* the controller table: the periods, the workers, --controllers */
	ASSERT_EQ(w.ctls[CCM_C_LIFECYCLE].resync_ns, 7000000000LL);
	ASSERT_TRUE(w.ctls[CCM_C_LIFECYCLE].disabled);
	ASSERT_EQ(w.ctls[CCM_C_NODE].workers, 4);
	ASSERT_FALSE(w.ctls[CCM_C_NODE].disabled);
	ASSERT_EQ(w.ctls[CCM_C_NODE_STATUS].resync_ns, 180 * NSEC_PER_SEC);
	ASSERT_EQ(w.ctls[CCM_C_NODE_STATUS].resync_first_ns, 180 * NSEC_PER_SEC);
	ASSERT_FALSE(w.ctls[CCM_C_NODE_STATUS].disabled);
	ASSERT_EQ(w.ctls[CCM_C_ROUTE].resync_ns, 45 * NSEC_PER_SEC);
	ASSERT_FALSE(w.ctls[CCM_C_ROUTE].disabled);
	/* the election */
	ASSERT_FALSE(w.m.run.leader_elect);
	ASSERT_EQ(w.m.run.le.lease_duration_ns, 33 * NSEC_PER_SEC);
	ASSERT_EQ(w.m.run.le.renew_deadline_ns, 21 * NSEC_PER_SEC);
	ASSERT_EQ(w.m.run.le.retry_period_ns, 4 * NSEC_PER_SEC);
	ASSERT_STREQ(w.m.run.le.lock_name, "my-ccm");
	ASSERT_STREQ(w.m.run.le.lock_namespace, "infra");
	/* the secure server */
	ASSERT_STREQ(w.serve.bind_address, "127.0.0.9");
	ASSERT_EQ(w.serve.port, 10471);
	ASSERT_STREQ(w.serve.cert_dir, "/tmp/cd");
	ASSERT_STREQ(w.serve.cert_file, "/c.crt");
	ASSERT_STREQ(w.serve.key_file, "/k.key");
	ccm_wiring_release(&w);
	flags_free(ccm_flag_table);
}

/* The tagging controller's flags: on with --controllers (upstream's key "tagging"), the tags
 * sorted with their checksum, the workers, the bucket only with both rate and burst. */
TEST(ccm_flags_tagging)
{
	const char *a1[] = {"ccm",
			    "--cloud-provider=aws",
			    "--controllers=*,tagging",
			    "--tags=team=storage,env=prod",
			    "--resources=instance",
			    "--tagging-controller-concurrent-node-syncs=3",
			    "--tagging-controller-rate-limit=2.5",
			    "--tagging-controller-burst-limit=7",
			    "--tagging-controller-enable-batching=false"};
	const char *a2[] = {"ccm", "--cloud-provider=aws", "--controllers=*,tagging-controller",
			    "--tags=a=b", "--resources=instance",
			    "--tagging-controller-rate-limit=5"};
	struct ccm_wiring w = {0};

	ASSERT_OK(apply(ARRAY_SIZE(a1), a1, &w));
	ASSERT_TRUE(w.m.controllers & CCM_CTL_TAGGING);
	ASSERT_FALSE(w.ctls[CCM_C_TAGGING].disabled);
	ASSERT_STREQ(w.ctls[CCM_C_TAGGING].name, "tagging-controller");
	ASSERT_EQ(w.ctls[CCM_C_TAGGING].workers, 3);
	ASSERT_TRUE(w.ctls[CCM_C_TAGGING].queue.qps == 2.5);
	ASSERT_EQ(w.ctls[CCM_C_TAGGING].queue.burst, 7);
	ASSERT_FALSE(w.tag_opts.batching);
	ASSERT_TRUE(w.tag_opts.rate_limited);
	ccm_wiring_release(&w);
	/* a rate without a burst: no bucket, as upstream */
	ASSERT_OK(apply(ARRAY_SIZE(a2), a2, &w));
	ASSERT_FALSE(w.ctls[CCM_C_TAGGING].disabled);
	ASSERT_FALSE(w.tag_opts.rate_limited);
	ASSERT_TRUE(w.ctls[CCM_C_TAGGING].queue.qps == 0);
	ASSERT_TRUE(w.tag_opts.batching);
	ccm_wiring_release(&w);
	flags_free(ccm_flag_table);
}

/* The tagging controller enabled with inputs upstream's Validate refuses: a usage error. Not
 * enabled, they are not looked at. */
TEST(ccm_flags_tagging_refuses)
{
	const char *a1[] = {"ccm", "--cloud-provider=aws", "--controllers=*,tagging",
			    "--resources=instance"};
	const char *a2[] = {"ccm", "--cloud-provider=aws", "--controllers=*,tagging", "--tags=a=b"};
	const char *a3[] = {"ccm", "--cloud-provider=aws", "--controllers=*,tagging", "--tags=a=b",
			    "--resources=volume"};
	const char *a4[] = {"ccm", "--cloud-provider=aws", "--controllers=*,tagging", "--tags=a=b",
			    "--resources=instance", "--tagging-controller-rate-limit=-1"};
	const char *a5[] = {"ccm", "--cloud-provider=aws", "--resources=volume"};
	struct ccm_wiring w = {0};

	ASSERT_EQ(apply(ARRAY_SIZE(a1), a1, &w), 1002);
	ASSERT_EQ(apply(ARRAY_SIZE(a2), a2, &w), 1002);
	ASSERT_EQ(apply(ARRAY_SIZE(a3), a3, &w), 1002);
	ASSERT_EQ(apply(ARRAY_SIZE(a4), a4, &w), 1002);
	ccm_wiring_release(&w);
	ASSERT_OK(apply(ARRAY_SIZE(a5), a5, &w));
	ASSERT_TRUE(w.ctls[CCM_C_TAGGING].disabled);
	ccm_wiring_release(&w);
	flags_free(ccm_flag_table);
}

/* Routes are configured only with both --allocate-node-cidrs and --configure-cloud-routes: the
 * route row is disabled otherwise, and --cluster-cidr is then not needed. */
TEST(ccm_flags_routes_need_both)
{
	const char *a1[] = {"ccm", "--cloud-provider=aws", "--allocate-node-cidrs=true",
			    "--configure-cloud-routes=false", "--cluster-cidr=bogus"};
	const char *a2[] = {"ccm", "--cloud-provider=aws", "--cluster-cidr=10.0.0.0/8"};
	const char *a3[] = {"ccm", "--cloud-provider=aws", "--allocate-node-cidrs",
			    "--controllers=*,-route", "--cluster-cidr=bogus"};
	struct ccm_wiring w = {0};

	ASSERT_OK(apply(ARRAY_SIZE(a1), a1, &w));
	ASSERT_FALSE(w.m.set.routes);
	ASSERT_TRUE(w.ctls[CCM_C_ROUTE].disabled);
	ASSERT_FALSE(w.ctls[CCM_C_NODE].disabled);
	ASSERT_EQ(w.m.n_cluster_cidrs, 0);
	ccm_wiring_release(&w);
	/* --allocate-node-cidrs defaults to false */
	ASSERT_OK(apply(ARRAY_SIZE(a2), a2, &w));
	ASSERT_FALSE(w.m.set.routes);
	ASSERT_TRUE(w.ctls[CCM_C_ROUTE].disabled);
	ccm_wiring_release(&w);
	/* the route controller switched off: no --cluster-cidr needed either */
	ASSERT_OK(apply(ARRAY_SIZE(a3), a3, &w));
	ASSERT_TRUE(w.m.set.routes);
	ASSERT_TRUE(w.ctls[CCM_C_ROUTE].disabled);
	ASSERT_EQ(w.m.n_cluster_cidrs, 0);
	ccm_wiring_release(&w);
	flags_free(ccm_flag_table);
}

/* What ccm_flags_apply refuses, with the exit code ccm_main returns. */
TEST(ccm_flags_apply_refuses)
{
	const char *a1[] = {"ccm"};
	const char *a2[] = {"ccm", "--cloud-provider=gce"};
	const char *a3[] = {"ccm", "--cloud-provider=aws", "--controllers=*,-bogus"};
	const char *a4[] = {"ccm", "--cloud-provider=aws", "--leader-elect-lease-duration=5s",
			    "--leader-elect-renew-deadline=10s"};
	const char *a5[] = {"ccm", "--cloud-provider=aws", "--node-monitor-period=0s"};
	const char *a6[] = {"ccm", "--cloud-provider=aws", "--allocate-node-cidrs",
			    "--cluster-cidr=10.0.0.0/33"};
	const char *a7[] = {"ccm", "--cloud-provider=aws", "--allocate-node-cidrs"};
	struct ccm_wiring w = {0};

	ASSERT_EQ(apply(ARRAY_SIZE(a1), a1, &w), 1001);
	ASSERT_EQ(apply(ARRAY_SIZE(a2), a2, &w), 1001);
	ASSERT_EQ(apply(ARRAY_SIZE(a3), a3, &w), 1002);
	ASSERT_EQ(apply(ARRAY_SIZE(a4), a4, &w), 1002);
	ASSERT_EQ(apply(ARRAY_SIZE(a5), a5, &w), 1002);
	ASSERT_EQ(apply(ARRAY_SIZE(a6), a6, &w), 1001);
	ASSERT_EQ(apply(ARRAY_SIZE(a7), a7, &w), 1001); /* routes without --cluster-cidr */
	ccm_wiring_release(&w);
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
	    "--tagging-controller-rate-limit=0",
	    "--tagging-controller-burst-limit=0",
	    "--tagging-controller-concurrent-node-syncs=1",
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
	ASSERT_EQ(ctl("*,tagging", &r), def | CCM_CTL_TAGGING); /* upstream's key */
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
