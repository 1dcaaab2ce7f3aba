/* aws-k8s api-proxy: flags, the upstream sources, the health and metrics server, start and
 * stop. The set of upstreams comes from one of three sources, the first that has any:
 *   1. the EndpointSlices of the Service default/kubernetes (watched; with a kubeconfig,
 *      --master or in-cluster), as soon as they list a ready address;
 *   2. --upstream-file (re-read when it changes, checked every second);
 *   3. the --upstream flags.
 * A change is applied to the running proxy; open connections stay where they are. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/fileutil.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/http/server.h"
#include "common/kube/informer.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"
#include "common/metrics/metrics.h"
#include "modules/api-proxy/api_proxy.h"

static const char api_proxy_usage[] =
	"A TCP (L4) proxy from --listen to the Kubernetes API servers, the node's\n"
	"kubernetes-api-proxy (it replaces Deckhouse's nginx stream proxy and its reloader). TLS is\n"
	"passed through untouched: clients verify the API server's certificate themselves.\n"
	"\n"
	"Upstreams (HOST:PORT), from the first source that has any:\n"
	"  1. the EndpointSlices of the Service default/kubernetes (label\n"
	"     kubernetes.io/service-name=kubernetes; ready addresses, the port named https), watched\n"
	"     with --kubeconfig, --master or the in-cluster configuration (--watch-endpoints=false:\n"
	"     never); the client may well go through this proxy itself;\n"
	"  2. --upstream-file, re-read when it changes (checked every second): nginx's\n"
	"     `server HOST:PORT [params];` lines (the reloader's nginx_new.conf works as it is; the\n"
	"     rest of an nginx configuration is skipped) or one HOST:PORT a line, '#' comments. A\n"
	"     file that does not parse is logged and the previous set kept (as the reloader's\n"
	"     `nginx -t`);\n"
	"  3. --upstream, repeated or comma-separated.\n"
	"A change applies at once: new connections use the new set, open ones stay where they are.\n"
	"\n"
	"Choice: the node's own API server (an upstream whose address is --node-ip) first, else the\n"
	"one with the fewest open connections (nginx's least_conn). A connect that fails or takes\n"
	"longer than --connect-timeout marks the upstream down for --fail-timeout and the next one\n"
	"is tried at once (nginx's proxy_connect_timeout and proxy_next_upstream); the upstreams\n"
	"marked down are tried last. A connection without a byte either way for --idle-timeout is\n"
	"closed (nginx's proxy_timeout), so watches live on.\n"
	"\n"
	"With --health-listen, /healthz, /readyz, /livez (fail while the set of upstreams is empty)\n"
	"and /metrics: api_proxy_connections_total, api_proxy_connections_active,\n"
	"api_proxy_bytes_total{direction}, api_proxy_upstream_connect_failures_total{upstream},\n"
	"api_proxy_upstream_connections{upstream}, api_proxy_upstreams, ...\n"
	"\n"
	"Example (the static pod):\n"
	"  aws-k8s api-proxy --listen=127.0.0.1:6445 --node-ip=$(NODE_IP) \\\n"
	"      --upstream-file=/etc/kubernetes/kubernetes-api-proxy/nginx_new.conf \\\n"
	"      --kubeconfig=/etc/kubernetes/kubelet.conf --health-listen=127.0.0.1:6446";

static char *listen_addr, *upstream_file, *node_ip, *health_listen, *relay_mode;
static char **upstream_flags;
static bool watch_endpoints;
static int64_t connect_timeout, idle_timeout, fail_timeout;
static long long workers, max_connections, buffer_size;

static const struct flag api_proxy_flags[] = {
	{ "listen", FLAG_STRING, &listen_addr, "127.0.0.1:6445", NULL,
	  "The address to accept connections on (HOST:PORT, or :PORT for every address)." },
	{ "upstream", FLAG_STRLIST, &upstream_flags, NULL, NULL,
	  "An API server (HOST:PORT); repeatable, comma-separated. The last source of upstreams." },
	{ "upstream-file", FLAG_STRING, &upstream_file, "", NULL,
	  "A file of upstreams (nginx `server HOST:PORT;` lines or HOST:PORT lines), re-read on "
	  "change." },
	{ "node-ip", FLAG_STRING, &node_ip, "", "NODE_IP",
	  "This node's IP: the upstream at that address is preferred (the local API server)." },
	{ "watch-endpoints", FLAG_BOOL, &watch_endpoints, "true", NULL,
	  "Watch the EndpointSlices of default/kubernetes when a Kubernetes configuration is given." },
	{ "connect-timeout", FLAG_DURATION, &connect_timeout, "1s", NULL,
	  "How long a connect to an upstream may take before the next one is tried." },
	{ "fail-timeout", FLAG_DURATION, &fail_timeout, "10s", NULL,
	  "How long an upstream whose connect failed is tried only after the others." },
	{ "idle-timeout", FLAG_DURATION, &idle_timeout, "24h", NULL,
	  "A connection with no byte either way this long is closed." },
	{ "workers", FLAG_INT, &workers, "2", NULL,
	  "Event loops (threads), as nginx's worker_processes.", 1, 64 },
	{ "max-connections", FLAG_INT, &max_connections, "16384", NULL,
	  "Client connections open at once; past it new ones are closed at accept.", 1, 1000000 },
	{ "buffer-size", FLAG_INT, &buffer_size, "16384", NULL,
	  "Bytes buffered per direction of a connection.", 1024, 1 << 24 },
	{ "relay", FLAG_STRING, &relay_mode, "buffer", NULL,
	  "How bytes are moved: buffer (read/write) or splice (through a pipe, in the kernel).", 0,
	  0, "buffer,splice" },
	{ "health-listen", FLAG_STRING, &health_listen, "", NULL,
	  "Serve /healthz, /readyz, /livez and /metrics over HTTP on this address; empty: none." },
	KUBE_FLAGS_QPS("5", "10"),
	LOG_FLAGS,
	{ NULL },
};

/* The sources, guarded by mu; apply() makes the pool follow them. */
struct ap_sources {
	pthread_mutex_t mu;
	struct ap_proxy *p;
	char **flags, **file, **slices;
	char *active; /* which source the set came from */
};

