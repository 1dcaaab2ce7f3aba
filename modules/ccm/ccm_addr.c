/* Node addresses and labels from an instance description, Node helpers, and the
 * node-lifecycle decision: pure functions. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "modules/ccm/ccm_model.h"

/* Canonical text of an IP (as Go's ip.String()); -EINVAL when it does not parse. */
static int canon_ip(const char *s, bool v6, char *buf, size_t n)
{
	unsigned char a[16];
	if (inet_pton(v6 ? AF_INET6 : AF_INET, s, a) != 1)
		return -EINVAL;
	if (!inet_ntop(v6 ? AF_INET6 : AF_INET, a, buf, (socklen_t)n))
		return -EINVAL;
	return 0;
}

static int add_addr(cJSON *arr, const char *type, const char *addr)
{
	cJSON *o = cJSON_CreateObject();
	if (!o || !cJSON_AddStringToObject(o, "type", type) ||
	    !cJSON_AddStringToObject(o, "address", addr)) {
		cJSON_Delete(o);
		return -ENOMEM;
	}
	cJSON_AddItemToArray(arr, o);
	return 0;
}

/* ENIs sorted by device index; unattached (-1) last, stable otherwise. */
static void sorted_enis(const struct ec2_instance *i, const struct ec2_eni **out)
{
	for (size_t k = 0; k < i->n_enis; k++)
		out[k] = &i->enis[k];
	for (size_t a = 1; a < i->n_enis; a++) {
		const struct ec2_eni *e = out[a];
		long long ka = e->device_index < 0 ? (1LL << 40) : e->device_index;
		size_t b = a;
		while (b > 0) {
			long long kb =
			    out[b - 1]->device_index < 0 ? (1LL << 40) : out[b - 1]->device_index;
			if (kb <= ka)
				break;
			out[b] = out[b - 1];
			b--;
		}
		out[b] = e;
	}
}

static bool eni_in_use(const struct ec2_eni *e)
{
	return e->status && strcmp(e->status, "in-use") == 0;
}

static int add_ipv4(const struct ec2_instance *i, cJSON *arr)
{
	const struct ec2_eni *enis[EC2_MAX_ENIS];
	char ip[INET6_ADDRSTRLEN];
	int r;

	if (i->n_enis > 0) {
		sorted_enis(i, enis);
		for (size_t k = 0; k < i->n_enis; k++) {
			if (!eni_in_use(enis[k]))
				continue;
			for (char **p = enis[k]->private_ips; p && *p; p++) {
				if ((r = canon_ip(*p, false, ip, sizeof(ip))) < 0 ||
				    (r = add_addr(arr, "InternalIP", ip)) < 0)
					return r;
			}
		}
	} else if (i->private_ip) {
		if ((r = canon_ip(i->private_ip, false, ip, sizeof(ip))) < 0 ||
		    (r = add_addr(arr, "InternalIP", ip)) < 0)
			return r;
	}
	if (i->public_ip) {
		if ((r = canon_ip(i->public_ip, false, ip, sizeof(ip))) < 0 ||
		    (r = add_addr(arr, "ExternalIP", ip)) < 0)
			return r;
	}
	if (i->private_dns) {
		if ((r = add_addr(arr, "InternalDNS", i->private_dns)) < 0 ||
		    (r = add_addr(arr, "Hostname", i->private_dns)) < 0)
			return r;
	}
	if (i->public_dns && (r = add_addr(arr, "ExternalDNS", i->public_dns)) < 0)
		return r;
	return 0;
}

static int add_ipv6(const struct ec2_instance *i, cJSON *arr)
{
	const struct ec2_eni *enis[EC2_MAX_ENIS];
	char ip[INET6_ADDRSTRLEN];
	int r;

	sorted_enis(i, enis);
	for (size_t k = 0; k < i->n_enis; k++) {
		if (!eni_in_use(enis[k]) || !enis[k]->ipv6s || !enis[k]->ipv6s[0])
			continue;
		if ((r = canon_ip(enis[k]->ipv6s[0], true, ip, sizeof(ip))) < 0 ||
		    (r = add_addr(arr, "InternalIP", ip)) < 0)
			return r;
	}
	return 0;
}

