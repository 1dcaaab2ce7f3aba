#!/usr/bin/env bash
# tests: product
# aws-k8s capa's presets of Deckhouse's layouts (the annotation aws-k8s.deckhouse.io/layout on an
# AWSCluster, ../shared/reference/ccm-and-discoverer.md "Terraform layout"): WithoutNAT makes
# one public subnet per zone (Terraform's cut), routes to the internet gateway and no NAT
# gateway or Elastic IP; WithNAT makes public and private subnets, a NAT gateway per zone and
# sets spec.bastion.enabled; an explicit spec wins over the preset; an unknown layout is a
# clear condition and nothing is made. Each cluster is deleted with nothing left.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../lib/capa_objects.sh"

NS=default
export KUBECACHEDIR=$T_TMP/kcache
kc() { kubectl --kubeconfig "$KC" "$@"; }
awsc_py() { kc get awscluster "$1" -n "$NS" -o json | python3 -c "import json,sys; o=json.load(sys.stdin); print($2)"; }

capa_testbed_start
HPORT=$(free_port)
bg capa "$AWS_K8S" capa --kubeconfig="$KC" --health-addr="127.0.0.1:$HPORT" --sync-period=10m --v=2
if wait_http "http://127.0.0.1:$HPORT/healthz" 20; then ok "capa starts"; else fail "capa starts" "$(tail -5 "$T_TMP/capa.log")"; fi

cluster() { # NAME LAYOUT SPEC-JSON
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"$1","namespace":"$NS"},"spec":{}}
EOF
	local uid
	uid=$(kc get cluster.cluster.x-k8s.io "$1" -n "$NS" -o jsonpath='{.metadata.uid}')
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster",
 "metadata":{"name":"$1","namespace":"$NS","annotations":{"aws-k8s.deckhouse.io/layout":"$2"},
  "ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"$1","uid":"$uid"}]},
 "spec":$3}
EOF
}
ready() { [ "$(awsc_py "$1" 'o.get("status", {}).get("ready")')" = True ]; }
gone() { ! kc get awscluster "$1" -n "$NS" >/dev/null 2>&1; }

# the four clusters at once (the manager reconciles them side by side)
cluster wo WithoutNAT '{"region":"us-east-1"}'
# WithNAT enables the bastion: moto has no Canonical Ubuntu 24.04 image to find, so it is given one
BASTION_AMI=$(moto_py 'print(ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"])')
cluster wn WithNAT "{\"region\":\"us-east-1\",\"bastion\":{\"ami\":\"$BASTION_AMI\"}}"
cluster ex WithNAT '{"region":"us-east-1","bastion":{"enabled":false},"network":{"vpc":{"cidrBlock":"10.5.0.0/16"},"subnets":[
 {"availabilityZone":"us-east-1a","cidrBlock":"10.5.0.0/24","isPublic":true},{"availabilityZone":"us-east-1a","cidrBlock":"10.5.1.0/24","isPublic":false}]}}'
cluster bad Standard '{"region":"us-east-1"}'
for c in wo wn ex; do
	if wait_until 120 ready $c; then ok "the $c cluster becomes ready"
	else fail "the $c cluster becomes ready" "$(awsc_py $c 'o.get("status")' | head -c 400)"; fi
done
bad_cond() { awsc_py bad '[(c["status"], c.get("reason"), c.get("message")) for c in o.get("status", {}).get("conditions", []) if c["type"] == "VpcReady"]'; }
has_bad() { [[ "$(bad_cond)" == *False* ]]; }
wait_until 30 has_bad
case $(bad_cond) in
*"'False', 'InvalidLayout'"*'unknown layout "Standard"'*WithoutNAT*WithNAT*) ok "an unknown layout: VpcReady False, InvalidLayout, naming the value and the layouts" ;;
*) fail "an unknown layout gives a clear condition" "$(bad_cond)" ;;
esac
for c in wo wn ex bad; do kc get awscluster $c -n "$NS" -o json >"$T_TMP/$c.json"; done

