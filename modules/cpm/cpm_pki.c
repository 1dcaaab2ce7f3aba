/* The kubeadm leaf certificates under ROOT/etc/kubernetes/pki, converged on Deckhouse's rules
 * (cpm_pki.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/base/fileutil.h"
#include "common/base/secret.h"
#include "common/x509/x509.h"
#include "modules/cpm/cpm_files.h"
#include "modules/cpm/cpm_pki.h"

#define PKI_FILE_MAX ((size_t)256 * 1024)
#define SANS_MAX 64

enum ca_id { CA_MAIN, CA_FRONT_PROXY, CA_ETCD, CA_COUNT };
static const char *const ca_files[CA_COUNT] = { "ca", "front-proxy-ca", "etcd/ca" };

enum san_kind { SAN_NONE, SAN_APISERVER, SAN_ETCD_SERVER, SAN_ETCD_PEER };
enum org_kind { ORG_NONE, ORG_CLUSTER_ADMINS };

struct leaf {
	const char *file; /* under pki/, without .crt/.key */
	enum ca_id ca;
	const char *cn; /* NULL: the node name */
	enum org_kind org;
	unsigned usages;
	enum san_kind sans;
};

/* kubeadm's certificate table (certs/certlist.go), leaves only. */
static const struct leaf leaves[] = {
	{ "apiserver", CA_MAIN, "kube-apiserver", ORG_NONE, X509_USAGE_SERVER, SAN_APISERVER },
	{ "apiserver-kubelet-client", CA_MAIN, "kube-apiserver-kubelet-client", ORG_CLUSTER_ADMINS,
	  X509_USAGE_CLIENT, SAN_NONE },
	{ "front-proxy-client", CA_FRONT_PROXY, "front-proxy-client", ORG_NONE, X509_USAGE_CLIENT,
	  SAN_NONE },
	{ "etcd/server", CA_ETCD, NULL, ORG_NONE, X509_USAGE_SERVER | X509_USAGE_CLIENT,
	  SAN_ETCD_SERVER },
	{ "etcd/peer", CA_ETCD, NULL, ORG_NONE, X509_USAGE_SERVER | X509_USAGE_CLIENT,
	  SAN_ETCD_PEER },
	{ "etcd/healthcheck-client", CA_ETCD, "kube-etcd-healthcheck-client", ORG_NONE,
	  X509_USAGE_CLIENT, SAN_NONE },
	{ "apiserver-etcd-client", CA_ETCD, "kube-apiserver-etcd-client", ORG_NONE,
	  X509_USAGE_CLIENT, SAN_NONE },
};

struct ca_pair {
	struct x509_cert *crt;
	struct x509_key *key;
};

/* A certificate's wanted names: strings point into buf or the input. */
struct want {
	const char *cn;
	const char *orgs[2];
	const char *dns[SANS_MAX + 1];
	const char *ips[SANS_MAX + 1];
	size_t ndns, nips;
	char ipbuf[SANS_MAX][INET6_ADDRSTRLEN];
};

static const char *root_of(const struct cpm_pki_input *in)
{
	return in->root && in->root[0] && strcmp(in->root, "/") != 0 ? in->root : "";
}

