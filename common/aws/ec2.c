/* EC2 reply items as structs (see ec2.h). */
#include "common/aws/ec2.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/timeutil.h"

/* ---- tags ---- */

const char *ec2_tags_get(const struct ec2_tag *tags, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (tags[i].key && strcmp(tags[i].key, key) == 0)
			return tags[i].value;
	return NULL;
}

void ec2_tags_free(struct ec2_tag *tags, size_t n)
{
	for (size_t i = 0; tags && i < n; i++) {
		free(tags[i].key);
		free(tags[i].value);
	}
	free(tags);
}

/* The tagSet of an item; at most max tags (0: no cap), -E2BIG past it. */
static int tags_parse(const xmlNode *item, size_t max, struct ec2_tag **ret, size_t *ret_n)
{
	size_t n = aws_xml_count(item, "tagSet"), k = 0;
	struct ec2_tag *t;

	*ret = NULL;
	*ret_n = 0;
	if (!n)
		return 0;
	if (max && n > max)
		return -E2BIG;
	if (!(t = calloc(n, sizeof(*t))))
		return -ENOMEM;
	for (xmlNode *it = aws_xml_list(item, "tagSet"); it && k < n; it = aws_xml_next(it)) {
		const char *key = aws_xml_text(it, "key"), *val = aws_xml_text(it, "value");
		if (!key)
			continue;
		t[k].key = strdup(key);
		t[k].value = strdup(val ? val : "");
		if (!t[k].key || !t[k].value) {
			ec2_tags_free(t, k + 1);
			return -ENOMEM;
		}
		k++;
	}
	*ret = t;
	*ret_n = k;
	return 0;
}

/* ---- instances ---- */

static void eni_release(struct ec2_eni *e)
{
	free(e->id);
	free(e->status);
	strv_free(e->private_ips);
	strv_free(e->ipv6s);
}

void ec2_instance_release(struct ec2_instance *i)
{
	if (!i)
		return;
	free(i->id);
	free(i->state);
	free(i->type);
	free(i->zone);
	free(i->private_dns);
	free(i->public_dns);
	free(i->private_ip);
	free(i->public_ip);
	free(i->vpc_id);
	free(i->subnet_id);
	for (size_t k = 0; k < i->n_enis; k++)
		eni_release(&i->enis[k]);
	free(i->enis);
	ec2_tags_free(i->tags, i->n_tags);
	*i = (struct ec2_instance){0};
}

void ec2_instance_free(struct ec2_instance *i)
{
	ec2_instance_release(i);
	free(i);
}

/* strdup of NULL is NULL; *ok cleared on an allocation failure */
static char *dup_opt(const char *s, bool *ok)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*ok = false;
	return d;
}

static char **strv_dup(char *const *v, bool *ok)
{
	char **out = NULL;
	if (!v)
		return NULL;
	for (size_t k = 0; v[k]; k++)
		if (strv_push(&out, v[k]) < 0) {
			*ok = false;
			return out;
		}
	if (!out && !(out = calloc(1, sizeof(char *))))
		*ok = false;
	return out;
}

int ec2_instance_copy(const struct ec2_instance *s, struct ec2_instance *ret)
{
	struct ec2_instance d = {0};
	bool ok = true;

	d.id = dup_opt(s->id, &ok);
	d.state = dup_opt(s->state, &ok);
	d.type = dup_opt(s->type, &ok);
	d.zone = dup_opt(s->zone, &ok);
	d.private_dns = dup_opt(s->private_dns, &ok);
	d.public_dns = dup_opt(s->public_dns, &ok);
	d.private_ip = dup_opt(s->private_ip, &ok);
	d.public_ip = dup_opt(s->public_ip, &ok);
	d.vpc_id = dup_opt(s->vpc_id, &ok);
	d.subnet_id = dup_opt(s->subnet_id, &ok);
	d.source_dest_check = s->source_dest_check;
	if (s->n_enis) {
		if (!(d.enis = calloc(s->n_enis, sizeof(*d.enis))))
			ok = false;
		else
			d.n_enis = s->n_enis;
		for (size_t k = 0; ok && k < s->n_enis; k++) {
			d.enis[k].id = dup_opt(s->enis[k].id, &ok);
			d.enis[k].status = dup_opt(s->enis[k].status, &ok);
			d.enis[k].device_index = s->enis[k].device_index;
			d.enis[k].source_dest_check = s->enis[k].source_dest_check;
			d.enis[k].private_ips = strv_dup(s->enis[k].private_ips, &ok);
			d.enis[k].ipv6s = strv_dup(s->enis[k].ipv6s, &ok);
		}
	}
	if (ok && s->n_tags) {
		if (!(d.tags = calloc(s->n_tags, sizeof(*d.tags))))
			ok = false;
		else
			d.n_tags = s->n_tags;
		for (size_t k = 0; ok && k < s->n_tags; k++) {
			d.tags[k].key = dup_opt(s->tags[k].key, &ok);
			d.tags[k].value = dup_opt(s->tags[k].value, &ok);
		}
	}
	if (!ok) {
		ec2_instance_release(&d);
		return -ENOMEM;
	}
	*ret = d;
	return 0;
}

