/* CreateVolume, in named steps: check the request, resolve its parameters, its source and
 * zone, its size; then find the volume of that name or make it.
 *
 * Idempotency does not rely on AWS: the volume is looked up by its CSIVolumeName tag first
 * (same parameters: the same volume; different ones: ALREADY_EXISTS), concurrent calls for one
 * name get ABORTED, and the EC2 ClientToken is derived from the name and the parameters, so a
 * retry after a lost reply finds the volume EC2 already made. A token whose volume was deleted
 * since ("burned") is followed by name#2, name#3... */
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
#define MAX_TOKEN_ATTEMPTS 4

/* Everything CreateVolume resolved from the request. */
struct create {
	const struct csi_ctrl_create_req *req;
	struct csi_vol_params p;
	const struct csi_vol_type *t;
	long long gib, iops, tput;
	bool multi;
	const char *zone, *zone_id;
	char zone_buf[64];    /* a zone picked here */
	const char *snapshot; /* source snapshot */
	const char *clone_of; /* source volume */
};

static bool name_valid(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

/* The name and the capabilities; whether the volume is multi-attach. */
static enum csi_code check_request(struct create *cr, struct csi_error *err)
{
	const struct csi_ctrl_create_req *req = cr->req;

	if (!*req->name)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "volume name is missing");
	if (strlen(req->name) > 255 || !name_valid(req->name))
		return csi_error_set(
		    err, CSI_INVALID_ARGUMENT,
		    "volume name must be 1 to 255 characters without control characters");
	if (!req->n_caps)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "volume capabilities are missing");
	for (size_t i = 0; i < req->n_caps; i++) {
		const struct csi_cap *cap = &req->caps[i];
		bool multi = cap->access_mode == CSI_MODE_MULTI_NODE_MULTI_WRITER;
		if (!csi_cap_supported(cap, true))
			return csi_error_set(
			    err, CSI_INVALID_ARGUMENT,
			    "volume capability %zu is not supported (access mode %d%s)", i,
			    cap->access_mode, multi ? ": multi-attach needs block access" : "");
		if (multi)
			cr->multi = true;
	}
	return csi_error_ok(err);
}

/* The parameters, the mutable ones (a VolumeAttributesClass: iops, throughput, type, tags)
 * overriding the class's; the volume type. */
static enum csi_code resolve_params(struct csi_ctrl *c, struct create *cr, struct csi_error *err)
{
	const struct csi_ctrl_create_req *req = cr->req;
	size_t np = req->n_params;
	char msg[512];
	struct csi_kv *all = calloc(np + req->n_mutable_params + 1, sizeof(*all));
	if (!all)
		return csi_error_set(err, CSI_RESOURCE_EXHAUSTED, "out of memory");
	memcpy(all, req->params, np * sizeof(*all));
	for (size_t i = 0; i < req->n_mutable_params; i++) {
		size_t k;
		for (k = 0; k < np; k++)
			if (strcasecmp(all[k].key, req->mutable_params[i].key) == 0)
				break;
		all[k] = req->mutable_params[i];
		if (k == np)
			np++;
	}
	int r = csi_vol_params_parse(all, np, &c->tag_opts, &cr->p, msg, sizeof(msg));
	free(all);
	if (r < 0)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "%s", msg);
	cr->t = csi_vol_type_find(cr->p.type);
	if (cr->multi && !cr->t->multi_attach)
		return csi_error_set(
		    err, CSI_INVALID_ARGUMENT,
		    "multi-attach (MULTI_NODE_MULTI_WRITER) needs an io1 or io2 volume, not %s",
		    cr->t->name);
	return csi_error_ok(err);
}

/* The content source and the zone asked for, their formats checked. */
static enum csi_code resolve_source_and_zone(struct create *cr, struct csi_error *err)
{
	const struct csi_ctrl_create_req *req = cr->req;

