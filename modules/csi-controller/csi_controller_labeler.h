/* `aws-k8s ebs-csi-driver metadataLabeler` (csi_controller_labeler.c): the upstream driver's
 * metadataLabeler mode, the controller Deployment's metadata-labeler sidecar. It labels every
 * Node of an EC2 instance with its network interfaces and its EBS volumes that no
 * PersistentVolume stands for (common/csi/labeler.h), so that csi-node's metadata-labeler
 * source computes the attach limit with no metadata service and no EC2 call of its own.
 *
 * What the tests reach: the counting rule, on one instance item of a DescribeInstances reply,
 * and which PersistentVolumes it leaves out. */
#pragma once
#include <cjson/cJSON.h>
#include <libxml/tree.h>
#include <stdbool.h>

#include "common/csi/labeler.h"

int csi_labeler_main(int argc, char **argv);

/* The EBS volume a PersistentVolume stands for: spec.csi.volumeHandle when spec.csi.driver is
 * driver (any CSI driver when driver is NULL), or the vol- id an in-tree
 * spec.awsElasticBlockStore.volumeID ends with ("vol-1", "aws://us-east-1a/vol-1"); NULL for
 * any other PersistentVolume. Points into pv. */
const char *csi_labeler_pv_volume(const cJSON *pv, const char *driver);

/* Answers whether a volume id is the volume of a PersistentVolume (left out of the count). */
typedef bool (*csi_labeler_is_pv_fn)(void *ud, const char *volume_id);

/* The counts of one instance <item> of a DescribeInstances reply, upstream's rule: enis is the
 * number of networkInterfaceSet items (1 when there is none); volumes is the number of
 * blockDeviceMapping items whose ebs/volumeId is_pv does not claim, less one for the root
 * volume (0 when the instance has no mapping; never below 0). -EBADMSG without an
 * instanceId. */
int csi_labeler_count_instance(const xmlNode *item, csi_labeler_is_pv_fn is_pv, void *ud,
			       struct csi_labeler_counts *ret);
