/* The pure parts of the AWSMachine reconciler: tags, subnet, groups, RunInstances, status. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/tags.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "modules/capa/capa_byo.h"
#include "modules/capa/capa_machine.h"

const char *capa_tags_get(const struct capa_tags *t, const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->key[i], key) == 0)
			return t->value[i];
	return NULL;
}

static int add_additional(struct capa_tags *t, const cJSON *obj, const char *where, char *err,
			  size_t errlen)
{
	if (!obj)
		return 0;
	if (!cJSON_IsObject(obj)) {
		str_printf(err, errlen, "%s.additionalTags is not an object", where);
		return -EINVAL;
	}
	if (cJSON_GetArraySize(obj) > CAPA_MAX_ADDITIONAL_TAGS) {
		str_printf(err, errlen, "%s.additionalTags has more than %d tags", where,
			   CAPA_MAX_ADDITIONAL_TAGS);
		return -EINVAL;
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, obj)
	{
		char why[160];
		if (!cJSON_IsString(it)) {
			str_printf(err, errlen, "%s.additionalTags[\"%.60s\"] is not a string", where,
				   it->string);
			return -EINVAL;
		}
		if (str_has_prefix(it->string, "aws:")) {
			str_printf(err, errlen, "%s.additionalTags[\"%.60s\"]: the aws: prefix is reserved",
				   where, it->string);
			return -EINVAL;
		}
		if (aws_tag_key_check(it->string, why, sizeof(why)) < 0) {
			str_printf(err, errlen, "%s.additionalTags: %s", where, why);
			return -EINVAL;
		}
		int r = capa_tags_set(t, it->string, it->valuestring);
		if (r < 0)
			return r;
	}
	return 0;
}

int capa_machine_tags(const struct capa_machine_ctx *m, bool ec2, struct capa_tags *ret, char *err,
		      size_t errlen)
{
	struct capa_tags t = { 0 };
	char key[300], val[300];
	int r = add_additional(&t, json_find(m->awscluster, "spec.additionalTags"), "AWSCluster spec",
			       err, errlen);
	if (r >= 0)
		r = add_additional(&t, json_find(m->spec, "additionalTags"), "spec", err, errlen);
	if (r >= 0 && str_printf(key, sizeof(key), "%s%s", CAPA_TAG_K8S_CLUSTER_PREFIX, m->cluster) < 0)
		r = -ENAMETOOLONG;
	if (r >= 0)
		r = capa_tags_set(&t, key, "owned");
	if (r >= 0 && ec2) {
		if (str_printf(val, sizeof(val), "%s/%s", m->namespace, m->machine) < 0)
			r = -ENAMETOOLONG;
		else
			r = capa_tags_set(&t, "MachineName", val);
	}
	if (r >= 0 && str_printf(key, sizeof(key), "%s%s", CAPA_TAG_CLUSTER_PREFIX, m->cluster) < 0)
		r = -ENAMETOOLONG;
	if (r >= 0)
		r = capa_tags_set(&t, key, "owned");
	if (r >= 0)
		r = capa_tags_set(&t, CAPA_TAG_ROLE, m->role);
	if (r >= 0)
		r = capa_tags_set(&t, "Name", m->awsmachine);
	if (r < 0) {
		if (r != -EINVAL)
			str_printf(err, errlen, "building the tags: %s", strerror(-r));
		capa_tags_release(&t);
		return r;
	}
	*ret = t;
	return 0;
}

static const char *subnet_id(const cJSON *s)
{
	const char *id = json_str(s, "resourceID");
	return id && *id ? id : json_str(s, "id");
}

int capa_pick_subnet(const struct capa_machine_ctx *m, const char *fd, const char **ret_id,
		     char *err, size_t errlen)
{
	const char *id = json_str(m->spec, "subnet.id");
	if (id && *id) {
		*ret_id = id;
		return 0;
	}
	if (json_find(m->spec, "subnet.filters")) {
		str_printf(err, errlen, "spec.subnet.filters is not supported yet: give spec.subnet.id");
		return -EOPNOTSUPP;
	}
	/* a WithoutNAT layout (capa_preset.c) has public subnets only */
	bool want_public = cJSON_IsTrue(json_find(m->spec, "publicIP")) ||
			   capa_preset_public_machines(m->awscluster);
	const cJSON *subnets = json_find(m->awscluster, "spec.network.subnets"), *s;
	const char *priv_fd = NULL, *pub_fd = NULL, *pub = NULL, *priv = NULL;
	cJSON_ArrayForEach(s, subnets)
	{
		const char *sid = subnet_id(s), *az = json_str(s, "availabilityZone");
		if (!sid || !*sid)
			continue;
		bool is_pub = cJSON_IsTrue(json_find(s, "isPublic"));
		bool in_fd = fd && *fd && az && strcmp(az, fd) == 0;
		if (is_pub) {
			if (in_fd && !pub_fd)
				pub_fd = sid;
			if (!pub)
				pub = sid;
		} else {
			if (in_fd && !priv_fd)
				priv_fd = sid;
			if (!priv)
				priv = sid;
		}
	}
	/* CAPA: with a failure domain, only that zone's subnets (public with publicIP, private
	 * otherwise); without one, the first public or private subnet */
	bool has_fd = fd && *fd;
	const char *pick = has_fd ? (want_public ? pub_fd : priv_fd) : (want_public ? pub : priv);
	if (!pick) {
		str_printf(err, errlen, "no %s subnet%s%s in the AWSCluster's spec.network.subnets",
			   want_public ? "public" : "private", fd && *fd ? " in zone " : "",
			   fd && *fd ? fd : "");
		return -ENOENT;
	}
	*ret_id = pick;
	return 0;
}

