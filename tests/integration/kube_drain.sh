#!/usr/bin/env bash
# tests: product
# common/kube/drain.h through `aws-k8s kube-debug cordon|uncordon|taint|label|drain` against the
# project's test API server, checked with kubectl: cordon and taints idempotent, DaemonSet and
# mirror pods skipped, the emptyDir and unmanaged-pod rules, the eviction's grace period, a
# PodDisruptionBudget that blocks and then allows (changed mid-drain), the deadline, SIGTERM
# mid-drain, 200 pods.
. "$(dirname "$0")/../lib/testlib.sh"
. "$T_ROOT/tests/kube/lib.sh"

start_kas || { fail "test API server starts"; t_summary; }
export KUBECACHEDIR=$T_TMP/kcache
k() { kubectl --kubeconfig "$KC" "$@"; }

node() { printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s"},"spec":{"taints":[{"key":"keep","value":"me","effect":"NoSchedule"}]}}' "$1" | kcreate nodes; }
# pod NAME NODE [OWNER_KIND|-] [extra JSON for spec, e.g. volumes] [labels JSON] [annotations JSON]
pod() {
	local owner=""
	[ "${3:--}" != - ] && owner=',"ownerReferences":[{"apiVersion":"apps/v1","kind":"'$3'","name":"o","uid":"u-'$1'","controller":true}]'
	printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"default","labels":%s,"annotations":%s%s},"spec":{"nodeName":"%s","containers":[{"name":"c","image":"i"}]%s},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}\n' \
		"$1" "${5:-{\}}" "${6:-{\}}" "$owner" "$2" "${4:+,$4}"
}
reqs() { ctl GET requests | jq -r --arg k "$1" '.counters[$k] // 0'; }

# --- cordon, taints, labels ---
node n1
node n2
ctl DELETE requests >/dev/null
out=$(kd cordon n1)
check "cordon n1" grep -q "^cordoned: n1$" <<<"$out"
check "kubectl sees n1 unschedulable" test "$(k get node n1 -o jsonpath='{.spec.unschedulable}')" = true
kd cordon n1 >/dev/null
check "a second cordon writes nothing (1 patch)" test "$(reqs 'patch nodes')" = 1
kd uncordon n1 >/dev/null
check "uncordon clears spec.unschedulable" test -z "$(k get node n1 -o jsonpath='{.spec.unschedulable}')"
out=$(kd cordon nope)
check "cordon of a missing node is ENOENT" grep -q "errno=ENOENT" <<<"$out"

ctl DELETE requests >/dev/null
kd taint n1 example/drain=e1:NoSchedule >/dev/null
kd taint n1 example/drain=e1:NoSchedule >/dev/null
taints() { k get node n1 -o json | jq -c '[.spec.taints[] | .key + "=" + (.value // "") + ":" + .effect]'; }
check "taint added once, the other taint kept" test "$(taints)" = '["keep=me:NoSchedule","example/drain=e1:NoSchedule"]'
check "the repeated taint wrote nothing (1 update)" test "$(reqs 'update nodes')" = 1
kd taint n1 example/drain=e2:NoSchedule >/dev/null
check "a new value replaces the taint" test "$(taints)" = '["keep=me:NoSchedule","example/drain=e2:NoSchedule"]'
kd taint n1 example/drain- >/dev/null
kd taint n1 example/drain- >/dev/null
check "taint removed, the other kept" test "$(taints)" = '["keep=me:NoSchedule"]'
check "3 updates in all (add, replace, remove)" test "$(reqs 'update nodes')" = 3
out=$(kd taint n1 x=y:Bogus)
check "an unknown effect is EINVAL" grep -q "errno=EINVAL" <<<"$out"
kd label n1 example.com/drain=yes >/dev/null
check "label set" test "$(k get node n1 -o jsonpath='{.metadata.labels.example\.com/drain}')" = yes
kd label n1 example.com/drain- >/dev/null
check "label removed" test "$(k get node n1 -o json | jq '.metadata.labels["example.com/drain"] // "none"' -r)" = none

