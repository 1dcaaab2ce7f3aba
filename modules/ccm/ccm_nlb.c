/* The NLB and `none` planner (see ccm_nlb.h). */
#include "modules/ccm/ccm_nlb.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/base/buf.h"
#include "common/base/json.h"

static void alnum(const char *s, char *out, size_t max)
{
	size_t k = 0;
	for (; s && *s && k + 1 < max; s++)
		if (isalnum((unsigned char)*s))
			out[k++] = *s;
	out[k] = 0;
}

/* hex of the digest md over parts into hex (2 * EVP_MAX_MD_SIZE + 1) */
static void digest_hex(const EVP_MD *md, const char *const *parts, size_t n, char *hex)
{
	unsigned char out[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	hex[0] = 0;
	if (ctx && EVP_DigestInit_ex(ctx, md, NULL)) {
		for (size_t i = 0; i < n; i++)
			EVP_DigestUpdate(ctx, parts[i], strlen(parts[i]));
		EVP_DigestFinal_ex(ctx, out, &len);
	}
	EVP_MD_CTX_free(ctx);
	for (unsigned int i = 0; i < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", out[i]);
}

void ccm_nlb_tg_name(const char *cluster_id, const char *ns, const char *name, int port,
		     int node_port, const char *tg_proto, const char *hc_proto,
		     long long hc_interval, char out[ELBV2_NAME_MAX])
{
	char p[16], np[16], iv[24], hex[2 * EVP_MAX_MD_SIZE + 1], a[9], b[9];
	const char *parts[] = {
	    cluster_id ? cluster_id : "", ns, name, p, np, tg_proto, "instance", hc_proto, iv};

	snprintf(p, sizeof(p), "%d", port);
	snprintf(np, sizeof(np), "%d", node_port);
	snprintf(iv, sizeof(iv), "%lld", hc_interval);
	digest_hex(EVP_sha1(), parts, sizeof(parts) / sizeof(parts[0]), hex);
	alnum(ns, a, sizeof(a));
	alnum(name, b, sizeof(b));
	snprintf(out, ELBV2_NAME_MAX, "k8s-%s-%s-%.10s", a, b, hex);
}

void ccm_nlb_sg_name(const char *cluster_id, const char *ns, const char *name, const char *uid,
		     char out[CCM_NLB_SG_NAME_MAX])
{
	char hex[2 * EVP_MAX_MD_SIZE + 1], a[9], b[9];
	const char *parts[] = {cluster_id ? cluster_id : "", name ? name : "", ns ? ns : "",
			       uid ? uid : ""};

	digest_hex(EVP_sha256(), parts, sizeof(parts) / sizeof(parts[0]), hex);
	alnum(ns, a, sizeof(a));
	alnum(name, b, sizeof(b));
	snprintf(out, CCM_NLB_SG_NAME_MAX, "k8s-%s-%s-%.10s", a, b, hex);
}

void ccm_none_tg_name(const char *lb_name, size_t index, char out[ELBV2_NAME_MAX])
{
	char suffix[24];
	int n = snprintf(suffix, sizeof(suffix), "%zu", index);
	int keep = 32 - 1 - n;
	snprintf(out, ELBV2_NAME_MAX, "%.*s-%s", keep, lb_name, suffix);
}

/* Health check ------------------------------------------------------------------------- */

static int parse_hc(const cJSON *svc, const struct ccm_lb_spec *s, struct elbv2_hc *hc,
		    char *err, size_t errlen)
{
	const char *proto = ccm_lb_ann(svc, "healthcheck-protocol");
	const char *port = ccm_lb_ann(svc, "healthcheck-port");
	const char *path = ccm_lb_ann(svc, "healthcheck-path");
	long long hc_port = 0, v;
	struct {
		const char *suffix;
		long long *dst, min, max;
	} ints[] = {
	    {"healthcheck-interval", &hc->interval, 5, 300},
	    {"healthcheck-timeout", &hc->timeout, 2, 120},
	    {"healthcheck-healthy-threshold", &hc->healthy, 2, 10},
	    {"healthcheck-unhealthy-threshold", &hc->unhealthy, 2, 10},
	};

	if (s->local) {
		json_get_int(svc, "spec.healthCheckNodePort", &hc_port);
		*hc = (struct elbv2_hc){.protocol = "HTTP", .path = "/healthz", .interval = 10,
					.timeout = 10, .healthy = 2, .unhealthy = 2};
		snprintf(hc->port, sizeof(hc->port), "%lld", hc_port);
	} else {
		*hc = (struct elbv2_hc){.protocol = "TCP", .port = "traffic-port", .path = "/",
					.interval = 30, .timeout = 10, .healthy = 3, .unhealthy = 3};
	}
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		const char *a = ccm_lb_ann(svc, ints[i].suffix);
		if (a && str_to_ll(a, ints[i].min, ints[i].max, ints[i].dst) < 0) {
			snprintf(err, errlen, "annotation %s%s=%s: not an integer in [%lld, %lld]",
				 CCM_LB_ANN, ints[i].suffix, a, ints[i].min, ints[i].max);
			return -EINVAL;
		}
	}
	if (proto) {
		if (strcasecmp(proto, "TCP") != 0 && strcasecmp(proto, "HTTP") != 0 &&
		    strcasecmp(proto, "HTTPS") != 0) {
			snprintf(err, errlen, "Unsupported health check protocol %s", proto);
			return -EINVAL;
		}
		snprintf(hc->protocol, sizeof(hc->protocol), "%s", proto);
		for (char *c = hc->protocol; *c; c++)
			*c = (char)toupper((unsigned char)*c);
	}
	if (port && strcmp(port, "traffic-port") != 0) {
		if (str_to_ll(port, 1, 65535, &v) < 0) {
			snprintf(err, errlen, "Invalid health check port '%s'", port);
			return -EINVAL;
		}
		snprintf(hc->port, sizeof(hc->port), "%lld", v);
	} else if (port) {
		snprintf(hc->port, sizeof(hc->port), "traffic-port");
	}
	if (path && str_copy(hc->path, sizeof(hc->path), path) < 0) {
		snprintf(err, errlen, "annotation %shealthcheck-path: too long", CCM_LB_ANN);
		return -EINVAL;
	}
	if (strcmp(hc->protocol, "TCP") == 0)
		hc->path[0] = 0;
	return 0;
}

bool ccm_nlb_hc_equal(const struct elbv2_hc *a, const struct elbv2_hc *b)
{
	bool tcp = strcmp(a->protocol, "TCP") == 0;
	return strcmp(a->protocol, b->protocol) == 0 && strcmp(a->port, b->port) == 0 &&
	       (tcp || strcmp(a->path, b->path) == 0) && a->interval == b->interval &&
	       a->timeout == b->timeout && a->healthy == b->healthy && a->unhealthy == b->unhealthy;
}

/* Ports, attributes, mappings ----------------------------------------------------------- */

static int parse_ports(const cJSON *svc, const struct ccm_lb_spec *s, const char *cluster_id,
		       struct ccm_nlb_spec *n, char *err, size_t errlen)
{
	const char *cert = ccm_lb_ann(svc, "ssl-cert"), *be = ccm_lb_ann(svc, "backend-protocol");
	const char *ssl_ports = ccm_lb_ann(svc, "ssl-ports");
	const char *ns = json_str(svc, "metadata.namespace"), *name = json_str(svc, "metadata.name");
	const cJSON *p;

	cJSON_ArrayForEach(p, json_find(svc, "spec.ports"))
	{
		long long port = 0, np = 0;
		const char *proto = json_str(p, "protocol");
		if (json_get_int(p, "nodePort", &np) < 0 || np <= 0)
			continue;
		json_get_int(p, "port", &port);
		if (n->n_p >= CCM_LB_MAX_PORTS)
			return -E2BIG;
		struct ccm_nlb_port *x = &n->p[n->n_p];
		*x = (struct ccm_nlb_port){.port = (int)port, .node_port = (int)np};
		str_copy(x->proto, sizeof(x->proto), proto && strcmp(proto, "UDP") == 0 ? "UDP" : "TCP");
		str_copy(x->tg_proto, sizeof(x->tg_proto), x->proto);
		if (strcmp(x->proto, "UDP") != 0 && cert && *cert &&
		    ccm_lb_in_ssl_ports(ssl_ports, x->port, json_str(p, "name"))) {
			str_copy(x->proto, sizeof(x->proto), "TLS");
			str_copy(x->cert, sizeof(x->cert), cert);
			if (be && strcmp(be, "ssl") == 0)
				str_copy(x->tg_proto, sizeof(x->tg_proto), "TLS");
		}
		if (s->type == CCM_LB_NONE && be && *be) {
			static const char *const map[][2] = {
			    {"tcp", "TCP"}, {"tls", "TLS"}, {"http", "HTTP"}, {"https", "HTTPS"}};
			const char *tp = NULL;
			for (size_t i = 0; i < 4 && !tp; i++)
				if (strcmp(be, map[i][0]) == 0)
					tp = map[i][1];
			if (!tp) {
				snprintf(err, errlen, "invalid backend protocol %sbackend-protocol=%s",
					 CCM_LB_ANN, be);
				return -EINVAL;
			}
			str_copy(x->tg_proto, sizeof(x->tg_proto), tp);
		}
		if (s->type == CCM_LB_NONE)
			ccm_none_tg_name(s->name, n->n_p, x->tg_name);
		else
			ccm_nlb_tg_name(cluster_id, ns ? ns : "", name ? name : "", x->port,
					x->node_port, x->tg_proto, n->hc.protocol, n->hc.interval,
					x->tg_name);
		n->n_p++;
	}
	return 0;
}

static int parse_tg_attrs(const cJSON *svc, const struct ccm_lb_spec *s, struct ccm_nlb_spec *n,
			  char *err, size_t errlen)
{
	const char *a = ccm_lb_ann(svc, "target-group-attributes");
	char items[8][128];
	size_t m = 0;

	if (s->proxy_protocol) {
		str_copy(n->tg_attrs[0].key, sizeof(n->tg_attrs[0].key), "proxy_protocol_v2.enabled");
		str_copy(n->tg_attrs[0].value, sizeof(n->tg_attrs[0].value), "true");
		n->n_tg_attrs = 1;
	}
	if (ccm_lb_split_list(a, &items[0][0], sizeof(items[0]), 8, &m) < 0)
		goto bad;
	for (size_t i = 0; i < m; i++) {
		char *eq = strchr(items[i], '=');
		if (!eq)
			goto bad;
		*eq = 0;
		const char *k = items[i], *v = eq + 1;
		if ((strcmp(k, "preserve_client_ip.enabled") != 0 &&
		     strcmp(k, "proxy_protocol_v2.enabled") != 0) ||
		    (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)) {
			snprintf(err, errlen,
				 "annotation %starget-group-attributes: %s=%s is not supported "
				 "(preserve_client_ip.enabled, proxy_protocol_v2.enabled: true or "
				 "false)",
				 CCM_LB_ANN, k, v);
			return -EINVAL;
		}
		size_t j = 0;
		while (j < n->n_tg_attrs && strcmp(n->tg_attrs[j].key, k) != 0)
			j++;
		if (j == n->n_tg_attrs) {
			if (j >= 2)
				goto bad;
			n->n_tg_attrs++;
		}
		str_copy(n->tg_attrs[j].key, sizeof(n->tg_attrs[j].key), k);
		str_copy(n->tg_attrs[j].value, sizeof(n->tg_attrs[j].value), v);
	}
	return 0;
bad:
	snprintf(err, errlen, "annotation %starget-group-attributes: not a list of key=value",
		 CCM_LB_ANN);
	return -EINVAL;
}

int ccm_nlb_spec_parse(const cJSON *svc, const struct ccm_lb_spec *s, const char *cluster_id,
		       struct ccm_nlb_spec *n, char *err, size_t errlen)
{
	const char *v;
	int r;

	memset(n, 0, sizeof(*n));
	if ((r = parse_hc(svc, s, &n->hc, err, errlen)) < 0)
		return r;
	if (s->type == CCM_LB_NONE) {
		/* Deckhouse: kube-proxy's healthz, or the Service's own for Local */
		str_copy(n->hc.protocol, sizeof(n->hc.protocol), "HTTP");
		str_copy(n->hc.path, sizeof(n->hc.path), "/healthz");
		if (!s->local)
			str_copy(n->hc.port, sizeof(n->hc.port), CCM_NONE_HC_PORT);
	}
	if ((r = parse_ports(svc, s, cluster_id, n, err, errlen)) < 0)
		return r;
	if ((r = parse_tg_attrs(svc, s, n, err, errlen)) < 0)
		return r;
	if ((v = ccm_lb_ann(svc, "ssl-negotiation-policy")))
		str_copy(n->ssl_policy, sizeof(n->ssl_policy), v);
	if (ccm_lb_split_list(ccm_lb_ann(svc, "eip-allocations"), &n->eips[0][0], 32,
			      CCM_LB_MAX_SUBNETS, &n->n_eips) < 0 ||
	    ccm_lb_split_list(ccm_lb_ann(svc, "private-ipv4-addresses"), &n->ips[0][0], 64,
			      CCM_LB_MAX_SUBNETS, &n->n_ips) < 0) {
		snprintf(err, errlen, "annotation %seip-allocations or private-ipv4-addresses: too "
				      "many or too long items",
			 CCM_LB_ANN);
		return -EINVAL;
	}
	for (size_t i = 0; i < n->n_eips; i++)
		if (strncmp(n->eips[i], "eipalloc-", 9) != 0) {
			snprintf(err, errlen, "annotation %seip-allocations: %s is not an allocation ID",
				 CCM_LB_ANN, n->eips[i]);
			return -EINVAL;
		}
	for (size_t i = 0; i < n->n_ips; i++) {
		struct in_addr a;
		if (inet_pton(AF_INET, n->ips[i], &a) != 1) {
			snprintf(err, errlen, "annotation %sprivate-ipv4-addresses: %s is not an "
					      "IPv4 address",
				 CCM_LB_ANN, n->ips[i]);
			return -EINVAL;
		}
	}
	if (n->n_eips && s->internal) {
		snprintf(err, errlen, "annotation %seip-allocations cannot be used with an internal "
				      "load balancer",
			 CCM_LB_ANN);
		return -EINVAL;
	}
	if (n->n_ips && !s->internal) {
		snprintf(err, errlen, "annotation %sprivate-ipv4-addresses is only for an internal "
				      "load balancer",
			 CCM_LB_ANN);
		return -EINVAL;
	}
	if (n->n_eips && n->n_ips) {
		snprintf(err, errlen, "annotations %seip-allocations and private-ipv4-addresses "
				      "cannot be used together",
			 CCM_LB_ANN);
		return -EINVAL;
	}
	return 0;
}

int ccm_nlb_check_mappings(const struct ccm_nlb_spec *n, bool internal, size_t n_subnets,
			   char *err, size_t errlen)
{
	if (n->n_eips && n->n_eips != n_subnets) {
		snprintf(err, errlen,
			 "error creating load balancer: Must have same number of EIP AllocationIDs "
			 "(%zu) and SubnetIDs (%zu)",
			 n->n_eips, n_subnets);
		return -EINVAL;
	}
	if (n->n_ips && n->n_ips != n_subnets) {
		snprintf(err, errlen,
			 "error creating load balancer: Must have same number of private IPv4 "
			 "addresses (%zu) and SubnetIDs (%zu)",
			 n->n_ips, n_subnets);
		return -EINVAL;
	}
	(void)internal;
	return 0;
}

/* Subnets of an existing load balancer ----------------------------------------------------- */

static const struct ccm_nlb_subnet *subnet_in(const struct ccm_nlb_subnet *s, size_t n,
					      const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s[i].id, id) == 0)
			return &s[i];
	return NULL;
}

