/* HTTP server over libmicrohttpd, used by every subcommand for /metrics, /healthz, /readyz and
 * /livez, with a small API to add handlers.
 *
 *   struct http_server *s;
 *   r = http_server_new(&(struct http_server_opts){ .bind = ":10258" }, &s);
 *   http_server_add_standard(s);                      // /metrics /healthz /readyz /livez
 *   http_server_add_check(s, HTTP_CHECK_READYZ, "informers-synced", synced_fn, ctx);
 *   http_server_handle(s, "/debug/", true, debug_handler, ctx);
 *   r = http_server_start(s);
 *   ...
 *   http_server_free(s);                              // stops, waits for handlers
 *
 * Handlers run on the server's threads and must not block for long unless the server was
 * created with thread_per_connection.
 *
 * HTTPS (opts.tls, see tls.h) is OpenSSL's: libmicrohttpd parses HTTP only, behind a relay
 * that does the TLS (tls_internal.h); a verified client certificate reaches the handler as
 * req->client_cert. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"
#include "common/http/tls.h"

struct http_server;
struct MHD_Connection;

struct http_server_opts {
	const char *bind;       /* "host:port", ":port", "[v6]:port"; port 0 picks a free one */
	struct http_tls tls;           /* HTTPS when it has a certificate (copied by _new) */
	unsigned threads;              /* worker threads, and TLS relay threads (default 1) */
	bool thread_per_connection;    /* for handlers that block (e.g. proxies) */
	size_t max_body;               /* cap on a request body; default 1 MiB */
	unsigned max_connections;      /* default 256 (with TLS: handshaking ones too) */
	int64_t connection_timeout_ns; /* idle connections closed after; default 60 s */
};

struct http_server_request {
	const char *method;
	const char *path; /* without the query */
	const char *body;
	size_t body_len;
	struct MHD_Connection *conn;
	const char *remote_addr; /* "ip:port" */
	const struct http_client_cert *client_cert; /* verified (HTTPS with a client CA), or NULL */
};

struct http_server_reply {
	int status;
	struct buf body;
	const char *content_type; /* default text/plain; charset=utf-8 */
	char *headers[16];        /* "Name: value" lines, malloc'd (http_reply_header) */
	size_t n_headers;
};

/* Returns 0 with the reply filled, or a negative errno for a 500. */
typedef int (*http_handler_fn)(void *ud, const struct http_server_request *req,
			       struct http_server_reply *rep);

enum http_check_kind { HTTP_CHECK_HEALTHZ, HTTP_CHECK_READYZ, HTTP_CHECK_LIVEZ };
/* A health check: 0 healthy, or a negative errno with a reason written to why. */
typedef int (*http_check_fn)(void *ud, char *why, size_t n);

int http_server_new(const struct http_server_opts *opts, struct http_server **ret);
/* exact path, or with prefix every path starting with it; the last match registered wins */
int http_server_handle(struct http_server *s, const char *path, bool prefix, http_handler_fn fn,
		       void *ud);
/* /metrics (Prometheus text format), /healthz, /readyz, /livez (Kubernetes style: "ok", or
 * "[+]name ok" / "[-]name failed: reason" lines with ?verbose, 500 when a check fails; a
 * sub-path /readyz/<name> runs one check). Registers the process metrics. */
int http_server_add_standard(struct http_server *s);
int http_server_add_check(struct http_server *s, enum http_check_kind kind, const char *name,
			  http_check_fn fn, void *ud);
int http_server_start(struct http_server *s);
/* The port bound (useful with port 0). */
int http_server_port(const struct http_server *s);
void http_server_free(struct http_server *s);

/* Request helpers for handlers. */
const char *http_request_header(const struct http_server_request *req, const char *name);
const char *http_request_query(const struct http_server_request *req, const char *name);
/* True when the query has the key, with or without a value ("?verbose"). */
bool http_request_has_query(const struct http_server_request *req, const char *name);
int http_reply_header(struct http_server_reply *rep, const char *name, const char *value);
int http_reply_text(struct http_server_reply *rep, int status, const char *text);

/* Parses a bind address into host and port (host "" means every address). */
int http_parse_bind(const char *bind, char *host, size_t hostlen, int *ret_port);
