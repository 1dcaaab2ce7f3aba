#!/usr/bin/env bash
# tests: product
# aws-k8s capa's AWSCluster controller against moto (behind the fault proxy, which records every
# call) and the test API server: the owner Cluster and the pause are waited for; a managed VPC
# over three zones gets every object, tag, rule and route of CAPA's reference
# (../shared/reference/capa.md §2-§5), conditions, failure domains and networkStatus; a second
# reconcile of the unchanged cluster makes no mutating call and a few filtered Describes; the
# delete runs in CAPA's reverse order (asserted from the recorded calls, since moto raises
# DependencyViolation for only some deletes) and leaves nothing tagged for the cluster.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../lib/capa_objects.sh"

C=c1
NS=default
export KUBECACHEDIR=$T_TMP/kcache
kc() { kubectl --kubeconfig "$KC" "$@"; }
# the calls the proxy recorded since its last reset, one "service:action" a line, in order
calls_log() {
	tb_json "$FAULTPROXY_URL/_control/calls?log=100000" |
		python3 -c 'import json,sys; [print(c["service"]+":"+c["action"]) for c in json.load(sys.stdin)["log"]]'
}
calls_reset() { tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null; }
awsc() { kc get awscluster "$C" -n "$NS" -o json; }
awsc_py() { awsc | python3 -c "import json,sys; o=json.load(sys.stdin); print($1)"; }

# ---- peers ----
capa_testbed_start

# ---- the manager ----
HPORT=$(free_port)
bg capa "$AWS_K8S" capa --kubeconfig="$KC" --health-addr="127.0.0.1:$HPORT" --sync-period=10m \
	--awscluster-concurrency=2 --feature-gates=EKS=false --watch-filter= --v=2
if wait_http "http://127.0.0.1:$HPORT/healthz" 20 && curl -fs "http://127.0.0.1:$HPORT/healthz" >/dev/null; then
	ok "capa serves /healthz on --health-addr"
else
	fail "capa serves /healthz" "$(tail -5 "$T_TMP/capa.log")"
fi

# ---- an AWSCluster without its owner Cluster, then paused: nothing is done ----
calls_reset
kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster",
 "metadata":{"name":"$C","namespace":"$NS","labels":{"cluster.x-k8s.io/cluster-name":"$C"}},
 "spec":{"region":"us-east-1","additionalTags":{"team":"infra","Name":"overridden"}}}
EOF
if wait_until 20 grep -q "has not yet set OwnerRef" "$T_TMP/capa.log"; then
	ok "an AWSCluster without an owner Cluster waits for Cluster API (logged)"
else fail "an AWSCluster without an owner waits" "$(tail -5 "$T_TMP/capa.log")"; fi
kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"$C","namespace":"$NS"},
 "spec":{"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster","name":"$C"}}}
EOF
CUID=$(kc get cluster.cluster.x-k8s.io "$C" -n "$NS" -o jsonpath='{.metadata.uid}')
kc patch awscluster "$C" -n "$NS" --type=merge -p "{\"metadata\":{\"annotations\":{\"cluster.x-k8s.io/paused\":\"\"},
 \"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":\"Cluster\",\"name\":\"$C\",\"uid\":\"$CUID\"}]}}" >/dev/null
if wait_until 20 grep -q "marked as paused" "$T_TMP/capa.log"; then
	ok "a paused AWSCluster is not reconciled (logged)"
else fail "a paused AWSCluster is not reconciled" "$(tail -5 "$T_TMP/capa.log")"; fi
fins=$(awsc_py 'o["metadata"].get("finalizers")')
made=$(calls_log | grep -cv ':Describe' || true)
if [ "$fins" = None ] && [ "$made" = 0 ]; then
	ok "no finalizer and no AWS call that changes anything while the owner is missing or paused"
else fail "nothing is done while unowned or paused" "finalizers $fins, $made non-Describe calls"; fi

# ---- unpaused: the managed network over three zones ----
calls_reset
kc annotate awscluster "$C" -n "$NS" cluster.x-k8s.io/paused- >/dev/null
ready() { [ "$(awsc_py 'o.get("status", {}).get("ready")')" = True ]; }
if wait_until 90 ready; then ok "the AWSCluster becomes ready (status.ready)"
else fail "the AWSCluster becomes ready" "$(awsc_py 'o.get("status")') $(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi
calls_log >"$T_TMP/create.calls"
fin=$(awsc_py '"awscluster.infrastructure.cluster.x-k8s.io" in o["metadata"].get("finalizers", [])')
[ "$fin" = True ] && ok "the finalizer awscluster.infrastructure.cluster.x-k8s.io is set" ||
	fail "the finalizer is set" "$fin"

