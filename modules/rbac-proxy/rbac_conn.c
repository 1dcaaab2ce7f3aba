/* One client connection's state machine: TLS handshake, request head, decision (inline from
 * the caches or by a worker), then the request streamed to the upstream and the response
 * streamed back, keep-alive on both sides. Every step runs until it would block; edge-triggered
 * events on either socket run the connection again. */
#include <errno.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/rbac-proxy/rbac_loop.h"

enum { STEP_BLOCK = 0, STEP_NEXT = 1 };
#define PATH_MAX_LEN 4096

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 408: return "Request Timeout";
	case 413: return "Request Entity Too Large";
	case 417: return "Expectation Failed";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Error";
	}
}

/* A reply of our own; the connection closes after it when close is set. */
static int reply(struct rbac_conn *c, int status, const char *body, bool close)
{
	if (!body)
		body = reason(status);
	buf_reset(&c->cout);
	c->req_close |= close;
	if (buf_printf(&c->cout,
		       "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
		       "X-Content-Type-Options: nosniff\r\nContent-Length: %zu\r\n%s\r\n%s\n",
		       status, reason(status), strlen(body) + 1,
		       c->req_close ? "Connection: close\r\n" : "", body) < 0)
		return -ENOMEM;
	c->st = S_REPLY;
	return STEP_NEXT;
}

static int flush(int fd, SSL *ssl, struct buf *b, size_t *off)
{
	while (*off < b->len) {
		long n = rbac_io_write(fd, ssl, b->data + *off, b->len - *off);
		if (n < 0)
			return (int)n;
		*off += (size_t)n;
	}
	return 0;
}

static int flush_client(struct rbac_conn *c)
{
	size_t off = 0;
	int r = flush(c->fd, c->ssl, &c->cout, &off);

	buf_consume(&c->cout, off);
	return r;
}

/* Reads what the socket has into b, up to room bytes more. */
static long fill(int fd, SSL *ssl, struct buf *b, size_t room)
{
	if (buf_reserve(b, room) < 0)
		return -ENOMEM;
	long n = rbac_io_read(fd, ssl, b->data + b->len, room);
	if (n > 0)
		b->len += (size_t)n;
	return n;
}

static int step_handshake(struct rbac_conn *c)
{
	char err[256] = "";
	int r = SSL_do_handshake(c->ssl);

	if (r != 1) {
		int e = SSL_get_error(c->ssl, r);
		ERR_clear_error();
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
			return STEP_BLOCK;
		log_v(4, "TLS handshake failed", KV_S("client", c->addr));
		return -EPROTO;
	}
	/* a certificate that does not verify leaves the client anonymous (401 unless a token) */
	if (tls_peer_from_ssl(c->ssl, &c->peer, err, sizeof(err)) < 0)
		log_v(2, "client certificate refused", KV_S("client", c->addr), KV_S("error", err));
	c->st = S_HEAD;
	c->deadline = c->l->now + c->l->p->o.idle_timeout_ns;
	return STEP_NEXT;
}

static bool ieq(const char *a, size_t alen, const char *b)
{
	return alen == strlen(b) && strncasecmp(a, b, alen) == 0;
}

static char *dupn(const char *s, size_t n)
{
	return strndup(s, n);
}

/* The values for the authorization rewrite: every value of the query parameter or header. */
static int rewrite_values(const struct rbac_authz_cfg *az, const struct rbac_head *h,
			  const char *query, char ***ret)
{
	if (az->rewrite_header) {
		for (size_t i = 0; i < h->nh; i++)
			if (ieq(h->h[i].name, h->h[i].name_len, az->rewrite_header)) {
				_cleanup_free_ char *v = dupn(h->h[i].value, h->h[i].value_len);
				if (!v || strv_push(ret, v) < 0)
					return -ENOMEM;
			}
	}
	if (az->rewrite_query && query) {
		size_t nl = strlen(az->rewrite_query);
		for (const char *p = query; *p;) {
			const char *amp = p + strcspn(p, "&");
			if ((size_t)(amp - p) > nl && !strncmp(p, az->rewrite_query, nl) && p[nl] == '=') {
				char v[1024];
				size_t n = 0;
				for (const char *q = p + nl + 1; q < amp && n + 1 < sizeof(v); q++) {
					unsigned hi, lo;
					if (*q == '%' && q + 2 < amp && sscanf(q + 1, "%1x%1x", &hi, &lo) == 2) {
						v[n++] = (char)(hi * 16 + lo);
						q += 2;
					} else {
						v[n++] = *q == '+' ? ' ' : *q;
					}
				}
				v[n] = 0;
				if (strv_push(ret, v) < 0)
					return -ENOMEM;
			}
			p = *amp ? amp + 1 : amp;
		}
	}
	return 0;
}

