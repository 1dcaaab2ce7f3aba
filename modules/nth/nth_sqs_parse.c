/* Queue messages as node-termination-handler events (see nth_sqs.h). Pure: no I/O, no logs. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/ids.h"
#include "common/base/json.h"
#include "common/base/timeutil.h"
#include "modules/nth/nth_sqs.h"

#define ASG_TERMINATING "autoscaling:EC2_INSTANCE_TERMINATING"
#define ASG_LAUNCHING "autoscaling:EC2_INSTANCE_LAUNCHING"
#define ASG_TEST "autoscaling:TEST_NOTIFICATION"

const char *nth_sqs_kind_name(enum nth_sqs_kind k)
{
	switch (k) {
	case NTH_SQS_SPOT_ITN:
		return "SPOT_ITN";
	case NTH_SQS_REBALANCE:
		return "REBALANCE_RECOMMENDATION";
	case NTH_SQS_STATE_CHANGE:
		return "STATE_CHANGE";
	case NTH_SQS_ASG_TERMINATE:
		return "ASG_LIFECYCLE";
	case NTH_SQS_ASG_LAUNCH:
		return "ASG_LAUNCH_LIFECYCLE";
	case NTH_SQS_SCHEDULED_CHANGE:
		return "SCHEDULED_EVENT";
	}
	return "UNKNOWN";
}

void nth_sqs_parsed_release(struct nth_sqs_parsed *p)
{
	if (!p)
		return;
	free(p->events);
	p->events = NULL;
	p->n_events = 0;
}

static int verdict(struct nth_sqs_parsed *p, enum nth_sqs_verdict v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int verdict(struct nth_sqs_parsed *p, enum nth_sqs_verdict v, const char *fmt, ...)
{
	va_list ap;

	nth_sqs_parsed_release(p);
	p->verdict = v;
	va_start(ap, fmt);
	vsnprintf(p->reason, sizeof(p->reason), fmt, ap);
	va_end(ap);
	return 0;
}

/* Copies s into a fixed field; false when it does not fit. */
static bool put(char *dst, size_t n, const char *s)
{
	size_t len = strlen(s ? s : "");

	if (len >= n)
		return false;
	memcpy(dst, s ? s : "", len + 1);
	return true;
}

/* A short, printable quote of an untrusted value for a reason line. */
static const char *q(const char *s, char *buf, size_t n)
{
	return aws_value_escape(s ? s : "", buf, n);
}

static struct nth_sqs_event *add_event(struct nth_sqs_parsed *p, enum nth_sqs_kind kind)
{
	struct nth_sqs_event *e;

	if (p->n_events >= NTH_SQS_MAX_EVENTS)
		return NULL;
	e = realloc(p->events, (p->n_events + 1) * sizeof(*e));
	if (!e)
		return NULL;
	p->events = e;
	e = &p->events[p->n_events++];
	memset(e, 0, sizeof(*e));
	e->kind = kind;
	p->verdict = NTH_SQS_ACT;
	return e;
}

/* prefix + the hex of id's bytes, as upstream makes its event IDs. */
static void make_id(char *out, size_t n, const char *prefix, const char *id)
{
	size_t k = (size_t)snprintf(out, n, "%s", prefix);

	for (const unsigned char *s = (const unsigned char *)id; *s && k + 3 <= n; s++)
		k += (size_t)snprintf(out + k, n - k, "%02x", *s);
}

static int64_t time_of(const char *s)
{
	int64_t ns = 0;

	return s && rfc3339_parse(s, &ns) == 0 ? ns : 0;
}

/* Fills the common fields; -1 (with an INVALID verdict) for a bad instance ID. */
static int base(struct nth_sqs_parsed *p, struct nth_sqs_event *e, const char *prefix,
		const char *id, const char *instance, const char *time)
{
	char b[64];

	if (!instance || !aws_instance_id_valid(instance)) {
		verdict(p, NTH_SQS_INVALID, "no valid instance ID (%s)", q(instance, b, sizeof(b)));
		return -1;
	}
	put(e->instance_id, sizeof(e->instance_id), instance);
	make_id(e->event_id, sizeof(e->event_id), prefix, id ? id : instance);
	e->start_ns = time_of(time);
	return 0;
}

