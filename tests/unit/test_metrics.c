#include <pthread.h>
#include <stdlib.h>

#include "common/metrics/metrics.h"
#include "tests/unit/harness.h"

TEST(metrics_counter_gauge_text_format)
{
	metrics_reset();
	struct metric *c = metric_counter("test_requests_total", "Requests.", (const char *[]){ "request", NULL });
	struct metric *g = metric_gauge("test_nodes", "Nodes\nwith \\ escapes.", NULL);
	ASSERT_NOT_NULL(c);
	ASSERT_NOT_NULL(g);
	metric_inc(c, "DescribeInstances");
	metric_add(c, 2, "DescribeInstances");
	metric_inc(c, "has \"quote\"\n");
	metric_add(c, -1, "DescribeInstances"); /* counters never go down */
	metric_set(g, 1.5);
	ASSERT_TRUE(metric_value(c, "DescribeInstances") == 3);
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	ASSERT_OK(metrics_write(&out));
	ASSERT_CONTAINS(out.data, "# HELP test_requests_total Requests.\n# TYPE test_requests_total counter\n");
	ASSERT_CONTAINS(out.data, "test_requests_total{request=\"DescribeInstances\"} 3\n");
	ASSERT_CONTAINS(out.data, "test_requests_total{request=\"has \\\"quote\\\"\\n\"} 1\n");
	ASSERT_CONTAINS(out.data, "# HELP test_nodes Nodes\\nwith \\\\ escapes.\n");
	ASSERT_CONTAINS(out.data, "test_nodes 1.5\n");
	metrics_reset();
}

TEST(metrics_histogram_buckets_cumulative)
{
	metrics_reset();
	const double b[] = { 0.1, 1 };
	struct metric *h = metric_histogram("test_duration_seconds", "D.", (const char *[]){ "op", NULL }, b, 2);
	ASSERT_NOT_NULL(h);
	metric_observe(h, 0.05, "a");
	metric_observe(h, 0.5, "a");
	metric_observe(h, 5, "a");
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	ASSERT_OK(metrics_write(&out));
	ASSERT_CONTAINS(out.data, "test_duration_seconds_bucket{op=\"a\",le=\"0.1\"} 1\n");
	ASSERT_CONTAINS(out.data, "test_duration_seconds_bucket{op=\"a\",le=\"1\"} 2\n");
	ASSERT_CONTAINS(out.data, "test_duration_seconds_bucket{op=\"a\",le=\"+Inf\"} 3\n");
	ASSERT_CONTAINS(out.data, "test_duration_seconds_sum{op=\"a\"} 5.55");
	ASSERT_CONTAINS(out.data, "test_duration_seconds_count{op=\"a\"} 3\n");
	metrics_reset();
}

/* Prometheus buckets are "less than or equal": a value on a bound counts in that bucket. */
TEST(metrics_histogram_bound_is_inclusive)
{
	metrics_reset();
	const double b[] = {0.25, 1};
	struct metric *h = metric_histogram("test_wait_seconds", "W.", NULL, b, 2);
	ASSERT_NOT_NULL(h);
	metric_observe(h, 0.25);
	metric_observe(h, 1);
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	ASSERT_OK(metrics_write(&out));
	ASSERT_CONTAINS(out.data, "test_wait_seconds_bucket{le=\"0.25\"} 1\n");
	ASSERT_CONTAINS(out.data, "test_wait_seconds_bucket{le=\"1\"} 2\n");
	ASSERT_CONTAINS(out.data, "test_wait_seconds_bucket{le=\"+Inf\"} 2\n");
	metrics_reset();
}

TEST(metrics_registration_rules)
{
	metrics_reset();
	struct metric *a = metric_counter("test_x_total", "x", (const char *[]){ "l", NULL });
	ASSERT_TRUE(a == metric_counter("test_x_total", "x", (const char *[]){ "l", NULL }));
	ASSERT_NULL(metric_gauge("test_x_total", "x", (const char *[]){ "l", NULL }));
	ASSERT_NULL(metric_counter("test_x_total", "x", (const char *[]){ "other", NULL }));
	ASSERT_NULL(metric_counter("bad-name", "x", NULL));
	ASSERT_NULL(metric_counter("test_y", "x", (const char *[]){ "le", NULL }));
	ASSERT_NULL(metric_histogram("test_h", "x", NULL, (const double[]){ 2, 1 }, 2));
	metrics_reset();
}

TEST(metrics_series_cap_and_remove)
{
	metrics_reset();
	struct metric *d = metric_counter("aws_k8s_metrics_dropped_series_total", "d", NULL);
	(void)d;
	struct metric *g = metric_gauge("test_cap", "c", (const char *[]){ "node", NULL });
	char name[32];
	for (int i = 0; i < METRIC_MAX_SERIES + 5; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		metric_set(g, i, name);
	}
	ASSERT_TRUE(metric_value(g, "n0") == 0);
	ASSERT_TRUE(metric_value(g, "n9999") == 9999);
	ASSERT_TRUE(metric_value(g, "n10000") == 0); /* dropped */
	metric_remove(g, "n5");
	metric_set(g, 1, "new");
	ASSERT_TRUE(metric_value(g, "new") == 1);
	metrics_reset();
}

static struct metric *shared_counter;
static void *hammer(void *arg)
{
	for (int i = 0; i < 10000; i++)
		metric_inc(shared_counter, (i & 1) ? "a" : "b");
	return NULL;
}

