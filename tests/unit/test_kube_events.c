/* Event correlation: repeats, aggregation of similar events, spam filter, the 10-minute window,
 * the bounded cache, entries dropped when their object is deleted or their window passed. */
#include <stdlib.h>

#include "common/base/timeutil.h"
#include "common/kube/events.h"
#include "common/kube/rest.h"
#include "tests/unit/harness.h"

static struct kube_ev *ev(const char *obj, const char *reason, const char *msg)
{
	struct kube_ev *e = calloc(1, sizeof(*e));
	e->kind = strdup("Node");
	e->name = strdup(obj);
	e->uid = strdup(obj);
	e->api_version = strdup("v1");
	e->type = strdup("Warning");
	e->reason = strdup(reason);
	e->message = strdup(msg);
	e->component = strdup("cloud-controller-manager");
	return e;
}

static enum kube_ev_action corr(struct kube_correlator *c, const char *obj, const char *reason,
				const char *msg, int64_t now, long *count, char **name,
				char **message)
{
	struct kube_ev *e = ev(obj, reason, msg);
	enum kube_ev_action a = kube_correlate(c, e, now);
	if (count)
		*count = e->count;
	if (name)
		*name = e->event_name ? strdup(e->event_name) : NULL;
	if (message)
		*message = strdup(e->message);
	kube_ev_free(e);
	return a;
}

#define MIN (60 * NSEC_PER_SEC)

TEST(kube_events_repeats_are_counted_within_ten_minutes)
{
	struct kube_correlator *c;
	int64_t t = 1700000000 * NSEC_PER_SEC;
	char *n1 = NULL, *n2 = NULL, *n3 = NULL;
	long count;

	ASSERT_OK(kube_correlator_new(0, &c));
	ASSERT_EQ(corr(c, "n1", "R", "m", t, &count, &n1, NULL), KUBE_EV_CREATE);
	ASSERT_EQ(count, 1);
	ASSERT_CONTAINS(n1, "n1.");
	ASSERT_EQ(corr(c, "n1", "R", "m", t + MIN, &count, &n2, NULL), KUBE_EV_PATCH);
	ASSERT_EQ(count, 2);
	ASSERT_STREQ(n2, n1);
	/* another object, reason or message is another Event */
	ASSERT_EQ(corr(c, "n2", "R", "m", t + MIN, &count, NULL, NULL), KUBE_EV_CREATE);
	ASSERT_EQ(corr(c, "n1", "R2", "m", t + MIN, &count, NULL, NULL), KUBE_EV_CREATE);
	ASSERT_EQ(corr(c, "n1", "R", "other", t + MIN, &count, NULL, NULL), KUBE_EV_CREATE);
	/* more than 10 minutes after the last one: a new Event */
	ASSERT_EQ(corr(c, "n1", "R", "m", t + 12 * MIN, &count, &n3, NULL), KUBE_EV_CREATE);
	ASSERT_EQ(count, 1);
	ASSERT_TRUE(strcmp(n3, n1) != 0);
	free(n1);
	free(n2);
	free(n3);
	kube_correlator_free(c);
}

TEST(kube_events_similar_events_are_combined)
{
	struct kube_correlator *c;
	int64_t t = 1700000000 * NSEC_PER_SEC;
	char msg[32], *m = NULL, *name1 = NULL, *name2 = NULL;
	long count;

	ASSERT_OK(kube_correlator_new(0, &c));
	for (int i = 0; i < 9; i++) {
		snprintf(msg, sizeof(msg), "message %d", i);
		ASSERT_EQ(corr(c, "n1", "R", msg, t + i, &count, NULL, NULL), KUBE_EV_CREATE);
	}
	/* the 10th distinct message within 10 minutes is combined */
	ASSERT_EQ(corr(c, "n1", "R", "message 9", t + 10, &count, &name1, &m), KUBE_EV_CREATE);
	ASSERT_STREQ(m, "(combined from similar events): message 9");
	free(m);
	/* and further similar ones count on that combined Event */
	ASSERT_EQ(corr(c, "n1", "R", "message 10", t + 11, &count, &name2, &m), KUBE_EV_PATCH);
	ASSERT_EQ(count, 2);
	ASSERT_STREQ(name1, name2);
	ASSERT_STREQ(m, "(combined from similar events): message 10");
	free(m);
	free(name1);
	free(name2);
	kube_correlator_free(c);
}

