#!/usr/bin/env bash
# tests: product
# The EBS CSI driver's metadata labeler against moto (behind the fault proxy, which counts the
# EC2 calls) and the test API server. `ebs-csi-driver metadataLabeler` takes its Lease and
# labels the Nodes of EC2 instances with <driver>/enis-count and
# <driver>/non-csi-ebs-volumes-count, the values checked against what moto reports for the
# instances (interfaces; mappings less the volumes of a CSI and an in-tree PersistentVolume,
# less the root), with exactly one DescribeInstances for the first pass over every Node; Nodes
# without an instance (or whose instance EC2 does not know) get no labels; a Node added later,
# and one given its providerID later, get theirs; with a short interval the periodic pass
# follows a change in EC2 and costs one DescribeInstances a pass. Then csi-node with
# --metadata-sources=metadata-labeler and no metadata service reports the attach limit made
# from those labels (and re-read at NodeGetInfo) with zero EC2 calls; missing or garbage labels
# make it fall back to the next source; csi-controller takes its region from that source, and
# mode all serves the same NodeGetInfo.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

for t in jq curl kubectl; do command -v $t >/dev/null || { skip "metadata labeler" "$t is needed"; t_summary; }; done
expect() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$3', want '$2'"; fi; }

if ! ccm_env_start; then
	peer fail "moto, the fault proxy and the test API server start"
	t_summary
fi
export AWS_EC2_METADATA_DISABLED=true AWS_REGION=us-east-1
unset CSI_NODE_NAME AWS_EC2_ENDPOINT KUBECONFIG
D=ebs.csi.aws.com
ENIS=$D/enis-count VOLS=$D/non-csi-ebs-volumes-count
TYPE_LIMIT=27 # m5.large is not in the instance-type table: Nitro's default, 27 shared slots

# ---- instances, PersistentVolumes, Nodes ------------------------------------------------------
# A: a second interface; its root volume, a data volume, a CSI PV's volume, an in-tree PV's
# B: its root volume only
read -r iA zone vA_data vA_csi vA_tree < <(moto_py "
i = ec2.run_instances(ImageId='ami-12345678', InstanceType='m5.large', MinCount=1, MaxCount=1)['Instances'][0]
az = i['Placement']['AvailabilityZone']
vols = [ec2.create_volume(Size=1, AvailabilityZone=az)['VolumeId'] for _ in range(3)]
for v, d in zip(vols, ['/dev/sdf', '/dev/xvdaa', '/dev/xvdab']):
    ec2.attach_volume(VolumeId=v, InstanceId=i['InstanceId'], Device=d)
eni = ec2.create_network_interface(SubnetId=i['SubnetId'])['NetworkInterface']
ec2.attach_network_interface(NetworkInterfaceId=eni['NetworkInterfaceId'], InstanceId=i['InstanceId'], DeviceIndex=1)
print(i['InstanceId'], az, *vols)")
iB=$(moto_py 'print(run_instance(InstanceType="m5.large"))')
[[ $iA == i-* && $iB == i-* && $vA_tree == vol-* ]] && peer ok "moto: instances $iA and $iB" ||
	{ peer fail "moto: instances" "$iA $iB $vA_tree"; t_summary; }

pv() { # NAME SPEC-JSON
	kc create -f - >/dev/null <<EOF || peer fail "create PersistentVolume $1"
{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"$1"},
 "spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],$2}}
EOF
}
pv pv-csi "\"csi\":{\"driver\":\"$D\",\"volumeHandle\":\"$vA_csi\"}"
pv pv-intree "\"awsElasticBlockStore\":{\"volumeID\":\"aws://$zone/$vA_tree\",\"fsType\":\"ext4\"}"
pv pv-other "\"csi\":{\"driver\":\"other.csi.example\",\"volumeHandle\":\"$vA_data\"}"
pv pv-nfs "\"nfs\":{\"server\":\"10.0.0.1\",\"path\":\"/x\"}"

mknode() { # NAME [PROVIDER-ID]
	jq -n --arg name "$1" --arg pid "${2:-}" --arg zone "$zone" '{apiVersion: "v1", kind: "Node",
		metadata: {name: $name, labels: {"topology.kubernetes.io/zone": $zone,
			"topology.kubernetes.io/region": "us-east-1", "node.kubernetes.io/instance-type": "m5.large"}},
		spec: (if $pid == "" then {} else {providerID: $pid} end)}' | kc create -f - >/dev/null ||
		peer fail "create Node $1"
}
mknode node-a "aws:///$zone/$iA"
mknode node-b "aws:////$iB"
mknode node-static "static:///node-static"
mknode node-ghost "aws:///$zone/i-0123456789abcdef0"

