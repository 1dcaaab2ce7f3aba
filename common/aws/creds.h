/* AWS credentials and the provider chain, in the order the AWS SDKs use:
 *   1. explicit keys (flags), then AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN;
 *   2. web identity (IRSA): AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE (+ AWS_ROLE_SESSION_NAME)
 *      through STS AssumeRoleWithWebIdentity, the token file re-read at every refresh;
 *   3. the shared files (AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE): static keys,
 *      role_arn + source_profile (or credential_source) through STS AssumeRole, or
 *      role_arn + web_identity_token_file;
 *   4. container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI, with the
 *      Authorization header from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (re-read each time) or
 *      AWS_CONTAINER_AUTHORIZATION_TOKEN (EKS Pod Identity, ECS);
 *   5. the instance profile, from the instance metadata service.
 * The first source that is configured is used for the life of the provider (as the SDKs do);
 * a profile named explicitly (flag or AWS_PROFILE) must exist. Temporary credentials are
 * refreshed before they expire (5 minutes before, or at half of their lifetime for shorter
 * ones); if a refresh fails while the old ones are still valid, they are kept. Thread-safe:
 * one thread refreshes while the others wait. Secrets are never logged. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct aws_credentials {
	char *access_key_id;
	char *secret_access_key;
	char *session_token;   /* NULL when none */
	int64_t expiration_ns; /* wall clock; 0: does not expire */
};

/* Wipes the secrets and frees; accepts NULL and an already released struct. */
void aws_credentials_release(struct aws_credentials *c);
/* Deep copy into *ret (which must be empty or released). */
int aws_credentials_copy(const struct aws_credentials *src, struct aws_credentials *ret);
/* Fills *ret from parts (copies them); ak and sk must be non-empty. -EINVAL otherwise. */
int aws_credentials_set(struct aws_credentials *ret, const char *ak, const char *sk,
			const char *token, int64_t expiration_ns);

enum aws_creds_source {
	AWS_CREDS_NONE,
	AWS_CREDS_STATIC,	/* keys given by the caller (flags) */
	AWS_CREDS_ENV,		/* AWS_ACCESS_KEY_ID ... */
	AWS_CREDS_WEB_IDENTITY, /* AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE */
	AWS_CREDS_PROFILE,	/* static keys from the shared files */
	AWS_CREDS_PROFILE_ROLE, /* role_arn in the shared files */
	AWS_CREDS_CONTAINER,
	AWS_CREDS_IMDS,
	AWS_CREDS_CUSTOM, /* a fetch function given by the caller (tests) */
};
const char *aws_creds_source_name(enum aws_creds_source s);

struct aws_creds;
struct aws_error;
struct aws_imds;
struct aws_reply;
struct aws_request;

/* What the provider calls out through: STS (AssumeRole, AssumeRoleWithWebIdentity) and the
 * metadata service. The AWS client hands itself (client.c), so that the provider, which the
 * client calls to sign, never calls the client by name:
 *
 *   struct aws_creds_io io = { .call = my_aws_do, .region = my_region, .ud = c,
 *                              .imds = imds };
 *   aws_creds_new(&io, &opts, &p);
 */
struct aws_creds_io {
	/* one call (as aws_do): on success *ret is filled (the provider releases it) */
	int (*call)(void *ud, const struct aws_request *rq, struct aws_reply *ret,
		    struct aws_error *err);
	/* the region of STS calls: 0 and *ret, or < 0 when unknown (then us-east-1) */
	int (*region)(void *ud, const char **ret);
	void *ud;
	struct aws_imds *imds; /* the instance profile's credentials; NULL: none */
};

struct aws_creds_opts {
	const char *access_key_id; /* explicit keys (flags); used when both are set */
	const char *secret_access_key;
	const char *session_token;
	const char *profile; /* overrides AWS_PROFILE */
	/* A role to assume on top of whatever the chain gives (the ccm's [Global] RoleARN). */
	const char *role_arn;
	const char *role_session_name; /* default "aws-k8s-<unix time>" */
	const char *external_id;
	const char *source_arn;	  /* sent as the aws:SourceArn context key ("ProvidedContexts") */
	int64_t role_duration_ns; /* AssumeRole DurationSeconds; 0: STS default (1 h) */
};

/* The provider makes its STS and metadata calls through io (copied; what it points to must
 * outlive the provider). Nothing is fetched until the first aws_creds_get(). */
int aws_creds_new(const struct aws_creds_io *io, const struct aws_creds_opts *o,
		  struct aws_creds **ret);
/* A provider over a caller's fetch function (tests, special sources). */
int aws_creds_new_custom(int (*fetch)(void *ud, struct aws_credentials *ret), void *ud,
			 struct aws_creds **ret);
void aws_creds_free(struct aws_creds *p);

/* Current credentials, refreshed if needed, copied into *ret (release them after use).
 * -ENOKEY when no source is configured, -EKEYEXPIRED when they expired and cannot be renewed,
 * or the error of the source (-EACCES, -ETIMEDOUT, -EBADMSG...). */
int aws_creds_get(struct aws_creds *p, struct aws_credentials *ret);
/* Drops cached temporary credentials so the next get fetches again and fails if that fails
 * (after an ExpiredToken reply). Static keys are kept. */
void aws_creds_invalidate(struct aws_creds *p);
/* Which source the chain picked (AWS_CREDS_NONE before the first successful get). */
enum aws_creds_source aws_creds_source(struct aws_creds *p);
/* How many times credentials were fetched from the source (tests, metrics). */
unsigned aws_creds_fetch_count(struct aws_creds *p);

/* When temporary credentials fetched at fetched_ns and expiring at exp_ns should be refreshed:
 * 5 minutes before expiry, or at half of the lifetime when that is shorter than 10 minutes.
 * 0 for credentials that do not expire. */
int64_t aws_creds_refresh_at(int64_t fetched_ns, int64_t exp_ns);

/* The shared config/credentials files: a small INI reader. */
struct aws_ini;
/* Parses a file (missing file: -ENOENT); at most 1 MiB, 4096 keys. In the config file,
 * "[profile NAME]" is read as section NAME ("[default]" stays "default"); with
 * config_style false (the credentials file) section names are taken as they are. */
int aws_ini_load(const char *path, bool config_style, struct aws_ini **ret);
int aws_ini_parse(const char *text, size_t len, bool config_style, struct aws_ini **ret);
void aws_ini_free(struct aws_ini *ini);
/* The value of key in section, or NULL. */
const char *aws_ini_get(const struct aws_ini *ini, const char *section, const char *key);
bool aws_ini_has_section(const struct aws_ini *ini, const char *section);

/* Looks a key up for a profile in the credentials file, then the config file (paths from the
 * environment or ~/.aws/). Copies the value into *ret (malloc'd); -ENOENT when absent. */
int aws_profile_get(const char *profile, const char *key, char **ret);
/* The profile in effect: the argument when not NULL, else AWS_PROFILE, else "default". */
const char *aws_profile_name(const char *profile);