static const char *cluster_sg(const cJSON *awscluster, const char *role)
{
	const cJSON *o = json_find(awscluster, "spec.network.securityGroupOverrides");
	const char *id = o ? json_str_key(o, role) : NULL;
	if (id && *id)
		return id;
	const cJSON *sgs = json_find(awscluster, "status.networkStatus.securityGroups");
	const cJSON *sg = sgs ? cJSON_GetObjectItemCaseSensitive(sgs, role) : NULL;
	id = sg ? json_str(sg, "id") : NULL;
	return id && *id ? id : NULL;
}

int capa_machine_sgs(const struct capa_machine_ctx *m, const char *ids[CAPA_MAX_SGS],
		     size_t *ret_n, char *err, size_t errlen)
{
	static const char *const node_roles[] = { "node", "lb", NULL };
	static const char *const cp_roles[] = { "node", "lb", "controlplane", NULL };
	const char *const *roles = strcmp(m->role, "control-plane") == 0 ? cp_roles : node_roles;
	size_t n = 0;
	for (int i = 0; roles[i]; i++) {
		const char *id = cluster_sg(m->awscluster, roles[i]);
		if (!id) {
			str_printf(err, errlen, "the AWSCluster has no \"%s\" security group yet", roles[i]);
			return -ENOENT;
		}
		ids[n++] = id;
	}
	const cJSON *extra = json_find(m->spec, "additionalSecurityGroups"), *e;
	cJSON_ArrayForEach(e, extra)
	{
		const char *id = json_str(e, "id");
		if (!id || !*id) {
			str_printf(err, errlen, "spec.additionalSecurityGroups: only entries with an id are "
						"supported (filters are not built)");
			return -EOPNOTSUPP;
		}
		bool dup = false;
		for (size_t k = 0; k < n; k++)
			dup |= strcmp(ids[k], id) == 0;
		if (dup)
			continue;
		if (n >= CAPA_MAX_SGS) {
			str_printf(err, errlen, "more than %d security groups", CAPA_MAX_SGS);
			return -E2BIG;
		}
		ids[n++] = id;
	}
	*ret_n = n;
	return 0;
}

const char *capa_machine_key_name(const struct capa_machine_ctx *m)
{
	const cJSON *k = json_find(m->spec, "sshKeyName");
	if (!cJSON_IsString(k))
		k = json_find(m->awscluster, "spec.sshKeyName");
	if (!cJSON_IsString(k))
		return "default";
	return *k->valuestring ? k->valuestring : NULL;
}

