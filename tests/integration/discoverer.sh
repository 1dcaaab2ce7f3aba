#!/usr/bin/env bash
# tests: product
# aws-k8s discoverer against moto (through the fault proxy, which counts the calls and answers
# the DryRun calls moto lacks) and the test API server: a VPC with cluster-tagged public and
# internal subnets in three zones, the prefix's security groups, CSI volumes with and without
# a PersistentVolume, instances of the node profile with and without IMDSv1. Checked with
# kubectl: the conditions ConfigMap (not created while empty, a missing permission injected as
# UnauthorizedOperation, UnsupportedOperation ignored), the InstanceTypesCatalog, the
# discovery-data and node-manager Secrets, the orphaned-disk and IMDSv1 metrics (promtool); a
# period with nothing changed writes nothing; a change writes once; /healthz 503 while writes
# fail; --once exits 1 when a step fails; the Deployment's kube-rbac-proxy sidecar in front of it;
# the AWSInstanceClass CRD validates strictly.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

UUID=0f1e2d3c-aaaa-bbbb-cccc-000000000001
PFX=dtest
if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi
kas_json() { curl -sf --max-time 10 --cacert "$KC.ca.crt" "$KAS_URL/_control/$1"; }
kas_post() { curl -sf --max-time 30 --cacert "$KC.ca.crt" -X "${3:-POST}" -H 'Content-Type: application/json' --data-binary "$2" "$KAS_URL/_control/$1"; }
# writes: creates, updates, patches and deletes the test API server counted since its reset
writes() { kas_json requests | python3 -c '
import json, sys
c = json.load(sys.stdin)["counters"]
print(sum(v for k, v in c.items() if k.split()[0] in ("create", "update", "patch", "delete")))'; }

# --- the cloud ---------------------------------------------------------------------------------
read -r vpc pub_a pub_b pub_c int_a int_b int_c sg_node sg_ssh sg_lb < <(moto_py "
U, P = '$UUID', '$PFX'
def tags(kind, t):
    return [{'ResourceType': kind, 'Tags': [{'Key': k, 'Value': v} for k, v in t.items()]}]
vpc = ec2.create_vpc(CidrBlock='10.50.0.0/16')['Vpc']['VpcId']
out = [vpc]
for role, base in (('elb', 0), ('internal-elb', 10)):
    for i, z in enumerate('abc'):
        out.append(ec2.create_subnet(VpcId=vpc, CidrBlock='10.50.%d.0/24' % (base + i), AvailabilityZone='us-east-1' + z,
            TagSpecifications=tags('subnet', {'kubernetes.io/cluster/' + U: 'shared', 'kubernetes.io/role/' + role: '1'}))['Subnet']['SubnetId'])
# a second public subnet in zone a with a higher ID would not be chosen; an untagged one is not seen
ec2.create_subnet(VpcId=vpc, CidrBlock='10.50.99.0/24', AvailabilityZone='us-east-1a')
for n in ('node', 'ssh-accessible', 'loadbalancer'):
    out.append(ec2.create_security_group(GroupName=P + '-' + n, Description=n, VpcId=vpc)['GroupId'])
other = ec2.create_vpc(CidrBlock='10.60.0.0/16')['Vpc']['VpcId']
ec2.create_security_group(GroupName=P + '-node', Description='other vpc', VpcId=other)
print(*out)")
[ -n "$sg_lb" ] || { peer fail "the VPC is set up in moto"; t_summary; }

# CSI volumes of this cluster: v1 and v2 have a PersistentVolume, v3 and v4 do not; v5 belongs to
# another cluster, v6 is not the CSI driver's
read -r v1 v2 v3 v4 v5 v6 < <(moto_py "
U = '$UUID'
def vol(t):
    return ec2.create_volume(AvailabilityZone='us-east-1a', Size=1, TagSpecifications=[{'ResourceType': 'volume',
        'Tags': [{'Key': k, 'Value': v} for k, v in t.items()]}])['VolumeId']
ids = [vol({'ebs.csi.aws.com/cluster': 'true', 'kubernetes.io/cluster/' + U: 'owned', 'CSIVolumeName': 'pvc-%d' % i}) for i in range(1, 5)]
ids.append(vol({'ebs.csi.aws.com/cluster': 'true', 'kubernetes.io/cluster/other': 'owned', 'CSIVolumeName': 'pvc-5'}))
ids.append(vol({'kubernetes.io/cluster/' + U: 'owned'}))
print(*ids)")
pv() {
	kc create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"$1"},
 "spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],$2}}
EOF
}
pv pvc-1 "\"csi\":{\"driver\":\"ebs.csi.aws.com\",\"volumeHandle\":\"$v1\"}"
pv pvc-2 "\"awsElasticBlockStore\":{\"volumeID\":\"aws://us-east-1a/$v2\"}"
# instances of the node profile: one allows IMDSv1 (http-tokens optional), one does not; two of
# another profile allow it too
moto_py "
U, P = '$UUID', '$PFX'
for n in (P + '-node', 'other-node'):
    iam.create_instance_profile(InstanceProfileName=n)
t = {'kubernetes.io/cluster/' + U: 'owned'}
run_instance(tags=t, IamInstanceProfile={'Name': P + '-node'}, MetadataOptions={'HttpTokens': 'optional'})
run_instance(tags=t, IamInstanceProfile={'Name': P + '-node'}, MetadataOptions={'HttpTokens': 'required'})
for _ in range(2):
    run_instance(tags=t, IamInstanceProfile={'Name': 'other-node'}, MetadataOptions={'HttpTokens': 'optional'})" >/dev/null ||
	peer fail "instances with instance profiles start in moto"

# --- the cluster -------------------------------------------------------------------------------
for f in crd-awsinstanceclass crd-instancetypescatalog; do
	check "deploy/discoverer's $f is accepted by the test API server" \
		kc apply -f "$T_ROOT/deploy/discoverer/base/$f.yaml"
done
kc -n kube-system create configmap d8-cluster-uuid --from-literal=cluster-uuid="$UUID" >/dev/null
printf 'apiVersion: deckhouse.io/v1\nkind: ClusterConfiguration\ncloud:\n  provider: AWS\n  prefix: %s\n' "$PFX" >"$T_TMP/cc.yaml"
printf 'apiVersion: deckhouse.io/v1\nkind: AWSClusterConfiguration\nlayout: WithNAT\ntags:\n  team: platform\nmasterNodeGroup:\n  replicas: 1\n  instanceClass:\n    instanceType: m5.large\n    ami: ami-0abc\n' >"$T_TMP/pcc.yaml"
kc -n kube-system create secret generic d8-cluster-configuration --from-file=cluster-configuration.yaml="$T_TMP/cc.yaml" >/dev/null
kc -n kube-system create secret generic d8-provider-cluster-configuration \
	--from-file=cloud-provider-cluster-configuration.yaml="$T_TMP/pcc.yaml" >/dev/null

once() { "$AWS_K8S" discoverer --once --kubeconfig="$KC" --listen-address=127.0.0.1:0 --v=2 "$@" >>"$T_TMP/once.log" 2>&1; }

# --- a first period: every permission there, so no conditions ConfigMap ----------------------
fault '{"service": "ec2", "action": "DescribeInstanceTopology", "effect": "error", "status": 412, "code": "DryRunOperation", "message": "Request would have succeeded, but DryRun flag is set."}'
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
check "--once: a period with every step succeeding exits 0" once
check "no conditions ConfigMap is created while there is no condition" \
	bash -c "! kubectl --kubeconfig '$KC' -n kube-system get configmap d8-cloud-provider-conditions 2>/dev/null"
tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys
c = json.load(sys.stdin)["counts"]
print("AWS calls of one period:", ", ".join("%s %d" % (k, v) for k, v in sorted(c.items())))'

# --- the catalog ---------------------------------------------------------------------------------
want_types=$(moto_py "
n, tok = 0, None
while True:
    r = ec2.describe_instance_types(**({'NextToken': tok} if tok else {}))
    n += len(r['InstanceTypes'])
    tok = r.get('NextToken')
    if not tok: break
print(n)")
kc get instancetypescatalog for-cluster-autoscaler -o json >"$T_TMP/cat.json" 2>&1
check "the InstanceTypesCatalog holds every instance type ($want_types), sorted, as Deckhouse writes them" python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
t = c["instanceTypes"]
names = [x["name"] for x in t]
m5 = next(x for x in t if x["name"] == "m5.large")
assert len(t) == int(sys.argv[2]), len(t)
assert names == sorted(names)
assert m5 == {"name": "m5.large", "cpu": "2", "memory": "8192Mi", "rootDisk": "0"}, m5
' "$T_TMP/cat.json" "$want_types"

# --- the discovery data and the node-manager Secret ------------------------------------------
secret_key() { kc -n kube-system get secret "$1" -o json | python3 -c '
import base64, json, sys
print(base64.b64decode(json.load(sys.stdin)["data"][sys.argv[1]]).decode())' "$2"; }
secret_key d8-cloud-provider-discovery-data discovery-data.json >"$T_TMP/dd.json" 2>&1
check "the discovery data: zones, the internal subnets (WithNAT), groups, key, profile, AMI" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
a = sys.argv[2:]
want = {"apiVersion": "deckhouse.io/v1", "kind": "AWSCloudDiscoveryData", "keyName": "'"$PFX"'",
        "instances": {"ami": "ami-0abc", "additionalSecurityGroups": [a[0], a[1]],
                      "associatePublicIPAddress": False, "iamProfileName": "'"$PFX"'-node"},
        "loadBalancerSecurityGroup": a[2], "zones": ["us-east-1a", "us-east-1b", "us-east-1c"],
        "zoneToSubnetIdMap": {"us-east-1a": a[3], "us-east-1b": a[4], "us-east-1c": a[5]}}
assert d == want, d
' "$T_TMP/dd.json" "$sg_node" "$sg_ssh" "$sg_lb" "$int_a" "$int_b" "$int_c"
kc -n kube-system get secret d8-node-manager-cloud-provider -o json >"$T_TMP/nm.json" 2>&1
check "the node-manager Secret: type, zones, kinds and the aws key as Deckhouse's" python3 -c '
import base64, json, sys
s = json.load(open(sys.argv[1]))["data"]
d = {k: base64.b64decode(v).decode() for k, v in s.items()}
assert sorted(d) == ["aws", "instanceClassKind", "machineClassKind", "type", "zones"], sorted(d)
assert d["type"] == "aws" and d["instanceClassKind"] == "AWSInstanceClass" and d["machineClassKind"] == "AWSMachineClass"
assert json.loads(d["zones"]) == ["us-east-1a", "us-east-1b", "us-east-1c"]
aws = json.loads(d["aws"])
dd = json.load(open(sys.argv[2]))
assert aws["providerAccessKeyId"] == "testing" and aws["providerSecretAccessKey"] == "testing", aws
assert aws["region"] == "us-east-1" and aws["keyName"] == dd["keyName"]
assert aws["instances"] == dd["instances"] and aws["internal"] == {"zoneToSubnetIdMap": dd["zoneToSubnetIdMap"]}
assert aws["loadBalancerSecurityGroup"] == dd["loadBalancerSecurityGroup"] and aws["tags"] == {"team": "platform"}
' "$T_TMP/nm.json" "$T_TMP/dd.json"
check "no secret in the log" bash -c "! grep -q 'providerSecretAccessKey\|testing' '$T_TMP/once.log'"

# --- a missing permission, injected as UnauthorizedOperation ---------------------------------
clear_faults
fault '{"service": "ec2", "action": "DescribeInstanceTopology", "effect": "error", "status": 403, "code": "UnauthorizedOperation", "message": "You are not authorized to perform this operation."}'
check "--once: a period with a missing permission still succeeds" once
cond() { kc -n kube-system get configmap d8-cloud-provider-conditions -o jsonpath='{.data.conditions}'; }
check "the conditions ConfigMap names the missing permission as Deckhouse writes it" bash -c "
[ \"\$(kubectl --kubeconfig '$KC' -n kube-system get configmap d8-cloud-provider-conditions -o jsonpath='{.data.conditions}')\" = \
'[{\"name\":\"INSUFFICIENT_AWS_SA_PERMISSIONS\",\"message\":\"DescribeInstanceTopology is not allowed\",\"ok\":false}]' ]"

# --- the daemon: metrics, a quiet second period --------------------------------------------
MPORT=$(free_port)
bg disc "$AWS_K8S" discoverer --kubeconfig="$KC" --listen-address="127.0.0.1:$MPORT" \
	--discovery-period=2s --write-retries=3 --write-retry-initial=100ms --write-retry-max=200ms --v=2
wait_http "http://127.0.0.1:$MPORT/healthz" 20 || fail "the discoverer serves" "$(tail -5 "$T_TMP/disc.log")"
periods() { grep -c '"discovery period done"' "$T_TMP/disc.log"; }
wait_periods() { local n=$(($(periods) + $1)); wait_until 120 bash -c "[ \$(grep -c '\"discovery period done\"' '$T_TMP/disc.log') -ge $n ]"; }
check "the first period of the daemon ends" wait_periods 1
curl -sf "http://127.0.0.1:$MPORT/metrics" >"$T_TMP/metrics.txt"
check "cloud_data_discovery_orphaned_disk_info: exactly the two volumes without a PersistentVolume" python3 -c '
import re, sys
got = set(re.findall(r"^cloud_data_discovery_orphaned_disk_info\{id=\"([^\"]+)\",name=\"([^\"]+)\"\} 1$", open(sys.argv[1]).read(), re.M))
assert got == {(sys.argv[2], "pvc-3"), (sys.argv[3], "pvc-4")}, got
' "$T_TMP/metrics.txt" "$v3" "$v4"
check "cloud_data_discovery_cloud_conditions_error names the permission" \
	grep -qx 'cloud_data_discovery_cloud_conditions_error{name="INSUFFICIENT_AWS_SA_PERMISSIONS",message="DescribeInstanceTopology is not allowed"} 1' "$T_TMP/metrics.txt"
check "cloud_data_discovery_aws_instances_imdsv1_allowed counts the node profile's instance with IMDSv1" \
	grep -qx 'cloud_data_discovery_aws_instances_imdsv1_allowed 1' "$T_TMP/metrics.txt"
check "no request or update errors" bash -c "! grep -E '^cloud_data_discovery_(cloud_request|update_resource)_error.* 1\$' '$T_TMP/metrics.txt'"
if command -v promtool >/dev/null; then
	check "promtool check metrics" bash -c "promtool check metrics <'$T_TMP/metrics.txt'"
else
	skip "promtool check metrics" "promtool is not installed (Debian package prometheus)"
fi

kas_post requests/reset '{}' >/dev/null
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
check "two more periods" wait_periods 2
check "periods in which nothing changed write nothing to Kubernetes (0 writes)" bash -c "[ \$(kas_json() { curl -sf --cacert '$KC.ca.crt' '$KAS_URL/_control/requests'; }; kas_json | python3 -c '
import json, sys
c = json.load(sys.stdin)[\"counters\"]
print(sum(v for k, v in c.items() if k.split()[0] in (\"create\", \"update\", \"patch\", \"delete\")))') = 0 ]"

# a PersistentVolume goes: its disk shows up at the next period, still without a write
kc delete pv pvc-1 >/dev/null
orphan3() { curl -sf "http://127.0.0.1:$MPORT/metrics" | grep -q "^cloud_data_discovery_orphaned_disk_info{id=\"$v1\",name=\"pvc-1\"} 1"; }
check "a disk whose PersistentVolume is deleted is reported at the next period" wait_until 90 orphan3
check "... and that wrote nothing either (the one write counted is the test's own PV delete)" bash -c "[ \$(curl -sf --cacert '$KC.ca.crt' '$KAS_URL/_control/requests' | python3 -c '
import json, sys
c = json.load(sys.stdin)[\"counters\"]
print(sum(v for k, v in c.items() if k.split()[0] in (\"create\", \"update\", \"patch\", \"delete\")))') = 1 ]"

# UnsupportedOperation on the topology call is not a condition: the ConfigMap empties (one write)
clear_faults
fault '{"service": "ec2", "action": "DescribeInstanceTopology", "effect": "error", "status": 400, "code": "UnsupportedOperation", "message": "not in this region"}'
check "UnsupportedOperation on DescribeInstanceTopology is not a condition: the ConfigMap empties" \
	wait_until 90 bash -c "[ \"\$(kubectl --kubeconfig '$KC' -n kube-system get configmap d8-cloud-provider-conditions -o jsonpath='{.data.conditions}')\" = '[]' ]"
check "its metric series is gone" wait_until 30 bash -c "! curl -sf http://127.0.0.1:$MPORT/metrics | grep -q cloud_data_discovery_cloud_conditions_error"

# writes that fail: /healthz 503 after the retries, 200 again once a write succeeds
kas_post faults '{"action": "error", "method": "PUT", "path": "configmaps/d8-cloud-provider-conditions", "code": 500}' >/dev/null
clear_faults
fault '{"service": "ec2", "action": "DescribeInstanceTopology", "effect": "error", "status": 403, "code": "UnauthorizedOperation", "message": "no"}'
hz() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/healthz"; }
check "/healthz answers 503 once a write failed after its retries" wait_until 90 bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$MPORT/healthz) = 503 ]"
check "cloud_data_discovery_update_resource_error is 1" bash -c "curl -sf http://127.0.0.1:$MPORT/metrics | grep -qx 'cloud_data_discovery_update_resource_error 1'"
check "the write was tried 3 times (--write-retries=3)" bash -c "[ \$(grep -c '\"write failed, retrying\"' '$T_TMP/disc.log') -ge 2 ]"
peer check "the test API server's faults are cleared" kas_post faults '' DELETE
# up to two periods (the one in flight, then one whose writes succeed), each slow on a loaded
# machine (DescribeInstanceTypes: moto's 1,263 types in one reply)
if wait_until 180 bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$MPORT/healthz) = 200 ]"; then
	ok "/healthz is 200 again after a period whose writes succeed"
else fail "/healthz is 200 again after a period whose writes succeed" "$(hz); $(grep -E '^[EW][0-9]{4} |period done' "$T_TMP/disc.log" | tail -4 | cut -c1-300)"; fi
stop_within "$(cat "$T_TMP/disc.pid")" 10 disc && [ "$STOP_RC" = 0 ] && ok "the discoverer stops on SIGTERM with exit 0" ||
	fail "the discoverer stops on SIGTERM with exit 0" "exit ${STOP_RC:-?}"

# --once with a failing step exits 1 (the other steps still ran)
clear_faults
fault '{"service": "ec2", "action": "DescribeSubnets", "effect": "error", "status": 403, "code": "UnauthorizedOperation", "message": "no"}'
once
rc=$?
[ "$rc" = 1 ] && ok "--once exits 1 when a step fails" || fail "--once exits 1 when a step fails" "exit $rc"
clear_faults

# a 5xx reply to a DryRun call is no condition: the step fails (exit 1), the ConfigMap stays
dryrun_ok() { fault '{"service": "ec2", "action": "DescribeInstanceTopology", "effect": "error", "status": 412, "code": "DryRunOperation", "message": "Request would have succeeded, but DryRun flag is set."}'; }
cond_before=$(cond)
fault '{"service": "ec2", "action": "DescribeAddressesAttribute", "effect": "http500"}'
dryrun_ok
AWS_MAX_ATTEMPTS=1 once
rc=$?
[ "$rc" = 1 ] && [ "$(cond)" = "$cond_before" ] && grep -q '"AWS call failed" action="DescribeAddressesAttribute"' "$T_TMP/once.log" && ! grep -q '"permission condition" action="DescribeAddressesAttribute"' "$T_TMP/once.log" &&
	ok "a 500 on a DryRun call is no condition: exit 1, the conditions ConfigMap unchanged" ||
	fail "a 500 on a DryRun call is no condition: exit 1, the conditions ConfigMap unchanged" "exit $rc, conditions $(cond) (before: $cond_before)"
clear_faults

# DescribeInstanceTypes in pages (moto ignores MaxResults, so the proxy serves two pages): the
# catalog holds both, sorted, and that period writes the catalog alone
itype() { printf '<item><instanceType>%s</instanceType><vCpuInfo><defaultVCpus>%s</defaultVCpus></vCpuInfo><memoryInfo><sizeInMiB>%s</sizeInMiB></memoryInfo></item>' "$@"; }
page() { python3 -c 'import json, sys; print(json.dumps({"service": "ec2", "action": "DescribeInstanceTypes", "effect": "body", "count": 1, "body": sys.argv[1]}))' \
	"<DescribeInstanceTypesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r</requestId><instanceTypeSet>$1</instanceTypeSet>$2</DescribeInstanceTypesResponse>"; }
dryrun_ok
once # settles the conditions (every permission there) before the counted period
clear_faults
fault "$(page "$(itype z9.large 2 4096)$(itype a1.small 1 512)" '<nextToken>page-2</nextToken>')"
fault "$(page "$(itype m9.xlarge 4 16384)" '')"
dryrun_ok
kas_post requests/reset '{}' >/dev/null
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
check "--once with DescribeInstanceTypes in two pages exits 0" once
kc get instancetypescatalog for-cluster-autoscaler -o json >"$T_TMP/cat2.json" 2>&1
check "the catalog holds both pages' types, sorted by name" python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["instanceTypes"]
assert t == [{"name": "a1.small", "cpu": "1", "memory": "512Mi", "rootDisk": "0"},
             {"name": "m9.xlarge", "cpu": "4", "memory": "16384Mi", "rootDisk": "0"},
             {"name": "z9.large", "cpu": "2", "memory": "4096Mi", "rootDisk": "0"}], t' "$T_TMP/cat2.json"
n_it=$(tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c 'import json, sys; print(json.load(sys.stdin)["counts"]["ec2:DescribeInstanceTypes"])')
w=$(kas_json requests | python3 -c '
import json, sys
c = json.load(sys.stdin)["counters"]
print(" ".join("%s=%d" % (k.replace(" ", ":"), v) for k, v in sorted(c.items()) if k.split()[0] in ("create", "update", "patch", "delete")))')
[ "$n_it" = 2 ] && [ "$w" = "update:instancetypescatalogs=1" ] && ok "two DescribeInstanceTypes calls, one write (the catalog)" ||
	fail "two DescribeInstanceTypes calls, one write (the catalog)" "$n_it calls, writes: $w"
clear_faults

# AWS_NODE_IAM_INSTANCE_PROFILE (Deckhouse's variable) names the profile; an AWS step that fails
# shows in cloud_data_discovery_cloud_request_error{type} and leaves /healthz at 200
fault '{"service": "ec2", "action": "DescribeSubnets", "effect": "error", "status": 403, "code": "UnauthorizedOperation", "message": "no"}'
dryrun_ok
MPORT2=$(free_port)
AWS_NODE_IAM_INSTANCE_PROFILE=other-node bg disc2 "$AWS_K8S" discoverer --kubeconfig="$KC" \
	--listen-address="127.0.0.1:$MPORT2" --discovery-period=1h --v=2
check "a daemon with AWS_NODE_IAM_INSTANCE_PROFILE=other-node ends its first period" \
	wait_until 60 grep -q '"discovery period done"' "$T_TMP/disc2.log"
curl -sf "http://127.0.0.1:$MPORT2/metrics" >"$T_TMP/metrics2.txt"
check "cloud_data_discovery_aws_instances_imdsv1_allowed counts other-node's two instances" \
	grep -qx 'cloud_data_discovery_aws_instances_imdsv1_allowed 2' "$T_TMP/metrics2.txt"
check "cloud_data_discovery_cloud_request_error: 1 for the failed step, 0 for the others" python3 -c '
import re, sys
got = dict(re.findall(r"^cloud_data_discovery_cloud_request_error\{type=\"(\w+)\"\} (\d+)$", open(sys.argv[1]).read(), re.M))
assert got == {"conditions": "0", "instance_types": "0", "discovery_data": "1", "disks": "0", "instances": "0"}, got
' "$T_TMP/metrics2.txt"
check "an AWS failure is no write failure: /healthz 200" \
	bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$MPORT2/healthz) = 200 ]"

# behind its sidecar, as deploy/discoverer/base runs it: the Deployment's kube-rbac-proxy container
# (aws-k8s called kube-rbac-proxy, tests/lib/manifest_run.py: its args, the ConfigMap's
# authorization) in front of this discoverer; /healthz passes, /metrics needs the SubjectAccessReview
kas_post auth '{"tokens": [{"token": "prom-token", "user": "prom"}, {"token": "nobody-token", "user": "nobody"}],
 "rules": [{"users": ["prom"], "verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments/prometheus-metrics"],
            "resourceNames": ["cloud-data-discoverer"], "namespaces": ["kube-system"]}]}' >/dev/null ||
	peer fail "the test API server takes the scraper's tokens"
kubectl kustomize "$T_ROOT/deploy/discoverer/base" >"$T_TMP/disc-base.yaml" 2>&1 || fail "kubectl kustomize deploy/discoverer/base"
mkdir -p "$T_TMP/img" && ln -sf "$AWS_K8S" "$T_TMP/img/kube-rbac-proxy"
PX=$(free_port)
bg sidecar python3 "$T_ROOT/tests/lib/manifest_run.py" "$T_TMP/disc-base.yaml" --kind Deployment --name cloud-data-discoverer \
	--container kube-rbac-proxy --entrypoint /usr/bin/kube-rbac-proxy --bin-dir "$T_TMP/img" --set fieldRef:status.podIP=127.0.0.1 \
	--port-map "8080=$PX" --port-map "8081=$MPORT2" --mount-root "$T_TMP/sidecar" --env "KUBECONFIG=$KC" \
	--pass-env 'ASAN_*' --pass-env 'UBSAN_*' --pass-env 'LSAN_*' --exec
px() { curl -sk -o "$T_TMP/px.body" -w '%{http_code}' --max-time 10 "$@"; }
check "the Deployment's kube-rbac-proxy sidecar serves the discoverer's /healthz without a token" \
	wait_until 20 bash -c "[ \"\$(curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:$PX/healthz)\" = 200 ]"
c1=$(px "https://127.0.0.1:$PX/metrics") c2=$(px -H 'Authorization: Bearer nobody-token' "https://127.0.0.1:$PX/metrics")
c3=$(px -H 'Authorization: Bearer prom-token' "https://127.0.0.1:$PX/metrics")
[ "$c1/$c2/$c3" = 401/403/200 ] && grep -qx 'cloud_data_discovery_aws_instances_imdsv1_allowed 2' "$T_TMP/px.body" &&
	ok "/metrics through the sidecar: 401 without a token, 403 without get deployments/prometheus-metrics, the metrics with it" ||
	fail "/metrics through the sidecar: 401 without a token, 403 without get deployments/prometheus-metrics, the metrics with it" \
		"got $c1/$c2/$c3: $(tail -3 "$T_TMP/sidecar.log")"
stop_within "$(cat "$T_TMP/disc2.pid")" 10 disc2 >/dev/null
clear_faults

# under deploy/discoverer's RBAC (the test API server enforcing the rules its bindings give the
# ServiceAccount): a period that creates every object it writes (deleted first) and reads the
# cluster's configuration succeeds, with no request refused
SA=system:serviceaccount:kube-system:cloud-data-discoverer
python3 - "$T_TMP/disc-base.yaml" "$SA" >"$T_TMP/disc-auth.json" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ns, name = sys.argv[2].split(":")[2:]
roles = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("Role", "ClusterRole")}
out = []
for b in (d for d in docs if d["kind"].endswith("RoleBinding")):
    if {"kind": "ServiceAccount", "name": name, "namespace": ns} not in b.get("subjects", []):
        continue
    scope = {"namespaces": [b["metadata"]["namespace"]]} if b["kind"] == "RoleBinding" else {}
    out += [dict(scope, users=[sys.argv[2]], verbs=r["verbs"], apiGroups=r["apiGroups"], resources=r["resources"],
                 resourceNames=r.get("resourceNames", [])) for r in roles[(b["roleRef"]["kind"], b["roleRef"]["name"])]["rules"]]
print(json.dumps({"authorize": True, "rules": out, "tokens": [{"token": "disc-token", "user": sys.argv[2],
                                                               "groups": ["system:serviceaccounts"]}]}))
PY
check "deploy/discoverer's bindings give its ServiceAccount rules (Role and ClusterRole)" \
	test "$(jq '[.rules[] | has("namespaces")] | unique | length' "$T_TMP/disc-auth.json" 2>/dev/null)" = 2
jq '.users = [.users[] | .user = {"token": "disc-token"}]' "$KC" >"$T_TMP/disc-sa.kc"
kc -n kube-system delete configmap d8-cloud-provider-conditions >/dev/null
kc -n kube-system delete secret d8-cloud-provider-discovery-data d8-node-manager-cloud-provider >/dev/null
kc delete instancetypescatalog for-cluster-autoscaler >/dev/null
kas_post auth "$(cat "$T_TMP/disc-auth.json")" >/dev/null || peer fail "the test API server takes the ServiceAccount's rules"
peer check "the test API server refuses the ServiceAccount what deploy/discoverer does not grant (list secrets)" \
	bash -c "kubectl --kubeconfig '$T_TMP/disc-sa.kc' -n kube-system get secrets 2>&1 | grep -q Forbidden"
fault '{"service": "ec2", "action": "DescribeInstanceTopology", "effect": "error", "status": 403, "code": "UnauthorizedOperation", "message": "no"}'
"$AWS_K8S" discoverer --once --kubeconfig="$T_TMP/disc-sa.kc" --listen-address=127.0.0.1:0 --v=2 >"$T_TMP/once-sa.log" 2>&1
rc=$?
kas_post auth '{"authorize": false}' >/dev/null
[ "$rc" = 0 ] && ! grep -qE '^E[0-9]{4} |Forbidden|EACCES' "$T_TMP/once-sa.log" && ok "under deploy/discoverer's RBAC: a period exits 0, no request refused" ||
	fail "under deploy/discoverer's RBAC: a period exits 0, no request refused" "exit $rc: $(grep -E '^E[0-9]{4} |Forbidden|EACCES' "$T_TMP/once-sa.log" | head -3)"
check "... and it created the conditions ConfigMap, both Secrets and the catalog again" \
	kc get -n kube-system configmap/d8-cloud-provider-conditions secret/d8-cloud-provider-discovery-data \
	secret/d8-node-manager-cloud-provider instancetypescatalog/for-cluster-autoscaler
clear_faults

check "--help names every flag with its default and the environment variables" bash -c '
h=$("$0" discoverer --help) || exit 1
for w in "--discovery-period duration" "(default 1h)" "--listen-address string" "127.0.0.1:8081" "--once" \
	"--cluster-uuid" "--cluster-prefix" "--layout" "[\$AWS_NODE_IAM_INSTANCE_PROFILE]" "--write-retries int" \
	"(default 15)" "(default 3s)" "(default 30s)" "--kubeconfig" "--kube-api-qps" AWS_REGION AWS_ACCESS_KEY_ID \
	AWS_SECRET_ACCESS_KEY AWS_WEB_IDENTITY_TOKEN_FILE AWS_ENDPOINT_URL KUBECONFIG; do
	grep -qF -- "$w" <<<"$h" || { echo "missing: $w"; exit 1; }
done' "$AWS_K8S"

# no cluster identity at all: a clear error, nothing written
kc -n kube-system delete configmap d8-cluster-uuid >/dev/null
"$AWS_K8S" discoverer --once --kubeconfig="$KC" --listen-address=127.0.0.1:0 >"$T_TMP/nouuid.log" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q "the cluster UUID is unknown" "$T_TMP/nouuid.log" && ok "without a cluster UUID: exit 1 naming it" ||
	fail "without a cluster UUID: exit 1 naming it" "exit $rc: $(tail -2 "$T_TMP/nouuid.log")"

# --- AWSInstanceClass: strict validation against the CRD ----------------------------------------
cat >"$T_TMP/ic-good.yaml" <<'EOF'
apiVersion: deckhouse.io/v1
kind: AWSInstanceClass
metadata: {name: worker}
spec:
  instanceType: m5.large
  ami: ami-0123456789abcdef0
  spot: true
  additionalSecurityGroups: [sg-0abc]
  additionalTags: {team: x}
EOF
check "a valid AWSInstanceClass (v1) is accepted with --validate=strict" kc apply --validate=strict -f "$T_TMP/ic-good.yaml"
check "its defaults are set (diskType gp2, diskSizeGb 20)" bash -c "[ \"\$(kubectl --kubeconfig '$KC' get awsinstanceclass worker -o jsonpath='{.spec.diskType} {.spec.diskSizeGb}')\" = 'gp2 20' ]"
sed 's#deckhouse.io/v1$#deckhouse.io/v1alpha1#; s/name: worker/name: old/' "$T_TMP/ic-good.yaml" >"$T_TMP/ic-alpha.yaml"
check "v1alpha1 is served too" kc apply --validate=strict -f "$T_TMP/ic-alpha.yaml"
refused() { # refused FILE WORDS...: kubectl refuses FILE and names WORDS
	local out f=$1
	shift
	out=$(kubectl --kubeconfig "$KC" apply --validate=strict -f "$f" 2>&1) && return 1
	for w in "$@"; do grep -qF -- "$w" <<<"$out" || { echo "$out"; return 1; }; done
}
printf 'apiVersion: deckhouse.io/v1\nkind: AWSInstanceClass\nmetadata: {name: bad1}\nspec:\n  ami: ami-1\n  diskType: gp9\n' >"$T_TMP/ic-bad1.yaml"
check "an AWSInstanceClass without instanceType and with an unknown diskType is refused, naming both" \
	refused "$T_TMP/ic-bad1.yaml" "spec.instanceType: Required value" 'spec.diskType: Unsupported value: "gp9"'
printf 'apiVersion: deckhouse.io/v1\nkind: AWSInstanceClass\nmetadata: {name: bad2}\nspec:\n  instanceType: m5.large\n  ami: ami-1\n  diskSizeGb: "20"\n' >"$T_TMP/ic-bad2.yaml"
check "a diskSizeGb that is a string is refused, naming the field" refused "$T_TMP/ic-bad2.yaml" "spec.diskSizeGb" "must be of type integer"
printf 'apiVersion: deckhouse.io/v1\nkind: AWSInstanceClass\nmetadata: {name: bad3}\nspec:\n  instanceType: m5.large\n  ami: ami-1\n  diskTypo: gp2\n' >"$T_TMP/ic-bad3.yaml"
check "an unknown field is refused (strict)" refused "$T_TMP/ic-bad3.yaml" 'unknown field "spec.diskTypo"'
check "nothing invalid was stored" bash -c "[ \"\$(kubectl --kubeconfig '$KC' get awsinstanceclasses -o name | sort | tr '\n' ' ')\" = 'awsinstanceclass.deckhouse.io/old awsinstanceclass.deckhouse.io/worker ' ]"

t_summary
