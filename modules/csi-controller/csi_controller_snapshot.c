/* CreateSnapshot, DeleteSnapshot, ListSnapshots, and the paging tokens of the list calls.
 *
 * Paging: EC2 pages with MaxResults of at least 5 (DescribeSnapshots) and its own NextToken;
 * CSI callers may ask for any max_entries. Our token carries the EC2 token of the page being
 * read and how many of its items were returned already, so any page size works (upstream
 * refuses max_entries 1 to 4). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/client.h"
#include "common/aws/error.h"
#include "common/aws/ids.h"
#include "common/base/base64.h"
#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/csi-controller/csi_controller_internal.h"

#define TAG_SNAP_NAME "CSIVolumeSnapshotName"
#define TAG_CLUSTER "ebs.csi.aws.com/cluster"
#define MAX_TAGS 50
#define MAX_TOKEN 4096

/* Our token: "1:<skip>:<EC2 token>" in URL-safe base64 (common/base/base64.h). */
int csi_token_encode(const char *aws_token, size_t skip, char **ret)
{
	_cleanup_buf_ struct buf in = BUF_INIT(MAX_TOKEN);
	int r;

	if ((r = buf_printf(&in, "1:%zu:%s", skip, aws_token ? aws_token : "")) < 0)
		return r;
	return base64_encode(in.data, in.len, BASE64_URL, ret);
}

int csi_token_decode(const char *token, char **ret_aws_token, size_t *ret_skip)
{
	_cleanup_free_ char *out = NULL;
	size_t len;
	long long skip;

	if (!token || strlen(token) > 2 * MAX_TOKEN)
		return -EINVAL;
	if (base64_decode(token, strlen(token), BASE64_URL, (void **)&out, &len) < 0 ||
	    !str_has_prefix(out, "1:") || memchr(out, 0, len))
		return -EINVAL;
	char *colon = strchr(out + 2, ':');
	if (!colon)
		return -EINVAL;
	*colon = 0;
	if (str_to_ll(out + 2, 0, 1000000, &skip) < 0)
		return -EINVAL;
	char *aws = *(colon + 1) ? strdup(colon + 1) : NULL;
	if (*(colon + 1) && !aws)
		return -ENOMEM;
	*ret_aws_token = aws;
	*ret_skip = (size_t)skip;
	return 0;
}

int ctrl_list_pages(struct rpc_call *call, const struct ctrl_pager *pg, const void *arg,
		    int32_t max_entries, const char *starting_token, ProtobufCMessage *rep,
		    char **ret_next_token)
{
	struct csi_ctrl *c = rpc_call_userdata(call);
	char *aws_token = NULL, *next = NULL;
	size_t skip = 0, got = 0;
	int r, code = RPC_OK;

	if (*starting_token && csi_token_decode(starting_token, &aws_token, &skip) < 0)
		return rpc_call_error(call, RPC_ABORTED, "invalid starting_token");
	size_t want = max_entries ? (size_t)max_entries : SIZE_MAX;
	for (unsigned pages = 0;; pages++) {
		void *items = NULL;
		size_t n = 0;
		struct aws_error err = {0};
		if (pages > 1000) {
			code = rpc_call_error(call, RPC_INTERNAL, "too many pages");
			break;
		}
		free(next);
		next = NULL;
		if ((r = pg->fetch(c, arg, aws_token, max_entries, &items, &n, &next, &err)) < 0) {
			code = ctrl_aws_fail(call, r, &err, pg->what, RPC_INTERNAL, RPC_INTERNAL);
			break;
		}
		if (skip > n) { /* the page shrank since the token was made */
			pg->free_items(items, n);
			code = rpc_call_error(call, RPC_ABORTED, "starting_token is out of date");
			break;
		}
		size_t i = skip;
		for (; i < n && got < want; i++, got++) {
			if (pg->add(call, rep, items, i) < 0) {
				code =
				    rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
				break;
			}
		}
		bool page_left = i < n;
		pg->free_items(items, n);
		if (code != RPC_OK)
			break;
		char *tok = NULL;
		if (page_left) { /* more in this page: resume inside it */
			if (csi_token_encode(aws_token, i, &tok) < 0)
				code =
				    rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		} else if (next && got >= want) {
			if (csi_token_encode(next, 0, &tok) < 0)
				code =
				    rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		} else if (next) {
			free(aws_token);
			aws_token = TAKE_PTR(next);
			skip = 0;
			continue;
		}
		if (tok) {
			*ret_next_token = rpc_call_strdup(call, tok);
			free(tok);
		}
		break;
	}
	free(aws_token);
	free(next);
	return code;
}

