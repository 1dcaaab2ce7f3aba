#!/usr/bin/env bash
# tests: product
# (runs $AWS_K8S ccm through ccm_start in ccm_lib.sh)
# aws-k8s capa's cluster delete never stalls on what the cloud controller manager made
# (../shared/reference/capa.md §8, §14): a managed cluster made by `aws-k8s capa`, then
# `aws-k8s ccm` (cluster c1, same moto and test API server) makes a classic ELB and an NLB for
# two Services whose nodes run in the cluster's VPC (the ELB's group k8s-elb-<name> and its rule
# in a node group, the NLB's listeners and target groups). The cluster delete first waits while
# an AWSMachine labelled with the cluster is left (requeue 20 s, nothing deleted), then removes
# both load balancers, their listeners and target groups, the ccm's group and the rule naming
# it, before CAPA's groups and the VPC (asserted from the calls the fault proxy recorded). Load
# balancers and groups in another VPC or tagged for another cluster are never touched. A second
# cluster annotated aws.cluster.x-k8s.io/external-resource-gc: "false" keeps the ccm's load
# balancer and group.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"
. "$(dirname "$0")/../lib/capa_objects.sh"

NS=default
# the calls the proxy forwarded since its last reset, "api:action" a line, in order (a call it
# answered with an injected fault is left out)
calls_log() {
	tb_json "$FAULTPROXY_URL/_control/calls?log=100000" |
		python3 -c 'import json,sys; [print((c.get("api") or c["service"])+":"+c["action"]) for c in json.load(sys.stdin)["log"] if not c.get("effect")]'
}
calls_reset() { tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null; }
awsc_py() { # NAME PYEXPR on the AWSCluster (o)
	kc get awscluster "$1" -n "$NS" -o json | python3 -c "import json,sys; o=json.load(sys.stdin); print($2)"
}
gone() { ! kc get awscluster "$1" -n "$NS" >/dev/null 2>&1; }
ready() { [ "$(awsc_py "$1" 'o.get("status", {}).get("ready")')" = True ]; }

# ---- peers ----
if ! ccm_env_start; then
	peer fail "moto, the fault proxy and the test API server start"
	t_summary
fi
peer check "the CRDs (AWSCluster, AWSMachine, AWSMachineTemplate, Cluster, Machine) are accepted" capa_crds

HPORT=$(free_port)
bg capa "$AWS_K8S" capa --kubeconfig="$KC" --health-addr="127.0.0.1:$HPORT" --sync-period=10m --v=2
wait_http "http://127.0.0.1:$HPORT/healthz" 20 || fail "capa starts" "$(tail -5 "$T_TMP/capa.log")"

# make_cluster NAME [ANNOTATIONS-JSON]: a Cluster and its AWSCluster (us-east-1, CAPA's defaults)
make_cluster() {
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"$1","namespace":"$NS"},"spec":{}}
EOF
	local uid ann=${2:-'{}'}
	uid=$(kc get cluster.cluster.x-k8s.io "$1" -n "$NS" -o jsonpath='{.metadata.uid}')
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster",
 "metadata":{"name":"$1","namespace":"$NS","annotations":$ann,
  "ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","name":"$1","uid":"$uid"}]},
 "spec":{"region":"us-east-1"}}
EOF
	wait_until 120 ready "$1"
}
if make_cluster c1; then ok "cluster c1 is made by aws-k8s capa (status.ready)"
else
	fail "cluster c1 becomes ready" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"
	t_summary
fi
VPC=$(awsc_py c1 'o["spec"]["network"]["vpc"]["id"]')
NODESG=$(awsc_py c1 'o["status"]["networkStatus"]["securityGroups"]["node"]["id"]')
LBSG=$(awsc_py c1 'o["status"]["networkStatus"]["securityGroups"]["lb"]["id"]')
SUBNET=$(awsc_py c1 '[s["id"] for s in o["spec"]["network"]["subnets"] if s["isPublic"] and s["availabilityZone"] == "us-east-1a"][0]')

