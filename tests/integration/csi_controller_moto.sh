#!/usr/bin/env bash
# tests: product
# csi-controller against moto, driven by `aws-k8s csi-client`: the acceptance flow of the
# issue (create gp3 / io2 / encrypted / from a snapshot, idempotent repeat, conflicting
# repeat, publish two volumes to one instance, unpublish, expand, modify, snapshots paged by
# two, delete everything), the CSI error codes of invalid requests, garbage protobuf, the
# metrics, and a graceful stop.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/csi_controller_lib.sh"

expect() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$3', want '$2'"; fi; }

# --k8s-tag-cluster-id must make a valid AWS tag key kubernetes.io/cluster/<ID>: a usage error
for id in "$(printf 'x%.0s' {1..107})" "a,b"; do
	out=$("$AWS_K8S" csi-controller --endpoint="unix://$T_TMP/never.sock" --k8s-tag-cluster-id="$id" 2>&1)
	rc=$?
	if [ "$rc" = 2 ] && grep -q "^aws-k8s csi-controller: --k8s-tag-cluster-id: cluster ID" <<<"$out"; then
		ok "--k8s-tag-cluster-id '${id:0:12}' (${#id} characters) is refused with exit 2"
	else fail "--k8s-tag-cluster-id '${id:0:12}' is refused" "rc=$rc $out"; fi
done

moto_start || { fail "moto starts"; t_summary; }
if csi_ctrl_start; then ok "csi-controller serves its socket"
else
	fail "csi-controller serves its socket"
	t_summary
fi
GIB=1073741824

# ---- identity ----
out=$(cc get-plugin-info)
expect "GetPluginInfo name" ebs.csi.aws.com "$(jget "$out" .name)"
# the exact lists, in order (tests/unit/test_csi_caps.c says how they compare with upstream's)
out=$(cc get-plugin-capabilities)
expect "GetPluginCapabilities: exactly upstream's two" "CONTROLLER_SERVICE,VOLUME_ACCESSIBILITY_CONSTRAINTS" \
	"$(jget "$out" '[.capabilities[] | .service.type // "other"] | join(",")')"
expect "Probe is ready (EC2 dry run)" true "$(jget "$(cc probe)" .ready)"
out=$(cc controller-get-capabilities)
expect "ControllerGetCapabilities: upstream's seven, with LIST_VOLUMES(_PUBLISHED_NODES) and GET_VOLUME" \
	"CREATE_DELETE_VOLUME,PUBLISH_UNPUBLISH_VOLUME,LIST_VOLUMES,LIST_VOLUMES_PUBLISHED_NODES,GET_VOLUME,CREATE_DELETE_SNAPSHOT,LIST_SNAPSHOTS,CLONE_VOLUME,EXPAND_VOLUME,MODIFY_VOLUME" \
	"$(jget "$out" '[.capabilities[].rpc.type] | join(",")')"

# ---- an instance to attach to ----
iid=$(moto_py 'print(run_instance(InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"}))')
[[ $iid == i-* ]] && ok "instance $iid" || fail "instance" "$iid"

# ---- create ----
out=$(cc create-volume --name pvc-gp3 --size 10Gi --param type=gp3 --param csi.storage.k8s.io/pvc/name=data \
	--param csi.storage.k8s.io/pvc/namespace=prod --param tagSpecification_1='owner={{ .PVCNamespace }}' \
	--param csi.storage.k8s.io/fstype=xfs --param blockSize=4096 --capability mount:xfs --zone us-east-1a)
