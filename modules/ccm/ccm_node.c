/* The cloud-node controller: initializes Nodes that carry the uninitialized taint (providerID,
 * addresses, labels, then the taint comes off), and re-syncs the addresses and labels of
 * initialized Nodes every --node-status-update-frequency.
 *
 * AWS calls: a reconcile that finds no fresh lookup result for its Node looks up, in one go,
 * every uninitialized Node of the store that has none either (up to CCM_DESCRIBE_CHUNK by ID
 * and as many by name), so initializing N Nodes costs about N/100 DescribeInstances whatever
 * the number of workers. The re-sync pass describes all initialized Nodes by ID, 100 per
 * call. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/events.h"
#include "common/kube/informer.h"
#include "common/kube/kmap.h"
#include "common/kube/rest.h"
#include "common/kube/workqueue.h"
#include "modules/ccm/ccm_controllers.h"

/* a result waits for its Node's turn in the queue (the API's rate limit decides how long) */
#define LOOKUP_TTL_OK_NS (10 * 60 * NSEC_PER_SEC)
#define LOOKUP_TTL_MISS_NS (5 * NSEC_PER_SEC)
/* after a Node was initialized, how long a stale store copy (still tainted) is not acted on */
#define DONE_TTL_NS (30 * NSEC_PER_SEC)
#define LOOKUP_DONE 1 /* struct lookup.r: this Node was initialized at .at */

/* how often results past their time are swept out of the cache */
#define SWEEP_EVERY_NS (60 * NSEC_PER_SEC)

static int64_t lookup_ttl(int r)
{
	return r == 0 ? LOOKUP_TTL_OK_NS : r == LOOKUP_DONE ? DONE_TTL_NS : LOOKUP_TTL_MISS_NS;
}

struct lookup {
	int64_t at;
	int r; /* 0, -ENOENT, -ENOTUNIQ */
	enum ccm_match_kind kind;
	char uid[64]; /* LOOKUP_DONE: the uid of the Node that was initialized */
	struct ec2_instance inst;
};

struct ccm_node_ctl {
	struct ccm *m;
	pthread_mutex_t lock;
	struct kmap cache; /* Node name -> struct lookup */
	int64_t swept_at;
};

static void lookup_free(void *p)
{
	struct lookup *l = p;
	if (!l)
		return;
	ec2_instance_release(&l->inst);
	free(l);
}

static void cache_drop(struct ccm_node_ctl *ctl, const char *name)
{
	pthread_mutex_lock(&ctl->lock);
	lookup_free(kmap_remove(&ctl->cache, name));
	pthread_mutex_unlock(&ctl->lock);
}

/* Drops the results past their time, which readers ignore anyway: a Node deleted while a
 * lookup for it was in flight leaves its result behind, and with Nodes coming and going under
 * new names those would pile up. Called with the lock held. */
static void cache_sweep_locked(struct ccm_node_ctl *ctl, int64_t now)
{
	_cleanup_strv_ char **old = NULL;
	size_t i;

	if (now - ctl->swept_at < SWEEP_EVERY_NS)
		return;
	ctl->swept_at = now;
	for (struct kmap_entry *e = kmap_first(&ctl->cache, &i); e;
	     e = kmap_next(&ctl->cache, e, &i)) {
		const struct lookup *l = e->val;
		if (now - l->at >= lookup_ttl(l->r) && strv_push(&old, e->key) < 0)
			break;
	}
	for (char **k = old; k && *k; k++)
		lookup_free(kmap_remove(&ctl->cache, *k));
}

