#!/usr/bin/env bash
# tests: product
# The EBS CSI driver's own metrics, by value and by mode (metrics_names.sh checks the names of
# each mode against upstream's table):
#   csi-node: the EBS NVMe statistics of each volume of --device-dir from its log page
#     (--nvme-log-page-dir: tests/data/csi_node/ebs_nvme_page.bin, built from the documented
#     layout), exactly, as upstream converts them; a volume whose page has a bad magic exports
#     nothing and counts an error; a page that goes away takes its series with it; without a
#     page source the node asks the devices themselves (loop devices: no NVMe page) and exports
#     none of the per-volume families.
#   csi-controller: a detach that has to wait (the fault proxy answers DescribeVolumes with the
#     attachment still "detaching" for 5 s; moto detaches at once) shows in
#     aws_ebs_csi_ec2_detach_pending_seconds_total once past --detach-pending-metric-after,
#     labelled with the volume, the instance and the state, growing, and is gone when the
#     detach is done.
#   ebs-csi-driver all: one endpoint with the controller's and the node's families (with an AWS
#     error, a throttle, a pending detach and a volume page, every one of upstream's names has
#     a series), each once.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/csi_controller_lib.sh"
. "$(dirname "$0")/../lib/metrics_lib.sh"

for t in jq curl promtool; do
	command -v $t >/dev/null || { skip "csi metrics" "$t is not installed"; t_summary; }
done
expect() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$3', want '$2'"; fi; }
# ge NAME VALUE MIN [MAX]: MIN <= VALUE (<= MAX)
ge() {
	if python3 -c 'import sys; v, lo = float(sys.argv[1]), float(sys.argv[2]); hi = float(sys.argv[3]) if len(sys.argv) > 3 else v
sys.exit(0 if lo <= v <= hi else 1)' "${@:2}" 2>/dev/null; then ok "$1"
	else fail "$1" "got '$2', want between $3 and ${4:-any}"; fi
}
# serve NAME PORT CMD...: starts CMD in the background, waits for its HTTP server on PORT (not
# on /metrics: a scrape would count)
serve() {
	local name=$1 port=$2
	shift 2
	bg "$name" "$@"
	wait_http "http://127.0.0.1:$port/healthz" 20 && return 0
	tail -n 10 "$T_TMP/$name.log" >&2
	return 1
}
scrape() { curl -s "http://127.0.0.1:$1/metrics" >"$2"; }
# absent NAME FILE REGEX: no line of FILE matches REGEX
absent() {
	if grep -qE "$3" "$2"; then fail "$1" "$(grep -E "$3" "$2" | head -3)"; else ok "$1"; fi
}
IID=i-0123456789abcdef0

