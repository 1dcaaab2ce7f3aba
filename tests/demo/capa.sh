# shellcheck shell=bash
# The demo's Cluster API Provider AWS part, sourced by tests/demo/run, which calls demo_capa
# before its report (it uses run's R, ADAPT, role, failed, say, kc, moto_py and the peers).
# aws-k8s capa runs from deploy/example's Deployment capa-system/capa-controller-manager
# (container manager) as the kubelet would start it, with the AWS credentials file of its
# Secret capa-manager-bootstrap-credentials; the test plays Cluster API's core: it creates a
# Cluster and its AWSCluster over two zones, then one Machine and its AWSMachine. What moto then
# holds is shown (VPC, subnets, NAT gateways, the API load balancer, the instance); then the
# machine and the cluster are deleted, and moto is shown to hold nothing of them.
. "$T_ROOT/tests/lib/capa_objects.sh"

demo_capa() {
	local c=capa-demo ns=default hp dp ami t0 creds
	local start=$SECONDS
	say "aws-k8s capa: a Cluster API cluster over two zones, and one machine, in moto"
	python3 -c '
import sys, yaml
print(yaml.safe_dump_all([o for o in yaml.safe_load_all(open(sys.argv[1])) if o and o["kind"] == "Namespace" and
                          o["metadata"]["name"] == "capa-system"]))' "$R" | kc apply -f - >/dev/null &&
		capa_crds || failed "the Namespace capa-system and the CRDs (deploy/example's; Cluster API's Cluster and Machine)"
	echo "applied: Namespace capa-system (deploy/example), the CRDs AWSCluster, AWSMachine, AWSMachineTemplate (deploy/capa/base),"
	echo "Cluster and Machine (Cluster API's core, from tests/data/capa: no Cluster API core runs here)"
	hp=$(free_port)
	dp=$(free_port)
	creds=$T_TMP/capa/credentials/credentials
	role capa Deployment capa-controller-manager manager \
		"a pod has its own network namespace: the ports move to free ones; the credentials file of the manifest's Secret (the other roles get an empty one)" \
		--port-map "9440=$hp" --port-map "8080=$dp" --env "AWS_SHARED_CREDENTIALS_FILE=$creds"
	echo "(its kube-rbac-proxy sidecar is not started: the demo reads nothing through it)"
	wait_http "http://127.0.0.1:$hp/readyz" 20 || failed "capa serves /readyz" capa

	say "the Cluster and its AWSCluster $ns/$c (spec.network.vpc.availabilityZoneUsageLimit: 2)"
	t0=$SECONDS
	capa_cluster "$ns" "$c" 2 || failed "creating the Cluster and the AWSCluster"
	wait_until 120 capa_ready awscluster "$ns" "$c" || failed "the AWSCluster is ready within 120 s" capa
	kc get awscluster "$c" -n "$ns" -o json >"$T_TMP/capa-awscluster.json" || failed "reading the AWSCluster"
	jq -r --arg t "$((SECONDS - t0))" '"ready in \($t) s; status.conditions: \([.status.conditions[] | "\(.type)=\(.status)"] | join(" "))",
		"failure domains: \(.status.failureDomains | keys | join(", ")); spec.controlPlaneEndpoint: \(.spec.controlPlaneEndpoint.host):\(.spec.controlPlaneEndpoint.port)"' \
		"$T_TMP/capa-awscluster.json"
	moto_py '
F = [{"Name": "tag-key", "Values": ["sigs.k8s.io/cluster-api-provider-aws/cluster/" + sys.argv[1]]}]
def name(x): return {t["Key"]: t["Value"] for t in x.get("Tags", [])}.get("Name", "")
for v in ec2.describe_vpcs(Filters=F)["Vpcs"]:
    print("VPC     %s %s %s" % (v["VpcId"], v["CidrBlock"], name(v)))
for s in sorted(ec2.describe_subnets(Filters=F)["Subnets"], key=lambda s: s["CidrBlock"]):
    print("subnet  %s %-14s %s %s" % (s["SubnetId"], s["CidrBlock"], s["AvailabilityZone"], name(s)))
for g in ec2.describe_internet_gateways(Filters=F)["InternetGateways"]:
    print("IGW     %s %s" % (g["InternetGatewayId"], name(g)))
for n in ec2.describe_nat_gateways(Filters=F)["NatGateways"]:
    print("NAT     %s in %s, Elastic IP %s %s" % (n["NatGatewayId"], n["SubnetId"],
          n["NatGatewayAddresses"][0].get("PublicIp"), n["State"]))
print("groups  %s" % ", ".join(sorted(g["GroupName"] for g in ec2.describe_security_groups(Filters=F)["SecurityGroups"])))
for l in elb.describe_load_balancers()["LoadBalancerDescriptions"]:
    if l["LoadBalancerName"].startswith(sys.argv[1] + "-"):
        print("ELB     %s %s, listener %s" % (l["LoadBalancerName"], l["DNSName"],
              ", ".join("%s:%d" % (x["Listener"]["Protocol"], x["Listener"]["LoadBalancerPort"]) for x in l["ListenerDescriptions"])))' "$c" ||
		failed "reading the cluster back from moto"

	say "one Machine and its AWSMachine $ns/$c-md-0 (failure domain us-east-1a)"
	ami=$(capa_ami) || failed "an AMI in moto"
	t0=$SECONDS
	capa_machine "$ns" "$c" "$c-md-0" us-east-1a "$ami" || failed "creating the Machine and the AWSMachine"
	wait_until 90 capa_ready awsmachine "$ns" "$c-md-0" || failed "the AWSMachine is ready within 90 s" capa
	kc get awsmachine "$c-md-0" -n "$ns" -o json | jq -r --arg t "$((SECONDS - t0))" \
		'"ready in \($t) s: providerID \(.spec.providerID), instance state \(.status.instanceState), addresses \([.status.addresses[]?.address] | join(" "))"'
	moto_py '
r = ec2.describe_instances(Filters=[{"Name": "tag:Name", "Values": [sys.argv[1]]}])["Reservations"]
for i in [i for x in r for i in x["Instances"]]:
    print("moto: %s %s %s in %s, groups %s" % (i["InstanceId"], i["InstanceType"], i["State"]["Name"], i["SubnetId"],
          ", ".join(g.get("GroupId", "?") for g in i["SecurityGroups"]) or "none listed by moto"))' "$c-md-0"

	say "deleting the machine, then the cluster (CAPA's reverse order)"
	t0=$SECONDS
	kc delete awsmachine "$c-md-0" -n "$ns" --wait=false >/dev/null
	wait_until 90 bash -c "! kubectl --kubeconfig '$KC' get awsmachine '$c-md-0' -n '$ns' >/dev/null 2>&1" ||
		failed "the AWSMachine is deleted within 90 s" capa
	echo "AWSMachine deleted in $((SECONDS - t0)) s (instance terminated, bootstrap secrets deleted)"
	t0=$SECONDS
	kc delete awscluster "$c" -n "$ns" --wait=false >/dev/null
	wait_until 120 bash -c "! kubectl --kubeconfig '$KC' get awscluster '$c' -n '$ns' >/dev/null 2>&1" ||
		failed "the AWSCluster is deleted within 120 s" capa
	echo "AWSCluster deleted in $((SECONDS - t0)) s"
	local left
	left=$(capa_left "$c") || failed "reading moto"
	[ -z "$left" ] || failed "moto still holds objects of the cluster: $left"
	echo "moto holds nothing tagged for $c (VPC, subnets, gateways, Elastic IPs, route tables, groups,"
	echo "instances) and no load balancer of it (the capa part took $((SECONDS - start)) s)"
}
