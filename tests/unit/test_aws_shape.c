/* Reply shapes: a 2xx reply is used only when it is the reply to the action called. */
#include <errno.h>
#include <string.h>

#include "common/aws/shape.h"
#include "common/aws/xml.h"
#include "common/base/json.h"
#include "tests/unit/harness.h"

/* Parses xml and checks it as the reply to action; returns the check's result. */
static int check_xml(enum aws_service s, const char *action, const char *xml, char *why,
		     size_t n)
{
	char result[128], perr[128];
	xmlDoc *doc = NULL;
	xmlNode *root, *res;
	int r;

	r = aws_xml_parse(xml, strlen(xml), &doc, perr, sizeof(perr));
	if (r < 0)
		return r;
	root = xmlDocGetRootElement(doc);
	snprintf(result, sizeof(result), "%sResult", action);
	res = aws_xml_child(root, result);
	r = aws_reply_check_xml(s, action, root, res ? res : root, why, n);
	xmlFreeDoc(doc);
	return r;
}

TEST(aws_shape_query_root_and_sets)
{
	char why[256];

	/* an empty set is a well-formed "no items" */
	ASSERT_OK(check_xml(AWS_SVC_EC2, "DescribeInstances",
			    "<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/"
			    "2016-11-15/\"><requestId>r</requestId><reservationSet/>"
			    "</DescribeInstancesResponse>",
			    why, sizeof(why)));
	/* another root, even well-formed with the set inside */
	ASSERT_ERR(check_xml(AWS_SVC_EC2, "DescribeInstances",
			     "<DescribeVolumesResponse><reservationSet/></DescribeVolumesResponse>",
			     why, sizeof(why)),
		   EBADMSG);
	ASSERT_CONTAINS(why, "<DescribeVolumesResponse>");
	ASSERT_CONTAINS(why, "DescribeInstancesResponse");
	ASSERT_ERR(check_xml(AWS_SVC_EC2, "DescribeVolumes", "<html><body>login</body></html>", why,
			     sizeof(why)),
		   EBADMSG);
	ASSERT_CONTAINS(why, "<html>");
	/* the right root without the set the callers read */
	ASSERT_ERR(check_xml(AWS_SVC_EC2, "DescribeInstances",
			     "<DescribeInstancesResponse><requestId>r</requestId>"
			     "</DescribeInstancesResponse>",
			     why, sizeof(why)),
		   EBADMSG);
	ASSERT_CONTAINS(why, "reservationSet");
	ASSERT_ERR(check_xml(AWS_SVC_EC2, "DescribeVolumes",
			     "<DescribeVolumesResponse><volumeSetX/></DescribeVolumesResponse>", why,
			     sizeof(why)),
		   EBADMSG);
	/* an action outside the table: the root is enough */
	ASSERT_OK(check_xml(AWS_SVC_EC2, "DescribeKeyPairs",
			    "<DescribeKeyPairsResponse/>", why, sizeof(why)));
	ASSERT_ERR(check_xml(AWS_SVC_EC2, "DescribeKeyPairs", "<Other/>", why, sizeof(why)), EBADMSG);
}

TEST(aws_shape_query_result_element)
{
	char why[256];

	ASSERT_OK(check_xml(AWS_SVC_ELBV2, "DescribeLoadBalancers",
			    "<DescribeLoadBalancersResponse><DescribeLoadBalancersResult>"
			    "<LoadBalancers/></DescribeLoadBalancersResult>"
			    "</DescribeLoadBalancersResponse>",
			    why, sizeof(why)));
	/* the list outside <ActionResult> is not where callers look */
	ASSERT_ERR(check_xml(AWS_SVC_ELBV2, "DescribeLoadBalancers",
			     "<DescribeLoadBalancersResponse><LoadBalancers/>"
			     "</DescribeLoadBalancersResponse>",
			     why, sizeof(why)),
		   EBADMSG);
	ASSERT_OK(check_xml(AWS_SVC_STS, "AssumeRoleWithWebIdentity",
			    "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>"
			    "<Credentials/></AssumeRoleWithWebIdentityResult>"
			    "</AssumeRoleWithWebIdentityResponse>",
			    why, sizeof(why)));
	ASSERT_ERR(check_xml(AWS_SVC_STS, "AssumeRoleWithWebIdentity",
			     "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult/>"
			     "</AssumeRoleWithWebIdentityResponse>",
			     why, sizeof(why)),
		   EBADMSG);
}