static int parse_asg(struct nth_sqs_parsed *p, const cJSON *d, const char *id, const char *time)
{
	const char *tr = json_str_key(d, "LifecycleTransition");
	const char *inst = json_str_key(d, "EC2InstanceId");
	struct nth_sqs_event *e;
	char b[64];
	bool launch;

	if (tr && strcmp(tr, ASG_TEST) == 0)
		return verdict(p, NTH_SQS_SKIP, "an Auto Scaling test notification");
	if (!tr || (strcmp(tr, ASG_TERMINATING) != 0 && strcmp(tr, ASG_LAUNCHING) != 0))
		return verdict(p, NTH_SQS_SKIP, "lifecycle transition %s is not acted on",
			       q(tr, b, sizeof(b)));
	launch = strcmp(tr, ASG_LAUNCHING) == 0;
	if (!(e = add_event(p, launch ? NTH_SQS_ASG_LAUNCH : NTH_SQS_ASG_TERMINATE)))
		return -ENOMEM;
	if (base(p, e, launch ? "asg-lifecycle-launch-" : "asg-lifecycle-term-",
		 id ? id : json_str_key(d, "LifecycleActionToken"), inst, time) < 0)
		return 0;
	if (!put(e->asg_group, sizeof(e->asg_group), json_str_key(d, "AutoScalingGroupName")) ||
	    !put(e->asg_hook, sizeof(e->asg_hook), json_str_key(d, "LifecycleHookName")) ||
	    !put(e->asg_token, sizeof(e->asg_token), json_str_key(d, "LifecycleActionToken")) ||
	    !e->asg_group[0] || !e->asg_hook[0])
		return verdict(p, NTH_SQS_INVALID,
			       "lifecycle action without a usable group, hook or token");
	put(e->detail, sizeof(e->detail), launch ? "launching" : "terminating");
	snprintf(e->description, sizeof(e->description),
		 "ASG Lifecycle Termination event received. Instance will be interrupted at %.40s",
		 time ? time : "");
	if (launch)
		snprintf(e->description, sizeof(e->description), "ASG Lifecycle Launch event received");
	return 0;
}

static int parse_ec2(struct nth_sqs_parsed *p, const char *dt, const cJSON *d, const char *id,
		     const char *time)
{
	const char *inst = json_str_key(d, "instance-id");
	struct nth_sqs_event *e;
	char b[64];

	if (strcmp(dt, "EC2 Spot Instance Interruption Warning") == 0) {
		if (!(e = add_event(p, NTH_SQS_SPOT_ITN)))
			return -ENOMEM;
		if (base(p, e, "spot-itn-event-", id, inst, time) < 0)
			return 0;
		put(e->detail, sizeof(e->detail), json_str_key(d, "instance-action"));
		snprintf(e->description, sizeof(e->description),
			 "Spot Interruption notice for instance %s was sent at %.40s", inst, time ? time : "");
		return 0;
	}
	if (strcmp(dt, "EC2 Instance Rebalance Recommendation") == 0) {
		if (!(e = add_event(p, NTH_SQS_REBALANCE)))
			return -ENOMEM;
		if (base(p, e, "rebalance-recommendation-event-", id, inst, time) < 0)
			return 0;
		snprintf(e->description, sizeof(e->description),
			 "Rebalance recommendation for instance %s was sent at %.40s", inst, time ? time : "");
		return 0;
	}
	if (strcmp(dt, "EC2 Instance State-change Notification") == 0) {
		const char *st = json_str_key(d, "state");

		if (!st || (strcmp(st, "stopping") != 0 && strcmp(st, "stopped") != 0 &&
			    strcmp(st, "shutting-down") != 0 && strcmp(st, "terminated") != 0))
			return verdict(p, NTH_SQS_SKIP, "instance state %s is not acted on",
				       q(st, b, sizeof(b)));
		if (!(e = add_event(p, NTH_SQS_STATE_CHANGE)))
			return -ENOMEM;
		if (base(p, e, "ec2-state-change-event-", id, inst, time) < 0)
			return 0;
		put(e->detail, sizeof(e->detail), st);
		snprintf(e->description, sizeof(e->description),
			 "EC2 State Change event received. Instance %s went into %s at %.40s", inst, st,
			 time ? time : "");
		return 0;
	}
	return verdict(p, NTH_SQS_INVALID, "unknown aws.ec2 detail-type %s", q(dt, b, sizeof(b)));
}