int ccm_instance_addresses(const struct ec2_instance *i, char *const *families, cJSON **ret)
{
	static char *const def[] = {(char *)"ipv4", NULL};
	cJSON *arr = cJSON_CreateArray();
	int r = 0;

	if (!arr)
		return -ENOMEM;
	if (!families || !families[0])
		families = def;
	for (char *const *f = families; *f && r >= 0; f++) {
		if (strcmp(*f, "ipv4") == 0)
			r = add_ipv4(i, arr);
		else if (strcmp(*f, "ipv6") == 0)
			r = add_ipv6(i, arr);
	}
	if (r < 0) {
		cJSON_Delete(arr);
		return r;
	}
	*ret = arr;
	return 0;
}

static const char *addr_type(const cJSON *a)
{
	return json_str(a, "type");
}

static const char *addr_value(const cJSON *a)
{
	return json_str(a, "address");
}

/* Appends a copy of address a to arr. */
static int append_copy(cJSON *arr, const cJSON *a)
{
	cJSON *d = cJSON_Duplicate(a, true);
	if (!d)
		return -ENOMEM;
	cJSON_AddItemToArray(arr, d);
	return 0;
}

static bool same_ip(const char *a, const unsigned char *bin, bool v6)
{
	unsigned char x[16];
	if (!a || inet_pton(v6 ? AF_INET6 : AF_INET, a, x) != 1)
		return false;
	return memcmp(x, bin, v6 ? 16 : 4) == 0;
}

/* upstream GetNodeAddressesFromNodeIPs: the addresses equal to each provided IP first (in the
 * order of the IPs), then the cloud's addresses of the types not matched */
int ccm_addresses_prefer_node_ip(cJSON *addrs, const char *provided, cJSON **ret)
{
	_cleanup_strv_ char **ips = NULL;
	const char *types[16];
	size_t nt = 0;
	cJSON *out = NULL;
	const cJSON *a;
	int r;

	if (!provided || !*provided) {
		*ret = addrs;
		return 0;
	}
	if ((r = strv_split(provided, ',', &ips)) < 0)
		goto fail;
	if (strv_len(ips) == 0 || strv_len(ips) > 2) {
		r = -EINVAL;
		goto fail;
	}
	if (!(out = cJSON_CreateArray())) {
		r = -ENOMEM;
		goto fail;
	}
	for (char **ip = ips; *ip; ip++) {
		unsigned char bin[16];
		bool v6 = strchr(*ip, ':') != NULL, matched = false;
		if (inet_pton(v6 ? AF_INET6 : AF_INET, *ip, bin) != 1) {
			r = -EINVAL;
			goto fail;
		}
		cJSON_ArrayForEach(a, addrs)
		{
			if (!same_ip(addr_value(a), bin, v6))
				continue;
			if ((r = append_copy(out, a)) < 0)
				goto fail;
			matched = true;
			const char *t = addr_type(a);
			if (t && nt < ARRAY_SIZE(types))
				types[nt++] = t;
		}
		if (!matched) {
			r = -ENOENT;
			goto fail;
		}
	}
	cJSON_ArrayForEach(a, addrs)
	{
		const char *t = addr_type(a);
		bool seen = false;
		for (size_t k = 0; k < nt && !seen; k++)
			seen = t && strcmp(types[k], t) == 0;
		if (seen)
			continue;
		if ((r = append_copy(out, a)) < 0)
			goto fail;
	}
	cJSON_Delete(addrs);
	*ret = out;
	return 0;
fail:
	cJSON_Delete(out);
	cJSON_Delete(addrs);
	return r;
}

int ccm_addresses_keep_hostname(cJSON *addrs, const cJSON *old)
{
	const cJSON *a;
	cJSON_ArrayForEach(a, addrs)
	{
		const char *t = addr_type(a);
		if (t && strcmp(t, "Hostname") == 0)
			return 0;
	}
	cJSON_ArrayForEach(a, old)
	{
		const char *t = addr_type(a);
		if (t && strcmp(t, "Hostname") == 0 && append_copy(addrs, a) < 0)
			return -ENOMEM;
	}
	return 0;
}

bool ccm_addresses_differ(const cJSON *a, const cJSON *b)
{
	int na = cJSON_GetArraySize(a), nb = cJSON_GetArraySize(b);
	if (na != nb)
		return true;
	for (int k = 0; k < na; k++) {
		const cJSON *x = cJSON_GetArrayItem(a, k), *y = cJSON_GetArrayItem(b, k);
		const char *tx = addr_type(x), *ty = addr_type(y);
		const char *vx = addr_value(x), *vy = addr_value(y);
		if (!tx || !ty || !vx || !vy || strcmp(tx, ty) != 0 || strcmp(vx, vy) != 0)
			return true;
	}
	return false;
}

