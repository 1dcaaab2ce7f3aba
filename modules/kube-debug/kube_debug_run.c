/* kube-debug's long-running actions: watch, informer, sync, leader, event. Each runs until
 * --count is reached, --duration has passed, or SIGTERM/SIGINT. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/cancel.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/events.h"
#include "common/kube/frozen.h"
#include "common/kube/informer.h"
#include "common/kube/kubeflags.h"
#include "common/kube/leaderelection.h"
#include "common/kube/watch.h"
#include "modules/kube-debug/kube_debug_int.h"

/* The running action's token: cancelled by --count, --duration or a stop (its parent is the
 * process's token). */
static struct cancel *dbg_cancel;
static long dbg_seen;

/* --duration: cancels the action's token when it has passed. */
static void *timer_main(void *p)
{
	cancel_wait(dbg_cancel, dbg.duration > 0 ? dbg.duration : -1);
	cancel_cancel(dbg_cancel);
	return NULL;
}

static int timer_start(pthread_t *t)
{
	int r;

	dbg_seen = 0;
	if ((r = cancel_new(cancel_root(), &dbg_cancel)) < 0)
		return r;
	if ((r = -pthread_create(t, NULL, timer_main, NULL)) < 0)
		cancel_free(TAKE_PTR(dbg_cancel));
	return r;
}

static void timer_stop(pthread_t t)
{
	cancel_cancel(dbg_cancel);
	pthread_join(t, NULL);
	cancel_free(TAKE_PTR(dbg_cancel));
}

/* Counts an event; true once --count is reached (and cancels). */
static bool count_event(void)
{
	if (dbg.count > 0 && __atomic_add_fetch(&dbg_seen, 1, __ATOMIC_RELAXED) >= dbg.count) {
		cancel_cancel(dbg_cancel);
		return true;
	}
	return false;
}

static const char *key_of(const cJSON *obj, char *buf, size_t n)
{
	return kube_obj_key(obj, buf, n) == 0 ? buf : "?";
}

static int watch_event(void *ud, enum kube_event_type t, cJSON *obj)
{
	static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"};
	char key[KUBE_KEY_MAX];

	if (!dbg.quiet || t == KUBE_EVENT_BOOKMARK)
		printf("%s %s %s\n", names[t],
		       t == KUBE_EVENT_BOOKMARK ? "-" : key_of(obj, key, sizeof(key)),
		       json_str(obj, "metadata.resourceVersion"));
	cJSON_Delete(obj);
	return count_event() ? -ECANCELED : 0;
}

int dbg_watch(struct kube_client *kc, const struct kube_resource *res)
{
	struct kube_ref ref = {.res = res, .ns = dbg.ns};
	struct kube_watch_opts wo = {
	    .label_selector = dbg.label,
	    .field_selector = dbg.field,
	    .timeout_seconds = dbg.watch_timeout,
	    .pass_bookmarks = true,
	    .max_event = (size_t)dbg.max_event,
	    .on_event = watch_event,
	};
	struct kube_watch_stats stats = {0};
	char *rv = dbg.rv ? strdup(dbg.rv) : NULL;
	pthread_t t;
	int r;

	if ((r = timer_start(&t)) < 0) {
		free(rv);
		return dbg_fail(r, NULL, "watch");
	}
	wo.cancel = dbg_cancel;
	r = kube_watch_loop(kc, &ref, &wo, &rv, &stats);
	timer_stop(t);
	printf(
	    "watch: streams=%lu events=%lu errors=%lu malformed=%lu gone=%lu resourceVersion=%s\n",
	    stats.streams, stats.events, stats.errors, stats.malformed, stats.gone, rv ? rv : "");
	free(rv);
	if (r == -KUBE_EGONE) {
		puts("GONE");
		return 3;
	}
	return r == -ECANCELED ? 0 : dbg_fail(r, NULL, "watch");
}

static void inf_add(void *ud, const cJSON *obj)
{
	char key[KUBE_KEY_MAX];
	if (!dbg.quiet)
		printf("ADD %s %s\n", key_of(obj, key, sizeof(key)),
		       json_str(obj, "metadata.resourceVersion"));
	count_event();
}

