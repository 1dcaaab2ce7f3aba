/* The service controller's pure part (see ccm_lb.h). */
#include "modules/ccm/ccm_lb.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "modules/ccm/ccm_model.h"
#include "modules/ccm/ccm_routes.h"

void ccm_lb_name(const char *uid, char buf[33])
{
	size_t k = 0;

	buf[k++] = 'a';
	for (const char *p = uid ? uid : ""; *p && k < 32; p++)
		if (*p != '-')
			buf[k++] = *p;
	buf[k] = 0;
}

bool ccm_lb_has_finalizer(const cJSON *svc)
{
	const cJSON *f;
	cJSON_ArrayForEach(f, json_find(svc, "metadata.finalizers"))
	{
		if (cJSON_IsString(f) && strcmp(f->valuestring, CCM_LB_FINALIZER) == 0)
			return true;
	}
	return false;
}

bool ccm_lb_wanted(const cJSON *svc)
{
	const char *type = json_str(svc, "spec.type");
	const char *cls = json_str(svc, "spec.loadBalancerClass");
	return type && strcmp(type, "LoadBalancer") == 0 && !(cls && *cls) &&
	       !json_find(svc, "metadata.deletionTimestamp");
}

/* Annotations --------------------------------------------------------------------------- */

const char *ccm_lb_ann(const cJSON *svc, const char *suffix)
{
	char key[160];
	if (str_printf(key, sizeof(key), "%s%s", CCM_LB_ANN, suffix) < 0)
		return NULL;
	return json_str_key(json_find(svc, "metadata.annotations"), key);
}

static bool ann_true(const char *v)
{
	return v && strcmp(v, "true") == 0;
}

static int ann_int(const cJSON *svc, const char *suffix, long long min, long long max,
		   long long *v, char *err, size_t errlen)
{
	const char *s = ccm_lb_ann(svc, suffix);
	if (!s)
		return 0;
	if (str_to_ll(s, min, max, v) < 0) {
		snprintf(err, errlen, "annotation %s%s=%s: not an integer in [%lld, %lld]",
			 CCM_LB_ANN, suffix, s, min, max);
		return -EINVAL;
	}
	return 0;
}

/* "a, b ,c" -> trimmed items into a fixed table; -E2BIG past max. */
int ccm_lb_split_list(const char *s, char *out, size_t width, size_t max, size_t *n)
{
	*n = 0;
	while (s && *s) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		while (len && isspace((unsigned char)*s)) {
			s++;
			len--;
		}
		while (len && isspace((unsigned char)s[len - 1]))
			len--;
		if (len) {
			if (*n >= max || len >= width)
				return -E2BIG;
			memcpy(out + *n * width, s, len);
			out[*n * width + len] = 0;
			(*n)++;
		}
		s = end ? end + 1 : NULL;
	}
	return 0;
}

/* "k=v,k2=v2" into kv pairs. */
int ccm_lb_split_kv(const char *s, struct ccm_lb_kv *out, size_t max, size_t *n)
{
	char items[CCM_LB_MAX_TAGS][400];
	size_t m;
	if (ccm_lb_split_list(s, &items[0][0], sizeof(items[0]), max < CCM_LB_MAX_TAGS ? max : CCM_LB_MAX_TAGS,
		       &m) < 0)
		return -E2BIG;
	for (size_t i = 0; i < m; i++) {
		char *eq = strchr(items[i], '=');
		if (eq)
			*eq = 0;
		if (!items[i][0] || str_copy(out[i].key, sizeof(out[i].key), items[i]) < 0 ||
		    str_copy(out[i].value, sizeof(out[i].value), eq ? eq + 1 : "") < 0)
			return -EINVAL;
	}
	*n = m;
	return 0;
}

bool ccm_lb_in_ssl_ports(const char *ssl_ports, int port, const char *name)
{
	char items[CCM_LB_MAX_PORTS][64];
	size_t n;
	if (!ssl_ports)
		return true; /* a certificate without ssl-ports: every port */
	if (ccm_lb_split_list(ssl_ports, &items[0][0], sizeof(items[0]), CCM_LB_MAX_PORTS, &n) < 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		long long p;
		if (strcmp(items[i], "*") == 0 || (name && strcasecmp(items[i], name) == 0) ||
		    (str_to_ll(items[i], 1, 65535, &p) == 0 && p == port))
			return true;
	}
	return false;
}

