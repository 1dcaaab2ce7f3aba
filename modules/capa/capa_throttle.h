/* CAPA's client-side rate limits (reference capa.md §12; pkg/cloud/throttle): token buckets per
 * call family, the first family whose prefix starts the operation name wins, and a throttling
 * reply (Throttling, RequestLimitExceeded...) empties that family's bucket so that the next
 * calls wait for the refill.
 *
 *   EC2             Describe*, Get*                                  20/s, burst 100
 *                   AuthorizeSecurityGroupIngress, CreateKeyPair,
 *                   CancelSpotInstanceRequests, RequestSpotInstances 20/s, burst 100
 *                   RunInstances                                      2/s, burst 5
 *                   StartInstances                                    2/s, burst 5
 *                   anything else                                     5/s, burst 200
 *   ELB, ELBv2, Tagging, Secrets Manager
 *                   Describe*, Get*, List*                           20/s, burst 100
 *                   anything else                                     5/s, burst 200
 *
 * CAPA keeps one set per region, controller, cluster and namespace; aws-k8s capa holds one set
 * for the process (capa_ctx.lim), which both controllers' calls go through. Thread-safe. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct cancel;

enum capa_svc { CAPA_SVC_EC2, CAPA_SVC_ELB, CAPA_SVC_ELBV2, CAPA_SVC_TAGGING, CAPA_SVC_SECRETS,
		CAPA_SVC__MAX };

#define CAPA_LIMITER_MAX_FAMILIES 8

struct capa_bucket {
	const char *name; /* the family, for logs and tests: "ec2/describe" */
	double rate, burst, tokens;
	int64_t last_ns;
};

struct capa_limiter {
	pthread_mutex_t lock;
	struct capa_bucket b[CAPA_SVC__MAX][CAPA_LIMITER_MAX_FAMILIES];
	unsigned waits; /* calls that had to wait (tests, metrics) */
};

/* Full buckets as of now_ns. */
void capa_limiter_init(struct capa_limiter *l, int64_t now_ns);
void capa_limiter_release(struct capa_limiter *l);
/* The bucket of an operation (never NULL for a known service). */
struct capa_bucket *capa_limiter_bucket(struct capa_limiter *l, enum capa_svc s, const char *op);
/* Takes one token at now_ns: 0 and *ret_wait_ns 0 when one was there, else nothing taken and
 * *ret_wait_ns the time until one will be. */
int capa_limiter_try(struct capa_limiter *l, enum capa_svc s, const char *op, int64_t now_ns,
		     int64_t *ret_wait_ns);
/* Waits for a token (monotonic clock); -ECANCELED when c (NULL: the process's) is cancelled. */
int capa_limiter_wait(struct capa_limiter *l, enum capa_svc s, const char *op, struct cancel *c);
/* A throttling reply to op: its bucket is emptied as of now_ns. */
void capa_limiter_throttled(struct capa_limiter *l, enum capa_svc s, const char *op, int64_t now_ns);
