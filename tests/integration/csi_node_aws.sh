#!/usr/bin/env bash
# tests: product
# csi-node's NodeGetInfo against the AWS test bed: the node id, zone and interfaces from the
# metadata fake (built from a moto instance), the attach limit from the built-in instance-type
# table, the Kubernetes metadata source against the fake API server, and the flags that override
# them. csi-node reaches EC2 through the fault proxy, which counts its calls: none by default
# (as upstream's node, whose IAM role usually has no EC2 rights), one DescribeInstanceTypes with
# the opt-in --describe-instance-type. The instance has, from before the plugin starts, a CSI
# volume (tagged, at /dev/xvdaa) and a data disk at /dev/sdf: only the data disk may lower the
# limit. The topology is exactly upstream's map (no zone-id key, which would change CSINode).
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"

if ! "$AWS_K8S" --help 2>/dev/null | grep -q "^  csi-client "; then
	skip "csi-node NodeGetInfo" "this binary has no csi-client"
	t_summary
fi
need_ok=1
for t in jq curl; do command -v $t >/dev/null || need_ok=0; done
[ $need_ok = 1 ] || { skip "csi-node NodeGetInfo" "jq and curl are needed"; t_summary; }

moto_start || { fail "moto starts"; t_summary; }
iid=$(moto_py 'print(run_instance(InstanceType="m5.large"))')
moto_py '
iid = sys.argv[1]
v = ec2.create_volume(AvailabilityZone="us-east-1a", Size=1,
    TagSpecifications=[{"ResourceType": "volume", "Tags": [{"Key": "CSIVolumeName", "Value": "pvc-1"},
                                                          {"Key": "ebs.csi.aws.com/cluster", "Value": "true"}]}])
ec2.attach_volume(VolumeId=v["VolumeId"], InstanceId=iid, Device="/dev/xvdaa")
d = ec2.create_volume(AvailabilityZone="us-east-1a", Size=1)
ec2.attach_volume(VolumeId=d["VolumeId"], InstanceId=iid, Device="/dev/sdf")
' "$iid" || fail "moto set-up"
# the metadata fake is built from the instance as it is now: its block-device mapping lists
# both volumes, as the real service does after a stop/start with them attached
imds_start --from-moto "$MOTO_URL" --instance-id "$iid" || { fail "imds fake starts"; t_summary; }

N=0
# node NAME ARGS...: starts csi-node with ARGS, prints its NodeGetInfo reply, stops it.
node() {
	local name=$1 sock
	shift
	N=$((N + 1))
	sock=$T_TMP/n$N.sock
	bg "$name" "$AWS_K8S" csi-node --endpoint "unix://$sock" "$@"
	for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
	"$AWS_K8S" csi-client --endpoint "unix://$sock" node-get-info
	kill "$(cat "$T_TMP/$name.pid")" 2>/dev/null
}
field() { jq -r "$1" <<<"$2"; }

