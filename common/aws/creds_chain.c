/* The credential provider chain (see creds.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/creds.h"
#include "common/aws/creds_internal.h"
#include "common/aws/imds.h"
#include "common/aws/xml.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/secret.h"
#include "common/base/timeutil.h"
#include "common/http/client.h"

#define PROFILE_MAX_DEPTH 4
#define REFRESH_RETRY_NS (10 * NSEC_PER_SEC)

static char *xstrdup(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

int aws_creds_new(const struct aws_creds_io *io, const struct aws_creds_opts *o,
		  struct aws_creds **ret)
{
	struct aws_creds_opts d = {0};
	struct aws_creds *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	if (!o)
		o = &d;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	if (io)
		p->io = *io;
	if (o->access_key_id && *o->access_key_id && o->secret_access_key &&
	    *o->secret_access_key) {
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
	secret_freep(&p->ak);
	secret_freep(&p->sk);
	secret_freep(&p->token);
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
static int profile_role(struct aws_creds *p, const char *profile, const char *role_arn, int depth,
			struct aws_credentials *ret)
{
	_cleanup_free_ char *src = NULL, *csrc = NULL, *wif = NULL, *sess = NULL, *ext = NULL;
	struct aws_credentials base = {0};
	int64_t dur;
	int r;

	profile_get(profile, "role_session_name", &sess);
	profile_get(profile, "external_id", &ext);
	if ((r = duration_of(profile, &dur)) < 0)
		return r;
	if (profile_get(profile, "web_identity_token_file", &wif) == 0)
		return aws_creds_assume_role_web_identity(p, role_arn, wif, sess, ret);
	if (profile_get(profile, "source_profile", &src) == 0) {
		if (strcmp(src, profile) == 0) {
			/* a profile that is its own source: its static keys */
			_cleanup_free_ char *ak = NULL, *sk = NULL, *tok = NULL;
			if (profile_get(profile, "aws_access_key_id", &ak) < 0 ||
			    profile_get(profile, "aws_secret_access_key", &sk) < 0)
				return -ENOKEY;
			profile_get(profile, "aws_session_token", &tok);
			r = aws_credentials_set(&base, ak, sk, tok, 0);
			secret_wipe_str(sk);
		} else {
			r = profile_creds(p, src, depth + 1, &base);
		}
	} else if (profile_get(profile, "credential_source", &csrc) == 0) {
		if (strcasecmp(csrc, "Environment") == 0) {
			r = aws_creds_env("AWS_ACCESS_KEY_ID") &&
				    aws_creds_env("AWS_SECRET_ACCESS_KEY")
				? aws_credentials_set(&base, aws_creds_env("AWS_ACCESS_KEY_ID"),
						      aws_creds_env("AWS_SECRET_ACCESS_KEY"),
						      aws_creds_env("AWS_SESSION_TOKEN"), 0)
				: -ENOKEY;
		} else if (strcasecmp(csrc, "Ec2InstanceMetadata") == 0) {
			r = aws_creds_imds_fetch(p, &base);
		} else if (strcasecmp(csrc, "EcsContainer") == 0) {
			const char *full = aws_creds_env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
			const char *rel = aws_creds_env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
			char url[1024];
			if (rel)
				str_printf(url, sizeof(url), "%s%s", CONTAINER_HOST, rel);
			else if (full)
				str_copy(url, sizeof(url), full);
			else
				return -ENOKEY;
			free(p->container_url);
			p->container_url = strdup(url);
			r = p->container_url ? aws_creds_container_fetch(p, &base) : -ENOMEM;
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
	r = aws_creds_assume_role(p, &base, role_arn, sess, ext, NULL, dur, ret);
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
	secret_wipe_str(sk);
	if (tok)
		secret_wipe_str(tok);
	return r;
}

/* True when the profile exists in either shared file. */
static bool profile_exists(const char *profile)
{
	const char *vars[] = {"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"};
	const char *names[] = {"credentials", "config"};
	const char *home = getenv("HOME");

	for (int i = 0; i < 2; i++) {
		char path[4096];
		struct aws_ini *ini = NULL;
		bool found;
		const char *v = aws_creds_env(vars[i]);
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
	bool explicit_profile = (p->profile && *p->profile) || aws_creds_env("AWS_PROFILE");
	const char *full, *rel;

	if (p->resolved)
		return 0;
	if (aws_creds_env("AWS_ACCESS_KEY_ID") && aws_creds_env("AWS_SECRET_ACCESS_KEY") &&
	    !explicit_profile) {
		p->source = AWS_CREDS_ENV;
		p->ak = xstrdup(aws_creds_env("AWS_ACCESS_KEY_ID"));
		p->sk = xstrdup(aws_creds_env("AWS_SECRET_ACCESS_KEY"));
		p->token = xstrdup(aws_creds_env("AWS_SESSION_TOKEN"));
		if (!p->ak || !p->sk)
			return -ENOMEM;
		goto found;
	}
	if (aws_creds_env("AWS_ROLE_ARN") && aws_creds_env("AWS_WEB_IDENTITY_TOKEN_FILE") &&
	    !explicit_profile) {
		p->source = AWS_CREDS_WEB_IDENTITY;
		p->role_arn = xstrdup(aws_creds_env("AWS_ROLE_ARN"));
		p->token_file = xstrdup(aws_creds_env("AWS_WEB_IDENTITY_TOKEN_FILE"));
		p->session_name = xstrdup(aws_creds_env("AWS_ROLE_SESSION_NAME"));
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
	full = aws_creds_env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	rel = aws_creds_env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	if (rel || full) {
		char url[1024];
		if (rel)
			str_printf(url, sizeof(url), "%s%s", CONTAINER_HOST,
				   rel[0] == '/' ? rel : "/");
		else if (!aws_creds_container_host_allowed(full)) {
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
	if (p->io.imds && !aws_imds_disabled(p->io.imds)) {
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
		return aws_creds_assume_role_web_identity(p, p->role_arn, p->token_file,
							  p->session_name, ret);
	case AWS_CREDS_PROFILE:
	case AWS_CREDS_PROFILE_ROLE:
		return profile_creds(p, p->profile, 0, ret);
	case AWS_CREDS_CONTAINER:
		return aws_creds_container_fetch(p, ret);
	case AWS_CREDS_IMDS:
		return aws_creds_imds_fetch(p, ret);
	case AWS_CREDS_CUSTOM:
		return p->custom(p->custom_ud, ret);
	case AWS_CREDS_NONE:
		break;
	}
	return -ENOKEY;
}

static int fetch(struct aws_creds *p, struct aws_credentials *ret)
{
	struct aws_credentials base = {0};
	int r = fetch_source(p, &base);

	if (r < 0 || !p->top_role_arn) {
		if (r >= 0)
			*ret = base;
		return r;
	}
	r = aws_creds_assume_role(p, &base, p->top_role_arn, p->top_session, p->top_external_id,
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
	struct aws_credentials fresh = {0};
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
		      KV_I("expires_in_s",
			   fresh.expiration_ns ? (fresh.expiration_ns - now) / NSEC_PER_SEC : -1));
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
