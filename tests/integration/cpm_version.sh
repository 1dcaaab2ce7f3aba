#!/usr/bin/env bash
# tests: product
# aws-k8s cpm version plan: the binary prints Deckhouse's step sequence for an upgrade across
# two minors (one minor at a time, every master's control plane before any kubelet, master by
# master in name order) and for a one-minor downgrade (kubelets first, then kcm and scheduler
# before their kube-apiserver); Default is 1.33; nothing to do prints so; refusals exit 1 and
# name the rule (downgrade-floor, version-map for end-of-life, unknown versions and a step
# through a minor outside the map, kubelet-skew, apiserver-skew and kcm-scheduler-skew for a
# state that breaks upstream's policy) with nothing planned on stdout; usage errors exit 2.
# --kubeconfig against the test API server: the kubelets from the Nodes, the control plane from
# the mirror pods (Deckhouse's version annotation, else the image tag), maxUsed from the Secret
# d8-cluster-configuration; a missing mirror pod is named.
. "$(dirname "$0")/../lib/testlib.sh"

plan() { "$AWS_K8S" cpm version plan "$@"; }
# expect NAME RC STDOUT-FILE-CONTENT -- ARGS: exit code and exact stdout
expect() {
	local name=$1 rc=$2 want=$3 out got
	shift 4
	out=$(plan "$@" 2>"$T_TMP/err")
	got=$?
	if [ "$got" = "$rc" ] && [ "$out" = "$want" ]; then ok "$name"; else
		fail "$name" "exit $got (want $rc); stdout: $(diff <(echo "$want") <(echo "$out") | head -8); stderr: $(cat "$T_TMP/err")"
	fi
}
# refused NAME RULE TEXT -- ARGS: exit 1, the rule and TEXT on stderr, nothing planned
refused() {
	local name=$1 rule=$2 text=$3 out rc
	shift 4
	out=$(plan "$@" 2>"$T_TMP/err")
	rc=$?
	if [ "$rc" = 1 ] && grep -q "refused by $rule: .*$text" "$T_TMP/err" && ! grep -q -- '->' <<<"$out"; then
		ok "$name"
	else fail "$name" "exit $rc; stderr: $(cat "$T_TMP/err"); stdout: $out"; fi
}

expect "upgrade 1.32 -> 1.34 across two minors: one minor at a time, control plane before kubelets" 0 \
	"plan: upgrade 1.32 -> 1.34, 16 steps
   1. master-a kube-apiserver 1.32 -> 1.33
   2. master-a kube-controller-manager 1.32 -> 1.33
   3. master-a kube-scheduler 1.32 -> 1.33
   4. master-b kube-apiserver 1.32 -> 1.33
   5. master-b kube-controller-manager 1.32 -> 1.33
   6. master-b kube-scheduler 1.32 -> 1.33
   7. master-a kubelet 1.32 -> 1.33
   8. worker-0 kubelet 1.32 -> 1.33
   9. master-a kube-apiserver 1.33 -> 1.34
  10. master-a kube-controller-manager 1.33 -> 1.34
  11. master-a kube-scheduler 1.33 -> 1.34
  12. master-b kube-apiserver 1.33 -> 1.34
  13. master-b kube-controller-manager 1.33 -> 1.34
  14. master-b kube-scheduler 1.33 -> 1.34
  15. master-a kubelet 1.33 -> 1.34
  16. worker-0 kubelet 1.33 -> 1.34
maxUsedControlPlaneKubernetesVersion: 1.34" -- \
	--target 1.34 --control-plane master-b=v1.32.9 --control-plane master-a=1.32 \
	--kubelet worker-0=v1.32.9,master-a=v1.32.9

expect "downgrade 1.33 -> 1.32: kubelets first, then kcm and scheduler before their apiserver" 0 \
	"plan: downgrade 1.33 -> 1.32, 5 steps
   1. worker-0 kubelet 1.33 -> 1.32
   2. worker-1 kubelet 1.33 -> 1.32
   3. master-a kube-controller-manager 1.33 -> 1.32
   4. master-a kube-scheduler 1.33 -> 1.32
   5. master-a kube-apiserver 1.33 -> 1.32