enum ccm_nlb_subnets_verdict ccm_nlb_subnets_plan(const struct elbv2_lb *lb,
						  const struct ccm_nlb_subnet *want, size_t n_want,
						  bool named, struct ccm_nlb_subnet *ret,
						  size_t max, size_t *n_ret, char *why, size_t whylen)
{
	size_t n = 0, added = 0;

	for (size_t i = 0; i < lb->n_subnets; i++) {
		const struct ccm_nlb_subnet *w = subnet_in(want, n_want, lb->subnets[i]);
		const char *have_eip = lb->allocations[i], *have_ip = lb->private_ips[i];
		if (named && !w) {
			const char *by = NULL;
			for (size_t k = 0; k < n_want && !by; k++)
				if (lb->zones[i][0] && strcmp(want[k].az, lb->zones[i]) == 0)
					by = want[k].id;
			if (by)
				snprintf(why, whylen,
					 "zone %s has subnet %s, which cannot be replaced by %s",
					 lb->zones[i], lb->subnets[i], by);
			else
				snprintf(why, whylen, "subnet %s (%s) cannot be removed",
					 lb->subnets[i], lb->zones[i]);
			return CCM_NLB_SUBNETS_REFUSED;
		}
		if (named && strcmp(w->allocation, have_eip) != 0) {
			snprintf(why, whylen, "the elastic IP of subnet %s cannot be changed (%s, "
					      "wanted %s)",
				 lb->subnets[i], *have_eip ? have_eip : "none",
				 w->allocation[0] ? w->allocation : "none");
			return CCM_NLB_SUBNETS_REFUSED;
		}
		if (named && w->private_ip[0] && strcmp(w->private_ip, have_ip) != 0) {
			snprintf(why, whylen, "the private address of subnet %s cannot be changed "
					      "(%s, wanted %s)",
				 lb->subnets[i], *have_ip ? have_ip : "none", w->private_ip);
			return CCM_NLB_SUBNETS_REFUSED;
		}
		if (n < max) {
			ret[n] = (struct ccm_nlb_subnet){{0}};
			str_copy(ret[n].id, sizeof(ret[n].id), lb->subnets[i]);
			str_copy(ret[n].az, sizeof(ret[n].az), lb->zones[i]);
			str_copy(ret[n].allocation, sizeof(ret[n].allocation), have_eip);
			/* sent again only when it was asked for (AWS also lists the ones it chose) */
			if (w && w->private_ip[0])
				str_copy(ret[n].private_ip, sizeof(ret[n].private_ip), have_ip);
			n++;
		}
	}
	for (size_t k = 0; k < n_want; k++) {
		const char *taken = NULL;
		bool have = false;
		for (size_t i = 0; i < lb->n_subnets && !have; i++) {
			have = strcmp(lb->subnets[i], want[k].id) == 0;
			if (!taken && want[k].az[0] && strcmp(lb->zones[i], want[k].az) == 0)
				taken = lb->subnets[i];
		}
		if (have)
			continue;
		if (taken && named) {
			snprintf(why, whylen, "zone %s has subnet %s, which cannot be replaced by %s",
				 want[k].az, taken, want[k].id);
			return CCM_NLB_SUBNETS_REFUSED;
		}
		if (!taken && n < max) {
			ret[n++] = want[k];
			added++;
		}
	}
	*n_ret = n;
	return added ? CCM_NLB_SUBNETS_ADD : CCM_NLB_SUBNETS_SAME;
}

