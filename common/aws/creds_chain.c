/* The credential provider chain (see creds.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/client.h"
#include "common/aws/creds.h"
#include "common/aws/imds.h"
#include "common/aws/xml.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/http/client.h"

#define TOKEN_FILE_MAX (64 * 1024)
#define PROFILE_MAX_DEPTH 4
#define CONTAINER_HOST "http://169.254.170.2"
#define REFRESH_RETRY_NS (10 * NSEC_PER_SEC)

struct aws_creds {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a refresh ended */
	bool refreshing;
	struct aws_client *client;
	enum aws_creds_source source;
	bool resolved;
	struct aws_credentials cur;
	bool have;
	int64_t refresh_at; /* wall clock; 0: never */
	int64_t fetched_at; /* wall clock */
	unsigned fetches;

	/* what the chain found (strings owned) */
	char *ak, *sk, *token;     /* static keys */
	char *role_arn;            /* web identity / profile role */
	char *token_file;          /* web identity */
	char *session_name;
	char *profile;             /* profile whose role_arn is used */
	char *container_url;
	struct http_client *http;  /* container credentials */

	/* the role assumed on top of the chain */
	char *top_role_arn, *top_session, *top_external_id, *top_source_arn;
	int64_t top_duration_ns;

	int (*custom)(void *ud, struct aws_credentials *ret);
	void *custom_ud;
};