v1=$(jget "$out" .volume.volume_id)
[[ $v1 == vol-* ]] && ok "gp3 volume created ($v1)" || fail "gp3 volume created" "$out"
expect "capacity is 10 GiB" $((10 * GIB)) "$(jget "$out" .volume.capacity_bytes)"
expect "accessible topology is the zone" us-east-1a "$(jget "$out" '.volume.accessible_topology[0].segments["topology.kubernetes.io/zone"]')"
expect "volume context carries the format options" 4096 "$(jget "$out" .volume.volume_context.blockSize)"
expect "volume context carries the fstype" xfs "$(jget "$out" '.volume.volume_context["csi.storage.k8s.io/fstype"]')"
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
tags = {t["Key"]: t["Value"] for t in v.get("Tags", [])}
eq("moto: type gp3", v["VolumeType"], "gp3")
eq("moto: size 10", v["Size"], 10)
eq("moto: zone", v["AvailabilityZone"], "us-east-1a")
eq("moto: CSIVolumeName tag", tags.get("CSIVolumeName"), "pvc-gp3")
eq("moto: cluster tag", tags.get("ebs.csi.aws.com/cluster"), "true")
eq("moto: pvc name tag", tags.get("kubernetes.io/created-for/pvc/name"), "data")
eq("moto: tagSpecification with a template", tags.get("owner"), "prod")
eq("moto: kubernetes.io/cluster tag", tags.get("kubernetes.io/cluster/test"), "owned")
eq("moto: the volume tags, exactly as upstream v1.64", tags, {
    "CSIVolumeName": "pvc-gp3", "ebs.csi.aws.com/cluster": "true",
    "kubernetes.io/created-for/pvc/name": "data", "kubernetes.io/created-for/pvc/namespace": "prod",
    "kubernetes.io/cluster/test": "owned", "Name": "test-dynamic-pvc-gp3",
    "KubernetesCluster": "test", "owner": "prod"})
' "$v1"

# a tagSpecification replaces Name (upstream applies them last); reserved keys are refused;
# a template with upstream's functions (pipelines, nested calls)
out=$(cc create-volume --name pvc-named --size 1Gi --param tagSpecification_1='Name=my-{{ .PVName }}' \
	--param tagSpecification_2='short={{ .PVName | substring 0 2 | toUpper }}-{{ field "-" 1 .PVName }}' \
	--param csi.storage.k8s.io/pv/name=pv-7 --zone us-east-1a)
vn=$(jget "$out" .volume.volume_id)
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
eq("moto: tagSpecification Name wins over <cluster>-dynamic-<name>", {t["Key"]: t["Value"] for t in v.get("Tags", [])}, {
    "CSIVolumeName": "pvc-named", "ebs.csi.aws.com/cluster": "true",
    "kubernetes.io/created-for/pv/name": "pv-7", "kubernetes.io/cluster/test": "owned",
    "Name": "my-pv-7", "KubernetesCluster": "test", "short": "PV-7"})
' "$vn"
expect "tagSpecification CSIVolumeName=x (reserved) is InvalidArgument" InvalidArgument \
	"$(cc_code create-volume --name pvc-bad --size 1Gi --param tagSpecification_1=CSIVolumeName=x --zone us-east-1a)"
expect "tagSpecification kubernetes.io/x (reserved prefix) is InvalidArgument" InvalidArgument \
	"$(cc_code create-volume --name pvc-bad --size 1Gi --param tagSpecification_1=kubernetes.io/x=y --zone us-east-1a)"
cc delete-volume --volume "$vn" >/dev/null
# a template upstream would not run: InvalidArgument, the message listing what a template may use
err=$(cc create-volume --name pvc-badtpl --size 1Gi --param tagSpecification_1='x={{ .PVName | upper }}' \
	--zone us-east-1a 2>&1 >/dev/null)
if grep -q 'code = InvalidArgument' <<<"$err" &&
	grep -qF 'function "upper" not defined (known: variables .PVCName .PVCNamespace .PVName; functions contains field index lastIndex substring toLower toUpper' <<<"$err"; then
	ok "tagSpecification with an unknown template function is InvalidArgument, naming the known ones"
else fail "tagSpecification with an unknown template function" "$err"; fi
n=$(moto_py 'print(len(ec2.describe_volumes(Filters=[{"Name":"tag:CSIVolumeName","Values":["pvc-badtpl"]}])["Volumes"]))')
expect "no volume made for the bad template" 0 "$n"

