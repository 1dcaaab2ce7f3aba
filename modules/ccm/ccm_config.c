/* The cloud config: gcfg's INI dialect, one table of [Global] keys. */
#include "modules/ccm/ccm_config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/tags.h"
#include "common/base/buf.h"
#include "common/kube/config.h"

enum key_type { K_STR, K_BOOL, K_INT32, K_MULTI };

struct key_def {
	const char *name;
	enum key_type type;
	size_t off;
};

#define G(n, t, f)                                                                                 \
	{                                                                                          \
		n, t, offsetof(struct ccm_config, f)                                               \
	}
static const struct key_def global_keys[] = {
    G("Zone", K_STR, zone),
    G("Region", K_STR, region),
    G("VPC", K_STR, vpc),
    G("SubnetID", K_STR, subnet_id),
    G("RouteTableID", K_STR, route_table_id),
    G("RoleARN", K_STR, role_arn),
    G("SourceARN", K_STR, source_arn),
    G("KubernetesClusterTag", K_STR, cluster_tag),
    G("KubernetesClusterID", K_STR, cluster_id),
    G("DisableSecurityGroupIngress", K_BOOL, disable_sg_ingress),
    G("ElbSecurityGroup", K_STR, elb_security_group),
    G("NodeIPFamilies", K_MULTI, node_ip_families),
    G("ClusterServiceLoadBalancerHealthProbeMode", K_STR, health_probe_mode),
    G("ClusterServiceSharedLoadBalancerHealthProbePort", K_INT32, shared_probe_port),
    G("ClusterServiceSharedLoadBalancerHealthProbePath", K_STR, shared_probe_path),
    G("SupportedTopologyInstanceTypePattern", K_STR, topology_pattern),
    G("NLBSecurityGroupMode", K_STR, nlb_sg_mode),
    G("PublicNetworkAllowList", K_STR, public_network_allow_list),
};
#undef G

#define O(n, f)                                                                                    \
	{                                                                                          \
		n, K_STR, offsetof(struct ccm_service_override, f)                                 \
	}
static const struct key_def override_keys[] = {
    O("Service", service),
    O("Region", region),
    O("URL", url),
    O("SigningRegion", signing_region),
    O("SigningMethod", signing_method),
    O("SigningName", signing_name),
};
#undef O

void ccm_config_free(struct ccm_config *c)
{
	if (!c)
		return;
	char **strs[] = {&c->zone,
			 &c->region,
			 &c->vpc,
			 &c->subnet_id,
			 &c->route_table_id,
			 &c->role_arn,
			 &c->source_arn,
			 &c->cluster_tag,
			 &c->cluster_id,
			 &c->elb_security_group,
			 &c->health_probe_mode,
			 &c->shared_probe_path,
			 &c->topology_pattern,
			 &c->nlb_sg_mode,
			 &c->public_network_allow_list};
	for (size_t i = 0; i < ARRAY_SIZE(strs); i++)
		free(*strs[i]);
	strv_free(c->node_ip_families);
	for (size_t i = 0; i < c->n_overrides; i++) {
		struct ccm_service_override *o = &c->overrides[i];
		free(o->name);
		free(o->service);
		free(o->region);
		free(o->url);
		free(o->signing_region);
		free(o->signing_method);
		free(o->signing_name);
	}
	free(c->overrides);
	free(c);
}

/* The parser state: one pass over the text, line by line. */
struct parser {
	const char *p, *end;
	const char *path;
	unsigned line;
	unsigned stmt_line; /* where the statement being parsed starts */
	char *err;
	size_t errlen;
	struct ccm_config *cfg;
	enum { SEC_NONE, SEC_GLOBAL, SEC_OVERRIDE } sec;
	struct ccm_service_override *cur; /* in SEC_OVERRIDE */
};

__attribute__((format(printf, 2, 3))) static int perr(struct parser *ps, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ps->err)
		snprintf(ps->err, ps->errlen, "cloud config '%s' line %u: %s",
			 ps->path ? ps->path : "<text>", ps->stmt_line, msg);
	return -EINVAL;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_alnum(char c)
{
	return is_alpha(c) || (c >= '0' && c <= '9');
}

static void skip_spaces(struct parser *ps)
{
	while (ps->p < ps->end && is_space(*ps->p))
		ps->p++;
}

