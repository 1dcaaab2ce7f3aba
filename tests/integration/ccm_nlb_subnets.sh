#!/usr/bin/env bash
# tests: product
# (runs $AWS_K8S ccm through ccm_start in ccm_lib.sh)
# aws-k8s ccm: the subnets of an existing network load balancer, against moto behind the fault
# proxy. Upstream never changes them; AWS adds subnets in new zones (SetSubnets naming every
# subnet the NLB has, plus the new ones) but cannot remove one, replace a zone's subnet or give
# an existing subnet an elastic IP. So: a subnet in a new zone named by the subnets annotation
# is added (one SetSubnets, an UpdatedLoadBalancer Event, nothing re-created); removing one,
# replacing a zone's subnet and adding eip-allocations are refused with a SubnetChangeRefused
# Warning Event naming what AWS cannot do, the NLB keeps its subnets, and the rest of the sync
# goes on (a new Node is still registered); deleting leaves nothing. Also NLBSecurityGroupMode:
# another value than Managed stops the ccm at start; with Managed the NLB gets a group of its own
# (the mode itself: ccm_nlb_sg.sh).
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi
# the default VPC's subnets of zones a, b, c, and a second subnet in zone a; three EIPs
read -r sa sb sc sa2 e1 e2 e3 < <(moto_py "
vpc = ec2.describe_vpcs(Filters=[{'Name': 'is-default', 'Values': ['true']}])['Vpcs'][0]['VpcId']
igw = ec2.create_internet_gateway()['InternetGateway']['InternetGatewayId']
ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
main = ec2.describe_route_tables(Filters=[{'Name': 'vpc-id', 'Values': [vpc]}, {'Name': 'association.main', 'Values': ['true']}])['RouteTables'][0]
ec2.create_route(RouteTableId=main['RouteTableId'], DestinationCidrBlock='0.0.0.0/0', GatewayId=igw)
by_zone = {s['AvailabilityZone']: s['SubnetId'] for s in ec2.describe_subnets(Filters=[{'Name': 'vpc-id', 'Values': [vpc]}])['Subnets']}
a2 = ec2.create_subnet(VpcId=vpc, CidrBlock='172.31.200.0/24', AvailabilityZone='us-east-1a')['Subnet']['SubnetId']
eips = [ec2.allocate_address(Domain='vpc')['AllocationId'] for _ in range(3)]
print(by_zone['us-east-1a'], by_zone['us-east-1b'], by_zone['us-east-1c'], a2, *eips)")
ids=()
for n in 1 2; do
	read -r id dns < <(instance "n$n")
	ids+=("$id")
	node_create "$dns" "aws:///us-east-1a/$id"
done
read -r i3 d3 < <(instance n3)
# NLBSecurityGroupMode: another value than Managed is refused at start as upstream refuses it;
# Managed is accepted (the NLB gets a security group of its own)
printf 'NLBSecurityGroupMode = managed\n' | cat "$CCM_CONFIG" - >"$T_TMP/bad-config"
out=$(timeout 20 "$AWS_K8S" ccm --cloud-provider=aws --cloud-config="$T_TMP/bad-config" --kubeconfig="$KC" \
	--bind-address=127.0.0.1 --secure-port="$(free_port)" 2>&1)
rc=$?
[ "$rc" = 1 ] && grep -q 'invalid NLB security group mode: .*managed.*Expected: .*Managed' <<<"$out" &&
	ok "NLBSecurityGroupMode = managed: the ccm exits 1 with upstream's message" || fail "invalid NLBSecurityGroupMode refused" "rc $rc: $(tail -3 <<<"$out")"
printf 'NLBSecurityGroupMode = Managed\n' >>"$CCM_CONFIG"
ccm_start ccm1 --leader-elect-lease-duration=30s --leader-elect-renew-deadline=20s \
	--leader-elect-retry-period=2s || fail "ccm starts" "$(tail -5 "$T_TMP/ccm1.log")"

ANN=service.beta.kubernetes.io/aws-load-balancer
kc create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Service","metadata":{"name":"sn","namespace":"default","annotations":{
  "$ANN-type":"nlb", "$ANN-subnets":"$sa,$sb"}},
 "spec":{"type":"LoadBalancer","ports":[{"name":"http","port":80,"nodePort":30080,"protocol":"TCP"}]}}
