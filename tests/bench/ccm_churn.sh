#!/usr/bin/env bash
# Memory of aws-k8s ccm under Node churn, against moto (behind the counting fault proxy) and the
# test API server: CYCLES create/delete cycles of a Node (default 1000), each with an EC2
# instance behind it, so that the cloud-node controller initializes it (lookup, addresses,
# labels, providerID, taint off, a "Synced" Event) before the Node is deleted again.
#
# LANES cycles run at once (default 4): two lanes reuse the same two names over and over (Nodes
# named by the private DNS name of their instance, looked up by name), the others use a fresh
# name each cycle (churn-L-N, with a providerID naming one of the lane's instances). The
# resident memory of the process (VmRSS, and its anonymous part RssAnon) is printed after 0,
# 100, 250, 500 and 1000 cycles (those up to CYCLES, and CYCLES), each taken SETTLE seconds
# (default 2) after the cycles before it ended.
#
# Environment: CYCLES, LANES, SETTLE, QPS (--kube-api-qps, default 200), ROUTES (1: route
# controller on, every Node with a pod CIDR; default 0), TIMEOUT (seconds one Node may take to
# be initialized, default 20; a Node that is not is deleted anyway and counted). Whatever
# MALLOC_* variables are set reach the ccm (e.g. MALLOC_ARENA_MAX=1 to tell fragmentation
# across arenas from a growing table). Prints figures, never passes or fails; bounded in time:
# CYCLES * TIMEOUT / LANES at the very worst, about 2 minutes for 1000 cycles.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../integration/ccm_lib.sh"

CYCLES=${CYCLES:-1000}
LANES=${LANES:-4}
SETTLE=${SETTLE:-2}
QPS=${QPS:-200}
ROUTES=${ROUTES:-0}
TIMEOUT=${TIMEOUT:-20}
((LANES < 3)) && LANES=3

