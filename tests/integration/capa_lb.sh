#!/usr/bin/env bash
# tests: product
# aws-k8s capa and the API load balancer, against moto (behind the fault proxy, which records
# every call) and the test API server.
# Part 1, control-plane machines in a classic ELB: the test makes the network and a classic ELB
# with subnets in us-east-1a and 1b, and writes them into an AWSCluster's spec and status (the
# AWSCluster has no owner Cluster, so the cluster controller leaves it alone). A control-plane
# machine in 1a is registered (ELBAttached True), a worker is not, a control-plane machine in 1c
# is refused (ELBAttached False, ELBAttachFailed); a re-reconcile makes no Register call; the
# delete of the control-plane AWSMachine deregisters its instance before terminating it.
# Part 2, loadBalancerType nlb, made by the cluster controller with its network: the NLB, its
# target group, listener, health check, attribute, tags, status and endpoint, the lb group's
# rule; a re-reconcile makes two ELBv2 reads and no write; a restart does not make a second
# target group; a control-plane machine is registered as a target and deregistered by its
# delete; the cluster's delete leaves nothing. Part 3, loadBalancerType disabled: no load
# balancer, the endpoint from the spec.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../lib/capa_objects.sh"

C=c1
NS=default
export KUBECACHEDIR=$T_TMP/kcache
kc() { kubectl --kubeconfig "$KC" "$@"; }
calls_reset() { tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null; }
calls() { tb_json "$FAULTPROXY_URL/_control/calls?log=${1:-0}"; }
# count ACTION (service:action): calls since the last reset
count() { calls | python3 -c "import json,sys; print(json.load(sys.stdin)['counts'].get('$1', 0))"; }
am_py() { kc get awsmachine "$1" -n "$NS" -o json | python3 -c "import json,sys; o=json.load(sys.stdin); print($2)"; }
am_gone() { ! kc get awsmachine "$1" -n "$NS" >/dev/null 2>&1; }
am_cond() { am_py "$1" "{c['type']: c for c in o.get('status',{}).get('conditions',[])}.get('$2',{}).get('${3:-status}')" 2>/dev/null; }
elb_instances() { moto_py 'print(" ".join(sorted(i["InstanceId"] for i in client("elb").describe_load_balancers(LoadBalancerNames=[sys.argv[1]])["LoadBalancerDescriptions"][0]["Instances"])))' "$1"; }

# ---- peers ----
capa_testbed_start

# ---- the network and a classic ELB in 1a and 1b, made by the test in moto ----
moto_py '
vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
out = {"vpc": vpc, "subnets": {}, "sgs": {}}
for i, az in enumerate(["us-east-1a", "us-east-1b", "us-east-1c"]):
    out["subnets"][az] = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.%d.0/24" % (64 + i),
                                           AvailabilityZone=az)["Subnet"]["SubnetId"]
for role in ["node", "lb", "controlplane", "apiserver-lb"]:
    out["sgs"][role] = ec2.create_security_group(GroupName="c1-" + role, Description=role,
                                                 VpcId=vpc)["GroupId"]
iam.create_instance_profile(InstanceProfileName="control-plane.cluster-api-provider-aws.sigs.k8s.io")
img = ec2.describe_images(Owners=["amazon"])["Images"]
out["ami"] = img[0]["ImageId"]
client("elb").create_load_balancer(LoadBalancerName="c1-apiserver", Scheme="internal",
    Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 6443, "InstanceProtocol": "TCP", "InstancePort": 6443}],
    Subnets=[out["subnets"]["us-east-1a"], out["subnets"]["us-east-1b"]],
    SecurityGroups=[out["sgs"]["apiserver-lb"]])
json.dump(out, open(sys.argv[1], "w"))
' "$T_TMP/net.json"
net() { python3 -c "import json,sys; o=json.load(open('$T_TMP/net.json')); print($1)"; }
AMI=$(net 'o["ami"]')
peer check "the test's VPC, subnets, groups, instance profile and classic ELB exist in moto" \
	test "$(elb_instances c1-apiserver)" = ""

kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"$C","namespace":"$NS"},
 "spec":{"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster","name":"$C"}}}