/* A fresh cached result for name, copied. 1 when found. */
static int cache_get(struct ccm_node_ctl *ctl, const char *name, struct lookup *ret)
{
	int r = 0;
	pthread_mutex_lock(&ctl->lock);
	struct lookup *l = kmap_get(&ctl->cache, name);
	if (l && now_mono_ns() - l->at < lookup_ttl(l->r)) {
		*ret = (struct lookup){.at = l->at, .r = l->r, .kind = l->kind};
		str_copy(ret->uid, sizeof(ret->uid), l->uid);
		r = l->r == 0 ? ec2_instance_copy(&l->inst, &ret->inst) : 0;
		if (r == 0)
			r = 1;
	}
	pthread_mutex_unlock(&ctl->lock);
	return r;
}

static void cache_put(struct ccm_node_ctl *ctl, const char *name, int r,
		      const struct ec2_instance *inst, enum ccm_match_kind kind, const char *uid)
{
	struct lookup *l = calloc(1, sizeof(*l)), *old = NULL;
	if (!l)
		return;
	str_copy(l->uid, sizeof(l->uid), uid ? uid : "");
	l->at = now_mono_ns();
	l->r = r;
	l->kind = kind;
	if (inst && ec2_instance_copy(inst, &l->inst) < 0) {
		free(l);
		return;
	}
	pthread_mutex_lock(&ctl->lock);
	cache_sweep_locked(ctl, l->at);
	if (kmap_put(&ctl->cache, name, l, (void **)&old) < 0)
		lookup_free(l);
	lookup_free(old);
	pthread_mutex_unlock(&ctl->lock);
}

/* The batch one reconcile looks up: its own Node first, then other uninitialized Nodes that
 * have no fresh result, in three groups of up to CCM_DESCRIBE_CHUNK each, so that every
 * DescribeInstances is as full as the pending Nodes allow: by instance ID, by a name with a
 * dot (a private DNS name is always fully qualified: DNS first, then the Name tag), and by a
 * name without one (only the Name tag can match, as for Deckhouse's machines). */
enum { G_ID, G_DNS, G_TAG, G_N };

struct batch {
	size_t n[G_N];
	char *nodes[G_N][CCM_DESCRIBE_CHUNK];
	char *keys[G_N][CCM_DESCRIBE_CHUNK]; /* instance IDs (G_ID), else the Node names */
	char *pids[G_N][CCM_DESCRIBE_CHUNK];
};

static void batch_release(struct batch *b)
{
	for (int g = 0; g < G_N; g++)
		for (size_t i = 0; i < b->n[g]; i++) {
			free(b->nodes[g][i]);
			free(b->keys[g][i]);
			free(b->pids[g][i]);
		}
}

static bool batch_full(const struct batch *b)
{
	for (int g = 0; g < G_N; g++)
		if (b->n[g] < CCM_DESCRIBE_CHUNK)
			return false;
	return true;
}

/* Adds a Node to the batch; 0 added, 1 skipped (full group, foreign providerID), < 0 error. */
static int batch_add(struct batch *b, const cJSON *node)
{
	const char *name = json_str(node, "metadata.name");
	const char *pid = json_str(node, "spec.providerID");
	struct ccm_node_ref ref = {.name = name, .provider_id = pid};
	char id[64];
	int g, r;

	if (!name)
		return 1;
	r = ccm_node_lookup_id(&ref, id, sizeof(id));
	if (r == 0)
		g = G_ID;
	else if (r == -ENOENT)
		g = strchr(name, '.') ? G_DNS : G_TAG;
	else
		return 1;
	if (b->n[g] >= CCM_DESCRIBE_CHUNK)
		return 1;
	size_t i = b->n[g];
	b->nodes[g][i] = strdup(name);
	b->keys[g][i] = strdup(g == G_ID ? id : name);
	b->pids[g][i] = pid ? strdup(pid) : NULL;
	if (!b->nodes[g][i] || !b->keys[g][i] || (pid && !b->pids[g][i])) {
		free(b->nodes[g][i]);
		free(b->keys[g][i]);
		free(b->pids[g][i]);
		return -ENOMEM;
	}
	b->n[g]++;
	return 0;
}

