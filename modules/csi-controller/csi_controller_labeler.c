/* `aws-k8s ebs-csi-driver metadataLabeler`: the upstream driver's metadataLabeler mode
 * (pkg/cloud/metadata/labels.go), on the project's controller contract (common/kube/
 * controller.h). One controller, "metadata-labeler", under leader election on the Lease
 * metadata-labeler-<driver name>:
 *
 *   key "#all"     the periodic pass (at once, then every --metadata-labeler-interval, 60 min
 *                  as upstream): every Node of the informer's store whose providerID names an
 *                  instance, all of them described by one paged DescribeInstances (a filter of
 *                  up to LABELER_ID_CHUNK ids per call, MaxResults 1000: one call per page
 *                  whatever the number of Nodes); the counts of each go to `wanted` and its
 *                  name is queued;
 *   key <node>     patches the Node's two labels when they differ from its counts: those of the
 *                  last pass, or (a Node added, or given its providerID, since) its instance
 *                  described alone through the controller's batcher, so that Nodes that join
 *                  together share calls.
 *
 * LABELER_WORKERS workers patch, as upstream's 10. A failed patch is retried with the queue's
 * backoff; a pass that sees LABELER_PATCH_FAILS of its patches fail logs upstream's error
 * (upstream then stops labelling until restarted; here every Node keeps being retried).
 * Nodes without an instance id, or whose instance EC2 does not know, are left alone (upstream
 * gives them 0 and 0).
 *
 * RBAC (upstream's ebs-metadata-labeler-role, plus what our informers need): nodes get, list,
 * watch, patch; persistentvolumes list, watch; coordination.k8s.io leases get, create, update
 * in the Lease's namespace. IAM: ec2:DescribeInstances. */
#include "modules/csi-controller/csi_controller_labeler.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/batch.h"
#include "common/aws/client.h"
#include "common/aws/ids.h"
#include "common/aws/query.h"
#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/flags.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/csi/plugin.h"
#include "common/kube/controller.h"
#include "common/kube/informer.h"
#include "common/kube/kmap.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"
#include "modules/csi-controller/csi_controller.h"
#include "modules/csi-controller/csi_controller_internal.h"

#define LABELER_ALL "#all" /* the pass's key: '#' is in no Node name */
#define LABELER_WORKERS 10
#define LABELER_PATCH_FAILS 5
#define LABELER_ID_CHUNK 200 /* values of one DescribeInstances filter */
#define LABELER_PAGE "1000"  /* MaxResults */
#define LABELER_MAX_FLAGS 96

static const char labeler_usage[] =
    "The upstream driver's metadataLabeler mode (the controller Deployment's metadata-labeler\n"
    "sidecar): while it holds the Lease metadata-labeler-<driver name>, it labels every Node\n"
    "whose providerID names an EC2 instance with <driver name>/enis-count (its network\n"
    "interfaces) and <driver name>/non-csi-ebs-volumes-count (its EBS volumes that are not the\n"
    "volume of a PersistentVolume of the driver or an in-tree awsElasticBlockStore one, less\n"
    "the root volume), for csi-node's --metadata-sources=metadata-labeler. All Nodes at start\n"
    "and every --metadata-labeler-interval (one DescribeInstances per page of instances), and\n"
    "each Node as it joins. The region, credentials and EC2 endpoint come as csi-controller's\n"
    "(AWS_REGION, else --metadata-sources); the controller's flags are accepted, and those\n"
    "that serve (--endpoint, --http-endpoint) have no effect here.\n\n"
    "RBAC: nodes get/list/watch/patch, persistentvolumes list/watch, leases get/create/update\n"
    "in the Lease's namespace. IAM: ec2:DescribeInstances.";

static bool f_le = true;
static char *f_le_ns;
static int64_t f_le_lease, f_le_renew, f_le_retry, f_interval;

