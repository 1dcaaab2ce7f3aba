/* CreateVolume, DeleteVolume, ValidateVolumeCapabilities, ListVolumes, ControllerGetVolume.
 *
 * Idempotency of CreateVolume does not rely on AWS: the volume is looked up by its
 * CSIVolumeName tag first (same parameters: the same volume; different ones: ALREADY_EXISTS),
 * concurrent calls for one name get ABORTED, and the EC2 ClientToken is derived from the name
 * and the parameters, so a retry after a lost reply finds the volume EC2 already made. A token
 * whose volume was deleted since ("burned") is followed by name#2, name#3... */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/client.h"
#include "common/aws/error.h"
#include "common/aws/ids.h"
#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/csi-controller/csi_controller_internal.h"

#define TAG_NAME "CSIVolumeName"
#define TAG_CLUSTER "ebs.csi.aws.com/cluster"
#define TAG_CLONE_SOURCE "ebs.csi.aws.com/clone-source"
#define TAG_CLONE_FOR "ebs.csi.aws.com/clone-for"
#define MAX_TAGS 50
#define MAX_TOKEN_ATTEMPTS 4

#define OOM(call) rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory")

Csi__V1__Volume *csi_ctrl_volume_msg(struct rpc_call *call, const struct ec2_volume *v,
				     const struct csi_kv *ctx, size_t n_ctx)
{
	Csi__V1__Volume *vol = rpc_call_new(call, &csi__v1__volume__descriptor);
	Csi__V1__Topology *t = rpc_call_new(call, &csi__v1__topology__descriptor);

	if (!vol || !t || !(vol->volume_id = rpc_call_strdup(call, v->id)))
		return NULL;
	vol->capacity_bytes = v->size_gib * GIB;
	for (size_t i = 0; i < n_ctx; i++)
		if (rpc_call_map_add(call, &vol->base, "volume_context", ctx[i].key, ctx[i].value) <
		    0)
			return NULL;
	if (*v->az) {
		if (rpc_call_map_add(call, &t->base, "segments", CSI_WELL_KNOWN_ZONE_KEY, v->az) <
			0 ||
		    rpc_call_array_add(call, &vol->base, "accessible_topology", t) < 0)
			return NULL;
	}
	return vol;
}

