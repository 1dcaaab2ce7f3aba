/* Tests of common/http/client.c against a small scripted HTTP(S) server running in a thread of
 * the test (127.0.0.1, port 0, or a unix socket). The server records every raw request and
 * answers by path:
 *   /echo...   200, body = the request line, X-Conn = the connection number
 *   /reply     the canned reply s->reply, byte for byte
 *   /hang      reads the request and never answers
 *   /stream    200 chunked: each string of s->chunks as one chunk, s->chunk_delay_ms apart,
 *              then the end (or, with s->hold, nothing more until the server stops) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/signals.h"
#include "common/base/timeutil.h"
#include "common/http/client.h"
#include "tests/unit/harness.h"

#define TSRV_MAX_CONNS 64

struct tsrv;

struct tconn {
	struct tsrv *s;
	int fd;
	int index;
	SSL *ssl;
	pthread_t th;
};

struct tsrv {
	int lfd;
	int port;
	char path[256]; /* unix socket, when not TCP */
	char base[128]; /* "http://127.0.0.1:PORT" or "https://..." */
	SSL_CTX *tls;
	const char *reply;
	const char *const *chunks;
	int chunk_delay_ms;
	bool hold;
	atomic_bool stop;
	pthread_t acceptor;
	pthread_mutex_t lock;
	struct buf raw;	 /* every request received, concatenated */
	struct buf last; /* the last request */
	int n_req, n_conn;
	char peer_cn[64]; /* TLS: CN of the client certificate, if one was presented */
	struct tconn *conns[TSRV_MAX_CONNS];
};

static void tsrv_sleep_ms(int ms)
{
	sleep_ns((int64_t)ms * NSEC_PER_MSEC);
}

static int conn_write(struct tconn *c, const void *p, size_t n)
{
	const char *d = p;
	while (n > 0) {
		ssize_t w = c->ssl ? SSL_write(c->ssl, d, (int)n) : send(c->fd, d, n, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		d += w;
		n -= (size_t)w;
	}
	return 0;
}

static int conn_printf(struct tconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int conn_printf(struct tconn *c, const char *fmt, ...)
{
	_cleanup_buf_ struct buf b = BUF_INIT(0);
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	return r < 0 ? r : conn_write(c, b.data, b.len);
}

static void wait_stop(struct tsrv *s)
{
	while (!atomic_load(&s->stop))
		tsrv_sleep_ms(5);
}

/* The length of the complete request at the start of in, or 0 if more is needed. */
static size_t request_len(const struct buf *in)
{
	const char *end = in->len ? strstr(in->data, "\r\n\r\n") : NULL;
	size_t hlen, clen = 0;

	if (!end)
		return 0;
	hlen = (size_t)(end - in->data) + 4;
	for (const char *p = in->data; p && p < end; p = strstr(p, "\r\n"), p = p ? p + 2 : p)
		if (strncasecmp(p, "content-length:", 15) == 0)
			clen = strtoul(p + 15, NULL, 10);
	return in->len >= hlen + clen ? hlen + clen : 0;
}

/* Answers one request; returns -1 to close the connection. */
/* Writes a chunked 200 reply with copies of the script's chunks (the test's own copies may be
 * gone once the client has given up on this reply). */
static int stream_reply(struct tconn *c)
{
	struct tsrv *s = c->s;
	_cleanup_strv_ char **chunks = NULL;
	int delay = s->chunk_delay_ms;
	bool hold = s->hold;

	for (size_t i = 0; s->chunks && s->chunks[i]; i++)
		if (strv_push(&chunks, s->chunks[i]) < 0)
			return -1;
	if (conn_printf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			   "Transfer-Encoding: chunked\r\n\r\n") < 0)
		return -1;
	for (size_t i = 0; chunks && chunks[i]; i++) {
		if (i > 0 && delay)
			tsrv_sleep_ms(delay);
		if (conn_printf(c, "%zx\r\n%s\r\n", strlen(chunks[i]), chunks[i]) < 0)
			return -1;
	}
	if (!hold)
		return conn_printf(c, "0\r\n\r\n");
	wait_stop(s);
	return -1;
}

/* Answers one request; returns -1 to close the connection. */
static int handle(struct tconn *c, const char *req)
{
	struct tsrv *s = c->s;
	const char *path = strchr(req, ' ');
	size_t line_len = strcspn(req, "\r\n");

	path = path ? path + 1 : "";
	if (str_has_prefix(path, "/echo"))
		return conn_printf(c,
				   "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nX-Conn: %d\r\n"
				   "X-Test:   spaced value \t\r\nX-UPPER: V\r\n\r\n%.*s",
				   line_len, c->index, (int)line_len, req);
	if (str_has_prefix(path, "/reply"))
		return conn_printf(c, "%s", s->reply); /* a copy, for the same reason */
	if (str_has_prefix(path, "/stream"))
		return stream_reply(c);
	wait_stop(s); /* /hang or an unknown path */
	return -1;
}

static void *conn_main(void *arg)
{
	struct tconn *c = arg;
	struct tsrv *s = c->s;
	_cleanup_buf_ struct buf in = BUF_INIT(8 << 20);
	char tmp[16384];

	if (s->tls) {
		c->ssl = SSL_new(s->tls);
		if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1 || SSL_accept(c->ssl) != 1)
			goto out;
		X509 *peer = SSL_get1_peer_certificate(c->ssl);
		if (peer) {
			pthread_mutex_lock(&s->lock);
			X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName,
						  s->peer_cn, sizeof(s->peer_cn));
			pthread_mutex_unlock(&s->lock);
			X509_free(peer);
		}
	}
	for (;;) {
		size_t len;
		while (!(len = request_len(&in))) {
			ssize_t n = c->ssl ? SSL_read(c->ssl, tmp, sizeof(tmp))
					   : recv(c->fd, tmp, sizeof(tmp), 0);
			if (n <= 0 || buf_append(&in, tmp, (size_t)n) < 0)
				goto out;
		}
		pthread_mutex_lock(&s->lock);
		buf_append(&s->raw, in.data, len);
		buf_reset(&s->last);
		buf_append(&s->last, in.data, len);
		s->n_req++;
		pthread_mutex_unlock(&s->lock);
		if (handle(c, in.data) < 0)
			break;
		buf_consume(&in, len);
	}
out:
	shutdown(c->fd, SHUT_RDWR); /* closed by tsrv_stop */
	return NULL;
}