/* upstream's buildListener */
static int build_listener(const cJSON *svc, int port, int node_port, const char *name,
			  struct ccm_lb_listener *l, char *err, size_t errlen)
{
	const char *cert = ccm_lb_ann(svc, "ssl-cert"), *be = ccm_lb_ann(svc, "backend-protocol");
	const char *proto = "TCP", *iproto = "TCP";

	*l = (struct ccm_lb_listener){.port = port, .node_port = node_port};
	if (cert && *cert && ccm_lb_in_ssl_ports(ccm_lb_ann(svc, "ssl-ports"), port, name)) {
		if (!be || !*be) {
			proto = "SSL";
		} else if (strcmp(be, "https") == 0 || strcmp(be, "http") == 0) {
			proto = "HTTPS";
			iproto = strcmp(be, "https") == 0 ? "HTTPS" : "HTTP";
		} else if (strcmp(be, "ssl") == 0 || strcmp(be, "tcp") == 0) {
			proto = "SSL";
			iproto = strcmp(be, "ssl") == 0 ? "SSL" : "TCP";
		} else {
			snprintf(err, errlen, "Invalid backend protocol %s for %s in %sbackend-protocol",
				 be, cert, CCM_LB_ANN);
			return -EINVAL;
		}
		if (str_copy(l->cert, sizeof(l->cert), cert) < 0)
			return -EINVAL;
	} else if (be && strcmp(be, "http") == 0) {
		proto = iproto = "HTTP";
	}
	str_copy(l->proto, sizeof(l->proto), proto);
	str_copy(l->iproto, sizeof(l->iproto), iproto);
	return 0;
}

static int parse_ranges(const cJSON *svc, struct ccm_lb_spec *s, char *err, size_t errlen)
{
	const cJSON *r, *list = json_find(svc, "spec.loadBalancerSourceRanges");
	const char *a = json_str_key(json_find(svc, "metadata.annotations"),
				     "service.beta.kubernetes.io/load-balancer-source-ranges");
	struct ccm_cidr c;

	s->n_ranges = 0;
	if (cJSON_GetArraySize(list) > 0) {
		cJSON_ArrayForEach(r, list)
		{
			if (!cJSON_IsString(r) || s->n_ranges >= CCM_LB_MAX_RANGES ||
			    str_copy(s->ranges[s->n_ranges], 64, r->valuestring) < 0)
				goto bad;
			s->n_ranges++;
		}
	} else if (a && *a) {
		if (ccm_lb_split_list(a, &s->ranges[0][0], 64, CCM_LB_MAX_RANGES, &s->n_ranges) < 0)
			goto bad;
	}
	for (size_t i = 0; i < s->n_ranges; i++)
		if (ccm_cidr_parse(s->ranges[i], &c) < 0 ||
		    ccm_cidr_format(&c, s->ranges[i], 64) < 0)
			goto bad;
	if (s->n_ranges == 0) {
		str_copy(s->ranges[0], 64, "0.0.0.0/0");
		s->n_ranges = 1;
	}
	return 0;
bad:
	snprintf(err, errlen,
		 "service.Spec.LoadBalancerSourceRanges: %s is not valid. Expecting a list of IP "
		 "ranges. For example, 10.0.0.0/24",
		 a && !cJSON_GetArraySize(list) ? a : "the list");
	return -EINVAL;
}

