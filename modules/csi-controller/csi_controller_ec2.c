/* The EC2 calls of csi-controller, and their replies as structs. Describe-by-ID goes through
 * the batching helper (common/aws/batch.h) unless --batching=false. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/batch.h"
#include "common/aws/client.h"
#include "common/aws/query.h"
#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/metrics/metrics.h"
#include "modules/csi-controller/csi_controller_internal.h"

#define MAX_LIST 100000 /* cap on items gathered from a Describe */

static void kv_free(struct csi_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

void ec2_volume_release(struct ec2_volume *v)
{
	if (!v)
		return;
	kv_free(v->tags, v->n_tags);
	free(v->att);
	memset(v, 0, sizeof(*v));
}

void ec2_volumes_free(struct ec2_volume *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		ec2_volume_release(&v[i]);
	free(v);
}

void ec2_snapshot_release(struct ec2_snapshot *s)
{
	if (!s)
		return;
	kv_free(s->tags, s->n_tags);
	memset(s, 0, sizeof(*s));
}

void ec2_snapshots_free(struct ec2_snapshot *s, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		ec2_snapshot_release(&s[i]);
	free(s);
}

const char *ec2_tag(const struct csi_kv *tags, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(tags[i].key, key) == 0)
			return tags[i].value;
	return NULL;
}

static void copy_text(char *dst, size_t n, const xmlNode *item, const char *path)
{
	const char *t = aws_xml_text(item, path);
	str_copy(dst, n, t ? t : "");
}

static long long xml_ll(const xmlNode *item, const char *path)
{
	long long v = 0;
	if (aws_xml_int(item, path, &v) < 0)
		return 0;
	return v;
}

static bool xml_bool(const xmlNode *item, const char *path)
{
	bool b = false;
	if (aws_xml_bool(item, path, &b) < 0)
		return false;
	return b;
}

static int parse_tags(const xmlNode *item, struct csi_kv **ret, size_t *ret_n)
{
	size_t n = aws_xml_count(item, "tagSet"), k = 0;
	struct csi_kv *t;

	*ret = NULL;
	*ret_n = 0;
	if (!n)
		return 0;
	if (!(t = calloc(n, sizeof(*t))))
		return -ENOMEM;
	for (xmlNode *it = aws_xml_list(item, "tagSet"); it && k < n; it = aws_xml_next(it)) {
		const char *key = aws_xml_text(it, "key"), *val = aws_xml_text(it, "value");
		if (!key)
			continue;
		t[k].key = strdup(key);
		t[k].value = strdup(val ? val : "");
		if (!t[k].key || !t[k].value) {
			kv_free(t, k + 1);
			return -ENOMEM;
		}
		k++;
	}
	*ret = t;
	*ret_n = k;
	return 0;
}

int ec2_volume_parse(const struct _xmlNode *item, struct ec2_volume *ret)
{
	struct ec2_volume v = {0};
	size_t n;
	int r;

	copy_text(v.id, sizeof(v.id), item, "volumeId");
	if (!*v.id)
		return -EBADMSG;
	copy_text(v.az, sizeof(v.az), item, "availabilityZone");
	copy_text(v.state, sizeof(v.state), item, "status");
	if (!*v.state)
		return -EBADMSG; /* a volume of unknown state proves nothing */
	copy_text(v.type, sizeof(v.type), item, "volumeType");
	copy_text(v.snapshot, sizeof(v.snapshot), item, "snapshotId");
	copy_text(v.kms, sizeof(v.kms), item, "kmsKeyId");
	copy_text(v.outpost, sizeof(v.outpost), item, "outpostArn");
	v.size_gib = xml_ll(item, "size");
	v.iops = xml_ll(item, "iops");
	v.throughput = xml_ll(item, "throughput");
	v.encrypted = xml_bool(item, "encrypted");
	v.multi_attach = xml_bool(item, "multiAttachEnabled");
	if ((r = parse_tags(item, &v.tags, &v.n_tags)) < 0)
		return r;
	if ((n = aws_xml_count(item, "attachmentSet")) > 0) {
		if (!(v.att = calloc(n, sizeof(*v.att)))) {
			ec2_volume_release(&v);
			return -ENOMEM;
		}
		for (xmlNode *a = aws_xml_list(item, "attachmentSet"); a && v.n_att < n;
		     a = aws_xml_next(a)) {
			struct ec2_attachment *at = &v.att[v.n_att++];
			copy_text(at->instance, sizeof(at->instance), a, "instanceId");
			copy_text(at->device, sizeof(at->device), a, "device");
			copy_text(at->state, sizeof(at->state), a, "status");
			/* an attachment without its instance or state could hide the one asked
			 * about: never read it as "not attached" */
			if (!*at->instance || !*at->state) {
				ec2_volume_release(&v);
				return -EBADMSG;
			}
		}
	}
	*ret = v;
	return 0;
}

