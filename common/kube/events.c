/* The event recorder: a bounded queue and one sending thread (see events.h). */
#include "common/kube/events.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/rest.h"

#define MAX_TRIES 12

struct qitem {
	struct qitem *next;
	struct kube_ev *ev;
	bool forget; /* not an event: ev names an object to forget */
};

struct kube_recorder {
	struct kube_client *c;
	char *component, *host;
	size_t queue_max;
	int64_t retry_sleep_ns;
	struct kube_correlator *corr;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct qitem *head, *tail;
	size_t len;	 /* events queued */
	size_t n_forget; /* forgets queued */
	bool busy;	 /* the thread is sending an event */
	struct cancel *cancel; /* a child of the options' token; cancelled by free at the latest */
	pthread_t thread;
	struct kube_recorder_stats stats;
};

void kube_event_ref_from(const cJSON *obj, const struct kube_resource *res,
			 struct kube_event_ref *ref)
{
	char *api_version = ref->api_version_buf;
	const char *kind = json_str(obj, "kind"), *av = json_str(obj, "apiVersion");

	if (!av && res) {
		/* "v1" for the core group, "group/version" otherwise */
		if (res->group && *res->group)
			snprintf(api_version, sizeof(ref->api_version_buf), "%s/%s", res->group,
				 res->version);
		else
			str_copy(api_version, sizeof(ref->api_version_buf), res->version);
	}
	ref->kind = kind ? kind : res ? res->kind : NULL;
	ref->api_version = av ? av : res ? api_version : NULL;
	ref->ns = json_str(obj, "metadata.namespace");
	ref->name = json_str(obj, "metadata.name");
	ref->uid = json_str(obj, "metadata.uid");
	ref->resource_version = json_str(obj, "metadata.resourceVersion");
	ref->field_path = NULL;
}

static char *dup_or_null(const char *s, bool *fail)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		*fail = true;
	return d;
}

static struct kube_ev *ev_new(struct kube_recorder *r, const struct kube_event_ref *ref,
			      const char *type, const char *reason, char *message)
{
	struct kube_ev *ev = calloc(1, sizeof(*ev));
	bool fail = false;

	if (!ev) {
		free(message);
		return NULL;
	}
	ev->message = message;
	ev->kind = dup_or_null(ref->kind, &fail);
	ev->api_version = dup_or_null(ref->api_version, &fail);
	ev->ns = dup_or_null(ref->ns, &fail);
	ev->name = dup_or_null(ref->name, &fail);
	ev->uid = dup_or_null(ref->uid, &fail);
	ev->resource_version = dup_or_null(ref->resource_version, &fail);
	ev->field_path = dup_or_null(ref->field_path, &fail);
	ev->type = dup_or_null(type, &fail);
	ev->reason = dup_or_null(reason, &fail);
	ev->component = dup_or_null(r->component, &fail);
	ev->host = dup_or_null(r->host, &fail);
	if (fail) {
		kube_ev_free(ev);
		return NULL;
	}
	return ev;
}

static void enqueue_locked(struct kube_recorder *r, struct qitem *q)
{
	if (r->tail)
		r->tail->next = q;
	else
		r->head = q;
	r->tail = q;
	pthread_cond_broadcast(&r->cond);
}

void kube_eventf(struct kube_recorder *r, const struct kube_event_ref *ref, const char *type,
		 const char *reason, const char *fmt, ...)
{
	struct qitem *q;
	char *msg = NULL;
	va_list ap;

	if (!r || !ref || !ref->name)
		return;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (!msg)
		return;
	if (strlen(msg) > KUBE_EVENT_MAX_MESSAGE)
		msg[KUBE_EVENT_MAX_MESSAGE] = 0;
	if (!(q = calloc(1, sizeof(*q))) || !(q->ev = ev_new(r, ref, type, reason, msg))) {
		if (!q)
			free(msg);
		free(q);
		return;
	}
	pthread_mutex_lock(&r->lock);
	r->stats.recorded++;
	if (r->len >= r->queue_max || cancel_is_cancelled(r->cancel)) {
		/* never block the caller: drop, as client-go does when its queue is full */
		r->stats.dropped_queue++;
		pthread_mutex_unlock(&r->lock);
		kube_ev_free(q->ev);
		free(q);
		return;
	}
	enqueue_locked(r, q);
	r->len++;
	pthread_mutex_unlock(&r->lock);
}

void kube_recorder_forget(struct kube_recorder *r, const struct kube_event_ref *ref)
{
	struct qitem *q;

	if (!r || !ref || !ref->name)
		return;
	if (!(q = calloc(1, sizeof(*q))) || !(q->ev = ev_new(r, ref, NULL, NULL, NULL))) {
		free(q);
		return;
	}
	q->forget = true;
	pthread_mutex_lock(&r->lock);
	if (r->n_forget >= r->queue_max || cancel_is_cancelled(r->cancel)) {
		pthread_mutex_unlock(&r->lock);
		kube_ev_free(q->ev);
		free(q);
		return;
	}
	enqueue_locked(r, q); /* behind the object's events already queued */
	r->n_forget++;
	pthread_mutex_unlock(&r->lock);
}