static Csi__V1__Snapshot *snapshot_msg(struct rpc_call *call, const struct ec2_snapshot *s)
{
	Csi__V1__Snapshot *m = rpc_call_new(call, &csi__v1__snapshot__descriptor);
	Csi__V1__Timestamp *ts = rpc_call_new(call, &csi__v1__timestamp__descriptor);

	if (!m || !ts || !(m->snapshot_id = rpc_call_strdup(call, s->id)) ||
	    !(m->source_volume_id = rpc_call_strdup(call, s->volume)))
		return NULL;
	m->size_bytes = s->size_gib * GIB;
	int64_t t = s->start_ns ? s->start_ns : now_real_ns();
	ts->seconds = t / NSEC_PER_SEC;
	ts->nanos = (int32_t)(t % NSEC_PER_SEC);
	m->creation_time = ts;
	m->ready_to_use = strcmp(s->state, "completed") == 0;
	return m;
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

/* Snapshot parameters: tags only. */
static int snapshot_tags(struct rpc_call *call, struct csi_ctrl *c,
			 const Csi__V1__CreateSnapshotRequest *req, struct csi_kv *tags, size_t *nt)
{
	char err[256];
	int r = 0;

	for (size_t i = 0; i < c->n_extra_tags && r == 0; i++)
		r = add_tag(tags, nt, c->extra_tags[i].key, c->extra_tags[i].value);
	if (r == 0 && c->cluster_id) {
		char *lc = rpc_call_printf(call, "kubernetes.io/cluster/%s", c->cluster_id);
		if (!lc)
			return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		if ((r = add_tag(tags, nt, lc, "owned")) == 0)
			r = add_tag(tags, nt, "KubernetesCluster", c->cluster_id);
	}
	for (size_t i = 0; i < req->n_parameters && r == 0; i++) {
		const char *k = req->parameters[i]->key, *v = req->parameters[i]->value;
		if (strcasecmp(k, "csi.storage.k8s.io/volumesnapshot/name") == 0)
			r = add_tag(tags, nt, "kubernetes.io/created-for/volumesnapshot/name", v);
		else if (strcasecmp(k, "csi.storage.k8s.io/volumesnapshot/namespace") == 0)
			r = add_tag(tags, nt, "kubernetes.io/created-for/volumesnapshot/namespace",
				    v);
		else if (strcasecmp(k, "csi.storage.k8s.io/volumesnapshotcontent/name") == 0)
			r = add_tag(tags, nt,
				    "kubernetes.io/created-for/volumesnapshotcontent/name", v);
		else if (strncasecmp(k, "tagSpecification", 16) == 0) {
			const char *eq = strchr(v, '=');
			char *key = eq ? rpc_call_printf(call, "%.*s", (int)(eq - v), v) : NULL;
			if (!eq || strstr(v, "{{") ||
			    csi_tag_check(key, eq + 1, err, sizeof(err)) < 0) {
				if (c->tag_opts.warn_on_invalid_tag) {
					log_warn("skipping an invalid snapshot tag",
						 KV_S("parameter", k));
					continue;
				}
				return rpc_call_error(
				    call, RPC_INVALID_ARGUMENT, "invalid tag %s=\"%s\"%s%s", k, v,
				    eq ? ": " : " (want key=value)", eq ? err : "");
			}
			r = add_tag(tags, nt, key, eq + 1);
		} else if (strncasecmp(k, "csi.storage.k8s.io/", 19) == 0) {
			continue;
		} else {
			return rpc_call_error(call, RPC_INVALID_ARGUMENT,
					      "invalid parameter key %s for CreateSnapshot", k);
		}
	}
	if (r == 0)
		r = add_tag(tags, nt, TAG_SNAP_NAME, req->name);
	if (r == 0)
		r = add_tag(tags, nt, TAG_CLUSTER, "true");
	if (r < 0)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT,
				      "more than %d tags for the snapshot", MAX_TAGS);
	return RPC_OK;
}

