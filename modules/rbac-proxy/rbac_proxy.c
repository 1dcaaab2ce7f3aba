/* aws-k8s rbac-proxy: kube-rbac-proxy's flags (v0.21) and Deckhouse's (--stale-cache-interval,
 * --livez-path, KUBE_RBAC_PROXY_CONFIG), start and stop. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/fileutil.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/base/secret.h"
#include "common/base/timeutil.h"
#include "common/http/tls_internal.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"
#include "common/x509/x509.h"
#include "modules/rbac-proxy/rbac_proxy.h"

static const char rbac_usage[] =
	"An HTTPS reverse proxy that authenticates requests (client certificate or bearer token by\n"
	"TokenReview) and authorizes them (SubjectAccessReview) before passing them to --upstream,\n"
	"as kube-rbac-proxy does; also started by the name kube-rbac-proxy. Deckhouse's fork's\n"
	"KUBE_RBAC_PROXY_CONFIG, --stale-cache-interval and --livez-path are supported.\n"
	"\n"
	"Configuration (--config-file, or the YAML itself in KUBE_RBAC_PROXY_CONFIG, which wins):\n"
	"  authorization: {resourceAttributes: {namespace, apiGroup, apiVersion, resource,\n"
	"    subresource, name}, rewrites: {byQueryParameter: {name}, byHttpHeader: {name}},\n"
	"    static: [{user: {name, groups}, verb, path, resourceRequest, namespace, ...}]}\n"
	"  excludePaths: [paths proxied without authentication]          (Deckhouse)\n"
	"  upstreams: [{upstream: URL, path: prefix, authorization: {...}, upstreamCaFile,\n"
	"    upstreamInsecureSkipVerify}]   (Deckhouse: the prefix is replaced by the URL's path)\n"
	"Without resourceAttributes the SubjectAccessReview asks for the request's path and verb\n"
	"(GET get, POST create, PUT update, PATCH patch, DELETE delete). Decisions are cached:\n"
	"TokenReviews --authn-cache-ttl, allowed --authz-allow-cache-ttl, denied\n"
	"--authz-deny-cache-ttl; with --stale-cache-interval a decision that held within it is\n"
	"reused while the API server fails, new ones fail closed.\n"
	"\n"
	"Security (where this differs from kube-rbac-proxy): identity headers a client sends\n"
	"(--auth-header-*-field-name) are always removed; paths are percent-decoded and cleaned\n"
	"('..', '.', '//', encoded slashes) before --allow-paths, --ignore-paths, excludePaths and\n"
	"the SubjectAccessReview, and the clean path goes upstream; Authorization is not forwarded\n"
	"unless --forward-authorization-header is set (Deckhouse's fork always forwards it); a\n"
	"client's Connection header cannot remove the proxy's own headers; tokens are never logged,\n"
	"at any --v. Only HTTP/1.1 is served: the HTTP/2 flags are accepted and named in the\n"
	"start-up warning; --oidc-issuer is refused.\n"
	"\n"
	"Statuses: 401 no or bad credentials, 403 denied, 404 outside --allow-paths, 400 a missing\n"
	"rewrite value, 408 a head slower than --read-header-timeout, 413 a body over\n"
	"--max-request-body-bytes, 414 a path over 8 KiB, 431 a head over --max-header-bytes, 500 the\n"
	"API server failed, 502 the upstream failed, 503 the review queue is full, 504 the upstream\n"
	"timed out.\n"
	"\n"
	"Example (Deckhouse's sidecar):\n"
	"  KUBE_RBAC_PROXY_CONFIG='upstreams: [{upstream: http://127.0.0.1:8081/, path: /, ...}]'\n"
	"  kube-rbac-proxy --secure-listen-address=$(POD_IP):8443 --client-ca-file=/etc/ca.crt \\\n"
	"      --v=2 --stale-cache-interval=1h30m --livez-path=/livez";

static char *secure_listen, *upstream, *up_ca, *up_cert, *up_key, *tls_cert, *tls_key, *tls_min,
	*client_ca, *config_file, *user_field, *groups_field, *groups_sep, *livez;
static char **tls_ciphers, **audiences, **allow_paths, **ignore_paths, **oidc_algs;
static char *oidc_unused[5];
static bool header_fields, forward_auth, h2c, http2_disable;
static long long endpoints_port, max_header, max_body, workers, auth_workers, h2_streams, h2_size;
static int64_t stale, tls_reload, read_header_timeout, idle_timeout, upstream_timeout, authn_ttl,
	allow_ttl, deny_ttl;
static char *oidc_issuer;

static const struct flag rbac_flags[] = {
	{ "secure-listen-address", FLAG_STRING, &secure_listen, "", NULL,
	  "The address the proxy listens on for HTTPS (host:port)." },
	{ "upstream", FLAG_STRING, &upstream, "", NULL, "The upstream URL to proxy to." },
	{ "upstream-ca-file", FLAG_STRING, &up_ca, "", NULL,
	  "The CA the upstream uses for its TLS certificate." },
	{ "upstream-client-cert-file", FLAG_STRING, &up_cert, "", NULL,
	  "Client certificate for the upstream (only with --upstream-ca-file)." },
	{ "upstream-client-key-file", FLAG_STRING, &up_key, "", NULL,
	  "Key of --upstream-client-cert-file." },
	{ "upstream-force-h2c", FLAG_BOOL, &h2c, "false", NULL,
	  "Force h2c to the upstream: HTTP/1.1 is always used; given, it is named in the start-up warning.",
	  .no_effect = true },
	{ "tls-cert-file", FLAG_STRING, &tls_cert, "", NULL,
	  "Serving certificate (re-read when it changes); none: a self-signed one." },
	{ "tls-private-key-file", FLAG_STRING, &tls_key, "", NULL, "Key of --tls-cert-file." },
	{ "tls-min-version", FLAG_STRING, &tls_min, "VersionTLS12", NULL,
	  "Minimum TLS version (Go's names: VersionTLS12, VersionTLS13)." },
	{ "tls-cipher-suites", FLAG_STRLIST, &tls_ciphers, NULL, NULL,
	  "Cipher suites for TLS 1.2 and below (IANA names, as Go)." },
	{ "tls-reload-interval", FLAG_DURATION, &tls_reload, "1m", NULL,
	  "How often the certificate files are checked for a change." },
	{ "client-ca-file", FLAG_STRING, &client_ca, "", NULL,
	  "CAs for client certificates (user = CN, groups = O)." },
	{ "auth-token-audiences", FLAG_STRLIST, &audiences, NULL, NULL,
	  "Audiences the TokenReview asks for (comma-separated)." },
	{ "auth-header-fields-enabled", FLAG_BOOL, &header_fields, "false", NULL,
	  "Send the user and groups to the upstream in headers." },
	{ "auth-header-user-field-name", FLAG_STRING, &user_field, "x-remote-user", NULL,
	  "The header for the user name." },
	{ "auth-header-groups-field-name", FLAG_STRING, &groups_field, "x-remote-groups", NULL,
	  "The header for the groups." },
	{ "auth-header-groups-field-separator", FLAG_STRING, &groups_sep, "|", NULL,
	  "The separator of the groups." },
	{ "config-file", FLAG_STRING, &config_file, "", NULL,
	  "The authorization configuration (YAML); KUBE_RBAC_PROXY_CONFIG (the YAML itself) wins." },
	{ "allow-paths", FLAG_STRLIST, &allow_paths, NULL, NULL,
	  "Only these paths (Go path.Match patterns) are proxied; others get 404." },
	{ "ignore-paths", FLAG_STRLIST, &ignore_paths, NULL, NULL,
	  "These paths (patterns) are proxied without authentication or authorization." },
	{ "proxy-endpoints-port", FLAG_INT, &endpoints_port, "0", NULL,
	  "Port of the proxy's own endpoints (/healthz) over HTTPS; 0: none.", 0, 65535 },
	{ "http2-disable", FLAG_BOOL, &http2_disable, "false", NULL,
	  "Disable HTTP/2: only HTTP/1.1 is served (ALPN offers no h2), as if it were always given.",
	  .no_effect = true },
	{ "http2-max-concurrent-streams", FLAG_INT, &h2_streams, "100", NULL,
	  "Streams per HTTP/2 connection: HTTP/2 is not served; a value other than the default is warned about.",
	  .no_effect = true },
	{ "http2-max-size", FLAG_INT, &h2_size, "262144", NULL,
	  "HTTP/2 frame size: HTTP/2 is not served; a value other than the default is warned about.",
	  .no_effect = true },
	{ "oidc-issuer", FLAG_STRING, &oidc_issuer, "", NULL,
	  "OIDC authentication is not supported: a non-empty value is refused (exit 2)." },
	{ "oidc-clientID", FLAG_STRING, &oidc_unused[0], "", NULL, "OIDC client ID (OIDC is not supported).",
	  .no_effect = true },
	{ "oidc-groups-claim", FLAG_STRING, &oidc_unused[1], "groups", NULL,
	  "OIDC groups claim (OIDC is not supported).", .no_effect = true },
	{ "oidc-username-claim", FLAG_STRING, &oidc_unused[2], "email", NULL,
	  "OIDC user claim (OIDC is not supported).", .no_effect = true },
	{ "oidc-groups-prefix", FLAG_STRING, &oidc_unused[3], "", NULL,
	  "OIDC groups prefix (OIDC is not supported).", .no_effect = true },
	{ "oidc-sign-alg", FLAG_STRLIST, &oidc_algs, "RS256", NULL,
	  "OIDC signing algorithms (OIDC is not supported).", .no_effect = true },
	{ "oidc-ca-file", FLAG_STRING, &oidc_unused[4], "", NULL,
	  "OIDC issuer's CA (OIDC is not supported).", .no_effect = true },
	{ "stale-cache-interval", FLAG_DURATION, &stale, "0s", NULL,
	  "Deckhouse: reuse a positive decision this long when the API server fails; 0: off." },
	{ "livez-path", FLAG_STRING, &livez, "", NULL,
	  "Deckhouse: a path on the secure port answered \"OK\" without authentication." },
	{ "forward-authorization-header", FLAG_BOOL, &forward_auth, "false", NULL,
	  "Forward the client's Authorization header upstream (Deckhouse's fork always does)." },
	{ "max-header-bytes", FLAG_INT, &max_header, "65536", NULL,
	  "Largest request or response head (431 / 502 beyond).", 1024, 1 << 24 },
	{ "max-request-body-bytes", FLAG_INT, &max_body, "16777216", NULL,
	  "Largest request body (413 beyond); 0: no limit.", 0, INT64_MAX },
	{ "read-header-timeout", FLAG_DURATION, &read_header_timeout, "10s", NULL,
	  "Time a client has to send a whole request head (408 after)." },
	{ "idle-timeout", FLAG_DURATION, &idle_timeout, "90s", NULL,
	  "An idle keep-alive client connection is closed after this." },
	{ "upstream-timeout", FLAG_DURATION, &upstream_timeout, "5m", NULL,
	  "An upstream exchange with no progress this long ends (504 before a response)." },
	{ "authn-cache-ttl", FLAG_DURATION, &authn_ttl, "2m", NULL, "TokenReview cache lifetime." },
	{ "authz-allow-cache-ttl", FLAG_DURATION, &allow_ttl, "5m", NULL,
	  "SubjectAccessReview cache lifetime of an allowed request." },
	{ "authz-deny-cache-ttl", FLAG_DURATION, &deny_ttl, "30s", NULL,
	  "SubjectAccessReview cache lifetime of a denied request." },
	{ "workers", FLAG_INT, &workers, "0", NULL, "Event loops (threads); 0: one per CPU.", 0, 256 },
	{ "auth-workers", FLAG_INT, &auth_workers, "4", NULL,
	  "Threads for TokenReview and SubjectAccessReview calls.", 1, 256 },
	KUBE_FLAGS_QPS("0", "0"),
	LOG_FLAGS,
	{ NULL },
};

static int load_config(struct rbac_cfg *cfg, char *err, size_t errlen)
{
	const char *env = getenv("KUBE_RBAC_PROXY_CONFIG");
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r;

	if (env && *env) {
		if (!(text = strdup(env)))
			return -ENOMEM;
		len = strlen(text);
	} else if (*config_file) {
		if ((r = file_read_all(config_file, 1 << 20, &text, &len)) < 0) {
			snprintf(err, errlen, "cannot read '%s': %s", config_file, strerror(-r));
			return r;
		}
	}
	if (text && (r = rbac_cfg_parse(text, len, cfg, err, errlen)) < 0)
		return r;
	if (!cfg->nups) {
		if (!*upstream) {
			snprintf(err, errlen, "--upstream is required (or upstreams in the configuration)");
			return -EINVAL;
		}
		if (!(cfg->ups = calloc(1, sizeof(*cfg->ups))))
			return -ENOMEM;
		cfg->nups = 1;
		if ((r = rbac_upstream_parse(upstream, &cfg->ups[0], err, errlen)) < 0)
			return r;
	}
	for (size_t i = 0; i < cfg->nups; i++)
		if ((r = rbac_upstream_prepare(&cfg->ups[i], up_ca, up_cert, up_key, err, errlen)) < 0)
			return r;
	return 0;
}

static int make_tls(struct rbac *p, char *err, size_t errlen)
{
	_cleanup_free_ char *ciphers = NULL, *cert = NULL;
	char *key = NULL;
	struct buf b = BUF_INIT(8192);
	int r = 0;

	for (char **c = tls_ciphers; c && *c && r >= 0; c++)
		r = buf_printf(&b, "%s%s", b.len ? "," : "", *c);
	ciphers = buf_steal(&b);
	struct http_tls t = {.cert_file = *tls_cert ? tls_cert : NULL,
			     .key_file = *tls_key ? tls_key : NULL,
			     .client_ca_file = *client_ca ? client_ca : NULL,
			     .client_auth = HTTP_TLS_CLIENT_REQUEST,
			     .min_version = tls_min,
			     .cipher_suites = ciphers,
			     .handshake_timeout_ns = 10 * NSEC_PER_SEC,
			     .reload_check_ns = tls_reload};
	if (!t.cert_file) {
		char host[256] = "localhost";
		gethostname(host, sizeof(host) - 1);
		const char *const dns[] = {host, "localhost", NULL};
		struct x509_spec s = {.cn = host, .dns = dns, .ca = true, .usages = X509_USAGE_SERVER,
				      .duration_s = X509_YEAR};
		if ((r = x509_self_signed_pem(&s, &cert, &key, err, errlen)) < 0)
			return r;
		t.cert_pem = cert;
		t.key_pem = key;
		log_info("generated a self-signed serving certificate", KV_S("cn", host));
	}
	r = tls_src_new(&t, &p->tls, err, errlen);
	secret_free(key);
	return r;
}

int rbac_proxy_main(int argc, char **argv)
{
	static struct rbac p;
	struct kube_client *kc = NULL;
	char err[512] = "";
	int n = flags_parse("rbac-proxy", rbac_usage, rbac_flags, argc, argv), r;

	if (n < 0)
		return flags_exit_code(n);
	r = 2;
	if (n > 0)
		fprintf(stderr, "rbac-proxy: unexpected argument '%s'\n", argv[0]);
	else if (!*secure_listen)
		fprintf(stderr, "rbac-proxy: --secure-listen-address is required\n");
	else if (*oidc_issuer)
		fprintf(stderr, "rbac-proxy: --oidc-issuer: OIDC authentication is not supported\n");
	else if (allow_paths && *allow_paths && ignore_paths && *ignore_paths)
		fprintf(stderr, "rbac-proxy: --allow-paths and --ignore-paths cannot both be given\n");
	else
		r = 0;
	if (r)
		goto out;
	r = 1;
	p.o = (struct rbac_opts){.header_fields = header_fields,
				 .user_field = user_field,
				 .groups_field = groups_field,
				 .groups_sep = groups_sep,
				 .allow_paths = allow_paths,
				 .ignore_paths = ignore_paths,
				 .livez_path = livez,
				 .forward_authorization = forward_auth,
				 .max_header_bytes = (size_t)max_header,
				 .max_body_bytes = (uint64_t)max_body,
				 .read_header_timeout_ns = read_header_timeout,
				 .idle_timeout_ns = idle_timeout,
				 .upstream_timeout_ns = upstream_timeout,
				 .handshake_timeout_ns = 10 * NSEC_PER_SEC};
	if (load_config(&p.cfg, err, sizeof(err)) < 0 || make_tls(&p, err, sizeof(err)) < 0) {
		log_error("cannot start", KV_S("error", err));
		goto out;
	}
	if (kube_client_from_flags("rbac-proxy", &kc, err, sizeof(err)) < 0) {
		log_error("cannot make the Kubernetes client", KV_S("error", err));
		goto out;
	}
	if (kube_authn_new(kc,
			   &(struct kube_authn_opts){.audiences = (const char *const *)audiences,
						     .ttl_ns = authn_ttl,
						     .stale_ns = stale},
			   &p.authn) < 0 ||
	    kube_authz_new(kc,
			   &(struct kube_authz_opts){.allow_ttl_ns = allow_ttl,
						     .deny_ttl_ns = deny_ttl,
						     .stale_ns = stale},
			   &p.authz) < 0 ||
	    rbac_pool_start(&p, (unsigned)auth_workers) < 0) {
		log_error("cannot start: out of memory or threads");
		goto out;
	}
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned nl = workers ? (unsigned)workers : (unsigned)(cpus > 0 ? cpus : 1);
	char eaddr[64];
	snprintf(eaddr, sizeof(eaddr), ":%lld", endpoints_port);
	if (rbac_loops_start(&p, secure_listen, endpoints_port ? eaddr : NULL, nl, err, sizeof(err)) < 0) {
		log_error("cannot listen", KV_S("error", err));
		goto out;
	}
	log_info("serving", KV_S("address", secure_listen), KV_I("loops", nl),
		 KV_I("upstreams", p.cfg.nups), KV_S("upstream", p.cfg.ups[0].url));
	while (!cancel_wait(cancel_root(), NSEC_PER_SEC))
		;
	log_info("stopping");
	r = 0;
out:
	rbac_pool_stop(&p);
	rbac_loops_stop(&p);
	kube_authn_free(p.authn);
	kube_authz_free(p.authz);
	kube_client_free(kc);
	tls_src_free(p.tls);
	rbac_cfg_release(&p.cfg);
	flags_free(rbac_flags);
	return r;
}