out=$(cc create-volume --name pvc-gp3 --size 10Gi --param type=gp3 --param csi.storage.k8s.io/pvc/name=data \
	--param csi.storage.k8s.io/pvc/namespace=prod --param tagSpecification_1='owner={{ .PVCNamespace }}' \
	--param csi.storage.k8s.io/fstype=xfs --param blockSize=4096 --capability mount:xfs --zone us-east-1a)
expect "repeated CreateVolume returns the same volume" "$v1" "$(jget "$out" .volume.volume_id)"
expect "repeated CreateVolume: the same context" 4096 "$(jget "$out" .volume.volume_context.blockSize)"
n=$(moto_py 'print(len(ec2.describe_volumes(Filters=[{"Name":"tag:CSIVolumeName","Values":["pvc-gp3"]}])["Volumes"]))')
expect "only one volume in moto for the name" 1 "$n"
expect "conflicting repeat (20Gi) is AlreadyExists" AlreadyExists \
	"$(cc_code create-volume --name pvc-gp3 --size 20Gi --param type=gp3 --zone us-east-1a)"
expect "conflicting repeat (io2) is AlreadyExists" AlreadyExists \
	"$(cc_code create-volume --name pvc-gp3 --size 10Gi --param type=io2 --param iops=1000 --zone us-east-1a)"

out=$(cc create-volume --name pvc-io2 --size 10Gi --param type=io2 --param iops=3000 --zone us-east-1a)
v2=$(jget "$out" .volume.volume_id)
[[ $v2 == vol-* ]] && ok "io2 volume created ($v2)" || fail "io2 volume created" "$out"
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
eq("moto: io2", v["VolumeType"], "io2")
eq("moto: io2 iops", v.get("Iops"), 3000)
' "$v2"

key=$(moto_py 'print(client("kms").create_key()["KeyMetadata"]["Arn"])')
out=$(cc create-volume --name pvc-enc --size 5Gi --param encrypted=true --param kmsKeyId="$key" --zone us-east-1a)
v3=$(jget "$out" .volume.volume_id)
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
eq("moto: encrypted", v["Encrypted"], True)
eq("moto: KMS key", v.get("KmsKeyId"), sys.argv[2])
' "$v3" "$key"

out=$(cc create-volume --name pvc-nozone --size 1Gi)
v4=$(jget "$out" .volume.volume_id)
z=$(jget "$out" '.volume.accessible_topology[0].segments["topology.kubernetes.io/zone"]')
[[ $z == us-east-1? ]] && ok "no zone asked: a zone of the region ($z)" || fail "no zone asked" "$out"

# ---- snapshots ----
out=$(cc create-snapshot --name snap-1 --source-volume "$v1")
s1=$(jget "$out" .snapshot.snapshot_id)
[[ $s1 == snap-* ]] && ok "snapshot created ($s1)" || fail "snapshot created" "$out"
expect "snapshot ready (moto completes at once)" true "$(jget "$out" .snapshot.ready_to_use)"
expect "snapshot size" $((10 * GIB)) "$(jget "$out" .snapshot.size_bytes)"
moto_py_checks '
s = ec2.describe_snapshots(SnapshotIds=[sys.argv[1]])["Snapshots"][0]
eq("moto: the snapshot tags, exactly as upstream v1.64", {t["Key"]: t["Value"] for t in s.get("Tags", [])}, {
    "CSIVolumeSnapshotName": "snap-1", "ebs.csi.aws.com/cluster": "true",
    "kubernetes.io/cluster/test": "owned", "Name": "test-dynamic-snap-1"})
' "$s1"
out=$(cc create-snapshot --name snap-t --source-volume "$v1" --param csi.storage.k8s.io/volumesnapshot/name=nightly \
	--param csi.storage.k8s.io/volumesnapshot/namespace=prod --param csi.storage.k8s.io/volumesnapshotcontent/name=snapcontent-1 \
	--param tagSpecification_1='backup={{ .VolumeSnapshotNamespace }}/{{ .VolumeSnapshotName }}' \
	--param tagSpecification_2='Name={{ .VolumeSnapshotContentName }}' \
	--param tagSpecification_3='kind={{ .VolumeSnapshotContentName | field "-" 0 | toUpper }}')