static void *accept_main(void *arg)
{
	struct tsrv *s = arg;

	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC), one = 1;
		if (fd < 0) {
			if (atomic_load(&s->stop) || errno != EINTR)
				break;
			continue;
		}
		if (!s->path[0])
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_mutex_lock(&s->lock);
		struct tconn *c = s->n_conn < TSRV_MAX_CONNS ? calloc(1, sizeof(*c)) : NULL;
		if (c) {
			*c = (struct tconn){.s = s, .fd = fd, .index = s->n_conn};
			if (pthread_create(&c->th, NULL, conn_main, c) == 0) {
				s->conns[s->n_conn++] = c;
				c = NULL;
				fd = -1;
			}
		}
		pthread_mutex_unlock(&s->lock);
		free(c);
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

/* Starts a server on 127.0.0.1 (unix_path NULL) or on a unix socket; tls may be NULL. */
static struct tsrv *tsrv_start(SSL_CTX *tls, const char *unix_path)
{
	struct tsrv *s = calloc(1, sizeof(*s));
	int r;

	signal(SIGPIPE, SIG_IGN); /* SSL_write to a client that went away */
	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	buf_init(&s->raw, 64 << 20);
	buf_init(&s->last, 16 << 20);
	s->tls = tls;
	if (unix_path) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		str_copy(s->path, sizeof(s->path), unix_path);
		str_copy(sa.sun_path, sizeof(sa.sun_path), unix_path);
		s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		r = bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa));
		str_copy(s->base, sizeof(s->base), "http://localhost");
	} else {
		struct sockaddr_in sa = {.sin_family = AF_INET};
		socklen_t sl = sizeof(sa);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		r = bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa));
		if (r == 0)
			r = getsockname(s->lfd, (struct sockaddr *)&sa, &sl);
		s->port = ntohs(sa.sin_port);
		str_printf(s->base, sizeof(s->base), "%s://127.0.0.1:%d", tls ? "https" : "http",
			   s->port);
	}
	if (s->lfd < 0 || r < 0 || listen(s->lfd, 64) < 0 ||
	    pthread_create(&s->acceptor, NULL, accept_main, s) != 0) {
		if (s->lfd >= 0)
			close(s->lfd);
		buf_release(&s->raw);
		buf_release(&s->last);
		free(s);
		return NULL;
	}
	return s;
}

