#!/usr/bin/env bash
# Figures of aws-k8s capa (Cluster API Provider AWS's manager) against moto behind the counting
# fault proxy and the test API server, the AWS calls counted at the proxy:
#   1. to create a managed cluster over three zones (AWSCluster to status.ready), and to delete
#      it (once its machines are gone: AWSCluster to gone);
#   2. to create three machines (AWSMachines to status.ready), then to reach MACHINES machines
#      (default 50) and to delete them all;
#   3. the steady state of the cluster with MACHINES machines: the manager runs with
#      --sync-period=SYNC (default 15s) so that every object is re-reconciled within a short
#      window; the calls over WINDOW seconds (default 60, after the first resync once all are
#      ready) give the calls per resync (calls x SYNC / WINDOW), which scale to CAPA's default
#      --sync-period=10m as calls per resync x 6 per hour (a resync re-reconciles every
#      AWSCluster and AWSMachine once; nothing else polls once the instances are running);
#   4. the resident memory of the capa process: VmRSS and VmHWM (the peak) with MACHINES
#      machines, after the window.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../lib/capa_objects.sh"

MACHINES=${MACHINES:-50}
SYNC=${SYNC:-15}
WINDOW=${WINDOW:-60}
C=bench
NS=default
export KUBECACHEDIR=$T_TMP/kcache
kc() { kubectl --kubeconfig "$KC" "$@"; }
die() { echo "capa bench: $*" >&2; exit 1; }

moto_start && faultproxy_start "$MOTO_URL" || die "moto and the fault proxy did not start"
export AWS_ENDPOINT_URL=$FAULTPROXY_URL MOTO_PY_ENDPOINT=$MOTO_URL
KPORT=$(free_port)
KC=$T_TMP/kc
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KPORT" --kubeconfig-out "$KC"
wait_http "https://127.0.0.1:$KPORT/healthz" 30 && wait_until 10 test -s "$KC" || die "the test API server did not start"
capa_crds || die "the CRDs"
HPORT=$(free_port)
bg capa "$AWS_K8S" capa --kubeconfig="$KC" --health-addr="127.0.0.1:$HPORT" --sync-period="${SYNC}s"
PID=$(cat "$T_TMP/capa.pid")
wait_http "http://127.0.0.1:$HPORT/healthz" 20 || die "capa did not start: $(tail -3 "$T_TMP/capa.log")"

reset() { tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null; }
# calls WHAT: prints the calls counted since the last reset: total, Describe*, the others
calls() {
	tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys
c = json.load(sys.stdin)["counts"]
d = sum(v for k, v in c.items() if k.split(":")[1].startswith(("Describe", "Get", "List")))
t = sum(c.values())
top = ", ".join("%s %d" % (k, v) for k, v in sorted(c.items(), key=lambda kv: -kv[1])[:6])
print("%s: %d AWS calls (%d reads, %d writes; most: %s)" % (sys.argv[1], t, d, t - d, top))' "$1"
}
total() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | jq '[.counts[]] | add // 0'; }
status() { awk -v k="$1:" '$1 == k {printf "%.1f", $2 / 1024}' "/proc/$PID/status"; }
# ready_count: AWSMachines with status.ready
ready_count() { kc get awsmachines -n "$NS" -o json | jq '[.items[] | select(.status.ready == true)] | length'; }
all_ready() { [ "$(ready_count)" = "$1" ]; }

echo "aws-k8s capa, --sync-period=${SYNC}s, $MACHINES machines, moto behind the counting proxy"
reset
t0=$SECONDS
capa_cluster "$NS" "$C" 3 || die "the Cluster and AWSCluster"
wait_until 180 capa_ready awscluster "$NS" "$C" || die "the AWSCluster is not ready: $(grep -E '^E' "$T_TMP/capa.log" | tail -3)"
calls "create a three-zone cluster ($((SECONDS - t0)) s)"

AMI=$(capa_ami)
ZONES=(us-east-1a us-east-1b us-east-1c)
reset
t0=$SECONDS
for i in 0 1 2; do capa_machine "$NS" "$C" "$C-m-$i" "${ZONES[i]}" "$AMI" || die "machine $i"; done
wait_until 120 all_ready 3 || die "three machines are not ready ($(ready_count))"
calls "create three machines ($((SECONDS - t0)) s)"

reset
t0=$SECONDS
for ((i = 3; i < MACHINES; i++)); do capa_machine "$NS" "$C" "$C-m-$i" "${ZONES[i % 3]}" "$AMI" || die "machine $i"; done
wait_until 600 all_ready "$MACHINES" || die "$MACHINES machines are not ready ($(ready_count))"
calls "create $((MACHINES - 3)) more machines ($((SECONDS - t0)) s)"

# the steady state: one resync period to settle, then the window
sleep "$SYNC"
reset
sleep "$WINDOW"
n=$(total)
per_sync=$(awk -v n="$n" -v s="$SYNC" -v w="$WINDOW" 'BEGIN {printf "%.0f", n * s / w}')
calls "steady state, $MACHINES machines, ${WINDOW} s at --sync-period=${SYNC}s"
echo "steady state: $per_sync calls per resync; at the default --sync-period=10m: $((per_sync * 6)) calls per hour" \
	"($(awk -v n="$n" -v w="$WINDOW" 'BEGIN {printf "%.0f", n * 3600 / w}') per hour at ${SYNC}s)"
echo "memory of the capa process with $MACHINES machines: VmRSS $(status VmRSS) MiB, VmHWM $(status VmHWM) MiB (peak)"

reset
t0=$SECONDS
kc delete awsmachines -n "$NS" --all --wait=false >/dev/null
none() { [ "$(kc get awsmachines -n "$NS" -o name | wc -l)" = 0 ]; }
wait_until 600 none || die "the machines are not deleted"
calls "delete $MACHINES machines ($((SECONDS - t0)) s)"
reset
t0=$SECONDS
kc delete awscluster "$C" -n "$NS" --wait=false >/dev/null
wait_until 300 bash -c "! kubectl --kubeconfig '$KC' get awscluster '$C' -n '$NS' >/dev/null 2>&1" || die "the cluster is not deleted"
calls "delete the three-zone cluster ($((SECONDS - t0)) s)"
left=$(capa_left "$C")
[ -z "$left" ] && echo "nothing of the cluster is left in moto" || echo "left in moto: $left"