st=$(jget "$out" .snapshot.snapshot_id)
moto_py_checks '
s = ec2.describe_snapshots(SnapshotIds=[sys.argv[1]])["Snapshots"][0]
eq("moto: snapshot tagSpecification templates; no created-for tags", {t["Key"]: t["Value"] for t in s.get("Tags", [])}, {
    "CSIVolumeSnapshotName": "snap-t", "ebs.csi.aws.com/cluster": "true",
    "kubernetes.io/cluster/test": "owned", "Name": "snapcontent-1", "backup": "prod/nightly",
    "kind": "SNAPCONTENT"})
' "$st"
cc delete-snapshot --snapshot "$st" >/dev/null
expect "repeated CreateSnapshot: same snapshot" "$s1" "$(jget "$(cc create-snapshot --name snap-1 --source-volume "$v1")" .snapshot.snapshot_id)"
expect "CreateSnapshot with the same name, another volume: AlreadyExists" AlreadyExists \
	"$(cc_code create-snapshot --name snap-1 --source-volume "$v2")"
s2=$(jget "$(cc create-snapshot --name snap-2 --source-volume "$v2")" .snapshot.snapshot_id)
s3=$(jget "$(cc create-snapshot --name snap-3 --source-volume "$v3")" .snapshot.snapshot_id)
page1=$(cc list-snapshots --max-entries 2)
expect "ListSnapshots max_entries=2: two entries" 2 "$(jget "$page1" '.entries | length')"
tok=$(jget "$page1" .next_token)
[ -n "$tok" ] && [ "$tok" != null ] && ok "ListSnapshots: a next token" || fail "ListSnapshots: a next token" "$page1"
page2=$(cc list-snapshots --max-entries 2 --starting-token "$tok")
expect "ListSnapshots page 2: the last entry" 1 "$(jget "$page2" '.entries | length')"
expect "ListSnapshots page 2: no more token" null "$(jget "$page2" .next_token)"
all=$(printf '%s\n%s' "$(jget "$page1" '.entries[].snapshot.snapshot_id')" "$(jget "$page2" '.entries[].snapshot.snapshot_id')" | sort | tr '\n' ' ')
expect "ListSnapshots pages hold every snapshot once" "$(printf '%s\n' "$s1" "$s2" "$s3" | sort | tr '\n' ' ')" "$all"
expect "ListSnapshots max_entries=1 works (upstream refuses < 5)" 1 "$(jget "$(cc list-snapshots --max-entries 1)" '.entries | length')"
expect "ListSnapshots by id" "$s2" "$(jget "$(cc list-snapshots --snapshot "$s2")" '.entries[0].snapshot.snapshot_id')"
expect "ListSnapshots by source volume" "$s3" "$(jget "$(cc list-snapshots --source-volume "$v3")" '.entries[0].snapshot.snapshot_id')"
expect "ListSnapshots of an unknown id: empty" 0 "$(jget "$(cc list-snapshots --snapshot snap-0123456789abcdef0)" '.entries | length')"
expect "ListSnapshots with a bad token: Aborted" Aborted "$(cc_code list-snapshots --starting-token '!!bad!!')"

out=$(cc create-volume --name pvc-from-snap --param type=gp3 --from-snapshot "$s1" --zone us-east-1a)
v5=$(jget "$out" .volume.volume_id)
expect "volume from a snapshot: size of the snapshot" $((10 * GIB)) "$(jget "$out" .volume.capacity_bytes)"
expect "volume from a snapshot: content source echoed" "$s1" "$(jget "$out" .volume.content_source.snapshot.snapshot_id)"
moto_py_checks 'eq("moto: volume from the snapshot", ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0].get("SnapshotId"), sys.argv[2])' "$v5" "$s1"
expect "volume from a missing snapshot: NotFound" NotFound \
	"$(cc_code create-volume --name pvc-nosnap --from-snapshot snap-0123456789abcdef0 --zone us-east-1a)"
