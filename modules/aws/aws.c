/* aws-k8s aws: one AWS API call from the command line, through exactly the credential,
 * endpoint, signing and retry code the controllers use. Replies are printed as JSON (XML
 * replies converted without a schema: lists become arrays, values stay strings). */
#include "modules/aws/aws.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/flags.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/signals.h"
#include "common/base/timeutil.h"
#include "common/metrics/metrics.h"

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

void aws_print_metrics(FILE *f)
{
	struct buf b = BUF_INIT(0);
	const char *p;

	if (metrics_write(&b) < 0 || !b.data) {
		buf_release(&b);
		return;
	}
	/* only the AWS families (whole lines, with their HELP and TYPE) */
	for (p = b.data; *p;) {
		const char *e = strchr(p, '\n');
		size_t l = e ? (size_t)(e - p + 1) : strlen(p);
		if (memmem(p, l, "cloudprovider_aws_", 18) || memmem(p, l, "aws_k8s_aws_", 12))
			fwrite(p, 1, l, f);
		p += l;
	}
	buf_release(&b);
}

static void print_json(const cJSON *v)
{
	char *s = f_compact ? cJSON_PrintUnformatted(v) : cJSON_Print(v);

	if (s) {
		fputs(s, stdout);
		fputc('\n', stdout);
		free(s);
	}
	fflush(stdout);
}

/* Key=Value (a string) and Key:=JSON (a number, boolean, array or object) pairs to a JSON
 * object. */
static int kv_to_json(int argc, char **argv, cJSON **ret)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return -ENOMEM;
	for (int i = 0; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');
		bool raw = eq && eq > argv[i] && eq[-1] == ':';
		size_t kl = eq ? (size_t)(eq - argv[i]) - (raw ? 1 : 0) : 0;
		char key[256];
		cJSON *v = NULL;
		if (!eq || kl == 0 || kl >= sizeof(key)) {
			cJSON_Delete(o);
			return -EINVAL;
		}
		memcpy(key, argv[i], kl);
		key[kl] = 0;
		if (raw && json_parse(eq + 1, strlen(eq + 1), &v, NULL) < 0) {
			fprintf(stderr, "aws-k8s aws: the value of '%s' is not JSON\n", key);
			cJSON_Delete(o);
			return -EINVAL;
		}
		if (!v)
			v = cJSON_CreateString(eq + 1);
		if (!v || json_put(o, key, v) < 0) {
			cJSON_Delete(o);
			return -ENOMEM;
		}
	}
	*ret = o;
	return 0;
}

struct pages {
	cJSON *arr;
	bool json;
};

static int on_page(void *ud, const struct aws_reply *rep)
{
	struct pages *p = ud;
	cJSON *v = p->json ? cJSON_Duplicate(rep->json, true) : aws_xml_to_json(rep->result);

	if (!v)
		return -ENOMEM;
	cJSON_AddItemToArray(p->arr, v);
	return 0;
}

/* The page token names of a service: request parameter and reply field. */
static void token_names(const struct aws_service_info *si, const char **param, const char **field)
{
	switch (si->id) {
	case AWS_SVC_EC2:
		*param = "NextToken";
		*field = "nextToken";
		break;
	case AWS_SVC_ELB:
	case AWS_SVC_ELBV2:
		*param = "Marker";
		*field = "NextMarker";
		break;
	default:
		*param = *field = "NextToken";
	}
}

static int call_once(struct aws_client *c, const struct aws_service_info *si, const char *action,
		     int argc, char **argv)
{
	struct aws_query q = AWS_QUERY_INIT;
	cJSON *in = NULL;
	struct aws_reply rep = {0};
	struct aws_error err;
	char msg[1024];
	int r = 0;

	if (si->protocol == AWS_PROTO_QUERY) {
		for (int i = 0; i < argc; i++) {
			if ((r = aws_query_add_kv(&q, argv[i])) < 0) {
				fprintf(stderr, "aws-k8s aws: bad parameter '%s': want Key=Value\n",
					argv[i]);
				aws_query_release(&q);
				return 2;
			}
		}
	} else if (argc == 1 && argv[0][0] == '{') {
		if (json_parse(argv[0], strlen(argv[0]), &in, NULL) < 0) {
			fprintf(stderr, "aws-k8s aws: the JSON input does not parse\n");
			return 2;
		}
	} else if (kv_to_json(argc, argv, &in) < 0) {
		fprintf(stderr, "aws-k8s aws: bad parameters: want one JSON object or Key=Value\n");
		return 2;
	}
	if (f_paginate) {
		struct pages pg = {cJSON_CreateArray(), si->protocol == AWS_PROTO_JSON};
		struct aws_paginate p = {.on_page = on_page, .ud = &pg};
		token_names(si, &p.token_param, &p.reply_field);
		if (!pg.arr)
			r = -ENOMEM;
		else if (si->protocol == AWS_PROTO_QUERY)
			r = aws_paginate_query(c, si->id, action, &q, &p, &err);
		else
			r = aws_paginate_json(c, si->id, action, in, &p, &err);
		if (r >= 0)
			print_json(pg.arr);
		cJSON_Delete(pg.arr);
	} else {
		if (si->protocol == AWS_PROTO_QUERY)
			r = aws_call_query(c, si->id, action, &q, &rep, &err);
		else
			r = aws_call_json(c, si->id, action, in, &rep, &err);
		if (r >= 0) {
			cJSON *out =
			    si->protocol == AWS_PROTO_JSON ? NULL : aws_xml_to_json(rep.result);
			print_json(out ? out : rep.json);
			cJSON_Delete(out);
			log_v(1, "AWS call done", KV_S("action", action),
			      KV_S("request_id", rep.request_id), KV_U("attempts", rep.attempts));
		}
		aws_reply_release(&rep);
	}
	aws_query_release(&q);
	cJSON_Delete(in);
	if (r < 0) {
		fprintf(stderr, "aws-k8s aws: %s %s failed: %s\n", si->name, action,
			aws_error_str(&err, msg, sizeof(msg)));
		return 1;
	}
	return 0;
}

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
		rc = call_once(c, si, argv[1], n - 2, argv + 2);
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
