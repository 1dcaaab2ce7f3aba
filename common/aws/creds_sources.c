/* Credential sources that call out: STS (AssumeRoleWithWebIdentity, AssumeRole), the container
 * credentials endpoint and the instance metadata service (see creds.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/creds.h"
#include "common/aws/creds_internal.h"
#include "common/aws/error.h"
#include "common/aws/imds.h"
#include "common/aws/query.h"
#include "common/aws/request.h"
#include "common/aws/xml.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/secret.h"
#include "common/base/timeutil.h"

#define TOKEN_FILE_MAX (64 * 1024)

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
	if (!p->io.region || p->io.region(p->io.ud, ret) < 0)
		*ret = "us-east-1";
	return 0;
}

/* One STS call through the client (struct aws_creds_io). */
static int sts_call(struct aws_creds *p, const struct aws_request *rq, struct aws_reply *rep,
		    struct aws_error *err)
{
	if (!p->io.call) {
		aws_error_set(err, 0, "NoClient", "no AWS client to call STS through");
		return -ENOTCONN;
	}
	return p->io.call(p->io.ud, rq, rep, err);
}

int aws_creds_read_token_file(const char *path, char **ret)
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
	secret_wipe(chunk, sizeof(chunk));
	if (r == 0)
		r = buf_puts(&b, "");
	if (r < 0) {
		if (b.data)
			secret_wipe(b.data, b.len);
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

int aws_creds_assume_role_web_identity(struct aws_creds *p, const char *role_arn,
				       const char *token_file, const char *session,
				       struct aws_credentials *ret)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_request rq = {.service = AWS_SVC_STS,
				 .action = "AssumeRoleWithWebIdentity",
				 .query = &q,
				 .anonymous = true};
	struct aws_reply rep = {0};
	struct aws_error err;
	char sess[64], buf[700];
	char *token = NULL;
	int r;

	if ((r = aws_creds_read_token_file(token_file, &token)) < 0) {
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
	secret_wipe_str(token);
	free(token);
	if (r >= 0)
		r = sts_call(p, &rq, &rep, &err);
	/* the token was in the request: wipe the copy in the parameters */
	for (size_t i = 0; i < q.n; i++)
		secret_wipe_str(q.values[i]);
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

int aws_creds_assume_role(struct aws_creds *p, const struct aws_credentials *base,
			  const char *role_arn, const char *session, const char *external_id,
			  const char *source_arn, int64_t duration_ns, struct aws_credentials *ret)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct http_header hdrs[2];
	struct aws_request rq = {.service = AWS_SVC_STS,
				 .action = "AssumeRole",
				 .query = &q,
				 .creds = base,
				 .headers = hdrs};
	struct aws_reply rep = {0};
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
		hdrs[rq.n_headers++] = (struct http_header){"x-amz-source-arn", source_arn};
		if (account[0])
			hdrs[rq.n_headers++] =
			    (struct http_header){"x-amz-source-account", account};
	}
	r = sts_call(p, &rq, &rep, &err);
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

bool aws_creds_container_host_allowed(const char *url)
{
	static const char *const ok[] = {"127.",	  "localhost",	    "[::1]",
					 "169.254.170.2", "169.254.170.23", "[fd00:ec2::23]"};
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

int aws_creds_container_fetch(struct aws_creds *p, struct aws_credentials *ret)
{
	struct http_header h = {"Authorization", NULL};
	struct http_request rq = {
	    .method = "GET", .url = p->container_url, .headers = &h, .cancel = cancel_root()};
	struct http_response resp;
	const char *tf = aws_creds_env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
	char *token = NULL;
	int r;

	if (!p->http) {
		struct http_client_opts ho = {.connect_timeout_ns = 2 * NSEC_PER_SEC,
					      .timeout_ns = 5 * NSEC_PER_SEC,
					      .max_response = 64 * 1024};
		if ((r = http_client_new(&ho, &p->http)) < 0)
			return r;
	}
	if (tf) {
		if ((r = aws_creds_read_token_file(tf, &token)) < 0) {
			log_v(3, "cannot read the container authorization token file",
			      KV_S("path", tf), KV_E(r));
			return r;
		}
	} else if (aws_creds_env("AWS_CONTAINER_AUTHORIZATION_TOKEN")) {
		token = strdup(aws_creds_env("AWS_CONTAINER_AUTHORIZATION_TOKEN"));
		if (!token)
			return -ENOMEM;
	}
	if (token && strpbrk(token, "\r\n")) {
		secret_freep(&token);
		return -EINVAL;
	}
	h.value = token;
	rq.n_headers = token ? 1 : 0;
	for (int a = 0; a < 3; a++) {
		if (a > 0 && cancel_wait(cancel_root(),
					 (int64_t)random_below(200 * NSEC_PER_MSEC << a))) {
			r = -ECANCELED; /* a stop */
			break;
		}
		http_response_init(&resp);
		r = http_client_do(p->http, &rq, &resp);
		if (r == 0 && resp.status == 200) {
			r = json_credentials(resp.body.data ? resp.body.data : "", resp.body.len,
					     ret);
			secret_wipe(resp.body.data, resp.body.len);
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
	secret_freep(&token);
	return r;
}

int aws_creds_imds_fetch(struct aws_creds *p, struct aws_credentials *ret)
{
	struct aws_imds *m = p->io.imds;
	_cleanup_free_ char *roles = NULL;
	char path[300];
	struct buf b = BUF_INIT(64 * 1024);
	int r;

	if (!m)
		return -ENOKEY;
	if ((r = aws_imds_get(m, "meta-data/iam/security-credentials/", &roles)) < 0)
		return r;
	roles[strcspn(roles, "\r\n")] = 0;
	str_strip(roles);
	if (!*roles || strchr(roles, '/'))
		return -ENOENT;
	if ((r = str_printf(path, sizeof(path), "meta-data/iam/security-credentials/%s", roles)) <
	    0)
		return r;
	if ((r = aws_imds_get_buf(m, path, &b)) >= 0) {
		r = json_credentials(b.data ? b.data : "", b.len, ret);
		if (b.data)
			secret_wipe(b.data, b.len);
	}
	buf_release(&b);
	return r;
}
