#!/usr/bin/env bash
# tests: product
# aws-k8s capa with a bring-your-own VPC (CAPA's unmanaged mode, ../shared/reference/capa.md §3
# step 2 and §8): a VPC, its subnets, internet gateway and route table are made with awscli
# first; an AWSCluster naming them by ID gets its security groups and API load balancer in that
# VPC, the subnets only get kubernetes.io/cluster/<c>=shared, nothing of the network is created
# (asserted from the calls the fault proxy recorded); its delete removes the groups and the load
# balancer and leaves every object of the user's network as it was. A subnet that does not exist
# gives a clear condition and nothing is made; with --feature-gates
# TagUnmanagedNetworkResources=false the subnets are not tagged.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../lib/capa_objects.sh"

NS=default
export KUBECACHEDIR=$T_TMP/kcache
kc() { kubectl --kubeconfig "$KC" "$@"; }
calls_log() {
	tb_json "$FAULTPROXY_URL/_control/calls?log=100000" |
		python3 -c 'import json,sys; [print(c["service"]+":"+c["action"]) for c in json.load(sys.stdin)["log"]]'
}
calls_reset() { tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null; }
awsc_py() { kc get awscluster "$1" -n "$NS" -o json | python3 -c "import json,sys; o=json.load(sys.stdin); print($2)"; }
ec2() { aws --endpoint-url "$MOTO_URL" --region us-east-1 ec2 "$@" --output text; }

# ---- peers ----
capa_testbed_start

# ---- the user's network, made with awscli ----
VPC=$(ec2 create-vpc --cidr-block 10.1.0.0/16 --query Vpc.VpcId)
IGW=$(ec2 create-internet-gateway --query InternetGateway.InternetGatewayId)
ec2 attach-internet-gateway --internet-gateway-id "$IGW" --vpc-id "$VPC" >/dev/null
PUB_A=$(ec2 create-subnet --vpc-id "$VPC" --cidr-block 10.1.0.0/24 --availability-zone us-east-1a --query Subnet.SubnetId)
PUB_B=$(ec2 create-subnet --vpc-id "$VPC" --cidr-block 10.1.1.0/24 --availability-zone us-east-1b --query Subnet.SubnetId)
PRIV_A=$(ec2 create-subnet --vpc-id "$VPC" --cidr-block 10.1.10.0/24 --availability-zone us-east-1a --query Subnet.SubnetId)
RT=$(ec2 create-route-table --vpc-id "$VPC" --query RouteTable.RouteTableId)
ec2 create-route --route-table-id "$RT" --destination-cidr-block 0.0.0.0/0 --gateway-id "$IGW" >/dev/null
ec2 associate-route-table --route-table-id "$RT" --subnet-id "$PUB_A" >/dev/null
ec2 associate-route-table --route-table-id "$RT" --subnet-id "$PUB_B" >/dev/null
ec2 create-tags --resources "$PUB_A" --tags Key=owner,Value=me >/dev/null
if [[ $VPC == vpc-* && $IGW == igw-* && $PUB_A == subnet-* && $PUB_B == subnet-* && $PRIV_A == subnet-* && $RT == rtb-* ]]; then
	peer ok "awscli makes the user's VPC, IGW, three subnets and a public route table"
else
	peer fail "awscli makes the user's network" "$VPC $IGW $PUB_A $PUB_B $PRIV_A $RT"
	t_summary
