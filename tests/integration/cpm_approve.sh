#!/usr/bin/env bash
# tests: product
# aws-k8s cpm approve, the one-master-at-a-time controller, against the test API server which
# enforces the RBAC of deploy/cpm (rendered with kubectl kustomize; the approver runs with the
# token of its ServiceAccount): three master Nodes and their cpm Pods, made with kubectl, ask for
# approval; exactly one (the first by name) is approved, with its Event, and a worker Node that
# asks is never looked at; the approved node's Pod turns Ready -> approved removed (Event) -> the
# next waiting node approved, a NotReady node and a cordoned node skipped until they are Ready
# and schedulable; a restart while a node is approved adopts it (no second approval, no early
# removal); Deckhouse's older spelling control-plane-manger.deckhouse.io/ is answered in kind;
# a Node that changes while the approver's patch is in flight (the server holds it) is not approved
# (the patch carries the resourceVersion read: 409, decided again); two approvers at once (leader
# election) never leave two masters approved, as a watch of every
# Node change proves, also when the leader is killed (SIGKILL) and the standby takes over; no
# request of the approver was forbidden; SIGTERM exits 0; --help says why a role of its own.
. "$(dirname "$0")/../lib/testlib.sh"

for t in jq kubectl python3; do command -v $t >/dev/null || { skip "cpm approve" "$t is needed"; t_summary; }; done
python3 -c 'import yaml' 2>/dev/null || { skip "cpm approve" "python3 has no PyYAML"; t_summary; }
export KUBECACHEDIR=$T_TMP/kcache
P=control-plane-manager.deckhouse.io
O=control-plane-manger.deckhouse.io
SA=system:serviceaccount:kube-system:d8-control-plane-manager-approver
expect() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$3', want '$2'"; fi; }

# ---- --help and usage errors ------------------------------------------------------------------
out=$("$AWS_K8S" cpm approve --help 2>&1)
rc=$?
[ $rc = 0 ] && grep -q "a role of its own" <<<"$out" && grep -q "$P/waiting-for-approval" <<<"$out" &&
	grep -q -- "--pod-selector" <<<"$out" && grep -q "$O/" <<<"$out" &&
	ok "cpm approve --help: exit 0, the annotations, the older spelling, --pod-selector, why a role of its own" ||
	fail "cpm approve --help" "exit $rc: $(head -5 <<<"$out")"
out=$("$AWS_K8S" cpm --help 2>&1)
grep -q "^  approve" <<<"$out" && ok "cpm --help lists approve" || fail "cpm --help lists approve" "$(head -30 <<<"$out")"
"$AWS_K8S" cpm approve --no-such-flag >/dev/null 2>&1
expect "cpm approve --no-such-flag: exit 2" 2 $?
"$AWS_K8S" cpm approve extra >"$T_TMP/usage.out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "unexpected argument 'extra'" "$T_TMP/usage.out" && ok "cpm approve extra: exit 2, named" ||
	fail "cpm approve extra: exit 2, named" "exit $rc: $(cat "$T_TMP/usage.out")"
"$AWS_K8S" cpm approve --resync-period=0s >/dev/null 2>&1
expect "cpm approve --resync-period=0s: exit 2" 2 $?
"$AWS_K8S" cpm approve --leader-elect-renew-deadline=20s >/dev/null 2>&1
expect "cpm approve with a renew deadline over the lease duration: exit 2" 2 $?

# ---- the test API server, enforcing deploy/cpm's RBAC for the approver ----------------------
if ! kubectl kustomize "$T_ROOT/deploy/cpm/base" >"$T_TMP/cpm.yaml" 2>"$T_TMP/kustomize.err"; then
	fail "kubectl kustomize deploy/cpm/base" "$(cat "$T_TMP/kustomize.err")"
	t_summary
fi
# the rules the rendered bindings give the approver's ServiceAccount, in the server's format
python3 - "$T_TMP/cpm.yaml" "$SA" >"$T_TMP/auth.json" <<'PY'
import json, sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
sa = sys.argv[2].split(":")
rules = [{"name": "admin", "groups": ["system:masters"], "verbs": ["*"], "apiGroups": ["*"],
          "resources": ["*"]}]