ccm_env_start || { echo "environment did not start"; exit 1; }
# instances: two for the reused names (Nodes named by private DNS name), two per fresh lane
moto_py "
n = int(sys.argv[1])
vpc = ec2.describe_vpcs()['Vpcs'][0]['VpcId']
sub = ec2.create_subnet(VpcId=vpc, CidrBlock='172.31.128.0/17')['Subnet']['SubnetId']
r = ec2.run_instances(ImageId='ami-12345678', InstanceType='m5.large', MinCount=n, MaxCount=n,
    SubnetId=sub, TagSpecifications=[{'ResourceType': 'instance', 'Tags': [
        {'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])
ec2.create_route_table(VpcId=vpc, TagSpecifications=[{'ResourceType': 'route-table',
    'Tags': [{'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])
for i in r['Instances']:
    print(i['InstanceId'], i['PrivateDnsName'], i['Placement']['AvailabilityZone'])
" $((2 + 2 * (LANES - 2))) >"$T_TMP/instances" || { echo "moto setup failed"; exit 1; }

flags=(--kube-api-qps="$QPS" --kube-api-burst=$((QPS * 2)) --v=1)
[ "$ROUTES" = 1 ] && flags+=(--allocate-node-cidrs=true --cluster-cidr=10.128.0.0/14)
ccm_start churn "${flags[@]}" || { echo "ccm did not start"; exit 1; }
pid=$(cat "$T_TMP/churn.pid")
for _ in $(seq 100); do grep -q "started the cloud-node controller" "$T_TMP/churn.log" && break; sleep 0.1; done
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null

echo "ccm churn: $CYCLES Node create/delete cycles, $LANES at a time (2 lanes reuse two names," \
	"$((LANES - 2)) use fresh names), --kube-api-qps=$QPS, routes $([ "$ROUTES" = 1 ] && echo on || echo off)" \
	"${MALLOC_ARENA_MAX:+, MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX}"
python3 - "$KC" "$KAS_URL" "$T_TMP/instances" "$pid" "$CYCLES" "$LANES" "$SETTLE" "$ROUTES" \
	"$TIMEOUT" <<'PY'
import http.client, json, ssl, sys, threading, time, urllib.parse

kc, url, inst_file, pid = sys.argv[1:5]
cycles, lanes, settle, routes, timeout = (int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]),
                                          sys.argv[8] == "1", float(sys.argv[9]))
tok = open(kc + ".token").read().strip()
ctx = ssl.create_default_context(cafile=kc + ".ca.crt")
host = urllib.parse.urlparse(url)
insts = [l.split() for l in open(inst_file)]
TAINT = "node.cloudprovider.kubernetes.io/uninitialized"


class Api:
    def __init__(self):
        self.c = None

    def call(self, method, path, body=None):
        for attempt in range(5):
            try:
                if self.c is None:
                    self.c = http.client.HTTPSConnection(host.hostname, host.port, context=ctx,
                                                         timeout=30)
                hdr = {"Authorization": "Bearer " + tok, "Content-Type": "application/json"}
                self.c.request(method, path, body=json.dumps(body) if body else None, headers=hdr)
                r = self.c.getresponse()
                data = r.read()
                return r.status, json.loads(data) if data else None
            except (OSError, http.client.HTTPException):
                self.c = None
                time.sleep(0.1 * (attempt + 1))
        raise RuntimeError("API server unreachable")


def rss():
    f = {}
    try:
        for line in open("/proc/%s/status" % pid):
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "VmHWM", "Threads"):
                f[k] = int(v.split()[0])
    except OSError:
        pass
    return f


lock = threading.Lock()
state = {"next": 0, "limit": 0, "init": 0, "late": 0, "errors": 0, "seq": 0}


def cycle(api, lane, n):
    if lane < 2:  # the two reused names: looked up by private DNS name
        iid, dns, zone = insts[lane]
        name, pid_ = dns, None
    else:         # fresh names, with a providerID
        iid, dns, zone = insts[2 + 2 * (lane - 2) + n % 2]
        name, pid_ = "churn-%d-%d" % (lane, n), "aws:///%s/%s" % (zone, iid)
    spec = {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]}
    if pid_:
        spec["providerID"] = pid_
    if routes:
        cidr = "10.%d.%d.0/24" % (128 + lane, n % 256)
        spec.update(podCIDR=cidr, podCIDRs=[cidr])
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": "True",
                                       "reason": "KubeletReady"}]}}
    code, _ = api.call("POST", "/api/v1/nodes", node)
    if code != 201:
        with lock:
            state["errors"] += 1
        api.call("DELETE", "/api/v1/nodes/" + name)
        return
    deadline = time.monotonic() + timeout
    done = False
    while time.monotonic() < deadline:
        code, obj = api.call("GET", "/api/v1/nodes/" + name)
        taints = (obj or {}).get("spec", {}).get("taints") or []
        if code == 200 and not any(t.get("key") == TAINT for t in taints):
            done = True
            break
        time.sleep(0.02)
    api.call("DELETE", "/api/v1/nodes/" + name)
    with lock:
        state["init" if done else "late"] += 1


def lane_main(lane):
    api = Api()
    n = 0
    while True:
        with lock:
            if state["next"] >= state["limit"]:
                return
            state["next"] += 1
        cycle(api, lane, n)
        n += 1


marks = sorted({m for m in (0, 100, 250, 500, 1000) if m <= cycles} | {cycles})
t0 = time.monotonic()
rows = []
for m in marks:
    state["limit"] = m
    ts = [threading.Thread(target=lane_main, args=(l,)) for l in range(lanes)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    time.sleep(settle)
    f = rss()
    rows.append((m, time.monotonic() - t0, f))
    print("  %5d cycles %6.1f s  VmRSS %6d KiB  RssAnon %6d KiB  threads %s" % (
        m, rows[-1][1], f.get("VmRSS", 0), f.get("RssAnon", 0), f.get("Threads", "?")),
        flush=True)
print("initialized %d Nodes, %d not within %g s, %d creations refused; %.1f s in all" % (
    state["init"], state["late"], timeout, state["errors"], time.monotonic() - t0))
if len(rows) >= 3 and rows[-1][0] > rows[1][0]:
    a, b = rows[1], rows[-1]
    for k in ("VmRSS", "RssAnon"):
        print("growth from %d to %d cycles: %+d KiB %s (%+.2f KiB per cycle)" % (
            a[0], b[0], b[2].get(k, 0) - a[2].get(k, 0), k,
            (b[2].get(k, 0) - a[2].get(k, 0)) / (b[0] - a[0])))
PY
calls=$(calls)
echo "AWS calls during the churn: $calls; high-water VmHWM $(awk '/^VmHWM/ {print $2}' "/proc/$pid/status") KiB"
