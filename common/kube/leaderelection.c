/* Leader election on a Lease (see leaderelection.h). */
#include "common/kube/leaderelection.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"
#include "common/metrics/metrics.h"

#define JITTER_FACTOR 1.2

struct kube_le {
	struct kube_client *c;
	struct kube_le_config cfg;
	char *ns, *name, *identity;
	pthread_t thread;
	bool running;
	struct cancel *cancel; /* while running: a child of cfg.cancel */

	pthread_mutex_t lock; /* guards what other threads read */
	bool leading, done, lost;
	int64_t renewed_ns; /* start of the last successful acquire or renew (monotonic) */
	char *holder;	    /* last observed holder */

	/* the election thread's own state */
	cJSON *lease;	     /* the Lease as last read or written */
	char *observed_spec; /* its spec, printed, to see changes */
	int64_t observed_ns; /* when the spec last changed, on our clock */
};

static struct metric *m_master;

static void metrics_once(void)
{
	m_master =
	    metric_gauge("leader_election_master_status",
			 "Gauge of if the reporting system is master of the relevant lease, 0 "
			 "indicates backup, 1 indicates master. 'name' is the string used to "
			 "identify the lease. Please make sure to group by name.",
			 (const char *[]){"name", NULL});
}

int kube_le_default_identity(char *buf, size_t n)
{
	unsigned char u[16];
	char host[256];

	if (gethostname(host, sizeof(host)) < 0)
		return -errno;
	host[sizeof(host) - 1] = 0;
	if (getrandom(u, sizeof(u), 0) != sizeof(u))
		return -EIO;
	u[6] = (u[6] & 0x0f) | 0x40; /* version 4 */
	u[8] = (u[8] & 0x3f) | 0x80; /* RFC 4122 variant */
	return str_printf(buf, n,
			  "%s_%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			  host, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
			  u[11], u[12], u[13], u[14], u[15]) < 0
		   ? -ENAMETOOLONG
		   : 0;
}

void kube_le_config_from_flags(struct kube_le_config *cfg)
{
	cfg->lock_namespace = kube_flag_le_resource_namespace;
	cfg->lock_name = kube_flag_le_resource_name;
	cfg->lease_duration_ns = kube_flag_le_lease_duration;
	cfg->renew_deadline_ns = kube_flag_le_renew_deadline;
	cfg->retry_period_ns = kube_flag_le_retry_period;
}

int kube_le_new(struct kube_client *c, const struct kube_le_config *cfg, struct kube_le **ret)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	char id[512];
	struct kube_le *le;
	int r;

	if (!cfg->lock_namespace || !*cfg->lock_namespace || !cfg->lock_name || !*cfg->lock_name)
		return -EINVAL;
	pthread_once(&once, metrics_once);
	if (!(le = calloc(1, sizeof(*le))))
		return -ENOMEM;
	le->c = c;
	le->cfg = *cfg;
	if (!le->cfg.lease_duration_ns)
		le->cfg.lease_duration_ns = 15 * NSEC_PER_SEC;
	if (!le->cfg.renew_deadline_ns)
		le->cfg.renew_deadline_ns = 10 * NSEC_PER_SEC;
	if (!le->cfg.retry_period_ns)
		le->cfg.retry_period_ns = 2 * NSEC_PER_SEC;
	pthread_mutex_init(&le->lock, NULL);
	r = 0;
	if (le->cfg.lease_duration_ns <= le->cfg.renew_deadline_ns ||
	    (double)le->cfg.renew_deadline_ns <= JITTER_FACTOR * (double)le->cfg.retry_period_ns ||
	    le->cfg.retry_period_ns <= 0 || le->cfg.lease_duration_ns < NSEC_PER_SEC)
		r = -EINVAL;
	else if (!cfg->identity && (r = kube_le_default_identity(id, sizeof(id))) < 0)
		;
	else if (!(le->ns = strdup(cfg->lock_namespace)) || !(le->name = strdup(cfg->lock_name)) ||
		 !(le->identity = strdup(cfg->identity ? cfg->identity : id)))
		r = -ENOMEM;
	if (r < 0) {
		kube_le_free(le);
		return r;
	}
	*ret = le;
	return 0;
}

