/* Upstreams: their URLs, addresses (resolved once at start), the TLS client context of an https
 * upstream, and which one serves a path (Deckhouse's upstreams by path prefix). */
#include <errno.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "modules/rbac-proxy/rbac_loop.h"

int rbac_upstream_parse(const char *url, struct rbac_upstream *u, char *err, size_t errlen)
{
	const char *p, *hs, *he, *path;

	if (!url || !*url) {
		snprintf(err, errlen, "no upstream URL");
		return -EINVAL;
	}
	if (str_has_prefix(url, "http://")) {
		p = url + 7;
	} else if (str_has_prefix(url, "https://")) {
		p = url + 8;
		u->tls = true;
	} else {
		snprintf(err, errlen, "upstream '%s': the scheme must be http or https", url);
		return -EINVAL;
	}
	path = p + strcspn(p, "/?#");
	if (*path == '?' || *path == '#') {
		snprintf(err, errlen, "upstream '%s': a query or fragment is not allowed", url);
		return -EINVAL;
	}
	if (*p == '[') { /* [IPv6]:port */
		hs = p + 1;
		he = memchr(hs, ']', (size_t)(path - hs));
		if (!he) {
			snprintf(err, errlen, "upstream '%s': bad IPv6 address", url);
			return -EINVAL;
		}
		p = he + 1;
	} else {
		hs = p;
		he = memchr(p, ':', (size_t)(path - p));
		if (!he)
			he = path;
		p = he;
	}
	if (he == hs || (size_t)(he - hs) >= sizeof(u->host) || memchr(hs, '@', (size_t)(he - hs))) {
		snprintf(err, errlen, "upstream '%s': bad host", url);
		return -EINVAL;
	}
	memcpy(u->host, hs, (size_t)(he - hs));
	u->host[he - hs] = 0;
	if (p < path && *p == ':') {
		long long port;
		char tmp[8] = "";
		if (path - p - 1 < 1 || path - p - 1 > 5) {
			snprintf(err, errlen, "upstream '%s': bad port", url);
			return -EINVAL;
		}
		memcpy(tmp, p + 1, (size_t)(path - p - 1));
		if (str_to_ll(tmp, 1, 65535, &port) < 0) {
			snprintf(err, errlen, "upstream '%s': bad port", url);
			return -EINVAL;
		}
		snprintf(u->port, sizeof(u->port), "%lld", port);
	} else if (p < path) {
		snprintf(err, errlen, "upstream '%s': bad host", url);
		return -EINVAL;
	} else {
		snprintf(u->port, sizeof(u->port), "%s", u->tls ? "443" : "80");
	}
	snprintf(u->hostport, sizeof(u->hostport), strchr(u->host, ':') ? "[%s]:%s" : "%s:%s", u->host,
		 u->port);
	if (!(u->url = strdup(url)) || !(u->base_path = strdup(path)))
		return -ENOMEM;
	return 0;
}

static int ssl_err(char *err, size_t errlen, const char *what)
{
	unsigned long e = ERR_get_error();
	char ebuf[160] = "";

	if (e)
		ERR_error_string_n(e, ebuf, sizeof(ebuf));
	snprintf(err, errlen, "%s: %s", what, ebuf);
	ERR_clear_error();
	return -EINVAL;
}