static void apply(struct ap_sources *s)
{
	char err[512];
	const char *from = "--upstream";
	char **list = s->flags;

	pthread_mutex_lock(&s->mu);
	if (s->slices && *s->slices) {
		list = s->slices;
		from = "endpointslices";
	} else if (s->file && *s->file) {
		list = s->file;
		from = "file";
	}
	int r = ap_pool_set(&s->p->pool, list, err, sizeof(err));
	if (r < 0) {
		log_error("the new upstreams are refused; the previous ones stay", KV_S("source", from),
			  KV_S("error", err));
	} else if (r > 0 || !s->active || strcmp(s->active, from) != 0) {
		size_t n;
		_cleanup_free_ char *d = ap_pool_describe(&s->p->pool, &n);
		log_info("upstreams", KV_S("source", from), KV_I("count", n), KV_S("upstreams", d));
		free(s->active);
		s->active = strdup(from);
	}
	pthread_mutex_unlock(&s->mu);
}

/* ---- the upstream file ---- */
struct file_state {
	struct stat st;
	bool seen, missing_logged;
};

/* 1 when the file changed and parsed into *ret, 0 unchanged, -errno (logged) */
static int file_check(struct file_state *fs, char ***ret)
{
	struct stat st;
	_cleanup_free_ char *text = NULL;
	char **list = NULL, err[512];
	size_t len;
	int r;

	if (stat(upstream_file, &st) < 0) {
		if (!fs->missing_logged)
			log_warn("the upstream file cannot be read", KV_S("file", upstream_file),
				 KV_E(-errno));
		fs->missing_logged = true;
		return -errno;
	}
	fs->missing_logged = false;
	if (fs->seen && st.st_ino == fs->st.st_ino && st.st_size == fs->st.st_size &&
	    st.st_mtim.tv_sec == fs->st.st_mtim.tv_sec && st.st_mtim.tv_nsec == fs->st.st_mtim.tv_nsec)
		return 0;
	fs->st = st;
	fs->seen = true;
	if ((r = file_read_all(upstream_file, 1 << 20, &text, &len)) < 0) {
		log_error("the upstream file cannot be read", KV_S("file", upstream_file), KV_E(r));
		return r;
	}
	if ((r = ap_upstream_file_parse(text, len, &list, err, sizeof(err))) < 0) {
		log_error("the upstream file is refused; the previous upstreams stay",
			  KV_S("file", upstream_file), KV_S("error", err));
		strv_free(list);
		return r;
	}
	*ret = list;
	return 1;
}