/* The text at path, copied; NULL (and no error) when absent or empty. */
static int text_dup(const xmlNode *n, const char *path, char **dst)
{
	const char *t = aws_xml_text(n, path);
	if (!t || !*t)
		return 0;
	if (!(*dst = strdup(t)))
		return -ENOMEM;
	return 0;
}

/* The non-empty texts of field in the items of list, at most EC2_MAX_IPS_PER_ENI. */
static int ips_parse(const xmlNode *item, const char *list, const char *field, char ***ret)
{
	size_t n = 0;
	int r;

	for (xmlNode *a = aws_xml_list(item, list); a; a = aws_xml_next(a)) {
		const char *ip = aws_xml_text(a, field);
		if (!ip || !*ip)
			continue;
		if (++n > EC2_MAX_IPS_PER_ENI)
			return -E2BIG;
		if ((r = strv_push(ret, ip)) < 0)
			return r;
	}
	return 0;
}

static int eni_parse(const xmlNode *item, struct ec2_eni *e)
{
	long long idx;
	bool b;
	int r;

	e->device_index = -1;
	if ((r = text_dup(item, "networkInterfaceId", &e->id)) < 0 ||
	    (r = text_dup(item, "status", &e->status)) < 0)
		return r;
	if (aws_xml_int(item, "attachment/deviceIndex", &idx) == 0)
		e->device_index = idx;
	e->source_dest_check = aws_xml_bool(item, "sourceDestCheck", &b) == 0 ? b : true;
	if ((r = ips_parse(item, "privateIpAddressesSet", "privateIpAddress", &e->private_ips)) <
	    0)
		return r;
	return ips_parse(item, "ipv6AddressesSet", "ipv6Address", &e->ipv6s);
}

int ec2_instance_parse(const xmlNode *item, struct ec2_instance *ret)
{
	struct ec2_instance i = {0};
	bool b;
	int r;

	const char *id = aws_xml_text(item, "instanceId");
	const char *state = aws_xml_text(item, "instanceState/name");
	if (!id || !*id)
		return -EBADMSG;
	/* no state is no evidence that the instance is gone: never read it as terminated */
	if (!state || !*state)
		return -EBADMSG;
	if ((r = text_dup(item, "instanceId", &i.id)) < 0 ||
	    (r = text_dup(item, "instanceState/name", &i.state)) < 0 ||
	    (r = text_dup(item, "instanceType", &i.type)) < 0 ||
	    (r = text_dup(item, "placement/availabilityZone", &i.zone)) < 0 ||
	    (r = text_dup(item, "privateDnsName", &i.private_dns)) < 0 ||
	    (r = text_dup(item, "dnsName", &i.public_dns)) < 0 ||
	    (r = text_dup(item, "privateIpAddress", &i.private_ip)) < 0 ||
	    (r = text_dup(item, "ipAddress", &i.public_ip)) < 0 ||
	    (r = text_dup(item, "vpcId", &i.vpc_id)) < 0 ||
	    (r = text_dup(item, "subnetId", &i.subnet_id)) < 0)
		goto fail;
	i.source_dest_check = aws_xml_bool(item, "sourceDestCheck", &b) == 0 ? b : true;

	size_t n = aws_xml_count(item, "networkInterfaceSet");
	if (n > EC2_MAX_ENIS) {
		r = -E2BIG;
		goto fail;
	}
	if (n && !(i.enis = calloc(n, sizeof(*i.enis)))) {
		r = -ENOMEM;
		goto fail;
	}
	for (xmlNode *e = aws_xml_list(item, "networkInterfaceSet"); e && i.n_enis < n;
	     e = aws_xml_next(e))
		if ((r = eni_parse(e, &i.enis[i.n_enis++])) < 0)
			goto fail;
	if ((r = tags_parse(item, EC2_MAX_TAGS, &i.tags, &i.n_tags)) < 0)
		goto fail;
	*ret = i;
	return 0;
fail:
	ec2_instance_release(&i);
	return r;
}

