/* Internals of `aws-k8s csi-controller`, shared by its files:
 *   csi_controller.c          main, flags, in-flight set, capabilities, probe, method table
 *   csi_controller_params.c   CreateVolume parameters, sizes, IOPS, tags, tokens (pure)
 *   csi_controller_devices.c  device-name allocation per node (pure)
 *   csi_controller_ec2.c      EC2 calls and their replies as structs
 *   csi_controller_volume.c   Create/Delete/Validate/List/Get volume
 *   csi_controller_publish.c  ControllerPublish/Unpublish
 *   csi_controller_modify.c   ControllerExpand/Modify through the per-volume coalescer
 *   csi_controller_snapshot.c Create/Delete/ListSnapshots, paging tokens */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/grpc/server.h"
#include "modules/csi/csi.pb-c.h"
#include "modules/csi/csi_common.h"

#define GIB (1LL << 30)

/* ---- parameters (csi_controller_params.c) ---- */

struct csi_kv {
	char *key;
	char *value;
};

/* What AWS allows per volume type (the documented limits; checked before calling AWS). */
struct csi_vol_type {
	const char *name;
	long long min_gib, max_gib;
	bool iops_allowed, iops_required;
	long long iops_min, iops_max, iops_per_gib; /* gp3: iops_min is also the baseline */
	bool throughput_allowed;
	long long tput_min, tput_max;   /* MiB/s */
	double tput_per_iops;           /* gp3: 0.25 MiB/s per IOPS */
	bool multi_attach;              /* io1/io2 */
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
	long long init_rate;       /* volumeInitializationRate, MiB/s */
	struct csi_kv *ctx;        /* volume_context entries (format options, fstype) */
	size_t n_ctx;
	struct csi_kv *tags;       /* tags from the parameters (pvc/pv names, tagSpecification_N) */
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
		     long long limit, long long min_gib, long long *ret_gib, char *err, size_t errlen);
/* The IOPS to ask for (0: leave it to AWS), from iops / iopsPerGB, capped at the type's
 * maximum and ratio as upstream does, raised to the minimum only with
 * allowAutoIOPSPerGBIncrease; a value AWS would refuse gives -EINVAL with err filled. */
int csi_iops_resolve(const struct csi_vol_type *t, const struct csi_vol_params *p, long long gib,
		     long long *ret_iops, char *err, size_t errlen);
/* Checks throughput against the type and the IOPS (0 = AWS's default baseline). */
int csi_throughput_check(const struct csi_vol_type *t, long long tput, long long iops,
			 char *err, size_t errlen);

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
/* Names held right now on a node (tests). */
size_t csi_devices_held(struct csi_devices *d, const char *node);