static bool fresh(struct ccm_node_ctl *ctl, const char *name)
{
	pthread_mutex_lock(&ctl->lock);
	struct lookup *l = kmap_get(&ctl->cache, name);
	bool r = l && now_mono_ns() - l->at < lookup_ttl(l->r);
	pthread_mutex_unlock(&ctl->lock);
	return r;
}

/* Looks up the Node's instance together with the other pending Nodes. */
static int lookup_batch(struct ccm_node_ctl *ctl, const cJSON *self, struct aws_error *err)
{
	struct ccm *m = ctl->m;
	struct batch b = {0};
	struct kube_obj **objs = NULL;
	struct ec2_instance *cands = NULL;
	size_t n_objs = 0, n_cands = 0;
	const char *self_name = json_str(self, "metadata.name");
	int r;

	if ((r = batch_add(&b, self)) < 0)
		goto out;
	if (kube_store_list(ccm_node_store(m), &objs, &n_objs) >= 0) {
		for (size_t i = 0; i < n_objs && !batch_full(&b); i++) {
			const cJSON *n = objs[i]->json;
			const char *name = json_str(n, "metadata.name");
			if (!name || (self_name && strcmp(name, self_name) == 0) ||
			    !ccm_node_has_taint(n, CCM_TAINT_UNINITIALIZED) || fresh(ctl, name))
				continue;
			if ((r = batch_add(&b, n)) < 0)
				goto out;
		}
	}
	if ((r = ccm_cloud_describe_ids(m->cloud, (const char *const *)b.keys[G_ID], b.n[G_ID],
					&cands, &n_cands, err)) < 0 ||
	    (r = ccm_cloud_find_by_names(m->cloud, (const char *const *)b.keys[G_DNS], b.n[G_DNS],
					 &cands, &n_cands, err)) < 0 ||
	    (r = ccm_cloud_find_by_names(m->cloud, (const char *const *)b.keys[G_TAG], b.n[G_TAG],
					 &cands, &n_cands, err)) < 0)
		goto out;
	log_v(4, "looked instances up", KV_U("by_id", b.n[G_ID]), KV_U("by_dns_name", b.n[G_DNS]),
	      KV_U("by_name_tag", b.n[G_TAG]), KV_U("found", n_cands));
	for (int g = 0; g < G_N; g++)
		for (size_t i = 0; i < b.n[g]; i++) {
			struct ccm_node_ref ref = {.name = b.nodes[g][i],
						   .provider_id = b.pids[g][i]};
			enum ccm_match_kind kind = CCM_MATCH_ID;
			int k = ccm_match_instance(&ref, cands, n_cands, m->cluster_id, &kind);
			/* a terminated instance cannot back a Node being initialized */
			if (k >= 0 && !ccm_instance_exists(&cands[k]))
				k = -ENOENT;
			cache_put(ctl, ref.name, k < 0 ? k : 0, k >= 0 ? &cands[k] : NULL, kind,
				  NULL);
		}
	r = 0;
out:
	batch_release(&b);
	kube_objv_free(objs, n_objs);
	ccm_instances_free(cands, n_cands);
	return r;
}

static bool is_uninitialized_taint(const cJSON *taint)
{
	const char *k = json_str(taint, "key");
	return k && strcmp(k, CCM_TAINT_UNINITIALIZED) == 0;
}