static int parse_hc(const cJSON *svc, struct ccm_lb_spec *s, char *err, size_t errlen)
{
	const char *proto = ccm_lb_ann(svc, "healthcheck-protocol"), *port = ccm_lb_ann(svc, "healthcheck-port");
	const char *path = ccm_lb_ann(svc, "healthcheck-path");
	long long hc_port = 0, p;
	int r;

	s->hc = (struct ccm_lb_hc){.healthy = 2, .unhealthy = 6, .timeout = 5, .interval = 10};
	if ((r = ann_int(svc, "healthcheck-healthy-threshold", 2, 10, &s->hc.healthy, err,
			 errlen)) < 0 ||
	    (r = ann_int(svc, "healthcheck-unhealthy-threshold", 2, 10, &s->hc.unhealthy, err,
			 errlen)) < 0 ||
	    (r = ann_int(svc, "healthcheck-timeout", 2, 60, &s->hc.timeout, err, errlen)) < 0 ||
	    (r = ann_int(svc, "healthcheck-interval", 5, 300, &s->hc.interval, err, errlen)) < 0)
		return r;
	if (s->local) {
		if (json_get_int(svc, "spec.healthCheckNodePort", &hc_port) < 0 || hc_port <= 0) {
			snprintf(err, errlen, "externalTrafficPolicy Local without a "
					      "healthCheckNodePort");
			return -EINVAL;
		}
		const char *pr = proto ? proto : "HTTP";
		bool plain = strcasecmp(pr, "TCP") == 0 || strcasecmp(pr, "SSL") == 0;
		snprintf(s->hc.target, sizeof(s->hc.target), "%s:%lld%s", pr, hc_port,
			 plain ? "" : (path ? path : "/healthz"));
	} else {
		const char *pr = proto;
		if (!pr) {
			const char *be = ccm_lb_ann(svc, "backend-protocol");
			pr = be && (strcmp(be, "ssl") == 0 || strcmp(be, "https") == 0) ? "SSL" : "TCP";
		}
		hc_port = s->l[0].node_port;
		if (port && strcmp(port, "traffic-port") != 0) {
			if (str_to_ll(port, 1, 65535, &p) < 0) {
				snprintf(err, errlen, "annotation %shealthcheck-port=%s: not a port",
					 CCM_LB_ANN, port);
				return -EINVAL;
			}
			hc_port = p;
		}
		bool plain = strcasecmp(pr, "TCP") == 0 || strcasecmp(pr, "SSL") == 0;
		snprintf(s->hc.target, sizeof(s->hc.target), "%s:%lld%s", pr, hc_port,
			 plain ? "" : (path ? path : "/"));
	}
	for (char *c = s->hc.target; *c && *c != ':'; c++)
		*c = (char)toupper((unsigned char)*c);
	if (strncmp(s->hc.target, "TCP:", 4) != 0 && strncmp(s->hc.target, "SSL:", 4) != 0 &&
	    strncmp(s->hc.target, "HTTP:", 5) != 0 && strncmp(s->hc.target, "HTTPS:", 6) != 0) {
		snprintf(err, errlen, "annotation %shealthcheck-protocol=%s: not TCP, SSL, HTTP or "
				      "HTTPS",
			 CCM_LB_ANN, proto ? proto : "");
		return -EINVAL;
	}
	return 0;
}

static int parse_attrs(const cJSON *svc, struct ccm_lb_spec *s, char *err, size_t errlen)
{
	struct ccm_lb_attrs *a = &s->attrs;
	const char *v;
	int r;

	*a = (struct ccm_lb_attrs){.drain_timeout = 300, .idle_timeout = 60, .log_interval = 60};
	a->cross_zone = ann_true(ccm_lb_ann(svc, "cross-zone-load-balancing-enabled"));
	a->drain = ann_true(ccm_lb_ann(svc, "connection-draining-enabled"));
	a->log = ann_true(ccm_lb_ann(svc, "access-log-enabled"));
	if ((r = ann_int(svc, "connection-draining-timeout", 1, 3600, &a->drain_timeout, err,
			 errlen)) < 0 ||
	    (r = ann_int(svc, "connection-idle-timeout", 1, 4000, &a->idle_timeout, err, errlen)) <
		0 ||
	    (r = ann_int(svc, "access-log-emit-interval", 5, 60, &a->log_interval, err, errlen)) < 0)
		return r;
	if (a->log_interval != 5 && a->log_interval != 60) {
		snprintf(err, errlen, "annotation %saccess-log-emit-interval: 5 or 60", CCM_LB_ANN);
		return -EINVAL;
	}
	if ((v = ccm_lb_ann(svc, "access-log-s3-bucket-name")))
		str_copy(a->log_bucket, sizeof(a->log_bucket), v);
	if ((v = ccm_lb_ann(svc, "access-log-s3-bucket-prefix")))
		str_copy(a->log_prefix, sizeof(a->log_prefix), v);
	if (a->log && !a->log_bucket[0]) {
		snprintf(err, errlen, "annotation %saccess-log-enabled needs "
				      "%saccess-log-s3-bucket-name",
			 CCM_LB_ANN, CCM_LB_ANN);
		return -EINVAL;
	}
	return 0;
}

