#!/usr/bin/env bash
# tests: product
# (runs $AWS_K8S ccm through ccm_start in ccm_lib.sh)
# aws-k8s ccm's route controller against moto (wrapped so that a route to a terminated
# instance is a blackhole, as on AWS): routes for three Nodes in two cluster-tagged route
# tables, the source/destination check turned off, a blackhole replaced, routes of a deleted
# Node removed, routes of other origins and other tables left alone, and a constant number of
# Describe calls per pass.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi

read -r i1 d1 < <(instance n1)
read -r i2 d2 < <(instance n2)
read -r i3 d3 < <(instance n3)
read -r iold _ < <(instance old)
read -r iforeign _ < <(moto_py "print(run_instance(tags={'kubernetes.io/cluster/c2': 'owned'}))")
# n3 has two interfaces: routing by instance ID fails on AWS then, so its routes go to its
# primary interface
moto_py "
i = ec2.describe_instances(InstanceIds=['$i3'])['Reservations'][0]['Instances'][0]
eni = ec2.create_network_interface(SubnetId=i['SubnetId'])['NetworkInterface']
ec2.attach_network_interface(NetworkInterfaceId=eni['NetworkInterfaceId'], InstanceId='$i3', DeviceIndex=1)"
read -r rtA rtB rtU rtO igw < <(moto_py "
vpc = ec2.describe_vpcs()['Vpcs'][0]['VpcId']
def rt(tags):
    ts = [{'ResourceType': 'route-table', 'Tags': [{'Key': k, 'Value': v} for k, v in tags.items()]}] if tags else []
    return ec2.create_route_table(VpcId=vpc, TagSpecifications=ts)['RouteTable']['RouteTableId']
a = rt({'kubernetes.io/cluster/c1': 'owned'})
b = rt({'KubernetesCluster': 'c1'})
u = rt({})
o = rt({'kubernetes.io/cluster/c2': 'owned'})
igw = ec2.create_internet_gateway()['InternetGateway']['InternetGatewayId']
ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
ec2.create_route(RouteTableId=a, DestinationCidrBlock='0.0.0.0/0', GatewayId=igw)
# n3's CIDR points at an instance that then terminates: a blackhole
ec2.create_route(RouteTableId=a, DestinationCidrBlock='10.244.3.0/24', InstanceId='$iold')
ec2.terminate_instances(InstanceIds=['$iold'])
# a route inside the cluster CIDR to another cluster's instance: not ours to delete
ec2.create_route(RouteTableId=b, DestinationCidrBlock='10.244.99.0/24', InstanceId='$iforeign')
# a route outside the cluster CIDR to one of our instances: not ours either
ec2.create_route(RouteTableId=b, DestinationCidrBlock='192.168.7.0/24', InstanceId='$i1')
print(a, b, u, o, igw)")

blackhole=$(moto_py "
r = [r for r in ec2.describe_route_tables(RouteTableIds=['$rtA'])['RouteTables'][0]['Routes'] if r.get('DestinationCidrBlock') == '10.244.3.0/24'][0]
print(r['State'])")
if [ "$blackhole" = blackhole ]; then peer ok "the test route to a terminated instance is a blackhole"
else peer fail "the test route to a terminated instance is a blackhole" "$blackhole"; fi

node_create "$d1" "" 10.244.1.0/24
node_create "$d2" "" 10.244.2.0/24
node_create "$d3" "" 10.244.3.0/24
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null

ccm_start ccm1 --allocate-node-cidrs=true --configure-cloud-routes=true \
	--cluster-cidr=10.244.0.0/16 --route-reconciliation-period=1s ||
	fail "ccm starts" "$(tail -5 "$T_TMP/ccm1.log")"

# routes: "TABLE CIDR TARGET STATE" lines
routes() { moto_py "
for t in ec2.describe_route_tables(RouteTableIds=['$rtA', '$rtB', '$rtU', '$rtO'])['RouteTables']:
    for r in t['Routes']:
        d = r.get('DestinationCidrBlock') or r.get('DestinationIpv6CidrBlock')
        tgt = r.get('InstanceId') or r.get('NetworkInterfaceId') or r.get('GatewayId')
        print(t['RouteTableId'], d, tgt, r['State'])"; }
eni3=$(moto_py "
i = ec2.describe_instances(InstanceIds=['$i3'])['Reservations'][0]['Instances'][0]
print([e['NetworkInterfaceId'] for e in i['NetworkInterfaces'] if e['Attachment']['DeviceIndex'] == 0][0])")
want_routes() {
	local r
	r=$(routes)
	for t in "$rtA" "$rtB"; do
		grep -qx "$t 10.244.1.0/24 $i1 active" <<<"$r" || return 1
		grep -qx "$t 10.244.2.0/24 $i2 active" <<<"$r" || return 1
		grep -qx "$t 10.244.3.0/24 $eni3 active" <<<"$r" || return 1
	done
}
if wait_until 30 want_routes; then ok "three Nodes' routes are in both cluster-tagged route tables"
else fail "routes in both cluster-tagged tables" "$(routes)"; fi
r=$(routes)
if grep -q "^$rtA 10.244.3.0/24 $eni3 active" <<<"$r" && ! grep -q "$iold" <<<"$r"; then
	ok "the blackholed route is replaced by the Node's"
else fail "the blackholed route is replaced" "$r"; fi
if grep -q "^$rtA 10.244.3.0/24 $eni3" <<<"$r"; then ok "a two-interface instance is routed through its primary interface"
else fail "a two-interface instance is routed through its primary interface" "$r"; fi
if ! grep -q "^$rtU 10.244" <<<"$r" && ! grep -q "^$rtO 10.244" <<<"$r"; then
	ok "untagged and other clusters' route tables are left alone"
else fail "untagged and other clusters' tables are left alone" "$r"; fi
if grep -qx "$rtA 0.0.0.0/0 $igw active" <<<"$r" && grep -qx "$rtB 10.244.99.0/24 $iforeign active" <<<"$r" &&
	grep -qx "$rtB 192.168.7.0/24 $i1 active" <<<"$r"; then
	ok "routes of other origins (gateway, another cluster's instance, outside the cluster CIDR) are left alone"
else fail "routes of other origins are left alone" "$r"; fi
sdc=$(moto_py "
i = ec2.describe_instances(InstanceIds=['$i1', '$i2', '$i3'])['Reservations']
out = []
for res in i:
    for x in res['Instances']:
        prim = [e for e in x['NetworkInterfaces'] if e['Attachment']['DeviceIndex'] == 0][0]
        out.append(str(x['SourceDestCheck'] if len(x['NetworkInterfaces']) == 1 else prim['SourceDestCheck']))
print(' '.join(sorted(out)))")
if [ "$sdc" = "False False False" ]; then ok "the source/destination check is off on the three instances"
else fail "the source/destination check is off" "$sdc"; fi

cond() { node_py "$1" "[(c['status'], c['reason']) for c in n['status']['conditions'] if c['type'] == 'NetworkUnavailable']"; }
routed_cond() { [ "$(cond "$1")" = "[('False', 'RouteCreated')]" ]; }
if wait_until 10 routed_cond "$d1" && routed_cond "$d2" && routed_cond "$d3"; then
	ok "the routed Nodes get NetworkUnavailable=False (RouteCreated), as upstream"
else fail "NetworkUnavailable condition" "$(cond "$d1") $(cond "$d2") $(cond "$d3")"; fi

# steady state: one DescribeRouteTables per pass and nothing else
sleep 1
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
sleep 5
read -r drt all < <(tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys
c = json.load(sys.stdin)
print(c["counts"].get("ec2:DescribeRouteTables", 0), c["total"])')
# a pass every 1 s (period counted from the end of the last pass): 3 to 6 in 5 s
if [ "$drt" -ge 3 ] && [ "$drt" -le 6 ] && [ "$all" = "$drt" ]; then ok "steady state: $drt passes in 5 s cost one DescribeRouteTables each and nothing else"
else fail "steady state route passes" "$(tb_json "$FAULTPROXY_URL/_control/calls?log=0" | tr -d '\n ')"; fi

# deleting a Node removes its routes from both tables (its instance still runs)
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc delete node "$d2" >/dev/null
no_n2() { ! routes | grep -q "10.244.2.0/24"; }
if wait_until 15 no_n2; then ok "deleting a Node removes its routes from both tables"
else fail "deleting a Node removes its routes" "$(routes)"; fi
if want_n1() { routes | grep -c "10.244.1.0/24 $i1 active" | grep -qx 2; }; want_n1; then
	ok "the other Nodes' routes stay"; else fail "the other Nodes' routes stay" "$(routes)"; fi
di=$(calls DescribeInstances)
# exactly one: the pass that finds the routes to n2's instance (in both tables) without a Node
# describes that instance once (ccm_route.c: the orphans' IDs, deduplicated); it deletes them
# in the same pass, and the other orphan (another cluster's instance) is known to be foreign
if [ "$di" = 1 ]; then ok "the deletion pass described the orphaned instance once ($di DescribeInstances)"
else fail "DescribeInstances of the deletion (want exactly 1)" "$di"; fi

# a new podCIDR on a Node moves its route (replace), a Node without providerID is skipped
kc patch node "$d1" --type=merge -p '{"spec":{"podCIDR":"10.244.11.0/24","podCIDRs":["10.244.11.0/24"]}}' >/dev/null 2>&1
moved() { r=$(routes); grep -q "10.244.11.0/24 $i1 active" <<<"$r" && ! grep -q "10.244.1.0/24" <<<"$r"; }
if wait_until 15 moved; then ok "a changed podCIDR moves the Node's routes"; else fail "a changed podCIDR moves the routes" "$(routes)"; fi
# a failing CreateRoute: a warning event on the Node, NetworkUnavailable=True (NoRouteCreated),
# then the retry creates it and the condition turns False
read -r i4 d4 < <(instance n4)
tb_post "$FAULTPROXY_URL/_control/faults" '{"service":"ec2","action":"CreateRoute","effect":"error","status":400,"code":"InvalidParameterValue","message":"injected","count":2}' >/dev/null
node_create "$d4" "" 10.244.4.0/24
evr() { kc get events -A -o json | python3 -c "
import json, sys
print(any(e['involvedObject']['name'] == '$d4' and e['reason'] == 'FailedToCreateRoute' for e in json.load(sys.stdin)['items']))" | grep -qx True; }
if wait_until 15 evr; then ok "a failed CreateRoute is a FailedToCreateRoute event on the Node"; else fail "FailedToCreateRoute event"; fi
n4_routed() { [ "$(routes | grep -c "10.244.4.0/24 $i4 active")" = 2 ]; }
if wait_until 20 n4_routed && wait_until 10 routed_cond "$d4"; then
	ok "the retry creates the route and NetworkUnavailable turns False"
else fail "retry after a failed CreateRoute" "$(cond "$d4") $(routes | grep 10.244.4)"; fi
tb_delete "$FAULTPROXY_URL/_control/faults" >/dev/null

node_create pending-node "" 10.244.50.0/24
sleep 3
if ! routes | grep -q 10.244.50.0/24 && grep -q "route pass done" "$T_TMP/ccm1.log"; then
	ok "a Node whose instance is not known yet gets no route, and the pass goes on"
else fail "a Node without an instance is skipped" "$(routes)"; fi
if kill -0 "$(cat "$T_TMP/ccm1.pid")" 2>/dev/null; then ok "the ccm is still running"; else fail "the ccm is still running"; fi
ccm_stop_check ccm1
t_summary
