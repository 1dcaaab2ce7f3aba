/* A run's steps with outcome and duration (cpm_report.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "modules/cpm/cpm_report.h"

int64_t cpm_report_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *cpm_step_outcome_name(enum cpm_step_outcome o)
{
	switch (o) {
	case CPM_STEP_UNCHANGED:
		return "unchanged";
	case CPM_STEP_CREATED:
		return "created";
	case CPM_STEP_UPDATED:
		return "updated";
	case CPM_STEP_WOULD_CHANGE:
		return "would change";
	case CPM_STEP_SKIPPED:
		return "skipped";
	case CPM_STEP_FAILED:
		return "FAILED";
	}
	return "?";
}

int cpm_report_add(struct cpm_report *rep, const char *name, enum cpm_step_outcome outcome,
		   int64_t duration_ms, const char *fmt, ...)
{
	struct cpm_report_step *s;
	va_list ap;

	if (!rep)
		return 0;
	if (rep->n >= CPM_REPORT_MAX)
		return -E2BIG;
	if (rep->n == rep->cap) {
		size_t cap = rep->cap ? rep->cap * 2 : 16;
		struct cpm_report_step *v = realloc(rep->steps, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		rep->steps = v;
		rep->cap = cap;
	}
	s = &rep->steps[rep->n++];
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name ? name : "");
	s->outcome = outcome;
	s->duration_ms = duration_ms;
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(s->detail, sizeof(s->detail), fmt, ap);
		va_end(ap);
	}
	if (rep->live)
		cpm_report_print_step(s, rep->live);
	return 0;
}

size_t cpm_report_count(const struct cpm_report *rep, enum cpm_step_outcome outcome)
{
	size_t n = 0;

	for (size_t i = 0; rep && i < rep->n; i++)
		n += rep->steps[i].outcome == outcome;
	return n;
}

const struct cpm_report_step *cpm_report_find(const struct cpm_report *rep, const char *name)
{
	for (size_t i = 0; rep && i < rep->n; i++)
		if (strcmp(rep->steps[i].name, name) == 0)
			return &rep->steps[i];
	return NULL;
}

void cpm_report_print_step(const struct cpm_report_step *s, FILE *f)
{
	char tag[32];

	snprintf(tag, sizeof(tag), "[%s]", cpm_step_outcome_name(s->outcome));
	fprintf(f, "%-15s %s (%lld ms)%s%s\n", tag, s->name, (long long)s->duration_ms,
		s->detail[0] ? ": " : "", s->detail);
	fflush(f);
}

void cpm_report_print(const struct cpm_report *rep, FILE *f)
{
	for (size_t i = 0; rep && i < rep->n; i++)
		cpm_report_print_step(&rep->steps[i], f);
}

void cpm_report_release(struct cpm_report *rep)
{
	if (!rep)
		return;
	free(rep->steps);
	rep->steps = NULL;
	rep->n = rep->cap = 0;
}
