/* Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics:
 *
 * - a candidate tries every retry period (with up to 1.2 x jitter) to take the Lease: it may
 *   when the Lease does not exist, has no holder, or has not changed for leaseDurationSeconds
 *   as measured on the candidate's own clock since it last saw it change (clocks of different
 *   machines are never compared);
 * - the leader renews every retry period; if no renewal succeeds within the renew deadline it
 *   stops leading at once: kube_le_is_leader() turns false as soon as the deadline passes,
 *   whatever the renewing thread is doing, and on_stopped_leading(lost = true) is called;
 *   the owner must then stop acting (typically: exit, as client-go's users do);
 * - on a graceful stop the leader releases the Lease (holderIdentity cleared,
 *   leaseDurationSeconds 1, as client-go's ReleaseOnCancel) so another replica takes over
 *   at once, and on_stopped_leading(lost = false) is called;
 * - spec fields written: holderIdentity, leaseDurationSeconds, acquireTime, renewTime
 *   (MicroTime), leaseTransitions (+1 whenever the holder changes).
 *
 * The gauge leader_election_master_status{name} is 1 while leading. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cancel;
struct kube_client;

struct kube_le_config {
	const char *lock_namespace;
	const char *lock_name;
	const char *identity;	   /* NULL: hostname_uuid */
	int64_t lease_duration_ns; /* 0: 15 s */
	int64_t renew_deadline_ns; /* 0: 10 s */
	int64_t retry_period_ns;   /* 0: 2 s */
	bool no_release;	   /* keep the Lease on a graceful stop */
	/* Called on the election thread: must return quickly (start the controllers' threads). */
	void (*on_started_leading)(void *ud);
	void (*on_stopped_leading)(void *ud, bool lost);
	void (*on_new_leader)(void *ud, const char *identity);
	void *ud;
	/* A parent token: cancelling it is a graceful stop, as kube_le_stop (which must still be
	 * called). NULL: kube_le_stop alone. */
	struct cancel *cancel;
};

struct kube_le;

/* Checks the durations (lease > renew deadline > 1.2 x retry period). */
int kube_le_new(struct kube_client *c, const struct kube_le_config *cfg, struct kube_le **ret);
int kube_le_start(struct kube_le *le);
/* Graceful stop: cancels the election's token (a call in flight and a wait end at once),
 * releases the Lease when leading, waits for the thread. */
void kube_le_stop(struct kube_le *le);
void kube_le_free(struct kube_le *le);
bool kube_le_is_leader(struct kube_le *le);
/* The thread ended (leadership lost, or stopped). */
bool kube_le_done(struct kube_le *le);
/* Leadership was lost: no renewal succeeded within the renew deadline (not a graceful stop). */
bool kube_le_lost(struct kube_le *le);
const char *kube_le_identity(const struct kube_le *le);
/* The holder last observed (malloc'd) or NULL. */
char *kube_le_leader(struct kube_le *le);

/* hostname + "_" + a random UUID, as client-go's users build it. */
int kube_le_default_identity(char *buf, size_t n);
/* A config from the LEADER_ELECT_FLAGS values (callbacks left to the caller). */
void kube_le_config_from_flags(struct kube_le_config *cfg);