int ccm_node_init_mutate(void *ud, cJSON *obj)
{
	const struct ccm_node_init *im = ud;
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	int r;

	if (!spec && !(spec = cJSON_AddObjectToObject(obj, "spec")))
		return -ENOMEM;
	const char *pid = json_str(spec, "providerID");
	if ((!pid || !*pid) && (r = json_set_str(obj, "spec.providerID", im->provider_id)) < 0)
		return r;
	cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	cJSON *labels = md ? cJSON_GetObjectItemCaseSensitive(md, "labels") : NULL;
	if (md && !cJSON_IsObject(labels)) {
		cJSON_DeleteItemFromObjectCaseSensitive(md, "labels");
		labels = cJSON_AddObjectToObject(md, "labels");
	}
	if (!labels)
		return -ENOMEM;
	const cJSON *l;
	cJSON_ArrayForEach(l, im->labels)
	{
		cJSON *v = cJSON_CreateString(l->valuestring);
		if (!v || (r = json_put(labels, l->string, v)) < 0) {
			cJSON_Delete(v);
			return -ENOMEM;
		}
	}
	cJSON *taints = cJSON_GetObjectItemCaseSensitive(spec, "taints");
	for (int i = cJSON_GetArraySize(taints) - 1; i >= 0; i--)
		if (is_uninitialized_taint(cJSON_GetArrayItem(taints, i)))
			cJSON_DeleteItemFromArray(taints, i);
	return 0;
}

int ccm_node_init_patch(const cJSON *node, const char *rv, const struct ccm_node_init *im,
			char **ret_text)
{
	const char *pid = json_str(node, "spec.providerID");
	cJSON *doc = NULL, *taints = NULL;
	int r = -ENOMEM;

	if (!(doc = cJSON_CreateObject()) || !(taints = cJSON_CreateArray()))
		goto out;
	cJSON *md = cJSON_AddObjectToObject(doc, "metadata");
	cJSON *spec = cJSON_AddObjectToObject(doc, "spec");
	if (!md || !spec || !cJSON_AddStringToObject(md, "resourceVersion", rv))
		goto out;
	cJSON *labels = cJSON_Duplicate(im->labels, true);
	if (!labels)
		goto out;
	cJSON_AddItemToObject(md, "labels", labels);
	if ((!pid || !*pid) && !cJSON_AddStringToObject(spec, "providerID", im->provider_id))
		goto out;
	const cJSON *t;
	cJSON_ArrayForEach(t, json_find(node, "spec.taints"))
	{
		if (is_uninitialized_taint(t))
			continue;
		cJSON *d = cJSON_Duplicate(t, true);
		if (!d)
			goto out;
		cJSON_AddItemToArray(taints, d);
	}
	if (cJSON_GetArraySize(taints) > 0) {
		cJSON_AddItemToObject(spec, "taints", taints);
	} else {
		cJSON_Delete(taints);
		if (!cJSON_AddNullToObject(spec, "taints")) {
			taints = NULL;
			goto out;
		}
	}
	taints = NULL;
	if ((*ret_text = json_print(doc)))
		r = 0;
out:
	cJSON_Delete(taints);
	cJSON_Delete(doc);
	return r;
}

/* The patch of ccm_node_init_patch, guarded by the stored resourceVersion (the API server
 * answers 409 when the Node changed since). */
static int init_patch(struct ccm *m, const cJSON *node, const char *rv,
		      const struct ccm_node_init *im, struct kube_status *st)
{
	_cleanup_free_ char *text = NULL;
	int r;

	if (!rv)
		return -KUBE_ECONFLICT; /* cannot guard it: take the slow path */
	if ((r = ccm_node_init_patch(node, rv, im, &text)) < 0)
		return r;
	return kube_patch(m->kc, KUBE_REF(&kube_nodes, NULL, json_str(node, "metadata.name")),
			  KUBE_PATCH_MERGE, text, NULL, st);
}

/* The addresses a Node should have; NULL with 0 when the kubelet's --node-ip is not among
 * them (upstream then leaves the addresses alone). */
static int want_addresses(struct ccm *m, const cJSON *node, const struct ec2_instance *inst,
			  cJSON **ret)
{
	cJSON *a = NULL;
	int r;

	*ret = NULL;
	if ((r = ccm_instance_addresses(inst, m->cfg->node_ip_families, &a)) < 0)
		return r;
	const cJSON *ann = json_find(node, "metadata.annotations");
	const char *provided = ann ? json_str_key(ann, CCM_ANNOTATION_PROVIDED_IP) : NULL;
	r = ccm_addresses_prefer_node_ip(a, provided, &a);
	if (r == -ENOENT) {
		ccm_node_event(m, node, KUBE_EVENT_WARNING, "NodeAddressesNotMatching",
			       "failed to get node address from cloud provider that matches ip: %s",
			       provided);
		return 0;
	}
	if (r < 0)
		return r;
	if ((r = ccm_addresses_keep_hostname(a, json_find(node, "status.addresses"))) < 0) {
		cJSON_Delete(a);
		return r;
	}
	*ret = a;
	return 0;
}