static char *xstrdup(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

static void free_str(char **s)
{
	if (*s) {
		explicit_bzero(*s, strlen(*s));
		free(*s);
		*s = NULL;
	}
}

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

int aws_creds_new(struct aws_client *c, const struct aws_creds_opts *o, struct aws_creds **ret)
{
	struct aws_creds_opts d = { 0 };
	struct aws_creds *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	if (!o)
		o = &d;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->client = c;
	if (o->access_key_id && *o->access_key_id && o->secret_access_key && *o->secret_access_key) {
		p->source = AWS_CREDS_STATIC;
		p->resolved = true;
		p->ak = xstrdup(o->access_key_id);
		p->sk = xstrdup(o->secret_access_key);
		p->token = xstrdup(o->session_token);
		if (!p->ak || !p->sk) {
			aws_creds_free(p);
			return -ENOMEM;
		}
	}
	p->profile = xstrdup(o->profile);
	p->top_role_arn = xstrdup(o->role_arn);
	p->top_session = xstrdup(o->role_session_name);
	p->top_external_id = xstrdup(o->external_id);
	p->top_source_arn = xstrdup(o->source_arn);
	p->top_duration_ns = o->role_duration_ns;
	*ret = p;
	return 0;
}

int aws_creds_new_custom(int (*fetch)(void *ud, struct aws_credentials *ret), void *ud,
			 struct aws_creds **ret)
{
	struct aws_creds *p;

	if (!fetch)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->source = AWS_CREDS_CUSTOM;
	p->resolved = true;
	p->custom = fetch;
	p->custom_ud = ud;
	*ret = p;
	return 0;
}

void aws_creds_free(struct aws_creds *p)
{
	if (!p)
		return;
	aws_credentials_release(&p->cur);
	free_str(&p->ak);
	free_str(&p->sk);
	free_str(&p->token);
	free(p->role_arn);
	free(p->token_file);
	free(p->session_name);
	free(p->profile);
	free(p->container_url);
	free(p->top_role_arn);
	free(p->top_session);
	free(p->top_external_id);
	free(p->top_source_arn);
	http_client_free(p->http);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

enum aws_creds_source aws_creds_source(struct aws_creds *p)
{
	enum aws_creds_source s;

	pthread_mutex_lock(&p->lock);
	s = p->resolved ? p->source : AWS_CREDS_NONE;
	pthread_mutex_unlock(&p->lock);
	return s;
}

unsigned aws_creds_fetch_count(struct aws_creds *p)
{
	unsigned n;

	pthread_mutex_lock(&p->lock);
	n = p->fetches;
	pthread_mutex_unlock(&p->lock);
	return n;
}

void aws_creds_invalidate(struct aws_creds *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	/* the service said they expired: never use them again, fetch at the next get */
	if (p->have && p->source != AWS_CREDS_STATIC && p->source != AWS_CREDS_ENV &&
	    p->source != AWS_CREDS_PROFILE) {
		aws_credentials_release(&p->cur);
		p->have = false;
	}
	pthread_mutex_unlock(&p->lock);
}

/* --- STS ---------------------------------------------------------------------------------- */

static int sts_credentials(const xmlNode *result, struct aws_credentials *ret)
{
	const char *ak = aws_xml_text(result, "Credentials/AccessKeyId");
	const char *sk = aws_xml_text(result, "Credentials/SecretAccessKey");
	const char *tok = aws_xml_text(result, "Credentials/SessionToken");
	const char *exp = aws_xml_text(result, "Credentials/Expiration");
	int64_t e = 0;

	if (!ak || !sk || !*ak || !*sk || !exp || rfc3339_parse(exp, &e) < 0)
		return -EBADMSG;
	return aws_credentials_set(ret, ak, sk, tok, e);
}

static void default_session_name(char *buf, size_t n)
{
	str_printf(buf, n, "aws-k8s-%lld", (long long)(now_real_ns() / NSEC_PER_SEC));
}

static int sts_region(struct aws_creds *p, const char **ret)
{
	if (aws_client_region(p->client, ret) < 0)
		*ret = "us-east-1";
	return 0;
}

static int read_token_file(const char *path, char **ret)
{
	FILE *f = fopen(path, "re");
	struct buf b = BUF_INIT(TOKEN_FILE_MAX);
	char chunk[4096];
	size_t n;
	int r = 0;

	if (!f)
		return -errno;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if ((r = buf_append(&b, chunk, n)) < 0)
			break;
	fclose(f);
	explicit_bzero(chunk, sizeof(chunk));
	if (r == 0)
		r = buf_puts(&b, "");
	if (r < 0) {
		if (b.data)
			explicit_bzero(b.data, b.len);
		buf_release(&b);
		return r;
	}
	str_strip(b.data);
	if (!*b.data) {
		buf_release(&b);
		return -ENODATA;
	}
	*ret = buf_steal(&b);
	return 0;
}

static int assume_role_web_identity(struct aws_creds *p, const char *role_arn,
				    const char *token_file, const char *session,
				    struct aws_credentials *ret)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_request rq = { .service = AWS_SVC_STS, .action = "AssumeRoleWithWebIdentity",
				  .query = &q, .anonymous = true };
	struct aws_reply rep = { 0 };
	struct aws_error err;
	char sess[64], buf[700];
	char *token = NULL;
	int r;

	if ((r = read_token_file(token_file, &token)) < 0) {
		log_v(3, "cannot read the web identity token file", KV_S("path", token_file),
		      KV_E(r));
		return r;
	}
	if (!session || !*session) {
		default_session_name(sess, sizeof(sess));
		session = sess;
	}
	sts_region(p, &rq.region);
	r = aws_query_add(&q, "RoleArn", role_arn);
	if (r >= 0)
		r = aws_query_add(&q, "RoleSessionName", session);
	if (r >= 0)
		r = aws_query_add(&q, "WebIdentityToken", token);
	explicit_bzero(token, strlen(token));
	free(token);
	if (r >= 0)
		r = aws_do(p->client, &rq, &rep, &err);
	/* the token was in the request: wipe the copy in the parameters */
	for (size_t i = 0; i < q.n; i++)
		explicit_bzero(q.values[i], strlen(q.values[i]));
	aws_query_release(&q);
	if (r < 0) {
		log_v(2, "AssumeRoleWithWebIdentity failed", KV_S("role", role_arn),
		      KV_S("error", aws_error_str(&err, buf, sizeof(buf))));
		return r;
	}
	r = sts_credentials(rep.result, ret);
	aws_reply_release(&rep);
	return r;
}

static int assume_role(struct aws_creds *p, const struct aws_credentials *base,
		       const char *role_arn, const char *session, const char *external_id,
		       const char *source_arn, int64_t duration_ns, struct aws_credentials *ret)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct http_header hdrs[2];
	struct aws_request rq = { .service = AWS_SVC_STS, .action = "AssumeRole", .query = &q,
				  .creds = base, .headers = hdrs };
	struct aws_reply rep = { 0 };
	struct aws_error err;
	char sess[64], account[32] = "", buf[700];
	int r;

	if (!session || !*session) {
		default_session_name(sess, sizeof(sess));
		session = sess;
	}
	sts_region(p, &rq.region);
	if ((r = aws_query_add(&q, "RoleArn", role_arn)) < 0 ||
	    (r = aws_query_add(&q, "RoleSessionName", session)) < 0 ||
	    (external_id && *external_id &&
	     (r = aws_query_add(&q, "ExternalId", external_id)) < 0) ||
	    (duration_ns > 0 &&
	     (r = aws_query_add_int(&q, "DurationSeconds", duration_ns / NSEC_PER_SEC)) < 0)) {
		aws_query_release(&q);
		return r;
	}
	if (source_arn && *source_arn) {
		/* confused-deputy protection, as the upstream cloud provider sends it:
		 * arn:aws:eks:region:ACCOUNT:cluster/name -> the account is field 5 */
		const char *s = source_arn;
		for (int i = 0; i < 4 && s; i++)
			s = strchr(s, ':') ? strchr(s, ':') + 1 : NULL;
		if (s)
			str_printf(account, sizeof(account), "%.*s", (int)strcspn(s, ":"), s);
		hdrs[rq.n_headers++] = (struct http_header){ "x-amz-source-arn", source_arn };
		if (account[0])
			hdrs[rq.n_headers++] = (struct http_header){ "x-amz-source-account", account };
	}
	r = aws_do(p->client, &rq, &rep, &err);
	aws_query_release(&q);
	if (r < 0) {
		log_v(2, "AssumeRole failed", KV_S("role", role_arn),
		      KV_S("error", aws_error_str(&err, buf, sizeof(buf))));
		return r;
	}
	r = sts_credentials(rep.result, ret);
	aws_reply_release(&rep);
	return r;
}