static int pki_path(const struct cpm_pki_input *in, const char *file, const char *ext, char *buf,
		    size_t n)
{
	int w = snprintf(buf, n, "%s/etc/kubernetes/pki/%s%s", root_of(in), file, ext);
	return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

/* Canonical text of an IP, or -EINVAL. */
static int ip_canon(const char *s, char *out, size_t n)
{
	unsigned char a[16];

	if (inet_pton(AF_INET, s, a) == 1)
		return inet_ntop(AF_INET, a, out, (socklen_t)n) ? 0 : -EINVAL;
	if (inet_pton(AF_INET6, s, a) == 1)
		return inet_ntop(AF_INET6, a, out, (socklen_t)n) ? 0 : -EINVAL;
	return -EINVAL;
}

/* The first address of a CIDR (its network address + 1), kubeadm's apiserver virtual IP. */
static int subnet_first_ip(const char *cidr, char *out, size_t n)
{
	char net[INET6_ADDRSTRLEN + 8];
	unsigned char a[16];
	const char *comma = strchr(cidr, ',');
	size_t len = comma ? (size_t)(comma - cidr) : strlen(cidr);
	char *slash;
	long bits;
	int af, alen;

	if (len >= sizeof(net))
		return -EINVAL;
	memcpy(net, cidr, len);
	net[len] = 0;
	slash = strchr(net, '/');
	if (!slash)
		return -EINVAL;
	*slash = 0;
	errno = 0;
	bits = strtol(slash + 1, NULL, 10);
	af = strchr(net, ':') ? AF_INET6 : AF_INET;
	alen = af == AF_INET6 ? 16 : 4;
	if (errno || bits < 0 || bits >= alen * 8 || inet_pton(af, net, a) != 1)
		return -EINVAL;
	for (int i = 0; i < alen; i++) { /* mask to the network */
		int keep = (int)bits - i * 8;
		a[i] &= keep >= 8 ? 0xff : keep <= 0 ? 0 : (unsigned char)(0xff << (8 - keep));
	}
	for (int i = alen - 1; i >= 0 && ++a[i] == 0; i--)
		;
	return inet_ntop(af, a, out, (socklen_t)n) ? 0 : -EINVAL;
}

static int want_add(struct want *w, const char *name)
{
	char ip[INET6_ADDRSTRLEN];

	if (!name || !name[0])
		return 0;
	if (ip_canon(name, ip, sizeof(ip)) == 0) {
		for (size_t i = 0; i < w->nips; i++)
			if (strcmp(w->ips[i], ip) == 0)
				return 0;
		if (w->nips >= SANS_MAX)
			return -E2BIG;
		memcpy(w->ipbuf[w->nips], ip, sizeof(ip));
		w->ips[w->nips] = w->ipbuf[w->nips];
		w->nips++;
		return 0;
	}
	for (size_t i = 0; i < w->ndns; i++)
		if (strcmp(w->dns[i], name) == 0)
			return 0;
	if (w->ndns >= SANS_MAX)
		return -E2BIG;
	w->dns[w->ndns++] = name;
	return 0;
}

static int want_add_list(struct want *w, const char *const *v)
{
	int r = 0;

	for (; v && *v && r >= 0; v++)
		r = want_add(w, *v);
	return r;
}

static int endpoint_host(const char *ep, char *out, size_t n)
{
	const char *colon;
	size_t len;

	if (ep[0] == '[') { /* [v6]:port */
		colon = strchr(ep, ']');
		if (!colon)
			return -EINVAL;
		len = (size_t)(colon - ep - 1);
		ep++;
	} else {
		colon = strrchr(ep, ':');
		len = colon && strchr(ep, ':') == colon ? (size_t)(colon - ep) : strlen(ep);
	}
	if (len == 0 || len >= n)
		return -EINVAL;
	memcpy(out, ep, len);
	out[len] = 0;
	return 0;
}

static int want_build(const struct cpm_pki_input *in, const struct leaf *l, struct want *w,
		      char *scratch, size_t scratch_len, char *err, size_t errlen)
{
	const char *domain = in->dns_domain && in->dns_domain[0] ? in->dns_domain : "cluster.local";
	char vip[INET6_ADDRSTRLEN], host[256];
	int r = 0;

	memset(w, 0, sizeof(*w));
	w->cn = l->cn ? l->cn : in->node_name;
	if (l->org == ORG_CLUSTER_ADMINS)
		w->orgs[0] = (in->kube_minor ? in->kube_minor : 33) >= 29 ? "kubeadm:cluster-admins"
									   : "system:masters";
	switch (l->sans) {
	case SAN_NONE:
		break;
	case SAN_APISERVER:
		r = subnet_first_ip(in->service_subnet && in->service_subnet[0] ? in->service_subnet
										 : "10.96.0.0/12",
				    vip, sizeof(vip));
		if (r < 0) {
			snprintf(err, errlen, "bad service subnet \"%s\"", in->service_subnet);
			return r;
		}
		snprintf(scratch, scratch_len, "kubernetes.default.svc.%s", domain);
		want_add(w, in->node_name);
		want_add(w, "kubernetes");
		want_add(w, "kubernetes.default");
		want_add(w, "kubernetes.default.svc");
		want_add(w, scratch);
		want_add(w, vip);
		want_add(w, in->advertise_address);
		if (in->control_plane_endpoint && in->control_plane_endpoint[0]) {
			if (endpoint_host(in->control_plane_endpoint, host, sizeof(host)) < 0) {
				snprintf(err, errlen, "bad control-plane endpoint \"%s\"",
					 in->control_plane_endpoint);
				return -EINVAL;
			}
			/* a DNS name must outlive host: keep it in scratch after the domain name */
			size_t used = strlen(scratch) + 1;
			if (used + strlen(host) + 1 > scratch_len)
				return -ENAMETOOLONG;
			memcpy(scratch + used, host, strlen(host) + 1);
			want_add(w, scratch + used);
		}
		r = want_add_list(w, in->apiserver_cert_sans);
		break;
	case SAN_ETCD_SERVER:
	case SAN_ETCD_PEER:
		want_add(w, in->node_name);
		want_add(w, "localhost");
		want_add(w, in->advertise_address);
		want_add(w, "127.0.0.1");
		want_add(w, "::1");
		r = want_add_list(w, l->sans == SAN_ETCD_SERVER ? in->etcd_server_cert_sans
								: in->etcd_peer_cert_sans);
		break;
	}
	if (r < 0)
		snprintf(err, errlen, "more than %d SANs", SANS_MAX);
	return r;
}

static bool same_set(char **have, const char *const *want, size_t nwant)
{
	size_t nhave = 0;

	for (; have && have[nhave]; nhave++) {
		bool found = false;
		for (size_t j = 0; j < nwant && !found; j++)
			found = strcmp(have[nhave], want[j]) == 0;
		if (!found)
			return false;
	}
	return nhave == nwant; /* no duplicates in want, so equal counts mean equal sets */
}

/* NULL when the certificate holds exactly the wanted names, else why not. */
static const char *names_differ(const struct x509_cert *c, const struct want *w)
{
	_cleanup_x509_names_ struct x509_names n = { 0 };
	char err[64];

	if (x509_cert_names(c, &n, err, sizeof(err)) < 0)
		return "its names cannot be read";
	if (!n.cn || strcmp(n.cn, w->cn) != 0)
		return "its CN differs";
	if (!same_set(n.orgs, w->orgs, w->orgs[0] ? 1 : 0))
		return "its organisation differs";
	if (!same_set(n.dns, w->dns, w->ndns))
		return "its DNS SANs differ";
	if (!same_set(n.ips, w->ips, w->nips))
		return "its IP SANs differ";
	return NULL;
}

static int read_pem(const char *path, char **ret)
{
	return file_read_all(path, PKI_FILE_MAX, ret, NULL);
}

static int ca_load(const struct cpm_pki_input *in, enum ca_id id, struct ca_pair *ca, char *err,
		   size_t errlen)
{
	char path[4096], e[200];
	char *pem = NULL;
	int r;

	r = pki_path(in, ca_files[id], ".crt", path, sizeof(path));
	if (r >= 0)
		r = read_pem(path, &pem);
	if (r >= 0)
		r = x509_cert_from_pem(pem, &ca->crt, e, sizeof(e));
	free(pem);
	pem = NULL;
	if (r < 0)
		goto fail;
	r = pki_path(in, ca_files[id], ".key", path, sizeof(path));
	if (r >= 0)
		r = read_pem(path, &pem);
	if (r >= 0)
		r = x509_key_from_pem(pem, &ca->key, e, sizeof(e));
	secret_free(pem);
	if (r >= 0)
		r = x509_cert_key_match(ca->crt, ca->key, e, sizeof(e));
	if (r >= 0 && !x509_cert_is_ca(ca->crt)) {
		snprintf(e, sizeof(e), "not a CA certificate");
		r = -EINVAL;
	}
	if (r >= 0)
		return 0;
fail:
	if (r == -ENOENT)
		snprintf(e, sizeof(e), "missing (the CAs are inputs: install them from d8-pki)");
	else if (r < 0 && !e[0])
		snprintf(e, sizeof(e), "%s", strerror(-r));
	snprintf(err, errlen, "%.300s: %s", path, e);
	return r;
}

/* NULL when the leaf on disk is fine, else why it must be (re)made; *missing when it is not
 * there at all. */
static const char *leaf_check(const struct cpm_pki_input *in, const struct leaf *l,
			      const struct ca_pair *ca, const struct want *w, int64_t now,
			      bool *missing, char *why, size_t whylen)
{
	_cleanup_x509_cert_ struct x509_cert *crt = NULL;
	_cleanup_x509_key_ struct x509_key *key = NULL;
	char path[4096], e[128];
	char *pem = NULL;
	const char *d;
	int64_t not_after = 0;
	int r, t;

	*missing = false;
	if (pki_path(in, l->file, ".crt", path, sizeof(path)) < 0)
		return "the path is too long";
	r = read_pem(path, &pem);
	if (r == -ENOENT) {
		*missing = true;
		return "missing";
	}
	if (r >= 0)
		r = x509_cert_from_pem(pem, &crt, e, sizeof(e));
	free(pem);
	pem = NULL;
	if (r < 0)
		return "the certificate cannot be read";
	if (pki_path(in, l->file, ".key", path, sizeof(path)) < 0)
		return "the path is too long";
	r = read_pem(path, &pem);
	if (r == -ENOENT)
		return "its key is missing";
	if (r >= 0)
		r = x509_key_from_pem(pem, &key, e, sizeof(e));
	secret_free(pem);
	if (r < 0)
		return "its key cannot be read";
	if (x509_cert_key_match(crt, key, e, sizeof(e)) < 0)
		return "its key does not match";
	if (x509_cert_verify_signed_by(crt, ca->crt, e, sizeof(e)) < 0)
		return "it was not issued by the current CA";
	d = names_differ(crt, w);
	if (d)
		return d;
	t = x509_cert_check_time(crt, now, CPM_RENEW_BEFORE_S);
	if (t == X509_TIME_VALID)
		return NULL;
	x509_cert_validity(crt, NULL, &not_after, e, sizeof(e));
	if (t == X509_TIME_EXPIRED)
		snprintf(why, whylen, "expired %lld days ago",
			 (long long)((now - not_after) / 86400));
	else if (t == X509_TIME_EXPIRES_SOON)
		snprintf(why, whylen, "expires in %lld days (< 30)",
			 (long long)((not_after - now) / 86400));
	else
		snprintf(why, whylen, "%s", x509_time_name(t));
	return why;
}

int cpm_key_new(enum cpm_key_algo algo, struct x509_key **ret, char *err, size_t errlen)
{
	switch (algo) {
	case CPM_KEY_ECDSA_P256:
		return x509_key_new_ec(ret, err, errlen);
	case CPM_KEY_RSA3072:
		return x509_key_new_rsa(3072, ret, err, errlen);
	case CPM_KEY_RSA4096:
		return x509_key_new_rsa(4096, ret, err, errlen);
	case CPM_KEY_RSA2048:
		break;
	}
	return x509_key_new_rsa(2048, ret, err, errlen);
}

/* Writes key (0600) then certificate (0644) under pki/. */
static int cpm_pki_write_pair(const struct cpm_pki_input *in, const char *file,
		       const struct x509_cert *crt, const struct x509_key *key, char *err,
		       size_t errlen)
{
	_cleanup_secret_ char *kpem = NULL;
	char path[4096], *cpem = NULL;
	int r;

	r = x509_key_to_pem(key, &kpem, err, errlen);
	if (r >= 0)
		r = x509_cert_to_pem(crt, &cpem, err, errlen);
	if (r >= 0)
		r = pki_path(in, file, ".key", path, sizeof(path));
	if (r >= 0)
		r = cpm_mkdirs_for(path);
	if (r >= 0)
		r = file_write_atomic(path, kpem, strlen(kpem), FILE_MODE_SECRET);
	if (r >= 0)
		r = pki_path(in, file, ".crt", path, sizeof(path));
	if (r >= 0)
		r = file_write_atomic(path, cpem, strlen(cpem), 0644);
	if (r < 0 && err && !err[0])
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(-r));
	free(cpem);
	return r;
}

