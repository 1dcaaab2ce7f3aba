/* Metrics registry: counters, gauges and histograms with labels, written in the Prometheus text
 * exposition format (version 0.0.4). Thread-safe. Families live for the life of the process.
 *
 *   static struct metric *calls;
 *   calls = metric_counter("cloudprovider_aws_api_request_errors", "AWS API errors",
 *                          (const char *[]){ "request", NULL });
 *   metric_inc(calls, "DescribeInstances");             // label values in label order
 *   metric_observe(latency, 0.023, "DescribeInstances"); // histograms
 *
 * Registering a name twice returns the existing family when type and labels match (so two
 * modules can share one), NULL otherwise. A family holds at most METRIC_MAX_SERIES label sets;
 * past that, new series are dropped and counted in aws_k8s_metrics_dropped_series_total. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"

#define METRIC_MAX_SERIES 10000
/* The most buckets a histogram series set whole may have. */
#define METRIC_MAX_BUCKETS 256

enum metric_type { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM };

struct metric;

struct metric *metric_counter(const char *name, const char *help, const char *const *labels);
struct metric *metric_gauge(const char *name, const char *help, const char *const *labels);
/* buckets: ascending upper bounds, n of them (+Inf is added); NULL for the default
 * Prometheus buckets (.005 ... 10). */
struct metric *metric_histogram(const char *name, const char *help, const char *const *labels,
				const double *buckets, size_t n);

/* The label values follow, one per label of the family (none for an unlabelled one). */
void metric_add(struct metric *m, double v, ...);
/* Sets a gauge, or a counter that mirrors a count kept elsewhere (e.g. CPU time from /proc). */
void metric_set(struct metric *m, double v, ...);
void metric_observe(struct metric *m, double v, ...);
/* Sets a histogram series whole from counts kept elsewhere (a device's own latency
 * histogram): n buckets with ascending upper bounds le[] and cumulative counts cum[]
 * (non-decreasing, at most count), count observations in all (the +Inf bucket) summing to sum.
 * The series keeps these bounds, which need not be the family's. 0; -EINVAL for a malformed
 * histogram (nothing changes); -ENOSPC when the series cannot be added (cap, memory). */
int metric_histogram_set(struct metric *m, const double *le, const uint64_t *cum, size_t n,
			 uint64_t count, double sum, ...);
#define metric_inc(m, ...) metric_add((m), 1.0, ##__VA_ARGS__)
/* The current value of a counter or gauge series (0 when absent); for histograms the count. */
double metric_value(struct metric *m, ...);
/* Removes one series (e.g. of a deleted node). */
void metric_remove(struct metric *m, ...);

/* Collector callbacks run before every exposition (e.g. process metrics, store sizes). */
void metrics_add_collector(void (*fn)(void *ud), void *ud);
/* Removes a collector; when it returns, fn is not running and will not run again (so its ud
 * may be freed). */
void metrics_remove_collector(void (*fn)(void *ud), void *ud);
/* Writes every family in the text format. */
int metrics_write(struct buf *out);
/* Registers process_* metrics (resident memory, cpu seconds, open fds, start time, ...). */
void metrics_register_process(void);
/* For tests: drop every family. */
void metrics_reset(void);
