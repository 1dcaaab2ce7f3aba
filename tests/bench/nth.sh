#!/usr/bin/env bash
# Figures of aws-k8s nth (the node-termination-handler), against the metadata fake, moto (behind
# the counting fault proxy) and the test API server:
#   1. IMDS mode at upstream's 2 s poll period: the time from a spot interruption notice
#      appearing in the metadata fake to the Node being cordoned (spec.unschedulable, seen by a
#      20 ms poll of the API server), over RUNS notices (default 7) posted at spread-out
#      moments of the poll cycle: median and max. Upstream polls on the same 2 s ticker and hands
#      due events to its workers from a 1 s loop (expected: up to about 3 s).
#   2. Its resident memory: idle after start-up (VmRSS, RssAnon), then a spot notice draining
#      PODS pods (default 200) of POD_KB KiB each (default 6, a typical pod object with its
#      managed fields and status) off the Node: the time to the last pod gone, the peak (VmHWM)
#      and the CPU time used.
#   3. Queue mode, idle: the SQS calls counted at the fault proxy over WINDOW seconds (default
#      120) with an empty queue, extrapolated to one hour; the memory idle in this mode.
# Upstream's figures for comparison: about 24 MiB idle and 64 MiB needed while draining
# (mitodl/ol-infrastructure#5088), ReceiveMessage long polls of 20 s (about 180 calls per hour
# and worker when idle).
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../integration/ccm_lib.sh"

RUNS=${RUNS:-7}
PODS=${PODS:-200}
POD_KB=${POD_KB:-6}
WINDOW=${WINDOW:-120}

ccm_env_start || { echo "environment did not start"; exit 1; }
imds_start || { echo "the metadata fake did not start"; exit 1; }
NODE=bench-node
kc create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"$NODE"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}
EOF

# status KEY PID: a /proc/PID/status value in kB
status() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$2/status"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
# cpu_ticks PID: utime + stime, in clock ticks
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)

# ---- 1. IMDS mode: notice -> cordon ----------------------------------------------------------
KUBECONFIG=$KC NODE_NAME=$NODE INSTANCE_METADATA_URL=$IMDS_URL AWS_EC2_METADATA_DISABLED=false \
	bg nth "$AWS_K8S" nth
PID=$(cat "$T_TMP/nth.pid")
wait_until 20 grep -q "instance metadata" "$T_TMP/nth.log" || { echo "nth did not start: $(tail -3 "$T_TMP/nth.log")"; exit 1; }
sleep 5
echo "IMDS mode, idle 5 s after start: VmRSS $(mib "$(status VmRSS "$PID")") MiB (RssAnon $(mib "$(status RssAnon "$PID")") MiB)"

# cordon_time: posts a spot notice (action time 60 s ahead: due at once with the default
# NODE_TERMINATION_GRACE_PERIOD of 120 s) and prints the ms until the Node is unschedulable
cat >"$T_TMP/cordon.py" <<'PY'
import json, ssl, sys, time, urllib.request
kc, kas, imds, node = sys.argv[1:5]
tok = open(kc + ".token").read().strip()
ctx = ssl.create_default_context(cafile=kc + ".ca.crt")
def unschedulable():
    r = urllib.request.Request(kas + "/api/v1/nodes/" + node, headers={"Authorization": "Bearer " + tok})
    return json.load(urllib.request.urlopen(r, context=ctx)).get("spec", {}).get("unschedulable") is True
body = json.dumps({"action": "terminate", "in": 60}).encode()
t0 = time.monotonic()
urllib.request.urlopen(urllib.request.Request(imds + "/_control/spot", data=body, method="POST",
                                              headers={"Content-Type": "application/json"}))
while not unschedulable():
    if time.monotonic() - t0 > 30:
        print("timeout"); sys.exit(1)
    time.sleep(0.02)
print("%.0f" % ((time.monotonic() - t0) * 1000))
PY
times=()
for ((i = 0; i < RUNS; i++)); do
	tb_delete "$IMDS_URL/_control/spot" >/dev/null
	kc uncordon "$NODE" >/dev/null
	# spread the notices over the 2 s poll cycle
	sleep "$(awk -v i="$i" -v n="$RUNS" 'BEGIN {printf "%.2f", 2 + 2 * i / n}')"
	ms=$(python3 "$T_TMP/cordon.py" "$KC" "$KAS_URL" "$IMDS_URL" "$NODE") || { echo "run $i: no cordon within 30 s"; exit 1; }
	times+=("$ms")