faultproxy_start "$MOTO_URL" || { fail "fault proxy starts"; t_summary; }
# every AWS call of csi-node goes through the proxy (moto_py and the metadata fake do not)
export AWS_ENDPOINT_URL=$FAULTPROXY_URL
calls_reset() { tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null; }
# calls [KEY]: the AWS calls csi-node made since the last reset (all, or "ec2:Action")
calls() {
	if [ $# = 0 ]; then tb_json "$FAULTPROXY_URL/_control/calls?log=0" | jq -r .total
	else tb_json "$FAULTPROXY_URL/_control/calls?log=0" | jq -r --arg k "$1" '.counts[$k] // 0'; fi
}
keys() { jq -c '.accessible_topology.segments | keys' <<<"$1"; }
UPSTREAM_KEYS='["kubernetes.io/os","topology.ebs.csi.aws.com/zone","topology.kubernetes.io/zone"]'

# ---- by default: everything from the metadata service and the table, no EC2 call ----
export AWS_EC2_METADATA_SERVICE_ENDPOINT=$IMDS_URL AWS_EC2_METADATA_DISABLED=false
calls_reset
info=$(node imds)
check "imds: node id is the instance id" test "$(field .node_id "$info")" = "$iid"
check "imds: zone" test "$(field '.accessible_topology.segments["topology.ebs.csi.aws.com/zone"]' "$info")" = us-east-1a
check "imds: well-known zone" test "$(field '.accessible_topology.segments["topology.kubernetes.io/zone"]' "$info")" = us-east-1a
check "imds: os" test "$(field '.accessible_topology.segments["kubernetes.io/os"]' "$info")" = linux
check "imds: exactly upstream's topology keys (no zone-id)" test "$(keys "$info")" = "$UPSTREAM_KEYS"
# m5.large: a Nitro type the table does not list, 27 shared; root + the data disk from the
# block-device mapping; the CSI volume at xvdaa is not counted
check "default: 27 - root - data disk = 25" test "$(field .max_volumes_per_node "$info")" = 25
check "default: the log says where the figure comes from" \
	grep -q 'table default (type not listed): 27 shared, 2 reserved (metadata block-device mappings)' "$T_TMP/imds.log"
check "default: no EC2 call at all (fault proxy count)" test "$(calls)" = 0

# ---- opt-in: one DescribeInstanceTypes, nothing else ----
calls_reset
info=$(node facts --describe-instance-type)
check "--describe-instance-type: EC2's 27 - root - data disk = 25" test "$(field .max_volumes_per_node "$info")" = 25
check "--describe-instance-type: the figure is EC2's" \
	grep -q 'EC2 DescribeInstanceTypes: 27 shared, 2 reserved (metadata block-device mappings)' "$T_TMP/facts.log"
check "--describe-instance-type: one DescribeInstanceTypes" test "$(calls ec2:DescribeInstanceTypes)" = 1
check "--describe-instance-type: and no other AWS call" test "$(calls)" = 1
# without EC2 rights: the table, and the node still starts
fault '{"service": "ec2", "action": "DescribeInstanceTypes", "effect": "error", "status": 403, "code": "UnauthorizedOperation", "message": "not authorized"}'
info=$(node denied --describe-instance-type)
check "--describe-instance-type denied: the table's 25" test "$(field .max_volumes_per_node "$info")" = 25
check "--describe-instance-type denied: logged" grep -q "no instance type facts from EC2; using the built-in table" "$T_TMP/denied.log"
clear_faults

# ---- more interfaces on a shared-limit type lower the limit ----
moto_py '
iid = sys.argv[1]
inst = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
for i in (1, 2):
    eni = ec2.create_network_interface(SubnetId=inst["SubnetId"])
    ec2.attach_network_interface(NetworkInterfaceId=eni["NetworkInterface"]["NetworkInterfaceId"], InstanceId=iid, DeviceIndex=i)
' "$iid" || fail "moto: extra interfaces"
imds_stop
imds_start --from-moto "$MOTO_URL" --instance-id "$iid" || fail "imds fake restarts"
export AWS_EC2_METADATA_SERVICE_ENDPOINT=$IMDS_URL
calls_reset
info=$(node enis)
check "three interfaces: 25 - 2 = 23" test "$(field .max_volumes_per_node "$info")" = 23

# ---- the flags win ----
info=$(node limit --volume-attach-limit 10 --describe-instance-type)
check "--volume-attach-limit" test "$(field .max_volumes_per_node "$info")" = 10
info=$(node reserved --reserved-volume-attachments 5)
check "--reserved-volume-attachments: 27 - 5 - 2 extra interfaces = 20" test "$(field .max_volumes_per_node "$info")" = 20
"$AWS_K8S" csi-node --endpoint "unix://$T_TMP/x.sock" --volume-attach-limit 1 --reserved-volume-attachments 1 >"$T_TMP/both.out" 2>&1
check "both limit flags: usage error" test $? = 2
check "both limit flags: says so" grep -q "only one of --volume-attach-limit and --reserved-volume-attachments" "$T_TMP/both.out"
"$AWS_K8S" csi-node --endpoint "unix://$T_TMP/x.sock" --metadata-sources imds,ec2 >"$T_TMP/src.out" 2>&1
check "an unknown metadata source: usage error" test $? = 2
info=$(node override --node-id i-0feedfeedfeedfeed --availability-zone eu-west-1b --instance-type m7i.48xlarge)
check "--node-id" test "$(field .node_id "$info")" = i-0feedfeedfeedfeed
check "--availability-zone" test "$(field '.accessible_topology.segments["topology.kubernetes.io/zone"]' "$info")" = eu-west-1b
check "--instance-type m7i.48xlarge: 128 dedicated - root" test "$(field .max_volumes_per_node "$info")" = 127
check "no EC2 call from any of these nodes" test "$(calls)" = 0
"$AWS_K8S" csi-node --help 2>&1 | grep -A1 -- "--describe-instance-type" >"$T_TMP/help.out"
check "--help: --describe-instance-type is off by default" grep -q "Off by default" "$T_TMP/help.out"

# ---- no metadata at all ----
export AWS_EC2_METADATA_DISABLED=true
"$AWS_K8S" csi-node --endpoint "unix://$T_TMP/y.sock" --metadata-sources imds >"$T_TMP/nometa.out" 2>&1
check "no metadata and no --node-id: exit 1" test $? = 1
check "no metadata and no --node-id: says what to do" grep -q -- "--node-id" "$T_TMP/nometa.out"

# ---- the Kubernetes metadata source ----
if command -v kubectl >/dev/null; then
	KPORT=$(free_port)
	bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KPORT" --kubeconfig-out "$T_TMP/kc"
	wait_http "https://127.0.0.1:$KPORT/healthz" 20
	export KUBECACHEDIR=$T_TMP/kcache
	cat >"$T_TMP/node.json" <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"ip-10-0-0-1.ec2.internal",
 "labels":{"node.kubernetes.io/instance-type":"c7i.large","topology.kubernetes.io/zone":"us-east-1c",
           "topology.k8s.aws/zone-id":"use1-az6"}},
 "spec":{"providerID":"aws:///us-east-1c/i-0123456789abcdef0"}}
