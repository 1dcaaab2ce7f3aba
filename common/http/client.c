/* HTTP client over libcurl (see client.h).
 *
 * Each client keeps a small locked pool of curl handles: a request takes one (or makes one),
 * runs, and puts it back, so connections, DNS answers and TLS sessions are reused, and any
 * number of threads can use one client at once. A pooled handle is a curl easy handle plus its
 * own multi handle: the transfer is driven by curl_multi_perform/curl_multi_poll, whose poll
 * also watches the request's cancellation token (cancel_fd), so that cancelling it ends the
 * transfer at once; the poll wakes by itself only for a stream's idle timer. The multi handle
 * keeps the connection cache across requests. The pool is LIFO so that
 * the warmest handle (with a live connection) is used first; it keeps at most POOL_MAX_IDLE
 * idle handles, and everything is freed by http_client_free. Handles are not tied to threads,
 * so nothing is left behind when a thread exits. */
#include "common/http/client.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/base/log.h"
#include "common/base/secret.h"
#include "common/base/timeutil.h"

#define POOL_MAX_IDLE 8
#define POLL_MAX_MS 1000 /* a poll's longest sleep; curl's own timers wake it earlier */
#define DEFAULT_CONNECT_TIMEOUT_NS (10 * NSEC_PER_SEC)
#define DEFAULT_TIMEOUT_NS (60 * NSEC_PER_SEC)
#define DEFAULT_MAX_RESPONSE ((size_t)64 << 20)
#define DEFAULT_MAX_LINE ((size_t)16 << 20)
#define MAX_TOKEN_LEN (64 << 10)

#ifndef AWSK8S_VERSION
#define AWSK8S_VERSION "0.0.0"
#endif

struct handle {
	CURL *easy;
	CURLM *multi;
	struct handle *next;
};

struct http_client {
	int64_t connect_timeout_ns;
	int64_t timeout_ns;
	size_t max_response;
	bool insecure;
	char *ca_file, *ca_pem, *cert_file, *key_file, *cert_pem, *key_pem;
	char *user_agent, *unix_socket, *proxy;

	pthread_mutex_t lock; /* guards token and the idle pool */
	char *token;
	struct handle *idle;
	size_t n_idle;
};

/* The state of one transfer, shared with the curl callbacks. */
struct xfer {
	CURL *easy;
	struct http_response *resp;
	const struct http_stream_opts *so; /* NULL: collect the body */
	bool decided;			   /* the first body byte arrived: stream or collect */
	bool streaming;
	size_t max_line;
	struct buf line; /* the partial line being assembled */
	int err;	 /* set by a callback that stopped the transfer */
	int64_t last_rx_ns;
	struct cancel *cancel; /* the request's: cancelling it ends the transfer */
};

static int dup_opt(const char *src, char **dst)
{
	if (!src)
		return 0;
	*dst = strdup(src);
	return *dst ? 0 : -ENOMEM;
}

/* ---- the handle pool ---- */

static void handle_free(struct handle *h)
{
	if (!h)
		return;
	if (h->multi)
		curl_multi_cleanup(h->multi);
	if (h->easy)
		curl_easy_cleanup(h->easy);
	free(h);
}

static struct handle *pool_get(struct http_client *c)
{
	struct handle *h;

