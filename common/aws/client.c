/* The AWS request pipeline (see client.h). */
#include "common/aws/client.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/aws/shape.h"
#include "common/aws/sigv4.h"
#include "common/aws/xml.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/secret.h"
#include "common/base/signals.h"
#include "common/base/timeutil.h"
#include "common/http/client.h"
#include "common/metrics/metrics.h"

#if __has_include("awsk8s_version.h")
#include "awsk8s_version.h"
#endif
#ifndef AWSK8S_VERSION
#define AWSK8S_VERSION "0.0.0"
#endif

#define FORM_CONTENT_TYPE "application/x-www-form-urlencoded; charset=utf-8"

struct aws_client {
	struct http_client *http;
	struct aws_imds *imds;
	struct aws_creds *creds;
	int max_attempts;
	int64_t timeout_ns;
	int64_t retry_base_ns;
	int64_t throttle_base_ns;
	int64_t max_backoff_ns;

	pthread_mutex_t lock; /* guards the fields below */
	char region[64];
	bool region_tried_imds;
	struct aws_endpoints endpoints;
	struct aws_retry_bucket bucket;
	_Atomic int64_t clock_skew_ns;
};

/* --- metrics ------------------------------------------------------------------------------ */

static struct metric *m_duration, *m_errors, *m_throttled, *m_status, *m_retries, *m_quota,
    *m_unusable;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;
static _Atomic int metrics_family = AWS_METRICS_CLOUDPROVIDER;

void aws_metrics_family_set(enum aws_metrics_family f)
{
	atomic_store(&metrics_family, (int)f);
}

/* The upstream families: cloud-provider-aws pkg/providers/v1/aws_metrics.go and
 * aws-ebs-csi-driver pkg/metrics (tests/data/metrics/upstream_*.txt). */
static void metrics_init_cloudprovider(void)
{
	m_duration = metric_histogram("cloudprovider_aws_api_request_duration_seconds",
				      "Latency of AWS API calls", (const char *[]){"request", NULL},
				      NULL, 0);
	m_errors = metric_counter("cloudprovider_aws_api_request_errors", "AWS API errors",
				  (const char *[]){"request", NULL});
	m_throttled =
	    metric_counter("cloudprovider_aws_api_throttled_requests_total",
			   "AWS API throttled requests", (const char *[]){"operation_name", NULL});
	m_status = metric_counter(
	    "cloudprovider_aws_api_response_status_total",
	    "AWS API error response counts by status code and bounded error type (throttle or "
	    "other; terminal, after retries are exhausted)",
	    (const char *[]){"service", "operation", "status_code", "error_type", NULL});
}

static void metrics_init_ebs_csi(void)
{
	m_duration = metric_histogram("aws_ebs_csi_api_request_duration_seconds",
				      "Duration by request type in seconds",
				      (const char *[]){"request", NULL}, NULL, 0);
	m_errors = metric_counter("aws_ebs_csi_api_request_errors_total",
				  "Total number of errors by error code and request type",
				  (const char *[]){"request", "code", NULL});
	m_throttled = metric_counter("aws_ebs_csi_api_request_throttles_total",
				     "Total number of throttled requests per request type",
				     (const char *[]){"operation_name", NULL});
}

static void metrics_init(void)
{
	switch (atomic_load(&metrics_family)) {
	case AWS_METRICS_CLOUDPROVIDER:
		metrics_init_cloudprovider();
		break;
	case AWS_METRICS_EBS_CSI:
		metrics_init_ebs_csi();
		break;
	default: /* AWS_METRICS_OWN: the module counts its calls itself */
		break;
	}
	m_retries =
	    metric_counter("aws_k8s_aws_api_retries_total", "AWS API attempts that were retries",
			   (const char *[]){"request", NULL});
	m_unusable = metric_counter("aws_k8s_aws_api_unusable_replies_total",
				    "AWS API replies with a success status that were not the reply "
				    "to the action (another root, no result set, not JSON...)",
				    (const char *[]){"request", NULL});
	m_quota = metric_counter("aws_k8s_aws_api_retry_quota_exhausted_total",
				 "AWS API retries refused because the client's retry token bucket "
				 "was empty",
				 (const char *[]){NULL});
}

/* cloud-provider-aws names its request label values in snake case ("describe_instance"
 * for DescribeInstances); the others follow the same rule. */