static void tsrv_stop(struct tsrv *s)
{
	if (!s)
		return;
	atomic_store(&s->stop, true);
	shutdown(s->lfd, SHUT_RDWR);
	pthread_join(s->acceptor, NULL);
	close(s->lfd);
	for (int i = 0; i < s->n_conn; i++) {
		struct tconn *c = s->conns[i];
		shutdown(c->fd, SHUT_RDWR);
		pthread_join(c->th, NULL);
		SSL_free(c->ssl);
		close(c->fd);
		free(c);
	}
	if (s->path[0])
		unlink(s->path);
	buf_release(&s->raw);
	buf_release(&s->last);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int tsrv_count(struct tsrv *s, int *ret_conns)
{
	int n;
	pthread_mutex_lock(&s->lock);
	n = s->n_req;
	if (ret_conns)
		*ret_conns = s->n_conn;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static const char *url(struct tsrv *s, const char *path, char *buf, size_t n)
{
	str_printf(buf, n, "%s%s", s->base, path);
	return buf;
}

static void client_freep(struct http_client **c)
{
	http_client_free(*c);
}
static void resp_releasep(struct http_response *r)
{
	http_response_release(r);
}
#define _cleanup_client_ __attribute__((cleanup(client_freep)))
#define _cleanup_resp_ __attribute__((cleanup(resp_releasep)))

static int64_t ms_since(int64_t t0)
{
	return (now_mono_ns() - t0) / NSEC_PER_MSEC;
}

/* Runs check(s) against a fresh server, which is stopped even when an assertion fails. */
#define WITH_SERVER(tls, unix_path, check)                                                         \
	do {                                                                                       \
		struct tsrv *srv_ = tsrv_start((tls), (unix_path));                                \
		ASSERT_NOT_NULL(srv_);                                                             \
		check(srv_);                                                                       \
		tsrv_stop(srv_);                                                                   \
	} while (0)

/* ---- plain requests ---- */

static void check_get_post(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	const struct http_header hs[] = {
	    {"Content-Type", "application/json"}, {"X-A", "b c"}, {"X-Empty", ""}};
	char u[256];

	http_response_init(&resp);
	ASSERT_OK(http_client_new(&(struct http_client_opts){.user_agent = "test-agent/1"}, &c));

	ASSERT_OK(http_client_do(c, &(struct http_request){.url = url(s, "/echo/get?x=1", u, 256)},
				 &resp));
	ASSERT_EQ(resp.status, 200);
	ASSERT_STREQ(resp.body.data, "GET /echo/get?x=1 HTTP/1.1");
	ASSERT_TRUE(str_has_prefix(s->last.data, "GET /echo/get?x=1 HTTP/1.1\r\n"));
	ASSERT_CONTAINS(s->last.data, "\r\nUser-Agent: test-agent/1\r\n");
	ASSERT_CONTAINS(s->last.data, "\r\nHost: 127.0.0.1:");
	ASSERT_NOT_CONTAINS(s->last.data, "Content-Length");
	ASSERT_NOT_CONTAINS(s->last.data, "Content-Type");
	ASSERT_NOT_CONTAINS(s->last.data, "Authorization");
	ASSERT_TRUE(str_has_suffix(s->last.data, "\r\n\r\n"));

	/* headers parsed: lower-case names, trimmed values */
	ASSERT_STREQ(http_response_header(&resp, "x-test"), "spaced value");
	ASSERT_STREQ(http_response_header(&resp, "X-Upper"), "V");
	ASSERT_STREQ(http_response_header(&resp, "content-length"), "26");
	ASSERT_NULL(http_response_header(&resp, "x-none"));
	bool lower = true;
	for (size_t i = 0; i < resp.n_headers; i++)
		for (const char *p = resp.header_names[i]; *p; p++)
			lower &= !(*p >= 'A' && *p <= 'Z');
	ASSERT_TRUE(lower);

	const char body[] = "{\"k\":1,\"bin\":\"\x01\"}";
	ASSERT_OK(http_client_do(c,
				 &(struct http_request){.method = "POST",
							.url = url(s, "/echo/post", u, 256),
							.headers = hs,
							.n_headers = ARRAY_SIZE(hs),
							.body = body,
							.body_len = sizeof(body) - 1},
				 &resp));
	ASSERT_EQ(resp.status, 200);
	ASSERT_TRUE(str_has_prefix(s->last.data, "POST /echo/post HTTP/1.1\r\n"));
	ASSERT_CONTAINS(s->last.data, "\r\nContent-Type: application/json\r\n");
	ASSERT_CONTAINS(s->last.data, "\r\nX-A: b c\r\n");
	ASSERT_CONTAINS(s->last.data, "\r\nX-Empty:\r\n");
	ASSERT_CONTAINS(s->last.data, "\r\nContent-Length: 17\r\n");
	ASSERT_NOT_CONTAINS(s->last.data, "Expect");
	ASSERT_TRUE(str_has_suffix(s->last.data, "\r\n\r\n{\"k\":1,\"bin\":\"\x01\"}"));

	/* a body without Content-Type goes without curl's form type; other methods */
	ASSERT_OK(http_client_do(
	    c,
	    &(struct http_request){
		.method = "PATCH", .url = url(s, "/echo/p", u, 256), .body = "x=1", .body_len = 3},
	    &resp));
	ASSERT_TRUE(str_has_prefix(s->last.data, "PATCH /echo/p HTTP/1.1\r\n"));
	ASSERT_NOT_CONTAINS(s->last.data, "Content-Type");
	ASSERT_TRUE(str_has_suffix(s->last.data, "\r\n\r\nx=1"));
	ASSERT_OK(http_client_do(
	    c, &(struct http_request){.method = "DELETE", .url = url(s, "/echo/d", u, 256)},
	    &resp));
	ASSERT_TRUE(str_has_prefix(s->last.data, "DELETE /echo/d HTTP/1.1\r\n"));
	ASSERT_NOT_CONTAINS(s->last.data, "Content-Length");

	/* a large POST: no "Expect: 100-continue" round trip, every byte arrives */
	size_t big_len = 3 << 19;
	_cleanup_free_ char *big = malloc(big_len);
	ASSERT_NOT_NULL(big);
	for (size_t i = 0; i < big_len; i++)
		big[i] = (char)('a' + i % 26);
	ASSERT_OK(http_client_do(c,
				 &(struct http_request){.method = "PUT",
							.url = url(s, "/echo/big", u, 256),
							.body = big,
							.body_len = big_len},
				 &resp));
	ASSERT_EQ(resp.status, 200);
	ASSERT_NOT_CONTAINS(s->last.data, "Expect");
	ASSERT_CONTAINS(s->last.data, "\r\nContent-Length: 1572864\r\n");
	ASSERT_TRUE(s->last.len > big_len &&
		    memcmp(s->last.data + s->last.len - big_len, big, big_len) == 0);

	/* header injection is refused */
	const struct http_header bad[] = {{"X-Bad", "a\r\nX-Evil: 1"}};
	ASSERT_ERR(http_client_do(
		       c, &(struct http_request){.url = u, .headers = bad, .n_headers = 1}, &resp),
		   EINVAL);
	ASSERT_EQ(tsrv_count(s, NULL), 5);
}

TEST(http_client_get_post_exact)
{
	WITH_SERVER(NULL, NULL, check_get_post);
}

static void check_headers_cap_redirect(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	_cleanup_buf_ struct buf reply = BUF_INIT(0);
	char u[256];

	http_response_init(&resp);
	ASSERT_OK(http_client_new(NULL, &c));
	ASSERT_OK(buf_puts(&reply, "HTTP/1.1 404 Not Found\r\n"));
	for (int i = 0; i < 100; i++)
		ASSERT_OK(buf_printf(&reply, "X-H%d: %d\r\n", i, i));
	ASSERT_OK(buf_puts(&reply, "Content-Length: 2\r\n\r\nno"));
	s->reply = reply.data;
	ASSERT_OK(
	    http_client_do(c, &(struct http_request){.url = url(s, "/reply", u, 256)}, &resp));
	ASSERT_EQ(resp.status, 404);
	ASSERT_STREQ(resp.body.data, "no");
	ASSERT_EQ(resp.n_headers, HTTP_MAX_RESP_HEADERS);
	ASSERT_STREQ(http_response_header(&resp, "x-h63"), "63");
	ASSERT_NULL(http_response_header(&resp, "x-h64"));

	/* redirects are not followed */
	s->reply = "HTTP/1.1 302 Found\r\nLocation: /echo/elsewhere\r\nContent-Length: 0\r\n\r\n";
	ASSERT_OK(http_client_do(c, &(struct http_request){.url = u}, &resp));
	ASSERT_EQ(resp.status, 302);
	ASSERT_STREQ(resp.body.data, "");
	ASSERT_STREQ(http_response_header(&resp, "location"), "/echo/elsewhere");
	ASSERT_EQ(tsrv_count(s, NULL), 2);
}

TEST(http_client_headers_cap_no_redirect)
{
	WITH_SERVER(NULL, NULL, check_headers_cap_redirect);
}

static void check_token(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	char u[256];

	http_response_init(&resp);
	ASSERT_OK(http_client_new(&(struct http_client_opts){.bearer_token = "tok-one"}, &c));
	url(s, "/echo/t", u, sizeof(u));
	ASSERT_OK(http_client_do(c, &(struct http_request){.url = u}, &resp));
	ASSERT_CONTAINS(s->last.data, "\r\nAuthorization: Bearer tok-one\r\n");

	ASSERT_OK(http_client_set_token(c, "tok-two"));
	ASSERT_OK(http_client_do(c, &(struct http_request){.url = u}, &resp));
	ASSERT_CONTAINS(s->last.data, "\r\nAuthorization: Bearer tok-two\r\n");
	ASSERT_NOT_CONTAINS(s->last.data, "tok-one");

	/* a per-request token wins; a caller's own Authorization header is kept as is */
	ASSERT_OK(
	    http_client_do(c, &(struct http_request){.url = u, .bearer_token = "tok-req"}, &resp));
	ASSERT_CONTAINS(s->last.data, "\r\nAuthorization: Bearer tok-req\r\n");
	ASSERT_NOT_CONTAINS(s->last.data, "tok-two");
	const struct http_header h[] = {{"Authorization", "Basic eA=="}};
	ASSERT_OK(http_client_do(c, &(struct http_request){.url = u, .headers = h, .n_headers = 1},
				 &resp));
	ASSERT_CONTAINS(s->last.data, "\r\nAuthorization: Basic eA==\r\n");
	ASSERT_NOT_CONTAINS(s->last.data, "Bearer");

	ASSERT_OK(http_client_set_token(c, NULL));
	ASSERT_OK(http_client_do(c, &(struct http_request){.url = u}, &resp));
	ASSERT_NOT_CONTAINS(s->last.data, "Authorization");
	ASSERT_ERR(http_client_set_token(NULL, "x"), EINVAL);
}

TEST(http_client_bearer_token)
{
	WITH_SERVER(NULL, NULL, check_token);
}

static void check_cap(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	_cleanup_buf_ struct buf reply = BUF_INIT(0);
	char u[256], body[1001];

	http_response_init(&resp);
	memset(body, 'x', 1000);
	body[1000] = 0;
	ASSERT_OK(http_client_new(&(struct http_client_opts){.max_response = 100}, &c));
	url(s, "/reply", u, sizeof(u));

	/* announced by Content-Length */
	ASSERT_OK(buf_printf(&reply, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n%s", body));
	s->reply = reply.data;
	ASSERT_ERR(http_client_do(c, &(struct http_request){.url = u}, &resp), EMSGSIZE);
	ASSERT_EQ(resp.body.len, 0);
	ASSERT_TRUE(resp.error[0] != 0);

	/* found while reading a chunked body */
	buf_reset(&reply);
	ASSERT_OK(buf_printf(&reply,
			     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			     "50\r\n%.80s\r\n50\r\n%.80s\r\n0\r\n\r\n",
			     body, body));
	ASSERT_ERR(http_client_do(c, &(struct http_request){.url = u}, &resp), EMSGSIZE);
	ASSERT_EQ(resp.body.len, 0);

	/* exactly at the cap is fine */
	buf_reset(&reply);
	ASSERT_OK(buf_printf(&reply, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n%.100s", body));
	ASSERT_OK(http_client_do(c, &(struct http_request){.url = u}, &resp));
	ASSERT_EQ(resp.body.len, 100);
}

TEST(http_client_response_cap)
{
	WITH_SERVER(NULL, NULL, check_cap);
}

/* A request's own cap is smaller than the client's; a larger one does not raise it. */
static void check_request_cap(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	_cleanup_buf_ struct buf reply = BUF_INIT(0);
	char u[256], body[1001];

	http_response_init(&resp);
	memset(body, 'y', 1000);
	body[1000] = 0;
	ASSERT_OK(http_client_new(&(struct http_client_opts){.max_response = 500}, &c));
	url(s, "/reply", u, sizeof(u));
	ASSERT_OK(buf_printf(&reply,
			     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			     "c8\r\n%.200s\r\n0\r\n\r\n",
			     body));
	s->reply = reply.data;
	ASSERT_OK(http_client_do(c, &(struct http_request){.url = u}, &resp));
	ASSERT_EQ(resp.body.len, 200);
	ASSERT_ERR(http_client_do(c, &(struct http_request){.url = u, .max_response = 199}, &resp),
		   EMSGSIZE);
	ASSERT_CONTAINS(resp.error, "199 bytes");
	ASSERT_OK(http_client_do(c, &(struct http_request){.url = u, .max_response = 200}, &resp));
	buf_reset(&reply);
	ASSERT_OK(buf_printf(&reply, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n%s", body));
	s->reply = reply.data;
	ASSERT_ERR(http_client_do(c, &(struct http_request){.url = u, .max_response = 4096}, &resp),
		   EMSGSIZE);
}

TEST(http_client_request_cap)
{
	WITH_SERVER(NULL, NULL, check_request_cap);
}

static void *stop_soon(void *arg)
{
	(void)arg;
	sleep_ns(150 * NSEC_PER_MSEC);
	stop_request();
	return NULL;
}

/* A request with the process's token ends at once when a stop is requested; others do not. */
static void check_cancel_on_stop(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	pthread_t th;
	char u[256];
	int64_t t0;
	int r;

	http_response_init(&resp);
	ASSERT_OK(http_client_new(NULL, &c));
	url(s, "/hang", u, sizeof(u));
	stop_reset();
	ASSERT_OK(-pthread_create(&th, NULL, stop_soon, NULL));
	t0 = now_mono_ns();
	r = http_client_do(
	    c, &(struct http_request){.url = u, .timeout_ns = 10 * NSEC_PER_SEC, .cancel = cancel_root()},
	    &resp);
	pthread_join(th, NULL);
	ASSERT_ERR(r, ECANCELED);
	ASSERT_CONTAINS(resp.error, "stopping");
	ASSERT_TRUE(now_mono_ns() - t0 < 2 * NSEC_PER_SEC);
	/* without a token, a requested stop does not cut the call short */
	t0 = now_mono_ns();
	r = http_client_do(c, &(struct http_request){.url = u, .timeout_ns = 300 * NSEC_PER_MSEC},
			   &resp);
	ASSERT_ERR(r, ETIMEDOUT);
	ASSERT_TRUE(now_mono_ns() - t0 >= 250 * NSEC_PER_MSEC);
	stop_reset();
}

TEST(http_client_cancel_on_stop)
{
	WITH_SERVER(NULL, NULL, check_cancel_on_stop);
}

TEST(http_client_connect_refused)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	char u[128];
	int fd, r;

	/* a bound port that does not listen answers with RST */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_TRUE(fd >= 0);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (r == 0)
		r = getsockname(fd, (struct sockaddr *)&sa, &sl);
	http_response_init(&resp);
	ASSERT_OK(http_client_new(&(struct http_client_opts){.bearer_token = "secret-tok"}, &c));
	str_printf(u, sizeof(u), "http://127.0.0.1:%d/x", ntohs(sa.sin_port));
	if (r == 0)
		r = http_client_do(c, &(struct http_request){.url = u}, &resp);
	close(fd);
	ASSERT_ERR(r, ECONNREFUSED);
	ASSERT_TRUE(resp.error[0] != 0);
	ASSERT_NOT_CONTAINS(resp.error, "secret-tok");
	ASSERT_EQ(resp.status, 0);

	ASSERT_ERR(http_client_do(c, &(struct http_request){.url = "ftp://127.0.0.1/x"}, &resp),
		   EINVAL);
	ASSERT_ERR(http_client_do(c, &(struct http_request){.url = NULL}, &resp), EINVAL);
}

/* A listener whose accept queue is full drops new SYNs: the connect hangs. */
TEST(http_client_connect_timeout)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int lfd, fill[2] = {-1, -1}, r = -EIO;
	int64_t t0 = 0, ms = 0;
	char u[128];

	http_response_init(&resp);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_TRUE(lfd >= 0);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0 && listen(lfd, 0) == 0) {
		for (int i = 0; i < 2; i++) {
			fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
			connect(fill[i], (struct sockaddr *)&sa, sizeof(sa));
		}
		tsrv_sleep_ms(50);
		str_printf(u, sizeof(u), "http://127.0.0.1:%d/x", ntohs(sa.sin_port));
		r = http_client_new(
		    &(struct http_client_opts){.connect_timeout_ns = 200 * NSEC_PER_MSEC,
					       .timeout_ns = 10 * NSEC_PER_SEC},
		    &c);
		t0 = now_mono_ns();
		if (r == 0)
			r = http_client_do(c, &(struct http_request){.url = u}, &resp);
		ms = ms_since(t0);
	}
	for (int i = 0; i < 2; i++)
		if (fill[i] >= 0)
			close(fill[i]);
	close(lfd);
	ASSERT_ERR(r, ETIMEDOUT);
	ASSERT_GE(ms, 150);
	ASSERT_LT(ms, 1500);
	ASSERT_CONTAINS(resp.error, "onnect"); /* "Connection timed out after ..." */
}

static void check_timeout(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	char u[256];
	int64_t t0;

	http_response_init(&resp);
	ASSERT_OK(
	    http_client_new(&(struct http_client_opts){.timeout_ns = 300 * NSEC_PER_MSEC}, &c));
	t0 = now_mono_ns();
	ASSERT_ERR(http_client_do(c, &(struct http_request){.url = url(s, "/hang", u, 256)}, &resp),
		   ETIMEDOUT);
	ASSERT_GE(ms_since(t0), 250);
	ASSERT_LT(ms_since(t0), 1500);
	ASSERT_TRUE(resp.error[0] != 0);

	/* the request's own timeout wins */
	t0 = now_mono_ns();
	ASSERT_ERR(
	    http_client_do(c, &(struct http_request){.url = u, .timeout_ns = 150 * NSEC_PER_MSEC},
			   &resp),
	    ETIMEDOUT);
	ASSERT_LT(ms_since(t0), 1000);
}

TEST(http_client_timeout)
{
	WITH_SERVER(NULL, NULL, check_timeout);
}

static void check_reuse(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	char u[256];
	int conns;

	http_response_init(&resp);
	ASSERT_OK(http_client_new(NULL, &c));
	for (int i = 0; i < 3; i++) {
		ASSERT_OK(http_client_do(c, &(struct http_request){.url = url(s, "/echo", u, 256)},
					 &resp));
		ASSERT_STREQ(http_response_header(&resp, "x-conn"), "0");
	}
	ASSERT_EQ(tsrv_count(s, &conns), 3);
	ASSERT_EQ(conns, 1);
}

TEST(http_client_connection_reuse)
{
	WITH_SERVER(NULL, NULL, check_reuse);
}

static void check_unix(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	char u[256];

	http_response_init(&resp);
	ASSERT_OK(http_client_new(&(struct http_client_opts){.unix_socket = s->path}, &c));
	ASSERT_OK(
	    http_client_do(c, &(struct http_request){.url = url(s, "/echo/unix", u, 256)}, &resp));
	ASSERT_EQ(resp.status, 200);
	ASSERT_STREQ(resp.body.data, "GET /echo/unix HTTP/1.1");
	ASSERT_CONTAINS(s->last.data, "\r\nHost: localhost\r\n");
}

TEST(http_client_unix_socket)
{
	char path[256];
	str_printf(path, sizeof(path), "%s/http.sock", test_tmpdir());
	WITH_SERVER(NULL, path, check_unix);
}

/* ---- concurrency ---- */

struct hammer {
	struct http_client *c;
	struct tsrv *s;
	int id;
	int ok;
};

#define HAMMER_THREADS 8
#define HAMMER_REQS 40

static void *hammer_main(void *arg)
{
	struct hammer *h = arg;
	struct http_response resp;
	char u[256], want[256];

	http_response_init(&resp);
	for (int i = 0; i < HAMMER_REQS; i++) {
		char path[64];
		str_printf(path, sizeof(path), "/echo/%d/%d", h->id, i);
		url(h->s, path, u, sizeof(u));
		str_printf(want, sizeof(want), "GET %s HTTP/1.1", path);
		if (http_client_do(h->c, &(struct http_request){.url = u}, &resp) == 0 &&
		    resp.status == 200 && strcmp(resp.body.data, want) == 0)
			h->ok++;
	}
	http_response_release(&resp);
	return NULL;
}

static void check_threads(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	struct hammer hs[HAMMER_THREADS];
	pthread_t th[HAMMER_THREADS];
	int started = 0, ok = 0, conns;

	ASSERT_OK(http_client_new(&(struct http_client_opts){.bearer_token = "t0"}, &c));
	for (int i = 0; i < HAMMER_THREADS; i++) {
		hs[i] = (struct hammer){.c = c, .s = s, .id = i};
		if (pthread_create(&th[i], NULL, hammer_main, &hs[i]) == 0)
			started++;
	}
	/* the token rotates while the others run */
	for (int i = 0; i < 50; i++)
		http_client_set_token(c, i % 2 ? "t1" : "t2");
	for (int i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		ok += hs[i].ok;
	}
	ASSERT_EQ(started, HAMMER_THREADS);
	ASSERT_EQ(ok, HAMMER_THREADS * HAMMER_REQS);
	ASSERT_EQ(tsrv_count(s, &conns), HAMMER_THREADS * HAMMER_REQS);
	ASSERT_LE(conns, HAMMER_THREADS); /* a handle per concurrent request, each reused */
	ASSERT_CONTAINS(s->raw.data, "\r\nAuthorization: Bearer t");
	/* every request had exactly one Authorization header */
	size_t n = 0;
	for (const char *p = s->raw.data; (p = strstr(p, "\r\nAuthorization: Bearer t")); p++)
		n++;
	ASSERT_EQ(n, HAMMER_THREADS * HAMMER_REQS);
}

TEST(http_client_threads)
{
	WITH_SERVER(NULL, NULL, check_threads);
}

/* ---- streaming ---- */

struct lines {
	char **v;
	size_t n;
	bool unterminated; /* a line was handed over without its NUL */
	int fail_at;	   /* on_line returns -EBADMSG at this line number (1-based) */
};

static int on_line(void *ud, const char *line, size_t len)
{
	struct lines *l = ud;
	if (line[len] != 0 || strlen(line) != len)
		l->unterminated = true;
	if (strv_push(&l->v, line) < 0)
		return -ENOMEM;
	l->n++;
	return l->fail_at && (int)l->n == l->fail_at ? -EBADMSG : 0;
}

static void check_stream_split(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	const char *chunks[] = {"{\"a\"",      ":1}\r", "\n{\"b\":2}\n\n\r\n{\"c",
				"\":3}\r\n",   "\n",	"\r",
				"\n{\"d\":4}", NULL};
	struct lines l = {0};
	char u[256];

	http_response_init(&resp);
	ASSERT_OK(http_client_new(NULL, &c));
	s->chunks = (const char *const *)chunks;
	s->chunk_delay_ms = 20;
	int r = http_client_stream(c, &(struct http_request){.url = url(s, "/stream", u, 256)},
				   &(struct http_stream_opts){.on_line = on_line, .ud = &l}, &resp);
	_cleanup_strv_ char **v = l.v;
	ASSERT_OK(r);
	ASSERT_EQ(resp.status, 200);
	ASSERT_STREQ(http_response_header(&resp, "transfer-encoding"), "chunked");
	ASSERT_EQ(resp.body.len, 0);
	ASSERT_EQ(l.n, 4);
	ASSERT_STREQ(v[0], "{\"a\":1}");
	ASSERT_STREQ(v[1], "{\"b\":2}");
	ASSERT_STREQ(v[2], "{\"c\":3}");
	ASSERT_STREQ(v[3], "{\"d\":4}");
	ASSERT_FALSE(l.unterminated);
}

TEST(http_client_stream_split_lines)
{
	WITH_SERVER(NULL, NULL, check_stream_split);
}

static void check_stream_many(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	_cleanup_buf_ struct buf body = BUF_INIT(0);
	_cleanup_strv_ char **chunks = NULL;
	struct lines l = {0};
	uint32_t seed = 12345;
	char u[256];

	http_response_init(&resp);
	ASSERT_OK(http_client_new(NULL, &c));
	for (int i = 0; i < 300; i++) {
		ASSERT_OK(
		    buf_printf(&body, "{\"i\":%d,\"pad\":\"%.*s\"}%s", i, (i * 37) % 200,
			       "................................................................"
			       "................................................................"
			       "................................................................"
			       "........",
			       i % 3 == 0   ? "\r\n"
			       : i % 7 == 0 ? "\n\n"
					    : "\n"));
	}
	for (size_t off = 0; off < body.len;) {
		seed = seed * 1103515245u + 12345u;
		size_t n = 1 + (seed >> 16) % 97;
		char *piece = strndup(body.data + off, n);
		ASSERT_NOT_NULL(piece);
		int r = strv_push(&chunks, piece);
		free(piece);
		ASSERT_OK(r);
		off += n;
	}
	s->chunks = (const char *const *)chunks;
	int r = http_client_stream(c, &(struct http_request){.url = url(s, "/stream", u, 256)},
				   &(struct http_stream_opts){.on_line = on_line, .ud = &l}, &resp);
	_cleanup_strv_ char **v = l.v;
	ASSERT_OK(r);
	ASSERT_EQ(l.n, 300);
	for (int i = 0; i < 300; i++) {
		char want[320];
		str_printf(want, sizeof(want), "{\"i\":%d,", i);
		ASSERT_TRUE(str_has_prefix(v[i], want));
		ASSERT_EQ(strlen(v[i]), strlen(want) + 9 + (i * 37) % 200);
	}
	ASSERT_FALSE(l.unterminated);
}

TEST(http_client_stream_many_random_chunks)
{
	WITH_SERVER(NULL, NULL, check_stream_many);
}

static void check_stream_line_cap(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	const char *chunks[] = {"short\n0123456789abcdef\r\n0123", "456789abcdef", "X\n", "next\n",
				NULL};
	struct lines l = {0};
	char u[256];

	http_response_init(&resp);
	ASSERT_OK(http_client_new(NULL, &c));
	s->chunks = (const char *const *)chunks;
	s->chunk_delay_ms = 10;
	int r = http_client_stream(
	    c, &(struct http_request){.url = url(s, "/stream", u, 256)},
	    &(struct http_stream_opts){.on_line = on_line, .ud = &l, .max_line = 16}, &resp);
	_cleanup_strv_ char **v = l.v;
	ASSERT_ERR(r, EMSGSIZE);
	ASSERT_EQ(l.n, 2);
	ASSERT_STREQ(v[0], "short");
	ASSERT_STREQ(v[1], "0123456789abcdef"); /* exactly 16, CRLF */
	ASSERT_TRUE(resp.error[0] != 0);
}

TEST(http_client_stream_line_cap)
{
	WITH_SERVER(NULL, NULL, check_stream_line_cap);
}

static void check_stream_callback_error(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	const char *chunks[] = {"a\nb\nc\n", NULL};
	struct lines l = {.fail_at = 2};
	char u[256];

	http_response_init(&resp);
	ASSERT_OK(http_client_new(NULL, &c));
	s->chunks = (const char *const *)chunks;
	int r = http_client_stream(c, &(struct http_request){.url = url(s, "/stream", u, 256)},
				   &(struct http_stream_opts){.on_line = on_line, .ud = &l}, &resp);
	_cleanup_strv_ char **v = l.v;
	ASSERT_ERR(r, EBADMSG);
	ASSERT_EQ(l.n, 2);
	ASSERT_STREQ(resp.error, strerror(EBADMSG));
	(void)v;
}

TEST(http_client_stream_callback_error)
{
	WITH_SERVER(NULL, NULL, check_stream_callback_error);
}

struct canceller {
	struct cancel *token;
	int64_t at_ns;
};

static void *cancel_main(void *arg)
{
	struct canceller *k = arg;
	tsrv_sleep_ms(200);
	k->at_ns = now_mono_ns();
	cancel_cancel(k->token);
	return NULL;
}

static void check_stream_cancel(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	const char *chunks[] = {"{\"first\":1}\n", NULL};
	struct canceller k = {0};
	struct lines l = {0};
	pthread_t th;
	char u[256];
	int64_t t0, done;
	int r;

	http_response_init(&resp);
	ASSERT_OK(http_client_new(NULL, &c));
	ASSERT_OK(cancel_new(NULL, &k.token));
	s->chunks = (const char *const *)chunks;
	s->hold = true;
	ASSERT_EQ(pthread_create(&th, NULL, cancel_main, &k), 0);
	t0 = now_mono_ns();
	r = http_client_stream(c, &(struct http_request){.url = url(s, "/stream", u, 256),
							 .cancel = k.token},
			       &(struct http_stream_opts){.on_line = on_line, .ud = &l}, &resp);
	done = now_mono_ns();
	pthread_join(th, NULL);
	_cleanup_strv_ char **v = l.v;
	ASSERT_ERR(r, ECANCELED);
	ASSERT_EQ(l.n, 1);
	ASSERT_STREQ(v[0], "{\"first\":1}");
	ASSERT_GE((done - t0) / NSEC_PER_MSEC, 190);
	ASSERT_LT((done - k.at_ns) / NSEC_PER_MSEC, 100); /* the token wakes the poll at once */
	ASSERT_STREQ(resp.error, "canceled");

	/* a stream whose token is already cancelled sends nothing */
	int before = tsrv_count(s, NULL);
	struct lines l3 = {0};
	r = http_client_stream(c, &(struct http_request){.url = u, .cancel = k.token},
			       &(struct http_stream_opts){.on_line = on_line, .ud = &l3}, &resp);
	ASSERT_ERR(r, ECANCELED);
	ASSERT_EQ(l3.n, 0);
	ASSERT_EQ(tsrv_count(s, NULL), before);
	cancel_free(k.token);

	/* the client is fine afterwards (a new connection: the canceled one is closed) */
	ASSERT_OK(
	    http_client_do(c, &(struct http_request){.url = url(s, "/echo/after", u, 256)}, &resp));
	ASSERT_STREQ(resp.body.data, "GET /echo/after HTTP/1.1");
}

TEST(http_client_stream_cancel)
{
	WITH_SERVER(NULL, NULL, check_stream_cancel);
}

static void check_stream_idle(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	const char *chunks[] = {"{\"first\":1}\n", "{\"second\":2}\n", NULL};
	struct lines l = {0};
	char u[256];
	int64_t t0;
	int r;

	http_response_init(&resp);
	ASSERT_OK(http_client_new(NULL, &c));
	s->chunks = (const char *const *)chunks;
	s->chunk_delay_ms = 150; /* under the idle timeout: not an idle stream */
	s->hold = true;
	t0 = now_mono_ns();
	r = http_client_stream(c, &(struct http_request){.url = url(s, "/stream", u, 256)},
			       &(struct http_stream_opts){.on_line = on_line,
							  .ud = &l,
							  .idle_timeout_ns = 300 * NSEC_PER_MSEC},
			       &resp);
	_cleanup_strv_ char **v = l.v;
	ASSERT_ERR(r, ETIMEDOUT);
	ASSERT_EQ(l.n, 2);
	ASSERT_GE(ms_since(t0), 150 + 300);
	ASSERT_LT(ms_since(t0), 1200);
	ASSERT_STREQ(resp.error, "no data within the idle timeout");
	(void)v;

	/* the request's total timeout also ends a stream */
	struct lines l2 = {0};
	t0 = now_mono_ns();
	r = http_client_stream(c,
			       &(struct http_request){.url = u, .timeout_ns = 250 * NSEC_PER_MSEC},
			       &(struct http_stream_opts){.on_line = on_line, .ud = &l2}, &resp);
	_cleanup_strv_ char **v2 = l2.v;
	ASSERT_ERR(r, ETIMEDOUT);
	ASSERT_LT(ms_since(t0), 1200);
	(void)v2;
}

TEST(http_client_stream_idle_timeout)
{
	WITH_SERVER(NULL, NULL, check_stream_idle);
}

static void check_stream_error_reply(struct tsrv *s)
{
	_cleanup_client_ struct http_client *c = NULL;
	_cleanup_resp_ struct http_response resp;
	struct lines l = {0};
	char u[256];

	http_response_init(&resp);
	ASSERT_OK(http_client_new(NULL, &c));
	s->reply =
	    "HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\nContent-Length: 44\r\n\r\n"
	    "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Gone\"}";
	int r = http_client_stream(c, &(struct http_request){.url = url(s, "/reply", u, 256)},
				   &(struct http_stream_opts){.on_line = on_line, .ud = &l}, &resp);
	_cleanup_strv_ char **v = l.v;
	ASSERT_OK(r);
	ASSERT_EQ(resp.status, 410);
	ASSERT_EQ(l.n, 0);
	ASSERT_STREQ(resp.body.data, "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Gone\"}");
	(void)v;
}

TEST(http_client_stream_error_reply)
{
	WITH_SERVER(NULL, NULL, check_stream_error_reply);
}

/* ---- TLS ---- */

struct pki {
	EVP_PKEY *ca_key, *srv_key, *cli_key, *other_key;
	X509 *ca, *srv, *cli, *other;
	X509 *wrong; /* issued by the CA for another name than 127.0.0.1 */
	char *ca_pem, *cli_pem, *cli_key_pem;
	char ca_file[512], cli_file[512], cli_key_file[512];
};

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ex;
	int ok;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	ex = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ex)
		return -1;
	ok = X509_add_ext(x, ex, -1);
	X509_EXTENSION_free(ex);
	return ok ? 0 : -1;
}

/* A P-256 certificate for cn, signed by issuer (self-signed when NULL). A server certificate
 * for 127.0.0.1 also names localhost; one for another name names it alone. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
		       const char *kind)
{
	static long serial = 1;
	X509 *x = X509_new();
	X509_NAME *name;
	char san[128];
	int r = 0;

	if (!x)
		return NULL;
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x),
			 __atomic_add_fetch(&serial, 1, __ATOMIC_SEQ_CST));
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
	if (strcmp(kind, "ca") == 0) {
		r |= add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE");
		r |= add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
	} else {
		r |= add_ext(x, issuer, NID_basic_constraints, "CA:FALSE");
		r |= add_ext(x, issuer, NID_ext_key_usage,
			     strcmp(kind, "server") == 0 ? "serverAuth" : "clientAuth");
		if (strcmp(kind, "server") == 0) {
			if (strcmp(cn, "127.0.0.1") == 0)
				str_copy(san, sizeof(san), "IP:127.0.0.1,DNS:localhost");
			else
				str_printf(san, sizeof(san), "DNS:%s", cn);
			r |= add_ext(x, issuer, NID_subject_alt_name, san);
		}
	}
	if (r != 0 || !X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256())) {
		X509_free(x);
		return NULL;
	}
	return x;
}

static char *pem_of(X509 *x, EVP_PKEY *k)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out = NULL;
	long n;

	if (!b)
		return NULL;
	if (x ? PEM_write_bio_X509(b, x)
	      : PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL)) {
		n = BIO_get_mem_data(b, &data);
		out = n > 0 ? strndup(data, (size_t)n) : NULL;
	}
	BIO_free(b);
	return out;
}

static int write_file(char *path, size_t n, const char *name, const char *data)
{
	FILE *f;
	str_printf(path, n, "%s/%s", test_tmpdir(), name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(data, f);
	return fclose(f) == 0 ? 0 : -1;
}

static void pki_free(struct pki *p)
{
	EVP_PKEY_free(p->ca_key);
	EVP_PKEY_free(p->srv_key);
	EVP_PKEY_free(p->cli_key);
	EVP_PKEY_free(p->other_key);
	X509_free(p->ca);
	X509_free(p->srv);
	X509_free(p->cli);
	X509_free(p->other);
	X509_free(p->wrong);
	free(p->ca_pem);
	free(p->cli_pem);
	free(p->cli_key_pem);
}

static int pki_make(struct pki *p)
{
	memset(p, 0, sizeof(*p));
	p->ca_key = EVP_EC_gen("P-256");
	p->srv_key = EVP_EC_gen("P-256");
	p->cli_key = EVP_EC_gen("P-256");
	p->other_key = EVP_EC_gen("P-256");
	if (!p->ca_key || !p->srv_key || !p->cli_key || !p->other_key)
		return -1;
	p->ca = make_cert(p->ca_key, "test-ca", NULL, NULL, "ca");
	p->other = make_cert(p->other_key, "other-ca", NULL, NULL, "ca");
	if (!p->ca || !p->other)
		return -1;
	p->srv = make_cert(p->srv_key, "127.0.0.1", p->ca, p->ca_key, "server");
	p->cli = make_cert(p->cli_key, "test-client", p->ca, p->ca_key, "client");
	p->wrong = make_cert(p->srv_key, "api.example.com", p->ca, p->ca_key, "server");
	if (!p->srv || !p->cli || !p->wrong)
		return -1;
	p->ca_pem = pem_of(p->ca, NULL);
	p->cli_pem = pem_of(p->cli, NULL);
	p->cli_key_pem = pem_of(NULL, p->cli_key);
	if (!p->ca_pem || !p->cli_pem || !p->cli_key_pem)
		return -1;
	if (write_file(p->ca_file, sizeof(p->ca_file), "ca.pem", p->ca_pem) < 0 ||
	    write_file(p->cli_file, sizeof(p->cli_file), "client.pem", p->cli_pem) < 0 ||
	    write_file(p->cli_key_file, sizeof(p->cli_key_file), "client.key", p->cli_key_pem) < 0)
		return -1;
	return 0;
}

/* A server context with a certificate of the server's key (p->srv or p->wrong) that requires a
 * client certificate from the CA. */
static SSL_CTX *server_ctx(struct pki *p, X509 *cert)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx)
		return NULL;
	if (SSL_CTX_use_certificate(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, p->srv_key) != 1 ||
	    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), p->ca) != 1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	return ctx;
}

