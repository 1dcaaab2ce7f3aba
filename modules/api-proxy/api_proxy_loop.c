/* aws-k8s api-proxy: the event loops. Each loop is one thread with its own epoll set; they share
 * one listening socket (EPOLLEXCLUSIVE: one loop wakes per new connection). A connection is two
 * sockets and two one-way relays; both sockets are registered once, edge-triggered, for input
 * and output, and every event runs both relays, so no epoll_ctl happens while bytes flow.
 *
 * A connect that fails or does not finish within the connect timeout marks the upstream down
 * and the next one is tried with the bytes the client sent so far (nothing reached the first).
 * Once connected, nothing is parsed: TLS goes through untouched. A connection with no byte in
 * either direction for the idle timeout is closed (nginx's proxy_timeout).
 *
 * The per-connection path is kept short (one connection per request is the API server's common
 * case): accept4 until EAGAIN with SOCK_NONBLOCK|SOCK_CLOEXEC; TCP_NODELAY set once on the
 * listening socket (accepted sockets inherit it); connections and their buffers (or pipes) come
 * from a per-loop free list; a connect is done when EPOLLOUT comes without EPOLLERR/EPOLLHUP (no
 * getsockopt); with the buffer relay, a short read or write means the socket is drained or full
 * (no extra call to hear EAGAIN) unless the peer's FIN was announced (EPOLLRDHUP: read on to the
 * 0); the last direction
 * to finish closes the connection without its shutdown call. Each upstream socket of a
 * connection has its own epoll tag (two, alternating per connect), so an event of a socket
 * already replaced is told from one of the current socket. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/http/server.h"
#include "modules/api-proxy/api_proxy.h"

enum ap_kind { AP_LISTEN = 1, AP_CANCEL, AP_CLIENT, AP_UPSTREAM };

struct ap_tag {
	enum ap_kind kind;
	struct ap_conn *c;
};

struct ap_end {
	struct ap_tag tag;
	int fd;
	bool rd, wr; /* readiness seen and not yet used up (EAGAIN or a short call clears it) */
	bool rdhup;  /* the peer's FIN announced: read until 0, whatever a short read says */
};

/* One direction: bytes read from src, not yet written to dst (a buffer or a pipe). */
struct ap_dir {
	char *buf;
	size_t off, len;
	int pipe[2];
	bool eof;  /* src said EOF */
	bool shut; /* dst was shut down for writing */
};

struct ap_conn {
	struct ap_end cl, up;
	struct ap_tag up_tags[2]; /* up's tag is up_tags[up_gen & 1]: a new one per connect */
	unsigned up_gen;
	struct ap_dir c2u, u2c;
	struct ap_upstream *ups;
	bool connecting, dead;
	int64_t deadline, last;
	uint64_t tried[AP_MAX_TRIES];
	size_t ntried;
	struct ap_conn *prev, *next;   /* every connection of the loop */
	struct ap_conn *cprev, *cnext; /* the connecting ones */
	struct ap_conn *dnext;	       /* freed after the event batch; the free list's link */
};

#define FREE_LIST_MAX 64 /* connections kept for reuse per loop (with their buffers or pipes) */

struct ap_loop {
	struct ap_proxy *p;
	int ep;
	pthread_t th;
	bool started;
	struct cancel *stop;
	struct ap_tag listen_tag, cancel_tag;
	struct ap_conn *all, *connecting, *dead;
	struct ap_conn *free_list;
	unsigned nfree;
	int64_t now, next_sweep;
	struct ap_stats st; /* written by the loop only; read with relaxed loads */
};

#define STAT_ADD(l, f, v) __atomic_store_n(&(l)->st.f, (l)->st.f + (v), __ATOMIC_RELAXED)

static void list_add(struct ap_conn **head, struct ap_conn *c, bool conn_list)
{
	struct ap_conn **next = conn_list ? &c->next : &c->cnext, **prev = conn_list ? &c->prev : &c->cprev;
	*prev = NULL;
	*next = *head;
	if (*head)
		*(conn_list ? &(*head)->prev : &(*head)->cprev) = c;
	*head = c;
}

static void list_del(struct ap_conn **head, struct ap_conn *c, bool conn_list)
{
	struct ap_conn *n = conn_list ? c->next : c->cnext, *p = conn_list ? c->prev : c->cprev;
	if (p)
		*(conn_list ? &p->next : &p->cnext) = n;
	else
		*head = n;
	if (n)
		*(conn_list ? &n->prev : &n->cprev) = p;
}

