/* kubeadm's kubeconfigs under ROOT/etc/kubernetes, converged on Deckhouse's rules (cpm_pki.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/base/base64.h"
#include "common/base/buf.h"
#include "common/base/fileutil.h"
#include "common/base/json.h"
#include "common/base/secret.h"
#include "common/kube/yaml.h"
#include "common/x509/x509.h"
#include "modules/cpm/cpm_files.h"
#include "modules/cpm/cpm_pki.h"

#define KC_FILE_MAX ((size_t)256 * 1024)

struct kc {
	const char *file;
	const char *user; /* NULL: system:node:<name> */
	enum { GROUP_NONE, GROUP_ADMINS, GROUP_MASTERS, GROUP_NODES } group;
	bool local; /* the local apiserver, else the control-plane endpoint */
	int min_minor;
};

/* kubeadm's kubeconfig table (kubeconfig.go). */
static const struct kc kcs[] = {
	{ "admin.conf", "kubernetes-admin", GROUP_ADMINS, false, 0 },
	{ "super-admin.conf", "kubernetes-super-admin", GROUP_MASTERS, false, 29 },
	{ "controller-manager.conf", "system:kube-controller-manager", GROUP_NONE, true, 0 },
	{ "scheduler.conf", "system:kube-scheduler", GROUP_NONE, true, 0 },
	{ "kubelet.conf", NULL, GROUP_NODES, false, 0 },
};

/* What one kubeconfig should hold. */
struct kc_want {
	char user[300];
	const char *orgs[2];
	char server[300];
	char path[4096];
};

static int minor_of(const struct cpm_pki_input *in)
{
	return in->kube_minor ? in->kube_minor : 33;
}

static int kc_path(const struct cpm_pki_input *in, const char *file, char *buf, size_t n)
{
	char abs[512];
	int w = snprintf(abs, sizeof(abs), "/etc/kubernetes/%s", file);

	if (w < 0 || (size_t)w >= sizeof(abs))
		return -ENAMETOOLONG;
	return cpm_path(in->root, abs, buf, n);
}

static int kc_want_build(const struct cpm_pki_input *in, const struct kc *k, struct kc_want *w)
{
	const char *ep = in->control_plane_endpoint;
	const char *adv = in->advertise_address;
	int port = in->bind_port ? in->bind_port : 6443;
	bool v6 = strchr(adv, ':') != NULL;

	memset(w, 0, sizeof(*w));
	if (k->user)
		snprintf(w->user, sizeof(w->user), "%s", k->user);
	else
		snprintf(w->user, sizeof(w->user), "system:node:%s", in->node_name);
	switch (k->group) {
	case GROUP_NONE:
		break;
	case GROUP_ADMINS:
		w->orgs[0] = minor_of(in) >= 29 ? "kubeadm:cluster-admins" : "system:masters";
		break;
	case GROUP_MASTERS:
		w->orgs[0] = "system:masters";
		break;
	case GROUP_NODES:
		w->orgs[0] = "system:nodes";
		break;
	}
	if (!k->local && ep && ep[0]) {
		/* host:port, [v6]:port, or a host alone (the bind port added, as kubeadm) */
		const char *rb = strrchr(ep, ']'), *colon = strrchr(ep, ':');
		bool has_port = ep[0] == '[' ? rb && rb[1] == ':' : colon && strchr(ep, ':') == colon;
		if (has_port)
			snprintf(w->server, sizeof(w->server), "https://%s", ep);
		else if (strchr(ep, ':'))
			snprintf(w->server, sizeof(w->server), "https://[%s]:%d", ep, port);
		else
			snprintf(w->server, sizeof(w->server), "https://%s:%d", ep, port);
	} else {
		snprintf(w->server, sizeof(w->server), v6 ? "https://[%s]:%d" : "https://%s:%d", adv,
			 port);
	}
	return kc_path(in, k->file, w->path, sizeof(w->path));
}

static bool orgs_equal(char **have, const char *const *want)
{
	size_t n = 0;

	for (; have && have[n]; n++)
		if (!want[n] || strcmp(have[n], want[n]) != 0)
			return false;
	return !want[n];
}

/* A base64 field decoded (NUL-terminated), or NULL. */
static char *field_b64(const cJSON *root, const char *path)
{
	const char *v = json_str(root, path);
	void *out = NULL;
	size_t n = 0;

	if (!v || base64_decode(v, strlen(v), BASE64_SKIP_SPACE, &out, &n) < 0)
		return NULL;
	return out;
}

/* The parts of a kubeconfig cpm checks (the first cluster and user, as kubeadm writes one). */
struct kc_have {
	cJSON *doc;
	const char *server;
	struct x509_cert *ca, *crt;
	struct x509_key *key;
};