/* PATCHes status.addresses when they differ (a JSON merge patch: the list is replaced). */
static int sync_addresses(struct ccm *m, const cJSON *node, const cJSON *want, char **ret_rv)
{
	const char *name = json_str(node, "metadata.name");
	struct kube_status st = {0};
	cJSON *res = NULL;
	int r;

	if (!want || !ccm_addresses_differ(want, json_find(node, "status.addresses")))
		return 0;
	_cleanup_free_ char *list = json_print(want);
	_cleanup_buf_ struct buf patch = BUF_INIT(0);
	if (!list || (r = buf_printf(&patch, "{\"status\":{\"addresses\":%s}}", list)) < 0)
		return -ENOMEM;
	if (!ccm_may_act(m))
		return -ECANCELED;
	r = kube_patch(m->kc, KUBE_REF_SUB(&kube_nodes, NULL, name, "status"), KUBE_PATCH_MERGE,
		       patch.data, ret_rv ? &res : NULL, &st);
	if (r < 0) {
		log_error("failed to update node addresses", KV_S("node", name),
			  KV_S("error", st.message), KV_E(r));
	} else {
		log_v(2, "updated node addresses", KV_S("node", name));
		/* the Node's new version, for a write that follows */
		const char *rv = json_str(res, "metadata.resourceVersion");
		if (ret_rv && rv)
			*ret_rv = strdup(rv);
	}
	cJSON_Delete(res);
	return r;
}

static int want_labels(struct ccm *m, const struct ec2_instance *inst, cJSON **ret)
{
	char zid[64];
	const char *zone_id = NULL;
	if (ccm_cloud_zone_id(m->cloud, inst->zone, zid, sizeof(zid)) == 0)
		zone_id = zid;
	return ccm_instance_labels(inst, ccm_cloud_region(m->cloud), zone_id, ret);
}

static int initialize(struct ccm_node_ctl *ctl, const cJSON *node, const struct lookup *lk)
{
	struct ccm *m = ctl->m;
	const char *name = json_str(node, "metadata.name");
	char pid[320];
	cJSON *addrs = NULL, *labels = NULL;
	_cleanup_free_ char *rv = NULL;
	struct kube_status st = {0};
	int r;

	if ((r = ccm_format_provider_id(lk->inst.zone, lk->inst.id, pid, sizeof(pid))) < 0 ||
	    (r = want_labels(m, &lk->inst, &labels)) < 0 ||
	    (r = want_addresses(m, node, &lk->inst, &addrs)) < 0) {
		log_error("failed to compute the node's cloud properties", KV_S("node", name),
			  KV_S("instance", lk->inst.id), KV_E(r));
		goto out;
	}
	/* addresses first: the taint comes off last, once everything else is set */
	if ((r = sync_addresses(m, node, addrs, &rv)) < 0)
		goto out;
	if (!ccm_may_act(m)) {
		r = -ECANCELED;
		goto out;
	}
	struct ccm_node_init im = {.provider_id = pid, .labels = labels};
	/* one PATCH guarded by the stored resourceVersion; on a conflict, GET + PUT */
	r = init_patch(m, node, rv ? rv : json_str(node, "metadata.resourceVersion"), &im, &st);
	if (r == -KUBE_ECONFLICT || r == -ENOMEM)
		r = kube_update_retry(m->kc, KUBE_REF(&kube_nodes, NULL, name),
				      ccm_node_init_mutate, &im, NULL, &st);
	if (r < 0) {
		log_error("failed to initialize node", KV_S("node", name),
			  KV_S("error", st.message), KV_E(r));
		goto out;
	}
	log_info("initialized node", KV_S("node", name), KV_S("instance", lk->inst.id),
		 KV_S("providerID",
		      json_str(node, "spec.providerID") ? json_str(node, "spec.providerID") : pid),
		 KV_S("matched", lk->kind == CCM_MATCH_ID	     ? "instance-id"
				 : lk->kind == CCM_MATCH_PRIVATE_DNS ? "private-dns-name"
								     : "name-tag"));
	ccm_node_event(m, node, KUBE_EVENT_NORMAL, "Synced", "Node synced successfully");
out:
	cJSON_Delete(addrs);
	cJSON_Delete(labels);
	return r;
}