static const char *verb_of(const struct rbac_head *h)
{
	static const char *const m[][2] = {{"GET", "get"},     {"POST", "create"},
					   {"PUT", "update"},  {"PATCH", "patch"},
					   {"DELETE", "delete"}};
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (h->method_len == strlen(m[i][0]) && !memcmp(h->method, m[i][0], h->method_len))
			return m[i][1];
	return "*";
}

static bool identity_header(const struct rbac_opts *o, const char *n, size_t len)
{
	return ieq(n, len, "x-remote-user") || ieq(n, len, "x-remote-groups") ||
	       (len > 15 && !strncasecmp(n, "x-remote-extra-", 15)) || ieq(n, len, o->user_field) ||
	       ieq(n, len, o->groups_field);
}

/* The upstream request without its blank line: start line, the client's headers less the
 * hop-by-hop, identity and (unless configured) Authorization ones, then X-Forwarded-For. */
/* "name: value\r\n" appended to b (no printf: this runs for every header of every request) */
static int put_field(struct buf *b, const char *name, size_t nlen, const char *value, size_t vlen)
{
	int r = buf_reserve(b, nlen + vlen + 4);

	if (r < 0)
		return r;
	buf_append(b, name, nlen);
	buf_append(b, ": ", 2);
	buf_append(b, value, vlen);
	return buf_append(b, "\r\n", 2);
}

static int upstream_head(struct rbac_conn *c, const struct rbac_head *h, const char *path,
			 const char *query)
{
	const struct rbac_opts *o = &c->l->p->o;
	struct buf *b = &c->uout;
	char enc[PATH_MAX_LEN * 3];
	int r = rbac_path_encode(path, enc, sizeof(enc));

	buf_reset(b);
	c->uout_off = 0;
	if (r < 0 || (r = buf_printf(b, "%.*s %s%s%s HTTP/1.1\r\n", (int)h->method_len, h->method,
				     enc, query ? "?" : "", query ? query : "")) < 0)
		return r;
	for (size_t i = 0; i < h->nh; i++) {
		const struct rbac_hdr *f = &h->h[i];
		if (rbac_hop_by_hop(f->name, f->name_len) ||
		    rbac_head_connection_has(h, f->name, f->name_len) ||
		    identity_header(o, f->name, f->name_len) || ieq(f->name, f->name_len, "expect") ||
		    ieq(f->name, f->name_len, "x-forwarded-for") ||
		    (!o->forward_authorization && ieq(f->name, f->name_len, "authorization")))
			continue;
		if ((r = put_field(b, f->name, f->name_len, f->value, f->value_len)) < 0)
			return r;
	}
	/* as Go's ReverseProxy: the client's address appended to what the client sent */
	r = buf_puts(b, "X-Forwarded-For: ");
	for (size_t i = 0; r >= 0 && i < h->nh; i++)
		if (ieq(h->h[i].name, h->h[i].name_len, "x-forwarded-for") && h->h[i].value_len)
			r = buf_printf(b, "%.*s, ", (int)h->h[i].value_len, h->h[i].value);
	if (r >= 0)
		r = buf_printf(b, "%s\r\n", c->addr);
	if (r >= 0 && h->body == RBAC_BODY_CHUNKED)
		r = buf_puts(b, "Transfer-Encoding: chunked\r\n");
	return r < 0 ? r : 0;
}

static void release_parts(struct rbac_ask *a)
{
	rbac_ask_release(a);
}

/* The request is decided: proxy it, or answer the verdict's status. */
static int apply_verdict(struct rbac_conn *c, struct rbac_verdict *v)
{
	const struct rbac_opts *o = &c->l->p->o;
	int r = 0;

	if (v->status) {
		kube_user_release(&v->user);
		/* a request body not read: the connection cannot be reused */
		return reply(c, v->status, NULL, !c->reqf.done);
	}
	if (o->header_fields && v->user.name) {
		r = buf_printf(&c->uout, "%s: %s\r\n", o->user_field, v->user.name);
		if (r >= 0 && v->user.groups && *v->user.groups) {
			r = buf_printf(&c->uout, "%s: ", o->groups_field);
			for (char **g = v->user.groups; r >= 0 && *g; g++)
				r = buf_printf(&c->uout, "%s%s", g == v->user.groups ? "" : o->groups_sep, *g);
			if (r >= 0)
				r = buf_puts(&c->uout, "\r\n");
		}
	}
	kube_user_release(&v->user);
	return r;
}