static const struct flag labeler_own_flags[] = {
    {"leader-election", FLAG_BOOL, &f_le, "true", NULL,
     "(aws-k8s) Label only while holding the Lease metadata-labeler-<driver name> (upstream "
     "always does)."},
    {"leader-election-namespace", FLAG_STRING, &f_le_ns, NULL, NULL,
     "(aws-k8s) The Lease's namespace; default the pod's (as upstream)."},
    {"leader-election-lease-duration", FLAG_DURATION, &f_le_lease, "15s", NULL,
     "(aws-k8s) How long a standby waits for an unrenewed Lease."},
    {"leader-election-renew-deadline", FLAG_DURATION, &f_le_renew, "10s", NULL,
     "(aws-k8s) How long the leader retries renewing before it stops labelling."},
    {"leader-election-retry-period", FLAG_DURATION, &f_le_retry, "5s", NULL,
     "(aws-k8s) The interval between tries to take or renew the Lease."},
    {"metadata-labeler-interval", FLAG_DURATION, &f_interval, "60m", NULL,
     "(aws-k8s) How often every Node is labelled again (upstream: 60 minutes)."},
    {NULL},
};

struct labeler {
	struct csi_ctrl *ctrl; /* its AWS client, and its instance batcher */
	const char *driver;
	char enis_key[CSI_LABEL_KEY_MAX], volumes_key[CSI_LABEL_KEY_MAX];
	struct kube_client *kc;
	struct kube_informer *nodes, *pvs;
	struct controller ctl;
	struct controllers run;
	pthread_mutex_t lock; /* guards what follows */
	struct kmap wanted;   /* node name -> struct csi_labeler_counts * of the last pass */
	int failures;	      /* patches of the last pass that failed */
};

/* ---- the counting rule ---------------------------------------------------------------- */

const char *csi_labeler_pv_volume(const cJSON *pv, const char *driver)
{
	const char *d = json_str(pv, "spec.csi.driver"), *h = json_str(pv, "spec.csi.volumeHandle");
	const char *intree = json_str(pv, "spec.awsElasticBlockStore.volumeID");

	if (d && h && *h && (!driver || strcmp(d, driver) == 0))
		return h;
	if (intree) {
		const char *slash = strrchr(intree, '/');
		const char *id = slash ? slash + 1 : intree;
		if (*id)
			return id;
	}
	return NULL;
}

int csi_labeler_count_instance(const xmlNode *item, csi_labeler_is_pv_fn is_pv, void *ud,
			       struct csi_labeler_counts *ret)
{
	size_t enis = aws_xml_count(item, "networkInterfaceSet"), mappings = 0, pvs = 0;

	if (!aws_xml_text(item, "instanceId"))
		return -EBADMSG;
	for (xmlNode *m = aws_xml_list(item, "blockDeviceMapping"); m; m = aws_xml_next(m)) {
		const char *vol = aws_xml_text(m, "ebs/volumeId");
		mappings++;
		if (vol && *vol && is_pv && is_pv(ud, vol))
			pvs++;
	}
	enis = enis ? enis : 1;
	size_t volumes = mappings - pvs > 0 ? mappings - pvs - 1 : 0;
	*ret = (struct csi_labeler_counts){
	    .enis = enis > CSI_LABEL_MAX_COUNT ? CSI_LABEL_MAX_COUNT : (int)enis,
	    .volumes = volumes > CSI_LABEL_MAX_COUNT ? CSI_LABEL_MAX_COUNT : (int)volumes};
	return 0;
}

/* ---- the informers -------------------------------------------------------------------- */

static cJSON *node_transform(void *ud, cJSON *obj)
{
	static const char *const keep[] = {"metadata.labels", "spec.providerID", NULL};
	cJSON *p = kube_project(obj, keep);
	cJSON_Delete(obj);
	(void)ud;
	return p;
}

/* Only the PersistentVolumes of the driver (and in-tree EBS ones), reduced to their volume. */
static cJSON *pv_transform(void *ud, cJSON *obj)
{
	static const char *const keep[] = {"spec.csi.driver", "spec.csi.volumeHandle",
					   "spec.awsElasticBlockStore.volumeID", NULL};
	struct labeler *l = ud;
	cJSON *p = csi_labeler_pv_volume(obj, l->driver) ? kube_project(obj, keep) : NULL;
	cJSON_Delete(obj);
	return p;
}

static size_t pv_index(const cJSON *obj, const char **out, size_t max)
{
	const char *v = csi_labeler_pv_volume(obj, NULL); /* the transform kept the driver's */
	if (!v || max == 0)
		return 0;
	out[0] = v;
	return 1;
}

static const struct kube_indexer pv_indexers[] = {{"volume", pv_index}};

static bool is_pv(void *ud, const char *volume_id)
{
	struct labeler *l = ud;
	struct kube_obj **objs = NULL;
	size_t n = 0;

	if (kube_store_by_index(kube_informer_store(l->pvs), "volume", volume_id, &objs, &n) < 0)
		return false;
	kube_objv_free(objs, n);
	return n > 0;
}