/* Node rules ----------------------------------------------------------------------------- */

static bool has_rule(const struct ccm_sg_perm *p, size_t n, const struct ccm_sg_perm *x)
{
	for (size_t i = 0; i < n; i++)
		if (ccm_sg_perm_equal(&p[i], x))
			return true;
	return false;
}

static void add_rule(struct ccm_sg_perm *ret, size_t *n, size_t max, const char *proto, int from,
		     int to, const char *cidr, const char *group, const char *kind,
		     const char *owner)
{
	struct ccm_sg_perm x = {.from = from, .to = to};
	str_copy(x.proto, sizeof(x.proto), proto);
	str_copy(x.cidr, sizeof(x.cidr), cidr ? cidr : "");
	str_copy(x.group, sizeof(x.group), group ? group : "");
	if (kind)
		snprintf(x.desc, sizeof(x.desc), "%s%s", kind, owner);
	if (*n < max && !has_rule(ret, *n, &x))
		ret[(*n)++] = x;
}

static const char *port_proto(const struct ccm_nlb_port *p)
{
	return strcmp(p->proto, "UDP") == 0 ? "udp" : "tcp";
}

size_t ccm_nlb_node_rules(const struct ccm_nlb_spec *n, const char *lb_name, const char *mtu_owner,
			  const char (*clients)[64], size_t n_clients, const char (*health)[64],
			  size_t n_health, struct ccm_sg_perm *ret, size_t max)
{
	size_t k = 0;
	long long hc_port = 0;
	bool traffic = str_to_ll(n->hc.port, 1, 65535, &hc_port) < 0;

	for (size_t c = 0; c < n_clients; c++)
		for (size_t i = 0; i < n->n_p; i++)
			add_rule(ret, &k, max, port_proto(&n->p[i]), n->p[i].node_port,
				 n->p[i].node_port, clients[c], NULL, CCM_NLB_RULE_CLIENT, lb_name);
	/* a health port whose client rule admits it from anywhere needs no health rule (as
	 * upstream, which adds none when the clients are 0.0.0.0/0 on the health ports): a 3-port
	 * NLB in 6 subnets would spend 18 of the group's 60 rules on them */
	size_t n_client_rules = k;
	for (size_t c = 0; c < n_health; c++)
		for (size_t i = 0; i < (traffic ? n->n_p : 1); i++) {
			int port = traffic ? n->p[i].node_port : (int)hc_port;
			struct ccm_sg_perm any = {.proto = "tcp", .from = port, .to = port,
						  .cidr = "0.0.0.0/0"};
			if (!has_rule(ret, n_client_rules, &any))
				add_rule(ret, &k, max, "tcp", port, port, health[c], NULL,
					 CCM_NLB_RULE_HEALTH, lb_name);
		}
	for (size_t c = 0; c < n_clients; c++)
		add_rule(ret, &k, max, "icmp", 3, 4, clients[c], NULL, CCM_NLB_RULE_MTU,
			 mtu_owner && *mtu_owner ? mtu_owner : "kubernetes");
	return k;
}

