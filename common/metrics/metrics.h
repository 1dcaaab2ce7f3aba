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

#include "common/base/buf.h"

#define METRIC_MAX_SERIES 10000

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
#define metric_inc(m, ...) metric_add((m), 1.0, ##__VA_ARGS__)
/* The current value of a counter or gauge series (0 when absent); for histograms the count. */
double metric_value(struct metric *m, ...);
/* Removes one series (e.g. of a deleted node). */
void metric_remove(struct metric *m, ...);

/* Collector callbacks run before every exposition (e.g. process metrics, store sizes). */
void metrics_add_collector(void (*fn)(void *ud), void *ud);
/* Writes every family in the text format. */
int metrics_write(struct buf *out);
/* Registers process_* metrics (resident memory, cpu seconds, open fds, start time, ...). */
void metrics_register_process(void);
/* For tests: drop every family. */
void metrics_reset(void);
