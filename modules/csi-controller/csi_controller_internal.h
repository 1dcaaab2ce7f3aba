/* Internals of `aws-k8s csi-controller`, shared by its files:
 *   csi_controller.c          main, flags, setup, in-flight set, capabilities, probe, methods
 *   csi_controller_params.c   CreateVolume parameters, sizes, IOPS, tags, tokens (pure)
 *   csi_controller_devices.c  device-name allocation per node (pure)
 *   csi_controller_ec2.c      EC2 calls (replies parsed by common/aws/ec2.h)
 *   csi_controller_volume.c   Create/Delete/Validate/List/Get volume
 *   csi_controller_publish.c  ControllerPublish/Unpublish
 *   csi_controller_modify.c   ControllerExpand/Modify through the per-volume coalescer
 *   csi_controller_snapshot.c Create/Delete/ListSnapshots, paging tokens */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/csi/csi.pb-c.h"
#include "common/csi/grpc.h"
#include "common/csi/volume.h"
#include "common/aws/ec2.h"
#include "common/grpc/server.h"

#define GIB (1LL << 30)

/* ---- parameters (csi_controller_params.c) ---- */

/* What AWS allows per volume type (the documented limits; checked before calling AWS). */
struct csi_vol_type {
	const char *name;
	long long min_gib, max_gib;
	bool iops_allowed, iops_required;
	long long iops_min, iops_max, iops_per_gib; /* gp3: iops_min is also the baseline */
	bool throughput_allowed;
	long long tput_min, tput_max; /* MiB/s */
	double tput_per_iops;	      /* gp3: 0.25 MiB/s per IOPS */
	bool multi_attach;	      /* io1/io2 */
};
const struct csi_vol_type *csi_vol_type_find(const char *name);

struct csi_vol_params {
	char type[16];
	bool iops_set, iops_per_gb_set, throughput_set, auto_iops, auto_iops_on_modify;
	long long iops, iops_per_gb, throughput;
	bool encrypted;
	char *kms_key;
	char *fstype;
	char *outpost_arn;
	bool init_rate_set;
	long long init_rate; /* volumeInitializationRate, MiB/s */
	struct csi_kv *ctx;  /* volume_context entries (format options, fstype) */
	size_t n_ctx;
	struct csi_kv *tags; /* tags from the parameters (pvc/pv names, tagSpecification_N) */
	size_t n_tags;
};

struct csi_tag_opts {
	bool warn_on_invalid_tag; /* --warn-on-invalid-tag: skip a bad tag instead of failing */
};

void csi_vol_params_release(struct csi_vol_params *p);
/* Parses CreateVolume parameters (keys case-insensitive; unknown keys are an error). On
 * error returns -EINVAL with a sentence in err (for INVALID_ARGUMENT). */
int csi_vol_params_parse(const struct csi_kv *params, size_t n, const struct csi_tag_opts *o,
			 struct csi_vol_params *ret, char *err, size_t errlen);

/* The size in GiB for a capacity range: required rounded up to whole GiB; no range: 100 GiB
 * (clamped into the type's range and the limit); min_gib (a source snapshot's size) raises
 * the default. Returns 0, or the gRPC code for the error (INVALID_ARGUMENT for a malformed
 * range, OUT_OF_RANGE for a size the type or the limit cannot give) with err filled. */
int csi_size_resolve(const struct csi_vol_type *t, bool has_range, long long required,
		     long long limit, long long min_gib, long long *ret_gib, char *err,
		     size_t errlen);
/* The IOPS to ask for (0: leave it to AWS), from iops / iopsPerGB, capped at the type's
 * maximum and ratio as upstream does, raised to the minimum only with
 * allowAutoIOPSPerGBIncrease; a value AWS would refuse gives -EINVAL with err filled. */
int csi_iops_resolve(const struct csi_vol_type *t, const struct csi_vol_params *p, long long gib,
		     long long *ret_iops, char *err, size_t errlen);
/* Checks throughput against the type and the IOPS (0 = AWS's default baseline). */
int csi_throughput_check(const struct csi_vol_type *t, long long tput, long long iops, char *err,
			 size_t errlen);

/* Picks the zone: preferred topologies first, then requisite, reading
 * topology.kubernetes.io/zone then topology.ebs.csi.aws.com/zone. NULL when none is given.
 * ret_zone_id gets a topology.k8s.aws/zone-id when that is all a term has. */
