/* The tagging controller (upstream's pkg/controllers/tagging, "tagging" in --controllers, off
 * by default): when a Node joins, its EC2 instance gets the --tags (CreateTags), then the Node
 * the label k8s.io/cloud-provider-aws=<checksum of the tags>; when a Node leaves, the tags come
 * off its instance (DeleteTags with the keys and values, so a tag someone changed since is
 * left alone). A Node whose label already holds the checksum is not tagged again: a restart
 * costs no call, a changed --tags tags every Node once more.
 *
 * Keys: a Node's name for tagging, "untag/<instance ID>" for an instance to untag ('/' is not
 * in a Node name). A reconcile batches, as the cloud-node controller does its lookups: it waits
 * for the Nodes that keep coming (BATCH_WINDOW_NS after the last one, at most BATCH_MAX_WAIT_NS,
 * upstream's batcher's timings), then tags its own Node and every other one waiting, up to
 * BATCH_MAX_IDS instances, in one CreateTags; the others' keys then find their Node done. So
 * 100 Nodes joining cost one to a few CreateTags instead of 100, with any number of workers.
 * A call refused for one unknown instance (InvalidInstanceID.NotFound) is repeated without
 * the IDs the message names; another 4xx over several IDs is split in halves to find the
 * culprit.
 *
 * Failures: a throttled or failed batch holds every tagging call of the controller back
 * (1 s doubling up to 5 min, reset by a success), so a throttled account sees one call per
 * hold, not one per Node. A Node is given up after MAX_ATTEMPTS failed attempts of its own
 * key (upstream's 9 requeues); its next update queues it again, as upstream. An instance that
 * does not exist is retried while its Node is younger than 5 minutes (CreateTags is
 * eventually consistent for new instances), then skipped. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/query.h"
#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/informer.h"
#include "common/kube/kmap.h"
#include "common/kube/rest.h"
#include "common/metrics/metrics.h"
#include "modules/ccm/ccm_controllers.h"

#define BATCH_MAX_IDS 100 /* instances per CreateTags / DeleteTags */
#define BATCH_WINDOW_NS (100 * NSEC_PER_MSEC)
#define BATCH_MAX_WAIT_NS (1 * NSEC_PER_SEC)
#define CLAIMED_RETRY_NS (200 * NSEC_PER_MSEC) /* a Node in another worker's batch */
#define DONE_TTL_NS (30 * NSEC_PER_SEC)	       /* a done Node, while the store lags */
#define GRACE_NS (5 * 60 * NSEC_PER_SEC)       /* upstream's eventual-consistency period */
#define NOTFOUND_RETRY_NS (5 * NSEC_PER_SEC)
#define HOLD_BASE_NS (1 * NSEC_PER_SEC)
#define HOLD_MAX_NS (5 * 60 * NSEC_PER_SEC)
#define MAX_ATTEMPTS 10
#define SPLIT_DEPTH 12
#define SWEEP_EVERY_NS (60 * NSEC_PER_SEC)
#define UNTAG_PREFIX "untag/"
#define ID_MAX 64

static struct metric *m_duration, *m_errors;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;

/* upstream's families, label values and buckets (0.5 s, x1.5, 20 buckets) */
static void metrics_init(void)
{
	double b[20];
	b[0] = 0.5;
	for (size_t i = 1; i < ARRAY_SIZE(b); i++)
		b[i] = b[i - 1] * 1.5;
	m_duration = metric_histogram(
	    "cloudprovider_aws_tagging_controller_work_item_duration_seconds",
	    "Seconds from a tagging work item's queueing to its dequeueing and to its completion",
	    (const char *[]){"latency_type", NULL}, b, ARRAY_SIZE(b));
	m_errors = metric_counter("cloudprovider_aws_tagging_controller_work_item_errors_total",
				  "Failed tagging work items, and those given up after retries",
				  (const char *[]){"error_type", "instance_id", NULL});
}

enum tstate {
	T_NONE,
	T_CLAIMED, /* in a batch being sent */
	T_TAGGED,  /* the instance carries the tags; the label is not written yet */
	T_DONE,	   /* labelled (or its instance is gone) at .at */
};

struct tnode {
	enum tstate st;
	char uid[64];
	char id[ID_MAX];
	int64_t at;
	int64_t enq_ns; /* when its key was queued, for the metrics; 0 once observed */
	unsigned fails;
};

struct tuntag {
	char node[256];
	int64_t enq_ns;
	bool claimed;
	unsigned fails;
};

struct ccm_tag_ctl {
	struct ccm *m;
	struct controller *c;
	struct ccm_tagset tags;
	bool rate_limited;
	unsigned max_ids;
	int64_t window_ns, max_wait_ns;

