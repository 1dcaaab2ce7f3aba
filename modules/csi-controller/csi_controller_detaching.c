/* Detaches the controller is waiting for, as upstream's
 * aws_ebs_csi_ec2_detach_pending_seconds_total (aws-ebs-csi-driver pkg/metrics/async.go): a series
 * {volume_id, instance_id, attachment_state} per attachment that has not reached "detached" for
 * longer than the threshold (upstream: 60 s), valued at the seconds since the first poll that saw
 * it detaching; attachment_state is the state seen last. The wait loops report each poll
 * (csi_detaching_seen); a pair not polled for 15 minutes is forgotten, as upstream's cache cleanup
 * does. The values are computed at each scrape (a metrics collector), with upstream's
 * aws_ebs_csi_ec2_collector_scrapes_total and aws_ebs_csi_ec2_collector_duration_seconds. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/metrics/metrics.h"
#include "modules/csi-controller/csi_controller_internal.h"

#define FORGET_NS (15 * 60 * NSEC_PER_SEC)

struct pending {
	char volume[32], instance[32];
	char state[16];	   /* last seen */
	char exported[16]; /* the attachment_state of the series shown; "" none */
	int64_t start, last;
};

struct csi_detaching {
	int64_t threshold_ns;
	struct metric *m_pending, *m_scrapes, *m_duration;
	pthread_mutex_t lock; /* guards what follows */
	struct pending p[CSI_DETACHING_MAX];
	size_t n;
	bool full_logged;
};

static struct pending *find(struct csi_detaching *d, const char *volume, const char *instance)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->p[i].volume, volume) == 0 && strcmp(d->p[i].instance, instance) == 0)
			return &d->p[i];
	return NULL;
}

/* Called with d->lock held. */
static void unexport(struct csi_detaching *d, struct pending *p)
{
	if (p->exported[0])
		metric_remove(d->m_pending, p->volume, p->instance, p->exported);
	p->exported[0] = '\0';
}

static void drop(struct csi_detaching *d, struct pending *p)
{
	unexport(d, p);
	*p = d->p[--d->n];
}

void csi_detaching_seen(struct csi_detaching *d, const char *volume, const char *instance,
			const char *state)
{
	int64_t now = now_mono_ns();

	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	struct pending *p = find(d, volume, instance);
	if (!state || !*state || strcmp(state, "detached") == 0) {
		if (p)
			drop(d, p);
	} else if (p) {
		str_copy(p->state, sizeof(p->state), state);
		p->last = now;
	} else if (d->n < CSI_DETACHING_MAX && strlen(volume) < sizeof(p->volume) &&
		   strlen(instance) < sizeof(p->instance)) {
		p = &d->p[d->n++];
		*p = (struct pending){.start = now, .last = now};
		str_copy(p->volume, sizeof(p->volume), volume);
		str_copy(p->instance, sizeof(p->instance), instance);
		str_copy(p->state, sizeof(p->state), state);
	} else if (!d->full_logged) {
		d->full_logged = true;
		log_warn("too many detaches pending to track them all in the metrics",
			 KV_U("max", CSI_DETACHING_MAX));
	}
	pthread_mutex_unlock(&d->lock);
}

static void collect(void *ud)
{
	struct csi_detaching *d = ud;
	int64_t t0 = now_mono_ns();

	metric_inc(d->m_scrapes);
	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < d->n;) {
		struct pending *p = &d->p[i];
		if (t0 - p->last > FORGET_NS) {
			drop(d, p); /* the last one moved here: look at i again */
			continue;
		}
		if (t0 - p->start > d->threshold_ns) {
			if (strcmp(p->exported, p->state) != 0) {
				unexport(d, p);
				str_copy(p->exported, sizeof(p->exported), p->state);
			}
			metric_set(d->m_pending, (double)(t0 - p->start) / 1e9, p->volume,
				   p->instance, p->exported);
		}
		i++;
	}
	pthread_mutex_unlock(&d->lock);
	metric_observe(d->m_duration, (double)(now_mono_ns() - t0) / 1e9);
}

int csi_detaching_new(int64_t threshold_ns, struct csi_detaching **ret)
{
	static const double buckets[] = {0.01, 0.1, 0.5, 1, 2.5, 5, 10}; /* upstream's */
	struct csi_detaching *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->threshold_ns = threshold_ns;
	d->m_pending = metric_counter(
	    "aws_ebs_csi_ec2_detach_pending_seconds_total",
	    "Number of seconds csi driver has been waiting for volume to be detached from "
	    "instance. Label attachment_state shows last seen state for attachment associated "
	    "with volume_id and instance_id. Metric only valid if emitted from leader.",
	    (const char *[]){"volume_id", "instance_id", "attachment_state", NULL});
	d->m_scrapes = metric_counter("aws_ebs_csi_ec2_collector_scrapes_total",
				      "Total number of async EC2 collector scrapes.", NULL);
	d->m_duration = metric_histogram("aws_ebs_csi_ec2_collector_duration_seconds",
					 "Histogram of async EC2 collector scrape duration in "
					 "seconds.",
					 NULL, buckets, ARRAY_SIZE(buckets));
	if (!d->m_pending || !d->m_scrapes || !d->m_duration) {
		free(d);
		return -EEXIST; /* the names are taken with another type or labels */
	}
	pthread_mutex_init(&d->lock, NULL);
	metrics_add_collector(collect, d);
	*ret = d;
	return 0;
}

void csi_detaching_free(struct csi_detaching *d)
{
	if (!d)
		return;
	metrics_remove_collector(collect, d);
	pthread_mutex_lock(&d->lock);
	while (d->n)
		drop(d, &d->p[0]);
	pthread_mutex_unlock(&d->lock);
	pthread_mutex_destroy(&d->lock);
	free(d);
}