static void inf_update(void *ud, const cJSON *old, const cJSON *obj)
{
	char key[KUBE_KEY_MAX];
	if (!dbg.quiet)
		printf("%s %s %s\n", old == obj ? "RESYNC" : "UPDATE",
		       key_of(obj, key, sizeof(key)), json_str(obj, "metadata.resourceVersion"));
	count_event();
}

static void inf_delete(void *ud, const cJSON *obj)
{
	char key[KUBE_KEY_MAX];
	if (!dbg.quiet)
		printf("DELETE %s\n", key_of(obj, key, sizeof(key)));
	count_event();
}

static cJSON *project(void *ud, cJSON *obj)
{
	static const char *const pod[] = {"metadata.uid",
					  "metadata.labels",
					  "metadata.ownerReferences",
					  "metadata.deletionTimestamp",
					  "spec.nodeName",
					  "status.phase",
					  "status.podIP",
					  NULL};
	static const char *const node[] = {"metadata.uid",
					   "metadata.labels",
					   "spec.providerID",
					   "spec.taints",
					   "spec.unschedulable",
					   "status.addresses",
					   NULL};
	static const char *const other[] = {"metadata.uid", "metadata.labels", NULL};
	const struct kube_resource *res = ud;
	const char *const *paths = res == &kube_pods ? pod : res == &kube_nodes ? node : other;

	cJSON *p = kube_project(obj, paths);
	cJSON_Delete(obj);
	return p;
}

static int informer_opts(const struct kube_resource *res, struct kube_informer_opts *o)
{
	*o = (struct kube_informer_opts){
	    .res = res,
	    .ns = dbg.ns,
	    .label_selector = dbg.label,
	    .field_selector = dbg.field,
	    .page_size = dbg.limit,
	    .resync_ns = dbg.resync,
	    .watch_timeout_seconds = dbg.watch_timeout,
	    .max_event = (size_t)dbg.max_event,
	};
	if (strcmp(dbg.transform, "project") == 0) {
		o->transform = project;
		o->transform_ud = (void *)res;
	} else if (strcmp(dbg.transform, "strip") != 0) {
		fprintf(stderr, "kube-debug: --transform must be strip or project\n");
		return -EINVAL;
	}
	return 0;
}

static void print_stats(struct kube_informer *inf)
{
	struct kube_informer_stats s;
	_cleanup_free_ char *rv = kube_informer_last_rv(inf);

	kube_informer_get_stats(inf, &s);
	printf("stats: {\"lists\":%lu,\"relists\":%lu,\"list_errors\":%lu,\"streams\":%lu,"
	       "\"events\":%lu,\"errors\":%lu,\"malformed\":%lu,\"gone\":%lu,\"objects\":%zu,"
	       "\"resourceVersion\":\"%s\"}\n",
	       s.lists, s.relists, s.list_errors, s.watch.streams, s.watch.events, s.watch.errors,
	       s.watch.malformed, s.watch.gone, kube_store_len(kube_informer_store(inf)),
	       rv ? rv : "");
}