static int tls_get(struct tsrv *s, const struct http_client_opts *o, struct http_response *resp)
{
	_cleanup_client_ struct http_client *c = NULL;
	char u[256];
	int r = http_client_new(o, &c);
	if (r < 0)
		return r;
	return http_client_do(c, &(struct http_request){.url = url(s, "/echo/tls", u, 256)}, resp);
}

static struct pki *cur_pki;

static void check_tls(struct tsrv *s)
{
	_cleanup_resp_ struct http_response resp;
	struct pki *p = cur_pki;
	int r;

	http_response_init(&resp);
	/* CA, certificate and key in memory */
	ASSERT_OK(tls_get(s,
			  &(struct http_client_opts){.ca_pem = p->ca_pem,
						     .cert_pem = p->cli_pem,
						     .key_pem = p->cli_key_pem},
			  &resp));
	ASSERT_EQ(resp.status, 200);
	ASSERT_STREQ(resp.body.data, "GET /echo/tls HTTP/1.1");
	pthread_mutex_lock(&s->lock);
	bool cn_ok = strcmp(s->peer_cn, "test-client") == 0;
	s->peer_cn[0] = 0;
	pthread_mutex_unlock(&s->lock);
	ASSERT_TRUE(cn_ok);

	/* the same from files */
	ASSERT_OK(tls_get(s,
			  &(struct http_client_opts){.ca_file = p->ca_file,
						     .cert_file = p->cli_file,
						     .key_file = p->cli_key_file},
			  &resp));
	ASSERT_EQ(resp.status, 200);

	/* the system CAs do not know our CA; nor does another CA */
	ASSERT_ERR(
	    tls_get(s,
		    &(struct http_client_opts){.cert_pem = p->cli_pem, .key_pem = p->cli_key_pem},
		    &resp),
	    EPROTO);
	ASSERT_TRUE(resp.error[0] != 0);
	char *other = pem_of(p->other, NULL);
	ASSERT_NOT_NULL(other);
	r = tls_get(s,
		    &(struct http_client_opts){
			.ca_pem = other, .cert_pem = p->cli_pem, .key_pem = p->cli_key_pem},
		    &resp);
	free(other);
	ASSERT_ERR(r, EPROTO);

	/* insecure mode skips the check */
	ASSERT_OK(tls_get(s,
			  &(struct http_client_opts){.insecure_skip_verify = true,
						     .cert_pem = p->cli_pem,
						     .key_pem = p->cli_key_pem},
			  &resp));
	ASSERT_EQ(resp.status, 200);

	/* no client certificate: the server refuses (in TLS 1.3 the client learns it on read) */
	r = tls_get(s, &(struct http_client_opts){.ca_pem = p->ca_pem}, &resp);
	ASSERT_TRUE(r == -EPROTO || r == -ECONNRESET);
}