static int leaf_make(const struct cpm_pki_input *in, const struct leaf *l, const struct ca_pair *ca,
		     const struct want *w, int64_t now, char *err, size_t errlen)
{
	_cleanup_x509_cert_ struct x509_cert *crt = NULL;
	_cleanup_x509_key_ struct x509_key *key = NULL;
	struct x509_spec s = {
		.cn = w->cn,
		.orgs = w->orgs[0] ? w->orgs : NULL,
		.dns = w->ndns ? w->dns : NULL,
		.ips = w->nips ? w->ips : NULL,
		.usages = l->usages,
		.start = now,
		.duration_s = in->cert_validity_s > 0 ? in->cert_validity_s
						      : CPM_DEFAULT_CERT_VALIDITY_S,
		.backdate_s = CPM_CERT_BACKDATE_S,
	};
	int r = cpm_key_new(in->algo, &key, err, errlen);

	if (r >= 0)
		r = x509_cert_signed(&s, key, ca->crt, ca->key, &crt, err, errlen);
	if (r >= 0)
		r = cpm_pki_write_pair(in, l->file, crt, key, err, errlen);
	return r;
}

static int cpm_pki_input_check(const struct cpm_pki_input *in, char *err, size_t errlen)
{
	char ip[INET6_ADDRSTRLEN];

	if (!in || !in->node_name || !in->node_name[0]) {
		snprintf(err, errlen, "the node name is missing");
		return -EINVAL;
	}
	if (!in->advertise_address || ip_canon(in->advertise_address, ip, sizeof(ip)) < 0) {
		snprintf(err, errlen, "the advertise address \"%s\" is not an IP",
			 in && in->advertise_address ? in->advertise_address : "");
		return -EINVAL;
	}
	return 0;
}

