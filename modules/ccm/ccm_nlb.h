/* The service controller's pure part for network load balancers (aws-load-balancer-type nlb)
 * and Deckhouse's target-group-only type `none`: the listeners and target groups a Service
 * asks for (one instance target group per port, on its NodePort), their health check, names
 * as upstream makes them (so existing ones are adopted), attributes, EIP and private-address
 * mappings, and the node security-group rules. Nothing here makes a call; ccm_svc_nlb.c acts. */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/aws/elbv2.h"
#include "modules/ccm/ccm_lb.h"

#define CCM_NLB_RULE_CLIENT "kubernetes.io/rule/nlb/client="
#define CCM_NLB_RULE_HEALTH "kubernetes.io/rule/nlb/health="
#define CCM_NLB_RULE_MTU "kubernetes.io/rule/nlb/mtu="
#define CCM_NONE_HC_PORT "10256" /* kube-proxy's healthz */

struct ccm_nlb_port {
	int port, node_port;
	char proto[8];	  /* the listener's: TCP, UDP, TLS */
	char tg_proto[8]; /* the target group's: TCP, UDP, TLS (none: also HTTP, HTTPS) */
	char cert[2048];  /* TLS listeners */
	char tg_name[ELBV2_NAME_MAX];
};

struct ccm_nlb_spec {
	struct ccm_nlb_port p[CCM_LB_MAX_PORTS];
	size_t n_p;
	struct elbv2_hc hc;
	char ssl_policy[128];
	char eips[CCM_LB_MAX_SUBNETS][32];
	size_t n_eips;
	char ips[CCM_LB_MAX_SUBNETS][64];
	size_t n_ips;
	struct ccm_lb_kv tg_attrs[2]; /* preserve_client_ip.enabled, proxy_protocol_v2.enabled */
	size_t n_tg_attrs;
};

/* Reads what an NLB (or `none`) Service asks for beyond s (already parsed): -EINVAL with the
 * reason in err when upstream rejects it. cluster_id goes into the target-group names. */
int ccm_nlb_spec_parse(const cJSON *svc, const struct ccm_lb_spec *s, const char *cluster_id,
		       struct ccm_nlb_spec *ret, char *err, size_t errlen);
/* upstream's k8s-<ns:8>-<name:8>-<sha1(cluster, ns, name, port, nodePort, protocol,
 * "instance", hc protocol, hc interval):10>, ns and name without non-alphanumerics. */
void ccm_nlb_tg_name(const char *cluster_id, const char *ns, const char *name, int port,
		     int node_port, const char *tg_proto, const char *hc_proto,
		     long long hc_interval, char out[ELBV2_NAME_MAX]);
/* Deckhouse's name for `none`: the load balancer's name cut to 31 - len(index), "-", index. */
void ccm_none_tg_name(const char *lb_name, size_t index, char out[ELBV2_NAME_MAX]);
/* The mapping's count check: EIPs only internet-facing, private addresses only internal, and
 * as many as subnets. 0, or -EINVAL with err. */
int ccm_nlb_check_mappings(const struct ccm_nlb_spec *n, bool internal, size_t n_subnets,
			   char *err, size_t errlen);
/* One subnet of a network load balancer: its ID and zone, and the EIP allocation or private
 * address it is given ("" for none). */
struct ccm_nlb_subnet {
	char id[32];
	char az[64];
	char allocation[32];
	char private_ip[64];
};
enum ccm_nlb_subnets_verdict {
	CCM_NLB_SUBNETS_SAME,	 /* nothing to change */
	CCM_NLB_SUBNETS_ADD,	 /* SetSubnets with ret */
	CCM_NLB_SUBNETS_REFUSED, /* AWS cannot do it in place: why says what */
};
/* What becomes of an existing NLB's subnets (lb) when want is wanted. AWS adds subnets in new
 * zones (SetSubnets names every subnet the load balancer has, as it has it, and the new ones)
 * but cannot remove one, replace a zone's subnet, or change a subnet's EIP or private address.
 * named: the subnets, eip-allocations or private-ipv4-addresses annotation chose want, and
 * what cannot be done is refused; otherwise (discovered subnets) only new zones are added and a
 * different choice in a zone the load balancer has is left as it is. ret (at most max) holds
 * the subnets the load balancer has afterwards, in every case but a refusal. */
enum ccm_nlb_subnets_verdict ccm_nlb_subnets_plan(const struct elbv2_lb *lb,
						  const struct ccm_nlb_subnet *want, size_t n_want,
						  bool named, struct ccm_nlb_subnet *ret,
						  size_t max, size_t *n_ret, char *why, size_t whylen);
/* The health check fields AWS lets us change in place are equal. */
bool ccm_nlb_hc_equal(const struct elbv2_hc *a, const struct elbv2_hc *b);
/* The node rules: each NodePort from each client CIDR (client), the health-check port from
 * each health CIDR (health, skipped where a client rule already admits it), ICMP 3/4 from
 * each client CIDR (mtu); client and health rules described "kubernetes.io/rule/nlb/<kind>=<lb
 * name>", the mtu rules "kubernetes.io/rule/nlb/mtu=<mtu_owner>" (the cluster: one rule serves
 * every NLB whose clients come from that CIDR, see ccm_nlb_rule_stale). */
size_t ccm_nlb_node_rules(const struct ccm_nlb_spec *n, const char *lb_name, const char *mtu_owner,
			  const char (*clients)[64], size_t n_clients, const char (*health)[64],
			  size_t n_health, struct ccm_sg_perm *ret, size_t max);
/* NLBSecurityGroupMode = Managed: the node rules admit the load balancer's group (group): each
 * NodePort (client) and a health-check port of its own (health), described as above; no mtu
 * rule (ICMP reaches the load balancer's group, see ccm_nlb_sg_rules). */
size_t ccm_nlb_node_rules_from(const struct ccm_nlb_spec *n, const char *lb_name, const char *group,
			       struct ccm_sg_perm *ret, size_t max);
/* The rule carries one of our descriptions for lb_name. */
bool ccm_nlb_rule_ours(const struct ccm_sg_perm *p, const char *lb_name);
/* A rule of a node group (have: all its rules) that the NLB lb_name, which wants want there,
 * must revoke: its own client or health rule it no longer wants; an mtu rule (whoever's name it
 * carries: upstream names the NLB that made it first) it does not want and no other NLB's client
 * rule from the same CIDR needs either. Anything else is left alone. */
bool ccm_nlb_rule_stale(const struct ccm_sg_perm *p, const char *lb_name,
			const struct ccm_sg_perm *want, size_t n_want,
			const struct ccm_sg_perm *have, size_t n_have);
/* The managed group of an NLB (NLBSecurityGroupMode = Managed), named as the AWS Load Balancer
 * Controller names one for a Service: k8s-<ns:8>-<name:8>-<sha256(cluster, name, ns, uid):10>,
 * ns and name without non-alphanumerics. */
#define CCM_NLB_SG_NAME_MAX 64
void ccm_nlb_sg_name(const char *cluster_id, const char *ns, const char *name, const char *uid,
		     char out[CCM_NLB_SG_NAME_MAX]);
/* The ingress of the managed group: each listener port (tcp, or udp) from each client CIDR,
 * and ICMP 3/4 (path MTU discovery) from each. */
size_t ccm_nlb_sg_rules(const struct ccm_nlb_spec *n, const char (*clients)[64], size_t n_clients,
			struct ccm_sg_perm *ret, size_t max);