fi
# the user's network as it is: every object with its tags, routes and associations
snapshot() {
	moto_py '
import json, sys
v = sys.argv[1]
F = [{"Name": "vpc-id", "Values": [v]}]
def tags(x): return sorted((t["Key"], t["Value"]) for t in x.get("Tags", []))
out = {
 "vpc": [(x["VpcId"], x["CidrBlock"], tags(x)) for x in ec2.describe_vpcs(VpcIds=[v])["Vpcs"]],
 "igw": [(g["InternetGatewayId"], [a["VpcId"] for a in g["Attachments"]], tags(g)) for g in
         ec2.describe_internet_gateways(Filters=[{"Name": "attachment.vpc-id", "Values": [v]}])["InternetGateways"]],
 "subnets": sorted((s["SubnetId"], s["CidrBlock"], s["AvailabilityZone"], s["MapPublicIpOnLaunch"],
                    [t for t in tags(s) if not t[0].startswith("kubernetes.io/cluster/")])
                   for s in ec2.describe_subnets(Filters=F)["Subnets"]),
 "route tables": sorted((r["RouteTableId"], sorted(str(a.get("SubnetId")) for a in r["Associations"]),
                         sorted((x.get("DestinationCidrBlock"), x.get("GatewayId")) for x in r["Routes"]), tags(r))
                        for r in ec2.describe_route_tables(Filters=F)["RouteTables"]),
 "nats": [n["NatGatewayId"] for n in ec2.describe_nat_gateways(Filters=F)["NatGateways"] if n["State"] != "deleted"],
}
print(json.dumps(out, sort_keys=True))
' "$VPC"
}
snapshot >"$T_TMP/before.json"

# ---- the manager ----
start_capa() { # NAME FLAGS...
	local name=$1
	shift
	HPORT=$(free_port)
	bg "$name" "$AWS_K8S" capa --kubeconfig="$KC" --health-addr="127.0.0.1:$HPORT" --sync-period=10m "$@" --v=2
	wait_http "http://127.0.0.1:$HPORT/healthz" 20
}
if start_capa capa; then ok "capa starts"; else fail "capa starts" "$(tail -5 "$T_TMP/capa.log")"; fi

cluster() { # NAME SUBNETS-JSON [SPEC-JSON: instead of the user's VPC with those subnets]
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"$1","namespace":"$NS"},"spec":{}}
EOF
	local uid spec=${3:-}
	[ -n "$spec" ] || spec='{"region":"us-east-1","network":{"vpc":{"id":"'$VPC'"},"subnets":'$2'}}'
	uid=$(kc get cluster.cluster.x-k8s.io "$1" -n "$NS" -o jsonpath='{.metadata.uid}')
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster",
 "metadata":{"name":"$1","namespace":"$NS","ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"$1","uid":"$uid"}]},
 "spec":$spec}
EOF
}
ready() { [ "$(awsc_py "$1" 'o.get("status", {}).get("ready")')" = True ]; }
gone() { ! kc get awscluster "$1" -n "$NS" >/dev/null 2>&1; }

# ---- c1: the user's VPC with two public subnets and a private one ----
calls_reset
cluster c1 "[{\"id\":\"$PUB_A\"},{\"id\":\"$PUB_B\"},{\"id\":\"$PRIV_A\"}]"
if wait_until 90 ready c1; then ok "an AWSCluster in a bring-your-own VPC becomes ready"
else fail "the AWSCluster becomes ready" "$(awsc_py c1 'o.get("status")') $(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi
calls_log >"$T_TMP/create.calls"
kc get awscluster c1 -n "$NS" -o json >"$T_TMP/c1.json"
moto_py_checks '
import json
v, pa, pb, pv = sys.argv[2:6]
o = json.load(open(sys.argv[1]))
K8S = "kubernetes.io/cluster/c1"
OWN = "sigs.k8s.io/cluster-api-provider-aws/cluster/c1"
def tags(x): return {t["Key"]: t["Value"] for t in x.get("Tags", [])}
net = o["spec"]["network"]
eq("spec.network.vpc keeps the ID and records the VPC CIDR", (net["vpc"]["id"], net["vpc"].get("cidrBlock")), (v, "10.1.0.0/16"))
eq("spec.network.subnets: zone, CIDR and public (a route to the IGW) read from EC2",
   [(s["id"], s.get("availabilityZone"), s.get("cidrBlock"), s.get("isPublic")) for s in net["subnets"]],
   [(pa, "us-east-1a", "10.1.0.0/24", True), (pb, "us-east-1b", "10.1.1.0/24", True), (pv, "us-east-1a", "10.1.10.0/24", False)])