EOF
	kubectl --kubeconfig "$T_TMP/kc" create -f "$T_TMP/node.json" >/dev/null 2>&1
	calls_reset
	info=$(CSI_NODE_NAME=ip-10-0-0-1.ec2.internal node kube --kubeconfig "$T_TMP/kc")
	check "kubernetes: node id from the providerID" test "$(field .node_id "$info")" = i-0123456789abcdef0
	check "kubernetes: zone" test "$(field '.accessible_topology.segments["topology.ebs.csi.aws.com/zone"]' "$info")" = us-east-1c
	check "kubernetes: exactly upstream's topology keys (the Node's zone-id label not published)" \
		test "$(keys "$info")" = "$UPSTREAM_KEYS"
	check "kubernetes: the instance type from the label (c7i.large: 32 dedicated - root)" \
		test "$(field .max_volumes_per_node "$info")" = 31
	check "kubernetes: no EC2 call" test "$(calls)" = 0

	# the startup taint goes once kubelet has registered the plugin (CSINode), others stay
	kubectl --kubeconfig "$T_TMP/kc" taint node ip-10-0-0-1.ec2.internal \
		ebs.csi.aws.com/agent-not-ready=:NoExecute other=x:NoSchedule >/dev/null 2>&1
	taints() { kubectl --kubeconfig "$T_TMP/kc" get node ip-10-0-0-1.ec2.internal -o jsonpath='{.spec.taints[*].key}'; }
	peer check "taint: set up" test "$(taints)" = "ebs.csi.aws.com/agent-not-ready other"
	CSI_NODE_NAME=ip-10-0-0-1.ec2.internal bg untaint "$AWS_K8S" csi-node --endpoint "unix://$T_TMP/u.sock" \
		--kubeconfig "$T_TMP/kc" --describe-instance-type=false --v 4
	sleep 2.5
	check "taint: kept while the plugin is not registered" test "$(taints)" = "ebs.csi.aws.com/agent-not-ready other"
	echo '{"apiVersion":"storage.k8s.io/v1","kind":"CSINode","metadata":{"name":"ip-10-0-0-1.ec2.internal"},
 "spec":{"drivers":[{"name":"ebs.csi.aws.com","nodeID":"i-0123456789abcdef0","allocatable":{"count":26},
 "topologyKeys":["topology.ebs.csi.aws.com/zone"]}]}}' >"$T_TMP/csinode.json"
	kubectl --kubeconfig "$T_TMP/kc" create -f "$T_TMP/csinode.json" >/dev/null 2>&1
	for _ in $(seq 100); do [ "$(taints)" = other ] && break; sleep 0.1; done
	check "taint: removed once CSINode lists the driver, the other taint kept" test "$(taints)" = other
	check "taint: logged" grep -q "removed the startup taint" "$T_TMP/untaint.log"
else
	skip "kubernetes metadata source" "kubectl is not installed"
fi
t_summary