expect "volume smaller than its snapshot: OutOfRange" OutOfRange \
	"$(cc_code create-volume --name pvc-small --size 5Gi --from-snapshot "$s1" --zone us-east-1a)"
out=$(cc create-volume --name pvc-clone --clone-of "$v1" --zone us-east-1a)
v6=$(jget "$out" .volume.volume_id)
[[ $v6 == vol-* && $v6 != "$v1" ]] && ok "clone created ($v6)" || fail "clone created" "$out"
expect "clone: content source echoed" "$v1" "$(jget "$out" .volume.content_source.volume.volume_id)"
n=$(moto_py 'print(len(ec2.describe_snapshots(Filters=[{"Name":"tag:ebs.csi.aws.com/clone-for","Values":["pvc-clone"]}])["Snapshots"]))')
expect "clone: the temporary snapshot is deleted" 0 "$n"

# ---- publish ----
out=$(cc controller-publish --volume "$v1" --node "$iid")
d1=$(jget "$out" .publish_context.devicePath)
expect "publish: the first device name of the list" /dev/xvdaa "$d1"
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
eq("moto: attached", [(a["InstanceId"], a["Device"], a["State"]) for a in v["Attachments"]], [(sys.argv[2], sys.argv[3], "attached")])
' "$v1" "$iid" "$d1"
expect "publish again: same device" "$d1" "$(jget "$(cc controller-publish --volume "$v1" --node "$iid")" .publish_context.devicePath)"
d2=$(jget "$(cc controller-publish --volume "$v2" --node "$iid")" .publish_context.devicePath)
expect "publish a second volume: another device" /dev/xvdab "$d2"
out=$(cc list-volumes)
expect "ListVolumes shows the published node" "$iid" "$(jget "$out" ".entries[] | select(.volume.volume_id == \"$v1\") | .status.published_node_ids[0]")"
expect "ListVolumes: every volume of the driver" 6 "$(jget "$out" '.entries | length')"
p1=$(cc list-volumes --max-entries 4)
expect "ListVolumes max_entries=4" 4 "$(jget "$p1" '.entries | length')"
p2=$(cc list-volumes --max-entries 4 --starting-token "$(jget "$p1" .next_token)")
expect "ListVolumes page 2" 2 "$(jget "$p2" '.entries | length')"
expect "ControllerGetVolume: published node" "$iid" "$(jget "$(cc controller-get-volume --volume "$v2")" '.status.published_node_ids[0]')"
expect "publish to a missing instance: NotFound" NotFound "$(cc_code controller-publish --volume "$v3" --node i-0123456789abcdef0)"
expect "publish a missing volume: NotFound" NotFound "$(cc_code controller-publish --volume vol-0123456789abcdef0 --node "$iid")"
expect "publish a volume of another zone: FailedPrecondition" FailedPrecondition \
	"$(cc_code controller-publish --volume "$v4" --node "$iid")"
expect "ValidateVolumeCapabilities confirms" SINGLE_NODE_WRITER \
	"$(jget "$(cc validate-volume-capabilities --volume "$v1" --capability mount)" '.confirmed.volume_capabilities[0].access_mode.mode')"
expect "ValidateVolumeCapabilities: multi-writer not confirmed for gp3" null \
	"$(jget "$(cc validate-volume-capabilities --volume "$v1" --capability block --access-mode MULTI_NODE_MULTI_WRITER)" .confirmed)"

# ---- unpublish ----
expect "unpublish" OK "$(cc_code controller-unpublish --volume "$v1" --node "$iid")"
moto_py_checks 'eq("moto: detached", ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]["Attachments"], [])' "$v1"
expect "unpublish again (already detached): OK" OK "$(cc_code controller-unpublish --volume "$v1" --node "$iid")"
expect "unpublish a deleted volume: OK" OK "$(cc_code controller-unpublish --volume vol-0123456789abcdef0 --node "$iid")"