void aws_metric_request_name(const char *action, char *out, size_t n)
{
	static const struct {
		const char *action, *name;
	} upstream[] = {
	    {"DescribeInstances", "describe_instance"},
	};
	size_t j = 0;

	for (size_t i = 0; i < sizeof(upstream) / sizeof(upstream[0]); i++)
		if (strcmp(action, upstream[i].action) == 0) {
			str_copy(out, n, upstream[i].name);
			return;
		}
	for (size_t i = 0; action[i] && j + 2 < n; i++) {
		char ch = action[i];
		if (ch >= 'A' && ch <= 'Z') {
			char prev = i ? action[i - 1] : 0;
			if ((prev >= 'a' && prev <= 'z') || (prev >= '0' && prev <= '9'))
				out[j++] = '_';
			ch = (char)(ch - 'A' + 'a');
		}
		out[j++] = ch;
	}
	if (n)
		out[j < n ? j : n - 1] = 0;
}

/* The SDK's service ID, the "service" label of cloudprovider_aws_api_response_status_total. */
static const char *sdk_service_id(const struct aws_service_info *si)
{
	static const char *const ids[][2] = {
	    {"ec2", "EC2"},	     {"elb", "Elastic Load Balancing"},
	    {"elbv2", "Elastic Load Balancing v2"}, {"autoscaling", "Auto Scaling"},
	    {"sts", "STS"},	     {"sqs", "SQS"},
	    {"events", "EventBridge"}, {"secretsmanager", "Secrets Manager"},
	};
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (strcmp(si->name, ids[i][0]) == 0)
			return ids[i][1];
	return si->name;
}

/* One finished call (after its retries), in the family the process exports. */
static void record_call(const struct aws_request *rq, const struct aws_service_info *si, int r,
			const struct aws_error *err, int64_t start)
{
	int family = atomic_load(&metrics_family);
	const char *action = rq && rq->action ? rq->action : "";
	char name[128], status[24];

	if (family == AWS_METRICS_EBS_CSI) {
		if (r >= 0)
			metric_observe(m_duration, (double)(now_mono_ns() - start) / 1e9, action);
		else if (!aws_error_code_is_throttle(err->code))
			metric_inc(m_errors, action, err->code);
		return; /* throttles: per attempt, in aws_do */
	}
	if (family != AWS_METRICS_CLOUDPROVIDER)
		return;
	aws_metric_request_name(action, name, sizeof(name));
	if (r >= 0) {
		metric_observe(m_duration, (double)(now_mono_ns() - start) / 1e9, name);
		return;
	}
	metric_inc(m_errors, name);
	if (si && err->http_status >= 400) {
		snprintf(status, sizeof(status), "%ld", err->http_status);
		metric_inc(m_status, sdk_service_id(si), action, status,
			   err->http_status == 429 || aws_error_code_is_throttle(err->code)
			       ? "throttle"
			       : "other");
	}
}

/* --- retry policy ------------------------------------------------------------------------- */

bool aws_retry_bucket_take(struct aws_retry_bucket *b, bool timeout, unsigned *ret_cost)
{
	unsigned cost = timeout ? AWS_RETRY_TIMEOUT_COST : AWS_RETRY_COST;

	if (b->tokens < cost)
		return false;
	b->tokens -= cost;
	*ret_cost += cost;
	return true;
}

void aws_retry_bucket_refund(struct aws_retry_bucket *b, unsigned cost)
{
	b->tokens += cost ? cost : 1;
	if (b->tokens > AWS_RETRY_TOKENS)
		b->tokens = AWS_RETRY_TOKENS;
}

static int64_t retry_cap(int retry, int64_t base_ns, int64_t max_ns)
{
	int64_t cap = base_ns;

	if (retry < 1 || base_ns <= 0)
		return 0;
	for (int i = 1; i < retry && cap < max_ns; i++)
		cap *= 2;
	return cap > max_ns ? max_ns : cap;
}

static int64_t full_jitter(int64_t cap)
{
	return cap > 0 ? (int64_t)random_below((uint64_t)cap) : 0;
}

int64_t aws_retry_delay(int retry, int64_t base_ns, int64_t max_ns)
{
	return full_jitter(retry_cap(retry, base_ns, max_ns));
}

