#include "common/http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/http/tls_internal.h"
#include "common/metrics/metrics.h"

#define MAX_HANDLERS 32
#define MAX_CHECKS 32

struct handler {
	char *path;
	bool prefix;
	http_handler_fn fn;
	void *ud;
};

struct check {
	enum http_check_kind kind;
	char *name;
	http_check_fn fn;
	void *ud;
};

struct http_server {
	struct http_server_opts opts;
	char *bind;
	struct tls_src *tls;	  /* HTTPS: the context */
	struct tls_relay *relay; /* and the relay in front of MHD, once started */
	struct MHD_Daemon *daemon;
	int listen_fd;
	int port;
	pthread_mutex_t lock;
	struct handler handlers[MAX_HANDLERS];
	size_t nhandlers;
	struct check checks[MAX_CHECKS];
	size_t nchecks;
};

/* Per-connection request state: the body collected so far. */
struct req_state {
	struct buf body;
	bool too_large;
};

int http_parse_bind(const char *bind, char *host, size_t hostlen, int *ret_port)
{
	const char *colon;
	long long port;
	size_t hl;

	if (!bind || !*bind)
		return -EINVAL;
	if (bind[0] == '[') {
		const char *end = strchr(bind, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		hl = (size_t)(end - bind - 1);
		if (hl >= hostlen)
			return -EINVAL;
		memcpy(host, bind + 1, hl);
		host[hl] = 0;
		colon = end + 1;
	} else {
		colon = strrchr(bind, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - bind);
		if (hl >= hostlen)
			return -EINVAL;
		memcpy(host, bind, hl);
		host[hl] = 0;
	}
	if (str_to_ll(colon + 1, 0, 65535, &port) < 0)
		return -EINVAL;
	*ret_port = (int)port;
	return 0;
}

static int open_listener(const char *addr, int *ret_fd, int *ret_port)
{
	char host[256], portstr[16];
	int port, fd = -1, r, one = 1;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res = NULL;

	if ((r = http_parse_bind(addr, host, sizeof(host), &port)) < 0)
		return r;
	snprintf(portstr, sizeof(portstr), "%d", port);
	if (getaddrinfo(*host ? host : NULL, portstr, &hints, &res) != 0 || !res)
		return -EADDRNOTAVAIL;
	/* with no host, prefer the IPv6 wildcard (dual stack), as Go's ":port" does */
	struct addrinfo *ai = res;
	if (!*host)
		for (struct addrinfo *a = res; a; a = a->ai_next)
			if (a->ai_family == AF_INET6) {
				ai = a;
				break;
			}
	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ai->ai_family == AF_INET6) {
		int zero = 0;
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	}
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
		r = -errno;
		goto out;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		r = -errno;
		goto out;
	}
	*ret_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						    : ((struct sockaddr_in *)&ss)->sin_port);
	*ret_fd = fd;
	fd = -1;
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return r;
}

const char *http_request_header(const struct http_server_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *http_request_query(const struct http_server_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

struct key_search {
	const char *name;
	bool found;
};

static enum MHD_Result key_iter(void *cls, enum MHD_ValueKind kind, const char *key,
				const char *value)
{
	struct key_search *ks = cls;
	if (key && strcmp(key, ks->name) == 0) {
		ks->found = true;
		return MHD_NO;
	}
	return MHD_YES;
}

bool http_request_has_query(const struct http_server_request *req, const char *name)
{
	struct key_search ks = { name, false };
	MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, key_iter, &ks);
	return ks.found;
}

int http_reply_header(struct http_server_reply *rep, const char *name, const char *value)
{
	char *line;

	if (rep->n_headers == ARRAY_SIZE(rep->headers))
		return -ENOSPC;
	if (strpbrk(value, "\r\n") || strpbrk(name, "\r\n:"))
		return -EINVAL;
	if (asprintf(&line, "%s: %s", name, value) < 0)
		return -ENOMEM;
	rep->headers[rep->n_headers++] = line;
	return 0;
}

int http_reply_text(struct http_server_reply *rep, int status, const char *text)
{
	rep->status = status;
	buf_reset(&rep->body);
	return buf_puts(&rep->body, text);
}

static const struct handler *find_handler(struct http_server *s, const char *path)
{
	const struct handler *best = NULL;

	for (size_t i = 0; i < s->nhandlers; i++) {
		const struct handler *h = &s->handlers[i];
		if (h->prefix ? str_has_prefix(path, h->path) : strcmp(path, h->path) == 0)
			best = h;
	}
	return best;
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, struct http_server_reply *rep)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(rep->body.len, rep->body.data ? rep->body.data : (char *)"",
					       MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				rep->content_type ? rep->content_type : "text/plain; charset=utf-8");
	for (size_t i = 0; i < rep->n_headers; i++) {
		char *colon = strchr(rep->headers[i], ':');
		*colon = 0;
		MHD_add_response_header(resp, rep->headers[i], colon + 2);
		*colon = ':';
	}
	ret = MHD_queue_response(conn, (unsigned)rep->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void reply_release(struct http_server_reply *rep)
{
	buf_release(&rep->body);
	for (size_t i = 0; i < rep->n_headers; i++)
		free(rep->headers[i]);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct http_server *s = cls;
	struct req_state *st = *con_cls;

	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return MHD_NO;
		buf_init(&st->body, s->opts.max_body);
		*con_cls = st;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!st->too_large && buf_append(&st->body, upload, *upload_size) < 0)
			st->too_large = true;
		*upload_size = 0;
		return MHD_YES;
	}

	struct http_server_reply rep = { .status = 200 };
	buf_init(&rep.body, 0);
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char addr[INET6_ADDRSTRLEN + 8] = "";
	if (ci && ci->client_addr)
		http_format_addr(ci->client_addr, addr, sizeof(addr));
	struct http_server_request req = { .method = method, .path = url, .body = st->body.data,
					   .body_len = st->body.len, .conn = conn,
					   .remote_addr = addr,
					   .client_cert = s->relay ? tls_relay_client_cert(conn) : NULL };
	if (st->too_large) {
		http_reply_text(&rep, 413, "request body too large\n");
	} else {
		pthread_mutex_lock(&s->lock);
		const struct handler *h = find_handler(s, url);
		struct handler hc = h ? *h : (struct handler){ 0 };
		pthread_mutex_unlock(&s->lock);
		if (!hc.fn) {
			http_reply_text(&rep, 404, "404 page not found\n");
		} else {
			int r = hc.fn(hc.ud, &req, &rep);
			if (r < 0) {
				log_v(2, "handler failed", KV_S("path", url), KV_E(r));
				http_reply_text(&rep, 500, "internal error\n");
			}
		}
	}
	log_v(5, "http request", KV_S("method", method), KV_S("path", url),
	      KV_I("status", rep.status), KV_S("remote", addr));
	enum MHD_Result ret = send_reply(conn, &rep);
	reply_release(&rep);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct req_state *st = *con_cls;
	if (st) {
		buf_release(&st->body);
		free(st);
		*con_cls = NULL;
	}
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = 0;
	log_v(2, "http server", KV_S("detail", msg));
}