static bool name_valid(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

/* Everything CreateVolume resolved from the request. */
struct create {
	const char *name;
	struct csi_vol_params p;
	const struct csi_vol_type *t;
	long long gib, iops, tput;
	bool multi;
	const char *zone, *zone_id;
	const char *snapshot; /* source snapshot */
	const char *clone_of; /* source volume */
	long long required, limit;
};

/* Is an existing volume what this request asks for? NULL when it is, else the difference. */
static const char *mismatch(const struct create *cr, const Csi__V1__CreateVolumeRequest *req,
			    const struct ec2_volume *v)
{
	if (strcasecmp(v->type, cr->t->name) != 0)
		return "volume type";
	if (cr->required && v->size_gib * GIB < cr->required)
		return "size";
	if (cr->limit && v->size_gib * GIB > cr->limit)
		return "size";
	if (!cr->required && !cr->limit && !cr->snapshot && !cr->clone_of && v->size_gib != cr->gib)
		return "size";
	if (cr->iops && v->iops != cr->iops)
		return "iops";
	if (cr->tput && v->throughput != cr->tput)
		return "throughput";
	if (cr->p.encrypted != v->encrypted)
		return "encryption";
	if (cr->p.kms_key && !strstr(cr->p.kms_key, "alias/") &&
	    strcmp(v->kms, cr->p.kms_key) != 0 && !str_has_suffix(v->kms, cr->p.kms_key))
		return "KMS key";
	if (cr->multi != v->multi_attach)
		return "multi-attach";
	if (cr->clone_of) {
		const char *src = ec2_tags_get(v->tags, v->n_tags, TAG_CLONE_SOURCE);
		if (!src || strcmp(src, cr->clone_of) != 0)
			return "source volume";
	} else if (cr->snapshot ? strcmp(v->snapshot, cr->snapshot) != 0 : *v->snapshot != 0) {
		return "source snapshot";
	}
	if (!csi_zone_allowed(req->accessibility_requirements, v->az))
		return "zone";
	if ((cr->p.outpost_arn ? cr->p.outpost_arn : "")[0] &&
	    strcmp(v->outpost, cr->p.outpost_arn) != 0)
		return "outpost";
	return NULL;
}

static bool alive(const struct ec2_volume *v)
{
	return strcmp(v->state, "deleting") != 0 && strcmp(v->state, "deleted") != 0 &&
	       strcmp(v->state, "error") != 0;
}

/* Polls until the volume is available. 0, or the gRPC code already set on the call;
 * -ESTALE when the volume is gone (deleted, or never visible: a burned token). */
static int wait_available(struct rpc_call *call, struct csi_ctrl *c, const char *id,
			  struct ec2_volume *ret)
{
	int64_t deadline = now_mono_ns() + c->create_timeout_ns, delay = 250 * NSEC_PER_MSEC;
	unsigned not_found = 0;
	struct aws_error err;
	int r;

	for (;;) {
		if (!ctrl_sleep(call, delay / c->poll_scale))
			return rpc_call_error(call, RPC_DEADLINE_EXCEEDED,
					      "volume %s is still being created", id);
		aws_error_clear(&err);
		struct ec2_volume v = {0};
		r = ec2_describe_volume(c, id, &v, &err);
		if (r == -ENOENT) {
			if (++not_found >= 5)
				return -ESTALE;
		} else if (r < 0) {
			return ctrl_aws_fail(call, r, &err, "describing the new volume",
					     RPC_INTERNAL, RPC_INTERNAL);
		} else if (strcmp(v.state, "available") == 0 || strcmp(v.state, "in-use") == 0) {
			*ret = v;
			return 0;
		} else if (strcmp(v.state, "deleting") == 0 || strcmp(v.state, "deleted") == 0) {
			ec2_volume_release(&v);
			return -ESTALE;
		} else if (strcmp(v.state, "error") == 0) {
			ec2_volume_release(&v);
			ec2_delete_volume(c, id, &err);
			return rpc_call_error(call, RPC_INTERNAL,
					      "volume %s went into the error state (a KMS key it "
					      "cannot use?); deleted it",
					      id);
		} else {
			ec2_volume_release(&v);
		}
		if (now_mono_ns() > deadline)
			return rpc_call_error(call, RPC_DEADLINE_EXCEEDED,
					      "volume %s is still being created", id);
		delay = delay * 2 > 5 * NSEC_PER_SEC ? 5 * NSEC_PER_SEC : delay * 2;
	}
}

static int create_error(struct rpc_call *call, int r, const struct aws_error *e)
{
	if (aws_error_is(e, "VolumeLimitExceeded") || aws_error_is(e, "MaxIOPSLimitExceeded") ||
	    aws_error_is(e, "InsufficientVolumeCapacity"))
		return ctrl_aws_fail(call, r, e, "creating the volume", RPC_RESOURCE_EXHAUSTED,
				     RPC_RESOURCE_EXHAUSTED);
	if (aws_error_is(e, "InvalidSnapshot.NotFound") ||
	    aws_error_is(e, "InvalidVolume.NotFound"))
		return ctrl_aws_fail(call, r, e, "creating the volume", RPC_NOT_FOUND,
				     RPC_NOT_FOUND);
	if (str_has_prefix(e->code, "InvalidParameter") || str_has_prefix(e->code, "InvalidZone") ||
	    aws_error_is(e, "UnknownVolumeType") || aws_error_is(e, "InvalidKMSKey.NotFound") ||
	    aws_error_is(e, "KMSKeyNotAccessible") || aws_error_is(e, "InvalidOutpostArn"))
		return ctrl_aws_fail(call, r, e, "creating the volume", RPC_INVALID_ARGUMENT,
				     RPC_INVALID_ARGUMENT);
	return ctrl_aws_fail(call, r, e, "creating the volume", RPC_ABORTED, RPC_ABORTED);
}

static int add_tag(struct csi_kv *tags, size_t *n, const char *k, const char *v)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp(tags[i].key, k) == 0) {
			tags[i].value = (char *)v;
			return 0;
		}
	if (*n >= MAX_TAGS)
		return -E2BIG;
	tags[*n].key = (char *)k;
	tags[*n].value = (char *)v;
	(*n)++;
	return 0;
}