static int lease_path(struct kube_le *le, bool with_name, struct buf *out)
{
	return kube_path(KUBE_REF(&kube_leases, le->ns, with_name ? le->name : NULL), out);
}

/* The spec client-go writes; acquire is the acquireTime to keep, or NULL for now. */
static cJSON *lease_spec(struct kube_le *le, const char *holder, long long duration_s,
			 const char *acquire, long long transitions)
{
	char now[64];
	cJSON *s = cJSON_CreateObject();

	rfc3339_format(now_real_ns(), 6, now, sizeof(now));
	if (!s)
		return NULL;
	if (holder)
		cJSON_AddStringToObject(s, "holderIdentity", holder);
	cJSON_AddNumberToObject(s, "leaseDurationSeconds", (double)duration_s);
	cJSON_AddStringToObject(s, "acquireTime", acquire ? acquire : now);
	cJSON_AddStringToObject(s, "renewTime", now);
	cJSON_AddNumberToObject(s, "leaseTransitions", (double)transitions);
	return s;
}

static void observe(struct kube_le *le, cJSON *lease)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
	char *text = json_print(spec);
	const char *h = json_str(lease, "spec.holderIdentity");

	cJSON_Delete(le->lease);
	le->lease = lease;
	if (text && (!le->observed_spec || strcmp(text, le->observed_spec) != 0)) {
		free(le->observed_spec);
		le->observed_spec = TAKE_PTR(text);
		le->observed_ns = now_mono_ns();
	}
	free(text);
	pthread_mutex_lock(&le->lock);
	bool changed = (h && *h) ? !le->holder || strcmp(le->holder, h) != 0 : le->holder != NULL;
	if (changed) {
		free(le->holder);
		le->holder = h && *h ? strdup(h) : NULL;
	}
	pthread_mutex_unlock(&le->lock);
	if (changed && h && *h && le->cfg.on_new_leader)
		le->cfg.on_new_leader(le->cfg.ud, h);
}

/* PUT (or POST when create) of a Lease with the given spec; the written Lease is observed. */
static int write_lease(struct kube_le *le, cJSON *spec, bool create, int64_t timeout_ns,
		       struct cancel *ct)
{
	_cleanup_buf_ struct buf path = BUF_INIT(0);
	_cleanup_free_ char *body = NULL;
	struct kube_status st;
	cJSON *lease, *out = NULL;
	int r;

	if (!spec)
		return -ENOMEM;
	if (create) {
		lease = cJSON_CreateObject();
		cJSON_AddStringToObject(lease, "apiVersion", "coordination.k8s.io/v1");
		cJSON_AddStringToObject(lease, "kind", "Lease");
		json_set_str(lease, "metadata.name", le->name);
		json_set_str(lease, "metadata.namespace", le->ns);
	} else
		lease = cJSON_Duplicate(le->lease, true);
	if (!lease || json_put(lease, "spec", spec) < 0 || !(body = json_print(lease))) {
		cJSON_Delete(lease);
		return -ENOMEM;
	}
	cJSON_Delete(lease);
	if ((r = lease_path(le, !create, &path)) < 0)
		return r;
	struct kube_call k = {.method = create ? "POST" : "PUT",
			      .path = path.data,
			      .body = body,
			      .timeout_ns = timeout_ns,
			      .cancel = ct};
	if ((r = kube_call_do(le->c, &k, &out, &st)) < 0) {
		log_v(4, "cannot write the lease", KV_S("lease", le->name), KV_E(r),
		      KV_S("reason", st.reason));
		return r;
	}
	observe(le, out);
	return 0;
}

