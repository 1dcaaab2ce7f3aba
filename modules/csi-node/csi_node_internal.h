/* Shared internals of the node service files (csi_node_service.c, csi_node_publish.c,
 * csi_node_expand.c). Not for other modules. */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

#include "modules/csi-node/csi_node_mount.h"
#include "modules/csi-node/csi_node_service.h"

#define CSI_NODE_MAX_INFLIGHT 4096

struct keylock;

struct csi_node {
	struct csi_node_config cfg; /* strings below are owned copies */
	char *by_id_dir, *sysfs, *node_id;
	struct csi_kv *topology;
	struct keylock *inflight; /* volume ids with a call in flight (common/base/keylock.h) */
};

/* Marks volume_id busy: CSI_OK, or ABORTED when a call for it is already in flight (or
 * CSI_NODE_MAX_INFLIGHT calls are). csi_node_unlock() ends it. */
enum csi_code csi_node_lock(struct csi_node *n, const char *volume_id, struct csi_error *st);
void csi_node_unlock(struct csi_node *n, const char *volume_id);

/* Checks the volume id and an absolute path argument; an error status otherwise. */
enum csi_code csi_node_check_id(const char *volume_id, struct csi_error *st);
enum csi_code csi_node_check_path(const char *what, const char *path, struct csi_error *st);
/* Checks a capability (present, valid access mode, supported fs type). ret_fstype gets the
 * fs type to use ("ext4" by default). */
enum csi_code csi_node_check_cap(const struct csi_cap *cap, const char **ret_fstype,
				 struct csi_error *st);

/* mkdir -p with mode for the missing components. */
int csi_node_mkdir_p(const char *path, mode_t mode);

/* Finds and checks the device of a volume request (publish context devicePath, partition). */
enum csi_code csi_node_device_for(struct csi_node *n, const char *volume_id,
				  const struct csi_kv *pctx, size_t npctx,
				  const struct csi_kv *vctx, size_t nvctx, char *dev, size_t devlen,
				  struct csi_error *st);

/* Checks that block device `dev` mounted (or bound) at `path` belongs to volume_id, so that
 * nothing that is not ours is unmounted or reused: FAILED_PRECONDITION otherwise. */
enum csi_code csi_node_check_owner(struct csi_node *n, dev_t dev, const char *volume_id,
				   const char *path, struct csi_error *st);

/* Runs a program with the configured timeout: its exit status, or -errno (not installed, timed
 * out...). On anything but 0, msg gets a description with the end of its output. */
int csi_node_run(struct csi_node *n, const char *const *argv, const char *volume_id, char *msg,
		 size_t msglen);

/* Unmounts every mount stacked on path that belongs to volume_id (at most a few); then removes
 * path when remove is set (an empty directory or an empty regular file). */
enum csi_code csi_node_cleanup_path(struct csi_node *n, const char *volume_id, const char *path,
				    bool remove, struct csi_error *st);

/* NodeUnstage and NodeUnpublish: checks the request, then (holding the volume) unmounts what
 * belongs to the volume at path and removes path. what is "staging target path" or "target
 * path". */
enum csi_code csi_node_release_path(struct csi_node *n, const char *volume_id, const char *what,
				    const char *path, struct csi_error *st);
