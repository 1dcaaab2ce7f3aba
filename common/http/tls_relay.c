/* The TLS relay in front of libmicrohttpd (tls_internal.h).
 *
 * A few threads, each with its own epoll set, share the listening socket (EPOLLEXCLUSIVE: one
 * of them wakes per new connection). A connection is non-blocking end to end: the handshake
 * must finish before its deadline; then one end of a socketpair goes to MHD and the thread
 * copies bytes between the SSL and the other end, one 16 KiB buffer each way, reading a side
 * only when the buffer towards the other side is empty (so a slow reader holds back its
 * writer rather than filling memory). Closes travel both ways: the client's end of stream
 * becomes a shutdown of MHD's direction; MHD's close ends the TLS session once what it wrote has
 * been sent. MHD's connection timeout drops a client that stalls mid-request; the relay's own
 * drops one that stops reading its reply. A descriptor is in the epoll set only while the
 * connection waits on it, so a hang-up is never reported to a connection that cannot act on
 * it. */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <pthread.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/http/tls_internal.h"

#define RELAY_BUF 16384
#define ACCEPT_BATCH 16
#define EVENTS_MAX 64
#define ACCEPT_PAUSE_NS (100 * NSEC_PER_MSEC)
#define NO_DEADLINE INT64_MAX

struct worker;

struct conn {
	struct conn *prev, *next;
	struct worker *w;
	int tcp;
	int pair;		  /* our end of the socketpair; -1 before the handshake ends */
	int mhd_fd;		  /* MHD's end (MHD owns it) */
	unsigned tcp_ev, pair_ev; /* what each is in the epoll set for; 0: not in it */
	SSL *ssl;
	struct tls_peer *peer;
	bool established, tls_eof, pair_eof, pair_shut, dead;
	int64_t deadline, last_io;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	size_t up_off, up_len;	   /* client to MHD */
	size_t down_off, down_len; /* MHD to client */
	char up[RELAY_BUF], down[RELAY_BUF];
};

struct worker {
	struct tls_relay *r;
	pthread_t th;
	bool started;
	int ep;
	bool listening;	       /* the listening socket is in ep */
	int64_t accept_resume; /* when it goes back after accept ran out of descriptors */
	struct conn *conns, *dead;
};

/* Identities waiting for MHD to start their connection, by MHD's descriptor. */
struct pending {
	int fd;
	struct tls_peer *peer;
};

struct tls_relay {
	struct tls_relay_opts o;
	int64_t handshake_ns;
	struct MHD_Daemon *daemon;
	struct cancel *stop;
	atomic_uint nconns;
	struct worker *workers;
	unsigned nworkers;
	bool stopped;
	pthread_mutex_t lock;
	struct pending *pending; /* o.max_connections slots; fd -1 when free */
};

static char listen_tag, stop_tag;

/* An entry already there for fd is stale (its connection failed to start and fd was closed,
 * then reused for this one): it is replaced, so that no connection gets another's identity. */
static int pending_add(struct tls_relay *r, int fd, struct tls_peer *p)
{
	struct tls_peer *stale = NULL;
	unsigned slot = r->o.max_connections;

	pthread_mutex_lock(&r->lock);
	for (unsigned i = 0; i < r->o.max_connections; i++)
		if (r->pending[i].fd == fd) {
			stale = r->pending[i].peer;
			slot = i;
			break;
		} else if (r->pending[i].fd < 0 && slot == r->o.max_connections) {
			slot = i;
		}
	if (slot < r->o.max_connections)
		r->pending[slot] = (struct pending){fd, tls_peer_ref(p)};
	pthread_mutex_unlock(&r->lock);
	tls_peer_unref(stale);
	return slot < r->o.max_connections ? 0 : -ENOSPC;
}

/* The entry of fd (taken), or NULL; with p, only when it is p's (then dropped). */
static struct tls_peer *pending_take(struct tls_relay *r, int fd, const struct tls_peer *p)
{
	struct tls_peer *found = NULL;