	if (req->source == CSI_SOURCE_BAD)
		return csi_error_set(err, CSI_INVALID_ARGUMENT,
				     "volume content source has no snapshot or volume id");
	if (req->source == CSI_SOURCE_SNAPSHOT)
		cr->snapshot = req->source_id;
	else if (req->source == CSI_SOURCE_VOLUME)
		cr->clone_of = req->source_id;
	if (cr->snapshot && !aws_snapshot_id_valid(cr->snapshot))
		return ctrl_bad_id(err, "source snapshot id", cr->snapshot);
	if (cr->clone_of && !aws_volume_id_valid(cr->clone_of))
		return ctrl_bad_id(err, "source volume id", cr->clone_of);
	cr->zone = csi_pick_zone(req->topology, &cr->zone_id);
	if ((cr->zone && !aws_zone_valid(cr->zone)) ||
	    (cr->zone_id && !aws_zone_id_valid(cr->zone_id)))
		return ctrl_bad_id(err, cr->zone ? "topology zone" : "topology zone id",
				   cr->zone ? cr->zone : cr->zone_id);
	return csi_error_ok(err);
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

/* The size (at least the source's), the IOPS and the throughput. */
static enum csi_code resolve_size(struct csi_ctrl *c, struct create *cr, struct csi_error *err)
{
	const struct csi_ctrl_create_req *req = cr->req;
	struct aws_error aerr = {0};
	long long min_gib = 0;
	char msg[512];
	int r;

	if ((cr->snapshot || cr->clone_of) && (r = source_gib(c, cr, &min_gib, &aerr)) < 0)
		return ctrl_aws_fail(err, r, &aerr,
				     cr->snapshot ? "looking up the source snapshot"
						  : "looking up the source volume",
				     CSI_NOT_FOUND, CSI_INTERNAL);
	if (csi_size_resolve(cr->t, req->has_range, req->required_bytes, req->limit_bytes, min_gib,
			     &cr->gib, err) != CSI_OK)
		return err->code;
	cr->tput = cr->p.throughput_set ? cr->p.throughput : 0;
	if (csi_iops_resolve(cr->t, &cr->p, cr->gib, &cr->iops, msg, sizeof(msg)) < 0 ||
	    csi_throughput_check(cr->t, cr->tput, cr->iops, msg, sizeof(msg)) < 0)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "%s", msg);
	return csi_error_ok(err);
}

