#!/usr/bin/env bash
# tests: product
# aws-k8s capa's bastion host (../shared/reference/capa.md §5, §7, §8, §13) against moto (behind
# the fault proxy, which records every call) and the test API server: an AWSCluster with
# spec.bastion.enabled gets the <c>-bastion group (TCP 22 from allowedCIDRBlocks), TCP 22 from
# it on the control plane and the nodes, and one instance in the first public subnet (public
# IP, t2.micro in us-east-1, key "default", CAPA's tags, a ClientToken), status.bastion and
# BastionHostReady; a second reconcile and a restarted manager make no second one, nor does a
# RunInstances reply lost on the wire; disabling it terminates it and revokes the SSH rules;
# enabling it again makes a new one; the cluster's delete terminates it after the load
# balancer and before the security groups. Without spec.bastion.ami the Canonical Ubuntu 24.04
# lookup finds nothing in moto: BastionHostReady says so and no instance is run.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../lib/capa_objects.sh"

NS=default
export KUBECACHEDIR=$T_TMP/kcache
kc() { kubectl --kubeconfig "$KC" "$@"; }
calls() { # the recorded calls since the last reset, "service:action" a line
	tb_json "$FAULTPROXY_URL/_control/calls?log=100000" |
		python3 -c 'import json,sys; [print(c["service"]+":"+c["action"]) for c in json.load(sys.stdin)["log"]]'
}
calls_reset() { tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null; }
# CLUSTER PYTHON-EXPRESSION: evaluated with o = the AWSCluster
ac() { kc get awscluster "$1" -n "$NS" -o json | python3 -c "import json,sys; o=json.load(sys.stdin); print($2)"; }
cond() { ac "$1" "([c.get('status'), c.get('reason')] for c in o.get('status', {}).get('conditions', []) if c['type'] == '$2').__next__()" 2>/dev/null; }
bastion_ready() { [ "$(cond "$1" BastionHostReady)" = "['True', None]" ] && [ "$(ac "$1" 'o["status"]["bastion"]["instanceState"]')" = running ]; }
n_calls_ge() { [ "$(calls | grep -c ":$1\$")" -ge "$2" ]; }
gone() { ! kc get awscluster "$1" -n "$NS" >/dev/null 2>&1; }
# CLUSTER: the cluster's instances with role bastion that are not terminated
n_bastions() {
	moto_py "
r = ec2.describe_instances(Filters=[{'Name': 'tag:sigs.k8s.io/cluster-api-provider-aws/role', 'Values': ['bastion']},
    {'Name': 'tag:sigs.k8s.io/cluster-api-provider-aws/cluster/$1', 'Values': ['owned']}])
print(sum(1 for x in r['Reservations'] for i in x['Instances'] if i['State']['Name'] != 'terminated'))"
}
# FILE A B: the last call of A comes before the first call of B
before() {
	local a b
	a=$(grep -n ":$2\$" "$1" | tail -1 | cut -d: -f1)
	b=$(grep -n ":$3\$" "$1" | head -1 | cut -d: -f1)
	[ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]
}
# NAME SPEC-JSON: a Cluster and its AWSCluster
make_cluster() {
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"$1","namespace":"$NS"},"spec":{}}
EOF
	local uid
	uid=$(kc get cluster.cluster.x-k8s.io "$1" -n "$NS" -o jsonpath='{.metadata.uid}')
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster",
 "metadata":{"name":"$1","namespace":"$NS","ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"$1","uid":"$uid"}]},
 "spec":$2}
EOF
}
start_capa() { bg "$1" "$AWS_K8S" capa --kubeconfig="$KC" --health-addr="127.0.0.1:$(free_port)" --sync-period=10m --v=2; }

# ---- peers ----
capa_testbed_start
AMI=$(moto_py 'print(ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"])')

# ---- an enabled bastion ----
calls_reset
start_capa capa1
make_cluster b1 "{\"region\":\"us-east-1\",\"additionalTags\":{\"team\":\"infra\"},
 \"bastion\":{\"enabled\":true,\"allowedCIDRBlocks\":[\"203.0.113.0/24\",\"198.51.100.7/32\"],\"ami\":\"$AMI\"}}"