	pthread_mutex_lock(&r->lock);
	for (unsigned i = 0; i < r->o.max_connections && !found; i++)
		if (r->pending[i].fd == fd && fd >= 0 && (!p || r->pending[i].peer == p)) {
			found = r->pending[i].peer;
			r->pending[i] = (struct pending){-1, NULL};
		}
	pthread_mutex_unlock(&r->lock);
	return found;
}

void tls_relay_notify(void *cls, struct MHD_Connection *c, void **socket_context,
		      enum MHD_ConnectionNotificationCode code)
{
	struct tls_relay *r = cls;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
		    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		*socket_context = ci ? pending_take(r, ci->connect_fd, NULL) : NULL;
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		tls_peer_unref(*socket_context);
		*socket_context = NULL;
	}
}

const struct http_client_cert *tls_relay_client_cert(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	const struct tls_peer *p = ci ? ci->socket_context : NULL;

	return p ? &p->cert : NULL;
}

const char *http_format_addr(const struct sockaddr *sa, char *buf, size_t n)
{
	char ip[INET6_ADDRSTRLEN] = "";
	int port;

	buf[0] = 0;
	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof(ip));
		port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof(ip));
		port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	} else {
		return buf;
	}
	snprintf(buf, n, "%s:%d", ip, port);
	return buf;
}

static const char *conn_addr(const struct conn *c, char *buf, size_t n)
{
	return http_format_addr((const struct sockaddr *)&c->addr, buf, n);
}

/* Puts fd in the epoll set for want (0: out of it). */
static void watch(struct conn *c, int fd, unsigned *cur, unsigned want)
{
	struct epoll_event ev = {.events = want, .data.ptr = c};
	int op = !*cur ? EPOLL_CTL_ADD : !want ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;

	if (want == *cur)
		return;
	if (epoll_ctl(c->w->ep, op, fd, &ev) < 0)
		log_v(1, "tls relay: epoll_ctl failed",
		      KV_E(-errno)); /* ENOMEM: the timeout ends it */
	else
		*cur = want;
}

static void conn_close(struct conn *c, bool graceful)
{
	struct worker *w = c->w;

	if (c->dead)
		return;
	c->dead = true;
	watch(c, c->tcp, &c->tcp_ev, 0);
	if (c->pair >= 0) {
		watch(c, c->pair, &c->pair_ev, 0);
		close(c->pair); /* MHD sees the end of the stream */
	}
	if (graceful)
		SSL_shutdown(c->ssl); /* close_notify when the socket takes it; no wait */
	ERR_clear_error();
	SSL_free(c->ssl);
	close(c->tcp);
	if (c->peer)
		tls_peer_unref(pending_take(w->r, c->mhd_fd, c->peer));
	tls_peer_unref(c->peer);
	atomic_fetch_sub(&w->r->nconns, 1);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	/* freed after the batch of events that may still name it */
	c->next = w->dead;
	w->dead = c;
}

/* What an SSL call that did not move data waits for: 0 (in *want), 1 at the end of the
 * stream, -1 on an error. */
static int ssl_wait(SSL *ssl, int n, unsigned *want)
{
	switch (SSL_get_error(ssl, n)) {
	case SSL_ERROR_WANT_READ:
		*want |= EPOLLIN;
		return 0;
	case SSL_ERROR_WANT_WRITE:
		*want |= EPOLLOUT;
		return 0;
	case SSL_ERROR_ZERO_RETURN:
		return 1;
	default:
		ERR_clear_error();
		return -1;
	}
}

