#!/usr/bin/env bash
# tests: product
# csi-controller's region without AWS_REGION (issue 12): --metadata-sources in order, as the
# upstream driver. imds asks the metadata fake (retried with backoff while it fails); kubernetes
# reads the Node $CSI_NODE_NAME from the test API server (its topology.kubernetes.io/region
# label, else the zone of its providerID). Neither: exit 1 with an error naming each source's
# failure, within the retry bound. AWS_REGION wins and asks no source. Each run ends at once
# after the region: the endpoint cannot be bound ("failed to serve the CSI endpoint").
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"

for t in jq curl kubectl; do command -v $t >/dev/null || { skip "controller metadata checks" "$t is needed"; t_summary; }; done

peer imds_start || { peer fail "imds fake starts"; t_summary; }
KPORT=$(free_port)
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KPORT" --kubeconfig-out "$T_TMP/kc"
peer check "test API server starts" wait_http "https://127.0.0.1:$KPORT/healthz" 30
export KUBECACHEDIR=$T_TMP/kcache
unset AWS_REGION AWS_DEFAULT_REGION AWS_PROFILE CSI_NODE_NAME KUBECONFIG AWS_EC2_ENDPOINT
export AWS_EC2_METADATA_SERVICE_ENDPOINT=$IMDS_URL AWS_EC2_METADATA_DISABLED=false
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
export AWS_CONFIG_FILE=$T_TMP/aws-config AWS_SHARED_CREDENTIALS_FILE=$T_TMP/aws-credentials
NOSOCK=unix://$T_TMP/no-such-dir/csi.sock
SERVE_FAIL="failed to serve the CSI endpoint"
DEAD_IMDS=http://127.0.0.1:$(free_port)

mknode() { # NAME PROVIDER-ID [REGION-LABEL]
	jq -n --arg name "$1" --arg pid "$2" --arg region "${3:-}" '{apiVersion: "v1", kind: "Node",
		metadata: {name: $name, labels: ({"topology.kubernetes.io/zone": "x"} +
			(if $region == "" then {} else {"topology.kubernetes.io/region": $region} end))},
		spec: {providerID: $pid}}' >"$T_TMP/$1.json"
	kubectl --kubeconfig "$T_TMP/kc" create -f "$T_TMP/$1.json" >/dev/null 2>&1 || peer fail "create Node $1"
}
mknode labelled aws:///eu-central-1b/i-0123456789abcdef0 eu-central-1
mknode unlabelled aws:///ap-south-1a/i-0123456789abcdef0
mknode bare aws:////i-0123456789abcdef0

imds_requests() { tb_json "$IMDS_URL/_control/requests" | jq '[.. | numbers] | add // 0'; }
N=0
# run NAME ARGS...: csi-controller with ARGS (at most 30 s); RC, OUT (its output), SECS
run() {
	local name=$1 t0
	shift
	OUT=$T_TMP/$name.out
	t0=$(date +%s)
	timeout 30 "$AWS_K8S" csi-controller --endpoint="$NOSOCK" "$@" >"$OUT" 2>&1
	RC=$?
	SECS=$(($(date +%s) - t0))
}
has() { grep -qF -- "$2" "$OUT" && ok "$1" || fail "$1" "no '$2' in: $(tail -c 800 "$OUT")"; }
hasnt() { ! grep -qF -- "$2" "$OUT" && ok "$1" || fail "$1" "'$2' in: $(grep -F -- "$2" "$OUT" | head -n 3)"; }
served() { [ "$RC" = 1 ] && has "$1: got past the region (exit 1 at the endpoint)" "$SERVE_FAIL"; }

# ---- imds: the region from the metadata service ----
tb_post "$IMDS_URL/_control/instance" '{"region": "eu-west-3", "availability_zone": "eu-west-3c"}' >/dev/null ||
	peer fail "imds fake: set the region"
run imds
served "imds up"
has "imds up: the region from imds" 'region from metadata" source="imds" region="eu-west-3"'
hasnt "imds up: kubernetes not asked" 'source="kubernetes"'

# ---- imds failing a few times: retried with backoff, then used ----
tb_post "$IMDS_URL/_control/faults" '{"path": "/latest/meta-data/placement", "status": 503, "count": 4}' >/dev/null ||
	peer fail "imds fake: add a fault"
run imds-retry --v=2
served "imds failing 4 times"
has "imds failing 4 times: retried" "instance metadata not available yet: retrying"
has "imds failing 4 times: then the region from imds" 'source="imds" region="eu-west-3"'
tb_delete "$IMDS_URL/_control/faults" >/dev/null

