#!/usr/bin/env bash
# tests: product
# SIGTERM stops every long-running subcommand within 2 s, with exit 0 and (in the sanitizer
# pass) no sanitizer report, while it is blocked on its peers:
#   ccm             its Node informer's watch open at the test API server, and a
#                   DescribeInstances hanging at the fault proxy (the Node's initialisation);
#   csi-controller  a CreateVolume in flight whose CreateVolume call hangs at the fault proxy;
#   csi-node        a Kubernetes call in flight (the start-up taint's CSINode read, stalled at
#                   the test API server) and gRPC calls in flight; and, at start-up, a
#                   DescribeInstanceTypes hanging at the fault proxy.
# Each line names the time from the signal to the exit.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"
. "$(dirname "$0")/csi_controller_lib.sh"

LIMIT_MS=2000

# held ACTION: waits (30 s at most) until a rule for ACTION at the proxy has seen a call
held() {
	local i
	for ((i = 0; i < 300; i++)); do
		tb_json "$FAULTPROXY_URL/_control/faults" | python3 -c '
import json, sys
sys.exit(0 if any(r.get("seen", 0) > 0 and sys.argv[1] == r.get("action") for r in json.load(sys.stdin)["rules"]) else 1)' "$1" && return 0
		sleep 0.1
	done
	return 1
}
# hang ACTION: every call of ACTION hangs at the proxy for 60 s
hang() { fault "{\"service\":\"ec2\",\"action\":\"$1\",\"effect\":\"hang\",\"seconds\":60}"; }
# kas_ctl METHOD PATH [CURL ARGS...]: the test API server's /_control/ endpoint
kas_ctl() {
	local m=$1 p=$2
	shift 2
	curl -sk -X "$m" -H "Authorization: Bearer $(cat "$KC.token")" "$KAS_URL/_control/$p" "$@"
}
# term NAME PID LOG: SIGTERM; one check that PID exits 0 within LIMIT_MS, one that LOG holds
# no sanitizer report
term() {
	local name=$1 pid=$2 log=$3 t0 ms rc i
	t0=$(date +%s%N)
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 1000; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.01; done
	ms=$((($(date +%s%N) - t0) / 1000000))
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rc=$?
	if [ "$rc" = 0 ] && [ "$ms" -lt "$LIMIT_MS" ]; then
		ok "$name: SIGTERM to exit 0 in $ms ms"
	else
		fail "$name: SIGTERM to exit 0 within $LIMIT_MS ms" "exit $rc after $ms ms; $(tail -n 5 "$log")"
	fi
	if grep -q "Sanitizer\|runtime error" "$log"; then
		fail "$name: no sanitizer report" "$(grep -A12 "Sanitizer\|runtime error" "$log" | head -20)"
	else
		ok "$name: no sanitizer report"
	fi
}

ccm_env_start || { fail "test bed starts"; t_summary; }

# ============ ccm: a watch open, DescribeInstances hanging =================================
read -r iid dns < <(instance st-ccm)
node_create "$dns" "aws:///us-east-1a/$iid"
hang DescribeInstances
ccm_start ccm --controllers=cloud-node,cloud-node-lifecycle --leader-elect=false || fail "ccm starts"
check "ccm: the Node informer synced (its watch is open)" wait_until 20 grep -q "node informer synced" "$T_TMP/ccm.log"
check "ccm: a DescribeInstances hangs at the proxy" held DescribeInstances
term ccm "$(cat "$T_TMP/ccm.pid")" "$T_TMP/ccm.log"
clear_faults

# ============ csi-controller: CreateVolume in flight, its AWS call hanging ====================
csi_ctrl_start || fail "csi-controller starts"
hang CreateVolume
cc create-volume --name st-vol --size 1Gi --zone us-east-1a >/dev/null 2>&1 &
cpid=$!
check "csi-controller: a CreateVolume hangs at the proxy" held CreateVolume
term csi-controller "$CTRL_PID" "$T_TMP/csi-ctrl.log"
wait "$cpid" 2>/dev/null
clear_faults

# ============ csi-node =======================================================================
iid=$(moto_py 'print(run_instance(InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"}))')
imds_start --from-moto "$MOTO_URL" --instance-id "$iid" || fail "imds fake starts"
export AWS_EC2_METADATA_SERVICE_ENDPOINT=$IMDS_URL AWS_EC2_METADATA_DISABLED=false
kc create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"st-node"},
 "spec":{"taints":[{"key":"ebs.csi.aws.com/agent-not-ready","effect":"NoExecute"}]}}
EOF
NSOCK=$T_TMP/node.sock
# node_start NAME ARGS...: csi-node on $NSOCK for the Node st-node
node_start() {
	local name=$1
	shift
	rm -f "$NSOCK"
	CSI_NODE_NAME=st-node bg "$name" "$AWS_K8S" csi-node --endpoint "unix://$NSOCK" \
		--kubeconfig "$KC" --v 4 "$@"
}
nc() { "$AWS_K8S" csi-client --endpoint "unix://$NSOCK" --timeout 10s "$@"; }

# a Kubernetes call in flight (every request about the CSINode stalls) and gRPC calls
kas_ctl POST faults -d '{"action":"stall","seconds":60,"path":"csinodes/st-node"}' >/dev/null
node_start csi-node --describe-instance-type=false
for _ in $(seq 200); do [ -S "$NSOCK" ] && break; sleep 0.05; done
check "csi-node: serves NodeGetInfo" nc node-get-info
stalled() { kas_ctl GET faults | python3 -c 'import json, sys; sys.exit(0 if any(f["hits"] > 0 for f in json.load(sys.stdin)["faults"]) else 1)'; }
check "csi-node: its CSINode read is in flight at the API server" wait_until 10 stalled
loops=()
for _ in 1 2 3 4; do
	(while nc node-get-info >/dev/null 2>&1; do :; done) &
	loops+=($!)
done
sleep 0.3
term csi-node "$(cat "$T_TMP/csi-node.pid")" "$T_TMP/csi-node.log"
for p in "${loops[@]}"; do wait "$p" 2>/dev/null; done
kas_ctl DELETE faults >/dev/null

# at start-up: DescribeInstanceTypes (the attach limit) hangs at the proxy
hang DescribeInstanceTypes
node_start csi-node-startup --describe-instance-type=true # opt-in since csi-node follows upstream (no EC2 call by default)
check "csi-node at start-up: a DescribeInstanceTypes hangs at the proxy" held DescribeInstanceTypes
term "csi-node at start-up" "$(cat "$T_TMP/csi-node-startup.pid")" "$T_TMP/csi-node-startup.log"
clear_faults

t_summary
