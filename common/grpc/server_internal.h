/* Internals of the gRPC server shared by its files: server.c (the completion queue, the
 * workers, the lifecycle), call.c (what handlers use: errors, deadlines, the arena) and
 * decode.c (the request decoding path). Not for use outside common/grpc/. */
#pragma once
#include <grpc/grpc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/cancel.h"
#include "common/grpc/server.h"

#define PENDING_REQUESTS 8
#define MAX_CALL_KV 12
#define MAX_LOG_IDS 6
#define ARRAY_CAPS 16
#define URGENT_WORKERS 2

struct reg {
	const struct rpc_method *m;
	void *ud;
};

struct rpc_server {
	struct rpc_server_opts opts;
	char target[4200];
	char path[4096];
	int port;
	struct reg *regs;
	size_t n_regs;

	grpc_server *server;
	grpc_completion_queue *cq;
	pthread_t cq_thread, stop_thread;
	bool started, stopped, leaked, stop_thread_running;
	struct cancel *cancel; /* a child of opts.cancel: cancelled, the server stops */
	int shutdown_tag;

	pthread_mutex_t lock;
	pthread_cond_t cond;	  /* workers wait for work here */
	pthread_cond_t idle_cond; /* stop waits for inflight == 0 / shutdown here */
	struct rpc_call *q_head, *q_tail;
	unsigned q_len;
	pthread_t *workers;
	unsigned n_workers, n_idle;
	bool workers_exit;
	unsigned inflight;
	bool shutdown_begun, shutdown_done;
	struct metric *m_started, *m_handled, *m_seconds;
};

enum call_state { ST_REQUEST, ST_RECV, ST_SEND };

struct arena_blk {
	struct arena_blk *next;
	max_align_t data[];
};

struct array_cap {
	void *arr;
	size_t cap;
};

struct rpc_call {
	struct rpc_server *srv;
	enum call_state state;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array md;
	grpc_byte_buffer *recv;
	grpc_byte_buffer *send;
	grpc_slice status_slice;
	bool has_status_slice;
	int cancelled;

	const struct rpc_method *m;
	void *ud;
	char path[192];
	char service[96], method[96]; /* metric labels */
	int64_t start_ns;
	int64_t deadline_ns; /* monotonic; INT64_MAX for none */

	int code;
	char *message;
	char *kv_key[MAX_CALL_KV], *kv_val[MAX_CALL_KV];
	unsigned n_kv;

	struct arena_blk *arena;
	struct array_cap caps[ARRAY_CAPS];
	unsigned n_caps;
	struct rpc_call *next;
};

/* call.c */
void rpc_call_arena_free(struct rpc_call *c);
