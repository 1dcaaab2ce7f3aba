/* The CSI Controller service as plain C functions, independent of gRPC: csi_controller_grpc.c
 * turns the protobuf requests into the requests below, calls these and turns the results into
 * replies; tests may call them directly.
 *
 * Errors: every call returns an enum csi_code (CSI_OK is 0) and fills the struct csi_error it
 * is given (common/csi/error.h: a CSI code and a one-line message); the adapter maps it to a
 * gRPC status. A -errno never leaves the service: the EC2 layer's -errno and AWS error code
 * are mapped to a CSI code where a call decides what its caller is told.
 *
 * Calls on one object (a volume name, a volume, a volume on a node, a snapshot name or id) are
 * serialised through a bounded key-lock table (common/base/keylock.h): a second call while one
 * is in flight gets CSI_ABORTED. Every call is idempotent. A call that waits on AWS (a volume
 * becoming available, an attachment, a modification) ends at its deadline or when it is asked
 * to stop (struct csi_ctrl_call).
 *
 *   struct csi_ctrl c = { .batching = true };            // options, see below
 *   r = csi_ctrl_setup(&c, &(struct aws_client_opts){ .user_agent = "csi-controller" });
 *   struct csi_ctrl_volume vol;
 *   struct csi_error err;
 *   if (csi_ctrl_create_volume(&c, NULL, &(struct csi_ctrl_create_req){ .name = "pvc-1", ...},
 *                              &vol, &err) != CSI_OK)
 *           ... err.code, err.message ...
 *   csi_ctrl_volume_release(&vol);
 *   csi_ctrl_release(&c);
 */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/csi/error.h"
#include "common/csi/volume.h"

struct aws_client;
struct aws_client_opts;
struct aws_batcher;
struct cancel;
struct aws_batch_kind;
struct csi_devices;
struct csi_detaching;
struct coalescer;
struct keylock;
struct metric;

/* ---- the controller ---- */

struct csi_tag_opts {
	bool warn_on_invalid_tag; /* --warn-on-invalid-tag: skip a bad tag instead of failing */
};

struct csi_batch_fetch {
	struct csi_ctrl *c;
	const struct aws_batch_kind *k;
};

struct csi_ctrl {
	/* options, filled before csi_ctrl_setup() */
	bool batching;		   /* --batching: Describe calls by ID go through the batcher */
	struct csi_kv *extra_tags; /* --extra-tags (malloc'd; freed by csi_ctrl_release) */
	size_t n_extra_tags;
	const char *cluster_id; /* --k8s-tag-cluster-id */
	struct csi_tag_opts tag_opts;
	int64_t modify_window_ns;   /* --modify-volume-request-handler-timeout */
	int64_t attach_timeout_ns;  /* bound on waiting for attached/detached (150 s) */
	int64_t stuck_attaching_ns; /* attaching longer than this: detach and fail (90 s) */
	int64_t create_timeout_ns;  /* bound on waiting for available (150 s) */
	int64_t poll_scale;	    /* tests: divides the waits between polls (1 normally) */
	/* a detach pending longer than this shows in the detach-pending metric (60 s, as
	 * upstream; --detach-pending-metric-after); negative: 0 */
	int64_t detach_metric_after_ns;

	/* set up by csi_ctrl_setup() */
	struct aws_client *aws;
	struct aws_batcher *b_volumes, *b_instances, *b_snapshots, *b_mods;
	struct csi_devices *devices;
	struct coalescer *coalescer;
	struct keylock *inflight; /* keys of operations in progress */
	struct metric *m_requests, *m_errors, *m_throttles;
	struct csi_detaching *detaching; /* detaches waited for, in the metrics */
	struct csi_batch_fetch fetchers[4];

	pthread_mutex_t lock; /* guards what follows */
	char **zones;	      /* DescribeAvailabilityZones, cached */
	size_t n_zones;
	int64_t probe_at; /* last successful probe (monotonic) */
};

/* Sets up a controller whose options were filled in (tests fill them directly); the AWS
 * client is made from ao. csi_ctrl_release() undoes it (also after a failed setup). 0 or
 * -errno. */
int csi_ctrl_setup(struct csi_ctrl *c, const struct aws_client_opts *ao);
void csi_ctrl_release(struct csi_ctrl *c);
/* The Identity Probe of the controller: an EC2 DryRun call, cached for 10 s. 0, or -errno
 * with the reason in why. */
int csi_ctrl_probe(void *ud, char *why, size_t n);

/* What a call runs under: its deadline, and the token that ends it early (the server is
 * stopping). NULL for a call: no deadline, never stopped. */
struct csi_ctrl_call {
	int64_t deadline_ns;  /* monotonic; INT64_MAX: none */
	struct cancel *cancel; /* the call's token (rpc_call_cancel); NULL: never cancelled */
};

/* ---- what the calls take and give ---- */