maxUsedControlPlaneKubernetesVersion: 1.33" -- \
	--target=1.32 --control-plane=master-a=1.33 --kubelet=worker-1=1.33 --kubelet=worker-0=1.33 --max-used=1.33

expect "Default is 1.33 and an interrupted upgrade is finished (master-b's scheduler first)" 0 \
	"plan: upgrade 1.32-1.33 -> 1.33 (Default), 2 steps
   1. master-b kube-scheduler 1.32 -> 1.33
   2. worker-0 kubelet 1.32 -> 1.33
maxUsedControlPlaneKubernetesVersion: 1.33" -- \
	--target Default --control-plane master-b=1.33 --control-plane master-b/kube-scheduler=1.32 \
	--kubelet worker-0=1.32

expect "nothing to do" 0 "plan: nothing to do, everything is at 1.33
maxUsedControlPlaneKubernetesVersion: 1.34" -- \
	--target 1.33 --control-plane m=1.33 --kubelet w=1.33 --max-used 1.34

expect "the preview 1.35 is allowed with a note" 0 "note: 1.35 is a preview version
plan: upgrade 1.34 -> 1.35, 4 steps
   1. m kube-apiserver 1.34 -> 1.35
   2. m kube-controller-manager 1.34 -> 1.35
   3. m kube-scheduler 1.34 -> 1.35
   4. w kubelet 1.34 -> 1.35
maxUsedControlPlaneKubernetesVersion: 1.35" -- --target 1.35 --control-plane m=1.34 --kubelet w=1.34

refused "a downgrade two minors below maxUsed is refused (downgrade-floor)" downgrade-floor \
	"1.32 is more than one minor below maxUsedControlPlaneKubernetesVersion 1.34" -- \
	--target 1.32 --control-plane m=1.33 --kubelet w=1.33 --max-used 1.34
refused "a downgrade whose kubelet is newer than an apiserver is refused (kubelet-skew)" kubelet-skew \
	"kubelet 1.34 of w is newer than kube-apiserver 1.33 on m1" -- \
	--target 1.33 --control-plane m0=1.34,m1=1.33 --kubelet w=1.34
refused "apiservers two minors apart are refused (apiserver-skew)" apiserver-skew "more than 1 minor apart" -- \
	--target 1.34 --control-plane m0=1.34,m1=1.32
refused "a scheduler newer than its apiserver is refused (kcm-scheduler-skew)" kcm-scheduler-skew \
	"kube-scheduler 1.34 on m0 is newer than its kube-apiserver 1.33" -- \
	--target 1.34 --control-plane m0=1.33,m0/kube-scheduler=1.34
refused "the end-of-life 1.31 cannot be a target (version-map)" version-map "1.31 is end of life" -- \
	--target 1.31 --control-plane m=1.32
refused "1.36 is not in the version map" version-map "1.36 is not in the version map (1.31..1.35)" -- \
	--target 1.36 --control-plane m=1.35
refused "a step through 1.30 (not in the map) is refused" version-map "would go to 1.30, which is not in the version map" -- \
	--target 1.32 --control-plane m=1.29 --kubelet w=1.29

for bad in "--control-plane m=1.33" "--target 1.33" "--target 1.x --control-plane m=1.33" \
	"--target 1.33 --control-plane m" "--target 1.33 --control-plane m/etcd=1.33" \
	"--target 1.33 --control-plane m/kube-scheduler=1.33" "--target 1.33 --control-plane m=1.33 --kubelet w=abc" \
	"--target 1.33 --control-plane m=1.33 --max-used x"; do
	# shellcheck disable=SC2086
	plan $bad >/dev/null 2>"$T_TMP/err"
	rc=$?
	[ "$rc" = 2 ] && [ -s "$T_TMP/err" ] && ok "usage error: $bad" || fail "usage error: $bad" "exit $rc: $(cat "$T_TMP/err")"