int capa_client_token(const char *uid, char *out, size_t n)
{
	char hex[40];
	size_t j = 0;
	if (!uid || !*uid)
		return -EINVAL;
	for (const char *p = uid; *p; p++) {
		if (*p == '-')
			continue;
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')) ||
		    j >= 32)
			return -EINVAL;
		hex[j++] = *p;
	}
	hex[j] = 0;
	if (j != 32)
		return -EINVAL;
	return str_printf(out, n, "capa-%s", hex);
}

/* Root volume: CAPA's rules (size >= 8, DeleteOnTermination). */
static int add_root_volume(struct aws_query *q, const cJSON *rv, const char *root_device, char *err,
			   size_t errlen)
{
	long long size = 0, iops = 0, throughput = 0;
	if (json_get_int(rv, "size", &size) < 0 || size < 8) {
		str_printf(err, errlen, "spec.rootVolume.size must be at least 8 (GiB)");
		return -EINVAL;
	}
	if (!root_device || !*root_device) {
		str_printf(err, errlen, "the AMI's root device name is unknown");
		return -EINVAL;
	}
	const char *type = json_str(rv, "type"), *kms = json_str(rv, "encryptionKey");
	int r = aws_query_add(q, "BlockDeviceMapping.1.DeviceName", root_device);
	if (r >= 0)
		r = aws_query_add_int(q, "BlockDeviceMapping.1.Ebs.VolumeSize", size);
	if (r >= 0)
		r = aws_query_add_bool(q, "BlockDeviceMapping.1.Ebs.DeleteOnTermination", true);
	if (r >= 0 && type && *type)
		r = aws_query_add(q, "BlockDeviceMapping.1.Ebs.VolumeType", type);
	if (r >= 0 && json_get_int(rv, "iops", &iops) == 0 && iops > 0)
		r = aws_query_add_int(q, "BlockDeviceMapping.1.Ebs.Iops", iops);
	if (r >= 0 && json_get_int(rv, "throughput", &throughput) == 0 && throughput > 0)
		r = aws_query_add_int(q, "BlockDeviceMapping.1.Ebs.Throughput", throughput);
	if (r >= 0 && cJSON_IsBool(json_find(rv, "encrypted")))
		r = aws_query_add_bool(q, "BlockDeviceMapping.1.Ebs.Encrypted",
				       cJSON_IsTrue(json_find(rv, "encrypted")));
	if (r >= 0 && kms && *kms)
		r = aws_query_add(q, "BlockDeviceMapping.1.Ebs.KmsKeyId", kms);
	return r;
}

/* IMDS: always sent. Defaults: endpoint enabled, tokens required (IMDSv2; CAPA's own default
 * is optional), hop limit 1, instance tags disabled. */
static int add_metadata_options(struct aws_query *q, const cJSON *o, char *err, size_t errlen)
{
	const char *ep = json_str(o, "httpEndpoint"), *tok = json_str(o, "httpTokens");
	const char *tags = json_str(o, "instanceMetadataTags"), *v6 = json_str(o, "httpProtocolIpv6");
	long long hops = 1;
	if (json_find(o, "httpPutResponseHopLimit") &&
	    (json_get_int(o, "httpPutResponseHopLimit", &hops) < 0 || hops < 1 || hops > 64)) {
		str_printf(err, errlen, "spec.instanceMetadataOptions.httpPutResponseHopLimit must be 1 to 64");
		return -EINVAL;
	}
	struct {
		const char *key, *val, *def, *a, *b;
	} f[] = {
		{ "MetadataOptions.HttpEndpoint", ep, "enabled", "enabled", "disabled" },
		{ "MetadataOptions.HttpTokens", tok, "required", "optional", "required" },
		{ "MetadataOptions.InstanceMetadataTags", tags, "disabled", "enabled", "disabled" },
		{ "MetadataOptions.HttpProtocolIpv6", v6, "disabled", "enabled", "disabled" },
	};
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		const char *v = f[i].val && *f[i].val ? f[i].val : f[i].def;
		if (strcmp(v, f[i].a) != 0 && strcmp(v, f[i].b) != 0) {
			str_printf(err, errlen, "%s must be %s or %s, not \"%.40s\"", f[i].key, f[i].a,
				   f[i].b, v);
			return -EINVAL;
		}
		int r = aws_query_add(q, f[i].key, v);
		if (r < 0)
			return r;
	}
	return aws_query_add_int(q, "MetadataOptions.HttpPutResponseHopLimit", hops);
}