subs = {s["SubnetId"]: tags(s) for s in ec2.describe_subnets(SubnetIds=[pa, pb, pv])["Subnets"]}
eq("each listed subnet gets kubernetes.io/cluster/c1=shared and keeps its own tags",
   subs, {pa: {"owner": "me", K8S: "shared"}, pb: {K8S: "shared"}, pv: {K8S: "shared"}})
sgs = ec2.describe_security_groups(Filters=[{"Name": "tag-key", "Values": [OWN]}])["SecurityGroups"]
eq("the four security groups are made in the user VPC",
   sorted((g["GroupName"], g["VpcId"]) for g in sgs),
   [(n, v) for n in ("c1-apiserver-lb", "c1-controlplane", "c1-lb", "c1-node")])
lbs = elb.describe_load_balancers(LoadBalancerNames=["c1-apiserver"])["LoadBalancerDescriptions"]
eq("the API load balancer is made in the two public subnets", [sorted(l["Subnets"]) for l in lbs], [sorted([pa, pb])])
owned = {
  "vpcs": ec2.describe_vpcs(Filters=[{"Name": "tag-key", "Values": [OWN]}])["Vpcs"],
  "subnets": ec2.describe_subnets(Filters=[{"Name": "tag-key", "Values": [OWN]}])["Subnets"],
  "igws": ec2.describe_internet_gateways(Filters=[{"Name": "tag-key", "Values": [OWN]}])["InternetGateways"],
  "route tables": ec2.describe_route_tables(Filters=[{"Name": "tag-key", "Values": [OWN]}])["RouteTables"],
  "eips": ec2.describe_addresses(Filters=[{"Name": "tag-key", "Values": [OWN]}])["Addresses"],
}
eq("no VPC, subnet, IGW, route table or EIP of the cluster exists", {k: len(x) for k, x in owned.items() if x}, {})
st = o["status"]
eq("status.failureDomains: the zone of the private subnet", st.get("failureDomains"), {"us-east-1a": {"controlPlane": True}})
conds = {c["type"]: c["status"] for c in st["conditions"]}
CT = ("VpcReady", "SubnetsReady", "InternetGatewayReady", "NatGatewaysReady", "RouteTablesReady",
      "ClusterSecurityGroupsReady", "LoadBalancerReady", "Ready")
eq("conditions true (the network steps have nothing to do)", {k: conds.get(k) for k in CT}, {k: "True" for k in CT})
' "$T_TMP/c1.json" "$VPC" "$PUB_A" "$PUB_B" "$PRIV_A"
made=$(grep -E ':(CreateVpc|ModifyVpcAttribute|CreateSubnet|ModifySubnetAttribute|CreateInternetGateway|AttachInternetGateway|AllocateAddress|CreateNatGateway|CreateRouteTable|CreateRoute|AssociateRouteTable|ReplaceRoute)$' "$T_TMP/create.calls" | sort | uniq -c | tr '\n' ' ')
[ -z "$made" ] && ok "no call creates or changes the network (no VPC, subnet, IGW, EIP, NAT, route table, route, attribute)" ||
	fail "nothing of the network is created" "$made"
n_tags=$(grep -c ':CreateTags$' "$T_TMP/create.calls")
[ "$n_tags" = 1 ] && ok "the three subnets are tagged in one CreateTags" || fail "one CreateTags" "$n_tags"
echo "# AWS calls to create a cluster in a bring-your-own VPC: $(wc -l <"$T_TMP/create.calls"): $(cut -d: -f2 "$T_TMP/create.calls" | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}')"

# a second reconcile: nothing is written to AWS
calls_reset
kc annotate awscluster c1 -n "$NS" test/poke=1 >/dev/null
settled() { [ "$(calls_log | grep -c ':DescribeSecurityGroups$')" -ge 1 ]; }
wait_until 30 settled
sleep 2
calls_log >"$T_TMP/again.calls"
n_mut=$(grep -cv ':Describe' "$T_TMP/again.calls" || true)
[ "$n_mut" = 0 ] && ok "a second reconcile makes no mutating call (the subnets are not tagged again)" ||
	fail "a second reconcile is idempotent" "$(tr '\n' ' ' <"$T_TMP/again.calls")"

