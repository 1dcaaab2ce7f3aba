/* node-termination-handler's queue mode: the loop over the SQS queue (see nth_sqs.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/autoscaling.h"
#include "common/aws/client.h"
#include "common/aws/ec2.h"
#include "common/aws/sqs.h"
#include "common/base/cancel.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/nth/nth.h"
#include "modules/nth/nth_sqs.h"
#include "modules/nth/nth_sqs_int.h"

#define NS_PER_S 1000000000LL
#define MAX_VISIBILITY_S 43200
#define ASG_GROUP_TAG "aws:autoscaling:groupName"

struct runner {
	struct nth *n;
	struct aws_client *aws;
	const char *url;
	int visibility_s, workers;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int busy;
};

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nth_sqs_stats stats;

#define STAT_ADD(field, v)                                                                         \
	do {                                                                                       \
		pthread_mutex_lock(&stats_lock);                                                   \
		stats.field += (v);                                                                \
		pthread_mutex_unlock(&stats_lock);                                                 \
	} while (0)

void nth_sqs_stats_get(struct nth_sqs_stats *ret)
{
	pthread_mutex_lock(&stats_lock);
	*ret = stats;
	pthread_mutex_unlock(&stats_lock);
}

/* Copies s cut to the buffer (event IDs and descriptions are cut as upstream cuts them). */
static void put(char *dst, size_t n, const char *s)
{
	size_t len = strlen(s ? s : "");

	if (len > n - 1)
		len = n - 1;

	memcpy(dst, s ? s : "", len);
	dst[len] = '\0';
}

/* ---- lifecycle heartbeats during a drain ---- */

struct heartbeat {
	struct runner *rn;
	struct asg_lifecycle a;
	struct cancel *stop;
	pthread_t th;
	bool running;
};

static void *heartbeat_main(void *arg)
{
	struct heartbeat *h = arg;
	struct nth_config *cfg = h->rn->n->cfg;
	int64_t until = cfg->heartbeat_until_s > 0 ? cfg->heartbeat_until_s : 172800;
	int64_t end = now_mono_ns() + until * NS_PER_S;
	struct aws_error err;
	char buf[700];
	int r;

	while (!cancel_wait(h->stop, cfg->heartbeat_interval_s * NS_PER_S)) {
		if (now_mono_ns() >= end) {
			log_info("heartbeats stop: HEARTBEAT_UNTIL reached", KV_S("instance", h->a.instance));
			break;
		}
		r = asg_record_heartbeat(h->rn->aws, &h->a, &err);
		if (r == -ECANCELED)
			break;
		if (r < 0) {
			log_warn("RecordLifecycleActionHeartbeat failed", KV_S("instance", h->a.instance),
				 KV_S("error", aws_error_str(&err, buf, sizeof(buf))), KV_E(r));
			if (aws_error_is(&err, "ValidationError"))
				break; /* the action is over: no use going on */
			continue;
		}
		log_info("sent a lifecycle heartbeat", KV_S("group", h->a.group),
			 KV_S("hook", h->a.hook), KV_S("instance", h->a.instance));
	}
	return NULL;
}

static int heartbeat_start(struct nth *n, struct nth_event *ev, void *ctx)
{
	struct heartbeat *h = ctx;

	if (h->running || n->cfg->heartbeat_interval_s <= 0)
		return 0;
	if (cancel_new(n->cancel, &h->stop) < 0)
		return -ENOMEM;
	if (pthread_create(&h->th, NULL, heartbeat_main, h) != 0) {
		cancel_free(h->stop);
		h->stop = NULL;
		return -EAGAIN;
	}
	h->running = true;
	return 0;
}

static void heartbeat_stop(struct heartbeat *h)
{
	if (!h->running)
		return;
	cancel_cancel(h->stop);
	pthread_join(h->th, NULL);
	cancel_free(h->stop);
	h->stop = NULL;
	h->running = false;
}