done
# ---- --kubeconfig: the versions read from a cluster (the test API server) --------------------------
if command -v kubectl >/dev/null; then
	export KUBECACHEDIR=$T_TMP/kcache
	PORT=$(free_port)
	KC=$T_TMP/kas.kubeconfig
	bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$PORT" --kubeconfig-out "$KC"
	if wait_http "https://127.0.0.1:$PORT/healthz" 30; then
		k() { kubectl --kubeconfig "$KC" "$@"; }
		node() { printf 'apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels: {%s}\nstatus:\n  nodeInfo: {kubeletVersion: %s}\n---\n' "$@"; }
		mirror() { # COMPONENT NODE IMAGE-TAG [ANNOTATION-VERSION]
			printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s-%s\n  namespace: kube-system\n' "$1" "$2"
			[ -n "${4:-}" ] && printf '  annotations: {control-plane-manager.deckhouse.io/kubernetes-version: "%s"}\n' "$4"
			printf 'spec:\n  nodeName: %s\n  containers:\n  - name: %s\n    image: registry.k8s.io/%s:%s\n---\n' "$2" "$1" "$1" "$3"
		}
		{
			node master-a 'node-role.kubernetes.io/control-plane: ""' v1.33.2
			node worker-0 'kubernetes.io/os: linux' v1.32.7
			mirror kube-apiserver master-a v1.33.2 1.33.2
			mirror kube-controller-manager master-a v1.33.2
			mirror kube-scheduler master-a v1.32.9 1.32.9
			printf 'apiVersion: v1\nkind: Secret\nmetadata: {name: d8-cluster-configuration, namespace: kube-system}\ndata: {maxUsedControlPlaneKubernetesVersion: %s}\n' "$(printf 1.34 | base64)"
		} >"$T_TMP/cluster.yaml"
		peer check "the Nodes, mirror pods and Secret are created" k create -f "$T_TMP/cluster.yaml"
		expect "--kubeconfig: kubelets from the Nodes, the control plane from the mirror pods (annotation, else image tag), maxUsed from the Secret" 0 \
			"plan: upgrade 1.32-1.33 -> 1.33, 2 steps
   1. master-a kube-scheduler 1.32 -> 1.33
   2. worker-0 kubelet 1.32 -> 1.33
maxUsedControlPlaneKubernetesVersion: 1.34" -- --target 1.33 --kubeconfig "$KC"
		expect "--kubeconfig with --max-used 1.32: the flag wins over the Secret (raised to the running 1.33)" 0 \
			"plan: upgrade 1.32-1.33 -> 1.33, 2 steps
   1. master-a kube-scheduler 1.32 -> 1.33
   2. worker-0 kubelet 1.32 -> 1.33
maxUsedControlPlaneKubernetesVersion: 1.33" -- --target 1.33 --kubeconfig "$KC" --max-used 1.32
		refused "--kubeconfig: a downgrade below the Secret's maxUsed - 1 is refused" downgrade-floor \
			"maxUsedControlPlaneKubernetesVersion 1.34" -- --target 1.32 --kubeconfig "$KC"
		peer check "the scheduler's mirror pod is deleted" k -n kube-system delete pod kube-scheduler-master-a --wait=false
		out=$(plan --target 1.33 --kubeconfig "$KC" 2>&1)
		rc=$?
		[ $rc = 1 ] && grep -q "the mirror pod kube-system/kube-scheduler-master-a: " <<<"$out" &&
			ok "--kubeconfig: a missing mirror pod is an error naming it" || fail "--kubeconfig: a missing mirror pod is an error naming it" "exit $rc: $out"
		plan --target 1.33 --kubeconfig "$KC" --kubelet w=1.33 >/dev/null 2>&1
		[ $? = 2 ] && ok "--kubeconfig with --kubelet is a usage error" || fail "--kubeconfig with --kubelet is a usage error"
	else
		peer fail "the test API server starts" "$(tail -5 "$T_TMP/kas.log")"
	fi
else
	skip "cpm version plan --kubeconfig" "kubectl missing"
fi

"$AWS_K8S" cpm version apply >/dev/null 2>&1
[ $? = 2 ] && ok "cpm version: an unknown command is a usage error" || fail "cpm version: an unknown command is a usage error"
"$AWS_K8S" cpm version --help | grep -q "one minor" && ok "cpm version --help" || fail "cpm version --help"
"$AWS_K8S" cpm --help | grep -q "version plan" && ok "cpm --help names version plan" || fail "cpm --help names version plan"

t_summary
