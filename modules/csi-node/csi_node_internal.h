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
	struct csi_node_kv *topology;
	struct keylock *inflight; /* volume ids with a call in flight (common/base/keylock.h) */
};

/* Sets code and message; returns code. */
int csi_node_fail(struct csi_node_status *st, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int csi_node_ok(struct csi_node_status *st);

/* Marks volume_id busy: false when a call for it is already in flight (or the table is full). */
bool csi_node_inflight_begin(struct csi_node *n, const char *volume_id);
void csi_node_inflight_end(struct csi_node *n, const char *volume_id);

/* Checks the volume id and an absolute path argument; an error status otherwise. */
int csi_node_check_id(const char *volume_id, struct csi_node_status *st);
int csi_node_check_path(const char *what, const char *path, struct csi_node_status *st);
/* Checks a capability (present, valid access mode, supported fs type). ret_fstype gets the
 * fs type to use ("ext4" by default). */
int csi_node_check_cap(const struct csi_node_cap *cap, const char **ret_fstype,
		       struct csi_node_status *st);

/* mkdir -p with mode for the missing components. */
int csi_node_mkdir_p(const char *path, mode_t mode);

/* Finds and checks the device of a volume request (publish context devicePath, partition). */
int csi_node_device_for(struct csi_node *n, const char *volume_id, const struct csi_node_kv *pctx,
			size_t npctx, const struct csi_node_kv *vctx, size_t nvctx, char *dev,
			size_t devlen, struct csi_node_status *st);

/* Checks that block device `dev` mounted (or bound) at `path` belongs to volume_id, so that
 * nothing that is not ours is unmounted or reused: FAILED_PRECONDITION otherwise. */
int csi_node_check_owner(struct csi_node *n, dev_t dev, const char *volume_id, const char *path,
			 struct csi_node_status *st);

/* Runs a program with the configured timeout: its exit status, or -errno (not installed, timed
 * out...). On anything but 0, msg gets a description with the end of its output. */
int csi_node_run(struct csi_node *n, const char *const *argv, const char *volume_id, char *msg,
		 size_t msglen);

/* Unmounts every mount stacked on path that belongs to volume_id (at most a few); then removes
 * path when remove is set (an empty directory or an empty regular file). */
int csi_node_cleanup_path(struct csi_node *n, const char *volume_id, const char *path, bool remove,
			  struct csi_node_status *st);
