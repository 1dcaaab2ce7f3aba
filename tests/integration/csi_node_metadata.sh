#!/usr/bin/env bash
# tests: product
# csi-node and malformed instance metadata. The metadata fake serves chosen values: an
# instance id with a newline and a shell command, an HTML zone, a zone of another region, a
# bad instance type or outpost ARN. A source that serves one malformed value is not used: with
# no other source csi-node stops at start-up with exit 1 and an error that names the source,
# the field and the value (escaped, never a raw newline); with a well-formed Kubernetes Node it
# falls back to that (upstream moves on to the next --metadata-sources entry when one fails).
# Malformed --node-id, --availability-zone and --instance-type values are usage errors.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"

if ! "$AWS_K8S" --help 2>/dev/null | grep -q "^  csi-client "; then
	skip "csi-node metadata checks" "this binary has no csi-client"
	t_summary
fi
for t in jq curl; do command -v $t >/dev/null || { skip "csi-node metadata checks" "$t is needed"; t_summary; }; done

imds_start || { fail "imds fake starts"; t_summary; }
export AWS_EC2_METADATA_SERVICE_ENDPOINT=$IMDS_URL AWS_EC2_METADATA_DISABLED=false AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
export AWS_CONFIG_FILE=$T_TMP/aws-config AWS_SHARED_CREDENTIALS_FILE=$T_TMP/aws-credentials
unset CSI_NODE_NAME AWS_PROFILE

N=0
# node NAME ARGS...: starts csi-node with ARGS, prints its NodeGetInfo reply, stops it.
node() {
	local name=$1 sock
	shift
	N=$((N + 1))
	sock=$T_TMP/n$N.sock
	bg "$name" "$AWS_K8S" csi-node --endpoint "unix://$sock" --describe-instance-type=false "$@"
	for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
	"$AWS_K8S" csi-client --endpoint "unix://$sock" node-get-info
	kill "$(cat "$T_TMP/$name.pid")" 2>/dev/null
}
# refused NAME ARGS...: runs csi-node, which must stop at start-up; sets RC, OUT is its output.
refused() {
	local name=$1
	shift
	OUT=$T_TMP/$name.out
	timeout 30 "$AWS_K8S" csi-node --endpoint "unix://$T_TMP/$name.sock" \
		--describe-instance-type=false "$@" >"$OUT" 2>&1
	RC=$?
}
field() { jq -r "$1" <<<"$2"; }
instance() { tb_post "$IMDS_URL/_control/instance" "$1" >/dev/null || fail "imds fake: set $1"; }
has() { grep -qF -- "$2" "$OUT" && ok "$1" || fail "$1" "no '$2' in: $(head -c 600 "$OUT")"; }
no_raw_newline() {
	# the value's newline must not start a line of its own in the output
	! grep -q '^;rm' "$OUT" && ok "$1: no raw newline in the log" || fail "$1: no raw newline in the log" "$(cat "$OUT")"
}

# ---- the fake's instance as it comes: used ----
info=$(node good)
check "well-formed metadata: node id" test "$(field .node_id "$info")" = i-1234567890abcdef0
check "well-formed metadata: zone" test "$(field '.accessible_topology.segments["topology.kubernetes.io/zone"]' "$info")" = us-east-1a
check "well-formed metadata: the region is logged" grep -q 'region="us-east-1"' "$T_TMP/good.log"

# ---- a poisoned instance id and an HTML zone ----
instance '{"instance_id": "i-123\n;rm", "availability_zone": "<html><body><h1>404 - Not Found</h1></body></html>"}'
refused poisoned
check "poisoned instance id and HTML zone: exit 1" test "$RC" = 1
has "poisoned: the error names the source and the field" 'source="imds" field="instance-id" from="meta-data/instance-id"'
has "poisoned: the value is escaped" 'value="i-123\\n;rm"'
has "poisoned: says the node id is unknown" "cannot tell the node id"
no_raw_newline "poisoned"
check "poisoned: no socket served" test ! -e "$T_TMP/poisoned.sock"

instance '{"instance_id": "i-1234567890abcdef0"}'
refused html
check "HTML zone alone: exit 1" test "$RC" = 1
has "HTML zone: the error names the field" 'source="imds" field="availability-zone"'
has "HTML zone: the value is shown escaped" 'value="<html><body><h1>404 - Not Found</h1></body></html>"'

instance '{"availability_zone": "eu-west-1a"}'
refused otherregion
check "a zone of another region: exit 1" test "$RC" = 1
has "a zone of another region: says so" 'problem="not a zone of the region"'

instance '{"availability_zone": "us-east-1a", "instance_type": "m5.large\n<script>"}'
refused itype
check "malformed instance type: exit 1" test "$RC" = 1
has "malformed instance type: the field" 'field="instance-type"'
no_raw_newline "malformed instance type"

