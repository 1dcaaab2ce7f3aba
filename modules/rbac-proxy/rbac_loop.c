/* The event loops: each has its own SO_REUSEPORT listener (the kernel spreads connections),
 * an edge-triggered epoll set, its connections, its pool of idle upstream connections and an
 * eventfd through which the workers hand back decided requests. Connections closed while
 * events of the same batch may still name them are freed after the batch. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/http/server.h"
#include "modules/rbac-proxy/rbac_loop.h"

#define MAX_EVENTS 256
#define MAX_CONNS_PER_LOOP 20000

static void accept_all(struct rbac_loop *l, int lfd, bool endpoints)
{
	for (;;) {
		struct sockaddr_storage sa;
		socklen_t sl = sizeof(sa);
		int one = 1, fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (l->nconns >= MAX_CONNS_PER_LOOP) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct rbac_conn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->tag = (struct rbac_tag){TAG_CLIENT, c};
		c->l = l;
		c->fd = fd;
		c->endpoints = endpoints;
		buf_init(&c->cin, l->p->o.max_header_bytes + RBAC_IO_CHUNK);
		buf_init(&c->cout, (size_t)16 << 20);
		buf_init(&c->uout, (size_t)16 << 20);
		buf_init(&c->uin, l->p->o.max_header_bytes + RBAC_IO_CHUNK);
		char host[64] = "";
		if (sa.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, host, sizeof(host));
		else if (sa.ss_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, host, sizeof(host));
		str_copy(c->addr, sizeof(c->addr), host);
		c->ssl = tls_src_ssl(l->p->tls, fd);
		/* read-ahead: a TLS record in one read(2), not a header read then a body read (the
		 * steps read until WANT_READ before they wait, so nothing is left in OpenSSL's
		 * buffer unseen; tests/bench/rbac_proxy.sh) */
		if (c->ssl)
			SSL_set_read_ahead(c->ssl, 1);
		struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
					 .data.ptr = &c->tag};
		if (!c->ssl || epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			rbac_conn_free(c);
			continue;
		}
		c->st = S_HANDSHAKE;
		c->deadline = l->now + l->p->o.handshake_timeout_ns;
		c->next = l->conns;
		if (l->conns)
			l->conns->prev = c;
		l->conns = c;
		l->nconns++;
		rbac_conn_drive(c);
	}
}

