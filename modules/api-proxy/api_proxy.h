/* aws-k8s api-proxy: the node's kubernetes-api-proxy (Deckhouse's nginx stream proxy and its
 * reloader) as one process: an L4 proxy from 127.0.0.1:6445 to the API servers, TLS passed
 * through untouched.
 *
 * api_proxy.c        flags, the upstream sources (flags, file, EndpointSlices), start and stop
 * api_proxy_pool.c   the upstream set: parsing, replacing it live, picking one, failures
 * api_proxy_loop.c   the event loops: accept, connect with a deadline and fail over, relay */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct cancel;

int api_proxy_main(int argc, char **argv);

/* ---- the upstream set (api_proxy_pool.c) ---- */
#define AP_MAX_UPSTREAMS 64
#define AP_MAX_TRIES 16 /* upstreams one client connection tries at most */

struct ap_upstream {
	uint64_t id;	/* unique for the life of the process */
	char name[280]; /* "host:port" as given */
	struct sockaddr_storage addr;
	socklen_t addrlen;
	bool local;	    /* the node's own API server */
	bool member;	    /* in the current set (else kept only by its open connections) */
	unsigned refs;	    /* membership + connections */
	unsigned active;    /* connections open or connecting */
	int64_t down_until; /* monotonic ns: a failed connect marks it down this long */
	uint64_t failures;  /* connects that failed or timed out */
	uint64_t conns;	    /* connections made */
};

struct ap_pool {
	pthread_mutex_t mu;
	struct ap_upstream *ups[AP_MAX_UPSTREAMS];
	size_t n;
	unsigned rr;		/* rotates the start among equally loaded upstreams */
	uint64_t next_id;
	uint64_t changes;	/* times the set changed */
	const char *local_ip;	/* numeric; NULL or "": no preference */
	int64_t fail_timeout_ns;
};

/* Splits "host:port" or "[v6]:port" into host and port (1-65535). -EINVAL otherwise. */
int ap_hostport_split(const char *s, char *host, size_t hostlen, unsigned *ret_port);
/* Parses an upstream file: nginx's `server HOST:PORT [params];` lines (the reloader's
 * nginx_new.conf as Deckhouse renders it; the rest of an nginx configuration is skipped) or
 * one HOST:PORT a line; '#' starts a comment. Appends to *list (a NULL-terminated vector).
 * -EINVAL with the line in err on a malformed server line or a bad address. */
int ap_upstream_file_parse(const char *text, size_t len, char ***list, char *err, size_t errlen);

void ap_pool_init(struct ap_pool *p, const char *local_ip, int64_t fail_timeout_ns);
void ap_pool_release(struct ap_pool *p);
/* Makes the set exactly names (each "host:port", resolved here): upstreams kept keep their
 * state, removed ones live on until their last connection closes. 1 when it changed, 0 when
 * not, -EINVAL with err when a name does not resolve (nothing changes), -E2BIG past
 * AP_MAX_UPSTREAMS. */
int ap_pool_set(struct ap_pool *p, char *const *names, char *err, size_t errlen);
/* Picks an upstream for a new connection, skipping the ids tried: the local API server when it
 * is up, else the up one with the fewest connections (least_conn); the ones marked down come
 * last. Returns it with a reference and counted active, or NULL when none is left. */
struct ap_upstream *ap_pool_pick(struct ap_pool *p, const uint64_t *tried, size_t ntried);
/* A connect succeeded: clears the down mark. */
void ap_pool_connected(struct ap_pool *p, struct ap_upstream *u);
/* Drops a connection's reference; failed: its connect failed (marks the upstream down for the
 * fail timeout). */
void ap_pool_put(struct ap_pool *p, struct ap_upstream *u, bool failed);
/* The current set as "a,b,c" (malloc'd) and its size. */
char *ap_pool_describe(struct ap_pool *p, size_t *ret_n);

/* ---- the proxy and its loops (api_proxy_loop.c) ---- */
enum ap_relay { AP_RELAY_BUFFER, AP_RELAY_SPLICE };

struct ap_stats {
	uint64_t accepted, refused, active, bytes_in, bytes_out, connect_failures, timeouts,
		idle_closed, no_upstream;
};

struct ap_proxy {
	struct ap_pool pool;
	int listen_fd;
	int64_t connect_timeout_ns, idle_timeout_ns;
	size_t buffer_size;
	long long max_connections;
	enum ap_relay relay;
	unsigned nloops;
	struct ap_loop **loops;
	uint64_t active; /* atomic: connections open, every loop */
};

/* Binds and listens on addr ("host:port"). -errno with err. */
int ap_listen(const char *addr, int *ret_fd, char *err, size_t errlen);
/* Starts p->nloops event loops on p->listen_fd; they stop when stop is cancelled. */
int ap_loops_start(struct ap_proxy *p, struct cancel *stop);
/* Waits for the loops (after stop was cancelled), closes their connections, frees them. */
void ap_loops_stop(struct ap_proxy *p);
/* The sum of every loop's counters. */
void ap_stats_get(struct ap_proxy *p, struct ap_stats *ret);