# ---- expand, modify ----
out=$(cc controller-expand --volume "$v1" --size 20Gi)
expect "expand: new capacity" $((20 * GIB)) "$(jget "$out" .capacity_bytes)"
expect "expand: node expansion required for a file system" true "$(jget "$out" .node_expansion_required)"
moto_py_checks 'eq("moto: size 20", ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]["Size"], 20)' "$v1"
expect "expand to a smaller size: nothing to do, current size" $((20 * GIB)) "$(jget "$(cc controller-expand --volume "$v1" --size 15Gi)" .capacity_bytes)"
# a VolumeAttributesClass tag is a template of the external-resizer's --extra-modify-metadata
expect "modify: iops and a tag" OK "$(cc_code controller-modify --volume "$v2" --mutable-param iops=4000 --mutable-param tagSpecification_1=tier=gold \
	--mutable-param csi.storage.k8s.io/pvc/namespace=ns-prod-a --mutable-param tagSpecification_2='env={{ .PVCNamespace | field "-" 1 }}')"
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
tags = {t["Key"]: t["Value"] for t in v.get("Tags", [])}
eq("moto: iops 4000", v.get("Iops"), 4000)
eq("moto: tag added", tags.get("tier"), "gold")
eq("moto: templated tag added", tags.get("env"), "prod")
' "$v2"
expect "modify: a bad tag template is InvalidArgument" InvalidArgument \
	"$(cc_code controller-modify --volume "$v2" --mutable-param tagSpecification_1='x={{ .PVName | upper }}')"
# every EC2 call the controller made (its upstream-named metric)
ec2_calls() { curl -s "$CTRL_METRICS/metrics" | awk '/^aws_ebs_csi_api_request_duration_seconds_count/ { s += $2 } END { print s + 0 }'; }
calls_before=$(ec2_calls)
[ "$calls_before" -gt 0 ] && ok "the EC2 call count is read ($calls_before so far)" || fail "the EC2 call count is read" "$calls_before"
expect "modify with no mutable parameters: OK, a no-op" OK "$(cc_code controller-modify --volume "$v2")"
expect "modify of an unknown volume with no mutable parameters: OK" OK "$(cc_code controller-modify --volume vol-0123456789abcdef0)"
expect "modify with no mutable parameters: no EC2 call" "$calls_before" "$(ec2_calls)"
expect "modify: unknown key is InvalidArgument" InvalidArgument "$(cc_code controller-modify --volume "$v2" --mutable-param size=5)"
expect "modify gp3 to a throughput above its IOPS: InvalidArgument" InvalidArgument \
	"$(cc_code controller-modify --volume "$v1" --mutable-param throughput=1000)"

# ---- invalid requests ----
caps='"volume_capabilities":[{"mount":{},"access_mode":{"mode":"SINGLE_NODE_WRITER"}}]'
expect "CreateVolume without a name: InvalidArgument" InvalidArgument \
	"$(cc_code call /csi.v1.Controller/CreateVolume --data "{$caps}")"
expect "CreateVolume without capabilities: InvalidArgument" InvalidArgument \
	"$(cc_code call /csi.v1.Controller/CreateVolume --data '{"name":"x"}')"
expect "CreateVolume with limit below required: InvalidArgument" InvalidArgument \
	"$(cc_code create-volume --name bad-range --size 10Gi --limit 5Gi)"
expect "CreateVolume with a negative size: InvalidArgument" InvalidArgument \
	"$(cc_code call /csi.v1.Controller/CreateVolume --data "{\"name\":\"neg\",$caps,\"capacity_range\":{\"required_bytes\":-1}}")"
