/* The AWSCluster controller, its Kubernetes side (controllers/awscluster_controller.go): the
 * informer and the queue, the owner Cluster, the pause, the finalizer, the order of the
 * infrastructure steps, and the writes of spec.network (the persisted defaults CAPA keeps
 * there), status (ready, conditions, failureDomains, networkStatus). A write happens only when
 * something changed: a second reconcile of an unchanged cluster writes nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/informer.h"
#include "common/kube/store.h"
#include "modules/capa/capa_cluster.h"

struct capa_cluster_ctl {
	struct capa_ctx *x;
	struct controller *c;
};

static void queue_obj(struct capa_cluster_ctl *cc, const cJSON *obj)
{
	char key[KUBE_KEY_MAX];

	if (kube_obj_key(obj, key, sizeof(key)) == 0)
		controller_add(cc->c, key);
	for (size_t i = 0; i < cc->x->n_cluster_watches; i++)
		cc->x->cluster_watches[i].fn(cc->x->cluster_watches[i].ud, obj);
}

static void on_add(void *ud, const cJSON *obj)
{
	queue_obj(ud, obj);
}

/* Whether an update can change what the reconcile does: not when only status (and the
 * resourceVersion) moved, which the reconcile's own status write causes (the periodic
 * --sync-period requeue covers the rest). */
static bool relevant(const cJSON *old, const cJSON *obj)
{
	static const char *const paths[] = {
	    "metadata.generation", "metadata.annotations",	 "metadata.labels",
	    "metadata.finalizers", "metadata.deletionTimestamp", "metadata.ownerReferences",
	    "spec",
	};
	if (!old || old == obj)
		return true; /* a resync or a relist: the queue drops duplicates */
	for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
		const cJSON *a = json_find(old, paths[i]), *b = json_find(obj, paths[i]);
		if (!a != !b || (a && !cJSON_Compare(a, b, true)))
			return true;
	}
	return false;
}

static void on_update(void *ud, const cJSON *old, const cJSON *obj)
{
	struct capa_cluster_ctl *cc = ud;

	if (relevant(old, obj)) {
		queue_obj(cc, obj);
		return;
	}
	/* the watchers still see the new status (a cluster that became ready) */
	for (size_t i = 0; i < cc->x->n_cluster_watches; i++)
		cc->x->cluster_watches[i].fn(cc->x->cluster_watches[i].ud, obj);
}

static void on_delete(void *ud, const cJSON *obj)
{
	struct capa_cluster_ctl *cc = ud;
	for (size_t i = 0; i < cc->x->n_cluster_watches; i++)
		cc->x->cluster_watches[i].fn(cc->x->cluster_watches[i].ud, obj);
}

/* Keeps only the objects of --watch-filter (when set). */
static cJSON *filter(void *ud, cJSON *obj)
{
	struct capa_ctx *x = ud;
	const cJSON *labels = json_find(obj, "metadata.labels");
	const char *v = labels ? json_str_key(labels, CAPA_WATCH_LABEL) : NULL;

	if (x->watch_filter && (!v || strcmp(v, x->watch_filter) != 0)) {
		cJSON_Delete(obj);
		return NULL;
	}
	return obj;
}

/* ---- writes ---- */

/* A merge patch of one top-level part ("spec" or "status") when it differs from the stored
 * object's. */
static int write_part(struct capa_scope *s, const cJSON *stored, const char *part,
		      const char *sub)
{
	const cJSON *now = cJSON_GetObjectItemCaseSensitive(s->obj, part);
	const cJSON *was = cJSON_GetObjectItemCaseSensitive(stored, part);
	struct kube_status st;
	char *text;
	int r;

	if (!now || cJSON_Compare(now, was, true))
		return 0;
	cJSON *patch = cJSON_CreateObject();
	if (!patch || !cJSON_AddItemToObject(patch, part, cJSON_Duplicate(now, true))) {
		cJSON_Delete(patch);
		return -ENOMEM;
	}
	text = cJSON_PrintUnformatted(patch);
	cJSON_Delete(patch);
	if (!text)
		return -ENOMEM;
	r = kube_patch(s->x->kc,
		       KUBE_REF_SUB(&capa_awsclusters, json_str(stored, "metadata.namespace"),
				    json_str(stored, "metadata.name"), sub),
		       KUBE_PATCH_MERGE, text, NULL, &st);
	free(text);
	if (r < 0)
		log_error("cannot write the AWSCluster", KV_S("part", part),
			  KV_S("name", json_str(stored, "metadata.name")), KV_S("error", st.message),
			  KV_E(r));
	return r;
}

