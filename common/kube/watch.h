/* Watches: one JSON event per line ({"type":"ADDED","object":{...}}), as the API server
 * streams them.
 *
 * kube_watch_stream() runs one stream from a resourceVersion and keeps *rv at the version of
 * the last event (bookmarks included). kube_watch_loop() runs streams one after the other from
 * the last version seen, as client-go's reflector does: at once after the server ends a stream,
 * after a backoff (800 ms doubling to 30 s, with jitter) after an error - a refused connection,
 * a 5xx, a malformed line, an event over the size cap - and it returns -KUBE_EGONE when the
 * version is too old (HTTP 410, or an ERROR event with code 410) so that the caller lists
 * again. Nothing a server sends can crash it: every line is parsed with a cap and checked. */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/kube/rest.h"

#define KUBE_WATCH_MAX_EVENT ((size_t)16 << 20) /* one event line */
#define KUBE_RV_MAX 128				/* length of a resourceVersion */

enum kube_event_type {
	KUBE_EVENT_ADDED,
	KUBE_EVENT_MODIFIED,
	KUBE_EVENT_DELETED,
	KUBE_EVENT_BOOKMARK, /* handed to on_event only with pass_bookmarks */
};

struct kube_watch_opts {
	const char *label_selector;
	const char *field_selector;
	long long timeout_seconds; /* server-side end of a stream; 0: 5 to 10 min at random */
	bool no_bookmarks;	   /* do not ask for allowWatchBookmarks */
	bool pass_bookmarks;
	size_t max_event;	 /* 0: KUBE_WATCH_MAX_EVENT */
	int64_t idle_timeout_ns; /* 0: none (the server's timeout ends a quiet stream) */
	/* Ends the stream in flight and the loop's backoff at once (-ECANCELED); NULL: the
	 * client's token (kube_client_cancel). */
	struct cancel *cancel;
	/* Takes ownership of obj; a result < 0 ends the stream with that result. */
	int (*on_event)(void *ud, enum kube_event_type type, cJSON *obj);
	void *ud;
};

struct kube_watch_stats {
	unsigned long streams;	 /* streams started */
	unsigned long events;	 /* events handed over (bookmarks included) */
	unsigned long errors;	 /* streams ended by an error */
	unsigned long malformed; /* of which malformed lines or oversized events */
	unsigned long gone;	 /* 410s */
};

/* 0 when the server ended the stream normally; -KUBE_EGONE; -EBADMSG for a malformed line or an
 * unknown event type; -EMSGSIZE for an event over the cap; an on_event error; or a transport
 * or Status error (st says which). *rv (malloc'd) is read and updated. */
int kube_watch_stream(struct kube_client *c, const struct kube_ref *ref,
		      const struct kube_watch_opts *o, char **rv, struct kube_status *st,
		      struct kube_watch_stats *stats);
/* Streams until o->cancel is cancelled (-ECANCELED), too old (-KUBE_EGONE), or on_event
 * fails. */
int kube_watch_loop(struct kube_client *c, const struct kube_ref *ref,
		    const struct kube_watch_opts *o, char **rv, struct kube_watch_stats *stats);

/* Decodes one line of a watch stream into its type and object (ownership to the caller).
 * -EBADMSG for anything malformed (st->message says what), the Status's error for an ERROR
 * event (-KUBE_EGONE for 410), never a crash: this is what the fuzzer drives. */
int kube_watch_decode(const char *line, size_t len, enum kube_event_type *ret_type, cJSON **ret_obj,
		      struct kube_status *st);
