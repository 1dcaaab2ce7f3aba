#!/usr/bin/env bash
# Informer benchmark: resident memory of informers holding 5,000 Nodes and 20,000 Pods of
# realistic size (EKS-like, with managedFields as the API server sends them), and the time to
# list and sync them from the project's test API server.
#
#   tests/bench/kube_informer.sh [NODES PODS]
#
# Two ways of keeping the objects are measured: "strip" (the whole object minus
# metadata.managedFields, which is always dropped) and "project" (what a controller typically
# reads: labels, owner, node name, phase, providerID, addresses, taints). The process's
# baseline (the binary and its libraries, before any list) is shown apart. For reference, the
# same lists are fetched by kubectl (Go, client-go) with -o name.
. "$(dirname "$0")/../lib/testlib.sh"
. "$T_ROOT/tests/kube/lib.sh"

NODES=${1:-5000}
PODS=${2:-20000}
start_kas || { fail "test API server starts"; t_summary; }
echo "loading $NODES Nodes and $PODS Pods into the test API server..."
load=$(python3 "$T_ROOT/tests/bench/kube_informer_load.py" "$KC" "$NODES" "$PODS")
echo "loaded: $load"
check "objects loaded" test "$(jq .errors <<<"$load")" -eq 0
sleep 2 # let the server settle after the load

printf '\n%-8s %8s %9s %9s %11s %13s %11s %7s\n' transform objects sync_ms rss_MiB trimmed_MiB above_base_MiB bytes/object cpu_s
for t in strip project; do
	out=$(/usr/bin/time -f "cpu %U %S" "$AWS_K8S" kube-debug --kubeconfig "$KC" --kube-api-qps -1 \
		sync nodes,pods --transform "$t" 2>&1)
	j=$(grep '^{' <<<"$out")
	cpu=$(awk '/^cpu / { printf "%.2f", $2 + $3 }' <<<"$out")
	if [ -z "$j" ]; then
		fail "sync with --transform $t" "$out"
		continue
	fi
	check "sync ($t): every object in the stores" \
		test "$(jq '.nodes + .pods' <<<"$j")" -eq $((NODES + PODS))
	jq -r --arg t "$t" --arg cpu "$cpu" '
		(.rss_trimmed_kb - .rss_before_kb) as $above |
		[$t, (.nodes + .pods), .sync_ms, (.rss_kb / 1024 | floor), (.rss_trimmed_kb / 1024 | floor),
		 ($above / 1024 | floor), ($above * 1024 / (.nodes + .pods) | floor), $cpu] |
		@tsv' <<<"$j" | awk -F'\t' '{ printf "%-8s %8s %9s %9s %11s %13s %11s %7s\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
	echo "$t: $j" >>"$T_TMP/figures"
done
echo
sed 's/^/  /' "$T_TMP/figures"

# reference: kubectl (client-go) holding one full list of each
export KUBECACHEDIR=$T_TMP/kcache
for r in nodes pods; do
	m=$(/usr/bin/time -f "%M %e" kubectl --kubeconfig "$KC" get "$r" -A -o name --chunk-size 500 2>&1 >/dev/null | tail -1)
	echo "reference: kubectl get $r -A -o name: max RSS $((${m%% *} / 1024)) MiB, ${m##* } s"
done
echo
t_summary
