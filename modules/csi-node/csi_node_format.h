/* Safe formatting and growing of file systems for the node service.
 *
 * A device is formatted only when libblkid finds neither a file-system (or other) signature nor
 * a partition table on it; an ambiguous probe counts as "not blank". mkfs runs with the format
 * options of the volume context (as the controller passed them through from the StorageClass):
 *
 *   key (any case)      ext2/ext3/ext4           xfs
 *   blockSize           -b N                     -b size=N
 *   inodeSize           -I N                     -i size=N
 *   bytesPerInode       -i N                     -
 *   numberOfInodes      -N N                     -
 *   ext4BigAlloc=true   -O bigalloc (ext4)       -
 *   ext4ClusterSize     -C N (ext4, bigalloc)    -
 *   ext4EncryptionSupport=true  -O encrypt (ext4) -
 *
 * Values must be plain decimal numbers (upstream meant to check this and does not), so that no
 * option can be smuggled into mkfs's argument vector. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/csi/volume.h"

/* File-system types the node service formats and mounts. */
bool csi_fs_type_supported(const char *fstype);
bool csi_fs_is_ext(const char *fstype);
/* Whether a device holding `found` may be mounted as `wanted` (same type, or an ext2/ext3 file
 * system mounted by the ext4 driver). */
bool csi_fs_compatible(const char *wanted, const char *found);

struct csi_probe {
	char type[32];   /* a signature found on the device ("ext4", "xfs", "LVM2_member"), or "" */
	char pttype[32]; /* a partition table ("dos", "gpt"), or "" */
	bool ambiguous;  /* several signatures */
};

/* Probes dev with libblkid: 0 when it is blank, 1 when it holds something (described in *ret),
 * -errno when it cannot be read. */
int csi_fs_probe(const char *dev, struct csi_probe *ret);

struct csi_format_opts {
	char block_size[16];
	char inode_size[16];
	char bytes_per_inode[24];
	char number_of_inodes[24];
	char cluster_size[16];
	bool bigalloc;
	bool encrypt;
};

/* Reads and checks the format options of a volume context for fstype. -EINVAL with msg set on a
 * bad value or an option that fstype does not take. */
int csi_format_opts_parse(const char *fstype, const struct csi_kv *ctx, size_t n,
			  struct csi_format_opts *ret, char *msg, size_t msglen);

/* The mkfs argument vector (a strv to free with strv_free): mkfs.ext4 -F -m0 [opts] DEV,
 * mkfs.xfs -f [opts] DEV; legacy_xfs adds the options for kernels <= 5.4. */
int csi_mkfs_argv(const char *fstype, const char *dev, const struct csi_format_opts *o,
		  bool legacy_xfs, char ***ret);

/* The size of the file system on dev, read from its superblock (ext2/3/4 and xfs): 0 with the
 * bytes and the block size, -EMEDIUMTYPE for another type, -errno when unreadable. */
int csi_fs_size(const char *dev, uint64_t *ret_bytes, uint64_t *ret_block);
/* The same from a superblock image: buf holds the first len bytes of the device. */
int csi_fs_size_from_buf(const unsigned char *buf, size_t len, uint64_t *ret_bytes,
			 uint64_t *ret_block);

/* The grow command: resize2fs DEV for ext*, xfs_growfs -d MOUNTPOINT for xfs. */
int csi_resize_argv(const char *fstype, const char *dev, const char *mountpoint, char ***ret);
