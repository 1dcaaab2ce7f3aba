/* Leader election against an in-process Lease store (GET, POST, PUT of one Lease). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/base/json.h"
#include "common/base/timeutil.h"
#include "common/http/server.h"
#include "common/kube/leaderelection.h"
#include "common/kube/rest.h"
#include "tests/unit/harness.h"
#include "tests/unit/peer.h"

struct leases {
	pthread_mutex_t lock;
	cJSON *lease; /* NULL until created */
	int version, puts;
	atomic_int stopped;
};

/* GET: the Lease or 404; POST and PUT: store the body under a new resourceVersion. */
static int lease_handler(void *ud, const struct http_server_request *req,
			 struct http_server_reply *rep)
{
	struct leases *ls = ud;
	bool get = strcmp(req->method, "GET") == 0;
	char rv[16], *text = NULL;
	cJSON *in = NULL;
	int r;

	rep->content_type = "application/json";
	pthread_mutex_lock(&ls->lock);
	if (!get && json_parse(req->body, req->body_len, &in, NULL) == 0) {
		snprintf(rv, sizeof(rv), "%d", ++ls->version);
		json_set_str(in, "metadata.resourceVersion", rv);
		cJSON_Delete(ls->lease);
		ls->lease = in;
		ls->puts += strcmp(req->method, "PUT") == 0;
	}
	if (!get && !in)
		r = http_reply_text(rep, 400, "{\"kind\":\"Status\",\"code\":400}");
	else if (!ls->lease)
		r = http_reply_text(rep, 404,
				    "{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\"}");
	else
		r = (text = json_print(ls->lease)) ? http_reply_text(rep, 200, text) : -ENOMEM;
	pthread_mutex_unlock(&ls->lock);
	free(text);
	return r;
}

static char *lease_field(struct leases *ls, const char *path)
{
	pthread_mutex_lock(&ls->lock);
	const char *v = json_str(ls->lease, path);
	char *s = strdup(v ? v : "");
	pthread_mutex_unlock(&ls->lock);
	return s;
}

static void stopped_leading(void *ud, bool lost)
{
	atomic_fetch_add(&((struct leases *)ud)->stopped, lost ? 100 : 1);
}

/* A leader whose renewals succeed keeps the Lease past several renew deadlines: still leading,
 * renewTime advancing, on_stopped_leading not called until the stop, which releases it. */
TEST(kube_leader_keeps_the_lease_while_renewals_succeed)
{
	struct leases ls = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct http_server *srv = NULL;
	struct kube_client *kc = NULL;
	struct kube_le *le = NULL;
	char server[64];

	ASSERT_OK(http_server_new(&(struct http_server_opts){.bind = "127.0.0.1:0"}, &srv));
	ASSERT_OK(http_server_handle(srv,
				     "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
				     true, lease_handler, &ls));
	ASSERT_OK(http_server_start(srv));
	snprintf(server, sizeof(server), "http://127.0.0.1:%d", http_server_port(srv));
	ASSERT_OK(kube_client_new(&(struct kube_config){.server = server},
				  &(struct kube_client_opts){.qps = -1}, &kc));
	struct kube_le_config cfg = {.lock_namespace = "kube-system",
				     .lock_name = "test",
				     .identity = "me",
				     .lease_duration_ns = NSEC_PER_SEC,
				     .renew_deadline_ns = 600 * NSEC_PER_MSEC,
				     .retry_period_ns = 150 * NSEC_PER_MSEC,
				     .on_stopped_leading = stopped_leading,
				     .ud = &ls};
	ASSERT_OK(kube_le_new(kc, &cfg, &le));
	ASSERT_OK(kube_le_start(le));
	int64_t t0 = now_mono_ns();
	while (!kube_le_is_leader(le) && elapsed_ms(t0) < 3000)
		sleep_ns(NSEC_PER_MSEC);
	bool led = kube_le_is_leader(le);
	char *renew0 = lease_field(&ls, "spec.renewTime");
	/* 2 s: more than 3 renew deadlines */
	t0 = now_mono_ns();
	while (kube_le_is_leader(le) && elapsed_ms(t0) < 2000)
		sleep_ns(10 * NSEC_PER_MSEC);
	int64_t led_ms = elapsed_ms(t0);
	int stopped = atomic_load(&ls.stopped), puts = ls.puts;
	char *holder = lease_field(&ls, "spec.holderIdentity");
	char *renew1 = lease_field(&ls, "spec.renewTime");
	kube_le_stop(le);
	char *released = lease_field(&ls, "spec.holderIdentity");
	int stopped_after = atomic_load(&ls.stopped);
	kube_le_free(le);
	kube_client_free(kc);
	http_server_free(srv);
	cJSON_Delete(ls.lease);
	bool advanced = strcmp(renew1, renew0) > 0;
	free(renew0);
	free(renew1);
	ASSERT_TRUE(led);
	ASSERT_GE(led_ms, 2000);
	ASSERT_EQ(stopped, 0);
	ASSERT_STREQ(holder, "me");
	free(holder);
	ASSERT_TRUE(advanced);
	ASSERT_GE(puts, 5);
	ASSERT_EQ(stopped_after, 1); /* a graceful stop, not a loss */
	ASSERT_STREQ(released, "");
	free(released);
}
