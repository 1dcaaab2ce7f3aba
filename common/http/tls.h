/* TLS serving on OpenSSL for http_server (server.h): the configuration, and the identity a
 * verified client certificate gives to a handler.
 *
 *   struct http_server_opts o = {
 *       .bind = ":8443",
 *       .tls = {.cert_file = "/etc/tls/tls.crt", .key_file = "/etc/tls/tls.key",
 *               .client_ca_file = "/etc/ca/ca.crt", .client_auth = HTTP_TLS_CLIENT_REQUEST,
 *               .min_version = "VersionTLS12",
 *               .cipher_suites = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,..."},
 *   };
 *   ...in a handler: req->client_cert ? req->client_cert->cn : "anonymous"
 *
 * The names are Go's (and so kube-rbac-proxy's and every Kubernetes component's
 * --tls-min-version and --tls-cipher-suites): versions VersionTLS10 to VersionTLS13, cipher suites
 * by their IANA names. As in Go, the suites configure TLS 1.0 to 1.2 only: TLS 1.3's three suites
 * are accepted in the list and always enabled. Files are re-read when they change (size, mtime
 * or inode; checked on a new connection, at most once per reload_check_ns); a pair that does not
 * load (a key written before its certificate) keeps the previous one in service. A client that
 * stalls after its handshake is dropped after http_server_opts.connection_timeout_ns. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum http_tls_client_auth {
	/* with a client CA: a certificate it verifies is required (RequireAndVerifyClientCert) */
	HTTP_TLS_CLIENT_REQUIRE = 0,
	/* with a client CA: asked for; one that verifies reaches the handler, none or one that does
	 * not verify leaves the request anonymous (Go's RequestClientCert plus the x509
	 * authenticator, as kube-rbac-proxy) */
	HTTP_TLS_CLIENT_REQUEST,
};

struct http_tls {
	/* the serving chain (leaf first) and its key: PEM text, or files (which win) */
	const char *cert_pem, *key_pem;
	const char *cert_file, *key_file;
	/* CAs for client certificates: PEM text or a file; none: no certificate is asked for */
	const char *client_ca_pem, *client_ca_file;
	enum http_tls_client_auth client_auth;
	const char *min_version;      /* Go's name; NULL or "": VersionTLS12 */
	const char *cipher_suites;    /* comma-separated IANA names; NULL or "": Go's defaults */
	int64_t handshake_timeout_ns; /* a client that has not finished by then is dropped (10 s) */
	int64_t reload_check_ns;      /* how often the files are checked for a change (1 s) */
};

/* The subject of a verified client certificate: user = cn, groups = orgs (Kubernetes' x509
 * authenticator). Valid while the handler runs. */
struct http_client_cert {
	const char *cn;		 /* the last CN, as Go's crypto/x509; never NULL */
	const char *const *orgs; /* the O values, in order, NULL-terminated (maybe empty) */
};

/* True when t asks for TLS (a certificate as text or as a file). */
static inline bool http_tls_enabled(const struct http_tls *t)
{
	return t->cert_pem || t->cert_file;
}

/* Checks the names of t without loading anything, for a flag parser: 0, or -EINVAL with the
 * bad value in err ("unknown TLS version 'VersionTLS14'"). */
int http_tls_check(const struct http_tls *t, char *err, size_t errlen);
