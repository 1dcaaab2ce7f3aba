/* Auto Scaling lifecycle actions (see autoscaling.h). */
#include "common/aws/autoscaling.h"

#include <errno.h>
#include <string.h>

static int lifecycle_call(struct aws_client *c, const char *action, const struct asg_lifecycle *a,
			  const char *result, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if (!a->group || !*a->group || !a->hook || !*a->hook ||
	    (!(a->token && *a->token) && !(a->instance && *a->instance)))
		return -EINVAL;
	if ((r = aws_query_add(&q, "AutoScalingGroupName", a->group)) < 0 ||
	    (r = aws_query_add(&q, "LifecycleHookName", a->hook)) < 0 ||
	    (a->token && *a->token && (r = aws_query_add(&q, "LifecycleActionToken", a->token)) < 0) ||
	    (a->instance && *a->instance && (r = aws_query_add(&q, "InstanceId", a->instance)) < 0) ||
	    (result && (r = aws_query_add(&q, "LifecycleActionResult", result)) < 0))
		goto out;
	r = aws_call_query(c, AWS_SVC_AUTOSCALING, action, &q, &rep, err);
	aws_reply_release(&rep);
out:
	aws_query_release(&q);
	return r;
}

int asg_complete_lifecycle_action(struct aws_client *c, const struct asg_lifecycle *a,
				  const char *result, struct aws_error *err)
{
	if (!result || (strcmp(result, "CONTINUE") != 0 && strcmp(result, "ABANDON") != 0))
		return -EINVAL;
	return lifecycle_call(c, "CompleteLifecycleAction", a, result, err);
}

int asg_record_heartbeat(struct aws_client *c, const struct asg_lifecycle *a,
			 struct aws_error *err)
{
	return lifecycle_call(c, "RecordLifecycleActionHeartbeat", a, NULL, err);
}
