/* The discoverer's objects as pure functions of what it found (disc_internal.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/json.h"
#include "modules/discoverer/disc_internal.h"

char *disc_conditions_json(const struct disc_condition *c, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	char msg[128];

	for (size_t i = 0; a && i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		snprintf(msg, sizeof(msg), "%.63s is not allowed", c[i].api);
		if (!o || !cJSON_AddItemToArray(a, o) ||
		    !cJSON_AddStringToObject(o, "name", DISC_COND_NAME) ||
		    !cJSON_AddStringToObject(o, "message", msg) ||
		    !cJSON_AddBoolToObject(o, "ok", false)) {
			cJSON_Delete(a);
			return NULL;
		}
	}
	char *s = a ? cJSON_PrintUnformatted(a) : NULL;
	cJSON_Delete(a);
	return s;
}

static int itype_cmp(const void *a, const void *b)
{
	return strcmp(((const struct disc_itype *)a)->name, ((const struct disc_itype *)b)->name);
}

cJSON *disc_catalog(struct disc_itype *t, size_t n)
{
	char num[32];
	cJSON *cat = cJSON_CreateObject(), *md, *list;

	if (n > 1)
		qsort(t, n, sizeof(*t), itype_cmp);
	if (!cat || !cJSON_AddStringToObject(cat, "apiVersion", "deckhouse.io/v1alpha1") ||
	    !cJSON_AddStringToObject(cat, "kind", "InstanceTypesCatalog") ||
	    !(md = cJSON_AddObjectToObject(cat, "metadata")) ||
	    !cJSON_AddStringToObject(md, "name", DISC_CATALOG_NAME) ||
	    !(list = cJSON_AddArrayToObject(cat, "instanceTypes")))
		goto fail;
	for (size_t i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(list, o) ||
		    !cJSON_AddStringToObject(o, "name", t[i].name))
			goto fail;
		snprintf(num, sizeof(num), "%lld", t[i].vcpus);
		if (!cJSON_AddStringToObject(o, "cpu", num))
			goto fail;
		snprintf(num, sizeof(num), "%lldMi", t[i].mem_mib);
		if (!cJSON_AddStringToObject(o, "memory", num) ||
		    !cJSON_AddStringToObject(o, "rootDisk", "0"))
			goto fail;
	}
	return cat;
fail:
	cJSON_Delete(cat);
	return NULL;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The subnet of each zone: the layout's role first, then any cluster subnet; lowest ID wins. */
static int pick_subnets(const struct disc_cfg *cfg, const struct disc_subnet *s, size_t n,
			const struct disc_subnet **pick, size_t *n_pick, char *err, size_t errlen)
{
	int want = cfg->layout && strcmp(cfg->layout, "WithoutNAT") == 0 ? 1 : 2;

	*n_pick = 0;
	for (int pass = 0; pass < 2 && *n_pick == 0; pass++)
		for (size_t i = 0; i < n; i++) {
			if (pass == 0 && s[i].role != want)
				continue;
			size_t k = 0;
			while (k < *n_pick && strcmp(pick[k]->zone, s[i].zone) != 0)
				k++;
			if (k == *n_pick) {
				if (*n_pick == DISC_MAX_ZONES) {
					snprintf(err, errlen, "more than %d zones", DISC_MAX_ZONES);
					return -E2BIG;
				}
				pick[(*n_pick)++] = &s[i];
			} else if (strcmp(s[i].id, pick[k]->id) < 0) {
				pick[k] = &s[i];
			}
		}
	if (*n_pick == 0) {
		snprintf(err, errlen, "no subnet is tagged kubernetes.io/cluster/%.64s",
			 cfg->cluster_uuid);
		return -ENOENT;
	}
	return 0;
}

static int add_groups(cJSON *inst, const struct disc_sgs *sg)
{
	cJSON *a = cJSON_AddArrayToObject(inst, "additionalSecurityGroups");
	const char *ids[] = { sg->node, sg->ssh };
	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < 2; i++)
		if (*ids[i] && !cJSON_AddItemToArray(a, cJSON_CreateString(ids[i])))
			return -ENOMEM;
	return 0;
}

