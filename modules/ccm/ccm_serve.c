/* The ccm's HTTPS endpoint: /healthz, /readyz, /livez and /metrics on
 * --bind-address:--secure-port, as upstream serves them (Deckhouse probes
 * https://127.0.0.1:10471/healthz). The certificate is --tls-cert-file/--tls-private-key-file,
 * else a self-signed one: read from --cert-dir when a pair is there, else made at start (and
 * written to --cert-dir when it is set), as k8s.io/apiserver's MaybeDefaultWithSelfSignedCerts
 * does. Writing never follows a symbolic link and leaves the key 0600 in a 0700 folder
 * (common/base/fileutil.h); reading follows links (a mounted Secret is made of them). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/fileutil.h"
#include "common/base/log.h"
#include "common/base/signals.h"
#include "common/http/server.h"
#include "common/kube/config.h"
#include "common/kube/informer.h"
#include "common/kube/leaderelection.h"
#include "common/x509/x509.h"
#include "modules/ccm/ccm_serve.h"

#define PEM_MAX ((size_t)1 << 20)

int ccm_self_signed(const char *cn, const char *const *dns, const char *const *ips, char **ret_cert,
		    char **ret_key, char *err, size_t errlen)
{
	char subject[X509_NAME_MAX + 1];

	/* "<host>@<unix time>", valid from an hour ago for a year, as client-go's helper */
	if (str_printf(subject, sizeof(subject), "%s@%lld", cn, (long long)time(NULL)) < 0) {
		snprintf(err, errlen, "the host name '%s' is too long for a certificate", cn);
		return -EINVAL;
	}
	struct x509_spec s = {.cn = subject,
			      .dns = dns,
			      .ips = ips,
			      .ca = true,
			      .usages = X509_USAGE_SERVER,
			      .duration_s = X509_YEAR};
	return x509_self_signed_pem(&s, ret_cert, ret_key, err, errlen);
}

#define PAIR_CRT "cloud-controller-manager.crt"
#define PAIR_KEY "cloud-controller-manager.key"

/* Writes the generated pair to --cert-dir: the folder made (or tightened to) 0700, the key
 * 0600, the certificate 0644, each replaced atomically and never through a symbolic link. The
 * key first: a certificate on disk always has its key beside it. */
static int write_pair(const char *dir, const char *cert, const char *key, char *err, size_t errlen)
{
	int dfd = dir_open_private(dir), r;

	if (dfd == -ELOOP) {
		snprintf(err, errlen,
			 "--cert-dir '%s' is a symbolic link: refusing to write the private key "
			 "through it (give the folder it points to)",
			 dir);
		return dfd;
	}
	if (dfd == -EPERM) {
		snprintf(
		    err, errlen,
		    "--cert-dir '%s' is open to other users and cannot be made private (0700): "
		    "a shared or sticky folder such as /tmp cannot hold the private key",
		    dir);
		return dfd;
	}
	if (dfd < 0) {
		snprintf(err, errlen, "--cert-dir '%s': %s", dir, strerror(-dfd));
		return dfd;
	}
	const char *what = "private key", *name = PAIR_KEY;
	r = file_write_atomic_at(dfd, PAIR_KEY, key, strlen(key), FILE_MODE_SECRET);
	if (r >= 0) {
		what = "certificate";
		name = PAIR_CRT;
		r = file_write_atomic_at(dfd, PAIR_CRT, cert, strlen(cert), 0644);
	}
	close(dfd);
	if (r == -ELOOP)
		snprintf(
		    err, errlen,
		    "refusing to write the %s to '%s/%s': it is a symbolic link (remove it, or "
		    "give both files with --tls-cert-file/--tls-private-key-file)",
		    what, dir, name);
	else if (r < 0)
		snprintf(err, errlen, "cannot write the %s to '%s/%s': %s", what, dir, name,
			 strerror(-r));
	return r;
}

