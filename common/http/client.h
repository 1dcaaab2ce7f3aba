/* HTTP client over libcurl.
 *
 * One struct http_client holds the settings for one peer (timeouts, TLS material, bearer
 * token, response cap). It is safe to use from several threads at once: each thread gets its
 * own curl easy handle (kept per thread and per client, so connections are reused), and
 * curl_global_init is done once by main(). The proxy environment variables (HTTPS_PROXY,
 * HTTP_PROXY, NO_PROXY, lower-case too) are honoured as libcurl does.
 *
 * Results: 0 when an HTTP reply arrived (whatever its status: check resp->status), or a
 * negative errno for transport failures: -ETIMEDOUT (connect or total timeout), -ECONNREFUSED,
 * -EHOSTUNREACH (resolve/connect failures), -EMSGSIZE (reply over max_response),
 * -EPROTO (TLS or protocol error), -ECONNRESET (peer closed early), -ECANCELED (callback
 * asked to stop), -ENOMEM, -EINVAL (bad arguments, a header holding CR/LF, a URL that is not
 * http or https). A short description of the last failure is in resp->error. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"

struct http_client_opts {
	int64_t connect_timeout_ns; /* 0: 10 s */
	int64_t timeout_ns;         /* total per request; 0: 60 s; streams use their own */
	const char *ca_file;        /* PEM bundle to trust; NULL: system default */
	const char *ca_pem;         /* or PEM data in memory */
	const char *cert_file;      /* client certificate (PEM) */
	const char *key_file;
	const char *cert_pem; /* or in memory (PEM) */
	const char *key_pem;
	bool insecure_skip_verify;
	const char *bearer_token;  /* "Authorization: Bearer ..." on every request */
	const char *user_agent;
	size_t max_response;       /* cap on a reply body; 0: 64 MiB */
	const char *unix_socket;   /* connect through this unix socket */
	const char *proxy;         /* this proxy for every host, NO_PROXY ignored (CURLOPT_PROXY) */
};

struct http_client;

struct http_header {
	const char *name;
	const char *value;
};

struct http_request {
	const char *method; /* "GET" when NULL */
	const char *url;
	const struct http_header *headers; /* array of n_headers */
	size_t n_headers;
	const void *body;
	size_t body_len;
	int64_t timeout_ns; /* overrides the client's total timeout when > 0 */
	const char *bearer_token; /* overrides the client's token when not NULL */
	size_t max_response;	  /* a smaller cap on this reply's body than the client's; 0: its */
	struct cancel *cancel;	  /* -ECANCELED at once when this token is cancelled (cancel.h) */
};

#define HTTP_MAX_RESP_HEADERS 64

struct http_response {
	long status;
	struct buf body;
	/* reply headers, names lower-cased, values trimmed (up to HTTP_MAX_RESP_HEADERS) */
	char *header_names[HTTP_MAX_RESP_HEADERS];
	char *header_values[HTTP_MAX_RESP_HEADERS];
	size_t n_headers;
	char error[256];
};

int http_client_new(const struct http_client_opts *opts, struct http_client **ret);
void http_client_free(struct http_client *c);
/* Replaces the bearer token (e.g. a rotated service-account token); thread-safe. */
int http_client_set_token(struct http_client *c, const char *token);

void http_response_init(struct http_response *r);
void http_response_release(struct http_response *r);
/* The value of a reply header (case-insensitive name) or NULL. */
const char *http_response_header(const struct http_response *r, const char *name);

int http_client_do(struct http_client *c, const struct http_request *req, struct http_response *resp);

/* Streaming: the reply body is handed to on_line one line at a time (without the '\n'; a
 * trailing '\r' is kept out too), as it arrives. A line longer than max_line fails the stream
 * with -EMSGSIZE. A non-2xx reply is not streamed: its body is collected into resp->body (up to
 * the cap) and the call returns 0 with resp->status set. on_line returns 0 to go on, or a
 * negative errno to stop (returned by http_client_stream). The stream ends when the peer ends
 * the reply (0), on timeout_ns of the request (-ETIMEDOUT; 0 means no total limit), when no byte
 * arrives for idle_timeout_ns (-ETIMEDOUT; 0 = none), or when the request's token
 * (http_request.cancel) is cancelled (-ECANCELED, at once). A partial last line without '\n' is
 * delivered at the end. The line handed to on_line is always NUL-terminated. A non-2xx body is
 * cut at the cap. */
struct http_stream_opts {
	size_t max_line;          /* 0: 16 MiB */
	int64_t idle_timeout_ns;
	int (*on_line)(void *ud, const char *line, size_t len);
	void *ud;
};
int http_client_stream(struct http_client *c, const struct http_request *req,
		       const struct http_stream_opts *so, struct http_response *resp);

/* Joins a base URL and a path, with exactly one '/' between them, replacing what out held;
 * out is untouched on failure. */
int http_url_join(const char *base, const char *path, struct buf *out);
