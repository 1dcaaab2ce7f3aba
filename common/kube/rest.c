/* The Kubernetes REST client: the client, its rate limiter and token, one request, Status
 * errors (see rest.h). The verbs are in rest_ops.c. */
#include "common/kube/rest.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/signals.h"
#include "common/base/timeutil.h"
#include "common/metrics/metrics.h"

#ifndef AWSK8S_VERSION
#define AWSK8S_VERSION "0.0.0"
#endif

#define DEFAULT_QPS 5.0
#define DEFAULT_BURST 10
#define MAX_RETRY_WAIT_NS (10 * NSEC_PER_SEC)

struct kube_client {
	struct http_client *http;
	char *server;
	char *host; /* metrics label: host[:port] */
	char *ns;
	char *basic_auth; /* "Basic base64(user:password)" or NULL */
	int64_t timeout_ns;

	pthread_mutex_t lock; /* guards the bucket and the token */
	double qps, burst, tokens;
	int64_t last_ns;
	char *token_file;
	char *token;
	int64_t token_read_ns;
};

static struct metric *m_requests, *m_duration;

static void metrics_once(void)
{
	static const double buckets[] = {0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60};
	m_requests =
	    metric_counter("rest_client_requests_total",
			   "Number of HTTP requests, partitioned by status code, method, and host.",
			   (const char *[]){"code", "method", "host", NULL});
	m_duration =
	    metric_histogram("rest_client_request_duration_seconds",
			     "Request latency in seconds. Broken down by verb, and host.",
			     (const char *[]){"verb", "host", NULL}, buckets, ARRAY_SIZE(buckets));
}

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void kube_client_free(struct kube_client *c)
{
	if (!c)
		return;
	http_client_free(c->http);
	free(c->server);
	free(c->host);
	free(c->ns);
	free_secret(c->basic_auth);
	free(c->token_file);
	free_secret(c->token);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static char *base64_encode(const char *s, size_t n)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((n + 2) / 3 * 4 + 1), *p = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned char)s[i] << 16;
		if (i + 1 < n)
			v |= (unsigned char)s[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)s[i + 2];
		*p++ = tab[(v >> 18) & 63];
		*p++ = tab[(v >> 12) & 63];
		*p++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		*p++ = i + 2 < n ? tab[v & 63] : '=';
	}
	*p = 0;
	return out;
}

static int basic_auth(const struct kube_config *cfg, char **ret)
{
	_cleanup_free_ char *pair = NULL;
	char *b64;
	int n = asprintf(&pair, "%s:%s", cfg->username, cfg->password ? cfg->password : "");

	if (n < 0)
		return -ENOMEM;
	b64 = base64_encode(pair, (size_t)n);
	explicit_bzero(pair, (size_t)n);
	if (!b64)
		return -ENOMEM;
	n = asprintf(ret, "Basic %s", b64);
	free_secret(b64);
	return n < 0 ? -ENOMEM : 0;
}

