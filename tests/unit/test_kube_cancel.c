/* Cancellation of the Kubernetes client: calls in flight and their waits (token bucket,
 * Retry-After) end with -ECANCELED as soon as their token is cancelled, against a peer that
 * holds every request or answers it with one canned reply. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/base/cancel.h"
#include "common/base/timeutil.h"
#include "common/kube/events.h"
#include "common/kube/informer.h"
#include "common/kube/leaderelection.h"
#include "common/kube/rest.h"
#include "common/kube/watch.h"
#include "tests/unit/harness.h"
#include "tests/unit/peer.h"

static struct kube_client *client_for(struct peer *p, struct cancel *ct)
{
	char server[64];
	struct kube_config cfg = {.server = server};
	struct kube_client *kc = NULL;

	snprintf(server, sizeof(server), "http://127.0.0.1:%d", p->port);
	if (kube_client_new(&cfg, &(struct kube_client_opts){.qps = -1, .cancel = ct}, &kc) < 0)
		return NULL;
	return kc;
}

TEST(kube_cancel_call_in_flight)
{
	struct peer *p = peer_start(NULL); /* never answers */
	struct cancel *ct = NULL;
	struct kube_status st;
	struct later l;
	cJSON *obj = NULL;

	ASSERT_TRUE(p != NULL);
	ASSERT_OK(cancel_new(NULL, &ct));
	struct kube_client *kc = client_for(p, ct);
	ASSERT_TRUE(kc != NULL);
	ASSERT_TRUE(kube_client_cancel(kc) == ct);
	cancel_later(&l, ct, 100);
	int64_t t0 = now_mono_ns();
	int r = kube_get(kc, KUBE_REF(&kube_nodes, NULL, "n1"), &obj, &st);
	int64_t ms = elapsed_ms(t0);
	later_join(&l);
	kube_client_free(kc);
	peer_stop(p);
	cancel_free(ct);
	ASSERT_ERR(r, ECANCELED);
	ASSERT_GE(ms, 90);
	ASSERT_LT(ms, 1000); /* the client's timeout is 60 s */
	ASSERT_TRUE(obj == NULL);
}

TEST(kube_cancel_retry_after_wait)
{
	struct peer *p = peer_start("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\n"
				    "Content-Type: application/json\r\nContent-Length: 2\r\n"
				    "Connection: close\r\n\r\n{}");
	struct cancel *call = NULL;
	struct kube_status st;
	struct later l;

	ASSERT_TRUE(p != NULL);
	ASSERT_OK(cancel_new(NULL, &call));
	struct kube_client *kc = client_for(p, NULL); /* the process's token: not cancelled */
	ASSERT_TRUE(kc != NULL);
	ASSERT_TRUE(kube_client_cancel(kc) == cancel_root());
	cancel_later(&l, call, 150);
	int64_t t0 = now_mono_ns();
	int r = kube_call_do(kc, &(struct kube_call){.method = "GET", .path = "/api/v1/nodes",
						      .cancel = call},
			     NULL, &st);
	int64_t ms = elapsed_ms(t0);
	later_join(&l);
	int requests = atomic_load(&p->requests);
	kube_client_free(kc);
	peer_stop(p);
	cancel_free(call);
	ASSERT_ERR(r, ECANCELED);
	ASSERT_LT(ms, 1500); /* not the 5 s the server asked for */
	ASSERT_EQ(requests, 1);
	ASSERT_STREQ(st.message, "canceled");
}