TEST(kube_events_spam_filter)
{
	struct kube_correlator *c;
	int64_t t = 1700000000 * NSEC_PER_SEC;
	char msg[32];
	int dropped = 0;

	ASSERT_OK(kube_correlator_new(0, &c));
	/* 25 per object, then one more every 5 minutes */
	for (int i = 0; i < 30; i++) {
		snprintf(msg, sizeof(msg), "m%d", i % 3);
		if (corr(c, "n1", "R", msg, t, NULL, NULL, NULL) == KUBE_EV_DROP)
			dropped++;
	}
	ASSERT_EQ(dropped, 5);
	ASSERT_EQ(corr(c, "n2", "R", "x", t, NULL, NULL, NULL), KUBE_EV_CREATE);
	ASSERT_EQ(corr(c, "n1", "R", "m0", t + 4 * MIN, NULL, NULL, NULL), KUBE_EV_DROP);
	ASSERT_NE(corr(c, "n1", "R", "m0", t + 6 * MIN, NULL, NULL, NULL), KUBE_EV_DROP);
	kube_correlator_free(c);
}

TEST(kube_events_cache_is_bounded_and_forget)
{
	struct kube_correlator *c;
	int64_t t = 1700000000 * NSEC_PER_SEC;
	char obj[32];

	ASSERT_OK(kube_correlator_new(8, &c));
	ASSERT_EQ(corr(c, "first", "R", "m", t, NULL, NULL, NULL), KUBE_EV_CREATE);
	ASSERT_EQ(corr(c, "first", "R", "m", t, NULL, NULL, NULL), KUBE_EV_PATCH);
	for (int i = 0; i < 20; i++) {
		snprintf(obj, sizeof(obj), "o%d", i);
		corr(c, obj, "R", "m", t, NULL, NULL, NULL);
	}
	/* evicted from the cache: counted anew */
	ASSERT_EQ(corr(c, "first", "R", "m", t, NULL, NULL, NULL), KUBE_EV_CREATE);

	struct kube_ev *e = ev("first", "R", "m");
	ASSERT_EQ(kube_correlate(c, e, t), KUBE_EV_PATCH);
	kube_correlator_forget(c, e);
	kube_ev_free(e);
	ASSERT_EQ(corr(c, "first", "R", "m", t, NULL, NULL, NULL), KUBE_EV_CREATE);
	kube_correlator_free(c);
}

static size_t cached(struct kube_correlator *c, size_t *objects)
{
	struct kube_correlator_stats st;

	kube_correlator_get_stats(c, &st);
	if (objects)
		*objects = st.objects;
	return st.spam + st.agg + st.log;
}

/* A Node's events in one create/delete cycle: initialized, a warning repeated, ten different
 * messages with one reason (aggregated), then the informer sees it deleted. */
static void node_cycle(struct kube_correlator *c, const char *name, const char *uid, int64_t t)
{
	struct kube_ev *e = ev(name, "Synced", "Node synced successfully");
	char msg[32];

	free(e->uid);
	e->uid = strdup(uid);
	kube_correlate(c, e, t);
	kube_ev_free(e);
	for (int i = 0; i < 12; i++) {
		snprintf(msg, sizeof(msg), "m%d", i % 11);
		e = ev(name, i < 2 ? "FailedToInitialize" : "Similar", i < 2 ? "x" : msg);
		free(e->uid);
		e->uid = strdup(uid);
		kube_correlate(c, e, t + i);
		kube_ev_free(e);
	}
	e = ev(name, "", "");
	free(e->uid);
	e->uid = strdup(uid);
	kube_correlator_forget_object(c, e);
	kube_ev_free(e);
}

TEST(kube_events_deleted_objects_leave_the_caches)
{
	struct kube_correlator *c;
	int64_t t = 1700000000 * NSEC_PER_SEC;
	char name[32], uid[32];
	size_t objects;

	ASSERT_OK(kube_correlator_new(0, &c));
	/* the same two names over and over (a new uid each time), and fresh names */
	for (int i = 0; i < 600; i++) {
		snprintf(name, sizeof(name), i % 3 == 2 ? "fresh-%d" : "node-%d",
			 i % 3 == 2 ? i : i % 3);
		snprintf(uid, sizeof(uid), "uid-%d", i);
		node_cycle(c, name, uid, t + i * NSEC_PER_SEC);
		ASSERT_EQ(cached(c, &objects), 0);
		ASSERT_EQ(objects, 0);
	}
	kube_correlator_free(c);
}