int http_server_new(const struct http_server_opts *opts, struct http_server **ret)
{
	struct http_server *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->opts = *opts;
	s->listen_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	s->bind = strdup(opts->bind ? opts->bind : "127.0.0.1:0");
	if (!s->bind) {
		http_server_free(s);
		return -ENOMEM;
	}
	if (http_tls_enabled(&opts->tls) || opts->tls.key_pem || opts->tls.key_file) {
		char err[256] = "";
		int r = tls_src_new(&opts->tls, &s->tls, err, sizeof(err));
		if (r < 0) {
			log_error("cannot serve HTTPS", KV_S("address", s->bind), KV_S("error", err),
				  KV_E(r));
			http_server_free(s);
			return r;
		}
	}
	s->opts.tls = (struct http_tls){ 0 }; /* the caller's strings: copied into s->tls */
	if (!s->opts.max_body)
		s->opts.max_body = 1 << 20;
	if (!s->opts.max_connections)
		s->opts.max_connections = 256;
	if (!s->opts.threads)
		s->opts.threads = 1;
	if (!s->opts.connection_timeout_ns)
		s->opts.connection_timeout_ns = 60 * NSEC_PER_SEC;
	*ret = s;
	return 0;
}

int http_server_handle(struct http_server *s, const char *path, bool prefix, http_handler_fn fn,
		       void *ud)
{
	char *p;

	if (s->nhandlers == MAX_HANDLERS)
		return -ENOSPC;
	if (!(p = strdup(path)))
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	s->handlers[s->nhandlers++] = (struct handler){ p, prefix, fn, ud };
	pthread_mutex_unlock(&s->lock);
	// cppcheck-suppress memleak ; owned by s->handlers
	return 0;
}

int http_server_add_check(struct http_server *s, enum http_check_kind kind, const char *name,
			  http_check_fn fn, void *ud)
{
	char *n;

	if (s->nchecks == MAX_CHECKS)
		return -ENOSPC;
	if (!(n = strdup(name)))
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	s->checks[s->nchecks++] = (struct check){ kind, n, fn, ud };
	pthread_mutex_unlock(&s->lock);
	// cppcheck-suppress memleak ; owned by s->checks
	return 0;
}

static int metrics_handler(void *ud, const struct http_server_request *req,
			   struct http_server_reply *rep)
{
	int r = metrics_write(&rep->body);
	if (r < 0)
		return r;
	rep->content_type = "text/plain; version=0.0.4; charset=utf-8";
	return 0;
}