int capa_run_instances_query(const struct capa_machine_ctx *m, const struct capa_run_args *a,
			     struct aws_query *q, char *err, size_t errlen)
{
	const char *type = json_str(m->spec, "instanceType"), *ami = json_str(m->spec, "ami.id");
	const char *profile = json_str(m->spec, "iamInstanceProfile");
	char token[CAPA_CLIENT_TOKEN_MAX + 1];
	struct capa_tags tags = { 0 };
	int r;

	if (!type || !*type) {
		str_printf(err, errlen, "spec.instanceType is required");
		return -EINVAL;
	}
	if (!ami || !*ami)
		ami = a->ami;
	if (!ami || !*ami) {
		str_printf(err, errlen, "spec.ami.id is required when no AMI was looked up");
		return -EINVAL;
	}
	if (capa_client_token(m->uid, token, sizeof(token)) < 0) {
		str_printf(err, errlen, "the AWSMachine's UID \"%.40s\" is not a UUID", m->uid ? m->uid : "");
		return -EINVAL;
	}
	if (!a->subnet_id || !*a->subnet_id || a->n_sgs == 0) {
		str_printf(err, errlen, "no subnet or no security group");
		return -EINVAL;
	}
	if ((r = capa_machine_tags(m, true, &tags, err, errlen)) < 0)
		return r;

	r = aws_query_add(q, "ImageId", ami);
	if (r >= 0)
		r = aws_query_add(q, "InstanceType", type);
	if (r >= 0)
		r = aws_query_add(q, "MinCount", "1");
	if (r >= 0)
		r = aws_query_add(q, "MaxCount", "1");
	if (r >= 0)
		r = aws_query_add(q, "ClientToken", token);
	if (r >= 0)
		r = aws_query_add(q, "NetworkInterface.1.DeviceIndex", "0");
	if (r >= 0)
		r = aws_query_add(q, "NetworkInterface.1.SubnetId", a->subnet_id);
	if (r >= 0)
		r = aws_query_add_list(q, "NetworkInterface.1.SecurityGroupId", a->sg_ids, a->n_sgs);
	if (r >= 0 && cJSON_IsBool(json_find(m->spec, "publicIP")))
		r = aws_query_add_bool(q, "NetworkInterface.1.AssociatePublicIpAddress",
				       cJSON_IsTrue(json_find(m->spec, "publicIP")));
	if (r >= 0 && profile && *profile)
		r = aws_query_add(q, "IamInstanceProfile.Name", profile);
	const char *key = capa_machine_key_name(m);
	if (r >= 0 && key)
		r = aws_query_add(q, "KeyName", key);
	if (r >= 0 && a->user_data_b64 && *a->user_data_b64)
		r = aws_query_add(q, "UserData", a->user_data_b64);
	const cJSON *rv = json_find(m->spec, "rootVolume");
	if (r >= 0 && rv)
		r = add_root_volume(q, rv, a->root_device, err, errlen);
	const cJSON *spot = json_find(m->spec, "spotMarketOptions");
	if (r >= 0 && spot) {
		const char *max = json_str(spot, "maxPrice");
		r = aws_query_add(q, "InstanceMarketOptions.MarketType", "spot");
		if (r >= 0)
			r = aws_query_add(q, "InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time");
		if (r >= 0)
			r = aws_query_add(q, "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior",
					  "terminate");
		if (r >= 0 && max && *max)
			r = aws_query_add(q, "InstanceMarketOptions.SpotOptions.MaxPrice", max);
	}
	if (r >= 0)
		r = add_metadata_options(q, json_find(m->spec, "instanceMetadataOptions"), err, errlen);
	if (r >= 0)
		r = capa_query_tagspec(q, 1, "instance", &tags);
	if (r >= 0)
		r = capa_query_tagspec(q, 2, "volume", &tags);
	if (r >= 0)
		r = capa_query_tagspec(q, 3, "network-interface", &tags);
	capa_tags_release(&tags);
	if (r < 0 && r != -EINVAL)
		str_printf(err, errlen, "building RunInstances: %s", strerror(-r));
	return r;
}

