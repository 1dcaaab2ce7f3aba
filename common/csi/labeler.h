/* The metadata-labeler's Node labels, as upstream's (aws-ebs-csi-driver pkg/cloud/metadata):
 * the controller's labeler (`ebs-csi-driver metadataLabeler`) writes them, csi-node's
 * metadata-labeler source and csi-controller's region lookup read them. A key is the driver
 * name and a suffix: ebs.csi.aws.com/enis-count (the instance's network interfaces) and
 * ebs.csi.aws.com/non-csi-ebs-volumes-count (its EBS volumes that are not the volume of a
 * PersistentVolume of the driver, nor an in-tree awsElasticBlockStore one, less the root).
 *
 *   struct csi_labeler_counts k;
 *   char why[256];
 *   if (csi_labeler_counts_of_node(node, "ebs.csi.aws.com", &k, why, sizeof(why)) < 0)
 *           ... the source fails: why names the label and its value ...
 */
#pragma once
#include <cjson/cJSON.h>
#include <stddef.h>

#define CSI_LABEL_ENIS "/enis-count"
#define CSI_LABEL_VOLUMES "/non-csi-ebs-volumes-count"
/* A label key: the driver name (a DNS subdomain, at most 253 characters) and a suffix. */
#define CSI_LABEL_KEY_MAX 320
/* The largest count either label may hold (an instance has at most a few hundred). */
#define CSI_LABEL_MAX_COUNT 1000

struct csi_labeler_counts {
	int enis;    /* at least 1 when written by the labeler */
	int volumes; /* non-CSI EBS volumes besides the root volume */
};

/* driver + suffix into buf: 0, or -ENAMETOOLONG. */
int csi_labeler_key(const char *driver, const char *suffix, char *buf, size_t n);
/* Both labels of a Node object: 0; -ENODATA when one is missing; -EBADMSG when one is not a
 * whole decimal number within 0..CSI_LABEL_MAX_COUNT. On failure why names the label (and the
 * value, escaped). */
int csi_labeler_counts_of_node(const cJSON *node, const char *driver,
			       struct csi_labeler_counts *ret, char *why, size_t n);
/* The instance id a providerID ends with (aws:///us-east-1a/i-0abc, aws:////i-0abc, i-0abc):
 * 0, or -EINVAL when its last element is not a well-formed instance id. */
int csi_labeler_instance_id(const char *provider_id, char *buf, size_t n);