TEST(http_client_tls)
{
	struct pki p;
	SSL_CTX *ctx = NULL;

	if (pki_make(&p) == 0)
		ctx = server_ctx(&p, p.srv);
	cur_pki = &p;
	if (ctx)
		WITH_SERVER(ctx, NULL, check_tls);
	SSL_CTX_free(ctx);
	pki_free(&p);
	ASSERT_NOT_NULL(ctx);
}

/* A man in the middle with a certificate from the trusted CA, issued for another name. */
static void check_tls_wrong_name(struct tsrv *s)
{
	_cleanup_resp_ struct http_response resp;
	struct pki *p = cur_pki;

	http_response_init(&resp);
	ASSERT_ERR(tls_get(s,
			   &(struct http_client_opts){.ca_pem = p->ca_pem,
						      .cert_pem = p->cli_pem,
						      .key_pem = p->cli_key_pem},
			   &resp),
		   EPROTO);
	ASSERT_CONTAINS(resp.error, "127.0.0.1");
	ASSERT_EQ(resp.status, 0);
}

TEST(http_client_tls_wrong_name)
{
	struct pki p;
	SSL_CTX *ctx = NULL;

	if (pki_make(&p) == 0)
		ctx = server_ctx(&p, p.wrong);
	cur_pki = &p;
	if (ctx)
		WITH_SERVER(ctx, NULL, check_tls_wrong_name);
	SSL_CTX_free(ctx);
	pki_free(&p);
	ASSERT_NOT_NULL(ctx);
}