/* At the end of a line (after optional blanks and a comment): consumes the newline. */
static int end_of_line(struct parser *ps)
{
	skip_spaces(ps);
	if (ps->p < ps->end && (*ps->p == ';' || *ps->p == '#'))
		while (ps->p < ps->end && *ps->p != '\n')
			ps->p++;
	if (ps->p < ps->end && *ps->p != '\n')
		return perr(ps, "unexpected '%c'", *ps->p);
	if (ps->p < ps->end) {
		ps->p++;
		ps->line++;
	}
	return 0;
}

/* A quoted subsection name: "..." with \" and \\ escapes. */
static int parse_subsection(struct parser *ps, char **ret)
{
	_cleanup_buf_ struct buf b = BUF_INIT(4096);
	int r;

	ps->p++; /* the opening quote */
	for (;;) {
		if (ps->p >= ps->end || *ps->p == '\n')
			return perr(ps, "unterminated subsection name");
		char c = *ps->p++;
		if (c == '"')
			break;
		if (c == '\\') {
			if (ps->p >= ps->end || (*ps->p != '"' && *ps->p != '\\'))
				return perr(ps, "invalid escape in subsection name");
			c = *ps->p++;
		}
		if ((r = buf_putc(&b, c)) < 0)
			return r == -EMSGSIZE ? perr(ps, "subsection name too long") : r;
	}
	*ret = buf_steal(&b);
	return *ret ? 0 : -ENOMEM;
}

static int begin_section(struct parser *ps)
{
	_cleanup_free_ char *sub = NULL;
	const char *name;
	size_t nl;
	int r;

	ps->p++; /* '[' */
	skip_spaces(ps);
	name = ps->p;
	while (ps->p < ps->end && (is_alnum(*ps->p) || *ps->p == '-' || *ps->p == '.'))
		ps->p++;
	nl = (size_t)(ps->p - name);
	if (nl == 0)
		return perr(ps, "missing section name");
	skip_spaces(ps);
	if (ps->p < ps->end && *ps->p == '"') {
		if ((r = parse_subsection(ps, &sub)) < 0)
			return r;
		skip_spaces(ps);
	}
	if (ps->p >= ps->end || *ps->p != ']')
		return perr(ps, "malformed section header (missing ']')");
	ps->p++;
	if ((r = end_of_line(ps)) < 0)
		return r;

	if (nl == 6 && strncasecmp(name, "Global", 6) == 0) {
		if (sub)
			return perr(ps, "section [Global] takes no subsection");
		ps->sec = SEC_GLOBAL;
		ps->cur = NULL;
		return 0;
	}
	if (nl == 15 && strncasecmp(name, "ServiceOverride", 15) == 0) {
		if (!sub)
			return perr(
			    ps, "section [ServiceOverride] needs a name: [ServiceOverride \"1\"]");
		ps->sec = SEC_OVERRIDE;
		/* gcfg merges repeated sections */
		for (size_t i = 0; i < ps->cfg->n_overrides; i++)
			if (strcmp(ps->cfg->overrides[i].name, sub) == 0) {
				ps->cur = &ps->cfg->overrides[i];
				return 0;
			}
		if (ps->cfg->n_overrides >= CCM_CONFIG_MAX_OVERRIDES) {
			perr(ps, "more than %d [ServiceOverride] sections",
			     CCM_CONFIG_MAX_OVERRIDES);
			return -E2BIG;
		}
		struct ccm_service_override *o =
		    reallocarray(ps->cfg->overrides, ps->cfg->n_overrides + 1, sizeof(*o));
		if (!o)
			return -ENOMEM;
		ps->cfg->overrides = o;
		ps->cur = &o[ps->cfg->n_overrides++];
		*ps->cur = (struct ccm_service_override){.name = TAKE_PTR(sub)};
		return 0;
	}
	return perr(ps, "unknown section [%.*s]", (int)(nl > 64 ? 64 : nl), name);
}

/* A value up to the end of the line (or a comment): blanks around it are dropped, quoted
 * parts keep theirs, \\ \" \n \t \b are escapes, a backslash at the end of a line continues
 * the value on the next. */