# ---- the ccm's objects, made by aws-k8s ccm for two Services ----
# two workers in the cluster's VPC with CAPA's node and lb groups (the lb group carries the
# kubernetes.io/cluster tag: the ccm adds its rules there)
read -r i1 d1 < <(instance n1 "SubnetId='$SUBNET', SecurityGroupIds=['$NODESG', '$LBSG']")
read -r i2 d2 < <(instance n2 "SubnetId='$SUBNET', SecurityGroupIds=['$NODESG', '$LBSG']")
node_create "$d1" "aws:///us-east-1a/$i1"
node_create "$d2" "aws:///us-east-1a/$i2"
ccm_start ccm1 || fail "ccm starts" "$(tail -5 "$T_TMP/ccm1.log")"
kc create -f - >/dev/null <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"default"},
 "spec":{"type":"LoadBalancer","selector":{"app":"web"},"ports":[
  {"name":"http","port":80,"targetPort":8080,"nodePort":30080,"protocol":"TCP"}]}}
EOF
kc create -f - >/dev/null <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"webn","namespace":"default",
  "annotations":{"service.beta.kubernetes.io/aws-load-balancer-type":"nlb"}},
 "spec":{"type":"LoadBalancer","selector":{"app":"web"},"ports":[
  {"name":"http","port":80,"targetPort":8080,"nodePort":30081,"protocol":"TCP"},
  {"name":"https","port":443,"targetPort":8443,"nodePort":30443,"protocol":"TCP"}]}}
EOF
host_set() { [ -n "$(kc get svc "$1" -o jsonpath='{.status.loadBalancer.ingress[0].hostname}')" ]; }
if wait_until 60 host_set web && wait_until 60 host_set webn; then
	ok "the ccm gives both Services a load balancer (classic and nlb)"
