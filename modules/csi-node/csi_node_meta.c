/* What csi-node reports about its instance: ids and zone from the metadata service or the
 * Kubernetes Node object, the topology segments, and (opt-in only) the instance type's
 * attach-limit facts from EC2. */
#include "modules/csi-node/csi_node.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/ids.h"
#include "common/aws/imds.h"
#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/csi/labeler.h"
#include "common/csi/volume.h"
#include "common/kube/rest.h"

#define MAX_BDM 128

void csi_node_meta_release(struct csi_node_meta *m)
{
	if (!m)
		return;
	free(m->instance_id);
	free(m->instance_type);
	free(m->zone);
	free(m->zone_id);
	free(m->region);
	free(m->outpost_arn);
	strv_free(m->bdm);
	*m = (struct csi_node_meta){ .enis = -1 };
}

/* The string fields of struct csi_node_meta, their names and formats. */
static const struct {
	const char *field;
	size_t offset;
	bool (*valid)(const char *);
} meta_fields[] = {
	{ "instance-id", offsetof(struct csi_node_meta, instance_id), aws_instance_id_valid },
	{ "instance-type", offsetof(struct csi_node_meta, instance_type), aws_instance_type_valid },
	{ "availability-zone", offsetof(struct csi_node_meta, zone), aws_zone_valid },
	{ "availability-zone-id", offsetof(struct csi_node_meta, zone_id), aws_zone_id_valid },
	{ "region", offsetof(struct csi_node_meta, region), aws_region_valid },
	{ "outpost-arn", offsetof(struct csi_node_meta, outpost_arn), aws_outpost_arn_valid },
};

static char **meta_field(struct csi_node_meta *m, size_t i)
{
	return (char **)((char *)m + meta_fields[i].offset);
}

int csi_node_meta_check(const struct csi_node_meta *m, struct csi_node_meta_fault *ret)
{
	for (size_t i = 0; i < ARRAY_SIZE(meta_fields); i++) {
		const char *v = *meta_field((struct csi_node_meta *)m, i);
		if (v && !meta_fields[i].valid(v)) {
			*ret = (struct csi_node_meta_fault){ meta_fields[i].field, v, "malformed" };
			return -EBADMSG;
		}
	}
	if (m->zone && m->region && !aws_zone_in_region(m->zone, m->region)) {
		*ret = (struct csi_node_meta_fault){ "availability-zone", m->zone,
						     "not a zone of the region" };
		return -EBADMSG;
	}
	return 0;
}

void csi_node_meta_merge(struct csi_node_meta *m, struct csi_node_meta *from)
{
	for (size_t i = 0; i < ARRAY_SIZE(meta_fields); i++)
		if (!*meta_field(m, i))
			*meta_field(m, i) = TAKE_PTR(*meta_field(from, i));
	if (m->enis < 0)
		m->enis = from->enis;
	if (!m->reserved)
		m->reserved = from->reserved;
	if (!m->bdm)
		m->bdm = TAKE_PTR(from->bdm);
}

/* Fetches a value into *field when it is still unset; a missing path is fine. */
static int fetch(struct aws_imds *imds, const char *path, char **field)
{
	char *v = NULL;
	int r;

	if (*field)
		return 0;
	r = aws_imds_get(imds, path, &v);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (!*v) {
		free(v);
		return 0;
	}
	*field = v;
	return 0;
}

static int fetch_bdm(struct aws_imds *imds, char ***ret)
{
	_cleanup_free_ char *keys = NULL;
	_cleanup_strv_ char **list = NULL, **out = NULL;
	char path[256];
	int r;

	if ((r = aws_imds_get(imds, "meta-data/block-device-mapping/", &keys)) < 0)
		return r;
	if ((r = strv_split(keys, '\n', &list)) < 0)
		return r;
	for (size_t i = 0; i < MAX_BDM && list[i]; i++) {
		_cleanup_free_ char *dev = NULL;
		char kv[256];
		const char *key = list[i];
		size_t l = strlen(key);
		if (l && key[l - 1] == '/')
			continue;
		if (str_printf(path, sizeof(path), "meta-data/block-device-mapping/%s", key) < 0)
			continue;
		if ((r = aws_imds_get(imds, path, &dev)) < 0)
			continue;
		if (str_printf(kv, sizeof(kv), "%s=%s", key, dev) < 0)
			continue;
		if ((r = strv_push(&out, kv)) < 0)
			return r;
	}
	if (!out && (r = strv_push(&out, "root=/dev/xvda")) < 0)
		return r;
	*ret = TAKE_PTR(out);
	return 0;
}

