#!/usr/bin/env bash
# tests: product
# (runs $AWS_K8S ccm through ccm_start in ccm_lib.sh)
# aws-k8s ccm: the security groups of network load balancers, against moto behind the fault
# proxy (every AWS call counted).
#
# Unmanaged (the default): an NLB has no security group; the nodes' group gets client rules from
# the client CIDRs and one ICMP 3/4 rule (path MTU discovery) per client CIDR, which every NLB
# whose clients come from that CIDR shares: deleting the first of two NLBs keeps it (it carried
# the first NLB's name, so deleting that NLB revoked it while the other still needed it),
# deleting the second revokes it. An attribute changed after creation is written once, and only
# that attribute. extra-security-groups on an NLB is refused with an Event.
#
# NLBSecurityGroupMode = Managed (as upstream): a new NLB gets a group of its own named
# k8s-<ns:8>-<name:8>-<sha256(cluster, name, ns, uid):10>, tagged for the cluster and the
# Service, admitting each listener port and ICMP 3/4 from loadBalancerSourceRanges, attached at
# CreateLoadBalancer; the nodes' group admits that group on the NodePorts (no client CIDR rule);
# a changed source range changes the group's rules; an unchanged re-check writes nothing; the
# security-groups annotation replaces the managed group, extra-security-groups adds to it (both
# left in place on delete); deleting leaves no load balancer, target group, managed group or
# rule naming one (moto's state listed).
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi

