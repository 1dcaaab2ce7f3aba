/* An event recorder for core/v1 Events, as client-go's record.EventRecorder with its
 * EventCorrelator:
 *
 * - spam filter: per source and object, a token bucket (burst 25, one more every 5 minutes);
 *   events over it are dropped;
 * - aggregation: when 10 events with the same source, object, type and reason but different
 *   messages arrive within 10 minutes, the next ones become one event whose message starts
 *   with "(combined from similar events): ";
 * - repeats: the same source, object, type, reason and message within 10 minutes PATCHes the
 *   existing Event's count and lastTimestamp (strategic merge) instead of creating another
 *   (and creates it again if the PATCH finds it gone).
 *
 * Caches are bounded (LRU, KUBE_EVENT_CACHE entries each), entries unused for longer than their
 * window are dropped, and kube_recorder_forget drops those of an object that was deleted (call
 * it from the informer's delete handler: objects created and deleted all day would otherwise
 * fill the caches). Recording never blocks: events go to a bounded queue (KUBE_EVENT_QUEUE;
 * overflow is dropped and counted) that one thread sends, retrying a failed write up to 12
 * times 10 s apart as client-go does. An Event's namespace is its object's, or "default" for
 * cluster-scoped objects; its name is "<object name>.<hex nanoseconds>".
 *
 *   kube_eventf(rec, &ref, KUBE_EVENT_WARNING, "SyncLoadBalancerFailed", "Error: %s", msg); */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KUBE_EVENT_NORMAL "Normal"
#define KUBE_EVENT_WARNING "Warning"
#define KUBE_EVENT_CACHE 4096
#define KUBE_EVENT_QUEUE 1000
#define KUBE_EVENT_MAX_MESSAGE 1024 /* longer messages are cut, as the API server does */

struct cancel;
struct kube_client;
struct kube_resource;

/* The involvedObject of an Event (strings are borrowed). */
struct kube_event_ref {
	const char *kind;
	const char *api_version;
	const char *ns;
	const char *name;
	const char *uid;
	const char *resource_version;
	const char *field_path;
	char api_version_buf[96]; /* kube_event_ref_from's "group/version" */
};

/* Fills ref from an object's metadata; kind and apiVersion come from res (objects in lists
 * carry neither). The strings point into obj, res and ref itself. */
void kube_event_ref_from(const cJSON *obj, const struct kube_resource *res,
			 struct kube_event_ref *ref);

struct kube_recorder_opts {
	const char *component;	/* source.component, e.g. "cloud-controller-manager" */
	const char *host;	/* source.host (optional) */
	size_t queue_max;	/* 0: KUBE_EVENT_QUEUE */
	int64_t retry_sleep_ns; /* 0: 10 s */
	/* A parent token: once it is cancelled, a write in flight and a retry's wait end, and what
	 * is queued or recorded later is dropped. NULL: kube_recorder_free alone does that. */
	struct cancel *cancel;
};

struct kube_recorder_stats {
	unsigned long recorded, created, patched, dropped_queue, dropped_spam, failed;
};

struct kube_recorder;

int kube_recorder_new(struct kube_client *c, const struct kube_recorder_opts *o,
		      struct kube_recorder **ret);
/* Sends what is queued (waiting up to 5 s), then cancels the recorder's token (a write in
 * flight ends, the rest is dropped) and stops. */
void kube_recorder_free(struct kube_recorder *r);
/* Waits until every queued event was handled; -ETIMEDOUT. */
int kube_recorder_flush(struct kube_recorder *r, int64_t timeout_ns);
void kube_recorder_get_stats(struct kube_recorder *r, struct kube_recorder_stats *ret);
void kube_eventf(struct kube_recorder *r, const struct kube_event_ref *ref, const char *type,
		 const char *reason, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The object is gone: the correlation forgets it (kind, namespace, name and uid), after the
 * events queued before have been handled. Never blocks; with KUBE_EVENT_QUEUE forgets waiting
 * it is dropped (the entries then go when their windows pass). */
void kube_recorder_forget(struct kube_recorder *r, const struct kube_event_ref *ref);

/* The correlation, separately (for tests): what to do with one event. */
struct kube_ev {
	char *kind, *api_version, *ns, *name, *uid, *resource_version, *field_path;
	char *type, *reason, *message;
	char *component, *host;
	char *event_name; /* set by kube_correlate */
	long count;
	int64_t first_ns, last_ns;
};

enum kube_ev_action { KUBE_EV_CREATE, KUBE_EV_PATCH, KUBE_EV_DROP };

struct kube_correlator;

int kube_correlator_new(size_t cache_size, struct kube_correlator **ret);
void kube_correlator_free(struct kube_correlator *c);
/* Applies the spam filter, aggregation and repeat counting at time now_ns (wall clock); may
 * change ev's message, and sets its event_name, count and timestamps. */
enum kube_ev_action kube_correlate(struct kube_correlator *c, struct kube_ev *ev, int64_t now_ns);
/* After a PATCH found the Event gone: forget it, so that the next try creates it. */
void kube_correlator_forget(struct kube_correlator *c, const struct kube_ev *ev);
/* The involved object (ev's kind, ns, name and uid) was deleted: drops all its entries. */
void kube_correlator_forget_object(struct kube_correlator *c, const struct kube_ev *ev);
struct kube_correlator_stats {
	size_t spam, agg, log; /* entries in each cache */
	size_t objects;	       /* objects these entries are about */
};
void kube_correlator_get_stats(const struct kube_correlator *c, struct kube_correlator_stats *ret);
void kube_ev_free(struct kube_ev *ev);