	pthread_mutex_lock(&c->lock);
	h = c->idle;
	if (h) {
		c->idle = h->next;
		c->n_idle--;
	}
	pthread_mutex_unlock(&c->lock);
	if (h) {
		h->next = NULL;
		return h;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->easy = curl_easy_init();
	h->multi = curl_multi_init();
	if (!h->easy || !h->multi) {
		handle_free(h);
		return NULL;
	}
	return h;
}

static void pool_put(struct http_client *c, struct handle *h)
{
	pthread_mutex_lock(&c->lock);
	if (c->n_idle < POOL_MAX_IDLE) {
		h->next = c->idle;
		c->idle = h;
		c->n_idle++;
		h = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	handle_free(h);
}

/* ---- client life cycle ---- */

void http_client_free(struct http_client *c)
{
	if (!c)
		return;
	while (c->idle) {
		struct handle *h = c->idle;
		c->idle = h->next;
		handle_free(h);
	}
	pthread_mutex_destroy(&c->lock);
	secret_free(c->token);
	secret_free(c->key_pem);
	free(c->ca_file);
	free(c->ca_pem);
	free(c->cert_file);
	free(c->key_file);
	free(c->cert_pem);
	free(c->user_agent);
	free(c->unix_socket);
	free(c->proxy);
	free(c);
}

int http_client_new(const struct http_client_opts *opts, struct http_client **ret)
{
	static const struct http_client_opts none;
	struct http_client *c;

	if (!ret)
		return -EINVAL;
	if (!opts)
		opts = &none;
	if (opts->connect_timeout_ns < 0 || opts->timeout_ns < 0)
		return -EINVAL;
	if (opts->bearer_token && strlen(opts->bearer_token) > MAX_TOKEN_LEN)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c);
		return -ENOMEM;
	}
	c->connect_timeout_ns =
	    opts->connect_timeout_ns ? opts->connect_timeout_ns : DEFAULT_CONNECT_TIMEOUT_NS;
	c->timeout_ns = opts->timeout_ns ? opts->timeout_ns : DEFAULT_TIMEOUT_NS;
	c->max_response = opts->max_response ? opts->max_response : DEFAULT_MAX_RESPONSE;
	c->insecure = opts->insecure_skip_verify;
	const struct {
		const char *src;
		char **dst;
	} strs[] = {
	    {opts->ca_file, &c->ca_file},
	    {opts->ca_pem, &c->ca_pem},
	    {opts->cert_file, &c->cert_file},
	    {opts->key_file, &c->key_file},
	    {opts->cert_pem, &c->cert_pem},
	    {opts->key_pem, &c->key_pem},
	    {opts->user_agent ? opts->user_agent : "aws-k8s/" AWSK8S_VERSION, &c->user_agent},
	    {opts->unix_socket, &c->unix_socket},
	    {opts->proxy, &c->proxy},
	    {opts->bearer_token && opts->bearer_token[0] ? opts->bearer_token : NULL, &c->token},
	};
	for (size_t i = 0; i < ARRAY_SIZE(strs); i++) {
		if (dup_opt(strs[i].src, strs[i].dst) < 0) {
			http_client_free(c);
			return -ENOMEM;
		}
	}
	*ret = c;
	return 0;
}

int http_client_set_token(struct http_client *c, const char *token)
{
	char *n = NULL, *old;

	if (!c)
		return -EINVAL;
	if (token && strlen(token) > MAX_TOKEN_LEN)
		return -EINVAL;
	if (token && token[0] && !(n = strdup(token)))
		return -ENOMEM;
	pthread_mutex_lock(&c->lock);
	old = c->token;
	c->token = n;
	pthread_mutex_unlock(&c->lock);
	secret_free(old);
	return 0;
}

/* ---- responses ---- */

static void response_clear_headers(struct http_response *r)
{
	for (size_t i = 0; i < r->n_headers; i++) {
		free(r->header_names[i]);
		free(r->header_values[i]);
		r->header_names[i] = r->header_values[i] = NULL;
	}
	r->n_headers = 0;
}

void http_response_init(struct http_response *r)
{
	memset(r, 0, sizeof(*r));
	buf_init(&r->body, 0);
}

void http_response_release(struct http_response *r)
{
	if (!r)
		return;
	response_clear_headers(r);
	buf_release(&r->body);
	r->status = 0;
	r->error[0] = 0;
}

const char *http_response_header(const struct http_response *r, const char *name)
{
	if (!r || !name)
		return NULL;
	for (size_t i = 0; i < r->n_headers; i++)
		if (strcasecmp(r->header_names[i], name) == 0)
			return r->header_values[i];
	return NULL;
}

/* ---- curl callbacks ---- */

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	struct http_response *resp = x->resp;
	size_t len = size * n, nlen, vlen;
	const char *colon, *v, *end = p + len;
	char *name, *value;

	x->last_rx_ns = now_mono_ns();
	if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		/* a new status line (after a 1xx reply, or a proxy's CONNECT reply) */
		response_clear_headers(resp);
		return len;
	}
	colon = memchr(p, ':', len);
	if (!colon || colon == p || isspace((unsigned char)p[0]) ||
	    resp->n_headers >= HTTP_MAX_RESP_HEADERS)
		return len; /* blank line, folded continuation, or over the cap: ignored */
	nlen = (size_t)(colon - p);
	while (nlen > 0 && isspace((unsigned char)p[nlen - 1]))
		nlen--;
	v = colon + 1;
	while (v < end && isspace((unsigned char)*v))
		v++;
	while (end > v && isspace((unsigned char)end[-1]))
		end--;
	vlen = (size_t)(end - v);
	name = strndup(p, nlen);
	value = strndup(v, vlen);
	if (!name || !value) {
		free(name);
		free(value);
		x->err = -ENOMEM;
		return 0;
	}
	for (char *s = name; *s; s++)
		*s = (char)tolower((unsigned char)*s);
	resp->header_names[resp->n_headers] = name;
	resp->header_values[resp->n_headers] = value;
	resp->n_headers++;
	return len;
}

