/* The flags and the serving loop of csi-controller and csi-node (see plugin.h). */
#include "common/csi/plugin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/fileutil.h"
#include "common/base/log.h"
#include "common/base/signals.h"
#include "common/http/server.h"
#include "awsk8s_version.h"

struct csi_common_flags csi_flags;

#define CSI_TLS_FILE_MAX ((size_t)1 << 20)

static int health_check(void *ud, char *why, size_t n)
{
	struct csi_identity *id = ud;

	if (!id->probe)
		return 0;
	return id->probe(id->probe_ud, why, n);
}

static int start_http(const char *addr, bool metrics, struct csi_identity *id,
		      struct http_server **ret)
{
	_cleanup_free_ char *cert = NULL, *key = NULL;
	struct http_server_opts o = {.bind = addr};
	struct http_server *srv;
	int r;

	if (metrics && *csi_flags.metrics_cert && *csi_flags.metrics_key) {
		const char *files[2] = {csi_flags.metrics_cert, csi_flags.metrics_key};
		char **dst[2] = {&cert, &key};
		for (int i = 0; i < 2; i++) {
			/* a PEM file past the cap fails: never a truncated key or chain */
			if ((r = file_read_all(files[i], CSI_TLS_FILE_MAX, dst[i], NULL)) < 0) {
				log_error("cannot read the metrics TLS file",
					  KV_S("path", files[i]), KV_E(r));
				return r;
			}
		}
		o.tls.cert_pem = cert;
		o.tls.key_pem = key;
	}
	if ((r = http_server_new(&o, &srv)) < 0)
		return r;
	if ((r = http_server_add_standard(srv)) < 0 ||
	    (r = http_server_add_check(srv, HTTP_CHECK_HEALTHZ, "csi-probe", health_check, id)) <
		0 ||
	    (r = http_server_add_check(srv, HTTP_CHECK_READYZ, "csi-probe", health_check, id)) <
		0 ||
	    (r = http_server_start(srv)) < 0) {
		http_server_free(srv);
		return r;
	}
	*ret = srv;
	return 0;
}

int csi_serve(const char *component, struct csi_identity *id, const struct rpc_method *methods,
	      void *ud)
{
	const struct csi_service svc = {methods, ud};

	return csi_serve_services(component, id, &svc, methods ? 1 : 0);
}

int csi_serve_services(const char *component, struct csi_identity *id,
		       const struct csi_service *svcs, size_t n)
{
	struct http_server *metrics = NULL, *health = NULL;
	struct rpc_server *srv = NULL;
	int r;

	if (!id->name)
		id->name = csi_flags.driver_name;
	if (*csi_flags.http_endpoint &&
	    (r = start_http(csi_flags.http_endpoint, true, id, &metrics)) < 0) {
		log_error("failed to start the metrics server",
			  KV_S("address", csi_flags.http_endpoint), KV_E(r));
		goto out;
	}
	if (csi_flags.health_port > 0) {
		char addr[32];
		snprintf(addr, sizeof(addr), ":%lld", csi_flags.health_port);
		if ((r = start_http(addr, false, id, &health)) < 0) {
			log_error("failed to start the health server", KV_S("address", addr),
				  KV_E(r));
			goto out;
		}
	}
	/* Handlers block for seconds (attach waits, mkfs): room for the sidecars' workers. */
	if ((r = rpc_server_new(
		 &(struct rpc_server_opts){
		     .endpoint = csi_flags.endpoint, .max_workers = 64, .cancel = cancel_root()},
		 &srv)) < 0) {
		log_error("invalid --endpoint", KV_S("endpoint", csi_flags.endpoint), KV_E(r));
		goto out;
	}
	r = rpc_server_register(srv, csi_identity_methods, id);
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = rpc_server_register(srv, svcs[i].methods, svcs[i].ud);
	if (r < 0) {
		log_error("failed to register the CSI services", KV_E(r));
		goto out;
	}
	if ((r = rpc_server_start(srv)) < 0) {
		log_error("failed to serve the CSI endpoint", KV_S("endpoint", csi_flags.endpoint),
			  KV_E(r));
		goto out;
	}
	log_info("serving CSI", KV_S("component", component), KV_S("driver", id->name),
		 KV_S("endpoint", csi_flags.endpoint), KV_S("version", AWSK8S_VERSION),
		 KV_S("metrics", csi_flags.http_endpoint));
	stop_wait(-1);
	log_info("stopping: finishing the calls in flight",
		 KV_U("calls", rpc_server_inflight(srv)));
	r = 0;
out:
	rpc_server_free(srv);
	http_server_free(health);
	http_server_free(metrics);
	return r < 0 ? 1 : 0;
}
