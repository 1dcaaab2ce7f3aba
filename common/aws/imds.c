/* The instance metadata client (see imds.h). */
#include "common/aws/imds.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/creds.h" /* aws_profile_get */
#include "common/aws/ids.h"   /* aws_value_escape */
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/secret.h"
#include "common/base/timeutil.h"
#include "common/http/client.h"

#define IMDS_DEFAULT_ENDPOINT "http://169.254.169.254"
#define IMDS_IPV6_ENDPOINT "http://[fd00:ec2::254]"
#define IMDS_MAX_REPLY ((size_t)1 << 20)
#define IMDS_TOKEN_MARGIN_NS (60 * NSEC_PER_SEC)
#define IMDS_V1_RETRY_NS (600 * NSEC_PER_SEC)

struct aws_imds {
	char endpoint[256];
	int64_t timeout_ns;
	int attempts;
	int token_ttl_s;
	bool disabled;
	bool no_v1_fallback;
	struct http_client *http;

	pthread_mutex_t lock;
	char token[256];
	int64_t token_expires; /* monotonic */
	int64_t v1_until;      /* monotonic: go without a token until then */
	unsigned token_puts;
	unsigned gets;
};

/* The option, else the environment variable, else the shared config's key (into *cfg). */
static const char *setting(const char *opt, const char *env, const char *key, char **cfg)
{
	const char *v = opt && *opt ? opt : getenv(env);

	if (v && *v)
		return v;
	return aws_profile_get(NULL, key, cfg) == 0 && **cfg ? *cfg : NULL;
}

/* The endpoint as the SDKs choose it (see imds.h). */
static int choose_endpoint(const struct aws_imds_opts *o, char *out, size_t n)
{
	_cleanup_free_ char *cfg_ep = NULL, *cfg_mode = NULL;
	const char *ep = setting(o->endpoint, "AWS_EC2_METADATA_SERVICE_ENDPOINT",
				 "ec2_metadata_service_endpoint", &cfg_ep);
	const char *mode = setting(o->endpoint_mode, "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
				   "ec2_metadata_service_endpoint_mode", &cfg_mode);

	if (!ep) {
		if (!mode || strcasecmp(mode, "IPv4") == 0) {
			ep = IMDS_DEFAULT_ENDPOINT;
		} else if (strcasecmp(mode, "IPv6") == 0) {
			ep = IMDS_IPV6_ENDPOINT;
		} else {
			char esc[64];
			log_error("the instance metadata endpoint mode "
				  "(AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE or "
				  "ec2_metadata_service_endpoint_mode) must be IPv4 or IPv6",
				  KV_S("mode", aws_value_escape(mode, esc, sizeof(esc))));
			return -EINVAL;
		}
	}
	if (!str_has_prefix(ep, "http://") && !str_has_prefix(ep, "https://"))
		return -EINVAL;
	return str_copy(out, n, ep);
}

int aws_imds_new(const struct aws_imds_opts *o, struct aws_imds **ret)
{
	struct aws_imds_opts d = {0};
	struct aws_imds *m;
	const char *dis = getenv("AWS_EC2_METADATA_DISABLED");
	struct http_client_opts ho = {0};
	size_t l;
	int r;

	if (!o)
		o = &d;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	if ((r = choose_endpoint(o, m->endpoint, sizeof(m->endpoint))) < 0) {
		free(m);
		return r;
	}
	l = strlen(m->endpoint);
	while (l > 0 && m->endpoint[l - 1] == '/')
		m->endpoint[--l] = 0;
	m->timeout_ns = o->timeout_ns > 0 ? o->timeout_ns : NSEC_PER_SEC;
	m->attempts = o->attempts > 0 ? o->attempts : 3;
	m->token_ttl_s = o->token_ttl_s > 0 ? o->token_ttl_s : 21600;
	m->disabled = o->disabled || (dis && strcasecmp(dis, "true") == 0);
	m->no_v1_fallback = o->no_v1_fallback;
	ho.connect_timeout_ns = m->timeout_ns;
	ho.timeout_ns = m->timeout_ns;
	ho.max_response = IMDS_MAX_REPLY;
	ho.user_agent = "aws-k8s-imds";
	if ((r = http_client_new(&ho, &m->http)) < 0) {
		free(m);
		return r;
	}
	pthread_mutex_init(&m->lock, NULL);
	*ret = m;
	return 0;
}

