#!/usr/bin/env bash
# Figures of aws-k8s csi-controller against moto (behind the counting fault proxy):
#   1. resident memory of an idle controller, and after PAIRS (default 1000) CreateVolume /
#      DeleteVolume pairs (made PAR at a time, default 16);
#   2. GetPluginInfo calls per second over the unix socket (one connection, CALLS calls, 1
#      and 4 in flight);
#   3. the AWS calls made for PUBS (default 100) concurrent ControllerPublishVolume requests
#      (10 instances, PUBS/10 volumes each), counted per action by the fault proxy, with the
#      batching helper on (the default) and off (--batching=false, upstream's default).
# Figures 2 and 3 (batched) are measured BENCH_RUNS times (default 5; fresh volumes each run)
# and printed as min / median / max; PAIRS=0 skips figure 1.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../integration/csi_controller_lib.sh"

PAIRS=${PAIRS:-1000}
PAR=${PAR:-16}
CALLS=${CALLS:-20000}
PUBS=${PUBS:-100}
BENCH_RUNS=${BENCH_RUNS:-5}

# spread VALUES...: "min / median / max" (numbers; the median of an even count is the lower)
spread() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {if (!NR) {print "-"; exit} printf "%s / %s / %s\n", v[1], v[int((NR+1)/2)], v[NR]}'; }
count_of() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | jq -r --arg a "$1" '[.counts | to_entries[] | select(.key == $a or (.key | endswith(":" + $a))) | .value] | add // 0'; }

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
anon_kib() { awk '/^Anonymous/ {print $2}' "/proc/$1/smaps_rollup"; }
counts() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | jq -r '.counts | to_entries | map("\(.key)=\(.value)") | join(" ")'; }
total() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | jq -r '[.counts[]] | add // 0'; }

moto_start || { echo "moto did not start"; exit 1; }
faultproxy_start "$MOTO_URL" || { echo "fault proxy did not start"; exit 1; }
export AWS_ENDPOINT_URL=$FAULTPROXY_URL
csi_ctrl_start || { echo "csi-controller did not start"; exit 1; }
cc probe >/dev/null # the first EC2 call warms moto up
sleep 2
idle=$(rss_kib "$CTRL_PID")
idle_anon=$(anon_kib "$CTRL_PID")
echo "idle RSS: $idle KiB (anonymous $idle_anon KiB)"

# ---- 1. create/delete pairs ----
if ((PAIRS > 0)); then
echo "running $PAIRS CreateVolume/DeleteVolume pairs, $PAR at a time..."
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
t0=$(date +%s.%N)
seq 1 "$PAIRS" | xargs -P "$PAR" -I{} sh -c '
	id=$("$0" csi-client --endpoint "unix://$1" --timeout 120s create-volume --name "bench-{}" --size 1Gi \
		--zone us-east-1a | jq -r .volume.volume_id) &&
	"$0" csi-client --endpoint "unix://$1" --timeout 120s delete-volume --volume "$id" >/dev/null || echo "pair {} failed" >&2
' "$AWS_K8S" "$CTRL_SOCK" 2>"$T_TMP/pairs.err"
t1=$(date +%s.%N)
failed=$(grep -c failed "$T_TMP/pairs.err")
after=$(rss_kib "$CTRL_PID")
after_anon=$(anon_kib "$CTRL_PID")
pair_calls=$(counts)
left=$(moto_py 'print(len(ec2.describe_volumes(Filters=[{"Name":"tag-key","Values":["CSIVolumeName"]}])["Volumes"]))')
echo "RSS after $PAIRS pairs: $after KiB ($failed pairs failed, $left volumes left); $(echo "$t1 - $t0" | bc) s"
echo "AWS calls for the pairs: $pair_calls"
else
	after=$idle after_anon=$idle_anon
fi

# ---- 2. GetPluginInfo rate ----
r1s=() r4s=()
for ((run = 1; run <= BENCH_RUNS; run++)); do
	r1=$(cc --count "$CALLS" --parallel 1 get-plugin-info | jq -r '.per_second | floor')
	r4=$(cc --count "$CALLS" --parallel 4 get-plugin-info | jq -r '.per_second | floor')
	r1s+=("$r1") r4s+=("$r4")
	echo "GetPluginInfo run $run: $r1 calls/s (1 in flight), $r4 calls/s (4 in flight)"
