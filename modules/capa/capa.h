/* aws-k8s capa: Cluster API Provider AWS's controller manager (infrastructure.cluster.x-k8s.io,
 * v1beta2). This header is the module's contract: capa.c (flags, wiring, the table of
 * controllers), the AWSCluster controller (capa_cluster*.c, capa_net*.c, capa_sg.c) and the
 * AWSMachine controller share it.
 *
 * The controllers: each one has a start function in capa_controllers[] (capa.c), called once
 * the clients exist and before controllers_run. A start function adds its row(s) with
 * capa_controller_add(), creates the informers its reconcile reads (handlers queue keys into its
 * row: the row's address is stable), and may subscribe to AWSCluster changes with
 * capa_cluster_watch():
 *
 *   int capa_machine_controller_start(struct capa_ctx *x)
 *   {
 *           struct controller *c;
 *           int r = capa_controller_add(x, &(struct controller){
 *                   .name = "awsmachine", .reconcile = machine_reconcile, .ud = x,
 *                   .workers = x->machine_workers, ...}, &c);
 *           ...  create the AWSMachine informer (handlers: controller_add(c, key)),
 *           c->informers[0] = inf; c->informers[1] = x->awsclusters;
 *   }
 *
 * Registration point: the row { "awsmachine", capa_machine_controller_start } of
 * capa_controllers[] in capa.c. */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/aws/client.h"
#include "common/base/buf.h"
#include "common/kube/controller.h"
#include "common/kube/rest.h"
#include "modules/capa/capa_throttle.h"

#define CAPA_MAX_CONTROLLERS 8
#define CAPA_MAX_CLUSTER_WATCHES 4

/* API objects. */
extern const struct kube_resource capa_awsclusters, capa_awsmachines, capa_clusters,
    capa_machines;

#define CAPA_INFRA_GROUP "infrastructure.cluster.x-k8s.io"
#define CAPA_CLUSTER_FINALIZER "awscluster.infrastructure.cluster.x-k8s.io"
#define CAPA_MACHINE_FINALIZER "awsmachine.infrastructure.cluster.x-k8s.io"
#define CAPA_PAUSED_ANNOTATION "cluster.x-k8s.io/paused"
#define CAPA_CLUSTER_NAME_LABEL "cluster.x-k8s.io/cluster-name"
#define CAPA_WATCH_LABEL "cluster.x-k8s.io/watch-filter"
/* AWS tags (api/v1beta2/tags.go) */
#define CAPA_TAG_CLUSTER_PREFIX "sigs.k8s.io/cluster-api-provider-aws/cluster/"
#define CAPA_TAG_ROLE "sigs.k8s.io/cluster-api-provider-aws/role"
#define CAPA_TAG_K8S_CLUSTER_PREFIX "kubernetes.io/cluster/"

typedef void (*capa_cluster_watch_fn)(void *ud, const cJSON *awscluster);

struct capa_ctx {
	struct kube_client *kc;
	struct aws_client *aws;
	struct cancel *cancel; /* the run's: cancelled on SIGTERM */

	/* settings (flags) */
	const char *namespace;	  /* --namespace; NULL: every namespace */
	const char *watch_filter; /* --watch-filter: only objects labelled with it */
	int64_t sync_period_ns;	  /* --sync-period: each object is reconciled again after it */
	int cluster_workers;	  /* --awscluster-concurrency */
	int machine_workers;	  /* --awsmachine-concurrency */
	char **feature_gates;	  /* --feature-gates "Name=true" */

	/* The AWSCluster informer (started with the cluster controller): readable by every
	 * controller that lists it in its row. */
	struct kube_informer *awsclusters;
	struct {
		capa_cluster_watch_fn fn;
		void *ud;
	} cluster_watches[CAPA_MAX_CLUSTER_WATCHES];
	size_t n_cluster_watches;

	struct controller ctls[CAPA_MAX_CONTROLLERS];
	size_t n_ctls;
	struct controllers run;
	void *cluster_state; /* the cluster controller's own */
	/* CAPA's token buckets (capa_throttle.h), one set shared by both controllers: every
	 * AWS call goes through capa_aws_do */
	struct capa_limiter lim;
};

/* Adds a row to the table (copied); *ret (when not NULL) is its stable address. -ENOSPC when
 * the table is full. */