static int start_upstream(struct rbac_conn *c)
{
	int err = 0;

	if (c->expect_continue && buf_puts(&c->cout, "HTTP/1.1 100 Continue\r\n\r\n") < 0)
		return -ENOMEM;
	if (buf_puts(&c->uout, "\r\n") < 0)
		return -ENOMEM;
	c->up = rbac_up_get(c->l, c->ups, &c->reused, &err);
	if (!c->up)
		return reply(c, 502, NULL, true);
	c->up->owner = c;
	c->resp_started = false;
	c->st = S_SEND;
	c->deadline = c->l->now + c->l->p->o.upstream_timeout_ns;
	return STEP_NEXT;
}

static int finish_decision(struct rbac_conn *c, struct rbac_verdict *v)
{
	int r = apply_verdict(c, v);

	if (r != 0)
		return r;
	return start_upstream(c);
}

/* A complete head in cin: route it, decide it (inline or by a worker). */
static int handle_request(struct rbac_conn *c, struct rbac_head *h)
{
	struct rbac *p = c->l->p;
	const struct rbac_opts *o = &p->o;
	char raw[PATH_MAX_LEN], path[PATH_MAX_LEN], up_path[PATH_MAX_LEN];
	const char *q, *query = NULL;
	size_t plen;
	int r;

	c->retries = 0;
	c->head_method = ieq(h->method, h->method_len, "HEAD");
	c->req_close = !h->keep_alive;
	c->expect_continue = h->expect_continue;
	rbac_framer_init(&c->reqf, h->body, h->content_length);
	if (h->target[0] != '/')
		return reply(c, 400, NULL, true);
	q = memchr(h->target, '?', h->target_len);
	plen = q ? (size_t)(q - h->target) : h->target_len;
	if (plen >= sizeof(raw) || h->target_len >= sizeof(raw))
		return reply(c, 414, "URI Too Long", true);
	if (q) {
		memcpy(raw, q + 1, h->target_len - plen - 1);
		raw[h->target_len - plen - 1] = 0;
	}
	if (rbac_path_clean(h->target, plen, path, sizeof(path)) < 0)
		return reply(c, 400, NULL, true);
	if (q)
		query = raw;
	if (c->endpoints || (o->livez_path && *o->livez_path && !strcmp(path, o->livez_path))) {
		if (!c->endpoints || !strcmp(path, "/healthz"))
			return reply(c, 200, c->endpoints ? "ok" : "OK", !c->reqf.done);
		return reply(c, 404, "404 page not found", !c->reqf.done);
	}
	if (o->allow_paths && *o->allow_paths && !rbac_path_match(o->allow_paths, path))
		return reply(c, 404, "404 page not found", !c->reqf.done);
	const struct rbac_upstream *u = rbac_upstream_pick(&p->cfg, path, up_path, sizeof(up_path));
	if (!u)
		return reply(c, 404, "404 page not found", !c->reqf.done);
	c->ups = (size_t)(u - p->cfg.ups);
	if (o->max_body_bytes && h->body == RBAC_BODY_LENGTH && h->content_length > o->max_body_bytes)
		return reply(c, 413, NULL, true);
	if ((r = upstream_head(c, h, up_path, query)) < 0)
		return r;
	if (rbac_path_match(o->ignore_paths, path) || rbac_path_match(p->cfg.exclude_paths, path)) {
		buf_consume(&c->cin, h->head_len);
		return start_upstream(c);
	}
	/* the decision's input, copied: the head goes away below */
	struct rbac_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	struct rbac_ask *a = &j->ask;
	size_t alen;
	const char *auth = rbac_head_get(h, "authorization", &alen);
	a->authz = u->authz ? u->authz : &p->cfg.authz;
	r = -ENOMEM;
	if (!(a->verb = strdup(verb_of(h))) || !(a->path = strdup(path)))
		goto fail;
	if (c->peer) {
		if (!(a->cert_user = strdup(c->peer->cert.cn)))
			goto fail;
		for (const char *const *g = c->peer->cert.orgs; *g; g++)
			if (strv_push(&a->cert_groups, *g) < 0)
				goto fail;
	} else if (auth && alen > 7 && !strncasecmp(auth, "bearer ", 7)) {
		size_t s = 7;
		while (s < alen && auth[s] == ' ')
			s++;
		if (s < alen && !(a->token = dupn(auth + s, alen - s)))
			goto fail;
	}
	if ((r = rewrite_values(a->authz, h, query, &a->rewrite_values)) < 0)
		goto fail;
	buf_consume(&c->cin, h->head_len);
	r = rbac_decide(p, a, false, &j->verdict);
	if (r == -EAGAIN) {
		j->conn = c;
		j->loop = c->l;
		j->done = c->l->job_done;
		if (rbac_pool_submit(p, j) < 0) {
			release_parts(a);
			free(j);
			return reply(c, 503, NULL, true);
		}
		c->job_pending = true;
		c->st = S_AUTH;
		c->deadline = 0;
		return STEP_BLOCK;
	}
	release_parts(a);
	if (r < 0) {
		free(j);
		return reply(c, 500, NULL, true);
	}
	r = finish_decision(c, &j->verdict);
	free(j);
	return r;
fail:
	release_parts(a);
	free(j);
	return r;
}