const char *csi_pick_zone(const Csi__V1__TopologyRequirement *req, const char **ret_zone_id);
/* True when zone satisfies the requisite terms (or there are none). */
bool csi_zone_allowed(const Csi__V1__TopologyRequirement *req, const char *zone);

/* The EC2 ClientToken for a creation: hex(sha256(name "\n" canonical [ "#" attempt ])),
 * 64 characters; attempt 1 gives the plain form. */
void csi_client_token(const char *name, const char *canonical, unsigned attempt, char ret[65]);

/* Expands {{ .PVCName }}, {{ .PVCNamespace }}, {{ .PVName }} in a tag value; -EINVAL for any
 * other template. */
int csi_tag_template(const char *in, const char *pvc, const char *ns, const char *pv, char **ret);
/* Checks a tag as EC2 would (key 1-128, value 0-256 characters, no "aws:" prefix). */
int csi_tag_check(const char *key, const char *value, char *err, size_t errlen);

/* A capability of a request, supported as csi_cap_supported() says. */
static inline bool ctrl_cap_supported(const Csi__V1__VolumeCapability *pb, bool multi_attach)
{
	struct csi_cap cap;

	csi_cap_of_pb(pb, &cap);
	return csi_cap_supported(&cap, multi_attach);
}

/* ---- device names (csi_controller_devices.c) ---- */

#define CSI_DEVICE_NAME_MAX 16
extern const char *const csi_device_names[];
extern const size_t csi_n_device_names;

struct csi_devices;
int csi_devices_new(struct csi_devices **ret);
void csi_devices_free(struct csi_devices *d);
/* Picks a device name for volume on node: the name already held for that volume, else the
 * first name of the upstream list that is neither in `used` (the instance's block-device
 * mappings; /dev/sdX and /dev/xvdX count as the same device) nor held by another volume of
 * the node, trying names AWS refused last. The name is held until csi_devices_release.
 * -ENOSPC when every name is taken. */
int csi_devices_pick(struct csi_devices *d, const char *node, const char *volume,
		     const char *const *used, size_t n_used, char ret[CSI_DEVICE_NAME_MAX]);
void csi_devices_release(struct csi_devices *d, const char *node, const char *volume);
/* AWS said the name is in use: try it last on this node from now on (for an hour). */
void csi_devices_mark_bad(struct csi_devices *d, const char *node, const char *name);
/* When the name held for volume on node was picked (monotonic ns), 0 when none is held. */
int64_t csi_devices_held_since(struct csi_devices *d, const char *node, const char *volume);
/* Names held right now on a node (tests). */
size_t csi_devices_held(struct csi_devices *d, const char *node);

/* ---- the controller (csi_controller.c) ---- */

struct aws_client;
struct aws_batcher;
struct aws_error;
struct metric;
struct coalescer;
struct keylock;

struct aws_batch_kind;
struct aws_client_opts;

struct csi_batch_fetch {
	struct csi_ctrl *c;
	const struct aws_batch_kind *k;
};

struct csi_ctrl {
	struct aws_client *aws;
	bool batching;
	struct aws_batcher *b_volumes, *b_instances, *b_snapshots, *b_mods;
	struct csi_devices *devices;
	struct coalescer *coalescer;

	/* options */
	struct csi_kv *extra_tags;
	size_t n_extra_tags;
	const char *cluster_id; /* --k8s-tag-cluster-id */
	struct csi_tag_opts tag_opts;
	int64_t modify_window_ns;   /* --modify-volume-request-handler-timeout */
	int64_t attach_timeout_ns;  /* bound on waiting for attached/detached */
	int64_t stuck_attaching_ns; /* attaching longer than this: detach and fail (90 s) */
	int64_t create_timeout_ns;  /* bound on waiting for available */
	int64_t poll_scale;	    /* tests: divides the waits between polls (1 normally) */

	struct keylock *inflight; /* keys of operations in progress */

	pthread_mutex_t lock; /* guards what follows */
	char **zones; /* DescribeAvailabilityZones, cached */
	size_t n_zones;
	int64_t probe_at; /* last successful probe (monotonic) */

	struct metric *m_requests, *m_errors, *m_throttles;
	struct csi_batch_fetch fetchers[4];
};

/* Sets up a controller whose options were filled in (tests fill them directly); the AWS
 * client is made from ao. csi_ctrl_release() undoes it (also after a failed setup). */