for b in objs:
    if b["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
        continue
    if not any(s["kind"] == "ServiceAccount" and s["namespace"] == sa[2] and s["name"] == sa[3]
               for s in b["subjects"]):
        continue
    role = next(o for o in objs if o["kind"] == b["roleRef"]["kind"] and
                o["metadata"]["name"] == b["roleRef"]["name"])
    for r in role["rules"]:
        rule = {"name": b["metadata"]["name"], "users": [sys.argv[2]], "verbs": r["verbs"],
                "apiGroups": r["apiGroups"], "resources": r["resources"],
                "resourceNames": r.get("resourceNames", [])}
        if b["kind"] == "RoleBinding":
            rule["namespaces"] = [b["metadata"]["namespace"]]
        rules.append(rule)
print(json.dumps({"authorize": True, "rules": rules,
                  "tokens": [{"token": "approver-token", "user": sys.argv[2],
                              "groups": ["system:serviceaccounts"]}]}))
PY
nrules=$(jq '.rules | length' "$T_TMP/auth.json" 2>/dev/null)
[ "${nrules:-0}" -ge 4 ] && ok "deploy/cpm renders; its bindings give the approver $((nrules - 1)) rules" ||
	fail "deploy/cpm's rules for the approver" "$(cat "$T_TMP/auth.json")"
PORT=$(free_port)
KC=$T_TMP/kc
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$PORT" --kubeconfig-out "$KC" --config "$T_TMP/auth.json"
for _ in $(seq 150); do [ -s "$KC" ] && break; sleep 0.1; done
if ! wait_http "https://127.0.0.1:$PORT/healthz" 30 || [ ! -s "$KC" ]; then
	peer fail "the test API server starts" "$(tail -5 "$T_TMP/kas.log")"
	t_summary
fi
KAS=https://127.0.0.1:$PORT
kc() { kubectl --kubeconfig "$KC" "$@"; }
# the approver's kubeconfig: the same server, its ServiceAccount's token
AKC=$T_TMP/approver.kc
jq '.users = [.users[] | .user = {"token": "approver-token"}]' "$KC" >"$AKC"
out=$(kubectl --kubeconfig "$AKC" delete node no-such-node 2>&1)
grep -q Forbidden <<<"$out" && peer ok "the test API server refuses the approver's ServiceAccount what deploy/cpm does not grant (delete nodes)" ||
	peer fail "the test API server enforces the rules" "$out"
peer check "kubectl with that token may list Nodes" kubectl --kubeconfig "$AKC" get nodes

# ---- Nodes and Pods ---------------------------------------------------------------------------
mknode() { # NAME ROLE(master|worker)
	jq -n --arg n "$1" --arg role "$2" '{apiVersion: "v1", kind: "Node", metadata: {name: $n,
		labels: (if $role == "master" then {"node-role.kubernetes.io/control-plane": ""} else {} end)},
		status: {conditions: [{type: "Ready", status: "True"}]}}' | kc create -f - >/dev/null ||
		peer fail "create Node $1"
}
mkpod() { # NODE
	jq -n --arg n "$1" '{apiVersion: "v1", kind: "Pod", metadata: {name: ("d8-control-plane-manager-" + $n),
		namespace: "kube-system", labels: {app: "d8-control-plane-manager"}},
		spec: {nodeName: $n, containers: [{name: "control-plane-manager", image: "aws-k8s"}]}}' |
		kc create -f - >/dev/null || peer fail "create Pod on $1"
	pod_ready "$1" False
}
pod_ready() { # NODE True|False
	kc patch pod -n kube-system "d8-control-plane-manager-$1" --subresource=status --type=merge \
		-p "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"$2\"}]}}" >/dev/null ||
		peer fail "set the Pod on $1 Ready=$2"
}
node_ready() { # NODE True|False
	kc patch node "$1" --subresource=status --type=merge \
		-p "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"$2\"}]}}" >/dev/null ||
		peer fail "set Node $1 Ready=$2"
}
ask() { kc annotate node "$1" "${2:-$P}/waiting-for-approval=" >/dev/null || peer fail "annotate $1"; }
# the masters approved (either spelling), by name
approved() {
	kc get nodes -o json | jq -r --arg p "$P/approved" --arg o "$O/approved" \
		'[.items[] | select((.metadata.annotations // {}) | has($p) or has($o)) | .metadata.name] | sort | join(" ")'
}
approved_is() { [ "$(approved)" = "$1" ]; }
has_ann() { kc get node "$1" -o json | jq -e --arg k "$2" '(.metadata.annotations // {}) | has($k)' >/dev/null; }
# stays NAME SECONDS WANT: the approved set stays WANT for SECONDS
stays() {
	local end=$((SECONDS + $2)) got
	while [ "$SECONDS" -lt "$end" ]; do
		got=$(approved)
		[ "$got" = "$3" ] || { echo "$got"; return 1; }
		sleep 0.3
	done
}
events_are() { [ "$(events_for "$1" "$2")" = "$3" ]; }
events_for() { # NODE REASON: how many times an Event of that reason named the Node (a repeat
	# is the same Event with its count raised, as client-go's correlator does)
	kc get events -n default -o json | jq --arg n "$1" --arg r "$2" \
		'[.items[] | select(.involvedObject.name == $n and .involvedObject.kind == "Node" and .reason == $r) | .count // 1] | add // 0'
}

