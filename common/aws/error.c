/* AWS error replies (see error.h). */
#include "common/aws/error.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/secret.h"

void aws_error_clear(struct aws_error *e)
{
	if (e)
		memset(e, 0, sizeof(*e));
}

/* Copies at most n-1 bytes, with control characters and runs of white space turned into one
 * space, so that a peer's text is safe on one log line. */
static void copy_clean(char *dst, size_t n, const char *src, size_t len)
{
	size_t o = 0;
	bool space = false;

	if (n == 0)
		return;
	for (size_t i = 0; i < len && src[i] && o + 1 < n; i++) {
		unsigned char c = (unsigned char)src[i];
		if (isspace(c) || c < 0x20 || c == 0x7f) {
			space = o > 0;
			continue;
		}
		if (space && o + 2 < n)
			dst[o++] = ' ';
		space = false;
		dst[o++] = (char)c;
	}
	dst[o] = 0;
}

/* Copies a peer's message: secrets it may echo (a canonical request with the session token, a
 * token) are redacted, then it is cleaned to one line. */
static void set_message(struct aws_error *e, const char *src, size_t len)
{
	char raw[2048], red[2048];

	if (len >= sizeof(raw))
		len = sizeof(raw) - 1;
	memcpy(raw, src, len);
	raw[len] = 0;
	log_redact(raw, red, sizeof(red));
	copy_clean(e->message, sizeof(e->message), red, sizeof(red));
	secret_wipe(raw, sizeof(raw));
	secret_wipe(red, sizeof(red));
}

void aws_error_set(struct aws_error *e, long status, const char *code, const char *fmt, ...)
{
	char msg[sizeof(e->message)];
	va_list ap;

	if (!e)
		return;
	e->http_status = status;
	str_copy(e->code, sizeof(e->code), code ? code : "");
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	set_message(e, msg, strlen(msg));
}

static bool parse_xml_error(struct aws_error *e, const char *body, size_t len)
{
	xmlDoc *doc = NULL;
	xmlNode *root, *err;
	const char *code, *msg, *rid;

	if (aws_xml_parse(body, len, &doc, NULL, 0) < 0)
		return false;
	root = xmlDocGetRootElement(doc);
	if (strcmp(aws_xml_name(root), "Error") == 0)
		err = root;
	else if (!(err = aws_xml_get(root, "Errors/Error")))
		err = aws_xml_child(root, "Error");
	code = aws_xml_text(err, "Code");
	if (!err || !code) {
		xmlFreeDoc(doc);
		return false;
	}
	msg = aws_xml_text(err, "Message");
	rid = aws_xml_text(root, "RequestID");
	if (!rid)
		rid = aws_xml_text(root, "RequestId");
	if (!rid)
		rid = aws_xml_text(err, "RequestId");
	copy_clean(e->code, sizeof(e->code), code, strlen(code));
	set_message(e, msg ? msg : "", msg ? strlen(msg) : 0);
	if (rid)
		copy_clean(e->request_id, sizeof(e->request_id), rid, strlen(rid));
	xmlFreeDoc(doc);
	return true;
}

static bool parse_json_error(struct aws_error *e, const char *body, size_t len)
{
	cJSON *root = NULL;
	const char *type, *msg;

	if (json_parse(body, len, &root, NULL) < 0)
		return false;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return false;
	}
	type = json_str(root, "__type");
	if (!type)
		type = json_str(root, "code");
	if (!type)
		type = json_str(root, "Code");
	msg = json_str(root, "message");
	if (!msg)
		msg = json_str(root, "Message");
	if (!msg)
		msg = json_str(root, "errorMessage");
	if (!type) {
		cJSON_Delete(root);
		return false;
	}
	/* "com.amazonaws.sqs#QueueDoesNotExist" or "Code:http://internal..." */
	if (strchr(type, '#'))
		type = strrchr(type, '#') + 1;
	copy_clean(e->code, sizeof(e->code), type, strcspn(type, ":"));
	set_message(e, msg ? msg : "", msg ? strlen(msg) : 0);
	cJSON_Delete(root);
	return true;
}

void aws_error_parse(struct aws_error *e, long status, const char *content_type, const char *body,
		     size_t len, const char *query_error_header)
{
	size_t i = 0;
	bool found = false;

	if (!e)
		return;
	aws_error_clear(e);
	e->http_status = status;
	while (body && i < len && isspace((unsigned char)body[i]))
		i++;
	if (body && i < len && body[i] == '<')
		found = parse_xml_error(e, body, len);
	else if (body && i < len && body[i] == '{')
		found = parse_json_error(e, body, len);
	if (query_error_header && *query_error_header) {
		/* "AWS.SimpleQueueService.NonExistentQueue;Sender": the code the SDKs use */
		copy_clean(e->code, sizeof(e->code), query_error_header,
			   strcspn(query_error_header, ";"));
		found = true;
	}
	if (!found) {
		char start[121];
		copy_clean(start, sizeof(start), body ? body + i : "", body ? len - i : 0);
		aws_error_set(e, status, "",
			      "HTTP %ld reply without an AWS error (%s, %zu bytes)%s%s", status,
			      content_type && *content_type ? content_type : "no content type", len,
			      start[0] ? ": " : "", start);
	}
}