static void kc_have_release(struct kc_have *h)
{
	cJSON_Delete(h->doc);
	x509_cert_free(h->ca);
	x509_cert_free(h->crt);
	x509_key_free(h->key);
	memset(h, 0, sizeof(*h));
}

/* NULL when the file parses and holds a cluster, a CA, a user with a certificate and its key;
 * else why not (*missing when there is no file). */
static const char *kc_read(const char *path, struct kc_have *h, bool *missing)
{
	char *text = NULL, *ca = NULL, *crt = NULL, e[200];
	_cleanup_secret_ char *key = NULL;
	size_t len = 0;
	const char *why = NULL;
	int r = file_read_all(path, KC_FILE_MAX, &text, &len);

	*missing = r == -ENOENT;
	if (r < 0)
		return *missing ? "missing" : "it cannot be read";
	r = kube_yaml_parse(text, len, 0, &h->doc, e, sizeof(e));
	secret_free(text);
	if (r < 0)
		return "it does not parse";
	h->server = json_str(h->doc, "clusters.0.cluster.server");
	ca = field_b64(h->doc, "clusters.0.cluster.certificate-authority-data");
	crt = field_b64(h->doc, "users.0.user.client-certificate-data");
	key = field_b64(h->doc, "users.0.user.client-key-data");
	if (!h->server)
		why = "it has no cluster server";
	else if (!ca || x509_cert_from_pem(ca, &h->ca, e, sizeof(e)) < 0)
		why = "it has no readable CA";
	else if (!crt || x509_cert_from_pem(crt, &h->crt, e, sizeof(e)) < 0)
		why = "it has no readable client certificate";
	else if (!key || x509_key_from_pem(key, &h->key, e, sizeof(e)) < 0)
		why = "it has no readable client key";
	else if (x509_cert_key_match(h->crt, h->key, e, sizeof(e)) < 0)
		why = "its key does not match its certificate";
	free(ca);
	free(crt);
	return why;
}

static bool same_cert(const struct x509_cert *a, const struct x509_cert *b)
{
	char *pa = NULL, *pb = NULL;
	bool same = x509_cert_to_pem(a, &pa, NULL, 0) >= 0 && x509_cert_to_pem(b, &pb, NULL, 0) >= 0 &&
		    strcmp(pa, pb) == 0;

	free(pa);
	free(pb);
	return same;
}

/* NULL when the kubeconfig on disk is what it should be. */
static const char *kc_check(const struct kc_want *w, const struct x509_cert *ca, int64_t now,
			    bool *missing, char *why, size_t whylen)
{
	struct kc_have h = { 0 };
	_cleanup_x509_names_ struct x509_names n = { 0 };
	const char *d = kc_read(w->path, &h, missing);
	int64_t not_after = 0;
	int t;

	if (d)
		goto out;
	if (strcmp(h.server, w->server) != 0) {
		snprintf(why, whylen, "its server %.120s is not %.120s", h.server, w->server);
		d = why;
	} else if (!same_cert(h.ca, ca)) {
		d = "its CA is not the current one";
	} else if (x509_cert_verify_signed_by(h.crt, ca, NULL, 0) < 0) {
		d = "its certificate was not issued by the current CA";
	} else if (x509_cert_names(h.crt, &n, NULL, 0) < 0 || !n.cn || strcmp(n.cn, w->user) != 0) {
		d = "its user (CN) differs";
	} else if (!orgs_equal(n.orgs, w->orgs)) {
		d = "its group (O) differs";
	} else if ((t = x509_cert_check_time(h.crt, now, CPM_RENEW_BEFORE_S)) != X509_TIME_VALID) {
		x509_cert_validity(h.crt, NULL, &not_after, NULL, 0);
		if (t == X509_TIME_EXPIRES_SOON)
			snprintf(why, whylen, "its certificate expires in %lld days (< 30)",
				 (long long)((not_after - now) / 86400));
		else
			snprintf(why, whylen, "its certificate is %s", x509_time_name(t));
		d = why;
	}
out:
	kc_have_release(&h);
	return d;
}