/* A clone goes through a snapshot of the source, made (or found again) here. */
static int clone_snapshot(struct rpc_call *call, struct csi_ctrl *c, const struct create *cr,
			  char ret_snap[32])
{
	struct ec2_snapshot *found = NULL, s = {0};
	size_t n = 0;
	struct aws_error err = {0};
	int r;

	if ((r = ec2_find_snapshots(c, TAG_CLONE_FOR, cr->name, &found, &n, &err)) < 0)
		return ctrl_aws_fail(call, r, &err, "looking up the clone's snapshot", RPC_INTERNAL,
				     RPC_INTERNAL);
	for (size_t i = 0; i < n && !*s.id; i++)
		if (strcmp(found[i].volume, cr->clone_of) == 0 &&
		    strcmp(found[i].state, "error") != 0)
			str_copy(s.id, sizeof(s.id), found[i].id);
	ec2_snapshots_free(found, n);
	if (!*s.id) {
		struct csi_kv tags[] = {{(char *)TAG_CLONE_FOR, (char *)cr->name},
					{(char *)TAG_CLUSTER, (char *)"true"}};
		if ((r = ec2_create_snapshot(c, cr->clone_of, tags, ARRAY_SIZE(tags), &s, &err)) <
		    0)
			return ctrl_aws_fail(call, r, &err, "snapshotting the source volume",
					     RPC_NOT_FOUND, RPC_ABORTED);
		char id[sizeof(s.id)];
		str_copy(id, sizeof(id), s.id);
		ec2_snapshot_release(&s); /* clears s */
		str_copy(s.id, sizeof(s.id), id);
	}
	/* wait for the snapshot to complete */
	int64_t delay = 500 * NSEC_PER_MSEC;
	for (;;) {
		struct ec2_snapshot cur = {0};
		aws_error_clear(&err);
		r = ec2_describe_snapshot(c, s.id, &cur, &err);
		if (r < 0 && r != -ENOENT)
			return ctrl_aws_fail(call, r, &err, "describing the clone's snapshot",
					     RPC_INTERNAL, RPC_INTERNAL);
		if (r == 0) {
			bool done = strcmp(cur.state, "completed") == 0,
			     failed = strcmp(cur.state, "error") == 0;
			ec2_snapshot_release(&cur);
			if (done)
				break;
			if (failed) {
				ec2_delete_snapshot(c, s.id, &err);
				return rpc_call_error(call, RPC_ABORTED,
						      "the snapshot %s of %s failed", s.id,
						      cr->clone_of);
			}
		}
		if (!ctrl_sleep(call, delay / c->poll_scale))
			return rpc_call_error(call, RPC_DEADLINE_EXCEEDED,
					      "snapshot %s of the source volume is still pending",
					      s.id);
		delay = delay * 2 > 10 * NSEC_PER_SEC ? 10 * NSEC_PER_SEC : delay * 2;
	}
	str_copy(ret_snap, 32, s.id);
	return 0;
}

static int create_new(struct rpc_call *call, struct csi_ctrl *c, struct create *cr,
		      struct ec2_volume *ret)
{
	struct csi_kv tags[MAX_TAGS + 8];
	size_t nt = 0;
	struct aws_error err = {0};
	char canonical[1024], token[65], id[32], clone_snap[32] = "";
	const char *snapshot = cr->snapshot;
	char *name_tag = NULL, *lifecycle = NULL;
	int r;