/* --- HTTP sources ------------------------------------------------------------------------- */

/* {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"} (container and IMDS shapes). */
static int json_credentials(const char *body, size_t len, struct aws_credentials *ret)
{
	cJSON *root = NULL;
	const char *ak, *sk, *tok, *exp, *code;
	int64_t e = 0;
	int r;

	if ((r = json_parse(body, len, &root, NULL)) < 0)
		return r;
	code = json_str(root, "Code");
	ak = json_str(root, "AccessKeyId");
	sk = json_str(root, "SecretAccessKey");
	tok = json_str(root, "Token");
	exp = json_str(root, "Expiration");
	if ((code && strcmp(code, "Success") != 0) || !ak || !sk ||
	    (exp && rfc3339_parse(exp, &e) < 0)) {
		cJSON_Delete(root);
		return -EBADMSG;
	}
	r = aws_credentials_set(ret, ak, sk, tok, e);
	cJSON_Delete(root);
	return r;
}

static bool container_host_allowed(const char *url)
{
	static const char *const ok[] = { "127.", "localhost", "[::1]", "169.254.170.2",
					  "169.254.170.23", "[fd00:ec2::23]" };
	const char *h;

	if (str_has_prefix(url, "https://"))
		return true;
	if (!str_has_prefix(url, "http://"))
		return false;
	h = url + 7;
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		size_t l = strlen(ok[i]);
		if (strncmp(h, ok[i], l) == 0 &&
		    (ok[i][l - 1] == '.' || h[l] == 0 || h[l] == ':' || h[l] == '/'))
			return true;
	}
	return false;
}

