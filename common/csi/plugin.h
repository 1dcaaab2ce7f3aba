/* What the two plugins of the EBS CSI driver (csi-controller and csi-node) share to run: the
 * flags both take (with the upstream names) and the serving loop, which registers the Identity
 * service (identity.h). The volume helpers are in volume.h, the error type in error.h, the
 * gRPC glue in grpc.h.
 *
 *   static const struct flag node_flags[] = {
 *           CSI_COMMON_FLAGS,
 *           { "volume-attach-limit", FLAG_INT, &limit, "-1", NULL, "..." },
 *           LOG_FLAGS,
 *           { NULL },
 *   };
 *   n = flags_parse("csi-node", usage, node_flags, argc, argv);
 *   ...
 *   struct csi_identity id = { .controller = false };          // name/version from the flags
 *   return csi_serve("csi-node", &id, csi_node_methods, node);  // until SIGTERM; exit code
 *
 * Several services on one endpoint (mode all):
 *
 *   const struct csi_service svcs[] = { { csi_ctrl_methods, ctrl }, { csi_node_methods, node } };
 *   return csi_serve_services("ebs-csi-driver", &id, svcs, 2);
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/base/flags.h"
#include "common/csi/identity.h"
#include "common/grpc/server.h"

#define CSI_ENDPOINT_DEFAULT "unix:///csi/csi.sock"

struct csi_common_flags {
	char *endpoint;	       /* --endpoint / $CSI_ENDPOINT */
	char *http_endpoint;   /* --http-endpoint: metrics (and health) server, "" = off */
	char *metrics_cert;    /* --metrics-cert-file */
	char *metrics_key;     /* --metrics-key-file */
	long long health_port; /* --health-port: /healthz as livenessprobe serves it; 0: off */
	char *driver_name;     /* --driver-name */
	bool otel;	       /* --enable-otel-tracing (accepted, no effect: named in the warning) */
};
extern struct csi_common_flags csi_flags;

/* clang-format off */
#define CSI_COMMON_FLAGS                                                                           \
	{ "endpoint", FLAG_STRING, &csi_flags.endpoint, CSI_ENDPOINT_DEFAULT, "CSI_ENDPOINT",       \
	  "CSI endpoint (unix:///path/csi.sock, or tcp://host:port)." },                          \
	{ "http-endpoint", FLAG_STRING, &csi_flags.http_endpoint, "", NULL,                        \
	  "The TCP network address where the HTTP server for metrics (and /healthz) will listen "  \
	  "(example: `:8080`). The default is empty string, which means the server is disabled." }, \
	{ "metrics-cert-file", FLAG_STRING, &csi_flags.metrics_cert, "", NULL,                     \
	  "The path to a certificate to use for serving the metrics server over HTTPS." },        \
	{ "metrics-key-file", FLAG_STRING, &csi_flags.metrics_key, "", NULL,                       \
	  "The path to a key to use for serving the metrics server over HTTPS." },                \
	{ "health-port", FLAG_INT, &csi_flags.health_port, "0", NULL,                              \
	  "Serve /healthz (a CSI Probe) on this port, as the livenessprobe sidecar does; 0 turns " \
	  "it off.", 0, 65535 },                                                                   \
	{ "driver-name", FLAG_STRING, &csi_flags.driver_name, CSI_DRIVER_NAME_DEFAULT,            \
	  "CSI_DRIVER_NAME", "The CSI driver name reported by GetPluginInfo." },                  \
	{ "enable-otel-tracing", FLAG_BOOL, &csi_flags.otel, "false", NULL,                       \
	  "Enable OpenTelemetry tracing (configured by the OTEL_* variables).", .no_effect = true }
/* clang-format on */

/* Serves the Identity service plus `methods` (userdata `ud`) on --endpoint, and the HTTP
 * endpoints asked for, until SIGTERM/SIGINT; then stops gracefully. Returns the exit code. */
int csi_serve(const char *component, struct csi_identity *id, const struct rpc_method *methods,
	      void *ud);

/* One service csi_serve_services registers: its method table and their userdata. */
struct csi_service {
	const struct rpc_method *methods;
	void *ud;
};
/* As csi_serve, with the Identity service and the n services of svcs on the one endpoint
 * (aws-k8s ebs-csi-driver all: Controller and Node, as upstream's mode all serves them). */
int csi_serve_services(const char *component, struct csi_identity *id,
		       const struct csi_service *svcs, size_t n);
