#!/usr/bin/env bash
# tests: product
# The whole EBS CSI flow, controller and node, as Kubernetes drives it: against moto (EC2) and
# the metadata fake built from a moto instance, through `aws-k8s csi-client`:
#   CreateVolume, ControllerPublishVolume, NodeStageVolume, NodePublishVolume,
#   NodeUnpublishVolume, NodeUnstageVolume, ControllerUnpublishVolume, DeleteVolume.
# The test plays the hypervisor: when the controller has attached a volume in moto, a loop
# device appears under the volume's by-id name in the node's --device-dir. Runs in a private
# mount namespace; the loop device is detached at the end. Needs root.
if [ -z "${CSI_NODE_PRIVATE_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	CSI_NODE_PRIVATE_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/csi_controller_lib.sh"

if [ "$(id -u)" != 0 ] || [ -z "${CSI_NODE_PRIVATE_NS:-}" ]; then
	skip "csi controller + node flow" "needs root and unshare"
	t_summary
fi
for t in losetup mkfs.ext4 jq tune2fs; do
	command -v $t >/dev/null || { skip "csi controller + node flow" "$t is not installed"; t_summary; }
done
for c in csi-client csi-controller csi-node; do
	"$AWS_K8S" --help 2>/dev/null | grep -q "^  $c " || { skip "csi controller + node flow" "no $c in this binary"; t_summary; }
done

T=$T_TMP
BYID=$T/by-id
NSOCK=$T/node.sock
mkdir -p "$BYID"
LOOPS=()
t_cleanup_add 'for l in "${LOOPS[@]}"; do losetup -d "$l"; done'
t_cleanup_add "grep -o ' $T[^ ]*' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l"

moto_start || { fail "moto starts"; t_summary; }
iid=$(moto_py 'print(run_instance(InstanceType="m5.large"))')
imds_start --from-moto "$MOTO_URL" --instance-id "$iid" || { fail "imds fake starts"; t_summary; }
csi_ctrl_start || { fail "csi-controller starts"; t_summary; }
AWS_EC2_METADATA_SERVICE_ENDPOINT=$IMDS_URL AWS_EC2_METADATA_DISABLED=false \
	bg node "$AWS_K8S" csi-node --endpoint "unix://$NSOCK" --device-dir "$BYID" --v 4
for _ in $(seq 200); do [ -S "$NSOCK" ] && break; sleep 0.05; done
nc() { "$AWS_K8S" csi-client --endpoint "unix://$NSOCK" --timeout 60s "$@"; }

# ---- the node registers: its id and zone drive the controller ----
info=$(nc node-get-info)
node_id=$(jget "$info" .node_id)
zone=$(jget "$info" '.accessible_topology.segments["topology.kubernetes.io/zone"]')
check "node id is the instance" test "$node_id" = "$iid"
check "node zone" test -n "$zone" -a "$zone" != null

# ---- CreateVolume in the node's zone, with a format option for the node ----
rep=$(cc create-volume --name pvc-e2e-1 --size 1Gi --capability mount:ext4 --zone "$zone" \
	--param type=gp3 --param inodeSize=512)
vol=$(jget "$rep" .volume.volume_id)
check "CreateVolume" test -n "$vol" -a "$vol" != null
check "CreateVolume: in the node's zone" test "$(jget "$rep" '.volume.accessible_topology[0].segments["topology.kubernetes.io/zone"]')" = "$zone"
vctx=$(jget "$rep" '(.volume.volume_context // {}) | to_entries | map("\(.key)=\(.value)") | join(",")')

# ---- ControllerPublishVolume: attach in moto, then the device appears on the node ----
rep=$(cc controller-publish --volume "$vol" --node "$node_id" --capability mount:ext4)
dp=$(jget "$rep" .publish_context.devicePath)
check "ControllerPublishVolume: a device path" test -n "$dp" -a "$dp" != null
check "moto: the volume is attached to the instance" test "$(moto_py '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
print(",".join(a["InstanceId"] + ":" + a["Device"] for a in v["Attachments"]))' "$vol")" = "$iid:$dp"
truncate -s 1G "$T/disk.img"
L=$(losetup -f --show "$T/disk.img") && LOOPS+=("$L")
ln -s "$L" "$BYID/nvme-Amazon_Elastic_Block_Store_${vol//-/}"

# ---- NodeStageVolume, NodePublishVolume ----
stage() { nc node-stage --volume "$vol" --staging-path "$T/globalmount" --publish-context "devicePath=$dp" \
	${vctx:+--volume-context "$vctx"} --capability mount:ext4; }
publish() { nc node-publish --volume "$vol" --staging-path "$T/globalmount" --target "$T/pod/mount" \
	--publish-context "devicePath=$dp" ${vctx:+--volume-context "$vctx"} --capability mount:ext4; }
check "NodeStageVolume" stage
check "NodeStageVolume: formatted with the volume's inodeSize" sh -c "tune2fs -l '$L' | grep -q 'Inode size:.*512'"
check "NodeStageVolume again" stage
check "NodePublishVolume" publish
check "NodePublishVolume again" publish
check "the pod writes" sh -c "echo e2e > '$T/pod/mount/data'"
st=$(nc node-get-volume-stats --volume "$vol" --volume-path "$T/pod/mount")
check "NodeGetVolumeStats: healthy, about 1 GiB" test "$(jget "$st" '.usage[0].total > 900000000 and (.volume_condition.abnormal | not)')" = true

# ---- NodeUnpublishVolume, NodeUnstageVolume ----
check "NodeUnpublishVolume" nc node-unpublish --volume "$vol" --target "$T/pod/mount"
check "NodeUnpublishVolume again" nc node-unpublish --volume "$vol" --target "$T/pod/mount"
check "NodeUnstageVolume" nc node-unstage --volume "$vol" --staging-path "$T/globalmount"
check "NodeUnstageVolume again" nc node-unstage --volume "$vol" --staging-path "$T/globalmount"
check "nothing mounted" sh -c "! grep -q ' $T/' /proc/self/mountinfo"

# ---- ControllerUnpublishVolume: detach in moto (the device goes away), DeleteVolume ----
rm -f "$BYID/nvme-Amazon_Elastic_Block_Store_${vol//-/}"
check "ControllerUnpublishVolume" cc controller-unpublish --volume "$vol" --node "$node_id"
check "moto: detached" test "$(moto_py 'print(ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]["State"])' "$vol")" = available
check "ControllerUnpublishVolume again" cc controller-unpublish --volume "$vol" --node "$node_id"
check "DeleteVolume" cc delete-volume --volume "$vol"
check "DeleteVolume again" cc delete-volume --volume "$vol"
check "moto: the volume is gone" test "$(moto_py 'print(len([v for v in ec2.describe_volumes()["Volumes"] if v["VolumeId"] == sys.argv[1]]))' "$vol")" = 0

# ---- the data survived on the disk the volume stood for ----
mkdir -p "$T/check" && mount -o ro "$L" "$T/check"
check "the data is on the device" test "$(cat "$T/check/data")" = e2e
umount "$T/check"
# ---- a clean stop: SIGTERM, exit 0, no sanitizer report (under SANITIZE=address,undefined) ----
node_pid=$(cat "$T_TMP/node.pid")
stop_within "$node_pid" 10 csi-node
check "csi-node stops cleanly on SIGTERM (exit 0)" test "$STOP_RC" = 0
check "csi-node: no sanitizer report" sh -c "! grep -E 'ERROR: AddressSanitizer|runtime error|LeakSanitizer' '$T_TMP/node.log'"
if [ "$T_FAIL" -gt 0 ]; then
	echo "--- node log"; tail -n 20 "$T/node.log"
	echo "--- controller log"; tail -n 20 "$T/csi-ctrl.log"
fi
t_summary