static bool io_again(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

/* One pass of both directions; true when a byte moved or a stream ended. */
static bool relay_pass(struct conn *c, unsigned *want_tcp, unsigned *want_pair, bool *closed)
{
	bool moved = false;
	ssize_t n;
	int s;

	if (!c->tls_eof && c->up_len == 0) {
		if ((n = SSL_read(c->ssl, c->up, sizeof(c->up))) > 0) {
			c->up_len = (size_t)n;
			c->up_off = 0;
			moved = true;
		} else if ((s = ssl_wait(c->ssl, (int)n, want_tcp)) != 0) {
			if (s < 0)
				return *closed = true;
			c->tls_eof = moved = true;
		}
	}
	if (c->up_off < c->up_len) {
		n = send(c->pair, c->up + c->up_off, c->up_len - c->up_off, MSG_NOSIGNAL);
		if (n > 0) {
			c->up_off += (size_t)n;
			if (c->up_off == c->up_len)
				c->up_off = c->up_len = 0;
			moved = true;
		} else if (n < 0 && io_again()) {
			*want_pair |= EPOLLOUT;
		} else {
			/* MHD stopped reading (it replied and closed): what it wrote still goes */
			c->up_off = c->up_len = 0;
			c->tls_eof = c->pair_shut = moved = true;
		}
	}
	if (c->tls_eof && c->up_len == 0 && !c->pair_shut) {
		shutdown(c->pair, SHUT_WR);
		c->pair_shut = true;
	}
	if (!c->pair_eof && c->down_len == 0) {
		if ((n = recv(c->pair, c->down, sizeof(c->down), 0)) > 0) {
			c->down_len = (size_t)n;
			c->down_off = 0;
			moved = true;
		} else if (n < 0 && io_again()) {
			*want_pair |= EPOLLIN;
		} else {
			c->pair_eof = moved = true;
		}
	}
	if (c->down_off < c->down_len) {
		if ((n = SSL_write(c->ssl, c->down + c->down_off,
				   (int)(c->down_len - c->down_off))) > 0) {
			c->down_off += (size_t)n;
			if (c->down_off == c->down_len)
				c->down_off = c->down_len = 0;
			moved = true;
		} else if (ssl_wait(c->ssl, (int)n, want_tcp) != 0) {
			return *closed = true;
		}
	}
	return moved;
}

static void relay(struct conn *c)
{
	unsigned want_tcp, want_pair;
	bool moved, closed = false;

	do {
		want_tcp = want_pair = 0;
		moved = relay_pass(c, &want_tcp, &want_pair, &closed);
		if (closed)
			return conn_close(c, false);
		if (c->pair_eof && c->down_len == 0)
			return conn_close(c, true);
		if (moved)
			c->last_io = now_mono_ns();
	} while (moved);
	watch(c, c->tcp, &c->tcp_ev, want_tcp);
	watch(c, c->pair, &c->pair_ev, want_pair);
	/* only a client that does not take its reply is the relay's to time out: MHD times out
	 * one that stalls mid-request, and a handler may take its time */
	c->deadline =
	    c->down_off < c->down_len ? c->last_io + c->w->r->o.idle_timeout_ns : NO_DEADLINE;
}

/* After the handshake: the identity, the socketpair, MHD's end handed over. */
static int established(struct conn *c)
{
	struct tls_relay *r = c->w->r;
	struct tls_peer *p = NULL;
	char err[256] = "", addr[INET6_ADDRSTRLEN + 8];
	int sv[2], e;

	if ((e = tls_peer_from_ssl(c->ssl, &p, err, sizeof(err))) == -ENOMEM)
		return e;
	if (e < 0)
		log_v(2, "client certificate not taken; the connection is anonymous",
		      KV_S("remote", conn_addr(c, addr, sizeof(addr))), KV_S("reason", err));
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
		e = -errno;
		tls_peer_unref(p);
		return e;
	}
	if (p && (e = pending_add(r, sv[1], p)) < 0) {
		close(sv[0]);
		close(sv[1]);
		tls_peer_unref(p);
		return e;
	}
	c->peer = p;
	c->pair = sv[0];
	c->mhd_fd = sv[1];
	if (MHD_add_connection(r->daemon, sv[1], (const struct sockaddr *)&c->addr, c->addrlen) !=
	    MHD_YES) {
		e = errno ? -errno : -EIO; /* MHD closed its end */
		log_v(2, "http server did not take a TLS connection",
		      KV_S("remote", conn_addr(c, addr, sizeof(addr))), KV_E(e));
		return e;
	}
	c->established = true;
	c->last_io = now_mono_ns();
	return 0;
}

