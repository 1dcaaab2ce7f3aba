#!/usr/bin/env bash
# tests: product
# The fault matrix: at each destructive decision point of ccm and csi-controller, the fault
# proxy replaces the one reply the decision rests on with something that is not that reply
# (HTML with 200, well-formed XML with another root, the right root without its result set,
# an empty 200, truncated XML, an endless body, a hang, throttling, a 500). Nothing may be
# destroyed and nothing may be reported done: no Node deleted or tainted, no volume reported
# detached or missing. Each part ends with a positive control (the same decision with the real
# reply) so that a check that cannot fail is caught. Then: memory under endless replies stays
# under the cap, and SIGTERM with a hung AWS call stops the process at once.
#
# Extend this matrix with each new destructive decision (load balancers, nth message
# deletion, capa deletes): add the action to the effect loop of its part.
# Under AddressSanitizer, freed memory waits in a quarantine (256 MiB by default) and would count
# in the peak; a small one keeps the memory checks meaningful in the sanitizer pass too.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4"
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"
. "$(dirname "$0")/csi_controller_lib.sh"

# effect_calls ACTION EFFECT: how many calls of ACTION the proxy answered with EFFECT
effect_calls() {
	tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys
c = json.load(sys.stdin)["calls"].get("ec2:" + sys.argv[1], {})
print(c.get("effects", {}).get(sys.argv[2], 0))' "$1" "$2"
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null; }
hwm_kib() { awk '/^VmHWM/ {print $2}' "/proc/$1/status" 2>/dev/null; }
set_ready() {
	kc patch node "$1" --subresource=status --type=merge \
		-p "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"$2\",\"reason\":\"t\"}]}}" >/dev/null
}
gone() { ! kc get node "$1" >/dev/null 2>&1; }
tainted() { [ "$(node_py "$1" "'node.cloudprovider.kubernetes.io/shutdown' in taints")" = True ]; }
initialized() { [ "$(node_py "$1" "'node.cloudprovider.kubernetes.io/uninitialized' in taints")" = False ]; }

# The effects of the matrix: name and rule (without service/action).
EFFECTS=(
	'html200|{"effect":"html200"}'
	'wrong-root|{"effect":"wrong-root"}'
	'no-result-set|{"effect":"strip","element":"@SET@"}'
	'empty200|{"effect":"empty200"}'
	'truncated|{"effect":"truncate","mode":"mid-tag","length":"cut"}'
	'endless|{"effect":"endless","rate":0,"seconds":5}'
	'hang|{"effect":"hang","seconds":3}'
	'throttle|{"effect":"throttle"}'
	'http500|{"effect":"http500"}'
)
rule() { # rule ACTION SET EFFECT-JSON
	python3 -c 'import json,sys; r=json.loads(sys.argv[3].replace("@SET@", sys.argv[2])); r.update(service="ec2", action=sys.argv[1]); print(json.dumps(r))' "$@"
}

ccm_env_start || { fail "test bed starts"; t_summary; }

# ============ ccm: the node-lifecycle controller deletes a NotReady Node only on evidence ====
read -r iA _ <<<"$(instance fm-a)"
read -r iB _ <<<"$(instance fm-b)"
read -r iC _ <<<"$(instance fm-c)"
node_create fm-a "aws:///us-east-1a/$iA"
node_create fm-b "aws:///us-east-1a/$iB"
node_create fm-c "aws:///us-east-1a/$iC"
ccm_start ccm1 --controllers=cloud-node,cloud-node-lifecycle || fail "ccm starts"
CCM_PID=$(cat "$T_TMP/ccm1.pid")
if wait_until 30 initialized fm-a && wait_until 10 initialized fm-b && wait_until 10 initialized fm-c; then
	ok "ccm initializes three Nodes"
else
	fail "ccm initializes three Nodes" "$(tail -n 5 "$T_TMP/ccm1.log")"
fi
for n in fm-a fm-b fm-c; do set_ready "$n" False; done
sleep 2
base_kib=$(rss_kib "$CCM_PID")

