/* Deckhouse's AWS layouts as presets of an AWSCluster: the annotation
 * aws-k8s.deckhouse.io/layout names one, and the spec is filled the way Deckhouse's Terraform
 * lays the network out (AWSClusterConfiguration.layout):
 *   WithoutNAT  one public subnet per zone, no private subnet, so no NAT gateway and no
 *               Elastic IP; machines go into the public subnets (public IPs on launch).
 *   WithNAT     a public and a private subnet per zone, NAT gateways, the bastion enabled.
 * The subnets are cut as Terraform cuts nodeNetworkCIDR: blocks of ceil(log2(2 * zones)) more
 * bits, block i the public subnet of zone i and block zones+i its private one. What the spec
 * already says wins (subnets, a vpc.id, spec.bastion.enabled); an unknown value stops the
 * reconcile before anything is made. Deckhouse's deprecated Standard layout is not offered. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "modules/capa/capa_byo.h"
#include "modules/capa/capa_cluster.h"

static const struct {
	const char *name;
	enum capa_layout layout;
} layouts[] = {
	{ "WithoutNAT", CAPA_LAYOUT_WITHOUT_NAT },
	{ "WithNAT", CAPA_LAYOUT_WITH_NAT },
};

static const char *layout_value(const cJSON *awscluster)
{
	const cJSON *ann = json_find(awscluster, "metadata.annotations");
	return ann ? json_str_key(ann, CAPA_LAYOUT_ANNOTATION) : NULL;
}

int capa_layout_of(const cJSON *awscluster)
{
	const char *v = layout_value(awscluster);

	if (!v)
		return CAPA_LAYOUT_NONE;
	for (size_t i = 0; i < ARRAY_SIZE(layouts); i++)
		if (strcmp(v, layouts[i].name) == 0)
			return layouts[i].layout;
	return -EINVAL;
}

int capa_layout_subnets(const char *vpc_cidr, int zones, char pub[][20], char priv[][20])
{
	char addr[INET_ADDRSTRLEN] = "";
	const char *p = vpc_cidr ? strchr(vpc_cidr, '/') : NULL;
	long long len;
	struct in_addr in;
	int bits = 0;

	if (!p || zones < 1 || zones > CAPA_MAX_ZONES || (size_t)(p - vpc_cidr) >= sizeof(addr))
		return -EINVAL;
	str_copy(addr, (size_t)(p - vpc_cidr) + 1, vpc_cidr);
	if (str_to_ll(p + 1, 0, 32, &len) < 0 || inet_pton(AF_INET, addr, &in) != 1)
		return -EINVAL;
	while ((1 << bits) < 2 * zones)
		bits++;
	int sub = (int)len + bits;
	if (sub > 28)
		return -EINVAL; /* AWS's smallest subnet is a /28 */
	uint32_t net = ntohl(in.s_addr) & (len ? ~0u << (32 - len) : 0);
	for (int k = 0; k < 2 * zones; k++) {
		struct in_addr o = {.s_addr = htonl(net + ((uint32_t)k << (32 - sub)))};
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &o, ip, sizeof(ip));
		str_printf(k < zones ? pub[k] : priv[k - zones], 20, "%s/%d", ip, sub);
	}
	return 0;
}

static int subnet_add(cJSON *list, const char *zone, const char *cidr, bool pub)
{
	cJSON *sn = cJSON_CreateObject();

	if (!sn)
		return -ENOMEM;
	if (!cJSON_AddItemToArray(list, sn)) {
		cJSON_Delete(sn);
		return -ENOMEM;
	}
	if (!cJSON_AddStringToObject(sn, "availabilityZone", zone) ||
	    !cJSON_AddStringToObject(sn, "cidrBlock", cidr) ||
	    !cJSON_AddBoolToObject(sn, "isPublic", pub))
		return -ENOMEM;
	return 0;
}

int capa_preset_subnets(struct capa_scope *s, cJSON *net, char zones[][64], int n)
{
	char pub[CAPA_MAX_ZONES][20], priv[CAPA_MAX_ZONES][20];
	const char *cidr = json_str(net, "vpc.cidrBlock");
	int layout = capa_layout_of(s->obj), r = 0;

	if (layout <= 0)
		return 0; /* none (an unknown one was refused by capa_preset_apply) */
	if (capa_layout_subnets(cidr, n, pub, priv) < 0) {
		str_printf(s->err, sizeof(s->err), "layout %s: cannot cut VPC CIDR %s into %d zones",
			   layout_value(s->obj), cidr ? cidr : "(none)", n);
		return -EINVAL;
	}
	cJSON *list = cJSON_CreateArray();
	if (!list)
		return -ENOMEM;
	for (int i = 0; i < n && r >= 0; i++)
		r = subnet_add(list, zones[i], pub[i], true);
	for (int i = 0; i < n && r >= 0 && layout == CAPA_LAYOUT_WITH_NAT; i++)
		r = subnet_add(list, zones[i], priv[i], false);
	if (r < 0) {
		cJSON_Delete(list);
		return r;
	}
	if ((r = json_put(net, "subnets", list)) < 0)
		return r;
	s->spec_changed = true;
	log_info("subnets of the layout", KV_S("cluster", s->name),
		 KV_S("layout", layout_value(s->obj)), KV_I("zones", n));
	return 1;
}

int capa_preset_apply(struct capa_scope *s)
{
	int layout = capa_layout_of(s->obj);

	if (layout == -EINVAL) {
		str_printf(s->err, sizeof(s->err),
			   "annotation %s: unknown layout \"%s\" (WithoutNAT or WithNAT)",
			   CAPA_LAYOUT_ANNOTATION, layout_value(s->obj));
		return -EINVAL;
	}
	if (layout == CAPA_LAYOUT_WITH_NAT && !json_find(s->obj, "spec.bastion.enabled")) {
		cJSON *spec = cJSON_GetObjectItemCaseSensitive(s->obj, "spec");
		if (!spec || json_set_bool(spec, "bastion.enabled", true) < 0)
			return -ENOMEM;
		s->spec_changed = true;
	}
	return 0;
}

bool capa_preset_public_machines(const cJSON *awscluster)
{
	return capa_layout_of(awscluster) == CAPA_LAYOUT_WITHOUT_NAT;
}