static void cas_free(struct ca_pair *cas)
{
	for (int i = 0; i < CA_COUNT; i++) {
		x509_cert_free(cas[i].crt);
		x509_key_free(cas[i].key);
	}
}

/* sa.key / sa.pub: made when both are missing, sa.pub rewritten from sa.key when it is missing
 * or does not match. Returns 0 unchanged, 1 changed (or would), -errno. */
int cpm_sa_converge(const struct cpm_pki_input *in, bool dry_run, struct cpm_report *rep)
{
	_cleanup_x509_key_ struct x509_key *key = NULL, *pub = NULL;
	_cleanup_secret_ char *kpem = NULL;
	char kpath[4096], ppath[4096], err[300] = "", *ppem = NULL, *have = NULL;
	int64_t t0 = cpm_report_clock_ms();
	const char *why = NULL;
	bool created = false;
	int r;

	if (pki_path(in, "sa", ".key", kpath, sizeof(kpath)) < 0 ||
	    pki_path(in, "sa", ".pub", ppath, sizeof(ppath)) < 0)
		return -ENAMETOOLONG;
	r = read_pem(kpath, &kpem);
	if (r == -ENOENT) {
		if (access(ppath, F_OK) == 0) {
			cpm_report_add(rep, "pki/sa.key", CPM_STEP_FAILED, cpm_report_clock_ms() - t0,
				       "%s is missing while sa.pub is there (install both from d8-pki)",
				       kpath);
			return -ENOENT;
		}
		if (dry_run) {
			cpm_report_add(rep, "pki/sa.key", CPM_STEP_WOULD_CHANGE,
				       cpm_report_clock_ms() - t0, "would create: missing");
			return 1;
		}
		r = cpm_key_new(in->algo, &key, err, sizeof(err));
		if (r >= 0)
			r = x509_key_to_pem(key, &kpem, err, sizeof(err));
		if (r >= 0)
			r = cpm_mkdirs_for(kpath);
		if (r >= 0)
			r = file_write_atomic(kpath, kpem, strlen(kpem), FILE_MODE_SECRET);
		if (r < 0) {
			cpm_report_add(rep, "pki/sa.key", CPM_STEP_FAILED, cpm_report_clock_ms() - t0,
				       "%s", err[0] ? err : strerror(-r));
			return r;
		}
		created = true;
		cpm_report_add(rep, "pki/sa.key", CPM_STEP_CREATED, cpm_report_clock_ms() - t0,
			       "missing");
	} else {
		if (r >= 0)
			r = x509_key_from_pem(kpem, &key, err, sizeof(err));
		if (r < 0) {
			cpm_report_add(rep, "pki/sa.key", CPM_STEP_FAILED, cpm_report_clock_ms() - t0,
				       "%s: %s", kpath, err[0] ? err : strerror(-r));
			return r;
		}
		cpm_report_add(rep, "pki/sa.key", CPM_STEP_UNCHANGED, cpm_report_clock_ms() - t0,
			       NULL);
	}
	t0 = cpm_report_clock_ms();
	r = read_pem(ppath, &have);
	if (r == -ENOENT)
		why = "missing";
	else if (r < 0 || x509_key_from_public_pem(have, &pub, err, sizeof(err)) < 0)
		why = "it cannot be read";
	else if (!x509_key_same_public(key, pub))
		why = "it does not match sa.key";
	free(have);
	if (!why) {
		cpm_report_add(rep, "pki/sa.pub", CPM_STEP_UNCHANGED, cpm_report_clock_ms() - t0, NULL);
		return created ? 1 : 0;
	}
	if (dry_run) {
		cpm_report_add(rep, "pki/sa.pub", CPM_STEP_WOULD_CHANGE, cpm_report_clock_ms() - t0,
			       "would write: %s", why);
		return 1;
	}
	r = x509_key_public_to_pem(key, &ppem, err, sizeof(err));
	if (r >= 0)
		r = file_write_atomic(ppath, ppem, strlen(ppem), 0644);
	free(ppem);
	cpm_report_add(rep, "pki/sa.pub",
		       r < 0 ? CPM_STEP_FAILED : created || strcmp(why, "missing") == 0
						 ? CPM_STEP_CREATED
						 : CPM_STEP_UPDATED,
		       cpm_report_clock_ms() - t0, "%s", r < 0 ? (err[0] ? err : strerror(-r)) : why);
	return r < 0 ? r : 1;
}

