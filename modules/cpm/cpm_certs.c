/* `aws-k8s cpm certs check-expiration|renew`: kubeadm's `certs` commands on the files under
 * ROOT/etc/kubernetes, without a cluster (cpm.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/fileutil.h"
#include "common/x509/x509.h"
#include "modules/cpm/cpm_int.h"

/* kubeadm's list (certs/renewal: the names `certs renew` takes), in its order. */
static const struct cert_item {
	const char *name;
	const char *file; /* under pki/; NULL: name is a kubeconfig */
	const char *ca;
	const char *what; /* kubeadm's words for it */
} items[] = {
	{ "admin.conf", NULL, "ca",
	  "certificate embedded in the kubeconfig file for the admin to use and for kubeadm itself" },
	{ "apiserver", "apiserver", "ca", "certificate for serving the Kubernetes API" },
	{ "apiserver-etcd-client", "apiserver-etcd-client", "etcd-ca",
	  "certificate the apiserver uses to access etcd" },
	{ "apiserver-kubelet-client", "apiserver-kubelet-client", "ca",
	  "certificate for the API server to connect to kubelet" },
	{ "controller-manager.conf", NULL, "ca",
	  "certificate embedded in the kubeconfig file for the controller manager to use" },
	{ "etcd-healthcheck-client", "etcd/healthcheck-client", "etcd-ca",
	  "certificate for liveness probes to healthcheck etcd" },
	{ "etcd-peer", "etcd/peer", "etcd-ca",
	  "certificate for etcd nodes to communicate with each other" },
	{ "etcd-server", "etcd/server", "etcd-ca", "certificate for serving etcd" },
	{ "front-proxy-client", "front-proxy-client", "front-proxy-ca",
	  "certificate for the front proxy client" },
	{ "scheduler.conf", NULL, "ca",
	  "certificate embedded in the kubeconfig file for the scheduler manager to use" },
	{ "super-admin.conf", NULL, "ca",
	  "certificate embedded in the kubeconfig file for the super-admin" },
};

static const struct {
	const char *name, *file;
} cas[] = { { "ca", "ca" }, { "etcd-ca", "etcd/ca" }, { "front-proxy-ca", "front-proxy-ca" } };

#define NITEMS (sizeof(items) / sizeof(items[0]))

static int load_pki_cert(const struct cpm_pki_input *in, const char *file, struct x509_cert **ret)
{
	char abs[256], path[4096], *pem = NULL;
	int r;

	snprintf(abs, sizeof(abs), "/etc/kubernetes/pki/%s.crt", file);
	r = cpm_path(in->root, abs, path, sizeof(path));
	if (r >= 0)
		r = file_read_all(path, (size_t)256 * 1024, &pem, NULL);
	if (r >= 0)
		r = x509_cert_from_pem(pem, ret, NULL, 0);
	free(pem);
	return r;
}