int capa_controller_add(struct capa_ctx *x, const struct controller *c, struct controller **ret);
/* fn is called on the informer's thread for every AWSCluster added, changed or deleted (e.g. to
 * queue the AWSMachines of a cluster that became ready). -ENOSPC past the cap. */
int capa_cluster_watch(struct capa_ctx *x, capa_cluster_watch_fn fn, void *ud);
/* A feature gate's value (--feature-gates), or def when not given. */
bool capa_feature(const struct capa_ctx *x, const char *name, bool def);

/* The controllers' start functions (the rows of capa_controllers[] in capa.c). */
int capa_cluster_controller_start(struct capa_ctx *x);
int capa_machine_controller_start(struct capa_ctx *x);
void capa_cluster_controller_stop(struct capa_ctx *x);
void capa_machine_controller_stop(struct capa_ctx *x);

/* ---- helpers both controllers use (capa_util.c) ---- */

/* One EC2 Query call in region (NULL: the client's), on the run's token. */
int capa_ec2(struct capa_ctx *x, const char *region, const char *action,
	     const struct aws_query *q, struct aws_reply *ret, struct aws_error *err);
/* The same for another Query service (ELB, ELBv2). */
/* aws_do through x->lim: waits for a token of the call's family, and a throttling reply
 * empties that family's bucket. */
int capa_aws_do(struct capa_ctx *x, const struct aws_request *rq, struct aws_reply *ret,
		struct aws_error *err);
int capa_call(struct capa_ctx *x, enum aws_service svc, const char *region, const char *action,
	      const struct aws_query *q, struct aws_reply *ret, struct aws_error *err);

/* A set of tags, kept sorted by key (CAPA sends them sorted). */
#define CAPA_MAX_TAGS 64
struct capa_tags {
	char *key[CAPA_MAX_TAGS];
	char *value[CAPA_MAX_TAGS];
	size_t n;
};
/* Sets key=value (replacing). -E2BIG past CAPA_MAX_TAGS, -ENOMEM. */
int capa_tags_set(struct capa_tags *t, const char *key, const char *value);
void capa_tags_release(struct capa_tags *t);
/* CAPA's tags for a resource of cluster c: the spec's additionalTags (JSON object, may be NULL),
 * then the owned tag, the role and the Name (CAPA's keys win). */
int capa_tags_build(struct capa_tags *t, const cJSON *additional, const char *cluster,
		    const char *role, const char *name);
/* TagSpecification.<idx>.ResourceType=type with the tags. */
int capa_query_tagspec(struct aws_query *q, int idx, const char *type, const struct capa_tags *t);

/* The owner Cluster (cluster.x-k8s.io) named in obj's ownerReferences: 0 with *ret (free it),
 * -ENOENT when obj has no such owner yet, -errno from the API. */
int capa_owner_cluster(struct capa_ctx *x, const cJSON *obj, cJSON **ret);
/* CAPI's pause: the Cluster's spec.paused or the paused annotation on either object. */
bool capa_is_paused(const cJSON *cluster, const cJSON *obj);

/* CAPI v1beta1 conditions in status.conditions: sets one (type, "True"/"False", severity
 * "" / "Info" / "Warning" / "Error", reason, message), keeping lastTransitionTime when the
 * status does not change. Returns 1 when something changed, 0 when not, -ENOMEM. */
int capa_condition_set(cJSON *status, const char *type, const char *st, const char *severity,
		       const char *reason, const char *message);
/* The status of a condition ("True", "False", "Unknown") or NULL. */
const char *capa_condition_status(const cJSON *obj, const char *type);

/* Finalizers: adds or removes name with a JSON patch guarded by the resourceVersion (a conflict
 * is -KUBE_ECONFLICT: retried by the queue). 0 also when there was nothing to do. */
int capa_finalizer_add(struct capa_ctx *x, const struct kube_resource *res, const cJSON *obj,
		       const char *name);
int capa_finalizer_remove(struct capa_ctx *x, const struct kube_resource *res,
			  const cJSON *obj, const char *name);
bool capa_has_finalizer(const cJSON *obj, const char *name);

/* str_copy of a text that may be absent (NULL: ""), truncating. */
static inline void capa_strcpy(char *dst, size_t n, const char *src)
{
	str_copy(dst, n, src ? src : "");
}

int capa_main(int argc, char **argv);