static int heartbeat_post(struct nth *n, struct nth_event *ev, int drain_result, void *ctx)
{
	heartbeat_stop(ctx);
	return 0;
}

/* ---- one event ---- */

static int complete_lifecycle(struct runner *rn, const struct nth_sqs_event *e, bool delay)
{
	long long d = rn->n->cfg->complete_lifecycle_action_delay_s;
	struct asg_lifecycle a = {.group = e->asg_group, .hook = e->asg_hook,
				  .token = e->asg_token, .instance = e->instance_id};
	struct aws_error err;
	char buf[700];
	int r;

	if (delay && d > 0 && cancel_wait(rn->n->cancel, d * NS_PER_S))
		return -ECANCELED;
	r = asg_complete_lifecycle_action(rn->aws, &a, "CONTINUE", &err);
	if (r < 0 && aws_error_is(&err, "ValidationError") &&
	    strstr(err.message, "No active Lifecycle Action")) {
		log_info("the lifecycle action is no longer pending (completed or expired)",
			 KV_S("group", a.group), KV_S("hook", a.hook), KV_S("instance", a.instance));
		return 0;
	}
	if (r < 0)
		return log_error_errno(r, "CompleteLifecycleAction failed; the message stays",
				       KV_S("group", a.group), KV_S("hook", a.hook),
				       KV_S("instance", a.instance),
				       KV_S("error", aws_error_str(&err, buf, sizeof(buf))));
	log_info("completed the lifecycle action", KV_S("group", a.group), KV_S("hook", a.hook),
		 KV_S("instance", a.instance), KV_S("result", "CONTINUE"));
	return 0;
}

static enum nth_kind kind_of(enum nth_sqs_kind k)
{
	switch (k) {
	case NTH_SQS_SPOT_ITN:
		return NTH_KIND_SPOT_ITN;
	case NTH_SQS_REBALANCE:
		return NTH_KIND_REBALANCE;
	case NTH_SQS_STATE_CHANGE:
		return NTH_KIND_STATE_CHANGE;
	case NTH_SQS_ASG_TERMINATE:
		return NTH_KIND_ASG_LIFECYCLE;
	case NTH_SQS_ASG_LAUNCH:
		return NTH_KIND_ASG_LAUNCH;
	case NTH_SQS_SCHEDULED_CHANGE:
		return NTH_KIND_SCHEDULED;
	}
	return NTH_KIND_SQS_TERMINATE;
}

static int drain(struct runner *rn, const struct nth_sqs_event *e, const struct ec2_instance *inst,
		 const char *node, const char *provider_id)
{
	struct nth_event ev = {.kind = kind_of(e->kind), .is_managed = true};
	struct heartbeat h = {.rn = rn,
			      .a = {.group = e->asg_group, .hook = e->asg_hook,
				    .token = e->asg_token, .instance = e->instance_id}};
	const char *group = ec2_instance_tag(inst, ASG_GROUP_TAG);
	int r;

	put(ev.event_id, sizeof(ev.event_id), e->event_id);
	put(ev.instance_id, sizeof(ev.instance_id), e->instance_id);
	put(ev.instance_type, sizeof(ev.instance_type), inst->type);
	put(ev.node_name, sizeof(ev.node_name), node);
	put(ev.provider_id, sizeof(ev.provider_id), provider_id);
	put(ev.asg_name, sizeof(ev.asg_name), e->asg_group[0] ? e->asg_group : group);
	put(ev.description, sizeof(ev.description), e->description);
	ev.start_ns = e->start_ns ? e->start_ns : now_real_ns();
	if (e->kind == NTH_SQS_ASG_TERMINATE) {
		ev.pre_drain = heartbeat_start;
		ev.post_drain = heartbeat_post;
		ev.ctx = &h;
	}
	r = nth_handle_event(rn->n, &ev);
	heartbeat_stop(&h);
	if (r < 0)
		return log_error_errno(r, "the event was not handled; its message stays on the queue",
				       KV_S("event_id", e->event_id), KV_S("node", node));
	STAT_ADD(acted, 1);
	if (e->kind == NTH_SQS_ASG_TERMINATE)
		return complete_lifecycle(rn, e, true);
	return 0;
}