# no pods at all: nothing to sort or look up (an empty list once hit UBSan in qsort(NULL, 0))
out=$(kd drain n1 2>&1)
check "a node without pods drains at once" grep -q "result=ok evicted=0 skipped=0 refused=0 blocked_by_pdb=0 remaining=0" <<<"$out"
kd uncordon n1 >/dev/null

# --- which pods a drain evicts ---
{
	pod ds n1 DaemonSet
	pod mirror n1 - '' '{}' '{"kubernetes.io/config.mirror":"x"}'
	pod rs n1 ReplicaSet
	pod scratch n1 ReplicaSet '"volumes":[{"name":"s","emptyDir":{}}]'
	pod bare n1
	pod other n2 ReplicaSet
} | while read -r line; do kd create pods - <<<"$line" >/dev/null; done
check "6 pods created" test "$(k get pods -o name | wc -l)" = 6
out=$(kd drain n1)
check "drain refused: emptyDir and unmanaged pods" grep -q "result=EPERM .*refused=2" <<<"$out"
check "the refusal names them" grep -q "default/bare (not managed by a controller).*default/scratch (has local storage" <<<"$out"
out=$(kd drain n1 --ignore-daemonsets=false --delete-emptydir-data --force)
check "without --ignore-daemonsets a DaemonSet pod refuses the drain" grep -q "result=EPERM .*refused=1" <<<"$out"
check "nothing was evicted" test "$(k get pods -o name | wc -l)" = 6
out=$(kd drain n1 --delete-emptydir-data --force --dry-run)
check "dry run counts 3 evictions, 2 skipped" grep -q "result=ok evicted=3 skipped=2 " <<<"$out"
check "dry run changes nothing" test "$(k get pods -o name | wc -l)" = 6
ctl DELETE requests >/dev/null
out=$(kd drain n1 --delete-emptydir-data --force)
check "drain evicts 3, skips the DaemonSet and mirror pods" grep -q "result=ok evicted=3 skipped=2 refused=0 blocked_by_pdb=0 remaining=0" <<<"$out"
check "kubectl: ds and mirror stay on n1, other stays on n2" \
	test "$(k get pods -o json | jq -r '[.items[].metadata.name] | sort | join(",")')" = "ds,mirror,other"
check "3 evictions sent" test "$(reqs 'create pods/eviction')" = 3

# --- a PodDisruptionBudget blocks, then allows (changed mid-drain) ---
node n3
node n4
{
	pod web-1 n3 ReplicaSet '' '{"app":"web"}'
	pod web-2 n3 ReplicaSet '' '{"app":"web"}'
	pod web-3 n4 ReplicaSet '' '{"app":"web"}'
} | while read -r line; do kd create pods - <<<"$line" >/dev/null; done
printf '{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"web","namespace":"default"},"spec":{"minAvailable":3,"selector":{"matchLabels":{"app":"web"}}}}' | kcreate poddisruptionbudgets
ctl DELETE requests >/dev/null
t0=$(date +%s%N)
bg drain3 "$AWS_K8S" kube-debug --kubeconfig "$KC" drain n3 --eviction-retry 1s --duration 60s
check "the drain reports the blocked evictions" wait_for "$T_TMP/drain3.log" 'eviction blocked, will retry' 20
sleep 2.5
n=$(reqs 'create pods/eviction')
s=$((($(ms_since "$t0") + 999) / 1000))
check "blocked evictions retried after the 1 s delay, not in a hot loop ($n in ${s} s for 2 pods)" \
	test "$n" -ge 4 -a "$n" -le $((2 * (s + 1)))
check "both pods still there while blocked" test "$(k get pods -l app=web -o name | wc -l)" = 3
k patch pdb web --type merge -p '{"spec":{"minAvailable":1}}' >/dev/null
check "once the PDB allows it the drain ends" wait_for "$T_TMP/drain3.log" '^drain: result=ok evicted=2 ' 30
check "kubectl: only web-3 (on n4) is left" test "$(k get pods -l app=web -o jsonpath='{.items[*].metadata.name}')" = web-3