int csi_ctrl_create_snapshot(struct rpc_call *call, const ProtobufCMessage *in,
			     ProtobufCMessage **out)
{
	const Csi__V1__CreateSnapshotRequest *req = (const void *)in;
	struct csi_ctrl *c = rpc_call_userdata(call);
	struct csi_kv tags[MAX_TAGS + 4];
	size_t nt = 0, n_found = 0;
	struct ec2_snapshot *found = NULL, s = {0};
	struct aws_error err = {0};
	char key[300];
	int r, code;

	if (!*req->name)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "snapshot name is missing");
	if (strlen(req->name) > 255)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT,
				      "snapshot name is longer than 255 characters");
	if (!*req->source_volume_id)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "source volume id is missing");
	if (!aws_volume_id_valid(req->source_volume_id))
		return ctrl_bad_id(call, "source volume id", req->source_volume_id);
	if ((code = snapshot_tags(call, c, req, tags, &nt)) != RPC_OK)
		return code;
	snprintf(key, sizeof(key), "snap/%s", req->name);
	if (ctrl_inflight_add(c, key) < 0)
		return rpc_call_error(call, RPC_ABORTED,
				      "an operation for snapshot %s is already in progress",
				      req->name);
	if ((r = ec2_find_snapshots(c, TAG_SNAP_NAME, req->name, &found, &n_found, &err)) < 0) {
		code = ctrl_aws_fail(call, r, &err, "looking up the snapshot by name", RPC_INTERNAL,
				     RPC_INTERNAL);
		goto out;
	}
	for (size_t i = 0; i < n_found; i++) {
		if (strcmp(found[i].state, "error") == 0) {
			log_warn("deleting a failed snapshot", KV_S("snapshot", found[i].id),
				 KV_S("name", req->name));
			ec2_delete_snapshot(c, found[i].id, &err);
			continue;
		}
		if (strcmp(found[i].volume, req->source_volume_id) != 0) {
			code = rpc_call_error(call, RPC_ALREADY_EXISTS,
					      "snapshot %s exists with another source volume (%s)",
					      req->name, found[i].volume);
			goto out;
		}
		s = found[i];
		memset(&found[i], 0, sizeof(found[i]));
		break;
	}
	if (!*s.id) {
		aws_error_clear(&err);
		if ((r = ec2_create_snapshot(c, req->source_volume_id, tags, nt, &s, &err)) < 0) {
			if (aws_error_is(&err, "SnapshotCreationPerVolumeRateExceeded") ||
			    aws_error_is(&err, "SnapshotLimitExceeded"))
				code =
				    ctrl_aws_fail(call, r, &err, "creating the snapshot",
						  RPC_RESOURCE_EXHAUSTED, RPC_RESOURCE_EXHAUSTED);
			else
				code = ctrl_aws_fail(call, r, &err, "creating the snapshot",
						     RPC_NOT_FOUND, RPC_INTERNAL);
			goto out;
		}
		log_info("snapshot created", KV_S("name", req->name), KV_S("snapshot", s.id),
			 KV_S("volume", req->source_volume_id));
	}
	Csi__V1__CreateSnapshotResponse *rep =
	    rpc_call_new(call, &csi__v1__create_snapshot_response__descriptor);
	if (!rep || !(rep->snapshot = snapshot_msg(call, &s))) {
		code = rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		goto out;
	}
	rpc_call_log_kv(call, "snapshot", s.id);
	*out = &rep->base;
	code = RPC_OK;
out:
	ctrl_inflight_del(c, key);
	ec2_snapshots_free(found, n_found);
	ec2_snapshot_release(&s);
	return code;
}

