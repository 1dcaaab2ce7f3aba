/* The controller contract and controllers_run (see controller.h). */
#include "common/kube/controller.h"

#include <errno.h>
#include <poll.h>
#include <string.h>

#include "common/base/cancel.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/informer.h"

int controller_add(struct controller *c, const char *key)
{
	struct kube_wq *q = atomic_load_explicit(&c->q, memory_order_acquire);
	return q ? kube_wq_add(q, key) : 0;
}

int controller_add_after(struct controller *c, const char *key, int64_t delay_ns)
{
	struct kube_wq *q = atomic_load_explicit(&c->q, memory_order_acquire);
	return q ? kube_wq_add_after(q, key, delay_ns) : 0;
}

int controller_add_rate_limited(struct controller *c, const char *key)
{
	struct kube_wq *q = atomic_load_explicit(&c->q, memory_order_acquire);
	return q ? kube_wq_add_rate_limited(q, key) : 0;
}

bool controller_running(struct controller *c)
{
	return atomic_load_explicit(&c->q, memory_order_acquire) != NULL;
}

/* What the workers call: the periodic key finds its period as the default requeue. */
static int reconcile_one(void *ud, const char *key, int64_t *requeue_after_ns)
{
	struct controller *c = ud;

	if (c->resync_key && c->resync_ns > 0 && strcmp(key, c->resync_key) == 0)
		*requeue_after_ns = c->resync_ns;
	return c->reconcile(c->ud, key, requeue_after_ns);
}

static struct cancel *token(struct controllers *cs)
{
	return cs->cancel ? cs->cancel : cancel_root();
}

bool controllers_may_act(struct controllers *cs)
{
	struct kube_le *le = atomic_load(&cs->elector);
	return !cancel_is_cancelled(token(cs)) && (!le || kube_le_is_leader(le));
}

bool controllers_election_ended(struct controllers *cs)
{
	return atomic_load(&cs->election_ended);
}

/* --- leader election: callbacks on the election's thread ---------------------------------- */

/* The run's election state: what the callbacks need besides the set. */
struct election {
	struct controllers *cs;
	struct cancel *leading; /* a one-shot latch: cancelled once this replica leads */
};

static void le_started(void *ud)
{
	struct election *e = ud;

	log_info("started leading");
	cancel_cancel(e->leading);
	if (e->cs->le.on_started_leading)
		e->cs->le.on_started_leading(e->cs->le.ud);
}

static void le_stopped(void *ud, bool lost)
{
	struct election *e = ud;

	if (lost) {
		log_error("leaderelection lost");
		atomic_store(&e->cs->lost, true);
		cancel_cancel(token(e->cs)); /* stop acting at once */
	}
	atomic_store(&e->cs->election_ended, true);
	if (e->cs->le.on_stopped_leading)
		e->cs->le.on_stopped_leading(e->cs->le.ud, lost);
}

static void le_new_leader(void *ud, const char *id)
{
	struct election *e = ud;

	log_info("new leader elected", KV_S("identity", id));
	if (e->cs->le.on_new_leader)
		e->cs->le.on_new_leader(e->cs->le.ud, id);
}

/* Waits until this replica leads (true) or the run is cancelled (false). */
static bool wait_leading(struct controllers *cs, struct election *e)
{
	struct pollfd p[2] = {{.fd = cancel_fd(token(cs)), .events = POLLIN},
			      {.fd = cancel_fd(e->leading), .events = POLLIN}};

	while (!cancel_is_cancelled(token(cs)) && !cancel_is_cancelled(e->leading))
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			cancel_wait(token(cs), 100 * NSEC_PER_MSEC); /* cannot poll: wait a little */
	return !cancel_is_cancelled(token(cs));
}

static int start_election(struct controllers *cs, struct election *e)
{
	struct kube_le_config lc = cs->le;
	struct kube_le *le = NULL;
	int r;

	lc.on_started_leading = le_started;
	lc.on_stopped_leading = le_stopped;
	lc.on_new_leader = le_new_leader;
	lc.ud = e;
	lc.cancel = token(cs); /* a stop of the run ends the election's waits at once */
	if ((r = cancel_new(NULL, &e->leading)) < 0 || (r = kube_le_new(cs->kc, &lc, &le)) < 0 ||
	    (atomic_store(&cs->elector, le), r = kube_le_start(le)) < 0) {
		log_error("cannot start the leader election", KV_E(r));
		return r;
	}
	log_info("attempting to acquire leader lease", KV_S("lease", lc.lock_namespace),
		 KV_S("name", lc.lock_name), KV_S("identity", kube_le_identity(le)));
	return 0;
}