	pthread_mutex_t lock;
	struct kmap nodes;  /* Node name -> struct tnode */
	struct kmap untags; /* instance ID -> struct tuntag */
	int64_t hold_until, hold_ns;
	int64_t swept_at;
};

/* The metrics and the state ------------------------------------------------------------- */

static void observe(const char *type, int64_t since_ns)
{
	if (since_ns > 0)
		metric_observe(m_duration, (double)(now_mono_ns() - since_ns) / NSEC_PER_SEC, type);
}

static struct tnode *tnode_locked(struct ccm_tag_ctl *ctl, const char *name)
{
	struct tnode *e = kmap_get(&ctl->nodes, name);
	if (e)
		return e;
	if (!(e = calloc(1, sizeof(*e))))
		return NULL;
	if (kmap_put(&ctl->nodes, name, e, NULL) < 0) {
		free(e);
		return NULL;
	}
	return e;
}

static void sweep_locked(struct ccm_tag_ctl *ctl, int64_t now)
{
	_cleanup_strv_ char **old = NULL;
	size_t i;

	if (now - ctl->swept_at < SWEEP_EVERY_NS)
		return;
	ctl->swept_at = now;
	for (struct kmap_entry *e = kmap_first(&ctl->nodes, &i); e;
	     e = kmap_next(&ctl->nodes, e, &i)) {
		const struct tnode *t = e->val;
		if (((t->st == T_DONE && now - t->at >= DONE_TTL_NS) ||
		     (t->st == T_NONE && !t->enq_ns && !t->fails)) &&
		    strv_push(&old, e->key) < 0)
			break;
	}
	for (char **k = old; k && *k; k++)
		free(kmap_remove(&ctl->nodes, *k));
}

/* Holds every call back after a failure that may pass (throttling, 5xx, transport). */
static void hold_locked(struct ccm_tag_ctl *ctl, bool failed)
{
	if (!failed) {
		ctl->hold_ns = 0;
		return;
	}
	ctl->hold_ns = ctl->hold_ns ? ctl->hold_ns * 2 : HOLD_BASE_NS;
	if (ctl->hold_ns > HOLD_MAX_NS)
		ctl->hold_ns = HOLD_MAX_NS;
	ctl->hold_until = now_mono_ns() + ctl->hold_ns;
}

/* 0 when calls may go out now, else how long to wait. Called with the lock held. */
static int64_t held_locked(struct ccm_tag_ctl *ctl)
{
	int64_t left = ctl->hold_until - now_mono_ns();
	return left > 0 ? left : 0;
}

/* The instance of a Node that needs tagging (its label is not the checksum), into id; false
 * for a Node tagged already, without a providerID yet (its update queues it again), or of
 * another provider (Fargate, static://). */
static bool needs_tag(const struct ccm_tag_ctl *ctl, const cJSON *node, char *id, size_t n)
{
	const cJSON *labels = json_find(node, "metadata.labels");
	const char *have = labels ? json_str_key(labels, CCM_TAGGING_LABEL) : NULL;
	if (have && strcmp(have, ctl->tags.checksum) == 0)
		return false;
	return ccm_node_instance_id(node, id, n) == 0;
}

/* May this Node go into a batch now? Called with the lock held. */
static bool tag_eligible_locked(struct ccm_tag_ctl *ctl, const char *name, const char *uid,
				int64_t now)
{
	const struct tnode *e = kmap_get(&ctl->nodes, name);
	if (!e || e->st == T_NONE)
		return true;
	if (e->st == T_CLAIMED)
		return false;
	/* tagged or done for this very Node: not again while the store lags */
	if (strcmp(e->uid, uid ? uid : "") == 0)
		return e->st == T_DONE && now - e->at >= DONE_TTL_NS;
	return true;
}

/* The AWS calls ------------------------------------------------------------------------- */

