/* Watch streams with reconnects, backoff and relist signalling (see watch.h). */
#include "common/kube/watch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"

#define STAT_INC(s, f)                                                                             \
	do {                                                                                       \
		if (s)                                                                             \
			__atomic_fetch_add(&(s)->f, 1, __ATOMIC_RELAXED);                          \
	} while (0)

/* client-go's reflector backoff: 800 ms doubling to 30 s, reset after 2 min without errors */
#define BACKOFF_BASE_NS (800 * NSEC_PER_MSEC)
#define BACKOFF_MAX_NS (30 * NSEC_PER_SEC)
#define BACKOFF_RESET_NS (120 * NSEC_PER_SEC)

struct wctx {
	const struct kube_watch_opts *o;
	char **rv;
	struct kube_status *st;
	struct kube_watch_stats *stats;
	unsigned long events;
	bool handler_failed;
};

static int event_type(const char *t, enum kube_event_type *ret)
{
	static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"};
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (strcmp(t, names[i]) == 0) {
			*ret = (enum kube_event_type)i;
			return 0;
		}
	return -EBADMSG;
}

int kube_watch_decode(const char *line, size_t len, enum kube_event_type *ret_type, cJSON **ret_obj,
		      struct kube_status *st)
{
	cJSON *ev = NULL, *obj;
	const char *type, *v;
	enum kube_event_type t;
	int r;

	memset(st, 0, sizeof(*st));
	if (json_parse(line, len, &ev, NULL) < 0) {
		str_copy(st->message, sizeof(st->message), "a line is not JSON");
		goto bad;
	}
	type = json_str(ev, "type");
	obj = cJSON_GetObjectItemCaseSensitive(ev, "object");
	if (!type || !cJSON_IsObject(obj)) {
		str_copy(st->message, sizeof(st->message), "an event without a type or an object");
		goto bad;
	}
	if (strcmp(type, "ERROR") == 0) {
		/* a Status: 410 Expired/Gone means relist */
		r = kube_status_from_json(0, obj, st);
		cJSON_Delete(ev);
		return r < 0 ? r : -EPROTO;
	}
	if (event_type(type, &t) < 0) {
		str_copy(st->message, sizeof(st->message), "an unknown event type");
		goto bad;
	}
	v = json_str(obj, "metadata.resourceVersion");
	if (v && strlen(v) > KUBE_RV_MAX) {
		str_copy(st->message, sizeof(st->message), "a resourceVersion too long");
		goto bad;
	}
	cJSON_DetachItemViaPointer(ev, obj);
	cJSON_Delete(ev);
	*ret_type = t;
	*ret_obj = obj;
	return 0;
bad:
	cJSON_Delete(ev);
	str_copy(st->reason, sizeof(st->reason), "Malformed");
	return -EBADMSG;
}

