#!/usr/bin/env bash
# tests: product
# Issue 12's environment variables, through the real binary:
#   AWS_USE_FIPS_ENDPOINT / AWS_USE_DUALSTACK_ENDPOINT  the endpoint `aws-k8s aws endpoint` uses;
#   AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE              IPv6 mode against the metadata fake on
#                                                       [::1], and a bad mode refused;
#   DISABLE_TAINT_WATCHER                               csi-node leaves the startup taint alone
#                                                       (test API server);
#   csi-node pre-stop-hook ($CSI_NODE_NAME)             exits at once on a node not draining,
#                                                       waits for a cordoned node's
#                                                       VolumeAttachment, and ends at --timeout.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"

unset AWS_ENDPOINT_URL AWS_ENDPOINT_URL_EC2 AWS_PROFILE
export AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
export AWS_SHARED_CREDENTIALS_FILE=/nonexistent AWS_CONFIG_FILE=/nonexistent
url() { "$AWS_K8S" aws endpoint "$1" 2>&1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["url"])' 2>&1; }

# ---- FIPS and dual-stack endpoints ----
check "fips: ec2" test "$(AWS_USE_FIPS_ENDPOINT=true url ec2)" = https://ec2-fips.us-east-1.amazonaws.com
check "dual-stack: ec2" test "$(AWS_USE_DUALSTACK_ENDPOINT=true url ec2)" = https://ec2.us-east-1.api.aws
check "fips + dual-stack: sts" test "$(AWS_USE_FIPS_ENDPOINT=true AWS_USE_DUALSTACK_ENDPOINT=true url sts)" = https://sts-fips.us-east-1.api.aws
check "fips: elbv2" test "$(AWS_USE_FIPS_ENDPOINT=true url elbv2)" = https://elasticloadbalancing-fips.us-east-1.amazonaws.com
check "fips: AWS_ENDPOINT_URL_EC2 still wins" \
	test "$(AWS_USE_FIPS_ENDPOINT=true AWS_ENDPOINT_URL_EC2=http://127.0.0.1:5000 url ec2)" = http://127.0.0.1:5000
out=$(AWS_USE_FIPS_ENDPOINT=yes "$AWS_K8S" aws endpoint ec2 2>&1)
check "fips: a value that is not a boolean is refused, naming the variable" grep -q AWS_USE_FIPS_ENDPOINT <<<"$out"

# ---- the metadata service's IPv6 endpoint mode ----
unset AWS_EC2_METADATA_DISABLED
if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
	P6=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1",0)); print(s.getsockname()[1])')
	bg imds6 "$T_ROOT/tests/imds-fake/run" --port "$P6" --host ::1 --require-token
	for _ in $(seq 100); do curl -s -o /dev/null "http://[::1]:$P6/_control/health" && break; sleep 0.1; done
	out=$(AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6 AWS_EC2_METADATA_SERVICE_ENDPOINT="http://[::1]:$P6" \
		"$AWS_K8S" aws imds get meta-data/instance-id 2>&1)
	check "imds: IPv6 mode with an explicit [::1] endpoint" test "$out" = i-1234567890abcdef0
else
	skip "imds: IPv6 mode with an explicit [::1] endpoint" "no IPv6 loopback here"
fi
out=$(AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv7 "$AWS_K8S" aws imds get meta-data/instance-id 2>&1)
check "imds: a bad endpoint mode fails" test $? != 0
check "imds: ... and says which values are allowed" grep -q "must be IPv4 or IPv6" <<<"$out"
export AWS_EC2_METADATA_DISABLED=true

if ! command -v kubectl >/dev/null; then
	skip "DISABLE_TAINT_WATCHER and pre-stop-hook" "kubectl is not installed"
	t_summary
fi
KPORT=$(free_port)
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KPORT" --kubeconfig-out "$T_TMP/kc"
wait_http "https://127.0.0.1:$KPORT/healthz" 20 || { fail "test API server starts"; t_summary; }
export KUBECACHEDIR=$T_TMP/kcache
k() { kubectl --kubeconfig "$T_TMP/kc" "$@"; }

# ---- DISABLE_TAINT_WATCHER ----
NODE=ip-10-0-0-7.ec2.internal
k create -f - >/dev/null 2>&1 <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"$NODE"},
 "spec":{"taints":[{"key":"ebs.csi.aws.com/agent-not-ready","effect":"NoExecute"}]}}
EOF
k create -f - >/dev/null 2>&1 <<EOF
{"apiVersion":"storage.k8s.io/v1","kind":"CSINode","metadata":{"name":"$NODE"},
 "spec":{"drivers":[{"name":"ebs.csi.aws.com","nodeID":"i-0123456789abcdef7","allocatable":{"count":25}}]}}
