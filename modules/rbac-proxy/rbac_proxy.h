/* aws-k8s rbac-proxy: kube-rbac-proxy (and Deckhouse's fork) on OpenSSL and epoll.
 *
 * rbac_proxy.c   flags, configuration, start and stop
 * rbac_config.c  --config-file / KUBE_RBAC_PROXY_CONFIG (YAML) into struct rbac_cfg
 * rbac_http.c    HTTP/1.1 heads, body framing, path normalisation (pure, unit-tested)
 * rbac_auth.c    the decision for one request: authentication, authorization, the worker pool
 * rbac_upstream.c upstream URLs, connections and their per-loop pool, TLS client context
 * rbac_loop.c    the event loops: one thread and one SO_REUSEPORT listener each */
#pragma once
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/kube/authn.h"

int rbac_proxy_main(int argc, char **argv);

/* ---- configuration (rbac_config.c) ---- */
struct rbac_static {
	char *user;
	char **groups;
	char *verb, *ns, *group, *res, *subresource, *name, *path;
	bool resource_request;
};

struct rbac_authz_cfg {
	bool resource; /* resourceAttributes given */
	char *ns, *group, *version, *res, *subresource, *name; /* may hold {{.Value}} */
	char *rewrite_query, *rewrite_header;
	struct rbac_static *statics;
	size_t nstatics;
};

struct rbac_upstream {
	char *url;
	bool tls;
	char host[256], port[8], hostport[272];
	char *base_path; /* the URL's path, "" for none */
	char *prefix;	 /* Deckhouse's path: requests under it go here, prefix stripped */
	struct rbac_authz_cfg *authz; /* NULL: the global one */
	char *ca_file;
	bool insecure;
	SSL_CTX *ctx; /* https */
	struct sockaddr_storage addr;
	socklen_t addrlen;
};

struct rbac_cfg {
	struct rbac_authz_cfg authz;
	char **exclude_paths;
	struct rbac_upstream *ups;
	size_t nups;
	bool deckhouse_upstreams; /* upstreams from KUBE_RBAC_PROXY_CONFIG */
};

/* Parses a YAML configuration (kube-rbac-proxy's file, or Deckhouse's with excludePaths and
 * upstreams). -EINVAL/-EBADMSG with why in err. */
int rbac_cfg_parse(const char *text, size_t len, struct rbac_cfg *cfg, char *err, size_t errlen);
void rbac_cfg_release(struct rbac_cfg *cfg);
void rbac_authz_cfg_release(struct rbac_authz_cfg *a);

/* ---- HTTP (rbac_http.c) ---- */
#define RBAC_MAX_HEADERS 128

struct rbac_hdr {
	const char *name, *value;
	size_t name_len, value_len;
};

enum rbac_body { RBAC_BODY_NONE, RBAC_BODY_LENGTH, RBAC_BODY_CHUNKED, RBAC_BODY_CLOSE };

struct rbac_head {
	const char *method, *target; /* request */
	size_t method_len, target_len;
	int status; /* response */
	int minor;  /* HTTP/1.minor */
	struct rbac_hdr h[RBAC_MAX_HEADERS];
	size_t nh;
	size_t head_len; /* bytes up to and with the blank line */
	enum rbac_body body;
	uint64_t content_length;
	bool keep_alive;
	bool expect_continue;
};

/* Parses a request (response: false) or a response head at the start of data. Returns 1 with
 * *h filled, 0 when more bytes are needed, or the HTTP status to answer a bad request with
 * as a negative number (-400, -431, -501). */
int rbac_head_parse(const char *data, size_t len, bool response, struct rbac_head *h);
/* The value of the first header of that name (case-insensitive), or NULL (*len set). */
const char *rbac_head_get(const struct rbac_head *h, const char *name, size_t *len);
/* True when the Connection header of h lists the token name. */
bool rbac_head_connection_has(const struct rbac_head *h, const char *name, size_t name_len);
/* True for the hop-by-hop headers of RFC 9110 (Connection, Keep-Alive, TE, ...). */
bool rbac_hop_by_hop(const char *name, size_t len);