	if (cr->clone_of) {
		if ((r = clone_snapshot(call, c, cr, clone_snap)) != 0)
			return r;
		snapshot = clone_snap;
	}
	r = 0;
	for (size_t i = 0; i < c->n_extra_tags && r == 0; i++)
		r = add_tag(tags, &nt, c->extra_tags[i].key, c->extra_tags[i].value);
	for (size_t i = 0; i < cr->p.n_tags && r == 0; i++)
		r = add_tag(tags, &nt, cr->p.tags[i].key, cr->p.tags[i].value);
	if (r == 0 && c->cluster_id) {
		lifecycle = rpc_call_printf(call, "kubernetes.io/cluster/%s", c->cluster_id);
		name_tag = rpc_call_printf(call, "%s-dynamic-%s", c->cluster_id, cr->name);
		if (!lifecycle || !name_tag)
			return OOM(call);
		if ((r = add_tag(tags, &nt, lifecycle, "owned")) == 0 &&
		    (r = add_tag(tags, &nt, "KubernetesCluster", c->cluster_id)) == 0)
			r = add_tag(tags, &nt, "Name", name_tag);
	}
	if (r == 0)
		r = add_tag(tags, &nt, TAG_NAME, cr->name);
	if (r == 0)
		r = add_tag(tags, &nt, TAG_CLUSTER, "true");
	if (r == 0 && cr->clone_of)
		r = add_tag(tags, &nt, TAG_CLONE_SOURCE, cr->clone_of);
	if (r < 0)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT,
				      "more than %d tags for the volume", MAX_TAGS);

	snprintf(canonical, sizeof(canonical), "%s|%lld|%lld|%lld|%d|%s|%s|%s|%s|%s|%d|%s|%lld",
		 cr->t->name, cr->gib, cr->iops, cr->tput, cr->p.encrypted,
		 cr->p.kms_key ? cr->p.kms_key : "", cr->zone ? cr->zone : "",
		 cr->zone_id ? cr->zone_id : "", cr->snapshot ? cr->snapshot : "",
		 cr->clone_of ? cr->clone_of : "", cr->multi,
		 cr->p.outpost_arn ? cr->p.outpost_arn : "", cr->p.init_rate);
	for (unsigned attempt = 1;; attempt++) {
		if (attempt > MAX_TOKEN_ATTEMPTS)
			return rpc_call_error(
			    call, RPC_ABORTED,
			    "every client token of volume %s is taken by deleted volumes",
			    cr->name);
		csi_client_token(cr->name, canonical, attempt, token);
		struct ec2_create_volume cv = {
		    .zone = cr->zone,
		    .zone_id = cr->zone_id,
		    .type = cr->t->name,
		    .size_gib = cr->gib,
		    .iops = cr->iops,
		    .throughput = cr->tput,
		    .encrypted = cr->p.encrypted,
		    .kms_key = cr->p.kms_key,
		    .snapshot = snapshot && *snapshot ? snapshot : NULL,
		    .multi_attach = cr->multi,
		    .outpost = cr->p.outpost_arn,
		    .init_rate = snapshot && *snapshot && cr->p.init_rate_set ? cr->p.init_rate : 0,
		    .client_token = token,
		    .tags = tags,
		    .n_tags = nt,
		};
		aws_error_clear(&err);
		r = ec2_create_volume(c, &cv, id, &err);
		if (r < 0 && aws_error_is(&err, "IdempotentParameterMismatch")) {
			log_info("client token in use by other parameters, trying the next one",
				 KV_S("name", cr->name), KV_U("attempt", attempt));
			continue;
		}
		if (r < 0)
			return create_error(call, r, &err);
		log_info("volume created", KV_S("name", cr->name), KV_S("volume", id),
			 KV_S("zone", cr->zone ? cr->zone : ""), KV_S("type", cr->t->name),
			 KV_I("gib", cr->gib));
		r = wait_available(call, c, id, ret);
		if (r == -ESTALE) {
			log_info("the client token names a deleted volume, trying the next one",
				 KV_S("name", cr->name), KV_S("volume", id),
				 KV_U("attempt", attempt));
			continue;
		}
		break;
	}
	if (r == 0 && *clone_snap) {
		aws_error_clear(&err);
		if (ec2_delete_snapshot(c, clone_snap, &err) < 0)
			log_warn("could not delete the clone's temporary snapshot",
				 KV_S("snapshot", clone_snap), KV_S("error", err.message));
	}
	return r;
}

/* The size of the snapshot or of the volume a new volume is made from. */
static int source_gib(struct csi_ctrl *c, const struct create *cr, long long *ret,
		      struct aws_error *err)
{
	struct ec2_snapshot s = {0};
	struct ec2_volume v = {0};
	int r;

	if (cr->snapshot) {
		if ((r = ec2_describe_snapshot(c, cr->snapshot, &s, err)) < 0)
			return r;
		*ret = s.size_gib;
		ec2_snapshot_release(&s);
	} else {
		if ((r = ec2_describe_volume(c, cr->clone_of, &v, err)) < 0)
			return r;
		*ret = v.size_gib;
		ec2_volume_release(&v);
	}
	return 0;
}