# ---- csi-node ----
if nvme_fixture "$T_TMP/nvme"; then
	port=$(free_port)
	if serve node "$port" "$AWS_K8S" csi-node --endpoint "unix://$T_TMP/node.sock" \
		--http-endpoint "127.0.0.1:$port" --node-id $IID --availability-zone us-east-1a \
		--device-dir "$T_TMP/nvme/by-id" --nvme-log-page-dir "$T_TMP/nvme/pages"; then
		ok "csi-node with a page source serves its metrics"
	else fail "csi-node with a page source serves its metrics"; fi
	P=$T_TMP/node.prom
	scrape "$port" "$P"
	L="{instance_id=\"$IID\",volume_id=\"$NVME_VOL_GOOD\"}"
	bad=0
	while read -r name want; do
		got=$(metric_value "$P" "$name$L")
		[ "$got" = "$want" ] || { bad=1; fail "node: $name of the page" "got '$got', want '$want'"; }
	done <<-EOF
		aws_ebs_csi_read_ops_total 1000
		aws_ebs_csi_write_ops_total 2000
		aws_ebs_csi_read_bytes_total 4096000
		aws_ebs_csi_write_bytes_total 8192000
		aws_ebs_csi_read_seconds_total 1.5
		aws_ebs_csi_write_seconds_total 3.25
		aws_ebs_csi_exceeded_iops_seconds_total 0.25
		aws_ebs_csi_exceeded_tp_seconds_total 0.125
		aws_ebs_csi_ec2_exceeded_iops_seconds_total 0.5
		aws_ebs_csi_ec2_exceeded_tp_seconds_total 2
		aws_ebs_csi_volume_queue_length 7
		aws_ebs_csi_read_io_latency_seconds_count 1000
		aws_ebs_csi_read_io_latency_seconds_sum 1.5
		aws_ebs_csi_write_io_latency_seconds_count 2000
		aws_ebs_csi_write_io_latency_seconds_sum 3.25
	EOF
	[ $bad = 0 ] && ok "node: the page's counters (microseconds as seconds), queue length and histogram counts and sums"
	# the bins as cumulative buckets, le = upper bound in seconds
	got=$(grep "^aws_ebs_csi_read_io_latency_seconds_bucket{instance_id=\"$IID\",volume_id=\"$NVME_VOL_GOOD\"" "$P" |
		sed -E 's/.*le="([^"]*)"\} (.*)/\1=\2/' | paste -sd' ')
	expect "node: the read latency bins as buckets" "0.001=600 0.002=900 0.005=990 0.01=1000 +Inf=1000" "$got"
	got=$(grep "^aws_ebs_csi_write_io_latency_seconds_bucket{instance_id=\"$IID\",volume_id=\"$NVME_VOL_GOOD\"" "$P" |
		sed -E 's/.*le="([^"]*)"\} (.*)/\1=\2/' | paste -sd' ')
	expect "node: the write latency bins as buckets" "0.0005=1500 0.0025=1900 1=2000 +Inf=2000" "$got"
	absent "node: nothing for the volume whose page has a bad magic" "$P" "$NVME_VOL_BAD"
	e1=$(metric_value "$P" "aws_ebs_csi_nvme_collector_errors_total{instance_id=\"$IID\"}")
	s1=$(metric_value "$P" "aws_ebs_csi_nvme_collector_scrapes_total{instance_id=\"$IID\"}")
	promtool_check "node with pages" "$P"
	# the good page goes away: its series too
	rm "$T_TMP/nvme/pages/$NVME_VOL_GOOD"
	scrape "$port" "$P"
	absent "node: no page any more, no series (none of the per-volume families)" "$P" 'volume_id='
	e2=$(metric_value "$P" "aws_ebs_csi_nvme_collector_errors_total{instance_id=\"$IID\"}")
	s2=$(metric_value "$P" "aws_ebs_csi_nvme_collector_scrapes_total{instance_id=\"$IID\"}")
	expect "node: each scrape counted, and the bad page counted an error at each" \
		"$((s1 + 1)) $((e1 + 1))" "$s2 $e2"
	stop_within "$(cat "$T_TMP/node.pid")" 5 "csi-node" && expect "csi-node stops with 0" 0 "$STOP_RC"

	# no page source: the devices are asked (loop devices have no NVMe page)
	port=$(free_port)
	serve node-dev "$port" "$AWS_K8S" csi-node --endpoint "unix://$T_TMP/node2.sock" \
		--http-endpoint "127.0.0.1:$port" --node-id $IID --availability-zone us-east-1a \
		--device-dir "$T_TMP/nvme/by-id" || fail "csi-node without a page source serves its metrics"
	scrape "$port" "$P"
	if grep -q "^aws_ebs_csi_nvme_collector_scrapes_total{instance_id=\"$IID\"} 1$" "$P" &&
		! grep -qE '^aws_ebs_csi_(read|write|exceeded|ec2_exceeded|volume_queue)[a-z_]*\{' "$P" &&
		! grep -q '^# TYPE aws_ebs_csi_read_ops_total' "$P"; then
		ok "node: devices without the page (loop devices) export none of the per-volume families"
	else fail "node: devices without the page export nothing" "$(grep '^aws_ebs_csi' "$P" | head -5)"; fi
	expect "node: a device without the page is not an error" 0 \
		"$(metric_value "$P" "aws_ebs_csi_nvme_collector_errors_total{instance_id=\"$IID\"}")"
	stop_within "$(cat "$T_TMP/node-dev.pid")" 5 "csi-node (devices)"
	# the good page back, for mode all below
	cp "$T_ROOT/tests/data/csi_node/ebs_nvme_page.bin" "$T_TMP/nvme/pages/$NVME_VOL_GOOD"
	NODE_OK=1
else
	skip "csi-node metrics" "$NVME_WHY"
fi

