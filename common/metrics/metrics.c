#include "common/metrics/metrics.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LABELS 8
#define CHAINS 64

struct series {
	char **values; /* one per label */
	double value;  /* counter, gauge */
	double sum;    /* histogram */
	uint64_t count;
	uint64_t *buckets; /* cumulative at write time; per-bucket counts here */
	double *bounds;	   /* a histogram series set whole (metric_histogram_set): its own
			      bounds, nbounds of them; NULL: the family's */
	size_t nbounds;
	uint64_t hash;
	struct series *chain;
	struct series *next; /* insertion order */
	struct series *prev;
};

struct metric {
	char *name;
	char *help;
	enum metric_type type;
	char *labels[MAX_LABELS];
	size_t nlabels;
	double *bounds;
	size_t nbounds;
	pthread_mutex_t lock;
	struct series *chains[CHAINS];
	struct series *first, *last;
	size_t nseries;
	struct metric *next;
};

struct collector {
	void (*fn)(void *ud);
	void *ud;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
/* Held for reading while collectors run, for writing to remove one: once
 * metrics_remove_collector returns, the collector is not running and will not run. */
static pthread_rwlock_t collect_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct metric *families, *families_last;
static struct collector collectors[32];
static size_t ncollectors;
static struct metric *dropped;

static const double default_buckets[] = { .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10 };

static bool valid_name(const char *s)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == ':'))
			return false;
	return true;
}

static void series_free(struct series *s, size_t nlabels)
{
	if (!s)
		return;
	for (size_t i = 0; i < nlabels && s->values; i++)
		free(s->values[i]);
	free(s->values);
	free(s->buckets);
	free(s->bounds);
	free(s);
}

static void family_free(struct metric *m)
{
	struct series *s = m->first;
	while (s) {
		struct series *n = s->next;
		series_free(s, m->nlabels);
		s = n;
	}
	for (size_t i = 0; i < m->nlabels; i++)
		free(m->labels[i]);
	free(m->bounds);
	free(m->name);
	free(m->help);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static bool same_labels(const struct metric *m, const char *const *labels)
{
	size_t n = 0;
	for (; labels && labels[n]; n++)
		if (n >= m->nlabels || strcmp(labels[n], m->labels[n]) != 0)
			return false;
	return n == m->nlabels;
}

static struct metric *family_new(enum metric_type type, const char *name, const char *help,
				 const char *const *labels, const double *bounds, size_t nbounds)
{
	struct metric *m;

	if (!valid_name(name))
		return NULL;
	pthread_mutex_lock(&reg_lock);
	for (m = families; m; m = m->next)
		if (strcmp(m->name, name) == 0) {
			struct metric *found = m->type == type && same_labels(m, labels) ? m : NULL;
			pthread_mutex_unlock(&reg_lock);
			return found;
		}
	m = calloc(1, sizeof(*m));
	if (!m)
		goto fail;
	pthread_mutex_init(&m->lock, NULL);
	m->type = type;
	m->name = strdup(name);
	m->help = strdup(help ? help : "");
	if (!m->name || !m->help)
		goto fail;
	for (size_t i = 0; labels && labels[i]; i++) {
		if (i == MAX_LABELS || !valid_name(labels[i]) || strcmp(labels[i], "le") == 0)
			goto fail;
		if (!(m->labels[i] = strdup(labels[i])))
			goto fail;
		m->nlabels++;
	}
	if (type == METRIC_HISTOGRAM) {
		if (!bounds) {
			bounds = default_buckets;
			nbounds = sizeof(default_buckets) / sizeof(default_buckets[0]);
		}
		m->bounds = malloc(nbounds * sizeof(double));
		if (!m->bounds)
			goto fail;
		for (size_t i = 0; i < nbounds; i++) {
			if (i && bounds[i] <= bounds[i - 1])
				goto fail;
			m->bounds[i] = bounds[i];
		}
		m->nbounds = nbounds;
	}
	if (families_last)
		families_last->next = m;
	else
		families = m;
	families_last = m;
	pthread_mutex_unlock(&reg_lock);
	return m;
fail:
	pthread_mutex_unlock(&reg_lock);
	if (m)
		family_free(m);
	return NULL;
}

struct metric *metric_counter(const char *name, const char *help, const char *const *labels)
{
	return family_new(METRIC_COUNTER, name, help, labels, NULL, 0);
}

struct metric *metric_gauge(const char *name, const char *help, const char *const *labels)
{
	return family_new(METRIC_GAUGE, name, help, labels, NULL, 0);
}

struct metric *metric_histogram(const char *name, const char *help, const char *const *labels,
				const double *buckets, size_t n)
{
	return family_new(METRIC_HISTOGRAM, name, help, labels, buckets, n);
}

static uint64_t hash_values(const char *const *v, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++) {
		for (const char *p = v[i]; *p; p++)
			h = (h ^ (unsigned char)*p) * 1099511628211ULL;
		h = (h ^ 0xff) * 1099511628211ULL;
	}
	return h;
}

