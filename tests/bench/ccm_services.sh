#!/usr/bin/env bash
# Figures of the ccm's service controller against moto (behind the counting fault proxy) and the
# test API server. Prints figures, never passes or fails; exits 1 when the set-up breaks (a
# Service that never gets its hostname, a delete that never ends, moto refusing the set-up).
#
#   1. one 3-port NLB Service and one 3-port classic ELB Service on 3 Nodes (service controller
#      alone): the AWS calls, total and by action, to create (until the hostname is set), to
#      re-sync an unchanged Service (a Node's label changes: the Service is queued and
#      reconciled; a change of the Service's own labels is not even queued), to
#      fully re-check it (an annotation the controller does not read: the same walk as the
#      periodic full re-check, once every 12-24 h by default), and to delete it (until the
#      Service is gone);
#   2. SERVICES Services (half NLB, half classic ELB, 3 ports each) on NODES Nodes (instances in
#      moto, Nodes in the test API server): the calls to create them all; a steady window of
#      STEADY s at the default periods; a full re-check of every Service by the same process
#      (its caches expire 10 min after they were filled); the process's VmRSS and VmHWM;
#   3. a restart (a new process, every cache cold, service controller alone): the re-check of
#      every Service, an upper bound of what the periodic full re-check costs (a restart also
#      reads back the tags it last applied, which a running process knows); this process runs
#      with --min-resync-period=72m, so its drift probe (every MinResyncPeriod/72: 10 min by
#      default) runs every 60 s: the calls of PROBES probe passes once the re-check is done;
#   4. with ALL=1, a restart with every default controller on: VmRSS and VmHWM once every
#      Service is re-checked (one more pass over moto: a few minutes);
#   then one hour at the default periods, extrapolated, next to upstream's cost.
#
# Environment: SERVICES (default 100), NODES (default 1000), STEADY (seconds, default 60),
# WORKERS (--concurrent-service-syncs, default 4; upstream's default is 1), ALL (1: phase 4).
# moto sets the pace (a DescribeTargetHealth of 1,000 targets, 1,500 RegisterTargets): 5.5 min
# on the 2-core machine at load average 3-8, 22 min at 15-20.
# The node security group collects 3 rules per NLB (its client ports), one per ELB and a shared
# MTU rule: moto's 60-rule limit per group is lifted here (AWS's quota can be raised to 1,000).
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../integration/ccm_lib.sh"

SERVICES=${SERVICES:-100}
NODES=${NODES:-1000}
STEADY=${STEADY:-60}
WORKERS=${WORKERS:-4}
PROBES=${PROBES:-2}

die() {
	echo "SET-UP BROKEN: $*" >&2
	for f in "$T_TMP"/ccm*.log; do [ -f "$f" ] && { echo "--- $f" >&2; grep -E '^[EW]|error' "$f" | tail -15 >&2; }; done
	exit 1
}

# moto as ccm_lib wraps it, plus no limit on the rules of a security group
_ccm_moto_wrapper() {
	mkdir -p "$T_TMP/bin"
	cat >"$T_TMP/bin/moto_server" <<'PY'
#!/usr/bin/env python3
import sys
from moto.ec2.models.security_groups import SecurityGroupBackend
SecurityGroupBackend._verify_group_will_respect_rule_count_limit = lambda *a, **k: None
from moto.server import main
main(sys.argv[1:])
PY
	chmod +x "$T_TMP/bin/moto_server"
	export PATH="$T_TMP/bin:$PATH"
}

ccm_env_start || die "moto, the fault proxy or the test API server did not start"
t_start=$SECONDS