void rbac_loop_job_done(struct rbac_loop *l, struct rbac_job *j)
{
	uint64_t one = 1;

	pthread_mutex_lock(&l->mu);
	j->next = l->done;
	l->done = j;
	pthread_mutex_unlock(&l->mu);
	if (write(l->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_error("cannot wake an event loop", KV_E(-errno));
}

static void jobs_done(struct rbac_loop *l)
{
	uint64_t v;
	struct rbac_job *j;

	while (read(l->evfd, &v, sizeof(v)) > 0)
		;
	pthread_mutex_lock(&l->mu);
	j = l->done;
	l->done = NULL;
	pthread_mutex_unlock(&l->mu);
	for (struct rbac_job *next; j; j = next) {
		struct rbac_conn *c = j->conn;
		next = j->next;
		if (c->st == S_DEAD) { /* the client went away meanwhile */
			c->grave_next = l->grave;
			l->grave = c;
		} else {
			rbac_conn_verdict(c, j);
		}
		rbac_ask_release(&j->ask);
		kube_user_release(&j->verdict.user);
		free(j);
	}
}

static void sweep(struct rbac_loop *l)
{
	for (struct rbac_conn *c = l->conns, *next; c; c = next) {
		next = c->next;
		if (c->deadline && l->now >= c->deadline)
			rbac_conn_expired(c);
	}
	/* idle upstream connections are dropped after 90 s, as Go's IdleConnTimeout */
	for (size_t i = 0; i < l->p->cfg.nups; i++) {
		struct rbac_upconn **pp = &l->pool[i];
		while (*pp) {
			struct rbac_upconn *u = *pp;
			if (l->now - u->idle_since < 90 * NSEC_PER_SEC) {
				pp = &u->next;
				continue;
			}
			*pp = u->next;
			l->pool_n[i]--;
			rbac_up_put(l, u, false);
		}
	}
}

static void on_up_event(struct rbac_loop *l, struct rbac_upconn *u)
{
	if (u->owner) {
		rbac_conn_drive(u->owner);
		return;
	}
	/* idle in the pool: the upstream closed it (or sent something unasked) */
	for (struct rbac_upconn **pp = &l->pool[u->ups]; *pp; pp = &(*pp)->next)
		if (*pp == u) {
			if (rbac_up_alive(u))
				return;
			*pp = u->next;
			l->pool_n[u->ups]--;
			rbac_up_put(l, u, false);
			return;
		}
}

static void bury(struct rbac_loop *l)
{
	while (l->grave) {
		struct rbac_conn *c = l->grave;
		l->grave = c->grave_next;
		rbac_conn_free(c);
	}
	while (l->ugrave) {
		struct rbac_upconn *u = l->ugrave;
		l->ugrave = u->next;
		rbac_up_free(u);
	}
}

static void *loop_main(void *arg)
{
	struct rbac_loop *l = arg;
	struct epoll_event evs[MAX_EVENTS];
	int64_t next_sweep = 0;

	while (!atomic_load(&l->stop)) {
		int n = epoll_wait(l->ep, evs, MAX_EVENTS, 500);
		l->now = now_mono_ns();
		for (int i = 0; i < n; i++) {
			struct rbac_tag *t = evs[i].data.ptr;
			switch (t->kind) {
			case TAG_LISTEN:
			case TAG_ENDPOINTS:
				accept_all(l, t == &l->ltag ? l->lfd : l->efd, t->kind == TAG_ENDPOINTS);
				break;
			case TAG_NOTIFY:
				jobs_done(l);
				break;
			case TAG_CLIENT:
				if (((struct rbac_conn *)t->obj)->st != S_DEAD)
					rbac_conn_drive(t->obj);
				break;
			case TAG_UP:
				if (!((struct rbac_upconn *)t->obj)->dead)
					on_up_event(l, t->obj);
				break;
			}
		}
		if (l->now >= next_sweep) {
			sweep(l);
			next_sweep = l->now + NSEC_PER_SEC / 2;
		}
		bury(l);
	}
	return NULL;
}

static int listen_on(const char *addr, int port_override, char *err, size_t errlen)
{
	char host[256];
	int port, one = 1, fd, r;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
	char ports[8];

	if ((r = http_parse_bind(addr, host, sizeof(host), &port)) < 0) {
		snprintf(err, errlen, "bad listen address '%s'", addr);
		return r;
	}
	snprintf(ports, sizeof(ports), "%d", port_override >= 0 ? port_override : port);
	if ((r = getaddrinfo(*host ? host : NULL, ports, &hints, &ai)) != 0) {
		snprintf(err, errlen, "cannot resolve '%s': %s", addr, gai_strerror(r));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 4096) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot listen on '%s': %s", addr, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return r;
	}
	freeaddrinfo(ai);
	return fd;
}

static int bound_port(int fd)
{
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);

	if (getsockname(fd, (struct sockaddr *)&sa, &sl) < 0)
		return -1;
	return ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
					      : ((struct sockaddr_in *)&sa)->sin_port);
}