/* A body's framing, fed with the bytes as they come. */
struct rbac_framer {
	enum rbac_body kind;
	uint64_t left; /* LENGTH: bytes left; CHUNKED: of the current chunk's data */
	int cstate;    /* CHUNKED: where in the chunk syntax */
	uint64_t total;
	bool done, digit;
};
void rbac_framer_init(struct rbac_framer *f, enum rbac_body kind, uint64_t length);
/* How many of the n bytes belong to the body (<= n; done set at its end), or -EBADMSG. */
long rbac_framer_feed(struct rbac_framer *f, const char *p, size_t n);

/* The path of a request target, percent-decoded and cleaned (Go's path.Clean: "//", ".",
 * ".." resolved, never above "/"), in out. -EINVAL for a path that does not start with "/",
 * a bad escape or a control character; -E2BIG when it does not fit. */
int rbac_path_clean(const char *path, size_t len, char *out, size_t outlen);
/* The clean path percent-encoded again for the upstream request line. */
int rbac_path_encode(const char *path, char *out, size_t outlen);
/* Go's path.Match on a clean path (fnmatch with FNM_PATHNAME). */
bool rbac_path_match(char *const *patterns, const char *path);

/* ---- the decision (rbac_auth.c) ---- */
struct rbac;

/* What the decision needs of one request, copied out of the connection's buffers. */
struct rbac_ask {
	char *token;	      /* bearer token or NULL */
	char *cert_user;      /* verified client certificate's CN, or NULL */
	char **cert_groups;   /* its O values */
	char *verb;	      /* from the method */
	char *path;	      /* clean */
	char **rewrite_values; /* of the query parameter or header the config names */
	const struct rbac_authz_cfg *authz;
};

struct rbac_verdict {
	int status; /* 0: proxy it; else the HTTP status to answer */
	struct kube_user user;
};

/* 1 decided (*v), -EAGAIN when a blocking call is needed (inline: false), -errno. */
int rbac_decide(struct rbac *p, const struct rbac_ask *a, bool may_block, struct rbac_verdict *v);
void rbac_ask_release(struct rbac_ask *a);

/* The worker pool: jobs are decided with blocking calls, then handed back by done(). */
struct rbac_job {
	struct rbac_ask ask;
	struct rbac_verdict verdict;
	void *conn;
	struct rbac_loop *loop;
	/* hands the decided job back to its loop (rbac_loop_job_done) */
	void (*done)(struct rbac_loop *l, struct rbac_job *j);
	struct rbac_job *next;
};
int rbac_pool_start(struct rbac *p, unsigned threads);
void rbac_pool_stop(struct rbac *p);
int rbac_pool_submit(struct rbac *p, struct rbac_job *j);

/* ---- upstreams (rbac_upstream.c) ---- */
int rbac_upstream_parse(const char *url, struct rbac_upstream *u, char *err, size_t errlen);
/* Resolves the address and makes the TLS context of an https upstream. */
int rbac_upstream_prepare(struct rbac_upstream *u, const char *ca_file, const char *cert_file,
			  const char *key_file, char *err, size_t errlen);
void rbac_upstream_release(struct rbac_upstream *u);
/* The upstream for a clean path (longest prefix) and the path to send there, or NULL. */
const struct rbac_upstream *rbac_upstream_pick(const struct rbac_cfg *cfg, const char *path,
					       char *out, size_t outlen);

/* ---- the proxy ---- */
struct rbac_opts {
	bool header_fields;
	char *user_field, *groups_field, *groups_sep;
	char **allow_paths, **ignore_paths;
	char *livez_path;
	bool forward_authorization;
	size_t max_header_bytes;
	uint64_t max_body_bytes;
	int64_t read_header_timeout_ns, idle_timeout_ns, upstream_timeout_ns, handshake_timeout_ns;
};

struct rbac {
	struct rbac_opts o;
	struct rbac_cfg cfg;
	struct kube_authn *authn;
	struct kube_authz *authz;
	struct tls_src *tls;
	struct rbac_pool *pool;
	struct rbac_loop **loops;
	unsigned nloops;
};

/* rbac_loop.c */
int rbac_loops_start(struct rbac *p, const char *listen_addr, const char *endpoints_addr,
		     unsigned n, char *err, size_t errlen);
void rbac_loops_stop(struct rbac *p);
void rbac_loop_job_done(struct rbac_loop *l, struct rbac_job *j);