static void handshake(struct conn *c)
{
	char addr[INET6_ADDRSTRLEN + 8];
	unsigned want = 0;
	int n = SSL_do_handshake(c->ssl);

	if (n == 1) {
		if (established(c) < 0)
			return conn_close(c, false);
		return relay(c);
	}
	unsigned long e = ERR_peek_error();
	if (ssl_wait(c->ssl, n, &want) != 0) {
		log_v(2, "tls handshake failed", KV_S("remote", conn_addr(c, addr, sizeof(addr))),
		      KV_S("reason", e ? ERR_reason_error_string(e) : "end of stream"));
		return conn_close(c, false);
	}
	watch(c, c->tcp, &c->tcp_ev, want);
}

static void pump(struct conn *c)
{
	if (c->dead)
		return;
	ERR_clear_error();
	if (c->established)
		relay(c);
	else
		handshake(c);
}

static void conn_new(struct worker *w, int fd, const struct sockaddr_storage *ss, socklen_t sl)
{
	struct tls_relay *r = w->r;
	/* the buffers are left untouched: only the bytes that pass through them become resident */
	struct conn *c = malloc(sizeof(*c));
	int one = 1;

	if (c)
		memset(c, 0, offsetof(struct conn, up));

	if (!c || !(c->ssl = tls_src_ssl(r->o.src, fd))) {
		log_v(1, "cannot take a TLS connection", KV_E(-ENOMEM));
		free(c);
		close(fd);
		atomic_fetch_sub(&r->nconns, 1);
		return;
	}
	/* records go out as soon as they are written (the reply's head and body are two) */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->w = w;
	c->tcp = fd;
	c->pair = c->mhd_fd = -1;
	c->addr = *ss;
	c->addrlen = sl;
	c->deadline = now_mono_ns() + r->handshake_ns;
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	pump(c);
}

static void listen_watch(struct worker *w, bool on)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listen_tag};

	if (epoll_ctl(w->ep, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, w->r->o.listen_fd, &ev) == 0)
		w->listening = on;
}

static void accept_some(struct worker *w)
{
	struct tls_relay *r = w->r;

	for (int i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(r->o.listen_fd, (struct sockaddr *)&ss, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* out of descriptors: a pause, not a loop on a listener still ready
				 */
				log_v(1, "cannot accept a TLS connection; pausing", KV_E(-errno));
				listen_watch(w, false);
				w->accept_resume = now_mono_ns() + ACCEPT_PAUSE_NS;
				return;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			continue; /* ECONNABORTED, EINTR, EPROTO... */
		}
		if (atomic_fetch_add(&r->nconns, 1) >= r->o.max_connections) {
			atomic_fetch_sub(&r->nconns, 1);
			log_v(2, "too many TLS connections; a new one is closed",
			      KV_U("max", r->o.max_connections));
			close(fd);
			continue;
		}
		conn_new(w, fd, &ss, sl);
	}
}

/* Drops the connections past their deadline; returns the next deadline. */
static int64_t expire(struct worker *w, int64_t now)
{
	char addr[INET6_ADDRSTRLEN + 8];
	int64_t next = NO_DEADLINE;
	struct conn *c, *n;

	for (c = w->conns; c; c = n) {
		n = c->next;
		if (c->deadline > now) {
			next = c->deadline < next ? c->deadline : next;
			continue;
		}
		log_v(2,
		      c->established ? "dropped a TLS client that does not read its reply"
				     : "dropped a TLS client that did not finish its handshake",
		      KV_S("remote", conn_addr(c, addr, sizeof(addr))));
		conn_close(c, false);
	}
	if (!w->listening && now >= w->accept_resume)
		listen_watch(w, true);
	if (!w->listening && w->accept_resume < next)
		next = w->accept_resume;
	return next;
}

