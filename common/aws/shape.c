/* The reply shapes of the actions the components call (see shape.h). */
#include "common/aws/shape.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"

#define MIB ((size_t)1 << 20)
#define LIST_MAX (16 * MIB)
#define OTHER_MAX (2 * MIB)

/* clang-format off */
static const struct aws_reply_shape shapes[] = {
	/* EC2: the sets are present even when empty (<reservationSet/>) */
	{AWS_SVC_EC2, "DescribeInstances", {"reservationSet"}, 32 * MIB},
	{AWS_SVC_EC2, "DescribeVolumes", {"volumeSet"}},
	{AWS_SVC_EC2, "DescribeSnapshots", {"snapshotSet"}},
	{AWS_SVC_EC2, "DescribeVolumesModifications", {"volumeModificationSet"}},
	{AWS_SVC_EC2, "DescribeRouteTables", {"routeTableSet"}},
	{AWS_SVC_EC2, "DescribeAvailabilityZones", {"availabilityZoneInfo"}},
	{AWS_SVC_EC2, "DescribeInstanceTypes", {"instanceTypeSet"}},
	{AWS_SVC_EC2, "DescribeSubnets", {"subnetSet"}},
	{AWS_SVC_EC2, "DescribeSecurityGroups", {"securityGroupInfo"}},
	{AWS_SVC_EC2, "DescribeVpcs", {"vpcSet"}},
	{AWS_SVC_EC2, "DescribeTags", {"tagSet"}},
	{AWS_SVC_EC2, "DescribeNetworkInterfaces", {"networkInterfaceSet"}},
	/* capa's network and machines: an empty set means "none yet, create it" */
	{AWS_SVC_EC2, "DescribeNatGateways", {"natGatewaySet"}},
	{AWS_SVC_EC2, "DescribeInternetGateways", {"internetGatewaySet"}},
	{AWS_SVC_EC2, "DescribeAddresses", {"addressesSet"}},
	{AWS_SVC_EC2, "DescribeImages", {"imagesSet"}},
	{AWS_SVC_EC2, "RunInstances", {"instancesSet"}},
	{AWS_SVC_EC2, "CreateVpc", {"vpc"}},
	{AWS_SVC_EC2, "CreateSubnet", {"subnet"}},
	{AWS_SVC_EC2, "CreateInternetGateway", {"internetGateway"}},
	{AWS_SVC_EC2, "CreateNatGateway", {"natGateway"}},
	{AWS_SVC_EC2, "AllocateAddress", {"allocationId"}},
	{AWS_SVC_EC2, "CreateRouteTable", {"routeTable"}},
	{AWS_SVC_EC2, "AssociateRouteTable", {"associationId"}},
	{AWS_SVC_EC2, "CreateSecurityGroup", {"groupId"}},
	{AWS_SVC_EC2, "CreateVolume", {"volumeId"}},
	{AWS_SVC_EC2, "AttachVolume", {"volumeId"}},
	{AWS_SVC_EC2, "DetachVolume", {"volumeId"}},
	{AWS_SVC_EC2, "CreateSnapshot", {"snapshotId"}},
	{AWS_SVC_EC2, "ModifyVolume", {"volumeModification"}},
	/* ELB, ELBv2, Auto Scaling, STS: paths under <ActionResult> */
	{AWS_SVC_ELB, "DescribeLoadBalancers", {"LoadBalancerDescriptions"}},
	{AWS_SVC_ELB, "CreateLoadBalancer", {"DNSName"}},
	{AWS_SVC_ELBV2, "DescribeLoadBalancers", {"LoadBalancers"}},
	{AWS_SVC_ELBV2, "DescribeTargetGroups", {"TargetGroups"}},
	{AWS_SVC_ELBV2, "DescribeTargetHealth", {"TargetHealthDescriptions"}},
	{AWS_SVC_ELBV2, "DescribeListeners", {"Listeners"}},
	{AWS_SVC_AUTOSCALING, "DescribeAutoScalingGroups", {"AutoScalingGroups"}},
	{AWS_SVC_AUTOSCALING, "DescribeAutoScalingInstances", {"AutoScalingInstances"}},
	{AWS_SVC_STS, "AssumeRole", {"Credentials"}, OTHER_MAX},
	{AWS_SVC_STS, "AssumeRoleWithWebIdentity", {"Credentials"}, OTHER_MAX},
	{AWS_SVC_STS, "GetCallerIdentity", {"Account"}, OTHER_MAX},
	/* SQS, EventBridge (JSON) */
	{AWS_SVC_SQS, "ReceiveMessage", {"Messages?:array"}},
	{AWS_SVC_SQS, "SendMessage", {"MessageId:string"}},
	{AWS_SVC_SQS, "GetQueueUrl", {"QueueUrl:string"}},
	{AWS_SVC_SQS, "CreateQueue", {"QueueUrl:string"}},
	{AWS_SVC_SQS, "GetQueueAttributes", {"Attributes?:object"}},
	{AWS_SVC_SQS, "ListQueues", {"QueueUrls?:array"}},
	{AWS_SVC_SQS, "DeleteMessageBatch", {"Successful?:array", "Failed?:array"}},
	{AWS_SVC_SQS, "DeleteMessage", {NULL}, 0, true},
	{AWS_SVC_SQS, "ChangeMessageVisibility", {NULL}, 0, true},
	{AWS_SVC_SQS, "PurgeQueue", {NULL}, 0, true},
	{AWS_SVC_SQS, "SetQueueAttributes", {NULL}, 0, true},
	{AWS_SVC_SQS, "DeleteQueue", {NULL}, 0, true},
	{AWS_SVC_SQS, "TagQueue", {NULL}, 0, true},
	{AWS_SVC_SQS, "UntagQueue", {NULL}, 0, true},
	{AWS_SVC_EVENTS, "PutEvents", {"FailedEntryCount:number", "Entries?:array"}},
	{AWS_SVC_EVENTS, "PutRule", {"RuleArn?:string"}},
	{AWS_SVC_EVENTS, "PutTargets", {"FailedEntryCount?:number"}},
};
/* clang-format on */

