/* Flags, serving loop and helpers shared by csi-controller and csi-node. */
#include "modules/csi/csi_common.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/log.h"
#include "common/base/signals.h"
#include "common/http/server.h"
#include "awsk8s_version.h"

struct csi_common_flags csi_flags;

bool csi_cap_is_block(const Csi__V1__VolumeCapability *cap)
{
	return cap && cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
}

bool csi_cap_supported(const Csi__V1__VolumeCapability *cap, bool allow_multi_attach)
{
	if (!cap || !cap->access_mode)
		return false;
	if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK &&
	    cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT)
		return false;
	switch (cap->access_mode->mode) {
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER:
		return true;
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER:
		return allow_multi_attach && csi_cap_is_block(cap);
	default:
		return false;
	}
}

int csi_parse_size(const char *s, long long *ret)
{
	static const struct {
		const char *sfx;
		long long mul;
	} units[] = {
	    {"Ki", 1LL << 10},	    {"Mi", 1LL << 20},	       {"Gi", 1LL << 30},
	    {"Ti", 1LL << 40},	    {"Pi", 1LL << 50},	       {"k", 1000LL},
	    {"K", 1000LL},	    {"M", 1000000LL},	       {"G", 1000000000LL},
	    {"T", 1000000000000LL}, {"P", 1000000000000000LL},
	};
	char num[32];
	size_t i = 0;
	long long v;

	if (!s)
		return -EINVAL;
	while (s[i] && isdigit((unsigned char)s[i]))
		i++;
	if (i == 0 || i >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, i);
	num[i] = 0;
	if (str_to_ll(num, 0, LLONG_MAX, &v) < 0)
		return -ERANGE;
	if (!s[i]) {
		*ret = v;
		return 0;
	}
	for (size_t u = 0; u < ARRAY_SIZE(units); u++)
		if (strcmp(s + i, units[u].sfx) == 0) {
			if (v > LLONG_MAX / units[u].mul)
				return -ERANGE;
			*ret = v * units[u].mul;
			return 0;
		}
	return -EINVAL;
}

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
		FILE *f;
		struct buf b = BUF_INIT(1 << 20);
		const char *files[2] = {csi_flags.metrics_cert, csi_flags.metrics_key};
		char **dst[2] = {&cert, &key};
		for (int i = 0; i < 2; i++) {
			char chunk[4096];
			size_t got;
			if (!(f = fopen(files[i], "re"))) {
				int e = -errno;
				log_error("cannot read the metrics TLS file",
					  KV_S("path", files[i]), KV_E(e));
				return e;
			}
			while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
				if ((r = buf_append(&b, chunk, got)) < 0)
					break;
			fclose(f);
			*dst[i] = buf_steal(&b);
		}
		o.tls_cert_pem = cert;
		o.tls_key_pem = key;
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
	if ((r = rpc_server_register(srv, csi_identity_methods, id)) < 0 ||
	    (methods && (r = rpc_server_register(srv, methods, ud)) < 0)) {
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
