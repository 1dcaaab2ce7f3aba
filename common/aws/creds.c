/* Credentials: the value type and its helpers. The provider chain is in creds_chain.c, the
 * shared-file reader in creds_ini.c. */
#include "common/aws/creds.h"
#include "common/aws/creds_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/secret.h"

void aws_credentials_release(struct aws_credentials *c)
{
	if (!c)
		return;
	secret_freep(&c->access_key_id);
	secret_freep(&c->secret_access_key);
	secret_freep(&c->session_token);
	c->expiration_ns = 0;
}

int aws_credentials_set(struct aws_credentials *ret, const char *ak, const char *sk,
			const char *token, int64_t expiration_ns)
{
	struct aws_credentials c = {0};

	if (!ret || !ak || !*ak || !sk || !*sk)
		return -EINVAL;
	c.access_key_id = strdup(ak);
	c.secret_access_key = strdup(sk);
	c.session_token = token && *token ? strdup(token) : NULL;
	c.expiration_ns = expiration_ns;
	if (!c.access_key_id || !c.secret_access_key || (token && *token && !c.session_token)) {
		aws_credentials_release(&c);
		return -ENOMEM;
	}
	*ret = c;
	return 0;
}

int aws_credentials_copy(const struct aws_credentials *src, struct aws_credentials *ret)
{
	if (!src)
		return -EINVAL;
	return aws_credentials_set(ret, src->access_key_id, src->secret_access_key,
				   src->session_token, src->expiration_ns);
}

const char *aws_creds_source_name(enum aws_creds_source s)
{
	switch (s) {
	case AWS_CREDS_NONE:
		return "none";
	case AWS_CREDS_STATIC:
		return "static";
	case AWS_CREDS_ENV:
		return "environment";
	case AWS_CREDS_WEB_IDENTITY:
		return "web-identity";
	case AWS_CREDS_PROFILE:
		return "shared-profile";
	case AWS_CREDS_PROFILE_ROLE:
		return "shared-profile-role";
	case AWS_CREDS_CONTAINER:
		return "container";
	case AWS_CREDS_IMDS:
		return "instance-profile";
	case AWS_CREDS_CUSTOM:
		return "custom";
	}
	return "unknown";
}

int64_t aws_creds_refresh_at(int64_t fetched_ns, int64_t exp_ns)
{
	const int64_t five_min = 300LL * 1000000000LL;
	int64_t life;

	if (exp_ns <= 0)
		return 0;
	life = exp_ns - fetched_ns;
	if (life < 2 * five_min)
		return fetched_ns + (life > 0 ? life / 2 : 0);
	return exp_ns - five_min;
}

const char *aws_creds_env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}
