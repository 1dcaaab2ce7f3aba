/* The attach limit the node reports (see csi_node_limits.h; the facts are in
 * csi_node_limits_table.c). */
#include "modules/csi-node/csi_node_limits.h"

#include <errno.h>
#include <string.h>

#include "common/base/buf.h"

#define NON_NITRO_LIMIT 39
#define DEFAULT_SHARED_LIMIT 27

int csi_node_type_lookup(const char *instance_type, struct csi_node_type_facts *ret)
{
	*ret = (struct csi_node_type_facts){ .max_ebs_attachments = DEFAULT_SHARED_LIMIT };
	if (!instance_type)
		return -ENOENT;
	for (size_t i = 0; csi_node_non_nitro_types[i]; i++) {
		if (strcmp(csi_node_non_nitro_types[i], instance_type) == 0) {
			*ret = (struct csi_node_type_facts){ NON_NITRO_LIMIT, true, true };
			return 0;
		}
	}
	for (const struct csi_node_type_limit *t = csi_node_type_limits; t->type; t++) {
		if (strcmp(t->type, instance_type) == 0) {
			*ret = (struct csi_node_type_facts){ t->max_attachments, t->dedicated, false };
			return 0;
		}
	}
	return -ENOENT;
}

/* xvdaa .. xvddz, optionally with /dev/: the names the CSI controller allocates first. */
static bool csi_device_name(const char *dev)
{
	if (str_has_prefix(dev, "/dev/"))
		dev += 5;
	return strlen(dev) == 5 && str_has_prefix(dev, "xvd") && dev[3] >= 'a' && dev[3] <= 'd' &&
	       dev[4] >= 'a' && dev[4] <= 'z';
}

int csi_node_reserved_from_bdm(char *const *bdm)
{
	int n = 1; /* the root volume */

	for (size_t i = 0; bdm && bdm[i]; i++) {
		const char *eq = strchr(bdm[i], '=');
		if (!str_has_prefix(bdm[i], "ebs") || !eq)
			continue;
		if (csi_device_name(eq + 1))
			continue;
		n++;
	}
	return n;
}

/* The type's facts: the table's, or EC2's when the opt-in call gave some. */
static const char *type_facts(const struct csi_node_limits_input *in, struct csi_node_type_facts *f)
{
	bool known = csi_node_type_lookup(in->instance_type, f) == 0;

	if (in->ec2 && in->ec2->max_ebs_attachments > 0) {
		if (in->ec2->xen || f->xen) {
			*f = (struct csi_node_type_facts){ NON_NITRO_LIMIT, true, true };
			return "EC2 DescribeInstanceTypes, non-Nitro";
		}
		f->max_ebs_attachments = in->ec2->max_ebs_attachments;
		f->dedicated = in->ec2->dedicated || (known && f->dedicated);
		return "EC2 DescribeInstanceTypes";
	}
	if (f->xen)
		return "instance-type table, non-Nitro";
	return known ? "instance-type table" : "table default (type not listed)";
}

long long csi_node_max_volumes(const struct csi_node_limits_input *in, char *why, size_t n)
{
	struct csi_node_type_facts f;
	char tmp[8];
	long long limit, reserved, enis = in->enis > 0 ? in->enis : 1, avail;
	bool shared;
	const char *src, *rsrc;

	if (!why) {
		why = tmp;
		n = sizeof(tmp);
	}
	if (in->attach_limit >= 0) {
		(void)str_printf(why, n, "--volume-attach-limit");
		return in->attach_limit;
	}
	src = type_facts(in, &f);
	limit = f.max_ebs_attachments;
	shared = !f.dedicated;
	if (in->reserved >= 0) {
		reserved = in->reserved;
		rsrc = "--reserved-volume-attachments";
	} else if (in->counted_reserved > 0) {
		reserved = in->counted_reserved;
		rsrc = "metadata-labeler Node labels";
	} else {
		reserved = csi_node_reserved_from_bdm(in->bdm);
		rsrc = in->bdm ? "metadata block-device mappings" : "root volume";
	}
	avail = limit - reserved - (shared ? enis - 1 : 0);
	if (avail < 1)
		avail = 1;
	if (shared)
		(void)str_printf(why, n,
				 "%s: %lld shared, %lld reserved (%s), %lld extra interfaces", src,
				 limit, reserved, rsrc, enis - 1);
	else
		(void)str_printf(why, n, "%s: %lld dedicated, %lld reserved (%s)", src, limit,
				 reserved, rsrc);
	return avail;
}