bool aws_error_is(const struct aws_error *e, const char *code)
{
	return e && code && strcmp(e->code, code) == 0;
}

static bool in_list(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return true;
	return false;
}

bool aws_error_code_is_throttle(const char *code)
{
	static const char *const codes[] = {
	    "Throttling",
	    "ThrottlingException",
	    "ThrottledException",
	    "RequestThrottledException",
	    "TooManyRequestsException",
	    "ProvisionedThroughputExceededException",
	    "TransactionInProgressException",
	    "RequestLimitExceeded",
	    "BandwidthLimitExceeded",
	    "LimitExceededException",
	    "RequestThrottled",
	    "SlowDown",
	    "PriorRequestNotComplete",
	    "EC2ThrottledException",
	};
	return code && in_list(code, codes, ARRAY_SIZE(codes));
}

bool aws_error_code_is_transient(const char *code)
{
	static const char *const codes[] = {
	    "RequestTimeout",  "RequestTimeoutException", "InternalError",
	    "InternalFailure", "ServiceUnavailable",	  "IDPCommunicationError",
	};
	return code && *code && in_list(code, codes, ARRAY_SIZE(codes));
}

bool aws_error_retryable(const struct aws_error *e)
{
	if (!e)
		return false;
	if (aws_error_code_is_throttle(e->code) || aws_error_code_is_transient(e->code))
		return true;
	return e->http_status == 500 || e->http_status == 502 || e->http_status == 503 ||
	       e->http_status == 504 || e->http_status == 429;
}

static bool has_suffix(const char *s, const char *suf)
{
	size_t l = strlen(s), m = strlen(suf);
	return l >= m && strcmp(s + l - m, suf) == 0;
}

int aws_error_errno(const struct aws_error *e)
{
	static const char *const auth[] = {
	    "AuthFailure",	     "UnauthorizedOperation",	    "AccessDenied",
	    "AccessDeniedException", "SignatureDoesNotMatch",	    "InvalidClientTokenId",
	    "ExpiredToken",	     "ExpiredTokenException",	    "OptInRequired",
	    "InvalidIdentityToken",  "UnrecognizedClientException", "MissingAuthenticationToken",
	    "IncompleteSignature",
	};
	static const char *const busy[] = {"VolumeInUse",	  "ResourceInUse",
					   "DependencyViolation", "ResourceInUseException",
					   "IncorrectState",	  "InvalidVolume.InUse"};
	const char *c;

	if (!e)
		return -EINVAL;
	c = e->code;
	if (aws_error_code_is_throttle(c))
		return -EAGAIN;
	if (strcmp(c, "DryRunOperation") == 0)
		return -EALREADY;
	if (*c && (has_suffix(c, "NotFound") || has_suffix(c, "NotFoundException") ||
		   strstr(c, ".NotFound") || strncmp(c, "NoSuch", 6) == 0 ||
		   strstr(c, "NonExistent") || has_suffix(c, "DoesNotExist")))
		return -ENOENT;
	if (*c && in_list(c, auth, ARRAY_SIZE(auth)))
		return -EACCES;
	if (*c && (strstr(c, "AlreadyExists") || strstr(c, "Duplicate") ||
		   strcmp(c, "IdempotentParameterMismatch") == 0))
		return -EEXIST;
	if (*c && in_list(c, busy, ARRAY_SIZE(busy)))
		return -EBUSY;
	if (e->http_status >= 500 || aws_error_code_is_transient(c))
		return -EAGAIN;
	if (e->http_status == 404) /* a 404 without an AWS code (a proxy's page) proves nothing */
		return *c ? -ENOENT : -EREMOTEIO;
	if (e->http_status == 401 || e->http_status == 403)
		return -EACCES;
	if (e->http_status == 409)
		return -EEXIST;
	if (e->http_status == 429)
		return -EAGAIN;
	if (e->http_status >= 400)
		return -EINVAL;
	return -EREMOTEIO;
}

const char *aws_error_str(const struct aws_error *e, char *buf, size_t n)
{
	if (!e) {
		str_copy(buf, n, "no error");
		return buf;
	}
	if (e->http_status && e->request_id[0])
		snprintf(buf, n, "%s%s%s (HTTP %ld, request id %s)", e->code,
			 e->code[0] ? ": " : "", e->message, e->http_status, e->request_id);
	else if (e->http_status)
		snprintf(buf, n, "%s%s%s (HTTP %ld)", e->code, e->code[0] ? ": " : "", e->message,
			 e->http_status);
	else
		snprintf(buf, n, "%s%s%s", e->code, e->code[0] ? ": " : "", e->message);
	return buf;
}