EOF
python3 - "$T_TMP/net.json" >"$T_TMP/awscluster.json" <<'EOF'
import json, sys
n = json.load(open(sys.argv[1]))
print(json.dumps({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSCluster",
  "metadata": {"name": "c1", "namespace": "default", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
  "spec": {"region": "us-east-1", "controlPlaneLoadBalancer": {"scheme": "internal"},
           "network": {"vpc": {"id": n["vpc"]}, "subnets": [
               {"resourceID": s, "id": s, "availabilityZone": az, "isPublic": False, "cidrBlock": "10.0.0.0/24"}
               for az, s in sorted(n["subnets"].items())]}}}))
EOF
kc apply -f "$T_TMP/awscluster.json" >/dev/null
SGS_JSON=$(net 'json.dumps({r: {"id": i, "name": "c1-" + r} for r, i in o["sgs"].items()})')
kc patch awscluster "$C" -n "$NS" --subresource=status --type=merge \
	-p "{\"status\":{\"ready\":true,\"networkStatus\":{\"securityGroups\":$SGS_JSON,\"apiServerElb\":{\"name\":\"c1-apiserver\",\"loadBalancerType\":\"classic\"}}}}" >/dev/null
peer check "the AWSCluster's status (ready, groups, apiServerElb) is written by the test" \
	test "$(kc get awscluster "$C" -n "$NS" -o jsonpath='{.status.networkStatus.apiServerElb.name}')" = c1-apiserver

printf '#cloud-config\n' >"$T_TMP/boot.txt"
kc create secret generic "$C-bootstrap" -n "$NS" --from-file=value="$T_TMP/boot.txt" >/dev/null

# machine NAME ZONE ROLE(cp|md): the Machine (owner) and the AWSMachine
machine() {
	local name=$1 zone=$2 role=$3 labels muid
	labels="\"cluster.x-k8s.io/cluster-name\":\"$C\""
	[ "$role" = cp ] && labels="$labels,\"cluster.x-k8s.io/control-plane\":\"\""
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Machine","metadata":{"name":"$name","namespace":"$NS","labels":{$labels}},
 "spec":{"clusterName":"$C","failureDomain":"$zone","bootstrap":{"dataSecretName":"$C-bootstrap"},
  "infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSMachine","name":"$name"}}}
EOF
	muid=$(kc get machine.cluster.x-k8s.io "$name" -n "$NS" -o jsonpath='{.metadata.uid}')
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSMachine",
 "metadata":{"name":"$name","namespace":"$NS","labels":{$labels},
  "ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Machine","name":"$name","uid":"$muid"}]},
 "spec":{"instanceType":"t3.large","ami":{"id":"$AMI"},"sshKeyName":"",
  "iamInstanceProfile":"control-plane.cluster-api-provider-aws.sigs.k8s.io",
  "cloudInit":{"insecureSkipSecretsManager":true}}}
EOF
}
am_id() { kc get awsmachine "$1" -n "$NS" -o jsonpath='{.spec.instanceID}'; }

# ---- the manager ----
HPORT=$(free_port)
bg capa "$AWS_K8S" capa --kubeconfig="$KC" --health-addr="127.0.0.1:$HPORT" --sync-period=2s \
	--awsmachine-concurrency=3 --v=2
if wait_http "http://127.0.0.1:$HPORT/healthz" 20; then
	ok "capa starts"
else
	fail "capa starts" "$(tail -5 "$T_TMP/capa.log")"
	t_summary
fi

# ---- part 1: classic ELB attachment ----
machine "$C-cp-0" us-east-1a cp
machine "$C-md-0" us-east-1b md
attached() { [ "$(am_cond "$C-cp-0" ELBAttached)" = True ]; }
md_ready() { [ "$(am_py "$C-md-0" 'o.get("status",{}).get("ready")' 2>/dev/null)" = True ]; }
if wait_until 60 attached && wait_until 30 md_ready; then
	ok "the control-plane AWSMachine gets ELBAttached True"
else
	fail "ELBAttached True" "$(kc get awsmachine "$C-cp-0" -n "$NS" -o jsonpath='{.status}'; tail -5 "$T_TMP/capa.log")"
fi
CP0=$(am_id "$C-cp-0")
MD0=$(am_id "$C-md-0")
check "moto's ELB has the control-plane instance, and only it (not the worker)" \
	test "$(elb_instances c1-apiserver)" = "$CP0"
check "the worker AWSMachine has no ELBAttached condition" test "$(am_cond "$C-md-0" ELBAttached)" = None
check "the worker's instance exists (it was made, only not registered)" test -n "$MD0"