/* The kubeconfig text kubeadm writes (clientcmd's field order). */
static int kc_text(const char *cluster, const char *server, const char *user, const char *ca_pem,
		   const char *crt_pem, const char *key_pem, char **ret)
{
	_cleanup_secret_ char *k64 = NULL;
	char *ca64 = NULL, *c64 = NULL, *text = NULL;
	int r = base64_encode(ca_pem, strlen(ca_pem), BASE64_STD, &ca64);

	if (r >= 0)
		r = base64_encode(crt_pem, strlen(crt_pem), BASE64_STD, &c64);
	if (r >= 0)
		r = base64_encode(key_pem, strlen(key_pem), BASE64_STD, &k64);
	if (r >= 0 &&
	    asprintf(&text,
		     "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: %s\n"
		     "    server: %s\n  name: %s\ncontexts:\n- context:\n    cluster: %s\n"
		     "    user: %s\n  name: %s@%s\ncurrent-context: %s@%s\nkind: Config\n"
		     "preferences: {}\nusers:\n- name: %s\n  user:\n"
		     "    client-certificate-data: %s\n    client-key-data: %s\n",
		     ca64, server, cluster, cluster, user, user, cluster, user, cluster, user, c64,
		     k64) < 0)
		r = -ENOMEM;
	free(ca64);
	free(c64);
	if (r >= 0)
		*ret = text;
	return r;
}

/* A new key and client certificate for names, and the kubeconfig written (0600). */
static int kc_make(const struct cpm_pki_input *in, const char *path, const char *server,
		   const char *cn, const char *const *orgs, const struct x509_cert *ca,
		   const struct x509_key *ca_key, char *err, size_t errlen)
{
	_cleanup_x509_cert_ struct x509_cert *crt = NULL;
	_cleanup_x509_key_ struct x509_key *key = NULL;
	_cleanup_secret_ char *kpem = NULL, *text = NULL;
	char *cpem = NULL, *capem = NULL;
	struct x509_spec s = {
		.cn = cn,
		.orgs = orgs && orgs[0] ? orgs : NULL,
		.usages = X509_USAGE_CLIENT,
		.start = in->now > 0 ? in->now : (int64_t)time(NULL),
		.duration_s = in->cert_validity_s > 0 ? in->cert_validity_s
						      : CPM_DEFAULT_CERT_VALIDITY_S,
		.backdate_s = CPM_CERT_BACKDATE_S,
	};
	const char *cluster = in->cluster_name && in->cluster_name[0] ? in->cluster_name
								      : "kubernetes";
	int r = cpm_key_new(in->algo, &key, err, errlen);

	if (r >= 0)
		r = x509_cert_signed(&s, key, ca, ca_key, &crt, err, errlen);
	if (r >= 0)
		r = x509_cert_to_pem(crt, &cpem, err, errlen);
	if (r >= 0)
		r = x509_cert_to_pem(ca, &capem, err, errlen);
	if (r >= 0)
		r = x509_key_to_pem(key, &kpem, err, errlen);
	if (r >= 0)
		r = kc_text(cluster, server, cn, capem, cpem, kpem, &text);
	if (r >= 0)
		r = cpm_mkdirs_for(path);
	if (r >= 0)
		r = file_write_atomic(path, text, strlen(text), FILE_MODE_SECRET);
	if (r < 0 && err && !err[0])
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(-r));
	free(cpem);
	free(capem);
	return r;
}

static bool kc_wanted(const struct cpm_pki_input *in, const struct kc *k)
{
	if (minor_of(in) < k->min_minor)
		return false;
	return k->user || in->write_kubelet_conf;
}

/* ROOT/root/.kube/config -> /etc/kubernetes/admin.conf. */
static int symlink_converge(const struct cpm_pki_input *in, bool dry_run, struct cpm_report *rep)
{
	static const char target[] = "/etc/kubernetes/admin.conf";
	char path[4096], have[4096];
	int64_t t0 = cpm_report_clock_ms();
	ssize_t n;
	int r = cpm_path(in->root, "/root/.kube/config", path, sizeof(path));

	if (r < 0)
		return r;
	n = readlink(path, have, sizeof(have) - 1);
	if (n >= 0 && (size_t)n == strlen(target) && memcmp(have, target, (size_t)n) == 0) {
		cpm_report_add(rep, "/root/.kube/config", CPM_STEP_UNCHANGED,
			       cpm_report_clock_ms() - t0, NULL);
		return 0;
	}
	if (dry_run) {
		cpm_report_add(rep, "/root/.kube/config", CPM_STEP_WOULD_CHANGE,
			       cpm_report_clock_ms() - t0, "would link to %s", target);
		return 1;
	}
	r = cpm_mkdirs_for(path);
	if (r >= 0 && unlink(path) < 0 && errno != ENOENT)
		r = -errno;
	if (r >= 0 && symlink(target, path) < 0)
		r = -errno;
	cpm_report_add(rep, "/root/.kube/config", r < 0 ? CPM_STEP_FAILED : CPM_STEP_CREATED,
		       cpm_report_clock_ms() - t0, r < 0 ? "%s" : "-> %s",
		       r < 0 ? strerror(-r) : target);
	return r < 0 ? r : 1;
}

