/* A small etcd v3 client over etcd's JSON gateway (HTTP/1.1 POST, TLS client certificates).
 *
 * Why the gateway and not gRPC: every call here is a unary POST of a few fields (the snapshot a
 * stream of JSON lines), so the project's HTTP client (libcurl: timeouts, caps, TLS files,
 * cancellation) carries it without etcd's protos, whose gogoproto and google.api imports the
 * gRPC side would need vendored and generated. The price: 3.4's gateway calls itself back over
 * gRPC with the server certificate as its client certificate, so etcd/server needs the
 * clientAuth EKU (kubeadm's has it; etcd#9785), and the gateway sets no deadline of its own on
 * a call, so every call here has one (MemberRemove of a dead member otherwise hangs forever).
 *
 *   struct etcd_client *c;
 *   struct etcd_error e;
 *   r = etcd_client_new(&(struct etcd_client_opts){ .endpoints = eps, .ca_file = ca,
 *                       .cert_file = crt, .key_file = key }, &c);
 *   struct etcd_members ms = { 0 };
 *   r = etcd_member_list(c, &ms, &e);      // -EAGAIN: e.code 14 "rpc not supported for learner"
 *   etcd_members_release(&ms);
 *   etcd_client_free(c);
 *
 * The JSON speaks proto field names: ints as strings (numbers accepted), bytes as base64, zero
 * and false fields left out. A call goes to the endpoints in order, starting at the last one
 * that answered, and moves to the next when one cannot be reached (refused, unreachable, reset,
 * TLS failure, or a connect timeout for the calls safe to repeat). Errors: -errno, with the
 * server's gRPC code and message in struct etcd_error when it answered:
 *   3 InvalidArgument -EINVAL; 5 NotFound -ENOENT; 6 AlreadyExists -EEXIST; 7/16 -EACCES;
 *   9 FailedPrecondition -EBUSY ("too many learner members", "can only promote a learner member
 *   which is in sync with leader", "Peer URLs already exists"); 14 Unavailable -EAGAIN
 *   ("unhealthy cluster", "rpc not supported for learner", "request timed out"); 4, and 2 with
 *   "deadline exceeded", -ETIMEDOUT; 2 "not enough started members" -EBUSY; other -EIO.
 * A reply that is not the JSON expected is -EBADMSG. Nothing here logs above debug. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"

struct etcd_client_opts {
	char *const *endpoints;	    /* "https://127.0.0.1:2379"...; NULL-terminated, at least one */
	const char *ca_file;	    /* etcd's CA (--cacert); NULL: the system's */
	const char *cert_file;	    /* client certificate (--cert) */
	const char *key_file;	    /* its key (--key) */
	int64_t timeout_ns;	    /* per call; 0: 5 s (etcdctl's --command-timeout) */
	int64_t connect_timeout_ns; /* connect + TLS handshake; 0: 2 s (etcdctl's --dial-timeout) */
};

struct etcd_client;

struct etcd_error {
	int code;	   /* gRPC code, 0 when the server gave none */
	long http_status;  /* 0 when no reply */
	char message[256]; /* the server's message, or what went wrong here */
};

struct etcd_member {
	uint64_t id;
	char *name;	    /* "" until the member has started */
	char **peer_urls;   /* NULL-terminated (never NULL after a parse) */
	char **client_urls; /* NULL-terminated, empty until started */
	bool is_learner;
};

struct etcd_members {
	uint64_t cluster_id;
	uint64_t member_id; /* the member that answered */
	struct etcd_member *v;
	size_t n;
};

struct etcd_status {
	char version[32];
	uint64_t member_id, leader;
	int64_t db_size, db_size_in_use;
	uint64_t raft_index, raft_term, raft_applied_index;
	bool is_learner;
	char errors[256]; /* the status' errors ("etcdserver: no leader"), "; "-joined */
};

int etcd_client_new(const struct etcd_client_opts *opts, struct etcd_client **ret);
void etcd_client_free(struct etcd_client *c);
/* The number of calls made (HTTP requests sent), for figures. */
unsigned long etcd_client_calls(const struct etcd_client *c);
/* The endpoints, as given. */
char *const *etcd_client_endpoints(const struct etcd_client *c);