int64_t aws_client_retry_cap(const struct aws_client *c, int retry, bool throttled)
{
	return retry_cap(retry, throttled ? c->throttle_base_ns : c->retry_base_ns,
			 c->max_backoff_ns);
}

/* --- client ------------------------------------------------------------------------------- */

/* The credential provider's way out (struct aws_creds_io): its STS calls go through aws_do. */
static int creds_call(void *ud, const struct aws_request *rq, struct aws_reply *ret,
		      struct aws_error *err)
{
	return aws_do(ud, rq, ret, err);
}

static int creds_region(void *ud, const char **ret)
{
	return aws_client_region(ud, ret);
}

int aws_client_new(const struct aws_client_opts *o, struct aws_client **ret)
{
	struct aws_client_opts dflt = {0};
	struct http_client_opts ho = {0};
	struct aws_client *c;
	char ua[256];
	const char *v;
	int r;

	if (!o)
		o = &dflt;
	pthread_once(&metrics_once, metrics_init);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	aws_endpoints_init(&c->endpoints);
	c->bucket.tokens = AWS_RETRY_TOKENS;
	c->max_attempts = o->max_attempts;
	if (c->max_attempts <= 0 && (v = getenv("AWS_MAX_ATTEMPTS")) && *v) {
		long long n;
		if (str_to_ll(v, 1, 20, &n) == 0)
			c->max_attempts = (int)n;
	}
	if (c->max_attempts <= 0)
		c->max_attempts = 3;
	c->timeout_ns = o->timeout_ns > 0 ? o->timeout_ns : 30 * NSEC_PER_SEC;
	c->retry_base_ns = o->retry_base_ns > 0 ? o->retry_base_ns : 100 * NSEC_PER_MSEC;
	c->throttle_base_ns = o->throttle_base_ns > 0 ? o->throttle_base_ns : NSEC_PER_SEC;
	c->max_backoff_ns = o->max_backoff_ns > 0 ? o->max_backoff_ns : 20 * NSEC_PER_SEC;

	str_printf(ua, sizeof(ua), "aws-k8s/%s%s%s", AWSK8S_VERSION,
		   o->user_agent && *o->user_agent ? " " : "", o->user_agent ? o->user_agent : "");
	ho.connect_timeout_ns =
	    o->connect_timeout_ns > 0 ? o->connect_timeout_ns : 5 * NSEC_PER_SEC;
	ho.timeout_ns = c->timeout_ns;
	ho.user_agent = ua;
	ho.max_response = o->max_response ? o->max_response : (size_t)256 << 20;
	ho.ca_file = o->ca_file && *o->ca_file ? o->ca_file : getenv("AWS_CA_BUNDLE");
	if (ho.ca_file && !*ho.ca_file)
		ho.ca_file = NULL;
	if ((r = http_client_new(&ho, &c->http)) < 0)
		goto fail;
	if ((r = aws_imds_new(&o->imds, &c->imds)) < 0)
		goto fail;
	enum aws_setting unused;
	if ((r = aws_setting_parse(getenv("AWS_USE_FIPS_ENDPOINT"), &unused)) < 0 ||
	    (r = aws_setting_parse(getenv("AWS_USE_DUALSTACK_ENDPOINT"), &unused)) < 0 ||
	    (r = aws_endpoints_load_profile(&c->endpoints, o->creds.profile)) < 0) {
		log_error("AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT and the shared config's "
			  "use_fips_endpoint and use_dualstack_endpoint must be true or false",
			  KV_E(r));
		goto fail;
	}
	if (o->endpoint_url && *o->endpoint_url &&
	    (r = aws_endpoints_set_all(&c->endpoints, o->endpoint_url)) < 0)
		goto fail;

	/* the region: option, environment, profile; the metadata service later if needed */
	v = o->region && *o->region ? o->region : getenv("AWS_REGION");
	if (!v || !*v)
		v = getenv("AWS_DEFAULT_REGION");
	if (v && *v) {
		if (!aws_region_valid(v)) {
			r = -EINVAL;
			goto fail;
		}
		str_copy(c->region, sizeof(c->region), v);
	} else {
		_cleanup_free_ char *pr = NULL;
		if (aws_profile_get(o->creds.profile, "region", &pr) == 0 && aws_region_valid(pr))
			str_copy(c->region, sizeof(c->region), pr);
	}
	struct aws_creds_io io = {
	    .call = creds_call, .region = creds_region, .ud = c, .imds = c->imds};
	if ((r = aws_creds_new(&io, &o->creds, &c->creds)) < 0)
		goto fail;
	*ret = c;
	return 0;
fail:
	aws_client_free(c);
	return r;
}