/* A Topology: its segments. */
struct csi_ctrl_topology {
	const struct csi_kv *segments;
	size_t n_segments;
};

/* A TopologyRequirement. */
struct csi_ctrl_topology_req {
	const struct csi_ctrl_topology *requisite, *preferred;
	size_t n_requisite, n_preferred;
};

/* A volume as CSI shows it. */
struct csi_ctrl_volume {
	char id[32];
	long long capacity_bytes;
	char zone[48];	    /* "": no accessible topology */
	struct csi_kv *ctx; /* volume_context (owned) */
	size_t n_ctx;
	char **published; /* ListVolumes, ControllerGetVolume: the nodes it is attached or
			     being attached to (owned; NULL when none) */
};
void csi_ctrl_volume_release(struct csi_ctrl_volume *v);

/* A snapshot as CSI shows it. */
struct csi_ctrl_snapshot {
	char id[32];
	char source_volume[32];
	long long size_bytes;
	int64_t created_ns; /* wall clock */
	bool ready;
};

enum csi_ctrl_source { CSI_SOURCE_NONE, CSI_SOURCE_SNAPSHOT, CSI_SOURCE_VOLUME, CSI_SOURCE_BAD };

struct csi_ctrl_create_req {
	const char *name;
	const struct csi_cap *caps;
	size_t n_caps;
	const struct csi_kv *params, *mutable_params; /* parameters, mutable_parameters */
	size_t n_params, n_mutable_params;
	bool has_range; /* capacity_range */
	long long required_bytes, limit_bytes;
	enum csi_ctrl_source source; /* volume_content_source; BAD: one without an id */
	const char *source_id;
	const struct csi_ctrl_topology_req *topology; /* accessibility_requirements; NULL: none */
};

/* One page of a list call. */
struct csi_ctrl_page_req {
	int32_t max_entries; /* 0: all */
	const char *starting_token;
};

struct csi_ctrl_volume_list {
	struct csi_ctrl_volume *v;
	size_t n;
	char *next_token; /* NULL at the end */
};
void csi_ctrl_volume_list_release(struct csi_ctrl_volume_list *l);

struct csi_ctrl_snapshot_list {
	struct csi_ctrl_snapshot *s;
	size_t n;
	char *next_token;
};
void csi_ctrl_snapshot_list_release(struct csi_ctrl_snapshot_list *l);

/* ---- the calls ---- */

enum csi_code csi_ctrl_create_volume(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				     const struct csi_ctrl_create_req *req,
				     struct csi_ctrl_volume *ret, struct csi_error *err);
enum csi_code csi_ctrl_delete_volume(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				     const char *volume_id, struct csi_error *err);
/* CSI_OK with *ret_unsupported NULL when every capability is supported, else the reason. */
enum csi_code csi_ctrl_validate(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				const char *volume_id, const struct csi_cap *caps, size_t n_caps,
				const char **ret_unsupported, struct csi_error *err);
enum csi_code csi_ctrl_list_volumes(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				    const struct csi_ctrl_page_req *req,
				    struct csi_ctrl_volume_list *ret, struct csi_error *err);
enum csi_code csi_ctrl_get_volume(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				  const char *volume_id, struct csi_ctrl_volume *ret,
				  struct csi_error *err);
/* ControllerPublishVolume: the device name the volume is attached at. */
enum csi_code csi_ctrl_publish(struct csi_ctrl *c, const struct csi_ctrl_call *call,
			       const char *volume_id, const char *node_id,
			       const struct csi_cap *cap, char ret_device[32],
			       struct csi_error *err);
/* node_id "": from every node. */
enum csi_code csi_ctrl_unpublish(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				 const char *volume_id, const char *node_id, struct csi_error *err);
/* ControllerExpandVolume: the new size, and whether the node must grow the file system. */
enum csi_code csi_ctrl_expand(struct csi_ctrl *c, const struct csi_ctrl_call *call,
			      const char *volume_id, bool has_range, long long required_bytes,
			      long long limit_bytes, const struct csi_cap *cap,
			      long long *ret_bytes, bool *ret_node_expansion,
			      struct csi_error *err);
enum csi_code csi_ctrl_modify(struct csi_ctrl *c, const struct csi_ctrl_call *call,
			      const char *volume_id, const struct csi_kv *params, size_t n,
			      struct csi_error *err);
enum csi_code csi_ctrl_create_snapshot(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				       const char *name, const char *source_volume_id,
				       const struct csi_kv *params, size_t n,
				       struct csi_ctrl_snapshot *ret, struct csi_error *err);
enum csi_code csi_ctrl_delete_snapshot(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				       const char *snapshot_id, struct csi_error *err);
/* snapshot_id and source_volume_id may be "" (no filter). */
enum csi_code csi_ctrl_list_snapshots(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				      const struct csi_ctrl_page_req *req, const char *snapshot_id,
				      const char *source_volume_id,
				      struct csi_ctrl_snapshot_list *ret, struct csi_error *err);