if wait_until 120 bastion_ready b1; then ok "the bastion is running and BastionHostReady is True"
else fail "the bastion becomes ready" "$(cond b1 BastionHostReady) $(grep -E '^E' "$T_TMP/capa1.log" | tail -3)"; fi
wait_until 30 test "$(ac b1 'o["status"].get("ready")')" = True
calls >"$T_TMP/create.calls"
kc get awscluster b1 -n "$NS" -o json >"$T_TMP/b1.json"
moto_py_checks '
import json
o = json.load(open(sys.argv[1])); AMI = sys.argv[2]
OWN = "sigs.k8s.io/cluster-api-provider-aws/cluster/b1"
ROLE = "sigs.k8s.io/cluster-api-provider-aws/role"
def tags(x): return {t["Key"]: t["Value"] for t in x.get("Tags", [])}
res = ec2.describe_instances(Filters=[{"Name": "tag:" + ROLE, "Values": ["bastion"]}])["Reservations"]
inst = [i for r in res for i in r["Instances"]]
eq("one bastion instance", len(inst), 1)
i = inst[0]
pub = [s for s in o["spec"]["network"]["subnets"] if s["isPublic"]][0]
eq("in the first public subnet (" + pub["availabilityZone"] + ")", i["SubnetId"], pub["id"])
eq("type t2.micro (a us-east-1 zone), the given AMI, key \"default\"",
   (i["InstanceType"], i["ImageId"], i.get("KeyName")), ("t2.micro", AMI, "default"))
eq("it has a public IP", bool(i.get("PublicIpAddress")), True)
eq("tags: owned, role bastion, Name <c>-bastion, additionalTags",
   tags(i), {OWN: "owned", ROLE: "bastion", "Name": "b1-bastion", "team": "infra"})
eq("ClientToken from the AWSCluster UID and generation",
   i.get("ClientToken", "").startswith("capa-bastion-" + o["metadata"]["uid"].replace("-", "") + "-"), True)
vols = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [i["InstanceId"]]}])["Volumes"]
eq("its volume carries the same tags", [tags(v) for v in vols], [tags(i)])
sgs = {g["GroupName"]: g for g in ec2.describe_security_groups(Filters=[{"Name": "tag-key", "Values": [OWN]}])["SecurityGroups"]}
eq("five groups: the four and b1-bastion", sorted(sgs), ["b1-apiserver-lb", "b1-bastion", "b1-controlplane", "b1-lb", "b1-node"])
bsg = sgs["b1-bastion"]
eq("b1-bastion: description and tags", (bsg["Description"], tags(bsg)),
   ("Kubernetes cluster b1: bastion", {OWN: "owned", ROLE: "bastion", "Name": "b1-bastion", "team": "infra"}))
eni_groups = [g["GroupId"] for n in i["NetworkInterfaces"] for g in n["Groups"]]
eq("the instance is in b1-bastion only", eni_groups, [bsg["GroupId"]])
def flat(g):
    out = set()
    for p in g["IpPermissions"]:
        for r in p.get("IpRanges", []): out.add((p["IpProtocol"], p.get("FromPort"), p.get("ToPort"), r["CidrIp"]))
        for r in p.get("UserIdGroupPairs", []): out.add((p["IpProtocol"], p.get("FromPort"), p.get("ToPort"), r["GroupId"]))
    return out
eq("b1-bastion ingress: TCP 22 from each allowedCIDRBlock", flat(bsg),
   {("tcp", 22, 22, "203.0.113.0/24"), ("tcp", 22, 22, "198.51.100.7/32")})
for role in ("controlplane", "node"):
    eq("b1-%s: TCP 22 from b1-bastion" % role, ("tcp", 22, 22, bsg["GroupId"]) in flat(sgs["b1-" + role]), True)
eq("the apiserver-lb and lb groups get no SSH rule",
   [r for n in ("b1-apiserver-lb", "b1-lb") for r in flat(sgs[n]) if r[1] == 22], [])
b = o["status"]["bastion"]
eq("status.bastion: id, state, type, subnet, image, key, group, IPs",
   (b["id"], b["instanceState"], b["type"], b["subnetId"], b["imageId"], b["sshKeyName"], b["securityGroupIds"], b["privateIp"], b["publicIp"]),
   (i["InstanceId"], "running", "t2.micro", pub["id"], AMI, "default", [bsg["GroupId"]], i["PrivateIpAddress"], i["PublicIpAddress"]))
eq("status.networkStatus.securityGroups.bastion", o["status"]["networkStatus"]["securityGroups"]["bastion"]["id"], bsg["GroupId"])
' "$T_TMP/b1.json" "$AMI"
if before "$T_TMP/create.calls" AuthorizeSecurityGroupIngress RunInstances && before "$T_TMP/create.calls" RunInstances CreateLoadBalancer; then
	ok "create order: security groups and their rules, the bastion, then the load balancer"
else fail "create order" "$(grep -nE 'RunInstances|AuthorizeSecurityGroupIngress|CreateLoadBalancer' "$T_TMP/create.calls" | tr '\n' ' ')"; fi
check "one RunInstances for the bastion" test "$(grep -c ':RunInstances$' "$T_TMP/create.calls")" = 1

# ---- again, and a restarted manager: no second bastion, nothing changed ----
calls_reset
kc annotate awscluster b1 -n "$NS" test/poke=1 >/dev/null
wait_until 30 n_calls_ge DescribeInstances 1
sleep 1
if stop_within "$(cat "$T_TMP/capa1.pid")" 30 capa1; then
	check "capa stops on SIGTERM with exit 0" test "$STOP_RC" = 0
