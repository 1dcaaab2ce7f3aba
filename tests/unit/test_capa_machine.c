/* capa machine: tags, subnet and groups from the AWSCluster, RunInstances, status. */
#include <string.h>

#include "common/aws/query.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "modules/capa/capa_machine.h"
#include "tests/unit/harness.h"

#define UID "0f8e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5b"

static const char awscluster_json[] =
    "{\"spec\":{\"sshKeyName\":\"cluster-key\",\"additionalTags\":{\"team\":\"a\",\"env\":\"dev\"},"
    "\"network\":{\"subnets\":["
    "{\"resourceID\":\"subnet-pub-a\",\"availabilityZone\":\"us-east-1a\",\"isPublic\":true},"
    "{\"resourceID\":\"subnet-priv-a\",\"availabilityZone\":\"us-east-1a\",\"isPublic\":false},"
    "{\"id\":\"subnet-pub-b\",\"availabilityZone\":\"us-east-1b\",\"isPublic\":true},"
    "{\"id\":\"subnet-priv-b\",\"availabilityZone\":\"us-east-1b\",\"isPublic\":false}]}},"
    "\"status\":{\"networkStatus\":{\"securityGroups\":{"
    "\"node\":{\"id\":\"sg-node\"},\"lb\":{\"id\":\"sg-lb\"},\"controlplane\":{\"id\":\"sg-cp\"},"
    "\"apiserver-lb\":{\"id\":\"sg-apilb\"}}}}}";

struct fixture {
	cJSON *awscluster, *spec;
	struct capa_machine_ctx m;
};

static void fx_init(struct fixture *f, const char *spec, const char *role)
{
	ASSERT_OK(json_parse(awscluster_json, strlen(awscluster_json), &f->awscluster, NULL));
	ASSERT_OK(json_parse(spec, strlen(spec), &f->spec, NULL));
	f->m = (struct capa_machine_ctx){ .cluster = "c1", .namespace = "default",
					  .awsmachine = "c1-md-0-abcde", .uid = UID,
					  .machine = "c1-md-0-xyz", .role = role, .spec = f->spec,
					  .awscluster = f->awscluster };
}

static void fx_release(struct fixture *f)
{
	cJSON_Delete(f->awscluster);
	cJSON_Delete(f->spec);
}