static void forget(struct labeler *l, const char *name)
{
	pthread_mutex_lock(&l->lock);
	free(kmap_remove(&l->wanted, name));
	pthread_mutex_unlock(&l->lock);
}

static void node_added(void *ud, const cJSON *obj)
{
	struct labeler *l = ud;
	const char *name = json_str(obj, "metadata.name");

	if (!name)
		return;
	forget(l, name); /* a Node of that name before: its counts are not this one's */
	controller_add(&l->ctl, name);
}

/* A Node registered without a providerID gets it later (from the cloud controller manager). */
static void node_updated(void *ud, const cJSON *old, const cJSON *obj)
{
	struct labeler *l = ud;
	const char *a = json_str(old, "spec.providerID"), *b = json_str(obj, "spec.providerID");
	const char *name = json_str(obj, "metadata.name");

	if (name && b && (!a || strcmp(a, b) != 0))
		controller_add(&l->ctl, name);
}

static void node_deleted(void *ud, const cJSON *obj)
{
	const char *name = json_str(obj, "metadata.name");
	if (name)
		forget(ud, name);
}

/* ---- EC2 ------------------------------------------------------------------------------ */

struct page_ctx {
	struct labeler *l;
	struct kmap *found; /* instance id -> struct csi_labeler_counts * */
};

static int on_page(void *ud, const struct aws_reply *page)
{
	struct page_ctx *pc = ud;

	for (xmlNode *rs = aws_xml_list(page->result, "reservationSet"); rs; rs = aws_xml_next(rs))
		for (xmlNode *i = aws_xml_list(rs, "instancesSet"); i; i = aws_xml_next(i)) {
			struct csi_labeler_counts *k = malloc(sizeof(*k)), *old = NULL;
			if (!k)
				return -ENOMEM;
			if (csi_labeler_count_instance(i, is_pv, pc->l, k) < 0) {
				free(k);
				continue;
			}
			if (kmap_put(pc->found, aws_xml_text(i, "instanceId"), k, (void **)&old) <
			    0) {
				free(k);
				return -ENOMEM;
			}
			free(old);
		}
	return 0;
}

/* The counts of n instances into found: DescribeInstances filtered by instance id,
 * LABELER_ID_CHUNK ids a call, every page. Unknown ids are simply absent. */
static int describe(struct labeler *l, const char *const *ids, size_t n, struct kmap *found)
{
	struct page_ctx pc = {l, found};
	struct aws_paginate p = {
	    .token_param = "NextToken", .reply_field = "nextToken", .on_page = on_page, .ud = &pc};
	int r = 0;

	for (size_t off = 0; off < n && r >= 0; off += LABELER_ID_CHUNK) {
		size_t k = n - off < LABELER_ID_CHUNK ? n - off : LABELER_ID_CHUNK;
		struct aws_query q = AWS_QUERY_INIT;
		struct aws_error err = {0};
		char msg[512];
		if ((r = aws_query_add_filter(&q, "instance-id", ids + off, k)) >= 0 &&
		    (r = aws_query_add(&q, "MaxResults", LABELER_PAGE)) >= 0)
			r = aws_paginate_query(l->ctrl->aws, AWS_SVC_EC2, "DescribeInstances", &q,
					       &p, &err);
		if (r < 0)
			log_warn("DescribeInstances failed", KV_U("instances", k),
				 KV_S("error", aws_error_str(&err, msg, sizeof(msg))), KV_E(r));
		aws_query_release(&q);
	}
	return r;
}

/* One instance, through the controller's batcher (Nodes that join together share a call), or
 * alone with --batching=false. */
static int describe_one(struct labeler *l, const char *id, struct csi_labeler_counts *ret)
{
	struct aws_error err = {0};
	xmlDoc *doc = NULL;
	char msg[512];
	int r;

	if (!l->ctrl->batching || !l->ctrl->b_instances) { /* --batching=false */
		struct kmap found = KMAP_INIT;
		struct csi_labeler_counts *k;
		if ((r = describe(l, &id, 1, &found)) >= 0)
			r = (k = kmap_get(&found, id)) ? (*ret = *k, 0) : -ENOENT;
		kmap_clear(&found, free);
		return r;
	}
	if ((r = aws_batcher_get(l->ctrl->b_instances, id, &doc, &err)) < 0) {
		if (r != -ENOENT)
			log_warn("DescribeInstances failed", KV_S("instance", id),
				 KV_S("error", aws_error_str(&err, msg, sizeof(msg))), KV_E(r));
		return r;
	}
	r = csi_labeler_count_instance(xmlDocGetRootElement(doc), is_pv, l, ret);
	xmlFreeDoc(doc);
	return r;
}

