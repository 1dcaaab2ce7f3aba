/* Describe-by-ID batching (see batch.h). */
#include "common/aws/batch.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/metrics/metrics.h"

#define BATCH_MAX_IDS 1000
#define BATCH_MAX_ID_LEN 128
#define BATCH_MAX_SPLIT_DEPTH 12

const struct aws_batch_kind aws_batch_instances = {
    "instances",
    AWS_SVC_EC2,
    "DescribeInstances",
    "InstanceId",
    "reservationSet/instancesSet",
    "instanceId",
    "InvalidInstanceID.NotFound",
    "i-",
    100,
};
const struct aws_batch_kind aws_batch_volumes = {
    "volumes",	 AWS_SVC_EC2, "DescribeVolumes",	"VolumeId",
    "volumeSet", "volumeId",  "InvalidVolume.NotFound", "vol-",
    500,
};
const struct aws_batch_kind aws_batch_snapshots = {
    "snapshots",   AWS_SVC_EC2,	 "DescribeSnapshots",	     "SnapshotId",
    "snapshotSet", "snapshotId", "InvalidSnapshot.NotFound", "snap-",
    500,
};
const struct aws_batch_kind aws_batch_volume_modifications = {
    "volume-modifications",
    AWS_SVC_EC2,
    "DescribeVolumesModifications",
    "VolumeId",
    "volumeModificationSet",
    "volumeId",
    "InvalidVolume.NotFound",
    "vol-",
    500,
};

const struct aws_batch_kind *aws_batch_kind_by_name(const char *name)
{
	static const struct aws_batch_kind *const kinds[] = {
	    &aws_batch_instances,
	    &aws_batch_volumes,
	    &aws_batch_snapshots,
	    &aws_batch_volume_modifications,
	};
	for (size_t i = 0; name && i < ARRAY_SIZE(kinds); i++)
		if (strcmp(kinds[i]->name, name) == 0)
			return kinds[i];
	return NULL;
}

struct batch {
	char **ids;
	size_t n;
	xmlDoc **docs;	      /* per ID: the item, or NULL */
	int *res;	      /* per ID: 0 or a negative errno */
	struct aws_error err; /* of a failed call, shared by its IDs */
	int64_t first_ns, last_ns;
	bool done;
	unsigned refs;
	pthread_cond_t cond;
};

struct aws_batcher {
	struct aws_client *client;
	const struct aws_batch_kind *kind;
	struct aws_batcher_opts o;
	unsigned max_ids;
	pthread_mutex_t lock;
	struct batch *open;
	struct aws_batcher_stats stats;
};

static struct metric *m_calls, *m_asks;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;

static void metrics_init(void)
{
	m_asks = metric_counter("aws_k8s_aws_batch_requests_total",
				"IDs asked for through the Describe batcher",
				(const char *[]){"request", NULL});
	m_calls =
	    metric_counter("aws_k8s_aws_batch_calls_total", "Describe calls made by the batcher",
			   (const char *[]){"request", NULL});
}

int aws_batcher_new(struct aws_client *c, const struct aws_batch_kind *k,
		    const struct aws_batcher_opts *o, struct aws_batcher **ret)
{
	struct aws_batcher *b;

	if (!k || (!c && !(o && o->fetch)))
		return -EINVAL;
	pthread_once(&metrics_once, metrics_init);
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	if (o)
		b->o = *o;
	if (b->o.window_ns <= 0)
		b->o.window_ns = 10 * NSEC_PER_MSEC;
	if (b->o.max_wait_ns <= 0)
		b->o.max_wait_ns = 50 * NSEC_PER_MSEC;
	if (b->o.max_wait_ns < b->o.window_ns)
		b->o.max_wait_ns = b->o.window_ns;
	b->max_ids = b->o.max_ids ? b->o.max_ids : k->max_ids;
	if (b->max_ids == 0 || b->max_ids > BATCH_MAX_IDS)
		b->max_ids = BATCH_MAX_IDS;
	b->client = c;
	b->kind = k;
	pthread_mutex_init(&b->lock, NULL);
	*ret = b;
	return 0;
}

void aws_batcher_free(struct aws_batcher *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->lock);
	free(b);
}

void aws_batcher_stats(struct aws_batcher *b, struct aws_batcher_stats *ret)
{
	pthread_mutex_lock(&b->lock);
	*ret = b->stats;
	pthread_mutex_unlock(&b->lock);
}

static struct batch *batch_new(unsigned max)
{
	struct batch *bt = calloc(1, sizeof(*bt));

	if (!bt)
		return NULL;
	bt->ids = calloc(max, sizeof(*bt->ids));
	bt->docs = calloc(max, sizeof(*bt->docs));
	bt->res = calloc(max, sizeof(*bt->res));
	if (!bt->ids || !bt->docs || !bt->res) {
		free(bt->ids);
		free(bt->docs);
		free(bt->res);
		free(bt);
		return NULL;
	}
	pthread_cond_init(&bt->cond, NULL);
	return bt;
}