static int parse_health(struct nth_sqs_parsed *p, const cJSON *d, const char *id, const char *time)
{
	const char *svc = json_str_key(d, "service"), *cat = json_str_key(d, "eventTypeCategory");
	const cJSON *ents = cJSON_GetObjectItemCaseSensitive(d, "affectedEntities"), *it;
	char b[64], b2[64];

	if (!svc || strcmp(svc, "EC2") != 0 || !cat || strcmp(cat, "scheduledChange") != 0)
		return verdict(p, NTH_SQS_SKIP, "AWS Health event of service %s, category %s",
			       q(svc, b, sizeof(b)), q(cat, b2, sizeof(b2)));
	if (!cJSON_IsArray(ents) || cJSON_GetArraySize(ents) == 0)
		return verdict(p, NTH_SQS_INVALID, "AWS Health event without affectedEntities");
	if (cJSON_GetArraySize(ents) > NTH_SQS_MAX_EVENTS)
		return verdict(p, NTH_SQS_INVALID, "AWS Health event with over %d entities",
			       NTH_SQS_MAX_EVENTS);
	cJSON_ArrayForEach(it, ents)
	{
		const char *inst = json_str_key(it, "entityValue");
		struct nth_sqs_event *e = add_event(p, NTH_SQS_SCHEDULED_CHANGE);

		if (!e)
			return -ENOMEM;
		if (base(p, e, "aws-health-scheduled-change-event-", id, inst, time) < 0)
			return 0;
		put(e->detail, sizeof(e->detail), json_str_key(d, "eventTypeCode"));
		snprintf(e->description, sizeof(e->description),
			 "AWS Health scheduled change event received. Instance %s will be interrupted at %.40s",
			 inst, time ? time : "");
	}
	return 0;
}

/* Auto Scaling's own notification: plain, or the Message of an SNS notification. */
static int parse_direct(struct nth_sqs_parsed *p, const cJSON *root, int depth)
{
	const char *msg = json_str_key(root, "Message"), *ev = json_str_key(root, "Event");
	cJSON *inner = NULL;
	char b[64];
	int r;

	if (ev && strcmp(ev, ASG_TEST) == 0)
		return verdict(p, NTH_SQS_SKIP, "an Auto Scaling test notification");
	if (json_str_key(root, "LifecycleTransition"))
		return parse_asg(p, root, json_str_key(root, "RequestId"), json_str_key(root, "Time"));
	if (msg && depth == 0 && strcmp(json_str(root, "Type") ? json_str(root, "Type") : "",
					 "Notification") == 0) {
		if (json_parse(msg, strlen(msg), &inner, NULL) < 0 || !cJSON_IsObject(inner)) {
			cJSON_Delete(inner);
			return verdict(p, NTH_SQS_INVALID, "SNS notification whose Message is not a "
							  "JSON object");
		}
		r = json_str_key(inner, "detail-type") || json_str_key(inner, "source")
			? verdict(p, NTH_SQS_INVALID, "EventBridge event wrapped in SNS")
			: parse_direct(p, inner, depth + 1);
		cJSON_Delete(inner);
		return r;
	}
	return verdict(p, NTH_SQS_INVALID, "JSON of another shape (no detail-type; Event %s)",
		       q(ev, b, sizeof(b)));
}

int nth_sqs_parse(const char *body, size_t len, struct nth_sqs_parsed *ret)
{
	cJSON *root = NULL;
	const cJSON *d;
	const char *dt, *src, *id, *time;
	size_t off = 0;
	char b[64], b2[64];
	int r;

	memset(ret, 0, sizeof(*ret));
	if (len > NTH_SQS_BODY_MAX)
		return verdict(ret, NTH_SQS_INVALID, "body of %zu bytes is over the %zu-byte cap", len,
			       NTH_SQS_BODY_MAX);
	if (json_parse(body, len, &root, &off) < 0 || !cJSON_IsObject(root)) {
		r = verdict(ret, NTH_SQS_INVALID, root ? "JSON that is not an object"
						       : "not JSON (syntax error at byte %zu)",
			    off);
		cJSON_Delete(root);
		return r;
	}
	dt = json_str_key(root, "detail-type");
	src = json_str_key(root, "source");
	id = json_str_key(root, "id");
	time = json_str_key(root, "time");
	d = cJSON_GetObjectItemCaseSensitive(root, "detail");
	if (!dt && !src) {
		r = parse_direct(ret, root, 0);
	} else if (!dt || !src || !cJSON_IsObject(d)) {
		r = verdict(ret, NTH_SQS_INVALID, "EventBridge envelope without detail-type, source "
						  "or detail object");
	} else if (strcmp(src, "aws.ec2") == 0) {
		r = parse_ec2(ret, dt, d, id, time);
	} else if (strcmp(src, "aws.autoscaling") == 0 &&
		   (strcmp(dt, "EC2 Instance-terminate Lifecycle Action") == 0 ||
		    strcmp(dt, "EC2 Instance-launch Lifecycle Action") == 0)) {
		r = parse_asg(ret, d, id, time);
	} else if (strcmp(src, "aws.health") == 0 && strcmp(dt, "AWS Health Event") == 0) {
		r = parse_health(ret, d, id, time);
	} else {
		r = verdict(ret, NTH_SQS_INVALID, "unknown event source %s, detail-type %s",
			    q(src, b, sizeof(b)), q(dt, b2, sizeof(b2)));
	}
	cJSON_Delete(root);
	if (r < 0)
		nth_sqs_parsed_release(ret);
	return r;
}
