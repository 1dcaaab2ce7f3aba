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

static const char *ann(const cJSON *svc, const char *suffix)
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
	const char *s = ann(svc, suffix);
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
static int split_list(const char *s, char *out, size_t width, size_t max, size_t *n)
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
static int split_kv(const char *s, struct ccm_lb_kv *out, size_t max, size_t *n)
{
	char items[CCM_LB_MAX_TAGS][400];
	size_t m;
	if (split_list(s, &items[0][0], sizeof(items[0]), max < CCM_LB_MAX_TAGS ? max : CCM_LB_MAX_TAGS,
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

static bool in_ssl_ports(const char *ssl_ports, int port, const char *name)
{
	char items[CCM_LB_MAX_PORTS][64];
	size_t n;
	if (!ssl_ports)
		return true; /* a certificate without ssl-ports: every port */
	if (split_list(ssl_ports, &items[0][0], sizeof(items[0]), CCM_LB_MAX_PORTS, &n) < 0)
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
	const char *cert = ann(svc, "ssl-cert"), *be = ann(svc, "backend-protocol");
	const char *proto = "TCP", *iproto = "TCP";

	*l = (struct ccm_lb_listener){.port = port, .node_port = node_port};
	if (cert && *cert && in_ssl_ports(ann(svc, "ssl-ports"), port, name)) {
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
		if (split_list(a, &s->ranges[0][0], 64, CCM_LB_MAX_RANGES, &s->n_ranges) < 0)
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
	const char *proto = ann(svc, "healthcheck-protocol"), *port = ann(svc, "healthcheck-port");
	const char *path = ann(svc, "healthcheck-path");
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
			const char *be = ann(svc, "backend-protocol");
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
	a->cross_zone = ann_true(ann(svc, "cross-zone-load-balancing-enabled"));
	a->drain = ann_true(ann(svc, "connection-draining-enabled"));
	a->log = ann_true(ann(svc, "access-log-enabled"));
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
	if ((v = ann(svc, "access-log-s3-bucket-name")))
		str_copy(a->log_bucket, sizeof(a->log_bucket), v);
	if ((v = ann(svc, "access-log-s3-bucket-prefix")))
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
	const char *type = ann(svc, "type"), *v;
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
	v = ann(svc, "internal");
	s->internal = v && *v && strcmp(v, "false") != 0;
	v = json_str(svc, "spec.externalTrafficPolicy");
	s->local = v && strcmp(v, "Local") == 0;
	if ((r = parse_ports(svc, s, err, errlen)) < 0 || (r = parse_hc(svc, s, err, errlen)) < 0 ||
	    (r = parse_attrs(svc, s, err, errlen)) < 0 || (r = parse_ranges(svc, s, err, errlen)) < 0)
		return r;
	if ((v = ann(svc, "proxy-protocol"))) {
		if (strcmp(v, "*") != 0) {
			snprintf(err, errlen,
				 "annotation %sproxy-protocol=%s detected, but the only value "
				 "supported currently is '*'",
				 CCM_LB_ANN, v);
			return -EINVAL;
		}
		s->proxy_protocol = true;
	}
	if (split_kv(ann(svc, "additional-resource-tags"), s->tags, CCM_LB_MAX_TAGS, &s->n_tags) <
	    0) {
		snprintf(err, errlen, "annotation %sadditional-resource-tags: not a list of "
				      "key=value",
			 CCM_LB_ANN);
		return -EINVAL;
	}
	if (split_kv(ann(svc, "target-node-labels"), s->node_labels, CCM_LB_MAX_LABELS,
		     &s->n_node_labels) < 0) {
		snprintf(err, errlen, "annotation %starget-node-labels: not a list of key=value",
			 CCM_LB_ANN);
		return -EINVAL;
	}
	if (split_list(ann(svc, "security-groups"), &s->sgs[0][0], 32, CCM_LB_MAX_SGS, &s->n_sgs) <
		0 ||
	    split_list(ann(svc, "extra-security-groups"), &s->extra_sgs[0][0], 32, CCM_LB_MAX_SGS,
		       &s->n_extra_sgs) < 0 ||
	    split_list(ann(svc, "subnets"), &s->subnets[0][0], 256, CCM_LB_MAX_SUBNETS,
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
	if (s->type != CCM_LB_CLASSIC && s->n_extra_sgs) {
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

/* Subnets ------------------------------------------------------------------------------ */

static void subnet_tags(const xmlNode *item, const char *cluster_id, struct ccm_subnet *s)
{
	bool any_cluster = false;
	for (xmlNode *t = aws_xml_list(item, "tagSet"); t; t = aws_xml_next(t)) {
		const char *k = aws_xml_text(t, "key"), *v = aws_xml_text(t, "value");
		if (!k)
			continue;
		if (strcmp(k, "Name") == 0 && v)
			str_copy(s->name, sizeof(s->name), v);
		else if (strcmp(k, CCM_LB_ROLE_ELB) == 0)
			s->role_elb = true;
		else if (strcmp(k, CCM_LB_ROLE_INTERNAL) == 0)
			s->role_internal = true;
		else if (strncmp(k, CCM_CLUSTER_TAG_PREFIX, strlen(CCM_CLUSTER_TAG_PREFIX)) == 0) {
			any_cluster = true;
			if (!cluster_id ||
			    strcmp(k + strlen(CCM_CLUSTER_TAG_PREFIX), cluster_id) == 0)
				s->cluster_tagged = true;
		}
	}
	s->other_cluster = any_cluster && !s->cluster_tagged;
}

/* The route table of a subnet: its explicit association, else the VPC's main table. */
static const xmlNode *table_of(const xmlNode *tables, const char *subnet)
{
	const xmlNode *main_t = NULL;
	for (xmlNode *t = aws_xml_list(tables, "routeTableSet"); t; t = aws_xml_next(t))
		for (xmlNode *a = aws_xml_list(t, "associationSet"); a; a = aws_xml_next(a)) {
			const char *sid = aws_xml_text(a, "subnetId"), *m = aws_xml_text(a, "main");
			if (sid && strcmp(sid, subnet) == 0)
				return t;
			if (m && strcmp(m, "true") == 0)
				main_t = t;
		}
	return main_t;
}

static bool table_public(const xmlNode *t)
{
	for (xmlNode *r = aws_xml_list(t, "routeSet"); r; r = aws_xml_next(r)) {
		const char *g = aws_xml_text(r, "gatewayId");
		if (g && strncmp(g, "igw", 3) == 0)
			return true;
	}
	return false;
}

int ccm_subnets_from_replies(const xmlNode *subnets, const xmlNode *tables,
			     const char *cluster_id, struct ccm_subnet **ret, size_t *ret_n)
{
	size_t n = aws_xml_count(subnets, "subnetSet"), k = 0;
	struct ccm_subnet *out = calloc(n + 1, sizeof(*out));

	if (!out)
		return -ENOMEM;
	for (xmlNode *it = aws_xml_list(subnets, "subnetSet"); it && k < n; it = aws_xml_next(it)) {
		struct ccm_subnet *s = &out[k];
		const char *id = aws_xml_text(it, "subnetId"), *az = aws_xml_text(it, "availabilityZone");
		if (!id || !az) {
			free(out);
			return -EBADMSG;
		}
		str_copy(s->id, sizeof(s->id), id);
		str_copy(s->az, sizeof(s->az), az);
		const char *vpc = aws_xml_text(it, "vpcId");
		str_copy(s->vpc, sizeof(s->vpc), vpc ? vpc : "");
		subnet_tags(it, cluster_id, s);
		const xmlNode *t = table_of(tables, id);
		s->public_ = t && table_public(t);
		k++;
	}
	*ret = out;
	*ret_n = k;
	return 0;
}

/* upstream's tie-break between two candidates of one zone: true when b beats a */
static bool subnet_better(const struct ccm_subnet *a, const struct ccm_subnet *b, bool internal)
{
	bool ra = internal ? a->role_internal : a->role_elb;
	bool rb = internal ? b->role_internal : b->role_elb;
	if (ra != rb)
		return rb;
	if (a->cluster_tagged != b->cluster_tagged)
		return b->cluster_tagged;
	return strcmp(b->id, a->id) < 0;
}

static int cmp_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

int ccm_lb_pick_subnets(const struct ccm_subnet *s, size_t n, const struct ccm_lb_spec *spec,
			char (*ret)[32], size_t max, size_t *ret_n, char *err, size_t errlen)
{
	const struct ccm_subnet *best[CCM_LB_MAX_SUBNETS] = {0};
	size_t nb = 0;

	if (spec->n_subnets) {
		for (size_t i = 0; i < spec->n_subnets; i++) {
			const struct ccm_subnet *f = NULL;
			for (size_t k = 0; k < n && !f; k++)
				if (strcmp(s[k].id, spec->subnets[i]) == 0 ||
				    strcmp(s[k].name, spec->subnets[i]) == 0)
					f = &s[k];
			if (!f) {
				snprintf(err, errlen, "subnet %s of annotation %ssubnets not found",
					 spec->subnets[i], CCM_LB_ANN);
				return -ENOENT;
			}
			if (nb < max && nb < CCM_LB_MAX_SUBNETS)
				best[nb++] = f;
		}
	} else {
		for (size_t k = 0; k < n; k++) {
			const struct ccm_subnet *c = &s[k];
			if (c->other_cluster || (!spec->internal && !c->public_))
				continue;
			size_t z = 0;
			while (z < nb && strcmp(best[z]->az, c->az) != 0)
				z++;
			if (z == nb) {
				if (nb < max && nb < CCM_LB_MAX_SUBNETS)
					best[nb++] = c;
			} else if (subnet_better(best[z], c, spec->internal)) {
				best[z] = c;
			}
		}
	}
	if (nb == 0) {
		snprintf(err, errlen, "could not find any suitable subnets for creating the %s "
				      "load balancer",
			 spec->internal ? "internal" : "internet-facing");
		return -ENOENT;
	}
	for (size_t i = 0; i < nb; i++)
		str_copy(ret[i], 32, best[i]->id);
	qsort(ret, nb, 32, cmp_id);
	*ret_n = nb;
	return 0;
}

/* Security group rules ------------------------------------------------------------------ */

size_t ccm_lb_sg_rules(const struct ccm_lb_spec *s, struct ccm_sg_perm *ret, size_t max)
{
	size_t n = 0;
	for (size_t r = 0; r < s->n_ranges; r++) {
		for (size_t i = 0; i < s->n_l && n < max; i++) {
			bool dup = false;
			for (size_t k = 0; k < i && !dup; k++)
				dup = s->l[k].port == s->l[i].port;
			if (dup)
				continue;
			ret[n] = (struct ccm_sg_perm){.proto = "tcp", .from = s->l[i].port,
						      .to = s->l[i].port};
			str_copy(ret[n++].cidr, 64, s->ranges[r]);
		}
		if (n < max) {
			ret[n] = (struct ccm_sg_perm){.proto = "icmp", .from = 3, .to = 4};
			str_copy(ret[n++].cidr, 64, s->ranges[r]);
		}
	}
	return n;
}

size_t ccm_sg_perms_parse(const xmlNode *group, struct ccm_sg_perm *ret, size_t max)
{
	size_t n = 0;
	for (xmlNode *p = aws_xml_list(group, "ipPermissions"); p; p = aws_xml_next(p)) {
		struct ccm_sg_perm base = {0};
		long long from = -1, to = -1;
		const char *proto = aws_xml_text(p, "ipProtocol");
		str_copy(base.proto, sizeof(base.proto), proto ? proto : "");
		aws_xml_int(p, "fromPort", &from);
		aws_xml_int(p, "toPort", &to);
		base.from = (int)from;
		base.to = (int)to;
		if (strcmp(base.proto, "-1") == 0)
			base.from = base.to = -1;
		for (xmlNode *r = aws_xml_list(p, "ipRanges"); r && n < max; r = aws_xml_next(r)) {
			ret[n] = base;
			str_copy(ret[n++].cidr, 64, aws_xml_text(r, "cidrIp") ?: "");
		}
		for (xmlNode *g = aws_xml_list(p, "groups"); g && n < max; g = aws_xml_next(g)) {
			ret[n] = base;
			str_copy(ret[n++].group, 32, aws_xml_text(g, "groupId") ?: "");
		}
	}
	return n;
}

bool ccm_sg_perm_equal(const struct ccm_sg_perm *a, const struct ccm_sg_perm *b)
{
	bool all = strcmp(a->proto, "-1") == 0;
	return strcmp(a->proto, b->proto) == 0 && (all || (a->from == b->from && a->to == b->to)) &&
	       strcmp(a->cidr, b->cidr) == 0 && strcmp(a->group, b->group) == 0;
}

/* The ELB as described ----------------------------------------------------------------- */

void ccm_elb_release(struct ccm_elb *e)
{
	if (!e)
		return;
	free(e->instances);
	*e = (struct ccm_elb){0};
}

static void copy_text(const xmlNode *n, const char *path, char *dst, size_t len)
{
	const char *t = aws_xml_text(n, path);
	str_copy(dst, len, t ? t : "");
}

int ccm_elb_parse(const xmlNode *m, struct ccm_elb *e)
{
	long long v;
	size_t k;

	*e = (struct ccm_elb){0};
	copy_text(m, "LoadBalancerName", e->name, sizeof(e->name));
	if (!e->name[0])
		return -EBADMSG;
	copy_text(m, "DNSName", e->dns, sizeof(e->dns));
	copy_text(m, "Scheme", e->scheme, sizeof(e->scheme));
	copy_text(m, "VPCId", e->vpc, sizeof(e->vpc));
	for (xmlNode *d = aws_xml_list(m, "ListenerDescriptions"); d && e->n_l < CCM_LB_MAX_PORTS;
	     d = aws_xml_next(d)) {
		xmlNode *l = aws_xml_child(d, "Listener");
		struct ccm_lb_listener *x = &e->l[e->n_l++];
		if (aws_xml_int(l, "LoadBalancerPort", &v) == 0)
			x->port = (int)v;
		if (aws_xml_int(l, "InstancePort", &v) == 0)
			x->node_port = (int)v;
		copy_text(l, "Protocol", x->proto, sizeof(x->proto));
		copy_text(l, "InstanceProtocol", x->iproto, sizeof(x->iproto));
		copy_text(l, "SSLCertificateId", x->cert, sizeof(x->cert));
		for (char *c = x->proto; *c; c++)
			*c = (char)toupper((unsigned char)*c);
		for (char *c = x->iproto; *c; c++)
			*c = (char)toupper((unsigned char)*c);
	}
	xmlNode *hc = aws_xml_child(m, "HealthCheck");
	copy_text(hc, "Target", e->hc.target, sizeof(e->hc.target));
	aws_xml_int(hc, "HealthyThreshold", &e->hc.healthy);
	aws_xml_int(hc, "UnhealthyThreshold", &e->hc.unhealthy);
	aws_xml_int(hc, "Timeout", &e->hc.timeout);
	aws_xml_int(hc, "Interval", &e->hc.interval);
	for (xmlNode *s = aws_xml_list(m, "Subnets"); s && e->n_subnets < CCM_LB_MAX_SUBNETS;
	     s = aws_xml_next(s))
		copy_text(s, NULL, e->subnets[e->n_subnets++], 32);
	for (xmlNode *s = aws_xml_list(m, "SecurityGroups"); s && e->n_sgs < CCM_LB_MAX_SGS;
	     s = aws_xml_next(s))
		copy_text(s, NULL, e->sgs[e->n_sgs++], 32);
	k = aws_xml_count(m, "Instances");
	if (k > CCM_LB_MAX_INSTANCES)
		return -E2BIG;
	if (!(e->instances = calloc(k + 1, sizeof(*e->instances))))
		return -ENOMEM;
	for (xmlNode *i = aws_xml_list(m, "Instances"); i; i = aws_xml_next(i))
		copy_text(i, "InstanceId", e->instances[e->n_instances++], 32);
	for (xmlNode *b = aws_xml_list(m, "BackendServerDescriptions"); b; b = aws_xml_next(b))
		if (aws_xml_int(b, "InstancePort", &v) == 0 && aws_xml_count(b, "PolicyNames") > 0)
			for (size_t i = 0; i < e->n_l; i++)
				if (e->l[i].node_port == v)
					e->proxy_ports[i] = true;
	return 0;
}

/* The plan ------------------------------------------------------------------------------ */

void ccm_elb_plan_release(struct ccm_elb_plan *p)
{
	if (!p)
		return;
	free(p->reg);
	free(p->dereg);
	*p = (struct ccm_elb_plan){0};
}

static bool listener_equal(const struct ccm_lb_listener *a, const struct ccm_lb_listener *b)
{
	return a->port == b->port && a->node_port == b->node_port &&
	       strcmp(a->proto, b->proto) == 0 && strcmp(a->iproto, b->iproto) == 0 &&
	       strcmp(a->cert, b->cert) == 0;
}

static bool in_ids(const char (*ids)[32], size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ids[i], id) == 0)
			return true;
	return false;
}

bool ccm_elb_plan_empty(const struct ccm_elb_plan *p)
{
	return !p->recreate && !p->n_del && !p->n_add && !p->hc && !p->n_attach && !p->n_detach &&
	       !p->sgs && !p->n_reg && !p->n_dereg;
}

int ccm_elb_plan_make(const struct ccm_lb_spec *spec, const struct ccm_elb *have,
		      const char (*subnets)[32], size_t n_subnets, const char (*sgs)[32],
		      size_t n_sgs, const char (*ids)[32], size_t n_ids, struct ccm_elb_plan *p)
{
	*p = (struct ccm_elb_plan){0};
	if (!(p->reg = calloc(n_ids + 1, sizeof(*p->reg))) ||
	    !(p->dereg = calloc(have->n_instances + 1, sizeof(*p->dereg)))) {
		ccm_elb_plan_release(p);
		return -ENOMEM;
	}
	p->recreate = strcmp(have->scheme, spec->internal ? "internal" : "internet-facing") != 0;
	/* listeners: a changed one is deleted and made again (by its port) */
	for (size_t i = 0; i < have->n_l; i++) {
		bool keep = false;
		for (size_t k = 0; k < spec->n_l && !keep; k++)
			keep = listener_equal(&have->l[i], &spec->l[k]);
		if (!keep)
			p->del_ports[p->n_del++] = have->l[i].port;
	}
	for (size_t k = 0; k < spec->n_l; k++) {
		bool found = false;
		for (size_t i = 0; i < have->n_l && !found; i++)
			found = listener_equal(&have->l[i], &spec->l[k]);
		if (!found)
			p->add[p->n_add++] = k;
	}
	p->hc = strcmp(have->hc.target, spec->hc.target) != 0 ||
		have->hc.healthy != spec->hc.healthy || have->hc.unhealthy != spec->hc.unhealthy ||
		have->hc.timeout != spec->hc.timeout || have->hc.interval != spec->hc.interval;
	for (size_t i = 0; i < n_subnets; i++)
		if (!in_ids(have->subnets, have->n_subnets, subnets[i]))
			str_copy(p->attach[p->n_attach++], 32, subnets[i]);
	for (size_t i = 0; i < have->n_subnets; i++)
		if (!in_ids(subnets, n_subnets, have->subnets[i]))
			str_copy(p->detach[p->n_detach++], 32, have->subnets[i]);
	p->sgs = n_sgs != have->n_sgs;
	for (size_t i = 0; i < n_sgs && !p->sgs; i++)
		p->sgs = !in_ids(have->sgs, have->n_sgs, sgs[i]);
	for (size_t i = 0; i < n_ids; i++)
		if (!in_ids(have->instances, have->n_instances, ids[i]) &&
		    !in_ids(p->reg, p->n_reg, ids[i]))
			str_copy(p->reg[p->n_reg++], 32, ids[i]);
	for (size_t i = 0; i < have->n_instances; i++)
		if (!in_ids(ids, n_ids, have->instances[i]))
			str_copy(p->dereg[p->n_dereg++], 32, have->instances[i]);
	return 0;
}
