/* Internals of the credential provider, shared by creds_chain.c (the chain, the profiles,
 * the refresh) and creds_sources.c (STS, container and metadata sources), which creds_chain.c
 * calls. Not for other users. */
#pragma once
#include <libxml/tree.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/aws/creds.h"
#include "common/http/client.h"

#define CONTAINER_HOST "http://169.254.170.2"

struct aws_creds {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a refresh ended */
	bool refreshing;
	struct aws_creds_io io;
	enum aws_creds_source source;
	bool resolved;
	struct aws_credentials cur;
	bool have;
	int64_t refresh_at; /* wall clock; 0: never */
	int64_t fetched_at; /* wall clock */
	unsigned fetches;

	/* what the chain found (strings owned) */
	char *ak, *sk, *token; /* static keys */
	char *role_arn;	       /* web identity / profile role */
	char *token_file;      /* web identity */
	char *session_name;
	char *profile; /* profile whose role_arn is used */
	char *container_url;
	struct http_client *http; /* container credentials */

	/* the role assumed on top of the chain */
	char *top_role_arn, *top_session, *top_external_id, *top_source_arn;
	int64_t top_duration_ns;

	int (*custom)(void *ud, struct aws_credentials *ret);
	void *custom_ud;
};

/* The value of an environment variable, NULL when unset or empty (creds.c). */
const char *aws_creds_env(const char *name);
/* Reads a token file (at most 64 KiB, white space trimmed; -ENODATA when empty). */
int aws_creds_read_token_file(const char *path, char **ret);
/* STS AssumeRoleWithWebIdentity with the token read from token_file now. */
int aws_creds_assume_role_web_identity(struct aws_creds *p, const char *role_arn,
				       const char *token_file, const char *session,
				       struct aws_credentials *ret);
/* STS AssumeRole signed with base; external_id, source_arn and duration_ns optional. */
int aws_creds_assume_role(struct aws_creds *p, const struct aws_credentials *base,
			  const char *role_arn, const char *session, const char *external_id,
			  const char *source_arn, int64_t duration_ns, struct aws_credentials *ret);
/* May a container credentials URL be used (https, or http to loopback / the ECS and EKS
 * agents)? */
bool aws_creds_container_host_allowed(const char *url);
/* GETs p->container_url with the authorization token (file re-read each time). */
int aws_creds_container_fetch(struct aws_creds *p, struct aws_credentials *ret);
/* The instance profile's credentials from the metadata service. */
int aws_creds_imds_fetch(struct aws_creds *p, struct aws_credentials *ret);
