/* The CSI Node service as plain C functions, independent of gRPC (csi_node_grpc.c maps the
 * protobuf messages onto these; tests call them directly).
 *
 * Every call returns an enum csi_code (CSI_OK is 0) and fills the struct csi_error it is given
 * (common/csi/error.h; the adapter turns it into a gRPC status). Capabilities are struct
 * csi_cap and maps struct csi_kv (common/csi/volume.h); a fs_type "" or NULL means ext4.
 * Calls on one volume are serialised: a second call for a volume that has one in flight gets
 * ABORTED, as the CSI specification suggests and upstream does. Every call is idempotent:
 * repeating it after success succeeds again without doing anything. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/csi/error.h"
#include "common/csi/volume.h"
#include "modules/csi-node/csi_node_device.h"
#include "modules/csi-node/csi_node_format.h"

struct csi_node_config {
	struct csi_node_devices devices; /* where volumes are found (see csi_node_device.h) */
	bool legacy_xfs;                 /* --legacy-xfs */
	int64_t mkfs_timeout_ns;         /* 0: 10 minutes (also fsck and resize) */
	/* Cancelling it stops the programs running (mkfs, fsck, resize2fs...: SIGTERM, then
	 * SIGKILL); NULL: the process token, cancel_root(), which SIGTERM cancels. */
	struct cancel *cancel;
	/* NodeGetInfo */
	const char *node_id;
	long long max_volumes;           /* 0: not reported */
	/* When set, asked at each NodeGetInfo instead of max_volumes (a limit whose inputs can
	 * change: the metadata labeler's counts). */
	long long (*max_volumes_fn)(void *ud);
	void *max_volumes_ud;
	const struct csi_kv *topology;
	size_t n_topology;
};

struct csi_node;
struct cancel;

int csi_node_new(const struct csi_node_config *cfg, struct csi_node **ret);
void csi_node_free(struct csi_node *n);

struct csi_node_volume_req {
	const char *volume_id;
	const char *staging_path;        /* staging_target_path */
	const char *target_path;         /* NodePublish only */
	const struct csi_kv *publish_context;
	size_t n_publish_context;
	const struct csi_kv *volume_context;
	size_t n_volume_context;
	struct csi_cap cap;
	bool readonly;                   /* NodePublish only */
};

enum csi_code csi_node_stage(struct csi_node *n, const struct csi_node_volume_req *req,
			     struct csi_error *st);
enum csi_code csi_node_unstage(struct csi_node *n, const char *volume_id, const char *staging_path,
			       struct csi_error *st);
enum csi_code csi_node_publish(struct csi_node *n, const struct csi_node_volume_req *req,
			       struct csi_error *st);
enum csi_code csi_node_unpublish(struct csi_node *n, const char *volume_id, const char *target_path,
				 struct csi_error *st);

struct csi_node_expand_req {
	const char *volume_id;
	const char *volume_path;
	const char *staging_path;
	int64_t required_bytes;          /* 0: unset */
	struct csi_cap cap;		 /* optional */
};

/* On success *ret_bytes is the device size. A volume path that does not exist, is relative or
 * has nothing mounted on it: NOT_FOUND (the spec's "volume does not exist"); a corrupted mount
 * or a device smaller than required_bytes: FAILED_PRECONDITION. */
enum csi_code csi_node_expand(struct csi_node *n, const struct csi_node_expand_req *req,
			      int64_t *ret_bytes, struct csi_error *st);

struct csi_node_stats {
	bool has_bytes, has_inodes;
	int64_t bytes_total, bytes_available, bytes_used;
	int64_t inodes_total, inodes_free, inodes_used;
	bool abnormal;
	char message[256];
};

/* Usage of the file system mounted at volume_path, or the size of the block device there. A
 * path that does not exist, is relative or has nothing mounted on it: NOT_FOUND (the spec's
 * "volume does not exist on volume_path"; statfs would report the file system below). A
 * corrupted mount, a device that is gone or a file system turned read-only: OK, abnormal. */
enum csi_code csi_node_get_stats(struct csi_node *n, const char *volume_id, const char *volume_path,
				 struct csi_node_stats *ret, struct csi_error *st);

/* The configured NodeGetInfo values. */
const struct csi_node_config *csi_node_get_config(const struct csi_node *n);

/* Access modes the node accepts for a capability: SINGLE_NODE_WRITER, SINGLE_NODE_READER_ONLY,
 * SINGLE_NODE_SINGLE_WRITER, SINGLE_NODE_MULTI_WRITER; MULTI_NODE_MULTI_WRITER for block only
 * (io2 Multi-Attach). */
bool csi_node_access_mode_valid(int mode, bool block);