void aws_imds_free(struct aws_imds *m)
{
	if (!m)
		return;
	http_client_free(m->http);
	pthread_mutex_destroy(&m->lock);
	secret_wipe(m->token, sizeof(m->token));
	free(m);
}

bool aws_imds_disabled(const struct aws_imds *m)
{
	return !m || m->disabled;
}

const char *aws_imds_endpoint(const struct aws_imds *m)
{
	return m ? m->endpoint : "";
}

void aws_imds_counters(struct aws_imds *m, unsigned *ret_token_puts, unsigned *ret_gets)
{
	pthread_mutex_lock(&m->lock);
	if (ret_token_puts)
		*ret_token_puts = m->token_puts;
	if (ret_gets)
		*ret_gets = m->gets;
	pthread_mutex_unlock(&m->lock);
}

static bool transient(int r, long status)
{
	if (r < 0)
		return r != -ENOMEM && r != -EMSGSIZE && r != -ECANCELED;
	return status >= 500 || status == 429;
}

/* The wait before a retry; true when a stop (the process's token) ended it. */
static bool backoff_wait(int attempt)
{
	int64_t cap = 100 * NSEC_PER_MSEC << (attempt < 5 ? attempt : 5);
	return cancel_wait(cancel_root(), (int64_t)random_below((uint64_t)cap) + 10 * NSEC_PER_MSEC);
}

/* Gets a fresh token into m->token (lock held by the caller). 0, or 1 when the server does not
 * do IMDSv2 (go without a token), or a negative errno. */
static int token_fetch(struct aws_imds *m)
{
	char url[300], ttl[16];
	struct http_header h = {"X-aws-ec2-metadata-token-ttl-seconds", ttl};
	struct http_request rq = {
	    .method = "PUT", .url = url, .headers = &h, .n_headers = 1, .cancel = cancel_root()};
	struct http_response resp;
	int r = 0;

	str_printf(url, sizeof(url), "%s/latest/api/token", m->endpoint);
	str_printf(ttl, sizeof(ttl), "%d", m->token_ttl_s);
	for (int a = 0; a < m->attempts; a++) {
		int64_t start = now_mono_ns();
		if (a > 0 && backoff_wait(a)) {
			r = -ECANCELED;
			break;
		}
		http_response_init(&resp);
		m->token_puts++;
		r = http_client_do(m->http, &rq, &resp);
		if (r == 0 && resp.status == 200 && resp.body.len > 0 &&
		    resp.body.len < sizeof(m->token)) {
			str_copy(m->token, sizeof(m->token), resp.body.data);
			str_strip(m->token);
			secret_wipe(resp.body.data, resp.body.len);
			m->token_expires = start + (int64_t)m->token_ttl_s * NSEC_PER_SEC;
			http_response_release(&resp);
			return 0;
		}
		if (r == 0 && (resp.status == 403 || resp.status == 404 || resp.status == 405)) {
			log_v(4, "instance metadata service refused a token, going without",
			      KV_I("status", resp.status));
			http_response_release(&resp);
			if (m->no_v1_fallback)
				return -EACCES;
			m->v1_until = now_mono_ns() + IMDS_V1_RETRY_NS;
			return 1;
		}
		if (r == 0 && !transient(0, resp.status)) {
			log_v(4, "instance metadata token request failed",
			      KV_I("status", resp.status));
			http_response_release(&resp);
			return resp.status == 401 ? -EACCES : -EREMOTEIO;
		}
		log_v(5, "instance metadata token request failed, retrying", KV_I("attempt", a + 1),
		      KV_I("status", r == 0 ? resp.status : 0), KV_E(r));
		http_response_release(&resp);
		if (r == 0)
			r = -EREMOTEIO;
	}
	return r;
}