# ---- c2: a listed subnet that does not exist ----
calls_reset
cluster c2 "[{\"id\":\"$PUB_A\"},{\"id\":\"subnet-0123456789abcdef0\"}]"
c2_failed() { [ "$(awsc_py c2 '[c["status"] for c in o.get("status", {}).get("conditions", []) if c["type"] == "SubnetsReady"]')" = "['False']" ]; }
if wait_until 60 c2_failed; then
	msg=$(awsc_py c2 '[(c.get("reason"), c.get("message")) for c in o["status"]["conditions"] if c["type"] == "SubnetsReady"][0]')
	case $msg in
	*SubnetsReconciliationFailed*subnet-0123456789abcdef0*"not found"*) ok "a missing subnet: SubnetsReady False naming it ($msg)" ;;
	*) fail "a missing subnet: condition names it" "$msg" ;;
	esac
else fail "a missing subnet sets SubnetsReady False" "$(awsc_py c2 'o.get("status")')"; fi
grep -q 'subnet-0123456789abcdef0 is not found' "$T_TMP/capa.log" && ok "and the error is logged" ||
	fail "the missing subnet is logged" "$(grep -E '^E' "$T_TMP/capa.log" | tail -2)"
[ "$(awsc_py c2 'o.get("status", {}).get("ready")')" != True ] && ok "c2 is not ready" || fail "c2 is not ready" ""
made=$(calls_log | grep -v ':Describe' | tr '\n' ' ')
[ -z "$made" ] && ok "nothing is made for c2 (no tag, no security group, no load balancer)" ||
	fail "nothing is made for c2" "$made"
kc delete awscluster c2 -n "$NS" --wait=false >/dev/null
if wait_until 60 gone c2; then ok "c2 is deleted"; else fail "c2 is deleted" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi

# ---- c4: no vpc.id, but a VPC of someone else carries the Name c4-vpc: refused, as CAPA ----
OTHER=$(ec2 create-vpc --cidr-block 10.9.0.0/16 --tag-specifications 'ResourceType=vpc,Tags=[{Key=Name,Value=c4-vpc}]' --query Vpc.VpcId)
cluster c4 '[]' '{"region":"us-east-1"}'
c4_cond() { awsc_py c4 '[(c["status"], c.get("message")) for c in o.get("status", {}).get("conditions", []) if c["type"] == "VpcReady"]'; }
c4_failed() { [[ "$(c4_cond)" == *"$OTHER"* ]]; }
wait_until 60 c4_failed
case $(c4_cond) in
*"$OTHER is named c4-vpc but is not owned by cluster c4"*) ok "a VPC found by the Name <c>-vpc without the owned tag is refused (VpcReady False), not taken as unmanaged" ;;
*) fail "a same-named VPC of someone else is refused" "$(c4_cond)" ;;
esac
kc delete awscluster c4 -n "$NS" --wait=false >/dev/null
wait_until 60 gone c4 || fail "c4 is deleted" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"
n=$(ec2 describe-vpcs --vpc-ids "$OTHER" --query 'length(Vpcs)')
[ "$n" = 1 ] && ok "and that VPC is left alone by the delete" || fail "the same-named VPC is left alone" "$n"

# ---- delete c1: the user's network stays ----
calls_reset
kc delete awscluster c1 -n "$NS" --wait=false >/dev/null
if wait_until 120 gone c1; then ok "c1 is deleted (finalizer removed)"
else fail "c1 is deleted" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi
calls_log >"$T_TMP/delete.calls"
snapshot >"$T_TMP/after.json"
if cmp -s "$T_TMP/before.json" "$T_TMP/after.json"; then
	ok "the user's VPC, IGW, subnets (with their tags) and route tables are all still there, unchanged"
else fail "the user's network is intact" "$(diff "$T_TMP/before.json" "$T_TMP/after.json" | head -c 600)"; fi
moto_py_checks '
subs = ec2.describe_subnets(SubnetIds=sys.argv[1:4])["Subnets"]
eq("the cloud-provider tag kubernetes.io/cluster/c1=shared stays on the subnets (as CAPA leaves it)",
   [dict((t["Key"], t["Value"]) for t in s["Tags"]).get("kubernetes.io/cluster/c1") for s in subs], ["shared"] * 3)
