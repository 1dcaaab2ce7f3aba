/* Controllers, client-go style, and the one loop that runs a module's table of them.
 *
 * A controller is a reconcile function of one key. Informer handlers queue keys (a Node's name,
 * "namespace/name"...); worker threads pop them and call reconcile, which reads the informers'
 * stores, compares what is wanted with what is, acts, and returns done (>= 0), retry (< 0: again
 * after the queue's backoff) or requeue-after (*requeue_after_ns > 0). The queue never hands one
 * key to two workers at once (workqueue.h). A periodic pass (a monitor, a re-sync) is one key,
 * resync_key, that the controller reconciles every resync_ns.
 *
 * controllers_run() runs a table of them, and is the whole life of a controller manager:
 *   1. with leader election asked for, it takes part (leaderelection.h) and waits to lead;
 *   2. it starts the informers the controllers list (each once) and waits for their sync;
 *   3. for each controller: start hook, first resync key, worker threads;
 *   4. it waits for the cancellation token (SIGTERM cancels cancel_root()); losing the Lease
 *      cancels it too (client-go's users exit then);
 *   5. it stops the informers, then the workers (waiting for running reconciles), then the
 *      election (releasing the Lease).
 * It logs "attempting to acquire leader lease", "started leading", "new leader elected",
 * "leaderelection lost" and "stopping", as the ccm always did.
 *
 *   static int reconcile(void *ud, const char *key, int64_t *requeue_after_ns)
 *   {
 *           struct my *m = ud;
 *           struct kube_obj *o;
 *           if (kube_store_get(kube_informer_store(m->pods), key, &o) < 0)
 *                   return 0;                          // gone: nothing to do
 *           if (!controllers_may_act(&m->run))         // before every write
 *                   return -ECANCELED;
 *           ...                                        // act; < 0 retries with backoff
 *   }
 *   static void on_add(void *ud, const cJSON *obj)     // the informer's handler
 *   {
 *           char key[KUBE_KEY_MAX];
 *           if (kube_obj_key(obj, key, sizeof(key)) == 0)
 *                   controller_add(&ctls[0], key);     // dropped until the controller runs
 *   }
 *
 *   struct controller ctls[] = {
 *       { .name = "pod-gc", .informers = {m.pods}, .reconcile = reconcile, .ud = &m,
 *         .workers = 2, .queue = {.base_delay_ns = 500 * NSEC_PER_MSEC} },
 *       { .name = "pod-gc-monitor", .reconcile = monitor, .ud = &m,
 *         .resync_key = "monitor", .resync_ns = 30 * NSEC_PER_SEC },
 *   };
 *   m.run = (struct controllers){ .ctls = ctls, .n = ARRAY_SIZE(ctls), .kc = kc,
 *                                 .leader_elect = kube_flag_leader_elect };
 *   kube_le_config_from_flags(&m.run.le);
 *   r = controllers_run(&m.run);         // until SIGTERM: 0; the Lease lost: -ENOLCK
 *
 * Events that arrive before a controller runs (the informers' first list, a standby replica's)
 * are dropped: its start hook sees the synced store and queues what needs work. */
#pragma once
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/kube/leaderelection.h"
#include "common/kube/workqueue.h"

#define CONTROLLER_MAX_INFORMERS 8

struct cancel;
struct kube_client;
struct kube_informer;

struct controller {
	/* The queue's name: the label "name" of the workqueue_* metrics, and logs. */
	const char *name;
	/* The informers whose stores reconcile reads (NULL-terminated when fewer than the max):
	 * started, each once, and synced before the first reconcile. */
	struct kube_informer *informers[CONTROLLER_MAX_INFORMERS];
	kube_reconcile_fn reconcile;
	void *ud; /* reconcile's and the hooks' */
	int workers; /* 0: 1 */
	/* The rate limiter: per-key backoff (base_delay_ns, max_delay_ns), overall bucket (qps,
	 * burst), max_keys; .name is ignored (the controller's). */
	struct kube_wq_opts queue;
	/* A periodic pass: resync_key is queued when the controller starts (after
	 * resync_first_ns; 0: at once) and again resync_ns after each reconcile of it. Its
	 * reconcile finds *requeue_after_ns set to resync_ns and may change it (0 on a failure:
	 * the queue's backoff alone decides). */
	const char *resync_key;
	int64_t resync_ns;
	int64_t resync_first_ns;
	/* Called once the informers synced, before the workers start: log, queue what the store
	 * holds. < 0 stops the run. May be NULL. */
	int (*start)(struct controller *c);
	bool disabled; /* left out of the run (--controllers) */

	/* Set by controllers_run. */
	struct kube_wq *_Atomic q; /* published once the controller runs, NULL again at stop */
};

/* Queues a key (from an informer handler, any thread). A no-op (0) while the controller does
 * not run; otherwise kube_wq_add's result. */
int controller_add(struct controller *c, const char *key);
int controller_add_after(struct controller *c, const char *key, int64_t delay_ns);
/* Through the queue's rate limiter (its bucket and the key's backoff), as client-go's
 * AddRateLimited. */
int controller_add_rate_limited(struct controller *c, const char *key);
/* True while the controller's workers run. */
bool controller_running(struct controller *c);

struct controllers {
	struct controller *ctls;
	size_t n;
	/* Informers started and synced with the controllers' even when no enabled controller
	 * lists them (what a readiness check waits for should not depend on --controllers). */
	struct kube_informer *informers[CONTROLLER_MAX_INFORMERS];
	struct kube_client *kc; /* for the election */
	bool leader_elect;
	/* With leader_elect: the Lease and its timing (kube_le_config_from_flags); callbacks set
	 * here are called after controllers_run's own. */
	struct kube_le_config le;
	/* Stops the run once cancelled; NULL: cancel_root(). Cancelled by the run itself when this
	 * replica loses the Lease. The informers must stop with it: made with
	 * kube_informer_opts.cancel set to this token or to a child of it (or NULL, the client's
	 * token, cancel_root() by default, when this is NULL), so that a wait for their first sync
	 * ends with the run. */
	struct cancel *cancel;
	/* Called once every informer synced, before the controllers start. May be NULL. */
	void (*synced)(void *ud);
	void *ud;

	/* Set by controllers_run. */
	struct kube_le *_Atomic elector;
	atomic_bool lost;	  /* this replica lost the Lease */
	atomic_bool election_ended; /* the election's thread ended (lost, or stopped) */
};

/* Runs the table until cancellation (0) or until this replica loses the Lease (-ENOLCK);
 * < 0 when the election, an informer or a controller cannot start (logged). Blocks. */
int controllers_run(struct controllers *cs);
/* False once the run is cancelled or this replica does not lead (checked before every write,
 * from reconcile: the Lease can be lost at any time). */
bool controllers_may_act(struct controllers *cs);
/* The election ended (the Lease lost, or the run stopped): for a leaderElection health check. */
bool controllers_election_ended(struct controllers *cs);