/* Copies the token to use into tok ("" for none). */
static int token_get(struct aws_imds *m, bool force, char *tok, size_t n)
{
	int64_t now = now_mono_ns();
	int r = 0;

	pthread_mutex_lock(&m->lock);
	if (!force && m->v1_until > now) {
		tok[0] = 0;
	} else if (!force && m->token[0] && m->token_expires - IMDS_TOKEN_MARGIN_NS > now) {
		str_copy(tok, n, m->token);
	} else {
		secret_wipe(m->token, sizeof(m->token));
		r = token_fetch(m);
		if (r == 0)
			str_copy(tok, n, m->token);
		else if (r == 1)
			tok[0] = 0;
	}
	pthread_mutex_unlock(&m->lock);
	return r < 0 ? r : 0;
}

int aws_imds_get_buf(struct aws_imds *m, const char *path, struct buf *out)
{
	char url[1024], tok[256];
	struct http_header h = {"X-aws-ec2-metadata-token", tok};
	struct http_request rq = {
	    .method = "GET", .url = url, .headers = &h, .cancel = cancel_root()};
	struct http_response resp;
	bool retried_401 = false;
	int r = 0;

	if (!m || !path || !out)
		return -EINVAL;
	if (m->disabled)
		return -ENODEV;
	while (*path == '/')
		path++;
	if (str_has_prefix(path, "latest/"))
		path += 7;
	if ((r = str_printf(url, sizeof(url), "%s/latest/%s", m->endpoint, path)) < 0)
		return r;
	for (int a = 0; a < m->attempts; a++) {
		if (a > 0 && backoff_wait(a)) {
			r = -ECANCELED;
			break;
		}
		/* the token request has its own attempts: its failure ends the read */
		if ((r = token_get(m, false, tok, sizeof(tok))) < 0)
			break;
	again:
		rq.n_headers = tok[0] ? 1 : 0;
		http_response_init(&resp);
		pthread_mutex_lock(&m->lock);
		m->gets++;
		pthread_mutex_unlock(&m->lock);
		r = http_client_do(m->http, &rq, &resp);
		if (r == 0 && resp.status == 200) {
			r = buf_append(out, resp.body.data ? resp.body.data : "", resp.body.len);
			http_response_release(&resp);
			secret_wipe(tok, sizeof(tok));
			return r;
		}
		if (r == 0 && resp.status == 401 && !retried_401) {
			/* the token expired or the server restarted: a new one, once */
			http_response_release(&resp);
			retried_401 = true;
			if ((r = token_get(m, true, tok, sizeof(tok))) < 0)
				break;
			goto again;
		}
		if (r == 0 && resp.status == 404) {
			http_response_release(&resp);
			r = -ENOENT;
			break;
		}
		if (r == 0 && !transient(0, resp.status)) {
			long st = resp.status;
			http_response_release(&resp);
			r = st == 401 || st == 403 ? -EACCES : -EREMOTEIO;
			break;
		}
		if (r == 0) {
			log_v(5, "instance metadata request failed, retrying", KV_S("path", path),
			      KV_I("status", resp.status));
			r = -EREMOTEIO;
		}
		http_response_release(&resp);
		if (!transient(r, 0) && r != -EREMOTEIO)
			break;
	}
	secret_wipe(tok, sizeof(tok));
	log_v(5, "instance metadata request failed", KV_S("path", path), KV_E(r));
	return r;
}

int aws_imds_get(struct aws_imds *m, const char *path, char **ret)
{
	struct buf b = BUF_INIT(IMDS_MAX_REPLY);
	int r = aws_imds_get_buf(m, path, &b);

	if (r < 0) {
		buf_release(&b);
		return r;
	}
	if ((r = buf_puts(&b, "")) < 0) {
		buf_release(&b);
		return r;
	}
	str_strip(b.data);
	*ret = buf_steal(&b);
	return 0;
}

int aws_imds_instance_id(struct aws_imds *m, char **ret)
{
	return aws_imds_get(m, "meta-data/instance-id", ret);
}

int aws_imds_instance_type(struct aws_imds *m, char **ret)
{
	return aws_imds_get(m, "meta-data/instance-type", ret);
}

int aws_imds_zone(struct aws_imds *m, char **ret)
{
	return aws_imds_get(m, "meta-data/placement/availability-zone", ret);
}

int aws_imds_zone_id(struct aws_imds *m, char **ret)
{
	return aws_imds_get(m, "meta-data/placement/availability-zone-id", ret);
}

int aws_imds_local_hostname(struct aws_imds *m, char **ret)
{
	return aws_imds_get(m, "meta-data/local-hostname", ret);
}