TEST(kube_cancel_list_token_sends_nothing)
{
	struct peer *p = peer_start("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				    "Content-Length: 12\r\nConnection: close\r\n\r\n{\"items\":[]}");
	struct cancel *ct = NULL;
	cJSON *list = NULL;

	ASSERT_TRUE(p != NULL);
	ASSERT_OK(cancel_new(NULL, &ct));
	struct kube_client *kc = client_for(p, NULL);
	ASSERT_TRUE(kc != NULL);
	/* the list's own token wins over the client's */
	ASSERT_OK(kube_list(kc, KUBE_REF(&kube_nodes, NULL, NULL),
			    &(struct kube_list_opts){.cancel = ct}, &list, NULL));
	cJSON_Delete(list);
	list = NULL;
	cancel_cancel(ct);
	int r = kube_list(kc, KUBE_REF(&kube_nodes, NULL, NULL),
			  &(struct kube_list_opts){.cancel = ct}, &list, NULL);
	int requests = atomic_load(&p->requests);
	kube_client_free(kc);
	peer_stop(p);
	cancel_free(ct);
	ASSERT_ERR(r, ECANCELED);
	ASSERT_EQ(requests, 1);
}

#define REPLY_500                                                                                  \
	"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"                 \
	"Content-Length: 2\r\nConnection: close\r\n\r\n{}"

TEST(kube_cancel_watch_stream_and_backoff)
{
	struct peer *held = peer_start(NULL), *failing = peer_start(REPLY_500);
	struct cancel *ct = NULL;
	struct later l;
	char *rv = NULL;

	ASSERT_TRUE(held && failing);
	/* a stream in flight */
	ASSERT_OK(cancel_new(NULL, &ct));
	struct kube_client *kc = client_for(held, NULL);
	ASSERT_TRUE(kc != NULL);
	struct kube_watch_opts wo = {.cancel = ct};
	cancel_later(&l, ct, 100);
	int64_t t0 = now_mono_ns();
	int r = kube_watch_loop(kc, KUBE_REF(&kube_nodes, NULL, NULL), &wo, &rv, NULL);
	int64_t ms = elapsed_ms(t0);
	later_join(&l);
	kube_client_free(kc);
	ASSERT_ERR(r, ECANCELED);
	ASSERT_LT(ms, 1000);

	/* the reconnect backoff after a failed stream (800 ms at least) */
	cancel_reset(ct);
	kc = client_for(failing, NULL);
	ASSERT_TRUE(kc != NULL);
	cancel_later(&l, ct, 150);
	t0 = now_mono_ns();
	r = kube_watch_loop(kc, KUBE_REF(&kube_nodes, NULL, NULL), &wo, &rv, NULL);
	ms = elapsed_ms(t0);
	later_join(&l);
	int requests = atomic_load(&failing->requests);
	kube_client_free(kc);
	peer_stop(held);
	peer_stop(failing);
	cancel_free(ct);
	free(rv);
	ASSERT_ERR(r, ECANCELED);
	ASSERT_LT(ms, 700);
	ASSERT_EQ(requests, 1);
}

TEST(kube_cancel_informer)
{
	struct peer *failing = peer_start(REPLY_500), *held = peer_start(NULL);
	struct kube_informer *inf = NULL;
	struct cancel *parent = NULL;
	struct later l;

	ASSERT_TRUE(held && failing);
	/* the parent's cancellation ends the list backoff and the wait for the sync */
	ASSERT_OK(cancel_new(NULL, &parent));
	struct kube_client *kc = client_for(failing, NULL);
	ASSERT_TRUE(kc != NULL);
	ASSERT_OK(kube_informer_new(kc, &(struct kube_informer_opts){.res = &kube_nodes,
								     .cancel = parent},
				    &inf));
	ASSERT_OK(kube_informer_start(inf));
	cancel_later(&l, parent, 150);
	int64_t t0 = now_mono_ns();
	bool synced = kube_informer_wait_synced(inf, 10 * NSEC_PER_SEC);
	int64_t ms = elapsed_ms(t0);
	later_join(&l);
	kube_informer_free(inf);
	kube_client_free(kc);
	ASSERT_FALSE(synced);
	ASSERT_LT(ms, 1000);

	/* kube_informer_stop ends a list in flight */
	kc = client_for(held, NULL);
	ASSERT_TRUE(kc != NULL);
	ASSERT_OK(kube_informer_new(kc, &(struct kube_informer_opts){.res = &kube_nodes}, &inf));
	ASSERT_OK(kube_informer_start(inf));
	ASSERT_FALSE(kube_informer_wait_synced(inf, 100 * NSEC_PER_MSEC));
	t0 = now_mono_ns();
	kube_informer_stop(inf);
	ms = elapsed_ms(t0);
	/* a stopped informer's wait returns at once */
	ASSERT_FALSE(kube_informer_wait_synced(inf, -1));
	kube_informer_free(inf);
	kube_client_free(kc);
	peer_stop(held);
	peer_stop(failing);
	cancel_free(parent);
	ASSERT_LT(ms, 500);
}

TEST(kube_cancel_leader_election)
{
	struct peer *held = peer_start(NULL), *failing = peer_start(REPLY_500);
	struct kube_le_config cfg = {.lock_namespace = "kube-system",
				     .lock_name = "test",
				     .identity = "me",
				     .lease_duration_ns = 15 * NSEC_PER_SEC,
				     .renew_deadline_ns = 10 * NSEC_PER_SEC,
				     .retry_period_ns = 2 * NSEC_PER_SEC};
	struct cancel *parent = NULL;
	struct kube_le *le = NULL;

	ASSERT_TRUE(held && failing);
	/* kube_le_stop ends the GET of the Lease in flight (its timeout is the renew deadline) */
	struct kube_client *kc = client_for(held, NULL);
	ASSERT_TRUE(kc != NULL);
	ASSERT_OK(kube_le_new(kc, &cfg, &le));
	ASSERT_OK(kube_le_start(le));
	while (atomic_load(&held->requests) == 0)
		sleep_ns(NSEC_PER_MSEC);
	int64_t t0 = now_mono_ns();
	kube_le_stop(le);
	int64_t ms = elapsed_ms(t0);
	ASSERT_TRUE(kube_le_done(le));
	ASSERT_FALSE(kube_le_lost(le));
	kube_le_free(le);
	kube_client_free(kc);
	ASSERT_LT(ms, 500);

	/* the parent's cancellation ends the retry period's wait */
	ASSERT_OK(cancel_new(NULL, &parent));
	cfg.cancel = parent;
	kc = client_for(failing, NULL);
	ASSERT_TRUE(kc != NULL);
	ASSERT_OK(kube_le_new(kc, &cfg, &le));
	ASSERT_OK(kube_le_start(le));
	while (atomic_load(&failing->requests) == 0)
		sleep_ns(NSEC_PER_MSEC);
	t0 = now_mono_ns();
	cancel_cancel(parent);
	while (!kube_le_done(le) && elapsed_ms(t0) < 3000)
		sleep_ns(NSEC_PER_MSEC);
	ms = elapsed_ms(t0);
	kube_le_stop(le);
	kube_le_free(le);
	kube_client_free(kc);
	peer_stop(held);
	peer_stop(failing);
	cancel_free(parent);
	ASSERT_LT(ms, 500); /* not the 2 to 4.4 s retry period */
}

TEST(kube_cancel_leader_lost_at_the_renew_deadline)
{
	static const char lease[] =
	    "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":"
	    "{\"name\":\"test\",\"namespace\":\"kube-system\",\"resourceVersion\":\"1\"},"
	    "\"spec\":{\"holderIdentity\":\"me\",\"leaseDurationSeconds\":3}}";
	char reply[1024];
	snprintf(reply, sizeof(reply),
		 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n%s",
		 strlen(lease), lease);
	struct peer *p = peer_start(reply);
	struct kube_le_config cfg = {.lock_namespace = "kube-system",
				     .lock_name = "test",
				     .identity = "me",
				     .lease_duration_ns = 3 * NSEC_PER_SEC,
				     .renew_deadline_ns = 2 * NSEC_PER_SEC,
				     .retry_period_ns = 500 * NSEC_PER_MSEC};
	struct kube_le *le = NULL;

	ASSERT_TRUE(p != NULL);
	struct kube_client *kc = client_for(p, NULL);
	ASSERT_TRUE(kc != NULL);
	ASSERT_OK(kube_le_new(kc, &cfg, &le));
	ASSERT_OK(kube_le_start(le));
	int64_t t0 = now_mono_ns();
	while (!kube_le_is_leader(le) && elapsed_ms(t0) < 3000)
		sleep_ns(NSEC_PER_MSEC);
	bool led = kube_le_is_leader(le);
	/* from now on the server holds every request: renewals time out */
	atomic_store(&p->reply, NULL);
	t0 = now_mono_ns();
	while (!kube_le_done(le) && elapsed_ms(t0) < 5000)
		sleep_ns(10 * NSEC_PER_MSEC);
	int64_t ms = elapsed_ms(t0);
	bool lost = kube_le_lost(le), leader = kube_le_is_leader(le);
	kube_le_stop(le);
	kube_le_free(le);
	kube_client_free(kc);
	peer_stop(p);
	ASSERT_TRUE(led);
	ASSERT_TRUE(lost);
	ASSERT_FALSE(leader);
	ASSERT_LT(ms, 2600); /* the renew deadline (2 s) after the last renewal */
}

TEST(kube_cancel_event_recorder)
{
	struct peer *held = peer_start(NULL), *failing = peer_start(REPLY_500);
	struct kube_event_ref ref = {.kind = "Node", .api_version = "v1", .name = "n1"};
	struct kube_recorder_stats st;
	struct kube_recorder *rec = NULL;
	struct cancel *parent = NULL;

	ASSERT_TRUE(held && failing);
	/* the parent's cancellation ends a write in flight; what is queued is dropped */
	ASSERT_OK(cancel_new(NULL, &parent));
	struct kube_client *kc = client_for(held, NULL);
	ASSERT_TRUE(kc != NULL);
	ASSERT_OK(kube_recorder_new(kc, &(struct kube_recorder_opts){.component = "test",
								    .cancel = parent},
				    &rec));
	kube_eventf(rec, &ref, KUBE_EVENT_NORMAL, "First", "one");
	kube_eventf(rec, &ref, KUBE_EVENT_NORMAL, "Second", "two");
	while (atomic_load(&held->requests) == 0)
		sleep_ns(NSEC_PER_MSEC);
	int64_t t0 = now_mono_ns();
	cancel_cancel(parent);
	int r = kube_recorder_flush(rec, 5 * NSEC_PER_SEC);
	int64_t ms = elapsed_ms(t0);
	kube_eventf(rec, &ref, KUBE_EVENT_NORMAL, "Third", "three"); /* dropped at once */
	kube_recorder_get_stats(rec, &st);
	kube_recorder_free(rec);
	kube_client_free(kc);
	ASSERT_OK(r);
	ASSERT_LT(ms, 1000);
	ASSERT_EQ(st.recorded, 3);
	ASSERT_EQ(st.failed, 1);
	ASSERT_EQ(st.dropped_queue, 2);
	ASSERT_EQ(atomic_load(&held->requests), 1);

	/* and a retry's wait (10 s) */
	cancel_reset(parent);
	kc = client_for(failing, NULL);
	ASSERT_TRUE(kc != NULL);
	ASSERT_OK(kube_recorder_new(kc, &(struct kube_recorder_opts){.component = "test",
								    .cancel = parent},
				    &rec));
	kube_eventf(rec, &ref, KUBE_EVENT_WARNING, "Failing", "500");
	while (atomic_load(&failing->requests) == 0)
		sleep_ns(NSEC_PER_MSEC);
	ASSERT_ERR(kube_recorder_flush(rec, 100 * NSEC_PER_MSEC), ETIMEDOUT); /* retrying */
	t0 = now_mono_ns();
	cancel_cancel(parent);
	r = kube_recorder_flush(rec, 5 * NSEC_PER_SEC);
	ms = elapsed_ms(t0);
	kube_recorder_get_stats(rec, &st);
	kube_recorder_free(rec);
	kube_client_free(kc);
	peer_stop(held);
	peer_stop(failing);
	cancel_free(parent);
	ASSERT_OK(r);
	ASSERT_LT(ms, 1000);
	ASSERT_EQ(st.failed, 1);
}