size_t ccm_nlb_node_rules_from(const struct ccm_nlb_spec *n, const char *lb_name, const char *group,
			       struct ccm_sg_perm *ret, size_t max)
{
	size_t k = 0;
	long long hc_port = 0;

	for (size_t i = 0; i < n->n_p; i++)
		add_rule(ret, &k, max, port_proto(&n->p[i]), n->p[i].node_port, n->p[i].node_port,
			 NULL, group, CCM_NLB_RULE_CLIENT, lb_name);
	if (str_to_ll(n->hc.port, 1, 65535, &hc_port) == 0) {
		struct ccm_sg_perm x = {.proto = "tcp", .from = (int)hc_port, .to = (int)hc_port};
		str_copy(x.group, sizeof(x.group), group);
		if (!has_rule(ret, k, &x))
			add_rule(ret, &k, max, "tcp", (int)hc_port, (int)hc_port, NULL, group,
				 CCM_NLB_RULE_HEALTH, lb_name);
	}
	return k;
}

size_t ccm_nlb_sg_rules(const struct ccm_nlb_spec *n, const char (*clients)[64], size_t n_clients,
			struct ccm_sg_perm *ret, size_t max)
{
	size_t k = 0;
	for (size_t c = 0; c < n_clients; c++) {
		for (size_t i = 0; i < n->n_p; i++)
			add_rule(ret, &k, max, port_proto(&n->p[i]), n->p[i].port, n->p[i].port,
				 clients[c], NULL, NULL, NULL);
		add_rule(ret, &k, max, "icmp", 3, 4, clients[c], NULL, NULL, NULL);
	}
	return k;
}