static void collect_values(struct metric *m, va_list ap, const char **v)
{
	for (size_t i = 0; i < m->nlabels; i++) {
		v[i] = va_arg(ap, const char *);
		if (!v[i])
			v[i] = "";
	}
}

/* Finds (or with create, adds) a series; called with m->lock held. */
static struct series *series_get(struct metric *m, const char **v, bool create)
{
	uint64_t h = hash_values(v, m->nlabels);
	struct series *s;

	for (s = m->chains[h % CHAINS]; s; s = s->chain) {
		size_t i = 0;
		if (s->hash != h)
			continue;
		while (i < m->nlabels && strcmp(s->values[i], v[i]) == 0)
			i++;
		if (i == m->nlabels)
			return s;
	}
	if (!create)
		return NULL;
	if (m->nseries >= METRIC_MAX_SERIES) {
		if (dropped && dropped != m) {
			pthread_mutex_lock(&dropped->lock);
			const char *none[1] = { NULL };
			struct series *d = series_get(dropped, none, true);
			if (d)
				d->value += 1;
			pthread_mutex_unlock(&dropped->lock);
		}
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->hash = h;
	s->values = calloc(m->nlabels ? m->nlabels : 1, sizeof(char *));
	if (!s->values)
		goto fail;
	for (size_t i = 0; i < m->nlabels; i++)
		if (!(s->values[i] = strdup(v[i])))
			goto fail;
	if (m->type == METRIC_HISTOGRAM && !(s->buckets = calloc(m->nbounds, sizeof(uint64_t))))
		goto fail;
	s->chain = m->chains[h % CHAINS];
	m->chains[h % CHAINS] = s;
	s->prev = m->last;
	if (m->last)
		m->last->next = s;
	else
		m->first = s;
	m->last = s;
	m->nseries++;
	return s;
fail:
	series_free(s, m->nlabels);
	return NULL;
}

enum update_op { OP_ADD, OP_SET, OP_OBSERVE };

static void update(struct metric *m, enum update_op op, double v, va_list ap)
{
	const char *vals[MAX_LABELS];

	collect_values(m, ap, vals);
	pthread_mutex_lock(&m->lock);
	struct series *s = series_get(m, vals, true);
	if (s && op == OP_ADD) {
		s->value += v;
	} else if (s && op == OP_SET) {
		s->value = v;
	} else if (s) {
		const double *bounds = s->bounds ? s->bounds : m->bounds;
		size_t nb = s->bounds ? s->nbounds : m->nbounds;
		for (size_t i = 0; i < nb; i++)
			if (v <= bounds[i]) {
				s->buckets[i]++;
				break;
			}
		s->sum += v;
		s->count++;
	}
	pthread_mutex_unlock(&m->lock);
}

void metric_add(struct metric *m, double v, ...)
{
	va_list ap;

	if (!m || m->type == METRIC_HISTOGRAM || (m->type == METRIC_COUNTER && !(v >= 0)))
		return;
	va_start(ap, v);
	update(m, OP_ADD, v, ap);
	va_end(ap);
}

void metric_set(struct metric *m, double v, ...)
{
	va_list ap;

	if (!m || m->type == METRIC_HISTOGRAM)
		return;
	va_start(ap, v);
	update(m, OP_SET, v, ap);
	va_end(ap);
}

void metric_observe(struct metric *m, double v, ...)
{
	va_list ap;

	if (!m || m->type != METRIC_HISTOGRAM || isnan(v))
		return;
	va_start(ap, v);
	update(m, OP_OBSERVE, v, ap);
	va_end(ap);
}

int metric_histogram_set(struct metric *m, const double *le, const uint64_t *cum, size_t n,
			 uint64_t count, double sum, ...)
{
	const char *vals[MAX_LABELS];
	double *bounds;
	uint64_t *buckets;
	va_list ap;

	if (!m || m->type != METRIC_HISTOGRAM || n > METRIC_MAX_BUCKETS || (n && (!le || !cum)) ||
	    isnan(sum))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (isnan(le[i]) || isinf(le[i]) || cum[i] > count ||
		    (i && (le[i] <= le[i - 1] || cum[i] < cum[i - 1])))
			return -EINVAL;
	bounds = malloc((n ? n : 1) * sizeof(double));
	buckets = calloc(n ? n : 1, sizeof(uint64_t));
	if (!bounds || !buckets) {
		free(bounds);
		free(buckets);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		bounds[i] = le[i];
		buckets[i] = cum[i] - (i ? cum[i - 1] : 0);
	}
	va_start(ap, sum);
	collect_values(m, ap, vals);
	va_end(ap);
	pthread_mutex_lock(&m->lock);
	struct series *s = series_get(m, vals, true);
	if (s) {
		free(s->buckets);
		free(s->bounds);
		s->buckets = buckets;
		s->bounds = bounds;
		s->nbounds = n;
		s->count = count;
		s->sum = sum;
	}
	pthread_mutex_unlock(&m->lock);
	if (!s) {
		free(bounds);
		free(buckets);
		return -ENOSPC;
	}
	return 0;
}

double metric_value(struct metric *m, ...)
{
	const char *vals[MAX_LABELS];
	va_list ap;
	double r = 0;

	if (!m)
		return 0;
	va_start(ap, m);
	collect_values(m, ap, vals);
	va_end(ap);
	pthread_mutex_lock(&m->lock);
	struct series *s = series_get(m, vals, false);
	if (s)
		r = m->type == METRIC_HISTOGRAM ? (double)s->count : s->value;
	pthread_mutex_unlock(&m->lock);
	return r;
}

void metric_remove(struct metric *m, ...)
{
	const char *vals[MAX_LABELS];
	va_list ap;

	if (!m)
		return;
	va_start(ap, m);
	collect_values(m, ap, vals);
	va_end(ap);
	pthread_mutex_lock(&m->lock);
	struct series *s = series_get(m, vals, false);
	if (s) {
		struct series **pp = &m->chains[s->hash % CHAINS];
		while (*pp != s)
			pp = &(*pp)->chain;
		*pp = s->chain;
		if (s->prev)
			s->prev->next = s->next;
		else
			m->first = s->next;
		if (s->next)
			s->next->prev = s->prev;
		else
			m->last = s->prev;
		m->nseries--;
		series_free(s, m->nlabels);
	}
	pthread_mutex_unlock(&m->lock);
}

void metrics_remove_collector(void (*fn)(void *ud), void *ud)
{
	pthread_rwlock_wrlock(&collect_lock);
	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < ncollectors; i++)
		if (collectors[i].fn == fn && collectors[i].ud == ud) {
			memmove(&collectors[i], &collectors[i + 1],
				(ncollectors - i - 1) * sizeof(collectors[0]));
			ncollectors--;
			break;
		}
	pthread_mutex_unlock(&reg_lock);
	pthread_rwlock_unlock(&collect_lock);
}