/* 0 when acted on, 1 when skipped (nothing to do for this event), < 0 to keep the message. */
static int act(struct runner *rn, const struct nth_sqs_event *e)
{
	struct nth_config *cfg = rn->n->cfg;
	struct ec2_instance inst = {0};
	char provider_id[160], node[256];
	int r;

	r = nth_sqs_describe(rn->aws, e->instance_id, &inst);
	if (r == -ENOENT) {
		log_info("skipping the event: EC2 knows no such instance (another account's, or gone)",
			 KV_S("event_id", e->event_id), KV_S("instance", e->instance_id));
		return 1;
	}
	if (r < 0)
		return r;
	snprintf(provider_id, sizeof(provider_id), "aws:///%s/%s", inst.zone ? inst.zone : "",
		 inst.id);
	if ((!inst.private_dns || !*inst.private_dns) && strcmp(inst.state, "running") != 0) {
		log_info("skipping the event: the instance is not running and has no DNS name",
			 KV_S("instance", inst.id), KV_S("state", inst.state));
		r = 1;
	} else if (cfg->check_tag_before_draining && !ec2_instance_tag(&inst, cfg->managed_tag)) {
		log_info("skipping the event: the instance is not managed (no managed tag)",
			 KV_S("instance", inst.id), KV_S("tag", cfg->managed_tag),
			 KV_S("kind", nth_sqs_kind_name(e->kind)));
		r = 1;
	} else if (e->kind == NTH_SQS_ASG_LAUNCH) {
		r = nth_sqs_node_ready(rn->n->kube, inst.id, provider_id, node, sizeof(node));
		if (r == -EAGAIN || r == -ENOENT)
			log_info("the launching instance's Node is not Ready yet; the message comes back",
				 KV_S("instance", inst.id));
		r = r < 0 ? -EAGAIN : complete_lifecycle(rn, e, false);
	} else if ((r = nth_sqs_find_node(rn->n->kube, cfg->use_provider_id, inst.private_dns,
					  provider_id, node, sizeof(node))) == -ENOENT) {
		log_warn("no Node for the instance", KV_S("instance", inst.id),
			 KV_S("private_dns_name", inst.private_dns), KV_S("provider_id", provider_id),
			 KV_B("delete_message", cfg->delete_sqs_msg_if_node_not_found));
		r = cfg->delete_sqs_msg_if_node_not_found ? 1 : -ENOENT;
	} else if (r < 0) {
		log_error("looking up the instance's Node failed", KV_S("instance", inst.id), KV_E(r));
	} else {
		r = drain(rn, e, &inst, node, provider_id);
	}
	ec2_instance_release(&inst);
	return r;
}

/* ---- one message ---- */

static void delete_message(struct runner *rn, const struct sqs_message *m)
{
	struct aws_error err;
	char buf[700];
	int r = sqs_delete(rn->aws, rn->url, m->receipt_handle, &err);

	if (r < 0) {
		log_error("DeleteMessage failed; the message will come back", KV_S("message", m->id),
			  KV_S("error", aws_error_str(&err, buf, sizeof(buf))), KV_E(r));
		return;
	}
	STAT_ADD(deleted, 1);
	log_v(2, "deleted the message", KV_S("message", m->id));
}

static void set_visibility(struct runner *rn, const struct sqs_message *m, long long s)
{
	struct aws_error err;
	char buf[700];
	int r;

	if (s > MAX_VISIBILITY_S)
		s = MAX_VISIBILITY_S;
	r = sqs_change_visibility(rn->aws, rn->url, m->receipt_handle, (int)s, &err);
	if (r < 0 && r != -ECANCELED)
		log_warn("ChangeMessageVisibility failed", KV_S("message", m->id),
			 KV_S("error", aws_error_str(&err, buf, sizeof(buf))), KV_E(r));
}