for n in m1 m2 m3; do mknode $n master; mkpod $n; done
mknode w1 worker
peer check "a Node is created with its Ready condition" \
	bash -c "[ \"\$(kubectl --kubeconfig '$KC' get node m1 -o jsonpath='{.status.conditions[0].status}')\" = True ]"
peer check "a Pod's status is patched NotReady" \
	bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pod -n kube-system d8-control-plane-manager-m1 -o jsonpath='{.status.conditions[0].status}')\" = False ]"

# a watch of every master Node change, for the whole test: never two approved at once
kc get nodes -l node-role.kubernetes.io/control-plane -w -o json >"$T_TMP/watch.json" 2>"$T_TMP/watch.err" &
WATCH=$!
t_cleanup_add "kill $WATCH"

LE=(--leader-elect-lease-duration=2s --leader-elect-renew-deadline=1500ms --leader-elect-retry-period=300ms)
start_approver() { # NAME [FLAGS]
	local name=$1 port
	shift
	port=$(free_port)
	bg "$name" "$AWS_K8S" cpm approve --kubeconfig="$AKC" "${LE[@]}" --listen-address="127.0.0.1:$port" \
		--v=2 "$@"
	eval "PORT_$name=$port"
	wait_http "http://127.0.0.1:$port/healthz" 20
}
pid_of() { cat "$T_TMP/$1.pid"; }

# ---- one at a time ------------------------------------------------------------------------------
# every master asks (in reverse order) before the approver starts, and the worker too
ask w1
for n in m3 m2 m1; do ask $n; done
start_approver a1 || fail "the approver starts" "$(tail -5 "$T_TMP/a1.log")"
wait_until 20 grep -q "started leading" "$T_TMP/a1.log" && ok "the approver takes its Lease" ||
	fail "the approver takes its Lease" "$(tail -5 "$T_TMP/a1.log")"
holder=$(kc get lease -n kube-system d8-control-plane-manager-approver -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)
[ -n "$holder" ] && ok "the Lease kube-system/d8-control-plane-manager-approver is held ($holder)" ||
	fail "the Lease kube-system/d8-control-plane-manager-approver is held"
wait_until 20 curl -sf "http://127.0.0.1:$PORT_a1/readyz" && ok "/readyz once the informers synced" ||
	fail "/readyz" "$(curl -s "http://127.0.0.1:$PORT_a1/readyz?verbose")"
if wait_until 15 approved_is m1; then ok "exactly one master is approved: m1, the first by name"
else fail "exactly one master is approved: m1" "'$(approved)'"; fi
! has_ann m1 "$P/waiting-for-approval" && ok "m1: waiting-for-approval removed in the same patch" ||
	fail "m1: waiting-for-approval removed"
