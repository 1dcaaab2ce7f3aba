/* The ccm's AWS side: one AWS client (common/aws) configured from the cloud config, instance
 * lookups, zones, route tables and routes. Every function is a plain blocking call, safe from
 * several threads. The call budget is the point of this file:
 *
 *   - instances by ID: one ID goes through the batching helper (so concurrent single asks from
 *     different controllers merge), several go out as DescribeInstances with an instance-id
 *     filter of up to CCM_DESCRIBE_CHUNK IDs per call (unknown IDs are simply absent);
 *   - instances by name: DescribeInstances filtered on private-dns-name for names with a dot
 *     (a private DNS name is always fully qualified), then on tag:Name for the names without
 *     one and those that did not match, up to CCM_DESCRIBE_CHUNK names per call, live states
 *     only; the cluster-tag check is the caller's (ccm_match_instance);
 *   - never an unfiltered DescribeInstances;
 *   - route tables: one DescribeRouteTables per pass (by ID when [Global] RouteTableID is set,
 *     else filtered on the cluster tag keys);
 *   - zone IDs: one DescribeAvailabilityZones, again only for a zone it has not seen (at most
 *     every 10 minutes). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/aws/client.h"
#include "modules/ccm/ccm_config.h"
#include "modules/ccm/ccm_model.h"
#include "modules/ccm/ccm_routes.h"

#define CCM_DESCRIBE_CHUNK 100

struct ccm_cloud;

struct ccm_cloud_opts {
	const struct ccm_config *cfg;
	/* tests and debugging: batching window (0: the helper's default) */
	int64_t batch_window_ns;
};

/* Creates the AWS client: region from [Global] Region, else the SDK chain (AWS_REGION...,
 * then the metadata service); [Global] RoleARN/SourceARN assumed on top of the credential
 * chain; [ServiceOverride] sections applied for that region. A sentence goes to err. */
int ccm_cloud_new(const struct ccm_cloud_opts *o, struct ccm_cloud **ret, char *err, size_t errlen);
void ccm_cloud_free(struct ccm_cloud *c);
struct aws_client *ccm_cloud_client(struct ccm_cloud *c);
/* The region ("" before it is known and when it cannot be found). */
const char *ccm_cloud_region(struct ccm_cloud *c);

/* The cluster ID: the configured one, else the cluster tag of the instance this process runs
 * on (metadata instance-id, then DescribeInstances). -ENOENT when there is none, -ENOTUNIQ
 * for several; err says which. */
int ccm_cloud_cluster_id(struct ccm_cloud *c, const char *configured, char **ret, char *err,
			 size_t errlen);

/* Instances by ID: the ones AWS knows are appended to *list (release each with
 * ec2_instance_release, then free the array). */
int ccm_cloud_describe_ids(struct ccm_cloud *c, const char *const *ids, size_t n,
			   struct ec2_instance **list, size_t *list_n, struct aws_error *err);
/* Live instances whose private DNS name or Name tag is one of names. */
int ccm_cloud_find_by_names(struct ccm_cloud *c, const char *const *names, size_t n,
			    struct ec2_instance **list, size_t *list_n, struct aws_error *err);
void ccm_instances_free(struct ec2_instance *list, size_t n);

/* The zone ID of a zone name ("use1-az6"), from a cached DescribeAvailabilityZones. -ENOENT
 * when AWS does not know the zone. */
int ccm_cloud_zone_id(struct ccm_cloud *c, const char *zone, char *buf, size_t n);

/* Routes. */
/* The cluster's route tables: [Global] RouteTableID (one or a comma-separated list), else
 * every table tagged for cluster_id (kubernetes.io/cluster/<id> or KubernetesCluster=<id>). */
int ccm_cloud_route_tables(struct ccm_cloud *c, const char *cluster_id,
			   struct ccm_route_table **ret, size_t *ret_n, struct aws_error *err);
/* CreateRoute (replace false) or ReplaceRoute to the instance, or to its primary network
 * interface when it has several (routing by InstanceId fails then). */
int ccm_cloud_put_route(struct ccm_cloud *c, const char *table, const char *cidr, bool v6,
			const struct ec2_instance *target, bool replace, struct aws_error *err);
/* DeleteRoute; a route already gone is success. */
int ccm_cloud_delete_route(struct ccm_cloud *c, const char *table, const char *cidr, bool v6,
			   struct aws_error *err);
/* Turns the source/destination check off (ModifyInstanceAttribute, or
 * ModifyNetworkInterfaceAttribute on the primary interface when there are several); nothing
 * is called when the description says it is already off. Returns 1 when a call was made. */
int ccm_cloud_disable_src_dst_check(struct ccm_cloud *c, const struct ec2_instance *i,
				    struct aws_error *err);
/* The interface routes to i should target: its primary ENI's ID when i has several ENIs,
 * else NULL (route by instance ID). */
const char *ccm_route_target_eni(const struct ec2_instance *i);
