/* aws-k8s serve: runs only the shared HTTP server (/metrics, /healthz, /readyz, /livez). It is
 * the smallest process the base can make: for smoke tests of the shared core, for measuring
 * what the base costs, and as a liveness stand-in when debugging a deployment. */
#include "modules/serve/serve.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/base/cancel.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/http/server.h"

static const char serve_usage[] =
	"Serves the shared metrics and health endpoints and nothing else, until SIGTERM or SIGINT.\n"
	"Metrics are in the Prometheus text format; /healthz, /readyz and /livez answer \"ok\"\n"
	"(add ?verbose for the checks). With --tls-cert-file the metrics address serves HTTPS,\n"
	"with the TLS flags of kube-rbac-proxy (the files are re-read when they change).";

static char *metrics_bind;
static char *health_bind;
static char *tls_cert, *tls_key, *tls_min, *tls_ciphers, *client_ca;

static const struct flag serve_flags[] = {
	{ "metrics-bind-address", FLAG_STRING, &metrics_bind, ":8080", NULL,
	  "The address the metrics endpoint binds to (host:port; port 0 picks a free one)." },
	{ "health-probe-bind-address", FLAG_STRING, &health_bind, "", NULL,
	  "The address the health endpoints bind to; empty serves them on the metrics address." },
	{ "tls-cert-file", FLAG_STRING, &tls_cert, "", NULL,
	  "File containing the default x509 Certificate for HTTPS (CA cert, if any, concatenated "
	  "after server cert); empty serves plain HTTP." },
	{ "tls-private-key-file", FLAG_STRING, &tls_key, "", NULL,
	  "File containing the default x509 private key matching --tls-cert-file." },
	{ "tls-min-version", FLAG_STRING, &tls_min, "VersionTLS12", NULL,
	  "Minimum TLS version supported. Value must match version names from "
	  "https://golang.org/pkg/crypto/tls/#pkg-constants." },
	{ "tls-cipher-suites", FLAG_STRING, &tls_ciphers, "", NULL,
	  "Comma-separated list of cipher suites for the server. If omitted, the default Go "
	  "cipher suites will be used." },
	{ "client-ca-file", FLAG_STRING, &client_ca, "", NULL,
	  "If set, only clients presenting a certificate signed by one of the authorities in the "
	  "file are served (re-read when it changes)." },
	LOG_FLAGS,
	{ NULL },
};

static int start_server(const char *addr, bool metrics, bool health, struct http_server **ret)
{
	struct http_server_opts o = { .bind = addr };
	struct http_server *s;
	int r;

	if (metrics && *tls_cert)
		o.tls = (struct http_tls){ .cert_file = tls_cert,
					   .key_file = tls_key,
					   .client_ca_file = *client_ca ? client_ca : NULL,
					   .min_version = tls_min,
					   .cipher_suites = tls_ciphers };
	if ((r = http_server_new(&o, &s)) < 0)
		return r;
	if ((r = http_server_add_standard(s)) < 0 || (r = http_server_start(s)) < 0) {
		http_server_free(s);
		return r;
	}
	(void)metrics;
	(void)health;
	log_info("serving", KV_S("address", addr), KV_I("port", http_server_port(s)),
		 KV_B("metrics", metrics), KV_B("health", health), KV_B("tls", metrics && *tls_cert));
	*ret = s;
	return 0;
}

int serve_main(int argc, char **argv)
{
	struct http_server *m = NULL, *h = NULL;
	int r, n = flags_parse("serve", serve_usage, serve_flags, argc, argv);

	if (n < 0)
		return flags_exit_code(n);
	if (n > 0) {
		fprintf(stderr, "aws-k8s serve: unexpected argument '%s'\n", argv[0]);
		flags_free(serve_flags);
		return 2;
	}
	char err[256];
	if (http_tls_check(&(struct http_tls){ .min_version = tls_min, .cipher_suites = tls_ciphers },
			   err, sizeof(err)) < 0) {
		fprintf(stderr, "aws-k8s serve: %s\n", err);
		flags_free(serve_flags);
		return 2;
	}
	bool split = health_bind && *health_bind;
	if ((r = start_server(metrics_bind, true, !split, &m)) < 0) {
		log_error("failed to start the metrics server", KV_S("address", metrics_bind), KV_E(r));
		goto out;
	}
	if (split && (r = start_server(health_bind, false, true, &h)) < 0) {
		log_error("failed to start the health server", KV_S("address", health_bind), KV_E(r));
		goto out;
	}
	cancel_wait(cancel_root(), -1); /* until SIGTERM/SIGINT */
	log_info("stopping");
out:
	http_server_free(h);
	http_server_free(m);
	flags_free(serve_flags);
	return r < 0 ? 1 : 0;
}
