#!/usr/bin/env bash
# Figures of csi-node: the resident memory of an idle node plugin (after start-up and after
# 200 NodeGetVolumeStats calls), and the time of NodeStageVolume + NodePublishVolume of a
# 1 GiB ext4 volume on a loop device, with the format (a blank device) and without it (the
# same volume staged again: probe, e2fsck -p, mount, bind). Needs root; runs in a private
# mount namespace and detaches its loop device.
if [ -z "${CSI_NODE_PRIVATE_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	CSI_NODE_PRIVATE_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/../lib/testlib.sh"
runs=${RUNS:-5}

if [ "$(id -u)" != 0 ] || ! "$AWS_K8S" --help 2>/dev/null | grep -q "^  csi-client "; then
	echo "csi-node: needs root and a binary with csi-client; skipped"
	exit 0
fi
T=$T_TMP
mkdir -p "$T/by-id"
truncate -s 1G "$T/v.img"
L=$(losetup -f --show "$T/v.img") || exit 1
t_cleanup_add "losetup -d $L"
t_cleanup_add "grep -o ' $T[^ ]*' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l"
ln -s "$L" "$T/by-id/nvme-Amazon_Elastic_Block_Store_vol0bench"

AWS_EC2_METADATA_DISABLED=true "$AWS_K8S" csi-node --endpoint "unix://$T/csi.sock" --node-id i-0123456789abcdef0 \
	--availability-zone us-east-1a --volume-attach-limit 25 --device-dir "$T/by-id" 2>"$T/node.log" &
pid=$!
t_cleanup_add "kill $pid"
for _ in $(seq 200); do [ -S "$T/csi.sock" ] && break; sleep 0.01; done
sleep 0.5
rss() { awk "/^$1/ {print \$2}" /proc/$pid/status; }
echo "idle csi-node after start-up: RSS $(rss VmRSS) KiB (anonymous $(rss RssAnon) KiB), $(rss Threads) threads"

C=("$AWS_K8S" csi-client --endpoint "unix://$T/csi.sock")
ms() { echo $((($2 - $1) / 1000000)); }
stage_publish() {
	"${C[@]}" node-stage --volume vol-0bench --staging-path "$T/st" --publish-context devicePath=/dev/xvdba \
		--capability mount:ext4 >/dev/null &&
		"${C[@]}" node-publish --volume vol-0bench --staging-path "$T/st" --target "$T/t" \
			--capability mount:ext4 >/dev/null
}
teardown() {
	"${C[@]}" node-unpublish --volume vol-0bench --target "$T/t" >/dev/null &&
		"${C[@]}" node-unstage --volume vol-0bench --staging-path "$T/st" >/dev/null
}
# server-side durations: the node logs each call's duration; sum stage and publish of a run
calls_ms() { # the sum of the durations (ms) of the last stage and the last publish in the log
	grep '"grpc call"' "$T/node.log" | grep -E 'NodeStageVolume|NodePublishVolume' | tail -2 |
		sed -E 's/.*duration=([0-9.e-]+).*/\1/' | awk '{s += $1} END {printf "%.1f", s * 1000}'
}
with=() without=() with_wall=() without_wall=()
for i in $(seq "$runs"); do
	wipefs -a -q "$L" 2>/dev/null || dd if=/dev/zero of="$L" bs=1M count=4 status=none
	t0=$(date +%s%N)
	stage_publish || { echo "stage+publish failed"; tail -5 "$T/node.log"; exit 1; }
	t1=$(date +%s%N)
	with+=($(calls_ms)) with_wall+=($(ms "$t0" "$t1"))
	teardown
	t0=$(date +%s%N)
	stage_publish || exit 1
	t1=$(date +%s%N)
	without+=($(calls_ms)) without_wall+=($(ms "$t0" "$t1"))
	teardown
done
med() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }
echo "stage+publish of a 1 GiB ext4 volume, formatting included: median $(med "${with[@]}") ms in the node (runs: ${with[*]}); $(med "${with_wall[@]}") ms seen by csi-client"
echo "stage+publish of a 1 GiB ext4 volume, already formatted:   median $(med "${without[@]}") ms in the node (runs: ${without[*]}); $(med "${without_wall[@]}") ms seen by csi-client"
echo "  (the client figure includes starting two csi-client processes; the node figure is from its own call log)"

for _ in $(seq 200); do "${C[@]}" node-get-volume-stats --volume vol-0bench --volume-path /tmp >/dev/null; done
stage_publish >/dev/null
for _ in $(seq 200); do "${C[@]}" node-get-volume-stats --volume vol-0bench --volume-path "$T/t" >/dev/null; done
teardown
echo "csi-node after $((runs * 2)) stage/publish cycles and 400 NodeGetVolumeStats: RSS $(rss VmRSS) KiB (anonymous $(rss RssAnon) KiB), peak $(rss VmHWM) KiB"