/* Is an existing volume what this request asks for? NULL when it is, else the difference. */
static const char *mismatch(const struct create *cr, const struct ec2_volume *v)
{
	const struct csi_ctrl_create_req *req = cr->req;
	long long required = req->required_bytes, limit = req->limit_bytes;

	if (strcasecmp(v->type, cr->t->name) != 0)
		return "volume type";
	if ((required && v->size_gib * GIB < required) || (limit && v->size_gib * GIB > limit))
		return "size";
	if (!required && !limit && !cr->snapshot && !cr->clone_of && v->size_gib != cr->gib)
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
	if (!csi_zone_allowed(req->topology, v->az))
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

/* Polls until the volume is available: CSI_OK with *ret, or with *ret_gone when the volume is
 * gone (deleted, or never visible: a burned token). */
static enum csi_code wait_available(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				    const char *id, struct ec2_volume *ret, bool *ret_gone,
				    struct csi_error *err)
{
	int64_t deadline = now_mono_ns() + c->create_timeout_ns, delay = 250 * NSEC_PER_MSEC;
	unsigned not_found = 0;
	struct aws_error aerr;
	int r;

	*ret_gone = false;
	for (;;) {
		if (!ctrl_sleep(call, delay / c->poll_scale))
			return csi_error_set(err, CSI_DEADLINE_EXCEEDED,
					     "volume %s is still being created", id);
		aws_error_clear(&aerr);
		struct ec2_volume v = {0};
		r = ec2_describe_volume(c, id, &v, &aerr);
		if (r == -ENOENT) {
			if (++not_found >= 5)
				break;
		} else if (r < 0) {
			return ctrl_aws_fail(err, r, &aerr, "describing the new volume",
					     CSI_INTERNAL, CSI_INTERNAL);
		} else if (strcmp(v.state, "available") == 0 || strcmp(v.state, "in-use") == 0) {
			*ret = v;
			return csi_error_ok(err);
		} else if (strcmp(v.state, "deleting") == 0 || strcmp(v.state, "deleted") == 0) {
			ec2_volume_release(&v);
			break;
		} else if (strcmp(v.state, "error") == 0) {
			ec2_volume_release(&v);
			ec2_delete_volume(c, id, &aerr);
			return csi_error_set(err, CSI_INTERNAL,
					     "volume %s went into the error state (a KMS key it "
					     "cannot use?); deleted it",
					     id);
		} else {
			ec2_volume_release(&v);
		}
		if (now_mono_ns() > deadline)
			return csi_error_set(err, CSI_DEADLINE_EXCEEDED,
					     "volume %s is still being created", id);
		delay = delay * 2 > 5 * NSEC_PER_SEC ? 5 * NSEC_PER_SEC : delay * 2;
	}
	*ret_gone = true;
	return csi_error_ok(err);
}

/* The snapshot a clone is made from: one made for it earlier, or a new one. */
static enum csi_code clone_find_or_snapshot(struct csi_ctrl *c, const struct create *cr,
					    char ret_snap[32], struct csi_error *err)
{
	struct ec2_snapshot *found = NULL, s = {0};
	struct aws_error aerr = {0};
	size_t n = 0;
	int r;

	if ((r = ec2_find_snapshots(c, TAG_CLONE_FOR, cr->req->name, &found, &n, &aerr)) < 0)
		return ctrl_aws_fail(err, r, &aerr, "looking up the clone's snapshot", CSI_INTERNAL,
				     CSI_INTERNAL);
	*ret_snap = 0;
	for (size_t i = 0; i < n && !*ret_snap; i++)
		if (strcmp(found[i].volume, cr->clone_of) == 0 &&
		    strcmp(found[i].state, "error") != 0)
			str_copy(ret_snap, 32, found[i].id);
	ec2_snapshots_free(found, n);
	if (*ret_snap)
		return csi_error_ok(err);
	struct csi_kv tags[] = {{TAG_CLONE_FOR, cr->req->name}, {TAG_CLUSTER, "true"}};
	if ((r = ec2_create_snapshot(c, cr->clone_of, tags, ARRAY_SIZE(tags), &s, &aerr)) < 0)
		return ctrl_aws_fail(err, r, &aerr, "snapshotting the source volume", CSI_NOT_FOUND,
				     CSI_ABORTED);
	str_copy(ret_snap, 32, s.id);
	ec2_snapshot_release(&s);
	return csi_error_ok(err);
}

/* A clone goes through a snapshot of the source, made (or found again) here and waited for. */
static enum csi_code clone_snapshot(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				    const struct create *cr, char ret_snap[32],
				    struct csi_error *err)
{
	struct aws_error aerr = {0};
	int64_t delay = 500 * NSEC_PER_MSEC;
	char id[32];
	int r;

	if (clone_find_or_snapshot(c, cr, id, err) != CSI_OK)
		return err->code;
	for (;;) {
		struct ec2_snapshot cur = {0};
		aws_error_clear(&aerr);
		r = ec2_describe_snapshot(c, id, &cur, &aerr);
		if (r < 0 && r != -ENOENT)
			return ctrl_aws_fail(err, r, &aerr, "describing the clone's snapshot",
					     CSI_INTERNAL, CSI_INTERNAL);
		if (r == 0) {
			bool done = strcmp(cur.state, "completed") == 0,
			     failed = strcmp(cur.state, "error") == 0;
			ec2_snapshot_release(&cur);
			if (done)
				break;
			if (failed) {
				ec2_delete_snapshot(c, id, &aerr);
				return csi_error_set(err, CSI_ABORTED,
						     "the snapshot %s of %s failed", id,
						     cr->clone_of);
			}
		}
		if (!ctrl_sleep(call, delay / c->poll_scale))
			return csi_error_set(err, CSI_DEADLINE_EXCEEDED,
					     "snapshot %s of the source volume is still pending",
					     id);
		delay = delay * 2 > 10 * NSEC_PER_SEC ? 10 * NSEC_PER_SEC : delay * 2;
	}
	str_copy(ret_snap, 32, id);
	return csi_error_ok(err);
}

/* The new volume's tags, in upstream's order (a later one replaces an earlier key): the
 * driver's (CSIVolumeName, ebs.csi.aws.com/cluster=true), the PVC and PV names, the cluster's
 * (kubernetes.io/cluster/<id>=owned, Name=<id>-dynamic-<name>, KubernetesCluster=<id>),
 * --extra-tags, the tagSpecification_N parameters; then ours, the clone's source. The
 * reserved keys (csi_tag_check) keep the driver's own tags from being replaced. */
static enum csi_code volume_tags(struct csi_ctrl *c, const struct create *cr, struct ctrl_tags *t,
				 char *name_tag, size_t name_len, struct csi_error *err)
{
	int r = ctrl_tag_add(t, TAG_NAME, cr->req->name);

	if (r == 0)
		r = ctrl_tag_add(t, TAG_CLUSTER, "true");
	for (int created_for = 1; created_for >= 0; created_for--) {
		for (size_t i = 0; i < cr->p.n_tags && r == 0; i++)
			if (str_has_prefix(cr->p.tags[i].key, "kubernetes.io/created-for/") ==
			    (bool)created_for)
				r = ctrl_tag_add(t, cr->p.tags[i].key, cr->p.tags[i].value);
		if (r == 0 && created_for) {
			r = ctrl_tags_add_cluster(c, t, cr->req->name, name_tag, name_len);
			if (r == 0)
				r = ctrl_tags_add_extra(c, t);
		}
	}
	if (r == 0 && cr->clone_of)
		r = ctrl_tag_add(t, TAG_CLONE_SOURCE, cr->clone_of);
	if (r < 0)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "more than %d tags for the volume",
				     CTRL_MAX_TAGS);
	return csi_error_ok(err);
}