read -r vpc nodesg usersg extrasg < <(moto_py "
vpc = ec2.describe_vpcs(Filters=[{'Name': 'is-default', 'Values': ['true']}])['Vpcs'][0]['VpcId']
igw = ec2.create_internet_gateway()['InternetGateway']['InternetGatewayId']
ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
main = ec2.describe_route_tables(Filters=[{'Name': 'vpc-id', 'Values': [vpc]}, {'Name': 'association.main', 'Values': ['true']}])['RouteTables'][0]
ec2.create_route(RouteTableId=main['RouteTableId'], DestinationCidrBlock='0.0.0.0/0', GatewayId=igw)
sg = ec2.create_security_group(GroupName='nodes', Description='nodes', VpcId=vpc, TagSpecifications=[
    {'ResourceType': 'security-group', 'Tags': [{'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])['GroupId']
user = ec2.create_security_group(GroupName='user-lb', Description='a group of the user', VpcId=vpc)['GroupId']
extra = ec2.create_security_group(GroupName='user-extra', Description='another group of the user', VpcId=vpc)['GroupId']
print(vpc, sg, user, extra)")
for n in 1 2; do
	read -r id dns < <(instance "n$n" "SecurityGroupIds=['$nodesg']")
	node_create "$dns" "aws:///us-east-1a/$id"
done

ANN=service.beta.kubernetes.io/aws-load-balancer
# svc NAME NODEPORT [ANNOTATIONS] [SPEC_EXTRA] [MORE_PORTS]: an NLB Service default/NAME, port
# 80 -> NODEPORT, with more annotations, spec fields and ports (JSON fragments) when given
svc() {
	kc create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Service","metadata":{"name":"$1","namespace":"default","annotations":{
  "$ANN-type":"nlb"${3:+,$3}}},
 "spec":{"type":"LoadBalancer","ports":[{"name":"http","port":80,"nodePort":$2,"protocol":"TCP"}${5:-}]${4:+,$4}}}
EOF
}
uid_lb() { echo "a$(kc get svc "$1" -o jsonpath='{.metadata.uid}' | tr -d - | cut -c1-31)"; }
host_of() { [ -n "$(kc get svc "$1" -o jsonpath='{.status.loadBalancer.ingress[0].hostname}')" ]; }
gone() { ! kc get svc "$1" >/dev/null 2>&1; }
events_of() { kc get events -o json | python3 -c "
import json, sys
print(' | '.join('%s: %s' % (e['reason'], e['message']) for e in json.load(sys.stdin)['items'] if e['involvedObject']['name'] == '$1'))"; }
call_log() { tb_json "$FAULTPROXY_URL/_control/calls?log=1000" | python3 -c 'import json,sys; print(" ".join(l["action"] for l in json.load(sys.stdin)["log"]))'; }
n_calls() { call_log | tr ' ' '\n' | grep -cE "^($1)\$"; }
reset_calls() { tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null; }
# the nodes' group's rules that carry one of our descriptions: (proto, port, cidr or group, kind)
nlb_rules() { moto_py "
g = ec2.describe_security_groups(GroupIds=['$nodesg'])['SecurityGroups'][0]
out = []
for p in g['IpPermissions']:
    for r in p['IpRanges']:
        if r.get('Description', '').startswith('kubernetes.io/rule/nlb/'):
            out.append((p['IpProtocol'], p.get('FromPort'), r['CidrIp'], r['Description'].split('/')[-1].split('=')[0]))
    for r in p['UserIdGroupPairs']:
        out.append((p['IpProtocol'], p.get('FromPort'), r['GroupId'], r.get('Description', '').split('/')[-1].split('=')[0]))
print(sorted(out))"; }
lb_sgs() { moto_py "
lbs = [l for l in elbv2.describe_load_balancers()['LoadBalancers'] if l['LoadBalancerName'] == '$1']
print(sorted(lbs[0].get('SecurityGroups', [])) if lbs else 'NONE')"; }
# the managed group's name as upstream (and the AWS Load Balancer Controller) makes it
sg_name() { python3 -c "
import hashlib, re, sys
ns, name, uid = sys.argv[1:]
h = hashlib.sha256(('$CLUSTER' + name + ns + uid).encode()).hexdigest()
a = re.sub('[^A-Za-z0-9]', '', ns)[:8]; b = re.sub('[^A-Za-z0-9]', '', name)[:8]
print('k8s-%s-%s-%s' % (a, b, h[:10]))" default "$1" "$(kc get svc "$1" -o jsonpath='{.metadata.uid}')"; }
# the group named $1: "ID [ingress] {tags}", or NONE
sg_py() { moto_py "
gs = ec2.describe_security_groups(Filters=[{'Name': 'group-name', 'Values': ['$1']}])['SecurityGroups']
if not gs: print('NONE'); raise SystemExit
g = gs[0]
ing = sorted((p['IpProtocol'], p.get('FromPort'), p.get('ToPort'), r['CidrIp']) for p in g['IpPermissions'] for r in p['IpRanges'])
print(g['GroupId'], g['VpcId'], ing, {t['Key']: t['Value'] for t in g.get('Tags', [])})"; }
groups_left() { moto_py "print(sorted(g['GroupName'] for g in ec2.describe_security_groups(Filters=[{'Name': 'vpc-id', 'Values': ['$vpc']}])['SecurityGroups']))"; }

# === Unmanaged (the default) =====================================================================
ccm_start ccm1 --leader-elect-lease-duration=30s --leader-elect-renew-deadline=20s \
	--leader-elect-retry-period=2s || fail "ccm starts" "$(tail -5 "$T_TMP/ccm1.log")"
svc one 30081
svc two 30082
wait_until 60 host_of one && wait_until 60 host_of two && ok "two NLB Services get their load balancers" ||
	fail "two NLBs made" "$(events_of one) / $(events_of two) $(tail -5 "$T_TMP/ccm1.log")"
lb1=$(uid_lb one) lb2=$(uid_lb two)
[ "$(lb_sgs "$lb1")" = "[]" ] && [ "$(lb_sgs "$lb2")" = "[]" ] && ok "Unmanaged: the NLBs have no security group" ||
	fail "Unmanaged NLBs without groups" "$(lb_sgs "$lb1") $(lb_sgs "$lb2")"
both="[('icmp', 3, '0.0.0.0/0', 'mtu'), ('tcp', 30081, '0.0.0.0/0', 'client'), ('tcp', 30082, '0.0.0.0/0', 'client')]"
has_both() { [ "$(nlb_rules)" = "$both" ]; }
wait_until 20 has_both && ok "Unmanaged: each NLB's client rule from 0.0.0.0/0 and one shared mtu rule on the nodes' group" ||
	fail "node rules of two NLBs" "$(nlb_rules)"

# an attribute changed after creation: written once, that attribute only
reset_calls
kc annotate svc two "$ANN-cross-zone-load-balancing-enabled=true" >/dev/null
cross() { [ "$(moto_py "
lb = elbv2.describe_load_balancers(Names=['$lb2'])['LoadBalancers'][0]
print({a['Key']: a['Value'] for a in elbv2.describe_load_balancer_attributes(LoadBalancerArn=lb['LoadBalancerArn'])['Attributes']}['load_balancing.cross_zone.enabled'])")" = true ]; }
if wait_until 30 cross; then ok "a changed cross-zone annotation is applied to the NLB"
else fail "cross-zone applied" "$(events_of two)"; fi
sleep 1
[ "$(n_calls ModifyLoadBalancerAttributes)" = 1 ] && [ "$(n_calls ModifyTargetGroupAttributes)" = 0 ] &&
	ok "... with one ModifyLoadBalancerAttributes (the attributes AWS has are compared first)" ||
	fail "attribute writes of a change" "$(call_log)"
reset_calls
kc annotate svc two example.com/recheck=1 >/dev/null
ensured() { [ "$(kc get events -o json | python3 -c "import json,sys; print(sum(e.get('count',1) for e in json.load(sys.stdin)['items'] if e['reason']=='EnsuredLoadBalancer' and e['involvedObject']['name']=='two'))")" -ge 3 ]; }
wait_until 30 ensured
sleep 1
[ "$(n_calls 'Modify.*Attributes')" = 0 ] && [ "$(n_calls 'Authorize.*|Revoke.*|Create.*|Delete.*|Set.*|Modify.*')" = 0 ] &&
	ok "a full re-check of the unchanged NLB writes nothing ($(call_log | wc -w) calls, all Describes)" ||
	fail "re-check writes" "$(call_log)"

# extra-security-groups without Managed: refused with an Event, nothing made
svc three 30083 "\"$ANN-extra-security-groups\":\"$extrasg\""
refused() { events_of three | grep -q "extra-security-groups is not supported for NLB (only with NLBSecurityGroupMode = Managed)"; }
wait_until 30 refused && [ "$(lb_sgs "$(uid_lb three)")" = NONE ] && ok "Unmanaged: extra-security-groups on an NLB gives a Warning Event and no load balancer" ||
	fail "extra-security-groups refused" "$(events_of three) $(lb_sgs "$(uid_lb three)")"
kc delete svc three --wait=false >/dev/null

# the first NLB goes: the mtu rule stays for the second
kc delete svc one --wait=false >/dev/null
wait_until 40 gone one || fail "Service one deleted" "$(tail -5 "$T_TMP/ccm1.log")"
left2="[('icmp', 3, '0.0.0.0/0', 'mtu'), ('tcp', 30082, '0.0.0.0/0', 'client')]"
only_two() { [ "$(nlb_rules)" = "$left2" ]; }
wait_until 10 only_two && ok "deleting the first NLB revokes its client rule and keeps the mtu rule the second still needs" ||
	fail "mtu rule kept for the second NLB" "$(nlb_rules)"
kc delete svc two --wait=false >/dev/null
wait_until 40 gone two || fail "Service two deleted" "$(tail -5 "$T_TMP/ccm1.log")"
none_left() { [ "$(nlb_rules)" = "[]" ]; }
wait_until 10 none_left && ok "deleting the second NLB revokes the mtu rule with its client rule" || fail "mtu rule revoked last" "$(nlb_rules)"
wait_until 20 gone three || fail "Service three deleted" "$(events_of three)"
ccm_stop_check ccm1

# === NLBSecurityGroupMode = Managed ===============================================================
printf 'NLBSecurityGroupMode = Managed\n' >>"$CCM_CONFIG"
ccm_start ccm2 --leader-elect-lease-duration=30s --leader-elect-renew-deadline=20s \
	--leader-elect-retry-period=2s || fail "ccm starts with Managed" "$(tail -5 "$T_TMP/ccm2.log")"
reset_calls
svc web-sg 30090 "" '"loadBalancerSourceRanges":["10.0.0.0/8"]' ',{"name":"tls","port":443,"nodePort":30091,"protocol":"TCP"}'
wait_until 60 host_of web-sg && ok "Managed: the NLB Service gets its load balancer" ||
	fail "Managed NLB made" "$(events_of web-sg) $(tail -5 "$T_TMP/ccm2.log")"
lbm=$(uid_lb web-sg) name=$(sg_name web-sg)
read -r sgid sgvpc sgrest < <(sg_py "$name")
want_ing="[('icmp', 3, 4, '10.0.0.0/8'), ('tcp', 80, 80, '10.0.0.0/8'), ('tcp', 443, 443, '10.0.0.0/8')]"
[ "$sgid" != NONE ] && [ "$sgvpc" = "$vpc" ] && ok "a security group $name (upstream's name) is made in the VPC" ||
	fail "managed group made" "$name: $sgid $sgvpc $sgrest $(groups_left)"
got=$(sg_py "$name" | cut -d' ' -f3-)
grep -qF "$want_ing" <<<"$got" && ok "... admitting each listener port and ICMP 3/4 from loadBalancerSourceRanges" || fail "managed group ingress" "$got"
grep -qF "'kubernetes.io/cluster/$CLUSTER': 'owned'" <<<"$got" && grep -qF "'kubernetes.io/service-name': 'default/web-sg'" <<<"$got" &&
	ok "... tagged kubernetes.io/cluster/$CLUSTER=owned and kubernetes.io/service-name" || fail "managed group tags" "$got"
[ "$(lb_sgs "$lbm")" = "['$sgid']" ] && ok "... and attached to the NLB" || fail "NLB security groups" "$(lb_sgs "$lbm") want $sgid"
n_cre=$(call_log | tr ' ' '\n' | grep -n '^CreateLoadBalancer$' | head -1 | cut -d: -f1)
n_sgc=$(call_log | tr ' ' '\n' | grep -n '^CreateSecurityGroup$' | head -1 | cut -d: -f1)
[ -n "$n_cre" ] && [ -n "$n_sgc" ] && [ "$n_sgc" -lt "$n_cre" ] && [ "$(n_calls SetSecurityGroups)" = 0 ] &&
	ok "... at CreateLoadBalancer (the group made first, no SetSecurityGroups)" || fail "group attached at creation" "$(call_log)"
want_nodes="[('tcp', 30090, '$sgid', 'client'), ('tcp', 30091, '$sgid', 'client')]"
nodes_ok() { [ "$(nlb_rules)" = "$want_nodes" ]; }
wait_until 10 nodes_ok && ok "the nodes' group admits the NLB's group on the NodePorts, no client CIDR or mtu rule" ||
	fail "node rules from the group" "$(nlb_rules)"

# a changed source range changes the group's rules
kc patch svc web-sg --type=merge -p '{"spec":{"loadBalancerSourceRanges":["192.168.0.0/16"]}}' >/dev/null
want_ing2="[('icmp', 3, 4, '192.168.0.0/16'), ('tcp', 80, 80, '192.168.0.0/16'), ('tcp', 443, 443, '192.168.0.0/16')]"
ranged() { sg_py "$name" | grep -qF "$want_ing2"; }
wait_until 30 ranged && ok "a changed loadBalancerSourceRanges replaces the group's rules" || fail "source range change" "$(sg_py "$name")"
nodes_ok && ok "... and the nodes' rules stay on the group" || fail "node rules after the range change" "$(nlb_rules)"
reset_calls
kc annotate svc web-sg example.com/recheck=1 >/dev/null
ensured_m() { [ "$(kc get events -o json | python3 -c "import json,sys; print(sum(e.get('count',1) for e in json.load(sys.stdin)['items'] if e['reason']=='EnsuredLoadBalancer' and e['involvedObject']['name']=='web-sg'))")" -ge 3 ]; }
wait_until 30 ensured_m
sleep 1
[ "$(n_calls 'Authorize.*|Revoke.*|Create.*|Delete.*|Set.*|Modify.*')" = 0 ] &&
	ok "a re-check of the unchanged Managed NLB writes nothing ($(call_log | wc -w) calls)" || fail "Managed re-check writes" "$(call_log)"

# security-groups replaces the managed group; extra-security-groups adds one
svc byo 30092 "\"$ANN-security-groups\":\"$usersg\",\"$ANN-extra-security-groups\":\"$extrasg\""
wait_until 60 host_of byo && ok "an NLB Service with security-groups and extra-security-groups gets its load balancer" ||
	fail "BYO NLB made" "$(events_of byo) $(tail -5 "$T_TMP/ccm2.log")"
lbb=$(uid_lb byo)
[ "$(lb_sgs "$lbb")" = "$(python3 -c "import sys; print(sorted(sys.argv[1:]))" "$usersg" "$extrasg")" ] &&
	[ "$(sg_py "$(sg_name byo)")" = NONE ] && ok "... with the named groups and no managed group" ||
	fail "BYO groups" "$(lb_sgs "$lbb") $(sg_py "$(sg_name byo)")"
byo_rule() { nlb_rules | grep -qF "('tcp', 30092, '$usersg', 'client')"; }
wait_until 10 byo_rule && ok "... and the nodes' group admits the first named group on its NodePort" || fail "BYO node rule" "$(nlb_rules)"
kc delete svc byo --wait=false >/dev/null
wait_until 40 gone byo || fail "Service byo deleted" "$(tail -5 "$T_TMP/ccm2.log")"
got=$(groups_left)
grep -q "'user-lb'" <<<"$got" && grep -q "'user-extra'" <<<"$got" && ! nlb_rules | grep -q "$usersg" &&
	ok "deleting it leaves the user's groups in place and no rule admitting them" || fail "BYO delete" "$got $(nlb_rules)"

# delete: nothing left
kc delete svc web-sg --wait=false >/dev/null
wait_until 60 gone web-sg || fail "Service web-sg deleted" "$(events_of web-sg) $(tail -5 "$T_TMP/ccm2.log")"
got=$(moto_py "print(len(elbv2.describe_load_balancers()['LoadBalancers']), len(elbv2.describe_target_groups()['TargetGroups']))")
[ "$got" = "0 0" ] && ok "deleting the Managed NLB Service leaves no load balancer and no target group" || fail "LB and TGs gone" "$got"
[ "$(groups_left)" = "['default', 'nodes', 'user-extra', 'user-lb']" ] && ok "... no managed security group (groups left: the VPC's and the user's)" ||
	fail "managed group deleted" "$(groups_left)"
[ "$(nlb_rules)" = "[]" ] && ok "... and no rule of ours on the nodes' group" || fail "node rules after delete" "$(nlb_rules)"

[ "$T_FAIL" = 0 ] || grep -E '^[EW]' "$T_TMP/ccm2.log" | head -20
ccm_stop_check ccm2
t_summary
