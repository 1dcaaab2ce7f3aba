/* The Describe batcher, with the AWS call replaced by a fake that answers like EC2 (including
 * the whole-call InvalidInstanceID.NotFound failure). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/batch.h"
#include "common/aws/xml.h"
#include "common/base/timeutil.h"
#include "tests/unit/harness.h"

enum notfound_style { NF_AWS, NF_MOTO, NF_UNNAMED };

struct fake {
	pthread_mutex_t lock;
	int calls;
	size_t max_n;
	enum notfound_style style;
	bool fail_all;
	bool idless; /* the reply holds an item without its ID */
};

static int fake_fetch(void *ud, const char *const *ids, size_t n, struct aws_reply *rep,
		      struct aws_error *err)
{
	struct fake *f = ud;
	struct buf b = BUF_INIT(0);
	struct buf missing = BUF_INIT(0);
	size_t nmiss = 0;
	int r;

	pthread_mutex_lock(&f->lock);
	f->calls++;
	if (n > f->max_n)
		f->max_n = n;
	pthread_mutex_unlock(&f->lock);
	sleep_ns(2 * NSEC_PER_MSEC);
	if (f->fail_all) {
		aws_error_set(err, 503, "RequestLimitExceeded", "Request limit exceeded.");
		return -EAGAIN;
	}
	for (size_t i = 0; i < n; i++) {
		if (strstr(ids[i], "missing")) {
			if (nmiss++ == 0 || f->style == NF_AWS)
				buf_printf(&missing, "%s%s", nmiss > 1 ? ", " : "", ids[i]);
		}
	}
	if (nmiss) {
		if (f->style == NF_UNNAMED)
			aws_error_set(err, 400, "InvalidInstanceID.NotFound",
				      "Some instances do not exist");
		else
			aws_error_set(err, 400, "InvalidInstanceID.NotFound",
				      "The instance ID%s '%s' do%s not exist", nmiss > 1 ? "s" : "",
				      missing.data, nmiss > 1 ? "" : "es");
		buf_release(&missing);
		return -ENOENT;
	}
	buf_puts(&b, "<DescribeInstancesResponse xmlns=\"x\"><reservationSet>");
	/* two instances per reservation, in reverse order, plus one nobody asked for */
	for (size_t i = n; i-- > 0;) {
		if ((n - 1 - i) % 2 == 0)
			buf_puts(&b, "<item><instancesSet>");
		buf_printf(
		    &b,
		    "<item><instanceId>%s</instanceId><privateDnsName>ip-%zu</privateDnsName>"
		    "</item>",
		    ids[i], i);
		if ((n - 1 - i) % 2 == 1 || i == 0)
			buf_puts(&b, "</instancesSet></item>");
	}
	if (f->idless)
		buf_puts(&b, "<item><instancesSet><item><privateDnsName>ip-x</privateDnsName></item>"
			     "</instancesSet></item>");
	buf_puts(&b, "<item><instancesSet><item><instanceId>i-other</instanceId></item>"
		     "</instancesSet></item></reservationSet></DescribeInstancesResponse>");
	r = aws_xml_parse(b.data, b.len, &rep->doc, NULL, 0);
	buf_release(&b);
	if (r < 0)
		return r;
	rep->root = rep->result = xmlDocGetRootElement(rep->doc);
	return 0;
}

/* Holds the asker threads until every one is started. */
struct start_gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;
};

struct asker {
	struct aws_batcher *b;
	struct start_gate *start;
	char id[32];
	int r;
	char dns[64];
	pthread_t t;
};

static void *asker_run(void *arg)
{
	struct asker *a = arg;
	xmlDoc *doc = NULL;

	pthread_mutex_lock(&a->start->lock);
	while (!a->start->open)
		pthread_cond_wait(&a->start->cond, &a->start->lock);
	pthread_mutex_unlock(&a->start->lock);
	a->r = aws_batcher_get(a->b, a->id, &doc, NULL);
	if (a->r == 0) {
		const char *id = aws_xml_text(xmlDocGetRootElement(doc), "instanceId");
		const char *dns = aws_xml_text(xmlDocGetRootElement(doc), "privateDnsName");
		if (!id || strcmp(id, a->id) != 0)
			a->r = -EBADMSG;
		str_copy(a->dns, sizeof(a->dns), dns ? dns : "");
		xmlFreeDoc(doc);
	}
	return NULL;
}

/* Runs the askers in threads that ask all at once: starting 20 or 250 threads takes long enough
 * on a loaded machine for a batch window to close between the first ask and the last. */
static int run_askers(struct aws_batcher *b, struct asker *a, size_t n)
{
	struct start_gate start = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
	size_t started = 0;
	int r = 0;

	for (; started < n; started++) {
		a[started].b = b;
		a[started].start = &start;
		if (pthread_create(&a[started].t, NULL, asker_run, &a[started]) != 0) {
			r = -EAGAIN;
			break;
		}
	}
	pthread_mutex_lock(&start.lock);
	start.open = true;
	pthread_cond_broadcast(&start.cond);
	pthread_mutex_unlock(&start.lock);
	for (size_t i = 0; i < started; i++)
		pthread_join(a[i].t, NULL);
	return r;
}