int csi_ctrl_setup(struct csi_ctrl *c, const struct aws_client_opts *ao);
void csi_ctrl_release(struct csi_ctrl *c);
/* The Controller service's method table (userdata: the struct csi_ctrl). */
extern const struct rpc_method csi_ctrl_methods[];
/* The Identity Probe of the controller: an EC2 DryRun call, cached for 10 s. */
int csi_ctrl_probe(void *ud, char *why, size_t n);

/* The in-flight set (common/base/keylock.h): -EBUSY when key is already there, -ENOSPC when
 * CSI_CTRL_MAX_INFLIGHT keys are (ABORTED for the caller). */
#define CSI_CTRL_MAX_INFLIGHT 4096
int ctrl_inflight_add(struct csi_ctrl *c, const char *key);
void ctrl_inflight_del(struct csi_ctrl *c, const char *key);
/* Sleeps ns (at most what is left before the call's deadline); false when the call is
 * stopping or its deadline passed. */
bool ctrl_sleep(struct rpc_call *call, int64_t ns);
/* Sets the call's status from a failed AWS call: NotFound-kind errors give not_found_code,
 * throttling and transport errors UNAVAILABLE, others fallback_code. Returns the code. */
int ctrl_aws_fail(struct rpc_call *call, int r, const struct aws_error *e, const char *what,
		  int not_found_code, int fallback_code);
/* Identifiers from requests are checked with common/aws/ids.h before any AWS call. A
 * malformed one names nothing that can exist: DeleteVolume, DeleteSnapshot and
 * ControllerUnpublishVolume answer OK and ListSnapshots an empty list (what the CSI spec asks
 * for a missing object), every other call INVALID_ARGUMENT (ctrl_bad_id). */
#define CTRL_ID_STR_MAX 96
/* An id made fit for a message (escaped, cut to CTRL_ID_STR_MAX; allocated on the call). */
const char *ctrl_id_str(struct rpc_call *call, const char *id);
/* Sets INVALID_ARGUMENT "<what> "<id>" is malformed" on the call; returns the code. */
int ctrl_bad_id(struct rpc_call *call, const char *what, const char *id);
/* A copy of kv pairs of a request map (entries of protobuf-c map fields). */
struct csi_kv *ctrl_map_kv(struct rpc_call *call, ProtobufCMessage *const *entries, size_t n);

/* ---- EC2 (csi_controller_ec2.c) ---- */

/* All return 0 or a negative errno (aws_error_errno of the reply) with err filled. */
int ec2_describe_volume(struct csi_ctrl *c, const char *id, struct ec2_volume *ret,
			struct aws_error *err);
/* Volumes carrying tag key=value (any state but deleted). */
int ec2_find_volumes(struct csi_ctrl *c, const char *key, const char *value,
		     struct ec2_volume **ret, size_t *ret_n, struct aws_error *err);
/* One page of the driver's volumes (tag ebs.csi.aws.com/cluster=true); token NULL for the
 * first; *ret_next is malloc'd or NULL at the end. max 0: AWS's default page. */
int ec2_list_volumes(struct csi_ctrl *c, const char *token, int max, struct ec2_volume **ret,
		     size_t *ret_n, char **ret_next, struct aws_error *err);

struct ec2_create_volume {
	const char *zone, *zone_id;
	const char *type;
	long long size_gib, iops, throughput;
	bool encrypted;
	const char *kms_key;
	const char *snapshot;
	bool multi_attach;
	const char *outpost;
	long long init_rate;
	const char *client_token;
	const struct csi_kv *tags;
	size_t n_tags;
};
int ec2_create_volume(struct csi_ctrl *c, const struct ec2_create_volume *q, char ret_id[32],
		      struct aws_error *err);
int ec2_delete_volume(struct csi_ctrl *c, const char *id, struct aws_error *err);
int ec2_attach_volume(struct csi_ctrl *c, const char *volume, const char *instance,
		      const char *device, struct aws_error *err);
int ec2_detach_volume(struct csi_ctrl *c, const char *volume, const char *instance,
		      struct aws_error *err);
/* The device names of an instance's block-device mappings (strv), and its state and zone. */
int ec2_describe_instance(struct csi_ctrl *c, const char *id, char ***ret_devices,
			  char ret_state[16], char ret_az[48], struct aws_error *err);
int ec2_modify_volume(struct csi_ctrl *c, const char *id, long long size_gib, const char *type,
		      long long iops, long long throughput, struct aws_error *err);