int cpm_kubeconfigs_converge(const struct cpm_pki_input *in, bool dry_run,
			     struct cpm_report *rep)
{
	_cleanup_x509_cert_ struct x509_cert *ca = NULL;
	_cleanup_x509_key_ struct x509_key *ca_key = NULL;
	int64_t now = in->now > 0 ? in->now : (int64_t)time(NULL), t0 = cpm_report_clock_ms();
	struct kc_want w;
	char err[512] = "", why[300];
	int r, changed = 0;

	r = cpm_ca_load(in, "ca", &ca, &ca_key, err, sizeof(err));
	if (r < 0) {
		cpm_report_add(rep, "pki/ca.crt", CPM_STEP_FAILED, cpm_report_clock_ms() - t0, "%s",
			       err);
		return r;
	}
	for (size_t i = 0; i < sizeof(kcs) / sizeof(kcs[0]); i++) {
		const struct kc *k = &kcs[i];
		const char *d;
		bool missing;

		if (!kc_wanted(in, k))
			continue;
		t0 = cpm_report_clock_ms();
		if ((r = kc_want_build(in, k, &w)) < 0) {
			cpm_report_add(rep, k->file, CPM_STEP_FAILED, 0, "the path is too long");
			return r;
		}
		d = kc_check(&w, ca, now, &missing, why, sizeof(why));
		if (!d) {
			cpm_report_add(rep, k->file, CPM_STEP_UNCHANGED, cpm_report_clock_ms() - t0,
				       NULL);
			continue;
		}
		changed = 1;
		if (dry_run) {
			cpm_report_add(rep, k->file, CPM_STEP_WOULD_CHANGE, cpm_report_clock_ms() - t0,
				       "would %s: %s", missing ? "create" : "recreate", d);
			continue;
		}
		err[0] = 0;
		r = kc_make(in, w.path, w.server, w.user, w.orgs, ca, ca_key, err, sizeof(err));
		cpm_report_add(rep, k->file,
			       r < 0 ? CPM_STEP_FAILED : missing ? CPM_STEP_CREATED : CPM_STEP_UPDATED,
			       cpm_report_clock_ms() - t0, "%s", r < 0 ? err : d);
		if (r < 0)
			return r;
	}
	if (in->root_kubeconfig_symlink) {
		r = symlink_converge(in, dry_run, rep);
		if (r < 0)
			return r;
		changed |= r;
	}
	return changed;
}

int cpm_kubeconfig_renew(const struct cpm_pki_input *in, const char *name, char *err,
			 size_t errlen)
{
	_cleanup_x509_cert_ struct x509_cert *ca = NULL;
	_cleanup_x509_key_ struct x509_key *ca_key = NULL;
	_cleanup_x509_names_ struct x509_names n = { 0 };
	struct kc_have h = { 0 };
	const char *orgs[2] = { NULL, NULL }, *d;
	char path[4096], server[300];
	bool missing, known = false;
	int r;

	for (size_t i = 0; i < sizeof(kcs) / sizeof(kcs[0]); i++)
		known |= strcmp(kcs[i].file, name) == 0;
	if (!known) {
		snprintf(err, errlen, "\"%s\" is not a kubeconfig of the table", name);
		return -EINVAL;
	}
	if (kc_path(in, name, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	d = kc_read(path, &h, &missing);
	if (!d && x509_cert_names(h.crt, &n, err, errlen) < 0)
		d = "its certificate's names cannot be read";
	if (d) {
		snprintf(err, errlen, "cannot renew %s: %s", path, d);
		kc_have_release(&h);
		return missing ? -ENOENT : -EINVAL;
	}
	snprintf(server, sizeof(server), "%s", h.server);
	orgs[0] = n.orgs ? n.orgs[0] : NULL;
	r = cpm_ca_load(in, "ca", &ca, &ca_key, err, errlen);
	if (r >= 0)
		r = kc_make(in, path, server, n.cn, orgs, ca, ca_key, err, errlen);
	kc_have_release(&h);
	return r;
}

int cpm_kubeconfig_cert(const struct cpm_pki_input *in, const char *name,
			struct x509_cert **ret)
{
	struct kc_have h = { 0 };
	char path[4096];
	bool missing = false;
	const char *d;

	*ret = NULL;
	if (kc_path(in, name, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	d = kc_read(path, &h, &missing);
	if (!d || h.crt) {
		*ret = h.crt;
		h.crt = NULL;
	}
	kc_have_release(&h);
	return d && !*ret ? (missing ? -ENOENT : -EBADMSG) : 0;
}