/* CreateVolume's AWS error as a CSI code. */
static enum csi_code create_error(struct csi_error *err, int r, const struct aws_error *e)
{
	enum csi_code code = CSI_ABORTED;

	if (aws_error_is(e, "VolumeLimitExceeded") || aws_error_is(e, "MaxIOPSLimitExceeded") ||
	    aws_error_is(e, "InsufficientVolumeCapacity"))
		code = CSI_RESOURCE_EXHAUSTED;
	else if (aws_error_is(e, "InvalidSnapshot.NotFound") ||
		 aws_error_is(e, "InvalidVolume.NotFound"))
		code = CSI_NOT_FOUND;
	else if (str_has_prefix(e->code, "InvalidParameter") ||
		 str_has_prefix(e->code, "InvalidZone") || aws_error_is(e, "UnknownVolumeType") ||
		 aws_error_is(e, "InvalidKMSKey.NotFound") ||
		 aws_error_is(e, "KMSKeyNotAccessible") || aws_error_is(e, "InvalidOutpostArn"))
		code = CSI_INVALID_ARGUMENT;
	return ctrl_aws_fail(err, r, e, "creating the volume", code, code);
}

/* CreateVolume at EC2 with the client tokens of the request, trying the next token while one
 * is taken by other parameters or names a deleted volume. */
static enum csi_code create_with_tokens(struct csi_ctrl *c, const struct csi_ctrl_call *call,
					const struct create *cr, struct ec2_create_volume *cv,
					struct ec2_volume *ret, struct csi_error *err)
{
	const char *name = cr->req->name;
	char canonical[1024], token[65], id[32];
	struct aws_error aerr;
	bool gone;

	snprintf(canonical, sizeof(canonical), "%s|%lld|%lld|%lld|%d|%s|%s|%s|%s|%s|%d|%s|%lld",
		 cr->t->name, cr->gib, cr->iops, cr->tput, cr->p.encrypted,
		 cr->p.kms_key ? cr->p.kms_key : "", cr->zone ? cr->zone : "",
		 cr->zone_id ? cr->zone_id : "", cr->snapshot ? cr->snapshot : "",
		 cr->clone_of ? cr->clone_of : "", cr->multi,
		 cr->p.outpost_arn ? cr->p.outpost_arn : "", cr->p.init_rate);
	cv->client_token = token;
	for (unsigned attempt = 1; attempt <= MAX_TOKEN_ATTEMPTS; attempt++) {
		csi_client_token(name, canonical, attempt, token);
		aws_error_clear(&aerr);
		int r = ec2_create_volume(c, cv, id, &aerr);
		if (r < 0 && aws_error_is(&aerr, "IdempotentParameterMismatch")) {
			log_info("client token in use by other parameters, trying the next one",
				 KV_S("name", name), KV_U("attempt", attempt));
			continue;
		}
		if (r < 0)
			return create_error(err, r, &aerr);
		log_info("volume created", KV_S("name", name), KV_S("volume", id),
			 KV_S("zone", cr->zone ? cr->zone : ""), KV_S("type", cr->t->name),
			 KV_I("gib", cr->gib));
		if (wait_available(c, call, id, ret, &gone, err) != CSI_OK || !gone)
			return err->code;
		log_info("the client token names a deleted volume, trying the next one",
			 KV_S("name", name), KV_S("volume", id), KV_U("attempt", attempt));
	}
	return csi_error_set(err, CSI_ABORTED,
			     "every client token of volume %s is taken by deleted volumes", name);
}

/* Makes the volume (a clone through a snapshot of its source). */
static enum csi_code create_new(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				struct create *cr, struct ec2_volume *ret, struct csi_error *err)
{
	struct ctrl_tags tags = {.n = 0};
	struct aws_error aerr = {0};
	char clone_snap[32] = "", name_tag[400];
	const char *snapshot = cr->snapshot;

