/* kube-debug internals shared by its two files. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/kube/rest.h"

struct dbg_opts {
	char *ns, *label, *field, *rv, *transform, *propagation, *pre_uid, *pre_rv, *group, *out,
	    *identity;
	bool cluster_scoped, quiet;
	long long limit, count, watch_timeout, grace, max_event;
	int64_t duration, resync;
};
extern struct dbg_opts dbg;

int dbg_resource(const char *spec, struct kube_resource *ret);
void dbg_ref(struct kube_client *kc, const struct kube_resource *res, const char *arg,
	     struct kube_ref *ref, char *buf, size_t n);
int dbg_fail(int r, const struct kube_status *st, const char *what);
void dbg_print(const cJSON *v);

int dbg_watch(struct kube_client *kc, const struct kube_resource *res);
int dbg_informer(struct kube_client *kc, const struct kube_resource *res);
int dbg_sync(struct kube_client *kc, const char *resources);
int dbg_leader(struct kube_client *kc);
int dbg_event(struct kube_client *kc, const struct kube_resource *res, char **args);