int dbg_informer(struct kube_client *kc, const struct kube_resource *res)
{
	struct kube_informer_opts o;
	struct kube_informer *inf = NULL;
	pthread_t t;
	int r;

	if (informer_opts(res, &o) < 0)
		return 2;
	o.handlers = (struct kube_handlers){inf_add, inf_update, inf_delete, NULL};
	if ((r = timer_start(&t)) < 0)
		return dbg_fail(r, NULL, "informer");
	o.cancel = dbg_cancel; /* --count, --duration and a stop end the informer */
	if ((r = kube_informer_new(kc, &o, &inf)) < 0 || (r = kube_informer_start(inf)) < 0) {
		timer_stop(t);
		kube_informer_free(inf);
		return dbg_fail(r, NULL, "informer");
	}
	/* returns once synced, or once the informer is cancelled */
	if (kube_informer_wait_synced(inf, -1))
		printf("SYNCED %zu\n", kube_store_len(kube_informer_store(inf)));
	cancel_wait(dbg_cancel, -1);
	kube_informer_stop(inf);
	timer_stop(t);
	print_stats(inf);
	kube_informer_free(inf);
	return 0;
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

int dbg_sync(struct kube_client *kc, const char *resources)
{
	_cleanup_strv_ char **names = NULL;
	struct kube_informer *infs[8] = {0};
	struct kube_resource res[8];
	size_t n;
	long rss0 = rss_kb();
	int64_t t0;
	int r = 0;

	if (strv_split(resources, ',', &names) < 0 || (n = strv_len(names)) == 0 || n > 8)
		return 2;
	for (size_t i = 0; i < n; i++) {
		struct kube_informer_opts o;
		if (dbg_resource(names[i], &res[i]) < 0) {
			fprintf(stderr, "kube-debug: unknown resource '%s'\n", names[i]);
			return 2;
		}
		/* the well-known descriptors, so that the projection recognises them */
		const struct kube_resource *rp = strcmp(names[i], "pods") == 0	  ? &kube_pods
						 : strcmp(names[i], "nodes") == 0 ? &kube_nodes
										  : &res[i];
		if (informer_opts(rp, &o) < 0)
			return 2;
		o.cancel = cancel_root(); /* a stop ends the wait for the sync */
		if ((r = kube_informer_new(kc, &o, &infs[i])) < 0)
			break;
	}
	t0 = now_mono_ns();
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = kube_informer_start(infs[i]);
	for (size_t i = 0; r >= 0 && i < n; i++)
		if (!kube_informer_wait_synced(infs[i], dbg.duration > 0 ? dbg.duration : -1))
			r = cancel_is_cancelled(cancel_root()) ? -ECANCELED : -ETIMEDOUT;
	int64_t ms = (now_mono_ns() - t0) / NSEC_PER_MSEC;
	if (r >= 0) {
		long rss = rss_kb();
		size_t stored = 0;
		malloc_trim(0);
		/* the bytes of the stored objects themselves, to tell them from heap overhead */
		for (size_t i = 0; i < n; i++) {
			struct kube_obj **v = NULL;
			size_t m = 0;
			if (kube_store_list(kube_informer_store(infs[i]), &v, &m) < 0)
				continue;
			for (size_t k = 0; k < m; k++)
				stored += kube_json_frozen_size(v[k]->json);
			kube_objv_free(v, m);
		}
		printf(
		    "{\"sync_ms\":%lld,\"rss_before_kb\":%ld,\"rss_kb\":%ld,\"rss_trimmed_kb\":%ld,"
		    "\"stored_kb\":%zu,\"transform\":\"%s\"",
		    (long long)ms, rss0, rss, rss_kb(), stored / 1024, dbg.transform);
		for (size_t i = 0; i < n; i++)
			printf(",\"%s\":%zu", names[i],
			       kube_store_len(kube_informer_store(infs[i])));
		printf("}\n");
	}
	for (size_t i = 0; i < n; i++)
		kube_informer_free(infs[i]);
	return r < 0 ? dbg_fail(r, NULL, "sync") : 0;
}

static int le_fd = -1;
static const char *le_id;

/* Appends "IDENTITY WHAT REALTIME_NS" to --out (one write, O_APPEND: lines never mix). */
static void le_note(const char *what, int64_t ns)
{
	char line[600];
	int n = snprintf(line, sizeof(line), "%s %s %lld\n", le_id, what, (long long)ns);
	if (le_fd >= 0 && n > 0 && (size_t)n < sizeof(line) && write(le_fd, line, (size_t)n) < 0)
		log_warn("cannot write to --out", KV_E(-errno));
}

static void le_started(void *ud)
{
	le_note("START", now_real_ns());
	printf("started leading %s\n", le_id);
}

static void le_stopped(void *ud, bool lost)
{
	le_note(lost ? "LOST" : "STOP", now_real_ns());
	printf("%s %s\n", lost ? "lost the lease" : "released the lease", le_id);
	if (lost) /* what a controller does: stop acting at once */
		cancel_cancel(cancel_root());
}

static void le_new_leader(void *ud, const char *id)
{
	printf("leader is %s\n", id);
}

int dbg_leader(struct kube_client *kc)
{
	struct kube_le_config cfg = {.on_started_leading = le_started,
				     .on_stopped_leading = le_stopped,
				     .on_new_leader = le_new_leader,
				     .identity = dbg.identity};
	struct kube_le *le;
	char err[256];
	int r;

	if (kube_le_flags_check(err, sizeof(err)) < 0) {
		fprintf(stderr, "kube-debug: %s\n", err);
		return 2;
	}
	kube_le_config_from_flags(&cfg);
	if (dbg.out && (le_fd = open(dbg.out, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0)
		return dbg_fail(-errno, NULL, "open --out");
	if ((r = kube_le_new(kc, &cfg, &le)) < 0 || (r = kube_le_start(le)) < 0) {
		if (le_fd >= 0)
			close(le_fd);
		return dbg_fail(r, NULL, "leader election");
	}
	le_id = kube_le_identity(le);
	int64_t end = dbg.duration > 0 ? now_mono_ns() + dbg.duration : INT64_MAX;
	for (;;) {
		int64_t ts = now_real_ns(), left = end - now_mono_ns();
		if (left <= 0 || kube_le_done(le))
			break;
		if (kube_le_is_leader(le))
			le_note("LEAD", ts);
		/* a heartbeat every 50 ms while leading; a stop (a loss stops too) ends the wait */
		if (cancel_wait(cancel_root(), left < 50 * NSEC_PER_MSEC ? left : 50 * NSEC_PER_MSEC))
			break;
	}
	kube_le_stop(le); /* releases the lease when leading */
	bool lost = kube_le_lost(le);
	kube_le_free(le);
	if (le_fd >= 0)
		close(le_fd);
	return lost ? 1 : 0;
}

/* Records an Event about an object --count times (the same message: one Event, counted). */
int dbg_event(struct kube_client *kc, const struct kube_resource *res, char **args)
{
	struct kube_recorder_opts ro = {
	    .component = "aws-k8s-kube-debug", .host = "kube-debug", .cancel = cancel_root()};
	struct kube_recorder_stats st;
	struct kube_event_ref ref = {0};
	struct kube_recorder *rec;
	struct kube_status kst;
	struct kube_ref oref;
	char nsbuf[128];
	cJSON *obj = NULL;
	int r;

	dbg_ref(kc, res, args[0], &oref, nsbuf, sizeof(nsbuf));
	if ((r = kube_get(kc, &oref, &obj, &kst)) < 0)
		return dbg_fail(r, &kst, "get");
	kube_event_ref_from(obj, res, &ref);
	if ((r = kube_recorder_new(kc, &ro, &rec)) < 0) {
		cJSON_Delete(obj);
		return dbg_fail(r, NULL, "recorder");
	}
	/* "{i}" in the message becomes the repeat's number: distinct messages */
	const char *brace = strstr(args[3], "{i}");
	int64_t t0 = now_mono_ns();
	for (long long i = 0; i < (dbg.count > 0 ? dbg.count : 1); i++)
		if (brace)
			kube_eventf(rec, &ref, args[1], args[2], "%.*s%lld%s",
				    (int)(brace - args[3]), args[3], i + 1, brace + 3);
		else
			kube_eventf(rec, &ref, args[1], args[2], "%s", args[3]);
	printf("recorded in %lld ms\n", (long long)((now_mono_ns() - t0) / NSEC_PER_MSEC));
	r = kube_recorder_flush(rec, dbg.duration > 0 ? dbg.duration : 60 * NSEC_PER_SEC);
	kube_recorder_get_stats(rec, &st);
	printf("events: recorded=%lu created=%lu patched=%lu dropped_queue=%lu dropped_spam=%lu "
	       "failed=%lu\n",
	       st.recorded, st.created, st.patched, st.dropped_queue, st.dropped_spam, st.failed);
	kube_recorder_free(rec);
	cJSON_Delete(obj);
	return r < 0 ? dbg_fail(r, NULL, "flush") : 0;
}
