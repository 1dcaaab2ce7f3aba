/* CreateSnapshot and DeleteSnapshot. A snapshot carries its CSI name as a tag
 * (CSIVolumeSnapshotName): CreateSnapshot finds it again by that tag before making one. */
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
#include "modules/csi-controller/csi_controller_internal.h"
#include "modules/csi-controller/csi_controller_tagtpl.h"

#define TAG_SNAP_NAME "CSIVolumeSnapshotName"
#define TAG_CLUSTER "ebs.csi.aws.com/cluster"

#define SNAP_PROP_MAX 3

/* A tagSpecification parameter "key=value", its value a template of the VolumeSnapshot's
 * properties: 1 with the tag added (key and value malloc'd into keys), 0 when it is invalid
 * and skipped (--warn-on-invalid-tag), or an error. */
static enum csi_code tag_spec(struct csi_ctrl *c, const char *k, const char *v,
			      const char *const *props, struct ctrl_tags *t, char ***keys,
			      struct csi_error *err)
{
	const struct csi_tagtpl_props tp = {CSI_TAGTPL_SNAPSHOT_TYPE, csi_tagtpl_snapshot_fields,
					    props, SNAP_PROP_MAX};
	const char *eq = strchr(v, '=');
	char msg[512] = "";
	_cleanup_free_ char *key = eq ? strndup(v, (size_t)(eq - v)) : NULL, *val = NULL;
	int r;

	if (!eq) /* as upstream: an error even with --warn-on-invalid-tag */
		return csi_error_set(err, CSI_INVALID_ARGUMENT,
				     "invalid tag %s=\"%s\" (want key=value)", k, v);
	if (!key || (r = csi_tagtpl_expand(k, eq + 1, &tp, &val, msg, sizeof(msg))) == -ENOMEM)
		return csi_error_set(err, CSI_RESOURCE_EXHAUSTED, "out of memory");
	if (r == 0 && csi_tag_check(key, val, msg, sizeof(msg)) < 0)
		r = -EINVAL;
	if (r < 0) {
		if (c->tag_opts.warn_on_invalid_tag) {
			log_warn("skipping an invalid snapshot tag", KV_S("problem", msg));
			return csi_error_ok(err);
		}
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "invalid tag: %s", msg);
	}
	if (strv_push(keys, key) < 0 || strv_push(keys, val) < 0)
		return csi_error_set(err, CSI_RESOURCE_EXHAUSTED, "out of memory");
	size_t n = strv_len(*keys);
	if (ctrl_tag_add(t, (*keys)[n - 2], (*keys)[n - 1]) < 0)
		return csi_error_set(err, CSI_INVALID_ARGUMENT,
				     "more than %d tags for the snapshot", CTRL_MAX_TAGS);
	return csi_error_ok(err);
}

/* Snapshot parameters: tags only, in upstream's order (a later one replaces an earlier key):
 * the driver's (CSIVolumeSnapshotName, ebs.csi.aws.com/cluster=true), the cluster's
 * (kubernetes.io/cluster/<id>=owned, Name=<id>-dynamic-<name>; no KubernetesCluster),
 * --extra-tags, the tagSpecification_N parameters. The VolumeSnapshot's names are template
 * properties, not tags. The strings of tagSpecification tags go into *keys. */
static enum csi_code snapshot_tags(struct csi_ctrl *c, const char *name,
				   const struct csi_kv *params, size_t n, struct ctrl_tags *t,
				   char ***keys, char *name_tag, size_t name_len,
				   struct csi_error *err)
{
	static const char *const prop_keys[SNAP_PROP_MAX] = {
	    "csi.storage.k8s.io/volumesnapshot/name", "csi.storage.k8s.io/volumesnapshot/namespace",
	    "csi.storage.k8s.io/volumesnapshotcontent/name"};
	const char *props[SNAP_PROP_MAX] = {"", "", ""};
	int r;

	for (size_t i = 0; i < n; i++) {
		const char *k = params[i].key;
		for (size_t f = 0; f < SNAP_PROP_MAX; f++)
			if (strcasecmp(k, prop_keys[f]) == 0)
				props[f] = params[i].value;
		if (strncasecmp(k, "tagSpecification", 16) != 0 &&
		    strncasecmp(k, "csi.storage.k8s.io/", 19) != 0)
			return csi_error_set(err, CSI_INVALID_ARGUMENT,
					     "invalid parameter key %s for CreateSnapshot", k);
	}
	t->no_kubernetes_cluster = true;
	r = ctrl_tag_add(t, TAG_SNAP_NAME, name);
	if (r == 0)
		r = ctrl_tag_add(t, TAG_CLUSTER, "true");
	if (r == 0)
		r = ctrl_tags_add_cluster(c, t, name, name_tag, name_len);
	if (r == 0)
		r = ctrl_tags_add_extra(c, t);
	for (size_t i = 0; i < n && r == 0; i++)
		if (strncasecmp(params[i].key, "tagSpecification", 16) == 0 &&
		    tag_spec(c, params[i].key, params[i].value, props, t, keys, err) != CSI_OK)
			return err->code;
	if (r < 0)
		return csi_error_set(err, CSI_INVALID_ARGUMENT,
				     "more than %d tags for the snapshot", CTRL_MAX_TAGS);
	return csi_error_ok(err);
}