/* apimachinery's duration.ShortHumanDuration, as kubeadm prints the residual time. */
static void short_duration(int64_t s, char *out, size_t n)
{
	if (s < -1)
		snprintf(out, n, "<invalid>");
	else if (s < 0)
		snprintf(out, n, "0s");
	else if (s < 60)
		snprintf(out, n, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(out, n, "%lldm", (long long)(s / 60));
	else if (s < 86400)
		snprintf(out, n, "%lldh", (long long)(s / 3600));
	else if (s < 365 * 86400)
		snprintf(out, n, "%lldd", (long long)(s / 86400));
	else
		snprintf(out, n, "%lldy", (long long)(s / (365 * 86400)));
}

#define COLS 5
#define CELL 96

/* Go's tabwriter as kubeadm sets it up (minwidth 10, padding 3): every column but the last
 * padded to its widest cell + 3. */
static void print_table(char (*cells)[COLS][CELL], size_t rows, int cols)
{
	size_t w[COLS] = { 0 };

	for (size_t r = 0; r < rows; r++)
		for (int c = 0; c < cols - 1; c++) {
			size_t l = strlen(cells[r][c]) + 3;
			w[c] = l > w[c] ? l : w[c];
		}
	for (int c = 0; c < cols - 1; c++)
		w[c] = w[c] < 10 ? 10 : w[c];
	for (size_t r = 0; r < rows; r++) {
		int last = cols - 1;
		while (last > 0 && !cells[r][last][0]) /* a !MISSING! row: no padding after it */
			last--;
		for (int c = 0; c < last; c++)
			printf("%-*s", (int)w[c], cells[r][c]);
		printf("%s\n", cells[r][last]);
	}
}

static void expiry_cells(const struct x509_cert *c, int64_t now, char *expires, char *residual)
{
	int64_t na = 0;
	struct tm tm;

	x509_cert_validity(c, NULL, &na, NULL, 0);
	time_t t = (time_t)na;
	gmtime_r(&t, &tm);
	strftime(expires, CELL, "%b %d, %Y %H:%M UTC", &tm);
	short_duration(na - now, residual, CELL);
}

static int check_expiration(const struct cpm_pki_input *in)
{
	char (*cells)[COLS][CELL] = calloc(NITEMS + 1, sizeof(*cells));
	int64_t now = in->now > 0 ? in->now : (int64_t)time(NULL);
	size_t rows = 0;
	int missing = 0;

	if (!cells)
		return -ENOMEM;
	snprintf(cells[rows][0], CELL, "CERTIFICATE");
	snprintf(cells[rows][1], CELL, "EXPIRES");
	snprintf(cells[rows][2], CELL, "RESIDUAL TIME");
	snprintf(cells[rows][3], CELL, "CERTIFICATE AUTHORITY");
	snprintf(cells[rows++][4], CELL, "EXTERNALLY MANAGED");
	for (size_t i = 0; i < NITEMS; i++) {
		struct x509_cert *c = NULL;
		int r = items[i].file ? load_pki_cert(in, items[i].file, &c)
				      : cpm_kubeconfig_cert(in, items[i].name, &c);
		if (r < 0 || !c) {
			/* kubeadm marks a certificate it cannot find */
			snprintf(cells[rows++][0], CELL, "!MISSING! %s", items[i].name);
			missing++;
			continue;
		}
		snprintf(cells[rows][0], CELL, "%s", items[i].name);
		expiry_cells(c, now, cells[rows][1], cells[rows][2]);
		snprintf(cells[rows][3], CELL, "%-8s", items[i].ca);
		snprintf(cells[rows++][4], CELL, "no");
		x509_cert_free(c);
	}
	print_table(cells, rows, 5);
	printf("\n");
	rows = 0;
	snprintf(cells[rows][0], CELL, "CERTIFICATE AUTHORITY");
	snprintf(cells[rows][1], CELL, "EXPIRES");
	snprintf(cells[rows][2], CELL, "RESIDUAL TIME");
	snprintf(cells[rows++][3], CELL, "EXTERNALLY MANAGED");
	for (size_t i = 0; i < sizeof(cas) / sizeof(cas[0]); i++) {
		struct x509_cert *c = NULL;
		if (load_pki_cert(in, cas[i].file, &c) < 0) {
			snprintf(cells[rows++][0], CELL, "!MISSING! %s", cas[i].name);
			missing++;
			continue;
		}
		snprintf(cells[rows][0], CELL, "%s", cas[i].name);
		expiry_cells(c, now, cells[rows][1], cells[rows][2]);
		snprintf(cells[rows++][3], CELL, "no");
		x509_cert_free(c);
	}
	print_table(cells, rows, 4);
	free(cells);
	return missing;
}

static int renew_one(const struct cpm_pki_input *in, const struct cert_item *it, bool all)
{
	char err[512] = "";
	int r = it->file ? cpm_pki_renew(in, it->file, err, sizeof(err))
			 : cpm_kubeconfig_renew(in, it->name, err, sizeof(err));

	if (r == -ENOENT && all) {
		printf("MISSING! %s\n", it->what);
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, "aws-k8s cpm certs renew: %s: %s\n", it->name,
			err[0] ? err : strerror(-r));
		return r;
	}
	printf("%s renewed\n", it->what);
	return 1;
}

int cpm_certs_run(const struct cpm_pki_input *in, int argc, char **argv)
{
	int r = 0, n = 0;

	if (argc < 1) {
		fprintf(stderr, "aws-k8s cpm certs: a subcommand is needed: check-expiration or "
				"renew <name|all> (see 'aws-k8s cpm --help')\n");
		return 2;
	}
	if (strcmp(argv[0], "check-expiration") == 0) {
		if (argc != 1) {
			fprintf(stderr, "aws-k8s cpm certs check-expiration: unexpected argument "
					"'%s'\n", argv[1]);
			return 2;
		}
		r = check_expiration(in);
		return r < 0 ? 1 : 0;
	}
	if (strcmp(argv[0], "renew") != 0) {
		fprintf(stderr, "aws-k8s cpm certs: unknown subcommand '%s' (check-expiration, "
				"renew)\n", argv[0]);
		return 2;
	}
	if (argc != 2) {
		fprintf(stderr, "aws-k8s cpm certs renew: one name is needed: all, or one of "
				"admin.conf, apiserver, apiserver-etcd-client, apiserver-kubelet-client, "
				"controller-manager.conf, etcd-healthcheck-client, etcd-peer, "
				"etcd-server, front-proxy-client, scheduler.conf, super-admin.conf\n");
		return 2;
	}
	bool all = strcmp(argv[1], "all") == 0;
	for (size_t i = 0; i < NITEMS && r >= 0; i++)
		if (all || strcmp(argv[1], items[i].name) == 0) {
			r = renew_one(in, &items[i], all);
			n++;
		}
	if (n == 0) {
		fprintf(stderr, "aws-k8s cpm certs renew: unknown certificate '%s' (all, "
				"admin.conf, apiserver, ...: see 'aws-k8s cpm --help')\n",
			argv[1]);
		return 2;
	}
	if (r < 0)
		return 1;
	printf("\nDone renewing certificates. You must restart the kube-apiserver, "
	       "kube-controller-manager, kube-scheduler and etcd, so that they can use the new "
	       "certificates.\n");
	return 0;
}