void metrics_add_collector(void (*fn)(void *ud), void *ud)
{
	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < ncollectors; i++)
		if (collectors[i].fn == fn && collectors[i].ud == ud) {
			pthread_mutex_unlock(&reg_lock);
			return;
		}
	if (ncollectors < sizeof(collectors) / sizeof(collectors[0]))
		collectors[ncollectors++] = (struct collector){ fn, ud };
	pthread_mutex_unlock(&reg_lock);
}

static int put_escaped(struct buf *out, const char *s, bool quote_too)
{
	int r = 0;
	for (; *s && r == 0; s++) {
		if (*s == '\\')
			r = buf_puts(out, "\\\\");
		else if (*s == '\n')
			r = buf_puts(out, "\\n");
		else if (quote_too && *s == '"')
			r = buf_puts(out, "\\\"");
		else
			r = buf_putc(out, *s);
	}
	return r;
}

/* v as the text format writes it: the shortest form that reads back as the same double. */
static void format_number(char s[32], double v)
{
	if (isnan(v)) {
		snprintf(s, 32, "NaN");
	} else if (isinf(v)) {
		snprintf(s, 32, "%s", v > 0 ? "+Inf" : "-Inf");
	} else if (v == floor(v) && fabs(v) < 1e15) {
		snprintf(s, 32, "%.0f", v);
	} else {
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(s, 32, "%.*g", prec, v);
			if (strtod(s, NULL) == v)
				break;
		}
	}
}