has_ann m2 "$P/waiting-for-approval" && has_ann m3 "$P/waiting-for-approval" &&
	ok "m2 and m3 still wait" || fail "m2 and m3 still wait"
has_ann w1 "$P/waiting-for-approval" && ! has_ann w1 "$P/approved" &&
	ok "a worker Node that asks is not a master: left alone" || fail "the worker Node is left alone"
expect "m1 got one Normal Event ControlPlaneManagerApproved" 1 "$(events_for m1 ControlPlaneManagerApproved)"
r=$(stays x 2 m1)
expect "m1 stays the only one approved while its cpm Pod is not Ready" "" "$r"

# m2 NotReady: skipped; the next is m3
node_ready m2 False
pod_ready m1 True
if wait_until 15 approved_is m3; then ok "m1's Pod Ready: approval removed, the next Ready node (m3) approved; NotReady m2 skipped"
else fail "m1 done, m3 approved, m2 skipped" "'$(approved)'"; fi
! has_ann m1 "$P/approved" && ! has_ann m1 "$P/waiting-for-approval" &&
	ok "m1: neither annotation left" || fail "m1: neither annotation left"
expect "m1 got one Event ControlPlaneManagerDone" 1 "$(events_for m1 ControlPlaneManagerDone)"
grep -q 'waiting for approval, skipped while it is not Ready and schedulable.*node="m2".*ready=false' "$T_TMP/a1.log" &&
	ok "the skip of m2 is logged (ready=false)" || fail "the skip of m2 is logged" "$(grep m2 "$T_TMP/a1.log" | tail -3)"

# m3 done; m2 Ready but cordoned: still skipped; uncordoned: approved
pod_ready m3 True
wait_until 15 approved_is "" && ok "m3's Pod Ready: approval removed" || fail "m3's approval removed" "'$(approved)'"
kc cordon m2 >/dev/null || peer fail "cordon m2"
node_ready m2 True
r=$(stays x 2 "")
expect "m2 Ready but cordoned (unschedulable): not approved" "" "$r"
kc uncordon m2 >/dev/null || peer fail "uncordon m2"
wait_until 15 approved_is m2 && ok "m2 uncordoned: approved" || fail "m2 uncordoned: approved" "'$(approved)'"

# ---- a restart in the middle: m2 approved, its Pod not Ready ------------------------------------
if stop_within "$(pid_of a1)" 10 a1; then expect "the approver exits 0 on SIGTERM" 0 "$STOP_RC"; fi
holder=$(kc get lease -n kube-system d8-control-plane-manager-approver -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)
expect "a graceful stop releases the Lease" "" "$holder"
mknode m0 master
mkpod m0
ask m0
start_approver a2 || fail "the approver starts again" "$(tail -5 "$T_TMP/a2.log")"
wait_until 20 grep -q "started leading" "$T_TMP/a2.log" || fail "the new approver leads" "$(tail -5 "$T_TMP/a2.log")"
r=$(stays x 3 m2)
expect "after a restart: m2 stays approved (Pod not Ready), m0 (first by name, waiting) is not approved" "" "$r"
expect "m2 was approved once (one Event)" 1 "$(events_for m2 ControlPlaneManagerApproved)"

# a second approver at once: a standby
start_approver a3 || fail "a second approver starts" "$(tail -5 "$T_TMP/a3.log")"
sleep 1
grep -q "started leading" "$T_TMP/a3.log" && fail "the second approver stays standby" "it leads" ||
	ok "the second approver stays standby while the first holds the Lease"
pod_ready m2 True
wait_until 15 approved_is m0 && ok "m2's Pod Ready: done; m0 approved" || fail "m2 done, m0 approved" "'$(approved)'"

