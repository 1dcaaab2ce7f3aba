/* Test helpers for cancellation: a plain HTTP peer on 127.0.0.1 that answers every request with
 * one canned reply or holds it, and a thread that cancels a token after a while. */
#pragma once
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/base/cancel.h"

#define PEER_MAX_CONNS 64

/* A peer on 127.0.0.1: answers each request with reply (then closes), or holds it open when
 * reply is NULL, until peer_stop. */
struct peer {
	int lfd, port;
	_Atomic(const char *) reply;
	atomic_int requests;
	struct cancel *stop;
	pthread_t th;
	int held[PEER_MAX_CONNS];
	int n_held;
};

struct peer *peer_start(const char *reply);
void peer_stop(struct peer *p);

struct later {
	struct cancel *c;
	int ms;
	struct peer *p;
	pthread_t th;
};

/* Cancels c after ms on another thread; join with later_join. */
void cancel_later(struct later *l, struct cancel *c, int ms);
/* Cancels c once p has seen a request (on another thread; join with later_join). */
void cancel_on_request(struct later *l, struct cancel *c, struct peer *p);
void later_join(struct later *l);
int64_t elapsed_ms(int64_t t0_mono_ns);