TEST(capa_machine_tags_as_capa)
{
	struct fixture f;
	struct capa_tags t;
	char err[256];
	fx_init(&f, "{\"additionalTags\":{\"team\":\"b\",\"Name\":\"mine\"}}", "node");
	ASSERT_OK(capa_machine_tags(&f.m, true, &t, err, sizeof(err)));
	ASSERT_STREQ(capa_tags_get(&t, "sigs.k8s.io/cluster-api-provider-aws/cluster/c1"), "owned");
	ASSERT_STREQ(capa_tags_get(&t, "sigs.k8s.io/cluster-api-provider-aws/role"), "node");
	ASSERT_STREQ(capa_tags_get(&t, "Name"), "c1-md-0-abcde"); /* CAPA's keys win */
	ASSERT_STREQ(capa_tags_get(&t, "kubernetes.io/cluster/c1"), "owned");
	ASSERT_STREQ(capa_tags_get(&t, "MachineName"), "default/c1-md-0-xyz");
	ASSERT_STREQ(capa_tags_get(&t, "team"), "b"); /* the machine's over the cluster's */
	ASSERT_STREQ(capa_tags_get(&t, "env"), "dev");
	ASSERT_EQ(t.n, 7u);
	for (size_t i = 1; i < t.n; i++)
		ASSERT_TRUE(strcmp(t.key[i - 1], t.key[i]) < 0);
	capa_tags_release(&t);
	/* secrets: no MachineName */
	ASSERT_OK(capa_machine_tags(&f.m, false, &t, err, sizeof(err)));
	ASSERT_NULL(capa_tags_get(&t, "MachineName"));
	capa_tags_release(&t);
	fx_release(&f);

	fx_init(&f, "{\"additionalTags\":{\"aws:x\":\"1\"}}", "node");
	ASSERT_ERR(capa_machine_tags(&f.m, true, &t, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "aws: prefix is reserved");
	fx_release(&f);
}

TEST(capa_machine_subnet_choice)
{
	struct fixture f;
	const char *id;
	char err[256];
	fx_init(&f, "{}", "node");
	ASSERT_OK(capa_pick_subnet(&f.m, "us-east-1b", &id, err, sizeof(err)));
	ASSERT_STREQ(id, "subnet-priv-b");
	ASSERT_OK(capa_pick_subnet(&f.m, NULL, &id, err, sizeof(err)));
	ASSERT_STREQ(id, "subnet-priv-a");
	ASSERT_ERR(capa_pick_subnet(&f.m, "us-east-1c", &id, err, sizeof(err)), ENOENT);
	ASSERT_CONTAINS(err, "no private subnet in zone us-east-1c");
	fx_release(&f);

	fx_init(&f, "{\"publicIP\":true}", "node");
	ASSERT_OK(capa_pick_subnet(&f.m, "us-east-1b", &id, err, sizeof(err)));
	ASSERT_STREQ(id, "subnet-pub-b");
	ASSERT_OK(capa_pick_subnet(&f.m, "", &id, err, sizeof(err)));
	ASSERT_STREQ(id, "subnet-pub-a");
	fx_release(&f);

	fx_init(&f, "{\"subnet\":{\"id\":\"subnet-given\"}}", "node");
	ASSERT_OK(capa_pick_subnet(&f.m, "us-east-1b", &id, err, sizeof(err)));
	ASSERT_STREQ(id, "subnet-given");
	fx_release(&f);
	fx_init(&f, "{\"subnet\":{\"filters\":[{\"name\":\"x\"}]}}", "node");
	ASSERT_ERR(capa_pick_subnet(&f.m, "us-east-1b", &id, err, sizeof(err)), EOPNOTSUPP);
	fx_release(&f);
}

TEST(capa_machine_security_groups)
{
	struct fixture f;
	const char *ids[CAPA_MAX_SGS];
	size_t n;
	char err[256];
	fx_init(&f, "{\"additionalSecurityGroups\":[{\"id\":\"sg-extra\"},{\"id\":\"sg-node\"}]}",
		"node");
	ASSERT_OK(capa_machine_sgs(&f.m, ids, &n, err, sizeof(err)));
	ASSERT_EQ(n, 3u);
	ASSERT_STREQ(ids[0], "sg-node");
	ASSERT_STREQ(ids[1], "sg-lb");
	ASSERT_STREQ(ids[2], "sg-extra");
	f.m.role = "control-plane";
	ASSERT_OK(capa_machine_sgs(&f.m, ids, &n, err, sizeof(err)));
	ASSERT_EQ(n, 4u);
	ASSERT_STREQ(ids[2], "sg-cp");
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(f.awscluster, "status"), "networkStatus");
	ASSERT_ERR(capa_machine_sgs(&f.m, ids, &n, err, sizeof(err)), ENOENT);
	ASSERT_CONTAINS(err, "no \"node\" security group yet");
	fx_release(&f);
}