awsc >"$T_TMP/awsc.json"
moto_py_checks '
import json
C = "c1"
OWN = "sigs.k8s.io/cluster-api-provider-aws/cluster/" + C
ROLE = "sigs.k8s.io/cluster-api-provider-aws/role"
K8S = "kubernetes.io/cluster/" + C
o = json.load(open(sys.argv[1]))
def tags(x): return {t["Key"]: t["Value"] for t in x.get("Tags", [])}
F = [{"Name": "tag-key", "Values": [OWN]}]

vpcs = ec2.describe_vpcs(Filters=F)["Vpcs"]
eq("one VPC is tagged for the cluster", len(vpcs), 1)
vpc = vpcs[0]; vid = vpc["VpcId"]
eq("the VPC has the default CIDR 10.0.0.0/16", vpc["CidrBlock"], "10.0.0.0/16")
eq("VPC tags: owned, role common, Name <c>-vpc (CAPA wins over additionalTags), additionalTags",
   tags(vpc), {OWN: "owned", ROLE: "common", "Name": "c1-vpc", "team": "infra"})
eq("spec.network.vpc.id records the VPC", o["spec"]["network"]["vpc"]["id"], vid)
dns = [ec2.describe_vpc_attribute(VpcId=vid, Attribute=a)[k]["Value"]
       for a, k in (("enableDnsHostnames", "EnableDnsHostnames"), ("enableDnsSupport", "EnableDnsSupport"))]
eq("enableDnsHostnames and enableDnsSupport are on", dns, [True, True])

subs = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vid]}])["Subnets"]
got = sorted((s["AvailabilityZone"], s["CidrBlock"], tags(s).get(ROLE)) for s in subs)
want = sorted([("us-east-1a", "10.0.0.0/20", "public"), ("us-east-1b", "10.0.16.0/20", "public"),
               ("us-east-1c", "10.0.32.0/20", "public"), ("us-east-1a", "10.0.64.0/18", "private"),
               ("us-east-1b", "10.0.128.0/18", "private"), ("us-east-1c", "10.0.192.0/18", "private")])
eq("six subnets in CAPA default layout (public /20s, private /18s over us-east-1a..c)", got, want)
bad = []
for s in subs:
    t = tags(s); pub = t.get(ROLE) == "public"
    w = {OWN: "owned", ROLE: t.get(ROLE), K8S: "owned", "team": "infra",
         "Name": "c1-subnet-%s-%s" % ("public" if pub else "private", s["AvailabilityZone"]),
         ("kubernetes.io/role/elb" if pub else "kubernetes.io/role/internal-elb"): "1"}
    if t != w: bad.append((s["SubnetId"], t))
    if s["MapPublicIpOnLaunch"] != pub: bad.append((s["SubnetId"], "MapPublicIpOnLaunch", s["MapPublicIpOnLaunch"]))
eq("subnet tags (Name, role, elb role, cluster tag) and MapPublicIpOnLaunch on public ones only", bad, [])
specsubs = sorted((s["availabilityZone"], s["cidrBlock"], s["isPublic"], s["id"]) for s in o["spec"]["network"]["subnets"])
eq("spec.network.subnets records the six subnets with their IDs",
   specsubs, sorted((s["AvailabilityZone"], s["CidrBlock"], tags(s)[ROLE] == "public", s["SubnetId"]) for s in subs))
bysub = {s["SubnetId"]: s for s in subs}

igws = ec2.describe_internet_gateways(Filters=F)["InternetGateways"]
eq("one internet gateway, attached to the VPC", [[a["VpcId"] for a in g["Attachments"]] for g in igws], [[vid]])
igw = igws[0]["InternetGatewayId"]
eq("IGW tags", tags(igws[0]), {OWN: "owned", ROLE: "common", "Name": "c1-igw", "team": "infra"})

nats = [n for n in ec2.describe_nat_gateways(Filters=[{"Name": "vpc-id", "Values": [vid]}])["NatGateways"] if n["State"] != "deleted"]
eq("three NAT gateways, one in each public subnet",
   sorted(bysub[n["SubnetId"]]["AvailabilityZone"] + ":" + tags(bysub[n["SubnetId"]])[ROLE] for n in nats),
   ["us-east-1a:public", "us-east-1b:public", "us-east-1c:public"])
eq("NAT tags", [tags(n) for n in nats], [{OWN: "owned", ROLE: "common", "Name": "c1-nat", "team": "infra"}] * 3)
eips = ec2.describe_addresses(Filters=F)["Addresses"]
eq("three Elastic IPs, c1-eip-common, role common",
   [tags(a) for a in eips], [{OWN: "owned", ROLE: "common", "Name": "c1-eip-common", "team": "infra"}] * 3)
eq("each NAT uses one of them", sorted(n["NatGatewayAddresses"][0]["AllocationId"] for n in nats),
   sorted(a["AllocationId"] for a in eips))