static int container_fetch(struct aws_creds *p, struct aws_credentials *ret)
{
	struct http_header h = { "Authorization", NULL };
	struct http_request rq = { .method = "GET", .url = p->container_url, .headers = &h };
	struct http_response resp;
	const char *tf = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
	char *token = NULL;
	int r;

	if (!p->http) {
		struct http_client_opts ho = { .connect_timeout_ns = 2 * NSEC_PER_SEC,
					       .timeout_ns = 5 * NSEC_PER_SEC,
					       .max_response = 64 * 1024 };
		if ((r = http_client_new(&ho, &p->http)) < 0)
			return r;
	}
	if (tf) {
		if ((r = read_token_file(tf, &token)) < 0) {
			log_v(3, "cannot read the container authorization token file",
			      KV_S("path", tf), KV_E(r));
			return r;
		}
	} else if (env("AWS_CONTAINER_AUTHORIZATION_TOKEN")) {
		token = strdup(env("AWS_CONTAINER_AUTHORIZATION_TOKEN"));
		if (!token)
			return -ENOMEM;
	}
	if (token && strpbrk(token, "\r\n")) {
		free_str(&token);
		return -EINVAL;
	}
	h.value = token;
	rq.n_headers = token ? 1 : 0;
	for (int a = 0; a < 3; a++) {
		if (a > 0)
			sleep_ns((int64_t)random_below(200 * NSEC_PER_MSEC << a));
		http_response_init(&resp);
		r = http_client_do(p->http, &rq, &resp);
		if (r == 0 && resp.status == 200) {
			r = json_credentials(resp.body.data ? resp.body.data : "", resp.body.len, ret);
			explicit_bzero(resp.body.data, resp.body.len);
			http_response_release(&resp);
			break;
		}
		if (r == 0) {
			long st = resp.status;
			http_response_release(&resp);
			log_v(3, "container credentials request failed", KV_I("status", st));
			r = st == 401 || st == 403 ? -EACCES : -EREMOTEIO;
			if (st < 500 && st != 429)
				break;
			continue;
		}
		http_response_release(&resp);
		log_v(3, "container credentials request failed", KV_E(r));
	}
	free_str(&token);
	return r;
}

static int imds_fetch(struct aws_creds *p, struct aws_credentials *ret)
{
	struct aws_imds *m = aws_client_imds(p->client);
	_cleanup_free_ char *roles = NULL;
	char path[300];
	struct buf b = BUF_INIT(64 * 1024);
	int r;

	if ((r = aws_imds_get(m, "meta-data/iam/security-credentials/", &roles)) < 0)
		return r;
	roles[strcspn(roles, "\r\n")] = 0;
	str_strip(roles);
	if (!*roles || strchr(roles, '/'))
		return -ENOENT;
	if ((r = str_printf(path, sizeof(path), "meta-data/iam/security-credentials/%s", roles)) < 0)
		return r;
	if ((r = aws_imds_get_buf(m, path, &b)) >= 0) {
		r = json_credentials(b.data ? b.data : "", b.len, ret);
		if (b.data)
			explicit_bzero(b.data, b.len);
	}
	buf_release(&b);
	return r;
}

/* --- profiles ----------------------------------------------------------------------------- */

static int profile_get(const char *profile, const char *key, char **ret)
{
	return aws_profile_get(profile, key, ret);
}

static int duration_of(const char *profile, int64_t *ret)
{
	_cleanup_free_ char *v = NULL;
	long long s;

	*ret = 0;
	if (profile_get(profile, "duration_seconds", &v) < 0)
		return 0;
	if (str_to_ll(v, 900, 43200, &s) < 0)
		return -EINVAL;
	*ret = s * NSEC_PER_SEC;
	return 0;
}

static int profile_creds(struct aws_creds *p, const char *profile, int depth,
			 struct aws_credentials *ret);

