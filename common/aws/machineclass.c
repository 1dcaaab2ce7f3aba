/* The AWSMachineClass rendering (machineclass.h). */
#include "common/aws/machineclass.h"

#include <errno.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/base/json.h"

#define MC_MAX_DISK_GB 16384
#define MC_MAX_LIST 64

int aws_machineclass_name(const char *node_group, const char *cluster_uuid, const char *zone,
			  char *out, size_t n)
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	char in[512];

	if (!node_group || !*node_group || !cluster_uuid || !*cluster_uuid || !zone || !*zone)
		return -EINVAL;
	int k = snprintf(in, sizeof(in), "%s%s", cluster_uuid, zone);
	if (k < 0 || (size_t)k >= sizeof(in))
		return -ENAMETOOLONG;
	SHA256((const unsigned char *)in, (size_t)k, md);
	int w = snprintf(out, n, "%s-%02x%02x%02x%02x", node_group, md[0], md[1], md[2], md[3]);
	return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

/* An optional string field: NULL when absent; -EINVAL when it has another type. */
static int opt_str(const cJSON *obj, const char *path, const char **ret, char *err, size_t errlen)
{
	int r = json_get_str(obj, path, ret);
	if (r == -ENOENT) {
		*ret = NULL;
		return 0;
	}
	if (r < 0) {
		json_errmsg(r, path, "a string", err, errlen);
		return -EINVAL;
	}
	return 0;
}

static int opt_bool(const cJSON *obj, const char *path, bool *ret, char *err, size_t errlen)
{
	int r = json_get_bool(obj, path, ret);
	if (r == -ENOENT) {
		*ret = false;
		return 0;
	}
	if (r < 0) {
		json_errmsg(r, path, "a boolean", err, errlen);
		return -EINVAL;
	}
	return 0;
}

/* An optional integer: def when absent. */
static int opt_int(const cJSON *obj, const char *path, long long def, long long *ret, char *err,
		   size_t errlen)
{
	int r = json_get_int(obj, path, ret);
	if (r == -ENOENT) {
		*ret = def;
		return 0;
	}
	if (r < 0) {
		json_errmsg(r, path, "an integer", err, errlen);
		return -EINVAL;
	}
	return 0;
}

static bool array_has(const cJSON *a, const char *s)
{
	const cJSON *x;
	cJSON_ArrayForEach(x, a)
	{
		if (cJSON_IsString(x) && strcmp(x->valuestring, s) == 0)
			return true;
	}
	return false;
}

/* Appends the strings of the array at path of obj to out, each once. */
static int merge_list(cJSON *out, const cJSON *obj, const char *path, const char *what, char *err,
		      size_t errlen)
{
	const cJSON *a, *x;
	int r = json_get_array(obj, path, &a);
	if (r == -ENOENT)
		return 0;
	if (r < 0) {
		snprintf(err, errlen, "%s: %s is not a list", what, path);
		return -EINVAL;
	}
	cJSON_ArrayForEach(x, a)
	{
		if (!cJSON_IsString(x) || !*x->valuestring) {
			snprintf(err, errlen, "%s: %s holds a value that is not a non-empty string",
				 what, path);
			return -EINVAL;
		}
		if (array_has(out, x->valuestring))
			continue;
		if (cJSON_GetArraySize(out) >= MC_MAX_LIST) {
			snprintf(err, errlen, "%s: %s has more than %d entries", what, path,
				 MC_MAX_LIST);
			return -EINVAL;
		}
		if (!cJSON_AddItemToArray(out, cJSON_CreateString(x->valuestring)))
			return -ENOMEM;
	}
	return 0;
}