# ---- csi-controller: a detach that has to wait ----
moto_start || { fail "moto starts"; t_summary; }
faultproxy_start "$MOTO_URL" || { fail "the fault proxy starts"; t_summary; }
export AWS_ENDPOINT_URL=$FAULTPROXY_URL MOTO_PY_ENDPOINT=$MOTO_URL
iid=$(moto_py 'print(run_instance(InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"}))')
csi_ctrl_start --detach-pending-metric-after=1s || { fail "csi-controller starts"; t_summary; }
P=$T_TMP/ctrl.prom
# detach_pending NAME PORT-URL: creates, attaches, detaches a volume slowly; scrapes into
# $P.0 (0.5 s in), $P.1 (2.5 s), $P.2 (3.5 s), $P.3 (after the detach); sets VOL, DEV
detach_pending() {
	local c=$1 url=$2 out pid
	out=$($c create-volume --name "pvc-$3" --size 1Gi --zone us-east-1a)
	VOL=$(jget "$out" .volume.volume_id)
	DEV=$(jget "$($c controller-publish --volume "$VOL" --node "$iid")" .publish_context.devicePath)
	slow_detach "$VOL" "$iid" "$DEV" 5
	$c controller-unpublish --volume "$VOL" --node "$iid" >"$T_TMP/unpublish.out" 2>&1 &
	pid=$!
	sleep 0.5 && curl -s "$url/metrics" >"$P.0"
	sleep 2 && curl -s "$url/metrics" >"$P.1"
	sleep 1 && curl -s "$url/metrics" >"$P.2"
	if wait $pid; then ok "$3: the slowed detach ends OK"
	else fail "$3: the slowed detach ends OK" "$(cat "$T_TMP/unpublish.out")"; fi
	curl -s "$url/metrics" >"$P.3"
}
detach_pending cc "$CTRL_METRICS" controller
S="aws_ebs_csi_ec2_detach_pending_seconds_total{volume_id=\"$VOL\",instance_id=\"$iid\",attachment_state=\"detaching\"}"
absent "controller: a detach pending under the threshold (1 s) is not shown" "$P.0" \
	'^aws_ebs_csi_ec2_detach_pending_seconds_total\{'
v1=$(metric_value "$P.1" "$S") || v1=none
ge "controller: a detach pending past the threshold: $S (seconds since the first poll)" "$v1" 1.5 5
v2=$(metric_value "$P.2" "$S") || v2=none
ge "controller: the pending seconds grow (a second later)" "$v2" "$(python3 -c "print($v1 + 0.9)" 2>/dev/null || echo 99)" 6
absent "controller: the detach done, the series is gone" "$P.3" \
	'^aws_ebs_csi_ec2_detach_pending_seconds_total\{'
ge "controller: each scrape counted in aws_ebs_csi_ec2_collector_scrapes_total" \
	"$(metric_value "$P.3" aws_ebs_csi_ec2_collector_scrapes_total)" 4
promtool_check controller "$P.1"
stop_within "$CTRL_PID" 5 "csi-controller" && expect "csi-controller stops with 0" 0 "$STOP_RC"

# ---- ebs-csi-driver all: both, each name once ----
if [ -n "${NODE_OK:-}" ]; then
	port=$(free_port)
	SOCK=$T_TMP/all.sock
	serve all "$port" "$AWS_K8S" ebs-csi-driver all --endpoint "unix://$SOCK" \
		--http-endpoint "127.0.0.1:$port" --node-id "$iid" --availability-zone us-east-1a \
		--device-dir "$T_TMP/nvme/by-id" --nvme-log-page-dir "$T_TMP/nvme/pages" \
		--detach-pending-metric-after=1s --k8s-tag-cluster-id=test ||
		{ fail "ebs-csi-driver all starts"; t_summary; }
	for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
	ca() { "$AWS_K8S" csi-client --endpoint "unix://$SOCK" --timeout 60s "$@"; }
	# a create AWS refuses and one throttled past its retries: the error and throttle families
	fault '{"service":"ec2","action":"CreateVolume","effect":"error","code":"UnauthorizedOperation","status":403,"count":1}'
	ca create-volume --name pvc-e1 --size 1Gi --zone us-east-1a >/dev/null 2>&1
	fault '{"service":"ec2","action":"CreateVolume","effect":"throttle","count":3}'
	ca create-volume --name pvc-e2 --size 1Gi --zone us-east-1a >/dev/null 2>&1
	detach_pending ca "http://127.0.0.1:$port" all
	S="aws_ebs_csi_ec2_detach_pending_seconds_total{volume_id=\"$VOL\",instance_id=\"$iid\",attachment_state=\"detaching\"}"
	v1=$(metric_value "$P.1" "$S") || v1=none
	ge "all: the controller's detach pending" "$v1" 1.5 5
	expect "all: the node's statistics, with the node's instance id" 1000 \
		"$(metric_value "$P.1" "aws_ebs_csi_read_ops_total{instance_id=\"$iid\",volume_id=\"$NVME_VOL_GOOD\"}")"
	promtool_check all "$P.1"
	compare all "$P.1" "$METRICS_DATA/upstream_ebs_csi.txt" "$METRICS_DATA/upstream_ccm.txt" controller,node
	stop_within "$(cat "$T_TMP/all.pid")" 5 "ebs-csi-driver all" && expect "ebs-csi-driver all stops with 0" 0 "$STOP_RC"
else
	skip "mode all metrics" "$NVME_WHY"
fi
t_summary