/* Kubernetes-style health endpoints: "ok", or per-check lines with ?verbose. */
static int health_handler(struct http_server *s, enum http_check_kind kind, const char *base,
			  const struct http_server_request *req, struct http_server_reply *rep)
{
	const char *only = req->path[strlen(base)] == '/' ? req->path + strlen(base) + 1 : NULL;
	bool verbose = http_request_has_query(req, "verbose");
	bool failed = false, found = false;
	struct buf detail;
	struct check cs[MAX_CHECKS];
	size_t n = 0;

	if (req->path[strlen(base)] != 0 && !only)
		return http_reply_text(rep, 404, "404 page not found\n");
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nchecks; i++)
		if (s->checks[i].kind == kind)
			cs[n++] = s->checks[i];
	pthread_mutex_unlock(&s->lock);
	buf_init(&detail, 1 << 16);
	buf_puts(&detail, "[+]ping ok\n");
	for (size_t i = 0; i < n; i++) {
		char why[256] = "";
		if (only && strcmp(only, cs[i].name) != 0)
			continue;
		found = true;
		int r = cs[i].fn(cs[i].ud, why, sizeof(why));
		if (r < 0) {
			failed = true;
			buf_printf(&detail, "[-]%s failed: %s\n", cs[i].name, *why ? why : "reason withheld");
		} else {
			buf_printf(&detail, "[+]%s ok\n", cs[i].name);
		}
	}
	if (only && !found && strcmp(only, "ping") != 0) {
		buf_release(&detail);
		return http_reply_text(rep, 404, "404 page not found\n");
	}
	rep->status = failed ? 500 : 200;
	if (verbose || failed) {
		buf_append(&rep->body, detail.data, detail.len);
		buf_printf(&rep->body, "%s check %s\n", base + 1, failed ? "failed" : "passed");
	} else {
		buf_puts(&rep->body, "ok");
	}
	buf_release(&detail);
	return 0;
}

static int healthz_handler(void *ud, const struct http_server_request *req,
			   struct http_server_reply *rep)
{
	return health_handler(ud, HTTP_CHECK_HEALTHZ, "/healthz", req, rep);
}

static int readyz_handler(void *ud, const struct http_server_request *req,
			  struct http_server_reply *rep)
{
	return health_handler(ud, HTTP_CHECK_READYZ, "/readyz", req, rep);
}

static int livez_handler(void *ud, const struct http_server_request *req,
			 struct http_server_reply *rep)
{
	return health_handler(ud, HTTP_CHECK_LIVEZ, "/livez", req, rep);
}

int http_server_add_standard(struct http_server *s)
{
	int r;

	metrics_register_process();
	if ((r = http_server_handle(s, "/metrics", false, metrics_handler, NULL)) < 0 ||
	    (r = http_server_handle(s, "/healthz", true, healthz_handler, s)) < 0 ||
	    (r = http_server_handle(s, "/readyz", true, readyz_handler, s)) < 0 ||
	    (r = http_server_handle(s, "/livez", true, livez_handler, s)) < 0)
		return r;
	return 0;
}

int http_server_start(struct http_server *s)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL_LINUX_ONLY |
			 MHD_USE_ERROR_LOG;
	int r;

	if ((r = open_listener(s->bind, &s->listen_fd, &s->port)) < 0)
		return r;
	if (s->opts.thread_per_connection)
		flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			MHD_USE_POLL | MHD_USE_ERROR_LOG;
	struct MHD_OptionItem ops[16];
	size_t n = 0;
	if (s->tls) {
		/* the relay owns the listener and hands MHD its connections once decrypted */
		struct tls_relay_opts ro = { .src = s->tls,
					     .listen_fd = s->listen_fd,
					     .threads = s->opts.threads,
					     .max_connections = s->opts.max_connections,
					     .idle_timeout_ns = s->opts.connection_timeout_ns };
		if ((r = tls_relay_new(&ro, &s->relay)) < 0)
			goto fail;
		flags |= MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
		ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_CONNECTION,
						    (intptr_t)tls_relay_notify, s->relay };
	} else {
		ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, s->listen_fd, NULL };
	}
	ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s };
	ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, s->opts.max_connections, NULL };
	ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT,
					    (intptr_t)(s->opts.connection_timeout_ns / NSEC_PER_SEC), NULL };
	if (!s->opts.thread_per_connection && s->opts.threads > 1)
		ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE, s->opts.threads, NULL };
	ops[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
				     on_mhd_log, s, MHD_OPTION_ARRAY, ops, MHD_OPTION_END);
	if (!s->daemon) {
		r = -EIO;
		goto fail;
	}
	if (s->relay && (r = tls_relay_start(s->relay, s->daemon)) < 0)
		goto fail;
	log_v(1, "http server listening", KV_S("address", s->bind), KV_I("port", s->port),
	      KV_B("tls", s->tls != NULL));
	return 0;
fail:
	tls_relay_stop(s->relay);
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	s->daemon = NULL;
	tls_relay_free(s->relay);
	s->relay = NULL;
	close(s->listen_fd);
	s->listen_fd = -1;
	return r;
}

int http_server_port(const struct http_server *s)
{
	return s->port;
}

void http_server_free(struct http_server *s)
{
	if (!s)
		return;
	/* the relay first: its connections close, so MHD's do; then MHD, which drops their
	 * identities as it closes them */
	tls_relay_stop(s->relay);
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	tls_relay_free(s->relay);
	tls_src_free(s->tls);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	for (size_t i = 0; i < s->nhandlers; i++)
		free(s->handlers[i].path);
	for (size_t i = 0; i < s->nchecks; i++)
		free(s->checks[i].name);
	free(s->bind);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