/* ---- the reconcile -------------------------------------------------------------------- */

static int node_instance(const cJSON *node, char id[AWS_EC2_ID_MAX + 1])
{
	return csi_labeler_instance_id(json_str(node, "spec.providerID"), id, AWS_EC2_ID_MAX + 1);
}

static int pass(struct labeler *l)
{
	struct kube_obj **nodes = NULL;
	struct kmap found = KMAP_INIT;
	size_t n = 0, k = 0, queued = 0;
	char(*ids)[AWS_EC2_ID_MAX + 1] = NULL;
	const char **idv = NULL;
	int64_t t0 = now_mono_ns();
	int r;

	if ((r = kube_store_list(kube_informer_store(l->nodes), &nodes, &n)) < 0)
		return r;
	if (n && (!(ids = calloc(n, sizeof(*ids))) || !(idv = calloc(n, sizeof(*idv))))) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (node_instance(nodes[i]->json, ids[i]) == 0)
			idv[k++] = ids[i];
	if ((r = describe(l, idv, k, &found)) < 0)
		goto out;
	pthread_mutex_lock(&l->lock);
	l->failures = 0;
	for (size_t i = 0; i < n && r >= 0; i++) {
		const char *name = json_str(nodes[i]->json, "metadata.name");
		struct csi_labeler_counts *c = ids[i][0] ? kmap_get(&found, ids[i]) : NULL, *dup,
					  *old;
		if (!name || !c)
			continue;
		if (!(dup = malloc(sizeof(*dup)))) {
			r = -ENOMEM;
			break;
		}
		*dup = *c;
		old = NULL;
		if ((r = kmap_put(&l->wanted, name, dup, (void **)&old)) < 0)
			free(dup);
		free(old);
		queued++;
	}
	pthread_mutex_unlock(&l->lock);
	/* queued after the lock: a worker takes the names at once */
	for (size_t i = 0; i < n && r >= 0; i++) {
		const char *name = json_str(nodes[i]->json, "metadata.name");
		if (name && ids[i][0] && kmap_get(&found, ids[i]))
			controller_add(&l->ctl, name);
	}
	log_info("metadata labeler pass", KV_U("nodes", n), KV_U("instances", k),
		 KV_U("described", found.size), KV_U("queued", queued),
		 KV_I("ms", (now_mono_ns() - t0) / NSEC_PER_MSEC));
out:
	kmap_clear(&found, free);
	free(idv);
	free(ids);
	kube_objv_free(nodes, n);
	return r;
}

static bool labels_match(const cJSON *node, const struct labeler *l,
			 const struct csi_labeler_counts *k)
{
	const cJSON *labels = json_find(node, "metadata.labels");
	const char *e = labels ? json_str_key(labels, l->enis_key) : NULL;
	const char *v = labels ? json_str_key(labels, l->volumes_key) : NULL;
	char want_e[16], want_v[16];

	snprintf(want_e, sizeof(want_e), "%d", k->enis);
	snprintf(want_v, sizeof(want_v), "%d", k->volumes);
	return e && v && strcmp(e, want_e) == 0 && strcmp(v, want_v) == 0;
}

static int patch(struct labeler *l, const char *name, const struct csi_labeler_counts *k)
{
	struct kube_status st = {0};
	cJSON *p = cJSON_CreateObject(), *labels = NULL;
	char e[16], v[16], *text = NULL;
	int r = -ENOMEM;

	snprintf(e, sizeof(e), "%d", k->enis);
	snprintf(v, sizeof(v), "%d", k->volumes);
	cJSON *md = p ? cJSON_AddObjectToObject(p, "metadata") : NULL;
	if (md && (labels = cJSON_AddObjectToObject(md, "labels")) &&
	    cJSON_AddStringToObject(labels, l->enis_key, e) &&
	    cJSON_AddStringToObject(labels, l->volumes_key, v) &&
	    (text = cJSON_PrintUnformatted(p)))
		r = kube_patch(l->kc, KUBE_REF(&kube_nodes, NULL, name), KUBE_PATCH_MERGE, text,
			       NULL, &st);
	if (r < 0)
		log_warn("cannot patch the Node's labels", KV_S("node", name),
			 KV_S("reason", st.reason), KV_S("message", st.message), KV_E(r));
	else
		log_v(2, "Node labelled", KV_S("node", name), KV_I("enis", k->enis),
		      KV_I("volumes", k->volumes));
	cJSON_free(text);
	cJSON_Delete(p);
	return r;
}

