/* Informers against a canned peer: the list's reply, then a watch stream. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/base/json.h"
#include "common/base/timeutil.h"
#include "common/kube/informer.h"
#include "common/kube/rest.h"
#include "tests/unit/harness.h"
#include "tests/unit/peer.h"

#define HEAD "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
#define LIST_BODY                                                                                  \
	"{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"1\"},"   \
	"\"items\":[{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"1\"}}]}"

struct seen {
	struct peer *p;
	atomic_int adds, deletes;
	char deleted_rv[16];
};

/* The list was read whole before its items are stored: from now on, watches get the stream. */
static void on_add(void *ud, const cJSON *obj)
{
	struct seen *s = ud;
	atomic_store(&s->p->reply,
		     HEAD "\r\n{\"type\":\"DELETED\",\"object\":{\"kind\":\"Node\","
			  "\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"2\"}}}\n");
	atomic_fetch_add(&s->adds, 1);
}

static void on_delete(void *ud, const cJSON *obj)
{
	struct seen *s = ud;
	const char *rv = json_str(obj, "metadata.resourceVersion");
	snprintf(s->deleted_rv, sizeof(s->deleted_rv), "%s", rv ? rv : "");
	atomic_store(&s->p->reply, NULL); /* hold the next watch */
	atomic_fetch_add(&s->deletes, 1);
}

/* A DELETED event on the open watch removes the object and calls on_delete with the event's
 * final state. */
TEST(kube_informer_watch_delete)
{
	char reply[512], server[64];
	struct seen s = {0};
	struct kube_informer *inf = NULL;
	struct kube_client *kc = NULL;

	snprintf(reply, sizeof(reply), HEAD "Content-Length: %zu\r\n\r\n%s", strlen(LIST_BODY),
		 LIST_BODY);
	ASSERT_NOT_NULL(s.p = peer_start(reply));
	snprintf(server, sizeof(server), "http://127.0.0.1:%d", s.p->port);
	ASSERT_OK(kube_client_new(&(struct kube_config){.server = server},
				  &(struct kube_client_opts){.qps = -1}, &kc));
	struct kube_informer_opts o = {
	    .res = &kube_nodes,
	    .handlers = {.on_add = on_add, .on_delete = on_delete, .ud = &s},
	};
	ASSERT_OK(kube_informer_new(kc, &o, &inf));
	ASSERT_OK(kube_informer_start(inf));
	bool synced = kube_informer_wait_synced(inf, 5 * NSEC_PER_SEC);
	int64_t t0 = now_mono_ns();
	while (atomic_load(&s.deletes) == 0 && elapsed_ms(t0) < 3000)
		sleep_ns(NSEC_PER_MSEC);
	size_t left = kube_store_len(kube_informer_store(inf));
	int adds = atomic_load(&s.adds), deletes = atomic_load(&s.deletes);
	kube_informer_free(inf);
	kube_client_free(kc);
	peer_stop(s.p);
	ASSERT_TRUE(synced);
	ASSERT_EQ(adds, 1);
	ASSERT_EQ(deletes, 1);
	ASSERT_STREQ(s.deleted_rv, "2");
	ASSERT_EQ(left, 0);
}
