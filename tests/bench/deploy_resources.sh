#!/usr/bin/env bash
# The figures behind the resource requests and limits of deploy/ (each manifest names the line
# it took its figure from). Memory is read from /proc/PID/status: VmRSS (resident now), RssAnon
# (its anonymous part: the rest is the shared libraries' text, which a container is charged for
# too) and VmHWM (the highest VmRSS of the process's life). CPU is utime + stime from
# /proc/PID/stat over a window, printed in millicores (1000m = one core busy).
#   ccm:            N (default 100) cluster instances in moto and N uninitialized Nodes with pod
#                   CIDRs; `aws-k8s ccm` with the deploy/ flags (leader election, default
#                   periods) plus the route controller (the example overlay turns it on):
#                   busy = until every Node is initialized and routed; idle = the next IDLE
#                   seconds (default 60) at the default periods;
#   csi-controller: idle after start-up; busy = PUBS (default 100) concurrent
#                   ControllerPublishVolume then as many ControllerUnpublishVolume (10 volumes
#                   per instance), then PAIRS (default 200) CreateVolume/DeleteVolume pairs 16 at a
#                   time;
#   csi-node:       (root) idle after start-up; busy = RUNS (default 20) stage/publish/unpublish/
#                   unstage cycles of a 1 GiB ext4 loop device with the format; and the peak RSS
#                   of the programs the node runs in its container (mkfs.ext4 -F -m0, e2fsck -p,
#                   resize2fs, mkfs.xfs -f; and e2fsck -f -p, the full check an unclean file
#                   system gets) on sparse image files of each size in SIZES (default "1T 15T":
#                   15 TiB is near gp3's former 16 TiB maximum and under the host file size limit).
#   nth:            tests/bench/nth.sh (IMDS mode idle and draining PODS pods, queue mode idle
#                   and its SQS calls): the figures of deploy/nth's resources.
# Environment: N, IDLE, PUBS, PAIRS, RUNS, SIZES; PARTS (default "ccm controller node nth").
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../integration/ccm_lib.sh"
. "$(dirname "$0")/../integration/csi_controller_lib.sh"

N=${N:-100}
IDLE=${IDLE:-60}
PUBS=${PUBS:-100}
PAIRS=${PAIRS:-200}
RUNS=${RUNS:-20}
SIZES=${SIZES:-1T 15T}
PARTS=${PARTS:-ccm controller node nth}
HZ=$(getconf CLK_TCK)

st() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
# CPU ticks of the process and of the children it waited for (mkfs, fsck: charged to the
# container too)
ticks() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; }
# mem_line LABEL PID: one line of the three memory figures, in MiB with one decimal
mem_line() {
	printf '%-58s VmRSS %5.1f MiB  RssAnon %5.1f MiB  VmHWM %5.1f MiB\n' "$1" \
		"$(echo "$(st "$2" VmRSS) / 1024" | bc -l)" "$(echo "$(st "$2" RssAnon) / 1024" | bc -l)" \
		"$(echo "$(st "$2" VmHWM) / 1024" | bc -l)"
}
# cpu_line LABEL TICKS0 TICKS1 SECONDS
cpu_line() { printf '%-58s %d m (%d ticks in %s s)\n' "$1" "$(echo "($3 - $2) * 1000 / $HZ / $4" | bc)" "$(($3 - $2))" "$4"; }
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc -l | xargs printf '%.1f'; }