static int tags_call(struct ccm_tag_ctl *ctl, bool create, const char *const *ids, size_t n,
		     struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if (!ccm_may_act(ctl->m))
		return -ECANCELED;
	if ((r = aws_query_add_list(&q, "ResourceId", ids, n)) >= 0 &&
	    (r = aws_query_add_tags(&q, "Tag", (const char *const *)ctl->tags.keys,
				    (const char *const *)ctl->tags.values, ctl->tags.n)) >= 0)
		r = aws_call_query(ccm_cloud_client(ctl->m->cloud), AWS_SVC_EC2,
				   create ? "CreateTags" : "DeleteTags", &q, &rep, err);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static bool client_error(const struct aws_error *e)
{
	return e->http_status >= 400 && e->http_status < 500 && !aws_error_retryable(e);
}

/* Tags (create) or untags ids[idx[0..n)], each result to res[]: 0, -ENOENT for an instance
 * AWS does not know, or the failure (its error in *err). */
static void tags_run(struct ccm_tag_ctl *ctl, bool create, const char **ids, size_t *idx,
		     size_t n, int *res, struct aws_error *err, int depth)
{
	_cleanup_free_ const char **sub = NULL;
	_cleanup_free_ bool *named = NULL;
	struct aws_error e;
	size_t k, j;
	int r;

	if (n == 0)
		return;
	if (!(sub = calloc(n, sizeof(*sub)))) {
		for (k = 0; k < n; k++)
			res[idx[k]] = -ENOMEM;
		return;
	}
	for (k = 0; k < n; k++)
		sub[k] = ids[idx[k]];
	aws_error_clear(&e);
	r = tags_call(ctl, create, sub, n, &e);
	if (r >= 0) {
		for (k = 0; k < n; k++)
			res[idx[k]] = 0;
		return;
	}
	bool notfound = aws_error_is(&e, "InvalidInstanceID.NotFound");
	if (notfound && n == 1) {
		res[idx[0]] = -ENOENT;
		return;
	}
	if (n == 1 || depth >= SPLIT_DEPTH || !client_error(&e) || !(named = calloc(n, 1))) {
		for (k = 0; k < n; k++)
			res[idx[k]] = r;
		*err = e;
		return;
	}
	if (notfound && ccm_tag_notfound_ids(e.message, sub, n, named) > 0) {
		for (k = 0, j = 0; k < n; k++) {
			if (named[k])
				res[idx[k]] = -ENOENT;
			else
				idx[j++] = idx[k];
		}
		log_v(2, "tagging: retrying without unknown instances", KV_U("left", j),
		      KV_U("dropped", n - j));
		tags_run(ctl, create, ids, idx, j, res, err, depth + 1);
		return;
	}
	/* a refusal of the batch without a name: halves, to find the one refused */
	tags_run(ctl, create, ids, idx, n / 2, res, err, depth + 1);
	tags_run(ctl, create, ids, idx + n / 2, n - n / 2, res, err, depth + 1);
}

/* Runs one batch of distinct IDs; res[i] per ID. Returns whether a failure that may pass was
 * seen (throttling, 5xx, transport), for the hold. */
static bool tags_batch(struct ccm_tag_ctl *ctl, bool create, const char **ids, size_t n,
		       int *res, struct aws_error *err)
{
	size_t *idx = calloc(n ? n : 1, sizeof(*idx));
	bool transient = false;

	aws_error_clear(err);
	if (!idx) {
		for (size_t i = 0; i < n; i++)
			res[i] = -ENOMEM;
		return false;
	}
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	tags_run(ctl, create, ids, idx, n, res, err, 0);
	free(idx);
	for (size_t i = 0; i < n; i++)
		if (res[i] < 0 && res[i] != -ENOENT && res[i] != -ECANCELED && !client_error(err))
			transient = true;
	return transient;
}

/* Waits while Nodes keep coming: the window after the last new one, at most the maximum. */
static void batch_window(struct ccm_tag_ctl *ctl, size_t (*count)(struct ccm_tag_ctl *))
{
	int64_t start = now_mono_ns();
	size_t last = count(ctl);

	while (last < ctl->max_ids && now_mono_ns() - start < ctl->max_wait_ns) {
		if (cancel_wait(cancel_root(), ctl->window_ns))
			return;
		size_t c = count(ctl);
		if (c <= last)
			return;
		last = c;
	}
}

/* Tagging --------------------------------------------------------------------------------- */

struct tcand {
	const cJSON *node;
	const char *name, *uid;
	char id[ID_MAX];
};

/* The store's Nodes that need tagging, with their instance IDs. */
static int tag_candidates(struct ccm_tag_ctl *ctl, struct kube_obj **objs, size_t n,
			  struct tcand **ret, size_t *ret_n)
{
	struct tcand *c = calloc(n ? n : 1, sizeof(*c));
	size_t k = 0;

	if (!c)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const cJSON *node = objs[i]->json;
		const char *name = json_str(node, "metadata.name");
		if (!name || !needs_tag(ctl, node, c[k].id, sizeof(c[k].id)))
			continue;
		c[k].node = node;
		c[k].name = name;
		c[k].uid = json_str(node, "metadata.uid");
		k++;
	}
	*ret = c;
	*ret_n = k;
	return 0;
}

static size_t count_tag_pending(struct ccm_tag_ctl *ctl)
{
	struct kube_obj **objs = NULL;
	struct tcand *c = NULL;
	size_t n = 0, nc = 0, ok = 0;

	if (kube_store_list(ccm_node_store(ctl->m), &objs, &n) < 0)
		return 0;
	if (tag_candidates(ctl, objs, n, &c, &nc) >= 0) {
		int64_t now = now_mono_ns();
		pthread_mutex_lock(&ctl->lock);
		for (size_t i = 0; i < nc; i++)
			ok += tag_eligible_locked(ctl, c[i].name, c[i].uid, now);
		pthread_mutex_unlock(&ctl->lock);
	}
	free(c);
	kube_objv_free(objs, n);
	return ok;
}

