/* The controller's setup and release (the AWS client, the batchers and their metrics, the
 * device allocator, the coalescer, the in-flight set) and the Identity Probe. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/batch.h"
#include "common/aws/client.h"
#include "common/aws/query.h"
#include "common/base/buf.h"
#include "common/base/keylock.h"
#include "common/base/timeutil.h"
#include "common/metrics/metrics.h"
#include "modules/csi-controller/csi_controller_internal.h"

#define PROBE_CACHE_NS (10 * NSEC_PER_SEC)

int csi_ctrl_probe(void *ud, char *why, size_t n)
{
	struct csi_ctrl *c = ud;
	struct aws_error err = {0};
	int64_t now = now_mono_ns();
	int r;

	pthread_mutex_lock(&c->lock);
	bool fresh = c->probe_at && now - c->probe_at < PROBE_CACHE_NS;
	pthread_mutex_unlock(&c->lock);
	if (fresh)
		return 0;
	if ((r = ec2_dry_run(c, &err)) < 0) {
		char msg[512];
		snprintf(why, n, "EC2 is not reachable: %s", aws_error_str(&err, msg, sizeof(msg)));
		return r;
	}
	pthread_mutex_lock(&c->lock);
	c->probe_at = now;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* The batcher's fetch: a real DescribeX call, counted in the driver's metrics. */
static int batch_fetch(void *ud, const char *const *ids, size_t n, struct aws_reply *rep,
		       struct aws_error *err)
{
	struct csi_batch_fetch *bf = ud;
	struct aws_query q = AWS_QUERY_INIT;
	int64_t t0 = now_mono_ns();
	int r;

	if ((r = aws_query_add_list(&q, bf->k->id_param, ids, n)) < 0)
		goto out;
	r = aws_call_query(bf->c->aws, AWS_SVC_EC2, bf->k->action, &q, rep, err);
	if (r < 0 && err && aws_error_code_is_throttle(err->code))
		metric_inc(bf->c->m_throttles, bf->k->action);
	else if (r < 0)
		metric_inc(bf->c->m_errors, bf->k->action, err ? err->code : "");
	else
		metric_observe(bf->c->m_requests, (double)(now_mono_ns() - t0) / 1e9,
			       bf->k->action);
out:
	aws_query_release(&q);
	return r;
}

static int make_batcher(struct csi_ctrl *c, int i, const struct aws_batch_kind *k,
			struct aws_batcher **ret)
{
	/* A wider window than the helper's default: every caller here then polls or waits for
	 * seconds anyway, and concurrent attachments and creations share far more calls. */
	c->fetchers[i] = (struct csi_batch_fetch){c, k};
	return aws_batcher_new(c->aws, k,
			       &(struct aws_batcher_opts){.window_ns = 50 * NSEC_PER_MSEC,
							  .max_wait_ns = 200 * NSEC_PER_MSEC,
							  .fetch = batch_fetch,
							  .fetch_ud = &c->fetchers[i]},
			       ret);
}

void csi_ctrl_release(struct csi_ctrl *c)
{
	aws_batcher_free(c->b_volumes);
	aws_batcher_free(c->b_instances);
	aws_batcher_free(c->b_snapshots);
	aws_batcher_free(c->b_mods);
	aws_client_free(c->aws);
	csi_devices_free(c->devices);
	csi_detaching_free(c->detaching);
	csi_coalescer_free(c->coalescer);
	csi_kv_free(c->extra_tags, c->n_extra_tags);
	keylock_free(c->inflight);
	strv_free(c->zones);
	pthread_mutex_destroy(&c->lock);
}

int csi_ctrl_setup(struct csi_ctrl *c, const struct aws_client_opts *ao)
{
	int r;

	pthread_mutex_init(&c->lock, NULL);
	if (!c->attach_timeout_ns)
		c->attach_timeout_ns = 150 * NSEC_PER_SEC;
	if (!c->stuck_attaching_ns)
		c->stuck_attaching_ns = 90 * NSEC_PER_SEC;
	if (!c->create_timeout_ns)
		c->create_timeout_ns = 150 * NSEC_PER_SEC;
	if (!c->poll_scale)
		c->poll_scale = 1;
	if (!c->detach_metric_after_ns)
		c->detach_metric_after_ns = 60 * NSEC_PER_SEC;
	c->m_requests = metric_histogram("aws_ebs_csi_api_request_duration_seconds",
					 "EBS CSI driver's AWS API request duration in seconds.",
					 (const char *[]){"request", NULL}, NULL, 0);
	c->m_errors = metric_counter("aws_ebs_csi_api_request_errors_total",
				     "EBS CSI driver's AWS API request errors.",
				     (const char *[]){"request", "code", NULL});
	c->m_throttles = metric_counter(
	    "aws_ebs_csi_api_request_throttles_total",
	    "EBS CSI driver's AWS API requests that failed throttled (after the retries).",
	    (const char *[]){"operation_name", NULL});
	if ((r = aws_client_new(ao, &c->aws)) < 0)
		return r;
	const char *ep = getenv("AWS_EC2_ENDPOINT");
	if (ep && *ep && (r = aws_client_set_override(c->aws, AWS_SVC_EC2, ep, NULL, NULL)) < 0)
		return r;
	if ((r = keylock_new(CSI_CTRL_MAX_INFLIGHT, &c->inflight)) < 0 ||
	    (r = csi_devices_new(&c->devices)) < 0 || (r = csi_coalescer_new(&c->coalescer)) < 0 ||
	    (r = csi_detaching_new(c->detach_metric_after_ns < 0 ? 0 : c->detach_metric_after_ns,
				   &c->detaching)) < 0 ||
	    (r = make_batcher(c, 0, &aws_batch_volumes, &c->b_volumes)) < 0 ||
	    (r = make_batcher(c, 1, &aws_batch_instances, &c->b_instances)) < 0 ||
	    (r = make_batcher(c, 2, &aws_batch_snapshots, &c->b_snapshots)) < 0 ||
	    (r = make_batcher(c, 3, &aws_batch_volume_modifications, &c->b_mods)) < 0)
		return r;
	return 0;
}
