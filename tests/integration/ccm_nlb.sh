#!/usr/bin/env bash
# tests: product
# (runs $AWS_K8S ccm through ccm_start in ccm_lib.sh)
# aws-k8s ccm's service controller with network load balancers, against moto behind the fault
# proxy (every AWS call counted): a Service with aws-load-balancer-type nlb and three ports (one
# TLS) gets an NLB a<uid>, one instance target group per port named as upstream names it
# (k8s-<ns>-<name>-<sha1>), listeners, health checks, targets, attributes, the node
# security-group rules (client, health, mtu), the finalizer, the status hostname and Events;
# Nodes coming and going change the targets; a changed health-check interval replaces the
# target groups, a changed threshold modifies them in place; externalTrafficPolicy Local checks
# the healthCheckNodePort; invalid annotations give a Warning Event and nothing in AWS;
# Deckhouse's `none` type makes target groups only; deleting leaves nothing in moto. Prints the
# AWS calls of a create, a full re-check and a delete.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi

read -r nodesg cert < <(moto_py "
vpc = ec2.describe_vpcs(Filters=[{'Name': 'is-default', 'Values': ['true']}])['Vpcs'][0]['VpcId']
igw = ec2.create_internet_gateway()['InternetGateway']['InternetGatewayId']
ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
main = ec2.describe_route_tables(Filters=[{'Name': 'vpc-id', 'Values': [vpc]}, {'Name': 'association.main', 'Values': ['true']}])['RouteTables'][0]
ec2.create_route(RouteTableId=main['RouteTableId'], DestinationCidrBlock='0.0.0.0/0', GatewayId=igw)
sg = ec2.create_security_group(GroupName='nodes', Description='nodes', VpcId=vpc, TagSpecifications=[
    {'ResourceType': 'security-group', 'Tags': [{'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])['GroupId']
cert = client('acm').request_certificate(DomainName='web.example.com')['CertificateArn']
print(sg, cert)")
read -r i1 d1 < <(instance n1 "SecurityGroupIds=['$nodesg']")
read -r i2 d2 < <(instance n2 "SecurityGroupIds=['$nodesg']")
read -r i3 d3 < <(instance n3 "SecurityGroupIds=['$nodesg']")
read -r i4 d4 < <(instance n4 "SecurityGroupIds=['$nodesg']")
for n in 1 2 3; do
	id=$(eval echo "\$i$n") dns=$(eval echo "\$d$n")
	node_create "$dns" "aws:///us-east-1a/$id"
done

# a longer lease than ccm_lib's 3 s: on a loaded machine (ASan, other tests) a 2 s renew
# deadline can pass, and a ccm that loses its lease exits; the later flags win
ccm_start ccm1 --leader-elect-lease-duration=30s --leader-elect-renew-deadline=20s \
	--leader-elect-retry-period=2s || fail "ccm starts" "$(tail -5 "$T_TMP/ccm1.log")"

# nlb_py NAME PYEXPR: a Python expression on the NLB (lb), its listeners (ls, by port), its
# target groups (tgs, by name; those its listeners forward to: moto forgets a group's load
# balancer after ModifyListener) and their targets (targets(arn)); NONE when there is no NLB
nlb_py() { moto_py "
try:
    lb = elbv2.describe_load_balancers(Names=['$1'])['LoadBalancers'][0]
except Exception:
    print('NONE'); raise SystemExit
ls = {l['Port']: l for l in elbv2.describe_listeners(LoadBalancerArn=lb['LoadBalancerArn'])['Listeners']}
_arns = sorted(set(l['DefaultActions'][0]['TargetGroupArn'] for l in ls.values()))
tgs = {t['TargetGroupName']: t for t in (elbv2.describe_target_groups(TargetGroupArns=_arns)['TargetGroups'] if _arns else [])}
by_arn = {t['TargetGroupArn']: t for t in tgs.values()}
def targets(arn): return sorted(d['Target']['Id'] for d in elbv2.describe_target_health(TargetGroupArn=arn)['TargetHealthDescriptions'])
def tg_attr(arn, k): return {a['Key']: a['Value'] for a in elbv2.describe_target_group_attributes(TargetGroupArn=arn)['Attributes']}.get(k)
def lb_attr(k): return {a['Key']: a['Value'] for a in elbv2.describe_load_balancer_attributes(LoadBalancerArn=lb['LoadBalancerArn'])['Attributes']}.get(k)
print($2)"; }
all_tgs() { moto_py "print(sorted(t['TargetGroupName'] for t in elbv2.describe_target_groups()['TargetGroups']))"; }
node_rules() { moto_py "
g = ec2.describe_security_groups(GroupIds=['$nodesg'])['SecurityGroups'][0]
print(sorted((p['IpProtocol'], p.get('FromPort'), r['CidrIp'], r.get('Description', '').split('=')[0]) for p in g['IpPermissions'] for r in p['IpRanges'] if r.get('Description', '').startswith('kubernetes.io/rule/nlb/')))"; }
svc_py() {
	kc get svc "$1" -o json 2>/dev/null | python3 -c "
import json, sys
s = json.load(sys.stdin)
print($2)"
}
events_of() { kc get events -o json | python3 -c "
import json, sys
print(' '.join(e['reason'] for e in json.load(sys.stdin)['items'] if e['involvedObject']['name'] == '$1'))"; }
event_msgs() { kc get events -o json | python3 -c "
import json, sys
print(' | '.join(e['message'] for e in json.load(sys.stdin)['items'] if e['involvedObject']['name'] == '$1'))"; }
call_log() { tb_json "$FAULTPROXY_URL/_control/calls?log=1000" | python3 -c 'import json,sys; print(" ".join(l["action"] for l in json.load(sys.stdin)["log"]))'; }
# upstream's target-group name
tg_name() { python3 -c "
import hashlib, re, sys
ns, name, port, np, proto, hcp, hci = sys.argv[1:]
h = hashlib.sha1(''.join(['$CLUSTER', ns, name, port, np, proto, 'instance', hcp, hci]).encode()).hexdigest()
a = re.sub('[^A-Za-z0-9]', '', ns)[:8]; b = re.sub('[^A-Za-z0-9]', '', name)[:8]
print('k8s-%s-%s-%s' % (a, b, h[:10]))" "$@"; }
uid_lb() { echo "a$(kc get svc "$1" -o jsonpath='{.metadata.uid}' | tr -d - | cut -c1-31)"; }
sorted_ids() { python3 -c "import sys; print(sorted(sys.argv[1:]))" "$@"; }

# --- create ---------------------------------------------------------------------------------
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Service","metadata":{"name":"web-app","namespace":"default","annotations":{
  "service.beta.kubernetes.io/aws-load-balancer-type":"nlb",
  "service.beta.kubernetes.io/aws-load-balancer-ssl-cert":"$cert",
  "service.beta.kubernetes.io/aws-load-balancer-ssl-ports":"443",
  "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes":"preserve_client_ip.enabled=true",
  "service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled":"true",
  "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags":"team=a"}},
 "spec":{"type":"LoadBalancer","selector":{"app":"web"},"ports":[
  {"name":"http","port":80,"targetPort":8080,"nodePort":30080,"protocol":"TCP"},
  {"name":"https","port":443,"targetPort":8443,"nodePort":30443,"protocol":"TCP"},
  {"name":"alt","port":8000,"targetPort":8000,"nodePort":30800,"protocol":"TCP"}],
  "loadBalancerSourceRanges":["10.0.0.0/8"]}}
EOF
lb=$(uid_lb web-app)
host_set() { [ -n "$(kc get svc web-app -o jsonpath='{.status.loadBalancer.ingress[0].hostname}')" ]; }
if wait_until 40 host_set; then ok "the NLB Service gets status.loadBalancer.ingress[].hostname"
else fail "the NLB Service gets a hostname" "$(tail -20 "$T_TMP/ccm1.log")"; fi
create_calls=$(calls)
create_log=$(call_log)
# one pass: our own patches' echoes re-queue the Service at no AWS cost (a second pass cost 8)
sleep 3
[ "$(calls)" = "$create_calls" ] && ok "the create is one pass: no AWS call once the status is set ($create_calls calls)" \
	|| fail "the create is one pass" "$create_calls calls until the status, then: $(call_log)"
host=$(kc get svc web-app -o jsonpath='{.status.loadBalancer.ingress[0].hostname}')
[ "$host" = "$(nlb_py "$lb" "lb['DNSName']")" ] && ok "the hostname is the NLB's DNS name ($lb)" \
	|| fail "the hostname is the NLB's DNS name" "host=$host $(nlb_py "$lb" lb)"
got=$(nlb_py "$lb" "(lb['Type'], lb['Scheme'], len(lb['AvailabilityZones']) > 0)")
[ "$got" = "('network', 'internet-facing', True)" ] && ok "a network load balancer, internet-facing, in subnets" || fail "NLB type/scheme" "$got"
n1=$(tg_name default web-app 80 30080 TCP TCP 30)
n2=$(tg_name default web-app 443 30443 TCP TCP 30)
n3=$(tg_name default web-app 8000 30800 TCP TCP 30)
got=$(nlb_py "$lb" "sorted((p, l['Protocol'], by_arn[l['DefaultActions'][0]['TargetGroupArn']]['TargetGroupName'], by_arn[l['DefaultActions'][0]['TargetGroupArn']]['Port']) for p, l in ls.items())")
want="[(80, 'TCP', '$n1', 30080), (443, 'TLS', '$n2', 30443), (8000, 'TCP', '$n3', 30800)]"
[ "$got" = "$want" ] && ok "one listener per port (443 TLS with the certificate) to a target group on its NodePort, named as upstream names it" \
	|| fail "listeners and target groups" "$got want $want"
got=$(nlb_py "$lb" "ls[443]['Certificates'][0]['CertificateArn'] == '$cert'")
[ "$got" = True ] && ok "the TLS listener carries the ssl-cert" || fail "TLS certificate" "$got"
got=$(nlb_py "$lb" "sorted(set((t['Protocol'], t['TargetType'], t['HealthCheckProtocol'], t['HealthCheckPort'], t['HealthCheckIntervalSeconds'], t['HealthCheckTimeoutSeconds'], t['HealthyThresholdCount'], t['UnhealthyThresholdCount']) for t in tgs.values()))")
[ "$got" = "[('TCP', 'instance', 'TCP', 'traffic-port', 30, 10, 3, 3)]" ] && ok "target groups: TCP instance targets, health check TCP traffic-port 30/10/3/3" \
	|| fail "target group health checks" "$got"
want=$(sorted_ids "$i1" "$i2" "$i3")
got=$(nlb_py "$lb" "sorted(set(str(targets(a)) for a in by_arn))")
[ "$got" = "[\"$want\"]" ] && ok "every target group has the three Nodes' instances" || fail "targets" "$got want $want"
got=$(nlb_py "$lb" "(sorted(set(tg_attr(a, 'preserve_client_ip.enabled') for a in by_arn)), lb_attr('load_balancing.cross_zone.enabled'))")
[ "$got" = "(['true'], 'true')" ] && ok "target-group-attributes and cross-zone are applied" || fail "attributes" "$got"
got=$(moto_py "
lb = elbv2.describe_load_balancers(Names=['$lb'])['LoadBalancers'][0]
t = {x['Key']: x['Value'] for x in elbv2.describe_tags(ResourceArns=[lb['LoadBalancerArn']])['TagDescriptions'][0]['Tags']}
print(t.get('kubernetes.io/service-name'), t.get('kubernetes.io/cluster/$CLUSTER'), t.get('team'))")
[ "$got" = "default/web-app owned a" ] && ok "the NLB is tagged (service name, cluster, additional-resource-tags)" || fail "NLB tags" "$got"
got=$(node_rules)
subnet_cidrs=$(moto_py "print(sorted(set(s['CidrBlock'] for s in ec2.describe_subnets()['Subnets'])))")
python3 - "$got" "$subnet_cidrs" <<'PY' && ok "node group: client rules per NodePort from the source range, health rules from the subnets, ICMP 3/4 (described kubernetes.io/rule/nlb/...)" || fail "node rules" "$got"
import ast, sys
rules = ast.literal_eval(sys.argv[1]); cidrs = ast.literal_eval(sys.argv[2])
client = sorted(r for r in rules if r[3].endswith('client'))
assert client == [('tcp', p, '10.0.0.0/8', 'kubernetes.io/rule/nlb/client') for p in (30080, 30443, 30800)], client
mtu = [r for r in rules if r[3].endswith('mtu')]
assert mtu == [('icmp', 3, '10.0.0.0/8', 'kubernetes.io/rule/nlb/mtu')], mtu
health = [r for r in rules if r[3].endswith('health')]
assert health and all(r[2] in cidrs and r[1] in (30080, 30443, 30800) for r in health), health
PY
[ "$(svc_py web-app "s['metadata'].get('finalizers')")" = "['service.kubernetes.io/load-balancer-cleanup']" ] &&
	ok "the finalizer is on the Service" || fail "finalizer" "$(svc_py web-app "s['metadata']")"
ev=$(events_of web-app)
grep -q EnsuringLoadBalancer <<<"$ev" && grep -q EnsuredLoadBalancer <<<"$ev" && ok "Events EnsuringLoadBalancer, EnsuredLoadBalancer" \
	|| fail "Events on the Service" "$ev"

# --- re-syncs ---------------------------------------------------------------------------------
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc label svc web-app team=a >/dev/null
sleep 3
label_calls=$(calls)
[ "$label_calls" = 0 ] && ok "a change the controller does not read costs no AWS call" || fail "label re-sync calls" "$label_calls $(call_log)"
ensured_count() { kc get events -o json | python3 -c "import json,sys; print(sum(e.get('count',1) for e in json.load(sys.stdin)['items'] if e['reason']=='EnsuredLoadBalancer' and e['involvedObject']['name']=='$1'))"; }
n_ev=$(ensured_count web-app)
more_ensured() { [ "$(ensured_count web-app)" -gt "$n_ev" ]; }
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc annotate svc web-app example.com/x=1 >/dev/null
wait_until 20 more_ensured
sleep 1
verify_calls=$(calls)
verify_log=$(call_log)
n_describe=$(tr ' ' '\n' <<<"$verify_log" | grep -c '^Describe')
n_mutate=$(tr ' ' '\n' <<<"$verify_log" | grep -vc '^Describe')
n_attr_writes=$(tr ' ' '\n' <<<"$verify_log" | grep -c '^Modify.*Attributes$')
# the NLB, its listeners, its target groups, each group's targets (3), the node group: 7; the
# attributes of the NLB and of its 3 groups (target-group-attributes is set) read back: 4
[ "$n_describe" -le 11 ] && [ "$n_mutate" = 0 ] && ok "a full re-check of an unchanged NLB: $n_describe Describes, no write ($verify_log)" \
	|| fail "re-check calls bounded" "$verify_calls: $verify_log"
# attributes that AWS already has are not written again (a 10-minute re-check of 100 Services
# wrote them 600 times an hour)
[ "$n_attr_writes" = 0 ] && ok "the re-check writes no attribute AWS already has (0 Modify*Attributes)" \
	|| fail "re-check attribute writes" "$n_attr_writes: $verify_log"
! grep -qE 'Create|Register|Deregister|Delete|Authorize|Revoke' <<<"$verify_log" && ok "the re-check creates, registers and deletes nothing" || fail "re-check changed things" "$verify_log"


# --- additional-resource-tags changed after creation: the NLB and its target groups ----------------
# Rule: a key is removed only when the annotation (as this process last applied it) named it and
# names it no longer; a foreign tag (owner) and the cluster tags stay.
nlb_tags() { moto_py "
lb = elbv2.describe_load_balancers(Names=['$lb'])['LoadBalancers'][0]
arns = [lb['LoadBalancerArn']] + [t['TargetGroupArn'] for t in elbv2.describe_target_groups(LoadBalancerArn=lb['LoadBalancerArn'])['TargetGroups']]
d = {x['ResourceArn']: sorted((t['Key'], t['Value']) for t in x['Tags'] if not t['Key'].startswith('kubernetes.io/')) for x in elbv2.describe_tags(ResourceArns=arns)['TagDescriptions']}
k = {x['ResourceArn']: sorted(t['Key'] for t in x['Tags'] if t['Key'].startswith('kubernetes.io/')) for x in elbv2.describe_tags(ResourceArns=arns)['TagDescriptions']}
print(d[arns[0]], sorted(set(str(d[a]) for a in arns[1:])), len(arns), all(len(k[a]) == 2 for a in arns))"; }
moto_py "elbv2.add_tags(ResourceArns=[elbv2.describe_load_balancers(Names=['$lb'])['LoadBalancers'][0]['LoadBalancerArn']], Tags=[{'Key': 'owner', 'Value': 'ops'}])"
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc annotate --overwrite svc web-app service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags=team=b,env=prod >/dev/null
want1="[('env', 'prod'), ('owner', 'ops'), ('team', 'b')] [\"[('env', 'prod'), ('team', 'b')]\"] 4 True"
tags_are() { [ "$(nlb_tags)" = "$1" ]; }
if wait_until 20 tags_are "$want1"; then ok "changed additional-resource-tags: a new value and a new key on the NLB and its 3 target groups"
else fail "NLB tags changed" "$(nlb_tags) want $want1 $(call_log)"; fi
sleep 1
got=$(call_log)
[ "$(tr ' ' '\n' <<<"$got" | grep -c '^AddTags$')" = 4 ] && ! grep -q RemoveTags <<<"$got" && ok "... one AddTags per resource, no RemoveTags" || fail "tag calls" "$got"
kc annotate --overwrite svc web-app service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags=env=prod >/dev/null
want2="[('env', 'prod'), ('owner', 'ops')] [\"[('env', 'prod')]\"] 4 True"
if wait_until 20 tags_are "$want2"; then ok "a key dropped from the annotation is removed (team), the foreign owner tag and the cluster tags stay"
else fail "NLB tag removed" "$(nlb_tags) want $want2 $(call_log)"; fi
sleep 1
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc label --overwrite svc web-app team=c >/dev/null
sleep 3
[ "$(calls)" = 0 ] && ok "after the tag changes, an unchanged Service still costs no AWS call" || fail "re-sync after tags" "$(calls) $(call_log)"
# --- Nodes ------------------------------------------------------------------------------------
tgs_targets() { nlb_py "$lb" "sorted(set(str(targets(a)) for a in by_arn))"; }
targets_are() { [ "$(tgs_targets)" = "[\"$(sorted_ids "$@")\"]" ]; }
kc delete node "$d3" >/dev/null
if wait_until 20 targets_are "$i1" "$i2"; then ok "a deleted Node's instance is deregistered from every target group"
else fail "deleted Node deregistered" "$(tgs_targets)"; fi
node_create "$d4" "aws:///us-east-1a/$i4"
if wait_until 20 targets_are "$i1" "$i2" "$i4"; then ok "a new Node's instance is registered in every target group"
else fail "new Node registered" "$(tgs_targets)"; fi
grep -q UpdatedLoadBalancer <<<"$(events_of web-app)" && ok "Event UpdatedLoadBalancer for the hosts" || fail "UpdatedLoadBalancer" "$(events_of web-app)"

# --- health-check changes -----------------------------------------------------------------------
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc annotate svc web-app service.beta.kubernetes.io/aws-load-balancer-healthcheck-healthy-threshold=5 >/dev/null
hc_is() { [ "$(nlb_py "$lb" "sorted(set(t['HealthyThresholdCount'] for t in tgs.values()))")" = "[$1]" ]; }
if wait_until 20 hc_is 5; then ok "a changed healthy threshold is applied to the target groups"
else fail "healthy threshold" "$(nlb_py "$lb" "[t['HealthyThresholdCount'] for t in tgs.values()]")"; fi
grep -q ModifyTargetGroup <<<"$(call_log)" && ! grep -q CreateTargetGroup <<<"$(call_log)" && ok "... in place (ModifyTargetGroup, no new group)" || fail "threshold in place" "$(call_log)"
kc annotate svc web-app service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval=10 >/dev/null
m1=$(tg_name default web-app 80 30080 TCP TCP 10)
m2=$(tg_name default web-app 443 30443 TCP TCP 10)
m3=$(tg_name default web-app 8000 30800 TCP TCP 10)
replaced() { [ "$(all_tgs)" = "$(python3 -c "import sys; print(sorted(sys.argv[1:]))" "$m1" "$m2" "$m3")" ]; }
if wait_until 30 replaced; then ok "a changed interval (part of the name) replaces the target groups; the old ones are deleted"
else fail "target groups replaced" "$(all_tgs)"; fi
got=$(nlb_py "$lb" "sorted((p, by_arn[l['DefaultActions'][0]['TargetGroupArn']]['TargetGroupName'], by_arn[l['DefaultActions'][0]['TargetGroupArn']]['HealthCheckIntervalSeconds']) for p, l in ls.items())")
[ "$got" = "[(80, '$m1', 10), (443, '$m2', 10), (8000, '$m3', 10)]" ] && ok "the listeners forward to the new groups" || fail "listeners after replacement" "$got"
targets_are "$i1" "$i2" "$i4" && ok "the new groups have the targets" || fail "targets after replacement" "$(tgs_targets)"

# --- Local --------------------------------------------------------------------------------------
kc create -f - >/dev/null <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"loc","namespace":"default","annotations":{
  "service.beta.kubernetes.io/aws-load-balancer-type":"nlb",
  "service.beta.kubernetes.io/aws-load-balancer-internal":"true"}},
 "spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local","healthCheckNodePort":32123,"ports":[
  {"name":"dns","port":53,"nodePort":30053,"protocol":"UDP"}]}}
EOF
llb=$(uid_lb loc)
loc_up() { [ -n "$(kc get svc loc -o jsonpath='{.status.loadBalancer.ingress[0].hostname}')" ]; }
if wait_until 40 loc_up; then ok "an internal UDP NLB with externalTrafficPolicy Local is made"
else fail "Local NLB" "$(event_msgs loc) $(tail -5 "$T_TMP/ccm1.log")"; fi
got=$(nlb_py "$llb" "(lb['Scheme'], [(l['Protocol'], by_arn[l['DefaultActions'][0]['TargetGroupArn']]['Protocol']) for l in ls.values()], [(t['HealthCheckProtocol'], t['HealthCheckPort'], t.get('HealthCheckPath'), t['HealthCheckIntervalSeconds'], t['HealthCheckTimeoutSeconds'], t['HealthyThresholdCount'], t['UnhealthyThresholdCount']) for t in tgs.values()])")
[ "$got" = "('internal', [('UDP', 'UDP')], [('HTTP', '32123', '/healthz', 10, 10, 2, 2)])" ] &&
	ok "internal, UDP, health check HTTP healthCheckNodePort /healthz 10/10/2/2" || fail "Local health check" "$got"

# --- rejections ---------------------------------------------------------------------------------
kc create -f - >/dev/null <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"bad","namespace":"default","annotations":{
  "service.beta.kubernetes.io/aws-load-balancer-type":"nlb",
  "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes":"deregistration_delay.timeout_seconds=5"}},
 "spec":{"type":"LoadBalancer","ports":[{"port":80,"nodePort":31080,"protocol":"TCP"}]}}
EOF
kc create -f - >/dev/null <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"bad2","namespace":"default","annotations":{
  "service.beta.kubernetes.io/aws-load-balancer-type":"nlb",
  "service.beta.kubernetes.io/aws-load-balancer-eip-allocations":"eipalloc-1,eipalloc-2,eipalloc-3,eipalloc-4,eipalloc-5,eipalloc-6,eipalloc-7"}},
 "spec":{"type":"LoadBalancer","ports":[{"port":80,"nodePort":31081,"protocol":"TCP"}]}}
EOF
rejected() { grep -q SyncLoadBalancerFailed <<<"$(events_of "$1")"; }
if wait_until 20 rejected bad; then ok "an unsupported target-group attribute gives a SyncLoadBalancerFailed Event"
else fail "target-group-attributes rejected" "$(events_of bad)"; fi
grep -q "deregistration_delay.timeout_seconds=5 is not supported" <<<"$(event_msgs bad)" && ok "... saying which" || fail "rejection message" "$(event_msgs bad)"
if wait_until 20 rejected bad2; then ok "more EIP allocations than subnets gives a SyncLoadBalancerFailed Event"
else fail "eip-allocations rejected" "$(events_of bad2)"; fi
grep -q "Must have same number of EIP AllocationIDs (7)" <<<"$(event_msgs bad2)" && ok "... with upstream's message" || fail "eip message" "$(event_msgs bad2)"
[ "$(nlb_py "$(uid_lb bad)" lb)" = NONE ] && [ "$(nlb_py "$(uid_lb bad2)" lb)" = NONE ] &&
	[ "$(svc_py bad "s['metadata'].get('finalizers')")" = None ] &&
	ok "nothing is made for them (no NLB; no finalizer on the one rejected before any call)" || fail "nothing made for invalid Services" "$(all_tgs)"

# --- a changed type is refused, as upstream refuses it -------------------------------------------
kc create -f - >/dev/null <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"sw","namespace":"default"},
 "spec":{"type":"LoadBalancer","ports":[{"port":80,"nodePort":31280,"protocol":"TCP"}]}}
EOF
swlb=$(uid_lb sw)
sw_up() { [ -n "$(kc get svc sw -o jsonpath='{.status.loadBalancer.ingress[0].hostname}')" ]; }
wait_until 40 sw_up || fail "a classic ELB Service is made" "$(event_msgs sw)"
kc annotate svc sw service.beta.kubernetes.io/aws-load-balancer-type=nlb >/dev/null
type_refused() { grep -q "the load balancer type cannot be changed" <<<"$(event_msgs sw)"; }
if wait_until 20 type_refused; then ok "changing a classic ELB Service to nlb gives a SyncLoadBalancerFailed Event"
else fail "type change refused" "$(event_msgs sw)"; fi
[ "$(nlb_py "$swlb" lb)" = NONE ] && ok "... and no NLB is made beside the ELB" || fail "type change made an NLB" "$(nlb_py "$swlb" lb)"
refused_to() { grep -q "type cannot be changed (to $2): $3 " <<<"$(event_msgs "$1")"; }
kc annotate --overwrite svc sw service.beta.kubernetes.io/aws-load-balancer-type=none >/dev/null
if wait_until 20 refused_to sw none "a classic load balancer"; then ok "changing it to Deckhouse's none is refused too (Event names the classic ELB)"
else fail "ELB to none refused" "$(event_msgs sw)"; fi
! grep -q "${swlb:0:30}-" <<<"$(all_tgs)" && ok "... and no target group of none is made" || fail "ELB to none made target groups" "$(all_tgs)"
kc delete svc sw --wait=false >/dev/null
sw_gone() { ! kc get svc sw >/dev/null 2>&1; }
wait_until 40 sw_gone && [ "$(moto_py "print(len(elb.describe_load_balancers()['LoadBalancerDescriptions']))")" = 0 ] &&
	ok "deleting it (now annotated nlb) deletes the classic ELB" || fail "ELB of a type-changed Service deleted" "$(tail -5 "$T_TMP/ccm1.log")"

# --- Deckhouse's none ---------------------------------------------------------------------------
kc create -f - >/dev/null <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"tgonly","namespace":"default","annotations":{
  "service.beta.kubernetes.io/aws-load-balancer-type":"none"}},
 "spec":{"type":"LoadBalancer","ports":[
  {"name":"a","port":80,"nodePort":31180,"protocol":"TCP"},{"name":"b","port":81,"nodePort":31181,"protocol":"TCP"}]}}