/* Hands the assembled line to the caller (without its '\r'); empty lines are skipped. */
static int emit_line(struct xfer *x)
{
	struct buf *l = &x->line;
	int r = 0;

	if (l->len > 0 && l->data[l->len - 1] == '\r')
		l->data[--l->len] = 0;
	if (l->len > x->max_line)
		return -EMSGSIZE;
	if (l->len > 0)
		r = x->so->on_line(x->so->ud, l->data, l->len);
	buf_reset(l);
	return r < 0 ? r : 0;
}

static int feed_lines(struct xfer *x, const char *p, size_t len)
{
	while (len > 0) {
		const char *nl = memchr(p, '\n', len);
		size_t take = nl ? (size_t)(nl - p) : len;
		int r;

		/* one byte more than max_line: the '\r' of a CRLF that may still come */
		if (take > x->max_line + 1 || x->line.len > x->max_line + 1 - take)
			return -EMSGSIZE;
		r = buf_append(&x->line, p, take);
		if (r < 0)
			return r;
		if (!nl)
			break;
		r = emit_line(x);
		if (r < 0)
			return r;
		p = nl + 1;
		len -= take + 1;
	}
	return 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n;
	int r;

	x->last_rx_ns = now_mono_ns();
	if (!x->decided) {
		long status = 0;
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
		x->streaming = x->so && status >= 200 && status < 300;
		x->decided = true;
	}
	if (x->streaming) {
		r = feed_lines(x, p, len);
	} else {
		struct buf *b = &x->resp->body;
		r = buf_append(b, p, len);
		if (r == -EMSGSIZE && x->so) {
			/* a stream's error reply is kept up to the cap, the rest dropped */
			r = buf_append(b, p, b->max - b->len);
		}
	}
	if (r < 0) {
		x->err = r;
		return 0; /* ends the transfer with CURLE_WRITE_ERROR */
	}
	return len;
}

/* ---- building a request ---- */

static bool header_name_ok(const char *s)
{
	if (!s || !*s)
		return false;
	for (; *s; s++)
		if (*s <= ' ' || *s == ':' || *s == 0x7f)
			return false;
	return true;
}

static bool header_value_ok(const char *s)
{
	return s && !strpbrk(s, "\r\n");
}

static int slist_add(struct curl_slist **l, const char *s)
{
	struct curl_slist *n = curl_slist_append(*l, s);
	if (!n)
		return -ENOMEM;
	*l = n;
	return 0;
}

static void slist_free_secure(struct curl_slist *l)
{
	for (struct curl_slist *i = l; i; i = i->next)
		secret_wipe_str(i->data);
	curl_slist_free_all(l);
}

/* The request headers: the caller's, then Authorization (unless the caller set one), and
 * the removal of curl's "Expect: 100-continue" and form Content-Type. */
static int build_headers(struct http_client *c, const struct http_request *req, bool has_body,
			 struct curl_slist **ret)
{
	struct curl_slist *l = NULL;
	bool auth = false, expect = false, ctype = false;
	_cleanup_buf_ struct buf line = BUF_INIT(MAX_TOKEN_LEN + 1024);
	int r = 0;