/* The certificate and key to serve with. */
static int load_pair(const struct ccm_serve_opts *o, char **cert, char **key, char *err,
		     size_t errlen)
{
	size_t len;
	int r;

	if (o->cert_file && *o->cert_file) {
		if (!o->key_file || !*o->key_file) {
			snprintf(err, errlen, "--tls-cert-file needs --tls-private-key-file");
			return -EINVAL;
		}
		if ((r = kube_read_file(o->cert_file, PEM_MAX, cert, &len)) < 0) {
			snprintf(err, errlen, "reading --tls-cert-file '%s': %s", o->cert_file,
				 strerror(-r));
			return r;
		}
		if ((r = kube_read_file(o->key_file, PEM_MAX, key, &len)) < 0) {
			snprintf(err, errlen, "reading --tls-private-key-file '%s': %s",
				 o->key_file, strerror(-r));
			free(*cert);
			return r;
		}
		return 0;
	}
	char cp[4096] = "", kp[4096] = "";
	if (o->cert_dir && *o->cert_dir) {
		str_printf(cp, sizeof(cp), "%s/" PAIR_CRT, o->cert_dir);
		str_printf(kp, sizeof(kp), "%s/" PAIR_KEY, o->cert_dir);
		if (kube_read_file(cp, PEM_MAX, cert, &len) == 0) {
			if (kube_read_file(kp, PEM_MAX, key, &len) == 0)
				return 0;
			free(*cert);
		}
	}
	static const char *const dns[] = {"localhost", NULL};
	static const char *const ips[] = {"127.0.0.1", NULL};
	char why[256];
	if ((r = ccm_self_signed("localhost", dns, ips, cert, key, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "cannot make a self-signed certificate: %s", why);
		return r;
	}
	if (*cp) {
		/* as upstream (MaybeDefaultWithSelfSignedCerts), a pair that cannot be written
		 * stops the start */
		if ((r = write_pair(o->cert_dir, *cert, *key, err, errlen)) < 0)
			return r;
		log_info("generated a self-signed certificate", KV_S("cert", cp), KV_S("key", kp));
	}
	return 0;
}

static int check_synced(void *ud, char *why, size_t n)
{
	struct ccm *m = ud;
	/* a standby replica is ready; a leader once its Node informer has synced */
	if (m->nodes && !kube_informer_has_synced(m->nodes)) {
		snprintf(why, n, "the node informer has not synced yet");
		return -EAGAIN;
	}
	return 0;
}

static int check_leader(void *ud, char *why, size_t n)
{
	struct ccm *m = ud;
	/* as upstream's leaderElection healthz: failing once the lease is lost while acting */
	if (controllers_election_ended(&m->run) && !stop_requested()) {
		snprintf(why, n, "leader election ended");
		return -EIO;
	}
	return 0;
}

int ccm_serve_start(const struct ccm_serve_opts *o, struct ccm *m, struct http_server **ret,
		    char *err, size_t errlen)
{
	_cleanup_free_ char *cert = NULL, *key = NULL;
	struct http_server *s = NULL;
	char bind[300];
	int r;

	if (o->port == 0)
		return 0; /* serving off, as upstream with --secure-port=0 */
	if ((r = load_pair(o, &cert, &key, err, errlen)) < 0)
		return r;
	const char *addr = o->bind_address && *o->bind_address ? o->bind_address : "0.0.0.0";
	bool v6 = strchr(addr, ':') != NULL;
	str_printf(bind, sizeof(bind), v6 ? "[%s]:%lld" : "%s:%lld", addr, o->port);
	struct http_server_opts so = {
	    .bind = bind, .tls = {.cert_pem = cert, .key_pem = key}, .threads = 2};
	if ((r = http_server_new(&so, &s)) < 0 || (r = http_server_add_standard(s)) < 0 ||
	    (r = http_server_add_check(s, HTTP_CHECK_READYZ, "informer-sync", check_synced, m)) <
		0 ||
	    (r = http_server_add_check(s, HTTP_CHECK_HEALTHZ, "leaderElection", check_leader, m)) <
		0 ||
	    (r = http_server_start(s)) < 0) {
		snprintf(err, errlen, "cannot serve on %s: %s", bind, strerror(-r));
		http_server_free(s);
		return r;
	}
	log_info("serving securely", KV_S("address", bind), KV_I("port", http_server_port(s)));
	*ret = s;
	return 0;
}
