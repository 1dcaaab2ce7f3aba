/* Finding the block device of an EBS volume on the node, and checking that a device really is
 * that volume before anything touches it.
 *
 * The device of volume vol-0abc is looked for, in order:
 *   1. the link <by_id_dir>/nvme-Amazon_Elastic_Block_Store_vol0abc (or its "_1" namespace
 *      form), which udev names after the NVMe serial, so it is authoritative;
 *   2. the devicePath the controller put in the publish context (/dev/xvdba), which exists on
 *      Xen instances and, as a link, on some Nitro AMIs.
 * A candidate is accepted only when it resolves to a block device named /dev/<alnum> and its
 * identity does not contradict the volume: the identity is the NVMe (or virtio) serial read
 * from sysfs, else the volume whose by-id link points at the device; a device with neither
 * (Xen) is accepted, as upstream does.
 *
 * by_id_dir is /dev/disk/by-id on a real node. The test mode (--device-dir) points it at a
 * directory of symlinks named like udev's, nvme-Amazon_Elastic_Block_Store_<id> -> /dev/loopN,
 * so that loop devices stand in for EBS volumes. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct csi_node_devices {
	const char *by_id_dir; /* NULL: /dev/disk/by-id */
	const char *sysfs;     /* NULL: /sys */
};

#define CSI_EBS_BY_ID_PREFIX "nvme-Amazon_Elastic_Block_Store_"
/* A cap on the entries of the by-id directory that are examined. */
#define CSI_BY_ID_MAX_ENTRIES 4096

/* Checks a volume id: 1..64 characters of [A-Za-z0-9-] (so it can never form a path). */
bool csi_volume_id_valid(const char *volume_id);
/* The NVMe serial form of a volume id: "vol-0abc" -> "vol0abc". */
int csi_volume_serial(const char *volume_id, char *ret, size_t n);

/* Finds and checks the device of volume_id. device_path (the publish context's devicePath) may
 * be NULL. partition ("1"; NULL, "" or "0" for none) selects a partition of the device: the
 * kernel's name for it (nvme1n1p1, xvdf1) must exist and be a block device.
 * Returns 0 and the device path (/dev/nvme1n1) in ret, or:
 *   -EINVAL       a malformed volume id or partition
 *   -ENOENT       no candidate exists
 *   -ENOTBLK      a candidate is not a block device under /dev
 *   -EMEDIUMTYPE  the device holds another volume (msg says which)
 * msg (size n) gets a sentence for the error message. */
int csi_node_find_device(const struct csi_node_devices *d, const char *volume_id,
			 const char *device_path, const char *partition, char *ret, size_t retlen,
			 char *msg, size_t n);

/* The identity of block device dev (st_rdev) as a serial "vol0abc...": from sysfs, else from
 * a by-id link pointing at it. 0 and the serial in ret; -ENOENT when the device has none. */
int csi_node_device_identity(const struct csi_node_devices *d, dev_t dev, char *ret, size_t n);

/* Checks that block device dev may be volume_id: 0 when its identity matches or is unknown,
 * -EMEDIUMTYPE (with msg) when it is another volume's. */
int csi_node_device_check(const struct csi_node_devices *d, dev_t dev, const char *volume_id,
			  char *msg, size_t n);

/* The kernel name of block device dev ("nvme1n1"), from /sys/dev/block/MAJ:MIN. */
int csi_node_device_name(const struct csi_node_devices *d, dev_t dev, char *ret, size_t n);
