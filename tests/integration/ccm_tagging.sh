#!/usr/bin/env bash
# tests: product
# (runs $AWS_K8S ccm through ccm_start in ccm_lib.sh)
# The tagging controller (--controllers=*,tagging) against moto, the counting fault proxy and
# the test API server: upstream's flags and their checks; 100 Nodes joining at once -> every
# instance carries the --tags and every Node the label k8s.io/cloud-provider-aws=<MD5 of the
# sorted tags>, in a few CreateTags calls of up to 100 instances (counted at the proxy), not
# 100; a restart tags nothing again; Nodes deleted -> their instances untagged in one batched
# DeleteTags (a tag whose value someone changed is left, as upstream deletes key and value);
# CreateTags throttled -> every Node tagged once the throttling stops, each instance in exactly
# one successful call; one unknown instance in a batch -> the rest tagged, it retried; a
# changed --tags tags every Node once more; the tagging metrics.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

N=100
TAGS=team=storage,env=test
md5() { python3 -c 'import hashlib, sys; print(hashlib.md5(",".join(sorted(sys.argv[1].split(","))).encode()).hexdigest())' "$1"; }
SUM=$(md5 "$TAGS")

# ---- the flags (no server needed) ------------------------------------------------------------
out=$("$AWS_K8S" ccm --help 2>&1)
for f in tags resources tagging-controller-rate-limit tagging-controller-burst-limit \
	tagging-controller-concurrent-node-syncs tagging-controller-enable-batching; do
	if grep -q -- "--$f " <<<"$out" && ! grep -- "--$f " <<<"$out" | grep -q "no effect"; then
		ok "--$f is a flag with an effect (--help)"
	else fail "--$f in --help" "$(grep -- "--$f" <<<"$out")"; fi
done
out=$("$AWS_K8S" ccm --cloud-provider=aws --controllers='*,tagging' --resources=instance 2>&1)
rc=$?
if [ $rc = 2 ] && grep -q -- "--tags must not be empty and must be a form of key=value" <<<"$out"; then
	ok "tagging enabled without --tags: refused as upstream (exit 2)"
else fail "tagging enabled without --tags is refused" "rc=$rc $out"; fi
out=$("$AWS_K8S" ccm --cloud-provider=aws --controllers='*,tagging' --tags=a=b --resources=volume 2>&1)
rc=$?
if [ $rc = 2 ] && grep -q "volume is not a supported resource" <<<"$out"; then
	ok "--resources other than instance: refused as upstream (exit 2)"
else fail "--resources=volume is refused" "rc=$rc $out"; fi

if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi

# 100 instances for the Nodes that join together, 20 more for the throttled ones
moto_py "
vpc = ec2.describe_vpcs()['Vpcs'][0]['VpcId']
sub = ec2.create_subnet(VpcId=vpc, CidrBlock='172.31.128.0/17')['Subnet']['SubnetId']
with open('$T_TMP/instances', 'w') as f:
    for m in ($N, 20):
        r = ec2.run_instances(ImageId='ami-12345678', InstanceType='m5.large', MinCount=m, MaxCount=m,
            SubnetId=sub, TagSpecifications=[{'ResourceType': 'instance', 'Tags': [
                {'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])
        for i in r['Instances']:
            f.write('%s %s\n' % (i['InstanceId'], i['Placement']['AvailabilityZone']))
" || { fail "moto setup"; t_summary; }
mapfile -t INST < <(awk '{print $1}' "$T_TMP/instances")

# nodes_create FIRST COUNT: Nodes node-FIRST.. with providerIDs of the instances at those
# lines, Ready and initialized, created through the API by 16 threads (they arrive together)
nodes_create() {
	python3 - "$KC" "$KAS_URL" "$T_TMP/instances" "$1" "$2" <<'PY'
import json, ssl, sys, urllib.request
from concurrent.futures import ThreadPoolExecutor
kc, url, inst, first, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
tok = open(kc + '.token').read().strip()
ctx = ssl.create_default_context(cafile=kc + '.ca.crt')
lines = open(inst).read().split('\n')
def create(j):
    iid, zone = lines[j].split()
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-%03d" % j},
            "spec": {"providerID": "aws:///%s/%s" % (zone, iid)},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
    req = urllib.request.Request(url + "/api/v1/nodes", data=json.dumps(node).encode(),
                                 headers={"Authorization": "Bearer " + tok,
                                          "Content-Type": "application/json"})
    urllib.request.urlopen(req, context=ctx).read()
with ThreadPoolExecutor(16) as ex:
    list(ex.map(create, range(first, first + count)))
PY
}
# labelled SUM: how many Nodes carry the label with that value
labelled() {
	kc get nodes -o json | python3 -c "
import json, sys
print(sum(1 for n in json.load(sys.stdin)['items']
          if n['metadata'].get('labels', {}).get('k8s.io/cloud-provider-aws') == '$1'))"
}
all_labelled() { [ "$(labelled "$1")" = "$2" ]; }
# tagged FIRST COUNT [TAGS]: how many of those instances carry every tag of TAGS
tagged() {
	moto_py "
want = dict(kv.split('=', 1) for kv in sys.argv[3].split(','))
ids = [l.split()[0] for l in open('$T_TMP/instances').read().split('\n')[int(sys.argv[1]):int(sys.argv[1]) + int(sys.argv[2])]]
n = 0
for r in ec2.describe_instances(InstanceIds=ids)['Reservations']:
    for i in r['Instances']:
        t = {x['Key']: x['Value'] for x in i.get('Tags', [])}
        n += all(t.get(k) == v for k, v in want.items())
print(n)" "$1" "$2" "${3:-$TAGS}"
}
# proxy COUNTER ACTION: the fault proxy's counter (total, passed, faulted) of one EC2 action
proxy() {
	tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys
c = json.load(sys.stdin)["calls"].get("ec2:" + sys.argv[2], {})
print(c.get(sys.argv[1], 0))' "$1" "$2"
}
# logged NAME MSG: the instances the ccm says it tagged ("tagged instances") or untagged
logged() {
	python3 -c '
import re, sys
print(sum(int(m.group(1)) for l in open(sys.argv[1]) if "\"" + sys.argv[2] + "\"" in l
          for m in [re.search(r"instances=(\d+)", l)] if m))' "$T_TMP/$1.log" "$2"
}

FLAGS=(--controllers='*,tagging' --tags="$TAGS" --resources=instance
	--tagging-controller-concurrent-node-syncs=2)

# ---- 100 Nodes join at once ------------------------------------------------------------------
ccm_start ccm1 "${FLAGS[@]}" || fail "ccm starts with the tagging controller" "$(tail -5 "$T_TMP/ccm1.log")"
wait_until 20 grep -q '"started the tagging controller"' "$T_TMP/ccm1.log"
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
t0=$SECONDS
nodes_create 0 $N || fail "100 Nodes created"
if wait_until 60 all_labelled "$SUM" $N; then
	ok "all $N Nodes labelled k8s.io/cloud-provider-aws=$SUM (MD5 of the sorted tags) in $((SECONDS - t0)) s"
else fail "all Nodes labelled" "$(labelled "$SUM") of $N"; fi
got=$(tagged 0 $N)
if [ "$got" = $N ]; then ok "every instance carries team=storage and env=test in moto"
else fail "every instance tagged" "$got of $N"; fi
ct=$(proxy total CreateTags)
echo "# CreateTags calls for $N Nodes joining at once: $ct"
if [ "$ct" -ge 1 ] && [ "$ct" -le 5 ]; then
	ok "CreateTags batched: $ct calls for $N Nodes (up to 100 instances per call; upstream: $N)"
else fail "CreateTags batched" "$ct calls for $N Nodes"; fi
if [ "$(logged ccm1 'tagged instances')" = $N ]; then ok "each instance in exactly one CreateTags"
else fail "each instance tagged once" "the log counts $(logged ccm1 'tagged instances')"; fi

# ---- a restart tags nothing again --------------------------------------------------------------
ccm_stop_check ccm1
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
ccm_start ccm2 "${FLAGS[@]}" || fail "ccm restarts" "$(tail -5 "$T_TMP/ccm2.log")"
wait_until 20 grep -q '"started the tagging controller"' "$T_TMP/ccm2.log"
sleep 4
ct=$(proxy total CreateTags)
if [ "$ct" = 0 ]; then ok "after a restart, no CreateTags for Nodes whose label holds the checksum"
else fail "no CreateTags after a restart" "$ct calls"; fi

# ---- Nodes leave: untagged, batched; a changed value is left alone ---------------------------
moto_py "ec2.create_tags(Resources=['${INST[0]}'], Tags=[{'Key': 'team', 'Value': 'other'}])"
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc delete node $(printf 'node-%03d ' $(seq 0 9)) >/dev/null
untagged() {
	[ "$(moto_py "
ids = [l.split()[0] for l in open('$T_TMP/instances').read().split('\n')[1:10]]
n = 0
for r in ec2.describe_instances(InstanceIds=ids)['Reservations']:
    for i in r['Instances']:
        t = {x['Key'] for x in i.get('Tags', [])}
        n += 'team' not in t and 'env' not in t
print(n)")" = 9 ]
}
if wait_until 20 untagged; then ok "the instances of 10 deleted Nodes lose team and env"
else fail "deleted Nodes' instances untagged"; fi
kept=$(moto_py "
i = ec2.describe_instances(InstanceIds=['${INST[0]}'])['Reservations'][0]['Instances'][0]
t = {x['Key']: x['Value'] for x in i.get('Tags', [])}
print(t.get('team'), t.get('env'))")
if [ "$kept" = "other None" ]; then ok "DeleteTags takes key and value: a tag changed since (team=other) is left"
else fail "a changed tag value is left" "$kept"; fi
if [ "$(tagged 10 90)" = 90 ]; then ok "the other 90 instances keep their tags"
else fail "the other instances keep their tags" "$(tagged 10 90) of 90"; fi
dt=$(proxy total DeleteTags)
if [ "$dt" -ge 1 ] && [ "$dt" -le 3 ]; then ok "DeleteTags batched: $dt calls for 10 Nodes"
else fail "DeleteTags batched" "$dt calls for 10 Nodes"; fi

# ---- CreateTags throttled: done later, each instance in one successful call -------------------
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
fault '{"service":"ec2","action":"CreateTags","effect":"throttle","duration":20}'
before=$(logged ccm2 'tagged instances')
t0=$SECONDS
nodes_create $N 20 || fail "20 more Nodes created"
sleep 3
# the throttling lasts 20 s from the fault: on a loaded machine creating the Nodes takes a while,
# so the check counts only while the window is surely still open
if [ $((SECONDS - t0)) -ge 18 ]; then
	fail "no Node labelled while throttled" "creating 20 Nodes took $((SECONDS - t0)) s of the 20 s window"
elif [ "$(labelled "$SUM")" = 90 ]; then ok "while CreateTags is throttled, no Node is labelled"
else fail "no Node labelled while throttled" "$(labelled "$SUM") labelled (90 before)"; fi
if wait_until 60 all_labelled "$SUM" 110; then
	ok "the 20 Nodes are labelled once the throttling stops ($((SECONDS - t0)) s)"
else fail "the throttled Nodes are labelled later" "$(labelled "$SUM") of 110"; fi
clear_faults
if [ "$(tagged $N 20)" = 20 ]; then ok "the 20 instances carry the tags"
else fail "the throttled instances are tagged" "$(tagged $N 20) of 20"; fi
faulted=$(proxy faulted CreateTags) passed=$(proxy passed CreateTags)
after=$(logged ccm2 'tagged instances')
echo "# throttled: $faulted CreateTags refused, $passed went through"
if [ "$faulted" -ge 1 ] && [ "$faulted" -le 60 ] && [ "$passed" -ge 1 ] && [ "$passed" -le 3 ] &&
	[ $((after - before)) = 20 ]; then
	ok "throttled: $faulted refused calls (the client's retries and a held-back controller), then $passed call(s), each instance tagged exactly once"
else fail "throttled CreateTags" "faulted $faulted, passed $passed, instances logged $((after - before))"; fi

# ---- an unknown instance in a batch: the others tagged at once, it later (a new Node) ----------
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
fault "{\"service\":\"ec2\",\"action\":\"CreateTags\",\"effect\":\"error\",\"status\":400,\"code\":\"InvalidInstanceID.NotFound\",\"message\":\"The instance ID '${INST[2]}' does not exist\",\"count\":1}"
nodes_create 0 5 || fail "5 Nodes created again"
if wait_until 30 all_labelled "$SUM" 115 && [ "$(tagged 0 5)" = 5 ]; then
	ok "InvalidInstanceID.NotFound for one instance of a batch: the batch again without it, that Node retried within its grace period; all 5 tagged"
else fail "NotFound in a batch" "$(labelled "$SUM") of 115 labelled, $(tagged 0 5) of 5 tagged"; fi
ct=$(proxy total CreateTags)
if [ "$ct" -ge 3 ] && [ "$ct" -le 4 ]; then ok "NotFound in a batch: $ct CreateTags (the refused one, the rest, the unknown one again)"
else fail "NotFound in a batch: calls" "$ct"; fi
clear_faults

# ---- the metrics ---------------------------------------------------------------------------------
curl -sk "https://127.0.0.1:$CCM_PORT_ccm2/metrics" >"$T_TMP/m.prom"
proc=$(grep '^cloudprovider_aws_tagging_controller_work_item_duration_seconds_count{latency_type="work_item_processing_time"}' "$T_TMP/m.prom" | awk '{print $2}')
errs=$(grep -c '^cloudprovider_aws_tagging_controller_work_item_errors_total{error_type="total_errors",instance_id="i-' "$T_TMP/m.prom")
if [ "${proc:-0}" -ge 30 ] && [ "$errs" -ge 1 ] &&
	grep -q '^cloudprovider_aws_tagging_controller_work_item_duration_seconds_count{latency_type="work_item_dequeuing_time"}' "$T_TMP/m.prom" &&
	grep -q '^cloudprovider_aws_api_request_duration_seconds_count{request="create_tags"}' "$T_TMP/m.prom" &&
	grep -q '^workqueue_adds_total{name="tagging-controller"}' "$T_TMP/m.prom"; then
	ok "metrics: work item durations ($proc processed), errors by instance, create_tags calls, the tagging-controller queue"
else fail "tagging metrics" "$(grep -E 'tagging|create_tags' "$T_TMP/m.prom" | head -8)"; fi
ccm_stop_check ccm2

# ---- a changed --tags: every Node tagged again, batched ----------------------------------------
TAGS2=team=storage,env=prod
SUM2=$(md5 "$TAGS2")
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
ccm_start ccm3 --controllers='*,tagging' --tags="$TAGS2" --resources=instance || fail "ccm starts with other tags"
if wait_until 60 all_labelled "$SUM2" 115; then ok "a changed --tags: the 115 Nodes labelled with the new checksum"
else fail "relabelled after a change of --tags" "$(labelled "$SUM2") of 115"; fi
ct=$(proxy total CreateTags)
if [ "$(tagged 0 120 "$TAGS2")" = 115 ] && [ "$ct" -ge 2 ] && [ "$ct" -le 5 ]; then
	ok "a changed --tags: 115 instances tagged env=prod in $ct CreateTags (at most 100 per call)"
else fail "retagged after a change of --tags" "$(tagged 0 120 "$TAGS2") of 115 in $ct calls"; fi
ccm_stop_check ccm3

t_summary
