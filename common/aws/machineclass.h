/* The AWSMachineClass of a node group in one zone, as Deckhouse's machine-class template
 * renders it for machine-controller-manager, as a pure function of its inputs:
 *
 *   cJSON *mc;
 *   char err[256];
 *   r = aws_machineclass_render(&(struct aws_machineclass_in){
 *           .node_group = "worker", .cluster_uuid = uuid, .zone = "eu-central-1a",
 *           .cloud = aws,            // the "aws" key of d8-node-manager-cloud-provider
 *           .class_spec = spec },    // an AWSInstanceClass's .spec
 *       &mc, err, sizeof(err));
 *
 * The name is "<node group>-<first 8 hex digits of sha256(clusterUUID + zone)>", the namespace
 * d8-cloud-instance-manager. The spec: region, the class's AMI (else the cloud's
 * instances.ami), machineType, iam.name (instances.iamProfileName), keyName, one network
 * interface in the zone's subnet (internal.zoneToSubnetIdMap) with the security groups
 * instances.additionalSecurityGroups then the class's additionalSecurityGroups (each once) and
 * instances.associatePublicIPAddress, sourceDestCheck false, spotPrice "" for a spot class,
 * useMachineNameAsNodeName, the tags kubernetes.io/cluster/<uuid> and kubernetes.io/role/<uuid>
 * ("1") then the cloud's tags then the class's additionalTags (a later key wins), the root EBS
 * disk (diskSizeGb, default 20; diskType, default gp2; iops for io1/io2, required there) and
 * the secretRef of the node group's Secret.
 *
 * Errors, with a sentence naming the field in err: -EINVAL for a missing instanceType, no AMI
 * in the class or the cloud, a zone without a subnet, io1/io2 without iops, a value of the
 * wrong type, an unknown diskType or a size out of range; nothing is returned half-built. */
#pragma once
#include <cjson/cJSON.h>
#include <stddef.h>

#define AWS_MACHINECLASS_NAMESPACE "d8-cloud-instance-manager"
#define AWS_MACHINECLASS_DEFAULT_DISK_GB 20
#define AWS_MACHINECLASS_DEFAULT_DISK_TYPE "gp2"
#define AWS_MACHINECLASS_ROOT_DEVICE "/dev/xvda"

struct aws_machineclass_in {
	const char *node_group;
	const char *cluster_uuid;
	const char *zone;
	const cJSON *cloud;	 /* the node-manager Secret's "aws" object */
	const cJSON *class_spec; /* AWSInstanceClass .spec */
	const char *secret_name; /* NULL: the node group's name */
};

/* "<ng>-<sha256(uuid + zone)[:8]>" into out; -ENAMETOOLONG when it does not fit, -EINVAL for an
 * empty part. */
int aws_machineclass_name(const char *node_group, const char *cluster_uuid, const char *zone,
			  char *out, size_t n);
int aws_machineclass_render(const struct aws_machineclass_in *in, cJSON **ret, char *err,
			    size_t errlen);