static void free_dead(struct worker *w)
{
	while (w->dead) {
		struct conn *c = w->dead;
		w->dead = c->next;
		free(c);
	}
}

static void *worker_main(void *ud)
{
	struct worker *w = ud;
	struct epoll_event evs[EVENTS_MAX];

	for (;;) {
		int64_t now = now_mono_ns(), next = expire(w, now);
		int timeout = next == NO_DEADLINE
				  ? -1
				  : (int)((next - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC);
		free_dead(w);
		int n = epoll_wait(w->ep, evs, EVENTS_MAX, timeout);
		if (n < 0 && errno != EINTR) {
			log_error("tls relay: epoll_wait failed", KV_E(-errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == &stop_tag)
				goto out;
			if (evs[i].data.ptr == &listen_tag)
				accept_some(w);
			else
				pump(evs[i].data.ptr);
		}
		free_dead(w);
	}
out:
	while (w->conns)
		conn_close(w->conns, false);
	free_dead(w);
	return NULL;
}

int tls_relay_new(const struct tls_relay_opts *o, struct tls_relay **ret)
{
	struct tls_relay *r = calloc(1, sizeof(*r));
	int e = 0;

	if (!r)
		return -ENOMEM;
	r->o = *o;
	r->nworkers = o->threads ? o->threads : 1;
	r->handshake_ns = tls_src_handshake_timeout(o->src);
	pthread_mutex_init(&r->lock, NULL);
	r->pending = calloc(o->max_connections, sizeof(*r->pending));
	r->workers = calloc(r->nworkers, sizeof(*r->workers));
	if (!r->pending || !r->workers)
		e = -ENOMEM;
	for (unsigned i = 0; e >= 0 && i < o->max_connections; i++)
		r->pending[i].fd = -1;
	for (unsigned i = 0; r->workers && i < r->nworkers; i++)
		r->workers[i].ep = -1;
	if (e >= 0)
		e = cancel_new(NULL, &r->stop);
	if (e >= 0 && fcntl(o->listen_fd, F_SETFL, fcntl(o->listen_fd, F_GETFL) | O_NONBLOCK) < 0)
		e = -errno;
	for (unsigned i = 0; e >= 0 && i < r->nworkers; i++) {
		struct worker *w = &r->workers[i];
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &stop_tag};
		w->r = r;
		if ((w->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
		    epoll_ctl(w->ep, EPOLL_CTL_ADD, cancel_fd(r->stop), &ev) < 0)
			e = -errno;
		else if (listen_watch(w, true), !w->listening)
			e = -errno;
	}
	if (e < 0) {
		r->stopped = true;
		tls_relay_free(r);
		return e;
	}
	*ret = r;
	return 0;
}

int tls_relay_start(struct tls_relay *r, struct MHD_Daemon *d)
{
	int e;

	r->daemon = d;
	for (unsigned i = 0; i < r->nworkers; i++) {
		if ((e = pthread_create(&r->workers[i].th, NULL, worker_main, &r->workers[i])) !=
		    0) {
			tls_relay_stop(r);
			return -e;
		}
		r->workers[i].started = true;
	}
	return 0;
}

void tls_relay_stop(struct tls_relay *r)
{
	if (!r || r->stopped)
		return;
	r->stopped = true;
	cancel_cancel(r->stop);
	for (unsigned i = 0; i < r->nworkers; i++)
		if (r->workers[i].started)
			pthread_join(r->workers[i].th, NULL);
}

void tls_relay_free(struct tls_relay *r)
{
	if (!r)
		return;
	tls_relay_stop(r);
	for (unsigned i = 0; r->workers && i < r->nworkers; i++)
		if (r->workers[i].ep >= 0)
			close(r->workers[i].ep);
	for (unsigned i = 0; r->pending && i < r->o.max_connections; i++)
		tls_peer_unref(r->pending[i].peer);
	cancel_free(r->stop);
	pthread_mutex_destroy(&r->lock);
	free(r->pending);
	free(r->workers);
	free(r);
}
