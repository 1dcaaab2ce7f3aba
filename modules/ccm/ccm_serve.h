/* The ccm's HTTPS endpoint (/healthz, /readyz, /livez, /metrics) on
 * --bind-address:--secure-port, with --tls-cert-file/--tls-private-key-file or a self-signed
 * certificate made at start (written to --cert-dir when set, kept in memory otherwise, as
 * upstream). /readyz waits for the Node informer's sync, /healthz fails once the leader
 * election ended while running. */
#pragma once
#include <stddef.h>

#include "modules/ccm/ccm_ctx.h"

struct http_server;
struct ccm_serve_opts {
	const char *bind_address;
	long long port;
	const char *cert_dir;
	const char *cert_file;
	const char *key_file;
};
int ccm_serve_start(const struct ccm_serve_opts *o, struct ccm *m, struct http_server **ret,
		    char *err, size_t errlen);
/* A self-signed certificate and key (PEM) for the given host names and IPs (ECDSA P-256, CN
 * "<cn>@<unix time>", CA:TRUE with serverAuth, one year), as client-go's
 * GenerateSelfSignedCertKey; made by common/x509. */
int ccm_self_signed(const char *cn, const char *const *dns, const char *const *ips, char **ret_cert,
		    char **ret_key, char *err, size_t errlen);