static int step_head(struct rbac_conn *c)
{
	const struct rbac_opts *o = &c->l->p->o;
	struct rbac_head h;

	for (;;) {
		int r = c->cin.len ? rbac_head_parse(c->cin.data, c->cin.len, false, &h) : 0;
		if (r < 0)
			return reply(c, -r, NULL, true);
		if (r == 1)
			return handle_request(c, &h);
		if (c->cin.len >= o->max_header_bytes)
			return reply(c, 431, NULL, true);
		if (c->cin.len && !c->head_started) {
			c->head_started = true;
			c->deadline = c->l->now + o->read_header_timeout_ns;
		}
		long n = fill(c->fd, c->ssl, &c->cin, o->max_header_bytes - c->cin.len);
		if (n == -EAGAIN)
			return STEP_BLOCK;
		if (n <= 0)
			return n == 0 ? -ECONNRESET : (int)n;
	}
}

/* Request head and body to the upstream. */
static int step_send(struct rbac_conn *c)
{
	const struct rbac_opts *o = &c->l->p->o;
	struct rbac_upconn *u = c->up;
	int r;

	if ((r = flush_client(c)) < 0 && r != -EAGAIN) /* a 100 Continue */
		return r;
	if (u->connecting) {
		struct pollfd pf = {.fd = u->fd, .events = POLLOUT};
		int err = 0;
		socklen_t el = sizeof(err);
		if (poll(&pf, 1, 0) == 0)
			return STEP_BLOCK;
		if (getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
			log_error("cannot connect to the upstream",
				  KV_S("upstream", c->l->p->cfg.ups[c->ups].url), KV_E(-err));
			return reply(c, 502, NULL, true);
		}
		u->connecting = false;
	}
	if (u->handshaking) {
		int hr = SSL_do_handshake(u->ssl);
		if (hr != 1) {
			int e = SSL_get_error(u->ssl, hr);
			ERR_clear_error();
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				return STEP_BLOCK;
			log_error("TLS handshake with the upstream failed",
				  KV_S("upstream", c->l->p->cfg.ups[c->ups].url));
			return reply(c, 502, NULL, true);
		}
		u->handshaking = false;
	}
	for (;;) {
		r = flush(u->fd, u->ssl, &c->uout, &c->uout_off);
		if (r == -EAGAIN)
			return STEP_BLOCK;
		if (r < 0)
			return -EPIPE; /* handled by the caller: retry or 502 */
		if (c->reqf.kind != RBAC_BODY_NONE) {
			buf_reset(&c->uout);
			c->uout_off = 0;
		}
		if (c->reqf.done)
			break;
		/* body bytes already read, then more from the client */
		if (c->cin.len) {
			long take = rbac_framer_feed(&c->reqf, c->cin.data, c->cin.len);
			if (take < 0)
				return reply(c, 400, NULL, true);
			if (o->max_body_bytes && c->reqf.total > o->max_body_bytes)
				return reply(c, 413, NULL, true);
			if (buf_append(&c->uout, c->cin.data, (size_t)take) < 0)
				return -ENOMEM;
			buf_consume(&c->cin, (size_t)take);
			continue;
		}
		long n = fill(c->fd, c->ssl, &c->cin, RBAC_IO_CHUNK);
		if (n == -EAGAIN)
			return STEP_BLOCK;
		if (n <= 0)
			return n == 0 ? -ECONNRESET : (int)n;
	}
	c->st = S_RESP_HEAD;
	buf_reset(&c->uin);
	return STEP_NEXT;
}

