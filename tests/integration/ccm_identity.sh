#!/usr/bin/env bash
# tests: product
# aws-k8s ccm's cluster identity and AWS set-up: the cluster ID from the cloud config or, when
# it has none, from the tags of the instance the ccm runs on (through the instance metadata
# fake); the new and the legacy cluster tags; several tags or none are start-up errors
# (unless --allow-untagged-cloud); the region from the metadata service; a [ServiceOverride]
# section sends EC2 calls to its URL; a cluster ID too long for an AWS tag key is refused.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi
mk() { moto_py "print(run_instance(tags=json.loads(sys.argv[1])))" "$1"; }
iNew=$(mk '{"kubernetes.io/cluster/blue": "owned"}')
iOld=$(mk '{"KubernetesCluster": "green"}')
iTwo=$(mk '{"kubernetes.io/cluster/a": "owned", "kubernetes.io/cluster/b": "shared"}')
iNone=$(mk '{"Name": "untagged"}')
printf '[Global]\n' >"$T_TMP/empty.ini"

# run_on INSTANCE [flags...]: starts the ccm "on" an instance (metadata fake from moto), without
# a region in the environment; waits for it to log its cluster or to exit
run_on() {
	local inst=$1
	shift
	imds_start --from-moto "$MOTO_URL" --instance-id "$inst" || return 1
	local log=$T_TMP/id-$inst.log port
	port=$(free_port)
	(unset AWS_REGION AWS_DEFAULT_REGION
	 AWS_EC2_METADATA_DISABLED=false AWS_EC2_METADATA_SERVICE_ENDPOINT=$IMDS_URL \
		exec "$AWS_K8S" ccm --cloud-provider=aws --kubeconfig="$KC" --bind-address=127.0.0.1 \
		--secure-port="$port" --leader-elect=false "$@") >"$log" 2>&1 &
	local pid=$!
	t_cleanup_add "kill $pid"
	for _ in $(seq 100); do
		grep -q '"AWS cloud provider"' "$log" && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	# still running: a bounded stop (a ccm that ignores SIGTERM fails in 10 s); exited by
	# itself (a start-up error): its status
	if kill -0 $pid 2>/dev/null; then
		stop_within $pid 10 "the ccm on $inst"
		LAST_RC=$STOP_RC
	else
		wait $pid 2>/dev/null
		LAST_RC=$?
	fi
	imds_stop
	LAST_LOG=$(cat "$log")
}

run_on "$iNew" --cloud-config="$T_TMP/empty.ini"
if grep -q '"AWS cloud provider" region="us-east-1" cluster="blue"' <<<"$LAST_LOG"; then
	ok "the cluster ID comes from the instance's kubernetes.io/cluster/<id> tag, the region from the metadata service"
else fail "cluster ID from the instance tag" "$(tail -3 <<<"$LAST_LOG")"; fi
run_on "$iOld" --cloud-config="$T_TMP/empty.ini"
if grep -q 'cluster="green"' <<<"$LAST_LOG"; then ok "the legacy KubernetesCluster tag is understood"
else fail "the legacy KubernetesCluster tag" "$(tail -3 <<<"$LAST_LOG")"; fi
run_on "$iTwo" --cloud-config="$T_TMP/empty.ini"
if [ "$LAST_RC" = 1 ] && grep -q "several different cluster tags" <<<"$LAST_LOG"; then
	ok "several cluster tags on the instance are a start-up error"
else fail "several cluster tags are an error" "rc=$LAST_RC $(tail -3 <<<"$LAST_LOG")"; fi
run_on "$iNone" --cloud-config="$T_TMP/empty.ini"
if [ "$LAST_RC" = 1 ] && grep -q "carries no cluster tag" <<<"$LAST_LOG"; then
	ok "no cluster ID anywhere is a start-up error"
else fail "no cluster ID is an error" "rc=$LAST_RC $(tail -3 <<<"$LAST_LOG")"; fi
run_on "$iNone" --cloud-config="$T_TMP/empty.ini" --allow-untagged-cloud
if grep -q '"AWS cloud provider".*cluster=""' <<<"$LAST_LOG"; then ok "--allow-untagged-cloud runs without a cluster ID"
else fail "--allow-untagged-cloud" "$(tail -3 <<<"$LAST_LOG")"; fi
printf '[Global]\nKubernetesClusterTag = legacy-cfg\n' >"$T_TMP/tag.ini"
run_on "$iNew" --cloud-config="$T_TMP/tag.ini"
if grep -q 'cluster="legacy-cfg"' <<<"$LAST_LOG"; then ok "the cloud config's KubernetesClusterTag wins over instance tags"
else fail "KubernetesClusterTag from the cloud config" "$(tail -3 <<<"$LAST_LOG")"; fi

# [ServiceOverride]: EC2 calls go to the override's URL (a second counting proxy), not to
# AWS_ENDPOINT_URL
PROXY1=$FAULTPROXY_URL
faultproxy_start "$MOTO_URL" || fail "second proxy starts"
PROXY2=$FAULTPROXY_URL
read -r i1 d1 < <(instance ov1)
cat >"$T_TMP/override.ini" <<EOF
[Global]
KubernetesClusterID = c1
Region = us-east-1

[ServiceOverride "1"]
Service = ec2
Region = us-east-1
URL = $PROXY2
SigningRegion = us-east-1
SigningMethod = v4
EOF
node_create "$d1"
tb_post "$PROXY1/_control/calls/reset" '{}' >/dev/null
CCM_CONFIG=$T_TMP/override.ini ccm_start ov --controllers=cloud-node || fail "ccm with an override starts"
initialized() { [ "$(node_py "$1" "'node.cloudprovider.kubernetes.io/uninitialized' in taints")" = False ]; }
if wait_until 15 initialized "$d1"; then ok "a Node is initialized through the overridden endpoint"; else fail "initialized through the override"; fi
n1=$(FAULTPROXY_URL=$PROXY1 calls)
n2=$(FAULTPROXY_URL=$PROXY2 calls)
if [ "$n1" = 0 ] && [ "$n2" -gt 0 ]; then ok "EC2 calls went to the [ServiceOverride] URL ($n2), none to AWS_ENDPOINT_URL"
else fail "EC2 calls follow the override" "override $n2, default $n1"; fi
ccm_stop_check ov

# a KubernetesClusterID that cannot make the AWS tag key kubernetes.io/cluster/<ID> (at most
# 128 characters) is a start-up error at its line, quoted short
python3 -c 'print("[Global]\nKubernetesClusterID = " + "x" * 1000000)' >"$T_TMP/long.ini"
out=$("$AWS_K8S" ccm --cloud-provider=aws --cloud-config="$T_TMP/long.ini" --kubeconfig="$KC" \
	--secure-port=0 --leader-elect=false 2>&1)
rc=$?
if [ "$rc" = 1 ] && grep -q "cloud config '$T_TMP/long.ini' line 2: KubernetesClusterID: cluster ID .* is too long" <<<"$out" &&
	[ "${#out}" -lt 3000 ]; then
	ok "a 1,000,000-character KubernetesClusterID is refused at its line"
else fail "a too long KubernetesClusterID is refused" "rc=$rc $(tail -c 400 <<<"$out")"; fi
t_summary