natip = sorted(n["NatGatewayAddresses"][0]["PublicIp"] + "/32" for n in nats)
natby = {bysub[n["SubnetId"]]["AvailabilityZone"]: n["NatGatewayId"] for n in nats}

rts = ec2.describe_route_tables(Filters=F)["RouteTables"]
eq("six route tables tagged for the cluster", len(rts), 6)
bad = []
for rt in rts:
    assoc = [a["SubnetId"] for a in rt["Associations"] if a.get("SubnetId")]
    if len(assoc) != 1: bad.append((rt["RouteTableId"], "associations", assoc)); continue
    s = bysub[assoc[0]]; az = s["AvailabilityZone"]; pub = tags(s)[ROLE] == "public"
    w = {OWN: "owned", ROLE: "common", K8S: "owned", "team": "infra",
         "Name": "c1-rt-%s-%s" % ("public" if pub else "private", az)}
    if tags(rt) != w: bad.append((rt["RouteTableId"], tags(rt)))
    d = [r for r in rt["Routes"] if r.get("DestinationCidrBlock") == "0.0.0.0/0"]
    tgt = d[0].get("GatewayId") if pub else d[0].get("NatGatewayId") if d else None
    if len(d) != 1 or tgt != (igw if pub else natby[az]): bad.append((rt["RouteTableId"], d))
eq("one table per subnet: tags, one association, 0.0.0.0/0 to the IGW (public) or the zone NAT (private)", bad, [])

sgs = ec2.describe_security_groups(Filters=F)["SecurityGroups"]
byname = {g["GroupName"]: g for g in sgs}
eq("four security groups named <c>-<role>", sorted(byname), ["c1-apiserver-lb", "c1-controlplane", "c1-lb", "c1-node"])
ids = {n[3:]: g["GroupId"] for n, g in byname.items()}
bad = []
for n, g in byname.items():
    role = n[3:]
    w = {OWN: "owned", ROLE: role, "Name": n, "team": "infra"}
    if role == "lb": w[K8S] = "owned"
    if tags(g) != w: bad.append((n, tags(g)))
    if g["Description"] != "Kubernetes cluster c1: " + role or g["VpcId"] != vid: bad.append((n, g["Description"]))
eq("SG tags (cluster tag only on lb), descriptions, VPC", bad, [])
def flat(g):
    out = set()
    for p in g["IpPermissions"]:
        proto = p["IpProtocol"]
        ports = (p.get("FromPort"), p.get("ToPort")) if proto in ("tcp", "udp") else None
        for r in p.get("IpRanges", []): out.add((proto, ports, r["CidrIp"]))
        for r in p.get("UserIdGroupPairs", []): out.add((proto, ports, r["GroupId"]))
    return out
cp, nd, al = ids["controlplane"], ids["node"], ids["apiserver-lb"]
eq("controlplane ingress: 6443 from apiserver-lb/controlplane/node, etcd 2379/2380, calico BGP and IP-in-IP",
   flat(byname["c1-controlplane"]),
   {("tcp", (6443, 6443), al), ("tcp", (6443, 6443), cp), ("tcp", (6443, 6443), nd),
    ("tcp", (2379, 2379), cp), ("tcp", (2380, 2380), cp), ("tcp", (179, 179), cp), ("tcp", (179, 179), nd),
    ("4", None, cp), ("4", None, nd)})
eq("node ingress: NodePorts from 0.0.0.0/0, kubelet 10250 from controlplane and node, calico",
   flat(byname["c1-node"]),
   {("tcp", (30000, 32767), "0.0.0.0/0"), ("tcp", (10250, 10250), cp), ("tcp", (10250, 10250), nd),
    ("tcp", (179, 179), cp), ("tcp", (179, 179), nd), ("4", None, cp), ("4", None, nd)})
eq("apiserver-lb ingress: 6443 from each NAT IP /32 and from 0.0.0.0/0 (the default ingress rule)",
   flat(byname["c1-apiserver-lb"]), {("tcp", (6443, 6443), c) for c in natip + ["0.0.0.0/0"]})
eq("lb (classic) has no ingress", flat(byname["c1-lb"]), set())
eq("egress is left as EC2 made it", all(g["IpPermissionsEgress"] for g in sgs), True)

lbs = elb.describe_load_balancers(LoadBalancerNames=["c1-apiserver"])["LoadBalancerDescriptions"]
eq("one classic load balancer c1-apiserver", len(lbs), 1)
lb = lbs[0]
eq("LB: internet-facing, TCP 6443 to instance TCP 6443, the apiserver-lb group",
   (lb["Scheme"], [(l["Listener"]["Protocol"], l["Listener"]["LoadBalancerPort"], l["Listener"]["InstanceProtocol"], l["Listener"]["InstancePort"]) for l in lb["ListenerDescriptions"]], lb["SecurityGroups"]),
   ("internet-facing", [("TCP", 6443, "TCP", 6443)], [ids["apiserver-lb"]]))