# ---- imds down: the Node via kubernetes ----
AWS_EC2_METADATA_SERVICE_ENDPOINT=$DEAD_IMDS CSI_NODE_NAME=labelled \
	run kube-label --kubeconfig "$T_TMP/kc" --metadata-retry-timeout=1s
served "imds down, Node labelled"
has "imds down: the region from the Node's label" 'source="kubernetes" region="eu-central-1"'
has "imds down: its failure is logged" 'no region from this metadata source" source="imds"'
AWS_EC2_METADATA_SERVICE_ENDPOINT=$DEAD_IMDS CSI_NODE_NAME=unlabelled \
	run kube-pid --kubeconfig "$T_TMP/kc" --metadata-retry-timeout=1s
served "imds down, Node without a region label"
has "imds down: the region from the providerID's zone" 'source="kubernetes" region="ap-south-1"'
AWS_EC2_METADATA_DISABLED=true KUBECONFIG=$T_TMP/kc CSI_NODE_NAME=labelled run kube-env
served "imds disabled, KUBECONFIG"
has "imds disabled: the Node through \$KUBECONFIG" 'source="kubernetes" region="eu-central-1"'

# ---- --metadata-sources=kubernetes: imds is not asked ----
before=$(imds_requests)
CSI_NODE_NAME=labelled run kube-only --kubeconfig "$T_TMP/kc" --metadata-sources=kubernetes
served "kubernetes only"
has "kubernetes only: the region from the Node" 'source="kubernetes" region="eu-central-1"'
check "kubernetes only: the metadata service got no request" test "$(imds_requests)" = "$before"

# ---- neither: exit 1, each source named, within the bound ----
AWS_EC2_METADATA_SERVICE_ENDPOINT=$DEAD_IMDS CSI_NODE_NAME=bare \
	run neither --kubeconfig "$T_TMP/kc" --metadata-retry-timeout=2s
check "neither source: exit 1" test "$RC" = 1
hasnt "neither source: never serves" "$SERVE_FAIL"
has "neither source: a clear error" "could not determine the region from any metadata source"
has "neither source: imds's failure named" "imds: Connection refused at $DEAD_IMDS"
has "neither source: kubernetes's failure named" 'kubernetes: no label topology.kubernetes.io/region, and providerID \"aws:////i-0123456789abcdef0\" names no zone'
check "neither source: imds retried for the bound, not more (${SECS}s)" test "$SECS" -ge 2 -a "$SECS" -le 8
AWS_EC2_METADATA_SERVICE_ENDPOINT=$DEAD_IMDS CSI_NODE_NAME=no-such-node \
	run missing-node --kubeconfig "$T_TMP/kc" --metadata-retry-timeout=0s
check "missing Node: exit 1" test "$RC" = 1
has "missing Node: named" "kubernetes: reading Node no-such-node: No such file or directory NotFound"
AWS_EC2_METADATA_DISABLED=true run no-node-name --metadata-retry-timeout=0s
check "no CSI_NODE_NAME: exit 1" test "$RC" = 1
has "no CSI_NODE_NAME: named" 'sources="imds: disabled (AWS_EC2_METADATA_DISABLED=true); kubernetes: CSI_NODE_NAME is not set"'

# ---- a stop during the imds backoff ends it at once ----
AWS_EC2_METADATA_SERVICE_ENDPOINT=$DEAD_IMDS AWS_EC2_METADATA_DISABLED=false \
	"$AWS_K8S" csi-controller --endpoint="$NOSOCK" --metadata-sources=imds \
	--metadata-retry-timeout=60s >"$T_TMP/stop.out" 2>&1 &
pid=$!
sleep 1
kill -TERM "$pid"
wait_exit "$pid" 5
rc=$?
OUT=$T_TMP/stop.out
check "SIGTERM during the imds backoff: exit 1 within 5 s (not 124)" test "$rc" = 1
has "SIGTERM during the imds backoff: says it stopped" "imds: stopped while retrying"

# ---- AWS_REGION wins: no source is asked ----
before=$(imds_requests)
AWS_REGION=us-west-2 CSI_NODE_NAME=labelled run env-region --kubeconfig "$T_TMP/kc"
served "AWS_REGION set"
hasnt "AWS_REGION set: no region from metadata" "region from metadata"
check "AWS_REGION set: the metadata service got no request" test "$(imds_requests)" = "$before"

t_summary