/* failureDomains: one per zone of a private subnet, control-plane capable (CAPA); the zones of
 * the public subnets when there is no private one (a WithoutNAT layout, a public-only
 * bring-your-own VPC), where CAPA would give none. */
static void failure_domains(struct capa_scope *s)
{
	cJSON *st = capa_scope_status(s), *fd = cJSON_CreateObject();
	const cJSON *sn, *subnets = json_find(s->obj, "spec.network.subnets");
	bool public_only = true;

	if (!st || !fd) {
		cJSON_Delete(fd);
		return;
	}
	cJSON_ArrayForEach(sn, subnets)
		public_only &= cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sn, "isPublic"));
	cJSON_ArrayForEach(sn, subnets)
	{
		bool pub = false;
		const char *az = json_str(sn, "availabilityZone");
		json_get_bool(sn, "isPublic", &pub);
		if (!az || pub != public_only || cJSON_GetObjectItemCaseSensitive(fd, az))
			continue;
		cJSON *d = cJSON_AddObjectToObject(fd, az);
		if (d)
			cJSON_AddBoolToObject(d, "controlPlane", true);
	}
	json_put(st, "failureDomains", fd);
}

/* ---- reconcile ---- */

static int reconcile_normal(struct capa_scope *s, int64_t *requeue)
{
	int r;

	if ((r = capa_net_reconcile(s)) < 0 || (r = capa_sg_reconcile(s)) < 0 ||
	    (r = capa_bastion_reconcile(s)) < 0 || (r = capa_lb_reconcile(s)) < 0) {
		*requeue = 0;
		capa_cluster_ready_false(s);
		return r;
	}
	failure_domains(s);
	cJSON *st = capa_scope_status(s);
	if (!st)
		return -ENOMEM;
	json_set_bool(st, "ready", true);
	capa_condition_set(st, "Ready", "True", NULL, NULL, NULL);
	return 0;
}

/* 1 (requeue in 20 s) while AWSMachines of the cluster are left, as CAPA. */
static int reconcile_delete(struct capa_scope *s, int64_t *requeue)
{
	int r;

	if ((r = capa_gc_machines_left(s)) > 0) {
		log_info("Cluster still has dependencies - requeue needed", KV_S("cluster", s->name));
		*requeue = 20 * NSEC_PER_SEC;
		return 1;
	}
	/* CAPA's order: the API load balancer, the ccm's load balancers and groups, the bastion,
	 * security groups, then the network */
	if (r < 0 || (r = capa_lb_delete(s)) < 0 || (r = capa_gc_delete(s)) < 0 ||
	    (r = capa_bastion_delete(s)) < 0 || (r = capa_sg_delete(s)) < 0 ||
	    (r = capa_net_delete(s)) < 0)
		return r;
	return 0;
}