int ap_listen(const char *addr, int *ret_fd, char *err, size_t errlen)
{
	char host[256], ps[8];
	unsigned port;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV | AI_PASSIVE},
			*ai = NULL;
	int fd, one = 1, r;

	long long lp;

	if (addr[0] == ':' && str_to_ll(addr + 1, 0, 65535, &lp) == 0) {
		host[0] = '\0'; /* every address */
		port = (unsigned)lp;
	} else if (ap_hostport_split(addr, host, sizeof(host), &port) < 0) {
		snprintf(err, errlen, "'%s' is not HOST:PORT", addr);
		return -EINVAL;
	}
	snprintf(ps, sizeof(ps), "%u", port);
	if ((r = getaddrinfo(*host ? host : NULL, ps, &hints, &ai)) != 0) {
		snprintf(err, errlen, "'%s': %s", addr, gai_strerror(r));
		return -EINVAL;
	}
	r = 0;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		r = -errno;
	else if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
		 setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
		 bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 4096) < 0)
		r = -errno;
	freeaddrinfo(ai);
	if (r < 0) {
		snprintf(err, errlen, "cannot listen on '%s': %s", addr, strerror(-r));
		if (fd >= 0)
			close(fd);
		return r;
	}
	*ret_fd = fd;
	return 0;
}

static void conn_destroy(struct ap_conn *c)
{
	for (int i = 0; i < 2; i++) {
		struct ap_dir *d = i ? &c->u2c : &c->c2u;
		if (d->pipe[0] >= 0)
			close(d->pipe[0]);
		if (d->pipe[1] >= 0)
			close(d->pipe[1]);
	}
	free(c->c2u.buf);
	free(c);
}

/* A closed connection: kept for the next one (its buffer or its pipes with it) unless the free
 * list is full or a pipe may still hold bytes. */
static void conn_free(struct ap_loop *l, struct ap_conn *c)
{
	if (l->nfree < FREE_LIST_MAX && !c->c2u.len && !c->u2c.len) {
		c->dnext = l->free_list;
		l->free_list = c;
		l->nfree++;
		return;
	}
	conn_destroy(c);
}

static int setup_pipes(struct ap_dir *d)
{
	if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	return 0;
}

/* A connection for the client socket fd, from the free list or new: NULL when out of memory or
 * pipes. */
static struct ap_conn *conn_new(struct ap_loop *l, int fd)
{
	struct ap_proxy *p = l->p;
	struct ap_conn *c = l->free_list;
	char *buf = NULL;
	int pipes[4] = { -1, -1, -1, -1 };

	if (c) {
		l->free_list = c->dnext;
		l->nfree--;
		buf = c->c2u.buf;
		memcpy(pipes, c->c2u.pipe, sizeof(c->c2u.pipe));
		memcpy(pipes + 2, c->u2c.pipe, sizeof(c->u2c.pipe));
		memset(c, 0, sizeof(*c));
	} else if (!(c = calloc(1, sizeof(*c)))) {
		return NULL;
	}
	c->c2u.buf = buf;
	memcpy(c->c2u.pipe, pipes, sizeof(c->c2u.pipe));
	memcpy(c->u2c.pipe, pipes + 2, sizeof(c->u2c.pipe));
	if (p->relay == AP_RELAY_BUFFER && !c->c2u.buf && !(c->c2u.buf = malloc(2 * p->buffer_size))) {
		free(c);
		return NULL;
	}
	if (p->relay == AP_RELAY_BUFFER)
		c->u2c.buf = c->c2u.buf + p->buffer_size;
	if (p->relay == AP_RELAY_SPLICE && c->c2u.pipe[0] < 0 &&
	    (setup_pipes(&c->c2u) < 0 || setup_pipes(&c->u2c) < 0)) {
		conn_destroy(c);
		return NULL;
	}
	c->cl = (struct ap_end){ .tag = { AP_CLIENT, c }, .fd = fd };
	c->up = (struct ap_end){ .fd = -1 };
	c->up_tags[0] = c->up_tags[1] = (struct ap_tag){ AP_UPSTREAM, c };
	return c;
}

/* Closes both sockets now; the memory goes after the event batch (other events of the batch may
 * name it). */
