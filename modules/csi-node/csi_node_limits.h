/* max_volumes_per_node: how many CSI volumes the scheduler may place on this node.
 *
 *   --volume-attach-limit N given: N.
 *   Otherwise, from the instance type's facts (EC2 DescribeInstanceTypes, EbsInfo):
 *     limit = MaximumEbsAttachments, AttachmentLimitType shared or dedicated. AWS's figure for a
 *     shared type already counts the primary network interface and the NVMe instance-store
 *     volumes (m5.large 27, c5d.large 26), so only the extra interfaces are taken off:
 *       shared (Nitro, bare metal):  limit - (ENIs - 1) - reserved
 *       dedicated, or Xen:           limit - reserved
 *     Without facts (no EC2 access): a Xen family 39 dedicated, anything else 27 shared.
 *   reserved = --reserved-volume-attachments when given; else the attached volumes that are not
 *     CSI volumes, when EC2 says which they are (the root volume included); else, from instance
 *     metadata, 1 (root) + the "ebsN" block-device mappings whose device name is not one the
 *     CSI controller hands out first (xvdaa-xvddz): metadata lists the volumes attached when the
 *     instance last started, and counting the CSI volumes among them made upstream's limit
 *     depend on when the node booted (upstream #2796).
 *   The result is at least 1. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct csi_node_type_facts {
	int max_ebs_attachments; /* EbsInfo.MaximumEbsAttachments; 0 when AWS gave none */
	bool dedicated;          /* EbsInfo.AttachmentLimitType == "dedicated" */
	bool xen;                /* Hypervisor == "xen" */
};

struct csi_node_limits_input {
	long long attach_limit;  /* --volume-attach-limit; -1 unset */
	long long reserved;      /* --reserved-volume-attachments; -1 unset */
	const char *instance_type;
	const struct csi_node_type_facts *facts; /* NULL when unknown */
	int enis;                /* attached network interfaces; <= 0 unknown (taken as 1) */
	int non_csi_volumes;     /* attached volumes that are not CSI volumes; -1 unknown */
	char *const
	    *bdm; /* metadata block-device-mapping as "key=device" ("ebs1=sdf"); NULL unknown */
};

/* Computes the limit; `why` (size n, may be NULL) gets a short explanation for the log. */
long long csi_node_max_volumes(const struct csi_node_limits_input *in, char *why, size_t n);

/* True for the instance families that run on Xen (the fallback without EC2 facts). */
bool csi_node_type_is_xen(const char *instance_type);

/* Reserved attachments from metadata block-device mappings, as described above. */
int csi_node_reserved_from_bdm(char *const *bdm);