int disc_data(const struct disc_cfg *cfg, const struct disc_subnet *s, size_t n,
	      const struct disc_sgs *sg, cJSON **ret, char *err, size_t errlen)
{
	const struct disc_subnet *pick[DISC_MAX_ZONES];
	const char *zones[DISC_MAX_ZONES];
	size_t np;
	char profile[300];
	int r;

	for (size_t i = 1; i < n; i++)
		if (strcmp(s[i].vpc, s[0].vpc) != 0) {
			snprintf(err, errlen, "the cluster's subnets are in several VPCs (%s, %s)",
				 s[0].vpc, s[i].vpc);
			return -EINVAL;
		}
	if ((r = pick_subnets(cfg, s, n, pick, &np, err, errlen)) < 0)
		return r;
	for (size_t i = 0; i < np; i++)
		zones[i] = pick[i]->zone;
	qsort(zones, np, sizeof(zones[0]), str_cmp);
	snprintf(profile, sizeof(profile), "%s-node", cfg->prefix);

	cJSON *d = cJSON_CreateObject(), *inst, *za, *map;
	r = -ENOMEM;
	if (!d || !cJSON_AddStringToObject(d, "apiVersion", "deckhouse.io/v1") ||
	    !cJSON_AddStringToObject(d, "kind", "AWSCloudDiscoveryData") ||
	    !cJSON_AddStringToObject(d, "keyName", cfg->prefix) ||
	    !(inst = cJSON_AddObjectToObject(d, "instances")))
		goto fail;
	if ((cfg->ami && *cfg->ami && !cJSON_AddStringToObject(inst, "ami", cfg->ami)) ||
	    add_groups(inst, sg) < 0 ||
	    !cJSON_AddBoolToObject(inst, "associatePublicIPAddress",
				   strcmp(cfg->layout, "WithoutNAT") == 0) ||
	    !cJSON_AddStringToObject(inst, "iamProfileName", profile))
		goto fail;
	if ((*sg->lb && !cJSON_AddStringToObject(d, "loadBalancerSecurityGroup", sg->lb)) ||
	    !(za = cJSON_AddArrayToObject(d, "zones")) ||
	    !(map = cJSON_AddObjectToObject(d, "zoneToSubnetIdMap")))
		goto fail;
	for (size_t i = 0; i < np; i++) {
		if (!cJSON_AddItemToArray(za, cJSON_CreateString(zones[i])))
			goto fail;
		for (size_t k = 0; k < np; k++)
			if (pick[k]->zone == zones[i] && !cJSON_AddStringToObject(map, zones[i], pick[k]->id))
				goto fail;
	}
	*ret = d;
	return 0;
fail:
	snprintf(err, errlen, "out of memory");
	cJSON_Delete(d);
	return r;
}

static int put_dup(cJSON *dst, const char *key, const cJSON *src)
{
	if (!src)
		return 0;
	cJSON *c = cJSON_Duplicate(src, true);
	return c && cJSON_AddItemToObject(dst, key, c) ? 0 : -ENOMEM;
}

static int put_json(cJSON *data, const char *key, const cJSON *v)
{
	char *s = cJSON_PrintUnformatted(v);
	bool ok = s && cJSON_AddStringToObject(data, key, s);
	free(s);
	return ok ? 0 : -ENOMEM;
}

cJSON *disc_node_manager_data(const struct disc_cfg *cfg, const cJSON *data)
{
	cJSON *out = cJSON_CreateObject(), *aws = cJSON_CreateObject(), *internal;
	const cJSON *map = cJSON_GetObjectItemCaseSensitive(data, "zoneToSubnetIdMap");

	if (!out || !aws)
		goto fail;
	if ((cfg->access_key_id &&
	     !cJSON_AddStringToObject(aws, "providerAccessKeyId", cfg->access_key_id)) ||
	    (cfg->secret_key &&
	     !cJSON_AddStringToObject(aws, "providerSecretAccessKey", cfg->secret_key)) ||
	    !cJSON_AddStringToObject(aws, "region", cfg->region ? cfg->region : "") ||
	    put_dup(aws, "instances", cJSON_GetObjectItemCaseSensitive(data, "instances")) < 0 ||
	    !(internal = cJSON_AddObjectToObject(aws, "internal")) ||
	    put_dup(internal, "zoneToSubnetIdMap", map) < 0 ||
	    put_dup(aws, "loadBalancerSecurityGroup",
		    cJSON_GetObjectItemCaseSensitive(data, "loadBalancerSecurityGroup")) < 0 ||
	    put_dup(aws, "keyName", cJSON_GetObjectItemCaseSensitive(data, "keyName")) < 0)
		goto fail;
	cJSON *tags = cfg->tags ? cJSON_Duplicate(cfg->tags, true) : cJSON_CreateObject();
	if (!tags || !cJSON_AddItemToObject(aws, "tags", tags)) {
		cJSON_Delete(tags);
		goto fail;
	}
	if (!cJSON_AddStringToObject(out, "type", "aws") ||
	    put_json(out, "zones", cJSON_GetObjectItemCaseSensitive(data, "zones")) < 0 ||
	    !cJSON_AddStringToObject(out, "instanceClassKind", "AWSInstanceClass") ||
	    !cJSON_AddStringToObject(out, "machineClassKind", "AWSMachineClass") ||
	    put_json(out, "aws", aws) < 0)
		goto fail;
	cJSON_Delete(aws);
	return out;
fail:
	cJSON_Delete(aws);
	cJSON_Delete(out);
	return NULL;
}

int disc_orphans(const struct ec2_volume *v, size_t n, char **handles, size_t n_h,
		 struct disc_orphan **ret, size_t *ret_n)
{
	struct disc_orphan *o = calloc(n ? n : 1, sizeof(*o));
	size_t k = 0;

	if (!o)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *id = v[i].id;
		if (strcmp(v[i].state, "creating") == 0 || strcmp(v[i].state, "deleting") == 0 ||
		    strcmp(v[i].state, "deleted") == 0)
			continue;
		if (bsearch(&id, handles, n_h, sizeof(*handles), str_cmp))
			continue;
		const char *name = ec2_tags_get(v[i].tags, v[i].n_tags, "CSIVolumeName");
		snprintf(o[k].id, sizeof(o[k].id), "%s", id);
		snprintf(o[k].name, sizeof(o[k].name), "%s", name ? name : "");
		k++;
	}
	*ret = o;
	*ret_n = k;
	return 0;
}