/* client-go's tryAcquireOrRenew. */
static int try_acquire_or_renew(struct kube_le *le, int64_t timeout_ns)
{
	_cleanup_buf_ struct buf path = BUF_INIT(0);
	long long dur = (le->cfg.lease_duration_ns + NSEC_PER_SEC / 2) / NSEC_PER_SEC;
	long long odur = 0, trans = 0;
	struct kube_status st;
	cJSON *lease = NULL;
	int r;

	if ((r = lease_path(le, true, &path)) < 0)
		return r;
	struct kube_call k = {
	    .method = "GET", .path = path.data, .timeout_ns = timeout_ns, .cancel = le->cancel};
	r = kube_call_do(le->c, &k, &lease, &st);
	if (r == -ENOENT)
		return write_lease(le, lease_spec(le, le->identity, dur, NULL, 0), true,
				   timeout_ns, le->cancel);
	if (r < 0)
		return r;
	observe(le, lease);
	const char *holder = json_str(le->lease, "spec.holderIdentity");
	json_get_int(le->lease, "spec.leaseDurationSeconds", &odur);
	json_get_int(le->lease, "spec.leaseTransitions", &trans);
	bool ours = holder && strcmp(holder, le->identity) == 0;
	if (holder && *holder && !ours && le->observed_ns + odur * NSEC_PER_SEC > now_mono_ns())
		return -EBUSY; /* held by another, and not expired on our clock */
	const char *acquire = ours ? json_str(le->lease, "spec.acquireTime") : NULL;
	_cleanup_free_ char *keep = acquire ? strdup(acquire) : NULL;
	return write_lease(le, lease_spec(le, le->identity, dur, keep, ours ? trans : trans + 1),
			   false, timeout_ns, le->cancel);
}

/* Runs after the stop, which cancelled the election's token (and maybe the client's): with a
 * token of its own, each call bounded by the retry period. A renewal cancelled in flight may
 * have been written all the same: on a conflict the Lease is read again, and released if it is
 * still ours. */
static void release(struct kube_le *le)
{
	_cleanup_buf_ struct buf path = BUF_INIT(0);
	struct cancel *ct = NULL;
	int r;

	if ((r = cancel_new(NULL, &ct)) < 0 || (r = lease_path(le, true, &path)) < 0)
		goto out;
	for (int attempt = 0;; attempt++) {
		long long trans = 0;
		const char *holder = json_str(le->lease, "spec.holderIdentity");
		if (!le->lease || !holder || strcmp(holder, le->identity) != 0) {
			cancel_free(ct);
			return;
		}
		json_get_int(le->lease, "spec.leaseTransitions", &trans);
		r = write_lease(le, lease_spec(le, NULL, 1, NULL, trans), false,
				le->cfg.retry_period_ns, ct);
		if (r != -KUBE_ECONFLICT || attempt > 0)
			break;
		cJSON *lease = NULL;
		struct kube_call k = {.method = "GET",
				      .path = path.data,
				      .timeout_ns = le->cfg.retry_period_ns,
				      .cancel = ct};
		if ((r = kube_call_do(le->c, &k, &lease, NULL)) < 0)
			break;
		observe(le, lease);
	}
out:
	cancel_free(ct);
	log_v(2, r < 0 ? "failed to release the lease" : "released the lease",
	      KV_S("lease", le->name), KV_E(r));
}

static void set_leading(struct kube_le *le, bool leading, int64_t renewed)
{
	pthread_mutex_lock(&le->lock);
	le->leading = leading;
	if (renewed)
		le->renewed_ns = renewed;
	pthread_mutex_unlock(&le->lock);
	metric_set(m_master, leading ? 1 : 0, le->name);
}

static bool acquire(struct kube_le *le)
{
	while (!cancel_is_cancelled(le->cancel)) {
		int64_t t0 = now_mono_ns();
		int r = try_acquire_or_renew(le, le->cfg.renew_deadline_ns);
		if (r == 0) {
			set_leading(le, true, t0);
			return true;
		}
		if (r != -EBUSY && r != -ECANCELED)
			log_v(2, "failed to acquire the lease", KV_S("lease", le->name), KV_E(r));
		int64_t d = le->cfg.retry_period_ns;
		d += (int64_t)random_below((uint64_t)((double)d * JITTER_FACTOR) + 1);
		if (cancel_wait(le->cancel, d))
			break;
	}
	return false;
}