static void conn_close(struct ap_loop *l, struct ap_conn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	if (c->connecting)
		list_del(&l->connecting, c, false);
	list_del(&l->all, c, true);
	if (c->cl.fd >= 0)
		close(c->cl.fd);
	if (c->up.fd >= 0)
		close(c->up.fd);
	c->cl.fd = c->up.fd = -1;
	if (c->ups)
		ap_pool_put(&l->p->pool, c->ups, false);
	c->ups = NULL;
	__atomic_fetch_sub(&l->p->active, 1, __ATOMIC_RELAXED);
	STAT_ADD(l, active, -1);
	c->dnext = l->dead;
	l->dead = c;
}

static int watch(struct ap_loop *l, int fd, struct ap_tag *tag)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = tag};
	return epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* Starts a connect to the next upstream not tried yet. 0 connecting (or connected), -errno when
 * none is left. */
static int conn_connect(struct ap_loop *l, struct ap_conn *c)
{
	struct ap_proxy *p = l->p;
	int one = 1;

	while (c->ntried < AP_MAX_TRIES) {
		struct ap_upstream *u = ap_pool_pick(&p->pool, c->tried, c->ntried);
		if (!u)
			break;
		c->tried[c->ntried++] = u->id;
		int fd = socket(u->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			int r = -errno;
			ap_pool_put(&p->pool, u, false);
			return r;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (struct sockaddr *)&u->addr, u->addrlen) < 0 && errno != EINPROGRESS) {
			log_warn("upstream connect failed", KV_S("upstream", u->name), KV_E(-errno));
			close(fd);
			STAT_ADD(l, connect_failures, 1);
			ap_pool_put(&p->pool, u, true);
			continue;
		}
		c->up.fd = fd;
		c->up.rd = c->up.wr = c->up.rdhup = false;
		c->ups = u;
		c->up_gen++; /* events of the previous socket, if any are pending, are stale */
		if (watch(l, fd, &c->up_tags[c->up_gen & 1]) < 0) {
			int r = -errno;
			close(fd);
			c->up.fd = -1;
			c->ups = NULL;
			ap_pool_put(&p->pool, u, false);
			return r;
		}
		c->connecting = true;
		c->deadline = l->now + p->connect_timeout_ns;
		list_add(&l->connecting, c, false);
		log_v(4, "connecting", KV_S("upstream", u->name));
		return 0;
	}
	return -EHOSTUNREACH;
}

/* The connect failed (err) or timed out (err 0): next upstream, or the client goes. */
static void conn_connect_failed(struct ap_loop *l, struct ap_conn *c, int err)
{
	struct ap_upstream *u = c->ups;

	log_warn(err ? "upstream connect failed" : "upstream connect timed out",
		 KV_S("upstream", u->name), KV_E(err ? -err : -ETIMEDOUT));
	STAT_ADD(l, connect_failures, 1);
	if (!err)
		STAT_ADD(l, timeouts, 1);
	list_del(&l->connecting, c, false);
	c->connecting = false;
	close(c->up.fd); /* also leaves the epoll set */
	c->up.fd = -1;
	c->ups = NULL;
	ap_pool_put(&l->p->pool, u, true);
	if (conn_connect(l, c) < 0) {
		log_warn("no upstream left for a client connection", KV_I("tried", c->ntried));
		STAT_ADD(l, no_upstream, 1);
		conn_close(l, c);
	}
}

/* Moves what it can from src to dst. 1 progress, 0 none, -errno on a socket error. */
static int relay(struct ap_loop *l, struct ap_conn *c, struct ap_dir *d, struct ap_end *src,
		 struct ap_end *dst, bool to_upstream)
{
	size_t cap = l->p->buffer_size;
	bool moved = false;
	ssize_t n;