static void batch_free(struct batch *bt)
{
	for (size_t i = 0; i < bt->n; i++) {
		free(bt->ids[i]);
		xmlFreeDoc(bt->docs[i]);
	}
	free(bt->ids);
	free(bt->docs);
	free(bt->res);
	pthread_cond_destroy(&bt->cond);
	free(bt);
}

/* --- running a batch (without the lock) -------------------------------------------------- */

static ssize_t index_of(struct batch *bt, const size_t *idx, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(bt->ids[idx[i]], id) == 0)
			return (ssize_t)idx[i];
	return -1;
}

/* Stores each item of the reply under its ID. */
static int collect(struct batch *bt, const struct aws_batch_kind *k, const xmlNode *n,
		   const char *lists, const size_t *idx, size_t nidx)
{
	char seg[64];
	size_t l = strcspn(lists, "/");
	int r;

	if (l == 0 || l >= sizeof(seg))
		return -EINVAL;
	memcpy(seg, lists, l);
	seg[l] = 0;
	for (xmlNode *it = aws_xml_list(n, seg); it; it = aws_xml_next(it)) {
		if (lists[l] == '/') {
			if ((r = collect(bt, k, it, lists + l + 1, idx, nidx)) < 0)
				return r;
			continue;
		}
		const char *id = aws_xml_text(it, k->id_field);
		ssize_t i;
		xmlDoc *doc;
		xmlNode *copy;
		/* an item without its ID: the reply cannot prove that any ID is absent */
		if (!id || !*id)
			return -EBADMSG;
		i = index_of(bt, idx, nidx, id);
		if (i < 0 || bt->docs[i])
			continue;
		doc = xmlNewDoc((const xmlChar *)"1.0");
		copy = doc ? xmlDocCopyNode(it, doc, 1) : NULL;
		if (!copy) {
			xmlFreeDoc(doc);
			return -ENOMEM;
		}
		xmlDocSetRootElement(doc, copy);
		bt->docs[i] = doc;
		bt->res[i] = 0;
	}
	return 0;
}

/* The IDs of the batch (among idx) named in a NotFound message; returns how many. */
static size_t named_ids(struct batch *bt, const struct aws_batch_kind *k, const char *msg,
			const size_t *idx, size_t nidx, bool *named)
{
	size_t pl = strlen(k->id_prefix), found = 0;

	for (const char *p = msg; (p = strstr(p, k->id_prefix));) {
		char id[BATCH_MAX_ID_LEN];
		size_t l = pl;
		while ((isalnum((unsigned char)p[l]) || p[l] == '-') && l + 1 < sizeof(id))
			l++;
		memcpy(id, p, l);
		id[l] = 0;
		for (size_t i = 0; i < nidx; i++) {
			if (!named[i] && strcmp(bt->ids[idx[i]], id) == 0) {
				named[i] = true;
				found++;
			}
		}
		p += l;
	}
	return found;
}

static void set_result(struct batch *bt, const size_t *idx, size_t n, int r)
{
	for (size_t i = 0; i < n; i++)
		bt->res[idx[i]] = r;
}

static int call(struct aws_batcher *b, struct batch *bt, const size_t *idx, size_t n,
		struct aws_reply *rep, struct aws_error *err)
{
	const char **ids = calloc(n, sizeof(*ids));
	struct aws_query q = AWS_QUERY_INIT;
	int r;

	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		ids[i] = bt->ids[idx[i]];
	pthread_mutex_lock(&b->lock);
	b->stats.calls++;
	if (n > b->stats.max_batch)
		b->stats.max_batch = n;
	pthread_mutex_unlock(&b->lock);
	metric_inc(m_calls, b->kind->action);
	if (b->o.fetch) {
		r = b->o.fetch(b->o.fetch_ud, ids, n, rep, err);
	} else {
		r = aws_query_add_list(&q, b->kind->id_param, ids, n);
		if (r >= 0)
			r = aws_call_query(b->client, b->kind->service, b->kind->action, &q, rep,
					   err);
		aws_query_release(&q);
	}
	free(ids);
	return r;
}