int cpm_ca_load(const struct cpm_pki_input *in, const char *name, struct x509_cert **ret_crt,
		struct x509_key **ret_key, char *err, size_t errlen)
{
	struct ca_pair ca = { 0 };
	int r = -EINVAL;

	for (int i = 0; i < CA_COUNT; i++)
		if (strcmp(ca_files[i], name) == 0) {
			r = ca_load(in, (enum ca_id)i, &ca, err, errlen);
			break;
		}
	if (r < 0) {
		x509_cert_free(ca.crt);
		x509_key_free(ca.key);
		if (r == -EINVAL && !err[0])
			snprintf(err, errlen, "\"%s\" is not a CA of the table", name);
		return r;
	}
	*ret_crt = ca.crt;
	*ret_key = ca.key;
	return 0;
}

int cpm_pki_renew(const struct cpm_pki_input *in, const char *file, char *err, size_t errlen)
{
	_cleanup_x509_cert_ struct x509_cert *old = NULL;
	_cleanup_x509_names_ struct x509_names n = { 0 };
	struct ca_pair ca = { 0 };
	const struct leaf *l = NULL;
	struct want *w = NULL;
	char path[4096], *pem = NULL;
	int r;

	for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++)
		if (strcmp(leaves[i].file, file) == 0)
			l = &leaves[i];
	if (!l) {
		snprintf(err, errlen, "\"%s\" is not a certificate of the table", file);
		return -EINVAL;
	}
	r = pki_path(in, file, ".crt", path, sizeof(path));
	if (r >= 0)
		r = read_pem(path, &pem);
	if (r >= 0)
		r = x509_cert_from_pem(pem, &old, err, errlen);
	if (r >= 0)
		r = x509_cert_names(old, &n, err, errlen);
	free(pem);
	if (r < 0) {
		char e[256];
		snprintf(e, sizeof(e), "%s", err[0] ? err : strerror(-r));
		snprintf(err, errlen, "cannot read %s: %s", path, e);
		return r;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	/* kubeadm's renewal keeps the names of the certificate on disk */
	w->cn = n.cn;
	for (size_t i = 0; n.orgs && n.orgs[i] && i < 1; i++)
		w->orgs[i] = n.orgs[i];
	for (size_t i = 0; n.dns && n.dns[i] && w->ndns < SANS_MAX; i++)
		w->dns[w->ndns++] = n.dns[i];
	for (size_t i = 0; n.ips && n.ips[i] && w->nips < SANS_MAX; i++)
		w->ips[w->nips++] = n.ips[i];
	r = ca_load(in, l->ca, &ca, err, errlen);
	if (r >= 0)
		r = leaf_make(in, l, &ca, w, in->now > 0 ? in->now : (int64_t)time(NULL), err,
			      errlen);
	x509_cert_free(ca.crt);
	x509_key_free(ca.key);
	free(w);
	return r;
}