	for (;;) {
		bool progress = false;
		if (src->rd && !d->eof && d->off + d->len < cap) {
			if (d->buf)
				n = read(src->fd, d->buf + d->off + d->len, cap - d->off - d->len);
			else
				n = splice(src->fd, NULL, d->pipe[1], NULL, cap - d->len,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				/* a short read emptied the socket's queue (a later byte is a new
				 * edge); not so for splice, which returns after one chunk */
				if (d->buf && (size_t)n < cap - d->off - d->len && !src->rdhup)
					src->rd = false;
				d->len += (size_t)n;
				progress = true;
				if (to_upstream)
					STAT_ADD(l, bytes_in, (uint64_t)n);
				else
					STAT_ADD(l, bytes_out, (uint64_t)n);
			} else if (n == 0) {
				d->eof = true;
				progress = true;
			} else if (errno == EAGAIN) {
				src->rd = false;
			} else if (errno != EINTR) {
				return -errno;
			}
		}
		/* the upstream socket is not writable before the connect ends */
		if (d->len && dst->wr && !c->connecting) {
			if (d->buf)
				n = write(dst->fd, d->buf + d->off, d->len);
			else
				n = splice(d->pipe[0], NULL, dst->fd, NULL, d->len,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				if (d->buf && (size_t)n < d->len) /* a short write filled the socket */
					dst->wr = false;
				d->len -= (size_t)n;
				d->off = d->len ? d->off + (size_t)n : 0;
				progress = true;
			} else if (n < 0 && errno == EAGAIN) {
				dst->wr = false;
			} else if (n < 0 && errno != EINTR) {
				return -errno;
			}
		}
		if (d->buf && d->off && d->off + d->len == cap) {
			memmove(d->buf, d->buf + d->off, d->len);
			d->off = 0;
			progress = true;
		}
		if (!progress)
			break;
		moved = true;
	}
	if (d->eof && !d->len && !d->shut && !c->connecting) {
		/* the last direction to end closes the connection: no shutdown needed */
		if (!(d == &c->c2u ? c->u2c.shut : c->c2u.shut))
			shutdown(dst->fd, SHUT_WR);
		d->shut = true;
	}
	return moved;
}

static void conn_pump(struct ap_loop *l, struct ap_conn *c)
{
	int a, b;

	if ((a = relay(l, c, &c->c2u, &c->cl, &c->up, true)) < 0 ||
	    (b = relay(l, c, &c->u2c, &c->up, &c->cl, false)) < 0) {
		log_v(3, "connection ended by an error", KV_E(a < 0 ? a : b));
		conn_close(l, c);
		return;
	}
	if (a || b)
		c->last = l->now;
	if (c->c2u.shut && c->u2c.shut)
		conn_close(l, c);
}

static void on_accept(struct ap_loop *l)
{
	struct ap_proxy *p = l->p;

	for (int i = 0; i < 64; i++) {
		int fd = accept4(p->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warn("accept failed", KV_E(-errno));
			return;
		}
		if ((long long)__atomic_load_n(&p->active, __ATOMIC_RELAXED) >= p->max_connections) {
			STAT_ADD(l, refused, 1);
			log_v(2, "connection refused: --max-connections reached");
			close(fd);
			continue;
		}
		/* TCP_NODELAY: inherited from the listening socket */
		struct ap_conn *c = conn_new(l, fd);
		if (!c) {
			close(fd);
			continue;
		}
		c->last = l->now;
		__atomic_fetch_add(&p->active, 1, __ATOMIC_RELAXED);
		STAT_ADD(l, active, 1);
		STAT_ADD(l, accepted, 1);
		list_add(&l->all, c, true);
		int r = watch(l, fd, &c->cl.tag);
		if (r == 0 && (r = conn_connect(l, c)) < 0) {
			log_warn("no upstream for a client connection", KV_E(r));
			STAT_ADD(l, no_upstream, 1);
		}
		if (r < 0)
			conn_close(l, c);
	}
}

