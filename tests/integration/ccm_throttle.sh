#!/usr/bin/env bash
# tests: product
# (runs $AWS_K8S ccm through ccm_start in ccm_lib.sh)
# parallel: no (counts calls early and late in a 30 s throttling window: other programs on the cores shift that window)
# AWS throttles every EC2 call for 30 seconds (RequestLimitExceeded from the fault proxy) while
# three Nodes join: the ccm slows down (fewer calls at the end of the window than at its
# start, a bounded total), changes nothing half-way, and once the throttling stops it
# initializes every Node and creates every route.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

WINDOW=${CCM_THROTTLE_SECONDS:-30}
if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi
read -r i1 d1 < <(instance n1)
read -r i2 d2 < <(instance n2)
read -r i3 d3 < <(instance n3)
read -r rt < <(moto_py "
vpc = ec2.describe_vpcs()['Vpcs'][0]['VpcId']
print(ec2.create_route_table(VpcId=vpc, TagSpecifications=[{'ResourceType': 'route-table',
    'Tags': [{'Key': 'kubernetes.io/cluster/c1', 'Value': 'owned'}]}])['RouteTable']['RouteTableId'])")
ccm_start ccm1 --allocate-node-cidrs=true --cluster-cidr=10.244.0.0/16 \
	--route-reconciliation-period=2s || fail "ccm starts"
sleep 1

tb_post "$FAULTPROXY_URL/_control/faults" "{\"service\":\"ec2\",\"effect\":\"throttle\",\"duration\":$WINDOW}" >/dev/null
t0=$(date +%s.%N)
node_create "$d1" "" 10.244.1.0/24
node_create "$d2" "" 10.244.2.0/24
node_create "$d3" "" 10.244.3.0/24

sleep $((WINDOW - 3))
tainted=0
for n in "$d1" "$d2" "$d3"; do
	[ "$(node_py "$n" "'node.cloudprovider.kubernetes.io/uninitialized' in taints and not n['spec'].get('providerID')")" = True ] && tainted=$((tainted + 1))
done
if [ $tainted = 3 ]; then ok "while throttled, no Node is initialized half-way (taint on, no providerID)"
else fail "no Node initialized half-way while throttled" "$tainted of 3"; fi
nroutes=$(moto_py "print(sum(1 for r in ec2.describe_route_tables(RouteTableIds=['$rt'])['RouteTables'][0]['Routes'] if r.get('InstanceId')))")
if [ "$nroutes" = 0 ]; then ok "while throttled, no route is created"; else fail "no route while throttled" "$nroutes"; fi
sleep 3

third=$(python3 -c "print($WINDOW / 3)")
early=$(calls_between "$t0" "$(python3 -c "print($t0 + $third)")")
late=$(calls_between "$(python3 -c "print($t0 + 2 * $third)")" "$(python3 -c "print($t0 + $WINDOW)")")
total=$(calls_between "$t0" "$(python3 -c "print($t0 + $WINDOW)")")
t_di=$(calls_between "$t0" "$(python3 -c "print($t0 + $WINDOW)")" DescribeInstances)
t_drt=$(calls_between "$t0" "$(python3 -c "print($t0 + $WINDOW)")" DescribeRouteTables)
if [ "$late" -lt "$early" ]; then ok "the ccm slows down under throttling ($early calls in the first third, $late in the last)"
else fail "the ccm slows down under throttling" "first third $early, last third $late"; fi
# at least: the cloud-node controller's one worker reconciles each of the three Nodes once
# (a reconcile takes under 3 s: the client's 3 attempts, retried after less than 1 s then 2 s,
# the retry quota holds 100 retries), each a throttled DescribeInstances tried 3 times: 9; and
# one route pass (DescribeRouteTables tried 3 times). With a window under 12 s, one of each.
min_di=9 min_drt=3
[ "$WINDOW" -lt 12 ] && min_di=3 min_drt=1
if [ "$total" -le $((WINDOW * 4)) ] && [ "$t_di" -ge $min_di ] && [ "$t_drt" -ge $min_drt ]; then
	ok "a bounded number of calls while throttled ($total in $WINDOW s: $t_di DescribeInstances, $t_drt DescribeRouteTables)"
else fail "calls while throttled (at most $((WINDOW * 4)), at least $min_di DescribeInstances and $min_drt DescribeRouteTables)" \
	"$total in $WINDOW s: $t_di DescribeInstances, $t_drt DescribeRouteTables"; fi

done_all() {
	for n in "$d1" "$d2" "$d3"; do
		[ "$(node_py "$n" "'node.cloudprovider.kubernetes.io/uninitialized' not in taints and bool(n['spec'].get('providerID')) and len(labels) >= 7 and len(addrs) >= 4")" = True ] || return 1
	done
}
t1=$(date +%s.%N)
if wait_until 90 done_all; then ok "after the throttling every Node is initialized (in $(python3 -c "print(round($(date +%s.%N) - $t1, 1))") s)"
else fail "every Node initialized after the throttling"; fi
routes_ok() { moto_py "
t = ec2.describe_route_tables(RouteTableIds=['$rt'])['RouteTables'][0]
got = sorted((r['DestinationCidrBlock'], r.get('InstanceId'), r['State']) for r in t['Routes'] if r.get('InstanceId'))
want = sorted([('10.244.1.0/24', '$i1', 'active'), ('10.244.2.0/24', '$i2', 'active'), ('10.244.3.0/24', '$i3', 'active')])
print(got == want)" | grep -qx True; }
if wait_until 60 routes_ok; then ok "after the throttling exactly the three routes exist"
else fail "the three routes after the throttling"; fi
sdc=$(moto_py "print(sorted(str(x['SourceDestCheck']) for r in ec2.describe_instances(InstanceIds=['$i1','$i2','$i3'])['Reservations'] for x in r['Instances']))")
if [ "$sdc" = "['False', 'False', 'False']" ]; then ok "the source/destination check is off on the three instances"
else fail "source/destination check after the throttling" "$sdc"; fi
m=$(curl -sk "https://127.0.0.1:$CCM_PORT_ccm1/metrics")
if grep -q '^cloudprovider_aws_api_throttled_requests_total{operation_name="DescribeInstances"} [1-9]' <<<"$m"; then
	ok "the throttled calls are counted in cloudprovider_aws_api_throttled_requests_total"
else fail "throttled calls counted" "$(grep throttled <<<"$m" | head -3)"; fi
if grep -q '^workqueue_retries_total{name="cloud-node"} [1-9]' <<<"$m"; then ok "the cloud-node workqueue retried with backoff"
else fail "cloud-node workqueue retries" "$(grep workqueue_retries <<<"$m")"; fi
ccm_stop_check ccm1
t_summary
