#!/usr/bin/env bash
# tests: product
# csi-node on real block devices: loop devices stand in for EBS volumes (linked by volume id in
# a --device-dir directory, as udev links them in /dev/disk/by-id), real mkfs.ext4/mkfs.xfs,
# real mounts, driven over the CSI socket by `aws-k8s csi-client`. The whole script runs in a
# private mount namespace, so a failure leaves nothing mounted; loop devices are detached at
# the end. Needs root, losetup, mkfs.ext4, mkfs.xfs, sfdisk (fdisk package), blkid.
if [ -z "${CSI_NODE_PRIVATE_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	CSI_NODE_PRIVATE_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/../lib/testlib.sh"

need() {
	for t in "$@"; do
		if ! command -v "$t" >/dev/null; then
			skip "csi-node on loop devices" "$t is not installed"
			t_summary
		fi
	done
}
if [ "$(id -u)" != 0 ] || [ -z "${CSI_NODE_PRIVATE_NS:-}" ]; then
	skip "csi-node on loop devices" "needs root and unshare"
	t_summary
fi
need losetup mkfs.ext4 mkfs.xfs sfdisk blkid jq resize2fs xfs_growfs
if ! "$AWS_K8S" --help 2>/dev/null | grep -q "^  csi-client "; then
	skip "csi-node on loop devices" "this binary has no csi-client"
	t_summary
fi

T=$T_TMP
BYID=$T/by-id
SOCK=$T/csi.sock
mkdir -p "$BYID"
LOOPS=()
t_cleanup_add 'for l in "${LOOPS[@]}"; do losetup -d "$l"; done'
t_cleanup_add "grep -o ' $T[^ ]*' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l"

# vol NAME SIZE VAR: a backing file and a loop device linked as volume vol-NAME; the device
# goes to $VAR (not through a subshell, so that LOOPS keeps it for the clean-up).
vol() {
	local f=$T/$1.img l
	truncate -s "$2" "$f" || return 1
	l=$(losetup -f --show "$f") || return 1
	LOOPS+=("$l")
	ln -s "$l" "$BYID/nvme-Amazon_Elastic_Block_Store_vol$1"
	printf -v "$3" %s "$l"
}

# csi CALL ARGS...: calls the node; stdout the reply, stderr "rpc error: code = X desc = ...".
csi() { "$AWS_K8S" csi-client --endpoint "unix://$SOCK" --timeout 60s "$@"; }
# expect_code CODE CALL ARGS...: the call fails with this gRPC code.
expect_code() {
	local want=$1 out
	shift
	out=$(csi "$@" 2>&1) && { echo "succeeded: $out"; return 1; }
	grep -q "code = $want " <<<"$out" || { echo "$out"; return 1; }
}
fs_uuid() { blkid -p -s UUID -o value "$1"; }
mounted() { grep -q " $1 " /proc/self/mountinfo; }
stage() { csi node-stage --volume "vol-$1" --staging-path "$T/st-$1" --publish-context devicePath=/dev/xvdba --capability "mount:$2" "${@:3}"; }
unstage() { csi node-unstage --volume "vol-$1" --staging-path "$T/st-$1"; }
publish() { csi node-publish --volume "vol-$1" --staging-path "$T/st-$1" --target "$T/$2" --capability "mount:$3" "${@:4}"; }
unpublish() { csi node-unpublish --volume "vol-$1" --target "$T/$2"; }

vol 0aaa 64M A && vol 0bbb 320M B && vol 0ccc 320M C && vol 0ddd 32M D && vol 0eee 16M E ||
	{ fail "loop devices" "losetup failed"; t_summary; }

AWS_EC2_METADATA_DISABLED=true bg node "$AWS_K8S" csi-node --endpoint "unix://$SOCK" --node-id i-0123456789abcdef0 \
	--availability-zone us-east-1a --instance-type m5.large --describe-instance-type=false \
	--device-dir "$BYID" --v 4
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
check "csi-node serves its socket" test -S "$SOCK"

# ---- identity and node information ----
info=$(csi node-get-info)
check "NodeGetInfo: node id" test "$(jq -r .node_id <<<"$info")" = i-0123456789abcdef0
check "NodeGetInfo: topology" test "$(jq -r '.accessible_topology.segments["topology.ebs.csi.aws.com/zone"]+","+.accessible_topology.segments["topology.kubernetes.io/zone"]+","+.accessible_topology.segments["kubernetes.io/os"]' <<<"$info")" = "us-east-1a,us-east-1a,linux"
check "NodeGetInfo: m5.large without EC2 facts: 27 - root" test "$(jq -r .max_volumes_per_node <<<"$info")" = 26
# the exact lists, in order (tests/unit/test_csi_caps.c says how they compare with upstream's)
caps=$(csi node-get-capabilities | jq -r '[.capabilities[].rpc.type] | join(",")')
check "NodeGetCapabilities: upstream's three and VOLUME_CONDITION" test "$caps" = "STAGE_UNSTAGE_VOLUME,EXPAND_VOLUME,GET_VOLUME_STATS,VOLUME_CONDITION"
caps=$(csi get-plugin-capabilities | jq -r '[.capabilities[] | .service.type // "other"] | join(",")')
check "GetPluginCapabilities: no CONTROLLER_SERVICE from csi-node" test "$caps" = "VOLUME_ACCESSIBILITY_CONSTRAINTS"

# ---- ext4 and xfs: stage, two publishes (one read-only), data, unstage, stage again ----
roundtrip() { # NAME FSTYPE DEV
	local v=$1 fs=$2 dev=$3 uuid
	check "$fs: stage a blank device" stage "$v" "$fs"
	check "$fs: the device now holds $fs" test "$(blkid -p -s TYPE -o value "$dev")" = "$fs"
	uuid=$(fs_uuid "$dev")
	check "$fs: stage again (idempotent)" stage "$v" "$fs"
	check "$fs: publish read-write" publish "$v" "rw-$v" "$fs"
	check "$fs: publish read-write again (idempotent)" publish "$v" "rw-$v" "$fs"
	check "$fs: publish read-only" publish "$v" "ro-$v" "$fs" --readonly
	check "$fs: publish read-only again (idempotent)" publish "$v" "ro-$v" "$fs" --readonly
	check "$fs: the same target read-write is refused" expect_code AlreadyExists node-publish --volume "vol-$v" \
		--staging-path "$T/st-$v" --target "$T/ro-$v" --capability "mount:$fs"
	check "$fs: write through one target" sh -c "echo 'data of $v' > '$T/rw-$v/file'"
	check "$fs: read through the other" test "$(cat "$T/ro-$v/file")" = "data of $v"
	check "$fs: the read-only target refuses writes" sh -c "! touch '$T/ro-$v/x' 2>/dev/null"
	check "$fs: unpublish" unpublish "$v" "rw-$v"
	check "$fs: unpublish again (idempotent)" unpublish "$v" "rw-$v"
	check "$fs: unpublish the read-only target" unpublish "$v" "ro-$v"
	check "$fs: targets removed" test ! -e "$T/rw-$v" -a ! -e "$T/ro-$v"
	check "$fs: unstage" unstage "$v"
	check "$fs: unstage again (idempotent)" unstage "$v"
	check "$fs: nothing left mounted" sh -c "! grep -q '$T/st-$v' /proc/self/mountinfo"
	check "$fs: stage again" stage "$v" "$fs"
	check "$fs: the data is still there" test "$(cat "$T/st-$v/file")" = "data of $v"
	check "$fs: never reformatted (same UUID)" test "$(fs_uuid "$dev")" = "$uuid"
}
roundtrip 0aaa ext4 "$A"
roundtrip 0bbb xfs "$B"
check "xfs: mounted with nouuid" sh -c "grep ' $T/st-0bbb ' /proc/self/mountinfo | grep -q nouuid"

# ---- never format over something ----
mkfs.xfs -q -f "$C" && uuid_c=$(fs_uuid "$C")
check "xfs device asked as ext4: refused" expect_code FailedPrecondition node-stage --volume vol-0ccc \
	--staging-path "$T/st-0ccc" --capability mount:ext4
check "xfs device asked as ext4: still the same xfs" test "$(blkid -p -s TYPE -o value "$C"):$(fs_uuid "$C")" = "xfs:$uuid_c"
check "xfs device asked as ext4: not mounted" sh -c "! grep -q ' $T/st-0ccc ' /proc/self/mountinfo"
echo 'label: dos
,,L' | sfdisk -q "$D" >/dev/null 2>&1
check "partition table: refused" expect_code FailedPrecondition node-stage --volume vol-0ddd \
	--staging-path "$T/st-0ddd" --capability mount:ext4
check "partition table: still there" test "$(blkid -p -s PTTYPE -o value "$D")" = dos
check "partition table: no file system written" test -z "$(blkid -p -s TYPE -o value "$D")"
check "wrong volume behind devicePath: refused" expect_code FailedPrecondition node-stage --volume vol-0fff \
	--staging-path "$T/st-0fff" --publish-context "devicePath=$C" --capability mount:ext4
check "unknown volume: NotFound" expect_code NotFound node-stage --volume vol-0999 \
	--staging-path "$T/st-0999" --publish-context devicePath=/dev/xvdzz --capability mount:ext4
check "a device path outside /dev: refused" expect_code FailedPrecondition node-stage --volume vol-0998 \
	--staging-path "$T/st-0998" --publish-context "devicePath=$T/0aaa.img" --capability mount:ext4

# ---- expand ----
expand() { # NAME DEV MIB
	local v=$1 dev=$2 mib=$3 before after rep
	before=$(df -B1 --output=size "$T/st-$v" | tail -1)
	truncate -s "${mib}M" "$T/$v.img" && losetup -c "$dev"
	rep=$(csi node-expand --volume "vol-$v" --volume-path "$T/st-$v" --size "${mib}Mi")
	check "expand $v: NodeExpandVolume returns the device size" test "$(jq -r .capacity_bytes <<<"$rep")" = $((mib << 20))
	after=$(df -B1 --output=size "$T/st-$v" | tail -1)
	check "expand $v: the file system grew ($before -> $after bytes)" test "$after" -gt "$before"
	rep=$(csi node-expand --volume "vol-$v" --volume-path "$T/st-$v" --size "${mib}Mi")
	check "expand $v: again (idempotent)" test "$(jq -r .capacity_bytes <<<"$rep")" = $((mib << 20))
	check "expand $v: data intact" test "$(cat "$T/st-$v/file")" = "data of $v"
}
# Online ext4 growth needs CAP_SYS_RESOURCE (EXT4_IOC_RESIZE_FS); some sandboxes drop it.
cap_eff=$(awk '/^CapEff/ {print $2}' /proc/self/status)
if (( (16#$cap_eff >> 24) & 1 )); then
	expand 0aaa "$A" 128
else
	skip "expand ext4" "no CAP_SYS_RESOURCE here: the kernel refuses online ext4 resizes"
	truncate -s 128M "$T/0aaa.img" && losetup -c "$A"
	check "expand ext4 without CAP_SYS_RESOURCE: Internal, with resize2fs's words" expect_code Internal \
		node-expand --volume vol-0aaa --volume-path "$T/st-0aaa"
fi
expand 0bbb "$B" 512
# a device that grew while the volume was not staged: stage grows the file system
check "grow at stage: unstage xfs" unstage 0bbb
truncate -s 640M "$T/0bbb.img" && losetup -c "$B"
check "grow at stage: stage xfs again" stage 0bbb xfs
check "grow at stage: the file system grew with the device" test "$(df -B1M --output=size "$T/st-0bbb" | tail -1)" -gt 520
check "expand beyond the device: refused until it grows" expect_code FailedPrecondition node-expand \
	--volume vol-0aaa --volume-path "$T/st-0aaa" --size 1Gi
check "expand a missing path: NotFound" expect_code NotFound node-expand --volume vol-0aaa --volume-path "$T/nope"
mkdir -p "$T/empty"
check "expand a path with nothing mounted: NotFound" expect_code NotFound node-expand --volume vol-0aaa --volume-path "$T/empty"
# a relative path names nothing (csi-sanity sends "some/path"); "." exists in csi-node's directory
for p in some/path .; do
	check "expand a relative path ($p): NotFound" expect_code NotFound node-expand --volume vol-0aaa --volume-path "$p"
done
check "expand without a volume path: InvalidArgument" expect_code InvalidArgument node-expand --volume vol-0aaa

# ---- stats ----
st=$(csi node-get-volume-stats --volume vol-0aaa --volume-path "$T/st-0aaa")
bytes=$(jq -r '.usage[] | select(.unit=="BYTES") | .total' <<<"$st")
check "stats: bytes ($bytes)" test "$bytes" -gt $((40 << 20)) -a "$bytes" -le $((128 << 20))
check "stats: inodes" test "$(jq -r '.usage[] | select(.unit=="INODES") | .total' <<<"$st")" -gt 1000
check "stats: healthy" test "$(jq -r '.volume_condition.abnormal // false' <<<"$st")" = false
check "stats: missing path NotFound" expect_code NotFound node-get-volume-stats --volume vol-0aaa --volume-path "$T/nope"
check "stats: a path with nothing mounted is NotFound (not the numbers of the file system below)" \
	expect_code NotFound node-get-volume-stats --volume vol-0aaa --volume-path "$T/empty"
for p in some/path .; do
	check "stats: a relative path ($p) is NotFound" expect_code NotFound node-get-volume-stats --volume vol-0aaa --volume-path "$p"
done
check "stats: without a volume id InvalidArgument" expect_code InvalidArgument call /csi.v1.Node/NodeGetVolumeStats \
	--data "{\"volume_path\":\"$T/st-0aaa\"}"
check "stats: without a volume path InvalidArgument" expect_code InvalidArgument call /csi.v1.Node/NodeGetVolumeStats \
	--data '{"volume_id":"vol-0aaa"}'

# ---- block volume ----
blk() { csi node-publish --volume vol-0eee --staging-path "$T/st-0eee" --target "$T/blk/dev" --capability block "$@"; }
check "block: stage does nothing" csi node-stage --volume vol-0eee --staging-path "$T/st-0eee" --capability block
check "block: publish" blk
check "block: publish again (idempotent)" blk
check "block: the target is the device file" test -b "$T/blk/dev" -a "$(stat -c %t:%T "$T/blk/dev")" = "$(stat -c %t:%T "$E")"
check "block: write through the target" sh -c "printf 'block data' | dd of='$T/blk/dev' bs=512 conv=sync,notrunc status=none"
check "block: read from the device" test "$(head -c 10 "$E")" = "block data"
st=$(csi node-get-volume-stats --volume vol-0eee --volume-path "$T/blk/dev")
check "block: stats report the size" test "$(jq -r '.usage[0].total' <<<"$st")" = $((16 << 20))
rep=$(csi node-expand --volume vol-0eee --volume-path "$T/blk/dev" --capability block)
check "block: expand returns the device size" test "$(jq -r .capacity_bytes <<<"$rep")" = $((16 << 20))
check "block: unpublish" csi node-unpublish --volume vol-0eee --target "$T/blk/dev"
check "block: unpublish again (idempotent)" csi node-unpublish --volume vol-0eee --target "$T/blk/dev"
check "block: target file removed" test ! -e "$T/blk/dev"

# ---- what is not ours is left alone ----
mkdir -p "$T/other" && mount -t tmpfs tmpfs "$T/other"
check "unpublish of a tmpfs target: refused" expect_code FailedPrecondition node-unpublish --volume vol-0aaa --target "$T/other"
check "unpublish of a tmpfs target: still mounted" mounted "$T/other"
check "unstage with another volume's id: refused" expect_code FailedPrecondition node-unstage --volume vol-0bbb \
	--staging-path "$T/st-0aaa"
check "unstage with another volume's id: still mounted" mounted "$T/st-0aaa"
check "publish of a volume not staged: FailedPrecondition" expect_code FailedPrecondition node-publish \
	--volume vol-0ccc --staging-path "$T/st-0ccc" --target "$T/t-0ccc" --capability mount:ext4
check "staging path holding another volume: refused" expect_code FailedPrecondition node-stage --volume vol-0bbb \
	--staging-path "$T/st-0aaa" --capability mount:xfs

# ---- stale / corrupted mounts (a FUSE mount whose daemon is gone: ENOTCONN) are repaired ----
deadfuse() { # PATH: mounts a FUSE file system there and drops its connection
	mkdir -p "$1" && python3 - "$1" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open("/dev/fuse", os.O_RDWR)
opts = "fd=%d,rootmode=40000,user_id=0,group_id=0" % fd
if libc.mount(b"deadfuse", sys.argv[1].encode(), b"fuse", 0, opts.encode()) != 0:
    sys.exit("mount: errno %d" % ctypes.get_errno())
os.close(fd)
PY
}
if [ -c /dev/fuse ] && deadfuse "$T/dead-t" && ! stat "$T/dead-t" >/dev/null 2>&1; then
	st=$(csi node-get-volume-stats --volume vol-0aaa --volume-path "$T/dead-t")
	check "corrupted target: stats say abnormal" test "$(jq -r .volume_condition.abnormal <<<"$st")" = true
	check "corrupted target: publish repairs it" publish 0aaa dead-t ext4
	check "corrupted target: now the volume's data" test "$(cat "$T/dead-t/file" 2>&1)" = "data of 0aaa"
	check "corrupted target: unpublish" unpublish 0aaa dead-t
	deadfuse "$T/dead-u"
	check "corrupted target: unpublish of a dead mount" unpublish 0aaa dead-u
	check "corrupted target: gone" sh -c "! grep -q ' $T/dead-u ' /proc/self/mountinfo && test ! -e '$T/dead-u'"
	check "corrupted staging path: unstage" unstage 0bbb
	deadfuse "$T/st-0bbb"
	check "corrupted staging path: stage repairs it" stage 0bbb xfs
	check "corrupted staging path: the volume is back" test "$(cat "$T/st-0bbb/file" 2>&1)" = "data of 0bbb"
else
	skip "corrupted mounts" "no /dev/fuse to make one"
fi

# ---- concurrent calls on one volume: one wins, the other gets Aborted (kubelet retries) ----
vol 0fab 64M F
pids=()
for i in 1 2 3 4; do
	(stage 0fab ext4 >/dev/null 2>"$T/conc-$i.err"; echo $? >"$T/conc-$i.rc") &
	pids+=($!)
done
wait "${pids[@]}"
results=$(for i in 1 2 3 4; do
	if [ "$(cat "$T/conc-$i.rc")" = 0 ]; then echo OK; else sed -n 's/.*code = \([A-Za-z]*\) .*/\1/p' "$T/conc-$i.err"; fi
done)
codes=$(sort <<<"$results" | uniq -c | tr -s ' \n' ' ')
check "concurrent stages: only OK or Aborted ($codes)" test "$(grep -c -v -x -E 'OK|Aborted' <<<"$results")" = 0
check "concurrent stages: at least one OK" grep -q -x OK <<<"$results"
check "concurrent stages: staged once" test "$(grep -c " $T/st-0fab " /proc/self/mountinfo)" = 1
check "concurrent stages: formatted once, a retry is fine" stage 0fab ext4
check "concurrent stages: unstage" unstage 0fab

# ---- invalid requests ----
check "missing volume id: InvalidArgument" expect_code InvalidArgument call /csi.v1.Node/NodeStageVolume \
	--data "{\"staging_target_path\":\"$T/x\",\"volume_capability\":{\"mount\":{},\"access_mode\":{\"mode\":1}}}"
check "missing capability: InvalidArgument" expect_code InvalidArgument call /csi.v1.Node/NodeStageVolume \
	--data "{\"volume_id\":\"vol-0aaa\",\"staging_target_path\":\"$T/x\"}"
check "unsupported fstype: InvalidArgument" expect_code InvalidArgument node-stage --volume vol-0aaa \
	--staging-path "$T/x" --capability mount:btrfs
check "bad format option: InvalidArgument" expect_code InvalidArgument node-stage --volume vol-0aaa \
	--staging-path "$T/x" --capability mount:ext4 --volume-context "blockSize=4096 -O x"
check "multi-attach on a file system: InvalidArgument" expect_code InvalidArgument node-stage --volume vol-0aaa \
	--staging-path "$T/x" --capability mount:ext4 --access-mode MULTI_NODE_MULTI_WRITER

# ---- clean up through the service ----
check "final unstage ext4" unstage 0aaa
check "final unstage xfs" unstage 0bbb
check "nothing of ours is mounted" sh -c "! grep -E ' $T/(st|rw|ro|blk)' /proc/self/mountinfo"
umount "$T/other"
# ---- a clean stop: SIGTERM, exit 0, no sanitizer report (under SANITIZE=address,undefined) ----
node_pid=$(cat "$T_TMP/node.pid")
stop_within "$node_pid" 10 csi-node
check "csi-node stops cleanly on SIGTERM (exit 0)" test "$STOP_RC" = 0
check "csi-node: no sanitizer report" sh -c "! grep -E 'ERROR: AddressSanitizer|runtime error|LeakSanitizer' '$T_TMP/node.log'"
if [ "$T_FAIL" -gt 0 ]; then echo "--- csi-node log"; tail -n 40 "$T/node.log"; fi
t_summary