int csi_node_meta_from_imds(struct aws_imds *imds, struct csi_node_meta *m)
{
	int r;

	if ((r = fetch(imds, "meta-data/instance-id", &m->instance_id)) < 0 ||
	    (r = fetch(imds, "meta-data/instance-type", &m->instance_type)) < 0 ||
	    (r = fetch(imds, "meta-data/placement/availability-zone", &m->zone)) < 0)
		return r;
	/* optional */
	(void)fetch(imds, "meta-data/placement/availability-zone-id", &m->zone_id);
	(void)fetch(imds, "meta-data/placement/region", &m->region);
	(void)fetch(imds, "meta-data/outpost-arn", &m->outpost_arn);
	if (m->enis < 0) {
		_cleanup_strv_ char **macs = NULL;
		if (aws_imds_macs(imds, &macs) == 0)
			m->enis = (int)strv_len(macs);
	}
	if (!m->bdm)
		(void)fetch_bdm(imds, &m->bdm);
	return 0;
}

int csi_node_parse_provider_id(const char *provider_id, char *zone, size_t zlen, char *id,
			       size_t idlen)
{
	/* aws:///us-east-1a/i-0abc, aws:////i-0abc, or a bare i-0abc */
	const char *p = provider_id, *slash;

	if (!p || !*p)
		return -EINVAL;
	if (str_has_prefix(p, "aws://"))
		p += 6;
	while (*p == '/')
		p++;
	slash = strrchr(p, '/');
	const char *inst = slash ? slash + 1 : p;
	if (!str_has_prefix(inst, "i-"))
		return -EINVAL;
	if (str_copy(id, idlen, inst) < 0)
		return -ENAMETOOLONG;
	if (slash) {
		size_t l = (size_t)(slash - p);
		if (l >= zlen)
			return -ENAMETOOLONG;
		memcpy(zone, p, l);
		zone[l] = '\0';
	} else if (zlen) {
		zone[0] = '\0';
	}
	return 0;
}

static int set_if_unset(char **field, const char *v)
{
	if (*field || !v || !*v)
		return 0;
	return (*field = strdup(v)) ? 0 : -ENOMEM;
}

int csi_node_meta_from_node(const cJSON *node, struct csi_node_meta *m)
{
	const char *pid = json_str(node, "spec.providerID");
	const cJSON *labels = json_find(node, "metadata.labels");
	char zone[64], id[64];
	int r;

	if (pid && *pid) {
		if (csi_node_parse_provider_id(pid, zone, sizeof(zone), id, sizeof(id)) == 0) {
			if ((r = set_if_unset(&m->instance_id, id)) == 0)
				r = set_if_unset(&m->zone, zone);
		} else { /* not an AWS provider id: kept whole for the check to report */
			r = set_if_unset(&m->instance_id, pid);
		}
		if (r < 0)
			return r;
	}
	if (labels) {
		if ((r = set_if_unset(&m->zone, json_str_key(labels, CSI_WELL_KNOWN_ZONE_KEY))) <
			0 ||
		    (r = set_if_unset(&m->zone_id, json_str_key(labels, CSI_ZONE_ID_KEY))) < 0 ||
		    (r = set_if_unset(&m->region,
				      json_str_key(labels, "topology.kubernetes.io/region"))) < 0 ||
		    (r = set_if_unset(&m->instance_type,
				      json_str_key(labels, "node.kubernetes.io/instance-type"))) <
			0)
			return r;
	}
	return m->instance_id ? 0 : -ENODATA;
}

int csi_node_meta_from_labeled_node(const cJSON *node, const char *driver,
				    struct csi_node_meta *m, char *why, size_t n)
{
	struct csi_node_meta got = { .enis = -1 };
	struct csi_labeler_counts k;
	int r;

	if ((r = csi_labeler_counts_of_node(node, driver, &k, why, n)) < 0)
		return r;
	if ((r = csi_node_meta_from_node(node, &got)) < 0) {
		snprintf(why, n, "no instance id in spec.providerID");
		csi_node_meta_release(&got);
		return r;
	}
	got.enis = k.enis;
	got.reserved = k.volumes + 1; /* and the root volume */
	csi_node_meta_merge(m, &got);
	csi_node_meta_release(&got);
	return 0;
}

int csi_node_get_node(struct kube_client *kc, const char *node_name, cJSON **ret)
{
	char path[512];

	if (!node_name || !*node_name)
		return -EINVAL;
	if (str_printf(path, sizeof(path), "/api/v1/nodes/%s", node_name) < 0)
		return -ENAMETOOLONG;
	return kube_get_path(kc, path, ret, &(struct kube_status){ 0 });
}

