/* cpm_pki_converge: kubeadm's leaf certificates made from input CAs, and renewed on Deckhouse's
 * rules (< 30 days left, names differ, key missing, expired) without any API server. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/base/fileutil.h"
#include "common/base/secret.h"
#include "common/x509/x509.h"
#include "modules/cpm/cpm_pki.h"
#include "tests/unit/harness.h"

#define DAY ((int64_t)86400)
#define NLEAVES 7

static const char *const leaf_files[NLEAVES] = {
	"apiserver", "apiserver-kubelet-client", "front-proxy-client", "etcd/server",
	"etcd/peer", "etcd/healthcheck-client", "apiserver-etcd-client",
};

static char root[512];

static int put_ca(const char *name, const char *cn, int64_t start)
{
	struct x509_spec s = { .cn = cn, .ca = true, .start = start, .duration_s = 10 * X509_YEAR };
	_cleanup_x509_key_ struct x509_key *k = NULL;
	_cleanup_x509_cert_ struct x509_cert *c = NULL;
	_cleanup_secret_ char *kpem = NULL;
	char path[700], *cpem = NULL, err[128];
	int r = x509_key_new_rsa(2048, &k, err, sizeof(err));

	if (r >= 0)
		r = x509_cert_self_signed(&s, k, &c, err, sizeof(err));
	if (r >= 0)
		r = x509_key_to_pem(k, &kpem, err, sizeof(err));
	if (r >= 0)
		r = x509_cert_to_pem(c, &cpem, err, sizeof(err));
	snprintf(path, sizeof(path), "%s/etc/kubernetes/pki/%s.key", root, name);
	if (r >= 0)
		r = file_write_atomic(path, kpem, strlen(kpem), 0600);
	snprintf(path, sizeof(path), "%s/etc/kubernetes/pki/%s.crt", root, name);
	if (r >= 0)
		r = file_write_atomic(path, cpem, strlen(cpem), 0644);
	free(cpem);
	return r;
}

/* A fresh root with the three CAs, valid from two years ago. */
static int setup(const char *name)
{
	char d[700];

	snprintf(root, sizeof(root), "%s/%s", test_tmpdir(), name);
	snprintf(d, sizeof(d), "%s/etc/kubernetes/pki/etcd", root);
	for (char *p = d + strlen(test_tmpdir()) + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(d, 0755);
			*p = '/';
		}
	mkdir(d, 0755);
	int64_t start = (int64_t)time(NULL) - 2 * X509_YEAR;
	int r = put_ca("ca", "kubernetes", start);
	if (r >= 0)
		r = put_ca("front-proxy-ca", "front-proxy-ca", start);
	if (r >= 0)
		r = put_ca("etcd/ca", "etcd-ca", start);
	return r;
}

static struct cpm_pki_input input(int64_t now)
{
	return (struct cpm_pki_input){ .root = root, .node_name = "master-0",
				       .advertise_address = "10.0.0.5",
				       .service_subnet = "10.222.0.0/16",
				       .dns_domain = "cluster.local",
				       .control_plane_endpoint = "127.0.0.1:6445",
				       .kube_minor = 33, .now = now };
}

static int converge(const struct cpm_pki_input *in, bool dry, struct cpm_report *rep)
{
	cpm_report_release(rep);
	return cpm_pki_converge(in, dry, rep);
}

static struct x509_cert *load(const char *file)
{
	char path[700];
	struct x509_cert *c = NULL;
	snprintf(path, sizeof(path), "%s/etc/kubernetes/pki/%s.crt", root, file);
	char *pem = test_read_file(path, NULL);
	if (pem)
		x509_cert_from_pem(pem, &c, NULL, 0);
	free(pem);
	return c;
}

/* Content and mtime of every leaf file, concatenated. */
static char *snapshot(void)
{
	size_t cap = 1 << 16, len = 0;
	char *out = calloc(1, cap);

	for (int i = 0; out && i < NLEAVES; i++)
		for (int k = 0; k < 2; k++) {
			char path[700];
			struct stat st;
			snprintf(path, sizeof(path), "%s/etc/kubernetes/pki/%s.%s", root,
				 leaf_files[i], k ? "key" : "crt");
			char *c = test_read_file(path, NULL);
			if (stat(path, &st) == 0 && c)
				len += (size_t)snprintf(out + len, cap - len, "%s %lld.%ld %zu\n",
							path, (long long)st.st_mtim.tv_sec,
							st.st_mtim.tv_nsec, strlen(c));
			if (c && len + strlen(c) + 1 < cap) {
				memcpy(out + len, c, strlen(c) + 1);
				len += strlen(c);
			}
			free(c);
		}
	return out;
}

