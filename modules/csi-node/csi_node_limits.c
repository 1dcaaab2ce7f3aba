/* The attach limit the node reports (see csi_node_limits.h). */
#include "modules/csi-node/csi_node_limits.h"

#include <string.h>

#include "common/base/buf.h"

/* Families on the Xen hypervisor (previous generations). */
static const char *const xen_families[] = {
	"c1", "c3", "c4", "cc2", "cr1", "d2", "g2", "g3", "g3s", "h1", "hs1", "i2", "i3",
	"m1", "m2", "m3", "m4", "p2", "p3", "r3", "r4", "t1", "t2", "x1", "x1e",
};

bool csi_node_type_is_xen(const char *instance_type)
{
	char family[16];
	const char *dot;

	if (!instance_type || !(dot = strchr(instance_type, '.')))
		return false;
	size_t l = (size_t)(dot - instance_type);
	if (l == 0 || l >= sizeof(family))
		return false;
	memcpy(family, instance_type, l);
	family[l] = '\0';
	/* p3dn.24xlarge is Nitro; i3.metal is bare metal */
	if (strcmp(instance_type, "i3.metal") == 0)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(xen_families); i++)
		if (strcmp(family, xen_families[i]) == 0)
			return true;
	return false;
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

long long csi_node_max_volumes(const struct csi_node_limits_input *in, char *why, size_t n)
{
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
	if (in->facts && in->facts->max_ebs_attachments > 0) {
		limit = in->facts->max_ebs_attachments;
		shared = !in->facts->dedicated && !in->facts->xen;
		src = "instance type facts";
	} else if (csi_node_type_is_xen(in->instance_type) || (in->facts && in->facts->xen)) {
		limit = 39;
		shared = false;
		src = "default for Xen";
	} else {
		limit = 27;
		shared = true;
		src = "default for Nitro";
	}
	if (in->reserved >= 0) {
		reserved = in->reserved;
		rsrc = "--reserved-volume-attachments";
	} else if (in->non_csi_volumes >= 0) {
		reserved = in->non_csi_volumes;
		rsrc = "attached non-CSI volumes";
	} else {
		reserved = csi_node_reserved_from_bdm(in->bdm);
		rsrc = "metadata block-device mappings";
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