# expected IID: "ENIS VOLUMES" from moto's view of the instance and the PVs' volumes
expected() {
	moto_py "
i = ec2.describe_instances(InstanceIds=[sys.argv[1]])['Reservations'][0]['Instances'][0]
pv = set(sys.argv[2:])
n = sum(1 for m in i.get('BlockDeviceMappings', []) if m.get('Ebs', {}).get('VolumeId') not in pv)
print(len(i.get('NetworkInterfaces', [])) or 1, max(n - 1, 0))" "$1" "$vA_csi" "$vA_tree"
}
label() { kc get node "$1" -o json 2>/dev/null | jq -r --arg k "$2" '.metadata.labels[$k] // ""'; }
labels_of() { echo "$(label "$1" "$ENIS") $(label "$1" "$VOLS")"; }
labelled() { [ -n "$(label "$1" "$ENIS")" ] && [ -n "$(label "$1" "$VOLS")" ]; }
labels_are() { [ "$(labels_of "$1")" = "$2" ]; }

# ---- the first pass ----------------------------------------------------------------------------
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
LE=(--leader-election-namespace=default --leader-election-lease-duration=3s
	--leader-election-renew-deadline=2s --leader-election-retry-period=500ms)
t0=$(date +%s.%N)
bg lab1 "$AWS_K8S" ebs-csi-driver metadataLabeler --kubeconfig="$KC" "${LE[@]}" --v=2
wait_until 20 labelled node-a && wait_until 5 labelled node-b ||
	fail "the labeler labels node-a and node-b" "$(tail -5 "$T_TMP/lab1.log")"
want_a=$(expected "$iA")
want_b=$(expected "$iB")
expect "node-a: labels as moto reports instance A (interfaces, volumes less PVs and root)" "$want_a" "$(labels_of node-a)"
expect "node-a: 2 interfaces, 1 volume (the data volume; another driver's PV does not count)" "2 1" "$want_a"
expect "node-b: labels as moto reports instance B (root only)" "$want_b" "$(labels_of node-b)"
expect "node-b: 1 interface, 0 volumes" "1 0" "$want_b"
sleep 1
expect "a Node whose providerID names no instance gets no labels" " " "$(labels_of node-static)"
expect "a Node whose instance EC2 does not know gets no labels" " " "$(labels_of node-ghost)"
first=$(calls_between "$t0" "$(python3 -c "print($t0 + 3)")" DescribeInstances)
all=$(calls_between "$t0" "$(python3 -c "print($t0 + 3)")")
expect "the first pass over 4 Nodes: one DescribeInstances" 1 "$first"
expect "the first pass: no other AWS call" 1 "$all"
holder=$(kc get lease -n default "metadata-labeler-$D" -o json 2>/dev/null | jq -r '.spec.holderIdentity // ""')
[ -n "$holder" ] && ok "the Lease metadata-labeler-$D is held ($holder)" ||
	fail "the Lease metadata-labeler-$D is held" "$(kc get lease -A 2>&1 | head)"