EOF
taints() { k get node "$NODE" -o jsonpath='{.spec.taints[*].key}'; }
peer check "taint: set up" test "$(taints)" = ebs.csi.aws.com/agent-not-ready
# node_run NAME [ENV...]: csi-node for $NODE with no AWS, in the background
node_run() {
	local name=$1
	shift
	env "$@" CSI_NODE_NAME=$NODE "$AWS_K8S" csi-node --endpoint "unix://$T_TMP/$name.sock" \
		--kubeconfig "$T_TMP/kc" --node-id i-0123456789abcdef7 --availability-zone us-east-1a \
		--metadata-sources kubernetes --v 4 >"$T_TMP/$name.log" 2>&1 &
	NODE_PID=$!
	t_cleanup_add "kill $NODE_PID 2>/dev/null"
}
node_run disabled DISABLE_TAINT_WATCHER=true
sleep 3
check "DISABLE_TAINT_WATCHER=true: the startup taint is kept" test "$(taints)" = ebs.csi.aws.com/agent-not-ready
check "DISABLE_TAINT_WATCHER=true: logged" grep -q "DISABLE_TAINT_WATCHER is set" "$T_TMP/disabled.log"
stop_within "$NODE_PID" 5 "csi-node (DISABLE_TAINT_WATCHER=true)"
node_run falsy DISABLE_TAINT_WATCHER=false
for _ in $(seq 100); do [ -z "$(taints)" ] && break; sleep 0.1; done
check "DISABLE_TAINT_WATCHER=false: the startup taint is removed" test -z "$(taints)"
stop_within "$NODE_PID" 5 "csi-node (DISABLE_TAINT_WATCHER=false)"
k taint node "$NODE" ebs.csi.aws.com/agent-not-ready=:NoExecute >/dev/null 2>&1
node_run unset
for _ in $(seq 100); do [ -z "$(taints)" ] && break; sleep 0.1; done
check "DISABLE_TAINT_WATCHER unset: the startup taint is removed" test -z "$(taints)"
stop_within "$NODE_PID" 5 "csi-node (DISABLE_TAINT_WATCHER unset)"

# ---- pre-stop-hook ----
hook() { CSI_NODE_NAME=$NODE "$AWS_K8S" csi-node pre-stop-hook --kubeconfig "$T_TMP/kc" "$@"; }
va() {
	k create -f - >/dev/null 2>&1 <<EOF
{"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment","metadata":{"name":"$1"},
 "spec":{"attacher":"$2","nodeName":"$3","source":{"persistentVolumeName":"pv-$1"}}}
EOF
}
va csi-mine ebs.csi.aws.com "$NODE"
va csi-other-node ebs.csi.aws.com ip-10-0-0-8.ec2.internal
va csi-other-driver efs.csi.aws.com "$NODE"
peer check "pre-stop: three VolumeAttachments" test "$(k get volumeattachments -o name | wc -l)" = 3
t0=$(date +%s%N)
hook >"$T_TMP/hook1.log" 2>&1
rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
check "pre-stop: node not draining: exit 0" test $rc = 0
check "pre-stop: node not draining: at once (${ms} ms)" test $ms -lt 2000
check "pre-stop: node not draining: says so" grep -q "not being drained" "$T_TMP/hook1.log"
out=$("$AWS_K8S" csi-node pre-stop-hook --kubeconfig "$T_TMP/kc" 2>&1)
check "pre-stop: no CSI_NODE_NAME: exit 1" test $? = 1
check "pre-stop: no CSI_NODE_NAME: says so" grep -q CSI_NODE_NAME <<<"$out"

k cordon "$NODE" >/dev/null 2>&1
peer check "pre-stop: node cordoned" test "$(k get node "$NODE" -o jsonpath='{.spec.unschedulable}')" = true
t0=$(date +%s%N)
hook --timeout 2s >"$T_TMP/hook2.log" 2>&1
rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
check "pre-stop: --timeout 2s ends the wait with exit 1 (${ms} ms)" test $rc = 1 -a $ms -ge 1900 -a $ms -lt 4000
check "pre-stop: --timeout: logged" grep -q "gave up waiting" "$T_TMP/hook2.log"

CSI_NODE_NAME=$NODE "$AWS_K8S" csi-node pre-stop-hook --kubeconfig "$T_TMP/kc" >"$T_TMP/hook3.log" 2>&1 &
HOOK=$!
t_cleanup_add "kill $HOOK 2>/dev/null"
sleep 1.5
check "pre-stop: cordoned with one VolumeAttachment: waits" kill -0 $HOOK
k delete volumeattachment csi-other-node >/dev/null 2>&1
sleep 0.5
check "pre-stop: another node's attachment going does not end the wait" kill -0 $HOOK
t0=$(date +%s%N)
k delete volumeattachment csi-mine >/dev/null 2>&1
wait_exit $HOOK 5
rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
check "pre-stop: exit 0 once the attachment is deleted" test $rc = 0
check "pre-stop: within 2 s of the deletion (${ms} ms)" test $ms -lt 2000
check "pre-stop: another driver's attachment is not waited for" grep -q "no VolumeAttachment left" "$T_TMP/hook3.log"

va csi-mine2 ebs.csi.aws.com "$NODE"
CSI_NODE_NAME=$NODE "$AWS_K8S" csi-node pre-stop-hook --kubeconfig "$T_TMP/kc" >"$T_TMP/hook4.log" 2>&1 &
HOOK=$!
t_cleanup_add "kill $HOOK 2>/dev/null"
sleep 1
stop_within $HOOK 2 "pre-stop-hook" && check "pre-stop: SIGTERM ends the wait (exit 1)" test "$STOP_RC" = 1
# upstream's entry: aws-ebs-csi-driver pre-stop-hook
k delete volumeattachment csi-mine2 >/dev/null 2>&1
out=$(CSI_NODE_NAME=$NODE "$AWS_K8S" ebs-csi-driver pre-stop-hook --kubeconfig "$T_TMP/kc" 2>&1)
check "pre-stop: 'ebs-csi-driver pre-stop-hook' runs the hook" test $? = 0
t_summary
