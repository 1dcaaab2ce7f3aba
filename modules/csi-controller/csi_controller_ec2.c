/* The EC2 calls of csi-controller; their replies are parsed by common/aws/ec2.h. Describe-by-ID
 * goes through the batching helper (common/aws/batch.h) unless --batching=false. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/batch.h"
#include "common/aws/client.h"
#include "common/aws/ec2.h"
#include "common/aws/query.h"
#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/metrics/metrics.h"
#include "modules/csi-controller/csi_controller_internal.h"

static void copy_text(char *dst, size_t n, const xmlNode *item, const char *path)
{
	const char *t = aws_xml_text(item, path);
	str_copy(dst, n, t ? t : "");
}

/* A call, counted in the upstream driver's metrics. */
static int ec2_call(struct csi_ctrl *c, const char *action, const struct aws_query *q,
		    struct aws_reply *rep, struct aws_error *err)
{
	int64_t t0 = now_mono_ns();
	int r = aws_call_query(c->aws, AWS_SVC_EC2, action, q, rep, err);

	if (r < 0 && r != -EALREADY) {
		if (err && aws_error_code_is_throttle(err->code))
			metric_inc(c->m_throttles, action);
		else
			metric_inc(c->m_errors, action, err ? err->code : "");
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
	r = ec2_volumes_parse(rep.result, true, ret, ret_n);
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
	if ((r = ec2_volumes_parse(rep.result, false, ret, ret_n)) < 0)
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
	ec2_modification_parse(item, ret);
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
	r = ec2_snapshots_parse(rep.result, ret, ret_n);
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
	if ((r = ec2_snapshots_parse(rep.result, ret, ret_n)) < 0)
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