fi
start_capa capa2
wait_until 30 n_calls_ge DescribeInstances 2
sleep 1
calls >"$T_TMP/again.calls"
n_mut=$(grep -cv ':Describe' "$T_TMP/again.calls" || true)
check "a second reconcile, then a restarted manager: no mutating call ($(wc -l <"$T_TMP/again.calls") Describes)" test "$n_mut" = 0
check "still one bastion" test "$(n_bastions b1)" = 1

# ---- disabled: terminated, SSH rules revoked ----
calls_reset
kc patch awscluster b1 -n "$NS" --type=merge -p '{"spec":{"bastion":{"enabled":false}}}' >/dev/null
disabled() { [ "$(cond b1 BastionHostReady)" = "['False', 'Deleted']" ] && [ "$(ac b1 '"bastion" in o["status"]')" = False ]; }
if wait_until 60 disabled; then ok "disabled: status.bastion is dropped, BastionHostReady False/Deleted"
else fail "disabled bastion" "$(cond b1 BastionHostReady) $(grep -E '^E' "$T_TMP/capa2.log" | tail -3)"; fi
check "disabled: the bastion is terminated" test "$(n_bastions b1)" = 0
check "disabled: one TerminateInstances" test "$(calls | grep -c ':TerminateInstances$')" = 1
moto_py_checks '
OWN = "sigs.k8s.io/cluster-api-provider-aws/cluster/b1"
sgs = {g["GroupName"]: g for g in ec2.describe_security_groups(Filters=[{"Name": "tag-key", "Values": [OWN]}])["SecurityGroups"]}
bid = sgs["b1-bastion"]["GroupId"]
eq("disabled: no rule names b1-bastion any more, and it has no ingress",
   ([n for n, g in sgs.items() for p in g["IpPermissions"] for u in p.get("UserIdGroupPairs", []) if u["GroupId"] == bid],
    sgs["b1-bastion"]["IpPermissions"]), ([], []))
'

# ---- enabled again: a new one (the client token follows the generation) ----
kc patch awscluster b1 -n "$NS" --type=merge -p '{"spec":{"bastion":{"enabled":true}}}' >/dev/null
if wait_until 60 bastion_ready b1; then ok "enabled again: a bastion is running"
else fail "re-enabled bastion" "$(cond b1 BastionHostReady) $(grep -E '^E' "$T_TMP/capa2.log" | tail -3)"; fi
check "enabled again: one bastion, a new instance" test "$(n_bastions b1)" = 1
moto_py_checks '
import json
o = json.load(open(sys.argv[1]))
OWN = "sigs.k8s.io/cluster-api-provider-aws/cluster/b1"
sgs = {g["GroupName"]: g for g in ec2.describe_security_groups(Filters=[{"Name": "tag-key", "Values": [OWN]}])["SecurityGroups"]}
eq("enabled again: TCP 22 from the allowedCIDRBlocks again",
   sorted(r["CidrIp"] for p in sgs["b1-bastion"]["IpPermissions"] for r in p.get("IpRanges", [])),
   ["198.51.100.7/32", "203.0.113.0/24"])
' "$T_TMP/b1.json"

# ---- delete: the bastion after the load balancer, before the groups ----
calls_reset
kc delete awscluster b1 -n "$NS" --wait=false >/dev/null
if wait_until 120 gone b1; then ok "the AWSCluster is deleted"
else fail "the AWSCluster is deleted" "$(grep -E '^E' "$T_TMP/capa2.log" | tail -3)"; fi
calls >"$T_TMP/delete.calls"
if before "$T_TMP/delete.calls" DeleteLoadBalancer TerminateInstances && before "$T_TMP/delete.calls" TerminateInstances RevokeSecurityGroupIngress &&
	before "$T_TMP/delete.calls" TerminateInstances DeleteSecurityGroup; then
	ok "delete order: load balancer, bastion, then the security groups"
else fail "delete order" "$(grep -nE 'DeleteLoadBalancer|TerminateInstances|RevokeSecurityGroupIngress|DeleteSecurityGroup' "$T_TMP/delete.calls" | tr '\n' ' ')"; fi
check "deleted: no bastion is left" test "$(n_bastions b1)" = 0
moto_py_checks '
F = [{"Name": "tag-key", "Values": ["sigs.k8s.io/cluster-api-provider-aws/cluster/b1"]}]
eq("deleted: no security group or VPC of the cluster is left",
   (len(ec2.describe_security_groups(Filters=F)["SecurityGroups"]), len(ec2.describe_vpcs(Filters=F)["Vpcs"])), (0, 0))
'

