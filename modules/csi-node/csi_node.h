/* aws-k8s csi-node: the EBS CSI node plugin (a DaemonSet on every node).
 *
 *   csi_node.c         flags and csi_node_main
 *   csi_node_meta.c    what the node reports about itself: instance id, zone, topology,
 *                      attach-limit inputs (metadata service, Kubernetes; EC2 opt-in)
 *   csi_node_grpc.c    the Node service over gRPC (the method table below)
 *   csi_node_service.c, csi_node_publish.c, csi_node_expand.c
 *                      the Node calls as plain C (csi_node_service.h)
 *   csi_node_mount.c, csi_node_device.c, csi_node_format.c, csi_node_exec.c,
 *   csi_node_limits.c  the pieces they are made of (csi_node_limits_table.c: the
 *                      instance types' attach limits, as data)
 *   csi_node_taint.c   removing the startup taint from the Node
 *   csi_node_nvme.c    the node's metrics: each volume's EBS NVMe statistics */
#pragma once
#include <cjson/cJSON.h>
#include <libxml/tree.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/base/flags.h"
#include "common/grpc/server.h"
#include "modules/csi-node/csi_node_format.h"
#include "modules/csi-node/csi_node_limits.h"

int csi_node_main(int argc, char **argv);


/* /csi.v1.Node/...; userdata is the struct csi_node. */
extern const struct rpc_method csi_node_methods[];

/* What the node knows about its instance. */
struct csi_node_meta {
	char *instance_id;
	char *instance_type;
	char *zone;
	char *zone_id;
	char *region;
	char *outpost_arn;
	int enis;   /* attached network interfaces; -1 unknown */
	char **bdm; /* metadata block-device-mapping as "key=device"; NULL unknown */
	/* Attachments the instance's own volumes take, as the metadata labeler counted them (its
	 * non-CSI volume count + 1 for the root volume); 0 unknown (then bdm decides). */
	int reserved;
};

void csi_node_meta_release(struct csi_node_meta *m);

struct aws_imds;
struct aws_client;
struct kube_client;

struct csi_node;
struct csi_kv;
struct csi_nvme_metrics;

/* csi-node's flags (CSI_COMMON_FLAGS, its own, LOG_FLAGS), for a command that serves the Node
 * service among others (ebs-csi-driver all) and parses a union of tables. */
extern const struct flag csi_node_flags[];

/* The node service made from the parsed flags: the instance's metadata (the sources asked in
 * order), the attach limit, the topology, and the struct csi_node that csi_node_methods
 * serve; aws is the client of the metadata service (NULL when none was needed).
 *
 *   struct csi_node_plugin p;
 *   if ((r = csi_node_plugin_init(&p, "csi-node")) == 0)
 *           ... serve csi_node_methods with p.node ...
 *   csi_node_plugin_release(&p);
 */
struct csi_node_plugin {
	struct csi_node_meta meta;
	struct aws_client *aws;
	struct csi_kv *topo;
	size_t n_topo;
	struct csi_node *node;
	struct csi_nvme_metrics *nvme; /* the EBS NVMe statistics in the metrics */
	/* With the counts of the metadata-labeler source: its client and Node, to read them again
	 * at each NodeGetInfo (csi_node.c); NULL otherwise. */
	struct kube_client *kc;
	const char *kube_node;
	pthread_mutex_t lock; /* guards meta's counts and limit */
	long long limit;      /* max_volumes_per_node */
};
/* 0, or the exit code after printing why (2 a bad flag value, 1 no node id or no memory).
 * Release p with csi_node_plugin_release in every case. */
int csi_node_plugin_init(struct csi_node_plugin *p, const char *component);
void csi_node_plugin_release(struct csi_node_plugin *p);

/* Fills the fields of m that are still unset from the instance metadata service. The values
 * are taken as served: check them with csi_node_meta_check. */
int csi_node_meta_from_imds(struct aws_imds *imds, struct csi_node_meta *m);
/* Fills the unset instance id, zone, zone id, region and instance type from the Kubernetes
 * Node object of node_name (spec.providerID "aws:///<zone>/<instance-id>", its zone, zone-id,
 * region and instance-type labels). A providerID that cannot be parsed is kept whole as the
 * instance id, so that csi_node_meta_check reports it. -ENODATA when there is no instance id. */
