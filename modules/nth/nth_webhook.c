/* aws-k8s nth: the webhook. The body is upstream's Go template (WEBHOOK_TEMPLATE, or the file
 * WEBHOOK_TEMPLATE_FILE) in a small subset: text with `{{ .Field }}` actions (spaces optional),
 * where Field is one of upstream's template data: EventID, Kind, Monitor, Description, State,
 * NodeName, InstanceID, ProviderID, InstanceType, AutoScalingGroupName, StartTime, EndTime (Go's
 * time format "2006-01-02 15:04:05 +0000 UTC"), AccountId, InstanceLifeCycle, PublicHostname,
 * PublicIP, LocalHostname, LocalIP, AvailabilityZone, Region. Anything else (pipelines, if,
 * range, sprig functions) is refused at startup. Headers come from WEBHOOK_HEADERS (a JSON
 * object of strings, checked at start); WEBHOOK_PROXY is the proxy. One POST per drain attempt, 5 s
 * timeout, no retry; a stop (SIGTERM) abandons it without counting an error. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/http/client.h"
#include "common/kube/config.h"
#include "modules/nth/nth.h"

#define WEBHOOK_MAX_TEMPLATE (64 * 1024)
#define WEBHOOK_MAX_BODY (256 * 1024)
#define WEBHOOK_MAX_HEADERS 16

static void go_time(int64_t ns, char *buf, size_t n)
{
	time_t t = (time_t)(ns / 1000000000LL);
	struct tm tm;

	if (ns == 0) {
		str_copy(buf, n, "0001-01-01 00:00:00 +0000 UTC");
		return;
	}
	gmtime_r(&t, &tm);
	if (strftime(buf, n, "%Y-%m-%d %H:%M:%S +0000 UTC", &tm) == 0 && n)
		buf[0] = '\0';
}

static const char *kind_monitor(enum nth_kind k)
{
	switch (k) {
	case NTH_KIND_SPOT_ITN:
		return "SPOT_ITN_MONITOR";
	case NTH_KIND_SCHEDULED:
		return "SCHEDULED_EVENT_MONITOR";
	case NTH_KIND_REBALANCE:
		return "REBALANCE_RECOMMENDATION_MONITOR";
	case NTH_KIND_ASG_LIFECYCLE:
		return "ASG_LIFECYCLE_MONITOR";
	default:
		return "SQS_MONITOR";
	}
}

/* The value of one field; NULL for an unknown field. tmp holds formatted times. */
static const char *field(const struct nth *n, const struct nth_event *ev, const char *name,
			 size_t len, char *tmp, size_t tmplen)
{
	const struct {
		const char *name, *value;
	} f[] = {
		{ "EventID", ev->event_id },
		{ "Kind", nth_kind_name(ev->kind) },
		{ "Monitor", kind_monitor(ev->kind) },
		{ "Description", ev->description },
		{ "State", ev->state },
		{ "NodeName", ev->node_name },
		{ "InstanceID", ev->instance_id[0] ? ev->instance_id : n->instance_id },
		{ "ProviderID", ev->provider_id },
		{ "InstanceType", ev->instance_type[0] ? ev->instance_type : n->instance_type },
		{ "AutoScalingGroupName", ev->asg_name },
		{ "AccountId", n->account_id },
		{ "InstanceLifeCycle", n->instance_life_cycle },
		{ "PublicHostname", n->public_hostname },
		{ "PublicIP", n->public_ipv4 },
		{ "LocalHostname", n->local_hostname },
		{ "LocalIP", n->private_ip },
		{ "AvailabilityZone", n->zone },
		{ "Region", n->region },
	};

	if (len == 9 && strncmp(name, "StartTime", len) == 0) {
		go_time(ev->start_ns, tmp, tmplen);
		return tmp;
	}
	if (len == 7 && strncmp(name, "EndTime", len) == 0) {
		go_time(ev->end_ns, tmp, tmplen);
		return tmp;
	}
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (strlen(f[i].name) == len && strncmp(f[i].name, name, len) == 0)
			return f[i].value;
	return NULL;
}

/* Renders tpl into out; -EINVAL with err for an action outside the subset. */
static int render(const struct nth *n, const struct nth_event *ev, const char *tpl, struct buf *out,
		  char *err, size_t errlen)
{
	const char *p = tpl;
	char tmp[64];

	while (*p) {
		const char *open = strstr(p, "{{");
		if (!open)
			return buf_puts(out, p);
		if (buf_append(out, p, (size_t)(open - p)) < 0)
			return -ENOMEM;
		const char *close = strstr(open + 2, "}}");
		if (!close) {
			str_printf(err, errlen, "unclosed action at offset %zu", (size_t)(open - tpl));
			return -EINVAL;
		}
		const char *a = open + 2, *b = close;
		while (a < b && *a == ' ')
			a++;
		while (b > a && b[-1] == ' ')
			b--;
		const char *v = NULL;
		if (b - a > 1 && *a == '.') {
			size_t len = (size_t)(b - a - 1);
			if (strcspn(a + 1, " |()") >= len)
				v = field(n, ev, a + 1, len, tmp, sizeof(tmp));
		}
		if (!v) {
			str_printf(err, errlen, "unsupported template action '{{%.*s}}' (only "
						"{{ .Field }} with upstream's field names)",
				   (int)(close - open - 2), open + 2);
			return -EINVAL;
		}
		if (buf_puts(out, v) < 0)
			return -ENOMEM;
		p = close + 2;
	}
	return 0;
}