int csi_node_meta_from_kube(struct kube_client *kc, const char *node_name, struct csi_node_meta *m)
{
	cJSON *node = NULL;
	int r;

	if ((r = csi_node_get_node(kc, node_name, &node)) == 0)
		r = csi_node_meta_from_node(node, m);
	cJSON_Delete(node);
	return r;
}

void csi_node_topology_free(struct csi_kv *kv, size_t n)
{
	for (size_t i = 0; kv && i < n; i++) {
		free((char *)kv[i].key);
		free((char *)kv[i].value);
	}
	free(kv);
}

static int topo_add(struct csi_kv *kv, size_t *n, const char *key, const char *value)
{
	if (!value || !*value)
		return 0;
	kv[*n].key = strdup(key);
	kv[*n].value = strdup(value);
	(*n)++;
	return kv[*n - 1].key && kv[*n - 1].value ? 0 : -ENOMEM;
}

int csi_node_topology(const struct csi_node_meta *m, struct csi_kv **ret, size_t *ret_n)
{
	struct csi_kv *kv = calloc(10, sizeof(*kv));
	size_t n = 0;
	int r;

	if (!kv)
		return -ENOMEM;
	if ((r = topo_add(kv, &n, CSI_TOPOLOGY_ZONE_KEY, m->zone)) < 0 ||
	    (r = topo_add(kv, &n, CSI_WELL_KNOWN_ZONE_KEY, m->zone)) < 0 ||
	    (r = topo_add(kv, &n, CSI_OS_KEY, "linux")) < 0)
		goto fail;
	if (m->outpost_arn && *m->outpost_arn) {
		/* arn:<partition>:outposts:<region>:<account>:outpost/<id> */
		_cleanup_strv_ char **f = NULL;
		if ((r = strv_split(m->outpost_arn, ':', &f)) < 0)
			goto fail;
		if (strv_len(f) == 6 && strcmp(f[0], "arn") == 0) {
			const char *res = strchr(f[5], '/') ? strchr(f[5], '/') + 1 : f[5];
			if ((r = topo_add(kv, &n, "topology.ebs.csi.aws.com/region", f[3])) < 0 ||
			    (r = topo_add(kv, &n, "topology.ebs.csi.aws.com/partition", f[1])) <
				0 ||
			    (r = topo_add(kv, &n, "topology.ebs.csi.aws.com/account-id", f[4])) <
				0 ||
			    (r = topo_add(kv, &n, CSI_OUTPOST_KEY, res)) < 0)
				goto fail;
		}
	}
	*ret = kv;
	*ret_n = n;
	return 0;
fail:
	csi_node_topology_free(kv, n);
	return r;
}

int csi_node_parse_type_facts(const xmlNode *result, const char *instance_type,
			      struct csi_node_type_facts *ret)
{
	for (xmlNode *it = aws_xml_list(result, "instanceTypeSet"); it; it = aws_xml_next(it)) {
		const char *t = aws_xml_text(it, "instanceType");
		long long max = 0;
		if (!t || strcmp(t, instance_type) != 0)
			continue;
		struct csi_node_type_facts f = { 0 };
		if (aws_xml_int(it, "ebsInfo/maximumEbsAttachments", &max) == 0 && max > 0 &&
		    max < 100000)
			f.max_ebs_attachments = (int)max;
		const char *lt = aws_xml_text(it, "ebsInfo/attachmentLimitType");
		f.dedicated = lt && strcmp(lt, "dedicated") == 0;
		const char *hv = aws_xml_text(it, "hypervisor");
		f.xen = hv && strcmp(hv, "xen") == 0;
		*ret = f;
		return 0;
	}
	return -ENOENT;
}

int csi_node_ec2_type_facts(struct aws_client *c, const char *instance_type,
			    struct csi_node_type_facts *ret)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	struct aws_error err = { 0 };
	int r;

	if (!instance_type || !*instance_type)
		return -EINVAL;
	if ((r = aws_query_add(&q, "InstanceType.1", instance_type)) < 0)
		goto out;
	struct aws_request rq = {.service = AWS_SVC_EC2,
				 .action = "DescribeInstanceTypes",
				 .query = &q,
				 .timeout_ns = 5000000000LL,
				 .max_attempts = 2};
	if ((r = aws_do(c, &rq, &rep, &err)) < 0) {
		log_v(2, "DescribeInstanceTypes failed", KV_S("type", instance_type),
		      KV_S("error", err.message));
		goto out;
	}
	r = csi_node_parse_type_facts(rep.result, instance_type, ret);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}