TEST(aws_shape_error_documents)
{
	char why[256];

	ASSERT_EQ(check_xml(AWS_SVC_EC2, "DescribeInstances",
			    "<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code>"
			    "</Error></Errors></Response>",
			    why, sizeof(why)),
		  1);
	ASSERT_EQ(check_xml(AWS_SVC_ELB, "DescribeLoadBalancers",
			    "<ErrorResponse><Error><Code>Throttling</Code></Error></ErrorResponse>",
			    why, sizeof(why)),
		  1);
	/* <Response> without <Errors> is just another root */
	ASSERT_ERR(check_xml(AWS_SVC_EC2, "DescribeInstances", "<Response/>", why, sizeof(why)),
		   EBADMSG);
}

/* The rows of capa's calls (EC2 and ELB): each needs the element its callers read, as AWS and
 * moto send it (an empty set for a Describe that finds nothing). */
static const struct {
	enum aws_service svc;
	const char *action, *element;
} capa_rows[] = {
    {AWS_SVC_EC2, "DescribeNatGateways", "natGatewaySet"},
    {AWS_SVC_EC2, "DescribeInternetGateways", "internetGatewaySet"},
    {AWS_SVC_EC2, "DescribeAddresses", "addressesSet"},
    {AWS_SVC_EC2, "DescribeImages", "imagesSet"},
    {AWS_SVC_EC2, "RunInstances", "instancesSet"},
    {AWS_SVC_EC2, "CreateVpc", "vpc"},
    {AWS_SVC_EC2, "CreateSubnet", "subnet"},
    {AWS_SVC_EC2, "CreateInternetGateway", "internetGateway"},
    {AWS_SVC_EC2, "CreateNatGateway", "natGateway"},
    {AWS_SVC_EC2, "AllocateAddress", "allocationId"},
    {AWS_SVC_EC2, "CreateRouteTable", "routeTable"},
    {AWS_SVC_EC2, "AssociateRouteTable", "associationId"},
    {AWS_SVC_EC2, "CreateSecurityGroup", "groupId"},
    {AWS_SVC_ELB, "CreateLoadBalancer", "DNSName"},
};

TEST(aws_shape_capa_rows)
{
	char xml[512], why[256];

	for (size_t i = 0; i < ARRAY_SIZE(capa_rows); i++) {
		const char *a = capa_rows[i].action, *e = capa_rows[i].element;
		bool ec2 = capa_rows[i].svc == AWS_SVC_EC2;

		ASSERT_TRUE(aws_reply_shape(capa_rows[i].svc, a) != NULL);
		ASSERT_STREQ(aws_reply_shape(capa_rows[i].svc, a)->need[0], e);
		/* with the element (EC2: under the root; ELB: under <ActionResult>) */
		if (ec2)
			snprintf(xml, sizeof(xml),
				 "<%sResponse><requestId>r</requestId><%s/></%sResponse>", a, e, a);
		else
			snprintf(xml, sizeof(xml), "<%sResponse><%sResult><%s/></%sResult></%sResponse>",
				 a, a, e, a, a);
		ASSERT_OK(check_xml(capa_rows[i].svc, a, xml, why, sizeof(why)));
		/* without it: a reply that is not the action's is never read as "none" */
		if (ec2)
			snprintf(xml, sizeof(xml), "<%sResponse><requestId>r</requestId></%sResponse>",
				 a, a);
		else
			snprintf(xml, sizeof(xml), "<%sResponse><%sResult/></%sResponse>", a, a, a);
		ASSERT_ERR(check_xml(capa_rows[i].svc, a, xml, why, sizeof(why)), EBADMSG);
		ASSERT_CONTAINS(why, e);
	}
}

