#!/usr/bin/env bash
# tests: product
# Three simulated masters converge one at a time: three aws-k8s cpm runs (three roots, NODE_NAME
# m0, m1, m2, their own MY_IP and /readyz port, the same Secrets as files), the approver `aws-k8s
# cpm approve`, and the simulated kubelet tests/lib/kubelet_sim.py keeping each root's mirror
# pods and acting as the readiness prober of each master's cpm Pod (its Ready follows that cpm's
# /readyz). All three start at once and ask for approval; checked: every master converges (its
# four components, then /readyz), a watch of the Nodes never sees two approved at once, the
# sim's record never shows two masters' control planes being replaced at once (each master's
# span from its first manifest to its etcd Ready, and its cpm Pod Ready, before the next
# master's first manifest), every approval is removed at the end, and SIGTERM ends each run
# with exit 0.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/cpm_lib.sh"

for t in kubectl python3 openssl; do command -v $t >/dev/null || { skip "three masters" "$t is needed"; t_summary; }; done
D=$T_ROOT/tests/data/cpm
CD=$T_TMP/config
PD=$T_TMP/pki
REC=$T_TMP/sim.rec
: >"$REC"
export KUBECACHEDIR=$T_TMP/kcache
NODES=(m0 m1 m2)

PORT=$(free_port)
HPORT=$(free_port)
KC=$T_TMP/kc
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$PORT" --http-port "$HPORT" --kubeconfig-out "$KC"
peer check "the test API server answers" wait_http "http://127.0.0.1:$HPORT/healthz" 30
kctl() { kubectl --kubeconfig "$KC" "$@"; }
for n in "${NODES[@]}"; do
	peer check "master Node $n (Ready) is created" kctl create -f - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$n\",\"labels\":{\"node-role.kubernetes.io/control-plane\":\"\"}},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"
done
# every change of the master Nodes, for the whole test
kctl get nodes -l node-role.kubernetes.io/control-plane -w -o json >"$T_TMP/watch.json" 2>"$T_TMP/watch.err" &
WATCH=$!
t_cleanup_add "kill $WATCH"

# the Secrets as files, shared by the three masters
mkdir -p "$CD" "$PD"
peer check "the d8-pki CAs are made with openssl" cpm_mkcas "$T_TMP/cas"
cp "$T_TMP/cas/ca.crt" "$T_TMP/cas/ca.key" "$T_TMP/cas/front-proxy-ca.crt" "$T_TMP/cas/front-proxy-ca.key" "$PD/"
cp "$T_TMP/cas/etcd/ca.crt" "$PD/etcd-ca.crt"
cp "$T_TMP/cas/etcd/ca.key" "$PD/etcd-ca.key"
openssl genrsa -out "$PD/sa.key" 2048 2>/dev/null && openssl rsa -in "$PD/sa.key" -pubout -out "$PD/sa.pub" 2>/dev/null
cp "$D/kubeadm-config-v1beta4.yaml" "$CD/kubeadm-config.yaml"

SIM_ARGS=()
declare -A HZ
for i in 0 1 2; do
	n=${NODES[$i]}
	R=$T_TMP/root-$n
	mkdir -p "$R/etc/kubernetes"
	printf 'apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://127.0.0.1:6445\n  name: kubernetes\n' >"$R/etc/kubernetes/kubelet.conf"
	HZ[$n]=$(free_port)
	SIM_ARGS+=(--node "$n=$R" --cpm-pod "$n=d8-control-plane-manager-$n=http://127.0.0.1:${HZ[$n]}/readyz")
done
bg sim python3 "$T_ROOT/tests/lib/kubelet_sim.py" --server "http://127.0.0.1:$HPORT" --ready-delay 0.3 --record "$REC" "${SIM_ARGS[@]}"
APORT=$(free_port)
bg approver "$AWS_K8S" cpm approve --kubeconfig="$KC" --leader-elect-lease-duration=2s \
	--leader-elect-renew-deadline=1500ms --leader-elect-retry-period=300ms --listen-address="127.0.0.1:$APORT" --v=2