static void on_event(struct ap_loop *l, struct ap_tag *t, uint32_t ev)
{
	struct ap_conn *c = t->c;
	struct ap_end *e = t->kind == AP_CLIENT ? &c->cl : &c->up;

	if (c->dead)
		return;
	/* an event of an upstream socket this connection has replaced in this batch */
	if (t->kind == AP_UPSTREAM && t != &c->up_tags[c->up_gen & 1])
		return;
	if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		e->rd = true;
	if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		e->rdhup = true;
	if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR))
		e->wr = true;
	if (t->kind == AP_UPSTREAM && c->connecting) {
		int err = 0;
		socklen_t len = sizeof(err);
		if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		/* EPOLLOUT alone: connected; otherwise ask why it failed */
		if ((ev & (EPOLLERR | EPOLLHUP)) &&
		    getsockopt(c->up.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if ((ev & (EPOLLERR | EPOLLHUP)) && !err)
			err = ECONNREFUSED;
		if (err) {
			conn_connect_failed(l, c, err);
			return;
		}
		c->connecting = false;
		list_del(&l->connecting, c, false);
		ap_pool_connected(&l->p->pool, c->ups);
		log_v(4, "connected", KV_S("upstream", c->ups->name));
	}
	conn_pump(l, c);
}

static void sweep(struct ap_loop *l)
{
	struct ap_conn *c, *next;

	for (c = l->connecting; c; c = next) {
		next = c->cnext;
		if (c->deadline <= l->now)
			conn_connect_failed(l, c, 0);
	}
	if (l->now < l->next_sweep)
		return;
	l->next_sweep = l->now + NSEC_PER_SEC;
	for (c = l->all; c; c = next) {
		next = c->next;
		if (!c->connecting && l->now - c->last >= l->p->idle_timeout_ns) {
			log_v(2, "idle connection closed", KV_S("upstream", c->ups ? c->ups->name : ""));
			STAT_ADD(l, idle_closed, 1);
			conn_close(l, c);
		}
	}
}

static int next_timeout_ms(struct ap_loop *l)
{
	int64_t t = l->next_sweep;

	for (struct ap_conn *c = l->connecting; c; c = c->cnext)
		if (c->deadline < t)
			t = c->deadline;
	t -= l->now;
	return t <= 0 ? 0 : (int)((t + 999999) / 1000000);
}

static void *loop_run(void *arg)
{
	struct ap_loop *l = arg;
	struct epoll_event evs[256];

	l->now = now_mono_ns();
	l->next_sweep = l->now + NSEC_PER_SEC;
	for (;;) {
		int n = epoll_wait(l->ep, evs, 256, next_timeout_ms(l));
		if (n < 0 && errno != EINTR) {
			log_error("epoll_wait failed", KV_E(-errno));
			break;
		}
		l->now = now_mono_ns();
		bool stop = false;
		for (int i = 0; i < n; i++) {
			struct ap_tag *t = evs[i].data.ptr;
			if (t->kind == AP_CANCEL)
				stop = true;
			else if (t->kind == AP_LISTEN)
				on_accept(l);
			else
				on_event(l, t, evs[i].events);
		}
		if (stop)
			break;
		sweep(l);
		while (l->dead) {
			struct ap_conn *c = l->dead;
			l->dead = c->dnext;
			conn_free(l, c);
		}
	}
	return NULL;
}

static void loop_free(struct ap_loop *l)
{
	if (!l)
		return;
	while (l->all)
		conn_close(l, l->all);
	while (l->dead) {
		struct ap_conn *c = l->dead;
		l->dead = c->dnext;
		conn_destroy(c);
	}
	while (l->free_list) {
		struct ap_conn *c = l->free_list;
		l->free_list = c->dnext;
		conn_destroy(c);
	}
	if (l->ep >= 0)
		close(l->ep);
	free(l);
}

int ap_loops_start(struct ap_proxy *p, struct cancel *stop)
{
	if (!(p->loops = calloc(p->nloops, sizeof(*p->loops))))
		return -ENOMEM;
	for (unsigned i = 0; i < p->nloops; i++) {
		struct ap_loop *l = calloc(1, sizeof(*l));
		if (!l)
			return -ENOMEM;
		p->loops[i] = l;
		l->p = p;
		l->stop = stop;
		l->listen_tag.kind = AP_LISTEN;
		l->cancel_tag.kind = AP_CANCEL;
		if ((l->ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
			return -errno;
		struct epoll_event ls = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &l->listen_tag};
		struct epoll_event cs = {.events = EPOLLIN, .data.ptr = &l->cancel_tag};
		if (epoll_ctl(l->ep, EPOLL_CTL_ADD, p->listen_fd, &ls) < 0 ||
		    epoll_ctl(l->ep, EPOLL_CTL_ADD, cancel_fd(stop), &cs) < 0)
			return -errno;
		int r = pthread_create(&l->th, NULL, loop_run, l);
		if (r)
			return -r;
		l->started = true;
	}
	return 0;
}

void ap_loops_stop(struct ap_proxy *p)
{
	struct ap_loop **loops = p->loops;

	p->loops = NULL;
	for (unsigned i = 0; loops && i < p->nloops; i++) {
		struct ap_loop *l = loops[i];
		if (l && l->started)
			pthread_join(l->th, NULL);
		loop_free(l);
	}
	free(loops);
}

void ap_stats_get(struct ap_proxy *p, struct ap_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	for (unsigned i = 0; p->loops && i < p->nloops; i++) {
		const struct ap_stats *s = p->loops[i] ? &p->loops[i]->st : NULL;
		if (!s)
			continue;
#define SUM(f) ret->f += __atomic_load_n(&s->f, __ATOMIC_RELAXED)
		SUM(accepted);
		SUM(refused);
		SUM(active);
		SUM(bytes_in);
		SUM(bytes_out);
		SUM(connect_failures);
		SUM(timeouts);
		SUM(idle_closed);
		SUM(no_upstream);
#undef SUM
	}
}