TEST(kube_events_forgetting_one_object_keeps_the_others)
{
	struct kube_correlator *c;
	int64_t t = 1700000000 * NSEC_PER_SEC;
	size_t objects;

	ASSERT_OK(kube_correlator_new(0, &c));
	ASSERT_EQ(corr(c, "n1", "R", "m", t, NULL, NULL, NULL), KUBE_EV_CREATE);
	ASSERT_EQ(corr(c, "n2", "R", "m", t, NULL, NULL, NULL), KUBE_EV_CREATE);
	ASSERT_EQ(corr(c, "n2", "R2", "m", t, NULL, NULL, NULL), KUBE_EV_CREATE);
	/* spam: one per object; aggregation and repeats: one per object and reason */
	ASSERT_EQ(cached(c, &objects), 8);
	ASSERT_EQ(objects, 2);
	struct kube_ev *e = ev("n2", "", "");
	kube_correlator_forget_object(c, e);
	kube_correlator_forget_object(c, e); /* twice: nothing left to drop */
	kube_ev_free(e);
	ASSERT_EQ(cached(c, &objects), 3);
	ASSERT_EQ(objects, 1);
	/* n1 is still counted; n2 starts again */
	ASSERT_EQ(corr(c, "n1", "R", "m", t + 1, NULL, NULL, NULL), KUBE_EV_PATCH);
	ASSERT_EQ(corr(c, "n2", "R", "m", t + 1, NULL, NULL, NULL), KUBE_EV_CREATE);
	kube_correlator_free(c);
}

TEST(kube_events_entries_go_when_their_window_passed)
{
	struct kube_correlator *c;
	int64_t t = 1700000000 * NSEC_PER_SEC;
	struct kube_correlator_stats st;
	char obj[32];

	ASSERT_OK(kube_correlator_new(0, &c));
	for (int i = 0; i < 100; i++) {
		snprintf(obj, sizeof(obj), "o%d", i);
		ASSERT_EQ(corr(c, obj, "R", "m", t, NULL, NULL, NULL), KUBE_EV_CREATE);
	}
	ASSERT_EQ(cached(c, NULL), 300);
	/* 11 minutes on: repeats and aggregation look 10 minutes back only */
	ASSERT_EQ(corr(c, "o0", "R", "m", t + 11 * MIN, NULL, NULL, NULL), KUBE_EV_CREATE);
	kube_correlator_get_stats(c, &st);
	ASSERT_EQ(st.spam, 100);
	ASSERT_EQ(st.agg, 1);
	ASSERT_EQ(st.log, 1);
	ASSERT_EQ(st.objects, 100);
	/* a spam bucket unused for 125 minutes is full again: as good as none (o0's was used 115
	 * minutes ago) */
	ASSERT_EQ(corr(c, "o1", "R", "m", t + 126 * MIN, NULL, NULL, NULL), KUBE_EV_CREATE);
	kube_correlator_get_stats(c, &st);
	ASSERT_EQ(st.spam, 2);
	ASSERT_EQ(st.agg, 1);
	ASSERT_EQ(st.log, 1);
	ASSERT_EQ(st.objects, 2);
	kube_correlator_free(c);
}

TEST(kube_events_ref_from_object)
{
	cJSON *o = cJSON_Parse("{\"metadata\":{\"name\":\"l\",\"namespace\":\"kube-system\","
			       "\"uid\":\"u1\",\"resourceVersion\":\"7\"}}");
	struct kube_event_ref ref = {0};

	kube_event_ref_from(o, &kube_leases, &ref);
	ASSERT_STREQ(ref.kind, "Lease");
	ASSERT_STREQ(ref.api_version, "coordination.k8s.io/v1");
	ASSERT_STREQ(ref.ns, "kube-system");
	ASSERT_STREQ(ref.uid, "u1");
	kube_event_ref_from(o, &kube_pods, &ref);
	ASSERT_STREQ(ref.api_version, "v1");
	cJSON_Delete(o);
}