# ---- Deckhouse's older spelling -----------------------------------------------------------------
mknode m4 master
mkpod m4
ask m4 "$O"
r=$(stays x 2 m0)
expect "m4 asks with the older spelling while m0 is approved: waits" "" "$r"
pod_ready m0 True
if wait_until 15 approved_is m4; then ok "m0 done; m4 approved"; else fail "m0 done; m4 approved" "'$(approved)'"; fi
has_ann m4 "$O/approved" && ! has_ann m4 "$P/approved" && ! has_ann m4 "$O/waiting-for-approval" &&
	ok "m4 asked with $O/: approved with $O/approved, its waiting annotation removed" ||
	fail "m4 answered in the older spelling" "$(kc get node m4 -o jsonpath='{.metadata.annotations}')"
# an approval in the older spelling blocks the others too
mknode m5 master
mkpod m5
ask m5
r=$(stays x 2 m4)
expect "m4 approved in the older spelling: m5 waits" "" "$r"
pod_ready m4 True
wait_until 15 approved_is m5 && ok "m4's Pod Ready: its $O/approved removed; m5 approved" ||
	fail "m4 done; m5 approved" "'$(approved)'"

# ---- the leader killed (no release): the standby takes over and adopts ---------------------------
# (its Events are sent in the background: m5's first, a SIGKILL drops what is queued)
wait_until 10 events_are m5 ControlPlaneManagerApproved 1 ||
	fail "m5 got its Event ControlPlaneManagerApproved" "$(events_for m5 ControlPlaneManagerApproved)"
kill -KILL "$(pid_of a2)" 2>/dev/null
wait "$(pid_of a2)" 2>/dev/null
# m1 and m3 ask again, as a cpm Pod restarted for a new configuration does: NotReady, then asks
for n in m1 m3; do pod_ready $n False; ask $n; done
wait_until 20 grep -q "started leading" "$T_TMP/a3.log" && ok "the leader SIGKILLed: the standby leads after the lease duration" ||
	fail "the standby leads" "$(tail -5 "$T_TMP/a3.log")"
r=$(stays x 2 m5)
expect "the new leader adopts m5's approval (no other approved)" "" "$r"
pod_ready m5 True
wait_until 15 approved_is m1 && ok "m5 done; m1 approved by the new leader" || fail "m5 done; m1 approved" "'$(approved)'"
# a fourth approver joins as standby; a quick series of completions
start_approver a4 || fail "another approver starts" "$(tail -5 "$T_TMP/a4.log")"
pod_ready m1 True
wait_until 15 approved_is m3 && ok "m1 done again; m3 approved" || fail "m1 done; m3 approved" "'$(approved)'"
pod_ready m3 True
wait_until 15 approved_is "" && ok "m3 done: nothing waits, nothing approved" || fail "all done" "'$(approved)'"

# ---- the resourceVersion guard: the Node changes between the approver's read and its patch -------
# the approver's patch of m0 (no query string: kubectl's own patches carry ?fieldManager=) is held
# 4 s by the server; meanwhile m0 withdraws its request and m1 asks. The patch, made from the
# version it read, must be refused (409) and the next decision approve m1, not m0.
faults() { curl -sk "$KAS/_control/faults" | jq '.faults | length'; }
faults_are() { [ "$(faults)" = "$1" ]; }
curl -sk -X POST "$KAS/_control/faults" -d '{"action": "stall", "method": "PATCH", "path": "^/api/v1/nodes/m0$", "seconds": 4, "count": 1}' >/dev/null
peer check "the stall of the approver's patch of m0 is set" test "$(faults)" = 1
pod_ready m0 False
pod_ready m1 False
ask m0
if wait_until 15 faults_are 0; then
	kc annotate node m0 "$P/waiting-for-approval-" >/dev/null
	ask m1
	if wait_until 15 approved_is m1; then ok "m0 changed while the approver's patch was in flight: refused, m1 approved instead"
	else fail "m0 changed while the approver's patch was in flight: m1 approved instead" "'$(approved)'"; fi
	! has_ann m0 "$P/approved" && ok "m0, which withdrew, was never approved" || fail "m0 was never approved"
	grep -q "the Node changed meanwhile" "$T_TMP/a3.log" && ok "the conflict is logged and decided again" ||
		fail "the conflict is logged" "$(grep -i "m0" "$T_TMP/a3.log" | tail -3)"
	pod_ready m1 True
	wait_until 15 approved_is "" || fail "m1 done" "'$(approved)'"