	if (cr->clone_of) {
		if (clone_snapshot(c, call, cr, clone_snap, err) != CSI_OK)
			return err->code;
		snapshot = clone_snap;
	}
	if (volume_tags(c, cr, &tags, name_tag, sizeof(name_tag), err) != CSI_OK)
		return err->code;
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
	    .tags = tags.kv,
	    .n_tags = tags.n,
	};
	if (create_with_tokens(c, call, cr, &cv, ret, err) == CSI_OK && *clone_snap &&
	    ec2_delete_snapshot(c, clone_snap, &aerr) < 0)
		log_warn("could not delete the clone's temporary snapshot",
			 KV_S("snapshot", clone_snap), KV_S("error", aerr.message));
	return err->code;
}

/* A volume of this name made before: *ret_found with it in *ret (waited for while it is being
 * created); ALREADY_EXISTS when only volumes of other parameters have the name. */
static enum csi_code find_existing(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				   const struct create *cr, struct ec2_volume *ret, bool *ret_found,
				   struct csi_error *err)
{
	const char *name = cr->req->name, *diff = NULL;
	struct ec2_volume *found = NULL, *existing = NULL;
	struct aws_error aerr = {0};
	size_t n = 0;
	bool gone;
	int r;

	*ret_found = false;
	if ((r = ec2_find_volumes(c, TAG_NAME, name, &found, &n, &aerr)) < 0)
		return ctrl_aws_fail(err, r, &aerr, "looking up the volume by name", CSI_INTERNAL,
				     CSI_INTERNAL);
	for (size_t i = 0; i < n && !existing; i++) {
		const char *d = alive(&found[i]) ? mismatch(cr, &found[i]) : "";
		if (!d)
			existing = &found[i];
		else if (!diff && *d)
			diff = d;
	}
	csi_error_ok(err);
	if (!existing && diff) {
		csi_error_set(err, CSI_ALREADY_EXISTS,
			      "volume %s already exists with a different %s", name, diff);
	} else if (existing && strcmp(existing->state, "creating") == 0) {
		log_v(2, "volume exists already", KV_S("name", name), KV_S("volume", existing->id));
		if (wait_available(c, call, existing->id, ret, &gone, err) == CSI_OK && gone)
			csi_error_set(err, CSI_ABORTED, "volume %s disappeared while being created",
				      existing->id);
		*ret_found = true;
	} else if (existing) {
		log_v(2, "volume exists already", KV_S("name", name), KV_S("volume", existing->id));
		*ret = *existing;
		memset(existing, 0, sizeof(*existing)); /* ownership moves to *ret */
		*ret_found = true;
	}
	ec2_volumes_free(found, n);
	return err->code;
}

/* No zone asked for: one of the region's, "random" but the same for the same name, so that
 * the client token stays stable. */
static enum csi_code pick_zone(struct csi_ctrl *c, struct create *cr, struct csi_error *err)
{
	struct aws_error aerr = {0};
	unsigned long h = 5381;
	char **zones;
	size_t nz;
	int r;

	if (cr->zone || cr->zone_id)
		return csi_error_ok(err);
	if ((r = ec2_zones(c, &zones, &nz, &aerr)) < 0)
		return ctrl_aws_fail(err, r, &aerr, "listing the zones", CSI_INTERNAL,
				     CSI_INTERNAL);
	for (const char *p = cr->req->name; *p; p++)
		h = h * 33 + (unsigned char)*p;
	str_copy(cr->zone_buf, sizeof(cr->zone_buf), zones[h % nz]);
	cr->zone = cr->zone_buf;
	return csi_error_ok(err);
}

enum csi_code csi_ctrl_create_volume(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				     const struct csi_ctrl_create_req *req,
				     struct csi_ctrl_volume *ret, struct csi_error *err)
{
	struct create cr = {.req = req};
	struct ec2_volume vol = {0};
	char key[300];
	bool found;

	if (check_request(&cr, err) != CSI_OK)
		return err->code;
	if (resolve_params(c, &cr, err) != CSI_OK || resolve_source_and_zone(&cr, err) != CSI_OK)
		goto out;
	snprintf(key, sizeof(key), "create/%s", req->name);
	if (ctrl_lock(c, key, err, "volume %s", req->name) != CSI_OK)
		goto out;
	if (resolve_size(c, &cr, err) == CSI_OK &&
	    find_existing(c, call, &cr, &vol, &found, err) == CSI_OK && !found &&
	    pick_zone(c, &cr, err) == CSI_OK)
		create_new(c, call, &cr, &vol, err);
	if (err->code == CSI_OK && ctrl_volume_of(&vol, cr.p.ctx, cr.p.n_ctx, false, ret) < 0)
		csi_error_set(err, CSI_RESOURCE_EXHAUSTED, "out of memory");
	ctrl_unlock(c, key);
out:
	ec2_volume_release(&vol);
	csi_vol_params_release(&cr.p);
	return err->code;
}