/* Credentials of profile `profile` through its role_arn. */
static int profile_role(struct aws_creds *p, const char *profile, const char *role_arn,
			int depth, struct aws_credentials *ret)
{
	_cleanup_free_ char *src = NULL, *csrc = NULL, *wif = NULL, *sess = NULL, *ext = NULL;
	struct aws_credentials base = { 0 };
	int64_t dur;
	int r;

	profile_get(profile, "role_session_name", &sess);
	profile_get(profile, "external_id", &ext);
	if ((r = duration_of(profile, &dur)) < 0)
		return r;
	if (profile_get(profile, "web_identity_token_file", &wif) == 0)
		return assume_role_web_identity(p, role_arn, wif, sess, ret);
	if (profile_get(profile, "source_profile", &src) == 0) {
		if (strcmp(src, profile) == 0) {
			/* a profile that is its own source: its static keys */
			_cleanup_free_ char *ak = NULL, *sk = NULL, *tok = NULL;
			if (profile_get(profile, "aws_access_key_id", &ak) < 0 ||
			    profile_get(profile, "aws_secret_access_key", &sk) < 0)
				return -ENOKEY;
			profile_get(profile, "aws_session_token", &tok);
			r = aws_credentials_set(&base, ak, sk, tok, 0);
			explicit_bzero(sk, strlen(sk));
		} else {
			r = profile_creds(p, src, depth + 1, &base);
		}
	} else if (profile_get(profile, "credential_source", &csrc) == 0) {
		if (strcasecmp(csrc, "Environment") == 0) {
			r = env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")
				    ? aws_credentials_set(&base, env("AWS_ACCESS_KEY_ID"),
							  env("AWS_SECRET_ACCESS_KEY"),
							  env("AWS_SESSION_TOKEN"), 0)
				    : -ENOKEY;
		} else if (strcasecmp(csrc, "Ec2InstanceMetadata") == 0) {
			r = imds_fetch(p, &base);
		} else if (strcasecmp(csrc, "EcsContainer") == 0) {
			const char *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
			const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
			char url[1024];
			if (rel)
				str_printf(url, sizeof(url), "%s%s", CONTAINER_HOST, rel);
			else if (full)
				str_copy(url, sizeof(url), full);
			else
				return -ENOKEY;
			free(p->container_url);
			p->container_url = strdup(url);
			r = p->container_url ? container_fetch(p, &base) : -ENOMEM;
		} else {
			log_v(2, "unknown credential_source in the AWS config",
			      KV_S("profile", profile), KV_S("credential_source", csrc));
			return -EINVAL;
		}
	} else {
		log_v(2, "role_arn without source_profile or credential_source",
		      KV_S("profile", profile));
		return -EINVAL;
	}
	if (r < 0)
		return r;
	r = assume_role(p, &base, role_arn, sess, ext, NULL, dur, ret);
	aws_credentials_release(&base);
	return r;
}

static int profile_creds(struct aws_creds *p, const char *profile, int depth,
			 struct aws_credentials *ret)
{
	_cleanup_free_ char *role = NULL, *ak = NULL, *sk = NULL, *tok = NULL;
	int r;

	if (depth > PROFILE_MAX_DEPTH)
		return -ELOOP;
	if (profile_get(profile, "role_arn", &role) == 0)
		return profile_role(p, profile, role, depth, ret);
	if (profile_get(profile, "aws_access_key_id", &ak) < 0 ||
	    profile_get(profile, "aws_secret_access_key", &sk) < 0)
		return -ENOKEY;
	profile_get(profile, "aws_session_token", &tok);
	r = aws_credentials_set(ret, ak, sk, tok, 0);
	explicit_bzero(sk, strlen(sk));
	if (tok)
		explicit_bzero(tok, strlen(tok));
	return r;
}

/* True when the profile exists in either shared file. */
static bool profile_exists(const char *profile)
{
	const char *vars[] = { "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE" };
	const char *names[] = { "credentials", "config" };
	const char *home = getenv("HOME");

	for (int i = 0; i < 2; i++) {
		char path[4096];
		struct aws_ini *ini = NULL;
		bool found;
		const char *v = env(vars[i]);
		if (v)
			str_copy(path, sizeof(path), v);
		else if (home)
			str_printf(path, sizeof(path), "%s/.aws/%s", home, names[i]);
		else
			continue;
		if (aws_ini_load(path, i == 1, &ini) < 0)
			continue;
		found = aws_ini_has_section(ini, profile);
		aws_ini_free(ini);
		if (found)
			return true;
	}
	return false;
}