static void handle_message(struct runner *rn, const struct sqs_message *m)
{
	struct nth_config *cfg = rn->n->cfg;
	struct nth_sqs_parsed p;
	bool keep = false;

	if (nth_sqs_parse(m->body, m->body_len, &p) < 0) {
		log_error("out of memory parsing a message; it stays", KV_S("message", m->id));
		STAT_ADD(kept, 1);
		return;
	}
	if (p.verdict == NTH_SQS_SKIP) {
		log_info("deleting a message with nothing to do", KV_S("message", m->id),
			 KV_S("reason", p.reason));
		STAT_ADD(skipped, 1);
		delete_message(rn, m);
		return;
	}
	if (p.verdict == NTH_SQS_INVALID) {
		log_warn("deleting a message that is not an interruption event",
			 KV_S("message", m->id), KV_S("reason", p.reason), KV_U("bytes", m->body_len),
			 KV_I("receive_count", m->receive_count));
		STAT_ADD(skipped, 1);
		delete_message(rn, m);
		return;
	}
	/* held past the drain's deadline so that it does not come back to another worker */
	set_visibility(rn, m,
		       cfg->node_termination_grace_s +
			   (cfg->complete_lifecycle_action_delay_s > 0
				? cfg->complete_lifecycle_action_delay_s
				: 0) + 60);
	for (size_t i = 0; i < p.n_events; i++) {
		int r = act(rn, &p.events[i]);

		if (r < 0)
			keep = true;
		else if (r > 0)
			STAT_ADD(skipped, 1);
	}
	nth_sqs_parsed_release(&p);
	if (!keep) {
		delete_message(rn, m);
		return;
	}
	STAT_ADD(kept, 1);
	if (!cancel_is_cancelled(rn->n->cancel))
		set_visibility(rn, m, rn->visibility_s); /* back as upstream would have it */
}

struct job {
	struct runner *rn;
	struct sqs_message m;
};

static void *job_main(void *arg)
{
	struct job *j = arg;
	struct runner *rn = j->rn;

	handle_message(rn, &j->m);
	free(j->m.id);
	free(j->m.receipt_handle);
	free(j->m.body);
	free(j);
	pthread_mutex_lock(&rn->lock);
	rn->busy--;
	pthread_cond_broadcast(&rn->cond);
	pthread_mutex_unlock(&rn->lock);
	return NULL;
}

/* Hands message m to a worker thread (taking its strings), or handles it here. */
static void dispatch(struct runner *rn, struct sqs_message *m)
{
	struct job *j = calloc(1, sizeof(*j));
	pthread_attr_t at;
	pthread_t th;

	pthread_mutex_lock(&rn->lock);
	rn->busy++;
	pthread_mutex_unlock(&rn->lock);
	if (j) {
		j->rn = rn;
		j->m = *m;
		memset(m, 0, sizeof(*m));
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &at, job_main, j) == 0) {
			pthread_attr_destroy(&at);
			return;
		}
		pthread_attr_destroy(&at);
		*m = j->m;
		free(j);
	}
	handle_message(rn, m);
	pthread_mutex_lock(&rn->lock);
	rn->busy--;
	pthread_mutex_unlock(&rn->lock);
}

/* The number of free workers, waiting (on the cancel fd's period) while there is none. */
static int free_workers(struct runner *rn)
{
	int f;

	pthread_mutex_lock(&rn->lock);
	while ((f = rn->workers - rn->busy) <= 0 && !cancel_is_cancelled(rn->n->cancel)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&rn->cond, &rn->lock, &ts);
	}
	pthread_mutex_unlock(&rn->lock);
	return f;
}