void aws_client_free(struct aws_client *c)
{
	if (!c)
		return;
	aws_creds_free(c->creds);
	aws_imds_free(c->imds);
	http_client_free(c->http);
	aws_endpoints_release(&c->endpoints);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

struct aws_imds *aws_client_imds(struct aws_client *c)
{
	return c ? c->imds : NULL;
}

struct aws_creds *aws_client_creds(struct aws_client *c)
{
	return c ? c->creds : NULL;
}

unsigned aws_client_retry_tokens(struct aws_client *c)
{
	unsigned t;

	pthread_mutex_lock(&c->lock);
	t = c->bucket.tokens;
	pthread_mutex_unlock(&c->lock);
	return t;
}

int aws_client_region(struct aws_client *c, const char **ret)
{
	int r = 0;

	pthread_mutex_lock(&c->lock);
	if (!c->region[0] && !c->region_tried_imds && !aws_imds_disabled(c->imds)) {
		_cleanup_free_ char *reg = NULL;
		c->region_tried_imds = true;
		/* the metadata service is slow only when absent (1 s timeouts); once is enough */
		if (aws_imds_region(c->imds, &reg) == 0 && aws_region_valid(reg))
			str_copy(c->region, sizeof(c->region), reg);
		else
			log_v(4, "no region from the instance metadata service");
	}
	if (c->region[0])
		*ret = c->region;
	else
		r = -EDESTADDRREQ;
	pthread_mutex_unlock(&c->lock);
	return r;
}

int aws_client_set_override(struct aws_client *c, enum aws_service s, const char *url,
			    const char *signing_region, const char *signing_name)
{
	int r;

	pthread_mutex_lock(&c->lock);
	r = aws_endpoints_set_override(&c->endpoints, s, url, signing_region, signing_name);
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int endpoint_for(struct aws_client *c, enum aws_service s, const char *region,
			struct aws_endpoint *ret)
{
	int r;

	if (!region && (r = aws_client_region(c, &region)) < 0)
		return r;
	pthread_mutex_lock(&c->lock);
	r = aws_endpoint_resolve(&c->endpoints, s, region, ret);
	pthread_mutex_unlock(&c->lock);
	return r;
}

int aws_client_endpoint(struct aws_client *c, enum aws_service s, struct aws_endpoint *ret)
{
	return endpoint_for(c, s, NULL, ret);
}

/* --- one call ----------------------------------------------------------------------------- */

static bool is_skew_code(const char *code)
{
	return strcmp(code, "RequestTimeTooSkewed") == 0 || strcmp(code, "RequestExpired") == 0 ||
	       strcmp(code, "RequestInTheFuture") == 0 ||
	       strcmp(code, "InvalidSignatureException") == 0 ||
	       strcmp(code, "SignatureDoesNotMatch") == 0 || strcmp(code, "AuthFailure") == 0;
}

/* The offset between the server's clock (Date header) and ours, 0 when unknown. */
static int64_t server_skew(const struct http_response *resp)
{
	const char *d = http_response_header(resp, "date");
	struct tm tm = {0};
	const char *end;
	time_t t;

	if (!d || !(end = strptime(d, "%a, %d %b %Y %H:%M:%S", &tm)))
		return 0;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return 0;
	return (int64_t)t * NSEC_PER_SEC - now_real_ns();
}

static void find_request_id(struct aws_reply *rep, const struct http_response *resp)
{
	const char *id = http_response_header(resp, "x-amzn-requestid");

	if (!id)
		id = http_response_header(resp, "x-amz-request-id");
	if (!id && rep->root) {
		id = aws_xml_text(rep->root, "requestId");
		if (!id)
			id = aws_xml_text(rep->root, "ResponseMetadata/RequestId");
	}
	if (id)
		str_copy(rep->request_id, sizeof(rep->request_id), id);
}

/* Parses a 2xx reply into rep and checks that it is the reply to the action (shape.h).
 * 0 when usable; 1 when the body is an AWS error document (handled as an error reply);
 * -EBADMSG (unusable: retried like a 5xx) or -ENOMEM with err set otherwise. */
static int parse_success(const struct aws_service_info *si, const char *action,
			 struct http_response *resp, struct aws_reply *rep, struct aws_error *err)
{
	char why[256] = "";
	int r;

	rep->status = resp->status;
	if (si->protocol == AWS_PROTO_QUERY) {
		char result[160];
		r = aws_xml_parse(resp->body.data, resp->body.len, &rep->doc, why, sizeof(why));
		if (r == -ENOMEM)
			return r;
		if (r >= 0) {
			rep->root = xmlDocGetRootElement(rep->doc);
			str_printf(result, sizeof(result), "%sResult", action);
			rep->result = aws_xml_child(rep->root, result);
			if (!rep->result)
				rep->result = rep->root;
			r = aws_reply_check_xml(si->id, action, rep->root, rep->result, why,
						sizeof(why));
		}
	} else {
		size_t off = 0;
		if (resp->body.len == 0) {
			r = aws_reply_check_json(si->id, action, NULL, why, sizeof(why));
			if (r >= 0 && !(rep->json = cJSON_CreateObject()))
				return -ENOMEM;
		} else if ((r = json_parse(resp->body.data, resp->body.len, &rep->json, &off)) <
			   0) {
			str_printf(why, sizeof(why), "malformed JSON at byte %zu", off);
			r = -EBADMSG;
		} else {
			r = aws_reply_check_json(si->id, action, rep->json, why, sizeof(why));
		}
	}
	if (r == 1)
		return 1;
	if (r < 0) {
		aws_error_set(err, resp->status, "", "unusable reply from %s %s (HTTP %ld, %zu bytes): %s",
			      si->name, action, resp->status, resp->body.len, why);
		return -EBADMSG;
	}
	find_request_id(rep, resp);
	return 0;
}

struct attempt_state {
	bool throttled;
	bool timeout;
	bool skew_retried;
	bool expired_retried;
	bool retry; /* the last failure may be retried */
};

/* One attempt. 0 on success (rep filled), or a negative errno with err filled and st->retry
 * saying whether another attempt may help. */
static int attempt(struct aws_client *c, const struct aws_request *rq,
		   const struct aws_service_info *si, const struct aws_endpoint *ep,
		   const struct buf *body, struct attempt_state *st, struct aws_reply *rep,
		   struct aws_error *err)
{
	struct aws_credentials own = {0};
	const struct aws_credentials *cr = rq->creds;
	char host[300], target[160], url[600];
	const char *rest;
	struct http_header hdrs[8 + 8];
	size_t nh = 0;
	struct sigv4_output sig;
	struct http_request hr = {0};
	struct http_response resp;
	int r;

	st->retry = st->throttled = st->timeout = false;
	if ((r = sigv4_host_from_url(ep->url, host, sizeof(host), &rest)) < 0) {
		aws_error_set(err, 0, "", "bad endpoint URL %s", ep->url);
		return r;
	}
	if ((r = str_printf(url, sizeof(url), "%s/", ep->url)) < 0)
		return r;
	if (si->protocol == AWS_PROTO_JSON) {
		hdrs[nh++] = (struct http_header){"Content-Type", si->content_type};
		str_printf(target, sizeof(target), "%s.%s", si->target_prefix, rq->action);
		hdrs[nh++] = (struct http_header){"X-Amz-Target", target};
	} else {
		hdrs[nh++] = (struct http_header){"Content-Type", FORM_CONTENT_TYPE};
	}
	if (rq->n_headers > 8) {
		aws_error_set(err, 0, "", "too many extra headers");
		return -E2BIG;
	}
	for (size_t i = 0; i < rq->n_headers; i++)
		hdrs[nh++] = rq->headers[i];
	if (!rq->anonymous) {
		struct sigv4_input in = {
		    .method = "POST",
		    .host = host,
		    .path = strcmp(rest, "/") == 0 ? "/" : url + (rest - ep->url),
		    .headers = hdrs,
		    .n_headers = nh,
		    .body = body->data,
		    .body_len = body->len,
		    .region = ep->signing_region,
		    .service = ep->signing_name,
		    .time_ns = now_real_ns() + atomic_load(&c->clock_skew_ns),
		};
		if (!cr) {
			if ((r = aws_creds_get(c->creds, &own)) < 0) {
				aws_error_set(err, 0, "", "no usable AWS credentials: %s",
					      r == -ENOKEY ? "none configured" : strerror(-r));
				return r;
			}
			cr = &own;
		}
		r = sigv4_sign(&in, cr, &sig);
		if (r < 0) {
			aws_credentials_release(&own);
			aws_error_set(err, 0, "", "signing failed: %s", strerror(-r));
			return r;
		}
		for (size_t i = 0; i < sig.n_headers; i++)
			hdrs[nh++] = sig.headers[i];
	}
	hr.method = "POST";
	hr.url = url;
	hr.headers = hdrs;
	hr.n_headers = nh;
	hr.body = body->data;
	hr.body_len = body->len;
	hr.timeout_ns = rq->timeout_ns > 0 ? rq->timeout_ns : c->timeout_ns;
	hr.max_response = rq->max_reply ? rq->max_reply : aws_reply_max(si->id, rq->action);
	hr.cancel = rq->cancel ? rq->cancel : cancel_root(); /* aborts the call in flight */
	http_response_init(&resp);
	r = http_client_do(c->http, &hr, &resp);
	secret_wipe(sig.authorization, sizeof(sig.authorization));
	aws_credentials_release(&own);
	if (r < 0) {
		aws_error_set(err, 0, "", "%s %s: %s", rq->action, ep->url,
			      resp.error[0] ? resp.error : strerror(-r));
		st->timeout = r == -ETIMEDOUT;
		st->retry = r == -ETIMEDOUT || r == -ECONNREFUSED || r == -ECONNRESET ||
			    r == -EHOSTUNREACH || r == -EPROTO || r == -EAGAIN;
		http_response_release(&resp);
		return r;
	}
	if (resp.status >= 200 && resp.status < 300) {
		r = parse_success(si, rq->action, &resp, rep, err);
		if (r != 1) {
			if (r == -EBADMSG) {
				/* never read as an empty result: retried like a 5xx, counted */
				st->retry = true;
				metric_inc(m_unusable, rq->action);
			}
			http_response_release(&resp);
			return r;
		}
		aws_reply_release(rep); /* an error document with a 2xx status: the error */
	}
	aws_error_parse(err, resp.status, http_response_header(&resp, "content-type"),
			resp.body.data, resp.body.len,
			http_response_header(&resp, "x-amzn-query-error"));
	if (!err->request_id[0]) {
		const char *id = http_response_header(&resp, "x-amzn-requestid");
		if (!id)
			id = http_response_header(&resp, "x-amz-request-id");
		if (id)
			str_copy(err->request_id, sizeof(err->request_id), id);
	}
	st->throttled = aws_error_code_is_throttle(err->code);
	st->retry = aws_error_retryable(err);
	if (!st->retry && !st->skew_retried && is_skew_code(err->code)) {
		int64_t skew = server_skew(&resp);
		if (skew > 4 * 60 * NSEC_PER_SEC || skew < -4 * 60 * NSEC_PER_SEC) {
			atomic_store(&c->clock_skew_ns, skew);
			st->skew_retried = st->retry = true;
			log_v(2, "adjusting for clock skew with AWS",
			      KV_I("skew_s", skew / NSEC_PER_SEC));
		}
	}
	if (!st->retry && !st->expired_retried && !rq->creds && !rq->anonymous &&
	    (strcmp(err->code, "ExpiredToken") == 0 ||
	     strcmp(err->code, "ExpiredTokenException") == 0)) {
		aws_creds_invalidate(c->creds);
		st->expired_retried = st->retry = true;
	}
	http_response_release(&resp);
	return aws_error_errno(err);
}

int aws_do(struct aws_client *c, const struct aws_request *rq, struct aws_reply *ret,
	   struct aws_error *err)
{
	const struct aws_service_info *si = rq ? aws_service_info(rq->service) : NULL;
	struct aws_error local;
	struct aws_endpoint ep;
	struct aws_reply rep = {0};
	struct attempt_state st = {0};
	struct buf body = BUF_INIT(0);
	int max = rq && rq->max_attempts > 0 ? rq->max_attempts : c ? c->max_attempts : 1;
	int64_t start = now_mono_ns();
	unsigned cost = 0;
	int r = 0, n;

	if (!err)
		err = &local;
	aws_error_clear(err);
	if (!c || !rq || !si || !rq->action || !*rq->action || !ret ||
	    si->protocol == AWS_PROTO_REST) {
		aws_error_set(err, 0, "", "invalid AWS request");
		return -EINVAL;
	}
	if ((r = endpoint_for(c, rq->service, rq->region, &ep)) < 0) {
		aws_error_set(err, 0, "", "no endpoint for %s: %s", si->name,
			      r == -EDESTADDRREQ ? "the region is not known (set AWS_REGION)"
						 : strerror(-r));
		goto done;
	}
	if (si->protocol == AWS_PROTO_QUERY)
		r = aws_query_encode(rq->query, rq->action, si->version, &body);
	else
		r = buf_puts(&body, rq->json ? rq->json : "{}");
	if (r < 0) {
		aws_error_set(err, 0, "", "cannot build the %s request: %s", rq->action,
			      strerror(-r));
		goto done;
	}
	for (n = 1; n <= max; n++) {
		if (n > 1) {
			bool ok;
			int64_t delay;
			pthread_mutex_lock(&c->lock);
			ok = aws_retry_bucket_take(&c->bucket, st.timeout, &cost);
			pthread_mutex_unlock(&c->lock);
			if (!ok) {
				size_t l = strlen(err->message);
				snprintf(err->message + l, sizeof(err->message) - l,
					 " (not retried: the client's retry quota is used up)");
				metric_inc(m_quota);
				log_v(4, "AWS retry quota exhausted, not retrying",
				      KV_S("service", si->name), KV_S("action", rq->action));
				break;
			}
			metric_inc(m_retries, rq->action);
			delay = full_jitter(aws_client_retry_cap(c, n - 1, st.throttled));
			if (st.skew_retried && n == 2)
				delay = 0;
			log_v(4, "retrying AWS request", KV_S("service", si->name),
			      KV_S("action", rq->action), KV_I("attempt", n),
			      KV_S("code", err->code), KV_I("status", err->http_status),
			      KV_I("delay_ms", delay / NSEC_PER_MSEC));
			if (cancel_wait(rq->cancel ? rq->cancel : cancel_root(), delay)) {
				size_t l = strlen(err->message);
				snprintf(err->message + l, sizeof(err->message) - l,
					 " (not retried: canceled)");
				r = -ECANCELED;
				break;
			}
		}
		aws_reply_release(&rep);
		aws_error_clear(err);
		r = attempt(c, rq, si, &ep, &body, &st, &rep, err);
		log_v(5, "AWS request", KV_S("service", si->name), KV_S("action", rq->action),
		      KV_I("attempt", n),
		      KV_I("status", err->http_status ? err->http_status : rep.status),
		      KV_S("code", err->code), KV_E(r));
		if (st.throttled && atomic_load(&metrics_family) != AWS_METRICS_OWN)
			metric_inc(m_throttled, rq->action);
		if (r >= 0 || !st.retry)
			break;
	}
	if (r >= 0) {
		pthread_mutex_lock(&c->lock);
		aws_retry_bucket_refund(&c->bucket, cost);
		pthread_mutex_unlock(&c->lock);
		rep.attempts = (unsigned)(n > max ? max : n);
	}
done:
	buf_release(&body);
	if (c && rq && si)
		record_call(rq, si, r, err, start);
	if (r < 0) {
		aws_reply_release(&rep);
		return r;
	}
	*ret = rep;
	return 0;
}

int aws_call_query(struct aws_client *c, enum aws_service s, const char *action,
		   const struct aws_query *q, struct aws_reply *ret, struct aws_error *err)
{
	struct aws_request rq = {.service = s, .action = action, .query = q};

	return aws_do(c, &rq, ret, err);
}

int aws_call_json(struct aws_client *c, enum aws_service s, const char *action, const cJSON *input,
		  struct aws_reply *ret, struct aws_error *err)
{
	_cleanup_free_ char *body = input ? json_print(input) : NULL;
	struct aws_request rq = {.service = s, .action = action, .json = body};

	if (input && !body)
		return -ENOMEM;
	return aws_do(c, &rq, ret, err);
}