/* The latest modification of a volume; -ENOENT when it has none. */
int ec2_describe_modification(struct csi_ctrl *c, const char *id, struct ec2_modification *ret,
			      struct aws_error *err);
int ec2_create_tags(struct csi_ctrl *c, const char *id, const struct csi_kv *tags, size_t n,
		    struct aws_error *err);

int ec2_create_snapshot(struct csi_ctrl *c, const char *volume, const struct csi_kv *tags, size_t n,
			struct ec2_snapshot *ret, struct aws_error *err);
int ec2_delete_snapshot(struct csi_ctrl *c, const char *id, struct aws_error *err);
int ec2_describe_snapshot(struct csi_ctrl *c, const char *id, struct ec2_snapshot *ret,
			  struct aws_error *err);
int ec2_find_snapshots(struct csi_ctrl *c, const char *key, const char *value,
		       struct ec2_snapshot **ret, size_t *ret_n, struct aws_error *err);
/* One page of snapshots: of a volume (source_volume set), else the driver's (tagged). */
int ec2_list_snapshots(struct csi_ctrl *c, const char *source_volume, const char *token, int max,
		       struct ec2_snapshot **ret, size_t *ret_n, char **ret_next,
		       struct aws_error *err);

/* The region's available zones (cached after the first success). */
int ec2_zones(struct csi_ctrl *c, char ***ret, size_t *ret_n, struct aws_error *err);
/* A DryRun call: 0 when AWS answers DryRunOperation. */
int ec2_dry_run(struct csi_ctrl *c, struct aws_error *err);

/* ---- handlers ---- */
int csi_ctrl_create_volume(struct rpc_call *call, const ProtobufCMessage *in,
			   ProtobufCMessage **out);
int csi_ctrl_delete_volume(struct rpc_call *call, const ProtobufCMessage *in,
			   ProtobufCMessage **out);
int csi_ctrl_validate(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out);
int csi_ctrl_list_volumes(struct rpc_call *call, const ProtobufCMessage *in,
			  ProtobufCMessage **out);
int csi_ctrl_get_volume(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out);
int csi_ctrl_publish(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out);
int csi_ctrl_unpublish(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out);
int csi_ctrl_expand(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out);
int csi_ctrl_modify(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out);
int csi_ctrl_create_snapshot(struct rpc_call *call, const ProtobufCMessage *in,
			     ProtobufCMessage **out);
int csi_ctrl_delete_snapshot(struct rpc_call *call, const ProtobufCMessage *in,
			     ProtobufCMessage **out);
int csi_ctrl_list_snapshots(struct rpc_call *call, const ProtobufCMessage *in,
			    ProtobufCMessage **out);

/* Builds the CSI Volume of an EC2 volume (capacity, id, zone topology; context optional). */
Csi__V1__Volume *csi_ctrl_volume_msg(struct rpc_call *call, const struct ec2_volume *v,
				     const struct csi_kv *ctx, size_t n_ctx);

/* The coalescer (csi_controller_modify.c). */
int csi_coalescer_new(struct coalescer **ret);
void csi_coalescer_free(struct coalescer *co);

/* Paging tokens (csi_controller_snapshot.c): our own token over an AWS token and an offset
 * into its page. */
int csi_token_encode(const char *aws_token, size_t skip, char **ret);
int csi_token_decode(const char *token, char **ret_aws_token, size_t *ret_skip);

/* A CSI list call over EC2's pages (ListVolumes, ListSnapshots). */
struct ctrl_pager {
	const char *what; /* "listing volumes": what failed, in the error */
	/* One EC2 page (token NULL: the first): its items, freed with free_items, their number,
	 * and the next EC2 token (malloc'd, NULL at the end). */
	int (*fetch)(struct csi_ctrl *c, const void *arg, const char *token, int max, void **ret,
		     size_t *ret_n, char **ret_next, struct aws_error *err);
	/* Adds entry i of a page to the reply; negative when out of memory. */
	int (*add)(struct rpc_call *call, ProtobufCMessage *rep, const void *items, size_t i);
	void (*free_items)(void *items, size_t n);
};
/* Adds at most max_entries (0: all) entries to rep, from starting_token ("" for the start) on,
 * and sets *ret_next_token when more are left. Returns an rpc code (set on the call). */
int ctrl_list_pages(struct rpc_call *call, const struct ctrl_pager *pg, const void *arg,
		    int32_t max_entries, const char *starting_token, ProtobufCMessage *rep,
		    char **ret_next_token);