read -r NODESG < <(moto_py "
vpc = ec2.describe_vpcs(Filters=[{'Name': 'is-default', 'Values': ['true']}])['Vpcs'][0]['VpcId']
igw = ec2.create_internet_gateway()['InternetGateway']['InternetGatewayId']
ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
main = ec2.describe_route_tables(Filters=[{'Name': 'vpc-id', 'Values': [vpc]}, {'Name': 'association.main', 'Values': ['true']}])['RouteTables'][0]
ec2.create_route(RouteTableId=main['RouteTableId'], DestinationCidrBlock='0.0.0.0/0', GatewayId=igw)
print(ec2.create_security_group(GroupName='nodes', Description='nodes', VpcId=vpc, TagSpecifications=[
    {'ResourceType': 'security-group', 'Tags': [{'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])['GroupId'])")
[ -n "$NODESG" ] || die "moto set-up (VPC, gateway, node group)"

# api.py: the test API server's REST API from Python (kubectl would take minutes for 1000 Nodes)
cat >"$T_TMP/api.py" <<'PY'
import json, ssl, sys, urllib.request
from concurrent.futures import ThreadPoolExecutor
KC, URL = sys.argv[1], sys.argv[2]
TOK = open(KC + '.token').read().strip()
CTX = ssl.create_default_context(cafile=KC + '.ca.crt')
def call(method, path, body=None, ctype='application/json'):
    req = urllib.request.Request(URL + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    req.add_header('Authorization', 'Bearer ' + TOK)
    req.add_header('Content-Type', ctype)
    with urllib.request.urlopen(req, context=CTX) as r:
        return json.load(r)
def many(fn, items):
    with ThreadPoolExecutor(8) as ex:
        return list(ex.map(fn, items))
def node(name, iid):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"providerID": "aws:///us-east-1a/" + iid},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
def service(name, kind, base):
    ann = {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"} if kind == "nlb" else {}
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default", "annotations": ann},
            "spec": {"type": "LoadBalancer", "selector": {"app": name}, "ports": [
                {"name": "p%d" % k, "port": p, "targetPort": 8000 + k, "nodePort": base + k,
                 "protocol": "TCP"} for k, p in enumerate((80, 443, 8000))]}}
def services():
    return [s for s in call('GET', '/api/v1/namespaces/default/services')['items']
            if s['spec'].get('type') == 'LoadBalancer']
PY
api() { python3 -c "exec(open('$T_TMP/api.py').read()); $1" "$KC" "$KAS_URL" "${@:2}"; }

calls_json() { tb_json "$FAULTPROXY_URL/_control/calls?log=0"; }
reset_calls() { tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null; }
total_calls() { calls_json | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])'; }
# by_action [INDENT]: "N total: A x, B y" (actions by count)
by_action() { calls_json | python3 -c '
import json, sys
c = json.load(sys.stdin)
parts = ["%s %d" % (k.replace("ec2:", ""), v) for k, v in sorted(c["counts"].items(), key=lambda kv: (-kv[1], kv[0]))]
print("%d calls%s" % (c["total"], (": " + ", ".join(parts)) if parts else ""))'; }
# calls_quiet SECONDS: waits until no AWS call came for SECONDS (at most 120 s)
calls_quiet() {
	local last=-1 now end=$((SECONDS + 120))
	while [ "$SECONDS" -lt "$end" ]; do
		now=$(total_calls)
		[ "$now" = "$last" ] && return 0
		last=$now
		sleep "$1"
	done
	return 1
}
metric() { # NAME{labels}: the value on the ccm's /metrics (0 when absent)
	curl -sk "https://127.0.0.1:$PORT/metrics" | awk -v k="$1" '$1 == k {print $2; f=1} END {if (!f) print 0}'
}
syncs() { metric 'workqueue_work_duration_seconds_count{name="service"}' | cut -d. -f1; }
depth() { metric 'workqueue_depth{name="service"}' | cut -d. -f1; }
# wait_syncs N SECONDS [BASE]: until N reconciles more than BASE (default: now) ran and the
# queue is empty
wait_syncs() {
	local want=$((${3:-$(syncs)} + $1)) end=$((SECONDS + $2))
	while [ "$SECONDS" -lt "$end" ]; do
		[ "$(syncs)" -ge "$want" ] && [ "$(depth)" = 0 ] && return 0
		sleep 0.5
	done
	return 1
}
mem() { awk '/^VmRSS|^VmHWM|^Threads/ {printf "%s %s %s  ", $1, $2, $3} END {print ""}' "/proc/$PID/status"; }
ccm_run() { # NAME [flags]: a ccm with upstream's periods (ccm_lib's short ones overridden)
	local name=$1
	shift
	ccm_start "$name" --leader-elect-lease-duration=30s --leader-elect-renew-deadline=20s \
		--leader-elect-retry-period=2s --node-monitor-period=5s --route-reconciliation-period=10s \
		--v=1 "$@" || die "ccm $name did not start"
	PID=$(cat "$T_TMP/$name.pid")
	PORT=$(eval echo "\$CCM_PORT_$name")
	wait_until 30 grep -q '"started the service controller"' "$T_TMP/$name.log" ||
		die "the service controller of $name did not start"
}

# ---- 1. one Service of each kind ----------------------------------------------------------------
echo "== 1. one 3-port Service of each kind, 3 Nodes (service controller alone)"
moto_py "
r = ec2.run_instances(ImageId='ami-12345678', InstanceType='m5.large', MinCount=3, MaxCount=3,
    SecurityGroupIds=['$NODESG'], TagSpecifications=[{'ResourceType': 'instance', 'Tags': [
        {'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])
print(' '.join(i['InstanceId'] for i in r['Instances']))" >"$T_TMP/small" || die "moto: 3 instances"
api "many(lambda a: call('POST', '/api/v1/nodes', node(*a)), [('small-%d' % k, i) for k, i in enumerate(sys.argv[3].split())])" "$(cat "$T_TMP/small")" ||
	die "3 Nodes"
ccm_run ccm1 --controllers=service-lb-controller
hostname_of() { kc get svc "$1" -o jsonpath='{.status.loadBalancer.ingress[0].hostname}' 2>/dev/null; }
has_host() { [ -n "$(hostname_of "$1")" ]; }
gone() { ! kc get svc "$1" >/dev/null 2>&1; }
ensured() { kc get events -o json | python3 -c "import json,sys; print(sum(e.get('count',1) for e in json.load(sys.stdin)['items'] if e['reason']=='EnsuredLoadBalancer' and e['involvedObject']['name']=='$1'))"; }
for kind in nlb classic; do
	svc=one-$kind
	reset_calls
	api "call('POST', '/api/v1/namespaces/default/services', service('$svc', '$kind', 30100 if '$kind' == 'nlb' else 30200))" ||
		die "create Service $svc"
	wait_until 120 has_host "$svc" || die "$svc never got a hostname"
	calls_quiet 2 || die "calls never stopped after creating $svc"
	echo "$kind create:   $(by_action)"
	reset_calls
	kc label --overwrite node small-0 example.com/touch="$kind" >/dev/null
	wait_syncs 1 30 || die "$svc was never queued again after a Node's label changed"
	sleep 2
	echo "$kind re-sync unchanged (queued by a Node label, reconciled): $(by_action)"
	n=$(ensured "$svc")
	reset_calls
	kc annotate svc "$svc" example.com/touch=1 >/dev/null
	more() { [ "$(ensured "$svc")" -gt "$n" ]; }
	wait_until 60 more || die "$svc was never re-checked"
	calls_quiet 2
	echo "$kind full re-check (as the periodic one, every 12-24 h): $(by_action)"
	reset_calls
	kc delete svc "$svc" --wait=false >/dev/null
	wait_until 180 gone "$svc" || die "$svc was never deleted"
	calls_quiet 2
	echo "$kind delete:   $(by_action)"
done
stop_within "$PID" 10 ccm1 >/dev/null
api "[call('DELETE', '/api/v1/nodes/small-%d' % k) for k in range(3)]" >/dev/null || die "deleting the 3 Nodes"

# ---- 2. SERVICES Services, NODES Nodes ---------------------------------------------------------
echo "== 2. $SERVICES Services (half NLB, half classic ELB, 3 ports each), $NODES Nodes"
t0=$SECONDS
moto_py "
import math
n = int(sys.argv[1])
ids = []
for k in range(math.ceil(n / 100)):
    m = min(100, n - k * 100)
    r = ec2.run_instances(ImageId='ami-12345678', InstanceType='m5.large', MinCount=m, MaxCount=m,
        SecurityGroupIds=['$NODESG'], TagSpecifications=[{'ResourceType': 'instance', 'Tags': [
            {'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])
    ids += [i['InstanceId'] for i in r['Instances']]
print(' '.join(ids))" "$NODES" >"$T_TMP/ids" || die "moto: $NODES instances"
api "many(lambda a: call('POST', '/api/v1/nodes', node(*a)), [('node-%04d' % k, i) for k, i in enumerate(sys.argv[3].split())])" "$(cat "$T_TMP/ids")" >/dev/null ||
	die "$NODES Nodes"
echo "set-up: $NODES instances and Nodes in $((SECONDS - t0)) s"

ccm_run ccm2 --controllers=service-lb-controller --concurrent-service-syncs="$WORKERS"
echo "ccm (service controller, $NODES Nodes, no Service): $(mem)"
reset_calls
t0=$SECONDS
api "many(lambda k: call('POST', '/api/v1/namespaces/default/services', service('svc-%03d' % k, 'nlb' if k % 2 == 0 else 'classic', 30300 + 3 * k)), range(int(sys.argv[3])))" "$SERVICES" >/dev/null ||
	die "creating $SERVICES Services"
with_host() { api "print(sum(1 for s in services() if (s.get('status', {}).get('loadBalancer', {}).get('ingress') or [{}])[0].get('hostname')))"; }
while [ "$(with_host)" -lt "$SERVICES" ]; do
	[ $((SECONDS - t0)) -lt 900 ] || die "only $(with_host) of $SERVICES Services got a hostname in 900 s"
	sleep 3
done
t_create=$((SECONDS - t0))
calls_quiet 3 || die "calls never stopped after the creations"
echo "create $SERVICES Services: every hostname in $t_create s ($WORKERS workers); $(by_action)"
echo "ccm after the creations: $(mem)"

reset_calls
s0=$(syncs)
sleep "$STEADY"
steady=$(total_calls)
echo "steady state, $STEADY s at the default periods: $steady calls, $(($(syncs) - s0)) reconciles"

reset_calls
t0=$SECONDS
kc annotate svc --all example.com/touch=1 >/dev/null
wait_syncs "$SERVICES" 600 || die "the $SERVICES Services were never all re-checked"
calls_quiet 3
warm=$(total_calls)
echo "full re-check of all $SERVICES Services (same process; its instance and subnet caches are warm when"
echo "  filled less than 10 min ago) in $((SECONDS - t0)) s: $(by_action)"
echo "ccm after the re-check: $(mem)"
stop_within "$PID" 20 ccm2 >/dev/null

# ---- 3. a restart: every cache cold -----------------------------------------------------------
echo "== 3. a restart: every Service re-checked with cold caches (service controller alone)"
reset_calls
t0=$SECONDS
ccm_run ccm3 --controllers=service-lb-controller --concurrent-service-syncs="$WORKERS" --min-resync-period=72m
wait_syncs "$SERVICES" 600 0 || die "the restarted ccm never re-checked the $SERVICES Services"
calls_quiet 3
cold=$(total_calls)
echo "restart re-check in $((SECONDS - t0)) s: $(by_action)"
echo "ccm after it: $(mem)"
reset_calls
sleep $((60 * PROBES + 5))
probe=$(total_calls)
echo "drift probe, $PROBES passes (every 60 s here, every 10 min by default): $(by_action)"
stop_within "$PID" 20 ccm3 >/dev/null

if [ "${ALL:-0}" = 1 ]; then
	echo "== 4. memory with every default controller on (cloud-node, lifecycle, service; routes off)"
	ccm_run ccm4 --concurrent-service-syncs="$WORKERS"
	wait_syncs "$SERVICES" 600 0 || die "ccm4 never re-checked the $SERVICES Services"
	calls_quiet 3
	echo "ccm ($SERVICES Services, $NODES Nodes, every default controller): $(mem)"
	stop_within "$PID" 20 ccm4 >/dev/null
fi

# ---- one hour -------------------------------------------------------------------------------
python3 - "$SERVICES" "$NODES" "$STEADY" "$steady" "$warm" "$cold" "$probe" "$PROBES" <<'PY'
import sys
S, N, W, steady, warm, cold_svc, probe, probes = (int(x) for x in sys.argv[1:9])
per_probe = probe / probes
print("one hour at the default periods (--min-resync-period=12h: a drift probe every 10 min,")
print("%.1f calls a pass; a full re-check of each unchanged Service once in 12-24 h, 18 h on average;" % per_probe)
print("%d calls in the %d s steady window):" % (steady, W))
lo, hi = 6 * per_probe + warm / 18.0, 6 * per_probe + cold_svc / 18.0
print("  6 x %.1f (probes) + %d..%d / 18 (full re-checks; the running process .. a restarted one) = %.0f..%.0f calls"
      % (per_probe, warm, cold_svc, lo, hi))
print("  per Service: %.2f..%.2f calls per hour (worst case, every full re-check at 12 h: %.0f)"
      % (lo / S, hi / S, 6 * per_probe + cold_svc / 12.0))
# upstream: calls per EnsureLoadBalancer of an unchanged 3-port Service (see README's figures)
up_elb, up_nlb = 8, 12
nlb = (S + 1) // 2
per_pass = nlb * up_nlb + (S - nlb) * up_elb
print("upstream, per sync of an unchanged Service: ELB %d calls (4 DescribeSecurityGroups, one of them" % up_elb)
print("  unfiltered, VPC-wide DescribeSubnets and DescribeRouteTables, DescribeLoadBalancers,")
print("  DescribeLoadBalancerAttributes), NLB %d (DescribeSubnets x2, DescribeRouteTables, unfiltered" % up_nlb)
print("  DescribeSecurityGroups, DescribeLoadBalancers x2, DescribeListeners, DescribeTargetGroups,")
print("  DescribeTargetHealth x3, DescribeLoadBalancerAttributes): %d calls per pass over %d Services;" % (per_pass, S))
print("  it passes over every Service at each start and leader change, and over every Service")
print("  whose Nodes changed at each Node added, removed or excluded (NLB: the same %d calls;" % up_nlb)
print("  ELB: 3 describes plus the registration); it never re-checks an unchanged Service, so drift")
print("  stays until something changes. At one pass every 10 min it would make %d calls an hour." % (6 * per_pass))
print("  (counted in cloud-provider-aws's pkg/providers/v1: aws.go EnsureLoadBalancer, findELBSubnets,")
print("  ensureSecurityGroup, setSecurityGroupIngress, updateInstanceSecurityGroupsForLoadBalancer,")
print("  UpdateLoadBalancer; aws_loadbalancer.go ensureLoadBalancer, ensureLoadBalancerv2,")
print("  ensureTargetGroup, updateInstanceSecurityGroupsForNLB; the service controller of")
print("  k8s.io/cloud-provider queues a Service only when it changes or its Nodes do)")
PY
echo "run time: $((SECONDS - t_start)) s"