TEST(aws_batch_merges_concurrent_asks)
{
	struct fake f = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct aws_batcher_opts o = {.fetch = fake_fetch,
				     .fetch_ud = &f,
				     .window_ns = 100 * NSEC_PER_MSEC,
				     .max_wait_ns = 2 * NSEC_PER_SEC};
	struct aws_batcher *b;
	struct aws_batcher_stats st;
	static struct asker a[250];

	ASSERT_OK(aws_batcher_new(NULL, &aws_batch_instances, &o, &b));
	for (size_t i = 0; i < ARRAY_SIZE(a); i++)
		snprintf(a[i].id, sizeof(a[i].id), "i-%017zx", i % 200); /* 50 asked twice */
	ASSERT_OK(run_askers(b, a, ARRAY_SIZE(a)));
	for (size_t i = 0; i < ARRAY_SIZE(a); i++) {
		ASSERT_OK(a[i].r);
		ASSERT_TRUE(str_has_prefix(a[i].dns, "ip-"));
	}
	aws_batcher_stats(b, &st);
	ASSERT_EQ(st.asks, 250);
	ASSERT_LE(f.max_n, 100); /* the kind's cap */
	ASSERT_GE(f.calls, 2);	 /* 200 distinct IDs need at least two calls */
	ASSERT_LE(f.calls, 8);	 /* and far fewer than 250 */
	ASSERT_EQ(st.calls, (unsigned long)f.calls);
	aws_batcher_free(b);
}

static void notfound_case(enum notfound_style style, int max_calls)
{
	struct fake f = {.lock = PTHREAD_MUTEX_INITIALIZER, .style = style};
	struct aws_batcher_opts o = {.fetch = fake_fetch,
				     .fetch_ud = &f,
				     .window_ns = 200 * NSEC_PER_MSEC,
				     .max_wait_ns = 2 * NSEC_PER_SEC};
	struct aws_batcher *b;
	struct asker a[20];

	ASSERT_OK(aws_batcher_new(NULL, &aws_batch_instances, &o, &b));
	for (size_t i = 0; i < ARRAY_SIZE(a); i++)
		snprintf(a[i].id, sizeof(a[i].id), i % 7 == 3 ? "i-missing%zu" : "i-%zu", i);
	ASSERT_OK(run_askers(b, a, ARRAY_SIZE(a)));
	for (size_t i = 0; i < ARRAY_SIZE(a); i++) {
		if (i % 7 == 3)
			ASSERT_ERR(a[i].r, ENOENT);
		else
			ASSERT_OK(a[i].r);
	}
	if (f.calls > max_calls)
		test_fail(__FILE__, __LINE__, "style %d: %d calls, want at most %d", style, f.calls,
			  max_calls);
	aws_batcher_free(b);
}

TEST(aws_batch_notfound_named_aws_style)
{
	/* AWS names every unknown ID: one failed call, one call without them */
	notfound_case(NF_AWS, 2);
}

TEST(aws_batch_notfound_named_moto_style)
{
	/* moto names one per reply: one call per unknown ID, plus the last one */
	notfound_case(NF_MOTO, 4);
}

TEST(aws_batch_notfound_unnamed_split)
{
	/* the message names nothing: split in halves down to the unknown IDs */
	notfound_case(NF_UNNAMED, 30);
}

TEST(aws_batch_errors_reach_every_caller)
{
	struct fake f = {.lock = PTHREAD_MUTEX_INITIALIZER, .fail_all = true};
	struct aws_batcher_opts o = {.fetch = fake_fetch, .fetch_ud = &f};
	struct aws_batcher *b;
	struct aws_error err;
	xmlDoc *doc;
	struct asker a[5];

	ASSERT_OK(aws_batcher_new(NULL, &aws_batch_volumes, &o, &b));
	for (size_t i = 0; i < ARRAY_SIZE(a); i++)
		snprintf(a[i].id, sizeof(a[i].id), "vol-%zu", i);
	ASSERT_OK(run_askers(b, a, ARRAY_SIZE(a)));
	for (size_t i = 0; i < ARRAY_SIZE(a); i++)
		ASSERT_ERR(a[i].r, EAGAIN);
	ASSERT_ERR(aws_batcher_get(b, "vol-x", &doc, &err), EAGAIN);
	ASSERT_STREQ(err.code, "RequestLimitExceeded");
	ASSERT_ERR(aws_batcher_get(b, "", &doc, &err), EINVAL);
	aws_batcher_free(b);
	ASSERT_NULL(aws_batch_kind_by_name("nope"));
	ASSERT_TRUE(aws_batch_kind_by_name("volumes") == &aws_batch_volumes);
}

/* An item without its ID proves nothing about the IDs missing from the reply: every asker of
 * that call gets an error, none gets "not found". */
TEST(aws_batch_item_without_id_is_no_evidence)
{
	struct fake f = {.lock = PTHREAD_MUTEX_INITIALIZER, .idless = true};
	struct aws_batcher_opts o = {.fetch = fake_fetch, .fetch_ud = &f};
	struct aws_batcher *b;
	struct asker a[3];

	ASSERT_OK(aws_batcher_new(NULL, &aws_batch_instances, &o, &b));
	for (size_t i = 0; i < ARRAY_SIZE(a); i++)
		snprintf(a[i].id, sizeof(a[i].id), "i-%zu", i);
	ASSERT_OK(run_askers(b, a, ARRAY_SIZE(a)));
	for (size_t i = 0; i < ARRAY_SIZE(a); i++)
		ASSERT_ERR(a[i].r, EBADMSG);
	aws_batcher_free(b);
}