	for (size_t i = 0; i < req->n_headers && r >= 0; i++) {
		const struct http_header *h = &req->headers[i];
		if (!header_name_ok(h->name) || !header_value_ok(h->value)) {
			r = -EINVAL;
			break;
		}
		auth |= strcasecmp(h->name, "authorization") == 0;
		expect |= strcasecmp(h->name, "expect") == 0;
		ctype |= strcasecmp(h->name, "content-type") == 0;
		buf_reset(&line);
		/* "Name;" is curl's way to send a header with an empty value */
		r = h->value[0] ? buf_printf(&line, "%s: %s", h->name, h->value)
				: buf_printf(&line, "%s;", h->name);
		if (r >= 0)
			r = slist_add(&l, line.data);
	}
	if (r >= 0 && !auth) {
		const char *tok = req->bearer_token;
		buf_reset(&line);
		pthread_mutex_lock(&c->lock);
		if (!tok)
			tok = c->token;
		if (tok && tok[0])
			r = header_value_ok(tok)
				? buf_printf(&line, "Authorization: Bearer %s", tok)
				: -EINVAL;
		pthread_mutex_unlock(&c->lock);
		if (r >= 0 && line.len)
			r = slist_add(&l, line.data);
		if (line.data)
			secret_wipe(line.data, line.cap);
	}
	if (r >= 0 && !expect)
		r = slist_add(&l, "Expect:");
	if (r >= 0 && has_body && !ctype)
		r = slist_add(&l, "Content-Type:");
	if (r < 0) {
		slist_free_secure(l);
		return r;
	}
	*ret = l;
	return 0;
}

static int64_t ns_to_ms(int64_t ns)
{
	return ns <= 0 ? 0 : (ns + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC;
}

#define SET(opt, val)                                                                              \
	do {                                                                                       \
		if (curl_easy_setopt(e, opt, val) != CURLE_OK)                                     \
			return -EINVAL;                                                            \
	} while (0)

static int set_blob(CURL *e, CURLoption opt, const char *pem)
{
	struct curl_blob blob = {
	    .data = (void *)pem, .len = strlen(pem), .flags = CURL_BLOB_NOCOPY};
	/* NOCOPY: the client outlives every request that uses its handles */
	return curl_easy_setopt(e, opt, &blob) == CURLE_OK ? 0 : -EINVAL;
}

static int setup_tls(struct http_client *c, CURL *e)
{
	if (c->ca_pem || c->ca_file)
		SET(CURLOPT_CAPATH, NULL); /* trust only the given CAs, not the system's too */
	if (c->ca_pem && set_blob(e, CURLOPT_CAINFO_BLOB, c->ca_pem) < 0)
		return -EINVAL;
	if (!c->ca_pem && c->ca_file)
		SET(CURLOPT_CAINFO, c->ca_file);
	if (c->cert_pem && set_blob(e, CURLOPT_SSLCERT_BLOB, c->cert_pem) < 0)
		return -EINVAL;
	if (!c->cert_pem && c->cert_file)
		SET(CURLOPT_SSLCERT, c->cert_file);
	if (c->key_pem && set_blob(e, CURLOPT_SSLKEY_BLOB, c->key_pem) < 0)
		return -EINVAL;
	if (!c->key_pem && c->key_file)
		SET(CURLOPT_SSLKEY, c->key_file);
	if (c->cert_pem || c->cert_file)
		SET(CURLOPT_SSLCERTTYPE, "PEM");
	if (c->key_pem || c->key_file)
		SET(CURLOPT_SSLKEYTYPE, "PEM");
	if (c->insecure) {
		SET(CURLOPT_SSL_VERIFYPEER, 0L);
		SET(CURLOPT_SSL_VERIFYHOST, 0L);
	}
	return 0;
}

static int setup(struct http_client *c, CURL *e, const struct http_request *req, struct xfer *x,
		 char *errbuf, struct curl_slist **hdrs)
{
	const char *m = req->method ? req->method : "GET";
	bool has_body =
	    req->body || strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0 || strcmp(m, "PATCH") == 0;
	int64_t timeout = req->timeout_ns > 0 ? req->timeout_ns : x->so ? 0 : c->timeout_ns;
	int r;

	if (!header_name_ok(m))
		return -EINVAL;
	SET(CURLOPT_URL, req->url);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_ERRORBUFFER, errbuf);
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)ns_to_ms(c->connect_timeout_ns));
	SET(CURLOPT_TIMEOUT_MS, (long)ns_to_ms(timeout));
	SET(CURLOPT_TCP_KEEPALIVE, 1L);
	SET(CURLOPT_TCP_KEEPIDLE, 30L);
	SET(CURLOPT_TCP_KEEPINTVL, 30L);
	SET(CURLOPT_HEADERFUNCTION, on_header);
	SET(CURLOPT_HEADERDATA, x);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, x);
	if (!x->so)
		SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)x->resp->body.max);
	if (c->user_agent)
		SET(CURLOPT_USERAGENT, c->user_agent);
	if (c->unix_socket)
		SET(CURLOPT_UNIX_SOCKET_PATH, c->unix_socket);
	if (c->proxy) { /* this proxy for every host: NO_PROXY does not apply either */
		SET(CURLOPT_PROXY, c->proxy);
		SET(CURLOPT_NOPROXY, "");
	}
	r = setup_tls(c, e);
	if (r < 0)
		return r;

	if (strcmp(m, "HEAD") == 0) {
		SET(CURLOPT_NOBODY, 1L);
	} else if (has_body) {
		SET(CURLOPT_POSTFIELDS, req->body ? req->body : "");
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(req->body ? req->body_len : 0));
		if (strcmp(m, "POST") != 0)
			SET(CURLOPT_CUSTOMREQUEST, m);
	} else if (strcmp(m, "GET") != 0) {
		SET(CURLOPT_CUSTOMREQUEST, m);
	}
	r = build_headers(c, req, has_body, hdrs);
	if (r < 0)
		return r;
	SET(CURLOPT_HTTPHEADER, *hdrs);
	return 0;
}