/* The reconcile of one Node. */
int ccm_node_reconcile(void *ud, const char *key, int64_t *requeue_after)
{
	struct ccm_node_ctl *ctl = ud;
	struct ccm *m = ctl->m;
	struct kube_obj *o = NULL;
	struct lookup lk = {0};
	struct aws_error err = {0};
	int r;

	if (kube_store_get(ccm_node_store(m), key, &o) < 0) {
		cache_drop(ctl, key);
		return 0;
	}
	const cJSON *node = o->json;
	if (!ccm_node_has_taint(node, CCM_TAINT_UNINITIALIZED)) {
		cache_drop(ctl, key);
		r = 0;
		goto out;
	}
	char id[64] = "";
	r = ccm_node_instance_id(node, id, sizeof(id));
	if (r == -ENOTSUP) {
		log_v(2, "not initializing a node of another provider", KV_S("node", key),
		      KV_S("providerID", json_str(node, "spec.providerID")));
		r = 0;
		goto out;
	}
	if (r < 0 && r != -ENOENT) {
		ccm_node_event(m, node, KUBE_EVENT_WARNING, "FailedToInitialize",
			       "invalid providerID %s", json_str(node, "spec.providerID"));
		goto out;
	}
	bool fetched = false;
	r = cache_get(ctl, key, &lk);
	if (r == 1 && lk.r == LOOKUP_DONE &&
	    strcmp(lk.uid, json_str(node, "metadata.uid") ? json_str(node, "metadata.uid") : "")) {
		/* the mark of an earlier Node of that name (deleted, then created again) */
		cache_drop(ctl, key);
		r = 0;
	}
	if (r == 0) {
		if ((r = lookup_batch(ctl, node, &err)) < 0) {
			log_error("failed to look the node's instance up", KV_S("node", key),
				  KV_S("error", err.message), KV_E(r));
			goto out;
		}
		fetched = true;
		r = cache_get(ctl, key, &lk);
	}
	if (r < 0)
		goto out;
	if (r == 0) { /* the batch could not cache it (allocation): try again */
		r = -EAGAIN;
		goto out;
	}
	if (lk.r == LOOKUP_DONE) {
		/* initialized moments ago; the informer has not delivered that yet. Looked at
		 * again later in case someone put the taint back meanwhile. */
		log_v(4, "node initialized, the store is behind", KV_S("node", key));
		*requeue_after = DONE_TTL_NS;
		r = 0;
		goto out;
	}
	if (lk.r == -ENOENT || lk.r == -ENOTUNIQ || lk.r == -EINVAL) {
		const char *pid = json_str(node, "spec.providerID");
		/* the recorder folds repeats of one message into one Event with a count */
		if (lk.r == -ENOTUNIQ)
			ccm_node_event(m, node, KUBE_EVENT_WARNING, "FailedToInitialize",
				       "several EC2 instances of this cluster match node %s: not "
				       "initializing it",
				       key);
		else if (pid && *pid)
			ccm_node_event(m, node, KUBE_EVENT_WARNING, "FailedToInitialize",
				       "EC2 instance %s (providerID %s) does not exist", id, pid);
		else if (ccm_instance_id_from_node_name(key, id, sizeof(id)) == 0)
			ccm_node_event(m, node, KUBE_EVENT_WARNING, "FailedToInitialize",
				       "EC2 instance %s does not exist", id);
		else
			ccm_node_event(
			    m, node, KUBE_EVENT_WARNING, "FailedToInitialize",
			    "no live EC2 instance of this cluster has the private DNS name "
			    "or the Name tag %s",
			    key);
		log_warn("cannot initialize node", KV_S("node", key), KV_B("fresh", fetched),
			 KV_S("reason", lk.r == -ENOTUNIQ ? "several instances match"
							  : "no instance matches"));
		r = lk.r;
		goto out;
	}
	r = initialize(ctl, node, &lk);
	if (r >= 0) /* the store may show the taint a little longer: see LOOKUP_DONE */
		cache_put(ctl, key, LOOKUP_DONE, NULL, lk.kind, json_str(node, "metadata.uid"));
out:
	ec2_instance_release(&lk.inst);
	kube_obj_unref(o);
	return r;
}