eq("LB: one public subnet per zone", sorted(lb["Subnets"]), sorted(s["SubnetId"] for s in subs if tags(s)[ROLE] == "public"))
hc = lb["HealthCheck"]
eq("LB health check TCP:6443, 5 s, 4 s, 2, 6", (hc["Target"], hc["Interval"], hc["Timeout"], hc["HealthyThreshold"], hc["UnhealthyThreshold"]), ("TCP:6443", 5, 4, 2, 6))
at = elb.describe_load_balancer_attributes(LoadBalancerName="c1-apiserver")["LoadBalancerAttributes"]
eq("LB attributes: idle timeout 600 s, cross-zone off", (at["ConnectionSettings"]["IdleTimeout"], at["CrossZoneLoadBalancing"]["Enabled"]), (600, False))
lt = {t["Key"]: t["Value"] for t in elb.describe_tags(LoadBalancerNames=["c1-apiserver"])["TagDescriptions"][0]["Tags"]}
eq("LB tags: owned, role apiserver, Name", lt, {OWN: "owned", ROLE: "apiserver", "Name": "c1-apiserver", "team": "infra"})
eq("spec.controlPlaneEndpoint is the LB DNS name, port 6443", o["spec"].get("controlPlaneEndpoint"), {"host": lb["DNSName"], "port": 6443})
eq("status.networkStatus.apiServerElb names the LB", (o["status"]["networkStatus"]["apiServerElb"]["name"], o["status"]["networkStatus"]["apiServerElb"]["dnsName"]), ("c1-apiserver", lb["DNSName"]))

st = o["status"]
eq("status.networkStatus.securityGroups: the four roles with their IDs",
   {k: v["id"] for k, v in st["networkStatus"]["securityGroups"].items()}, ids)
eq("status.failureDomains: the private-subnet zones, control-plane capable",
   st["failureDomains"], {z: {"controlPlane": True} for z in ("us-east-1a", "us-east-1b", "us-east-1c")})
conds = {c["type"]: c["status"] for c in st["conditions"]}
CT = ("VpcReady", "SubnetsReady", "InternetGatewayReady", "NatGatewaysReady", "RouteTablesReady",
      "ClusterSecurityGroupsReady", "LoadBalancerReady", "Ready")
eq("conditions true: Vpc, Subnets, InternetGateway, NatGateways, RouteTables, ClusterSecurityGroups, LoadBalancer, Ready",
   {k: conds.get(k) for k in CT}, {k: "True" for k in CT})
' "$T_TMP/awsc.json"

# CAPA's create order (§3): VPC, subnets, IGW, NAT (EIP first), route tables (table, route,
# association), security groups (groups, then rules)
order_ok() { # FILE ACTION... : each action's first call comes after the previous one's last
	local f=$1 prev=0 a first last
	shift
	for a in "$@"; do
		first=$(grep -n ":$a\$" "$f" | head -1 | cut -d: -f1)
		last=$(grep -n ":$a\$" "$f" | tail -1 | cut -d: -f1)
		[ -n "$first" ] || { echo "no $a"; return 1; }
		[ "$first" -gt "$prev" ] || { echo "$a (call $first) before the previous step (call $prev)"; return 1; }
		prev=$last
	done
}
if why=$(order_ok "$T_TMP/create.calls" CreateVpc ModifyVpcAttribute CreateSubnet CreateInternetGateway \
	AttachInternetGateway AllocateAddress CreateNatGateway CreateSecurityGroup AuthorizeSecurityGroupIngress \
	CreateLoadBalancer ModifyLoadBalancerAttributes ConfigureHealthCheck); then
	ok "create order: VPC, DNS attributes, subnets, IGW, attach, EIPs, NATs, SGs and their rules, LB, its attributes and health check"
else fail "create order" "$why"; fi
rt_order=$(python3 - "$T_TMP/create.calls" <<'PY'
import sys
calls = [l.strip().split(":")[1] for l in open(sys.argv[1])]
seq = [c for c in calls if c in ("CreateRouteTable", "CreateRoute", "AssociateRouteTable")]
print("ok" if seq == ["CreateRouteTable", "CreateRoute", "AssociateRouteTable"] * 6 and
      calls.index("CreateRouteTable") > max(i for i, c in enumerate(calls) if c == "CreateNatGateway") else seq)
PY
)
[ "$rt_order" = ok ] && ok "route tables after the NATs, each: CreateRouteTable, CreateRoute, AssociateRouteTable" ||
	fail "route table order" "$rt_order"
