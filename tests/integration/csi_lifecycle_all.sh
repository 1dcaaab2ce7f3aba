#!/usr/bin/env bash
# tests: product
# The whole life of one EBS volume on one machine, against `aws-k8s ebs-csi-driver all` (the
# Controller and Node services on one socket) with moto as EC2 and the metadata fake filled
# from a moto instance (so the node's id is an instance the controller attaches to), through
# `aws-k8s csi-client`: CreateVolume, ControllerPublishVolume (moto attaches), then the
# fixture of tests/lib/ebs_fixture.sh makes the attached volume a loop device linked by its
# volume id (--device-dir), NodeStageVolume (ext4 formatted, mounted), NodePublishVolume (bind),
# a file written, NodeGetVolumeStats, ControllerExpandVolume (moto's size) and NodeExpandVolume
# (the loop file grown first, as EBS grows the device), NodeUnpublish, NodeUnstage,
# ControllerUnpublish (moto detaches; the fixture removes the device), DeleteVolume. Each step
# is checked against moto's state, the mounts and the device.
# Online ext4 growth needs CAP_SYS_RESOURCE (EXT4_IOC_RESIZE_FS), which some containers drop
# even for root: there the NodeExpandVolume growth is skipped with that reason (the node grows
# ext4 only online, also at stage), the script checks that NodeExpandVolume fails with Internal
# rather than claiming success, and that a restage on the grown device still works.
# Needs root, unshare, losetup, mkfs.ext4, resize2fs, blkid, jq; runs in a private mount
# namespace so a failure leaves nothing mounted; loop devices are detached at exit.
if [ -z "${CSI_LIFECYCLE_PRIVATE_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	CSI_LIFECYCLE_PRIVATE_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../lib/ebs_fixture.sh"

if [ -z "${CSI_LIFECYCLE_PRIVATE_NS:-}" ]; then
	skip "volume lifecycle in mode all" "needs root and unshare"
	t_summary
fi
for t in jq curl losetup mkfs.ext4 resize2fs blkid; do
	command -v $t >/dev/null || { skip "volume lifecycle in mode all" "$t is not installed"; t_summary; }
done
if ! why=$(ebs_fixture_usable); then
	skip "volume lifecycle in mode all" "$why"
	t_summary
fi
expect() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$3', want '$2'"; fi; }
jget() { printf '%s' "$1" | jq -r "$2"; }
mounted() { grep -q " $1 " /proc/self/mountinfo; }
not_mounted() { ! grep -q " $1 " /proc/self/mountinfo; }

moto_start && peer ok "moto starts" || { peer fail "moto starts"; t_summary; }
iid=$(moto_py 'print(run_instance(InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"}))')
[[ $iid == i-* ]] && peer ok "moto instance $iid" || { peer fail "moto instance" "$iid"; t_summary; }
if imds_start --from-moto "$MOTO_URL" --instance-id "$iid"; then
	peer ok "the metadata fake starts, filled from the moto instance"
else
	peer fail "the metadata fake starts, filled from the moto instance"
	t_summary
fi
export AWS_EC2_METADATA_SERVICE_ENDPOINT=$IMDS_URL AWS_EC2_METADATA_DISABLED=false
unset CSI_NODE_NAME

ebs_fixture_init || { fail "the device fixture" "cannot make $T_TMP/by-id"; t_summary; }
T=$T_TMP
SOCK=$T/all.sock
bg all "$AWS_K8S" ebs-csi-driver all --endpoint "unix://$SOCK" --k8s-tag-cluster-id=test \
	--device-dir "$EBS_FIXTURE_BYID" --v 4
PID=$(cat "$T_TMP/all.pid")
c() { "$AWS_K8S" csi-client --endpoint "unix://$SOCK" --timeout 60s "$@"; }
code() {
	local err
	if err=$(c "$@" 2>&1 >/dev/null); then echo OK
	else echo "$err" | sed -n 's/^rpc error: code = \([A-Za-z]*\) .*/\1/p' | head -n 1; fi
}
for ((i = 0; i < 200; i++)); do
	c --timeout 2s get-plugin-info >/dev/null 2>&1 && break
	kill -0 "$PID" 2>/dev/null || break
	sleep 0.05
done
if c get-plugin-info >/dev/null 2>&1; then
	ok "ebs-csi-driver all serves its socket, --device-dir $EBS_FIXTURE_BYID"
else
	fail "ebs-csi-driver all serves its socket" "$(tail -n 20 "$T_TMP/all.log")"
	t_summary
fi
node=$(jget "$(c node-get-info)" .node_id)
expect "NodeGetInfo: the node is the moto instance" "$iid" "$node"

# ---- CreateVolume: a 1 GiB gp3 volume in moto ----
out=$(c create-volume --name pvc-lifecycle --size 1Gi --param type=gp3 --capability mount:ext4 --zone us-east-1a)
vol=$(jget "$out" .volume.volume_id)
if [[ $vol == vol-* ]]; then ok "CreateVolume ($vol)"; else fail "CreateVolume" "$out"; t_summary; fi
expect "CreateVolume: capacity 1 GiB" $((1 << 30)) "$(jget "$out" .volume.capacity_bytes)"
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
eq("moto: the volume is 1 GiB gp3, available", (v["Size"], v["VolumeType"], v["State"]), (1, "gp3", "available"))
' "$vol"

# ---- ControllerPublishVolume: moto attaches; the fixture makes the device ----
out=$(c controller-publish --volume "$vol" --node "$node" --capability mount:ext4)
devpath=$(jget "$out" .publish_context.devicePath)
[[ $devpath == /dev/xvd* ]] && ok "ControllerPublish: devicePath $devpath" || fail "ControllerPublish" "$out"
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
eq("moto: attached to the node at the devicePath", [(a["InstanceId"], a["Device"], a["State"]) for a in v["Attachments"]], [(sys.argv[2], sys.argv[3], "attached")])
' "$vol" "$iid" "$devpath"
size=$(moto_py 'print(ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]["Size"])' "$vol")
dev=$(ebs_fixture_attach "$vol" "${size}G") && ok "fixture: $vol (${size} GiB) is $dev" ||
	{ fail "fixture: a loop device for $vol" "$dev"; t_summary; }
check "fixture: the by-id link points at the device" test "$(readlink -f "$(ebs_fixture_link "$vol")")" = "$dev"

# ---- NodeStageVolume: formatted ext4 and mounted ----
ST=$T/staging/$vol
TG=$T/pods/pod-1/volumes/$vol/mount
stage() { c node-stage --volume "$vol" --staging-path "$ST" --publish-context "devicePath=$devpath" --capability mount:ext4; }
check "NodeStageVolume" stage
check "NodeStageVolume: the device holds ext4" test "$(blkid -p -s TYPE -o value "$dev")" = ext4
uuid=$(blkid -p -s UUID -o value "$dev")
check "NodeStageVolume: the device is mounted at the staging path" \
	sh -c "grep ' $ST ' /proc/self/mountinfo | grep -q ' ext4 $dev '"
check "NodeStageVolume again (idempotent)" stage

# ---- NodePublishVolume: bind mount; a file written through it ----
publish() { c node-publish --volume "$vol" --staging-path "$ST" --target "$TG" --capability mount:ext4; }
check "NodePublishVolume" publish
check "NodePublishVolume: the target is mounted" mounted "$TG"
check "NodePublishVolume again (idempotent)" publish
check "write a file through the target" sh -c "head -c 8M /dev/urandom > '$TG/data' && echo 'hello $vol' > '$TG/hello' && sync"
check "the file is on the staged file system" test "$(cat "$ST/hello")" = "hello $vol"
sum=$(md5sum <"$TG/data")

# ---- NodeGetVolumeStats ----
st=$(c node-get-volume-stats --volume "$vol" --volume-path "$TG")
total=$(jget "$st" '.usage[] | select(.unit=="BYTES") | .total')
used=$(jget "$st" '.usage[] | select(.unit=="BYTES") | .used')
avail=$(jget "$st" '.usage[] | select(.unit=="BYTES") | .available')
check "NodeGetVolumeStats: total bytes of a 1 GiB ext4 ($total)" test "$total" -gt $((900 << 20)) -a "$total" -le $((1 << 30))
check "NodeGetVolumeStats: used bytes count the 8 MiB written ($used)" test "$used" -ge $((8 << 20))
check "NodeGetVolumeStats: used + available <= total" test $((used + avail)) -le "$total"
check "NodeGetVolumeStats: as df says" test "$total" = "$(df -B1 --output=size "$TG" | tail -1 | tr -d ' ')"
check "NodeGetVolumeStats: inodes" test "$(jget "$st" '.usage[] | select(.unit=="INODES") | .total')" -gt 1000
check "NodeGetVolumeStats: healthy" test "$(jget "$st" '.volume_condition.abnormal // false')" = false

# ---- ControllerExpandVolume (moto) and NodeExpandVolume (the grown loop device) ----
out=$(c controller-expand --volume "$vol" --size 2Gi --capability mount:ext4)
expect "ControllerExpandVolume: capacity 2 GiB" $((2 << 30)) "$(jget "$out" .capacity_bytes)"
expect "ControllerExpandVolume: node expansion required" true "$(jget "$out" '.node_expansion_required // false')"
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
eq("moto: the volume is 2 GiB", v["Size"], 2)
' "$vol"
size=$(moto_py 'print(ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]["Size"])' "$vol")
check "fixture: the device grows to moto's size (${size} GiB)" ebs_fixture_grow "$vol" "${size}G"
check "fixture: the device is 2 GiB" test "$(blockdev --getsize64 "$dev")" = $((2 << 30))
before=$(df -B1 --output=size "$TG" | tail -1 | tr -d ' ')
cap_eff=$(awk '/^CapEff/ {print $2}' /proc/self/status)
if (((16#$cap_eff >> 24) & 1)); then
	out=$(c node-expand --volume "$vol" --volume-path "$TG" --size 2Gi --capability mount:ext4)
	expect "NodeExpandVolume: the device size" $((2 << 30)) "$(jget "$out" .capacity_bytes)"
	after=$(df -B1 --output=size "$TG" | tail -1 | tr -d ' ')
	check "NodeExpandVolume: the file system grew online ($before -> $after bytes)" test "$after" -gt $((before + (900 << 20)))
	st=$(c node-get-volume-stats --volume "$vol" --volume-path "$TG")
	check "NodeGetVolumeStats after expansion: total bytes > 1.8 GiB" \
		test "$(jget "$st" '.usage[] | select(.unit=="BYTES") | .total')" -gt $((1843 << 20))
else
	# The node grows ext4 only online (NodeExpandVolume, and at stage after the mount, as
	# upstream), so without CAP_SYS_RESOURCE the file system cannot grow here at all.
	skip "NodeExpandVolume online" "no CAP_SYS_RESOURCE here: the kernel refuses online ext4 resizes"
	check "NodeExpandVolume without CAP_SYS_RESOURCE: Internal, not a false success" \
		test "$(code node-expand --volume "$vol" --volume-path "$TG" --size 2Gi --capability mount:ext4)" = Internal
	# a restage on the grown device still works (the growth at stage fails with a warning)
	check "restage on the grown device: NodeUnpublish" c node-unpublish --volume "$vol" --target "$TG"
	check "restage on the grown device: NodeUnstage" c node-unstage --volume "$vol" --staging-path "$ST"
	check "restage on the grown device: NodeStage" stage
	check "restage on the grown device: NodePublish" publish
fi
check "expansion: the data is intact" test "$(md5sum <"$TG/data")" = "$sum"
check "expansion: never reformatted (same UUID)" test "$(blkid -p -s UUID -o value "$dev")" = "$uuid"

# ---- NodeUnpublish, NodeUnstage ----
check "NodeUnpublishVolume" c node-unpublish --volume "$vol" --target "$TG"
check "NodeUnpublishVolume: the target is unmounted and removed" sh -c "! grep -q ' $TG ' /proc/self/mountinfo && test ! -e '$TG'"
check "NodeUnpublishVolume again (idempotent)" c node-unpublish --volume "$vol" --target "$TG"
check "NodeUnstageVolume" c node-unstage --volume "$vol" --staging-path "$ST"
check "NodeUnstageVolume: nothing mounted from the device" sh -c "! grep -q ' $dev ' /proc/self/mountinfo"
check "NodeUnstageVolume: the staging path is unmounted" not_mounted "$ST"
check "NodeUnstageVolume again (idempotent)" c node-unstage --volume "$vol" --staging-path "$ST"

# ---- ControllerUnpublish: moto detaches; the device goes away ----
expect "ControllerUnpublishVolume" OK "$(code controller-unpublish --volume "$vol" --node "$node")"
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
eq("moto: detached and available", (v["Attachments"], v["State"]), ([], "available"))
' "$vol"
check "fixture: the device is detached (not in use)" ebs_fixture_detach "$vol"
check "fixture: the link is gone" test ! -e "$(ebs_fixture_link "$vol")"
expect "ControllerUnpublishVolume again (idempotent)" OK "$(code controller-unpublish --volume "$vol" --node "$node")"

# ---- DeleteVolume ----
expect "DeleteVolume" OK "$(code delete-volume --volume "$vol")"
moto_py_checks '
left = [v["VolumeId"] for v in ec2.describe_volumes()["Volumes"] if v["VolumeId"] == sys.argv[1]]
eq("moto: the volume is gone", left, [])
' "$vol"
expect "DeleteVolume again (idempotent)" OK "$(code delete-volume --volume "$vol")"

# ---- a clean stop ----
if stop_within "$PID" 5 "ebs-csi-driver all"; then
	expect "SIGTERM: exits 0" 0 "$STOP_RC"
fi
check "no sanitizer report" sh -c "! grep -E 'ERROR: AddressSanitizer|runtime error|LeakSanitizer' '$T_TMP/all.log'"
if [ "$T_FAIL" -gt 0 ]; then echo "--- ebs-csi-driver all log"; tail -n 40 "$T_TMP/all.log"; fi
t_summary