done
python3 - "${times[@]}" <<'PY'
import statistics, sys
t = sorted(int(x) for x in sys.argv[1:])
print("spot notice -> Node cordoned (IMDS mode, 2 s poll), %d runs: median %d ms, max %d ms, min %d ms (%s)"
      % (len(t), statistics.median(t), max(t), min(t), " ".join(map(str, t))))
PY

# ---- 2. draining PODS pods -------------------------------------------------------------------
tb_delete "$IMDS_URL/_control/spot" >/dev/null
kc uncordon "$NODE" >/dev/null
python3 - "$KC" "$KAS_URL" "$NODE" "$PODS" "$POD_KB" <<'PY' || { echo "pod creation failed"; exit 1; }
import json, ssl, sys, urllib.request
kc, kas, node, n, kb = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
tok = open(kc + ".token").read().strip()
ctx = ssl.create_default_context(cafile=kc + ".ca.crt")
for i in range(n):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p%03d" % i, "namespace": "default", "labels": {"app": "bench"},
                        "annotations": {"bench/pad": "x" * max(0, kb * 1024 - 400)},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                             "uid": "u-%d" % i, "controller": True}]},
           "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
           "status": {"phase": "Running"}}
    r = urllib.request.Request(kas + "/api/v1/namespaces/default/pods", data=json.dumps(pod).encode(),
                               method="POST", headers={"Authorization": "Bearer " + tok,
                                                       "Content-Type": "application/json"})
    urllib.request.urlopen(r, context=ctx)
PY
npods() { kc get pods -n default --field-selector "spec.nodeName=$NODE" -o name | wc -l; }
echo "$(npods) pods of about $POD_KB KiB on $NODE"
sleep 3
rss0=$(status VmRSS "$PID")
c0=$(cpu_ticks "$PID")
t0=$(date +%s%N)
tb_post "$IMDS_URL/_control/spot" '{"action":"terminate","in":60}' >/dev/null
gone() { [ "$(npods)" = 0 ]; }
wait_until 120 gone || { echo "the drain did not finish: $(npods) left; $(tail -3 "$T_TMP/nth.log")"; exit 1; }
t1=$(date +%s%N)
c1=$(cpu_ticks "$PID")
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", (b - a) / 1e9}')
cpu_m=$(awk -v c="$((c1 - c0))" -v hz="$HZ" -v s="$secs" 'BEGIN {printf "%.0f", 1000 * c / hz / s}')
echo "drain of $PODS pods (notice -> last pod gone): ${secs} s; CPU $(awk -v c="$((c1 - c0))" -v hz="$HZ" 'BEGIN {printf "%.2f", c / hz}') s (${cpu_m}m average)"
echo "memory: before the drain VmRSS $(mib "$rss0") MiB; peak VmHWM $(mib "$(status VmHWM "$PID")") MiB; after VmRSS $(mib "$(status VmRSS "$PID")") MiB (RssAnon $(mib "$(status RssAnon "$PID")") MiB)"
stop_within "$PID" 10 nth >/dev/null || echo "nth (IMDS) did not stop within 10 s"

# ---- 3. queue mode, idle ---------------------------------------------------------------------
QUEUE_URL=$(moto_py "print(sqs.create_queue(QueueName='nth-bench')['QueueUrl'])")
KUBECONFIG=$KC ENABLE_SQS_TERMINATION_DRAINING=true QUEUE_URL=$QUEUE_URL AWS_REGION=us-east-1 \
	bg nthq "$AWS_K8S" nth
QPID=$(cat "$T_TMP/nthq.pid")
wait_until 20 grep -q "queue mode: polling" "$T_TMP/nthq.log" || { echo "queue mode did not start: $(tail -3 "$T_TMP/nthq.log")"; exit 1; }
sleep 5
sqs_calls() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys
c = json.load(sys.stdin)["counts"]
print(sum(v for k, v in c.items() if k.startswith("sqs:")), " ".join("%s=%d" % kv for kv in sorted(c.items()) if kv[0].startswith("sqs:")))'; }
read -r n0 _ < <(sqs_calls)
sleep "$WINDOW"
read -r n1 detail < <(sqs_calls)
echo "queue mode, idle: $((n1 - n0)) SQS calls in ${WINDOW} s -> $(((n1 - n0) * 3600 / WINDOW)) per hour (totals since start: $detail)"
echo "queue mode, idle: VmRSS $(mib "$(status VmRSS "$QPID")") MiB (RssAnon $(mib "$(status RssAnon "$QPID")") MiB), VmHWM $(mib "$(status VmHWM "$QPID")") MiB"
stop_within "$QPID" 30 nthq >/dev/null || echo "nth (queue) did not stop within 30 s"