static int watch(struct rbac_loop *l, int fd, struct rbac_tag *t, enum rbac_tag_kind kind)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = t};

	*t = (struct rbac_tag){kind, l};
	return epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static void loop_free(struct rbac_loop *l)
{
	if (!l)
		return;
	/* jobs handed back and not yet taken: a dead connection goes, a live one is closed below */
	for (struct rbac_job *j = l->done, *next; j; j = next) {
		struct rbac_conn *c = j->conn;
		next = j->next;
		if (c->st == S_DEAD) {
			c->grave_next = l->grave;
			l->grave = c;
		}
		rbac_ask_release(&j->ask);
		kube_user_release(&j->verdict.user);
		free(j);
	}
	l->done = NULL;
	while (l->conns) {
		struct rbac_conn *c = l->conns;
		c->job_pending = false;
		rbac_conn_close(c);
	}
	for (size_t i = 0; l->pool && i < l->p->cfg.nups; i++)
		while (l->pool[i]) {
			struct rbac_upconn *u = l->pool[i];
			l->pool[i] = u->next;
			u->next = NULL;
			rbac_up_put(l, u, false);
		}
	bury(l);
	free(l->pool);
	free(l->pool_n);
	int fds[] = {l->ep, l->lfd, l->efd, l->evfd};
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

static int loop_new(struct rbac *p, const char *listen_addr, int *port, const char *endpoints_addr,
		    int *eport, struct rbac_loop **ret, char *err, size_t errlen)
{
	struct rbac_loop *l = calloc(1, sizeof(*l));
	int r;

	if (!l)
		return -ENOMEM;
	l->p = p;
	l->job_done = rbac_loop_job_done;
	l->ep = l->lfd = l->efd = l->evfd = -1;
	pthread_mutex_init(&l->mu, NULL);
	*ret = l;
	if (!(l->pool = calloc(p->cfg.nups, sizeof(*l->pool))) ||
	    !(l->pool_n = calloc(p->cfg.nups, sizeof(*l->pool_n))))
		return -ENOMEM;
	if ((l->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		snprintf(err, errlen, "cannot make an event loop: %s", strerror(errno));
		return -errno;
	}
	if ((r = l->lfd = listen_on(listen_addr, *port, err, errlen)) < 0)
		return r;
	*port = bound_port(l->lfd);
	if (endpoints_addr) {
		if ((r = l->efd = listen_on(endpoints_addr, *eport, err, errlen)) < 0)
			return r;
		*eport = bound_port(l->efd);
	}
	if ((r = watch(l, l->lfd, &l->ltag, TAG_LISTEN)) < 0 ||
	    (endpoints_addr && (r = watch(l, l->efd, &l->etag, TAG_ENDPOINTS)) < 0) ||
	    (r = watch(l, l->evfd, &l->ntag, TAG_NOTIFY)) < 0) {
		snprintf(err, errlen, "cannot watch a socket: %s", strerror(-r));
		return r;
	}
	return 0;
}

int rbac_loops_start(struct rbac *p, const char *listen_addr, const char *endpoints_addr,
		     unsigned n, char *err, size_t errlen)
{
	int port = -1, eport = -1, r;

	if (!(p->loops = calloc(n, sizeof(*p->loops))))
		return -ENOMEM;
	for (; p->nloops < n; p->nloops++) {
		r = loop_new(p, listen_addr, &port, endpoints_addr, &eport, &p->loops[p->nloops], err,
			     errlen);
		if (r < 0) {
			p->nloops++;
			return r;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		if ((r = pthread_create(&p->loops[i]->th, NULL, loop_main, p->loops[i])) != 0) {
			snprintf(err, errlen, "cannot start a thread: %s", strerror(r));
			return -r;
		}
		p->loops[i]->started = true;
	}
	return 0;
}

/* After rbac_pool_stop: no worker can hand a job back any more. */
void rbac_loops_stop(struct rbac *p)
{
	for (unsigned i = 0; i < p->nloops; i++)
		if (p->loops[i])
			atomic_store(&p->loops[i]->stop, true);
	for (unsigned i = 0; i < p->nloops; i++) {
		if (p->loops[i] && p->loops[i]->started)
			pthread_join(p->loops[i]->th, NULL);
		loop_free(p->loops[i]);
	}
	free(p->loops);
	p->loops = NULL;
	p->nloops = 0;
}
