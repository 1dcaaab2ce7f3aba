/* Probing, formatting and superblock sizes for the node service. */
#include "modules/csi-node/csi_node_format.h"

#include <blkid.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/log.h"

bool csi_fs_is_ext(const char *fstype)
{
	return fstype && (strcmp(fstype, "ext2") == 0 || strcmp(fstype, "ext3") == 0 ||
			  strcmp(fstype, "ext4") == 0);
}

bool csi_fs_type_supported(const char *fstype)
{
	return csi_fs_is_ext(fstype) || (fstype && strcmp(fstype, "xfs") == 0);
}

bool csi_fs_compatible(const char *wanted, const char *found)
{
	if (strcmp(wanted, found) == 0)
		return true;
	return strcmp(wanted, "ext4") == 0 && csi_fs_is_ext(found);
}

int csi_fs_probe(const char *dev, struct csi_probe *ret)
{
	struct csi_probe p = { 0 };
	const char *v;
	blkid_probe pr;
	int r;

	if (!(pr = blkid_new_probe_from_filename(dev)))
		return errno ? -errno : -EIO;
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE);
	blkid_probe_enable_partitions(pr, 1);
	blkid_probe_set_partitions_flags(pr, 0);
	r = blkid_do_safeprobe(pr);
	if (r == -1) {
		blkid_free_probe(pr);
		return -EIO;
	}
	if (r == -2)
		p.ambiguous = true;
	if (r == 0) {
		if (blkid_probe_lookup_value(pr, "TYPE", &v, NULL) == 0)
			(void)str_copy(p.type, sizeof(p.type), v);
		if (blkid_probe_lookup_value(pr, "PTTYPE", &v, NULL) == 0)
			(void)str_copy(p.pttype, sizeof(p.pttype), v);
		/* something was found even if it has no TYPE (e.g. a bare partition table) */
		if (!p.type[0] && !p.pttype[0])
			(void)str_copy(p.type, sizeof(p.type), "unknown");
	}
	blkid_free_probe(pr);
	*ret = p;
	return p.ambiguous || p.type[0] || p.pttype[0] ? 1 : 0;
}

static bool is_number(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return s[0] != '0';
}

struct fmt_key {
	const char *key;
	bool ext, ext4_only, xfs;
	size_t off, size;
};

#define FK(k, e, e4, x, field)                                                                     \
	{                                                                                          \
		k, e, e4, x, offsetof(struct csi_format_opts, field),                              \
		    sizeof(((struct csi_format_opts *)0)->field)                                   \
	}

static const struct fmt_key fmt_keys[] = {
	FK("blockSize", true, false, true, block_size),
	FK("inodeSize", true, false, true, inode_size),
	FK("bytesPerInode", true, false, false, bytes_per_inode),
	FK("numberOfInodes", true, false, false, number_of_inodes),
	FK("ext4ClusterSize", true, true, false, cluster_size),
};

static int parse_bool_key(const char *fstype, const struct csi_kv *ctx, size_t n, const char *key,
			  bool *ret, char *msg, size_t msglen)
{
	const char *v = csi_kv_get(ctx, n, key);

	*ret = false;
	if (!v)
		return 0;
	if (str_to_bool(v, ret) < 0) {
		(void)str_printf(msg, msglen, "invalid %s \"%s\": want true or false", key, v);
		return -EINVAL;
	}
	if (*ret && strcmp(fstype, "ext4") != 0) {
		(void)str_printf(msg, msglen, "%s is not supported for fstype %s", key, fstype);
		return -EINVAL;
	}
	return 0;
}

int csi_format_opts_parse(const char *fstype, const struct csi_kv *ctx, size_t n,
			  struct csi_format_opts *ret, char *msg, size_t msglen)
{
	struct csi_format_opts o = { 0 };
	bool ext = csi_fs_is_ext(fstype), xfs = strcmp(fstype, "xfs") == 0;
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(fmt_keys); i++) {
		const struct fmt_key *k = &fmt_keys[i];
		const char *v = csi_kv_get(ctx, n, k->key);
		if (!v)
			continue;
		if (!(ext && k->ext && (!k->ext4_only || strcmp(fstype, "ext4") == 0)) &&
		    !(xfs && k->xfs)) {
			(void)str_printf(msg, msglen, "%s is not supported for fstype %s", k->key,
					 fstype);
			return -EINVAL;
		}
		if (!is_number(v, k->size - 1 < 12 ? k->size - 1 : 12)) {
			(void)str_printf(msg, msglen,
					 "invalid %s \"%s\": want a positive decimal number",
					 k->key, v);
			return -EINVAL;
		}
		(void)str_copy((char *)&o + k->off, k->size, v);
	}
	if ((r = parse_bool_key(fstype, ctx, n, "ext4BigAlloc", &o.bigalloc, msg, msglen)) < 0 ||
	    (r = parse_bool_key(fstype, ctx, n, "ext4EncryptionSupport", &o.encrypt, msg, msglen)) <
		0)
		return r;
	if (o.cluster_size[0] && !o.bigalloc) {
		(void)str_printf(msg, msglen, "ext4ClusterSize needs ext4BigAlloc=true");
		return -EINVAL;
	}
	*ret = o;
	return 0;
}