n_create=$(wc -l <"$T_TMP/create.calls")
n_mut=$(grep -cv ':Describe' "$T_TMP/create.calls")
echo "# AWS calls to create a 3-zone cluster: $n_create ($n_mut mutating): $(cut -d: -f2 "$T_TMP/create.calls" | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}')"

# ---- idempotent: a second reconcile of the unchanged cluster ----
sleep 1
calls_reset
kc annotate awscluster "$C" -n "$NS" test/poke=1 >/dev/null
rv0=$(awsc_py 'o["metadata"]["resourceVersion"]')
settled() { [ "$(calls_log | grep -c ':DescribeSecurityGroups$')" -ge 1 ]; }
wait_until 30 settled
sleep 2
calls_log >"$T_TMP/again.calls"
n_again=$(wc -l <"$T_TMP/again.calls")
n_mut=$(grep -cv ':Describe' "$T_TMP/again.calls" || true)
rv1=$(awsc_py 'o["metadata"]["resourceVersion"]')
if [ "$n_again" -ge 1 ] && [ "$n_mut" = 0 ] && [ "$n_again" -le 12 ]; then
	ok "a second reconcile of the unchanged cluster: no mutating call, $n_again Describes (at most 12)"
else fail "a second reconcile is idempotent" "$n_again calls, $n_mut mutating: $(tr '\n' ' ' <"$T_TMP/again.calls")"; fi
[ "$rv0" = "$rv1" ] && ok "and no write of the AWSCluster (resourceVersion unchanged)" ||
	fail "no write of the AWSCluster on an unchanged reconcile" "$rv0 -> $rv1"
unfiltered=$(tb_json "$FAULTPROXY_URL/_control/calls?log=0" >/dev/null; python3 - "$T_TMP/again.calls" <<'PY'
import sys
print(sum(1 for l in open(sys.argv[1]) if l.strip().endswith("DescribeAvailabilityZones")))
PY
)
[ "$unfiltered" = 0 ] && ok "the zones are not asked again once the subnets are recorded in the spec" ||
	fail "the zones are not asked again" "$unfiltered DescribeAvailabilityZones"