/* The re-sync pass ---------------------------------------------------------------------- */

struct resync_item {
	struct kube_obj *node;
	char id[64];
};

/* Sets the labels the cloud gives that are missing or different (a merge patch). */
static int sync_labels(struct ccm *m, const cJSON *node, const cJSON *want)
{
	const char *name = json_str(node, "metadata.name");
	const cJSON *have = json_find(node, "metadata.labels"), *l;
	cJSON *patch_labels = cJSON_CreateObject();
	_cleanup_free_ char *text = NULL;
	struct kube_status st = {0};
	int r = 0;

	if (!patch_labels)
		return -ENOMEM;
	cJSON_ArrayForEach(l, want)
	{
		const char *cur = have ? json_str_key(have, l->string) : NULL;
		if (cur && strcmp(cur, l->valuestring) == 0)
			continue;
		if (!cJSON_AddStringToObject(patch_labels, l->string, l->valuestring)) {
			r = -ENOMEM;
			goto out;
		}
	}
	if (cJSON_GetArraySize(patch_labels) == 0)
		goto out;
	cJSON *doc = cJSON_CreateObject(),
	      *md = doc ? cJSON_AddObjectToObject(doc, "metadata") : NULL;
	if (!md) {
		cJSON_Delete(doc);
		r = -ENOMEM;
		goto out;
	}
	cJSON_AddItemToObject(md, "labels", patch_labels);
	patch_labels = NULL;
	text = json_print(doc);
	cJSON_Delete(doc);
	if (!text) {
		r = -ENOMEM;
		goto out;
	}
	if (!ccm_may_act(m)) {
		r = -ECANCELED;
		goto out;
	}
	r = kube_patch(m->kc, KUBE_REF(&kube_nodes, NULL, name), KUBE_PATCH_MERGE, text, NULL, &st);
	if (r < 0)
		log_error("failed to update node labels", KV_S("node", name),
			  KV_S("error", st.message), KV_E(r));
	else
		log_v(2, "updated node labels", KV_S("node", name));
out:
	cJSON_Delete(patch_labels);
	return r;
}

