/* The ccm's view of EC2 and of Nodes, as pure functions over the instances common/aws/ec2.h
 * parses from DescribeInstances: provider IDs, cluster tags, matching a Node to an instance, the
 * node addresses and labels an instance gives, and the node-lifecycle decision. Nothing here makes
 * a call; everything is unit-tested on recorded replies (tests/data/ccm/). */
#pragma once
#include <cjson/cJSON.h>
#include <libxml/tree.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/aws/ec2.h"

#define CCM_TAINT_UNINITIALIZED "node.cloudprovider.kubernetes.io/uninitialized"
#define CCM_TAINT_SHUTDOWN "node.cloudprovider.kubernetes.io/shutdown"
#define CCM_CLUSTER_TAG_PREFIX "kubernetes.io/cluster/"
#define CCM_CLUSTER_TAG_LEGACY "KubernetesCluster"
#define CCM_ANNOTATION_PROVIDED_IP "alpha.kubernetes.io/provided-node-ip"

#define CCM_LABEL_ZONE "topology.kubernetes.io/zone"
#define CCM_LABEL_REGION "topology.kubernetes.io/region"
#define CCM_LABEL_INSTANCE_TYPE "node.kubernetes.io/instance-type"
#define CCM_LABEL_ZONE_BETA "failure-domain.beta.kubernetes.io/zone"
#define CCM_LABEL_REGION_BETA "failure-domain.beta.kubernetes.io/region"
#define CCM_LABEL_INSTANCE_TYPE_BETA "beta.kubernetes.io/instance-type"
#define CCM_LABEL_ZONE_ID "topology.k8s.aws/zone-id"

/* providerID: aws:///<zone>/<id>, aws:////<id>, or a bare <id> (upstream's parser: the last
 * of one or two path tokens, which must match ^i-[^/]*$). -EINVAL otherwise; -ENOTSUP for a
 * provider ID of another provider or a Fargate node ("static://...", "fargate-..."), which
 * the ccm leaves alone. */
int ccm_parse_provider_id(const char *provider_id, char *ret_id, size_t n);
/* "aws:///<zone>/<id>" */
int ccm_format_provider_id(const char *zone, const char *id, char *buf, size_t n);
/* A node name that is an instance ID (resource-based naming): "i-0abc" or "i-0abc.ec2.internal"
 * (cut at the first dot). -ENOENT when the name does not start with "i-". */
int ccm_instance_id_from_node_name(const char *name, char *ret_id, size_t n);

/* Cluster tags. */
/* The cluster ID in a set of tags: kubernetes.io/cluster/<id> (any value) or the legacy
 * KubernetesCluster=<id>. -ENOENT when there is none; -ENOTUNIQ for several different IDs
 * (upstream's "found multiple cluster tags" / "ClusterID tags did not match"). *ret points
 * into the tags. */
int ccm_cluster_id_from_tags(const struct ec2_tag *tags, size_t n, const char **ret);
/* upstream hasClusterTag: the key kubernetes.io/cluster/<id>, or KubernetesCluster=<id>. An
 * empty or NULL cluster ID matches everything (untagged mode). */
bool ccm_tags_have_cluster(const struct ec2_tag *tags, size_t n, const char *cluster_id);
/* "owned": kubernetes.io/cluster/<id>=owned, or the legacy tag. */
bool ccm_tags_cluster_owned(const struct ec2_tag *tags, size_t n, const char *cluster_id);

/* Instance states. */
/* Upstream's "alive" filter for name lookups: every state but terminated. */
extern const char *const ccm_alive_states[5];
/* InstanceExists: false only for a missing instance or state terminated (or no state). */
bool ccm_instance_exists(const struct ec2_instance *i);
/* InstanceShutdown: true only for state stopped (stopping and shutting-down are not). */
bool ccm_instance_shutdown(const struct ec2_instance *i);