int csi_ctrl_create_volume(struct rpc_call *call, const ProtobufCMessage *in,
			   ProtobufCMessage **out)
{
	const Csi__V1__CreateVolumeRequest *req = (const void *)in;
	struct csi_ctrl *c = rpc_call_userdata(call);
	struct create cr = {.name = req->name};
	struct ec2_volume vol = {0}, *found = NULL;
	size_t n_found = 0;
	struct aws_error err = {0};
	char msg[512], key[300];
	long long min_gib = 0;
	bool locked = false;
	int code;

	if (!*req->name)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "volume name is missing");
	if (strlen(req->name) > 255 || !name_valid(req->name))
		return rpc_call_error(
		    call, RPC_INVALID_ARGUMENT,
		    "volume name must be 1 to 255 characters without control characters");
	if (!req->n_volume_capabilities)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT,
				      "volume capabilities are missing");
	for (size_t i = 0; i < req->n_volume_capabilities; i++) {
		const Csi__V1__VolumeCapability *cap = req->volume_capabilities[i];
		if (!ctrl_cap_supported(cap, true))
			return rpc_call_error(
			    call, RPC_INVALID_ARGUMENT,
			    "volume capability %zu is not supported (access mode %d%s)", i,
			    cap && cap->access_mode ? cap->access_mode->mode : 0,
			    cap && cap->access_mode &&
				    cap->access_mode->mode ==
					CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER
				? ": multi-attach needs block access"
				: "");
		if (cap->access_mode->mode ==
		    CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER)
			cr.multi = true;
	}
	struct csi_kv *params =
	    ctrl_map_kv(call, (ProtobufCMessage *const *)req->parameters, req->n_parameters);
	struct csi_kv *mutable = ctrl_map_kv(
	    call, (ProtobufCMessage *const *)req->mutable_parameters, req->n_mutable_parameters);
	if (!params || !mutable)
		return OOM(call);
	/* mutable parameters (VolumeAttributesClass) override the class's: iops, throughput, type,
	 * tags */
	size_t np = req->n_parameters;
	struct csi_kv *all =
	    rpc_call_alloc(call, (np + req->n_mutable_parameters + 1) * sizeof(*all));
	if (!all)
		return OOM(call);
	memcpy(all, params, np * sizeof(*all));
	for (size_t i = 0; i < req->n_mutable_parameters; i++) {
		size_t k;
		for (k = 0; k < np; k++)
			if (strcasecmp(all[k].key, mutable[i].key) == 0)
				break;
		all[k] = mutable[i];
		if (k == np)
			np++;
	}
	if (csi_vol_params_parse(all, np, &c->tag_opts, &cr.p, msg, sizeof(msg)) < 0)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "%s", msg);
	cr.t = csi_vol_type_find(cr.p.type);
	if (cr.multi && !cr.t->multi_attach) {
		code = rpc_call_error(
		    call, RPC_INVALID_ARGUMENT,
		    "multi-attach (MULTI_NODE_MULTI_WRITER) needs an io1 or io2 volume, not %s",
		    cr.t->name);
		goto out;
	}
	if (req->volume_content_source) {
		const Csi__V1__VolumeContentSource *src = req->volume_content_source;
		if (src->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT &&
		    src->snapshot && *src->snapshot->snapshot_id)
			cr.snapshot = src->snapshot->snapshot_id;
		else if (src->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME &&
			 src->volume && *src->volume->volume_id)
			cr.clone_of = src->volume->volume_id;
		else {
			code = rpc_call_error(call, RPC_INVALID_ARGUMENT,
					      "volume content source has no snapshot or volume id");
			goto out;
		}
		if (cr.snapshot && !aws_snapshot_id_valid(cr.snapshot)) {
			code = ctrl_bad_id(call, "source snapshot id", cr.snapshot);
			goto out;
		}
		if (cr.clone_of && !aws_volume_id_valid(cr.clone_of)) {
			code = ctrl_bad_id(call, "source volume id", cr.clone_of);
			goto out;
		}
	}
	cr.zone = csi_pick_zone(req->accessibility_requirements, &cr.zone_id);
	if ((cr.zone && !aws_zone_valid(cr.zone)) ||
	    (cr.zone_id && !aws_zone_id_valid(cr.zone_id))) {
		code = ctrl_bad_id(call, cr.zone ? "topology zone" : "topology zone id",
				   cr.zone ? cr.zone : cr.zone_id);
		goto out;
	}
	if (req->capacity_range) {
		cr.required = req->capacity_range->required_bytes;
		cr.limit = req->capacity_range->limit_bytes;
	}

	snprintf(key, sizeof(key), "create/%s", req->name);
	if (ctrl_inflight_add(c, key) < 0) {
		code =
		    rpc_call_error(call, RPC_ABORTED,
				   "an operation for volume %s is already in progress", req->name);
		goto out;
	}
	locked = true;

	/* the source decides the smallest size */
	if (cr.snapshot || cr.clone_of) {
		int r = source_gib(c, &cr, &min_gib, &err);
		if (r < 0) {
			code = ctrl_aws_fail(call, r, &err,
					     cr.snapshot ? "looking up the source snapshot"
							 : "looking up the source volume",
					     RPC_NOT_FOUND, RPC_INTERNAL);
			goto out;
		}
	}
	if ((code = csi_size_resolve(cr.t, req->capacity_range != NULL, cr.required, cr.limit,
				     min_gib, &cr.gib, msg, sizeof(msg))) != 0) {
		rpc_call_error(call, code, "%s", msg);
		goto out;
	}
	if (csi_iops_resolve(cr.t, &cr.p, cr.gib, &cr.iops, msg, sizeof(msg)) < 0 ||
	    (cr.tput = cr.p.throughput_set ? cr.p.throughput : 0,
	     csi_throughput_check(cr.t, cr.tput, cr.iops, msg, sizeof(msg)) < 0)) {
		code = rpc_call_error(call, RPC_INVALID_ARGUMENT, "%s", msg);
		goto out;
	}

	/* the volume may exist already */
	aws_error_clear(&err);
	int r = ec2_find_volumes(c, "CSIVolumeName", req->name, &found, &n_found, &err);
	if (r < 0) {
		code = ctrl_aws_fail(call, r, &err, "looking up the volume by name", RPC_INTERNAL,
				     RPC_INTERNAL);
		goto out;
	}
	const struct ec2_volume *existing = NULL;
	const char *diff = NULL;
	for (size_t i = 0; i < n_found; i++) {
		if (!alive(&found[i]))
			continue;
		const char *d = mismatch(&cr, req, &found[i]);
		if (!d) {
			existing = &found[i];
			break;
		}
		if (!diff)
			diff = d;
	}
	if (!existing && diff) {
		code =
		    rpc_call_error(call, RPC_ALREADY_EXISTS,
				   "volume %s already exists with a different %s", req->name, diff);
		goto out;
	}
	if (existing) {
		log_v(2, "volume exists already", KV_S("name", req->name),
		      KV_S("volume", existing->id));
		if (strcmp(existing->state, "creating") == 0) {
			if ((code = wait_available(call, c, existing->id, &vol)) != 0) {
				if (code == -ESTALE)
					code = rpc_call_error(
					    call, RPC_ABORTED,
					    "volume %s disappeared while being created",
					    existing->id);
				goto out;
			}
		} else {
			vol = *existing;
			memset((void *)existing, 0, sizeof(*existing)); /* ownership moves to vol */
		}
	} else {
		if (!cr.zone && !cr.zone_id) {
			char **zones;
			size_t nz;
			aws_error_clear(&err);
			if ((r = ec2_zones(c, &zones, &nz, &err)) < 0) {
				code = ctrl_aws_fail(call, r, &err, "listing the zones",
						     RPC_INTERNAL, RPC_INTERNAL);
				goto out;
			}
			/* "random", but the same for the same name: the client token stays stable
			 */
			unsigned long h = 5381;
			for (const char *p = req->name; *p; p++)
				h = h * 33 + (unsigned char)*p;
			cr.zone = rpc_call_strdup(call, zones[h % nz]);
		}
		if ((code = create_new(call, c, &cr, &vol)) != 0)
			goto out;
	}

	Csi__V1__CreateVolumeResponse *rep =
	    rpc_call_new(call, &csi__v1__create_volume_response__descriptor);
	if (!rep || !(rep->volume = csi_ctrl_volume_msg(call, &vol, cr.p.ctx, cr.p.n_ctx))) {
		code = OOM(call);
		goto out;
	}
	rep->volume->content_source =
	    req->volume_content_source; /* the reply is sent before the request is freed */
	rpc_call_log_kv(call, "volume", vol.id);
	*out = &rep->base;
	code = RPC_OK;