big=$(head -c 102400 /dev/zero | tr '\0' 'x')
instance "{\"instance_type\": \"m5.large\", \"extra\": {\"outpost-arn\": \"arn:aws:outposts:$big\"}}"
refused outpost
check "a 100 KB outpost ARN: exit 1" test "$RC" = 1
has "a 100 KB outpost ARN: the field" 'field="outpost-arn"'
has "a 100 KB outpost ARN: the value is cut" '...(102417 bytes)'
n=$(wc -c <"$OUT")
[ "$n" -lt 4000 ] && ok "a 100 KB outpost ARN: the output stays short ($n bytes)" || fail "a 100 KB outpost ARN: the output stays short" "$n bytes"

instance '{"extra": {"outpost-arn": "arn:aws:outposts:us-east-1:123456789012:outpost/op-0123456789abcdef0"}}'
info=$(node outpost)
check "a well-formed outpost ARN: used" \
	test "$(field '.accessible_topology.segments["topology.ebs.csi.aws.com/outpost-id"]' "$info")" = op-0123456789abcdef0
instance '{"extra": null}'

# ---- the flags ----
refused flag-id --node-id $'i-1\n;rm'
check "--node-id with a newline: usage error (2)" test "$RC" = 2
has "--node-id: says what is wrong" '--node-id: "i-1\n;rm" is not an EC2 instance id'
no_raw_newline "--node-id"
refused flag-zone --node-id i-0123456789abcdef0 --availability-zone '<b>zone</b>'
check "--availability-zone with HTML: usage error (2)" test "$RC" = 2
refused flag-type --node-id i-0123456789abcdef0 --availability-zone us-east-1a --instance-type M5.LARGE
check "--instance-type in upper case: usage error (2)" test "$RC" = 2
info=$(node flags --node-id i-0feedfeedfeedfeed --availability-zone us-west-2-lax-1a --instance-type m7i-flex.2xlarge)
check "well-formed flags (a Local Zone): node id" test "$(field .node_id "$info")" = i-0feedfeedfeedfeed
check "well-formed flags (a Local Zone): zone" test "$(field '.accessible_topology.segments["topology.kubernetes.io/zone"]' "$info")" = us-west-2-lax-1a

# ---- the Kubernetes source: checked the same way, and the fallback ----
if command -v kubectl >/dev/null; then
	KPORT=$(free_port)
	bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KPORT" --kubeconfig-out "$T_TMP/kc"
	wait_http "https://127.0.0.1:$KPORT/healthz" 20
	export KUBECACHEDIR=$T_TMP/kcache
	mknode() {
		jq -n --arg name "$1" --arg pid "$2" --arg zone "$3" '{apiVersion: "v1", kind: "Node",
			metadata: {name: $name, labels: {"topology.kubernetes.io/zone": $zone,
				"topology.kubernetes.io/region": "us-east-1", "node.kubernetes.io/instance-type": "c7i.large"}},
			spec: {providerID: $pid}}' >"$T_TMP/$1.json"
		kubectl --kubeconfig "$T_TMP/kc" create -f "$T_TMP/$1.json" >/dev/null 2>&1 || fail "create Node $1"
	}
	mknode good-node aws:///us-east-1c/i-0123456789abcdef0 us-east-1c
	mknode bad-node $'aws:///us-east-1c/i-123\n;rm' us-east-1c
	mknode html-node aws:////i-0123456789abcdef0 '<html></html>'

	instance '{"instance_id": "i-123\n;rm"}'
	info=$(CSI_NODE_NAME=good-node node fallback --kubeconfig "$T_TMP/kc")
	check "poisoned metadata service, good Node: node id from the Node" test "$(field .node_id "$info")" = i-0123456789abcdef0
	check "poisoned metadata service, good Node: zone from the Node" \
		test "$(field '.accessible_topology.segments["topology.kubernetes.io/zone"]' "$info")" = us-east-1c
	check "poisoned metadata service, good Node: the metadata service's fault is logged" \
		grep -qF 'source="imds" field="instance-id"' "$T_TMP/fallback.log"

	CSI_NODE_NAME=bad-node refused kube-bad --kubeconfig "$T_TMP/kc"
	check "poisoned metadata service and providerID: exit 1" test "$RC" = 1
	has "poisoned providerID: named" 'source="kubernetes" field="instance-id" from="spec.providerID"'
	no_raw_newline "poisoned providerID"
	CSI_NODE_NAME=html-node refused kube-html --kubeconfig "$T_TMP/kc"
	check "HTML zone label: exit 1" test "$RC" = 1
	has "HTML zone label: named" 'source="kubernetes" field="availability-zone"'
	instance '{"instance_id": "i-1234567890abcdef0"}'
else
	skip "kubernetes metadata source" "kubectl is not installed"
fi
t_summary