static int reconcile(void *ud, const char *key, int64_t *requeue_after_ns)
{
	struct capa_cluster_ctl *cc = ud;
	struct capa_ctx *x = cc->x;
	struct kube_obj *o = NULL;
	cJSON *cluster = NULL;
	struct capa_scope s = {.x = x};
	int r;

	if (kube_store_get(kube_informer_store(x->awsclusters), key, &o) < 0)
		return 0; /* gone */
	const cJSON *stored = o->json;
	bool deleting = json_find(stored, "metadata.deletionTimestamp") != NULL;

	r = capa_owner_cluster(x, stored, &cluster);
	if (r == -ENOENT && !deleting) {
		log_info("Cluster Controller has not yet set OwnerRef", KV_S("awscluster", key));
		r = 0;
		goto out;
	}
	if (r < 0 && !(r == -ENOENT && deleting)) {
		log_error("cannot get the owner Cluster", KV_S("awscluster", key), KV_E(r));
		goto out;
	}
	if (capa_is_paused(cluster, stored)) {
		log_info("AWSCluster or linked Cluster is marked as paused; not reconciling",
			 KV_S("awscluster", key));
		r = 0;
		goto out;
	}
	if (!controllers_may_act(&x->run)) {
		r = -ECANCELED;
		goto out;
	}
	if (!(s.obj = cJSON_Duplicate(stored, true))) {
		r = -ENOMEM;
		goto out;
	}
	s.cluster = cluster;
	s.name = cluster ? json_str(cluster, "metadata.name") : json_str(stored, "metadata.name");
	s.region = json_str(stored, "spec.region");
	if (!s.name) {
		r = -EINVAL;
		goto out;
	}
	if (deleting) {
		if (!capa_has_finalizer(stored, CAPA_CLUSTER_FINALIZER)) {
			r = 0;
			goto out;
		}
		log_info("reconciling AWSCluster delete", KV_S("awscluster", key),
			 KV_S("cluster", s.name));
		if ((r = reconcile_delete(&s, requeue_after_ns)) < 0) {
			log_error("cannot delete the cluster's infrastructure",
				  KV_S("awscluster", key), KV_S("error", s.err), KV_E(r));
			write_part(&s, stored, "status", "status");
			goto out;
		}
		if (r > 0) {
			r = 0;
			goto out;
		}
		r = capa_finalizer_remove(x, &capa_awsclusters, stored, CAPA_CLUSTER_FINALIZER);
		if (r == 0)
			log_info("AWSCluster infrastructure deleted", KV_S("awscluster", key));
		goto out;
	}
	if (!capa_has_finalizer(stored, CAPA_CLUSTER_FINALIZER)) {
		/* the next reconcile (the update event) goes on */
		r = capa_finalizer_add(x, &capa_awsclusters, stored, CAPA_CLUSTER_FINALIZER);
		goto out;
	}
	int rr = reconcile_normal(&s, requeue_after_ns);
	if (rr < 0)
		log_error("cannot reconcile the cluster's infrastructure", KV_S("awscluster", key),
			  KV_S("error", s.err), KV_E(rr));
	/* the spec first: what was created is recorded even when a later step failed */
	if (s.spec_changed && (r = write_part(&s, stored, "spec", NULL)) < 0)
		goto out;
	if ((r = write_part(&s, stored, "status", "status")) < 0)
		goto out;
	r = rr;
	if (r == 0)
		*requeue_after_ns = x->sync_period_ns;
out:
	cJSON_Delete(s.obj);
	cJSON_Delete(cluster);
	kube_obj_unref(o);
	return r;
}

/* Events of the informer's first list arrive before the controller runs: every AWSCluster in
 * the synced store is queued here (a restart resumes what it was doing). */
static int cluster_start(struct controller *c)
{
	struct capa_cluster_ctl *cc = c->ud;
	char **keys = NULL;
	int r = kube_store_keys(kube_informer_store(cc->x->awsclusters), &keys);

	if (r < 0)
		return r;
	for (char **k = keys; k && *k; k++)
		controller_add(c, *k);
	log_info("awscluster controller started", KV_U("awsclusters", strv_len(keys)));
	strv_free(keys);
	return 0;
}

int capa_cluster_controller_start(struct capa_ctx *x)
{
	struct capa_cluster_ctl *cc = calloc(1, sizeof(*cc));
	int r;

	if (!cc)
		return -ENOMEM;
	cc->x = x;
	x->cluster_state = cc;
	r = capa_controller_add(
	    x,
	    &(struct controller){
		.name = "awscluster",
		.reconcile = reconcile,
		.start = cluster_start,
		.ud = cc,
		.workers = x->cluster_workers,
		/* failures retry from 1 s, doubling up to 5 minutes */
		.queue = {.base_delay_ns = NSEC_PER_SEC, .max_delay_ns = 300 * NSEC_PER_SEC},
	    },
	    &cc->c);
	if (r < 0)
		return r;
	struct kube_informer_opts io = {
	    .res = &capa_awsclusters,
	    .ns = x->namespace,
	    .transform = filter,
	    .transform_ud = x,
	    .handlers = {.on_add = on_add, .on_update = on_update, .on_delete = on_delete, .ud = cc},
	    .name = "awsclusters",
	    .cancel = x->cancel,
	};
	if ((r = kube_informer_new(x->kc, &io, &x->awsclusters)) < 0)
		return r;
	cc->c->informers[0] = x->awsclusters;
	return 0;
}

void capa_cluster_controller_stop(struct capa_ctx *x)
{
	kube_informer_free(x->awsclusters);
	x->awsclusters = NULL;
	free(x->cluster_state);
	x->cluster_state = NULL;
}
