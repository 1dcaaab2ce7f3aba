/* A run's progress as a person follows it on a terminal: one step per line, with its outcome and
 * how long it took.
 *
 *   struct cpm_report rep = {0};
 *   int64_t t0 = cpm_report_clock_ms();
 *   r = do_the_step(...);
 *   cpm_report_add(&rep, "pki apiserver.crt", r < 0 ? CPM_STEP_FAILED : CPM_STEP_CREATED,
 *                  cpm_report_clock_ms() - t0, "%s", why);
 *   cpm_report_print(&rep, stdout);      // "[created]   pki apiserver.crt (12 ms): ..."
 *   cpm_report_release(&rep);
 *
 * At most CPM_REPORT_MAX steps are kept (one more returns -E2BIG); a detail is cut at
 * CPM_REPORT_DETAIL_MAX - 1 bytes. Nothing logs. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CPM_REPORT_MAX 512
#define CPM_REPORT_NAME_MAX 96
#define CPM_REPORT_DETAIL_MAX 256

enum cpm_step_outcome {
	CPM_STEP_UNCHANGED = 0, /* already as wanted */
	CPM_STEP_CREATED,	/* was missing, made */
	CPM_STEP_UPDATED,	/* replaced (renewed, rewritten) */
	CPM_STEP_WOULD_CHANGE,	/* dry run: would be created or replaced */
	CPM_STEP_SKIPPED,	/* not wanted here */
	CPM_STEP_FAILED,
};

struct cpm_report_step {
	char name[CPM_REPORT_NAME_MAX];
	enum cpm_step_outcome outcome;
	int64_t duration_ms;
	char detail[CPM_REPORT_DETAIL_MAX];
};

struct cpm_report {
	struct cpm_report_step *steps;
	size_t n, cap;
	FILE *live; /* when set, each step is also printed there as it is added */
};

int64_t cpm_report_clock_ms(void);
const char *cpm_step_outcome_name(enum cpm_step_outcome o);
/* Adds a step (the detail is printf-style, may be NULL); -ENOMEM, -E2BIG past CPM_REPORT_MAX. */
__attribute__((format(printf, 5, 6))) int cpm_report_add(struct cpm_report *rep, const char *name,
							enum cpm_step_outcome outcome,
							int64_t duration_ms, const char *fmt, ...);
/* How many steps have that outcome. */
size_t cpm_report_count(const struct cpm_report *rep, enum cpm_step_outcome outcome);
const struct cpm_report_step *cpm_report_find(const struct cpm_report *rep, const char *name);
void cpm_report_print_step(const struct cpm_report_step *s, FILE *f);
void cpm_report_print(const struct cpm_report *rep, FILE *f);
void cpm_report_release(struct cpm_report *rep);