for e in "${EFFECTS[@]}"; do
	name=${e%%|*}
	clear_faults
	fault "$(rule DescribeInstances reservationSet "${e#*|}")"
	eff=$(echo "${e#*|}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["effect"])')
	sleep 4 # four monitor periods
	hit=$(effect_calls DescribeInstances "$eff")
	if ! gone fm-a && ! gone fm-b && ! gone fm-c && ! tainted fm-a && ! tainted fm-b && ! tainted fm-c; then
		ok "ccm: DescribeInstances answered $name: no Node deleted or tainted ($hit faulted calls)"
	else
		fail "ccm: DescribeInstances answered $name: no Node deleted or tainted" \
			"$(kc get nodes -o name | tr '\n' ' ')"
	fi
	[ "$hit" -gt 0 ] || fail "ccm: the $name fault was exercised" "0 faulted DescribeInstances"
done
clear_faults
if kill -0 "$CCM_PID" 2>/dev/null; then ok "ccm survived the matrix"; else fail "ccm survived the matrix"; fi
grep -q "unusable reply from ec2 DescribeInstances" "$T_TMP/ccm1.log" \
	&& ok "ccm logs the unusable replies" || fail "ccm logs the unusable replies"
peak_kib=$(hwm_kib "$CCM_PID")
echo "# ccm RSS before the matrix ${base_kib} KiB, peak ${peak_kib} KiB (endless DescribeInstances capped at 32 MiB)"
[ -n "$peak_kib" ] && [ $((peak_kib - base_kib)) -lt $((100 * 1024)) ] \
	&& ok "ccm peak memory under endless replies stays within the cap (+$(((peak_kib - base_kib) / 1024)) MiB)" \
	|| fail "ccm peak memory under endless replies stays within the cap" "base $base_kib KiB, peak $peak_kib KiB"

# positive control: the same monitor deletes the Node once the instance is really gone
moto_py "ec2.terminate_instances(InstanceIds=['$iA'])" >/dev/null
if wait_until 15 gone fm-a; then ok "control: a terminated instance's NotReady Node is deleted"
else fail "control: a terminated instance's NotReady Node is deleted"; fi
gone fm-b && fail "control: the other Nodes stay" || ok "control: the other Nodes stay"

# SIGTERM while DescribeInstances hangs: out at once, not after the 30 s attempt timeout
fault '{"service":"ec2","action":"DescribeInstances","effect":"hang","seconds":60}'
sleep 2
t0=$(date +%s%N)
kill -TERM "$CCM_PID"
for _ in $(seq 300); do kill -0 "$CCM_PID" 2>/dev/null || break; sleep 0.05; done
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
echo "# ccm: SIGTERM to exit with a hung DescribeInstances: $ms ms"
if ! kill -0 "$CCM_PID" 2>/dev/null && [ "$ms" -lt 5000 ]; then ok "ccm: SIGTERM with a hung AWS call exits in $ms ms"
else fail "ccm: SIGTERM with a hung AWS call exits within 5 s" "$ms ms"; fi
clear_faults

# ============ csi-controller: unpublish / publish / delete only on evidence =================
csi_ctrl_start || { fail "csi-controller starts"; t_summary; }
iid=$(moto_py 'print(run_instance(InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"}))')
vol=$(jget "$(cc create-volume --name fm-vol --size 1Gi --zone us-east-1a)" .volume.volume_id)
[[ $vol == vol-* ]] && ok "volume $vol" || fail "volume created" "$vol"
cc controller-publish --volume "$vol" --node "$iid" >/dev/null && ok "volume attached" || fail "volume attached"
att_state() { moto_py "v = ec2.describe_volumes(VolumeIds=['$vol'])['Volumes'][0]; print(','.join(a['State'] for a in v['Attachments']) or 'none')"; }
[ "$(att_state)" = attached ] && ok "EC2 shows the attachment" || fail "EC2 shows the attachment" "$(att_state)"
base_kib=$(rss_kib "$CTRL_PID")

for e in "${EFFECTS[@]}"; do
	name=${e%%|*}
	clear_faults
	fault "$(rule DescribeVolumes volumeSet "${e#*|}")"
	detach0=$(calls DetachVolume)
	code=$(cc_code controller-unpublish --volume "$vol" --node "$iid")
	detach1=$(calls DetachVolume)
	if [ "$code" != OK ] && [ "$(att_state)" = attached ] && [ "$detach0" = "$detach1" ]; then
		ok "csi: DescribeVolumes answered $name: unpublish is not reported done ($code), still attached, no DetachVolume"
	else
		fail "csi: DescribeVolumes answered $name: unpublish is not reported done" \
			"code=$code state=$(att_state) DetachVolume $detach0 -> $detach1"
	fi
	code=$(cc_code controller-publish --volume "$vol" --node "$iid")
	if [ "$code" != OK ] && [ "$code" != NotFound ]; then
		ok "csi: DescribeVolumes answered $name: publish is neither OK nor NotFound ($code)"
	else
		fail "csi: DescribeVolumes answered $name: publish is neither OK nor NotFound" "$code"
	fi
done
clear_faults

# DeleteVolume answered with an unusable 200: not reported deleted
fault '{"service":"ec2","action":"DeleteVolume","effect":"html200"}'
vol2=$(jget "$(cc create-volume --name fm-vol2 --size 1Gi --zone us-east-1a)" .volume.volume_id)
code=$(cc_code delete-volume --volume "$vol2")
[ "$code" != OK ] && ok "csi: DeleteVolume answered with HTML 200 is not reported done ($code)" \
	|| fail "csi: DeleteVolume answered with HTML 200 is not reported done" "$code"
clear_faults
[ "$(cc_code delete-volume --volume "$vol2")" = OK ] && ok "control: DeleteVolume with the real reply" \
	|| fail "control: DeleteVolume with the real reply"

# memory: six parallel ListVolumes (paged DescribeVolumes, not batched) each fed an endless body
fault '{"service":"ec2","action":"DescribeVolumes","effect":"endless","rate":0,"seconds":20}'
pids=()
for k in 1 2 3 4 5 6; do
	cc_code list-volumes >"$T_TMP/endless.$k" &
	pids+=($!)
done
wait "${pids[@]}"
peak_kib=$(hwm_kib "$CTRL_PID")
echo "# csi-controller RSS before ${base_kib} KiB, peak with six endless replies ${peak_kib} KiB"
[ $((peak_kib - base_kib)) -lt $((200 * 1024)) ] \
	&& ok "csi: six endless replies in parallel: peak +$(((peak_kib - base_kib) / 1024)) MiB (cap 16 MiB each)" \
	|| fail "csi: six endless replies in parallel stay under the caps" "base $base_kib KiB, peak $peak_kib KiB"
grep -q "reply or line over the limit" "$T_TMP/csi-ctrl.log" \
	&& ok "csi: an endless reply ends with a clear error past the cap" \
	|| fail "csi: an endless reply ends with a clear error past the cap" "$(grep -i endless -m2 "$T_TMP/csi-ctrl.log")"
[ "$(att_state)" = attached ] && ok "csi: still attached after the endless replies" || fail "csi: still attached after the endless replies"
clear_faults

# positive control: with the real replies, unpublish detaches
[ "$(cc_code controller-unpublish --volume "$vol" --node "$iid")" = OK ] && [ "$(att_state)" = none ] \
	&& ok "control: unpublish with the real replies detaches" \
	|| fail "control: unpublish with the real replies detaches" "$(att_state)"

# a password in the endpoint URL reaches neither the log nor the gRPC caller
stop_within "$CTRL_PID" 10 csi-controller
port=$(free_port)
AWS_ENDPOINT_URL="http://user:Pa55w0rd@127.0.0.1:$port" csi_ctrl_start --v=6 || fail "csi-controller starts (dead endpoint)"
out=$(cc controller-unpublish --volume "$vol" --node "$iid" 2>&1)
if ! grep -q Pa55w0rd "$T_TMP/csi-ctrl.log" && ! echo "$out" | grep -q Pa55w0rd && echo "$out" | grep -q "user:<redacted>@"; then
	ok "csi: a password in the endpoint URL is redacted in the log and the gRPC status"
else
	fail "csi: a password in the endpoint URL is redacted" "$(echo "$out" | head -c 300)"
fi
out=$(AWS_ENDPOINT_URL="http://user:Pa55w0rd@127.0.0.1:$port" "$AWS_K8S" aws --v=6 ec2 DescribeVolumes 2>&1)
echo "$out" | grep -q Pa55w0rd && fail "aws: the endpoint password is redacted" "$(echo "$out" | grep Pa55 | head -2)" \
	|| ok "aws: the endpoint password is redacted at -v=6"

# ... nor does a password in a kubeconfig's server URL, at -v=6 (every request line)
sed -E 's#(server"?: *"?)https://#\1https://kuser:Kpa55w0rd@#' "$KC" >"$T_TMP/kc-userinfo"
grep -q "kuser:Kpa55w0rd@" "$T_TMP/kc-userinfo" || fail "kubeconfig with userinfo written" "$(grep server "$KC")"
out=$("$AWS_K8S" kube-debug --kubeconfig "$T_TMP/kc-userinfo" --v=8 list nodes 2>&1)
if echo "$out" | grep -q "kuser:<redacted>@" && ! echo "$out" | grep -q Kpa55w0rd; then
	ok "kube: a password in the kubeconfig server URL is redacted at -v=8"
else
	fail "kube: a password in the kubeconfig server URL is redacted at -v=8" "$(echo "$out" | grep -m2 "kuser")"
fi

# SIGTERM while CreateVolume hangs at AWS
stop_within "$CTRL_PID" 10 csi-controller
csi_ctrl_start || fail "csi-controller restarts"
fault '{"service":"ec2","action":"CreateVolume","effect":"hang","seconds":60}'
cc create-volume --name fm-hang --size 1Gi --zone us-east-1a >/dev/null 2>&1 &
cpid=$!
for _ in $(seq 100); do [ "$(effect_calls CreateVolume hang)" -gt 0 ] && break; sleep 0.1; done
t0=$(date +%s%N)
kill -TERM "$CTRL_PID"
for _ in $(seq 300); do kill -0 "$CTRL_PID" 2>/dev/null || break; sleep 0.05; done
ms=$((($(date +%s%N) - t0) / 1000000))
echo "# csi-controller: SIGTERM to exit with a hung CreateVolume: $ms ms"
if ! kill -0 "$CTRL_PID" 2>/dev/null && [ "$ms" -lt 5000 ]; then ok "csi: SIGTERM with a hung AWS call exits in $ms ms"
else fail "csi: SIGTERM with a hung AWS call exits within 5 s" "$ms ms"; fi
wait "$cpid" 2>/dev/null
clear_faults

# ============ aws: a reply of the wrong shape is a failure, not a printed success ============
for e in 'ec2|DescribeVolumes|{"effect":"wrong-root"}' 'ec2|DescribeVolumes|{"effect":"empty200"}' \
	'ec2|DescribeVolumes|{"effect":"strip","element":"volumeSet"}' 'sqs|ListQueues|{"effect":"wrong-root"}' \
	'sqs|ListQueues|{"effect":"html200"}' 'sqs|SendMessage|{"effect":"body","body":"{\"Other\":1}","content_type":"application/x-amz-json-1.0"}'; do
	IFS='|' read -r svc act r <<<"$e"
	clear_faults
	fault "$(python3 -c 'import json,sys; r=json.loads(sys.argv[3]); r.update(service=sys.argv[1], action=sys.argv[2]); print(json.dumps(r))' "$svc" "$act" "$r")"
	args=()
	[ "$act" = SendMessage ] && args=(QueueUrl=http://x/1/q MessageBody=m)
	out=$("$AWS_K8S" aws "$svc" "$act" "${args[@]}" 2>&1)
	rc=$?
	if [ $rc = 1 ] && echo "$out" | grep -q "unusable reply from $svc $act"; then
		ok "aws: $svc $act answered $(echo "$r" | head -c 40): exit 1, unusable reply"
	else
		fail "aws: $svc $act answered $r: exit 1, unusable reply" "rc=$rc $(echo "$out" | head -c 200)"
	fi
done
clear_faults

t_summary