static int label_node(struct ccm_tag_ctl *ctl, const char *name)
{
	_cleanup_buf_ struct buf patch = BUF_INIT(0);
	struct kube_status st = {0};
	int r;

	if ((r = buf_printf(&patch, "{\"metadata\":{\"labels\":{\"%s\":\"%s\"}}}",
			    CCM_TAGGING_LABEL, ctl->tags.checksum)) < 0)
		return r;
	if (!ccm_may_act(ctl->m))
		return -ECANCELED;
	r = kube_patch(ctl->m->kc, KUBE_REF(&kube_nodes, NULL, name), KUBE_PATCH_MERGE,
		       patch.data, NULL, &st);
	if (r == -ENOENT)
		return 0; /* the Node left meanwhile */
	if (r < 0)
		log_error("tagging: failed to label the node", KV_S("node", name),
			  KV_S("error", st.message), KV_E(r));
	return r;
}

static bool within_grace(const cJSON *node)
{
	int64_t created;
	const char *ts = json_str(node, "metadata.creationTimestamp");
	return ts && rfc3339_parse(ts, &created) == 0 && now_real_ns() - created < GRACE_NS;
}

/* Labels a Node whose instance carries the tags; done when it worked. */
static int finish_node(struct ccm_tag_ctl *ctl, const char *name, const char *uid)
{
	int r = label_node(ctl, name);
	pthread_mutex_lock(&ctl->lock);
	struct tnode *e = tnode_locked(ctl, name);
	if (e && r >= 0) {
		e->st = T_DONE;
		e->at = now_mono_ns();
		e->fails = 0;
		str_copy(e->uid, sizeof(e->uid), uid ? uid : "");
		observe("work_item_processing_time", e->enq_ns);
		e->enq_ns = 0;
	}
	pthread_mutex_unlock(&ctl->lock);
	return r;
}

/* A failure of a key's own work: counted, and given up after MAX_ATTEMPTS (0 then). */
static int key_failed(const char *what, const char *key, const char *id, unsigned *fails, int r)
{
	metric_inc(m_errors, "total_errors", id);
	if (++*fails < MAX_ATTEMPTS)
		return r;
	metric_inc(m_errors, "errors_after_retries_exhausted", id);
	log_error(what, KV_S("key", key), KV_S("instance", id), KV_U("attempts", *fails), KV_E(r));
	*fails = 0;
	return 0;
}

/* The outcome of one Node of a sent batch (its claim is released here). Returns < 0 when the
 * Node is the reconciled one and it failed. */
static int tag_outcome(struct ccm_tag_ctl *ctl, const struct tcand *c, bool own, int res)
{
	int r = res;

	if (res == 0) {
		pthread_mutex_lock(&ctl->lock);
		struct tnode *e = tnode_locked(ctl, c->name);
		if (e) {
			e->st = T_TAGGED;
			e->at = now_mono_ns();
		}
		pthread_mutex_unlock(&ctl->lock);
		if ((r = finish_node(ctl, c->name, c->uid)) < 0 && !own)
			controller_add(ctl->c, c->name); /* the label, on its own key */
		return own ? r : 0;
	}
	bool gone = res == -ENOENT && !within_grace(c->node);
	pthread_mutex_lock(&ctl->lock);
	struct tnode *e = tnode_locked(ctl, c->name);
	if (e) {
		e->st = gone ? T_DONE : T_NONE;
		e->at = now_mono_ns();
	}
	pthread_mutex_unlock(&ctl->lock);
	if (gone) {
		log_info("tagging: the node's instance does not exist; not tagged",
			 KV_S("node", c->name), KV_S("instance", c->id));
		return 0;
	}
	if (!own) {
		if (res == -ENOENT)
			controller_add_after(ctl->c, c->name, NOTFOUND_RETRY_NS);
		else
			controller_add(ctl->c, c->name);
	}
	return res;
}