/* ---- the EndpointSlices of default/kubernetes ---- */
static int slice_addresses(const cJSON *slice, char ***list)
{
	const cJSON *ports = cJSON_GetObjectItemCaseSensitive(slice, "ports"), *pt, *ep;
	const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(slice, "addressType"));
	double port = 0;

	cJSON_ArrayForEach(pt, ports)
	{
		const cJSON *num = cJSON_GetObjectItemCaseSensitive(pt, "port");
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pt, "name"));
		if (cJSON_IsNumber(num) && (port == 0 || (name && strcmp(name, "https") == 0)))
			port = num->valuedouble;
	}
	if (port < 1 || port > 65535 || (type && strcmp(type, "IPv4") && strcmp(type, "IPv6")))
		return 0;
	cJSON_ArrayForEach(ep, cJSON_GetObjectItemCaseSensitive(slice, "endpoints"))
	{
		const cJSON *ready = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(ep, "conditions"), "ready"),
			    *a;
		if (cJSON_IsFalse(ready))
			continue;
		cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(ep, "addresses"))
		{
			const char *ip = cJSON_GetStringValue(a);
			char hp[300];
			if (!ip || !*ip || strlen(ip) > 256)
				continue;
			snprintf(hp, sizeof(hp), strchr(ip, ':') ? "[%s]:%d" : "%s:%d", ip, (int)port);
			if (!strv_contains(*list, hp) && strv_push(list, hp) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}

struct slices {
	struct ap_sources *src;
	struct kube_informer *inf;
};

static void slices_changed(struct slices *sl)
{
	struct kube_obj **objs = NULL;
	size_t n = 0;
	char **list = NULL;

	if (!sl->inf || kube_store_list(kube_informer_store(sl->inf), &objs, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		slice_addresses(objs[i]->json, &list);
	kube_objv_free(objs, n);
	pthread_mutex_lock(&sl->src->mu);
	strv_free(sl->src->slices);
	sl->src->slices = list;
	pthread_mutex_unlock(&sl->src->mu);
	apply(sl->src);
}

static void on_add(void *ud, const cJSON *obj)
{
	slices_changed(ud);
}
static void on_update(void *ud, const cJSON *old, const cJSON *obj)
{
	if (old != obj)
		slices_changed(ud);
}
static void on_delete(void *ud, const cJSON *obj)
{
	slices_changed(ud);
}

/* ---- health and metrics ---- */
static int check_upstreams(void *ud, char *why, size_t n)
{
	struct ap_proxy *p = ud;
	size_t count;

	pthread_mutex_lock(&p->pool.mu);
	count = p->pool.n;
	pthread_mutex_unlock(&p->pool.mu);
	if (count)
		return 0;
	snprintf(why, n, "no upstream");
	return -EHOSTUNREACH;
}

static struct metric *m_conns, *m_active, *m_refused, *m_bytes, *m_fail, *m_timeouts, *m_idle,
	*m_noup, *m_ups, *m_changes, *m_up_conns, *m_up_active;

static void collect(void *ud)
{
	struct ap_proxy *p = ud;
	struct ap_stats st;

	ap_stats_get(p, &st);
	metric_set(m_conns, (double)st.accepted);
	metric_set(m_active, (double)(int64_t)st.active);
	metric_set(m_refused, (double)st.refused);
	metric_set(m_bytes, (double)st.bytes_in, "to_upstream");
	metric_set(m_bytes, (double)st.bytes_out, "to_client");
	metric_set(m_timeouts, (double)st.timeouts);
	metric_set(m_idle, (double)st.idle_closed);
	metric_set(m_noup, (double)st.no_upstream);
	pthread_mutex_lock(&p->pool.mu);
	metric_set(m_ups, (double)p->pool.n);
	metric_set(m_changes, (double)p->pool.changes);
	for (size_t i = 0; i < p->pool.n; i++) {
		const struct ap_upstream *u = p->pool.ups[i];
		metric_set(m_fail, (double)u->failures, u->name);
		metric_set(m_up_conns, (double)u->conns, u->name);
		metric_set(m_up_active, (double)u->active, u->name);
	}
	pthread_mutex_unlock(&p->pool.mu);
}

static void metrics_init(void)
{
	static const char *const up[] = { "upstream", NULL }, *const dir[] = { "direction", NULL };

	m_conns = metric_counter("api_proxy_connections_total", "Client connections accepted.", NULL);
	m_active = metric_gauge("api_proxy_connections_active", "Client connections open.", NULL);
	m_refused = metric_counter("api_proxy_connections_refused_total",
				   "Client connections closed at accept (--max-connections).", NULL);
	m_bytes = metric_counter("api_proxy_bytes_total", "Bytes relayed, by direction.", dir);
	m_fail = metric_counter("api_proxy_upstream_connect_failures_total",
				"Connects to an upstream that failed or timed out.", up);
	m_timeouts = metric_counter("api_proxy_upstream_connect_timeouts_total",
				    "Connects that took longer than --connect-timeout.", NULL);
	m_idle = metric_counter("api_proxy_idle_closed_total",
				"Connections closed after --idle-timeout without a byte.", NULL);
	m_noup = metric_counter("api_proxy_no_upstream_total",
				"Client connections closed because no upstream could be reached.", NULL);
	m_ups = metric_gauge("api_proxy_upstreams", "Upstreams in the current set.", NULL);
	m_changes = metric_counter("api_proxy_upstream_set_changes_total",
				   "Times the set of upstreams changed.", NULL);
	m_up_conns = metric_counter("api_proxy_upstream_connections_total",
				    "Connections made to an upstream (connects started).", up);
	m_up_active = metric_gauge("api_proxy_upstream_connections",
				   "Connections open to an upstream.", up);
}

/* Starts the EndpointSlice watch. Its kubeconfig may not exist yet (kubelet.conf appears after
 * kubelet's TLS bootstrap, which goes through this proxy): a failure is logged (first: a
 * warning) and retried by the caller, while the other sources serve. */
static int start_slices(struct slices *sl, struct cancel *stop, struct kube_client **kc, bool first)
{
	char err[512];
	int r;

	if ((r = kube_client_from_flags("api-proxy", kc, err, sizeof(err))) < 0) {
		if (first)
			log_warn("no Kubernetes client yet; the EndpointSlices are not watched, retrying "
				 "every 10 s",
				 KV_S("error", err));
		else
			log_v(2, "no Kubernetes client yet", KV_S("error", err));
		*kc = NULL;
		return r;
	}
	struct kube_informer_opts o = {
		.res = &kube_endpointslices,
		.ns = "default",
		.label_selector = "kubernetes.io/service-name=kubernetes",
		.handlers = { .on_add = on_add, .on_update = on_update, .on_delete = on_delete,
			      .ud = sl },
		.cancel = stop,
		.name = "endpointslices(default/kubernetes)",
	};
	if ((r = kube_informer_new(*kc, &o, &sl->inf)) < 0 || (r = kube_informer_start(sl->inf)) < 0) {
		log_error("cannot start the EndpointSlice watch", KV_E(r));
		kube_informer_free(sl->inf);
		sl->inf = NULL;
		kube_client_free(*kc);
		*kc = NULL;
		return r;
	}
	if (!first)
		log_info("watching the EndpointSlices of default/kubernetes");
	return 0;
}

static bool kube_configured(void)
{
	const char *env = getenv("KUBERNETES_SERVICE_HOST");
	return watch_endpoints && ((kube_flag_kubeconfig && *kube_flag_kubeconfig) ||
				   (kube_flag_master && *kube_flag_master) || (env && *env));
}

int api_proxy_main(int argc, char **argv)
{
	static struct ap_proxy p;
	static struct ap_sources src;
	struct slices sl = { &src, NULL };
	struct http_server *hs = NULL;
	struct kube_client *kc = NULL;
	struct cancel *stop = NULL;
	struct file_state fs = { 0 };
	char err[512];
	int64_t next_kube = 0;
	int n = flags_parse("api-proxy", api_proxy_usage, api_proxy_flags, argc, argv), r = 2;
	bool kube;

	if (n < 0)
		return flags_exit_code(n);
	kube = kube_configured();
	p.listen_fd = -1;
	for (char **u = upstream_flags; u && *u; u++) {
		char host[256];
		unsigned port;
		if (ap_hostport_split(*u, host, sizeof(host), &port) < 0) {
			fprintf(stderr, "api-proxy: --upstream '%s' is not HOST:PORT\n", *u);
			goto out;
		}
	}
	if (n > 0) {
		fprintf(stderr, "api-proxy: unexpected argument '%s'\n", argv[0]);
		goto out;
	}
	{
		char host[256];
		unsigned port;
		long long lp;
		if (!(listen_addr[0] == ':' && str_to_ll(listen_addr + 1, 0, 65535, &lp) == 0) &&
		    ap_hostport_split(listen_addr, host, sizeof(host), &port) < 0) {
			fprintf(stderr, "api-proxy: --listen '%s' is not HOST:PORT or :PORT\n",
				listen_addr);
			goto out;
		}
	}
	if (!strv_len(upstream_flags) && !*upstream_file && !kube) {
		fprintf(stderr, "api-proxy: no upstream: give --upstream, --upstream-file or a "
				"Kubernetes configuration (--kubeconfig)\n");
		goto out;
	}
	if (connect_timeout <= 0 || idle_timeout <= 0 || fail_timeout < 0) {
		fprintf(stderr, "api-proxy: --connect-timeout and --idle-timeout must be positive\n");
		goto out;
	}
	r = 1;
	ap_pool_init(&p.pool, node_ip, fail_timeout);
	p.connect_timeout_ns = connect_timeout;
	p.idle_timeout_ns = idle_timeout;
	p.buffer_size = (size_t)buffer_size;
	p.max_connections = max_connections;
	p.relay = strcmp(relay_mode, "splice") == 0 ? AP_RELAY_SPLICE : AP_RELAY_BUFFER;
	p.nloops = (unsigned)workers;
	pthread_mutex_init(&src.mu, NULL);
	src.p = &p;
	src.flags = upstream_flags;
	if (*upstream_file) {
		char **list = NULL;
		int fr = file_check(&fs, &list);
		if (fr == -EINVAL) /* a file that does not parse at start-up: nothing starts */
			goto out;
		src.file = list;
	}
	apply(&src);
	if (!src.active) /* an upstream that does not resolve */
		goto out;
	if (ap_listen(listen_addr, &p.listen_fd, err, sizeof(err)) < 0) {
		log_error("cannot listen", KV_S("address", listen_addr), KV_S("error", err));
		goto out;
	}
	if ((r = cancel_new(cancel_root(), &stop)) < 0 || (r = ap_loops_start(&p, stop)) < 0) {
		log_error("cannot start the event loops", KV_E(r));
		r = 1;
		goto out;
	}
	r = 1;
	if (*health_listen) {
		metrics_init();
		metrics_add_collector(collect, &p);
		if (http_server_new(&(struct http_server_opts){ .bind = health_listen }, &hs) < 0 ||
		    http_server_add_standard(hs) < 0 ||
		    http_server_add_check(hs, HTTP_CHECK_HEALTHZ, "upstreams", check_upstreams, &p) < 0 ||
		    http_server_add_check(hs, HTTP_CHECK_READYZ, "upstreams", check_upstreams, &p) < 0 ||
		    http_server_start(hs) < 0) {
			log_error("cannot serve the health endpoints", KV_S("address", health_listen));
			goto out;
		}
	}
	if (kube && start_slices(&sl, stop, &kc, true) < 0)
		next_kube = now_mono_ns() + 10 * NSEC_PER_SEC;
	log_info("serving", KV_S("address", listen_addr), KV_I("workers", p.nloops),
		 KV_S("relay", relay_mode), KV_B("endpointslices", kube),
		 KV_S("node-ip", node_ip), KV_S("health", health_listen));
	/* the file is checked every second until SIGTERM */
	while (!cancel_wait(cancel_root(), NSEC_PER_SEC)) {
		char **list = NULL;
		if (next_kube && now_mono_ns() >= next_kube)
			next_kube = start_slices(&sl, stop, &kc, false) < 0 ?
					    now_mono_ns() + 10 * NSEC_PER_SEC :
					    0;
		if (*upstream_file && file_check(&fs, &list) > 0) {
			pthread_mutex_lock(&src.mu);
			strv_free(src.file);
			src.file = list;
			pthread_mutex_unlock(&src.mu);
			apply(&src);
		}
	}
	log_info("stopping");
	r = 0;
out:
	if (stop)
		cancel_cancel(stop);
	if (sl.inf)
		kube_informer_stop(sl.inf);
	http_server_free(hs);
	if (*health_listen && m_conns)
		metrics_remove_collector(collect, &p);
	ap_loops_stop(&p);
	kube_informer_free(sl.inf);
	kube_client_free(kc);
	if (p.listen_fd >= 0)
		close(p.listen_fd);
	if (r != 2) {
		ap_pool_release(&p.pool);
		strv_free(src.file);
		strv_free(src.slices);
		free(src.active);
		pthread_mutex_destroy(&src.mu);
	}
	cancel_free(stop);
	flags_free(api_proxy_flags);
	return r;
}