static int on_line(void *ud, const char *line, size_t len)
{
	struct wctx *w = ud;
	enum kube_event_type t;
	char *new_rv = NULL;
	const char *v;
	cJSON *obj;
	int r;

	while (len && (line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (len == 0)
		return 0;
	if ((r = kube_watch_decode(line, len, &t, &obj, w->st)) < 0) {
		log_v(r == -EBADMSG ? 2 : 4, "watch stream error", KV_E(r),
		      KV_I("code", w->st->code), KV_S("reason", w->st->reason),
		      KV_S("message", w->st->message));
		return r;
	}
	v = json_str(obj, "metadata.resourceVersion");
	if (v && *v && !(new_rv = strdup(v))) {
		cJSON_Delete(obj);
		return -ENOMEM;
	}
	w->events++;
	STAT_INC(w->stats, events);
	if (w->o->on_event && (t != KUBE_EVENT_BOOKMARK || w->o->pass_bookmarks)) {
		r = w->o->on_event(w->o->ud, t, obj);
		if (r < 0) {
			w->handler_failed = true;
			free(new_rv);
			return r;
		}
	} else
		cJSON_Delete(obj);
	/* the version moves on once the event was handled */
	if (new_rv) {
		free(*w->rv);
		*w->rv = new_rv;
	}
	return 0;
}

static int stream_once(struct kube_client *c, const struct kube_ref *ref,
		       const struct kube_watch_opts *o, char **rv, struct kube_status *st,
		       struct kube_watch_stats *stats, struct wctx *w)
{
	_cleanup_buf_ struct buf path = BUF_INIT(0);
	struct http_response resp;
	struct kube_list_opts lo = {
	    .label_selector = o->label_selector,
	    .field_selector = o->field_selector,
	    .resource_version = *rv,
	    .timeout_seconds =
		o->timeout_seconds > 0 ? o->timeout_seconds : 300 + (long long)random_below(300),
	    .allow_watch_bookmarks = !o->no_bookmarks,
	};
	int r;

	*w = (struct wctx){.o = o, .rv = rv, .st = st, .stats = stats};
	memset(st, 0, sizeof(*st));
	if ((r = kube_path(ref, &path)) < 0 || (r = kube_query(&lo, true, &path)) < 0)
		return r;
	struct http_stream_opts so = {
	    .max_line = o->max_event ? o->max_event : KUBE_WATCH_MAX_EVENT,
	    .idle_timeout_ns = o->idle_timeout_ns,
	    .on_line = on_line,
	    .ud = w,
	};
	STAT_INC(stats, streams);
	http_response_init(&resp);
	/* the server ends the stream after timeoutSeconds; the client gives it 30 s more */
	r = kube_stream(c, path.data, (lo.timeout_seconds + 30) * NSEC_PER_SEC, o->cancel, &so,
			&resp);
	if (r == 0 && resp.status != 200) {
		st->retry_after_ns = 0;
		r = kube_status_parse(resp.status, resp.body.data, resp.body.len, st);
		if (r == 0)
			r = -EPROTO;
	} else if (r < 0 && !w->handler_failed && !st->reason[0])
		str_copy(st->message, sizeof(st->message), resp.error);
	if (r == -EMSGSIZE && !w->handler_failed) {
		str_copy(st->reason, sizeof(st->reason), "Malformed");
		str_copy(st->message, sizeof(st->message), "an event over the size cap");
	}
	http_response_release(&resp);
	if (r < 0 && r != -ECANCELED && !w->handler_failed) {
		STAT_INC(stats, errors);
		if (r == -EBADMSG || r == -EMSGSIZE)
			STAT_INC(stats, malformed);
		if (r == -KUBE_EGONE)
			STAT_INC(stats, gone);
	}
	return r;
}

int kube_watch_stream(struct kube_client *c, const struct kube_ref *ref,
		      const struct kube_watch_opts *o, char **rv, struct kube_status *st,
		      struct kube_watch_stats *stats)
{
	struct kube_status local;
	struct wctx w;
	return stream_once(c, ref, o, rv, st ? st : &local, stats, &w);
}

int kube_watch_loop(struct kube_client *c, const struct kube_ref *ref,
		    const struct kube_watch_opts *o, char **rv, struct kube_watch_stats *stats)
{
	struct backoff b = {.base_ns = BACKOFF_BASE_NS, .max_ns = BACKOFF_MAX_NS, .jitter = 1.0};
	struct cancel *ct = o->cancel ? o->cancel : kube_client_cancel(c);
	int64_t last_err = 0;
	struct kube_status st;
	struct wctx w;

	for (;;) {
		if (cancel_is_cancelled(ct))
			return -ECANCELED;
		int64_t t0 = now_mono_ns();
		int r = stream_once(c, ref, o, rv, &st, stats, &w);
		if (cancel_is_cancelled(ct) || r == -ECANCELED)
			return -ECANCELED;
		if (w.handler_failed || r == -KUBE_EGONE)
			return r;
		/* client-go calls a watch that ends within a second without an event an error */
		bool very_short = r == 0 && w.events == 0 && now_mono_ns() - t0 < NSEC_PER_SEC;
		if (r == 0 && !very_short)
			continue;
		int64_t now = now_mono_ns();
		if (now - last_err > BACKOFF_RESET_NS)
			backoff_reset(&b);
		last_err = now;
		int64_t d = backoff_next(&b);
		log_v(2, "watch ended with an error, retrying", KV_S("resource", ref->res->plural),
		      KV_E(very_short ? -EPROTO : r), KV_S("reason", st.reason),
		      KV_S("message", very_short ? "very short watch" : st.message),
		      KV_I("retry_ms", d / NSEC_PER_MSEC));
		if (cancel_wait(ct, d))
			return -ECANCELED;
	}
}
