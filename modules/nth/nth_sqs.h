/* node-termination-handler's queue mode: the SQS messages that EventBridge rules (or Auto
 * Scaling lifecycle hooks, directly or through SNS) put on the queue, as events, and what to
 * do with the message.
 *
 * nth_sqs_parse() is a pure function of a message body:
 *   - EventBridge envelopes {id, "detail-type", source, time, detail}:
 *       aws.ec2 "EC2 Spot Instance Interruption Warning"     detail {instance-id, instance-action}
 *       aws.ec2 "EC2 Instance Rebalance Recommendation"      detail {instance-id}
 *       aws.ec2 "EC2 Instance State-change Notification"     detail {instance-id, state}: only
 *               stopping, stopped, shutting-down and terminated act, other states are skips
 *       aws.autoscaling "EC2 Instance-terminate Lifecycle Action" / "...-launch ..."
 *               detail {LifecycleActionToken, AutoScalingGroupName, LifecycleHookName,
 *               EC2InstanceId, LifecycleTransition}
 *       aws.health "AWS Health Event" detail {service "EC2", eventTypeCategory
 *               "scheduledChange", affectedEntities [{entityValue}]}: one event per instance;
 *               another service or category is a skip
 *   - Auto Scaling's own notifications (no detail-type), plain or wrapped by SNS
 *     ({"Type":"Notification","Message":"<json>"}); autoscaling:TEST_NOTIFICATION is a skip.
 * Verdicts:
 *   NTH_SQS_ACT      events to act on (n_events >= 1)
 *   NTH_SQS_SKIP     nothing to do: the message is deleted (reason says why)
 *   NTH_SQS_INVALID  not JSON, JSON of another shape, an unknown source or detail-type, a body
 *                    over NTH_SQS_BODY_MAX, an event without the field it rests on: logged once
 *                    and deleted (upstream keeps these and gets them back forever). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NTH_SQS_BODY_MAX ((size_t)256 << 10)
#define NTH_SQS_MAX_EVENTS 100 /* instances of one AWS Health event */
#define NTH_SQS_ID_MAX 160

enum nth_sqs_kind {
	NTH_SQS_SPOT_ITN,
	NTH_SQS_REBALANCE,
	NTH_SQS_STATE_CHANGE,
	NTH_SQS_ASG_TERMINATE,
	NTH_SQS_ASG_LAUNCH,
	NTH_SQS_SCHEDULED_CHANGE,
};

enum nth_sqs_verdict { NTH_SQS_ACT, NTH_SQS_SKIP, NTH_SQS_INVALID };

struct nth_sqs_event {
	enum nth_sqs_kind kind;
	char event_id[NTH_SQS_ID_MAX]; /* upstream's: "spot-itn-event-<hex of the envelope id>" */
	char instance_id[32];
	char detail[64];     /* instance-action, state, or the Health event type code */
	int64_t start_ns;    /* the envelope's time (wall clock); 0 when absent */
	char asg_group[256]; /* lifecycle: AutoScalingGroupName */
	char asg_hook[256];  /* LifecycleHookName */
	char asg_token[64];  /* LifecycleActionToken */
	char description[256];
};

struct nth_sqs_parsed {
	enum nth_sqs_verdict verdict;
	char reason[160]; /* SKIP and INVALID: one line */
	struct nth_sqs_event *events;
	size_t n_events;
};

/* Fills *ret (release with nth_sqs_parsed_release). Returns 0, or -ENOMEM: every malformed
 * body is a verdict, not an error. */
int nth_sqs_parse(const char *body, size_t len, struct nth_sqs_parsed *ret);
void nth_sqs_parsed_release(struct nth_sqs_parsed *p);
/* "SPOT_ITN", "REBALANCE_RECOMMENDATION", "STATE_CHANGE", "ASG_LIFECYCLE", "ASG_LAUNCH_LIFECYCLE",
 * "SCHEDULED_EVENT": upstream's kinds. */
const char *nth_sqs_kind_name(enum nth_sqs_kind k);

/* ---- the queue loop (nth_sqs.c) ---- */

struct nth;

/* Queue mode: long-polls QUEUE_URL until n->cancel is cancelled and acts on each message with
 * at most WORKERS messages in hand:
 *   - SKIP and INVALID messages are logged once and deleted;
 *   - each event's instance is described (EC2): an instance EC2 says does not exist
 *     (InvalidInstanceID.NotFound: a foreign account's or a gone one), one without a private
 *     DNS name that is not running, and with CHECK_TAG_BEFORE_DRAINING one without the
 *     MANAGED_TAG key, is skipped; a message whose events are all skipped is deleted;
 *   - the Node is found by providerID (USE_PROVIDER_ID), else by the label
 *     kubernetes.io/hostname (private DNS name or its first label), else by name; no Node
 *     leaves the message (or deletes it with DELETE_SQS_MSG_IF_NODE_NOT_FOUND);
 *   - nth_handle_event drains it; ASG terminations get heartbeats (HEARTBEAT_INTERVAL) during
 *     the drain and CompleteLifecycleAction(CONTINUE) after it (COMPLETE_LIFECYCLE_ACTION_
 *     DELAY_SECONDS later); launches are completed once their Node is Ready;
 *   - the message is deleted only when every event of it succeeded; any failure (taint,
 *     cordon, drain, AWS) leaves it to come back after SQS_MSG_VISIBILITY_TIMEOUT_SEC. While a
 *     message is handled its visibility is extended past the drain's deadline, so that it does
 *     not come back to another worker in the middle.
 * 0 on a stop, or -errno when the queue cannot be used (no region, bad URL). */
int nth_sqs_run(struct nth *n);

/* Counters of the loop (tests, bench): messages received, deleted, kept; events acted on and
 * skipped. */
struct nth_sqs_stats {
	unsigned long received, deleted, kept, acted, skipped, receive_calls;
};
void nth_sqs_stats_get(struct nth_sqs_stats *ret);