out:
	if (locked)
		ctrl_inflight_del(c, key);
	ec2_volumes_free(found, n_found);
	ec2_volume_release(&vol);
	csi_vol_params_release(&cr.p);
	return code;
}

int csi_ctrl_delete_volume(struct rpc_call *call, const ProtobufCMessage *in,
			   ProtobufCMessage **out)
{
	const Csi__V1__DeleteVolumeRequest *req = (const void *)in;
	struct csi_ctrl *c = rpc_call_userdata(call);
	struct aws_error err = {0};
	char key[64];
	int r, code = RPC_OK;

	if (!*req->volume_id)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "volume id is missing");
	if (!aws_volume_id_valid(req->volume_id)) { /* no such volume can exist */
		log_v(2, "malformed volume id: nothing to delete",
		      KV_S("volume", ctrl_id_str(call, req->volume_id)));
		return RPC_OK;
	}
	snprintf(key, sizeof(key), "vol/%s", req->volume_id);
	if (ctrl_inflight_add(c, key) < 0)
		return rpc_call_error(call, RPC_ABORTED,
				      "an operation for volume %s is already in progress",
				      req->volume_id);
	r = ec2_delete_volume(c, req->volume_id, &err);
	if (r == -ENOENT)
		log_v(2, "volume already deleted", KV_S("volume", req->volume_id));
	else if (r == -EBUSY)
		code = ctrl_aws_fail(call, r, &err, "deleting the volume", RPC_FAILED_PRECONDITION,
				     RPC_FAILED_PRECONDITION);
	else if (r < 0)
		code =
		    ctrl_aws_fail(call, r, &err, "deleting the volume", RPC_INTERNAL, RPC_INTERNAL);
	else
		log_info("volume deleted", KV_S("volume", req->volume_id));
	ctrl_inflight_del(c, key);
	return code;
}