int ec2_instances_parse(const xmlNode *root, struct ec2_instance **list, size_t *n)
{
	int r;

	for (xmlNode *rs = aws_xml_list(root, "reservationSet"); rs; rs = aws_xml_next(rs))
		for (xmlNode *it = aws_xml_list(rs, "instancesSet"); it; it = aws_xml_next(it)) {
			struct ec2_instance *l = reallocarray(*list, *n + 1, sizeof(**list));
			if (!l)
				return -ENOMEM;
			*list = l;
			if ((r = ec2_instance_parse(it, &l[*n])) < 0)
				return r;
			(*n)++;
		}
	return 0;
}

const char *ec2_instance_tag(const struct ec2_instance *i, const char *key)
{
	return ec2_tags_get(i->tags, i->n_tags, key);
}

/* ---- volumes and snapshots ---- */

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

void ec2_volume_release(struct ec2_volume *v)
{
	if (!v)
		return;
	ec2_tags_free(v->tags, v->n_tags);
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
	ec2_tags_free(s->tags, s->n_tags);
	memset(s, 0, sizeof(*s));
}

void ec2_snapshots_free(struct ec2_snapshot *s, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		ec2_snapshot_release(&s[i]);
	free(s);
}

static int attachments_parse(const xmlNode *item, struct ec2_volume *v)
{
	size_t n = aws_xml_count(item, "attachmentSet");

	if (!n)
		return 0;
	if (!(v->att = calloc(n, sizeof(*v->att))))
		return -ENOMEM;
	for (xmlNode *a = aws_xml_list(item, "attachmentSet"); a && v->n_att < n;
	     a = aws_xml_next(a)) {
		struct ec2_attachment *at = &v->att[v->n_att++];
		copy_text(at->instance, sizeof(at->instance), a, "instanceId");
		copy_text(at->device, sizeof(at->device), a, "device");
		copy_text(at->state, sizeof(at->state), a, "status");
		/* an attachment without its instance or state could hide the one asked about:
		 * never read it as "not attached" */
		if (!*at->instance || !*at->state)
			return -EBADMSG;
	}
	return 0;
}

int ec2_volume_parse(const xmlNode *item, struct ec2_volume *ret)
{
	struct ec2_volume v = {0};
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
	if ((r = tags_parse(item, 0, &v.tags, &v.n_tags)) < 0 ||
	    (r = attachments_parse(item, &v)) < 0) {
		ec2_volume_release(&v);
		return r;
	}
	*ret = v;
	return 0;
}

int ec2_volumes_parse(const xmlNode *result, bool skip_deleted, struct ec2_volume **ret,
		      size_t *ret_n)
{
	size_t n = aws_xml_count(result, "volumeSet"), k = 0;
	struct ec2_volume *v;
	int r;

	if (n > EC2_MAX_ITEMS)
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

int ec2_snapshot_parse(const xmlNode *item, struct ec2_snapshot *ret)
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
	if ((r = tags_parse(item, 0, &s.tags, &s.n_tags)) < 0)
		return r;
	*ret = s;
	return 0;
}

int ec2_snapshots_parse(const xmlNode *result, struct ec2_snapshot **ret, size_t *ret_n)
{
	size_t n = aws_xml_count(result, "snapshotSet"), k = 0;
	struct ec2_snapshot *s;
	int r;

	if (n > EC2_MAX_ITEMS)
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

void ec2_modification_parse(const xmlNode *item, struct ec2_modification *ret)
{
	memset(ret, 0, sizeof(*ret));
	copy_text(ret->state, sizeof(ret->state), item, "modificationState");
	copy_text(ret->message, sizeof(ret->message), item, "statusMessage");
	copy_text(ret->target_type, sizeof(ret->target_type), item, "targetVolumeType");
	ret->target_size = xml_ll(item, "targetSize");
	ret->target_iops = xml_ll(item, "targetIops");
	ret->target_throughput = xml_ll(item, "targetThroughput");
}
