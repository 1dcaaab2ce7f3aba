# shellcheck shell=bash
# The demo's discoverer part, sourced by tests/demo/run (which defines R, ADAPT, MR, CLUSTER,
# role, failed, say, kc, moto_py): demo_discoverer starts aws-k8s discoverer from deploy/example's
# Deployment cloud-data-discoverer against the demo's moto, lets it run one period, then prints
# what it wrote: the discovery data (Secret d8-cloud-provider-discovery-data, decoded), the
# conditions ConfigMap, the instance-type catalog, the node-manager Secret (keys redacted) and
# its metrics. It stays running, so the demo's report shows its memory and stops it.

demo_discoverer() {
	local port prefix=demo secret
	say "the cluster as Deckhouse's installer leaves it, for the cloud-data-discoverer"
	# the cloud: three public subnets of the default VPC tagged for the cluster (WithoutNAT), the
	# prefix's security groups
	moto_py "
U, P = '$CLUSTER', '$prefix'
subs = sorted(ec2.describe_subnets(Filters=[{'Name': 'default-for-az', 'Values': ['true']}])['Subnets'],
              key=lambda s: s['AvailabilityZone'])[:3]
for s in subs:
    ec2.create_tags(Resources=[s['SubnetId']], Tags=[{'Key': 'kubernetes.io/cluster/' + U, 'Value': 'shared'},
                                                     {'Key': 'kubernetes.io/role/elb', 'Value': '1'}])
    print('subnet %s in %s: tagged kubernetes.io/cluster/%s, kubernetes.io/role/elb' % (s['SubnetId'], s['AvailabilityZone'], U))
vpc = subs[0]['VpcId']
for g in ('node', 'ssh-accessible', 'loadbalancer'):
    i = ec2.create_security_group(GroupName=P + '-' + g, Description=g, VpcId=vpc)['GroupId']
    print('security group %s-%s: %s' % (P, g, i))" || failed "the discoverer's subnets and security groups in moto"
	# the cluster: its UUID, its configuration, the CRDs of deploy/example
	kc -n kube-system create configmap d8-cluster-uuid --from-literal=cluster-uuid="$CLUSTER" >/dev/null &&
		printf 'apiVersion: deckhouse.io/v1\nkind: ClusterConfiguration\ncloud:\n  provider: AWS\n  prefix: %s\n' "$prefix" >"$T_TMP/cc.yaml" &&
		printf 'apiVersion: deckhouse.io/v1\nkind: AWSClusterConfiguration\nlayout: WithoutNAT\ntags:\n  env: demo\nmasterNodeGroup:\n  replicas: 1\n  instanceClass:\n    instanceType: m5.large\n    ami: ami-12345678\n' >"$T_TMP/pcc.yaml" &&
		kc -n kube-system create secret generic d8-cluster-configuration \
			--from-file=cluster-configuration.yaml="$T_TMP/cc.yaml" >/dev/null &&
		kc -n kube-system create secret generic d8-provider-cluster-configuration \
			--from-file=cloud-provider-cluster-configuration.yaml="$T_TMP/pcc.yaml" >/dev/null ||
		failed "Deckhouse's ConfigMap d8-cluster-uuid and cluster configuration Secrets"
	echo "ConfigMap kube-system/d8-cluster-uuid: $CLUSTER; Secret d8-cluster-configuration: cloud.prefix $prefix;"
	echo "Secret d8-provider-cluster-configuration: layout WithoutNAT, tags {env: demo}, the masters' AMI ami-12345678"
	python3 -c '
import sys, yaml
print(yaml.safe_dump_all([o for o in yaml.safe_load_all(open(sys.argv[1])) if o and o["kind"] == "CustomResourceDefinition"]))' "$R" |
		kc apply -f - | sed 's/^/from the manifests: /' || failed "the CRDs of deploy/example"
	# the test bed's missing permission, to show a condition
	fault '{"service": "ec2", "action": "DescribeInstanceTopology", "effect": "error", "status": 403, "code": "UnauthorizedOperation", "message": "You are not authorized to perform this operation."}' ||
		failed "the proxy's rule for DescribeInstanceTopology"
	echo "the proxy answers DescribeInstanceTopology with UnauthorizedOperation (403), as AWS does for an"
	echo "account without ec2:DescribeInstanceTopology (moto does not have that call)"

	port=$(free_port)
	role discoverer Deployment cloud-data-discoverer cloud-data-discoverer \
		"a pod has its own network namespace: the port moves to a free one; the overlay's region is a REPLACE value, the demo's EC2 is us-east-1" \
		--port-map "8081=$port" --env AWS_REGION=us-east-1
	echo "(its kube-rbac-proxy sidecar is not started: /metrics and /healthz are read on 127.0.0.1:$port directly)"
	wait_http "http://127.0.0.1:$port/healthz" 20 || failed "the discoverer serves /healthz" discoverer
	wait_until 120 grep -q '"discovery period done"' "$T_TMP/discoverer.log" || failed "one discovery period within 120 s" discoverer
	grep '"discovery period done"' "$T_TMP/discoverer.log" | head -n 1 | sed 's/^.*\] //; s/^/first period: /'
	grep -q '"discovery period done".*err="Success' "$T_TMP/discoverer.log" || failed "the discovery period succeeds" discoverer

	say "what the discoverer wrote"
	_disc_secret() { kc -n kube-system get secret "$1" -o json | jq -r --arg k "$2" '.data[$k] | @base64d'; }
	echo "Secret kube-system/d8-cloud-provider-discovery-data, discovery-data.json:"
	_disc_secret d8-cloud-provider-discovery-data discovery-data.json | jq . || failed "the discovery data"
	_disc_secret d8-cloud-provider-discovery-data discovery-data.json |
		jq -r '"zones: \(.zones | join(", "))", (.zoneToSubnetIdMap | to_entries[] | "  \(.key) -> subnet \(.value)")'
	echo "ConfigMap kube-system/d8-cloud-provider-conditions, conditions:"
	kc -n kube-system get configmap d8-cloud-provider-conditions -o jsonpath='{.data.conditions}' | jq -c . ||
		failed "the conditions ConfigMap"
	kc get instancetypescatalog for-cluster-autoscaler -o json |
		jq -r '"InstanceTypesCatalog for-cluster-autoscaler: \(.instanceTypes | length) instance types, e.g. \(.instanceTypes[] | select(.name == "m5.large") | tojson)"' ||
		failed "the instance-type catalog"
	echo "Secret kube-system/d8-node-manager-cloud-provider (the keys redacted):"
	kc -n kube-system get secret d8-node-manager-cloud-provider -o json |
		jq -c '.data | map_values(@base64d) | .aws |= (fromjson | .providerSecretAccessKey = "<redacted>" | .providerAccessKeyId = "<redacted>")' ||
		failed "the node-manager Secret"
	echo "metrics:"
	curl -sf "http://127.0.0.1:$port/metrics" | grep '^cloud_data_discovery_' | sed 's/^/  /'
}