int csi_ctrl_delete_snapshot(struct rpc_call *call, const ProtobufCMessage *in,
			     ProtobufCMessage **out)
{
	const Csi__V1__DeleteSnapshotRequest *req = (const void *)in;
	struct csi_ctrl *c = rpc_call_userdata(call);
	struct aws_error err = {0};
	char key[64];
	int r, code = RPC_OK;

	if (!*req->snapshot_id)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "snapshot id is missing");
	if (!aws_snapshot_id_valid(req->snapshot_id)) { /* no such snapshot can exist */
		log_v(2, "malformed snapshot id: nothing to delete",
		      KV_S("snapshot", ctrl_id_str(call, req->snapshot_id)));
		return RPC_OK;
	}
	snprintf(key, sizeof(key), "delsnap/%s", req->snapshot_id);
	if (ctrl_inflight_add(c, key) < 0)
		return rpc_call_error(call, RPC_ABORTED,
				      "an operation for snapshot %s is already in progress",
				      req->snapshot_id);
	r = ec2_delete_snapshot(c, req->snapshot_id, &err);
	if (r == -ENOENT)
		log_v(2, "snapshot already deleted", KV_S("snapshot", req->snapshot_id));
	else if (r == -EBUSY || aws_error_is(&err, "InvalidSnapshot.InUse"))
		code = ctrl_aws_fail(call, r, &err, "deleting the snapshot",
				     RPC_FAILED_PRECONDITION, RPC_FAILED_PRECONDITION);
	else if (r < 0)
		code = ctrl_aws_fail(call, r, &err, "deleting the snapshot", RPC_INTERNAL,
				     RPC_INTERNAL);
	else
		log_info("snapshot deleted", KV_S("snapshot", req->snapshot_id));
	ctrl_inflight_del(c, key);
	return code;
}

static int fetch_snapshots(struct csi_ctrl *c, const void *src, const char *token, int max,
			   void **ret, size_t *ret_n, char **ret_next, struct aws_error *err)
{
	struct ec2_snapshot *s = NULL;
	int r = ec2_list_snapshots(c, src, token, max, &s, ret_n, ret_next, err);

	*ret = s;
	return r;
}

static int add_snapshot(struct rpc_call *call, ProtobufCMessage *rep, const void *items, size_t i)
{
	const struct ec2_snapshot *s = items;
	Csi__V1__ListSnapshotsResponse__Entry *e =
	    rpc_call_new(call, &csi__v1__list_snapshots_response__entry__descriptor);

	if (!e || !(e->snapshot = snapshot_msg(call, &s[i])))
		return -ENOMEM;
	return rpc_call_array_add(call, rep, "entries", e);
}

static void free_snapshots(void *items, size_t n)
{
	ec2_snapshots_free(items, n);
}

static const struct ctrl_pager snapshot_pager = {"listing snapshots", fetch_snapshots, add_snapshot,
						 free_snapshots};

int csi_ctrl_list_snapshots(struct rpc_call *call, const ProtobufCMessage *in,
			    ProtobufCMessage **out)
{
	const Csi__V1__ListSnapshotsRequest *req = (const void *)in;
	struct csi_ctrl *c = rpc_call_userdata(call);
	Csi__V1__ListSnapshotsResponse *rep =
	    rpc_call_new(call, &csi__v1__list_snapshots_response__descriptor);
	int r, code = RPC_OK;

	if (!rep)
		return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
	if (req->max_entries < 0)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT,
				      "max_entries must not be negative");
	/* a malformed id names no snapshot: an empty list, as for one that does not exist */
	if ((*req->snapshot_id && !aws_snapshot_id_valid(req->snapshot_id)) ||
	    (*req->source_volume_id && !aws_volume_id_valid(req->source_volume_id))) {
		*out = &rep->base;
		return RPC_OK;
	}
	if (*req->snapshot_id) {
		/* one snapshot: not found is an empty list, not an error (CSI spec) */
		struct ec2_snapshot s = {0};
		struct aws_error err = {0};
		r = ec2_describe_snapshot(c, req->snapshot_id, &s, &err);
		if (r < 0 && r != -ENOENT)
			return ctrl_aws_fail(call, r, &err, "looking up the snapshot", RPC_INTERNAL,
					     RPC_INTERNAL);
		if (r == 0 &&
		    (!*req->source_volume_id || strcmp(s.volume, req->source_volume_id) == 0) &&
		    add_snapshot(call, &rep->base, &s, 0) < 0)
			code = rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		ec2_snapshot_release(&s);
		if (code == RPC_OK)
			*out = &rep->base;
		return code;
	}
	const char *src = *req->source_volume_id ? req->source_volume_id : NULL;
	if ((code = ctrl_list_pages(call, &snapshot_pager, src, req->max_entries,
				    req->starting_token, &rep->base, &rep->next_token)) != RPC_OK)
		return code;
	*out = &rep->base;
	return RPC_OK;
}
