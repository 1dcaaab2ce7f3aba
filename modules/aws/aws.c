/* aws-k8s aws: one AWS API call from the command line, through exactly the credential,
 * endpoint, signing and retry code the controllers use. Replies are printed as JSON (XML
 * replies converted without a schema: lists become arrays, values stay strings). This file
 * holds the usage text, the flags and main; the call itself is in aws_call.c, the imds, batch,
 * creds and endpoint verbs in aws_tools.c. */
#include "modules/aws/aws.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/base/signals.h"
#include "common/base/timeutil.h"

static const char aws_usage[] =
    "Calls an AWS API action through aws-k8s's own AWS client (the same credentials chain,\n"
    "endpoints, SigV4 signing and retries as the controllers) and prints the reply as JSON.\n"
    "\n"
    "  aws-k8s aws [flags] SERVICE ACTION [Key=Value ...]      Query protocol services\n"
    "  aws-k8s aws [flags] SERVICE ACTION ['{JSON}' | Key=Value ...]   JSON protocol services\n"
    "  aws-k8s aws [flags] imds get PATH            GET /latest/PATH from the metadata service\n"
    "  aws-k8s aws [flags] imds identity|region|instance-id|instance-type|zone|zone-id|\n"
    "                      local-hostname|macs     metadata helpers\n"
    "  aws-k8s aws [flags] batch KIND ID...          describe each ID from its own thread\n"
    "                      through the batching helper (KIND: instances, volumes, snapshots,\n"
    "                      volume-modifications) and print the items and the calls made\n"
    "  aws-k8s aws [flags] creds                     which credential source is used (no\n"
    "                      secret is printed)\n"
    "  aws-k8s aws [flags] endpoint SERVICE          the endpoint and signing scope in use\n"
    "\n"
    "SERVICE: ec2, elb (classic, 2012-06-01), elbv2 (2015-12-01), autoscaling, sts (Query\n"
    "protocol, XML replies); sqs, events (JSON protocol). Query parameters use the services'\n"
    "flattened names: Filter.1.Name=instance-state-name Filter.1.Value.1=running,\n"
    "InstanceId.1=i-..., Listeners.member.1.Protocol=TCP. For JSON services, give one JSON\n"
    "object, or pairs that build one: Key=Value sets a string, Key:=JSON sets any JSON value\n"
    "(MaxNumberOfMessages:=10, AttributeNames:='[\"All\"]').\n"
    "\n"
    "Examples:\n"
    "  aws-k8s aws ec2 DescribeInstances Filter.1.Name=instance-state-name "
    "Filter.1.Value.1=running\n"
    "  aws-k8s aws sts GetCallerIdentity\n"
    "  aws-k8s aws sqs SendMessage '{\"QueueUrl\":\"https://...\",\"MessageBody\":\"hi\"}'\n"
    "  aws-k8s aws imds get meta-data/instance-id\n"
    "\n"
    "The environment is read as the AWS SDKs read it: AWS_REGION, AWS_DEFAULT_REGION,\n"
    "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE,\n"
    "AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE,\n"
    "AWS_ROLE_SESSION_NAME, AWS_CONTAINER_CREDENTIALS_FULL_URI,\n"
    "AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE), AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>\n"
    "(EC2, ELASTIC_LOAD_BALANCING, ELASTIC_LOAD_BALANCING_V2, AUTO_SCALING, STS, SQS,\n"
    "EVENTBRIDGE), AWS_MAX_ATTEMPTS, AWS_CA_BUNDLE, AWS_EC2_METADATA_SERVICE_ENDPOINT,\n"
    "AWS_EC2_METADATA_DISABLED.\n"
    "\n"
    "Exit status: 0 success, 1 the call failed (the AWS error is printed on stderr), 2 usage.";

static char *f_region, *f_endpoint_url, *f_profile, *f_role_arn, *f_external_id;
static long long f_max_attempts, f_repeat, f_batch_max;
static int64_t f_timeout, f_interval, f_batch_window, f_retry_base;
static bool f_paginate, f_print_metrics, f_compact;