/* ---- misc ---- */

TEST(http_client_url_join)
{
	_cleanup_buf_ struct buf b = BUF_INIT(0);

	ASSERT_OK(http_url_join("https://h:6443", "/api/v1", &b));
	ASSERT_STREQ(b.data, "https://h:6443/api/v1");
	ASSERT_OK(http_url_join("https://h:6443/", "api/v1", &b));
	ASSERT_STREQ(b.data, "https://h:6443/api/v1");
	ASSERT_OK(http_url_join("https://h/base//", "//x?y=1", &b));
	ASSERT_STREQ(b.data, "https://h/base/x?y=1");
	ASSERT_OK(http_url_join("https://h", "", &b));
	ASSERT_STREQ(b.data, "https://h/");
	ASSERT_ERR(http_url_join(NULL, "x", &b), EINVAL);
	ASSERT_STREQ(b.data, "https://h/"); /* untouched on failure */

	struct buf small = BUF_INIT(8);
	ASSERT_ERR(http_url_join("https://long.example", "x", &small), EMSGSIZE);
	ASSERT_EQ(small.len, 0);
	buf_release(&small);
}

TEST(http_client_new_free)
{
	struct http_client *c = NULL;

	http_client_free(NULL);
	http_response_release(NULL);
	ASSERT_ERR(http_client_new(NULL, NULL), EINVAL);
	ASSERT_ERR(http_client_new(&(struct http_client_opts){.timeout_ns = -1}, &c), EINVAL);
	ASSERT_NULL(c);
	ASSERT_OK(http_client_new(NULL, &c));
	ASSERT_NOT_NULL(c);
	http_client_free(c);
}