TEST(capa_machine_run_instances_request)
{
	struct fixture f;
	struct aws_query q = AWS_QUERY_INIT;
	char err[256];
	const char *sgs[] = { "sg-node", "sg-lb", "sg-cp" };
	fx_init(&f,
		"{\"instanceType\":\"t3.large\",\"ami\":{\"id\":\"ami-123\"},"
		"\"iamInstanceProfile\":\"control-plane.cluster-api-provider-aws.sigs.k8s.io\","
		"\"rootVolume\":{\"size\":40,\"type\":\"gp3\",\"encrypted\":true},"
		"\"spotMarketOptions\":{\"maxPrice\":\"0.05\"}}",
		"control-plane");
	struct capa_run_args a = { .subnet_id = "subnet-priv-a", .sg_ids = sgs, .n_sgs = 3,
				   .user_data_b64 = "dXNlcmRhdGE=", .root_device = "/dev/sda1" };
	ASSERT_OK(capa_run_instances_query(&f.m, &a, &q, err, sizeof(err)));
	ASSERT_STREQ(aws_query_get(&q, "ImageId"), "ami-123");
	ASSERT_STREQ(aws_query_get(&q, "InstanceType"), "t3.large");
	ASSERT_STREQ(aws_query_get(&q, "MinCount"), "1");
	ASSERT_STREQ(aws_query_get(&q, "MaxCount"), "1");
	ASSERT_STREQ(aws_query_get(&q, "ClientToken"), "capa-0f8e2a4c1b3d4e5f8a9b0c1d2e3f4a5b");
	ASSERT_STREQ(aws_query_get(&q, "NetworkInterface.1.SubnetId"), "subnet-priv-a");
	ASSERT_STREQ(aws_query_get(&q, "NetworkInterface.1.DeviceIndex"), "0");
	ASSERT_STREQ(aws_query_get(&q, "NetworkInterface.1.SecurityGroupId.3"), "sg-cp");
	ASSERT_NULL(aws_query_get(&q, "NetworkInterface.1.AssociatePublicIpAddress"));
	ASSERT_STREQ(aws_query_get(&q, "IamInstanceProfile.Name"),
		     "control-plane.cluster-api-provider-aws.sigs.k8s.io");
	ASSERT_STREQ(aws_query_get(&q, "KeyName"), "cluster-key");
	ASSERT_STREQ(aws_query_get(&q, "UserData"), "dXNlcmRhdGE=");
	ASSERT_STREQ(aws_query_get(&q, "BlockDeviceMapping.1.DeviceName"), "/dev/sda1");
	ASSERT_STREQ(aws_query_get(&q, "BlockDeviceMapping.1.Ebs.VolumeSize"), "40");
	ASSERT_STREQ(aws_query_get(&q, "BlockDeviceMapping.1.Ebs.VolumeType"), "gp3");
	ASSERT_STREQ(aws_query_get(&q, "BlockDeviceMapping.1.Ebs.Encrypted"), "true");
	ASSERT_STREQ(aws_query_get(&q, "BlockDeviceMapping.1.Ebs.DeleteOnTermination"), "true");
	ASSERT_STREQ(aws_query_get(&q, "InstanceMarketOptions.MarketType"), "spot");
	ASSERT_STREQ(aws_query_get(&q, "InstanceMarketOptions.SpotOptions.SpotInstanceType"),
		     "one-time");
	ASSERT_STREQ(aws_query_get(&q,
				   "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"),
		     "terminate");
	ASSERT_STREQ(aws_query_get(&q, "InstanceMarketOptions.SpotOptions.MaxPrice"), "0.05");
	ASSERT_STREQ(aws_query_get(&q, "MetadataOptions.HttpTokens"), "required");
	ASSERT_STREQ(aws_query_get(&q, "MetadataOptions.HttpEndpoint"), "enabled");
	ASSERT_STREQ(aws_query_get(&q, "MetadataOptions.HttpPutResponseHopLimit"), "1");
	ASSERT_STREQ(aws_query_get(&q, "MetadataOptions.InstanceMetadataTags"), "disabled");
	ASSERT_STREQ(aws_query_get(&q, "TagSpecification.1.ResourceType"), "instance");
	ASSERT_STREQ(aws_query_get(&q, "TagSpecification.2.ResourceType"), "volume");
	ASSERT_STREQ(aws_query_get(&q, "TagSpecification.3.ResourceType"), "network-interface");
	/* keys sorted: MachineName < Name < env < kubernetes.io/... < sigs.k8s.io/... < team */
	ASSERT_STREQ(aws_query_get(&q, "TagSpecification.1.Tag.1.Key"), "MachineName");
	ASSERT_STREQ(aws_query_get(&q, "TagSpecification.1.Tag.2.Key"), "Name");
	ASSERT_STREQ(aws_query_get(&q, "TagSpecification.1.Tag.2.Value"), "c1-md-0-abcde");
	aws_query_release(&q);
	fx_release(&f);

	/* IMDS options from the spec; sshKeyName "" sends no key; publicIP */
	fx_init(&f,
		"{\"instanceType\":\"t3.small\",\"ami\":{\"id\":\"ami-1\"},\"sshKeyName\":\"\","
		"\"publicIP\":true,\"instanceMetadataOptions\":{\"httpTokens\":\"optional\","
		"\"httpPutResponseHopLimit\":2}}",
		"node");
	a.n_sgs = 2;
	ASSERT_OK(capa_run_instances_query(&f.m, &a, &q, err, sizeof(err)));
	ASSERT_STREQ(aws_query_get(&q, "MetadataOptions.HttpTokens"), "optional");
	ASSERT_STREQ(aws_query_get(&q, "MetadataOptions.HttpPutResponseHopLimit"), "2");
	ASSERT_NULL(aws_query_get(&q, "KeyName"));
	ASSERT_NULL(aws_query_get(&q, "BlockDeviceMapping.1.DeviceName"));
	ASSERT_NULL(aws_query_get(&q, "InstanceMarketOptions.MarketType"));
	ASSERT_STREQ(aws_query_get(&q, "NetworkInterface.1.AssociatePublicIpAddress"), "true");
	aws_query_release(&q);
	fx_release(&f);
}