/* ---- running a transfer ---- */

static int map_curl_error(CURLcode res, CURL *e)
{
	long os_errno = 0;

	switch (res) {
	case CURLE_OK:
		return 0;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		curl_easy_getinfo(e, CURLINFO_OS_ERRNO, &os_errno);
		return os_errno == ECONNREFUSED ? -ECONNREFUSED : -EHOSTUNREACH;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return -EHOSTUNREACH;
	case CURLE_FILESIZE_EXCEEDED:
		return -EMSGSIZE;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_ABORTED_BY_CALLBACK:
		return -ECANCELED;
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_PARTIAL_FILE:
		return -ECONNRESET;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_BAD_FUNCTION_ARGUMENT:
		return -EINVAL;
	default:
		/* TLS failures (CURLE_SSL_*, CURLE_PEER_FAILED_VERIFICATION), bad replies, ... */
		return -EPROTO;
	}
}

/* Drives the transfer with the handle's multi, waking at once when the request's token is
 * cancelled, and checking a stream's idle timer. Returns 0 and curl's result, or our own
 * -errno. */
static int run(struct handle *h, struct xfer *x, CURLcode *ret_res)
{
	const struct http_stream_opts *so = x->so;
	CURLcode res = CURLE_OK;
	CURLMcode mc;
	int running = 1, r = 0;

	struct curl_waitfd stopfd = {.fd = cancel_fd(x->cancel), .events = CURL_WAIT_POLLIN};
	unsigned n_extra = stopfd.fd >= 0 ? 1 : 0;

	if (curl_multi_add_handle(h->multi, h->easy) != CURLM_OK)
		return -ENOMEM;
	for (;;) {
		mc = curl_multi_perform(h->multi, &running);
		if (mc != CURLM_OK || !running)
			break;
		if (cancel_is_cancelled(x->cancel)) {
			r = -ECANCELED;
			break;
		}
		int ms = POLL_MAX_MS;
		if (so && so->idle_timeout_ns > 0) {
			int64_t left = so->idle_timeout_ns - (now_mono_ns() - x->last_rx_ns);
			if (left <= 0) {
				r = -ETIMEDOUT;
				break;
			}
			if (left / NSEC_PER_MSEC + 1 < ms)
				ms = (int)(left / NSEC_PER_MSEC) + 1;
		}
		/* the token's descriptor wakes the poll at once when it is cancelled */
		mc = curl_multi_poll(h->multi, n_extra ? &stopfd : NULL, n_extra, ms, NULL);
		if (mc != CURLM_OK)
			break;
	}
	if (r == 0 && mc != CURLM_OK)
		r = mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	if (r == 0) {
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(h->multi, &left)))
			if (msg->msg == CURLMSG_DONE)
				res = msg->data.result;
	}
	curl_multi_remove_handle(h->multi, h->easy);
	*ret_res = res;
	return r;
}

