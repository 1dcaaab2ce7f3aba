# shellcheck shell=bash
# Helpers of the ccm integration tests and benchmark (sourced, not run).
#
#   ccm_env_start           moto, the fault proxy in front of it (AWS_ENDPOINT_URL points at the
#                           proxy, so every call is counted), the test API server; exports KC
#                           (kubeconfig), KAS_URL, CCM_CONFIG (a cloud config for cluster $CLUSTER)
#   ccm_start NAME [flags]  runs `aws-k8s ccm` in the background with test-friendly defaults
#                           (short periods, leader election on, HTTPS on a free port); exports
#                           CCM_PORT_<NAME>; log in $T_TMP/NAME.log, pid in $T_TMP/NAME.pid
#   kc ARGS...              kubectl against the test API server
#   node_create NAME [providerID] [podCIDR] [ready]   a Node as the kubelet registers it
#                           (uninitialized taint; Ready condition True unless ready=False)
#   instance NAME_TAG [extra python kwargs]   a cluster-tagged instance in moto; prints
#                           "ID PRIVATE_DNS"
#   wait_until SECONDS CMD...   polls CMD every 0.2 s until it succeeds, for at most SECONDS
#   calls [ACTION]          AWS calls counted by the fault proxy (all, or one ec2 action)

CLUSTER=${CLUSTER:-c1}
export KUBECACHEDIR=$T_TMP/kcache

# moto answers "active" for every route; AWS marks a route whose instance is terminated (or
# whose interface is gone) as a blackhole; moto makes a second ELBv2 load balancer of a name
# taken, AWS gives the existing one back. moto_server is wrapped to do as AWS does.
_ccm_moto_wrapper() {
	mkdir -p "$T_TMP/bin"
	cat >"$T_TMP/bin/moto_server" <<'PY'
#!/usr/bin/env python3
import sys
import moto.ec2.models.route_tables as rt

def _state(self):
    i = self.instance
    if i is None and self.interface is not None:
        i = getattr(self.interface, "instance", None)
    if i is not None and i.state == "terminated":
        return "blackhole"
    return "active"

rt.Route.state = property(_state)

# AWS's CreateLoadBalancer (ELBv2) is idempotent: a name taken by a load balancer of the same
# scheme and type gives that one back (a retry after a lost reply makes no second one); moto
# would make a second load balancer of the same name.
import moto.elbv2.models as elbv2m
from moto.elbv2.exceptions import DuplicateLoadBalancerName
_create_lb = elbv2m.ELBv2Backend.create_load_balancer

def _create_lb_once(self, name, *a, **kw):
    for lb in self.load_balancers.values():
        if lb.name == name:
            if ((lb.scheme or "internet-facing") != (kw.get("scheme") or "internet-facing") or
                    lb.type != (kw.get("loadbalancer_type") or "application")):
                raise DuplicateLoadBalancerName()
            return lb
    return _create_lb(self, name, *a, **kw)

elbv2m.ELBv2Backend.create_load_balancer = _create_lb_once
# AWS finds the rule to revoke by protocol, ports and source, whatever its description; moto
# also compares the description of a referenced group (so a described rule never goes).
import moto.ec2.models.security_groups as sgm
_rule_eq = sgm.SecurityGroupRule.__eq__
def _rule_eq_any_desc(self, other):
    if not (self.source_group and other.source_group):
        return _rule_eq(self, other)
    def bare(g): return {k: v for k, v in g.items() if k != "Description"}
    if bare(self.source_group) != bare(other.source_group):
        return False
    saved, other.source_group = other.source_group, self.source_group
    try:
        return _rule_eq(self, other)
    finally:
        other.source_group = saved
sgm.SecurityGroupRule.__eq__ = _rule_eq_any_desc
from moto.server import main
main(sys.argv[1:])
PY
	chmod +x "$T_TMP/bin/moto_server"
	export PATH="$T_TMP/bin:$PATH"
}