# ---- a RunInstances reply lost on the wire, then a SIGKILL while it is held: one bastion ----
fault '{"service":"ec2","action":"RunInstances","effect":"truncate","length":"full","count":1}'
make_cluster b2 "{\"region\":\"us-east-1\",\"bastion\":{\"enabled\":true,\"ami\":\"$AMI\"}}"
if wait_until 120 bastion_ready b2; then ok "b2: a bastion whose RunInstances reply was lost becomes ready"
else fail "b2 bastion ready" "$(cond b2 BastionHostReady) $(grep -E '^E' "$T_TMP/capa2.log" | tail -3)"; fi
check "b2: a lost RunInstances reply leaves exactly one bastion" test "$(n_bastions b2)" = 1
moto_py_checks '
OWN = "sigs.k8s.io/cluster-api-provider-aws/cluster/b2"
g = ec2.describe_security_groups(Filters=[{"Name": "tag-key", "Values": [OWN]}, {"Name": "group-name", "Values": ["b2-bastion"]}])["SecurityGroups"]
eq("b2: without allowedCIDRBlocks, TCP 22 from 0.0.0.0/0",
   [(p["IpProtocol"], p["FromPort"], r["CidrIp"]) for p in g[0]["IpPermissions"] for r in p["IpRanges"]], [("tcp", 22, "0.0.0.0/0")])
'
clear_faults
kc delete awscluster b2 -n "$NS" --wait=false >/dev/null
held() {
	tb_json "$FAULTPROXY_URL/_control/faults" | python3 -c "
import json, sys
print(any(r.get('action') == 'RunInstances' and r['seen'] > 0 for r in json.load(sys.stdin)['rules']))" | grep -q True
}
wait_until 120 gone b2
fault '{"service":"ec2","action":"RunInstances","effect":"delay","seconds":60,"count":1}'
make_cluster b3 "{\"region\":\"us-east-1\",\"bastion\":{\"enabled\":true,\"ami\":\"$AMI\"}}"
if wait_until 120 held; then
	kill -KILL "$(cat "$T_TMP/capa2.pid")"
	ok "b3: capa is SIGKILLed while its RunInstances is held"
else fail "b3: RunInstances is held" "$(tail -3 "$T_TMP/capa2.log")"; fi
clear_faults
start_capa capa3
if wait_until 120 bastion_ready b3; then ok "b3: after the SIGKILL, the restarted manager makes the bastion ready"
else fail "b3 bastion ready" "$(cond b3 BastionHostReady) $(grep -E '^E' "$T_TMP/capa3.log" | tail -3)"; fi
check "b3: exactly one bastion" test "$(n_bastions b3)" = 1
kc delete awscluster b3 -n "$NS" --wait=false >/dev/null
check "b3 is deleted" wait_until 120 gone b3
check "b3: no bastion is left" test "$(n_bastions b3)" = 0

# ---- no AMI given: the Canonical lookup finds nothing in moto ----
calls_reset
make_cluster b4 '{"region":"us-east-1","bastion":{"enabled":true,"instanceType":"t3.small"}}'
noami() { cond b4 BastionHostReady | grep -q "'False', 'BastionHostFailed'"; }
if wait_until 120 noami; then ok "b4: no Ubuntu 24.04 image: BastionHostReady False/BastionHostFailed"
else fail "b4: the failed lookup shows" "$(cond b4 BastionHostReady) $(grep -E '^E' "$T_TMP/capa3.log" | tail -3)"; fi
msg=$(ac b4 "[c.get('message', '') for c in o['status']['conditions'] if c['type'] == 'BastionHostReady'][0]")
case $msg in
*"owner 099720109477"*"ubuntu-noble-24.04-amd64-server-*"*) ok "b4: the message names the owner and the image name ($msg)" ;;
*) fail "b4: the message names the lookup" "$msg" ;;
esac
check "b4: no RunInstances" test "$(calls | grep -c ':RunInstances$')" = 0
check "b4: the cluster is not ready" test "$(ac b4 'o["status"].get("ready")')" != True
kc patch awscluster b4 -n "$NS" --type=merge -p "{\"spec\":{\"bastion\":{\"ami\":\"$(moto_py 'print(ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"])' 2>/dev/null)\"}}}" >/dev/null
if wait_until 120 bastion_ready b4; then ok "b4: given an AMI, the bastion comes up"
else fail "b4: bastion with an AMI" "$(cond b4 BastionHostReady)"; fi
check "b4: the given instanceType t3.small (not t2.micro)" test "$(ac b4 'o["status"]["bastion"]["type"]')" = t3.small
kc delete awscluster b4 -n "$NS" --wait=false >/dev/null
check "b4 is deleted" wait_until 120 gone b4

if stop_within "$(cat "$T_TMP/capa3.pid")" 30 capa3; then
	check "capa stops on SIGTERM with exit 0" test "$STOP_RC" = 0
fi
t_summary