int kube_client_new(const struct kube_config *cfg, const struct kube_client_opts *o,
		    struct kube_client **ret)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct kube_client_opts def = {0};
	struct kube_client *c;
	char ua[128];
	int r;

	if (!o)
		o = &def;
	if (!cfg->server)
		return -EINVAL;
	pthread_once(&once, metrics_once);
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	c->qps = o->qps == 0 ? DEFAULT_QPS : o->qps;
	c->burst = o->burst > 0 ? o->burst : DEFAULT_BURST;
	c->tokens = c->burst;
	c->last_ns = now_mono_ns();
	c->timeout_ns = o->timeout_ns > 0 ? o->timeout_ns : 60 * NSEC_PER_SEC;
	c->token_read_ns = now_mono_ns();
	if (o->component && *o->component)
		snprintf(ua, sizeof(ua), "aws-k8s-%s/%s", o->component, AWSK8S_VERSION);
	else
		snprintf(ua, sizeof(ua), "aws-k8s/%s", AWSK8S_VERSION);

	const char *h = strstr(cfg->server, "://");
	h = h ? h + 3 : cfg->server;
	if (!(c->server = strdup(cfg->server)) || !(c->host = strndup(h, strcspn(h, "/"))) ||
	    !(c->ns = strdup(cfg->namespace ? cfg->namespace : "default")) ||
	    (cfg->token_file && !(c->token_file = strdup(cfg->token_file))) ||
	    (cfg->token && !(c->token = strdup(cfg->token)))) {
		kube_client_free(c);
		return -ENOMEM;
	}
	if (cfg->username && !cfg->token && (r = basic_auth(cfg, &c->basic_auth)) < 0) {
		kube_client_free(c);
		return r;
	}
	struct http_client_opts ho = {
	    .timeout_ns = c->timeout_ns,
	    .ca_file = cfg->ca_file,
	    .ca_pem = cfg->ca_pem,
	    .cert_file = cfg->cert_file,
	    .key_file = cfg->key_file,
	    .cert_pem = cfg->cert_pem,
	    .key_pem = cfg->key_pem,
	    .insecure_skip_verify = cfg->insecure_skip_verify,
	    .bearer_token = cfg->token,
	    .user_agent = ua,
	    .max_response = o->max_response ? o->max_response : KUBE_DEFAULT_MAX_RESPONSE,
	};
	if ((r = http_client_new(&ho, &c->http)) < 0) {
		kube_client_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

const char *kube_client_server(const struct kube_client *c)
{
	return c->server;
}

const char *kube_client_namespace(const struct kube_client *c)
{
	return c->ns;
}

/* The token bucket: takes a token, waiting for it outside the lock when there is none. */
static void rate_wait(struct kube_client *c)
{
	int64_t now, wait = 0;

	if (c->qps < 0)
		return;
	pthread_mutex_lock(&c->lock);
	now = now_mono_ns();
	c->tokens += (double)(now - c->last_ns) * c->qps / 1e9;
	if (c->tokens > c->burst)
		c->tokens = c->burst;
	c->last_ns = now;
	c->tokens -= 1;
	if (c->tokens < 0)
		wait = (int64_t)(-c->tokens / c->qps * 1e9);
	pthread_mutex_unlock(&c->lock);
	if (wait > 0) {
		log_v(6, "client-side throttling", KV_I("wait_ms", wait / NSEC_PER_MSEC));
		sleep_ns(wait);
	}
}

/* Re-reads the token file once a minute, or at once with force; true when the token changed. */
static bool token_refresh(struct kube_client *c, bool force)
{
	char *t = NULL;
	bool changed = false;
	int r;

	if (!c->token_file)
		return false;
	pthread_mutex_lock(&c->lock);
	if (!force && now_mono_ns() - c->token_read_ns < KUBE_TOKEN_REREAD_NS) {
		pthread_mutex_unlock(&c->lock);
		return false;
	}
	c->token_read_ns = now_mono_ns();
	pthread_mutex_unlock(&c->lock);
	if ((r = kube_read_token_file(c->token_file, &t)) < 0) {
		log_v(2, "cannot re-read the token file, keeping the current token",
		      KV_S("path", c->token_file), KV_E(r));
		return false;
	}
	pthread_mutex_lock(&c->lock);
	if (!c->token || strcmp(c->token, t) != 0) {
		if (http_client_set_token(c->http, t) == 0) {
			free_secret(c->token);
			c->token = TAKE_PTR(t);
			changed = true;
		}
	}
	pthread_mutex_unlock(&c->lock);
	free_secret(t);
	if (changed)
		log_v(2, "token file changed, using the new token", KV_S("path", c->token_file));
	return changed;
}

static const char *default_reason(long code)
{
	switch (code) {
	case 400:
		return "BadRequest";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "NotFound";
	case 405:
		return "MethodNotAllowed";
	case 406:
		return "NotAcceptable";
	case 409:
		return "Conflict";
	case 410:
		return "Gone";
	case 413:
		return "RequestEntityTooLarge";
	case 415:
		return "UnsupportedMediaType";
	case 422:
		return "Invalid";
	case 429:
		return "TooManyRequests";
	case 500:
		return "InternalError";
	case 503:
		return "ServiceUnavailable";
	case 504:
		return "Timeout";
	default:
		return "Unknown";
	}
}

int kube_errno(long http, const char *reason)
{
	if (http >= 200 && http < 300)
		return 0;
	switch (http) {
	case 400:
	case 422:
		return -EINVAL;
	case 401:
	case 403:
		return -EACCES;
	case 404:
		return -ENOENT;
	case 405:
	case 406:
	case 415:
	case 501:
		return -EOPNOTSUPP;
	case 409:
		return reason && strcmp(reason, "AlreadyExists") == 0 ? -EEXIST : -KUBE_ECONFLICT;
	case 410:
		return -KUBE_EGONE;
	case 413:
		return -EMSGSIZE;
	case 429:
		return -EAGAIN;
	}
	if (http >= 500 && http < 600)
		return -EAGAIN;
	return -EPROTO;
}

int kube_status_from_json(long http, const cJSON *status, struct kube_status *st)
{
	long long code = 0, retry = 0;
	const char *reason = json_str(status, "reason"), *msg = json_str(status, "message");

	json_get_int(status, "code", &code);
	json_get_int(status, "details.retryAfterSeconds", &retry);
	if (!http)
		http = code;
	if (!code)
		code = http;
	if (!reason || !*reason)
		reason = default_reason(code);
	st->http = http;
	st->code = (int)code;
	str_copy(st->reason, sizeof(st->reason), reason);
	str_copy(st->message, sizeof(st->message), msg ? msg : "");
	if (retry > 0 && retry < 86400 && !st->retry_after_ns)
		st->retry_after_ns = retry * NSEC_PER_SEC;
	return kube_errno(code ? code : http, reason);
}

int kube_status_parse(long http, const char *body, size_t len, struct kube_status *st)
{
	cJSON *v = NULL;
	int r;

	if (http >= 200 && http < 300) {
		st->http = http;
		st->code = (int)http;
		return 0;
	}
	if (len && json_parse(body, len, &v, NULL) == 0 && cJSON_IsObject(v)) {
		r = kube_status_from_json(http, v, st);
		cJSON_Delete(v);
		return r;
	}
	cJSON_Delete(v);
	/* not a Status: keep the start of the text, printable characters only */
	size_t n = len < sizeof(st->message) - 1 ? len : sizeof(st->message) - 1;
	for (size_t i = 0; i < n; i++)
		st->message[i] = body[i] >= 0x20 && body[i] < 0x7f ? body[i] : ' ';
	st->message[n] = 0;
	str_strip(st->message);
	st->http = http;
	st->code = (int)http;
	str_copy(st->reason, sizeof(st->reason), default_reason(http));
	return kube_errno(http, st->reason);
}

static int64_t retry_after(const struct http_response *resp)
{
	const char *v = http_response_header(resp, "retry-after");
	long long s;
	if (v && str_to_ll(v, 0, 86400, &s) == 0)
		return s * NSEC_PER_SEC;
	return 0;
}

static void record(const struct kube_client *c, const char *method, long status, int64_t t0)
{
	char code[16];
	if (status)
		snprintf(code, sizeof(code), "%ld", status);
	else
		str_copy(code, sizeof(code), "<error>");
	metric_inc(m_requests, code, method, c->host);
	metric_observe(m_duration, (double)(now_mono_ns() - t0) / 1e9, method, c->host);
}

/* One HTTP exchange with the client's headers; retries once after a 401 when a re-read token
 * file gave a new token. */
static int exchange(struct kube_client *c, const struct kube_call *k, const char *url,
		    struct http_response *resp)
{
	struct http_header hdrs[3];
	size_t n = 0;
	int r;

	hdrs[n++] = (struct http_header){"Accept", "application/json"};
	if (k->body)
		hdrs[n++] =
		    (struct http_header){"Content-Type", k->ctype ? k->ctype : "application/json"};
	if (c->basic_auth)
		hdrs[n++] = (struct http_header){"Authorization", c->basic_auth};
	struct http_request req = {
	    .method = k->method,
	    .url = url,
	    .headers = hdrs,
	    .n_headers = n,
	    .body = k->body,
	    .body_len = k->body ? (k->body_len ? k->body_len : strlen(k->body)) : 0,
	    .timeout_ns = k->timeout_ns,
	};
	for (int attempt = 0;; attempt++) {
		int64_t t0 = now_mono_ns();
		http_response_release(resp);
		http_response_init(resp);
		r = http_client_do(c->http, &req, resp);
		record(c, k->method, r < 0 ? 0 : resp->status, t0);
		log_v(6, "HTTP", KV_S("verb", k->method), KV_S("url", url),
		      KV_I("status", resp->status),
		      KV_I("milliseconds", (now_mono_ns() - t0) / NSEC_PER_MSEC));
		if (r < 0 || resp->status != 401 || attempt > 0 || !token_refresh(c, true))
			return r;
	}
}

int kube_call_do(struct kube_client *c, const struct kube_call *k, cJSON **ret,
		 struct kube_status *st)
{
	_cleanup_buf_ struct buf url = BUF_INIT(0);
	struct kube_status local;
	struct http_response resp;
	bool idempotent = strcmp(k->method, "GET") == 0;
	int r;

	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	if ((r = http_url_join(c->server, k->path, &url)) < 0)
		return r;
	http_response_init(&resp);
	for (int attempt = 0;; attempt++) {
		rate_wait(c);
		token_refresh(c, false);
		memset(st, 0, sizeof(*st));
		if ((r = exchange(c, k, url.data, &resp)) < 0) {
			str_copy(st->message, sizeof(st->message), resp.error);
			break;
		}
		st->retry_after_ns = retry_after(&resp);
		r = kube_status_parse(resp.status, resp.body.data, resp.body.len, st);
		if (r == 0) {
			if (ret && (r = json_parse(resp.body.data, resp.body.len, ret, NULL)) < 0)
				str_copy(st->message, sizeof(st->message), "reply is not JSON");
			break;
		}
		bool retryable = resp.status == 429 || resp.status >= 500;
		if (!idempotent || !retryable || !st->retry_after_ns || attempt >= KUBE_MAX_RETRIES)
			break;
		int64_t wait =
		    st->retry_after_ns < MAX_RETRY_WAIT_NS ? st->retry_after_ns : MAX_RETRY_WAIT_NS;
		log_v(4, "retrying after the server asked to", KV_S("url", url.data),
		      KV_I("status", resp.status), KV_I("wait_ms", wait / NSEC_PER_MSEC));
		if (stop_wait(wait)) {
			r = -ECANCELED;
			break;
		}
	}
	http_response_release(&resp);
	return r;
}

int kube_stream(struct kube_client *c, const char *path_and_query, int64_t timeout_ns,
		const struct http_stream_opts *so, struct http_response *resp)
{
	_cleanup_buf_ struct buf url = BUF_INIT(0);
	struct http_header hdrs[2] = {{"Accept", "application/json"}};
	size_t n = 1;
	int r;

	if ((r = http_url_join(c->server, path_and_query, &url)) < 0)
		return r;
	if (c->basic_auth)
		hdrs[n++] = (struct http_header){"Authorization", c->basic_auth};
	struct http_request req = {
	    .url = url.data,
	    .headers = hdrs,
	    .n_headers = n,
	    .timeout_ns = timeout_ns,
	};
	for (int attempt = 0;; attempt++) {
		int64_t t0 = now_mono_ns();
		rate_wait(c);
		token_refresh(c, false);
		http_response_release(resp);
		http_response_init(resp);
		r = http_client_stream(c->http, &req, so, resp);
		record(c, "GET", r < 0 && !resp->status ? 0 : resp->status, t0);
		log_v(6, "HTTP", KV_S("verb", "WATCH"), KV_S("url", url.data),
		      KV_I("status", resp->status), KV_E(r));
		if (resp->status != 401 || attempt > 0 || !token_refresh(c, true))
			return r;
	}
}