char *nth_webhook_render(const struct nth *n, const struct nth_event *ev, char *err, size_t errlen)
{
	struct buf out;

	buf_init(&out, WEBHOOK_MAX_BODY);
	if (render(n, ev, n->webhook_template ? n->webhook_template : n->cfg->webhook_template, &out,
		   err, errlen) < 0 ||
	    buf_putc(&out, '\0') < 0) {
		if (!err[0])
			str_copy(err, errlen, "the body is too large");
		buf_release(&out);
		return NULL;
	}
	return buf_steal(&out);
}

int nth_webhook_init(struct nth *n)
{
	const struct nth_config *c = n->cfg;
	char err[256] = "";
	cJSON *h = NULL;
	int r;

	if (!*c->webhook_url)
		return 0;
	if (strncmp(c->webhook_url, "http://", 7) != 0 && strncmp(c->webhook_url, "https://", 8) != 0) {
		fprintf(stderr, "aws-k8s nth: webhook-url must be an http or https URL\n");
		return -EINVAL;
	}
	bool headers_ok = json_parse(c->webhook_headers, strlen(c->webhook_headers), &h, NULL) == 0 &&
			  cJSON_IsObject(h) && cJSON_GetArraySize(h) <= WEBHOOK_MAX_HEADERS;
	/* a value that is not a string, or a header past the limit, would be dropped when sending */
	for (cJSON *it = headers_ok ? h->child : NULL; it; it = it->next)
		headers_ok = headers_ok && cJSON_IsString(it);
	cJSON_Delete(h);
	if (!headers_ok) {
		fprintf(stderr, "aws-k8s nth: webhook-headers must be a JSON object of strings (at most "
				"%d)\n", WEBHOOK_MAX_HEADERS);
		return -EINVAL;
	}
	if (*c->webhook_template_file) {
		size_t len;
		if ((r = kube_read_file(c->webhook_template_file, WEBHOOK_MAX_TEMPLATE,
					&n->webhook_template, &len)) < 0) {
			fprintf(stderr, "aws-k8s nth: cannot read webhook-template-file '%s': %s\n",
				c->webhook_template_file, strerror(-r));
			return r;
		}
	}
	struct nth_event probe = { .kind = NTH_KIND_SPOT_ITN };
	char *body = nth_webhook_render(n, &probe, err, sizeof(err));
	if (!body) {
		fprintf(stderr, "aws-k8s nth: invalid webhook template: %s\n", err);
		return -EINVAL;
	}
	free(body);
	return 0;
}

int nth_webhook_send(struct nth *n, const struct nth_event *ev)
{
	const struct nth_config *c = n->cfg;
	struct http_header hdrs[WEBHOOK_MAX_HEADERS];
	struct http_client *hc = NULL;
	struct http_response resp;
	char err[256] = "";
	size_t nh = 0;
	cJSON *h = NULL, *it;
	int r;

	if (!*c->webhook_url)
		return 0;
	char *body = nth_webhook_render(n, ev, err, sizeof(err));
	if (!body) {
		log_error("webhook not sent", KV_S("reason", err));
		nth_metric_error("webhook");
		return -EINVAL;
	}
	if (json_parse(c->webhook_headers, strlen(c->webhook_headers), &h, NULL) < 0) {
		free(body);
		return -EINVAL;
	}
	cJSON_ArrayForEach(it, h)
	{
		if (nh < WEBHOOK_MAX_HEADERS && cJSON_IsString(it))
			hdrs[nh++] = (struct http_header){ it->string, it->valuestring };
	}
	struct http_client_opts o = { .timeout_ns = 5000000000LL,
				      .connect_timeout_ns = 5000000000LL,
				      .max_response = 64 * 1024,
				      .proxy = *c->webhook_proxy ? c->webhook_proxy : NULL };
	http_response_init(&resp);
	if ((r = http_client_new(&o, &hc)) == 0) {
		struct http_request rq = { .method = "POST", .url = c->webhook_url, .headers = hdrs,
					   .n_headers = nh, .body = body, .body_len = strlen(body),
					   .cancel = n->cancel };
		r = http_client_do(hc, &rq, &resp);
		if (r == 0 && (resp.status < 200 || resp.status > 299))
			r = -EREMOTEIO;
	}
	if (r == -ECANCELED) {
		/* stopping (SIGTERM): the request is abandoned, not a webhook error */
		log_info("webhook canceled: stopping", KV_S("event", ev->event_id));
	} else if (r < 0) {
		/* the URL may hold a secret (Slack's): not logged */
		log_error("webhook failed", KV_S("event", ev->event_id), KV_I("status", resp.status),
			  KV_S("detail", resp.error), KV_E(r));
		nth_metric_error("webhook");
	} else {
		log_info("webhook sent", KV_S("event", ev->event_id), KV_I("status", resp.status));
	}
	http_response_release(&resp);
	http_client_free(hc);
	cJSON_Delete(h);
	free(body);
	return r;
}
