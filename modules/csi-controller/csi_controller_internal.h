/* Internals of `aws-k8s csi-controller`, shared by its files. Calls go one way: the entry
 * (csi_controller.c) and the gRPC adapter (csi_controller_grpc.c) call the service
 * (csi_controller_service.h), whose calls use the helpers below; nothing calls back up.
 *   csi_controller.c          usage, flags, main: the wiring
 *   csi_controller_grpc.c     the gRPC adapter: protobuf <-> the plain requests, csi_error ->
 *                             status, the method table, ControllerGetCapabilities
 *   csi_controller_setup.c    setup and release, the batchers and metrics, the Probe
 *   csi_controller_meta.c     the region from --metadata-sources (IMDS, the Kubernetes Node)
 *   csi_controller_labeler.c  ebs-csi-driver metadataLabeler: the Nodes' count labels
 *   csi_controller_create.c   CreateVolume, in named steps
 *   csi_controller_volume.c   DeleteVolume, ValidateVolumeCapabilities, ControllerGetVolume
 *   csi_controller_publish.c  ControllerPublish/Unpublish
 *   csi_controller_modify.c   ControllerExpand/Modify through the per-volume coalescer
 *   csi_controller_snapshot.c CreateSnapshot, DeleteSnapshot
 *   csi_controller_list.c     ListVolumes, ListSnapshots: our paging over EC2's, the tokens
 *   csi_controller_call.c     what the calls share: waits, locks, AWS errors, ids, tags, the
 *                             CSI view of EC2 items
 *   csi_controller_params.c   CreateVolume parameters, sizes, IOPS, zones, tags, tokens (pure)
 *   csi_controller_devices.c  device-name allocation per node (pure)
 *   csi_controller_detaching.c the detaches waited for, as upstream's detach-pending metric
 *   csi_controller_ec2.c      EC2 calls (replies parsed by common/aws/ec2.h) */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/aws/ec2.h"
#include "common/csi/error.h"
#include "common/csi/volume.h"
#include "modules/csi-controller/csi_controller_service.h"

#define GIB (1LL << 30)

/* ---- the region from metadata (csi_controller_meta.c) ---- */

#define CSI_REGION_MAX 64
struct aws_imds_opts;
struct csi_ctrl_meta_opts {
	char **sources;	       /* --metadata-sources: "imds", "kubernetes", "metadata-labeler" */
	const char *node_name; /* $CSI_NODE_NAME, for kubernetes and metadata-labeler */
	const char *driver;    /* the labels' prefix (--driver-name); NULL: ebs.csi.aws.com */
	int64_t imds_budget_ns;		   /* how long IMDS is retried (with backoff) */
	const struct aws_imds_opts *imds; /* NULL: the defaults and the environment */
};
/* Asks the sources in order for the region (metadata-labeler: the kubernetes source on a Node
 * that carries the labeler's counts, common/csi/labeler.h). 0 with ret filled, or the last
 * source's -errno with "source: why; source: why" in why. */
int csi_ctrl_find_region(const struct csi_ctrl_meta_opts *o, char ret[CSI_REGION_MAX], char *why,
			 size_t n);
/* The region of a Node object: label topology.kubernetes.io/region (or the beta label), else
 * the zone of spec.providerID aws:///<zone>/<id>. 0, -EBADMSG (malformed label) or -ENODATA,
 * with why filled. */
struct cJSON;
int csi_ctrl_region_of_node(const struct cJSON *node, char ret[CSI_REGION_MAX], char *why, size_t n);

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

void csi_vol_params_release(struct csi_vol_params *p);
/* Parses CreateVolume parameters (keys case-insensitive; unknown keys are an error). On
 * error returns -EINVAL with a sentence in err (for INVALID_ARGUMENT). */
int csi_vol_params_parse(const struct csi_kv *params, size_t n, const struct csi_tag_opts *o,
			 struct csi_vol_params *ret, char *err, size_t errlen);

/* The size in GiB for a capacity range: required rounded up to whole GiB; no range: 100 GiB
 * (clamped into the type's range and the limit); min_gib (a source snapshot's size) raises
 * the default. CSI_OK, or INVALID_ARGUMENT for a malformed range, OUT_OF_RANGE for a size the
 * type or the limit cannot give. */
enum csi_code csi_size_resolve(const struct csi_vol_type *t, bool has_range, long long required,
			       long long limit, long long min_gib, long long *ret_gib,
			       struct csi_error *err);
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
const char *csi_pick_zone(const struct csi_ctrl_topology_req *req, const char **ret_zone_id);
/* True when zone satisfies the requisite terms (or there are none; req may be NULL). */
bool csi_zone_allowed(const struct csi_ctrl_topology_req *req, const char *zone);

/* The EC2 ClientToken for a creation: hex(sha256(name "\n" canonical [ "#" attempt ])),
 * 64 characters; attempt 1 gives the plain form. */
void csi_client_token(const char *name, const char *canonical, unsigned attempt, char ret[65]);

/* Checks a tag as upstream's validateExtraTags: key 1-128, value 0-256 characters, not
 * CSIVolumeName, CSIVolumeSnapshotName or ebs.csi.aws.com/cluster, no "kubernetes.io" or
 * "aws:" prefix. */
int csi_tag_check(const char *key, const char *value, char *err, size_t errlen);

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

/* ---- detaches pending, in the metrics (csi_controller_detaching.c) ---- */