# a re-reconcile of the unchanged machines: reads only
calls_reset
two_passes() { [ "$(count ec2:DescribeInstances)" -ge 4 ] && [ "$(count elb:DescribeLoadBalancers)" -ge 2 ]; }
wait_until 30 two_passes
calls >"$T_TMP/resync.json"
check "a re-reconcile of a registered machine makes no RegisterInstancesWithLoadBalancer call" \
	test "$(count elb:RegisterInstancesWithLoadBalancer)" = 0
python3 -c '
import json,sys
c = json.load(open(sys.argv[1]))["counts"]
n = c.get("elb:DescribeLoadBalancers", 0)
print("figure: classic, calls of the re-reconciles seen (%d of the control-plane machine): %s" % (n,
      ", ".join("%s %d" % (k, v) for k, v in sorted(c.items()))))' "$T_TMP/resync.json"

# a control-plane machine in a zone the ELB has no subnet in
machine "$C-cp-1" us-east-1c cp
refused() { [ "$(am_cond "$C-cp-1" ELBAttached reason)" = ELBAttachFailed ]; }
if wait_until 60 refused; then
	ok "a control-plane machine in us-east-1c (no ELB subnet there): ELBAttached False, ELBAttachFailed"
else
	fail "ELBAttachFailed" "$(kc get awsmachine "$C-cp-1" -n "$NS" -o jsonpath='{.status.conditions}')"
fi
check "its condition says False with the zone in the message" \
	test "$(am_cond "$C-cp-1" ELBAttached)/$(am_cond "$C-cp-1" ELBAttached message | grep -c us-east-1c)" = False/1
check "moto's ELB still has only the first control-plane instance" \
	test "$(elb_instances c1-apiserver)" = "$CP0"

# delete: deregister, then terminate
calls_reset
kc delete awsmachine "$C-cp-0" -n "$NS" --wait=false >/dev/null
if wait_until 60 am_gone "$C-cp-0"; then
	ok "the deleted control-plane AWSMachine goes"
else
	fail "the control-plane AWSMachine goes" "$(tail -5 "$T_TMP/capa.log")"
fi
check "moto's ELB has no instance left" test "$(elb_instances c1-apiserver)" = ""
calls 500 | python3 -c '
import json,sys
log = [e["api"] + ":" + e["action"] for e in json.load(sys.stdin)["log"]]
d = [i for i, a in enumerate(log) if a == "elb:DeregisterInstancesFromLoadBalancer"]
t = [i for i, a in enumerate(log) if a == "ec2:TerminateInstances"]
sys.exit(0 if len(d) == 1 and t and d[0] < t[0] else 1)' &&
	ok "one DeregisterInstancesFromLoadBalancer, before TerminateInstances" ||
	fail "deregister before terminate" "$(calls 500 | head -c 600)"


# ---- part 2: an NLB API load balancer, made by the cluster controller (namespace ns2) ----
stop_within "$(cat "$T_TMP/capa.pid")" 20 "capa stops on SIGTERM"
start_capa() {
	bg "capa$1" "$AWS_K8S" capa --kubeconfig="$KC" --health-addr="127.0.0.1:$HPORT" --sync-period=10m \
		--awsmachine-concurrency=2 --v=2
	wait_http "http://127.0.0.1:$HPORT/healthz" 20
}
start_capa 2 || fail "capa starts again" "$(tail -5 "$T_TMP/capa2.log")"
NS=ns2
C=c2
kc create namespace "$NS" >/dev/null 2>&1
kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"$C","namespace":"$NS"},
 "spec":{"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster","name":"$C"}}}
EOF
CUID=$(kc get cluster.cluster.x-k8s.io "$C" -n "$NS" -o jsonpath='{.metadata.uid}')
kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster",
 "metadata":{"name":"$C","namespace":"$NS","labels":{"cluster.x-k8s.io/cluster-name":"$C"},
  "ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"$C","uid":"$CUID"}]},
 "spec":{"region":"us-east-1","controlPlaneLoadBalancer":{"loadBalancerType":"nlb","crossZoneLoadBalancing":true}}}
EOF
awsc() { kc get awscluster "$C" -n "$NS" -o json; }
ready() { [ "$(awsc | python3 -c 'import json,sys; print(json.load(sys.stdin).get("status",{}).get("ready"))')" = True ]; }
if wait_until 150 ready; then
	ok "an AWSCluster with loadBalancerType nlb becomes ready"
else
	fail "the NLB cluster becomes ready" "$(grep -E '^E' "$T_TMP/capa2.log" | tail -3)"