static const struct flag aws_flags[] = {
    {"region", FLAG_STRING, &f_region, NULL, NULL,
     "The AWS region (default: $AWS_REGION, $AWS_DEFAULT_REGION, the profile, the metadata "
     "service)."},
    {"endpoint-url", FLAG_STRING, &f_endpoint_url, NULL, NULL,
     "Send every call to this URL instead of the standard endpoint."},
    {"profile", FLAG_STRING, &f_profile, NULL, NULL,
     "The profile of the shared config and credentials files (default: $AWS_PROFILE)."},
    {"role-arn", FLAG_STRING, &f_role_arn, NULL, NULL,
     "Assume this role (STS AssumeRole) on top of the credentials the chain finds."},
    {"external-id", FLAG_STRING, &f_external_id, NULL, NULL, "The ExternalId for --role-arn."},
    {"max-attempts", FLAG_INT, &f_max_attempts, "0", NULL,
     "Attempts per call including retries; 0 is $AWS_MAX_ATTEMPTS or 3.", 0, 20},
    {"timeout", FLAG_DURATION, &f_timeout, "30s", NULL, "Timeout of each attempt."},
    {"retry-base-delay", FLAG_DURATION, &f_retry_base, "100ms", NULL,
     "Base of the exponential backoff between retries (1s after throttling replies, or this "
     "when larger)."},
    {"paginate", FLAG_BOOL, &f_paginate, "false", NULL,
     "Follow NextToken / NextMarker and print every page (a JSON array of the pages)."},
    {"repeat", FLAG_INT, &f_repeat, "1", NULL,
     "Make the call this many times (credential refresh tests).", 1, 100000},
    {"interval", FLAG_DURATION, &f_interval, "1s", NULL, "The pause between repeated calls."},
    {"batch-window", FLAG_DURATION, &f_batch_window, "10ms", NULL,
     "batch: how long to wait for more IDs after the last one."},
    {"batch-max-ids", FLAG_INT, &f_batch_max, "0", NULL,
     "batch: IDs per Describe call; 0 is the kind's default.", 0, 1000},
    {"print-metrics", FLAG_BOOL, &f_print_metrics, "false", NULL,
     "Print the AWS API metrics (Prometheus text) on stderr before exiting."},
    {"compact", FLAG_BOOL, &f_compact, "false", NULL, "Print JSON on one line."},
    LOG_FLAGS,
    {NULL},
};

int aws_main(int argc, char **argv)
{
	struct aws_client_opts o = {0};
	struct aws_client *c = NULL;
	const struct aws_service_info *si;
	int n, r, rc = 0;

	n = flags_parse("aws", aws_usage, aws_flags, argc, argv);
	if (n < 0)
		return flags_exit_code(n);
	if (n < 1) {
		fprintf(stderr, "aws-k8s aws: missing SERVICE (see 'aws-k8s aws --help')\n");
		rc = 2;
		goto out;
	}
	o.region = f_region;
	o.endpoint_url = f_endpoint_url;
	o.creds.profile = f_profile;
	o.creds.role_arn = f_role_arn;
	o.creds.external_id = f_external_id;
	o.max_attempts = (int)f_max_attempts;
	o.timeout_ns = f_timeout;
	o.retry_base_ns = f_retry_base;
	if (f_retry_base > NSEC_PER_SEC)
		o.throttle_base_ns = f_retry_base;
	o.user_agent = "cli";
	if ((r = aws_client_new(&o, &c)) < 0) {
		fprintf(stderr, "aws-k8s aws: cannot set up the AWS client: %s\n",
			r == -EINVAL ? "bad region or endpoint URL" : strerror(-r));
		rc = r == -EINVAL ? 2 : 1;
		goto out;
	}
	if (strcmp(argv[0], "imds") == 0) {
		rc = aws_cmd_imds(c, n - 1, argv + 1);
		goto out;
	}
	if (strcmp(argv[0], "batch") == 0) {
		rc = aws_cmd_batch(c, n - 1, argv + 1, f_batch_window / NSEC_PER_MSEC, f_batch_max);
		goto out;
	}
	if (strcmp(argv[0], "creds") == 0) {
		rc = aws_cmd_creds(c);
		goto out;
	}
	if (strcmp(argv[0], "endpoint") == 0) {
		rc = aws_cmd_endpoint(c, n - 1, argv + 1);
		goto out;
	}
	si = aws_service_by_name(argv[0]);
	if (!si || si->protocol == AWS_PROTO_REST) {
		fprintf(stderr, "aws-k8s aws: unknown service '%s' (see 'aws-k8s aws --help')\n",
			argv[0]);
		rc = 2;
		goto out;
	}
	if (n < 2) {
		fprintf(stderr, "aws-k8s aws: missing ACTION after '%s'\n", argv[0]);
		rc = 2;
		goto out;
	}
	for (long long i = 0; i < f_repeat; i++) {
		if (i > 0 && stop_wait(f_interval))
			break;
		rc = aws_cmd_call(c, si, argv[1], n - 2, argv + 2, f_compact, f_paginate);
		if (rc == 2)
			break;
	}
out:
	if (f_print_metrics)
		aws_print_metrics(stderr);
	aws_client_free(c);
	flags_free(aws_flags);
	return rc;
}
