/* Cancellation of the Kubernetes client: calls in flight and their waits (token bucket,
 * Retry-After) end with -ECANCELED as soon as their token is cancelled, against a peer that
 * holds every request or answers it with one canned reply. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/cancel.h"
#include "common/base/timeutil.h"
#include "common/kube/events.h"
#include "common/kube/informer.h"
#include "common/kube/leaderelection.h"
#include "common/kube/rest.h"
#include "common/kube/watch.h"
#include "tests/unit/harness.h"

#define PEER_MAX_CONNS 64

/* A peer on 127.0.0.1: answers each request with reply (then closes), or holds it open when
 * reply is NULL, until peer_stop. */
struct peer {
	int lfd, port;
	_Atomic(const char *) reply;
	atomic_int requests;
	struct cancel *stop;
	pthread_t th;
	int held[PEER_MAX_CONNS];
	int n_held;
};

/* Reads one request's head (the body, when any, is small and read with it). */
static void read_request(int fd)
{
	char buf[16384];
	size_t n = 0;

	while (n < sizeof(buf) - 1) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 2000) <= 0)
			return;
		ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (k <= 0)
			return;
		n += (size_t)k;
		buf[n] = 0;
		if (strstr(buf, "\r\n\r\n"))
			return;
	}
}

static void *peer_main(void *arg)
{
	struct peer *p = arg;

	for (;;) {
		struct pollfd fds[2] = {{.fd = p->lfd, .events = POLLIN},
					{.fd = cancel_fd(p->stop), .events = POLLIN}};
		if (poll(fds, 2, -1) < 0 || fds[1].revents)
			break;
		int fd = accept(p->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		read_request(fd);
		atomic_fetch_add(&p->requests, 1);
		const char *reply = atomic_load(&p->reply);
		if (!reply && p->n_held < PEER_MAX_CONNS) {
			p->held[p->n_held++] = fd;
			continue;
		}
		if (reply && write(fd, reply, strlen(reply)) < 0) {
			/* the client went away: nothing to do */
		}
		close(fd);
	}
	return NULL;
}

static struct peer *peer_start(const char *reply)
{
	struct peer *p = calloc(1, sizeof(*p));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);

	if (!p)
		return NULL;
	p->reply = reply;
	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(p->lfd, 16) < 0 || getsockname(p->lfd, (struct sockaddr *)&sa, &len) < 0 ||
	    cancel_new(NULL, &p->stop) < 0 || pthread_create(&p->th, NULL, peer_main, p) != 0) {
		if (p->lfd >= 0)
			close(p->lfd);
		cancel_free(p->stop);
		free(p);
		return NULL;
	}
	p->port = ntohs(sa.sin_port);
	return p;
}

static void peer_stop(struct peer *p)
{
	if (!p)
		return;
	cancel_cancel(p->stop);
	pthread_join(p->th, NULL);
	for (int i = 0; i < p->n_held; i++)
		close(p->held[i]);
	close(p->lfd);
	cancel_free(p->stop);
	free(p);
}

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

struct later {
	struct cancel *c;
	int ms;
	pthread_t th;
};

static void *cancel_later_main(void *arg)
{
	struct later *l = arg;
	sleep_ns(l->ms * NSEC_PER_MSEC);
	cancel_cancel(l->c);
	return NULL;
}

/* Cancels c after ms on another thread; join with later_join. */
static void cancel_later(struct later *l, struct cancel *c, int ms)
{
	*l = (struct later){.c = c, .ms = ms};
	pthread_create(&l->th, NULL, cancel_later_main, l);
}

static void later_join(struct later *l)
{
	pthread_join(l->th, NULL);
}

static int64_t ms_since(int64_t t0)
{
	return (now_mono_ns() - t0) / NSEC_PER_MSEC;
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
	int64_t ms = ms_since(t0);
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
	int64_t ms = ms_since(t0);
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
	int64_t ms = ms_since(t0);
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
	ms = ms_since(t0);
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
	int64_t ms = ms_since(t0);
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
	ms = ms_since(t0);
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
	int64_t ms = ms_since(t0);
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
	while (!kube_le_done(le) && ms_since(t0) < 3000)
		sleep_ns(NSEC_PER_MSEC);
	ms = ms_since(t0);
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
	while (!kube_le_is_leader(le) && ms_since(t0) < 3000)
		sleep_ns(NSEC_PER_MSEC);
	bool led = kube_le_is_leader(le);
	/* from now on the server holds every request: renewals time out */
	atomic_store(&p->reply, NULL);
	t0 = now_mono_ns();
	while (!kube_le_done(le) && ms_since(t0) < 5000)
		sleep_ns(10 * NSEC_PER_MSEC);
	int64_t ms = ms_since(t0);
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
	int64_t ms = ms_since(t0);
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
	ms = ms_since(t0);
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