static int put_number(struct buf *out, double v)
{
	char s[32];

	format_number(s, v);
	return buf_puts(out, s);
}

static int put_labels(struct buf *out, const struct metric *m, const struct series *s,
		      const char *le)
{
	int r = 0;
	if (!m->nlabels && !le)
		return 0;
	r |= buf_putc(out, '{');
	for (size_t i = 0; i < m->nlabels; i++) {
		r |= buf_printf(out, "%s%s=\"", i ? "," : "", m->labels[i]);
		r |= put_escaped(out, s->values[i], true);
		r |= buf_putc(out, '"');
	}
	if (le)
		r |= buf_printf(out, "%sle=\"%s\"", m->nlabels ? "," : "", le);
	r |= buf_putc(out, '}');
	return r ? -EMSGSIZE : 0;
}

static int write_family(struct buf *out, struct metric *m)
{
	static const char *const types[] = { "counter", "gauge", "histogram" };
	int r = 0;

	pthread_mutex_lock(&m->lock);
	if (!m->first) {
		pthread_mutex_unlock(&m->lock);
		return 0;
	}
	r |= buf_printf(out, "# HELP %s ", m->name);
	r |= put_escaped(out, m->help, false);
	r |= buf_printf(out, "\n# TYPE %s %s\n", m->name, types[m->type]);
	for (struct series *s = m->first; s && r == 0; s = s->next) {
		if (m->type != METRIC_HISTOGRAM) {
			r |= buf_puts(out, m->name);
			r |= put_labels(out, m, s, NULL);
			r |= buf_putc(out, ' ');
			r |= put_number(out, s->value);
			r |= buf_putc(out, '\n');
			continue;
		}
		const double *bounds = s->bounds ? s->bounds : m->bounds;
		size_t nb = s->bounds ? s->nbounds : m->nbounds;
		uint64_t cum = 0;
		for (size_t i = 0; i <= nb; i++) {
			char le[32];
			if (i < nb) {
				cum += s->buckets[i];
				format_number(le, bounds[i]);
			} else {
				cum = s->count;
				snprintf(le, sizeof(le), "+Inf");
			}
			r |= buf_printf(out, "%s_bucket", m->name);
			r |= put_labels(out, m, s, le);
			r |= buf_printf(out, " %llu\n", (unsigned long long)cum);
		}
		r |= buf_printf(out, "%s_sum", m->name);
		r |= put_labels(out, m, s, NULL);
		r |= buf_putc(out, ' ');
		r |= put_number(out, s->sum);
		r |= buf_printf(out, "\n%s_count", m->name);
		r |= put_labels(out, m, s, NULL);
		r |= buf_printf(out, " %llu\n", (unsigned long long)s->count);
	}
	pthread_mutex_unlock(&m->lock);
	return r ? -EMSGSIZE : 0;
}

int metrics_write(struct buf *out)
{
	struct collector cs[sizeof(collectors) / sizeof(collectors[0])];
	size_t n;
	int r = 0;

	pthread_rwlock_rdlock(&collect_lock);
	pthread_mutex_lock(&reg_lock);
	n = ncollectors;
	memcpy(cs, collectors, n * sizeof(cs[0]));
	pthread_mutex_unlock(&reg_lock);
	for (size_t i = 0; i < n; i++)
		cs[i].fn(cs[i].ud);
	pthread_rwlock_unlock(&collect_lock);
	pthread_mutex_lock(&reg_lock);
	/* families are never freed while the process runs (but for metrics_reset in tests) */
	struct metric *m = families;
	pthread_mutex_unlock(&reg_lock);
	for (; m && r == 0; m = m->next)
		r = write_family(out, m);
	return r;
}

void metrics_reset(void)
{
	pthread_mutex_lock(&reg_lock);
	struct metric *m = families;
	families = families_last = NULL;
	ncollectors = 0;
	dropped = NULL;
	pthread_mutex_unlock(&reg_lock);
	while (m) {
		struct metric *n = m->next;
		family_free(m);
		m = n;
	}
}

__attribute__((constructor)) static void metrics_init(void)
{
	dropped = metric_counter("aws_k8s_metrics_dropped_series_total",
				 "Label sets dropped because a metric family reached its series cap.",
				 NULL);
}
