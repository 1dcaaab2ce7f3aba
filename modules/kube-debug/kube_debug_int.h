/* kube-debug internals. kube_debug.c (usage, flags, the action table, main) calls the actions
 * of kube_debug_rest.c and kube_debug_run.c; all of them use the options and helpers of
 * kube_debug_common.c. Calls go one way: entry -> actions -> common. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/kube/rest.h"

struct dbg_opts {
	char *ns, *label, *field, *rv, *transform, *propagation, *pre_uid, *pre_rv, *group, *out,
	    *identity;
	bool cluster_scoped, quiet;
	bool ignore_daemonsets, delete_emptydir, force, dry_run; /* drain */
	long long limit, count, watch_timeout, grace, max_event, parallel;
	int64_t duration, resync, eviction_retry;
};
extern struct dbg_opts dbg;

/* kube_debug_common.c */
int dbg_resource(const char *spec, struct kube_resource *ret);
void dbg_ref(struct kube_client *kc, const struct kube_resource *res, const char *arg,
	     struct kube_ref *ref, char *buf, size_t n);
int dbg_fail(int r, const struct kube_status *st, const char *what);
void dbg_print(const cJSON *v);

/* kube_debug_rest.c: the REST actions (args: the words after RES) */
int dbg_get(struct kube_client *kc, const struct kube_resource *res, char **args);
int dbg_list(struct kube_client *kc, const struct kube_resource *res);
int dbg_write(struct kube_client *kc, const struct kube_resource *res, const char *file,
	      bool update);
int dbg_conflict(struct kube_client *kc, const struct kube_resource *res, const char *arg);
int dbg_patch(struct kube_client *kc, const struct kube_resource *res, char **args);
int dbg_delete(struct kube_client *kc, const struct kube_resource *res, const char *arg,
	       bool evict);
int dbg_review(struct kube_client *kc, char **args, int n, bool token);
int dbg_raw(struct kube_client *kc, const char *path);

/* kube_debug_run.c: the long-running actions */
int dbg_watch(struct kube_client *kc, const struct kube_resource *res);
int dbg_informer(struct kube_client *kc, const struct kube_resource *res);
int dbg_sync(struct kube_client *kc, const char *resources);
int dbg_leader(struct kube_client *kc);
int dbg_event(struct kube_client *kc, const struct kube_resource *res, char **args);

/* kube_debug_drain.c: node actions (common/kube/drain.h) */
int dbg_drain(struct kube_client *kc, const char *node);
int dbg_cordon(struct kube_client *kc, const char *node, bool on);
int dbg_taint(struct kube_client *kc, const char *node, const char *spec);
int dbg_label(struct kube_client *kc, const char *node, const char *spec);