/* The batch of one reconcile: own first, claimed; the picks' indexes go to picks. */
static int tag_claim(struct ccm_tag_ctl *ctl, struct tcand *c, size_t nc, size_t own,
		     size_t *picks, size_t *ret_n)
{
	struct ccm_tag_cand *pc = calloc(nc ? nc : 1, sizeof(*pc));
	int64_t now = now_mono_ns();
	size_t ids = 0, n;

	if (!pc)
		return -ENOMEM;
	pthread_mutex_lock(&ctl->lock);
	for (size_t i = 0; i < nc; i++) {
		pc[i].id = c[i].id;
		pc[i].eligible = tag_eligible_locked(ctl, c[i].name, c[i].uid, now);
	}
	n = ccm_tag_plan(pc, nc, own, ctl->max_ids, picks, &ids);
	if (n == 0 || picks[0] != own) {
		n = 0; /* the own Node went into another batch meanwhile */
	}
	for (size_t i = 0; i < n; i++) {
		struct tnode *e = tnode_locked(ctl, c[picks[i]].name);
		if (!e) {
			n = i; /* no memory: the batch ends here */
			break;
		}
		e->st = T_CLAIMED;
		str_copy(e->uid, sizeof(e->uid), c[picks[i]].uid ? c[picks[i]].uid : "");
		str_copy(e->id, sizeof(e->id), c[picks[i]].id);
	}
	pthread_mutex_unlock(&ctl->lock);
	free(pc);
	*ret_n = n;
	return 0;
}

/* Tags the batch that starts with the own Node c[own]; the distinct IDs in one call. */
static int tag_send(struct ccm_tag_ctl *ctl, struct tcand *c, const size_t *picks, size_t n)
{
	const char **ids = calloc(n, sizeof(*ids));
	int *res = calloc(n, sizeof(*res)), r = 0;
	size_t *of = calloc(n, sizeof(*of)), nid = 0;
	struct aws_error err;

	if (!ids || !res || !of) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;
		while (k < nid && strcmp(ids[k], c[picks[i]].id) != 0)
			k++;
		if (k == nid)
			ids[nid++] = c[picks[i]].id;
		of[i] = k;
	}
	bool transient = tags_batch(ctl, true, ids, nid, res, &err);
	pthread_mutex_lock(&ctl->lock);
	hold_locked(ctl, transient);
	pthread_mutex_unlock(&ctl->lock);
	size_t tagged = 0;
	int failure = 0;
	for (size_t k = 0; k < nid; k++) {
		tagged += res[k] == 0;
		if (res[k] < 0 && !failure)
			failure = res[k];
	}
	if (tagged)
		log_info("tagged instances", KV_U("instances", tagged), KV_U("nodes", n),
			 KV_S("checksum", ctl->tags.checksum));
	if (failure)
		log_error("tagging: CreateTags failed", KV_U("instances", nid - tagged),
			  KV_S("error", err.message), KV_E(failure));
	for (size_t i = 0; i < n; i++) {
		int x = tag_outcome(ctl, &c[picks[i]], i == 0, res[of[i]]);
		if (i == 0)
			r = x;
	}
out:
	if (r == -ENOMEM) {
		pthread_mutex_lock(&ctl->lock);
		for (size_t i = 0; i < n; i++) {
			struct tnode *e = kmap_get(&ctl->nodes, c[picks[i]].name);
			if (e && e->st == T_CLAIMED)
				e->st = T_NONE;
		}
		pthread_mutex_unlock(&ctl->lock);
	}
	free(ids);
	free(res);
	free(of);
	return r;
}

static int tag_batch(struct ccm_tag_ctl *ctl, const char *name, int64_t *requeue)
{
	struct kube_obj **objs = NULL;
	struct tcand *c = NULL;
	size_t n_objs = 0, nc = 0, own = 0, n = 0, *picks = NULL;
	int r;

	batch_window(ctl, count_tag_pending);
	if ((r = kube_store_list(ccm_node_store(ctl->m), &objs, &n_objs)) < 0 ||
	    (r = tag_candidates(ctl, objs, n_objs, &c, &nc)) < 0)
		goto out;
	while (own < nc && strcmp(c[own].name, name) != 0)
		own++;
	if (own == nc) {
		r = 0; /* tagged by someone else meanwhile, or gone */
		goto out;
	}
	if (!(picks = calloc(nc, sizeof(*picks)))) {
		r = -ENOMEM;
		goto out;
	}
	if ((r = tag_claim(ctl, c, nc, own, picks, &n)) < 0)
		goto out;
	if (n == 0) {
		*requeue = CLAIMED_RETRY_NS;
		goto out;
	}
	r = tag_send(ctl, c, picks, n);
out:
	free(picks);
	free(c);
	kube_objv_free(objs, n_objs);
	return r;
}

