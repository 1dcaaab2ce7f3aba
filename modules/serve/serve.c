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
	"(add ?verbose for the checks).";

static char *metrics_bind;
static char *health_bind;

static const struct flag serve_flags[] = {
	{ "metrics-bind-address", FLAG_STRING, &metrics_bind, ":8080", NULL,
	  "The address the metrics endpoint binds to (host:port; port 0 picks a free one)." },
	{ "health-probe-bind-address", FLAG_STRING, &health_bind, "", NULL,
	  "The address the health endpoints bind to; empty serves them on the metrics address." },
	LOG_FLAGS,
	{ NULL },
};

static int start_server(const char *addr, bool metrics, bool health, struct http_server **ret)
{
	struct http_server *s;
	int r = http_server_new(&(struct http_server_opts){ .bind = addr }, &s);
	if (r < 0)
		return r;
	if ((r = http_server_add_standard(s)) < 0 || (r = http_server_start(s)) < 0) {
		http_server_free(s);
		return r;
	}
	(void)metrics;
	(void)health;
	log_info("serving", KV_S("address", addr), KV_I("port", http_server_port(s)),
		 KV_B("metrics", metrics), KV_B("health", health));
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