/* resp->error: curl's own message when curl failed, ours otherwise; redacted in any case. */
static void set_error(struct http_response *resp, int r, const char *curl_msg, size_t max)
{
	char msg[256];

	if (r == -EMSGSIZE)
		str_printf(msg, sizeof(msg), "reply or line over the limit of %zu bytes", max);
	else if (curl_msg)
		str_copy(msg, sizeof(msg), curl_msg);
	else if (r == -ECANCELED)
		str_copy(msg, sizeof(msg),
			 cancel_is_cancelled(cancel_root()) ? "canceled: stopping" : "canceled");
	else if (r == -ETIMEDOUT)
		str_copy(msg, sizeof(msg), "no data within the idle timeout");
	else
		str_printf(msg, sizeof(msg), "%s", strerror(-r));
	log_redact(msg, resp->error, sizeof(resp->error));
}

static int perform(struct http_client *c, const struct http_request *req,
		   const struct http_stream_opts *so, struct http_response *resp)
{
	struct xfer x = {.resp = resp, .so = so, .cancel = req ? req->cancel : NULL};
	struct curl_slist *hdrs = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	CURLcode res = CURLE_OK;
	struct handle *h;
	int64_t start = now_mono_ns();
	int r;

	if (!c || !req || !req->url || !resp || (so && !so->on_line))
		return -EINVAL;
	response_clear_headers(resp);
	buf_reset(&resp->body);
	resp->body.max = req->max_response && req->max_response < c->max_response
			     ? req->max_response
			     : c->max_response;
	resp->status = 0;
	resp->error[0] = 0;
	h = pool_get(c);
	if (!h) {
		str_copy(resp->error, sizeof(resp->error), "out of memory");
		return -ENOMEM;
	}
	curl_easy_reset(h->easy);
	x.easy = h->easy;
	x.last_rx_ns = start;
	if (so) {
		x.max_line = so->max_line ? so->max_line : DEFAULT_MAX_LINE;
		buf_init(&x.line, x.max_line + 2);
	}
	r = setup(c, h->easy, req, &x, errbuf, &hdrs);
	if (r >= 0 && cancel_is_cancelled(x.cancel))
		r = -ECANCELED; /* nothing is sent */
	else if (r >= 0)
		r = run(h, &x, &res);
	if (r >= 0 && res != CURLE_OK)
		r = x.err < 0 ? x.err : map_curl_error(res, h->easy);
	if (r >= 0 && x.streaming && x.line.len > 0)
		r = emit_line(&x); /* the last line had no '\n' */
	if (r >= 0)
		r = buf_reserve(&resp->body, 0); /* body.data is never NULL on success */
	curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &resp->status);
	if (r < 0) {
		const char *curl_msg = NULL;
		if (res != CURLE_OK && !x.err)
			curl_msg = errbuf[0] ? errbuf : curl_easy_strerror(res);
		set_error(resp, r, curl_msg, so && x.streaming ? x.max_line : resp->body.max);
		buf_reset(&resp->body); /* never a partial success */
	}
	log_v(6, "http request", KV_S("method", req->method ? req->method : "GET"),
	      KV_S("url", req->url), KV_I("status", resp->status),
	      KV_I("ms", (now_mono_ns() - start) / NSEC_PER_MSEC), KV_S("error", resp->error));
	/* curl keeps pointers to errbuf and hdrs: drop them before the handle goes back */
	curl_easy_setopt(h->easy, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, NULL);
	slist_free_secure(hdrs);
	buf_release(&x.line);
	pool_put(c, h);
	return r < 0 ? r : 0;
}

int http_client_do(struct http_client *c, const struct http_request *req,
		   struct http_response *resp)
{
	return perform(c, req, NULL, resp);
}

int http_client_stream(struct http_client *c, const struct http_request *req,
		       const struct http_stream_opts *so, struct http_response *resp)
{
	if (!so)
		return -EINVAL;
	return perform(c, req, so, resp);
}

int http_url_join(const char *base, const char *path, struct buf *out)
{
	size_t blen, plen;
	struct buf tmp;
	int r;

	if (!base || !path || !out)
		return -EINVAL;
	blen = strlen(base);
	while (blen > 0 && base[blen - 1] == '/')
		blen--;
	while (*path == '/')
		path++;
	plen = strlen(path);
	buf_init(&tmp, out->max);
	r = buf_append(&tmp, base, blen);
	if (r >= 0)
		r = buf_putc(&tmp, '/');
	if (r >= 0)
		r = buf_append(&tmp, path, plen);
	if (r < 0) {
		buf_release(&tmp);
		return r;
	}
	buf_release(out);
	*out = tmp;
	return 0;
}