TEST(metrics_thread_safe_counts)
{
	metrics_reset();
	shared_counter = metric_counter("test_threads_total", "t", (const char *[]){ "k", NULL });
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, hammer, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	ASSERT_TRUE(metric_value(shared_counter, "a") == 20000);
	ASSERT_TRUE(metric_value(shared_counter, "b") == 20000);
	metrics_reset();
}

TEST(metrics_process_collector)
{
	metrics_reset();
	metrics_register_process();
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	ASSERT_OK(metrics_write(&out));
	ASSERT_CONTAINS(out.data, "# TYPE process_cpu_seconds_total counter\n");
	ASSERT_CONTAINS(out.data, "process_resident_memory_bytes ");
	ASSERT_CONTAINS(out.data, "process_open_fds ");
	ASSERT_CONTAINS(out.data, "process_start_time_seconds ");
	const char *p = strstr(out.data, "\nprocess_resident_memory_bytes ");
	ASSERT_NOT_NULL(p);
	ASSERT_GT(strtod(p + strlen("\nprocess_resident_memory_bytes "), NULL), 1e5);
	metrics_reset();
}

/* A histogram kept elsewhere (a device's bins), set whole with its own bounds. */
TEST(metrics_histogram_set_whole)
{
	metrics_reset();
	struct metric *h = metric_histogram("test_lat_seconds", "L.", (const char *[]){ "v", NULL },
					    NULL, 0);
	ASSERT_NOT_NULL(h);
	const double le[] = { 0.0005, 0.0025, 1 };
	const uint64_t cum[] = { 1500, 1900, 2000 };
	ASSERT_OK(metric_histogram_set(h, le, cum, 3, 2001, 3.25, "a"));
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	ASSERT_OK(metrics_write(&out));
	ASSERT_CONTAINS(out.data, "test_lat_seconds_bucket{v=\"a\",le=\"0.0005\"} 1500\n"
				  "test_lat_seconds_bucket{v=\"a\",le=\"0.0025\"} 1900\n"
				  "test_lat_seconds_bucket{v=\"a\",le=\"1\"} 2000\n"
				  "test_lat_seconds_bucket{v=\"a\",le=\"+Inf\"} 2001\n"
				  "test_lat_seconds_sum{v=\"a\"} 3.25\n"
				  "test_lat_seconds_count{v=\"a\"} 2001\n");
	/* set again: replaced, with other bounds; a bound printed exactly (not %g's 6 digits) */
	const double le2[] = { 1.234567 };
	const uint64_t cum2[] = { 4 };
	ASSERT_OK(metric_histogram_set(h, le2, cum2, 1, 4, 0, "a"));
	buf_reset(&out);
	ASSERT_OK(metrics_write(&out));
	ASSERT_CONTAINS(out.data, "test_lat_seconds_bucket{v=\"a\",le=\"1.234567\"} 4\n"
				  "test_lat_seconds_bucket{v=\"a\",le=\"+Inf\"} 4\n");
	ASSERT_NOT_CONTAINS(out.data, "le=\"0.0005\"");
	/* an observation lands in the series' own buckets */
	metric_observe(h, 0.5, "a");
	ASSERT_TRUE(metric_value(h, "a") == 5);
	buf_reset(&out);
	ASSERT_OK(metrics_write(&out));
	ASSERT_CONTAINS(out.data, "test_lat_seconds_bucket{v=\"a\",le=\"1.234567\"} 5\n");
	metrics_reset();
}

TEST(metrics_histogram_set_rejects_malformed)
{
	metrics_reset();
	struct metric *h = metric_histogram("test_bad_seconds", "B.", NULL, NULL, 0);
	struct metric *c = metric_counter("test_c_total", "C.", NULL);
	ASSERT_NOT_NULL(h);
	const double up[] = { 1, 2 }, down[] = { 2, 1 }, same[] = { 1, 1 };
	const uint64_t ok[] = { 1, 2 }, shrinking[] = { 2, 1 };
	ASSERT_ERR(metric_histogram_set(h, down, ok, 2, 2, 0), EINVAL);
	ASSERT_ERR(metric_histogram_set(h, same, ok, 2, 2, 0), EINVAL);
	ASSERT_ERR(metric_histogram_set(h, up, shrinking, 2, 2, 0), EINVAL);
	ASSERT_ERR(metric_histogram_set(h, up, ok, 2, 1, 0), EINVAL); /* count < a bucket */
	ASSERT_ERR(metric_histogram_set(c, up, ok, 2, 2, 0), EINVAL);
	ASSERT_OK(metric_histogram_set(h, NULL, NULL, 0, 3, 1.5)); /* only +Inf */
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	ASSERT_OK(metrics_write(&out));
	ASSERT_CONTAINS(out.data, "test_bad_seconds_bucket{le=\"+Inf\"} 3\n");
	metrics_reset();
}

static int collected;
static void count_collect(void *ud)
{
	collected++;
}

TEST(metrics_remove_collector)
{
	metrics_reset();
	metrics_add_collector(count_collect, &collected);
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	collected = 0;
	ASSERT_OK(metrics_write(&out));
	ASSERT_EQ(collected, 1);
	metrics_remove_collector(count_collect, &collected);
	ASSERT_OK(metrics_write(&out));
	ASSERT_EQ(collected, 1);
	metrics_remove_collector(count_collect, &collected); /* twice: nothing */
	metrics_reset();
}