peer check "the approver answers /healthz" wait_http "http://127.0.0.1:$APORT/healthz" 30
# wait_for SECONDS CMD...: polls CMD every 0.2 s (bounded)
wait_for() {
	local secs=$1 i
	shift
	for ((i = 0; i < secs * 5; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
	return 1
}
cpm_pods_exist() { [ "$(kctl -n kube-system get pods -l app=d8-control-plane-manager -o name | wc -l)" = 3 ]; }
peer check "the simulated kubelet made the three cpm Pods" wait_for 30 cpm_pods_exist

# ---- the three runs, started together --------------------------------------------------------------
declare -A PID
for i in 0 1 2; do
	n=${NODES[$i]}
	NODE_NAME=$n MY_IP=10.0.0.1$i "$AWS_K8S" cpm --config-dir "$CD" --pki-dir "$PD" --root "$T_TMP/root-$n" \
		--kubeconfig "$KC" --healthz-bind-address "127.0.0.1:${HZ[$n]}" --approval-interval 200ms \
		--approval-retries 1500 --pod-ready-interval 200ms --pod-ready-retries 300 --etcd-membership=false >"$T_TMP/cpm-$n.log" 2>&1 &
	PID[$n]=$!
	t_cleanup_add "kill ${PID[$n]} 2>/dev/null"
done
all_ready() { for n in "${NODES[@]}"; do curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:${HZ[$n]}/readyz" || return 1; done; }
if wait_for 300 all_ready; then ok "the three masters converged (each /readyz 200)"; else
	fail "the three masters converged" "$(for n in "${NODES[@]}"; do echo "$n: $(tail -2 "$T_TMP/cpm-$n.log" | tr '\n' ' ')"; done)"
fi
for n in "${NODES[@]}"; do
	got=$(awk -v n="$n" '$2 == n && $4 == "ready" {print $3}' "$REC" | grep -v '^d8-' | tr '\n' ' ')
	[ "$got" = "kube-apiserver-$n kube-controller-manager-$n kube-scheduler-$n etcd-$n " ] &&
		ok "$n: its four components converged in Deckhouse's order" || fail "$n: four components in order" "$got"
done
no_approved() { [ -z "$(kctl get nodes -o jsonpath='{range .items[*]}{.metadata.annotations.control-plane-manager\.deckhouse\.io/approved}{"|"}{end}' | tr -d '|')" ] &&
	! kctl get nodes -o json | grep -q 'control-plane-manager.deckhouse.io/approved'; }
wait_for 60 no_approved && ok "every approval is removed once the masters' cpm Pods are Ready" || fail "every approval is removed" "$(kctl get nodes -o json | grep -o '"control-plane-manager[^"]*approved"' | sort | uniq -c)"
sleep 1

# ---- never two at once ---------------------------------------------------------------------------------
# the Nodes' watch: the most masters approved at the same time, and which were ever approved
res=$(python3 - "$T_TMP/watch.json" <<'EOF'
import json, sys
text = open(sys.argv[1]).read()
dec, i, state, most, ever = json.JSONDecoder(), 0, {}, 0, set()
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    obj, i = dec.raw_decode(text, i)
    items = obj.get("items", [obj]) if obj.get("kind") == "List" else [obj]
    for o in items:
        ann = o["metadata"].get("annotations") or {}
        state[o["metadata"]["name"]] = "control-plane-manager.deckhouse.io/approved" in ann
        if state[o["metadata"]["name"]]:
            ever.add(o["metadata"]["name"])
    most = max(most, sum(state.values()))
print(most, ",".join(sorted(ever)))
EOF
)
[ "${res%% *}" = 1 ] && ok "the Nodes' watch never shows two masters approved at once" || fail "never two approved at once" "at most: $res"
[ "${res#* }" = "m0,m1,m2" ] && ok "each master was approved in turn" || fail "each master was approved in turn" "$res"
# the sim's record: each master's span (its first manifest .. its cpm Pod Ready) must not overlap another's
spans=$(python3 - "$REC" <<'EOF'
import sys
first, done = {}, {}
for line in open(sys.argv[1]):
    t, node, pod, ev, _ = line.split()
    t = float(t)
    if ev == "created" and not pod.startswith("d8-"):
        first.setdefault(node, t)
    if ev == "ready" and pod.startswith("d8-control-plane-manager-"):
        done.setdefault(node, t)
spans = sorted((first[n], done.get(n, float("inf")), n) for n in first)
bad = [f"{a[2]} and {b[2]}" for a, b in zip(spans, spans[1:]) if b[0] < a[1]]
print(len(spans), "overlap: " + ", ".join(bad) if bad else "none", " ".join(s[2] for s in spans))
EOF
)
case $spans in "3 none "*) ok "no two masters converged at once (first manifest to cpm Pod Ready, in turn: ${spans#3 none })" ;;
*) fail "no two masters converged at once" "$spans" ;; esac

for n in "${NODES[@]}"; do
	if stop_within "${PID[$n]}" 20 "cpm on $n"; then
		[ "$STOP_RC" = 0 ] && ok "cpm on $n: SIGTERM ends it with exit 0" || fail "cpm on $n: SIGTERM exit 0" "exit $STOP_RC"
	fi
done

t_summary