' "$PUB_A" "$PUB_B" "$PRIV_A"
moto_py_checks '
OWN = "sigs.k8s.io/cluster-api-provider-aws/cluster/c1"
F = [{"Name": "tag-key", "Values": [OWN]}]
left = {
  "security groups": [g["GroupName"] for g in ec2.describe_security_groups(Filters=F)["SecurityGroups"]],
  "load balancers": [l["LoadBalancerName"] for l in elb.describe_load_balancers()["LoadBalancerDescriptions"]],
}
eq("no security group or load balancer of the cluster is left", {k: v for k, v in left.items() if v}, {})
'
deleted=$(grep -E ':(DeleteVpc|DeleteSubnet|DeleteRouteTable|DisassociateRouteTable|DetachInternetGateway|DeleteInternetGateway|DeleteNatGateway|ReleaseAddress|DeleteTags)$' "$T_TMP/delete.calls" | tr '\n' ' ')
[ -z "$deleted" ] && ok "the delete makes no call on the network (no delete, detach or disassociate)" ||
	fail "the delete leaves the network alone" "$deleted"
grep -q ':DeleteLoadBalancer$' "$T_TMP/delete.calls" && grep -q ':DeleteSecurityGroup$' "$T_TMP/delete.calls" &&
	ok "the delete removes the load balancer and the security groups" ||
	fail "the LB and SGs are deleted" "$(tr '\n' ' ' <"$T_TMP/delete.calls")"

# ---- the gate off: no tag on the subnets ----
if stop_within "$(cat "$T_TMP/capa.pid")" 15 capa; then
	[ "$STOP_RC" = 0 ] && ok "capa stops on SIGTERM with exit 0 (no leak under ASan)" || fail "capa exits 0 on SIGTERM" "exit $STOP_RC"
fi
if start_capa capa2 --feature-gates=TagUnmanagedNetworkResources=false; then ok "capa restarts with TagUnmanagedNetworkResources=false"
else fail "capa restarts with the gate off" "$(tail -3 "$T_TMP/capa2.log")"; fi
calls_reset
cluster c3 "[{\"id\":\"$PUB_B\"},{\"id\":\"$PRIV_A\"}]"
if wait_until 90 ready c3; then ok "c3 (gate off) becomes ready"
else fail "c3 becomes ready" "$(awsc_py c3 'o.get("status")')"; fi
moto_py_checks '
subs = ec2.describe_subnets(SubnetIds=sys.argv[1:3])["Subnets"]
eq("with the gate off the subnets get no kubernetes.io/cluster/c3 tag",
   [t["Key"] for s in subs for t in s.get("Tags", []) if t["Key"] == "kubernetes.io/cluster/c3"], [])
' "$PUB_B" "$PRIV_A"
n_tags=$(calls_log | grep -c ':CreateTags$' || true)
[ "$n_tags" = 0 ] && ok "and no CreateTags call" || fail "no CreateTags with the gate off" "$n_tags"
kc delete awscluster c3 -n "$NS" --wait=false >/dev/null
if wait_until 120 gone c3; then ok "c3 is deleted"; else fail "c3 is deleted" "$(grep -E '^E' "$T_TMP/capa2.log" | tail -3)"; fi
snapshot >"$T_TMP/after3.json"
cmp -s "$T_TMP/before.json" "$T_TMP/after3.json" && ok "the user's network is still unchanged" ||
	fail "the network is unchanged after c3" "$(diff "$T_TMP/before.json" "$T_TMP/after3.json" | head -c 400)"
if stop_within "$(cat "$T_TMP/capa2.pid")" 15 capa2; then
	[ "$STOP_RC" = 0 ] && ok "the second capa stops with exit 0" || fail "capa2 exits 0 on SIGTERM" "exit $STOP_RC"
fi
t_summary