ccm_part() {
	echo "== ccm: $N Nodes"
	ccm_env_start || { echo "environment did not start"; return 1; }
	moto_py "
n = int(sys.argv[1])
vpc = ec2.describe_vpcs()['Vpcs'][0]['VpcId']
sub = ec2.create_subnet(VpcId=vpc, CidrBlock='172.31.128.0/17')['Subnet']['SubnetId']
ec2.create_route_table(VpcId=vpc, TagSpecifications=[{'ResourceType': 'route-table',
    'Tags': [{'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])
with open('$T_TMP/instances', 'w') as f:
    for k in range((n + 99) // 100):
        m = min(100, n - k * 100)
        r = ec2.run_instances(ImageId='ami-12345678', InstanceType='m5.large', MinCount=m,
            MaxCount=m, SubnetId=sub, TagSpecifications=[{'ResourceType': 'instance', 'Tags': [
                {'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])
        for i in r['Instances']:
            f.write('%s %s\n' % (i['PrivateDnsName'], i['InstanceId']))
" "$N" || { echo "moto setup failed"; return 1; }
	python3 - "$KC" "$KAS_URL" "$T_TMP/instances" <<'PY' || { echo "node creation failed"; return 1; }
import json, ssl, sys, urllib.request
kc, url, inst = sys.argv[1:4]
tok = open(kc + '.token').read().strip()
ctx = ssl.create_default_context(cafile=kc + '.ca.crt')
for j, line in enumerate(open(inst)):
    name = line.split()[0]
    cidr = "10.%d.%d.0/24" % (128 + j // 256, j % 256)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"podCIDR": cidr, "podCIDRs": [cidr],
                     "taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized",
                                 "value": "true", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
    req = urllib.request.Request(url + "/api/v1/nodes", data=json.dumps(node).encode(),
                                 headers={"Authorization": "Bearer " + tok,
                                          "Content-Type": "application/json"})
    urllib.request.urlopen(req, context=ctx).read()
PY
	local port pid t0 c0 c1 c2
	port=$(free_port)
	# deploy/ccm/base's flags, with the example overlay's route controller and the test peers
	bg ccm "$AWS_K8S" ccm --cloud-provider=aws --cloud-config="$CCM_CONFIG" --kubeconfig="$KC" \
		--leader-elect=true --bind-address=127.0.0.1 --secure-port="$port" --v=2 \
		--allocate-node-cidrs=true --configure-cloud-routes=true --cluster-cidr=10.128.0.0/14
	pid=$(cat "$T_TMP/ccm.pid")
	t0=$(now) c0=$(ticks "$pid")
	wait_http "https://127.0.0.1:$port/healthz" 20 || { echo "ccm did not start"; return 1; }
	local done_init=0
	while :; do
		if [ "$done_init" = 0 ] && [ "$(kc get nodes -o json | jq '[.items[] | select(any(.spec.taints[]?; .key == "node.cloudprovider.kubernetes.io/uninitialized"))] | length')" = 0 ]; then
			done_init=1
			echo "  every Node initialized after $(since "$t0") s"
		fi
		[ "$done_init" = 1 ] && [ "$(kc get nodes -o json | jq '[.items[] | select(any(.status.conditions[]; .type == "NetworkUnavailable" and .status == "False"))] | length')" = "$N" ] && break
		if [ "$(since "$t0" | cut -d. -f1)" -gt 900 ]; then echo "  timeout"; break; fi
		sleep 1
	done
	local busy_s
	busy_s=$(since "$t0") c1=$(ticks "$pid")
	echo "  every Node routed after $busy_s s"
	mem_line "ccm, $N Nodes, after initializing and routing them" "$pid"
	cpu_line "ccm, $N Nodes, CPU while initializing and routing" "$c0" "$c1" "$busy_s"
	sleep "$IDLE"
	c2=$(ticks "$pid")
	mem_line "ccm, $N Nodes, idle ${IDLE} s later (default periods)" "$pid"
	cpu_line "ccm, $N Nodes, CPU idle (default periods)" "$c1" "$c2" "$IDLE"
	kill "$pid"
}

controller_part() {
	echo "== csi-controller"
	[ -n "${MOTO_URL:-}" ] || { moto_start && faultproxy_start "$MOTO_URL"; } ||
		{ echo "moto did not start"; return 1; }
	export AWS_ENDPOINT_URL=${FAULTPROXY_URL:-$MOTO_URL}
	csi_ctrl_start || return 1
	cc probe >/dev/null
	sleep 5
	local c0 c1 c2 t0 busy_s
	c0=$(ticks "$CTRL_PID")
	sleep 10
	c1=$(ticks "$CTRL_PID")
	mem_line "csi-controller idle" "$CTRL_PID"
	cpu_line "csi-controller CPU idle" "$c0" "$c1" 10
	local setup
	setup=$(moto_py '
n = int(sys.argv[1])
insts = [run_instance(InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"})
         for _ in range(max(10, n // 10))]
for i in range(n):
    print(ec2.create_volume(AvailabilityZone="us-east-1a", Size=1, VolumeType="gp3")["VolumeId"],
          insts[i % len(insts)])
' "$PUBS")
	t0=$(now) c0=$(ticks "$CTRL_PID")
	local pids=() v i
	while read -r v i; do
		cc controller-publish --volume "$v" --node "$i" >/dev/null 2>>"$T_TMP/pub.err" &
		pids+=($!)
	done <<<"$setup"
	wait "${pids[@]}"
	pids=()
	while read -r v i; do
		cc controller-unpublish --volume "$v" --node "$i" >/dev/null 2>>"$T_TMP/pub.err" &
		pids+=($!)
	done <<<"$setup"
	wait "${pids[@]}"
	busy_s=$(since "$t0") c1=$(ticks "$CTRL_PID")
	echo "  $PUBS concurrent publishes then unpublishes in $busy_s s ($(grep -c "rpc error" "$T_TMP/pub.err" 2>/dev/null) errors)"
	grep 'rpc error' "$T_TMP/pub.err" | sed 's/vol-[0-9a-f]*/vol-X/g; s/i-[0-9a-f]*/i-X/g' | sort | uniq -c |
		sort -rn | head -3 | sed 's/^/    /'
	mem_line "csi-controller after $PUBS concurrent publishes/unpublishes" "$CTRL_PID"
	cpu_line "csi-controller CPU during the publish burst" "$c0" "$c1" "$busy_s"
	((PAIRS > 0)) || { kill "$CTRL_PID"; return 0; }
	t0=$(now)
	# shellcheck disable=SC2016 # expanded by the inner sh
	seq 1 "$PAIRS" | xargs -P 16 -I{} sh -c '
		id=$("$0" csi-client --endpoint "unix://$1" --timeout 120s create-volume --name "res-{}" --size 1Gi \
			--zone us-east-1a | jq -r .volume.volume_id) &&
		"$0" csi-client --endpoint "unix://$1" --timeout 120s delete-volume --volume "$id" >/dev/null || echo failed >&2
	' "$AWS_K8S" "$CTRL_SOCK" 2>"$T_TMP/pairs.err"
	busy_s=$(since "$t0") c2=$(ticks "$CTRL_PID")
	echo "  $PAIRS CreateVolume/DeleteVolume pairs, 16 in flight, in $busy_s s ($(grep -c failed "$T_TMP/pairs.err") failed)"
	mem_line "csi-controller after the pairs" "$CTRL_PID"
	cpu_line "csi-controller CPU during the pairs" "$c1" "$c2" "$busy_s"
	kill "$CTRL_PID"
}

# child_peak LABEL CMD...: the peak RSS of CMD, by GNU time (a small parent: a process's peak
# starts at its parent's at the exec, so python or bash would count themselves)
child_peak() {
	local label=$1 out
	shift
	out=$(/usr/bin/time -f '%M %x' "$@" 2>&1 >/dev/null | tail -1)
	printf '%-58s maxrss %5.1f MiB (exit %s)\n' "$label" "$(echo "${out%% *} / 1024" | bc -l)" "${out#* }"
}

node_part() {
	echo "== csi-node"
	if [ "$(id -u)" != 0 ] || ! command -v losetup >/dev/null || [ ! -x /usr/bin/time ]; then
		echo "  needs root, losetup and GNU time: skipped"
		return 0
	fi
	local T=$T_TMP/node L pid c0 c1 t0 busy_s
	mkdir -p "$T/by-id"
	truncate -s 1G "$T/v.img"
	L=$(losetup -f --show "$T/v.img") || return 1
	t_cleanup_add "losetup -d $L"
	t_cleanup_add "grep -o ' ${T}[^ ]*' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l"
	ln -s "$L" "$T/by-id/nvme-Amazon_Elastic_Block_Store_vol0res"
	AWS_EC2_METADATA_DISABLED=true CSI_ENDPOINT="unix://$T/csi.sock" "$AWS_K8S" csi-node \
		--logging-format=text --v=2 --node-id i-0123456789abcdef0 --availability-zone us-east-1a \
		--volume-attach-limit 25 --device-dir "$T/by-id" 2>"$T/node.log" &
	pid=$!
	t_cleanup_add "kill $pid 2>/dev/null"
	for _ in $(seq 200); do [ -S "$T/csi.sock" ] && break; sleep 0.01; done
	sleep 2
	c0=$(ticks "$pid")
	sleep 10
	c1=$(ticks "$pid")
	mem_line "csi-node idle" "$pid"
	cpu_line "csi-node CPU idle" "$c0" "$c1" 10
	local C=("$AWS_K8S" csi-client --endpoint "unix://$T/csi.sock")
	t0=$(now) c0=$(ticks "$pid")
	for _ in $(seq "$RUNS"); do
		wipefs -a -q "$L" 2>/dev/null
		"${C[@]}" node-stage --volume vol-0res --staging-path "$T/st" --publish-context devicePath=/dev/xvdba \
			--capability mount:ext4 >/dev/null &&
			"${C[@]}" node-publish --volume vol-0res --staging-path "$T/st" --target "$T/t" \
				--capability mount:ext4 >/dev/null &&
			"${C[@]}" node-get-volume-stats --volume vol-0res --volume-path "$T/t" >/dev/null &&
			"${C[@]}" node-unpublish --volume vol-0res --target "$T/t" >/dev/null &&
			"${C[@]}" node-unstage --volume vol-0res --staging-path "$T/st" >/dev/null ||
			{ echo "  a cycle failed"; tail -3 "$T/node.log"; }
	done
	busy_s=$(since "$t0") c1=$(ticks "$pid")
	mem_line "csi-node after $RUNS format/stage/publish cycles" "$pid"
	cpu_line "csi-node CPU (with mkfs, fsck) during the cycles" "$c0" "$c1" "$busy_s"
	kill "$pid"
	local size
	for size in $SIZES; do
		rm -f "$T/big.img" "$T/half.img"
		truncate -s "$size" "$T/big.img"
		child_peak "mkfs.ext4 -F -m0 on $size" mkfs.ext4 -q -F -m0 "$T/big.img"
		child_peak "e2fsck -p on that clean $size ext4 (a stage)" e2fsck -p "$T/big.img"
		child_peak "e2fsck -f -p on it (a full check, as after a crash)" e2fsck -f -p "$T/big.img"
		truncate -s "$size" "$T/half.img"
		mkfs.ext4 -q -F -m0 "$T/half.img" 1G >/dev/null 2>&1
		child_peak "resize2fs 1G -> $size" resize2fs "$T/half.img"
		child_peak "mkfs.xfs -f on $size" mkfs.xfs -q -f "$T/big.img"
	done
	rm -f "$T/big.img" "$T/half.img"
}

nth_part() {
	echo "== nth (tests/bench/nth.sh)"
	bash "$(dirname "$0")/nth.sh"
}

echo "host: $(nproc) cores, $(uname -r), $("$AWS_K8S" --version 2>/dev/null | head -1)"
for p in $PARTS; do
	"${p}_part"
done