expect "CreateVolume of 70000 GiB gp3: OutOfRange" OutOfRange "$(cc_code create-volume --name big --size 70000Gi)"
expect "CreateVolume with an unknown parameter: InvalidArgument" InvalidArgument \
	"$(cc_code create-volume --name bad-param --param nosuchkey=1)"
expect "CreateVolume io2 without iops: InvalidArgument" InvalidArgument \
	"$(cc_code create-volume --name bad-io2 --param type=io2)"
expect "CreateVolume gp3 with iops below 3000: InvalidArgument" InvalidArgument \
	"$(cc_code create-volume --name bad-iops --param iops=100)"
expect "CreateVolume multi-writer on gp3: InvalidArgument" InvalidArgument \
	"$(cc_code create-volume --name bad-multi --capability block --access-mode MULTI_NODE_MULTI_WRITER)"
expect "CreateVolume multi-writer with a file system: InvalidArgument" InvalidArgument \
	"$(cc_code create-volume --name bad-multi2 --param type=io2 --param iops=1000 --capability mount --access-mode MULTI_NODE_MULTI_WRITER)"
expect "ValidateVolumeCapabilities of an unknown volume: NotFound" NotFound \
	"$(cc_code validate-volume-capabilities --volume vol-0123456789abcdef0)"
expect "ControllerExpandVolume of an unknown volume: NotFound" NotFound \
	"$(cc_code controller-expand --volume vol-0123456789abcdef0 --size 20Gi)"
expect "DeleteVolume of an unknown volume: OK" OK "$(cc_code delete-volume --volume vol-0123456789abcdef0)"
expect "DeleteVolume without an id: InvalidArgument" InvalidArgument "$(cc_code call /csi.v1.Controller/DeleteVolume --data '{}')"
expect "ControllerPublishVolume without a node: InvalidArgument" InvalidArgument \
	"$(cc_code call /csi.v1.Controller/ControllerPublishVolume --data "{\"volume_id\":\"$v1\",\"volume_capability\":{\"mount\":{},\"access_mode\":{\"mode\":1}}}")"
expect "GetCapacity is not implemented: Unimplemented" Unimplemented "$(cc_code get-capacity)"
expect "garbage protobuf: InvalidArgument" InvalidArgument \
	"$(cc_code call /csi.v1.Controller/CreateVolume --raw-hex ffffffffff0a)"
expect "invalid UTF-8 in a name: InvalidArgument" InvalidArgument \
	"$(cc_code call /csi.v1.Controller/CreateVolume --raw-hex 0a02c328)"
expect "still serving after garbage" true "$(jget "$(cc probe)" .ready)"

# ---- concurrent duplicates ----
pids=()
for i in 1 2 3 4 5; do
	cc_code create-volume --name pvc-race --size 1Gi --zone us-east-1a >"$T_TMP/race.$i" &
	pids+=($!)
done
wait "${pids[@]}"
codes=$(cat "$T_TMP"/race.* | sort | uniq -c | tr -s ' ' | tr '\n' ',')
n_ok=$(grep -c '^OK$' "$T_TMP"/race.* | awk -F: '{s+=$2} END {print s}')
n_other=$(grep -vc -e '^OK$' -e '^Aborted$' "$T_TMP"/race.* | awk -F: '{s+=$2} END {print s}')
[ "$n_ok" -ge 1 ] && [ "$n_other" = 0 ] && ok "concurrent duplicates: OK or Aborted ($codes)" || fail "concurrent duplicates" "$codes"
n=$(moto_py 'print(len(ec2.describe_volumes(Filters=[{"Name":"tag:CSIVolumeName","Values":["pvc-race"]}])["Volumes"]))')
expect "concurrent duplicates: one volume" 1 "$n"
vr=$(jget "$(cc create-volume --name pvc-race --size 1Gi --zone us-east-1a)" .volume.volume_id)