static int label_node(struct labeler *l, const char *name)
{
	struct kube_obj *o = NULL;
	struct csi_labeler_counts k, *w;
	char id[AWS_EC2_ID_MAX + 1];
	int r;

	if (kube_store_get(kube_informer_store(l->nodes), name, &o) < 0) {
		forget(l, name);
		return 0;
	}
	if (node_instance(o->json, id) < 0) {
		log_v(4, "Node without an instance id in its providerID: not labelled",
		      KV_S("node", name));
		forget(l, name);
		r = 0;
		goto out;
	}
	pthread_mutex_lock(&l->lock);
	bool from_pass = (w = kmap_get(&l->wanted, name)) != NULL;
	if (from_pass)
		k = *w;
	pthread_mutex_unlock(&l->lock);
	if (!from_pass && (r = describe_one(l, id, &k)) < 0) {
		if (r == -ENOENT)
			log_v(2, "the Node's instance is unknown to EC2: not labelled",
			      KV_S("node", name), KV_S("instance", id));
		r = r == -ENOENT ? 0 : r;
		goto out;
	}
	if (!labels_match(o->json, l, &k)) {
		if (!controllers_may_act(&l->run)) {
			r = -ECANCELED;
			goto out;
		}
		if ((r = patch(l, name, &k)) < 0) {
			pthread_mutex_lock(&l->lock);
			if (from_pass && ++l->failures == LABELER_PATCH_FAILS)
				log_error(
				    "failed to patch the labels of several Nodes; retrying each",
				    KV_I("failed", LABELER_PATCH_FAILS));
			pthread_mutex_unlock(&l->lock);
			goto out;
		}
	}
	r = 0;
	pthread_mutex_lock(&l->lock);
	/* done with these counts, unless a newer pass replaced them meanwhile */
	if (from_pass && (w = kmap_get(&l->wanted, name)) && w->enis == k.enis &&
	    w->volumes == k.volumes)
		free(kmap_remove(&l->wanted, name));
	pthread_mutex_unlock(&l->lock);
out:
	kube_obj_unref(o);
	return r;
}

static int reconcile(void *ud, const char *key, int64_t *requeue_after_ns)
{
	struct labeler *l = ud;
	int r;

	if (strcmp(key, LABELER_ALL) != 0)
		return label_node(l, key);
	if ((r = pass(l)) < 0)
		*requeue_after_ns = 0; /* the queue's backoff, not the hour */
	return r;
}

/* ---- the command ---------------------------------------------------------------------- */

/* The controller's table, then the labeler's own rows. */
static int build_table(struct flag *out, size_t cap)
{
	size_t n = 0;

	for (const struct flag *f = csi_controller_flags; f->name; f++)
		if (n + 1 < cap)
			out[n++] = *f;
	for (const struct flag *f = labeler_own_flags; f->name; f++)
		if (n + 1 < cap)
			out[n++] = *f;
	out[n] = (struct flag){NULL};
	return n + 1 < cap ? 0 : -E2BIG;
}

static void labeler_release(struct labeler *l)
{
	kube_informer_free(l->nodes);
	kube_informer_free(l->pvs);
	kube_client_free(l->kc);
	kmap_clear(&l->wanted, free);
	pthread_mutex_destroy(&l->lock);
}