/* A snapshot of this name made before, of the same source volume: *ret (id "" when none).
 * Failed ones are deleted on the way. */
static enum csi_code find_snapshot(struct csi_ctrl *c, const char *name, const char *volume,
				   struct ec2_snapshot *ret, struct csi_error *err)
{
	struct ec2_snapshot *found = NULL;
	struct aws_error aerr = {0};
	size_t n = 0;
	int r;

	if ((r = ec2_find_snapshots(c, TAG_SNAP_NAME, name, &found, &n, &aerr)) < 0)
		return ctrl_aws_fail(err, r, &aerr, "looking up the snapshot by name", CSI_INTERNAL,
				     CSI_INTERNAL);
	csi_error_ok(err);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(found[i].state, "error") == 0) {
			log_warn("deleting a failed snapshot", KV_S("snapshot", found[i].id),
				 KV_S("name", name));
			ec2_delete_snapshot(c, found[i].id, &aerr);
			continue;
		}
		if (strcmp(found[i].volume, volume) != 0) {
			csi_error_set(err, CSI_ALREADY_EXISTS,
				      "snapshot %s exists with another source volume (%s)", name,
				      found[i].volume);
		} else {
			*ret = found[i];
			memset(&found[i], 0, sizeof(found[i])); /* ownership moves to *ret */
		}
		break;
	}
	ec2_snapshots_free(found, n);
	return err->code;
}

enum csi_code csi_ctrl_create_snapshot(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				       const char *name, const char *source_volume_id,
				       const struct csi_kv *params, size_t n,
				       struct csi_ctrl_snapshot *ret, struct csi_error *err)
{
	struct ctrl_tags tags = {.n = 0};
	struct ec2_snapshot s = {0};
	struct aws_error aerr = {0};
	_cleanup_strv_ char **keys = NULL;
	char key[300], name_tag[400];
	int r;

	if (!*name)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "snapshot name is missing");
	if (strlen(name) > 255)
		return csi_error_set(err, CSI_INVALID_ARGUMENT,
				     "snapshot name is longer than 255 characters");
	if (!*source_volume_id)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "source volume id is missing");
	if (!aws_volume_id_valid(source_volume_id))
		return ctrl_bad_id(err, "source volume id", source_volume_id);
	if (snapshot_tags(c, name, params, n, &tags, &keys, name_tag, sizeof(name_tag), err) !=
	    CSI_OK)
		return err->code;
	snprintf(key, sizeof(key), "snap/%s", name);
	if (ctrl_lock(c, key, err, "snapshot %s", name) != CSI_OK)
		return err->code;
	if (find_snapshot(c, name, source_volume_id, &s, err) == CSI_OK && !*s.id) {
		if ((r = ec2_create_snapshot(c, source_volume_id, tags.kv, tags.n, &s, &aerr)) <
		    0) {
			bool limit = aws_error_is(&aerr, "SnapshotCreationPerVolumeRateExceeded") ||
				     aws_error_is(&aerr, "SnapshotLimitExceeded");
			ctrl_aws_fail(err, r, &aerr, "creating the snapshot",
				      limit ? CSI_RESOURCE_EXHAUSTED : CSI_NOT_FOUND,
				      limit ? CSI_RESOURCE_EXHAUSTED : CSI_INTERNAL);
		} else {
			log_info("snapshot created", KV_S("name", name), KV_S("snapshot", s.id),
				 KV_S("volume", source_volume_id));
		}
	}
	if (err->code == CSI_OK)
		ctrl_snapshot_of(&s, ret);
	ctrl_unlock(c, key);
	ec2_snapshot_release(&s);
	return err->code;
}

static const struct ctrl_deletion snapshot_deletion = {
    .kind = "snapshot",
    .key_prefix = "delsnap/",
    .id_valid = aws_snapshot_id_valid,
    .remove = ec2_delete_snapshot,
    .in_use_code = "InvalidSnapshot.InUse",
};

enum csi_code csi_ctrl_delete_snapshot(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				       const char *snapshot_id, struct csi_error *err)
{
	return ctrl_delete(c, &snapshot_deletion, snapshot_id, err);
}