int rbac_upstream_prepare(struct rbac_upstream *u, const char *ca_file, const char *cert_file,
			  const char *key_file, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	int r = getaddrinfo(u->host, u->port, &hints, &ai);

	if (r != 0) {
		snprintf(err, errlen, "upstream '%s': cannot resolve '%s': %s", u->url, u->host,
			 gai_strerror(r));
		return -EHOSTUNREACH;
	}
	memcpy(&u->addr, ai->ai_addr, ai->ai_addrlen);
	u->addrlen = ai->ai_addrlen;
	freeaddrinfo(ai);
	if (!u->tls)
		return 0;
	if (u->ca_file)
		ca_file = u->ca_file;
	if (!(u->ctx = SSL_CTX_new(TLS_client_method())))
		return ssl_err(err, errlen, "cannot make a TLS client context");
	SSL_CTX_set_min_proto_version(u->ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(u->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (u->insecure) {
		SSL_CTX_set_verify(u->ctx, SSL_VERIFY_NONE, NULL);
	} else {
		SSL_CTX_set_verify(u->ctx, SSL_VERIFY_PEER, NULL);
		if (ca_file && *ca_file ? SSL_CTX_load_verify_locations(u->ctx, ca_file, NULL) != 1
					: SSL_CTX_set_default_verify_paths(u->ctx) != 1)
			return ssl_err(err, errlen, "cannot load the upstream CA");
	}
	/* as upstream: the client certificate is used only with an upstream CA */
	if (ca_file && *ca_file && cert_file && *cert_file) {
		if (SSL_CTX_use_certificate_chain_file(u->ctx, cert_file) != 1 ||
		    SSL_CTX_use_PrivateKey_file(u->ctx, key_file ? key_file : "", SSL_FILETYPE_PEM) != 1 ||
		    SSL_CTX_check_private_key(u->ctx) != 1)
			return ssl_err(err, errlen, "cannot load the upstream client certificate");
	}
	return 0;
}

/* Go's singleJoiningSlash. */
static int join(const char *a, const char *b, char *out, size_t outlen)
{
	size_t al = strlen(a);
	bool aslash = al && a[al - 1] == '/', bslash = b[0] == '/';

	if (aslash && bslash)
		return str_printf(out, outlen, "%s%s", a, b + 1);
	if (!aslash && !bslash)
		return str_printf(out, outlen, "%s/%s", a, b);
	return str_printf(out, outlen, "%s%s", a, b);
}

const struct rbac_upstream *rbac_upstream_pick(const struct rbac_cfg *cfg, const char *path,
					       char *out, size_t outlen)
{
	const struct rbac_upstream *best = NULL;
	size_t best_len = 0;

	for (size_t i = 0; i < cfg->nups; i++) {
		const char *pre = cfg->ups[i].prefix ? cfg->ups[i].prefix : "/";
		size_t n = strlen(pre);
		if (n > 1 && pre[n - 1] == '/')
			n--;
		bool match = n == 1 || (strncmp(path, pre, n) == 0 && (!path[n] || path[n] == '/'));
		if (match && (!best || n > best_len)) {
			best = &cfg->ups[i];
			best_len = n;
		}
	}
	if (!best)
		return NULL;
	const char *rest = best_len > 1 ? path + best_len : path;
	if (join(best->base_path, rest, out, outlen) < 0)
		return NULL;
	return best;
}

/* ---- I/O and the per-loop pool of idle upstream connections ---- */

long rbac_io_read(int fd, SSL *ssl, void *b, size_t n)
{
	if (ssl) {
		size_t got = 0;
		int r = SSL_read_ex(ssl, b, n, &got);
		if (r == 1)
			return (long)got;
		int e = SSL_get_error(ssl, r);
		ERR_clear_error();
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
			return -EAGAIN;
		return e == SSL_ERROR_ZERO_RETURN ? 0 : -EIO;
	}
	ssize_t r = recv(fd, b, n, 0);
	if (r >= 0)
		return (long)r;
	return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
}

long rbac_io_write(int fd, SSL *ssl, const void *b, size_t n)
{
	if (ssl) {
		size_t put = 0;
		int r = SSL_write_ex(ssl, b, n, &put);
		if (r == 1)
			return (long)put;
		int e = SSL_get_error(ssl, r);
		ERR_clear_error();
		return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? -EAGAIN : -EPIPE;
	}
	ssize_t r = send(fd, b, n, MSG_NOSIGNAL);
	if (r >= 0)
		return (long)r;
	return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
}

void rbac_up_free(struct rbac_upconn *u)
{
	if (u->ssl)
		SSL_free(u->ssl);
	if (u->fd >= 0)
		close(u->fd);
	free(u);
}

void rbac_up_put(struct rbac_loop *l, struct rbac_upconn *u, bool keep)
{
	if (!u)
		return;
	u->owner = NULL;
	if (keep && !u->dead && l->pool_n[u->ups] < RBAC_POOL_IDLE_MAX) {
		u->next = l->pool[u->ups];
		l->pool[u->ups] = u;
		l->pool_n[u->ups]++;
		u->idle_since = l->now;
		return;
	}
	/* an event for it may be in the current batch: mark it, free it after */
	epoll_ctl(l->ep, EPOLL_CTL_DEL, u->fd, NULL);
	u->dead = true;
	u->next = l->ugrave;
	l->ugrave = u;
}

/* A pooled connection the upstream has closed (or sent bytes on) is not reused. */
bool rbac_up_alive(struct rbac_upconn *u)
{
	char b;
	ssize_t r = recv(u->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

struct rbac_upconn *rbac_up_get(struct rbac_loop *l, size_t ups, bool *reused, int *err)
{
	const struct rbac_upstream *us = &l->p->cfg.ups[ups];
	struct rbac_upconn *u;
	int one = 1;

	while ((u = l->pool[ups])) {
		l->pool[ups] = u->next;
		l->pool_n[ups]--;
		u->next = NULL;
		if (rbac_up_alive(u)) {
			*reused = true;
			return u;
		}
		rbac_up_put(l, u, false);
	}
	*reused = false;
	if (!(u = calloc(1, sizeof(*u)))) {
		*err = -ENOMEM;
		return NULL;
	}
	u->tag = (struct rbac_tag){TAG_UP, u};
	u->ups = ups;
	u->fd = socket(us->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd < 0) {
		*err = -errno;
		free(u);
		return NULL;
	}
	setsockopt(u->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(u->fd, (const struct sockaddr *)&us->addr, us->addrlen) < 0) {
		if (errno != EINPROGRESS) {
			*err = -errno;
			log_error("cannot connect to the upstream", KV_S("upstream", us->url), KV_E(*err));
			rbac_up_free(u);
			return NULL;
		}
		u->connecting = true;
	}
	if (us->ctx) {
		if (!(u->ssl = SSL_new(us->ctx)) || SSL_set_fd(u->ssl, u->fd) != 1 ||
		    (!us->insecure && SSL_set1_host(u->ssl, us->host) != 1) ||
		    SSL_set_tlsext_host_name(u->ssl, us->host) != 1) {
			ERR_clear_error();
			*err = -ENOMEM;
			rbac_up_free(u);
			return NULL;
		}
		SSL_set_connect_state(u->ssl);
		u->handshaking = true;
	}
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
				 .data.ptr = &u->tag};
	if (epoll_ctl(l->ep, EPOLL_CTL_ADD, u->fd, &ev) < 0) {
		*err = -errno;
		rbac_up_free(u);
		return NULL;
	}
	return u;
}