static int client_new(struct nth *n, struct aws_client **ret)
{
	struct nth_config *cfg = n->cfg;
	char region[64] = "";
	struct aws_client_opts o = {.user_agent = "nth"};
	int r;

	if (cfg->aws_region && *cfg->aws_region)
		put(region, sizeof(region), cfg->aws_region);
	else if ((r = sqs_queue_region(cfg->queue_url, region, sizeof(region))) == -EINVAL)
		return log_error_errno(r, "QUEUE_URL is not a URL", KV_S("queue_url", cfg->queue_url));
	o.region = region[0] ? region : NULL;
	o.endpoint_url = cfg->aws_endpoint && *cfg->aws_endpoint ? cfg->aws_endpoint : NULL;
	aws_metrics_family_set(AWS_METRICS_OWN);
	if ((r = aws_client_new(&o, ret)) < 0)
		return log_error_errno(r, "cannot set up the AWS client");
	return 0;
}

int nth_sqs_run(struct nth *n)
{
	struct nth_config *cfg = n->cfg;
	struct runner rn = {.n = n, .url = cfg->queue_url};
	struct gauges *gauges = NULL;
	struct backoff bo = {.base_ns = NS_PER_S, .max_ns = 30 * NS_PER_S, .full_jitter = false,
			     .jitter = 0.2};
	int r;

	if ((r = client_new(n, &rn.aws)) < 0)
		return r;
	rn.visibility_s = (int)cfg->sqs_visibility_timeout_s;
	rn.workers = cfg->workers > 0 ? (int)cfg->workers : 10;
	pthread_mutex_init(&rn.lock, NULL);
	pthread_cond_init(&rn.cond, NULL);
	if (cfg->enable_prometheus)
		gauges = nth_sqs_gauges_start(n, rn.aws);
	log_info("queue mode: polling", KV_S("queue_url", cfg->queue_url),
		 KV_I("workers", rn.workers), KV_I("visibility_timeout_s", rn.visibility_s));
	while (!cancel_is_cancelled(n->cancel)) {
		int f = free_workers(&rn);
		struct sqs_receive_opts o = {.queue_url = rn.url,
					     .max_messages = f > SQS_MAX_MESSAGES ? SQS_MAX_MESSAGES : f,
					     .wait_s = SQS_MAX_WAIT_S,
					     .visibility_s = rn.visibility_s,
					     .cancel = n->cancel};
		struct sqs_message *m = NULL;
		struct aws_error err;
		size_t cnt = 0;
		char buf[700];

		if (f <= 0)
			break;
		STAT_ADD(receive_calls, 1);
		r = sqs_receive(rn.aws, &o, &m, &cnt, &err);
		if (r == -ECANCELED)
			break;
		if (r < 0) {
			int64_t d = backoff_next(&bo);

			log_error("ReceiveMessage failed", KV_S("queue_url", rn.url),
				  KV_S("error", aws_error_str(&err, buf, sizeof(buf))), KV_E(r),
				  KV_I("retry_in_ms", d / 1000000));
			if (cancel_wait(n->cancel, d))
				break;
			continue;
		}
		backoff_reset(&bo);
		STAT_ADD(received, cnt);
		for (size_t i = 0; i < cnt; i++)
			dispatch(&rn, &m[i]);
		sqs_messages_free(m, cnt);
	}
	/* the workers see the stop through n->cancel; a message they did not finish comes back */
	pthread_mutex_lock(&rn.lock);
	while (rn.busy > 0)
		pthread_cond_wait(&rn.cond, &rn.lock);
	pthread_mutex_unlock(&rn.lock);
	nth_sqs_gauges_stop(gauges);
	pthread_cond_destroy(&rn.cond);
	pthread_mutex_destroy(&rn.lock);
	aws_client_free(rn.aws);
	log_info("queue mode: stopped");
	return 0;
}