TEST(capa_machine_run_instances_refusals)
{
	struct fixture f;
	struct aws_query q = AWS_QUERY_INIT;
	char err[256];
	const char *sgs[] = { "sg-node" };
	struct capa_run_args a = { .subnet_id = "subnet-1", .sg_ids = sgs, .n_sgs = 1 };
	fx_init(&f, "{\"ami\":{\"id\":\"ami-1\"}}", "node");
	ASSERT_ERR(capa_run_instances_query(&f.m, &a, &q, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "instanceType is required");
	fx_release(&f);
	aws_query_release(&q);
	fx_init(&f, "{\"instanceType\":\"t3.small\"}", "node");
	ASSERT_ERR(capa_run_instances_query(&f.m, &a, &q, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "spec.ami.id is required");
	fx_release(&f);
	aws_query_release(&q);
	fx_init(&f, "{\"instanceType\":\"t3.small\",\"ami\":{\"id\":\"a\"},\"rootVolume\":{\"size\":4}}",
		"node");
	a.root_device = "/dev/xvda";
	ASSERT_ERR(capa_run_instances_query(&f.m, &a, &q, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "at least 8");
	aws_query_release(&q);
	f.m.uid = "not-a-uid";
	ASSERT_ERR(capa_run_instances_query(&f.m, &a, &q, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "is not a UUID");
	aws_query_release(&q);
	fx_release(&f);
	fx_init(&f,
		"{\"instanceType\":\"t3.small\",\"ami\":{\"id\":\"a\"},"
		"\"instanceMetadataOptions\":{\"httpTokens\":\"sometimes\"}}",
		"node");
	ASSERT_ERR(capa_run_instances_query(&f.m, &a, &q, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "HttpTokens must be optional or required");
	aws_query_release(&q);
	fx_release(&f);
}

TEST(capa_machine_provider_id_and_lookup)
{
	char buf[128];
	ASSERT_OK(capa_provider_id("us-east-1b", "i-0abc", buf, sizeof(buf)));
	ASSERT_STREQ(buf, "aws:///us-east-1b/i-0abc");
	ASSERT_OK(capa_provider_id_parse("aws:///us-east-1b/i-0abc", buf, sizeof(buf)));
	ASSERT_STREQ(buf, "i-0abc");
	ASSERT_ERR(capa_provider_id_parse("gce://x/y", buf, sizeof(buf)), EINVAL);
	ASSERT_ERR(capa_provider_id_parse("aws:///us-east-1b/", buf, sizeof(buf)), EINVAL);
	ASSERT_ERR(capa_provider_id("", "i-1", buf, sizeof(buf)), EINVAL);

	struct fixture f;
	struct aws_query q = AWS_QUERY_INIT;
	fx_init(&f, "{}", "node");
	ASSERT_OK(capa_find_instance_query(&f.m, &q));
	ASSERT_STREQ(aws_query_get(&q, "Filter.1.Name"),
		     "tag:sigs.k8s.io/cluster-api-provider-aws/cluster/c1");
	ASSERT_STREQ(aws_query_get(&q, "Filter.2.Name"), "tag:Name");
	ASSERT_STREQ(aws_query_get(&q, "Filter.2.Value.1"), "c1-md-0-abcde");
	ASSERT_STREQ(aws_query_get(&q, "Filter.3.Name"), "instance-state-name");
	ASSERT_NULL(aws_query_get(&q, "Filter.3.Value.6"));
	aws_query_release(&q);
	fx_release(&f);

	ASSERT_ERR(capa_client_token("0f8e2a4c-1b3d-4e5f-8a9b", buf, sizeof(buf)), EINVAL);
	ASSERT_ERR(capa_client_token("zz8e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5b", buf, sizeof(buf)), EINVAL);
}

TEST(capa_machine_instance_states)
{
	struct capa_instance_status s;
	capa_instance_status("running", &s);
	ASSERT_TRUE(s.ready);
	ASSERT_STREQ(s.cond_status, "True");
	ASSERT_FALSE(s.terminal);
	capa_instance_status("pending", &s);
	ASSERT_FALSE(s.ready);
	ASSERT_TRUE(s.requeue_fast);
	ASSERT_STREQ(s.cond_reason, "InstanceNotReady");
	capa_instance_status("stopped", &s);
	ASSERT_STREQ(s.cond_reason, "InstanceStopped");
	ASSERT_STREQ(s.cond_severity, "Error");
	ASSERT_FALSE(s.terminal);
	capa_instance_status("shutting-down", &s);
	ASSERT_STREQ(s.cond_reason, "InstanceTerminated");
	ASSERT_FALSE(s.terminal);
	capa_instance_status("terminated", &s);
	ASSERT_TRUE(s.terminal);
	ASSERT_STREQ(s.failure_reason, "UpdateError");
	capa_instance_status(NULL, &s);
	ASSERT_STREQ(s.cond_status, "Unknown");
	ASSERT_STREQ(s.cond_reason, "InstanceNotFound");
}

TEST(capa_machine_addresses)
{
	char ip1[] = "10.0.1.5", ip2[] = "10.0.1.6", eid[] = "eni-1", iid[] = "i-1",
	     st[] = "running", pub[] = "3.3.3.3", dns[] = "ip-10-0-1-5.ec2.internal";
	char *ips[] = { ip1, ip2, NULL };
	struct ec2_eni eni = { .id = eid, .private_ips = ips };
	struct ec2_instance i = { .id = iid, .state = st, .private_ip = ip1, .public_ip = pub,
				  .private_dns = dns, .enis = &eni, .n_enis = 1 };
	cJSON *a = capa_instance_addresses(&i);
	ASSERT_NOT_NULL(a);
	_cleanup_free_ char *s = json_print(a);
	ASSERT_STREQ(s, "[{\"type\":\"InternalIP\",\"address\":\"10.0.1.5\"},"
			"{\"type\":\"InternalIP\",\"address\":\"10.0.1.6\"},"
			"{\"type\":\"ExternalIP\",\"address\":\"3.3.3.3\"},"
			"{\"type\":\"InternalDNS\",\"address\":\"ip-10-0-1-5.ec2.internal\"}]");
	cJSON_Delete(a);
}