int csi_mkfs_argv(const char *fstype, const char *dev, const struct csi_format_opts *o,
		  bool legacy_xfs, char ***ret)
{
	_cleanup_strv_ char **v = NULL;
	char prog[32], tmp[64];
	int r = 0;

	if (!csi_fs_type_supported(fstype))
		return -EINVAL;
	if (str_printf(prog, sizeof(prog), "mkfs.%s", fstype) < 0 || (r = strv_push(&v, prog)) < 0)
		return r < 0 ? r : -EINVAL;
#define PUSH(s)                                                                                    \
	do {                                                                                       \
		if ((r = strv_push(&v, (s))) < 0)                                                  \
			return r;                                                                  \
	} while (0)
	if (csi_fs_is_ext(fstype)) {
		PUSH("-F");
		PUSH("-m0");
		if (o->block_size[0]) {
			PUSH("-b");
			PUSH(o->block_size);
		}
		if (o->inode_size[0]) {
			PUSH("-I");
			PUSH(o->inode_size);
		}
		if (o->bytes_per_inode[0]) {
			PUSH("-i");
			PUSH(o->bytes_per_inode);
		}
		if (o->number_of_inodes[0]) {
			PUSH("-N");
			PUSH(o->number_of_inodes);
		}
		if (o->bigalloc || o->encrypt) {
			PUSH("-O");
			PUSH(o->bigalloc && o->encrypt ? "bigalloc,encrypt"
			     : o->bigalloc	       ? "bigalloc"
						       : "encrypt");
		}
		if (o->cluster_size[0]) {
			PUSH("-C");
			PUSH(o->cluster_size);
		}
	} else {
		PUSH("-f");
		if (o->block_size[0]) {
			if (str_printf(tmp, sizeof(tmp), "size=%s", o->block_size) < 0)
				return -EINVAL;
			PUSH("-b");
			PUSH(tmp);
		}
		if (o->inode_size[0] || legacy_xfs) {
			if (str_printf(tmp, sizeof(tmp), "%s%s%s", o->inode_size[0] ? "size=" : "",
				       o->inode_size,
				       legacy_xfs ? (o->inode_size[0] ? ",nrext64=0" : "nrext64=0")
						  : "") < 0)
				return -EINVAL;
			PUSH("-i");
			PUSH(tmp);
		}
		if (legacy_xfs) {
			PUSH("-m");
			PUSH("bigtime=0,inobtcount=0,reflink=0");
		}
	}
	PUSH(dev);
#undef PUSH
	*ret = TAKE_PTR(v);
	return 0;
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint64_t be64(const unsigned char *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

int csi_fs_size_from_buf(const unsigned char *buf, size_t len, uint64_t *ret_bytes,
			 uint64_t *ret_block)
{
	if (len >= 512 && memcmp(buf, "XFSB", 4) == 0) {
		uint64_t bs = be32(buf + 4), blocks = be64(buf + 8);
		if (bs < 512 || bs > 65536 || blocks > UINT64_MAX / bs)
			return -EBADMSG;
		*ret_bytes = blocks * bs;
		*ret_block = bs;
		return 0;
	}
	if (len >= 2048) {
		const unsigned char *sb = buf + 1024;
		if (sb[0x38] == 0x53 && sb[0x39] == 0xEF) {
			uint32_t log = le32(sb + 0x18);
			if (log > 6)
				return -EBADMSG;
			uint64_t bs = 1024ULL << log, blocks = le32(sb + 0x04);
			if (le32(sb + 0x60) & 0x80) /* INCOMPAT_64BIT */
				blocks |= (uint64_t)le32(sb + 0x150) << 32;
			if (blocks > UINT64_MAX / bs)
				return -EBADMSG;
			*ret_bytes = blocks * bs;
			*ret_block = bs;
			return 0;
		}
	}
	return -EMEDIUMTYPE;
}

int csi_fs_size(const char *dev, uint64_t *ret_bytes, uint64_t *ret_block)
{
	enum { N = 4096 };
	void *mem = NULL;
	ssize_t n = -1;
	int fd, r;

	if (posix_memalign(&mem, N, N) != 0)
		return -ENOMEM;
	/* O_DIRECT: what is on the disk, not a page cached before someone else wrote it */
	fd = open(dev, O_RDONLY | O_CLOEXEC | O_DIRECT);
	if (fd >= 0) {
		n = pread(fd, mem, N, 0);
		close(fd);
	}
	if (n < 0) {
		if ((fd = open(dev, O_RDONLY | O_CLOEXEC)) < 0) {
			r = -errno;
			free(mem);
			return r;
		}
		n = pread(fd, mem, N, 0);
		r = -errno;
		close(fd);
		if (n < 0) {
			free(mem);
			return r;
		}
	}
	r = csi_fs_size_from_buf(mem, (size_t)n, ret_bytes, ret_block);
	free(mem);
	return r;
}

int csi_resize_argv(const char *fstype, const char *dev, const char *mountpoint, char ***ret)
{
	_cleanup_strv_ char **v = NULL;
	int r;

	if (csi_fs_is_ext(fstype)) {
		if ((r = strv_push(&v, "resize2fs")) < 0 || (r = strv_push(&v, dev)) < 0)
			return r;
	} else if (fstype && strcmp(fstype, "xfs") == 0) {
		if (!mountpoint)
			return -EINVAL;
		if ((r = strv_push(&v, "xfs_growfs")) < 0 || (r = strv_push(&v, "-d")) < 0 ||
		    (r = strv_push(&v, mountpoint)) < 0)
			return r;
	} else {
		return -EOPNOTSUPP;
	}
	*ret = TAKE_PTR(v);
	return 0;
}