# ---- delete everything ----
expect "unpublish the second volume" OK "$(cc_code controller-unpublish --volume "$v2" --node "$iid")"
# every DeleteVolume answers OK, and moto no longer knows any of the seven volumes (each is
# described by its ID: InvalidVolume.NotFound)
bad=
for v in "$v1" "$v2" "$v3" "$v4" "$v5" "$v6" "$vr"; do
	[[ $v == vol-* ]] || bad+=" '$v' is not a volume ID;"
	c=$(cc_code delete-volume --volume "$v")
	[ "$c" = OK ] || bad+=" DeleteVolume $v: $c;"
done
left=$(moto_py '
from botocore.exceptions import ClientError
left = []
for v in sys.argv[1:]:
    try:
        left += [x["VolumeId"] + "=" + x["State"] for x in ec2.describe_volumes(VolumeIds=[v])["Volumes"]]
    except ClientError as e:
        if e.response["Error"]["Code"] != "InvalidVolume.NotFound":
            raise
print("left:" + " ".join(left))' "$v1" "$v2" "$v3" "$v4" "$v5" "$v6" "$vr" 2>&1)
[ "$left" = "left:" ] || bad+=" still in moto: ${left#left:};"
if [ -z "$bad" ]; then ok "every volume deleted (7 DeleteVolume OK, none left in moto)"
else fail "every volume deleted" "$bad"; fi
expect "DeleteVolume again: OK" OK "$(cc_code delete-volume --volume "$v1")"
for s in "$s1" "$s2" "$s3"; do
	c=$(cc_code delete-snapshot --snapshot "$s")
	[ "$c" = OK ] || fail "delete $s" "$c"
done
expect "DeleteSnapshot again: OK" OK "$(cc_code delete-snapshot --snapshot "$s1")"
left=$(moto_py 'print(len(ec2.describe_volumes(Filters=[{"Name":"tag-key","Values":["CSIVolumeName"]}])["Volumes"]))')
expect "no CSI volume left in moto" 0 "$left"
left=$(moto_py 'print(len(ec2.describe_snapshots(Filters=[{"Name":"tag-key","Values":["ebs.csi.aws.com/cluster"]}])["Snapshots"]))')
expect "no CSI snapshot left in moto" 0 "$left"
expect "ListVolumes is empty" 0 "$(jget "$(cc list-volumes)" '.entries | length // 0')"

# ---- metrics and logs ----
m=$(curl -s "$CTRL_METRICS/metrics")
grep -q 'grpc_server_handled_total{grpc_type="unary",grpc_service="csi.v1.Controller",grpc_method="CreateVolume",grpc_code="OK"}' <<<"$m" &&
	ok "metrics: calls per method and code" || fail "metrics: calls per method and code"
grep -q 'grpc_server_handled_total{.*grpc_method="CreateVolume",grpc_code="AlreadyExists"}' <<<"$m" &&
	ok "metrics: errors by code" || fail "metrics: errors by code"
grep -q 'grpc_server_handling_seconds_bucket{.*grpc_method="ControllerPublishVolume"' <<<"$m" &&
	ok "metrics: duration histogram" || fail "metrics: duration histogram"
grep -q 'aws_ebs_csi_api_request_duration_seconds_count{request="CreateVolume"}' <<<"$m" &&
	ok "metrics: EC2 calls (upstream name)" || fail "metrics: EC2 calls (upstream name)"
expect "healthz" ok "$(curl -s "$CTRL_METRICS/healthz")"
grep -q '"grpc call" method="/csi.v1.Controller/CreateVolume" name="pvc-gp3"' "$T_TMP/csi-ctrl.log" &&
	ok "log: one line per call with the name" || fail "log: one line per call with the name"
grep -q 'volume_id="'"$v1"'" .*code="OK"' "$T_TMP/csi-ctrl.log" &&
	ok "log: volume id and code" || fail "log: volume id and code"

# ---- graceful stop ----
if stop_within "$CTRL_PID" 5 csi-controller; then
	expect "stops on SIGTERM with status 0" 0 "$STOP_RC"
fi
[ ! -e "$CTRL_SOCK" ] && ok "socket removed at stop" || fail "socket removed at stop"
t_summary