/* Copies the string values of the object at path of obj into tags (a later key wins). */
static int merge_tags(cJSON *tags, const cJSON *obj, const char *path, const char *what, char *err,
		      size_t errlen)
{
	const cJSON *m, *x;
	int r = json_get_object(obj, path, &m);
	if (r == -ENOENT)
		return 0;
	if (r < 0) {
		snprintf(err, errlen, "%s: %s is not a map", what, path);
		return -EINVAL;
	}
	cJSON_ArrayForEach(x, m)
	{
		if (!cJSON_IsString(x)) {
			snprintf(err, errlen, "%s: %s.%s is not a string", what, path, x->string);
			return -EINVAL;
		}
		cJSON *v = cJSON_CreateString(x->valuestring);
		if (!v || json_put(tags, x->string, v) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int cluster_tags(cJSON *tags, const char *uuid)
{
	char key[256];
	static const char *const fmt[] = { "kubernetes.io/cluster/%s", "kubernetes.io/role/%s" };

	for (size_t i = 0; i < 2; i++) {
		int w = snprintf(key, sizeof(key), fmt[i], uuid);
		if (w < 0 || (size_t)w >= sizeof(key))
			return -ENAMETOOLONG;
		if (!cJSON_AddStringToObject(tags, key, "1"))
			return -ENOMEM;
	}
	return 0;
}

/* The root disk: type, size and iops checked. */
static cJSON *root_disk(const cJSON *spec, char *err, size_t errlen, int *rr)
{
	static const char *const types[] = { "gp3", "gp2", "io2", "io1", "st1", "sc1", "standard" };
	const char *type;
	long long size, iops;
	bool known = false;

	if ((*rr = opt_str(spec, "diskType", &type, err, errlen)) < 0 ||
	    (*rr = opt_int(spec, "diskSizeGb", AWS_MACHINECLASS_DEFAULT_DISK_GB, &size, err,
			   errlen)) < 0 ||
	    (*rr = opt_int(spec, "iops", 0, &iops, err, errlen)) < 0)
		return NULL;
	if (!type)
		type = AWS_MACHINECLASS_DEFAULT_DISK_TYPE;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		known = known || strcmp(types[i], type) == 0;
	*rr = -EINVAL;
	if (!known) {
		snprintf(err, errlen, "spec.diskType: unsupported value \"%.32s\"", type);
		return NULL;
	}
	if (size < 1 || size > MC_MAX_DISK_GB) {
		snprintf(err, errlen, "spec.diskSizeGb: %lld is out of range 1..%d", size,
			 MC_MAX_DISK_GB);
		return NULL;
	}
	bool provisioned = strcmp(type, "io1") == 0 || strcmp(type, "io2") == 0;
	if (provisioned && iops <= 0) {
		snprintf(err, errlen, "spec.iops: required for diskType %s", type);
		return NULL;
	}
	if (iops < 0) {
		snprintf(err, errlen, "spec.iops: %lld is negative", iops);
		return NULL;
	}
	*rr = -ENOMEM;
	cJSON *bd = cJSON_CreateObject(), *ebs = cJSON_CreateObject();
	if (!bd || !ebs || !cJSON_AddStringToObject(bd, "deviceName", AWS_MACHINECLASS_ROOT_DEVICE) ||
	    !cJSON_AddItemToObject(bd, "ebs", ebs)) {
		cJSON_Delete(ebs);
		cJSON_Delete(bd);
		return NULL;
	}
	if (!cJSON_AddNumberToObject(ebs, "volumeSize", (double)size) ||
	    !cJSON_AddStringToObject(ebs, "volumeType", type) ||
	    !cJSON_AddBoolToObject(ebs, "deleteOnTermination", true) ||
	    (provisioned && !cJSON_AddNumberToObject(ebs, "iops", (double)iops))) {
		cJSON_Delete(bd);
		return NULL;
	}
	*rr = 0;
	return bd;
}

static int render_spec(const struct aws_machineclass_in *in, cJSON *spec, char *err, size_t errlen)
{
	const cJSON *cl = in->class_spec, *cloud = in->cloud;
	const char *type, *ami, *region, *subnet, *profile, *key;
	bool spot, public_ip;
	int r;

	if ((r = opt_str(cl, "instanceType", &type, err, errlen)) < 0 ||
	    (r = opt_str(cl, "ami", &ami, err, errlen)) < 0 ||
	    (r = opt_bool(cl, "spot", &spot, err, errlen)) < 0)
		return r;
	if (!type || !*type) {
		snprintf(err, errlen, "spec.instanceType: required value");
		return -EINVAL;
	}
	if (!ami || !*ami) {
		if ((r = opt_str(cloud, "instances.ami", &ami, err, errlen)) < 0)
			return r;
		if (!ami || !*ami) {
			snprintf(err, errlen,
				 "spec.ami: required value (the cloud provider has no default AMI)");
			return -EINVAL;
		}
	}
	if ((r = opt_str(cloud, "region", &region, err, errlen)) < 0 ||
	    (r = opt_str(cloud, "instances.iamProfileName", &profile, err, errlen)) < 0 ||
	    (r = opt_str(cloud, "keyName", &key, err, errlen)) < 0 ||
	    (r = opt_bool(cloud, "instances.associatePublicIPAddress", &public_ip, err, errlen)) < 0)
		return r;
	if (!region || !*region) {
		snprintf(err, errlen, "cloud provider: region is missing");
		return -EINVAL;
	}
	const cJSON *map;
	if (json_get_object(cloud, "internal.zoneToSubnetIdMap", &map) < 0 ||
	    !(subnet = json_str_key(map, in->zone)) || !*subnet) {
		snprintf(err, errlen, "zone \"%.64s\" has no subnet in internal.zoneToSubnetIdMap",
			 in->zone);
		return -EINVAL;
	}

	cJSON *sgs = cJSON_CreateArray(), *nic = cJSON_CreateObject(), *nics = cJSON_CreateArray();
	cJSON *tags = cJSON_CreateObject(), *bds = cJSON_CreateArray();
	if (!sgs || !nic || !nics || !tags || !bds || !cJSON_AddItemToArray(nics, nic)) {
		r = -ENOMEM;
		cJSON_Delete(nic);
		goto fail;
	}
	nic = NULL;
	if ((r = merge_list(sgs, cloud, "instances.additionalSecurityGroups", "cloud provider", err,
			    errlen)) < 0 ||
	    (r = merge_list(sgs, cl, "additionalSecurityGroups", "spec", err, errlen)) < 0)
		goto fail;
	if ((r = cluster_tags(tags, in->cluster_uuid)) < 0 ||
	    (r = merge_tags(tags, cloud, "tags", "cloud provider", err, errlen)) < 0 ||
	    (r = merge_tags(tags, cl, "additionalTags", "spec", err, errlen)) < 0)
		goto fail;
	cJSON *bd = root_disk(cl, err, errlen, &r);
	if (!bd || !cJSON_AddItemToArray(bds, bd))
		goto fail;

	cJSON *n0 = cJSON_GetArrayItem(nics, 0);
	r = -ENOMEM;
	if (!cJSON_AddStringToObject(n0, "subnetID", subnet) ||
	    !cJSON_AddItemToObject(n0, "securityGroupIDs", sgs))
		goto fail;
	sgs = NULL;
	if (!cJSON_AddBoolToObject(n0, "associatePublicIPAddress", public_ip))
		goto fail;
	if (!cJSON_AddStringToObject(spec, "region", region) ||
	    !cJSON_AddStringToObject(spec, "ami", ami) ||
	    !cJSON_AddStringToObject(spec, "machineType", type))
		goto fail;
	if (profile && *profile) {
		cJSON *iam = cJSON_AddObjectToObject(spec, "iam");
		if (!iam || !cJSON_AddStringToObject(iam, "name", profile))
			goto fail;
	}
	if (key && *key && !cJSON_AddStringToObject(spec, "keyName", key))
		goto fail;
	if (!cJSON_AddItemToObject(spec, "networkInterfaces", nics))
		goto fail;
	nics = NULL;
	if (!cJSON_AddBoolToObject(spec, "sourceDestCheck", false) ||
	    (spot && !cJSON_AddStringToObject(spec, "spotPrice", "")) ||
	    !cJSON_AddBoolToObject(spec, "useMachineNameAsNodeName", true) ||
	    !cJSON_AddItemToObject(spec, "tags", tags))
		goto fail;
	tags = NULL;
	if (!cJSON_AddItemToObject(spec, "blockDevices", bds))
		goto fail;
	bds = NULL;
	cJSON *ref = cJSON_AddObjectToObject(spec, "secretRef");
	if (!ref || !cJSON_AddStringToObject(ref, "namespace", AWS_MACHINECLASS_NAMESPACE) ||
	    !cJSON_AddStringToObject(ref, "name",
				     in->secret_name ? in->secret_name : in->node_group))
		goto fail;
	return 0;
fail:
	cJSON_Delete(sgs);
	cJSON_Delete(nics);
	cJSON_Delete(tags);
	cJSON_Delete(bds);
	return r < 0 ? r : -ENOMEM;
}

int aws_machineclass_render(const struct aws_machineclass_in *in, cJSON **ret, char *err,
			    size_t errlen)
{
	char name[256];
	int r;

	if (errlen)
		*err = '\0';
	if (!in->cloud || !cJSON_IsObject(in->cloud) || !in->class_spec ||
	    !cJSON_IsObject(in->class_spec)) {
		snprintf(err, errlen, "the cloud provider data and the class spec must be objects");
		return -EINVAL;
	}
	if ((r = aws_machineclass_name(in->node_group, in->cluster_uuid, in->zone, name,
				       sizeof(name))) < 0) {
		snprintf(err, errlen, "%s", r == -EINVAL ? "node group, cluster UUID and zone must be set"
							   : "the machine class name is too long");
		return r;
	}
	cJSON *mc = cJSON_CreateObject(), *md, *spec;
	if (!mc || !cJSON_AddStringToObject(mc, "apiVersion", "machine.sapcloud.io/v1alpha1") ||
	    !cJSON_AddStringToObject(mc, "kind", "AWSMachineClass") ||
	    !(md = cJSON_AddObjectToObject(mc, "metadata")) ||
	    !cJSON_AddStringToObject(md, "name", name) ||
	    !cJSON_AddStringToObject(md, "namespace", AWS_MACHINECLASS_NAMESPACE) ||
	    !(spec = cJSON_AddObjectToObject(mc, "spec"))) {
		cJSON_Delete(mc);
		return -ENOMEM;
	}
	if ((r = render_spec(in, spec, err, errlen)) < 0) {
		cJSON_Delete(mc);
		return r;
	}
	*ret = mc;
	return 0;
}