static cJSON *event_json(const struct kube_ev *ev)
{
	char first[64], last[64];
	cJSON *e = cJSON_CreateObject(), *io;

	if (!e)
		return NULL;
	rfc3339_format(ev->first_ns, 0, first, sizeof(first));
	rfc3339_format(ev->last_ns, 0, last, sizeof(last));
	cJSON_AddStringToObject(e, "apiVersion", "v1");
	cJSON_AddStringToObject(e, "kind", "Event");
	json_set_str(e, "metadata.name", ev->event_name);
	json_set_str(e, "metadata.namespace", ev->ns && *ev->ns ? ev->ns : "default");
	io = cJSON_AddObjectToObject(e, "involvedObject");
	const char *fields[][2] = {{"kind", ev->kind},
				   {"namespace", ev->ns},
				   {"name", ev->name},
				   {"uid", ev->uid},
				   {"apiVersion", ev->api_version},
				   {"resourceVersion", ev->resource_version},
				   {"fieldPath", ev->field_path}};
	for (size_t i = 0; io && i < ARRAY_SIZE(fields); i++)
		if (fields[i][1] && *fields[i][1])
			cJSON_AddStringToObject(io, fields[i][0], fields[i][1]);
	cJSON_AddStringToObject(e, "reason", ev->reason ? ev->reason : "");
	cJSON_AddStringToObject(e, "message", ev->message ? ev->message : "");
	json_set_str(e, "source.component", ev->component ? ev->component : "");
	if (ev->host)
		json_set_str(e, "source.host", ev->host);
	cJSON_AddStringToObject(e, "firstTimestamp", first);
	cJSON_AddStringToObject(e, "lastTimestamp", last);
	cJSON_AddNumberToObject(e, "count", (double)ev->count);
	cJSON_AddStringToObject(e, "type", ev->type ? ev->type : KUBE_EVENT_NORMAL);
	cJSON_AddStringToObject(e, "reportingComponent", ev->component ? ev->component : "");
	cJSON_AddStringToObject(e, "reportingInstance", ev->host ? ev->host : "");
	return e;
}

/* One call about the Event (name NULL: the collection), on the recorder's token. */
static int event_call(struct kube_recorder *r, const struct kube_ev *ev, const char *method,
		      const char *name, const char *ctype, const char *body, struct kube_status *st)
{
	_cleanup_buf_ struct buf path = BUF_INIT(0);
	int ret = kube_path(KUBE_REF(&kube_events, ev->ns && *ev->ns ? ev->ns : "default", name),
			    &path);
	if (ret < 0)
		return ret;
	struct kube_call k = {
	    .method = method, .path = path.data, .ctype = ctype, .body = body, .cancel = r->cancel};
	return kube_call_do(r->c, &k, NULL, st);
}

static int create_event(struct kube_recorder *r, struct kube_ev *ev, struct kube_status *st)
{
	cJSON *e = event_json(ev);
	_cleanup_free_ char *text = e ? json_print(e) : NULL;
	int ret;

	cJSON_Delete(e);
	if (!text)
		return -ENOMEM;
	ret = event_call(r, ev, "POST", NULL, NULL, text, st);
	return ret == -EEXIST ? 0 : ret;
}

static int patch_event(struct kube_recorder *r, struct kube_ev *ev, struct kube_status *st)
{
	char last[64];
	cJSON *p = cJSON_CreateObject();
	_cleanup_free_ char *text = NULL;

	if (!p)
		return -ENOMEM;
	rfc3339_format(ev->last_ns, 0, last, sizeof(last));
	cJSON_AddNumberToObject(p, "count", (double)ev->count);
	cJSON_AddStringToObject(p, "lastTimestamp", last);
	cJSON_AddStringToObject(p, "message", ev->message ? ev->message : "");
	text = json_print(p);
	cJSON_Delete(p);
	if (!text)
		return -ENOMEM;
	if (!ev->event_name)
		return -EINVAL;
	return event_call(r, ev, "PATCH", ev->event_name, "application/strategic-merge-patch+json",
			  text, st);
}

static bool transient(int r)
{
	return r == -EAGAIN || r == -ETIMEDOUT || r == -ECONNREFUSED || r == -ECONNRESET ||
	       r == -EHOSTUNREACH || r == -EPROTO;
}