/* Matching a Node to one instance among candidates (the results of the lookups):
 * first by instance ID (providerID or an i- name), else by PrivateDnsName == node name
 * (alive and cluster-tagged), else by the Name tag == node name (Deckhouse's fallback; alive
 * and cluster-tagged). Returns the index, -ENOENT when nothing matches, -ENOTUNIQ when several
 * instances match at the first level that matches. */
struct ccm_node_ref {
	const char *name;
	const char *provider_id; /* NULL or "" */
};
enum ccm_match_kind { CCM_MATCH_ID, CCM_MATCH_PRIVATE_DNS, CCM_MATCH_NAME_TAG };
int ccm_match_instance(const struct ccm_node_ref *node, const struct ec2_instance *cands, size_t n,
		       const char *cluster_id, enum ccm_match_kind *ret_kind);
/* The instance ID to look up by ID for a node (providerID or an i- name): 0 with the ID,
 * -ENOENT when the node must be found by name, -ENOTSUP for a foreign providerID, -EINVAL for
 * an aws:// one that does not parse. */
int ccm_node_lookup_id(const struct ccm_node_ref *node, char *ret_id, size_t n);

/* Addresses: a cJSON array of {type, address} as core/v1 NodeAddress, in upstream's order:
 * for each family of NodeIPFamilies in order, ipv4: InternalIP for every private IP of every
 * in-use ENI by device index (or PrivateIpAddress without ENIs), ExternalIP, InternalDNS and
 * Hostname (PrivateDnsName), ExternalDNS; ipv6: the first IPv6 of every in-use ENI as
 * InternalIP. -EINVAL for an address that does not parse. */
int ccm_instance_addresses(const struct ec2_instance *i, char *const *families, cJSON **ret);
/* The kubelet's --node-ip (annotation alpha.kubernetes.io/provided-node-ip, one IP or two
 * comma-separated for dual-stack): the addresses are reordered as upstream's
 * GetNodeAddressesFromNodeIP does (the matching address first and the only one of its type).
 * -ENOENT (upstream: "failed to get node address from cloud provider that matches ip") when
 * an IP is not among the addresses; -EINVAL for a bad annotation. Takes ownership of addrs. */
int ccm_addresses_prefer_node_ip(cJSON *addrs, const char *provided, cJSON **ret);
/* Keeps a Hostname address the node had when the cloud gives none (upstream). */
int ccm_addresses_keep_hostname(cJSON *addrs, const cJSON *old_addrs);
/* True when two address lists differ (order matters, as upstream compares). */
bool ccm_addresses_differ(const cJSON *a, const cJSON *b);

/* The region of a zone: the leading ([a-zA-Z]+-)+[0-9]+ of it ("us-west-2-lax-1a" ->
 * "us-west-2"). -EINVAL when the zone has no such prefix. */
int ccm_zone_to_region(const char *zone, char *buf, size_t n);
/* The labels for an instance: a cJSON object of the GA and beta zone/region/instance-type
 * labels and topology.k8s.aws/zone-id (zone_id may be NULL). region NULL: from the zone. */
int ccm_instance_labels(const struct ec2_instance *i, const char *region, const char *zone_id,
			cJSON **ret);

/* Node helpers over the JSON of a core/v1 Node. */
bool ccm_node_has_taint(const cJSON *node, const char *key);
/* Ready condition status: "True", "False", "Unknown" (no condition: "Unknown"). */
const char *ccm_node_ready_status(const cJSON *node);

/* The node-lifecycle decision for one Node. */
enum ccm_lifecycle_action {
	CCM_LC_NONE,
	CCM_LC_DELETE,		/* NotReady and the instance no longer exists */
	CCM_LC_ADD_SHUTDOWN,	/* NotReady and the instance is stopped, no taint yet */
	CCM_LC_REMOVE_SHUTDOWN, /* Ready with the shutdown taint */
};
/* ready: the node's Ready condition is True. exists/shutdown: as the cloud answered (only
 * consulted when !ready). */
enum ccm_lifecycle_action ccm_lifecycle_decide(bool ready, bool has_shutdown_taint, bool exists,
					       bool shutdown);
const char *ccm_lifecycle_action_name(enum ccm_lifecycle_action a);