static bool has(char **v, const char *s)
{
	for (; v && *v; v++)
		if (strcmp(*v, s) == 0)
			return true;
	return false;
}

static size_t count(char **v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

TEST(cpm_pki_creates_the_kubeadm_table)
{
	struct cpm_report rep = { 0 };
	int64_t now = (int64_t)time(NULL);
	ASSERT_OK(setup("table"));
	struct cpm_pki_input in = input(0);
	ASSERT_EQ(converge(&in, false, &rep), 1);
	ASSERT_EQ(cpm_report_count(&rep, CPM_STEP_CREATED), NLEAVES);

	_cleanup_x509_cert_ struct x509_cert *ca = load("ca"), *eca = load("etcd/ca"),
					     *fca = load("front-proxy-ca");
	for (int i = 0; i < NLEAVES; i++) {
		_cleanup_x509_cert_ struct x509_cert *c = load(leaf_files[i]);
		struct x509_cert *issuer = strncmp(leaf_files[i], "etcd", 4) == 0 ||
							   strcmp(leaf_files[i], "apiserver-etcd-client") == 0
						   ? eca
					   : strcmp(leaf_files[i], "front-proxy-client") == 0 ? fca
											       : ca;
		char path[700];
		struct stat st;
		int64_t nb, na;
		ASSERT_NOT_NULL(c);
		ASSERT_OK(x509_cert_verify_signed_by(c, issuer, NULL, 0));
		ASSERT_FALSE(x509_cert_is_ca(c));
		ASSERT_OK(x509_cert_validity(c, &nb, &na, NULL, 0));
		ASSERT_LE(na - now, 365 * DAY + 60);
		ASSERT_GE(na - now, 365 * DAY - 60);
		snprintf(path, sizeof(path), "%s/etc/kubernetes/pki/%s.key", root, leaf_files[i]);
		ASSERT_EQ(stat(path, &st), 0);
		ASSERT_EQ(st.st_mode & 07777, 0600);
		snprintf(path, sizeof(path), "%s/etc/kubernetes/pki/%s.crt", root, leaf_files[i]);
		ASSERT_EQ(stat(path, &st), 0);
		ASSERT_EQ(st.st_mode & 07777, 0644);
	}

	_cleanup_x509_cert_ struct x509_cert *api = load("apiserver");
	_cleanup_x509_names_ struct x509_names n = { 0 };
	ASSERT_OK(x509_cert_names(api, &n, NULL, 0));
	ASSERT_STREQ(n.cn, "kube-apiserver");
	ASSERT_NULL(n.orgs);
	ASSERT_EQ(count(n.dns), 5);
	ASSERT_TRUE(has(n.dns, "master-0") && has(n.dns, "kubernetes") &&
		    has(n.dns, "kubernetes.default") && has(n.dns, "kubernetes.default.svc") &&
		    has(n.dns, "kubernetes.default.svc.cluster.local"));
	ASSERT_EQ(count(n.ips), 3);
	ASSERT_TRUE(has(n.ips, "10.222.0.1") && has(n.ips, "10.0.0.5") &&
		    has(n.ips, "127.0.0.1"));

	_cleanup_x509_cert_ struct x509_cert *kc = load("apiserver-kubelet-client");
	_cleanup_x509_names_ struct x509_names kn = { 0 };
	ASSERT_OK(x509_cert_names(kc, &kn, NULL, 0));
	ASSERT_STREQ(kn.cn, "kube-apiserver-kubelet-client");
	ASSERT_EQ(count(kn.orgs), 1);
	ASSERT_STREQ(kn.orgs[0], "kubeadm:cluster-admins");
	ASSERT_NULL(kn.dns);

	_cleanup_x509_cert_ struct x509_cert *es = load("etcd/server");
	_cleanup_x509_names_ struct x509_names en = { 0 };
	ASSERT_OK(x509_cert_names(es, &en, NULL, 0));
	ASSERT_STREQ(en.cn, "master-0");
	ASSERT_EQ(count(en.dns), 2);
	ASSERT_TRUE(has(en.dns, "master-0") && has(en.dns, "localhost"));
	ASSERT_EQ(count(en.ips), 3);
	ASSERT_TRUE(has(en.ips, "10.0.0.5") && has(en.ips, "127.0.0.1") && has(en.ips, "::1"));

	/* a second run changes no file: same bytes, same mtimes */
	char *before = snapshot();
	ASSERT_EQ(converge(&in, false, &rep), 0);
	ASSERT_EQ(cpm_report_count(&rep, CPM_STEP_UNCHANGED), NLEAVES);
	char *after = snapshot();
	ASSERT_STREQ(before, after);
	free(before);
	free(after);
	cpm_report_release(&rep);
}

/* Made as if at now - (365 - days_left) days, then converged at now. */
static void renew_at(const char *name, int64_t days_left, size_t want_updated)
{
	struct cpm_report rep = { 0 };
	int64_t now = (int64_t)time(NULL);
	ASSERT_OK(setup(name));
	struct cpm_pki_input in = input(now - (365 - days_left) * DAY);
	ASSERT_EQ(converge(&in, false, &rep), 1);
	in.now = 0;
	ASSERT_EQ(converge(&in, false, &rep), want_updated ? 1 : 0);
	ASSERT_EQ(cpm_report_count(&rep, CPM_STEP_UPDATED), want_updated);
	ASSERT_EQ(cpm_report_count(&rep, CPM_STEP_UNCHANGED), NLEAVES - want_updated);
	if (want_updated) {
		_cleanup_x509_cert_ struct x509_cert *c = load("etcd/peer");
		int64_t na;
		ASSERT_OK(x509_cert_validity(c, NULL, &na, NULL, 0));
		ASSERT_GE(na - now, 364 * DAY);
	}
	cpm_report_release(&rep);
}

TEST(cpm_pki_renews_with_29_days_left)
{
	renew_at("d29", 29, NLEAVES);
}

TEST(cpm_pki_keeps_with_31_days_left)
{
	renew_at("d31", 31, 0);
}

TEST(cpm_pki_renews_all_expired_without_api_server)
{
	renew_at("expired", -400, NLEAVES);
}

TEST(cpm_pki_san_added_key_deleted_dry_run)
{
	struct cpm_report rep = { 0 };
	static const char *const sans[] = { "api.example.com", "192.0.2.7", NULL };
	char path[700];
	ASSERT_OK(setup("sans"));
	struct cpm_pki_input in = input(0);
	ASSERT_EQ(converge(&in, false, &rep), 1);

	in.apiserver_cert_sans = sans;
	char *before = snapshot();
	ASSERT_EQ(converge(&in, true, &rep), 1); /* dry run: says so, touches nothing */
	ASSERT_EQ(cpm_report_count(&rep, CPM_STEP_WOULD_CHANGE), 1);
	ASSERT_CONTAINS(cpm_report_find(&rep, "pki/apiserver.crt")->detail, "SANs differ");
	char *after = snapshot();
	ASSERT_STREQ(before, after);
	free(before);
	free(after);

	ASSERT_EQ(converge(&in, false, &rep), 1);
	ASSERT_EQ(cpm_report_count(&rep, CPM_STEP_UPDATED), 1);
	ASSERT_EQ(cpm_report_find(&rep, "pki/apiserver.crt")->outcome, CPM_STEP_UPDATED);
	_cleanup_x509_cert_ struct x509_cert *api = load("apiserver");
	_cleanup_x509_names_ struct x509_names n = { 0 };
	ASSERT_OK(x509_cert_names(api, &n, NULL, 0));
	ASSERT_TRUE(has(n.dns, "api.example.com") && has(n.ips, "192.0.2.7"));

	snprintf(path, sizeof(path), "%s/etc/kubernetes/pki/etcd/peer.key", root);
	ASSERT_EQ(unlink(path), 0);
	ASSERT_EQ(converge(&in, false, &rep), 1);
	ASSERT_EQ(cpm_report_count(&rep, CPM_STEP_UPDATED), 1);
	ASSERT_CONTAINS(cpm_report_find(&rep, "pki/etcd/peer.crt")->detail, "key is missing");
	ASSERT_EQ(converge(&in, false, &rep), 0);
	cpm_report_release(&rep);
}

TEST(cpm_pki_refuses_missing_ca_and_bad_input)
{
	struct cpm_report rep = { 0 };
	char path[700];
	ASSERT_OK(setup("noca"));
	snprintf(path, sizeof(path), "%s/etc/kubernetes/pki/etcd/ca.key", root);
	ASSERT_EQ(unlink(path), 0);
	struct cpm_pki_input in = input(0);
	ASSERT_ERR(converge(&in, false, &rep), ENOENT);
	ASSERT_EQ(cpm_report_count(&rep, CPM_STEP_FAILED), 1);
	ASSERT_CONTAINS(rep.steps[rep.n - 1].detail, "d8-pki");
	in.advertise_address = "10.0.0";
	ASSERT_ERR(converge(&in, false, &rep), EINVAL);
	in.advertise_address = "10.0.0.5";
	in.service_subnet = "10.96.0.0";
	ASSERT_OK(setup("badsubnet"));
	in.root = root;
	ASSERT_ERR(converge(&in, false, &rep), EINVAL);
	ASSERT_CONTAINS(rep.steps[rep.n - 1].detail, "service subnet");
	cpm_report_release(&rep);
}

/* Runs argv (no shell) and returns its stdout and stderr (at most 64 KiB; NULL when it cannot
 * start); *status gets the exit status. */
static char *run_capture(const char *const argv[], int *status)
{
	size_t cap = 1 << 16, len = 0;
	char *out = calloc(1, cap);
	int p[2], st = -1;
	pid_t pid;

	if (!out || pipe(p) < 0) {
		free(out);
		return NULL;
	}
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	for (ssize_t n; pid > 0 && len + 1 < cap && (n = read(p[0], out + len, cap - 1 - len)) > 0;)
		len += (size_t)n;
	close(p[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	*status = pid > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

/* Every leaf: `openssl verify` against its CA, and `openssl x509 -text` field by field against
 * tests/data/cpm/kubeadm-certs.tsv (kubeadm's table for this input). */
TEST(cpm_pki_openssl_matches_kubeadm_table)
{
	struct cpm_report rep = { 0 };
	char *tsv = test_read_file("tests/data/cpm/kubeadm-certs.tsv", NULL);
	int rows = 0;
	ASSERT_NOT_NULL(tsv);
	ASSERT_OK(setup("openssl"));
	struct cpm_pki_input in = input(0);
	ASSERT_EQ(converge(&in, false, &rep), 1);
	cpm_report_release(&rep);

	char *save = NULL;
	for (char *line = strtok_r(tsv, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[5], *s2 = NULL, crt[700], ca[700];
		int n = 0, st;
		if (line[0] == '#')
			continue;
		for (char *c = strtok_r(line, "\t", &s2); c && n < 5; c = strtok_r(NULL, "\t", &s2))
			f[n++] = c;
		ASSERT_EQ(n, 5);
		rows++;
		snprintf(crt, sizeof(crt), "%s/etc/kubernetes/pki/%s.crt", root, f[0]);
		snprintf(ca, sizeof(ca), "%s/etc/kubernetes/pki/%s.crt", root, f[1]);
		const char *const verify[] = { "openssl", "verify", "-CAfile", ca, crt, NULL };
		char *out = run_capture(verify, &st);
		ASSERT_NOT_NULL(out);
		if (st == 127) {
			free(out);
			free(tsv);
			TEST_SKIP("no openssl on PATH");
		}
		ASSERT_EQ(st, 0);
		ASSERT_CONTAINS(out, ": OK");
		free(out);

		const char *const text[] = { "openssl", "x509", "-noout", "-text", "-in", crt, NULL };
		out = run_capture(text, &st);
		ASSERT_NOT_NULL(out);
		ASSERT_EQ(st, 0);
		char want[256];
		snprintf(want, sizeof(want), "Subject: %s\n", f[2]);
		ASSERT_CONTAINS(out, want);
		ASSERT_CONTAINS(out, "CA:FALSE");
		ASSERT_CONTAINS(out, "Digital Signature, Key Encipherment"); /* RSA leaf */
		snprintf(want, sizeof(want), "X509v3 Extended Key Usage: \n                %s\n", f[3]);
		ASSERT_CONTAINS(out, want);
		size_t nsans = 0, seen = 0;
		if (strcmp(f[4], "-") != 0) {
			char *s3 = NULL;
			for (char *t = strtok_r(f[4], ",", &s3); t; t = strtok_r(NULL, ",", &s3)) {
				snprintf(want, sizeof(want), "%s", t);
				ASSERT_CONTAINS(out, want);
				nsans++;
			}
		}
		for (const char *p = out; (p = strstr(p, "DNS:")); p += 4)
			seen++;
		for (const char *p = out; (p = strstr(p, "IP Address:")); p += 11)
			seen++;
		ASSERT_EQ(seen, nsans);
		free(out);
	}
	ASSERT_EQ(rows, NLEAVES);
	free(tsv);
}