# ---- a NAT gateway that is not available yet: no route is touched, and the pass is retried ----
# moto's gateways are available at once: the fault proxy answers DescribeNatGateways with the
# cluster's own gateways in state pending (three times), as EC2 does for a minute or two.
PENDING=$(moto_py '
F = [{"Name": "tag-key", "Values": ["sigs.k8s.io/cluster-api-provider-aws/cluster/c1"]}]
items = "".join("<item><natGatewayId>%s</natGatewayId><subnetId>%s</subnetId><vpcId>%s</vpcId><state>pending</state>"
    "<natGatewayAddressSet><item><allocationId>%s</allocationId><publicIp>%s</publicIp></item></natGatewayAddressSet></item>"
    % (n["NatGatewayId"], n["SubnetId"], n["VpcId"], n["NatGatewayAddresses"][0]["AllocationId"], n["NatGatewayAddresses"][0]["PublicIp"])
    for n in ec2.describe_nat_gateways(Filters=F)["NatGateways"] if n["State"] == "available")
body = "<DescribeNatGatewaysResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r</requestId><natGatewaySet>%s</natGatewaySet></DescribeNatGatewaysResponse>" % items
print(json.dumps({"service": "ec2", "action": "DescribeNatGateways", "effect": "body", "body": body, "count": 3}))
')
calls_reset
clear_faults
fault "$PENDING"
kc annotate --overwrite awscluster "$C" -n "$NS" test/poke=2 >/dev/null
nat_false() { [ "$(awsc_py '[c["status"] for c in o["status"]["conditions"] if c["type"] == "NatGatewaysReady"][0]')" = False ]; }
nat_true() { [ "$(awsc_py '[c["status"] for c in o["status"]["conditions"] if c["type"] == "NatGatewaysReady"][0]')" = True ]; }
if wait_until 30 nat_false; then ok "a pending NAT gateway: NatGatewaysReady False until it is available"
else fail "a pending NAT gateway sets NatGatewaysReady False" "$(grep -E 'NAT' "$T_TMP/capa.log" | tail -3)"; fi
if wait_until 60 nat_true; then ok "once the gateways are available the pass goes on (NatGatewaysReady True again)"
else fail "NatGatewaysReady True after the gateways are available" "$(tail -3 "$T_TMP/capa.log")"; fi
calls_log >"$T_TMP/pending.calls"
n_nat=$(grep -c ':DescribeNatGateways$' "$T_TMP/pending.calls" || true)
n_mut=$(grep -cv ':Describe' "$T_TMP/pending.calls" || true)
if [ "$n_nat" -ge 4 ] && [ "$n_mut" = 0 ] && grep -q "not available yet" "$T_TMP/capa.log"; then
	ok "while pending: no route, gateway or address is made ($n_nat DescribeNatGateways, 3 of them pending, no mutating call), and the log says why"
else fail "while pending nothing is made" "$n_nat DescribeNatGateways, $n_mut mutating: $(grep -v ':Describe' "$T_TMP/pending.calls" | tr '\n' ' ')"; fi
clear_faults

# ---- delete: reverse order, nothing left ----
calls_reset
kc delete awscluster "$C" -n "$NS" --wait=false >/dev/null
gone() { ! kc get awscluster "$C" -n "$NS" >/dev/null 2>&1; }
if wait_until 120 gone; then ok "the AWSCluster is deleted (finalizer removed once the infrastructure is gone)"
else fail "the AWSCluster is deleted" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi
calls_log >"$T_TMP/delete.calls"
moto_py_checks '
OWN = "sigs.k8s.io/cluster-api-provider-aws/cluster/c1"
F = [{"Name": "tag-key", "Values": [OWN]}]
left = {
  "vpcs": [v["VpcId"] for v in ec2.describe_vpcs(Filters=F)["Vpcs"]],
  "subnets": [s["SubnetId"] for s in ec2.describe_subnets(Filters=F)["Subnets"]],
  "igws": [g["InternetGatewayId"] for g in ec2.describe_internet_gateways(Filters=F)["InternetGateways"]],
  "nats": [n["NatGatewayId"] for n in ec2.describe_nat_gateways(Filters=F)["NatGateways"] if n["State"] != "deleted"],
  "eips": [a["AllocationId"] for a in ec2.describe_addresses(Filters=F)["Addresses"]],
  "route tables": [r["RouteTableId"] for r in ec2.describe_route_tables(Filters=F)["RouteTables"]],
  "security groups": [g["GroupId"] for g in ec2.describe_security_groups(Filters=F)["SecurityGroups"]],
  "load balancers": [l["LoadBalancerName"] for l in elb.describe_load_balancers()["LoadBalancerDescriptions"]],
}
eq("nothing tagged for the cluster is left in moto", {k: v for k, v in left.items() if v}, {})
'
if why=$(order_ok "$T_TMP/delete.calls" DeleteLoadBalancer RevokeSecurityGroupIngress DeleteSecurityGroup DeleteRouteTable \
	DeleteNatGateway ReleaseAddress DetachInternetGateway DeleteInternetGateway DeleteSubnet DeleteVpc); then
	ok "delete order: LB, SG rules, SGs, route tables, NATs, EIPs, IGW detach, IGW, subnets, VPC"
else fail "delete order" "$why"; fi
rt_del=$(python3 - "$T_TMP/delete.calls" <<'PY'
import sys
calls = [l.strip().split(":")[1] for l in open(sys.argv[1])]
seq = [c for c in calls if c in ("DisassociateRouteTable", "DeleteRouteTable")]
print("ok" if seq == ["DisassociateRouteTable", "DeleteRouteTable"] * 6 else seq)
PY
)
[ "$rt_del" = ok ] && ok "each route table is disassociated, then deleted" || fail "route table delete order" "$rt_del"
n_del=$(wc -l <"$T_TMP/delete.calls")
echo "# AWS calls to delete a 3-zone cluster: $n_del: $(cut -d: -f2 "$T_TMP/delete.calls" | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}')"

if stop_within "$(cat "$T_TMP/capa.pid")" 15 "capa"; then
	[ "$STOP_RC" = 0 ] && ok "capa stops on SIGTERM with exit 0" || fail "capa exits 0 on SIGTERM" "exit $STOP_RC"
fi

# ---- SIGKILL during creation, twice, then a restart: no duplicate ----
# the proxy holds one call (a delay); the manager is killed while it waits, so the call is never
# forwarded: the first time the second CreateSubnet (the VPC and one subnet exist, nothing is
# recorded in the spec yet), the second time the first CreateNatGateway (its EIPs exist)
C=c2
held() { # ACTION: the proxy holds a call of ACTION now
	tb_json "$FAULTPROXY_URL/_control/faults" | python3 -c "
import json, sys
print(any(r.get('action') == '$1' and r['seen'] > r.get('skip', 0) for r in json.load(sys.stdin)['rules']))" | grep -q True
}
start_capa() {
	bg "$1" "$AWS_K8S" capa --kubeconfig="$KC" --health-addr="127.0.0.1:$(free_port)" --v=2
}
calls_reset
clear_faults
fault '{"service":"ec2","action":"CreateSubnet","effect":"delay","seconds":60,"skip":1,"count":1}'
start_capa capa2
kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"$C","namespace":"$NS"},"spec":{}}
EOF
CUID=$(kc get cluster.cluster.x-k8s.io "$C" -n "$NS" -o jsonpath='{.metadata.uid}')
kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster",
 "metadata":{"name":"$C","namespace":"$NS","ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"$C","uid":"$CUID"}]},
 "spec":{"region":"us-east-1"}}
