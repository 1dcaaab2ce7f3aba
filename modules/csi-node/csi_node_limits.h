/* max_volumes_per_node: how many CSI volumes the scheduler may place on this node, by the rules
 * of the upstream driver's node (aws-ebs-csi-driver v1.6x, pkg/driver/node.go getVolumesLimit
 * and pkg/cloud/limits), without any EC2 call:
 *
 *   --volume-attach-limit N given: N, whatever else is known.
 *   Otherwise the instance type (from metadata) is looked up in csi_node_limits_table.c:
 *     a non-Nitro (Xen) type:         39, dedicated
 *     a type of the table:            its EC2 MaximumEbsAttachments, shared or dedicated
 *     any other type, or none known:  27, shared (a Nitro type's 28 slots less its primary
 *                                     network interface)
 *   A shared figure already leaves out the primary interface, the NVMe instance-store volumes
 *   and the accelerators that take slots (c5d.large 26, g5.48xlarge 9), so:
 *       shared:     limit - (ENIs - 1) - reserved
 *       dedicated:  limit - reserved       (interfaces and instance store do not count)
 *   reserved = --reserved-volume-attachments when given; else the metadata labeler's count
 *     of the instance's non-CSI EBS volumes + 1 (the --metadata-sources=metadata-labeler Node
 *     labels, from EC2); else, from instance metadata, 1 (the root volume) + the "ebsN"
 *     block-device mappings. Unlike upstream, a mapping under a name
 *     the CSI controller hands out first (xvdaa-xvddz) is not counted: metadata lists the volumes
 *     attached when the instance last started, and counting the CSI volumes among them made
 *     upstream's limit depend on when the node booted (upstream #2796).
 *   The result is at least 1.
 *
 * With the opt-in --describe-instance-type, EC2's DescribeInstanceTypes figure (when it
 * answers) replaces the table's; a Xen type stays 39 dedicated, and the table's corrections
 * (metal types the API calls shared) still make a type dedicated. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* One row of the built-in table (csi_node_limits_table.c). */
struct csi_node_type_limit {
	const char *type;
	int max_attachments;
	bool dedicated;
};
/* Both end with a NULL type. */
extern const struct csi_node_type_limit csi_node_type_limits[];
extern const char *const csi_node_non_nitro_types[];

struct csi_node_type_facts {
	int max_ebs_attachments; /* EbsInfo.MaximumEbsAttachments; 0 when unknown */
	bool dedicated;          /* EbsInfo.AttachmentLimitType == "dedicated" */
	bool xen;                /* Hypervisor == "xen" (not Nitro) */
};

/* The table's facts about instance_type: 0, or -ENOENT for a type it does not know (NULL
 * included), with the default (27 shared) in *ret. */
int csi_node_type_lookup(const char *instance_type, struct csi_node_type_facts *ret);

struct csi_node_limits_input {
	long long attach_limit;  /* --volume-attach-limit; -1 unset */
	long long reserved;      /* --reserved-volume-attachments; -1 unset */
	const char *instance_type;
	const struct csi_node_type_facts *ec2; /* DescribeInstanceTypes' facts; NULL: none */
	int enis;                /* attached network interfaces; <= 0 unknown (taken as 1) */
	char *const
	    *bdm; /* metadata block-device-mapping as "key=device" ("ebs1=sdf"); NULL unknown */
	int counted_reserved; /* the metadata labeler's volume count + 1; 0 unknown */
};

/* Computes the limit; `why` (size n, may be NULL) gets a short explanation for the log. */
long long csi_node_max_volumes(const struct csi_node_limits_input *in, char *why, size_t n);

/* Reserved attachments from metadata block-device mappings, as described above. */
int csi_node_reserved_from_bdm(char *const *bdm);
