/* What rbac_loop.c (the loops, accept, timers, the upstream pool) and rbac_conn.c (one
 * connection's state machine) share. Everything of a connection is touched by its loop's
 * thread only; a worker hands a decided job back through the loop's done list and eventfd. */
#pragma once
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "common/base/buf.h"
#include "common/http/tls_internal.h"
#include "modules/rbac-proxy/rbac_proxy.h"

#define RBAC_IO_CHUNK 16384
#define RBAC_OUT_HIGH (64 * 1024) /* stop reading the other side above this */
#define RBAC_POOL_IDLE_MAX 64	  /* idle upstream connections per upstream and loop */

enum rbac_tag_kind { TAG_LISTEN, TAG_ENDPOINTS, TAG_NOTIFY, TAG_CLIENT, TAG_UP };
struct rbac_tag {
	enum rbac_tag_kind kind;
	void *obj;
};

struct rbac_upconn {
	struct rbac_tag tag;
	int fd;
	SSL *ssl;
	size_t ups; /* index in cfg.ups */
	bool connecting, handshaking;
	struct rbac_conn *owner; /* NULL: idle in the pool */
	struct rbac_upconn *next;
	int64_t idle_since;
	bool dead;
};

enum rbac_cstate { S_HANDSHAKE, S_HEAD, S_AUTH, S_SEND, S_RESP_HEAD, S_RESP_BODY, S_REPLY, S_DEAD };

struct rbac_conn {
	struct rbac_tag tag;
	struct rbac_loop *l;
	int fd;
	SSL *ssl;
	bool endpoints;
	enum rbac_cstate st;
	struct tls_peer *peer;
	char addr[64];
	struct buf cin, cout, uout, uin;
	size_t uout_off;
	struct rbac_framer reqf, respf;
	bool req_close, resp_close, head_method, expect_continue, head_started, resp_started;
	bool reused;
	int retries;
	size_t ups;
	struct rbac_upconn *up;
	int64_t deadline;
	struct rbac_conn *prev, *next, *grave_next;
	bool job_pending;
};

struct rbac_loop {
	struct rbac *p;
	pthread_t th;
	bool started;
	int ep, lfd, efd, evfd;
	struct rbac_tag ltag, etag, ntag;
	struct rbac_conn *conns;
	size_t nconns;
	struct rbac_upconn **pool; /* per upstream: idle connections */
	size_t *pool_n;
	pthread_mutex_t mu;
	struct rbac_job *done;
	struct rbac_conn *grave;
	struct rbac_upconn *ugrave;
	atomic_bool stop;
	void (*job_done)(struct rbac_loop *l, struct rbac_job *j); /* rbac_loop_job_done */
	int64_t now;
};

/* rbac_conn.c */
void rbac_conn_drive(struct rbac_conn *c);
/* A decided job for a connection waiting in S_AUTH. */
void rbac_conn_verdict(struct rbac_conn *c, struct rbac_job *j);
/* A connection past its deadline. */
void rbac_conn_expired(struct rbac_conn *c);

/* rbac_conn.c: closed now, freed after the event batch (or when its job comes back) */
void rbac_conn_close(struct rbac_conn *c);
void rbac_conn_free(struct rbac_conn *c);

/* rbac_upstream.c: the pool */
/* An idle upstream connection to ups, or a new one (connecting); NULL with -errno. */
struct rbac_upconn *rbac_up_get(struct rbac_loop *l, size_t ups, bool *reused, int *err);
/* Back to the pool (keep) or closed. */
void rbac_up_put(struct rbac_loop *l, struct rbac_upconn *u, bool keep);
void rbac_up_free(struct rbac_upconn *u);
/* False when the upstream closed an idle connection (or sent bytes unasked). */
bool rbac_up_alive(struct rbac_upconn *u);

/* I/O on a plain or TLS socket: > 0 bytes, 0 end of stream, -EAGAIN, -errno. */
long rbac_io_read(int fd, SSL *ssl, void *b, size_t n);
long rbac_io_write(int fd, SSL *ssl, const void *b, size_t n);