fi
awsc >"$T_TMP/awsc2.json"
moto_py_checks '
import re
o = json.load(open(sys.argv[1]))
elbv2 = client("elbv2")
lbs = [l for l in elbv2.describe_load_balancers()["LoadBalancers"] if l["LoadBalancerName"] == "ns2-c2-apiserver"]
eq("one load balancer named <namespace>-<c>-apiserver", len(lbs), 1)
lb = lbs[0]; arn = lb["LoadBalancerArn"]
eq("a network load balancer, internet-facing", (lb["Type"], lb["Scheme"]), ("network", "internet-facing"))
pub = sorted(s["id"] for s in o["spec"]["network"]["subnets"] if s["isPublic"])
eq("in the three public subnets, one per zone", sorted(a["SubnetId"] for a in lb["AvailabilityZones"]), pub)
sgs = o["status"]["networkStatus"]["securityGroups"]
eq("with the apiserver-lb group", lb.get("SecurityGroups"), [sgs["apiserver-lb"]["id"]])
t = {x["Key"]: x["Value"] for x in elbv2.describe_tags(ResourceArns=[arn])["TagDescriptions"][0]["Tags"]}
eq("CAPA tags (owned, role apiserver, Name)", (t.get("sigs.k8s.io/cluster-api-provider-aws/cluster/c2"),
   t.get("sigs.k8s.io/cluster-api-provider-aws/role"), t.get("Name")), ("owned", "apiserver", "ns2-c2-apiserver"))
tgs = elbv2.describe_target_groups(LoadBalancerArn=arn)["TargetGroups"]
eq("one target group", len(tgs), 1)
tg = tgs[0]
true_("named apiserver-target-<5 characters>", re.fullmatch("apiserver-target-[0-9a-z]{5}", tg["TargetGroupName"]), tg["TargetGroupName"])
eq("target group TCP 6443, instance targets, in the VPC", (tg["Protocol"], tg["Port"], tg["TargetType"], tg["VpcId"]),
   ("TCP", 6443, "instance", o["spec"]["network"]["vpc"]["id"]))
eq("health check TCP 6443, 5 s, 4 s, healthy 2, unhealthy 6",
   (tg["HealthCheckProtocol"], tg["HealthCheckPort"], tg["HealthCheckIntervalSeconds"], tg["HealthCheckTimeoutSeconds"],
    tg["HealthyThresholdCount"], tg["UnhealthyThresholdCount"]), ("TCP", "6443", 5, 4, 2, 6))
ls = elbv2.describe_listeners(LoadBalancerArn=arn)["Listeners"]
eq("one listener TCP 6443 forwarding to the target group",
   [(l["Protocol"], l["Port"], [a.get("TargetGroupArn") for a in l["DefaultActions"]]) for l in ls],
   [("TCP", 6443, [tg["TargetGroupArn"]])])
attrs = {a["Key"]: a["Value"] for a in elbv2.describe_load_balancer_attributes(LoadBalancerArn=arn)["Attributes"]}
eq("attribute load_balancing.cross_zone.enabled from crossZoneLoadBalancing", attrs.get("load_balancing.cross_zone.enabled"), "true")
e = o["status"]["networkStatus"].get("apiServerElb", {})
eq("status apiServerElb: name, loadBalancerType nlb, arn, dnsName", (e.get("name"), e.get("loadBalancerType"), e.get("arn"), e.get("dnsName")),
   ("ns2-c2-apiserver", "nlb", arn, lb["DNSName"]))
eq("spec.controlPlaneEndpoint is the DNS name, port 6443", o["spec"].get("controlPlaneEndpoint"), {"host": lb["DNSName"], "port": 6443})
g = ec2.describe_security_groups(GroupIds=[sgs["lb"]["id"]])["SecurityGroups"][0]
rules = [(p["IpProtocol"], p.get("FromPort"), p.get("ToPort"), r["CidrIp"]) for p in g["IpPermissions"] for r in p.get("IpRanges", [])]
eq("the lb group lets TCP 6443 in from the VPC CIDR (NLB)", rules, [("tcp", 6443, 6443, "10.0.0.0/16")])
' "$T_TMP/awsc2.json"