/* Renews until cancelled (false) or the renew deadline passes without success (true). */
static bool renew_until_lost(struct kube_le *le)
{
	for (;;) {
		if (cancel_wait(le->cancel, le->cfg.retry_period_ns))
			return false;
		pthread_mutex_lock(&le->lock);
		int64_t deadline = le->renewed_ns + le->cfg.renew_deadline_ns;
		pthread_mutex_unlock(&le->lock);
		for (;;) {
			int64_t t0 = now_mono_ns();
			if (t0 >= deadline)
				return true;
			int r = try_acquire_or_renew(le, deadline - t0);
			if (r == 0) {
				set_leading(le, true, t0);
				break;
			}
			if (r != -ECANCELED)
				log_v(2, "failed to renew the lease", KV_S("lease", le->name),
				      KV_E(r));
			int64_t left = deadline - now_mono_ns();
			if (left < 0)
				left = 0; /* a negative wait would have no limit */
			if (cancel_wait(le->cancel, left < le->cfg.retry_period_ns
							? left
							: le->cfg.retry_period_ns))
				return false;
		}
	}
}

static void *le_main(void *p)
{
	struct kube_le *le = p;

	if (acquire(le)) {
		log_v(2, "acquired the lease", KV_S("lease", le->name),
		      KV_S("identity", le->identity));
		if (le->cfg.on_started_leading)
			le->cfg.on_started_leading(le->cfg.ud);
		bool lost = renew_until_lost(le);
		set_leading(le, false, 0);
		pthread_mutex_lock(&le->lock);
		le->lost = lost;
		pthread_mutex_unlock(&le->lock);
		if (!lost && !le->cfg.no_release)
			release(le);
		if (le->cfg.on_stopped_leading)
			le->cfg.on_stopped_leading(le->cfg.ud, lost);
	}
	pthread_mutex_lock(&le->lock);
	le->done = true;
	pthread_mutex_unlock(&le->lock);
	return NULL;
}

int kube_le_start(struct kube_le *le)
{
	if (le->running)
		return -EALREADY;
	int r = cancel_new(le->cfg.cancel, &le->cancel);
	if (r < 0)
		return r;
	if ((r = pthread_create(&le->thread, NULL, le_main, le))) {
		cancel_free(TAKE_PTR(le->cancel));
		return -r;
	}
	le->running = true;
	return 0;
}

void kube_le_stop(struct kube_le *le)
{
	if (!le || !le->running)
		return;
	cancel_cancel(le->cancel);
	pthread_join(le->thread, NULL);
	le->running = false;
	cancel_free(TAKE_PTR(le->cancel));
}

void kube_le_free(struct kube_le *le)
{
	if (!le)
		return;
	kube_le_stop(le);
	cJSON_Delete(le->lease);
	free(le->observed_spec);
	free(le->holder);
	free(le->ns);
	free(le->name);
	free(le->identity);
	pthread_mutex_destroy(&le->lock);
	free(le);
}

bool kube_le_is_leader(struct kube_le *le)
{
	pthread_mutex_lock(&le->lock);
	bool l = le->leading && now_mono_ns() < le->renewed_ns + le->cfg.renew_deadline_ns;
	pthread_mutex_unlock(&le->lock);
	return l;
}

bool kube_le_done(struct kube_le *le)
{
	pthread_mutex_lock(&le->lock);
	bool d = le->done;
	pthread_mutex_unlock(&le->lock);
	return d;
}

bool kube_le_lost(struct kube_le *le)
{
	pthread_mutex_lock(&le->lock);
	bool l = le->lost;
	pthread_mutex_unlock(&le->lock);
	return l;
}

const char *kube_le_identity(const struct kube_le *le)
{
	return le->identity;
}

char *kube_le_leader(struct kube_le *le)
{
	pthread_mutex_lock(&le->lock);
	char *h = le->holder ? strdup(le->holder) : NULL;
	pthread_mutex_unlock(&le->lock);
	return h;
}