/* At most this many (volume, instance) pairs are tracked at once. */
#define CSI_DETACHING_MAX 4096
struct csi_detaching;
/* Registers aws_ebs_csi_ec2_detach_pending_seconds_total and its collector's two families, and
 * the collector: a pair pending for longer than threshold_ns is exported at each scrape. */
int csi_detaching_new(int64_t threshold_ns, struct csi_detaching **ret);
void csi_detaching_free(struct csi_detaching *d);
/* A poll of a detach from instance saw the attachment in state (EC2's attachment state:
 * "detaching", "busy", "attached"...); NULL, "" or "detached": it is done (forgotten). */
void csi_detaching_seen(struct csi_detaching *d, const char *volume, const char *instance,
			const char *state);

/* ---- what the calls share (csi_controller_call.c) ---- */

struct aws_error;

/* At most this many keys in the in-flight set (common/base/keylock.h). */
#define CSI_CTRL_MAX_INFLIGHT 4096
/* Takes key in the in-flight set: CSI_OK, or ABORTED "an operation for <what> is already in
 * progress" (what printf-formatted), or ABORTED when CSI_CTRL_MAX_INFLIGHT keys are held.
 * ctrl_unlock() gives it back. */
enum csi_code ctrl_lock(struct csi_ctrl *c, const char *key, struct csi_error *err,
			const char *what_fmt, ...) __attribute__((format(printf, 4, 5)));
void ctrl_unlock(struct csi_ctrl *c, const char *key);

/* Sleeps ns (at most until 50 ms before the call's deadline); false when the call is stopping
 * or its deadline passed. */
bool ctrl_sleep(const struct csi_ctrl_call *call, int64_t ns);

/* Sets err from a failed AWS call (r, the -errno, and e, AWS's error): -ENOENT gives
 * not_found, throttling and transport errors UNAVAILABLE, others fallback; the message is
 * "<what>: <AWS's message or strerror>". Returns the code. */
enum csi_code ctrl_aws_fail(struct csi_error *err, int r, const struct aws_error *e,
			    const char *what, enum csi_code not_found, enum csi_code fallback);

/* Identifiers from requests are checked with common/aws/ids.h before any AWS call. A
 * malformed one names nothing that can exist: DeleteVolume, DeleteSnapshot and
 * ControllerUnpublishVolume answer OK and ListSnapshots an empty list (what the CSI spec asks
 * for a missing object), every other call INVALID_ARGUMENT (ctrl_bad_id). */
#define CTRL_ID_STR_MAX 96
/* An id made fit for a message: escaped, cut to CTRL_ID_STR_MAX; returns buf. */
const char *ctrl_id_str(const char *id, char buf[CTRL_ID_STR_MAX]);
/* Sets INVALID_ARGUMENT "<what> "<id>" is malformed"; returns it. */
enum csi_code ctrl_bad_id(struct csi_error *err, const char *what, const char *id);

/* Tags of a creation, at most CTRL_MAX_TAGS: a key set twice keeps the last value. The
 * strings are borrowed. -E2BIG past the cap. */
#define CTRL_MAX_TAGS 50
struct ctrl_tags {
	struct csi_kv kv[CTRL_MAX_TAGS];
	size_t n;
	char cluster_key[160];	    /* kubernetes.io/cluster/<id> */
	bool no_kubernetes_cluster; /* snapshots: upstream gives them no KubernetesCluster */
};
int ctrl_tag_add(struct ctrl_tags *t, const char *key, const char *value);
/* The tags every resource gets: --extra-tags; with --k8s-tag-cluster-id
 * kubernetes.io/cluster/<id>=owned, Name=<id>-dynamic-<name> (written into name_tag) and,
 * unless t->no_kubernetes_cluster, KubernetesCluster=<id>. */
int ctrl_tags_add_extra(const struct csi_ctrl *c, struct ctrl_tags *t);
int ctrl_tags_add_cluster(const struct csi_ctrl *c, struct ctrl_tags *t, const char *name,
			  char *name_tag, size_t name_len);

/* The CSI view of an EC2 volume: id, capacity, zone, a copy of ctx and, when with_published,
 * the nodes it is attached or attaching to. 0 or -ENOMEM (ret released). */
int ctrl_volume_of(const struct ec2_volume *v, const struct csi_kv *ctx, size_t n_ctx,
		   bool with_published, struct csi_ctrl_volume *ret);
void ctrl_snapshot_of(const struct ec2_snapshot *s, struct csi_ctrl_snapshot *ret);

/* DeleteVolume and DeleteSnapshot: what differs between them. */
struct ctrl_deletion {
	const char *kind;	/* "volume", "snapshot": the log key and the messages */
	const char *key_prefix; /* of the in-flight key */
	bool (*id_valid)(const char *id);
	int (*remove)(struct csi_ctrl *c, const char *id, struct aws_error *err);
	const char *in_use_code; /* an AWS code that also means "in use" (NULL: -EBUSY only) */
};
/* Deletes id: OK when it is gone already (AWS's NotFound) or cannot exist (malformed);
 * FAILED_PRECONDITION while in use. */
enum csi_code ctrl_delete(struct csi_ctrl *c, const struct ctrl_deletion *d, const char *id,
			  struct csi_error *err);

/* ---- the coalescer (csi_controller_modify.c) ---- */

int csi_coalescer_new(struct coalescer **ret);
void csi_coalescer_free(struct coalescer *co);

/* ---- paging (csi_controller_list.c) ---- */

/* Our token over an AWS token and an offset into its page. */
int csi_token_encode(const char *aws_token, size_t skip, char **ret);
int csi_token_decode(const char *token, char **ret_aws_token, size_t *ret_skip);

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