int aws_imds_local_ipv4(struct aws_imds *m, char **ret)
{
	return aws_imds_get(m, "meta-data/local-ipv4", ret);
}

int aws_imds_region(struct aws_imds *m, char **ret)
{
	char *z = NULL;
	size_t l;
	int r = aws_imds_get(m, "meta-data/placement/region", ret);

	if (r != -ENOENT)
		return r;
	/* older metadata versions: us-east-1a -> us-east-1 (local zones: us-west-2-lax-1a) */
	if ((r = aws_imds_zone(m, &z)) < 0)
		return r;
	l = strlen(z);
	if (l < 2) {
		free(z);
		return -EBADMSG;
	}
	for (size_t i = 0, dashes = 0; i < l; i++) {
		/* local zones: us-west-2-lax-1a -> us-west-2 */
		if (z[i] == '-' && ++dashes == 3) {
			z[i] = 0;
			break;
		}
	}
	l = strlen(z);
	if (l > 0 && z[l - 1] >= 'a' && z[l - 1] <= 'z')
		z[l - 1] = 0;
	*ret = z;
	return 0;
}

int aws_imds_macs(struct aws_imds *m, char ***ret)
{
	_cleanup_free_ char *list = NULL;
	char **v = NULL;
	int r = aws_imds_get(m, "meta-data/network/interfaces/macs/", &list);

	if (r < 0)
		return r;
	for (char *p = list; p && *p;) {
		char *e = strchr(p, '\n');
		size_t l;
		if (e)
			*e = 0;
		l = strlen(p);
		if (l > 0 && p[l - 1] == '/')
			p[l - 1] = 0;
		str_strip(p);
		if (*p && (r = strv_push(&v, p)) < 0) {
			strv_free(v);
			return r;
		}
		p = e ? e + 1 : NULL;
	}
	if (!v && !(v = calloc(1, sizeof(*v)))) /* an empty vector, not NULL */
		return -ENOMEM;
	*ret = v;
	return 0;
}

int aws_imds_interface(struct aws_imds *m, const char *mac, const char *field, char **ret)
{
	char path[256];
	int r;

	if (!mac || !*mac || strchr(mac, '/') || !field || !*field)
		return -EINVAL;
	if ((r = str_printf(path, sizeof(path), "meta-data/network/interfaces/macs/%s/%s", mac,
			    field)) < 0)
		return r;
	return aws_imds_get(m, path, ret);
}

int aws_imds_identity_parse(const char *json, size_t len, struct aws_imds_identity *ret)
{
	static const struct {
		const char *key;
		size_t off, size;
		bool required;
	} fields[] = {
#define F(k, f, req)                                                                               \
	{k, offsetof(struct aws_imds_identity, f), sizeof(((struct aws_imds_identity *)0)->f), req}
	    F("accountId", account_id, true),
	    F("instanceId", instance_id, true),
	    F("instanceType", instance_type, false),
	    F("imageId", image_id, false),
	    F("region", region, true),
	    F("availabilityZone", availability_zone, true),
	    F("privateIp", private_ip, false),
	    F("architecture", architecture, false),
	    F("pendingTime", pending_time, false),
#undef F
	};
	struct aws_imds_identity id = {0};
	cJSON *root = NULL;
	int r;

	if ((r = json_parse(json, len, &root, NULL)) < 0)
		return r;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return -EBADMSG;
	}
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		const char *v = json_str_key(root, fields[i].key);
		if (!v || !*v) {
			if (fields[i].required) {
				cJSON_Delete(root);
				return -EBADMSG;
			}
			continue;
		}
		if (str_copy((char *)&id + fields[i].off, fields[i].size, v) < 0) {
			cJSON_Delete(root);
			return -EBADMSG;
		}
	}
	cJSON_Delete(root);
	*ret = id;
	return 0;
}

int aws_imds_identity(struct aws_imds *m, struct aws_imds_identity *ret)
{
	struct buf b = BUF_INIT(IMDS_MAX_REPLY);
	int r = aws_imds_get_buf(m, "dynamic/instance-identity/document", &b);

	if (r >= 0)
		r = aws_imds_identity_parse(b.data ? b.data : "", b.len, ret);
	buf_release(&b);
	return r;
}