static int check_json(enum aws_service s, const char *action, const char *text, char *why,
		      size_t n)
{
	cJSON *j = NULL;
	int r;

	if (text && json_parse(text, strlen(text), &j, NULL) < 0)
		return -EPROTO;
	r = aws_reply_check_json(s, action, j, why, n);
	cJSON_Delete(j);
	return r;
}

TEST(aws_shape_json)
{
	char why[256];

	ASSERT_OK(check_json(AWS_SVC_SQS, "ReceiveMessage", "{}", why, sizeof(why)));
	ASSERT_OK(check_json(AWS_SVC_SQS, "ReceiveMessage", "{\"Messages\":[]}", why, sizeof(why)));
	ASSERT_ERR(check_json(AWS_SVC_SQS, "ReceiveMessage", "{\"Messages\":\"x\"}", why,
			      sizeof(why)),
		   EBADMSG);
	ASSERT_CONTAINS(why, "Messages");
	ASSERT_ERR(check_json(AWS_SVC_SQS, "ReceiveMessage", "[]", why, sizeof(why)), EBADMSG);
	ASSERT_ERR(check_json(AWS_SVC_SQS, "ReceiveMessage", NULL, why, sizeof(why)), EBADMSG);
	ASSERT_CONTAINS(why, "empty");
	ASSERT_OK(check_json(AWS_SVC_SQS, "DeleteMessage", NULL, why, sizeof(why)));
	ASSERT_ERR(check_json(AWS_SVC_SQS, "SendMessage", "{}", why, sizeof(why)), EBADMSG);
	ASSERT_OK(check_json(AWS_SVC_SQS, "SendMessage", "{\"MessageId\":\"m\"}", why, sizeof(why)));
	ASSERT_ERR(check_json(AWS_SVC_EVENTS, "PutEvents", "{\"FailedEntryCount\":\"0\"}", why,
			      sizeof(why)),
		   EBADMSG);
	ASSERT_EQ(check_json(AWS_SVC_SQS, "SendMessage",
			     "{\"__type\":\"com.amazonaws.sqs#QueueDoesNotExist\",\"message\":\"m\"}",
			     why, sizeof(why)),
		  1);
	/* an action outside the table: any object */
	ASSERT_OK(check_json(AWS_SVC_SQS, "ListDeadLetterSourceQueues", "{\"x\":1}", why,
			     sizeof(why)));
	ASSERT_ERR(check_json(AWS_SVC_SQS, "ListDeadLetterSourceQueues", "\"s\"", why, sizeof(why)),
		   EBADMSG);
}

TEST(aws_shape_caps)
{
	ASSERT_EQ(aws_reply_max(AWS_SVC_EC2, "DescribeInstances"), (size_t)32 << 20);
	ASSERT_EQ(aws_reply_max(AWS_SVC_EC2, "DescribeVolumes"), (size_t)16 << 20);
	ASSERT_EQ(aws_reply_max(AWS_SVC_EC2, "DescribeImages"), (size_t)16 << 20);
	ASSERT_EQ(aws_reply_max(AWS_SVC_SQS, "ReceiveMessage"), (size_t)16 << 20);
	ASSERT_EQ(aws_reply_max(AWS_SVC_EC2, "AttachVolume"), (size_t)2 << 20);
	ASSERT_EQ(aws_reply_max(AWS_SVC_STS, "GetCallerIdentity"), (size_t)2 << 20);
	ASSERT_EQ(aws_reply_max(AWS_SVC_EC2, NULL), (size_t)2 << 20);
	ASSERT_NULL(aws_reply_shape(AWS_SVC_EC2, "NoSuchAction"));
	ASSERT_NOT_NULL(aws_reply_shape(AWS_SVC_EC2, "DescribeInstances"));
}
