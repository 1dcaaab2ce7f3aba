/* Auto Scaling lifecycle actions (Query protocol): what a consumer of lifecycle notifications
 * calls once the instance is dealt with, and while it still works on it.
 *
 *   struct asg_lifecycle a = { .group = g, .hook = h, .token = t, .instance = id };
 *   r = asg_complete_lifecycle_action(c, &a, "CONTINUE", &err);
 *
 * A lifecycle action is named either by its token or by the instance; both are sent when
 * known. Nothing logs. */
#pragma once
#include "common/aws/client.h"

struct asg_lifecycle {
	const char *group;    /* AutoScalingGroupName (required) */
	const char *hook;     /* LifecycleHookName (required) */
	const char *token;    /* LifecycleActionToken (may be NULL when instance is set) */
	const char *instance; /* InstanceId (may be NULL when token is set) */
};

/* CompleteLifecycleAction with result "CONTINUE" or "ABANDON". -EINVAL for a missing field or
 * another result; the client's errors otherwise (a ValidationError, for an action that is no
 * longer pending, is -EINVAL with err->code "ValidationError"). */
int asg_complete_lifecycle_action(struct aws_client *c, const struct asg_lifecycle *a,
				  const char *result, struct aws_error *err);
/* RecordLifecycleActionHeartbeat: restarts the hook's heartbeat timeout. */
int asg_record_heartbeat(struct aws_client *c, const struct asg_lifecycle *a,
			 struct aws_error *err);