/* The response head: rewritten for the client. */
static int step_resp_head(struct rbac_conn *c)
{
	const struct rbac_opts *o = &c->l->p->o;
	struct rbac_upconn *u = c->up;
	struct rbac_head h;
	int r;

	for (;;) {
		r = c->uin.len ? rbac_head_parse(c->uin.data, c->uin.len, true, &h) : 0;
		if (r < 0)
			return reply(c, 502, NULL, true);
		if (r == 1 && h.status >= 100 && h.status < 200) { /* interim: dropped */
			buf_consume(&c->uin, h.head_len);
			continue;
		}
		if (r == 1)
			break;
		if (c->uin.len >= o->max_header_bytes)
			return reply(c, 502, NULL, true);
		long n = fill(u->fd, u->ssl, &c->uin, o->max_header_bytes - c->uin.len);
		if (n == -EAGAIN)
			return STEP_BLOCK;
		if (n <= 0)
			return -EPIPE;
		c->resp_started = true;
	}
	if (c->head_method || h.status == 204 || h.status == 304)
		h.body = RBAC_BODY_NONE;
	rbac_framer_init(&c->respf, h.body, h.content_length);
	c->resp_close = !h.keep_alive || h.body == RBAC_BODY_CLOSE;
	if (h.body == RBAC_BODY_CLOSE)
		c->req_close = true;
	const char *sp = memchr(c->uin.data, ' ', h.head_len), *eol = strstr(sp, "\r\n");
	if ((r = buf_printf(&c->cout, "HTTP/1.1%.*s\r\n", (int)(eol - sp), sp)) < 0)
		return r;
	for (size_t i = 0; i < h.nh; i++) {
		const struct rbac_hdr *f = &h.h[i];
		if ((rbac_hop_by_hop(f->name, f->name_len) &&
		     !ieq(f->name, f->name_len, "transfer-encoding")) ||
		    rbac_head_connection_has(&h, f->name, f->name_len))
			continue;
		if ((r = put_field(&c->cout, f->name, f->name_len, f->value, f->value_len)) < 0)
			return r;
	}
	if ((r = buf_puts(&c->cout, c->req_close ? "Connection: close\r\n\r\n" : "\r\n")) < 0)
		return r;
	buf_consume(&c->uin, h.head_len);
	c->resp_started = true;
	c->st = S_RESP_BODY;
	return STEP_NEXT;
}

static void request_done(struct rbac_conn *c)
{
	bool keep = !c->resp_close && !c->uin.len;

	rbac_up_put(c->l, c->up, keep);
	c->up = NULL;
	buf_reset(&c->uout);
	buf_reset(&c->uin);
	c->uout_off = 0;
}

static int step_resp_body(struct rbac_conn *c)
{
	struct rbac_upconn *u = c->up;
	int r;

	for (;;) {
		/* body bytes in uin go to cout */
		if (c->uin.len && !c->respf.done) {
			long take = rbac_framer_feed(&c->respf, c->uin.data, c->uin.len);
			if (take < 0)
				return -EBADMSG;
			if (buf_append(&c->cout, c->uin.data, (size_t)take) < 0)
				return -ENOMEM;
			buf_consume(&c->uin, (size_t)take);
		}
		r = flush_client(c);
		if (r < 0 && r != -EAGAIN)
			return r;
		if (c->respf.done && !c->cout.len) {
			request_done(c);
			if (c->req_close)
				return -ECONNRESET; /* done: close */
			c->st = S_HEAD;
			c->head_started = false;
			c->deadline = c->l->now + c->l->p->o.idle_timeout_ns;
			return STEP_NEXT;
		}
		if (c->respf.done || c->cout.len >= RBAC_OUT_HIGH)
			return STEP_BLOCK; /* the client must take what it has first */
		long n = fill(u->fd, u->ssl, &c->uin, RBAC_IO_CHUNK);
		if (n == -EAGAIN)
			return STEP_BLOCK;
		if (n == 0 && c->respf.kind == RBAC_BODY_CLOSE) {
			c->respf.done = true;
			c->resp_close = true;
			continue;
		}
		if (n <= 0)
			return -EPIPE;
		c->deadline = c->l->now + c->l->p->o.upstream_timeout_ns;
	}
}

