# shellcheck shell=bash
# Cluster API objects for aws-k8s capa on the test bed, and what is left of a cluster in moto.
# Sourced (after testlib.sh and moto.sh) by the tests/integration/capa_*.sh scripts, tests/demo/capa.sh
# and tests/bench/capa.sh; the caller defines kc (kubectl on the test API server).
#
#   capa_testbed_start             moto behind the fault proxy (AWS_ENDPOINT_URL and MOTO_PY_ENDPOINT
#                                  exported), the test API server (KC, KPORT) and capa_crds, as
#                                  peer checks; the script ends (t_summary) when a peer fails
#   capa_crds                      the CRDs: deploy/capa/base's, Cluster API's Cluster and Machine
#   capa_cluster NS NAME ZONES     the Cluster and its AWSCluster (owner reference set, as Cluster
#                                  API's core sets it; us-east-1; a managed VPC over ZONES zones)
#   capa_ami                       prints an AMI of moto that has a root device
#   capa_machine NS CLUSTER NAME ZONE AMI [cp]
#                                  a bootstrap data Secret NAME-bootstrap (a small cloud-config),
#                                  the Machine (failure domain ZONE) and its AWSMachine (t3.medium,
#                                  AMI); cp: a control-plane machine
#   capa_ready KIND NS NAME        status.ready of the object is true
#   capa_left CLUSTER              one line "KIND: IDs" per kind of object still tagged for the
#                                  cluster in moto, plus its classic load balancers and its
#                                  instances not terminated; prints nothing when all is gone

capa_testbed_start() {
	if ! moto_start || ! faultproxy_start "$MOTO_URL"; then
		peer fail "moto and the fault proxy start"
		t_summary
	fi
	export AWS_ENDPOINT_URL=$FAULTPROXY_URL MOTO_PY_ENDPOINT=$MOTO_URL
	KPORT=$(free_port)
	KC=$T_TMP/kc
	bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KPORT" --kubeconfig-out "$KC"
	if ! wait_http "https://127.0.0.1:$KPORT/healthz" 30 || ! wait_until 10 test -s "$KC"; then
		peer fail "the test API server starts"
		t_summary
	fi
	peer check "the CRDs (AWSCluster, AWSMachine, AWSMachineTemplate, Cluster, Machine) are accepted" capa_crds
}

capa_crds() {
	kc apply -f "$T_ROOT/deploy/capa/base/crd-awscluster.yaml" \
		-f "$T_ROOT/deploy/capa/base/crd-awsmachine.yaml" \
		-f "$T_ROOT/deploy/capa/base/crd-awsmachinetemplate.yaml" \
		-f "$T_ROOT/tests/data/capa/cluster-crd.yaml" -f "$T_ROOT/tests/data/capa/machine-crd.yaml" >/dev/null &&
		wait_until 10 kc get awsclusters,awsmachines,clusters.cluster.x-k8s.io,machines.cluster.x-k8s.io -A
}

capa_cluster() {
	local ns=$1 name=$2 zones=$3 uid
	kc apply -f - >/dev/null <<JSON || return 1
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"$name","namespace":"$ns"},
 "spec":{"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster","name":"$name"}}}
JSON
	uid=$(kc get cluster.cluster.x-k8s.io "$name" -n "$ns" -o jsonpath='{.metadata.uid}') || return 1
	kc apply -f - >/dev/null <<JSON
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster",
 "metadata":{"name":"$name","namespace":"$ns","labels":{"cluster.x-k8s.io/cluster-name":"$name"},
  "ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"$name","uid":"$uid"}]},
 "spec":{"region":"us-east-1","network":{"vpc":{"availabilityZoneUsageLimit":$zones}}}}
JSON
}

capa_ami() {
	moto_py '
img = [i for i in ec2.describe_images(Owners=["amazon"])["Images"] if i.get("RootDeviceName")]
print(img[0]["ImageId"])'
}

capa_machine() {
	local ns=$1 cluster=$2 name=$3 zone=$4 ami=$5 labels muid
	labels="\"cluster.x-k8s.io/cluster-name\":\"$cluster\""
	[ "${6:-}" = cp ] && labels="$labels,\"cluster.x-k8s.io/control-plane\":\"\""
	printf '#cloud-config\nruncmd:\n- [echo, %s]\n' "$name" >"$T_TMP/$name-bootstrap.txt"
	kc create secret generic "$name-bootstrap" -n "$ns" --from-file=value="$T_TMP/$name-bootstrap.txt" >/dev/null ||
		return 1
	kc apply -f - >/dev/null <<JSON || return 1
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Machine","metadata":{"name":"$name","namespace":"$ns","labels":{$labels}},
 "spec":{"clusterName":"$cluster","failureDomain":"$zone","bootstrap":{"dataSecretName":"$name-bootstrap"},
  "infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSMachine","name":"$name"}}}
JSON
	muid=$(kc get machine.cluster.x-k8s.io "$name" -n "$ns" -o jsonpath='{.metadata.uid}') || return 1
	kc apply -f - >/dev/null <<JSON
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSMachine",
 "metadata":{"name":"$name","namespace":"$ns","labels":{$labels},
  "ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Machine","name":"$name","uid":"$muid"}]},
 "spec":{"instanceType":"t3.medium","ami":{"id":"$ami"}}}
JSON
}

capa_ready() {
	[ "$(kc get "$1" "$3" -n "$2" -o jsonpath='{.status.ready}' 2>/dev/null)" = true ]
}

capa_left() {
	moto_py '
F = [{"Name": "tag-key", "Values": ["sigs.k8s.io/cluster-api-provider-aws/cluster/" + sys.argv[1]]}]
left = {
  "vpcs": [v["VpcId"] for v in ec2.describe_vpcs(Filters=F)["Vpcs"]],
  "subnets": [s["SubnetId"] for s in ec2.describe_subnets(Filters=F)["Subnets"]],
  "internet gateways": [g["InternetGatewayId"] for g in ec2.describe_internet_gateways(Filters=F)["InternetGateways"]],
  "nat gateways": [n["NatGatewayId"] for n in ec2.describe_nat_gateways(Filters=F)["NatGateways"] if n["State"] != "deleted"],
  "elastic ips": [a["AllocationId"] for a in ec2.describe_addresses(Filters=F)["Addresses"]],
  "route tables": [r["RouteTableId"] for r in ec2.describe_route_tables(Filters=F)["RouteTables"]],
  "security groups": [g["GroupId"] for g in ec2.describe_security_groups(Filters=F)["SecurityGroups"]],
  "instances": [i["InstanceId"] for r in ec2.describe_instances(Filters=F)["Reservations"]
                for i in r["Instances"] if i["State"]["Name"] != "terminated"],
  "load balancers": [l["LoadBalancerName"] for l in elb.describe_load_balancers()["LoadBalancerDescriptions"]
                     if l["LoadBalancerName"].startswith(sys.argv[1] + "-")],
}
for k, v in left.items():
    if v:
        print("%s: %s" % (k, " ".join(v)))' "$1"
}
