#!/usr/bin/env bash
# tests: product
# (runs $AWS_K8S ccm through ccm_start in ccm_lib.sh)
# parallel: no (counts the calls of a throttling window: other programs on the cores shift it)
# aws-k8s ccm's service controller when AWS fails it half-way, against moto behind the fault
# proxy:
#   1. every ELB, ELBv2 and EC2 call is throttled (Throttling / RequestLimitExceeded) for a
#      window while an NLB Service and a classic-ELB Service are created: nothing completes in
#      the window, the controller backs off (a bounded number of calls, the workqueue's retries
#      counted), and afterwards each is complete with exactly one load balancer, one target
#      group per port, one security group and one node rule: no duplicate;
#   2. the ccm is killed (SIGKILL) in the middle of creating an NLB (after the load balancer and
#      one target group; after every target group, before the listeners), and of creating a
#      classic ELB (after its security group); a reply lost on the way back (the call made in
#      moto, the connection cut); restarted, it adopts what exists (no second
#      CreateLoadBalancer, only the missing target groups), finishes, and leaves no duplicate;
#   3. deleting the Services afterwards leaves nothing in moto.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

WINDOW=${CCM_LB_THROTTLE_SECONDS:-20}
if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi
read -r nodesg < <(moto_py "
vpc = ec2.describe_vpcs(Filters=[{'Name': 'is-default', 'Values': ['true']}])['Vpcs'][0]['VpcId']
igw = ec2.create_internet_gateway()['InternetGateway']['InternetGatewayId']
ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
main = ec2.describe_route_tables(Filters=[{'Name': 'vpc-id', 'Values': [vpc]}, {'Name': 'association.main', 'Values': ['true']}])['RouteTables'][0]
ec2.create_route(RouteTableId=main['RouteTableId'], DestinationCidrBlock='0.0.0.0/0', GatewayId=igw)
print(ec2.create_security_group(GroupName='nodes', Description='nodes', VpcId=vpc, TagSpecifications=[
    {'ResourceType': 'security-group', 'Tags': [{'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])['GroupId'])")
ids=()
for n in 1 2 3; do
	read -r id dns < <(instance "n$n" "SecurityGroupIds=['$nodesg']")
	ids+=("$id")
	node_create "$dns" "aws:///us-east-1a/$id"
done
want_ids=$(python3 -c "import sys; print(sorted(sys.argv[1:]))" "${ids[@]}")

# Without leader election a restarted ccm starts at once (a killed one keeps its lease).
CCM_N=0
ccm_up() {
	CCM_N=$((CCM_N + 1))
	ccm_start "ccm$CCM_N" --leader-elect=false || fail "ccm$CCM_N starts" "$(tail -5 "$T_TMP/ccm$CCM_N.log")"
}
ccm_kill() {
	kill -KILL "$(cat "$T_TMP/ccm$CCM_N.pid")" 2>/dev/null
	wait_exit "$(cat "$T_TMP/ccm$CCM_N.pid")" 10
}

# svc NAME TYPE(nlb|classic) PORT... : a LoadBalancer Service, NodePort = 30000 + port
svc() {
	local name=$1 type=$2 ann="" ports="" p
	shift 2
	[ "$type" = nlb ] && ann='"service.beta.kubernetes.io/aws-load-balancer-type":"nlb"'
	for p in "$@"; do ports="$ports${ports:+,}{\"name\":\"p$p\",\"port\":$p,\"nodePort\":$((30000 + p)),\"protocol\":\"TCP\"}"; done
	kc create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Service","metadata":{"name":"$name","namespace":"default","annotations":{$ann}},
 "spec":{"type":"LoadBalancer","ports":[$ports]}}
EOF
}
uid_lb() { echo "a$(kc get svc "$1" -o jsonpath='{.metadata.uid}' | tr -d - | cut -c1-31)"; }
hostname_of() { kc get svc "$1" -o jsonpath='{.status.loadBalancer.ingress[0].hostname}' 2>/dev/null; }
has_host() { [ -n "$(hostname_of "$1")" ]; }
# upstream's target-group name for default/NAME, port, NodePort 30000+port, TCP, hc TCP 30
tg_name() { python3 -c "
import hashlib, re, sys
name, port = sys.argv[1:]
h = hashlib.sha1(''.join(['$CLUSTER', 'default', name, port, str(30000 + int(port)), 'TCP', 'instance', 'TCP', '30']).encode()).hexdigest()
print('k8s-default-%s-%s' % (re.sub('[^A-Za-z0-9]', '', name)[:8], h[:10]))" "$@"; }
# nlb_state LB NAME PORT...: "LBS TGS LISTENERS OK" where LBS counts the NLBs of that name, TGS
# the target groups of each wanted name (all must be 1), LISTENERS the listeners, OK whether
# each listener forwards to its port's group, which holds the three instances
nlb_state() {
	local lb=$1 name=$2
	shift 2
	local want="" p
	for p in "$@"; do want="$want $p:$(tg_name "$name" "$p")"; done
	moto_py "
want = dict(x.split(':') for x in '$want'.split())
lbs = [l for l in elbv2.describe_load_balancers()['LoadBalancers'] if l['LoadBalancerName'] == '$lb']
tgs = elbv2.describe_target_groups()['TargetGroups']
counts = sorted(set(sum(1 for t in tgs if t['TargetGroupName'] == n) for n in want.values()))
ls = elbv2.describe_listeners(LoadBalancerArn=lbs[0]['LoadBalancerArn'])['Listeners'] if len(lbs) == 1 else []
by_arn = {t['TargetGroupArn']: t for t in tgs}
ok = len(ls) == len(want) and all(
    by_arn[l['DefaultActions'][0]['TargetGroupArn']]['TargetGroupName'] == want[str(l['Port'])] and
    str(sorted(d['Target']['Id'] for d in elbv2.describe_target_health(TargetGroupArn=l['DefaultActions'][0]['TargetGroupArn'])['TargetHealthDescriptions'])) == \"$want_ids\"
    for l in ls)
print(len(lbs), counts, len(ls), ok)"
}
# elb_state LB: "ELBS SGS LISTENERS INSTANCES_OK ATTACHED NODE_RULES" for the classic ELB LB
elb_state() { moto_py "
lbs = [l for l in elb.describe_load_balancers()['LoadBalancerDescriptions'] if l['LoadBalancerName'] == '$1']
sgs = [g['GroupId'] for g in ec2.describe_security_groups()['SecurityGroups'] if g['GroupName'] == 'k8s-elb-$1']
node = ec2.describe_security_groups(GroupIds=['$nodesg'])['SecurityGroups'][0]
refs = sum(1 for p in node['IpPermissions'] for g in p.get('UserIdGroupPairs', []) if g['GroupId'] in sgs)
l = lbs[0] if len(lbs) == 1 else {}
print(len(lbs), len(sgs), len(l.get('ListenerDescriptions', [])),
      str(sorted(i['InstanceId'] for i in l.get('Instances', []))) == \"$want_ids\", l.get('SecurityGroups') == sgs, refs)"; }
count_of() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys
print(json.load(sys.stdin)["counts"].get(sys.argv[1], 0))' "$1"; }
# rule_applied ACTION: how often the fault rules on ACTION were applied
rule_applied() { tb_json "$FAULTPROXY_URL/_control/faults" | python3 -c '
import json, sys
print(sum(r.get("applied", 0) for r in json.load(sys.stdin)["rules"] if r.get("action") == sys.argv[1]))' "$1"; }
applied_once() { [ "$(rule_applied "$1")" -ge 1 ]; }
metric() { curl -sk "https://127.0.0.1:$(eval echo "\$CCM_PORT_ccm$CCM_N")/metrics" | grep "^$1" | awk '{s += $2} END {print s + 0}'; }

# --- 1. throttling during a create -----------------------------------------------------------
ccm_up
sleep 1
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
fault "{\"service\":[\"elb\",\"elbv2\",\"ec2\"],\"effect\":\"throttle\",\"duration\":$WINDOW}"
t0=$(date +%s.%N)
svc thr-nlb nlb 80 443
svc thr-elb classic 80 443
nlb_lb=$(uid_lb thr-nlb) elb_lb=$(uid_lb thr-elb)
sleep $((WINDOW - 4))
if ! has_host thr-nlb && ! has_host thr-elb; then ok "while throttled, neither Service gets a status"
else fail "no status while throttled" "nlb '$(hostname_of thr-nlb)' elb '$(hostname_of thr-elb)'"; fi
got=$(moto_py "print(len(elbv2.describe_load_balancers()['LoadBalancers']), len(elb.describe_load_balancers()['LoadBalancerDescriptions']))")
[ "$got" = "0 0" ] && ok "while throttled, no load balancer is made" || fail "no load balancer while throttled" "$got"
sleep 4
window_calls=$(calls_between "$t0" "$(python3 -c "print($t0 + $WINDOW)")")
faulted=$(tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c 'import json,sys; print(json.load(sys.stdin)["faulted"])')
# A reconcile whose first call is throttled costs the client's 3 attempts (about 1 s and 2 s
# apart), then the workqueue waits: two Services make a few dozen calls in the window, not
# the thousands of a loop without backoff.
if [ "$window_calls" -ge 6 ] && [ "$window_calls" -le $((WINDOW * 4)) ] && [ "$faulted" -ge 6 ]; then
	ok "the controller backs off while throttled ($window_calls calls in $WINDOW s, $faulted throttled)"
else fail "calls while throttled (6 to $((WINDOW * 4)))" "$window_calls calls, $faulted throttled"; fi
if wait_until 120 has_host thr-nlb && wait_until 60 has_host thr-elb; then
	ok "after the throttling both Services get their hostname (in $(python3 -c "print(round($(date +%s.%N) - $t0 - $WINDOW, 1))") s)"
else fail "both Services complete after the throttling" "$(grep -E '^[EW]' "$T_TMP/ccm$CCM_N.log" | tail -5)"; fi
got=$(nlb_state "$nlb_lb" thr-nlb 80 443)
[ "$got" = "1 [1] 2 True" ] && ok "NLB: one load balancer, one target group per port (each name once), two listeners to them with the three instances" ||
	fail "NLB complete, no duplicate" "$got"
got=$(elb_state "$elb_lb")
[ "$got" = "1 1 2 True True 1" ] && ok "classic ELB: one load balancer, one security group k8s-elb-<name> attached, two listeners, the three instances, one node rule" ||
	fail "classic ELB complete, no duplicate" "$got"
r=$(metric 'workqueue_retries_total{name="service"}')
t=$(metric 'cloudprovider_aws_api_throttled_requests_total')
[ "$r" -ge 2 ] && [ "$t" -ge 2 ] && ok "the service workqueue retried with backoff ($r retries; $t throttled calls counted)" ||
	fail "workqueue retries and throttled calls counted" "retries $r throttled $t"
got=$(count_of elbv2:CreateLoadBalancer):$(count_of elb:CreateLoadBalancer):$(count_of ec2:CreateSecurityGroup)
[ "$got" = "1:1:1" ] && ok "each create call reached AWS once (CreateLoadBalancer NLB, ELB, CreateSecurityGroup: $got)" ||
	fail "one create call each" "$got"

# --- 2. killed in the middle --------------------------------------------------------------
# kill_during NAME TYPE RULE ACTION: the rule makes ACTION hang; once it has, the ccm is killed
kill_during() {
	local name=$1 type=$2 rule=$3 action=$4
	tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
	fault "$rule"
	svc "$name" "$type" 80 443 8080
	if wait_until 60 applied_once "$action"; then
		ccm_kill
		clear_faults
		peer ok "$name: the ccm hangs in $action and is killed (SIGKILL)"
	else
		clear_faults
		peer fail "$name: the ccm reaches $action" "$(tail -5 "$T_TMP/ccm$CCM_N.log")"
	fi
	tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
}
lb_tgs() { moto_py "
lbs = [l for l in elbv2.describe_load_balancers()['LoadBalancers'] if l['LoadBalancerName'] == '$1']
ls = elbv2.describe_listeners(LoadBalancerArn=lbs[0]['LoadBalancerArn'])['Listeners'] if lbs else []
print(len(lbs), sum(1 for t in elbv2.describe_target_groups()['TargetGroups'] if t['TargetGroupName'].startswith('k8s-default-$2-')), len(ls))"; }

# a: after the load balancer and the first target group
kill_during kill-a nlb '{"service":"elbv2","action":"CreateTargetGroup","effect":"hang","skip":1,"count":1,"seconds":60}' CreateTargetGroup
ka=$(uid_lb kill-a)
got=$(lb_tgs "$ka" killa)
[ "$got" = "1 1 0" ] && ok "kill-a: killed with the NLB and one target group made, no listener" || fail "kill-a state at the kill" "$got"
ccm_up
if wait_until 60 has_host kill-a; then ok "kill-a: the restarted ccm finishes the NLB"
else fail "kill-a finished" "$(grep -E '^[EW]' "$T_TMP/ccm$CCM_N.log" | tail -5)"; fi
got=$(nlb_state "$ka" kill-a 80 443 8080)
[ "$got" = "1 [1] 3 True" ] && ok "kill-a: one NLB, one target group per port, three listeners: no duplicate" || fail "kill-a no duplicate" "$got"
got=$(count_of elbv2:CreateLoadBalancer):$(count_of elbv2:CreateTargetGroup)
[ "$got" = "0:2" ] && ok "kill-a: the NLB and the group made before the kill are adopted (0 CreateLoadBalancer, 2 CreateTargetGroup)" ||
	fail "kill-a adopted" "CreateLoadBalancer:CreateTargetGroup $got"

# b: after every target group, before the first listener
kill_during kill-b nlb '{"service":"elbv2","action":"CreateListener","effect":"hang","count":1,"seconds":60}' CreateListener
kb=$(uid_lb kill-b)
got=$(lb_tgs "$kb" killb)
[ "$got" = "1 3 0" ] && ok "kill-b: killed with the NLB and its three target groups made, no listener" || fail "kill-b state at the kill" "$got"
ccm_up
if wait_until 60 has_host kill-b; then ok "kill-b: the restarted ccm finishes the NLB"
else fail "kill-b finished" "$(grep -E '^[EW]' "$T_TMP/ccm$CCM_N.log" | tail -5)"; fi
got=$(nlb_state "$kb" kill-b 80 443 8080)
[ "$got" = "1 [1] 3 True" ] && ok "kill-b: one NLB, one target group per port, three listeners: no duplicate" || fail "kill-b no duplicate" "$got"
got=$(count_of elbv2:CreateLoadBalancer):$(count_of elbv2:CreateTargetGroup):$(count_of elbv2:CreateListener)
[ "$got" = "0:0:3" ] && ok "kill-b: the groups are adopted by name (0 CreateLoadBalancer, 0 CreateTargetGroup, 3 CreateListener)" ||
	fail "kill-b adopted" "CreateLoadBalancer:CreateTargetGroup:CreateListener $got"

# c: a classic ELB, after its security group
kill_during kill-c classic '{"service":"elb","action":"CreateLoadBalancer","effect":"hang","count":1,"seconds":60}' CreateLoadBalancer
kc_lb=$(uid_lb kill-c)
got=$(elb_state "$kc_lb")
[ "${got%% *}" = 0 ] && [ "$(cut -d' ' -f2 <<<"$got")" = 1 ] && ok "kill-c: killed with the ELB's security group made, no ELB" || fail "kill-c state at the kill" "$got"
ccm_up
if wait_until 60 has_host kill-c; then ok "kill-c: the restarted ccm finishes the classic ELB"
else fail "kill-c finished" "$(grep -E '^[EW]' "$T_TMP/ccm$CCM_N.log" | tail -5)"; fi
got=$(elb_state "$kc_lb")
[ "$got" = "1 1 3 True True 1" ] && ok "kill-c: one ELB with the one security group (adopted), three listeners, one node rule" || fail "kill-c no duplicate" "$got"
[ "$(count_of ec2:CreateSecurityGroup)" = 0 ] && ok "kill-c: no CreateSecurityGroup after the restart" || fail "kill-c security group adopted" "$(count_of ec2:CreateSecurityGroup)"

# d: replies lost: CreateLoadBalancer and a CreateTargetGroup are made in moto, but the
# connection is cut before the answer; the client's retry meets the name taken
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
fault '{"service":"elbv2","action":"CreateLoadBalancer","effect":"truncate","length":"full","count":1}'
fault '{"service":"elbv2","action":"CreateTargetGroup","effect":"truncate","length":"full","count":1}'
svc lost nlb 80 443
if wait_until 60 has_host lost; then ok "lost replies: the NLB is finished all the same"
else fail "lost replies finished" "$(grep -E '^[EW]' "$T_TMP/ccm$CCM_N.log" | tail -5)"; fi
got=$(nlb_state "$(uid_lb lost)" lost 80 443)
[ "$got" = "1 [1] 2 True" ] && ok "lost replies: one NLB, one target group per port: no duplicate ($(count_of elbv2:CreateLoadBalancer) CreateLoadBalancer, $(count_of elbv2:CreateTargetGroup) CreateTargetGroup)" || fail "lost replies no duplicate" "$got"
[ "$(rule_applied CreateLoadBalancer)" = 1 ] && [ "$(rule_applied CreateTargetGroup)" = 1 ] &&
	peer ok "lost replies: both replies were cut" || peer fail "replies cut" "$(tb_json "$FAULTPROXY_URL/_control/faults")"
clear_faults

# --- 3. delete ------------------------------------------------------------------------------
kc delete svc thr-nlb thr-elb kill-a kill-b kill-c lost --wait=false >/dev/null
none_left() { ! kc get svc thr-nlb thr-elb kill-a kill-b kill-c lost 2>/dev/null | grep -q .; }
wait_until 90 none_left || fail "the Services are deleted" "$(kc get svc 2>&1 | tail -5)"
got=$(moto_py "print(len(elbv2.describe_load_balancers()['LoadBalancers']), len(elbv2.describe_target_groups()['TargetGroups']), len(elb.describe_load_balancers()['LoadBalancerDescriptions']), sum(1 for g in ec2.describe_security_groups()['SecurityGroups'] if g['GroupName'].startswith('k8s-elb-')))")
[ "$got" = "0 0 0 0" ] && ok "after deleting the Services moto holds no load balancer, target group or k8s-elb- security group" ||
	fail "nothing left" "NLBs TGs ELBs SGs: $got"

[ "$T_FAIL" = 0 ] || grep -E '^[EW]' "$T_TMP/ccm$CCM_N.log" | head -20
ccm_stop_check "ccm$CCM_N"
t_summary