else
	fail "the approver patches m0 (the stall is hit)" "$(curl -sk "$KAS/_control/faults")"
fi

# ---- what the whole run shows ---------------------------------------------------------------------
sleep 1
kill "$WATCH" 2>/dev/null
wait "$WATCH" 2>/dev/null
# replay every master Node version the watch saw: at most one approved at any time
maxc=$(python3 - "$T_TMP/watch.json" "$P/approved" "$O/approved" <<'PY'
import json, sys
dec, text, i, state, mx, n = json.JSONDecoder(), open(sys.argv[1]).read(), 0, {}, 0, 0
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    o, i = dec.raw_decode(text, i)
    for it in o.get("items", [o]):
        a = it["metadata"].get("annotations") or {}
        state[it["metadata"]["name"]] = sys.argv[2] in a or sys.argv[3] in a
        mx, n = max(mx, sum(state.values())), n + 1
print(mx, n)
PY
)
read -r maxc nver <<<"$maxc"
[ "${nver:-0}" -ge 20 ] && [ "$maxc" = 1 ] &&
	ok "a watch of the masters saw $nver Node versions: never more than one approved at once" ||
	fail "never more than one approved at once" "max $maxc over $nver versions: $(head -c 300 "$T_TMP/watch.err")"
total=$(($(events_for m0 ControlPlaneManagerApproved) + $(events_for m1 ControlPlaneManagerApproved) +
	$(events_for m2 ControlPlaneManagerApproved) + $(events_for m3 ControlPlaneManagerApproved) +
	$(events_for m4 ControlPlaneManagerApproved) + $(events_for m5 ControlPlaneManagerApproved)))
expect "9 approvals over the run, 9 Events (m1 thrice, m3 twice)" 9 "$total"
# every request of the approver was allowed by deploy/cpm's RBAC
reqs=$(curl -sk "$KAS/_control/requests?limit=100000")
nreq=$(jq --arg u "$SA" '[.requests[] | select(.user == $u)] | length' <<<"$reqs")
# (less the delete refused on purpose above)
nforb=$(jq --arg u "$SA" '[.requests[] | select(.user == $u and .code == 403 and .verb != "delete")] | length' <<<"$reqs")
kinds=$(jq -r --arg u "$SA" '[.requests[] | select(.user == $u) | .verb + " " + .resource] | unique | join(", ")' <<<"$reqs")
[ "${nreq:-0}" -ge 20 ] && [ "$nforb" = 0 ] &&
	ok "the approver's $nreq requests ($kinds) were all allowed by deploy/cpm's RBAC" ||
	fail "the approver's requests allowed by deploy/cpm's RBAC" "$nreq requests, $nforb forbidden: $(jq -c --arg u "$SA" '[.requests[] | select(.user == $u and .code == 403)][:3]' <<<"$reqs")"
m=$(curl -s "http://127.0.0.1:$PORT_a3/metrics" | awk '/^cpm_approver_(approvals|done)_total/ {printf "%s=%s ", $1, $2}')
[[ $m == *cpm_approver_approvals_total=* && $m == *cpm_approver_done_total=* ]] &&
	ok "/metrics: $m" || fail "/metrics has the approvals and done counters" "$m"
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$(pid_of a3)/status" 2>/dev/null)
echo "note - the leading approver's VmHWM: ${hwm:-?} kB"

for a in a3 a4; do
	if stop_within "$(pid_of $a)" 10 $a; then expect "$a exits 0 on SIGTERM" 0 "$STOP_RC"; fi
done
san=$(grep -l "Sanitizer\|runtime error" "$T_TMP"/a[1-4].log 2>/dev/null)
[ -z "$san" ] && ok "no approver's log holds a sanitizer report" ||
	fail "no approver's log holds a sanitizer report" "$(grep -h -A5 "Sanitizer\|runtime error" $san | head)"
t_summary