static int tag_reconcile(struct ccm_tag_ctl *ctl, const char *name, int64_t *requeue)
{
	struct kube_obj *o = NULL;
	char id[ID_MAX];
	int r = 0;

	if (kube_store_get(ccm_node_store(ctl->m), name, &o) < 0) {
		pthread_mutex_lock(&ctl->lock);
		struct tnode *e = kmap_get(&ctl->nodes, name);
		if (e && e->st != T_CLAIMED)
			free(kmap_remove(&ctl->nodes, name));
		pthread_mutex_unlock(&ctl->lock);
		return 0;
	}
	const cJSON *node = o->json;
	const char *uid = json_str(node, "metadata.uid");
	bool need = needs_tag(ctl, node, id, sizeof(id));
	enum tstate st = T_NONE;
	int64_t wait = 0;

	pthread_mutex_lock(&ctl->lock);
	sweep_locked(ctl, now_mono_ns());
	struct tnode *e = need ? tnode_locked(ctl, name) : kmap_get(&ctl->nodes, name);
	if (e) {
		observe("work_item_dequeuing_time", e->enq_ns);
		if (!need) {
			observe("work_item_processing_time", e->enq_ns);
			e->enq_ns = 0;
			e->fails = 0;
		}
		bool same = strcmp(e->uid, uid ? uid : "") == 0;
		st = e->st == T_CLAIMED || same ? e->st : T_NONE;
		if (st == T_DONE && now_mono_ns() - e->at >= DONE_TTL_NS)
			st = T_NONE;
	}
	if (need && st == T_NONE)
		wait = held_locked(ctl); /* a label alone needs no AWS call */
	pthread_mutex_unlock(&ctl->lock);
	if (!need || st == T_DONE)
		goto out;
	if (st == T_CLAIMED) {
		*requeue = CLAIMED_RETRY_NS;
		goto out;
	}
	if (wait) {
		*requeue = wait;
		goto out;
	}
	if (st == T_TAGGED)
		r = finish_node(ctl, name, uid);
	else
		r = tag_batch(ctl, name, requeue);
	if (r < 0 && r != -ECANCELED) {
		pthread_mutex_lock(&ctl->lock);
		struct tnode *f = tnode_locked(ctl, name);
		if (f)
			r = key_failed("tagging: giving up on the node", name, id, &f->fails, r);
		pthread_mutex_unlock(&ctl->lock);
	}
out:
	kube_obj_unref(o);
	return r;
}

/* Untagging ------------------------------------------------------------------------------- */

/* The instance IDs the store's Nodes have (an untag waits for none of them). */
static int ids_in_use(struct ccm_tag_ctl *ctl, char ***ret)
{
	struct kube_obj **objs = NULL;
	size_t n = 0;
	char id[ID_MAX], **v = NULL;
	int r;

	if ((r = kube_store_list(ccm_node_store(ctl->m), &objs, &n)) < 0)
		return r;
	for (size_t i = 0; i < n && r >= 0; i++)
		if (ccm_node_instance_id(objs[i]->json, id, sizeof(id)) == 0)
			r = strv_push(&v, id);
	kube_objv_free(objs, n);
	if (r < 0) {
		strv_free(v);
		return r;
	}
	*ret = v;
	return 0;
}

/* Is an instance in a tagging batch being sent? Called with the lock held. */
static bool tag_claimed_locked(struct ccm_tag_ctl *ctl, const char *id)
{
	size_t i;
	for (struct kmap_entry *e = kmap_first(&ctl->nodes, &i); e;
	     e = kmap_next(&ctl->nodes, e, &i)) {
		const struct tnode *t = e->val;
		if (t->st == T_CLAIMED && strcmp(t->id, id) == 0)
			return true;
	}
	return false;
}

static bool untag_eligible_locked(struct ccm_tag_ctl *ctl, const char *id,
				  const struct tuntag *u, char *const *in_use)
{
	return !u->claimed && !strv_contains(in_use, id) && !tag_claimed_locked(ctl, id);
}

static size_t count_untag_pending(struct ccm_tag_ctl *ctl)
{
	_cleanup_strv_ char **in_use = NULL;
	size_t i, n = 0;

	if (ids_in_use(ctl, &in_use) < 0)
		return 0;
	pthread_mutex_lock(&ctl->lock);
	for (struct kmap_entry *e = kmap_first(&ctl->untags, &i); e;
	     e = kmap_next(&ctl->untags, e, &i))
		n += untag_eligible_locked(ctl, e->key, e->val, in_use);
	pthread_mutex_unlock(&ctl->lock);
	return n;
}

/* The IDs one untag batch covers, own first, claimed (malloc'd vector). */
static int untag_claim(struct ccm_tag_ctl *ctl, const char *own, char *const *in_use,
		       char ***ret)
{
	char **v = NULL;
	size_t i;
	int r = 0;

	pthread_mutex_lock(&ctl->lock);
	struct tuntag *u = kmap_get(&ctl->untags, own);
	if (u && untag_eligible_locked(ctl, own, u, in_use) && (r = strv_push(&v, own)) >= 0)
		u->claimed = true;
	for (struct kmap_entry *e = v ? kmap_first(&ctl->untags, &i) : NULL;
	     e && r >= 0 && strv_len(v) < ctl->max_ids; e = kmap_next(&ctl->untags, e, &i)) {
		struct tuntag *x = e->val;
		if (strcmp(e->key, own) == 0 || !untag_eligible_locked(ctl, e->key, x, in_use))
			continue;
		if ((r = strv_push(&v, e->key)) >= 0)
			x->claimed = true;
	}
	if (r < 0)
		for (char **p = v; p && *p; p++)
			if ((u = kmap_get(&ctl->untags, *p)))
				u->claimed = false;
	pthread_mutex_unlock(&ctl->lock);
	if (r < 0) {
		strv_free(v);
		return r;
	}
	*ret = v;
	return 0;
}