# --- the deadline: a PDB that never allows it ---
pod web-4 n3 ReplicaSet '' '{"app":"web"}' | kd create pods - >/dev/null
k patch pdb web --type merge -p '{"spec":{"minAvailable":2}}' >/dev/null
t0=$(date +%s%N)
out=$(kd drain n3 --eviction-retry 500ms --duration 3s 2>/dev/null)
ms=$(ms_since "$t0")
check "the drain times out (ETIMEDOUT) with the blocked pod counted" grep -q "result=ETIMEDOUT evicted=0 skipped=0 refused=0 blocked_by_pdb=1 remaining=1" <<<"$out"
check "the error names the pod still there" grep -q "1 pod(s) still on node n3: default/web-4 (disruption budget)" <<<"$out"
check "at the deadline (3 s, took $ms ms)" test "$ms" -ge 2900 -a "$ms" -lt 10000

# --- SIGTERM mid-drain stops promptly; a second run finishes the job ---
bg drain4 "$AWS_K8S" kube-debug --kubeconfig "$KC" drain n3 --eviction-retry 1s --duration 120s
wait_for "$T_TMP/drain4.log" 'eviction blocked, will retry' 20
if stop_within "$(cat "$T_TMP/drain4.pid")" 5 "the drain"; then
	check "a cancelled drain exits 1" test "$STOP_RC" = 1
fi
check "it says it was cancelled" grep -q "^drain: result=ECANCELED .*remaining=1" "$T_TMP/drain4.log"
k delete pdb web >/dev/null
out=$(kd drain n3)
check "a new drain finishes the job" grep -q "result=ok evicted=1 " <<<"$out"

# --- wait until the pod is gone: a finalizer keeps it after the eviction ---
pod slow n3 ReplicaSet | jq -c '.metadata.finalizers=["example.com/hold"]' | kd create pods - >/dev/null
bg drain5 "$AWS_K8S" kube-debug --kubeconfig "$KC" drain n3 --duration 60s --grace-period 7
check "the eviction is accepted" wait_for "$T_TMP/drain5.log" '^evicted default/slow$' 20
check "the eviction carried --grace-period (deletionGracePeriodSeconds 7)" \
	test "$(k get pod slow -o jsonpath='{.metadata.deletionGracePeriodSeconds}')" = 7
sleep 1.5
check "the drain waits while the pod is terminating" test -z "$(grep '^drain:' "$T_TMP/drain5.log")"
k patch pod slow --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null
check "the drain ends once the pod is gone" wait_for "$T_TMP/drain5.log" '^drain: result=ok evicted=1 ' 20

# --- 200 pods ---
node n9
for i in $(seq 200); do pod "p$i" n9 ReplicaSet; done | jq -s '{"apiVersion":"v1","kind":"List","items":.}' >"$T_TMP/pods.json"
k create -f "$T_TMP/pods.json" >/dev/null
check "200 pods on n9" test "$(k get pods --field-selector spec.nodeName=n9 -o name | wc -l)" = 200
ctl DELETE requests >/dev/null
t0=$(date +%s%N)
out=$(kd drain n9 --quiet)
ms=$(ms_since "$t0")
check "200 pods drained" grep -q "result=ok evicted=200 skipped=0 refused=0 blocked_by_pdb=0 remaining=0" <<<"$out"
check "kubectl: none left on n9" test "$(k get pods --field-selector spec.nodeName=n9 -o name | wc -l)" = 0
ev=$(reqs 'create pods/eviction')
ls=$(reqs 'list pods')
check "one eviction per pod ($ev) and few lists ($ls)" test "$ev" = 200 -a "$ls" -le 5
echo "# 200 pods: ${ms} ms, $ev evictions, $ls lists"

t_summary