EOF
nlbn=$(uid_lb tgonly)
none_status() { [ "$(svc_py tgonly "s['status']['loadBalancer']['ingress']")" = "[{'hostname': 'none', 'ip': '0.0.0.0'}]" ]; }
if wait_until 30 none_status; then ok "none: status ingress ip 0.0.0.0, hostname none (as Deckhouse sets it)"
else fail "none status" "$(svc_py tgonly "s.get('status')") $(event_msgs tgonly)"; fi
t0n="${nlbn:0:30}-0" t1n="${nlbn:0:30}-1"
got=$(moto_py "
tg = {t['TargetGroupName']: t for t in elbv2.describe_target_groups(Names=['$t0n', '$t1n'])['TargetGroups']}
print(sorted((n, t['Port'], t['HealthCheckProtocol'], t['HealthCheckPort'], t['HealthCheckPath'], sorted(d['Target']['Id'] for d in elbv2.describe_target_health(TargetGroupArn=t['TargetGroupArn'])['TargetHealthDescriptions'])) for n, t in tg.items()))")
want="[('$t0n', 31180, 'HTTP', '10256', '/healthz', $(sorted_ids "$i1" "$i2" "$i4")), ('$t1n', 31181, 'HTTP', '10256', '/healthz', $(sorted_ids "$i1" "$i2" "$i4"))]"
[ "$got" = "$want" ] && ok "none: target groups <lb name>-<i> on the NodePorts, kube-proxy's :10256/healthz, the Nodes as targets" || fail "none target groups" "$got want $want"
[ "$(nlb_py "$nlbn" lb)" = NONE ] && ok "none: no load balancer" || fail "none made a load balancer" "$(nlb_py "$nlbn" lb)"
kc annotate --overwrite svc tgonly service.beta.kubernetes.io/aws-load-balancer-type=nlb >/dev/null
if wait_until 20 refused_to tgonly nlb "target groups of type none"; then ok "changing none to nlb is refused with an Event"
else fail "none to nlb refused" "$(event_msgs tgonly)"; fi
[ "$(nlb_py "$nlbn" lb)" = NONE ] && ok "... and no NLB is made" || fail "none to nlb made an NLB" "$(nlb_py "$nlbn" lb)"
kc annotate svc tgonly service.beta.kubernetes.io/aws-load-balancer-type- >/dev/null
if wait_until 20 refused_to tgonly classic "target groups of type none"; then ok "changing none to a classic ELB is refused with an Event"
else fail "none to classic refused" "$(event_msgs tgonly)"; fi
[ "$(moto_py "print(len([l for l in elb.describe_load_balancers()['LoadBalancerDescriptions'] if l['LoadBalancerName'] == '$nlbn']))")" = 0 ] &&
	ok "... and no classic ELB is made" || fail "none to classic made an ELB" "$(moto_py "print(elb.describe_load_balancers())")"
kc delete svc tgonly --wait=false >/dev/null
none_gone() { ! grep -q "${nlbn:0:30}" <<<"$(all_tgs)" && ! kc get svc tgonly >/dev/null 2>&1; }
if wait_until 30 none_gone; then ok "none: deleting the Service (now without the none annotation) deletes its target groups"
else fail "none deleted" "$(all_tgs)"; fi

# --- delete -------------------------------------------------------------------------------------
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc delete svc web-app --wait=false >/dev/null
gone() { ! kc get svc web-app >/dev/null 2>&1; }
if wait_until 40 gone; then ok "the Service is deleted once its finalizer is removed"
else fail "the Service is deleted" "$(tail -20 "$T_TMP/ccm1.log")"; fi
sleep 2
delete_calls=$(calls)
[ "$(tr ' ' '\n' <<<"$(call_log)" | grep -c '^DeleteLoadBalancer$')" = 2 ] &&
	ok "the delete is one pass: a classic and an NLB DeleteLoadBalancer, once each ($delete_calls calls)" \
	|| fail "the delete is one pass" "$(call_log)"
[ "$(nlb_py "$lb" lb)" = NONE ] && ok "the NLB is deleted" || fail "NLB deleted" "$(nlb_py "$lb" lb)"
# Events are sent by the recorder's own thread: the last one may land after the Service is gone
deleted_event() { grep -q DeletedLoadBalancer <<<"$(events_of web-app)"; }
wait_until 20 deleted_event && ok "Event DeletedLoadBalancer" || fail "DeletedLoadBalancer" "$(events_of web-app)"
# The finalizer patch carries the resourceVersion of the status patch just before it: no 409.
! grep -q "failed to remove the finalizer" "$T_TMP/ccm1.log" && ok "every finalizer removal succeeded at the first try (no conflict)" ||
	fail "finalizer removal conflicted" "$(grep "failed to remove the finalizer" "$T_TMP/ccm1.log")"
kc delete svc loc --wait=false >/dev/null
loc_gone() { ! kc get svc loc >/dev/null 2>&1; }
wait_until 40 loc_gone || fail "the Local Service is deleted" "$(tail -10 "$T_TMP/ccm1.log")"
left=$(moto_py "print(len(elbv2.describe_load_balancers()['LoadBalancers']), len(elbv2.describe_target_groups()['TargetGroups']))")
[ "$left" = "0 0" ] && ok "moto holds no load balancer and no target group" || fail "moto state after delete" "$left $(all_tgs)"
[ "$(node_rules)" = "[]" ] && ok "the node group's kubernetes.io/rule/nlb/ rules are revoked" || fail "node rules revoked" "$(node_rules)"

[ "$T_FAIL" = 0 ] || grep -E '^[EW]' "$T_TMP/ccm1.log" | head -20
echo "# AWS calls: create $create_calls ($create_log)"
echo "# AWS calls: re-sync after a label $label_calls, full re-check $verify_calls, delete $delete_calls"
ccm_stop_check ccm1
t_summary