ccm_env_start() {
	_ccm_moto_wrapper
	moto_start || return 1
	faultproxy_start "$MOTO_URL" || return 1
	export AWS_ENDPOINT_URL=$FAULTPROXY_URL MOTO_PY_ENDPOINT=$MOTO_URL
	local port
	port=$(free_port)
	KC=$T_TMP/kc
	bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$port" --kubeconfig-out "$KC"
	wait_http "https://127.0.0.1:$port/healthz" 30 || return 1
	for _ in $(seq 100); do [ -s "$KC" ] && break; sleep 0.1; done
	export KC KAS_URL=https://127.0.0.1:$port
	CCM_CONFIG=$T_TMP/cloud-config
	printf '[Global]\nKubernetesClusterID = "%s"\nRegion = us-east-1\n' "$CLUSTER" >"$CCM_CONFIG"
	export CCM_CONFIG
}

kc() { kubectl --kubeconfig "$KC" "$@"; }

ccm_start() {
	local name=$1 port
	shift
	port=$(free_port)
	bg "$name" "$AWS_K8S" ccm --cloud-provider=aws --cloud-config="$CCM_CONFIG" \
		--kubeconfig="$KC" --bind-address=127.0.0.1 --secure-port="$port" \
		--leader-elect-lease-duration=3s --leader-elect-renew-deadline=2s \
		--leader-elect-retry-period=500ms --node-monitor-period=1s \
		--route-reconciliation-period=2s --v=2 "$@"
	eval "CCM_PORT_${name//-/_}=$port"
	wait_http "https://127.0.0.1:$port/healthz" 20
}

node_create() {
	local name=$1 pid=${2:-} cidr=${3:-} ready=${4:-True}
	local spec='"taints":[{"key":"node.cloudprovider.kubernetes.io/uninitialized","value":"true","effect":"NoSchedule"}]'
	[ -n "$pid" ] && spec="$spec,\"providerID\":\"$pid\""
	[ -n "$cidr" ] && spec="$spec,\"podCIDR\":\"$cidr\",\"podCIDRs\":[\"$cidr\"]"
	kc create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"$name","annotations":{}},
 "spec":{$spec},
 "status":{"conditions":[{"type":"Ready","status":"$ready","reason":"KubeletReady"}]}}
EOF
}

instance() {
	local tag=$1
	shift
	moto_py "
i = ec2.run_instances(ImageId='ami-12345678', InstanceType='m5.large', MinCount=1, MaxCount=1,
    TagSpecifications=[{'ResourceType': 'instance', 'Tags': [
        {'Key': 'Name', 'Value': '$tag'}, {'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}]
    ${*:+, $*})['Instances'][0]
print(i['InstanceId'], i['PrivateDnsName'])"
}


calls() {
	tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys
c = json.load(sys.stdin)
a = sys.argv[1] if len(sys.argv) > 1 else ""
print(c["counts"].get("ec2:" + a, 0) if a else c["total"])' "$@"
}

# node_json NAME PYEXPR: evaluates a Python expression on the Node (as n); prints the result
node_py() {
	kc get node "$1" -o json 2>/dev/null | python3 -c "
import json, sys
n = json.load(sys.stdin)
taints = [t['key'] for t in n['spec'].get('taints', [])]
labels = n['metadata'].get('labels', {})
addrs = [(a['type'], a['address']) for a in n.get('status', {}).get('addresses', [])]
print($2)"
}

# calls_between FROM TO [ACTION]: ec2 calls the fault proxy logged between two epoch times
calls_between() {
	tb_json "$FAULTPROXY_URL/_control/calls?log=100000" | python3 -c '
import json, sys
lo, hi = float(sys.argv[1]), float(sys.argv[2])
a = sys.argv[3] if len(sys.argv) > 3 else None
print(sum(1 for l in json.load(sys.stdin)["log"] if lo <= l["time"] <= hi and (a is None or l["action"] == a)))' "$@"
}

# ccm_stop_check NAME: SIGTERM, then one check: it exits 0 within 10 s (stop_within: a ccm that
# ignores SIGTERM is killed and fails then, one that already died fails too) and its log holds
# no sanitizer report
ccm_stop_check() {
	stop_within "$(cat "$T_TMP/$1.pid")" 10 "$1" || return 1
	if [ "$STOP_RC" = 0 ] && ! grep -q "Sanitizer\|runtime error" "$T_TMP/$1.log"; then
		ok "$1 stops cleanly on SIGTERM (exit 0, no sanitizer report)"
	else
		fail "$1 stops cleanly on SIGTERM" "exit $STOP_RC; $(grep -A8 "Sanitizer\|runtime error" "$T_TMP/$1.log" | head -12)"
	fi
}