int csi_ctrl_validate(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ValidateVolumeCapabilitiesRequest *req = (const void *)in;
	struct csi_ctrl *c = rpc_call_userdata(call);
	struct ec2_volume v = {0};
	struct aws_error err = {0};
	const char *why = NULL;
	int r;

	if (!*req->volume_id)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "volume id is missing");
	if (!req->n_volume_capabilities)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT,
				      "volume capabilities are missing");
	if (!aws_volume_id_valid(req->volume_id))
		return ctrl_bad_id(call, "volume id", req->volume_id);
	if ((r = ec2_describe_volume(c, req->volume_id, &v, &err)) < 0)
		return ctrl_aws_fail(call, r, &err, "looking up the volume", RPC_NOT_FOUND,
				     RPC_INTERNAL);
	for (size_t i = 0; i < req->n_volume_capabilities && !why; i++) {
		const Csi__V1__VolumeCapability *cap = req->volume_capabilities[i];
		if (!ctrl_cap_supported(cap, v.multi_attach))
			why =
			    cap && cap->access_mode &&
				    cap->access_mode->mode ==
					CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER
				? "MULTI_NODE_MULTI_WRITER needs block access to a volume with "
				  "multi-attach enabled"
				: "an access mode or type this driver does not support";
	}
	ec2_volume_release(&v);
	Csi__V1__ValidateVolumeCapabilitiesResponse *rep =
	    rpc_call_new(call, &csi__v1__validate_volume_capabilities_response__descriptor);
	if (!rep)
		return OOM(call);
	if (why) {
		rep->message = rpc_call_strdup(call, why);
	} else {
		Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed *cf = rpc_call_new(
		    call, &csi__v1__validate_volume_capabilities_response__confirmed__descriptor);
		if (!cf)
			return OOM(call);
		/* echo what was confirmed; the reply is encoded before the request is freed */
		cf->n_volume_context = req->n_volume_context;
		cf->volume_context = (void *)req->volume_context;
		cf->n_volume_capabilities = req->n_volume_capabilities;
		cf->volume_capabilities = req->volume_capabilities;
		cf->n_parameters = req->n_parameters;
		cf->parameters = (void *)req->parameters;
		cf->n_mutable_parameters = req->n_mutable_parameters;
		cf->mutable_parameters = (void *)req->mutable_parameters;
		rep->confirmed = cf;
	}
	*out = &rep->base;
	return RPC_OK;
}