moto_py_checks '
import json
T = sys.argv[1]
def obj(c): return json.load(open("%s/%s.json" % (T, c)))
def own(c): return [{"Name": "tag-key", "Values": ["sigs.k8s.io/cluster-api-provider-aws/cluster/" + c]}]
ROLE = "sigs.k8s.io/cluster-api-provider-aws/role"
def tags(x): return {t["Key"]: t["Value"] for t in x.get("Tags", [])}
def net(c):
    vpc = ec2.describe_vpcs(Filters=own(c))["Vpcs"]
    subs = ec2.describe_subnets(Filters=own(c))["Subnets"]
    # (moto ignores a tag-key filter on NAT gateways: by the VPC)
    nats = [n for n in ec2.describe_nat_gateways(Filters=[{"Name": "vpc-id", "Values": [v["VpcId"] for v in vpc]}])["NatGateways"]
            if n["State"] != "deleted"] if vpc else []
    eips = ec2.describe_addresses(Filters=own(c))["Addresses"]
    rts = ec2.describe_route_tables(Filters=own(c))["RouteTables"]
    igw = [g["InternetGatewayId"] for g in ec2.describe_internet_gateways(Filters=own(c))["InternetGateways"]]
    return vpc, subs, nats, eips, rts, igw
def default_routes(rts):
    out = {}
    for rt in rts:
        sub = [a["SubnetId"] for a in rt["Associations"] if a.get("SubnetId")]
        d = [r for r in rt["Routes"] if r.get("DestinationCidrBlock") == "0.0.0.0/0"]
        out[sub[0] if sub else rt["RouteTableId"]] = d[0].get("GatewayId") or d[0].get("NatGatewayId") if d else None
    return out

# WithoutNAT
o = obj("wo")
vpc, subs, nats, eips, rts, igw = net("wo")
eq("WithoutNAT: one VPC 10.0.0.0/16", [v["CidrBlock"] for v in vpc], ["10.0.0.0/16"])
eq("WithoutNAT: one public subnet per zone, cut as Terraform cuts (/19 blocks 0..2)",
   sorted((s["AvailabilityZone"], s["CidrBlock"], tags(s)[ROLE], s["MapPublicIpOnLaunch"]) for s in subs),
   [("us-east-1a", "10.0.0.0/19", "public", True), ("us-east-1b", "10.0.32.0/19", "public", True),
    ("us-east-1c", "10.0.64.0/19", "public", True)])
eq("WithoutNAT: no NAT gateway and no Elastic IP", (len(nats), len(eips)), (0, 0))
eq("WithoutNAT: each subnet has its route table with 0.0.0.0/0 to the internet gateway",
   default_routes(rts), {s["SubnetId"]: igw[0] for s in subs})
eq("WithoutNAT: spec.network.subnets records the three public subnets",
   sorted((s["availabilityZone"], s["cidrBlock"], s["isPublic"]) for s in o["spec"]["network"]["subnets"]),
   [("us-east-1a", "10.0.0.0/19", True), ("us-east-1b", "10.0.32.0/19", True), ("us-east-1c", "10.0.64.0/19", True)])
eq("WithoutNAT: no bastion asked for", o["spec"].get("bastion"), None)
eq("WithoutNAT: failure domains are the three zones (of the public subnets)",
   sorted(o["status"]["failureDomains"]), ["us-east-1a", "us-east-1b", "us-east-1c"])

# WithNAT
o = obj("wn")
vpc, subs, nats, eips, rts, igw = net("wn")
eq("WithNAT: public and private subnets per zone (/19 blocks 0..2 public, 3..5 private)",
   sorted((s["AvailabilityZone"], s["CidrBlock"], tags(s)[ROLE]) for s in subs),
   sorted([("us-east-1a", "10.0.0.0/19", "public"), ("us-east-1b", "10.0.32.0/19", "public"),
           ("us-east-1c", "10.0.64.0/19", "public"), ("us-east-1a", "10.0.96.0/19", "private"),
           ("us-east-1b", "10.0.128.0/19", "private"), ("us-east-1c", "10.0.160.0/19", "private")]))
pub = {s["SubnetId"] for s in subs if tags(s)[ROLE] == "public"}
eq("WithNAT: a NAT gateway with its Elastic IP in each public subnet",
   (sorted(n["SubnetId"] for n in nats), len(eips)), (sorted(pub), 3))