int cpm_pki_converge(const struct cpm_pki_input *in, bool dry_run, struct cpm_report *rep)
{
	struct ca_pair cas[CA_COUNT] = { 0 };
	int64_t now = in && in->now > 0 ? in->now : (int64_t)time(NULL);
	char err[512] = "", why[96], scratch[512], name[128];
	struct want *w = malloc(sizeof(*w));
	int r, changed = 0;

	if (!w)
		return -ENOMEM;
	r = cpm_pki_input_check(in, err, sizeof(err));
	if (r < 0) {
		cpm_report_add(rep, "pki", CPM_STEP_FAILED, 0, "%s", err);
		goto out;
	}
	for (int i = 0; i < CA_COUNT; i++) {
		int64_t t0 = cpm_report_clock_ms();
		snprintf(name, sizeof(name), "pki/%s.crt", ca_files[i]);
		r = ca_load(in, (enum ca_id)i, &cas[i], err, sizeof(err));
		if (r < 0) {
			cpm_report_add(rep, name, CPM_STEP_FAILED, cpm_report_clock_ms() - t0, "%s",
				       err);
			goto out;
		}
	}
	for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++) {
		const struct leaf *l = &leaves[i];
		int64_t t0 = cpm_report_clock_ms();
		const char *d;
		bool missing;

		snprintf(name, sizeof(name), "pki/%s.crt", l->file);
		r = want_build(in, l, w, scratch, sizeof(scratch), err, sizeof(err));
		if (r < 0) {
			cpm_report_add(rep, name, CPM_STEP_FAILED, 0, "%s", err);
			goto out;
		}
		d = leaf_check(in, l, &cas[l->ca], w, now, &missing, why, sizeof(why));
		if (!d) {
			cpm_report_add(rep, name, CPM_STEP_UNCHANGED, cpm_report_clock_ms() - t0, NULL);
			continue;
		}
		changed = 1;
		if (dry_run) {
			cpm_report_add(rep, name, CPM_STEP_WOULD_CHANGE, cpm_report_clock_ms() - t0,
				       "would %s: %s", missing ? "create" : "renew", d);
			continue;
		}
		r = leaf_make(in, l, &cas[l->ca], w, now, err, sizeof(err));
		cpm_report_add(rep, name, r < 0 ? CPM_STEP_FAILED : missing ? CPM_STEP_CREATED
									   : CPM_STEP_UPDATED,
			       cpm_report_clock_ms() - t0, "%s", r < 0 ? err : d);
		if (r < 0)
			goto out;
	}
	r = changed;
out:
	cas_free(cas);
	free(w);
	return r;
}