/* Describes the IDs idx[0..n) of the batch, splitting on NotFound errors. */
static void run(struct aws_batcher *b, struct batch *bt, size_t *idx, size_t n, int depth)
{
	struct aws_reply rep = {0};
	struct aws_error err;
	bool *named;
	size_t k, j;
	int r;

	if (n == 0)
		return;
	aws_error_clear(&err);
	r = call(b, bt, idx, n, &rep, &err);
	if (r >= 0) {
		set_result(bt, idx, n, -ENOENT); /* until found in the reply */
		r = collect(bt, b->kind, rep.result ? rep.result : rep.root, b->kind->item_lists,
			    idx, n);
		aws_reply_release(&rep);
		if (r < 0)
			set_result(bt, idx, n, r);
		return;
	}
	if (!aws_error_is(&err, b->kind->notfound_code)) {
		set_result(bt, idx, n, r);
		bt->err = err;
		return;
	}
	if (n == 1) {
		bt->res[idx[0]] = -ENOENT;
		return;
	}
	if (depth >= BATCH_MAX_SPLIT_DEPTH) {
		set_result(bt, idx, n, r);
		bt->err = err;
		return;
	}
	/* drop the IDs the message names, or split in halves */
	named = calloc(n, sizeof(*named));
	if (!named) {
		set_result(bt, idx, n, -ENOMEM);
		return;
	}
	if (named_ids(bt, b->kind, err.message, idx, n, named) > 0) {
		for (k = 0, j = 0; k < n; k++) {
			if (named[k])
				bt->res[idx[k]] = -ENOENT;
			else
				idx[j++] = idx[k];
		}
		free(named);
		log_v(5, "batch: retrying without unknown IDs", KV_S("action", b->kind->action),
		      KV_U("left", j), KV_U("dropped", n - j));
		run(b, bt, idx, j, depth + 1);
		return;
	}
	free(named);
	run(b, bt, idx, n / 2, depth + 1);
	run(b, bt, idx + n / 2, n - n / 2, depth + 1);
}

static void execute(struct aws_batcher *b, struct batch *bt)
{
	size_t *idx = calloc(bt->n, sizeof(*idx));

	if (!idx) {
		for (size_t i = 0; i < bt->n; i++)
			bt->res[i] = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < bt->n; i++)
		idx[i] = i;
	log_v(5, "batch: describing", KV_S("action", b->kind->action), KV_U("ids", bt->n));
	run(b, bt, idx, bt->n, 0);
	free(idx);
}

/* --- asking ------------------------------------------------------------------------------- */

static void deadline_ts(int64_t mono_ns, struct timespec *ts)
{
	/* the cond uses CLOCK_REALTIME by default: convert */
	int64_t real = now_real_ns() + (mono_ns - now_mono_ns());
	ts->tv_sec = real / NSEC_PER_SEC;
	ts->tv_nsec = real % NSEC_PER_SEC;
}

int aws_batcher_get(struct aws_batcher *b, const char *id, xmlDoc **ret, struct aws_error *err)
{
	struct batch *bt;
	bool leader = false;
	size_t i;
	int r;

	if (err)
		aws_error_clear(err);
	if (!b || !id || !*id || strlen(id) >= BATCH_MAX_ID_LEN || !ret)
		return -EINVAL;
	metric_inc(m_asks, b->kind->action);
	pthread_mutex_lock(&b->lock);
	b->stats.asks++;
	bt = b->open;
	if (!bt) {
		bt = batch_new(b->max_ids);
		if (!bt) {
			pthread_mutex_unlock(&b->lock);
			return -ENOMEM;
		}
		bt->first_ns = now_mono_ns();
		b->open = bt;
		leader = true;
	}
	for (i = 0; i < bt->n; i++)
		if (strcmp(bt->ids[i], id) == 0)
			break;
	if (i == bt->n) {
		bt->ids[i] = strdup(id);
		if (!bt->ids[i]) {
			if (leader) {
				b->open = NULL;
				batch_free(bt);
			}
			pthread_mutex_unlock(&b->lock);
			return -ENOMEM;
		}
		bt->n++;
	}
	bt->refs++;
	bt->last_ns = now_mono_ns();
	if (bt->n == b->max_ids) {
		b->open = NULL; /* full: the next ask starts a new batch */
		pthread_cond_broadcast(&bt->cond);
	}
	if (leader) {
		for (;;) {
			int64_t until = bt->last_ns + b->o.window_ns;
			struct timespec ts;
			if (until > bt->first_ns + b->o.max_wait_ns)
				until = bt->first_ns + b->o.max_wait_ns;
			if (b->open != bt || now_mono_ns() >= until)
				break;
			deadline_ts(until, &ts);
			pthread_cond_timedwait(&bt->cond, &b->lock, &ts);
		}
		if (b->open == bt)
			b->open = NULL;
		b->stats.batches++;
		pthread_mutex_unlock(&b->lock);
		execute(b, bt);
		pthread_mutex_lock(&b->lock);
		bt->done = true;
		pthread_cond_broadcast(&bt->cond);
	} else {
		while (!bt->done)
			pthread_cond_wait(&bt->cond, &b->lock);
	}
	r = bt->res[i];
	if (r == 0) {
		*ret = xmlCopyDoc(bt->docs[i], 1);
		if (!*ret)
			r = -ENOMEM;
	} else if (err && r != -ENOENT) {
		*err = bt->err;
	} else if (err) {
		aws_error_set(err, 0, b->kind->notfound_code, "%s does not exist", id);
	}
	if (--bt->refs == 0)
		batch_free(bt);
	pthread_mutex_unlock(&b->lock);
	return r;
}