static int labeler_setup(struct labeler *l, char *lease, size_t lease_n)
{
	char err[512];
	int r;

	l->driver = csi_flags.driver_name && *csi_flags.driver_name ? csi_flags.driver_name
								    : CSI_DRIVER_NAME_DEFAULT;
	if (csi_labeler_key(l->driver, CSI_LABEL_ENIS, l->enis_key, sizeof(l->enis_key)) < 0 ||
	    csi_labeler_key(l->driver, CSI_LABEL_VOLUMES, l->volumes_key, sizeof(l->volumes_key)) <
		0 ||
	    str_printf(lease, lease_n, "metadata-labeler-%s", l->driver) < 0) {
		log_error("the driver name is too long for the labels", KV_S("driver", l->driver));
		return -ENAMETOOLONG;
	}
	if ((r = kube_client_from_flags("metadata-labeler", &l->kc, err, sizeof(err))) < 0) {
		log_error("cannot reach the Kubernetes API", KV_S("error", err), KV_E(r));
		return r;
	}
	struct kube_informer_opts no = {
	    .res = &kube_nodes,
	    .transform = node_transform,
	    .handlers = {.on_add = node_added,
			 .on_update = node_updated,
			 .on_delete = node_deleted,
			 .ud = l},
	    .name = "nodes",
	    .cancel = cancel_root(),
	};
	struct kube_informer_opts po = {
	    .res = &kube_pvs,
	    .transform = pv_transform,
	    .transform_ud = l,
	    .indexers = pv_indexers, /* kept by the informer: static */
	    .n_indexers = ARRAY_SIZE(pv_indexers),
	    .name = "persistentvolumes",
	    .cancel = cancel_root(),
	};
	if ((r = kube_informer_new(l->kc, &no, &l->nodes)) < 0 ||
	    (r = kube_informer_new(l->kc, &po, &l->pvs)) < 0) {
		log_error("cannot create the informers", KV_E(r));
		return r;
	}
	l->ctl = (struct controller){
	    .name = "metadata-labeler",
	    .informers = {l->nodes, l->pvs},
	    .reconcile = reconcile,
	    .ud = l,
	    .workers = LABELER_WORKERS,
	    .queue = {.base_delay_ns = NSEC_PER_SEC, .max_delay_ns = 300 * NSEC_PER_SEC},
	    .resync_key = LABELER_ALL,
	    .resync_ns = f_interval,
	};
	l->run = (struct controllers){.ctls = &l->ctl, .n = 1, .kc = l->kc, .leader_elect = f_le};
	l->run.le = (struct kube_le_config){
	    .lock_namespace = f_le_ns && *f_le_ns ? f_le_ns : kube_client_namespace(l->kc),
	    .lock_name = lease,
	    .lease_duration_ns = f_le_lease,
	    .renew_deadline_ns = f_le_renew,
	    .retry_period_ns = f_le_retry,
	};
	log_info("metadata labeler", KV_S("driver", l->driver), KV_S("lease", lease),
		 KV_S("namespace", l->run.le.lock_namespace), KV_B("leader_election", f_le),
		 KV_I("interval_s", f_interval / NSEC_PER_SEC));
	return 0;
}

int csi_labeler_main(int argc, char **argv)
{
	static struct flag table[LABELER_MAX_FLAGS];
	struct csi_ctrl ctrl = {0};
	struct labeler l = {.ctrl = &ctrl, .wanted = KMAP_INIT};
	char lease[CSI_LABEL_KEY_MAX];
	int n, code = 1;

	pthread_mutex_init(&l.lock, NULL);
	if (build_table(table, LABELER_MAX_FLAGS) < 0) {
		fprintf(stderr, "aws-k8s ebs-csi-driver metadataLabeler: too many flags\n");
		labeler_release(&l);
		return 1;
	}
	if ((n = flags_parse("ebs-csi-driver metadataLabeler", labeler_usage, table, argc, argv)) <
	    0) {
		labeler_release(&l);
		return flags_exit_code(n);
	}
	if (n > 0 || f_interval <= 0 || f_le_retry <= 0 || f_le_renew <= f_le_retry * 6 / 5 ||
	    f_le_lease <= f_le_renew) {
		if (n > 0)
			fprintf(stderr,
				"aws-k8s ebs-csi-driver metadataLabeler: unexpected "
				"argument '%s'\n",
				argv[0]);
		else
			fprintf(stderr,
				"aws-k8s ebs-csi-driver metadataLabeler: the interval must be "
				"positive, and lease duration > renew deadline > 1.2 x retry "
				"period > 0\n");
		code = 2;
		goto out;
	}
	if ((code = csi_controller_configure(&ctrl, "metadata-labeler")) != 0)
		goto out;
	code = 1;
	if (labeler_setup(&l, lease, sizeof(lease)) < 0)
		goto out;
	/* until SIGTERM (0) or the Lease lost (-ENOLCK); a failure to start is logged */
	code = controllers_run(&l.run) == 0 ? 0 : 1;
out:
	labeler_release(&l);
	csi_ctrl_release(&ctrl);
	flags_free(table);
	return code;
}