static int step_reply(struct rbac_conn *c)
{
	int r = flush_client(c);

	if (r == -EAGAIN)
		return STEP_BLOCK;
	if (r < 0)
		return r;
	if (c->up) {
		rbac_up_put(c->l, c->up, false);
		c->up = NULL;
	}
	if (c->req_close)
		return -ECONNRESET;
	buf_reset(&c->uout);
	c->st = S_HEAD;
	c->head_started = false;
	c->deadline = c->l->now + c->l->p->o.idle_timeout_ns;
	return STEP_NEXT;
}

/* An upstream failure before any response byte: one retry on a new connection when the pooled
 * one had been closed and the request had no body; else 502. */
static int upstream_failed(struct rbac_conn *c)
{
	if (c->st == S_RESP_BODY || c->resp_started)
		return -EPIPE;
	bool retry = c->reused && c->reqf.kind == RBAC_BODY_NONE && c->retries++ < 1;
	rbac_up_put(c->l, c->up, false);
	c->up = NULL;
	if (!retry) {
		log_error("the upstream failed", KV_S("upstream", c->l->p->cfg.ups[c->ups].url));
		return reply(c, 502, NULL, true);
	}
	int err = 0;
	c->uout_off = 0;
	c->up = rbac_up_get(c->l, c->ups, &c->reused, &err);
	if (!c->up)
		return reply(c, 502, NULL, true);
	c->up->owner = c;
	c->st = S_SEND;
	return STEP_NEXT;
}

void rbac_conn_drive(struct rbac_conn *c)
{
	for (;;) {
		int r;
		switch (c->st) {
		case S_HANDSHAKE: r = step_handshake(c); break;
		case S_HEAD: r = step_head(c); break;
		case S_SEND: r = step_send(c); break;
		case S_RESP_HEAD: r = step_resp_head(c); break;
		case S_RESP_BODY: r = step_resp_body(c); break;
		case S_REPLY: r = step_reply(c); break;
		default: return;
		}
		if (r == -EPIPE && c->up)
			r = upstream_failed(c);
		if (r == STEP_BLOCK)
			return;
		if (r < 0) {
			rbac_conn_close(c);
			return;
		}
	}
}

void rbac_conn_verdict(struct rbac_conn *c, struct rbac_job *j)
{
	int r;

	c->job_pending = false;
	r = finish_decision(c, &j->verdict);
	if (r < 0) {
		rbac_conn_close(c);
		return;
	}
	rbac_conn_drive(c);
}

void rbac_conn_expired(struct rbac_conn *c)
{
	if (c->st == S_HEAD && c->head_started) {
		log_v(2, "request head timed out", KV_S("client", c->addr));
		if (reply(c, 408, NULL, true) > 0) {
			c->deadline = c->l->now + 5 * NSEC_PER_SEC;
			rbac_conn_drive(c);
			return;
		}
	} else if ((c->st == S_SEND || c->st == S_RESP_HEAD) && !c->resp_started) {
		log_error("the upstream timed out", KV_S("upstream", c->l->p->cfg.ups[c->ups].url));
		if (c->up) {
			rbac_up_put(c->l, c->up, false);
			c->up = NULL;
		}
		if (reply(c, 504, NULL, true) > 0) {
			c->deadline = c->l->now + 5 * NSEC_PER_SEC;
			rbac_conn_drive(c);
			return;
		}
	}
	rbac_conn_close(c);
}

void rbac_conn_free(struct rbac_conn *c)
{
	if (c->ssl)
		SSL_free(c->ssl);
	if (c->fd >= 0)
		close(c->fd);
	tls_peer_unref(c->peer);
	buf_release(&c->cin);
	buf_release(&c->cout);
	buf_release(&c->uout);
	buf_release(&c->uin);
	free(c);
}

void rbac_conn_close(struct rbac_conn *c)
{
	struct rbac_loop *l = c->l;

	if (c->st == S_DEAD)
		return;
	if (c->up) {
		rbac_up_put(l, c->up, false);
		c->up = NULL;
	}
	epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
	if (c->ssl && c->st != S_HANDSHAKE)
		SSL_shutdown(c->ssl);
	ERR_clear_error();
	c->st = S_DEAD;
	if (c->prev)
		c->prev->next = c->next;
	else
		l->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	l->nconns--;
	/* freed after the batch, or when its job comes back */
	if (!c->job_pending) {
		c->grave_next = l->grave;
		l->grave = c;
	}
}