int csi_node_meta_from_kube(struct kube_client *kc, const char *node_name, struct csi_node_meta *m);
/* The same from a Node object already read (csi_node_get_node: GET /api/v1/nodes/<name>). */
int csi_node_meta_from_node(const cJSON *node, struct csi_node_meta *m);
int csi_node_get_node(struct kube_client *kc, const char *node_name, cJSON **ret);
/* The metadata-labeler source, as upstream's: the Node's values as csi_node_meta_from_node
 * takes them, plus the metadata labeler's counts (common/csi/labeler.h, labels prefixed with
 * driver): the unset enis, and reserved = the volume count + 1. When a count label is missing
 * (-ENODATA) or not a count (-EBADMSG), or the providerID names no instance, m is left as it
 * was (the source gives nothing, and the next one is asked), with the reason in why. */
int csi_node_meta_from_labeled_node(const cJSON *node, const char *driver,
				    struct csi_node_meta *m, char *why, size_t n);

/* The first malformed value of a metadata source: its field ("instance-id",
 * "availability-zone", "availability-zone-id", "region", "instance-type", "outpost-arn"), the
 * value as given, and what is wrong with it. */
struct csi_node_meta_fault {
	const char *field;
	const char *value;
	const char *problem;
};
/* Checks every value m has with the formats of common/aws/ids.h, and that the zone is in the
 * region when both are known: 0, or -EBADMSG with the first fault in *ret. */
int csi_node_meta_check(const struct csi_node_meta *m, struct csi_node_meta_fault *ret);
/* Moves into m the values of from that m does not have yet (from keeps the others). */
void csi_node_meta_merge(struct csi_node_meta *m, struct csi_node_meta *from);
/* Parses a providerID "aws:///us-east-1a/i-0abc" (or "aws:////i-0abc"). */
int csi_node_parse_provider_id(const char *provider_id, char *zone, size_t zlen, char *id,
			       size_t idlen);

/* The NodeGetInfo topology of m, exactly upstream's keys: topology.ebs.csi.aws.com/zone,
 * topology.kubernetes.io/zone, kubernetes.io/os, and on an outpost the four
 * topology.ebs.csi.aws.com/ outpost keys (region, partition, account-id, outpost-id); no zone
 * id (it would change the CSINode object's topology keys). Keys and values are malloc'd into
 * ret (free with csi_node_topology_free). */
int csi_node_topology(const struct csi_node_meta *m, struct csi_kv **ret, size_t *ret_n);
void csi_node_topology_free(struct csi_kv *kv, size_t n);

/* EC2 (only with --describe-instance-type): the attach-limit facts of an instance type
 * (DescribeInstanceTypes), and the parser of its reply (for tests). */
int csi_node_ec2_type_facts(struct aws_client *c, const char *instance_type,
			    struct csi_node_type_facts *ret);
int csi_node_parse_type_facts(const xmlNode *result, const char *instance_type,
			      struct csi_node_type_facts *ret);

/* The taint new nodes may carry until the node plugin runs (upstream's name). */
#define CSI_NODE_STARTUP_TAINT "ebs.csi.aws.com/agent-not-ready"

/* Starts removing the startup taint from node_name in the background (see csi_node_taint.c);
 * NULL when node_name is empty. csi_node_untaint_stop ends it (at shutdown) and frees it. */
struct csi_node_untaint;
struct csi_node_untaint *csi_node_untaint_start(const char *node_name, const char *driver);
void csi_node_untaint_stop(struct csi_node_untaint *u);

/* aws-k8s csi-node pre-stop-hook (csi_node_prestop.c): the DaemonSet's preStop hook. */
int csi_node_prestop_main(int argc, char **argv);
/* The JSON patch that removes the startup taint from a Node object: 1 and the patch (malloc'd)
 * in ret, 0 when the node has no such taint, -ENOMEM. */
int csi_node_untaint_patch(const cJSON *node, char **ret);
