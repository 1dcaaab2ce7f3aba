#!/usr/bin/env bash
# tests: product
# (runs $AWS_K8S ccm through ccm_start in ccm_lib.sh)
# Two aws-k8s ccm replicas with leader election: only the leader acts (each replica talks to
# AWS through its own counting proxy, so the standby's calls are seen), and when the leader is
# killed with SIGKILL the other takes over within the lease duration and carries on.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi
PROXY_A=$FAULTPROXY_URL
faultproxy_start "$MOTO_URL" || fail "second proxy starts"
PROXY_B=$FAULTPROXY_URL

read -r i1 d1 < <(instance n1)
read -r i2 d2 < <(instance n2)
read -r i3 d3 < <(instance n3)
node_create "$d1" "" 10.244.1.0/24
read -r rt < <(moto_py "
vpc = ec2.describe_vpcs()['Vpcs'][0]['VpcId']
print(ec2.create_route_table(VpcId=vpc, TagSpecifications=[{'ResourceType': 'route-table',
    'Tags': [{'Key': 'kubernetes.io/cluster/c1', 'Value': 'owned'}]}])['RouteTable']['RouteTableId'])")

FLAGS=(--allocate-node-cidrs=true --cluster-cidr=10.244.0.0/16 --route-reconciliation-period=1s)
AWS_ENDPOINT_URL=$PROXY_A ccm_start ccm-a "${FLAGS[@]}" || fail "replica a starts"
holder() { kc -n kube-system get lease cloud-controller-manager -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
id_of() { sed -n 's/.*attempting to acquire leader lease.*identity="\([^"]*\)".*/\1/p' "$T_TMP/$1.log" | head -1; }
a_leads() { [ -n "$(holder)" ] && [ "$(holder)" = "$(id_of ccm-a)" ]; }
if wait_until 10 a_leads; then ok "replica a takes the lease"; else fail "replica a takes the lease" "$(holder)"; fi
AWS_ENDPOINT_URL=$PROXY_B ccm_start ccm-b "${FLAGS[@]}" || fail "replica b starts"

initialized() { [ "$(node_py "$1" "'node.cloudprovider.kubernetes.io/uninitialized' in taints")" = False ]; }
routed() { moto_py "
t = ec2.describe_route_tables(RouteTableIds=['$rt'])['RouteTables'][0]
print(' '.join(r.get('DestinationCidrBlock', '') + '=' + r.get('InstanceId', '') for r in t['Routes']))" | grep -q "$1=$2"; }
node_create "$d2" "" 10.244.2.0/24
if wait_until 15 initialized "$d1" && wait_until 15 initialized "$d2"; then ok "the leader initializes the Nodes"
else fail "the leader initializes the Nodes"; fi
if wait_until 15 routed 10.244.2.0/24 "$i2"; then ok "the leader creates routes"; else fail "the leader creates routes"; fi
sleep 2
if grep -q "started the cloud-node controller" "$T_TMP/ccm-a.log" &&
	! grep -q "started the cloud-node controller\|started leading" "$T_TMP/ccm-b.log"; then
	ok "only the leader runs the controllers"
else fail "only the leader runs the controllers" "$(grep -h 'started' "$T_TMP"/ccm-*.log)"; fi
nb=$(FAULTPROXY_URL=$PROXY_B calls)
na=$(FAULTPROXY_URL=$PROXY_A calls)
# (a standby that died would make no call either: it must still run)
if [ "$nb" = 0 ] && [ "$na" -gt 0 ] && kill -0 "$(cat "$T_TMP/ccm-b.pid")" 2>/dev/null; then
	ok "the standby runs and made no AWS call (leader: $na)"
else fail "the standby runs and made no AWS call" "standby $nb, leader $na, standby running: $(kill -0 "$(cat "$T_TMP/ccm-b.pid")" 2>/dev/null && echo yes || echo no)"; fi
if [ "$(holder)" = "$(id_of ccm-a)" ]; then ok "the lease is still a's"; else fail "the lease is still a's" "$(holder)"; fi

# kill the leader: b takes over within the lease duration (3 s) and carries on. A leader that
# already died (crashed, exited) fails here: the kill must reach a running process, and it must
# die of that SIGKILL (status 137).
pid_a=$(cat "$T_TMP/ccm-a.pid")
if kill -KILL "$pid_a" 2>/dev/null; then
	wait "$pid_a" 2>/dev/null
	rc_a=$?
	if [ "$rc_a" = 137 ]; then ok "the leader ran until it was killed"
	else fail "the leader ran until it was killed" "exit status $rc_a, not 137 (SIGKILL)"; fi
else
	wait "$pid_a" 2>/dev/null
	fail "the leader ran until it was killed" "it had already exited with status $?: $(tail -n 3 "$T_TMP/ccm-a.log")"
fi
t_kill=$(date +%s.%N)
b_leads() { [ "$(holder)" = "$(id_of ccm-b)" ]; }
if wait_until 15 b_leads; then
	took=$(python3 -c "print(round($(date +%s.%N) - $t_kill, 1))")
	ok "replica b takes the lease after the leader is killed (${took} s)"
else fail "replica b takes the lease" "$(holder)"; fi
node_create "$d3" "" 10.244.3.0/24
if wait_until 20 initialized "$d3"; then ok "the new leader initializes a new Node"; else fail "the new leader initializes a new Node"; fi
if wait_until 15 routed 10.244.3.0/24 "$i3"; then ok "the new leader creates its route"; else fail "the new leader creates its route"; fi
if grep -q "started leading" "$T_TMP/ccm-b.log"; then ok "replica b logged that it leads"; else fail "replica b logged that it leads"; fi
nb=$(FAULTPROXY_URL=$PROXY_B calls)
if [ "$nb" -gt 0 ]; then ok "the new leader now calls AWS ($nb calls)"; else fail "the new leader calls AWS"; fi
ccm_stop_check ccm-b
t_summary