void etcd_members_release(struct etcd_members *ms);
void etcd_member_release(struct etcd_member *m);
/* The member with this name / this peer URL (among its peerURLs), or NULL. */
const struct etcd_member *etcd_members_find_name(const struct etcd_members *ms, const char *name);
const struct etcd_member *etcd_members_find_peer(const struct etcd_members *ms, const char *url);

int etcd_member_list(struct etcd_client *c, struct etcd_members *ret, struct etcd_error *err);
/* MemberAdd (as a learner when learner is set); ret_added (may be NULL) gets the new member,
 * ret_list (may be NULL) the member list after the add. */
int etcd_member_add(struct etcd_client *c, char *const *peer_urls, bool learner,
		    struct etcd_member *ret_added, struct etcd_members *ret_list,
		    struct etcd_error *err);
int etcd_member_remove(struct etcd_client *c, uint64_t id, struct etcd_error *err);
int etcd_member_update(struct etcd_client *c, uint64_t id, char *const *peer_urls,
		       struct etcd_error *err);
int etcd_member_promote(struct etcd_client *c, uint64_t id, struct etcd_error *err);

/* Maintenance calls go to one endpoint (a URL; NULL: the first that answers). */
int etcd_status(struct etcd_client *c, const char *endpoint, struct etcd_status *ret,
		struct etcd_error *err);
int etcd_defragment(struct etcd_client *c, const char *endpoint, struct etcd_error *err);

/* Put; Range of one key (serializable: may be answered by a learner or a member without
 * quorum). *ret_found is false when the key is absent; the value goes to val (replaced). */
int etcd_put(struct etcd_client *c, const void *key, size_t klen, const void *val, size_t vlen,
	     int64_t *ret_revision, struct etcd_error *err);
int etcd_get(struct etcd_client *c, const void *key, size_t klen, bool serializable,
	     struct buf *val, bool *ret_found, int64_t *ret_revision, struct etcd_error *err);

/* Snapshot: the stream of the db, each piece handed to write() as it arrives, then the 32-byte
 * sha256 of the db that etcd sends last (so that the bytes written are what `etcdctl snapshot
 * save` writes: the db, then its hash, which `snapshot restore` checks). The hash is checked
 * here: a mismatch, a stream cut short, a piece after the hash, or more bytes than announced is
 * -EBADMSG, and the caller must drop what it wrote. The stream fails with -ETIMEDOUT when no
 * byte arrives within the client's timeout, or when the whole takes over total_timeout_ns
 * (0: no limit). */
struct etcd_snapshot_info {
	uint64_t db_size; /* bytes of the db (the file is 32 more) */
	unsigned messages;
	unsigned char sha256[32];
};
int etcd_snapshot(struct etcd_client *c, const char *endpoint, int64_t total_timeout_ns,
		  int (*write)(void *ud, const void *data, size_t len), void *ud,
		  struct etcd_snapshot_info *ret, struct etcd_error *err);

/* Parsing, exposed for the unit tests. */
int etcd_parse_members(const char *json, size_t len, struct etcd_members *ret);
int etcd_parse_status(const char *json, size_t len, struct etcd_status *ret);
/* An error reply (any status) into err; returns its -errno (-EIO when it says nothing). */
int etcd_parse_error(long http_status, const char *body, size_t len, struct etcd_error *err);

/* The snapshot stream's state: fed one JSON line at a time. */
struct etcd_snap_parser {
	int (*write)(void *ud, const void *data, size_t len);
	void *ud;
	void *sha; /* EVP_MD_CTX */
	uint64_t total, got;
	bool have_total, done;
	unsigned messages;
	unsigned char sha256[32];
	struct etcd_error *err;
};
int etcd_snap_parser_init(struct etcd_snap_parser *p, int (*write)(void *, const void *, size_t),
			  void *ud, struct etcd_error *err);
int etcd_snap_parser_feed(struct etcd_snap_parser *p, const char *line, size_t len);
/* After the last line: 0 when the hash came and matched, else -EBADMSG. */
int etcd_snap_parser_finish(struct etcd_snap_parser *p);
void etcd_snap_parser_release(struct etcd_snap_parser *p);