/* --- the chain ---------------------------------------------------------------------------- */

/* Picks the source (lock held). */
static int resolve(struct aws_creds *p)
{
	const char *name = aws_profile_name(p->profile);
	bool explicit_profile = (p->profile && *p->profile) || env("AWS_PROFILE");
	const char *full, *rel;

	if (p->resolved)
		return 0;
	if (env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY") && !explicit_profile) {
		p->source = AWS_CREDS_ENV;
		p->ak = xstrdup(env("AWS_ACCESS_KEY_ID"));
		p->sk = xstrdup(env("AWS_SECRET_ACCESS_KEY"));
		p->token = xstrdup(env("AWS_SESSION_TOKEN"));
		if (!p->ak || !p->sk)
			return -ENOMEM;
		goto found;
	}
	if (env("AWS_ROLE_ARN") && env("AWS_WEB_IDENTITY_TOKEN_FILE") && !explicit_profile) {
		p->source = AWS_CREDS_WEB_IDENTITY;
		p->role_arn = xstrdup(env("AWS_ROLE_ARN"));
		p->token_file = xstrdup(env("AWS_WEB_IDENTITY_TOKEN_FILE"));
		p->session_name = xstrdup(env("AWS_ROLE_SESSION_NAME"));
		if (!p->role_arn || !p->token_file)
			return -ENOMEM;
		goto found;
	}
	if (profile_exists(name)) {
		_cleanup_free_ char *role = NULL, *ak = NULL;
		if (profile_get(name, "role_arn", &role) == 0) {
			p->source = AWS_CREDS_PROFILE_ROLE;
			goto found_profile;
		}
		if (profile_get(name, "aws_access_key_id", &ak) == 0) {
			p->source = AWS_CREDS_PROFILE;
			goto found_profile;
		}
		if (explicit_profile) {
			log_v(2, "the AWS profile has no credentials", KV_S("profile", name));
			return -ENOKEY;
		}
	} else if (explicit_profile) {
		log_v(2, "the AWS profile does not exist", KV_S("profile", name));
		return -ENOKEY;
	}
	full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	if (rel || full) {
		char url[1024];
		if (rel)
			str_printf(url, sizeof(url), "%s%s", CONTAINER_HOST, rel[0] == '/' ? rel : "/");
		else if (!container_host_allowed(full)) {
			log_v(2, "AWS_CONTAINER_CREDENTIALS_FULL_URI must be https or a loopback / "
				 "container agent address");
			return -EINVAL;
		} else
			str_copy(url, sizeof(url), full);
		p->container_url = strdup(url);
		if (!p->container_url)
			return -ENOMEM;
		p->source = AWS_CREDS_CONTAINER;
		goto found;
	}
	if (!aws_imds_disabled(aws_client_imds(p->client))) {
		p->source = AWS_CREDS_IMDS;
		goto found;
	}
	return -ENOKEY;
found_profile:
	if (name != p->profile) { /* name may be p->profile itself */
		char *copy = strdup(name);
		if (!copy)
			return -ENOMEM;
		free(p->profile);
		p->profile = copy;
	}
found:
	p->resolved = true;
	log_v(2, "using AWS credentials", KV_S("source", aws_creds_source_name(p->source)));
	return 0;
}

static int fetch_source(struct aws_creds *p, struct aws_credentials *ret)
{
	switch (p->source) {
	case AWS_CREDS_STATIC:
	case AWS_CREDS_ENV:
		return aws_credentials_set(ret, p->ak, p->sk, p->token, 0);
	case AWS_CREDS_WEB_IDENTITY:
		return assume_role_web_identity(p, p->role_arn, p->token_file, p->session_name, ret);
	case AWS_CREDS_PROFILE:
	case AWS_CREDS_PROFILE_ROLE:
		return profile_creds(p, p->profile, 0, ret);
	case AWS_CREDS_CONTAINER:
		return container_fetch(p, ret);
	case AWS_CREDS_IMDS:
		return imds_fetch(p, ret);
	case AWS_CREDS_CUSTOM:
		return p->custom(p->custom_ud, ret);
	case AWS_CREDS_NONE:
		break;
	}
	return -ENOKEY;
}