/* Labels ------------------------------------------------------------------------------- */

int ccm_zone_to_region(const char *zone, char *buf, size_t n)
{
	/* ^([a-zA-Z]+-)+\d+ : the longest such prefix (Go's leftmost-first, greedy) */
	const char *p = zone;
	size_t best = 0;

	if (!zone)
		return -EINVAL;
	for (;;) {
		const char *w = p;
		while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
			p++;
		if (p == w || *p != '-')
			break;
		p++;
		const char *d = p;
		while (*p >= '0' && *p <= '9')
			p++;
		if (p > d) {
			best = (size_t)(p - zone); /* the digits end the match */
			break;
		}
	}
	if (best == 0)
		return -EINVAL;
	if (best >= n)
		return -ENAMETOOLONG;
	memcpy(buf, zone, best);
	buf[best] = 0;
	return 0;
}

int ccm_instance_labels(const struct ec2_instance *i, const char *region, const char *zone_id,
			cJSON **ret)
{
	char reg[64];
	cJSON *o = cJSON_CreateObject();
	bool ok = o != NULL;

	if (!ok)
		return -ENOMEM;
	if (i->type && *i->type) {
		ok = ok && cJSON_AddStringToObject(o, CCM_LABEL_INSTANCE_TYPE, i->type);
		ok = ok && cJSON_AddStringToObject(o, CCM_LABEL_INSTANCE_TYPE_BETA, i->type);
	}
	if (i->zone && *i->zone) {
		ok = ok && cJSON_AddStringToObject(o, CCM_LABEL_ZONE, i->zone);
		ok = ok && cJSON_AddStringToObject(o, CCM_LABEL_ZONE_BETA, i->zone);
		if ((!region || !*region) && ccm_zone_to_region(i->zone, reg, sizeof(reg)) == 0)
			region = reg;
	}
	if (region && *region) {
		ok = ok && cJSON_AddStringToObject(o, CCM_LABEL_REGION, region);
		ok = ok && cJSON_AddStringToObject(o, CCM_LABEL_REGION_BETA, region);
	}
	if (zone_id && *zone_id)
		ok = ok && cJSON_AddStringToObject(o, CCM_LABEL_ZONE_ID, zone_id);
	if (!ok) {
		cJSON_Delete(o);
		return -ENOMEM;
	}
	*ret = o;
	return 0;
}

/* Nodes -------------------------------------------------------------------------------- */

bool ccm_node_has_taint(const cJSON *node, const char *key)
{
	const cJSON *taints = json_find(node, "spec.taints"), *t;
	cJSON_ArrayForEach(t, taints)
	{
		const char *k = json_str(t, "key");
		if (k && strcmp(k, key) == 0)
			return true;
	}
	return false;
}

const char *ccm_node_ready_status(const cJSON *node)
{
	const cJSON *conds = json_find(node, "status.conditions"), *c;
	cJSON_ArrayForEach(c, conds)
	{
		const char *t = json_str(c, "type");
		if (t && strcmp(t, "Ready") == 0) {
			const char *s = json_str(c, "status");
			return s ? s : "Unknown";
		}
	}
	return "Unknown";
}

enum ccm_lifecycle_action ccm_lifecycle_decide(bool ready, bool has_shutdown_taint, bool exists,
					       bool shutdown)
{
	if (ready)
		return has_shutdown_taint ? CCM_LC_REMOVE_SHUTDOWN : CCM_LC_NONE;
	if (!exists)
		return CCM_LC_DELETE;
	if (shutdown && !has_shutdown_taint)
		return CCM_LC_ADD_SHUTDOWN;
	return CCM_LC_NONE;
}

const char *ccm_lifecycle_action_name(enum ccm_lifecycle_action a)
{
	switch (a) {
	case CCM_LC_NONE:
		return "none";
	case CCM_LC_DELETE:
		return "delete";
	case CCM_LC_ADD_SHUTDOWN:
		return "add-shutdown-taint";
	case CCM_LC_REMOVE_SHUTDOWN:
		return "remove-shutdown-taint";
	}
	return "?";
}