int ec2_snapshot_parse(const struct _xmlNode *item, struct ec2_snapshot *ret)
{
	struct ec2_snapshot s = {0};
	const char *t;
	int r;

	copy_text(s.id, sizeof(s.id), item, "snapshotId");
	if (!*s.id)
		return -EBADMSG;
	copy_text(s.volume, sizeof(s.volume), item, "volumeId");
	copy_text(s.state, sizeof(s.state), item, "status");
	s.size_gib = xml_ll(item, "volumeSize");
	if ((t = aws_xml_text(item, "startTime")) && rfc3339_parse(t, &s.start_ns) < 0)
		s.start_ns = 0;
	if ((r = parse_tags(item, &s.tags, &s.n_tags)) < 0)
		return r;
	*ret = s;
	return 0;
}

/* A call, counted in the upstream driver's metrics. */
static int ec2_call(struct csi_ctrl *c, const char *action, const struct aws_query *q,
		    struct aws_reply *rep, struct aws_error *err)
{
	int64_t t0 = now_mono_ns();
	int r = aws_call_query(c->aws, AWS_SVC_EC2, action, q, rep, err);

	if (r < 0 && r != -EALREADY) {
		metric_inc(c->m_errors, action);
		if (err && aws_error_code_is_throttle(err->code))
			metric_inc(c->m_throttles, action);
		log_v(4, "ec2 call failed", KV_S("action", action),
		      KV_S("code", err ? err->code : ""), KV_E(r));
	} else {
		metric_observe(c->m_requests, (double)(now_mono_ns() - t0) / 1e9, action);
	}
	return r;
}

