#!/usr/bin/env bash
# Figures of aws-k8s ccm at scale, against moto (behind the counting fault proxy) and the test
# API server:
#   1. N instances (default 1000) and N uninitialized Nodes with pod CIDRs, named as in real
#      clusters (40% by private DNS name, 30% by instance ID, 30% by Name tag as Deckhouse's
#      machines are): the time until every Node is initialized, then until every route exists;
#      the AWS calls by action; the resident memory of the process;
#   2. steady state with short periods (re-sync 10 s, node monitor 1 s, routes 2 s) for
#      STEADY seconds: AWS calls per period, and the extrapolation to one hour at the default
#      periods (re-sync 5 min, monitor 5 s, routes 10 s), with upstream's documented costs for
#      comparison.
# Environment: N (instances/Nodes), STEADY (seconds, default 60), QPS (--kube-api-qps, default
# 20 as upstream), ROUTES (1: route controller on, default).
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../integration/ccm_lib.sh"

N=${N:-1000}
STEADY=${STEADY:-60}
QPS=${QPS:-20}
ROUTES=${ROUTES:-1}

ccm_env_start || { echo "environment did not start"; exit 1; }
echo "setting up $N instances and Nodes..."
t_setup=$(date +%s)
moto_py "
import math
n = int(sys.argv[1])
vpc = ec2.describe_vpcs()['Vpcs'][0]['VpcId']
sub = ec2.create_subnet(VpcId=vpc, CidrBlock='172.31.128.0/17')['Subnet']['SubnetId']
ids = []
for k in range(math.ceil(n / 100)):
    m = min(100, n - k * 100)
    r = ec2.run_instances(ImageId='ami-12345678', InstanceType='m5.large', MinCount=m, MaxCount=m,
        SubnetId=sub, TagSpecifications=[{'ResourceType': 'instance', 'Tags': [
            {'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])
    ids += [(i['InstanceId'], i['PrivateDnsName']) for i in r['Instances']]
rt = ec2.create_route_table(VpcId=vpc, TagSpecifications=[{'ResourceType': 'route-table',
    'Tags': [{'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])['RouteTable']['RouteTableId']
with open('$T_TMP/instances', 'w') as f:
    for j, (i, d) in enumerate(ids):
        kind = 'dns' if j % 10 < 4 else 'id' if j % 10 < 7 else 'tag'
        name = d if kind == 'dns' else i if kind == 'id' else 'machine-%04d' % j
        if kind == 'tag':
            ec2.create_tags(Resources=[i], Tags=[{'Key': 'Name', 'Value': name}])
        f.write('%s %s %d\n' % (name, i, j))
print(rt)
" "$N" >"$T_TMP/rt" || { echo "moto setup failed"; exit 1; }
RT=$(cat "$T_TMP/rt")
# Nodes through the API directly (kubectl would take minutes for 1000)
python3 - "$KC" "$KAS_URL" "$T_TMP/instances" <<'PY' || { echo "node creation failed"; exit 1; }
import json, ssl, sys, urllib.request
kc, url, inst = sys.argv[1:4]
tok = open(kc + '.token').read().strip()
ctx = ssl.create_default_context(cafile=kc + '.ca.crt')
for line in open(inst):
    name, iid, j = line.split()
    j = int(j)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"podCIDR": "10.%d.%d.0/24" % (128 + j // 256, j % 256),
                     "podCIDRs": ["10.%d.%d.0/24" % (128 + j // 256, j % 256)],
                     "taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized",
                                 "value": "true", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
    req = urllib.request.Request(url + "/api/v1/nodes", data=json.dumps(node).encode(),
                                 headers={"Authorization": "Bearer " + tok,
                                          "Content-Type": "application/json"})
    urllib.request.urlopen(req, context=ctx).read()
PY
echo "setup took $(($(date +%s) - t_setup)) s"

# counts Nodes still tainted / routes in the table
tainted() { python3 - "$KC" "$KAS_URL" <<'PY'
import json, ssl, sys, urllib.request
kc, url = sys.argv[1:3]
tok = open(kc + '.token').read().strip()
ctx = ssl.create_default_context(cafile=kc + '.ca.crt')
req = urllib.request.Request(url + "/api/v1/nodes", headers={"Authorization": "Bearer " + tok})
items = json.load(urllib.request.urlopen(req, context=ctx))["items"]
print(sum(1 for n in items if any(t["key"] == "node.cloudprovider.kubernetes.io/uninitialized"
                                  for t in n["spec"].get("taints") or [])))
PY
}
# counts Nodes whose NetworkUnavailable condition the route controller set to False
routed_nodes() { python3 - "$KC" "$KAS_URL" <<'PY'
import json, ssl, sys, urllib.request
kc, url = sys.argv[1:3]
tok = open(kc + '.token').read().strip()
ctx = ssl.create_default_context(cafile=kc + '.ca.crt')
req = urllib.request.Request(url + "/api/v1/nodes", headers={"Authorization": "Bearer " + tok})
items = json.load(urllib.request.urlopen(req, context=ctx))["items"]
print(sum(1 for n in items if any(c["type"] == "NetworkUnavailable" and c["status"] == "False"
                                  for c in n.get("status", {}).get("conditions") or [])))
PY
}
nroutes() { moto_py "print(sum(1 for r in ec2.describe_route_tables(RouteTableIds=['$RT'])['RouteTables'][0]['Routes'] if r.get('InstanceId')))"; }

metric() { # NAME_WITH_LABELS: the value on the ccm's /metrics (0 when absent)
	curl -sk "https://127.0.0.1:$port/metrics" | awk -v k="$1" '$1 == k {print $2; f=1} END {if (!f) print 0}'
}
snapshot() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys
c = json.load(sys.stdin)
print("  AWS calls: %d total" % c["total"])
for k, v in sorted(c["counts"].items(), key=lambda kv: -kv[1]):
    print("    %-40s %d" % (k, v))'; }
peak_rss=0
sample_rss() {
	local r
	r=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)
	[ -n "$r" ] && [ "$r" -gt "$peak_rss" ] && peak_rss=$r
}
rss_line() {
	sample_rss
	echo "  ccm resident memory: now $(awk '/^VmRSS/ {print $2}' /proc/$pid/status) KiB (anonymous $(awk '/^RssAnon/ {print $2}' /proc/$pid/status) KiB, the rest shared library text), peak sampled ${peak_rss} KiB, high-water $(awk '/^VmHWM/ {print $2}' /proc/$pid/status) KiB, $(awk '/^Threads/ {print $2}' /proc/$pid/status) threads"
}

# ---- phase 1: initialization (cloud-node and lifecycle controllers, default periods) ---------
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
t0=$(date +%s.%N)
ccm_start init --kube-api-qps="$QPS" --kube-api-burst=$((QPS * 3 / 2)) --v=1 ||
	{ echo "ccm did not start"; exit 1; }
pid=$(cat "$T_TMP/init.pid")
port=$CCM_PORT_init
while :; do
	left=$(tainted)
	sample_rss
	[ "$left" = 0 ] && break
	if (($(date +%s) - ${t0%.*} > 1800)); then echo "timeout: $left Nodes left"; break; fi
	sleep 1
done
t_init=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
echo "phase 1: all $N Nodes initialized in ${t_init} s (--kube-api-qps=$QPS: each Node costs 3 API writes)"
snapshot
echo "  (lookups: $((N * 3 / 10)) Nodes by instance ID, $((N * 4 / 10)) by private DNS name, $((N * 3 / 10)) by Name tag; ceil(N/100) = $(((N + 99) / 100)))"
rss_line
kill "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done

if [ "$ROUTES" = 1 ]; then
	# ---- phase 2: routes for every Node (a new process, default periods) -----------------
	tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
	peak_rss=0
	t0=$(date +%s.%N)
	ccm_start routes --kube-api-qps="$QPS" --kube-api-burst=$((QPS * 3 / 2)) --v=1 \
		--node-monitor-period=5s --route-reconciliation-period=10s \
		--allocate-node-cidrs=true --cluster-cidr=10.128.0.0/14 ||
		{ echo "ccm did not start"; exit 1; }
	pid=$(cat "$T_TMP/routes.pid")
	port=$CCM_PORT_routes
	while [ "$(nroutes)" -lt "$N" ]; do
		sample_rss
		if (($(date +%s) - ${t0%.*} > 3600)); then echo "timeout: $(nroutes) routes"; break; fi
		sleep 2
	done
	echo "phase 2: all $N routes in place $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s after a restart (2 mutating calls per route, one after the other)"
	while [ "$(routed_nodes)" -lt "$N" ]; do
		sample_rss
		if (($(date +%s) - ${t0%.*} > 3600)); then echo "timeout: NetworkUnavailable"; break; fi
		sleep 2
	done
	echo "  and every Node's NetworkUnavailable condition False $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s after the restart"
	snapshot
	rss_line
	kill "$pid"
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
fi
route_flags=()
[ "$ROUTES" = 1 ] && route_flags=(--allocate-node-cidrs=true --cluster-cidr=10.128.0.0/14)
ccm_start steady --kube-api-qps="$QPS" --v=1 --node-status-update-frequency=10s \
	--node-monitor-period=1s --route-reconciliation-period=2s "${route_flags[@]}" ||
	{ echo "ccm did not start"; exit 1; }
pid=$(cat "$T_TMP/steady.pid")
port=$CCM_PORT_steady

# ---- phase 3: steady state (a new process with short periods) ---------------------------------
sleep 5
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
rs0=$(metric 'workqueue_work_duration_seconds_count{name="cloud-node-status"}')
rp0=$(metric 'workqueue_work_duration_seconds_count{name="route"}')
mp0=$(metric 'workqueue_work_duration_seconds_count{name="cloud-node-lifecycle"}')
sleep "$STEADY"
rs1=$(metric 'workqueue_work_duration_seconds_count{name="cloud-node-status"}')
rp1=$(metric 'workqueue_work_duration_seconds_count{name="route"}')
mp1=$(metric 'workqueue_work_duration_seconds_count{name="cloud-node-lifecycle"}')
tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys
steady, n, routes = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
rs, rp, mp = [float(sys.argv[i + 1]) - float(sys.argv[i]) for i in (4, 6, 8)]
c = json.load(sys.stdin)["counts"]
di = c.get("ec2:DescribeInstances", 0)
drt = c.get("ec2:DescribeRouteTables", 0)
other = sum(v for k, v in c.items() if k not in ("ec2:DescribeInstances", "ec2:DescribeRouteTables"))
print("phase 3: steady state over %d s (re-sync every 10 s, monitor every 1 s, routes every 2 s):" % steady)
print("  %d re-sync passes: %d DescribeInstances (%.1f per pass for %d Nodes)" % (rs, di, di / max(rs, 1), n))
print("  %d monitor passes: no call (every Node is Ready)" % mp)
if routes:
    print("  %d route passes: %d DescribeRouteTables (%.2f per pass)" % (rp, drt, drt / max(rp, 1)))
print("  other calls: %d" % other)
per_resync, per_route = di / max(rs, 1), (drt / max(rp, 1) if routes else 0)
hour = 12 * per_resync + 360 * per_route
print("one hour at the default periods (re-sync 5 min, monitor 5 s, routes 10 s): %d calls" % round(hour))
up = 12 * n + (360 * 2 if routes else 0)
print("upstream, from its documented behaviour (1 DescribeInstances per Node per re-sync; per route")
print("  pass one unfiltered DescribeRouteTables and one unfiltered DescribeInstances): %d calls" % up)
' "$STEADY" "$N" "$ROUTES" "$rs0" "$rs1" "$rp0" "$rp1" "$mp0" "$mp1"
rss_line