static int parse_value(struct parser *ps, char **ret)
{
	_cleanup_buf_ struct buf b = BUF_INIT(CCM_CONFIG_MAX_FILE);
	bool quoted = false;
	size_t keep = 0; /* length up to the last character that is not an unquoted blank */
	int r;

	skip_spaces(ps);
	if ((r = buf_reserve(&b, 1)) < 0)
		return r;
	for (;;) {
		if (ps->p >= ps->end || *ps->p == '\n') {
			if (quoted)
				return perr(ps, "unterminated quoted value");
			break;
		}
		char c = *ps->p;
		if (!quoted && (c == ';' || c == '#'))
			break;
		ps->p++;
		if (c == '"') {
			quoted = !quoted;
			keep = b.len;
			continue;
		}
		if (c == '\\') {
			if (ps->p >= ps->end)
				return perr(ps, "backslash at the end of the file");
			char e = *ps->p++;
			switch (e) {
			case '\\':
			case '"':
				c = e;
				break;
			case 'n':
				c = '\n';
				break;
			case 't':
				c = '\t';
				break;
			case 'b':
				c = '\b';
				break;
			case '\n':
				ps->line++;
				continue;
			case '\r':
				if (ps->p < ps->end && *ps->p == '\n') {
					ps->p++;
					ps->line++;
					continue;
				}
				/* fallthrough */
			default:
				return perr(ps, "invalid escape sequence '\\%c'", e);
			}
			if ((r = buf_putc(&b, c)) < 0)
				return r;
			keep = b.len;
			continue;
		}
		if (c == '\r' && !quoted)
			continue;
		if ((r = buf_putc(&b, c)) < 0)
			return r;
		if (quoted || !is_space(c))
			keep = b.len;
	}
	b.len = keep;
	b.data[keep] = 0;
	*ret = buf_steal(&b);
	return *ret ? 0 : -ENOMEM;
}

static int set_global(struct parser *ps, const struct key_def *k, char *value, bool blank)
{
	void *dst = (char *)ps->cfg + k->off;
	int r;

	switch (k->type) {
	case K_STR:
		if (blank)
			return perr(ps, "key '%s' needs a value", k->name);
		if ((k->off == offsetof(struct ccm_config, cluster_id) ||
		     k->off == offsetof(struct ccm_config, cluster_tag)) &&
		    *value) {
			/* it becomes the tag key kubernetes.io/cluster/<ID>: at most 128 characters
			 * AWS allows in a key */
			char why[200];
			if (aws_cluster_id_check(value, why, sizeof(why)) < 0) {
				free(value);
				return perr(ps, "%s: %s", k->name, why);
			}
		}
		free(*(char **)dst);
		*(char **)dst = value;
		return 0;
	case K_BOOL: {
		bool b = true;
		if (!blank && str_to_bool(value, &b) < 0) {
			r = perr(ps, "invalid boolean '%s' for key '%s'", value, k->name);
			free(value);
			return r;
		}
		free(value);
		*(bool *)dst = b;
		return 0;
	}
	case K_INT32: {
		long long v;
		if (blank || str_to_ll(value, -2147483648LL, 2147483647LL, &v) < 0) {
			r = perr(ps, "invalid integer '%s' for key '%s'", blank ? "" : value,
				 k->name);
			free(value);
			return r;
		}
		free(value);
		*(long long *)dst = v;
		return 0;
	}
	case K_MULTI: {
		char ***v = dst;
		if (blank)
			return perr(ps, "key '%s' needs a value", k->name);
		/* gcfg: every line appends, an empty value clears the list */
		if (!*value) {
			strv_free(*v);
			*v = NULL;
			r = 0;
		} else {
			r = strv_push(v, value);
		}
		free(value);
		return r;
	}
	}
	free(value);
	return -EINVAL;
}

static int parse_variable(struct parser *ps)
{
	const char *name = ps->p;
	_cleanup_free_ char *value = NULL;
	bool blank = false;
	size_t nl;
	int r;

	while (ps->p < ps->end && (is_alnum(*ps->p) || *ps->p == '-' || *ps->p == '_'))
		ps->p++;
	nl = (size_t)(ps->p - name);
	skip_spaces(ps);
	if (ps->p < ps->end && *ps->p == '=') {
		ps->p++;
		if ((r = parse_value(ps, &value)) < 0)
			return r;
	} else {
		blank = true; /* "Key" alone: true for a boolean */
	}
	if ((r = end_of_line(ps)) < 0)
		return r;
	if (!blank && !value)
		return -ENOMEM;

	if (ps->sec == SEC_NONE)
		return perr(ps, "key '%.*s' outside of a section", (int)(nl > 64 ? 64 : nl), name);
	if (ps->sec == SEC_GLOBAL) {
		for (size_t i = 0; i < ARRAY_SIZE(global_keys); i++)
			if (strlen(global_keys[i].name) == nl &&
			    strncasecmp(global_keys[i].name, name, nl) == 0)
				return set_global(ps, &global_keys[i], TAKE_PTR(value), blank);
		return perr(ps, "unknown key '%.*s' in section [Global]", (int)(nl > 64 ? 64 : nl),
			    name);
	}
	for (size_t i = 0; i < ARRAY_SIZE(override_keys); i++)
		if (strlen(override_keys[i].name) == nl &&
		    strncasecmp(override_keys[i].name, name, nl) == 0) {
			if (blank)
				return perr(ps, "key '%s' needs a value", override_keys[i].name);
			char **dst = (char **)((char *)ps->cur + override_keys[i].off);
			free(*dst);
			*dst = TAKE_PTR(value);
			return 0;
		}
	return perr(ps, "unknown key '%.*s' in section [ServiceOverride \"%s\"]",
		    (int)(nl > 64 ? 64 : nl), name, ps->cur->name);
}