static int batch_get(struct csi_ctrl *c, struct aws_batcher *b, const struct aws_batch_kind *k,
		     const char *id, xmlDoc **ret_doc, xmlNode **ret_item, struct aws_error *err)
{
	int r;

	if (c->batching && b) {
		/* the batcher's fetch (csi_controller.c) counts the calls it makes */
		if ((r = aws_batcher_get(b, id, ret_doc, err)) < 0)
			return r;
		*ret_item = xmlDocGetRootElement(*ret_doc);
		return 0;
	}
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	char param[64];
	snprintf(param, sizeof(param), "%s.1", k->id_param);
	if ((r = aws_query_add(&q, param, id)) < 0)
		goto out;
	if ((r = ec2_call(c, k->action, &q, &rep, err)) < 0)
		goto out;
	/* item_lists "a/b": the first item of the last list under the first items of the others */
	char lists[128];
	str_copy(lists, sizeof(lists), k->item_lists);
	xmlNode *item = rep.result;
	for (char *p = lists; item && p && *p;) {
		char *slash = strchr(p, '/');
		if (slash)
			*slash = 0;
		item = aws_xml_list(item, p);
		p = slash ? slash + 1 : NULL;
	}
	if (!item) {
		r = -ENOENT;
		goto out;
	}
	xmlDoc *doc = xmlNewDoc((const xmlChar *)"1.0");
	xmlNode *copy = doc ? xmlDocCopyNode(item, doc, 1) : NULL;
	if (!copy) {
		xmlFreeDoc(doc);
		r = -ENOMEM;
		goto out;
	}
	xmlDocSetRootElement(doc, copy);
	*ret_doc = doc;
	*ret_item = copy;
out:
	if (r == -ENOENT && err && !*err->code)
		aws_error_set(err, 400, k->notfound_code, "%s does not exist", id);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int ec2_describe_volume(struct csi_ctrl *c, const char *id, struct ec2_volume *ret,
			struct aws_error *err)
{
	xmlDoc *doc = NULL;
	xmlNode *item;
	int r;

	if ((r = batch_get(c, c->b_volumes, &aws_batch_volumes, id, &doc, &item, err)) < 0)
		return r;
	r = ec2_volume_parse(item, ret);
	xmlFreeDoc(doc);
	return r;
}

static int volumes_from(const xmlNode *result, struct ec2_volume **ret, size_t *ret_n,
			bool skip_deleted)
{
	size_t n = aws_xml_count(result, "volumeSet"), k = 0;
	struct ec2_volume *v;
	int r;

	if (n > MAX_LIST)
		return -E2BIG;
	if (!(v = calloc(n ? n : 1, sizeof(*v))))
		return -ENOMEM;
	for (xmlNode *it = aws_xml_list(result, "volumeSet"); it && k < n; it = aws_xml_next(it)) {
		if ((r = ec2_volume_parse(it, &v[k])) < 0) {
			ec2_volumes_free(v, k);
			return r;
		}
		if (skip_deleted &&
		    (strcmp(v[k].state, "deleted") == 0 || strcmp(v[k].state, "deleting") == 0)) {
			ec2_volume_release(&v[k]);
			continue;
		}
		k++;
	}
	*ret = v;
	*ret_n = k;
	return 0;
}

int ec2_find_volumes(struct csi_ctrl *c, const char *key, const char *value,
		     struct ec2_volume **ret, size_t *ret_n, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	char fname[200];
	int r;

	snprintf(fname, sizeof(fname), "tag:%s", key);
	if ((r = aws_query_add_filter(&q, fname, &value, 1)) < 0)
		goto out;
	if ((r = ec2_call(c, "DescribeVolumes", &q, &rep, err)) < 0)
		goto out;
	r = volumes_from(rep.result, ret, ret_n, true);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static char *next_token(const xmlNode *result)
{
	const char *t = aws_xml_text(result, "nextToken");
	return t && *t ? strdup(t) : NULL;
}

int ec2_list_volumes(struct csi_ctrl *c, const char *token, int max, struct ec2_volume **ret,
		     size_t *ret_n, char **ret_next, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	const char *val = "true";
	int r;

	if ((r = aws_query_add_filter(&q,
				      "tag:"
				      "ebs.csi.aws.com/cluster",
				      &val, 1)) < 0)
		goto out;
	if (max > 0 && (r = aws_query_add_int(&q, "MaxResults",
					      max < 5	  ? 5
					      : max > 500 ? 500
							  : max)) < 0)
		goto out;
	if (token && *token && (r = aws_query_add(&q, "NextToken", token)) < 0)
		goto out;
	if ((r = ec2_call(c, "DescribeVolumes", &q, &rep, err)) < 0)
		goto out;
	if ((r = volumes_from(rep.result, ret, ret_n, false)) < 0)
		goto out;
	*ret_next = next_token(rep.result);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static int add_tags(struct aws_query *q, const char *resource, const struct csi_kv *tags, size_t n)
{
	char key[64];
	int r;

	if (!n)
		return 0;
	if ((r = aws_query_add(q, "TagSpecification.1.ResourceType", resource)) < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "TagSpecification.1.Tag.%zu.Key", i + 1);
		if ((r = aws_query_add(q, key, tags[i].key)) < 0)
			return r;
		snprintf(key, sizeof(key), "TagSpecification.1.Tag.%zu.Value", i + 1);
		if ((r = aws_query_add(q, key, tags[i].value)) < 0)
			return r;
	}
	return 0;
}

int ec2_create_volume(struct csi_ctrl *c, const struct ec2_create_volume *cv, char ret_id[32],
		      struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if (cv->zone)
		r = aws_query_add(&q, "AvailabilityZone", cv->zone);
	else
		r = aws_query_add(&q, "AvailabilityZoneId", cv->zone_id);
	if (r < 0 || (r = aws_query_add(&q, "VolumeType", cv->type)) < 0 ||
	    (r = aws_query_add_int(&q, "Size", cv->size_gib)) < 0)
		goto out;
	if (cv->iops && (r = aws_query_add_int(&q, "Iops", cv->iops)) < 0)
		goto out;
	if (cv->throughput && (r = aws_query_add_int(&q, "Throughput", cv->throughput)) < 0)
		goto out;
	if (cv->encrypted && (r = aws_query_add(&q, "Encrypted", "true")) < 0)
		goto out;
	if (cv->kms_key && (r = aws_query_add(&q, "KmsKeyId", cv->kms_key)) < 0)
		goto out;
	if (cv->snapshot && (r = aws_query_add(&q, "SnapshotId", cv->snapshot)) < 0)
		goto out;
	if (cv->multi_attach && (r = aws_query_add(&q, "MultiAttachEnabled", "true")) < 0)
		goto out;
	if (cv->outpost && (r = aws_query_add(&q, "OutpostArn", cv->outpost)) < 0)
		goto out;
	if (cv->init_rate &&
	    (r = aws_query_add_int(&q, "VolumeInitializationRate", cv->init_rate)) < 0)
		goto out;
	if (cv->client_token && (r = aws_query_add(&q, "ClientToken", cv->client_token)) < 0)
		goto out;
	if ((r = add_tags(&q, "volume", cv->tags, cv->n_tags)) < 0)
		goto out;
	if ((r = ec2_call(c, "CreateVolume", &q, &rep, err)) < 0)
		goto out;
	const char *id = aws_xml_text(rep.result, "volumeId");
	if (!id || !*id) {
		aws_error_set(err, rep.status, "", "CreateVolume replied without a volume id");
		r = -EBADMSG;
		goto out;
	}
	str_copy(ret_id, 32, id);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static int simple_call(struct csi_ctrl *c, const char *action, const char *k1, const char *v1,
		       const char *k2, const char *v2, const char *k3, const char *v3,
		       struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if ((r = aws_query_add(&q, k1, v1)) < 0 || (k2 && (r = aws_query_add(&q, k2, v2)) < 0) ||
	    (k3 && (r = aws_query_add(&q, k3, v3)) < 0))
		goto out;
	r = ec2_call(c, action, &q, &rep, err);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int ec2_delete_volume(struct csi_ctrl *c, const char *id, struct aws_error *err)
{
	return simple_call(c, "DeleteVolume", "VolumeId", id, NULL, NULL, NULL, NULL, err);
}

int ec2_attach_volume(struct csi_ctrl *c, const char *volume, const char *instance,
		      const char *device, struct aws_error *err)
{
	return simple_call(c, "AttachVolume", "VolumeId", volume, "InstanceId", instance, "Device",
			   device, err);
}

int ec2_detach_volume(struct csi_ctrl *c, const char *volume, const char *instance,
		      struct aws_error *err)
{
	return simple_call(c, "DetachVolume", "VolumeId", volume, "InstanceId", instance, NULL,
			   NULL, err);
}

int ec2_delete_snapshot(struct csi_ctrl *c, const char *id, struct aws_error *err)
{
	return simple_call(c, "DeleteSnapshot", "SnapshotId", id, NULL, NULL, NULL, NULL, err);
}

int ec2_describe_instance(struct csi_ctrl *c, const char *id, char ***ret_devices,
			  char ret_state[16], char ret_az[48], struct aws_error *err)
{
	xmlDoc *doc = NULL;
	xmlNode *item;
	char **devs = NULL;
	int r;

	if ((r = batch_get(c, c->b_instances, &aws_batch_instances, id, &doc, &item, err)) < 0)
		return r;
	for (xmlNode *m = aws_xml_list(item, "blockDeviceMapping"); m; m = aws_xml_next(m)) {
		const char *d = aws_xml_text(m, "deviceName");
		if (d && (r = strv_push(&devs, d)) < 0) {
			strv_free(devs);
			xmlFreeDoc(doc);
			return r;
		}
	}
	copy_text(ret_state, 16, item, "instanceState/name");
	copy_text(ret_az, 48, item, "placement/availabilityZone");
	xmlFreeDoc(doc);
	*ret_devices = devs;
	return 0;
}

int ec2_modify_volume(struct csi_ctrl *c, const char *id, long long size_gib, const char *type,
		      long long iops, long long throughput, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if ((r = aws_query_add(&q, "VolumeId", id)) < 0)
		goto out;
	if (size_gib && (r = aws_query_add_int(&q, "Size", size_gib)) < 0)
		goto out;
	if (type && *type && (r = aws_query_add(&q, "VolumeType", type)) < 0)
		goto out;
	if (iops && (r = aws_query_add_int(&q, "Iops", iops)) < 0)
		goto out;
	if (throughput && (r = aws_query_add_int(&q, "Throughput", throughput)) < 0)
		goto out;
	r = ec2_call(c, "ModifyVolume", &q, &rep, err);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int ec2_describe_modification(struct csi_ctrl *c, const char *id, struct ec2_modification *ret,
			      struct aws_error *err)
{
	xmlDoc *doc = NULL;
	xmlNode *item;
	int r;

	if ((r = batch_get(c, c->b_mods, &aws_batch_volume_modifications, id, &doc, &item, err)) <
	    0)
		return r;
	memset(ret, 0, sizeof(*ret));
	copy_text(ret->state, sizeof(ret->state), item, "modificationState");
	copy_text(ret->message, sizeof(ret->message), item, "statusMessage");
	copy_text(ret->target_type, sizeof(ret->target_type), item, "targetVolumeType");
	ret->target_size = xml_ll(item, "targetSize");
	ret->target_iops = xml_ll(item, "targetIops");
	ret->target_throughput = xml_ll(item, "targetThroughput");
	xmlFreeDoc(doc);
	return 0;
}

int ec2_create_tags(struct csi_ctrl *c, const char *id, const struct csi_kv *tags, size_t n,
		    struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	char key[48];
	int r;

	if ((r = aws_query_add(&q, "ResourceId.1", id)) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "Tag.%zu.Key", i + 1);
		if ((r = aws_query_add(&q, key, tags[i].key)) < 0)
			goto out;
		snprintf(key, sizeof(key), "Tag.%zu.Value", i + 1);
		if ((r = aws_query_add(&q, key, tags[i].value)) < 0)
			goto out;
	}
	r = ec2_call(c, "CreateTags", &q, &rep, err);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int ec2_create_snapshot(struct csi_ctrl *c, const char *volume, const struct csi_kv *tags, size_t n,
			struct ec2_snapshot *ret, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if ((r = aws_query_add(&q, "VolumeId", volume)) < 0 ||
	    (r = add_tags(&q, "snapshot", tags, n)) < 0)
		goto out;
	if ((r = ec2_call(c, "CreateSnapshot", &q, &rep, err)) < 0)
		goto out;
	r = ec2_snapshot_parse(rep.result, ret);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int ec2_describe_snapshot(struct csi_ctrl *c, const char *id, struct ec2_snapshot *ret,
			  struct aws_error *err)
{
	xmlDoc *doc = NULL;
	xmlNode *item;
	int r;

	if ((r = batch_get(c, c->b_snapshots, &aws_batch_snapshots, id, &doc, &item, err)) < 0)
		return r;
	r = ec2_snapshot_parse(item, ret);
	xmlFreeDoc(doc);
	return r;
}

static int snapshots_from(const xmlNode *result, struct ec2_snapshot **ret, size_t *ret_n)
{
	size_t n = aws_xml_count(result, "snapshotSet"), k = 0;
	struct ec2_snapshot *s;
	int r;

	if (n > MAX_LIST)
		return -E2BIG;
	if (!(s = calloc(n ? n : 1, sizeof(*s))))
		return -ENOMEM;
	for (xmlNode *it = aws_xml_list(result, "snapshotSet"); it && k < n;
	     it = aws_xml_next(it)) {
		if ((r = ec2_snapshot_parse(it, &s[k])) < 0) {
			ec2_snapshots_free(s, k);
			return r;
		}
		k++;
	}
	*ret = s;
	*ret_n = k;
	return 0;
}

int ec2_find_snapshots(struct csi_ctrl *c, const char *key, const char *value,
		       struct ec2_snapshot **ret, size_t *ret_n, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	char fname[200];
	int r;

	snprintf(fname, sizeof(fname), "tag:%s", key);
	if ((r = aws_query_add_filter(&q, fname, &value, 1)) < 0 ||
	    (r = aws_query_add(&q, "Owner.1", "self")) < 0)
		goto out;
	if ((r = ec2_call(c, "DescribeSnapshots", &q, &rep, err)) < 0)
		goto out;
	r = snapshots_from(rep.result, ret, ret_n);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int ec2_list_snapshots(struct csi_ctrl *c, const char *source_volume, const char *token, int max,
		       struct ec2_snapshot **ret, size_t *ret_n, char **ret_next,
		       struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	const char *val = "true";
	int r;

	if (source_volume)
		r = aws_query_add_filter(&q, "volume-id", &source_volume, 1);
	else
		r = aws_query_add_filter(&q, "tag:ebs.csi.aws.com/cluster", &val, 1);
	if (r < 0 || (r = aws_query_add(&q, "Owner.1", "self")) < 0)
		goto out;
	if (max > 0 && (r = aws_query_add_int(&q, "MaxResults",
					      max < 5	   ? 5
					      : max > 1000 ? 1000
							   : max)) < 0)
		goto out;
	if (token && *token && (r = aws_query_add(&q, "NextToken", token)) < 0)
		goto out;
	if ((r = ec2_call(c, "DescribeSnapshots", &q, &rep, err)) < 0)
		goto out;
	if ((r = snapshots_from(rep.result, ret, ret_n)) < 0)
		goto out;
	*ret_next = next_token(rep.result);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int ec2_zones(struct csi_ctrl *c, char ***ret, size_t *ret_n, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	const char *avail = "available";
	char **zones = NULL;
	int r;

	pthread_mutex_lock(&c->lock);
	if (c->zones) {
		*ret = c->zones;
		*ret_n = c->n_zones;
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	pthread_mutex_unlock(&c->lock);
	if ((r = aws_query_add_filter(&q, "state", &avail, 1)) < 0 ||
	    (r = aws_query_add_filter(&q, "zone-type", (const char *[]){"availability-zone"}, 1)) <
		0)
		goto out;
	if ((r = ec2_call(c, "DescribeAvailabilityZones", &q, &rep, err)) < 0)
		goto out;
	for (xmlNode *z = aws_xml_list(rep.result, "availabilityZoneInfo"); z;
	     z = aws_xml_next(z)) {
		const char *name = aws_xml_text(z, "zoneName");
		if (name && (r = strv_push(&zones, name)) < 0)
			goto out;
	}
	if (!zones) {
		aws_error_set(err, rep.status, "", "no available zone in the region");
		r = -ENOENT;
		goto out;
	}
	pthread_mutex_lock(&c->lock);
	if (!c->zones) {
		c->zones = TAKE_PTR(zones);
		c->n_zones = strv_len(c->zones);
	}
	*ret = c->zones;
	*ret_n = c->n_zones;
	pthread_mutex_unlock(&c->lock);
out:
	strv_free(zones);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int ec2_dry_run(struct csi_ctrl *c, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if ((r = aws_query_add(&q, "DryRun", "true")) < 0)
		goto out;
	r = ec2_call(c, "DescribeAvailabilityZones", &q, &rep, err);
	if (r == -EALREADY) /* DryRunOperation: the call would have succeeded */
		r = 0;
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}