EOF
if wait_until 60 held CreateSubnet; then
	kill -KILL "$(cat "$T_TMP/capa2.pid")"
	ok "capa is SIGKILLed while its second CreateSubnet is held"
else fail "the second CreateSubnet is held" "$(tail -3 "$T_TMP/capa2.log")"; fi
clear_faults
fault '{"service":"ec2","action":"CreateNatGateway","effect":"delay","seconds":60,"count":1}'
start_capa capa3
if wait_until 60 held CreateNatGateway; then
	kill -KILL "$(cat "$T_TMP/capa3.pid")"
	ok "capa is SIGKILLed again while its first CreateNatGateway is held"
else fail "the first CreateNatGateway is held" "$(tail -3 "$T_TMP/capa3.log")"; fi
clear_faults
start_capa capa4
if wait_until 90 ready; then ok "after two SIGKILLs, the restarted manager makes the cluster ready"
else fail "ready after the restarts" "$(grep -E '^E' "$T_TMP/capa4.log" | tail -3)"; fi
moto_py_checks '
OWN = "sigs.k8s.io/cluster-api-provider-aws/cluster/c2"
F = [{"Name": "tag-key", "Values": [OWN]}]
got = {
  "vpcs": len(ec2.describe_vpcs(Filters=F)["Vpcs"]),
  "subnets": len(ec2.describe_subnets(Filters=F)["Subnets"]),
  "igws": len(ec2.describe_internet_gateways(Filters=F)["InternetGateways"]),
  "nats": len([n for n in ec2.describe_nat_gateways(Filters=F)["NatGateways"] if n["State"] != "deleted"]),
  "eips": len(ec2.describe_addresses(Filters=F)["Addresses"]),
  "route tables": len(ec2.describe_route_tables(Filters=F)["RouteTables"]),
  "security groups": len(ec2.describe_security_groups(Filters=F)["SecurityGroups"]),
}
eq("no duplicate after the kills: 1 VPC, 6 subnets, 1 IGW, 3 NATs, 3 EIPs (reused), 6 route tables, 4 SGs", got,
   {"vpcs": 1, "subnets": 6, "igws": 1, "nats": 3, "eips": 3, "route tables": 6, "security groups": 4})
'
kc delete awscluster "$C" -n "$NS" --wait=false >/dev/null
if wait_until 120 gone; then ok "the restarted cluster is deleted"
else fail "the restarted cluster is deleted" "$(grep -E '^E' "$T_TMP/capa4.log" | tail -3)"; fi
moto_py_checks '
F = [{"Name": "tag-key", "Values": ["sigs.k8s.io/cluster-api-provider-aws/cluster/c2"]}]
n = (len(ec2.describe_vpcs(Filters=F)["Vpcs"]) + len(ec2.describe_subnets(Filters=F)["Subnets"]) +
     len(ec2.describe_addresses(Filters=F)["Addresses"]) + len(ec2.describe_security_groups(Filters=F)["SecurityGroups"]) +
     len(elb.describe_load_balancers()["LoadBalancerDescriptions"]))
eq("and nothing of it is left", n, 0)
'

# ---- throttling on CreateSubnet: CAPA's token buckets (shared with the machine controller) ----
# three Throttling replies use up the client's three attempts, so the reconcile fails, the
# ec2/other bucket is emptied and a later reconcile creates the subnet once; a CreateInternetGateway
# reply without its ID is a malformed reply (the gateway is found by its tag next time); each
# failed reconcile sets Ready False with the failed step's reason (a watch records every status)
C=c3
clear_faults
calls_reset
kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"$C","namespace":"$NS"},"spec":{}}
EOF
CUID=$(kc get cluster.cluster.x-k8s.io "$C" -n "$NS" -o jsonpath='{.metadata.uid}')
kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster",
 "metadata":{"name":"$C","namespace":"$NS"},"spec":{"region":"us-east-1"}}