# a re-reconcile of the unchanged cluster
settled() { [ "$(count elbv2:DescribeListeners)" -ge 1 ]; }
reconcile_again() {
	calls_reset
	kc annotate awscluster "$C" -n "$NS" --overwrite test/poke="$1" >/dev/null
	wait_until 30 settled
	sleep 2
	calls 1000 >"$T_TMP/again$1.json"
}
reconcile_again 1
if python3 - "$T_TMP/again1.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
log = ["%s:%s" % (e["api"], e["action"]) for e in c["log"]]
mut = [a for a in log if ":Describe" not in a]
v2 = [a for a in log if a.startswith("elbv2:")]
print("figure: nlb, a re-reconcile of the unchanged cluster: %d calls (%s), %d mutating" %
      (len(log), ", ".join("%s %d" % (k, log.count(k)) for k in sorted(set(log))), len(mut)))
sys.exit(0 if not mut and len(v2) == 2 else 1)
PY
then
	ok "a re-reconcile of the unchanged NLB cluster: no mutating call, two ELBv2 reads"
else
	fail "re-reconcile of the NLB cluster" "$(head -c 400 "$T_TMP/again1.json")"
fi

# a restart does not duplicate the target group
stop_within "$(cat "$T_TMP/capa2.pid")" 20 "capa stops on SIGTERM"
start_capa 3 || fail "capa starts again" "$(tail -5 "$T_TMP/capa3.log")"
reconcile_again 2
n_tg=$(moto_py 'print(len([t for t in client("elbv2").describe_target_groups()["TargetGroups"] if t["TargetGroupName"].startswith("apiserver-target-")]))')
check "after a restart and a reconcile: still one apiserver-target group in the account" test "$n_tg" = 1
n_mut=$(python3 -c 'import json,sys; print(len([e for e in json.load(open(sys.argv[1]))["log"] if not e["action"].startswith("Describe")]))' "$T_TMP/again2.json")
check "and no mutating call" test "$n_mut" = 0

# a control-plane machine is registered in the target group; its delete deregisters it
kc create secret generic "$C-bootstrap" -n "$NS" --from-file=value="$T_TMP/boot.txt" >/dev/null
machine "$C-cp-0" us-east-1a cp
attached() { [ "$(am_cond "$C-cp-0" ELBAttached)" = True ]; }
if wait_until 60 attached; then
	ok "the NLB cluster's control-plane AWSMachine gets ELBAttached True"
else
	fail "ELBAttached True (nlb)" "$(kc get awsmachine "$C-cp-0" -n "$NS" -o jsonpath='{.status}'; grep -E '^E' "$T_TMP/capa3.log" | tail -3)"
fi
targets() {
	moto_py '
elbv2 = client("elbv2")
lb = elbv2.describe_load_balancers(Names=["ns2-c2-apiserver"])["LoadBalancers"][0]
tg = elbv2.describe_target_groups(LoadBalancerArn=lb["LoadBalancerArn"])["TargetGroups"][0]
print(" ".join(sorted(d["Target"]["Id"] for d in elbv2.describe_target_health(TargetGroupArn=tg["TargetGroupArn"])["TargetHealthDescriptions"]
      if d["TargetHealth"]["State"] not in ("draining", "unused"))))'
}
CP2=$(am_id "$C-cp-0")
check "moto's target group has the control-plane instance" test "$(targets)" = "$CP2"
calls_reset
kc delete awsmachine "$C-cp-0" -n "$NS" --wait=false >/dev/null
if wait_until 60 am_gone "$C-cp-0"; then
	ok "the NLB cluster's control-plane AWSMachine goes"
else
	fail "the AWSMachine goes (nlb)" "$(grep -E '^E' "$T_TMP/capa3.log" | tail -3)"
fi
check "its instance is no longer a target" test "$(targets)" = ""
calls 500 | python3 -c '
import json,sys
log = [e["api"] + ":" + e["action"] for e in json.load(sys.stdin)["log"]]
d = [i for i, a in enumerate(log) if a == "elbv2:DeregisterTargets"]
t = [i for i, a in enumerate(log) if a == "ec2:TerminateInstances"]
sys.exit(0 if len(d) == 1 and t and d[0] < t[0] else 1)' &&
	ok "one DeregisterTargets, before TerminateInstances" ||
	fail "DeregisterTargets before terminate" "$(calls 500 | head -c 600)"

# the cluster's delete: listener, target group, load balancer
kc delete awscluster "$C" -n "$NS" --wait=false >/dev/null
gone() { ! kc get awscluster "$C" -n "$NS" >/dev/null 2>&1; }
if wait_until 150 gone; then
	ok "the NLB cluster is deleted"
else
	fail "the NLB cluster is deleted" "$(grep -E '^E' "$T_TMP/capa3.log" | tail -3)"