done
rss_rate=$(rss_kib "$CTRL_PID")

# ---- 3. concurrent publishes ----
make_setup() { moto_py '
n = int(sys.argv[1])
insts = [run_instance(InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"}) for _ in range(10)]
vols = [ec2.create_volume(AvailabilityZone="us-east-1a", Size=1, VolumeType="gp3")["VolumeId"] for _ in range(n)]
for i, v in enumerate(vols):
    print(v, insts[i % 10])
' "$PUBS"; }
publish_all() {
	local pids=() v i
	while read -r v i; do
		cc controller-publish --volume "$v" --node "$i" >/dev/null 2>>"$T_TMP/pub.err" &
		pids+=($!)
	done <<<"$setup"
	wait "${pids[@]}"
}
unpublish_all() {
	local pids=() v i
	while read -r v i; do
		cc controller-unpublish --volume "$v" --node "$i" >/dev/null 2>>"$T_TMP/pub.err" &
		pids+=($!)
	done <<<"$setup"
	wait "${pids[@]}"
}
: >"$T_TMP/pub.err"
tots=() attach=() dinst=() dvol=()
for ((run = 1; run <= BENCH_RUNS; run++)); do
	setup=$(make_setup)
	tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
	t0=$(date +%s.%N)
	publish_all
	t1=$(date +%s.%N)
	pub_total=$(total)
	pub_counts=$(counts)
	tots+=("$pub_total")
	attach+=("$(count_of AttachVolume)") dinst+=("$(count_of DescribeInstances)") dvol+=("$(count_of DescribeVolumes)")
	pub_err=$(grep -c 'rpc error' "$T_TMP/pub.err")
	attached=$(moto_py 'print(sum(1 for v in ec2.describe_volumes(VolumeIds=sys.argv[1:])["Volumes"] if v["Attachments"]))' $(awk '{print $1}' <<<"$setup"))
	echo "run $run: $PUBS concurrent ControllerPublishVolume (batching on): $pub_total AWS calls in $(echo "$t1 - $t0" | bc) s ($pub_err errors so far, $attached attached): $pub_counts"
	unpublish_all
done

kill "$CTRL_PID"
wait "$CTRL_PID" 2>/dev/null
csi_ctrl_start --batching=false || { echo "csi-controller did not restart"; exit 1; }
: >"$T_TMP/pub.err"
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
publish_all
nb_total=$(total)
nb_counts=$(counts)
nb_err=$(grep -c 'rpc error' "$T_TMP/pub.err")
echo "$PUBS concurrent ControllerPublishVolume (--batching=false): $nb_total AWS calls ($nb_err errors): $nb_counts"

echo
echo "== csi-controller figures"
printf '%-62s %s\n' "RSS idle" "$((idle / 1024)) MiB ($idle KiB; anonymous $idle_anon KiB, the rest shared library text)"
printf '%-62s %s\n' "RSS after $PAIRS CreateVolume/DeleteVolume pairs" "$((after / 1024)) MiB ($after KiB; anonymous $after_anon KiB)"
printf '%-62s %s\n' "RSS after the GetPluginInfo runs" "$((rss_rate / 1024)) MiB ($rss_rate KiB)"
echo "(min / median / max over $BENCH_RUNS runs)"
printf '%-62s %s\n' "GetPluginInfo over the socket, 1 in flight" "$(spread "${r1s[@]}") calls/s"
printf '%-62s %s\n' "GetPluginInfo over the socket, 4 in flight" "$(spread "${r4s[@]}") calls/s"
printf '%-62s %s\n' "AWS calls, $PUBS concurrent ControllerPublishVolume (batched)" "$(spread "${tots[@]}")"
printf '%-62s %s\n' "  AttachVolume" "$(spread "${attach[@]}")"
printf '%-62s %s\n' "  DescribeInstances" "$(spread "${dinst[@]}")"
printf '%-62s %s\n' "  DescribeVolumes" "$(spread "${dvol[@]}")"
printf '%-62s %s\n' "AWS calls, $PUBS concurrent ControllerPublishVolume (unbatched)" "$nb_total"