# ---- a Node added later, and one given its providerID later -------------------------------------
read -r iC < <(moto_py "
i = ec2.run_instances(ImageId='ami-12345678', InstanceType='m5.large', MinCount=1, MaxCount=1)['Instances'][0]
for k in (1, 2):
    eni = ec2.create_network_interface(SubnetId=i['SubnetId'])['NetworkInterface']
    ec2.attach_network_interface(NetworkInterfaceId=eni['NetworkInterfaceId'], InstanceId=i['InstanceId'], DeviceIndex=k)
v = ec2.create_volume(Size=1, AvailabilityZone=i['Placement']['AvailabilityZone'])['VolumeId']
ec2.attach_volume(VolumeId=v, InstanceId=i['InstanceId'], Device='/dev/sdg')
print(i['InstanceId'])")
iD=$(moto_py 'print(run_instance(InstanceType="m5.large"))')
n0=$(calls DescribeInstances)
t1=$SECONDS
mknode node-c "aws:///$zone/$iC"
if wait_until 10 labelled node-c; then
	ok "a Node added later is labelled ($((SECONDS - t1)) s, the pass every 60 min)"
else fail "a Node added later is labelled" "$(tail -5 "$T_TMP/lab1.log")"; fi
expect "node-c: labels as moto reports instance C (3 interfaces, 1 volume)" "$(expected "$iC")" "$(labels_of node-c)"
expect "node-c: one DescribeInstances for it" 1 "$(($(calls DescribeInstances) - n0))"
mknode node-d
sleep 1
expect "a Node without a providerID yet: no labels" " " "$(labels_of node-d)"
kc patch node node-d --type=merge -p "{\"spec\":{\"providerID\":\"aws:///$zone/$iD\"}}" >/dev/null
wait_until 10 labels_are node-d "$(expected "$iD")" && ok "node-d is labelled once it has its providerID" ||
	fail "node-d is labelled once it has its providerID" "'$(labels_of node-d)'"

# a standby replica does not label: it waits for the Lease
bg lab2 "$AWS_K8S" ebs-csi-driver metadataLabeler --kubeconfig="$KC" "${LE[@]}" --v=2
sleep 2
grep -q "started leading" "$T_TMP/lab2.log" && fail "a second labeler stays standby" "it leads" ||
	ok "a second labeler stays standby while the first holds the Lease"
stop_within "$(cat "$T_TMP/lab2.pid")" 10 lab2 && expect "the standby labeler exits 0 on SIGTERM" 0 "$STOP_RC"
if stop_within "$(cat "$T_TMP/lab1.pid")" 10 lab1; then
	expect "the labeler exits 0 on SIGTERM" 0 "$STOP_RC"
	! grep -q "Sanitizer\|runtime error" "$T_TMP/lab1.log" && ok "the labeler's log holds no sanitizer report" ||
		fail "the labeler's log holds no sanitizer report" "$(grep -A5 "Sanitizer\|runtime error" "$T_TMP/lab1.log" | head)"
fi

# ---- the periodic pass ---------------------------------------------------------------------------
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
bg lab3 "$AWS_K8S" ebs-csi-driver metadataLabeler --kubeconfig="$KC" "${LE[@]}" \
	--metadata-labeler-interval=2s --v=2
wait_until 15 grep -q "metadata labeler pass" "$T_TMP/lab3.log" || fail "the third labeler runs a pass" "$(tail -3 "$T_TMP/lab3.log")"
moto_py "
i = ec2.describe_instances(InstanceIds=['$iB'])['Reservations'][0]['Instances'][0]
v = ec2.create_volume(Size=1, AvailabilityZone=i['Placement']['AvailabilityZone'])['VolumeId']
ec2.attach_volume(VolumeId=v, InstanceId='$iB', Device='/dev/sdh')"
wait_until 10 labels_are node-b "$(expected "$iB")" && ok "the periodic pass follows a volume attached to B: $(labels_of node-b)" ||
	fail "the periodic pass follows a volume attached to B" "'$(labels_of node-b)', want '$(expected "$iB")'"
expect "node-b now has 1 volume" "1 1" "$(labels_of node-b)"
sleep 4
if stop_within "$(cat "$T_TMP/lab3.pid")" 10 lab3; then
	expect "the third labeler exits 0 on SIGTERM" 0 "$STOP_RC"
	# every call of this labeler was a pass's (no Node joined meanwhile)
	passes=$(grep -c "metadata labeler pass" "$T_TMP/lab3.log")
	n=$(calls DescribeInstances)
	if [ "$passes" -ge 3 ] && [ "$n" = "$passes" ]; then
		ok "one DescribeInstances per pass over 6 Nodes ($passes passes, $n calls)"
	else fail "one DescribeInstances per pass" "$passes passes, $n calls"; fi
fi

# ---- csi-node with --metadata-sources=metadata-labeler, no metadata service ---------------------
N=0
# node NAME ARGS...: csi-node (CSI_NODE_NAME from the caller), its NodeGetInfo reply in INFO
node_start() {
	local name=$1
	shift
	N=$((N + 1))
	SOCK=$T_TMP/n$N.sock
	bg "$name" "$AWS_K8S" csi-node --endpoint "unix://$SOCK" --kubeconfig "$KC" "$@"
	for _ in $(seq 200); do [ -S "$SOCK" ] && break; sleep 0.05; done
}
info() { "$AWS_K8S" csi-client --endpoint "unix://$SOCK" node-get-info 2>&1; }
field() { jq -r "$1" <<<"$INFO" 2>/dev/null; }
node_stop() { kill "$(cat "$T_TMP/$1.pid")" 2>/dev/null; }

read -r ea va <<<"$(labels_of node-a)"
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
CSI_NODE_NAME=node-a node_start na --metadata-sources=metadata-labeler
INFO=$(info)
expect "csi-node: the node id from node-a's providerID" "$iA" "$(field .node_id)"
expect "csi-node: max_volumes_per_node = 27 - ($va volumes + root) - ($ea interfaces - 1)" \
	$((TYPE_LIMIT - (va + 1) - (ea - 1))) "$(field .max_volumes_per_node)"
grep -q 'how="instance-type table\|how="table default' "$T_TMP/na.log" &&
	grep -q "reserved (metadata-labeler Node labels)" "$T_TMP/na.log" &&
	ok "csi-node logs the limit's inputs (metadata-labeler Node labels)" ||
	fail "csi-node logs the limit's inputs" "$(grep 'attach limit' "$T_TMP/na.log")"
# the labels change: NodeGetInfo reads them again
kc label node node-a --overwrite "$ENIS=4" "$VOLS=3" >/dev/null
INFO=$(info)
expect "csi-node: NodeGetInfo re-reads the labels (4 interfaces, 3 volumes)" \
	$((TYPE_LIMIT - 4 - 3)) "$(field .max_volumes_per_node)"
kc label node node-a "$ENIS-" >/dev/null
INFO=$(info)
expect "csi-node: a label gone at NodeGetInfo: the last limit stands" \
	$((TYPE_LIMIT - 4 - 3)) "$(field .max_volumes_per_node)"
expect "csi-node: zero AWS calls" 0 "$(calls)"
node_stop na

# missing labels (node-a now lacks one) and garbage: the next source, kubernetes, is used
CSI_NODE_NAME=node-a node_start nmiss --metadata-sources=metadata-labeler,kubernetes
INFO=$(info)
expect "a label missing: the node id from the next source" "$iA" "$(field .node_id)"
expect "a label missing: the limit without counts (27 - root)" $((TYPE_LIMIT - 1)) "$(field .max_volumes_per_node)"
grep -q 'lacks the metadata labeler.s counts" source="metadata-labeler" node="node-a" why="no label ebs.csi.aws.com/enis-count"' "$T_TMP/nmiss.log" &&
	ok "a label missing: the source's failure is logged" || fail "a label missing: logged" "$(grep metadata-labeler "$T_TMP/nmiss.log")"
node_stop nmiss
kc label node node-a --overwrite "$ENIS=two" >/dev/null
CSI_NODE_NAME=node-a node_start ngarb --metadata-sources=metadata-labeler,kubernetes
INFO=$(info)
expect "a garbage label: the next source is used" "$((TYPE_LIMIT - 1))" "$(field .max_volumes_per_node)"
grep -qF 'is not a count' "$T_TMP/ngarb.log" && ok "a garbage label: named in the log" ||
	fail "a garbage label: named in the log" "$(grep metadata-labeler "$T_TMP/ngarb.log")"
node_stop ngarb
OUT=$T_TMP/nonly.out
CSI_NODE_NAME=node-a timeout 20 "$AWS_K8S" csi-node --endpoint "unix://$T_TMP/nonly.sock" \
	--kubeconfig "$KC" --metadata-sources=metadata-labeler >"$OUT" 2>&1
expect "metadata-labeler alone, garbage label: no node id, exit 1" 1 "$?"
expect "csi-node runs: zero AWS calls in all" 0 "$(calls)"
kc label node node-a --overwrite "$ENIS=$ea" "$VOLS=$va" >/dev/null

# mode all: the node part reads the same labels; without AWS_REGION both parts take the region
# from them (upstream asks one metadata service for both)
SOCK=$T_TMP/all.sock
bg all env -u AWS_REGION -u AWS_DEFAULT_REGION CSI_NODE_NAME=node-b "$AWS_K8S" ebs-csi-driver all \
	--endpoint "unix://$SOCK" --kubeconfig "$KC" --metadata-sources=metadata-labeler
for _ in $(seq 200); do [ -S "$SOCK" ] && break; sleep 0.05; done
INFO=$(info)
read -r eb vb <<<"$(labels_of node-b)"
expect "ebs-csi-driver all: NodeGetInfo from node-b's labels" \
	"$iB $((TYPE_LIMIT - (vb + 1) - (eb - 1)))" "$(field .node_id) $(field .max_volumes_per_node)"
grep -qF "region from the node's metadata\" region=\"us-east-1\"" "$T_TMP/all.log" &&
	ok "ebs-csi-driver all without AWS_REGION: the controller's region from node-b's labels" ||
	fail "ebs-csi-driver all: the controller's region from the node" "$(grep -i region "$T_TMP/all.log" | tail -3)"
node_stop all

# ---- csi-controller: the region from the metadata-labeler source --------------------------------
ctrl() { # NAME NODE: csi-controller without AWS_REGION, --metadata-sources=metadata-labeler
	OUT=$T_TMP/$1.out
	env -u AWS_REGION -u AWS_DEFAULT_REGION CSI_NODE_NAME=$2 timeout 20 "$AWS_K8S" csi-controller \
		--endpoint "unix://$T_TMP/no-dir/x.sock" --kubeconfig "$KC" \
		--metadata-sources=metadata-labeler >"$OUT" 2>&1
	RC=$?
}
kc label node node-d --overwrite topology.kubernetes.io/region=us-west-2 >/dev/null
ctrl c-lab node-d
grep -qF 'region from metadata" source="metadata-labeler" region="us-west-2"' "$OUT" &&
	ok "csi-controller: the region from a labelled Node" || fail "csi-controller: the region from a labelled Node" "$(tail -3 "$OUT")"
ctrl c-unlab node-ghost
expect "csi-controller: an unlabelled Node: no region, exit 1" 1 "$RC"
grep -qF 'no region from this metadata source" source="metadata-labeler"' "$OUT" && ! grep -q "not implemented" "$OUT" &&
	ok "csi-controller: the source's failure is named" || fail "csi-controller: the source's failure is named" "$(tail -3 "$OUT")"
t_summary