static int parse_ports(const cJSON *svc, struct ccm_lb_spec *s, char *err, size_t errlen)
{
	const cJSON *p;
	char first_proto[8] = "";

	cJSON_ArrayForEach(p, json_find(svc, "spec.ports"))
	{
		long long port = 0, np = 0;
		const char *proto = json_str(p, "protocol");
		if (!proto)
			proto = "TCP";
		if (!first_proto[0])
			str_copy(first_proto, sizeof(first_proto), proto);
		if (strcmp(proto, first_proto) != 0) {
			snprintf(err, errlen, "mixed protocol is not supported for LoadBalancer");
			return -EINVAL;
		}
		if (s->type == CCM_LB_CLASSIC && strcmp(proto, "TCP") != 0) {
			snprintf(err, errlen, "Only TCP LoadBalancer is supported for AWS ELB");
			return -EINVAL;
		}
		if (strcmp(proto, "SCTP") == 0) {
			snprintf(err, errlen, "Protocol SCTP not supported by LoadBalancer");
			return -EINVAL;
		}
		json_get_int(p, "port", &port);
		if (json_get_int(p, "nodePort", &np) < 0 || np <= 0)
			continue; /* upstream: "Ignoring port without NodePort defined" */
		if (s->n_l >= CCM_LB_MAX_PORTS) {
			snprintf(err, errlen, "more than %d ports", CCM_LB_MAX_PORTS);
			return -EINVAL;
		}
		int r = build_listener(svc, (int)port, (int)np, json_str(p, "name"), &s->l[s->n_l],
				       err, errlen);
		if (r < 0)
			return r;
		s->n_l++;
	}
	if (s->n_l == 0) {
		snprintf(err, errlen, "requested load balancer with no ports");
		return -EINVAL;
	}
	return 0;
}