const struct aws_reply_shape *aws_reply_shape(enum aws_service s, const char *action)
{
	for (size_t i = 0; action && i < ARRAY_SIZE(shapes); i++)
		if (shapes[i].service == s && strcmp(shapes[i].action, action) == 0)
			return &shapes[i];
	return NULL;
}

size_t aws_reply_max(enum aws_service s, const char *action)
{
	const struct aws_reply_shape *sh = aws_reply_shape(s, action);

	if (sh && sh->max_reply)
		return sh->max_reply;
	if (!action)
		return OTHER_MAX;
	if (strncmp(action, "Describe", 8) == 0 || strncmp(action, "List", 4) == 0 ||
	    strncmp(action, "Get", 3) == 0 || strcmp(action, "ReceiveMessage") == 0)
		return LIST_MAX;
	return OTHER_MAX;
}

static bool is_error_document(const xmlNode *root)
{
	const char *name = aws_xml_name(root);

	if (strcmp(name, "Response") == 0)
		return aws_xml_get(root, "Errors/Error") != NULL;
	if (strcmp(name, "ErrorResponse") == 0)
		return aws_xml_child(root, "Error") != NULL;
	return false;
}

int aws_reply_check_xml(enum aws_service s, const char *action, const xmlNode *root,
			const xmlNode *result, char *why, size_t n)
{
	const struct aws_reply_shape *sh = aws_reply_shape(s, action);
	char want[160];

	if (!root || !action) {
		str_copy(why, n, "no root element");
		return -EBADMSG;
	}
	if (is_error_document(root))
		return 1;
	str_printf(want, sizeof(want), "%sResponse", action);
	if (strcmp(aws_xml_name(root), want) != 0) {
		str_printf(why, n, "root element <%.60s>, not <%s>", aws_xml_name(root), want);
		return -EBADMSG;
	}
	if (s != AWS_SVC_EC2 && sh && sh->need[0]) {
		/* ELB, ELBv2, Auto Scaling, STS: the output is inside <ActionResult> */
		str_printf(want, sizeof(want), "%sResult", action);
		result = aws_xml_child(root, want);
		if (!result) {
			str_printf(why, n, "no <%s> in the reply", want);
			return -EBADMSG;
		}
	}
	for (size_t i = 0; sh && i < AWS_SHAPE_MAX_NEED && sh->need[i]; i++) {
		if (!aws_xml_get(result ? result : root, sh->need[i])) {
			str_printf(why, n, "no <%s> in the reply", sh->need[i]);
			return -EBADMSG;
		}
	}
	return 0;
}

static bool json_type_is(const cJSON *v, const char *type)
{
	if (strcmp(type, "object") == 0)
		return cJSON_IsObject(v);
	if (strcmp(type, "array") == 0)
		return cJSON_IsArray(v);
	if (strcmp(type, "string") == 0)
		return cJSON_IsString(v);
	if (strcmp(type, "number") == 0)
		return cJSON_IsNumber(v);
	if (strcmp(type, "bool") == 0)
		return cJSON_IsBool(v);
	return false;
}

int aws_reply_check_json(enum aws_service s, const char *action, const cJSON *body, char *why,
			 size_t n)
{
	const struct aws_reply_shape *sh = aws_reply_shape(s, action);

	if (!body) {
		if (sh && sh->empty_ok)
			return 0;
		str_copy(why, n, "empty body");
		return -EBADMSG;
	}
	if (!cJSON_IsObject(body)) {
		str_copy(why, n, "the body is not a JSON object");
		return -EBADMSG;
	}
	/* {"__type": "...", "message": "..."} with 200: an error document */
	if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(body, "__type"))) {
		bool other = false;
		for (const cJSON *m = body->child; m; m = m->next)
			if (m->string && strcmp(m->string, "__type") != 0 &&
			    strcasecmp(m->string, "message") != 0)
				other = true;
		if (!other)
			return 1;
	}
	for (size_t i = 0; sh && i < AWS_SHAPE_MAX_NEED && sh->need[i]; i++) {
		char name[96];
		const char *colon = strchr(sh->need[i], ':');
		size_t l = colon ? (size_t)(colon - sh->need[i]) : strlen(sh->need[i]);
		bool optional = l > 0 && sh->need[i][l - 1] == '?';
		const cJSON *v;

		if (optional)
			l--;
		if (l >= sizeof(name))
			l = sizeof(name) - 1;
		memcpy(name, sh->need[i], l);
		name[l] = 0;
		v = cJSON_GetObjectItemCaseSensitive(body, name);
		if (!v) {
			if (optional)
				continue;
			str_printf(why, n, "no \"%s\" in the reply", name);
			return -EBADMSG;
		}
		if (colon && !json_type_is(v, colon + 1)) {
			str_printf(why, n, "\"%s\" is not a JSON %s", name, colon + 1);
			return -EBADMSG;
		}
	}
	return 0;
}