fi
moto_py_checks '
elbv2 = client("elbv2")
eq("no load balancer, target group or security group of it is left",
   (len(elbv2.describe_load_balancers()["LoadBalancers"]), len(elbv2.describe_target_groups()["TargetGroups"]),
    len(ec2.describe_security_groups(Filters=[{"Name": "tag-key", "Values": ["sigs.k8s.io/cluster-api-provider-aws/cluster/c2"]}])["SecurityGroups"])),
   (0, 0, 0))
'


# ---- loadBalancerType disabled: no load balancer, the endpoint the spec gives (namespace ns3) ----
kc create namespace ns3 >/dev/null 2>&1
kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"c3","namespace":"ns3"},
 "spec":{"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster","name":"c3"}}}
EOF
C3UID=$(kc get cluster.cluster.x-k8s.io c3 -n ns3 -o jsonpath='{.metadata.uid}')
kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster",
 "metadata":{"name":"c3","namespace":"ns3","labels":{"cluster.x-k8s.io/cluster-name":"c3"},
  "ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"c3","uid":"$C3UID"}]},
 "spec":{"region":"us-east-1","network":{"vpc":{"cidrBlock":"10.3.0.0/16"}},
  "controlPlaneLoadBalancer":{"loadBalancerType":"disabled"},
  "controlPlaneEndpoint":{"host":"api.c3.example.com","port":6443}}}
EOF
c3() { kc get awscluster c3 -n ns3 -o json | python3 -c "import json,sys; o=json.load(sys.stdin); print($1)"; }
c3_ready() { [ "$(c3 'o.get("status",{}).get("ready")' 2>/dev/null)" = True ]; }
if wait_until 150 c3_ready; then
	ok "an AWSCluster with loadBalancerType disabled becomes ready"
else
	fail "the disabled-LB cluster becomes ready" "$(grep -E '^E' "$T_TMP/capa3.log" | tail -3)"
fi
check "its controlPlaneEndpoint is the one its spec gives" \
	test "$(c3 'o["spec"]["controlPlaneEndpoint"]')" = "{'host': 'api.c3.example.com', 'port': 6443}"
check "it has no apiServerElb in its status" test "$(c3 'o["status"].get("networkStatus",{}).get("apiServerElb")')" = None
n_lb3=$(moto_py 'print(len([l for l in client("elbv2").describe_load_balancers()["LoadBalancers"] if "c3" in l["LoadBalancerName"]]) +
      len([l for l in client("elb").describe_load_balancers()["LoadBalancerDescriptions"] if "c3" in l["LoadBalancerName"]]))')
check "and no load balancer of it exists in moto" test "$n_lb3" = 0
calls_reset
kc annotate awscluster c3 -n ns3 test/poke=1 >/dev/null
c3_settled() { [ "$(count ec2:DescribeSecurityGroups)" -ge 1 ]; }
wait_until 30 c3_settled
sleep 2
calls 1000 >"$T_TMP/again3.json"
python3 - "$T_TMP/again3.json" <<'PY'
import json, sys
log = ["%s:%s" % (e["api"], e["action"]) for e in json.load(open(sys.argv[1]))["log"]]
print("figure: disabled, a re-reconcile of the unchanged cluster: %d calls (%s)" %
      (len(log), ", ".join("%s %d" % (k, log.count(k)) for k in sorted(set(log)))))
PY
# A control-plane machine's reconcile may fall in the window (one DescribeInstances, then its
# load-balancer check); the cluster's own pass makes one DescribeInstances (the bastion lookup).
# So the cluster controller made a load-balancer call only if there are more of them than
# DescribeInstances beyond the cluster's own.
n_lbcalls=$(python3 -c 'import json,sys
log = json.load(open(sys.argv[1]))["log"]
lb = len([e for e in log if e["api"] in ("elb", "elbv2")])
di = len([e for e in log if e["action"] == "DescribeInstances"])
print(max(0, lb - max(0, di - 1)))' "$T_TMP/again3.json")
check "a re-reconcile of the disabled-LB cluster makes no load-balancer call" test "$n_lbcalls" = 0
kc delete awscluster c3 -n ns3 --wait=false >/dev/null
c3_gone() { ! kc get awscluster c3 -n ns3 >/dev/null 2>&1; }
wait_until 150 c3_gone && ok "the disabled-LB cluster is deleted" || fail "the disabled-LB cluster is deleted" "$(grep -E '^E' "$T_TMP/capa3.log" | tail -3)"

t_summary