static bool desc_is(const struct ccm_sg_perm *p, const char *kind)
{
	return strncmp(p->desc, kind, strlen(kind)) == 0;
}

bool ccm_nlb_rule_ours(const struct ccm_sg_perm *p, const char *lb_name)
{
	const char *const kinds[] = {CCM_NLB_RULE_CLIENT, CCM_NLB_RULE_HEALTH, CCM_NLB_RULE_MTU};
	for (size_t i = 0; i < 3; i++)
		if (desc_is(p, kinds[i]) && strcmp(p->desc + strlen(kinds[i]), lb_name) == 0)
			return true;
	return false;
}

bool ccm_nlb_rule_stale(const struct ccm_sg_perm *p, const char *lb_name,
			const struct ccm_sg_perm *want, size_t n_want,
			const struct ccm_sg_perm *have, size_t n_have)
{
	if (has_rule(want, n_want, p))
		return false;
	if (!desc_is(p, CCM_NLB_RULE_MTU))
		return ccm_nlb_rule_ours(p, lb_name);
	for (size_t k = 0; k < n_have; k++)
		if (desc_is(&have[k], CCM_NLB_RULE_CLIENT) &&
		    !ccm_nlb_rule_ours(&have[k], lb_name) && p->cidr[0] &&
		    strcmp(have[k].cidr, p->cidr) == 0)
			return false;
	return true;
}