static int untag_send(struct ccm_tag_ctl *ctl, char **ids, size_t n)
{
	int *res = calloc(n, sizeof(*res)), r = 0;
	struct aws_error err;
	size_t done = 0;

	if (!res) {
		r = -ENOMEM;
		pthread_mutex_lock(&ctl->lock);
		for (size_t i = 0; i < n; i++) {
			struct tuntag *u = kmap_get(&ctl->untags, ids[i]);
			if (u)
				u->claimed = false;
		}
		pthread_mutex_unlock(&ctl->lock);
		return r;
	}
	bool transient = tags_batch(ctl, false, (const char **)ids, n, res, &err);
	pthread_mutex_lock(&ctl->lock);
	hold_locked(ctl, transient);
	for (size_t i = 0; i < n; i++) {
		struct tuntag *u = kmap_get(&ctl->untags, ids[i]);
		if (!u)
			continue;
		if (res[i] == 0 || res[i] == -ENOENT) {
			/* an instance gone has no tags left to take off */
			observe("work_item_processing_time", u->enq_ns);
			free(kmap_remove(&ctl->untags, ids[i]));
			done++;
			continue;
		}
		u->claimed = false;
		if (i == 0)
			r = res[i];
	}
	pthread_mutex_unlock(&ctl->lock);
	if (done)
		log_info("untagged instances", KV_U("instances", done));
	if (done < n)
		log_error("tagging: DeleteTags failed", KV_U("instances", n - done),
			  KV_S("error", err.message));
	for (size_t i = 1; i < n; i++) {
		char key[sizeof(UNTAG_PREFIX) + ID_MAX];
		if (res[i] == 0 || res[i] == -ENOENT)
			continue;
		snprintf(key, sizeof(key), UNTAG_PREFIX "%s", ids[i]);
		controller_add(ctl->c, key);
	}
	free(res);
	return r;
}

static int untag_reconcile(struct ccm_tag_ctl *ctl, const char *id, int64_t *requeue)
{
	_cleanup_strv_ char **in_use = NULL, **ids = NULL;
	bool claimed = false;
	int64_t wait = 0;
	int r;

	pthread_mutex_lock(&ctl->lock);
	struct tuntag *u = kmap_get(&ctl->untags, id);
	if (u) {
		observe("work_item_dequeuing_time", u->enq_ns);
		claimed = u->claimed;
		wait = held_locked(ctl);
	}
	pthread_mutex_unlock(&ctl->lock);
	if (!u)
		return 0;
	if (claimed || wait) {
		*requeue = claimed ? CLAIMED_RETRY_NS : wait;
		return 0;
	}
	if ((r = ids_in_use(ctl, &in_use)) < 0)
		return r;
	if (strv_contains(in_use, id)) {
		/* a Node of the same instance came back: it keeps its tags */
		pthread_mutex_lock(&ctl->lock);
		free(kmap_remove(&ctl->untags, id));
		pthread_mutex_unlock(&ctl->lock);
		return 0;
	}
	batch_window(ctl, count_untag_pending);
	strv_free(in_use);
	in_use = NULL;
	if ((r = ids_in_use(ctl, &in_use)) < 0 || (r = untag_claim(ctl, id, in_use, &ids)) < 0)
		return r;
	if (!ids) {
		*requeue = CLAIMED_RETRY_NS;
		return 0;
	}
	r = untag_send(ctl, ids, strv_len(ids));
	if (r < 0 && r != -ECANCELED) {
		pthread_mutex_lock(&ctl->lock);
		if ((u = kmap_get(&ctl->untags, id)) &&
		    (r = key_failed("tagging: giving up untagging the instance", id, id, &u->fails,
				    r)) == 0)
			free(kmap_remove(&ctl->untags, id));
		pthread_mutex_unlock(&ctl->lock);
	}
	return r;
}

/* The controller ------------------------------------------------------------------------- */

int ccm_tag_reconcile(void *ud, const char *key, int64_t *requeue_after_ns)
{
	struct ccm_tag_ctl *ctl = ud;

	if (strncmp(key, UNTAG_PREFIX, strlen(UNTAG_PREFIX)) == 0)
		return untag_reconcile(ctl, key + strlen(UNTAG_PREFIX), requeue_after_ns);
	return tag_reconcile(ctl, key, requeue_after_ns);
}