natids = {n["NatGatewayId"] for n in nats}
r = default_routes(rts)
eq("WithNAT: public subnets route to the IGW, private ones to a NAT gateway",
   sorted((s in pub, (t == igw[0]) if s in pub else (t in natids)) for s, t in r.items()),
   [(False, True)] * 3 + [(True, True)] * 3)
eq("WithNAT: spec.bastion.enabled is set", o["spec"].get("bastion", {}).get("enabled"), True)
eq("WithNAT: the bastion host runs", (o["status"].get("bastion", {}).get("instanceState"),
   [c["status"] for c in o["status"]["conditions"] if c["type"] == "BastionHostReady"]), ("running", ["True"]))

# explicit spec wins
o = obj("ex")
vpc, subs, nats, eips, rts, igw = net("ex")
eq("explicit spec over WithNAT: the VPC CIDR and the two subnets given are made, no others",
   ([v["CidrBlock"] for v in vpc], sorted((s["AvailabilityZone"], s["CidrBlock"]) for s in subs)),
   (["10.5.0.0/16"], [("us-east-1a", "10.5.0.0/24"), ("us-east-1a", "10.5.1.0/24")]))
eq("explicit spec: one NAT gateway (one zone)", len(nats), 1)
eq("explicit spec: spec.bastion.enabled=false stays false", o["spec"].get("bastion"), {"enabled": False})

# unknown layout
o = obj("bad")
vpc, subs, nats, eips, rts, igw = net("bad")
sgs = ec2.describe_security_groups(Filters=own("bad"))["SecurityGroups"]
eq("an unknown layout: nothing is made (no VPC, subnet, gateway, route table, security group)",
   [len(x) for x in (vpc, subs, nats, eips, rts, igw, sgs)], [0] * 7)
eq("an unknown layout: not ready, spec.network not filled",
   (o.get("status", {}).get("ready"), o["spec"].get("network", {}).get("subnets")), (None, None))
' "$T_TMP"

# a second reconcile of a preset cluster writes nothing (the preset is not applied again)
kc annotate awscluster wn -n "$NS" test/poke=1 >/dev/null
rv0=$(awsc_py wn 'o["metadata"]["resourceVersion"]')
sleep 3
rv1=$(awsc_py wn 'o["metadata"]["resourceVersion"]')
[ "$rv0" = "$rv1" ] && ok "a second reconcile of the WithNAT cluster writes nothing (resourceVersion $rv0)" ||
	fail "no write on a second reconcile" "$rv0 -> $rv1: $(awsc_py wn 'o["spec"]')"

for c in wo wn ex bad; do kc delete awscluster $c -n "$NS" --wait=false >/dev/null; done
for c in wo wn ex bad; do
	wait_until 120 gone $c || fail "the $c cluster is deleted" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"
done
gone wo && gone wn && gone ex && gone bad && ok "the four clusters are deleted"
moto_py_checks '
left = {}
for c in ("wo", "wn", "ex", "bad"):
    F = [{"Name": "tag-key", "Values": ["sigs.k8s.io/cluster-api-provider-aws/cluster/" + c]}]
    n = (len(ec2.describe_vpcs(Filters=F)["Vpcs"]) + len(ec2.describe_subnets(Filters=F)["Subnets"]) +
         len(ec2.describe_addresses(Filters=F)["Addresses"]) + len(ec2.describe_security_groups(Filters=F)["SecurityGroups"]) +
         len(ec2.describe_route_tables(Filters=F)["RouteTables"]))
    if n: left[c] = n
nats = [x["NatGatewayId"] for x in ec2.describe_nat_gateways()["NatGateways"] if x["State"] != "deleted"]
eq("nothing of the four clusters is left (VPC, subnet, EIP, SG, route table, NAT, LB)",
   (left, nats, len(elb.describe_load_balancers()["LoadBalancerDescriptions"])), ({}, [], 0))
'
if stop_within "$(cat "$T_TMP/capa.pid")" 15 capa; then
	[ "$STOP_RC" = 0 ] && ok "capa stops on SIGTERM with exit 0" || fail "capa exits 0 on SIGTERM" "exit $STOP_RC"
fi
t_summary