/* The status re-sync pass (its period is *requeue_after's default). */
int ccm_node_resync(void *ud, const char *key, int64_t *requeue_after)
{
	struct ccm_node_ctl *ctl = ud;
	struct ccm *m = ctl->m;
	struct kube_obj **objs = NULL;
	size_t n_objs = 0, n_items = 0, n_inst = 0;
	struct resync_item *items = NULL;
	const char **ids = NULL;
	struct ec2_instance *inst = NULL;
	struct aws_error err = {0};
	unsigned failed = 0;
	int r;

	if ((r = kube_store_list(ccm_node_store(m), &objs, &n_objs)) < 0)
		return r;
	if (n_objs &&
	    (!(items = calloc(n_objs, sizeof(*items))) || !(ids = calloc(n_objs, sizeof(*ids))))) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n_objs; i++) {
		const cJSON *n = objs[i]->json;
		if (ccm_node_has_taint(n, CCM_TAINT_UNINITIALIZED) ||
		    ccm_node_instance_id(n, items[n_items].id, sizeof(items[n_items].id)) < 0)
			continue;
		items[n_items].node = objs[i];
		ids[n_items] = items[n_items].id;
		n_items++;
	}
	if ((r = ccm_cloud_describe_ids(m->cloud, ids, n_items, &inst, &n_inst, &err)) < 0) {
		log_error("node status re-sync: describing instances failed",
			  KV_S("error", err.message), KV_E(r));
		*requeue_after = 0; /* retried with backoff */
		goto out;
	}
	for (size_t i = 0; i < n_items && ccm_may_act(m); i++) {
		const struct ec2_instance *in = NULL;
		for (size_t k = 0; k < n_inst && !in; k++)
			if (strcmp(inst[k].id, items[i].id) == 0)
				in = &inst[k];
		if (!in || !ccm_instance_exists(in))
			continue; /* the lifecycle controller's business */
		const cJSON *node = items[i].node->json;
		cJSON *addrs = NULL, *labels = NULL;
		if (want_addresses(m, node, in, &addrs) < 0 ||
		    sync_addresses(m, node, addrs, NULL) < 0)
			failed++;
		if (want_labels(m, in, &labels) < 0 || sync_labels(m, node, labels) < 0)
			failed++;
		cJSON_Delete(addrs);
		cJSON_Delete(labels);
	}
	log_v(2, "node status re-sync done", KV_U("nodes", n_items), KV_U("instances", n_inst),
	      KV_U("failed", failed));
	r = 0;
out:
	(void)key;
	ccm_instances_free(inst, n_inst);
	free(ids);
	free(items);
	kube_objv_free(objs, n_objs);
	return r;
}

/* State, start, informer hooks ----------------------------------------------------------- */

int ccm_node_new(struct ccm *m, struct ccm_node_ctl **ret)
{
	struct ccm_node_ctl *ctl = calloc(1, sizeof(*ctl));

	if (!ctl)
		return -ENOMEM;
	ctl->m = m;
	pthread_mutex_init(&ctl->lock, NULL);
	*ret = ctl;
	return 0;
}

void ccm_node_free(struct ccm_node_ctl *ctl)
{
	if (!ctl)
		return;
	kmap_clear(&ctl->cache, lookup_free);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl);
}

int ccm_node_start(struct controller *c)
{
	struct ccm_node_ctl *ctl = c->ud;
	struct kube_obj **objs = NULL;
	size_t n = 0;

	/* the Nodes the store already holds; the informer's hooks queue the ones that come */
	if (kube_store_list(ccm_node_store(ctl->m), &objs, &n) >= 0) {
		for (size_t i = 0; i < n; i++)
			ccm_node_changed(c, NULL, objs[i]->json);
		kube_objv_free(objs, n);
	}
	log_info("started the cloud-node controller", KV_I("workers", c->workers));
	return 0;
}

void ccm_node_changed(struct controller *c, const cJSON *old, const cJSON *node)
{
	const char *name = json_str(node, "metadata.name");
	(void)old;
	if (!controller_running(c) || !name || !ccm_node_has_taint(node, CCM_TAINT_UNINITIALIZED))
		return;
	int r = controller_add(c, name);
	if (r < 0 && r != -ESHUTDOWN)
		log_error("cannot queue node", KV_S("node", name), KV_E(r));
}

void ccm_node_deleted(struct controller *c, const cJSON *node)
{
	struct ccm_node_ctl *ctl = c->ud;
	const char *name = json_str(node, "metadata.name");
	if (ctl && name && controller_running(c))
		cache_drop(ctl, name);
}