static void enqueue(struct controller *c, const char *key, int64_t *enq_ns)
{
	struct ccm_tag_ctl *ctl = c->ud;
	if (!*enq_ns)
		*enq_ns = now_mono_ns();
	int r = ctl->rate_limited ? controller_add_rate_limited(c, key) : controller_add(c, key);
	if (r < 0 && r != -ESHUTDOWN)
		log_error("tagging: cannot queue", KV_S("key", key), KV_E(r));
}

void ccm_tag_changed(struct controller *c, const cJSON *old, const cJSON *node)
{
	struct ccm_tag_ctl *ctl = c->ud;
	const char *name = json_str(node, "metadata.name");
	char id[ID_MAX];

	(void)old;
	if (!ctl || !name || !controller_running(c) || !needs_tag(ctl, node, id, sizeof(id)))
		return;
	pthread_mutex_lock(&ctl->lock);
	struct tnode *e = tnode_locked(ctl, name);
	int64_t enq = e ? e->enq_ns : 0;
	enqueue(c, name, &enq);
	if (e)
		e->enq_ns = enq;
	pthread_mutex_unlock(&ctl->lock);
}

void ccm_tag_deleted(struct controller *c, const cJSON *node)
{
	struct ccm_tag_ctl *ctl = c->ud;
	const char *name = json_str(node, "metadata.name");
	char id[ID_MAX], key[sizeof(UNTAG_PREFIX) + ID_MAX];

	if (!ctl || !name || !controller_running(c))
		return;
	pthread_mutex_lock(&ctl->lock);
	struct tnode *e = kmap_get(&ctl->nodes, name);
	if (e && e->st != T_CLAIMED)
		free(kmap_remove(&ctl->nodes, name));
	if (ccm_node_instance_id(node, id, sizeof(id)) == 0) {
		struct tuntag *u = kmap_get(&ctl->untags, id);
		if (!u && (u = calloc(1, sizeof(*u))) && kmap_put(&ctl->untags, id, u, NULL) < 0) {
			free(u);
			u = NULL;
		}
		if (u) {
			str_copy(u->node, sizeof(u->node), name);
			snprintf(key, sizeof(key), UNTAG_PREFIX "%s", id);
			enqueue(c, key, &u->enq_ns);
		}
	}
	pthread_mutex_unlock(&ctl->lock);
}

int ccm_tag_start(struct controller *c)
{
	struct ccm_tag_ctl *ctl = c->ud;
	struct kube_obj **objs = NULL;
	size_t n = 0;

	ctl->c = c;
	if (kube_store_list(ccm_node_store(ctl->m), &objs, &n) >= 0) {
		for (size_t i = 0; i < n; i++)
			ccm_tag_changed(c, NULL, objs[i]->json);
		kube_objv_free(objs, n);
	}
	log_info("started the tagging controller", KV_U("tags", ctl->tags.n),
		 KV_S("checksum", ctl->tags.checksum), KV_I("workers", c->workers ? c->workers : 1),
		 KV_U("batch", ctl->max_ids), KV_B("rateLimited", ctl->rate_limited));
	return 0;
}

int ccm_tag_new(struct ccm *m, struct ccm_tagging_opts *o, struct ccm_tag_ctl **ret)
{
	struct ccm_tag_ctl *ctl;

	pthread_once(&metrics_once, metrics_init);
	if (!(ctl = calloc(1, sizeof(*ctl))))
		return -ENOMEM;
	ctl->m = m;
	if (o) {
		ctl->tags = o->tags;
		o->tags = (struct ccm_tagset){0};
		ctl->rate_limited = o->rate_limited;
		ctl->max_ids = o->batching ? o->max_ids : 1;
		ctl->window_ns = o->window_ns;
		ctl->max_wait_ns = o->max_wait_ns;
	}
	if (!ctl->max_ids || ctl->max_ids > BATCH_MAX_IDS)
		ctl->max_ids = BATCH_MAX_IDS;
	if (ctl->window_ns <= 0)
		ctl->window_ns = BATCH_WINDOW_NS;
	if (ctl->max_wait_ns <= 0)
		ctl->max_wait_ns = BATCH_MAX_WAIT_NS;
	pthread_mutex_init(&ctl->lock, NULL);
	*ret = ctl;
	return 0;
}

void ccm_tag_free(struct ccm_tag_ctl *ctl)
{
	if (!ctl)
		return;
	kmap_clear(&ctl->nodes, free);
	kmap_clear(&ctl->untags, free);
	ccm_tagset_release(&ctl->tags);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl);
}