else fail "the ccm makes the load balancers" "$(grep -E '^[EW]' "$T_TMP/ccm1.log" | tail -5)"; fi
ELB="a$(kc get svc web -o jsonpath='{.metadata.uid}' | tr -d - | cut -c1-31)"
NLB="a$(kc get svc webn -o jsonpath='{.metadata.uid}' | tr -d - | cut -c1-31)"
# what the ccm made, as the delete must find it (CCM: ids; ELBSG: the ELB's own group)
read -r ELBSG NLBARN < <(moto_py "
sg = ec2.describe_security_groups(Filters=[{'Name': 'group-name', 'Values': ['k8s-elb-$ELB']}])['SecurityGroups']
nlb = elbv2.describe_load_balancers(Names=['$NLB'])['LoadBalancers']
print(sg[0]['GroupId'] if sg else 'NONE', nlb[0]['LoadBalancerArn'] if nlb else 'NONE')")
moto_py_checks "
K8S = 'kubernetes.io/cluster/c1'
d = elb.describe_load_balancers(LoadBalancerNames=['$ELB'])['LoadBalancerDescriptions'][0]
t = {x['Key']: x['Value'] for x in elb.describe_tags(LoadBalancerNames=['$ELB'])['TagDescriptions'][0]['Tags']}
eq('the classic ELB is in the cluster VPC, tagged owned, with the group k8s-elb-<name>',
   (d['VPCId'], t.get(K8S), d['SecurityGroups']), ('$VPC', 'owned', ['$ELBSG']))
g = ec2.describe_security_groups(GroupIds=['$ELBSG'])['SecurityGroups'][0]
eq('the ccm group is tagged owned and has no CAPA tag',
   sorted(x['Key'] for x in g.get('Tags', []) if 'cluster' in x['Key']), [K8S])
lbsg = ec2.describe_security_groups(GroupIds=['$LBSG'])['SecurityGroups'][0]
eq('CAPA lb group (on the nodes) admits the ELB group (the rule the delete must revoke)',
   [p['IpProtocol'] for p in lbsg['IpPermissions'] if any(u['GroupId'] == '$ELBSG' for u in p['UserIdGroupPairs'])], ['-1'])
n = elbv2.describe_load_balancers(LoadBalancerArns=['$NLBARN'])['LoadBalancers'][0]
ls = elbv2.describe_listeners(LoadBalancerArn='$NLBARN')['Listeners']
tgs = elbv2.describe_target_groups(LoadBalancerArn='$NLBARN')['TargetGroups']
eq('the NLB is in the cluster VPC with two listeners and two target groups', (n['VpcId'], len(ls), len(tgs)), ('$VPC', 2, 2))
open('$T_TMP/tgs', 'w').write(' '.join(x['TargetGroupArn'] for x in tgs))
"

# ---- things the delete must not touch ----
read -r FOREIGN_NLB FOREIGN_SG FOREIGN_SG2 < <(moto_py "
dvpc = ec2.describe_vpcs(Filters=[{'Name': 'is-default', 'Values': ['true']}])['Vpcs'][0]['VpcId']
dsub = [s['SubnetId'] for s in ec2.describe_subnets(Filters=[{'Name': 'vpc-id', 'Values': [dvpc]}])['Subnets']][:2]
tag = lambda c: [{'Key': 'kubernetes.io/cluster/' + c, 'Value': 'owned'}]
L = [{'Protocol': 'TCP', 'LoadBalancerPort': 80, 'InstancePort': 30080}]
elb.create_load_balancer(LoadBalancerName='other-vpc', Listeners=L, Subnets=dsub[:1], Tags=tag('c1'))
elb.create_load_balancer(LoadBalancerName='other-cluster', Listeners=L, Subnets=['$SUBNET'], Tags=tag('c9'))
nlb = elbv2.create_load_balancer(Name='other-vpc-nlb', Type='network', Subnets=dsub, Tags=tag('c1'))['LoadBalancers'][0]
sg = ec2.create_security_group(GroupName='k8s-elb-other', Description='x', VpcId='$VPC',
    TagSpecifications=[{'ResourceType': 'security-group', 'Tags': tag('c9')}])['GroupId']
sg2 = ec2.create_security_group(GroupName='k8s-elb-other2', Description='x', VpcId=dvpc,
    TagSpecifications=[{'ResourceType': 'security-group', 'Tags': tag('c1')}])['GroupId']
print(nlb['LoadBalancerArn'], sg, sg2)")

# the ccm runs in the workload cluster, gone before its infrastructure; so are the machines
ccm_stop_check ccm1
moto_py "ec2.terminate_instances(InstanceIds=['$i1', '$i2'])" >/dev/null

# ---- the delete waits for the cluster's AWSMachines ----
kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSMachine",
 "metadata":{"name":"c1-m1","namespace":"$NS","labels":{"cluster.x-k8s.io/cluster-name":"c1"}},
 "spec":{"instanceType":"t3.large","ami":{"id":"ami-12345678"}}}
EOF
calls_reset
kc delete awscluster c1 -n "$NS" --wait=false >/dev/null
if wait_until 30 grep -q "Cluster still has dependencies" "$T_TMP/capa.log"; then
	ok "the cluster delete waits while an AWSMachine labelled with the cluster exists (logged)"
else fail "the cluster delete waits for the AWSMachines" "$(tail -3 "$T_TMP/capa.log")"; fi
made=$(calls_log | grep -cv ':Describe' || true)
if ! gone c1 && [ "$made" = 0 ]; then ok "while it waits nothing is deleted and the AWSCluster stays"
else fail "nothing is deleted while waiting" "$made mutating calls: $(calls_log | grep -v ':Describe' | head -5 | tr '\n' ' ')"; fi
# AWS keeps a deleted ELB's interfaces a while, and its group with them: the first delete of the
# ccm's group fails as AWS then answers, and the next pass finishes the work
fault '{"service":"ec2","action":"DeleteSecurityGroup","effect":"error","status":400,"code":"DependencyViolation","message":"resource has a dependent object","count":1}'
kc delete awsmachine c1-m1 -n "$NS" --wait=false >/dev/null
# the wait is a requeue after 20 s
if wait_until 150 gone c1; then ok "once the AWSMachine is gone the cluster is deleted (requeued, not stalled)"
else fail "the cluster is deleted" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi
calls_log >"$T_TMP/delete.calls"
n_dv=$(tb_json "$FAULTPROXY_URL/_control/calls?log=100000" | python3 -c 'import json,sys; print(sum(1 for c in json.load(sys.stdin)["log"] if c["action"] == "DeleteSecurityGroup" and c.get("effect")))')
if [ "$n_dv" = 1 ] && grep -q 'cannot delete the cluster.*DependencyViolation' "$T_TMP/capa.log"; then
	ok "a DependencyViolation on the ccm group's delete is logged and retried, not a stall"
else fail "DependencyViolation retried" "$n_dv faulted; $(grep -E '^E' "$T_TMP/capa.log" | tail -2)"; fi
clear_faults

moto_py_checks "
def exists(f):
    try:
        return bool(f())
    except Exception as e:
        if 'NotFound' in str(e): return False
        raise
eq('the ccm classic ELB is gone', exists(lambda: elb.describe_load_balancers(LoadBalancerNames=['$ELB'])['LoadBalancerDescriptions']), False)
eq('the ccm NLB is gone', exists(lambda: elbv2.describe_load_balancers(LoadBalancerArns=['$NLBARN'])['LoadBalancers']), False)
tgs = open('$T_TMP/tgs').read().split()
eq('its two target groups are gone', [a for a in tgs if exists(lambda: elbv2.describe_target_groups(TargetGroupArns=[a])['TargetGroups'])], [])
eq('the ccm group k8s-elb-<name> is gone', exists(lambda: ec2.describe_security_groups(GroupIds=['$ELBSG'])['SecurityGroups']), False)
eq('the VPC is gone', exists(lambda: ec2.describe_vpcs(VpcIds=['$VPC'])['Vpcs']), False)
left = [l['LoadBalancerName'] for l in elb.describe_load_balancers()['LoadBalancerDescriptions']]
eq('classic ELBs in another VPC or tagged for another cluster are left', sorted(left), ['other-cluster', 'other-vpc'])
eq('an NLB tagged for the cluster in another VPC is left',
   [l['LoadBalancerName'] for l in elbv2.describe_load_balancers()['LoadBalancers']], ['other-vpc-nlb'])
eq('groups tagged for another cluster, or in another VPC, are left',
   len(ec2.describe_security_groups(GroupIds=['$FOREIGN_SG', '$FOREIGN_SG2'])['SecurityGroups']), 2)
"
if grep -q "revoked rules naming the ccm's security groups.*group=\"$LBSG\"" "$T_TMP/capa.log"; then
	ok "the rule naming the ccm group is revoked in CAPA lb group (logged) before the group goes"
else fail "the rule naming the ccm group is revoked" "$(grep -i revoked "$T_TMP/capa.log" | tail -3)"; fi
why=$(python3 - "$T_TMP/delete.calls" <<'PY'
import sys
calls = [l.strip() for l in open(sys.argv[1])]
def idx(pred): return [i for i, c in enumerate(calls) if pred(c)]
lb_del = idx(lambda c: c.split(":")[1] in ("DeleteLoadBalancer", "DeleteListener", "DeleteTargetGroup"))
v2 = [calls[i] for i in lb_del if calls[i].startswith("elbv2:")]
elb_del = idx(lambda c: c.endswith(":DeleteLoadBalancer") and not c.startswith("elbv2:"))
revoke = idx(lambda c: c.endswith(":RevokeSecurityGroupIngress"))
sg_del = idx(lambda c: c.endswith(":DeleteSecurityGroup"))
vpc_del = idx(lambda c: c.endswith(":DeleteVpc"))
bad = []
if len(elb_del) != 2: bad.append("classic deletes %d, want 2 (API LB, ccm ELB)" % len(elb_del))
if v2 != ["elbv2:DeleteListener"] * 2 + ["elbv2:DeleteTargetGroup"] * 2 + ["elbv2:DeleteLoadBalancer"]:
    bad.append("v2 deletes %s" % v2)
if len(sg_del) != 5: bad.append("%d DeleteSecurityGroup, want 5 (4 CAPA, 1 ccm)" % len(sg_del))
if not (lb_del and revoke and sg_del and vpc_del): bad.append("missing calls")
elif not (max(lb_del) < min(revoke) and max(sg_del) < vpc_del[0]):
    bad.append("order: LB deletes %s, revokes %s, SG deletes %s, DeleteVpc %s" % (lb_del, revoke, sg_del, vpc_del))
# the ccm's group (its rule revoked first), then CAPA's four (all their rules revoked first)
sg = [calls[i].split(":")[1] for i in sorted(revoke + sg_del)]
R, D = "RevokeSecurityGroupIngress", "DeleteSecurityGroup"
if sg != [R, D] + [R] * 4 + [D] * 4: bad.append("group calls %s" % sg)
print("; ".join(bad) or "ok")
PY
)
[ "$why" = ok ] && ok "delete order: API ELB, ccm ELB, NLB listeners, target groups, NLB; the rule naming the ccm group, that group; CAPA rules, its 4 groups; DeleteVpc" ||
	fail "delete order" "$why"
n_tags=$(grep -c ':DescribeTags$' "$T_TMP/delete.calls")
# first pass: classic and v2; the retry: classic only (the other cluster's ELB is in the VPC, the
# NLB in another VPC is never asked about)
[ "$n_tags" = 3 ] && ok "DescribeTags only for load balancers in the VPC (classic and v2, then classic on the retry)" ||
	fail "DescribeTags calls" "$n_tags: $(grep -E 'DescribeTags|DescribeLoadBalancers' "$T_TMP/delete.calls" | tr '\n' ' ')"
echo "# AWS calls to delete a 3-zone cluster with a ccm ELB and NLB: $(wc -l <"$T_TMP/delete.calls"): $(cut -d: -f2 "$T_TMP/delete.calls" | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}')"

# ---- opt-out: external-resource-gc "false" keeps the ccm's load balancer ----
if make_cluster c2 '{"aws.cluster.x-k8s.io/external-resource-gc":"false"}'; then
	ok "cluster c2 (annotated external-resource-gc: \"false\") is made"
else fail "cluster c2 becomes ready" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi
VPC2=$(awsc_py c2 'o["spec"]["network"]["vpc"]["id"]')
LBSG2=$(awsc_py c2 'o["status"]["networkStatus"]["securityGroups"]["lb"]["id"]')
SUBNET2=$(awsc_py c2 '[s["id"] for s in o["spec"]["network"]["subnets"] if s["isPublic"]][0]')
# made as the ccm makes them (ccm_svc_elb.c): its group, the rule in the node's group, the ELB
read -r ELBSG2 < <(moto_py "
K = [{'Key': 'kubernetes.io/cluster/c2', 'Value': 'owned'}]
sg = ec2.create_security_group(GroupName='k8s-elb-a0123456789abcdef0123456789abcde',
    Description='Security group for Kubernetes ELB a0123456789abcdef0123456789abcde (default/web)', VpcId='$VPC2',
    TagSpecifications=[{'ResourceType': 'security-group', 'Tags': K}])['GroupId']
ec2.authorize_security_group_ingress(GroupId='$LBSG2', IpPermissions=[{'IpProtocol': '-1', 'UserIdGroupPairs': [{'GroupId': sg}]}])
elb.create_load_balancer(LoadBalancerName='a0123456789abcdef0123456789abcde', Subnets=['$SUBNET2'], SecurityGroups=[sg],
    Listeners=[{'Protocol': 'TCP', 'LoadBalancerPort': 80, 'InstancePort': 30080}],
    Tags=K + [{'Key': 'kubernetes.io/service-name', 'Value': 'default/web'}])
print(sg)")
calls_reset
kc delete awscluster c2 -n "$NS" --wait=false >/dev/null
# moto deletes subnets and the VPC under a load balancer and a group; AWS would refuse
# (DependencyViolation) until the user removes them: that is what opting out means
if wait_until 120 gone c2; then ok "with the opt-out the cluster delete still finishes (in moto)"
else fail "c2 is deleted" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi
calls_log >"$T_TMP/delete2.calls"
moto_py_checks "
eq('the ccm ELB of the opted-out cluster is left',
   [l['LoadBalancerName'] for l in elb.describe_load_balancers(LoadBalancerNames=['a0123456789abcdef0123456789abcde'])['LoadBalancerDescriptions']],
   ['a0123456789abcdef0123456789abcde'])
eq('and its group k8s-elb-<name>', len(ec2.describe_security_groups(GroupIds=['$ELBSG2'])['SecurityGroups']), 1)
"
n=$(grep -cE '^elb.*:(DescribeTags|DeleteLoadBalancer)$|^elbv2:' "$T_TMP/delete2.calls")
[ "$n" = 1 ] && grep -q "external resource GC is off" "$T_TMP/capa.log" &&
	ok "the opt-out is logged and only the API load balancer is deleted (no ccm lookup)" ||
	fail "opt-out: no GC call" "$n calls: $(grep -E '^elb' "$T_TMP/delete2.calls" | tr '\n' ' ')"

if stop_within "$(cat "$T_TMP/capa.pid")" 15 "capa"; then
	[ "$STOP_RC" = 0 ] && ! grep -q "Sanitizer\|runtime error" "$T_TMP/capa.log" &&
		ok "capa stops on SIGTERM with exit 0, no sanitizer report" || fail "capa exits 0 on SIGTERM" "exit $STOP_RC"
fi
t_summary
