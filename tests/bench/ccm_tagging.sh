#!/usr/bin/env bash
# Figures of the ccm's tagging controller, against moto (behind the counting fault proxy) and the
# test API server: N Nodes (default 1000, with providerIDs) created together by 16 threads,
# with the controller batching (the default) and without (--tagging-controller-enable-
# batching=false, one CreateTags per Node as upstream's controller makes): the CreateTags
# calls and the time until every Node carries the checksum label; then N/10 Nodes deleted
# together: the DeleteTags calls.
# Environment: N (Nodes), QPS (--kube-api-qps, default 20 as upstream: one label PATCH per Node
# sets the pace), WORKERS (--tagging-controller-concurrent-node-syncs, default 1).
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../integration/ccm_lib.sh"

N=${N:-1000}
QPS=${QPS:-20}
WORKERS=${WORKERS:-1}

ccm_env_start || { echo "environment did not start"; exit 1; }
moto_py "
import math
n = int(sys.argv[1])
vpc = ec2.describe_vpcs()['Vpcs'][0]['VpcId']
sub = ec2.create_subnet(VpcId=vpc, CidrBlock='172.31.128.0/17')['Subnet']['SubnetId']
with open('$T_TMP/instances', 'w') as f:
    for k in range(math.ceil(n / 100)):
        m = min(100, n - k * 100)
        r = ec2.run_instances(ImageId='ami-12345678', InstanceType='m5.large', MinCount=m,
            MaxCount=m, SubnetId=sub)
        for i in r['Instances']:
            f.write('%s %s\n' % (i['InstanceId'], i['Placement']['AvailabilityZone']))
" "$N" || { echo "moto setup failed"; exit 1; }

# api METHOD PREFIX FIRST COUNT: creates (POST) or deletes (DELETE) the Nodes PREFIX-FIRST..
# of the instances at those lines
api() {
	python3 - "$KC" "$KAS_URL" "$T_TMP/instances" "$1" "$2" "$3" "$4" <<'PY'
import json, ssl, sys, urllib.request
from concurrent.futures import ThreadPoolExecutor
kc, url, inst, method, prefix, first, count = sys.argv[1:8]
tok = open(kc + '.token').read().strip()
ctx = ssl.create_default_context(cafile=kc + '.ca.crt')
lines = open(inst).read().split('\n')
def call(j):
    iid, zone = lines[j].split()
    name = "%s-%d" % (prefix, j)
    if method == "POST":
        body = json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"providerID": "aws:///%s/%s" % (zone, iid)},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}).encode()
        req = urllib.request.Request(url + "/api/v1/nodes", data=body, method="POST")
    else:
        req = urllib.request.Request(url + "/api/v1/nodes/" + name, method="DELETE")
    req.add_header("Authorization", "Bearer " + tok)
    req.add_header("Content-Type", "application/json")
    urllib.request.urlopen(req, context=ctx).read()
with ThreadPoolExecutor(16) as ex:
    list(ex.map(call, range(int(first), int(first) + int(count))))
PY
}
labelled() {
	kc get nodes -o json | python3 -c "
import json, sys
print(sum(1 for n in json.load(sys.stdin)['items'] if n['metadata'].get('labels', {}).get('k8s.io/cloud-provider-aws')))"
}
count() {
	tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys
print(json.load(sys.stdin)["counts"].get("ec2:" + sys.argv[1], 0))' "$1"
}

run=0
for batching in true false; do
	run=$((run + 1))
	ccm_start "ccm$run" --controllers=tagging --tags="team=t$run,env=bench" --resources=instance \
		--kube-api-qps="$QPS" --kube-api-burst=$((QPS * 3 / 2)) \
		--tagging-controller-concurrent-node-syncs="$WORKERS" \
		--tagging-controller-enable-batching=$batching || { echo "ccm did not start"; exit 1; }
	wait_until 20 grep -q '"started the tagging controller"' "$T_TMP/ccm$run.log"
	tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
	t0=$(date +%s.%N)
	api POST "b$run" 0 "$N"
	while [ "$(labelled)" -lt "$N" ]; do
		if (($(date +%s) - ${t0%.*} > 1800)); then echo "timeout"; break; fi
		sleep 0.5
	done
	t=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
	echo "batching=$batching: $N Nodes tagged and labelled in $t s with $(count CreateTags) CreateTags (--kube-api-qps=$QPS, $WORKERS worker(s))"
	tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
	api DELETE "b$run" 0 $((N / 10))
	last=-1 # until no DeleteTags came for 2 s
	while [ "$(count DeleteTags)" != "$last" ]; do
		last=$(count DeleteTags)
		sleep 2
	done
	echo "batching=$batching: $((N / 10)) Nodes deleted together: $(count DeleteTags) DeleteTags"
	api DELETE "b$run" $((N / 10)) $((N - N / 10))
	stop_within "$(cat "$T_TMP/ccm$run.pid")" 10 "ccm$run" >/dev/null
done