EOF
lb="a$(kc get svc sn -o jsonpath='{.metadata.uid}' | tr -d - | cut -c1-31)"
has_host() { [ -n "$(kc get svc sn -o jsonpath='{.status.loadBalancer.ingress[0].hostname}')" ]; }
lb_subnets() { moto_py "
lbs = [l for l in elbv2.describe_load_balancers()['LoadBalancers'] if l['LoadBalancerName'] == '$lb']
print(len(lbs), sorted(z['SubnetId'] for z in lbs[0]['AvailabilityZones']) if lbs else [])"; }
sorted_list() { python3 -c "import sys; print(sorted(sys.argv[1:]))" "$@"; }
events() { kc get events -o json | python3 -c "
import json, sys
print(' | '.join('%s: %s' % (e['reason'], e['message']) for e in json.load(sys.stdin)['items'] if e['involvedObject']['name'] == 'sn'))"; }
count_of() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys
c = json.load(sys.stdin)["counts"]
print(sum(v for k, v in c.items() if k.endswith(":" + sys.argv[1])))' "$1"; }
n_refused() { events | grep -o "SubnetChangeRefused: [^|]*" | grep -c "$1"; }
refused() { [ "$(n_refused "$1")" -ge 1 ]; }

if wait_until 60 has_host; then ok "an NLB is made in the two subnets the annotation names"
else fail "NLB made" "$(events) $(tail -5 "$T_TMP/ccm1.log")"; fi
[ "$(lb_subnets)" = "1 $(sorted_list "$sa" "$sb")" ] && ok "... in exactly those" || fail "NLB subnets" "$(lb_subnets)"
! grep -q "not implemented" "$T_TMP/ccm1.log" &&
	[ "$(moto_py "print(len(elbv2.describe_load_balancers(Names=['$lb'])['LoadBalancers'][0].get('SecurityGroups', [])))")" = 1 ] &&
	ok "NLBSecurityGroupMode = Managed: the NLB is made with a security group" ||
	fail "NLBSecurityGroupMode = Managed gives the NLB a group" "$(grep -i nlbsecurity "$T_TMP/ccm1.log")"

# --- a subnet in a new zone is added in place ---------------------------------------------------
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc annotate --overwrite svc sn "$ANN-subnets=$sa,$sb,$sc" >/dev/null
three() { [ "$(lb_subnets)" = "1 $(sorted_list "$sa" "$sb" "$sc")" ]; }
if wait_until 30 three; then ok "a subnet in a new zone named by the annotation is added to the NLB"
else fail "subnet added" "$(lb_subnets) $(events)"; fi
sleep 1
got=$(count_of SetSubnets):$(count_of CreateLoadBalancer):$(count_of DeleteLoadBalancer)
[ "$got" = "1:0:0" ] && ok "... with one SetSubnets, nothing re-created (SetSubnets:Create:Delete $got)" || fail "SetSubnets calls" "$got"
grep -q "UpdatedLoadBalancer: Added subnets $sc to the load balancer" <<<"$(events)" && ok "... and an UpdatedLoadBalancer Event naming it" ||
	fail "UpdatedLoadBalancer Event" "$(events)"

# --- removing one is refused; the rest of the sync goes on ---------------------------------------
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc annotate --overwrite svc sn "$ANN-subnets=$sa,$sb" >/dev/null
if wait_until 30 refused "subnet $sc (us-east-1c) cannot be removed"; then ok "removing a subnet gives a SubnetChangeRefused Event naming it"
else fail "removal refused" "$(events)"; fi
three && [ "$(count_of SetSubnets)" = 0 ] && ok "... and the NLB keeps its three subnets (no SetSubnets)" || fail "subnets kept" "$(lb_subnets) $(count_of SetSubnets)"
node_create "$d3" "aws:///us-east-1a/$i3"
targets() { moto_py "
lb = elbv2.describe_load_balancers(Names=['$lb'])['LoadBalancers'][0]
arn = elbv2.describe_listeners(LoadBalancerArn=lb['LoadBalancerArn'])['Listeners'][0]['DefaultActions'][0]['TargetGroupArn']
print(sorted(d['Target']['Id'] for d in elbv2.describe_target_health(TargetGroupArn=arn)['TargetHealthDescriptions']))"; }
want3=$(sorted_list "${ids[@]}" "$i3")
registered() { [ "$(targets)" = "$want3" ]; }
if wait_until 30 registered; then ok "while the subnet change is refused, a new Node is still registered"
else fail "Node registered during a refusal" "$(targets) want $want3"; fi

# --- another subnet in a zone the NLB has is refused --------------------------------------------
kc annotate --overwrite svc sn "$ANN-subnets=$sa2,$sb,$sc" >/dev/null
if wait_until 30 refused "zone us-east-1a has subnet $sa, which cannot be replaced by $sa2"; then
	ok "replacing a zone's subnet gives a SubnetChangeRefused Event naming both"
else fail "zone replacement refused" "$(events)"; fi
three && ok "... and the NLB keeps its subnets" || fail "subnets kept after a zone replacement" "$(lb_subnets)"

# --- elastic IPs for subnets it has are refused ------------------------------------------------
kc annotate --overwrite svc sn "$ANN-subnets=$sa,$sb,$sc" "$ANN-eip-allocations=$e1,$e2,$e3" >/dev/null
if wait_until 30 refused "the elastic IP of subnet [^ ]* cannot be changed (none, wanted eipalloc-"; then
	ok "elastic IPs for the subnets it has give a SubnetChangeRefused Event"
else fail "EIPs refused" "$(events)"; fi
[ "$(count_of SetSubnets)" = 0 ] && [ "$(count_of CreateLoadBalancer)" = 0 ] && ok "no SetSubnets and no new NLB for any refused change" ||
	fail "calls of the refused changes" "SetSubnets $(count_of SetSubnets) CreateLoadBalancer $(count_of CreateLoadBalancer)"

# --- delete -------------------------------------------------------------------------------------
kc delete svc sn --wait=false >/dev/null
gone() { ! kc get svc sn >/dev/null 2>&1; }
wait_until 40 gone || fail "the Service is deleted" "$(tail -5 "$T_TMP/ccm1.log")"
got=$(moto_py "print(len(elbv2.describe_load_balancers()['LoadBalancers']), len(elbv2.describe_target_groups()['TargetGroups']))")
[ "$got" = "0 0" ] && ok "deleting the Service leaves no load balancer and no target group" || fail "nothing left" "$got"

[ "$T_FAIL" = 0 ] || grep -E '^[EW]' "$T_TMP/ccm1.log" | head -20
ccm_stop_check ccm1
t_summary
