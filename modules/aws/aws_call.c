/* aws-k8s aws SERVICE ACTION: one call (or every page of it) printed as JSON, and the AWS API
 * metrics. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/metrics/metrics.h"
#include "modules/aws/aws.h"

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

static void print_json(const cJSON *v, bool compact)
{
	char *s = compact ? cJSON_PrintUnformatted(v) : cJSON_Print(v);

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

int aws_cmd_call(struct aws_client *c, const struct aws_service_info *si, const char *action,
		 int argc, char **argv, bool compact, bool paginate)
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
	if (paginate) {
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
			print_json(pg.arr, compact);
		cJSON_Delete(pg.arr);
	} else {
		if (si->protocol == AWS_PROTO_QUERY)
			r = aws_call_query(c, si->id, action, &q, &rep, &err);
		else
			r = aws_call_json(c, si->id, action, in, &rep, &err);
		if (r >= 0) {
			cJSON *out =
			    si->protocol == AWS_PROTO_JSON ? NULL : aws_xml_to_json(rep.result);
			print_json(out ? out : rep.json, compact);
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