/* upstream's ValidateOverrides, plus a check of the URL */
static int validate(struct parser *ps)
{
	struct ccm_config *c = ps->cfg;

	ps->line = 0;
	/* upstream: empty (no managed group) or exactly "Managed", anything else an error */
	if (c->nlb_sg_mode && *c->nlb_sg_mode && strcmp(c->nlb_sg_mode, "Managed") != 0) {
		if (ps->err)
			snprintf(ps->err, ps->errlen,
				 "cloud config '%s': invalid NLB security group mode: \"%s\". "
				 "Expected: \"Managed\"",
				 ps->path ? ps->path : "<text>", c->nlb_sg_mode);
		return -EINVAL;
	}
	for (char **f = c->node_ip_families; f && *f; f++) {
		/* an extension: "ipv4,ipv6" on one line */
		if (strcmp(*f, "ipv4") != 0 && strcmp(*f, "ipv6") != 0) {
			if (ps->err)
				snprintf(ps->err, ps->errlen,
					 "cloud config '%s': NodeIPFamilies: '%s' is neither ipv4 "
					 "nor ipv6",
					 ps->path ? ps->path : "<text>", *f);
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < c->n_overrides; i++) {
		struct ccm_service_override *o = &c->overrides[i];
		const char *missing = !o->service || !*str_strip(o->service) ? "Service"
				      : !o->region || !*str_strip(o->region) ? "Region"
				      : !o->url || !*str_strip(o->url)	     ? "URL"
				      : !o->signing_region || !*str_strip(o->signing_region)
					  ? "SigningRegion"
					  : NULL;
		if (missing) {
			if (ps->err)
				snprintf(
				    ps->err, ps->errlen,
				    "cloud config '%s': [ServiceOverride \"%s\"]: %s is missing",
				    ps->path ? ps->path : "<text>", o->name, missing);
			return -EINVAL;
		}
		if (!str_has_prefix(o->url, "http://") && !str_has_prefix(o->url, "https://")) {
			if (ps->err)
				snprintf(ps->err, ps->errlen,
					 "cloud config '%s': [ServiceOverride \"%s\"]: URL '%s' is "
					 "not an "
					 "http(s) URL",
					 ps->path ? ps->path : "<text>", o->name, o->url);
			return -EINVAL;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(c->overrides[j].service, o->service) == 0 &&
			    strcmp(c->overrides[j].region, o->region) == 0) {
				if (ps->err)
					snprintf(
					    ps->err, ps->errlen,
					    "cloud config '%s': duplicate entry found for service "
					    "override [%s] (%s in %s)",
					    ps->path ? ps->path : "<text>", o->name, o->service,
					    o->region);
				return -EINVAL;
			}
	}
	return 0;
}

static int split_families(struct ccm_config *c)
{
	_cleanup_strv_ char **out = NULL;
	int r;

	for (char **f = c->node_ip_families; f && *f; f++) {
		_cleanup_strv_ char **parts = NULL;
		if ((r = strv_split(*f, ',', &parts)) < 0)
			return r;
		for (char **p = parts; p && *p; p++)
			if ((r = strv_push(&out, *p)) < 0)
				return r;
	}
	if (!out && (r = strv_push(&out, "ipv4")) < 0)
		return r;
	strv_free(c->node_ip_families);
	c->node_ip_families = TAKE_PTR(out);
	return 0;
}

int ccm_config_parse(const char *text, size_t len, const char *path, struct ccm_config **ret,
		     char *err, size_t errlen)
{
	struct ccm_config *cfg;
	int r;

	if (err && errlen)
		err[0] = 0;
	if (len > CCM_CONFIG_MAX_FILE) {
		if (err)
			snprintf(err, errlen, "cloud config '%s': larger than %zu bytes",
				 path ? path : "<text>", CCM_CONFIG_MAX_FILE);
		return -E2BIG;
	}
	if (memchr(text, 0, len)) {
		if (err)
			snprintf(err, errlen, "cloud config '%s': a NUL byte (not a text file)",
				 path ? path : "<text>");
		return -EINVAL;
	}
	if (!(cfg = calloc(1, sizeof(*cfg))))
		return -ENOMEM;
	struct parser ps = {.p = text,
			    .end = text + len,
			    .path = path,
			    .line = 1,
			    .err = err,
			    .errlen = errlen,
			    .cfg = cfg};
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		ps.p += 3;
	while (ps.p < ps.end) {
		skip_spaces(&ps);
		if (ps.p >= ps.end)
			break;
		char c = *ps.p;
		ps.stmt_line = ps.line;
		if (c == '\n' || c == ';' || c == '#')
			r = end_of_line(&ps);
		else if (c == '[')
			r = begin_section(&ps);
		else if (is_alpha(c))
			r = parse_variable(&ps);
		else
			r = perr(&ps, "unexpected '%c' at the start of a line", c);
		if (r < 0)
			goto fail;
	}
	if ((r = split_families(cfg)) < 0 || (r = validate(&ps)) < 0)
		goto fail;
	*ret = cfg;
	return 0;
fail:
	ccm_config_free(cfg);
	return r;
}

int ccm_config_load(const char *path, struct ccm_config **ret, char *err, size_t errlen)
{
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	int r;

	if (!path || !*path)
		return ccm_config_parse("", 0, NULL, ret, err, errlen);
	if ((r = kube_read_file(path, CCM_CONFIG_MAX_FILE, &data, &len)) < 0) {
		if (err)
			snprintf(err, errlen, "cloud config '%s': %s", path,
				 r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
		return r == -EFBIG ? -E2BIG : r;
	}
	return ccm_config_parse(data, len, path, ret, err, errlen);
}

const char *ccm_config_cluster_id(const struct ccm_config *c)
{
	if (c->cluster_id && *c->cluster_id)
		return c->cluster_id;
	if (c->cluster_tag && *c->cluster_tag)
		return c->cluster_tag;
	return NULL;
}

bool ccm_config_has_family(const struct ccm_config *c, const char *family)
{
	return strv_contains(c->node_ip_families, family);
}

int ccm_override_services(const char *service, enum aws_service ret[2], bool *ret_imds)
{
	static const struct {
		const char *name;
		enum aws_service a, b;
		int n;
	} names[] = {
	    {"ec2", AWS_SVC_EC2, 0, 1},
	    {"elasticloadbalancing", AWS_SVC_ELB, AWS_SVC_ELBV2, 2},
	    {"elastic load balancing", AWS_SVC_ELB, 0, 1},
	    {"elastic load balancing v2", AWS_SVC_ELBV2, 0, 1},
	    {"elasticloadbalancingv2", AWS_SVC_ELBV2, 0, 1},
	    {"sts", AWS_SVC_STS, 0, 1},
	    {"autoscaling", AWS_SVC_AUTOSCALING, 0, 1},
	    {"auto scaling", AWS_SVC_AUTOSCALING, 0, 1},
	};
	if (ret_imds)
		*ret_imds = false;
	if (strcasecmp(service, "ec2imds") == 0 || strcasecmp(service, "imds") == 0 ||
	    strcasecmp(service, "ec2metadata") == 0) {
		if (ret_imds)
			*ret_imds = true;
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (strcasecmp(service, names[i].name) == 0) {
			ret[0] = names[i].a;
			ret[1] = names[i].b;
			return names[i].n;
		}
	return 0;
}

int ccm_config_apply_overrides(const struct ccm_config *c, const char *region,
			       struct aws_endpoints *e, char **ret_imds_url)
{
	int r;

	for (size_t i = 0; i < c->n_overrides; i++) {
		const struct ccm_service_override *o = &c->overrides[i];
		enum aws_service svc[2];
		bool imds = false;
		int n = ccm_override_services(o->service, svc, &imds);
		if (imds && ret_imds_url) {
			char *u = strdup(o->url);
			if (!u)
				return -ENOMEM;
			free(*ret_imds_url);
			*ret_imds_url = u;
			continue;
		}
		if (!region || strcmp(o->region, region) != 0)
			continue;
		for (int j = 0; j < n; j++) {
			const char *sn =
			    o->signing_name && *o->signing_name ? o->signing_name : NULL;
			if ((r = aws_endpoints_set_override(e, svc[j], o->url, o->signing_region,
							    sn)) < 0)
				return r;
		}
	}
	return 0;
}