static void stop_election(struct controllers *cs, struct election *e)
{
	struct kube_le *le = atomic_load(&cs->elector);

	if (le) {
		kube_le_stop(le); /* releases the Lease after a graceful stop */
		atomic_store(&cs->election_ended, true);
		atomic_store(&cs->elector, NULL);
		kube_le_free(le);
	}
	cancel_free(e->leading);
	e->leading = NULL;
}

/* --- the run ------------------------------------------------------------------------------- */

static size_t add_informers(struct kube_informer *const *l, struct kube_informer **out,
			    size_t n, size_t max)
{
	for (size_t k = 0; k < CONTROLLER_MAX_INFORMERS && l[k]; k++) {
		bool seen = false;
		for (size_t j = 0; j < n && !seen; j++)
			seen = out[j] == l[k];
		if (!seen && n < max)
			out[n++] = l[k];
	}
	return n;
}

/* The set's informers and those of the enabled controllers, each once. */
static size_t informers_of(struct controllers *cs, struct kube_informer **out, size_t max)
{
	size_t n = add_informers(cs->informers, out, 0, max);

	for (size_t i = 0; i < cs->n; i++)
		if (!cs->ctls[i].disabled)
			n = add_informers(cs->ctls[i].informers, out, n, max);
	return n;
}

/* Waits for every informer's first list; false when cancelled or no longer leading. An
 * informer's wait ends once its token is cancelled (informers are made under the run's token,
 * or the process's), and a lost Lease cancels the run's: no wait here polls. */
static bool wait_synced(struct controllers *cs, struct kube_informer **infs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!kube_informer_wait_synced(infs[i], -1) || !controllers_may_act(cs))
			return false;
	return true;
}

static int start_controller(struct controller *c)
{
	struct kube_wq_opts o = c->queue;
	struct kube_wq *q = NULL;
	int r;

	o.name = c->name;
	if ((r = kube_wq_new(&o, &q)) < 0)
		return r;
	atomic_store_explicit(&c->q, q, memory_order_release); /* handlers now queue keys */
	if (c->start && (r = c->start(c)) < 0)
		return r;
	if (c->resync_key) {
		r = c->resync_first_ns > 0 ? kube_wq_add_after(q, c->resync_key, c->resync_first_ns)
					   : kube_wq_add(q, c->resync_key);
		if (r < 0)
			return r;
	}
	return kube_wq_run(q, c->workers > 0 ? c->workers : 1, reconcile_one, c);
}

static void stop_controller(struct controller *c)
{
	struct kube_wq *q = atomic_exchange(&c->q, NULL);
	kube_wq_free(q); /* stops the workers, waiting for running reconciles */
}

int controllers_run(struct controllers *cs)
{
	struct kube_informer *infs[CONTROLLER_MAX_INFORMERS * 8];
	struct election e = {.cs = cs};
	size_t n_infs = 0, started_infs = 0;
	int r = 0;

	atomic_store(&cs->lost, false);
	atomic_store(&cs->election_ended, false);
	atomic_store(&cs->elector, NULL);
	if (cs->leader_elect) {
		if ((r = start_election(cs, &e)) < 0)
			goto out;
		if (!wait_leading(cs, &e))
			goto stopping;
	}
	if (cancel_is_cancelled(token(cs)))
		goto stopping;
	n_infs = informers_of(cs, infs, sizeof(infs) / sizeof(infs[0]));
	for (; started_infs < n_infs; started_infs++)
		if ((r = kube_informer_start(infs[started_infs])) < 0)
			goto failed;
	if (!wait_synced(cs, infs, n_infs)) {
		cancel_wait(token(cs), -1); /* a lost Lease cancels the run too */
		goto stopping;
	}
	if (cs->synced)
		cs->synced(cs->ud);
	for (size_t i = 0; i < cs->n; i++)
		if (!cs->ctls[i].disabled && (r = start_controller(&cs->ctls[i])) < 0)
			goto failed;
	cancel_wait(token(cs), -1);
stopping:
	log_info("stopping");
	r = 0;
	goto out;
failed:
	log_error("cannot start the controllers", KV_E(r));
out:
	for (size_t i = 0; i < started_infs; i++)
		kube_informer_stop(infs[i]);
	for (size_t i = cs->n; i-- > 0;)
		stop_controller(&cs->ctls[i]);
	stop_election(cs, &e);
	if (r == 0 && atomic_load(&cs->lost))
		r = -ENOLCK;
	return r;
}