int ccm_lb_spec_parse(const cJSON *svc, struct ccm_lb_spec *s, char *err, size_t errlen)
{
	const char *type = ccm_lb_ann(svc, "type"), *v;
	const char *ns = json_str(svc, "metadata.namespace"), *name = json_str(svc, "metadata.name");
	int r;

	memset(s, 0, sizeof(*s));
	if (!type || !*type)
		s->type = CCM_LB_CLASSIC;
	else if (strcmp(type, "nlb") == 0)
		s->type = CCM_LB_NLB;
	else if (strcmp(type, "none") == 0)
		s->type = CCM_LB_NONE;
	else if (strcmp(type, "nlb-ip") == 0 || strcmp(type, "external") == 0)
		return -ENOTSUP;
	else {
		snprintf(err, errlen, "annotation %stype=%s: not a known load balancer type",
			 CCM_LB_ANN, type);
		return -EINVAL;
	}
	ccm_lb_name(json_str(svc, "metadata.uid"), s->name);
	snprintf(s->svc, sizeof(s->svc), "%s/%s", ns ? ns : "", name ? name : "");
	if ((v = json_str(svc, "spec.loadBalancerIP")) && *v) {
		snprintf(err, errlen, "LoadBalancerIP cannot be specified for AWS ELB");
		return -EINVAL;
	}
	if ((v = json_str(svc, "spec.sessionAffinity")) && *v && strcmp(v, "None") != 0) {
		snprintf(err, errlen, "unsupported load balancer affinity: %s", v);
		return -EINVAL;
	}
	v = ccm_lb_ann(svc, "internal");
	s->internal = v && *v && strcmp(v, "false") != 0;
	v = json_str(svc, "spec.externalTrafficPolicy");
	s->local = v && strcmp(v, "Local") == 0;
	if ((r = parse_ports(svc, s, err, errlen)) < 0 || (r = parse_hc(svc, s, err, errlen)) < 0 ||
	    (r = parse_attrs(svc, s, err, errlen)) < 0 || (r = parse_ranges(svc, s, err, errlen)) < 0)
		return r;
	if ((v = ccm_lb_ann(svc, "proxy-protocol"))) {
		if (strcmp(v, "*") != 0) {
			snprintf(err, errlen,
				 "annotation %sproxy-protocol=%s detected, but the only value "
				 "supported currently is '*'",
				 CCM_LB_ANN, v);
			return -EINVAL;
		}
		s->proxy_protocol = true;
	}
	if (ccm_lb_split_kv(ccm_lb_ann(svc, "additional-resource-tags"), s->tags, CCM_LB_MAX_TAGS, &s->n_tags) <
	    0) {
		snprintf(err, errlen, "annotation %sadditional-resource-tags: not a list of "
				      "key=value",
			 CCM_LB_ANN);
		return -EINVAL;
	}
	if (ccm_lb_split_kv(ccm_lb_ann(svc, "target-node-labels"), s->node_labels, CCM_LB_MAX_LABELS,
		     &s->n_node_labels) < 0) {
		snprintf(err, errlen, "annotation %starget-node-labels: not a list of key=value",
			 CCM_LB_ANN);
		return -EINVAL;
	}
	if (ccm_lb_split_list(ccm_lb_ann(svc, "security-groups"), &s->sgs[0][0], 32, CCM_LB_MAX_SGS, &s->n_sgs) <
		0 ||
	    ccm_lb_split_list(ccm_lb_ann(svc, "extra-security-groups"), &s->extra_sgs[0][0], 32, CCM_LB_MAX_SGS,
		       &s->n_extra_sgs) < 0 ||
	    ccm_lb_split_list(ccm_lb_ann(svc, "subnets"), &s->subnets[0][0], 256, CCM_LB_MAX_SUBNETS,
		       &s->n_subnets) < 0) {
		snprintf(err, errlen, "annotation %s(extra-)security-groups or subnets: too many "
				      "or too long items",
			 CCM_LB_ANN);
		return -EINVAL;
	}
	for (size_t i = 0; i < s->n_sgs + s->n_extra_sgs; i++) {
		const char *g = i < s->n_sgs ? s->sgs[i] : s->extra_sgs[i - s->n_sgs];
		if (strncmp(g, "sg-", 3) != 0) {
			snprintf(err, errlen, "annotation %s(extra-)security-groups: %s is not a "
					      "security group ID",
				 CCM_LB_ANN, g);
			return -EINVAL;
		}
	}
	if (s->type == CCM_LB_NONE && s->n_extra_sgs) {
		snprintf(err, errlen, "annotation %sextra-security-groups is not supported for "
				      "NLB",
			 CCM_LB_ANN);
		return -EINVAL;
	}
	return 0;
}

/* Nodes -------------------------------------------------------------------------------- */

bool ccm_lb_node_eligible(const cJSON *node, const struct ccm_lb_spec *s, char *id, size_t n)
{
	const cJSON *labels = json_find(node, "metadata.labels"), *t;
	bool unsched = false;

	if (strcmp(ccm_node_ready_status(node), "True") != 0)
		return false;
	if (json_get_bool(node, "spec.unschedulable", &unsched) == 0 && unsched)
		return false;
	if (json_str_key(labels, CCM_LB_EXCLUDE_LABEL))
		return false;
	cJSON_ArrayForEach(t, json_find(node, "spec.taints"))
	{
		const char *k = json_str(t, "key");
		if (k && strcmp(k, CCM_TAINT_UNINITIALIZED) == 0)
			return false;
	}
	for (size_t i = 0; s && i < s->n_node_labels; i++) {
		const char *v = json_str_key(labels, s->node_labels[i].key);
		if (!v || strcmp(v, s->node_labels[i].value) != 0)
			return false;
	}
	const char *pid = json_str(node, "spec.providerID");
	return pid && *pid && ccm_parse_provider_id(pid, id, n) == 0;
}