static int fetch(struct aws_creds *p, struct aws_credentials *ret)
{
	struct aws_credentials base = { 0 };
	int r = fetch_source(p, &base);

	if (r < 0 || !p->top_role_arn) {
		if (r >= 0)
			*ret = base;
		return r;
	}
	r = assume_role(p, &base, p->top_role_arn, p->top_session, p->top_external_id,
			p->top_source_arn, p->top_duration_ns, ret);
	aws_credentials_release(&base);
	return r;
}

/* Still usable for a request: not within 10 s (or a tenth of their lifetime) of expiring. */
static bool usable(const struct aws_creds *p, int64_t now)
{
	int64_t margin = REFRESH_RETRY_NS;

	if (!p->have)
		return false;
	if (p->cur.expiration_ns == 0)
		return true;
	if ((p->cur.expiration_ns - p->fetched_at) / 10 < margin)
		margin = (p->cur.expiration_ns - p->fetched_at) / 10;
	return now < p->cur.expiration_ns - margin;
}

int aws_creds_get(struct aws_creds *p, struct aws_credentials *ret)
{
	struct aws_credentials fresh = { 0 };
	int64_t now;
	int r;

	if (!p || !ret)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		now = now_real_ns();
		if (p->have && (p->refresh_at == 0 || now < p->refresh_at)) {
			r = aws_credentials_copy(&p->cur, ret);
			pthread_mutex_unlock(&p->lock);
			return r;
		}
		if (!p->refreshing)
			break;
		/* another thread refreshes: use the current ones while they last, else wait */
		if (usable(p, now)) {
			r = aws_credentials_copy(&p->cur, ret);
			pthread_mutex_unlock(&p->lock);
			return r;
		}
		pthread_cond_wait(&p->cond, &p->lock);
	}
	if ((r = resolve(p)) < 0) {
		pthread_mutex_unlock(&p->lock);
		return r;
	}
	/* fetch without the lock (STS or the metadata service can take seconds); the source's
	 * settings do not change once resolved, and only this thread fetches */
	p->refreshing = true;
	pthread_mutex_unlock(&p->lock);
	r = fetch(p, &fresh);
	pthread_mutex_lock(&p->lock);
	p->refreshing = false;
	pthread_cond_broadcast(&p->cond);
	now = now_real_ns();
	if (r >= 0) {
		aws_credentials_release(&p->cur);
		p->cur = fresh;
		p->have = true;
		p->fetched_at = now;
		p->fetches++;
		p->refresh_at = aws_creds_refresh_at(now, fresh.expiration_ns);
		if (fresh.expiration_ns && p->refresh_at <= now)
			p->refresh_at = now + REFRESH_RETRY_NS; /* already stale: still use them */
		log_v(3, "fetched AWS credentials",
		      KV_S("source", aws_creds_source_name(p->source)),
		      KV_I("expires_in_s", fresh.expiration_ns
						   ? (fresh.expiration_ns - now) / NSEC_PER_SEC
						   : -1));
		r = aws_credentials_copy(&p->cur, ret);
	} else if (p->have && (p->cur.expiration_ns == 0 || now < p->cur.expiration_ns)) {
		/* keep the old ones while they last, and try again a little later */
		log_v(2, "refreshing AWS credentials failed, keeping the current ones",
		      KV_S("source", aws_creds_source_name(p->source)), KV_E(r));
		p->refresh_at = now + REFRESH_RETRY_NS;
		r = aws_credentials_copy(&p->cur, ret);
	} else if (p->have) {
		log_v(2, "AWS credentials expired and could not be renewed", KV_E(r));
		r = -EKEYEXPIRED;
	}
	pthread_mutex_unlock(&p->lock);
	return r;
}