EOF
bg watch3 kubectl --kubeconfig "$KC" get awsclusters -n "$NS" --watch -o json --output-watch-events
wait_until 30 grep -q "\"$C\"" "$T_TMP/watch3.log"
# the watched versions of $C, one a line: name|status.ready|Ready's status/reason/severity/message
watch_lines() {
	python3 - "$T_TMP/watch3.log" "$C" <<'PY'
import json, sys
text, d, i = open(sys.argv[1]).read(), json.JSONDecoder(), 0
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    try:
        ev, i = d.raw_decode(text, i)
    except ValueError:
        break
    o = ev.get("object", ev)
    if o.get("metadata", {}).get("name") != sys.argv[2]:
        continue
    st = o.get("status", {})
    rd = [c for c in st.get("conditions", []) if c.get("type") == "Ready"]
    c = rd[0] if rd else {}
    ready = {True: "true", False: "false"}.get(st.get("ready"), "")
    print("%s|%s|%s/%s/%s/%s" % (sys.argv[2], ready, c.get("status", ""), c.get("reason", ""),
                                 c.get("severity", ""), c.get("message", "")))
PY
}
fault '[{"service":"ec2","action":"CreateSubnet","effect":"throttle","code":"Throttling","count":3},
 {"service":"ec2","action":"CreateInternetGateway","effect":"strip","element":"internetGatewayId","count":1}]'
kc patch awscluster "$C" -n "$NS" --type=merge -p "{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":\"Cluster\",\"name\":\"$C\",\"uid\":\"$CUID\"}]}}" >/dev/null
if wait_until 120 ready; then ok "throttled CreateSubnet, malformed CreateInternetGateway: the AWSCluster becomes ready later"
else fail "ready under throttling" "$(grep -E '^E' "$T_TMP/capa4.log" | tail -3)"; fi
throttles=$(tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c "import json,sys; print(json.load(sys.stdin)['calls'].get('ec2:CreateSubnet', {}).get('effects', {}).get('throttle', 0))")
check "the three CreateSubnet throttles were served (Throttling)" test "$throttles" = 3
if grep -q 'bucket="ec2/other".*action="CreateSubnet"' "$T_TMP/capa4.log"; then
	ok "the throttled call emptied CAPA's ec2/other token bucket (logged)"
else fail "the throttled call emptied the ec2/other bucket" "$(grep -iE 'throttl|CreateSubnet' "$T_TMP/capa4.log" | tail -4)"; fi
check "a CreateInternetGateway reply without its ID is an error (internet gateway reply without a internetGatewayId)" \
	grep -q 'error="internet gateway reply without a internetGatewayId"' "$T_TMP/capa4.log"
moto_py_checks '
F = [{"Name": "tag-key", "Values": ["sigs.k8s.io/cluster-api-provider-aws/cluster/c3"]}]
eq("throttling: six subnets, no duplicate", len(ec2.describe_subnets(Filters=F)["Subnets"]), 6)
eq("malformed reply: one internet gateway, no duplicate", len(ec2.describe_internet_gateways(Filters=F)["InternetGateways"]), 1)
'
watch_lines >"$T_TMP/watch3.lines"
check "Ready False while a step failed: SubnetsReconciliationFailed (Warning), status.ready not set" \
	grep -qE "^$C\|\|False/SubnetsReconciliationFailed/Warning/[0-9]+ of [0-9]+ completed" "$T_TMP/watch3.lines"
check "Ready False: InternetGatewayFailed (Warning) for the malformed reply" \
	grep -qE "^$C\|\|False/InternetGatewayFailed/Warning/" "$T_TMP/watch3.lines"
check "then Ready True with status.ready" grep -qE "^$C\|true\|True/" "$T_TMP/watch3.lines"
grep -q "^$C|true|True/" "$T_TMP/watch3.lines" || echo "# watch: $(tr '\n' ';' <"$T_TMP/watch3.lines") $(tail -c 300 "$T_TMP/watch3.log")"
clear_faults

# ---- delete: a security group already gone (InvalidGroup.NotFound) counts as deleted ----
# the first DeleteSecurityGroup is held while the cluster's groups are deleted behind capa's back
fault '{"service":"ec2","action":"DeleteSecurityGroup","effect":"delay","seconds":6,"count":1}'
kc delete awscluster "$C" -n "$NS" --wait=false >/dev/null
if wait_until 90 held DeleteSecurityGroup; then
	moto_py_checks '
F = [{"Name": "tag-key", "Values": ["sigs.k8s.io/cluster-api-provider-aws/cluster/c3"]}]
gs = [g["GroupId"] for g in ec2.describe_security_groups(Filters=F)["SecurityGroups"]]
for g in gs:
    ec2.delete_security_group(GroupId=g)
eq("the four groups are deleted behind capa", len(gs), 4)
'
else fail "the first DeleteSecurityGroup is held" "$(grep -E '^E' "$T_TMP/capa4.log" | tail -3)"; fi
if wait_until 120 gone; then ok "InvalidGroup.NotFound on DeleteSecurityGroup is ignored: the AWSCluster is deleted"
else fail "deleted despite InvalidGroup.NotFound" "$(grep -E '^E' "$T_TMP/capa4.log" | tail -3)"; fi
check "the missing groups are logged as already deleted" grep -q "security group already deleted" "$T_TMP/capa4.log"
clear_faults
t_summary