/* client-go's recordToSink: correlate, then create or patch, retrying transient failures. */
static void send_one(struct kube_recorder *r, struct kube_ev *ev)
{
	enum kube_ev_action a = kube_correlate(r->corr, ev, now_real_ns());
	struct kube_status st;
	int ret = 0;

	if (a == KUBE_EV_DROP) {
		pthread_mutex_lock(&r->lock);
		r->stats.dropped_spam++;
		pthread_mutex_unlock(&r->lock);
		return;
	}
	for (int tries = 0; tries < MAX_TRIES; tries++) {
		if (a == KUBE_EV_PATCH) {
			ret = patch_event(r, ev, &st);
			if (ret == -ENOENT) {
				/* the Event is gone (expired): create it again */
				ev->count = 1;
				ev->first_ns = ev->last_ns;
				a = KUBE_EV_CREATE;
				ret = create_event(r, ev, &st);
			}
		} else
			ret = create_event(r, ev, &st);
		if (ret >= 0 || !transient(ret))
			break;
		log_v(4, "cannot write an event, retrying", KV_S("reason", ev->reason), KV_E(ret));
		if (cancel_wait(r->cancel, r->retry_sleep_ns))
			break;
	}
	pthread_mutex_lock(&r->lock);
	if (ret < 0)
		r->stats.failed++;
	else if (a == KUBE_EV_PATCH)
		r->stats.patched++;
	else
		r->stats.created++;
	pthread_mutex_unlock(&r->lock);
	if (ret < 0) {
		kube_correlator_forget(r->corr, ev);
		log_v(2, "dropped an event", KV_S("reason", ev->reason), KV_S("object", ev->name),
		      KV_E(ret), KV_S("message", st.message));
	}
}

static void *recorder_main(void *p)
{
	struct kube_recorder *r = p;

	/* ends once cancelled with nothing queued (a cancelled recorder queues nothing more) */
	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->head && !cancel_is_cancelled(r->cancel))
			pthread_cond_wait(&r->cond, &r->lock);
		if (!r->head)
			break;
		struct qitem *q = r->head;
		r->head = q->next;
		if (!r->head)
			r->tail = NULL;
		if (q->forget)
			r->n_forget--;
		else
			r->len--;
		r->busy = true;
		bool cancelled = cancel_is_cancelled(r->cancel);
		if (cancelled && !q->forget)
			r->stats.dropped_queue++; /* what is left after the stop is not sent */
		pthread_mutex_unlock(&r->lock);
		if (q->forget)
			kube_correlator_forget_object(r->corr, q->ev);
		else if (!cancelled)
			send_one(r, q->ev);
		kube_ev_free(q->ev);
		free(q);
		pthread_mutex_lock(&r->lock);
		r->busy = false;
		pthread_cond_broadcast(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int kube_recorder_new(struct kube_client *c, const struct kube_recorder_opts *o,
		      struct kube_recorder **ret)
{
	struct kube_recorder *r;
	pthread_condattr_t ca;
	int e;

	if (!o || !o->component || !(r = calloc(1, sizeof(*r))))
		return o && o->component ? -ENOMEM : -EINVAL;
	r->c = c;
	r->queue_max = o->queue_max ? o->queue_max : KUBE_EVENT_QUEUE;
	r->retry_sleep_ns = o->retry_sleep_ns ? o->retry_sleep_ns : 10 * NSEC_PER_SEC;
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (!(r->component = strdup(o->component)) || (o->host && !(r->host = strdup(o->host))) ||
	    kube_correlator_new(KUBE_EVENT_CACHE, &r->corr) < 0) {
		e = ENOMEM;
		goto fail;
	}
	if ((e = -cancel_new(o->cancel, &r->cancel)) > 0)
		goto fail;
	if ((e = pthread_create(&r->thread, NULL, recorder_main, r)))
		goto fail;
	*ret = r;
	return 0;
fail:
	cancel_free(r->cancel);
	kube_correlator_free(r->corr);
	free(r->component);
	free(r->host);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
	return -e;
}

int kube_recorder_flush(struct kube_recorder *r, int64_t timeout_ns)
{
	int64_t deadline = now_mono_ns() + timeout_ns;
	struct timespec ts = {.tv_sec = deadline / NSEC_PER_SEC, .tv_nsec = deadline % NSEC_PER_SEC};
	int ret = 0;

	/* the thread broadcasts after each item */
	pthread_mutex_lock(&r->lock);
	while (r->head || r->busy)
		if (pthread_cond_timedwait(&r->cond, &r->lock, &ts) == ETIMEDOUT &&
		    (r->head || r->busy)) {
			ret = -ETIMEDOUT;
			break;
		}
	pthread_mutex_unlock(&r->lock);
	return ret;
}

void kube_recorder_free(struct kube_recorder *r)
{
	if (!r)
		return;
	kube_recorder_flush(r, 5 * NSEC_PER_SEC);
	/* a call in flight ends, what is left is dropped */
	cancel_cancel(r->cancel);
	pthread_mutex_lock(&r->lock);
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	while (r->head) {
		struct qitem *q = r->head;
		r->head = q->next;
		kube_ev_free(q->ev);
		free(q);
	}
	kube_correlator_free(r->corr);
	cancel_free(r->cancel);
	free(r->component);
	free(r->host);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

void kube_recorder_get_stats(struct kube_recorder *r, struct kube_recorder_stats *ret)
{
	pthread_mutex_lock(&r->lock);
	*ret = r->stats;
	pthread_mutex_unlock(&r->lock);
}