static int add_published(struct rpc_call *call, ProtobufCMessage *status,
			 const struct ec2_volume *v)
{
	for (size_t i = 0; i < v->n_att; i++) {
		if (strcmp(v->att[i].state, "attached") != 0 &&
		    strcmp(v->att[i].state, "attaching") != 0)
			continue;
		if (rpc_call_array_add(call, status, "published_node_ids", v->att[i].instance) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int fetch_volumes(struct csi_ctrl *c, const void *arg, const char *token, int max,
			 void **ret, size_t *ret_n, char **ret_next, struct aws_error *err)
{
	struct ec2_volume *v = NULL;
	int r = ec2_list_volumes(c, token, max, &v, ret_n, ret_next, err);

	*ret = v;
	return r;
}

static int add_volume(struct rpc_call *call, ProtobufCMessage *rep, const void *items, size_t i)
{
	const struct ec2_volume *v = items;
	Csi__V1__ListVolumesResponse__Entry *e =
	    rpc_call_new(call, &csi__v1__list_volumes_response__entry__descriptor);
	Csi__V1__ListVolumesResponse__VolumeStatus *st =
	    rpc_call_new(call, &csi__v1__list_volumes_response__volume_status__descriptor);

	if (!e || !st || !(e->volume = csi_ctrl_volume_msg(call, &v[i], NULL, 0)) ||
	    add_published(call, &st->base, &v[i]) < 0 ||
	    rpc_call_array_add(call, rep, "entries", e) < 0)
		return -ENOMEM;
	e->status = st;
	return 0;
}

static void free_volumes(void *items, size_t n)
{
	ec2_volumes_free(items, n);
}

static const struct ctrl_pager volume_pager = {"listing volumes", fetch_volumes, add_volume,
					       free_volumes};

int csi_ctrl_list_volumes(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ListVolumesRequest *req = (const void *)in;
	Csi__V1__ListVolumesResponse *rep =
	    rpc_call_new(call, &csi__v1__list_volumes_response__descriptor);
	int code;

	if (!rep)
		return OOM(call);
	if (req->max_entries < 0)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT,
				      "max_entries must not be negative");
	if ((code = ctrl_list_pages(call, &volume_pager, NULL, req->max_entries,
				    req->starting_token, &rep->base, &rep->next_token)) != RPC_OK)
		return code;
	*out = &rep->base;
	return RPC_OK;
}

int csi_ctrl_get_volume(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ControllerGetVolumeRequest *req = (const void *)in;
	struct csi_ctrl *c = rpc_call_userdata(call);
	struct ec2_volume v = {0};
	struct aws_error err = {0};
	int r, code = RPC_OK;

	if (!*req->volume_id)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "volume id is missing");
	if (!aws_volume_id_valid(req->volume_id))
		return ctrl_bad_id(call, "volume id", req->volume_id);
	if ((r = ec2_describe_volume(c, req->volume_id, &v, &err)) < 0)
		return ctrl_aws_fail(call, r, &err, "looking up the volume", RPC_NOT_FOUND,
				     RPC_INTERNAL);
	Csi__V1__ControllerGetVolumeResponse *rep =
	    rpc_call_new(call, &csi__v1__controller_get_volume_response__descriptor);
	Csi__V1__ControllerGetVolumeResponse__VolumeStatus *st =
	    rpc_call_new(call, &csi__v1__controller_get_volume_response__volume_status__descriptor);
	if (!rep || !st || !(rep->volume = csi_ctrl_volume_msg(call, &v, NULL, 0)) ||
	    add_published(call, &st->base, &v) < 0)
		code = OOM(call);
	else
		rep->status = st;
	ec2_volume_release(&v);
	if (code == RPC_OK)
		*out = &rep->base;
	return code;
}