int capa_find_instance_query(const struct capa_machine_ctx *m, struct aws_query *q)
{
	char key[300];
	if (str_printf(key, sizeof(key), "tag:%s%s", CAPA_TAG_CLUSTER_PREFIX, m->cluster) < 0)
		return -ENAMETOOLONG;
	int r = aws_query_add_filter(q, key, (const char *[]){ "owned" }, 1);
	if (r >= 0)
		r = aws_query_add_filter(q, "tag:Name", (const char *[]){ m->awsmachine }, 1);
	if (r >= 0)
		r = aws_query_add_filter(q, "instance-state-name",
					 (const char *[]){ "pending", "running", "stopping", "stopped",
							   "shutting-down" },
					 5);
	return r;
}

int capa_provider_id(const char *zone, const char *id, char *out, size_t n)
{
	if (!zone || !*zone || !id || !*id)
		return -EINVAL;
	return str_printf(out, n, "aws:///%s/%s", zone, id);
}

int capa_provider_id_parse(const char *pid, char *out, size_t n)
{
	if (!pid || !str_has_prefix(pid, "aws://"))
		return -EINVAL;
	const char *slash = strrchr(pid, '/');
	if (!slash || !slash[1])
		return -EINVAL;
	return str_copy(out, n, slash + 1);
}

void capa_instance_status(const char *state, struct capa_instance_status *ret)
{
	*ret = (struct capa_instance_status){ .cond_status = "False", .cond_severity = "Warning" };
	if (!state) {
		ret->cond_status = "Unknown";
		ret->cond_reason = "InstanceNotFound";
	} else if (strcmp(state, "running") == 0) {
		ret->ready = true;
		ret->cond_status = "True";
		ret->cond_severity = NULL;
	} else if (strcmp(state, "pending") == 0) {
		ret->cond_reason = "InstanceNotReady";
		ret->requeue_fast = true;
	} else if (strcmp(state, "stopping") == 0 || strcmp(state, "stopped") == 0) {
		ret->cond_reason = "InstanceStopped";
		ret->cond_severity = "Error";
	} else if (strcmp(state, "shutting-down") == 0) {
		ret->cond_reason = "InstanceTerminated";
		ret->cond_severity = "Error";
	} else if (strcmp(state, "terminated") == 0) {
		ret->cond_reason = "InstanceTerminated";
		ret->cond_severity = "Error";
		ret->terminal = true;
		ret->failure_reason = "UpdateError";
	} else {
		ret->cond_status = "Unknown";
		ret->cond_reason = "InstanceNotReady";
	}
}

static int add_address(cJSON *arr, const char *type, const char *addr)
{
	if (!addr || !*addr)
		return 0;
	cJSON *a = cJSON_CreateObject();
	if (!a || !cJSON_AddStringToObject(a, "type", type) ||
	    !cJSON_AddStringToObject(a, "address", addr)) {
		cJSON_Delete(a);
		return -ENOMEM;
	}
	cJSON_AddItemToArray(arr, a);
	return 0;
}

cJSON *capa_instance_addresses(const struct ec2_instance *i)
{
	cJSON *arr = cJSON_CreateArray();
	int r = arr ? 0 : -ENOMEM;
	bool any_eni_ip = false;
	for (size_t e = 0; r >= 0 && e < i->n_enis; e++)
		for (char **ip = i->enis[e].private_ips; r >= 0 && ip && *ip; ip++) {
			r = add_address(arr, "InternalIP", *ip);
			any_eni_ip = true;
		}
	if (r >= 0 && !any_eni_ip)
		r = add_address(arr, "InternalIP", i->private_ip);
	if (r >= 0)
		r = add_address(arr, "ExternalIP", i->public_ip);
	if (r >= 0)
		r = add_address(arr, "InternalDNS", i->private_dns);
	if (r >= 0)
		r = add_address(arr, "ExternalDNS", i->public_dns);
	if (r < 0) {
		cJSON_Delete(arr);
		return NULL;
	}
	return arr;
}
