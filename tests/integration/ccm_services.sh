#!/usr/bin/env bash
# tests: product
# (runs $AWS_K8S ccm through ccm_start in ccm_lib.sh)
# aws-k8s ccm's service controller against moto, behind the fault proxy (every AWS call
# counted): a Service of type LoadBalancer with three ports gets a classic ELB (name, listeners,
# health check, instances, its security group and the node group's rule, the finalizer, the
# status hostname, Events); Nodes coming, going and excluded change the registration; an
# invalid annotation gives a Warning Event and nothing in AWS; deleting the Service leaves
# nothing in moto. Prints the AWS calls of a create, of re-syncs and of a delete.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi

# as in a real default VPC, the main route table routes to an internet gateway (the default
# subnets are public); the Nodes share one cluster-tagged node group
read -r nodesg < <(moto_py "
vpc = ec2.describe_vpcs(Filters=[{'Name': 'is-default', 'Values': ['true']}])['Vpcs'][0]['VpcId']
igw = ec2.create_internet_gateway()['InternetGateway']['InternetGatewayId']
ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
main = ec2.describe_route_tables(Filters=[{'Name': 'vpc-id', 'Values': [vpc]}, {'Name': 'association.main', 'Values': ['true']}])['RouteTables'][0]
ec2.create_route(RouteTableId=main['RouteTableId'], DestinationCidrBlock='0.0.0.0/0', GatewayId=igw)
sg = ec2.create_security_group(GroupName='nodes', Description='nodes', VpcId=vpc, TagSpecifications=[
    {'ResourceType': 'security-group', 'Tags': [{'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])['GroupId']
print(sg)")
read -r i1 d1 < <(instance n1 "SecurityGroupIds=['$nodesg']")
read -r i2 d2 < <(instance n2 "SecurityGroupIds=['$nodesg']")
read -r i3 d3 < <(instance n3 "SecurityGroupIds=['$nodesg']")
read -r i4 d4 < <(instance n4 "SecurityGroupIds=['$nodesg']")
for n in 1 2 3; do
	id=$(eval echo "\$i$n") dns=$(eval echo "\$d$n")
	node_create "$dns" "aws:///us-east-1a/$id"
done

ccm_start ccm1 || fail "ccm starts" "$(tail -5 "$T_TMP/ccm1.log")"

# elb NAME PYEXPR: evaluates a Python expression on the ELB's description (d), or prints NONE
elb_py() { moto_py "
elb = client('elb')
try:
    d = elb.describe_load_balancers(LoadBalancerNames=['$1'])['LoadBalancerDescriptions'][0]
except Exception:
    print('NONE'); raise SystemExit
print($2)"; }
sg_py() { moto_py "
g = ec2.describe_security_groups(Filters=[{'Name': 'group-name', 'Values': ['$1']}])['SecurityGroups']
print($2)"; }
svc_py() {
	kc get svc "$1" -o json 2>/dev/null | python3 -c "
import json, sys
s = json.load(sys.stdin)
print($2)"
}
events_of() { kc get events -o json | python3 -c "
import json, sys
print(' '.join(e['reason'] for e in json.load(sys.stdin)['items'] if e['involvedObject']['name'] == '$1'))"; }

t0=$(date +%s.%N)
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc create -f - >/dev/null <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"default"},
 "spec":{"type":"LoadBalancer","selector":{"app":"web"},"ports":[
  {"name":"http","port":80,"targetPort":8080,"nodePort":30080,"protocol":"TCP"},
  {"name":"https","port":443,"targetPort":8443,"nodePort":30443,"protocol":"TCP"},
  {"name":"alt","port":8000,"targetPort":8000,"nodePort":30800,"protocol":"TCP"}],
  "loadBalancerSourceRanges":["10.0.0.0/8","192.168.1.0/24"]}}
EOF
uid=$(kc get svc web -o jsonpath='{.metadata.uid}')
lb="a$(tr -d - <<<"$uid" | cut -c1-31)"
host_set() { [ -n "$(kc get svc web -o jsonpath='{.status.loadBalancer.ingress[0].hostname}')" ]; }
if wait_until 40 host_set; then ok "the Service gets status.loadBalancer.ingress[].hostname"
else fail "the Service gets a hostname" "$(tail -20 "$T_TMP/ccm1.log")"; fi
create_calls=$(calls)
t1=$(date +%s.%N)
# one pass: the Service queued again by our own patches' echoes (before the informer has the
# status) costs no AWS call (it cost a second full pass: 5 more calls)
sleep 3
[ "$(calls)" = "$create_calls" ] && ok "the create is one pass: no AWS call once the status is set ($create_calls calls)" \
	|| fail "the create is one pass" "$create_calls calls until the status, $(calls) after: $(tb_json "$FAULTPROXY_URL/_control/calls?log=100" | python3 -c 'import json,sys; print(" ".join(l["action"] for l in json.load(sys.stdin)["log"]))')"
# the Service queued while the informer does not show the status written (as with our own
# patch's echo, not there yet; here someone cleared it): the status is written again from what
# the sync remembers, at no AWS cost (it cost a full pass: 5 calls)
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc patch svc web --subresource=status --type=merge -p '{"status":{"loadBalancer":{"ingress":null}}}' >/dev/null
if wait_until 20 host_set; then
	sleep 1
	[ "$(calls)" = 0 ] && ok "a Service queued without the status written gets it again with no AWS call" \
		|| fail "status written again at no AWS cost" "$(calls): $(tb_json "$FAULTPROXY_URL/_control/calls?log=100" | python3 -c 'import json,sys; print(" ".join(l["action"] for l in json.load(sys.stdin)["log"]))')"
else
	fail "the cleared status is written again" "$(tail -5 "$T_TMP/ccm1.log")"
fi
host=$(kc get svc web -o jsonpath='{.status.loadBalancer.ingress[0].hostname}')
[ "$host" = "$(elb_py "$lb" "d['DNSName']")" ] && ok "the hostname is the ELB's DNS name ($lb)" \
	|| fail "the hostname is the ELB's DNS name" "host=$host lb=$lb $(elb_py "$lb" "d")"

got=$(elb_py "$lb" "sorted((l['Listener']['LoadBalancerPort'], l['Listener']['InstancePort'], l['Listener']['Protocol'], l['Listener']['InstanceProtocol']) for l in d['ListenerDescriptions'])")
[ "$got" = "[(80, 30080, 'TCP', 'TCP'), (443, 30443, 'TCP', 'TCP'), (8000, 30800, 'TCP', 'TCP')]" ] &&
	ok "listeners: each port to its NodePort, TCP" || fail "listeners" "$got"
got=$(elb_py "$lb" "(d['HealthCheck']['Target'], d['HealthCheck']['HealthyThreshold'], d['HealthCheck']['UnhealthyThreshold'], d['HealthCheck']['Timeout'], d['HealthCheck']['Interval'])")
[ "$got" = "('TCP:30080', 2, 6, 5, 10)" ] && ok "health check TCP on the first NodePort, 2/6/5/10" \
	|| fail "health check" "$got"
got=$(elb_py "$lb" "sorted(i['InstanceId'] for i in d['Instances'])")
want=$(python3 -c "print(sorted(['$i1','$i2','$i3']))")
[ "$got" = "$want" ] && ok "the three Nodes' instances are registered" || fail "instances registered" "$got want $want"
got=$(elb_py "$lb" "(d['Scheme'], len(d['Subnets']) > 0, len(d['SecurityGroups']))")
[ "$got" = "('internet-facing', True, 1)" ] && ok "internet-facing, in subnets, one security group" || fail "scheme/subnets/groups" "$got"
sg=$(sg_py "k8s-elb-$lb" "g[0]['GroupId'] if g else 'NONE'")
[ "$(elb_py "$lb" "d['SecurityGroups'][0]")" = "$sg" ] && ok "the ELB's group is k8s-elb-<name>" || fail "the ELB's group" "$sg"
got=$(sg_py "k8s-elb-$lb" "sorted((p['IpProtocol'], p.get('FromPort'), r['CidrIp']) for p in g[0]['IpPermissions'] for r in p['IpRanges'])")
want="[('icmp', 3, '10.0.0.0/8'), ('icmp', 3, '192.168.1.0/24'), ('tcp', 80, '10.0.0.0/8'), ('tcp', 80, '192.168.1.0/24'), ('tcp', 443, '10.0.0.0/8'), ('tcp', 443, '192.168.1.0/24'), ('tcp', 8000, '10.0.0.0/8'), ('tcp', 8000, '192.168.1.0/24')]"
[ "$got" = "$want" ] && ok "the group admits each port (and ICMP 3/4) from the source ranges" || fail "ELB group rules" "$got"
node_rule() { moto_py "
i = ec2.describe_instances(InstanceIds=['$i1'])['Reservations'][0]['Instances'][0]
g = ec2.describe_security_groups(GroupIds=[i['SecurityGroups'][0]['GroupId']])['SecurityGroups'][0]
print(any(p['IpProtocol'] == '-1' and any(u['GroupId'] == '$sg' for u in p['UserIdGroupPairs']) for p in g['IpPermissions']))"; }
[ "$(node_rule)" = True ] && ok "the node group admits all traffic from the ELB's group" || fail "node group rule" "$(node_rule)"
[ "$(svc_py web "s['metadata'].get('finalizers')")" = "['service.kubernetes.io/load-balancer-cleanup']" ] &&
	ok "the finalizer is on the Service" || fail "finalizer" "$(svc_py web "s['metadata']")"
ev=$(events_of web)
grep -q EnsuringLoadBalancer <<<"$ev" && grep -q EnsuredLoadBalancer <<<"$ev" && ok "Events EnsuringLoadBalancer, EnsuredLoadBalancer" \
	|| fail "Events on the Service" "$ev"

# re-syncs: a label (not read) costs nothing; an unrelated annotation re-checks everything
ensured() { grep -c '"created the load balancer"\|ensure done' "$T_TMP/ccm1.log"; }
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc label svc web team=a >/dev/null
sleep 3
label_calls=$(calls)
[ "$label_calls" = 0 ] && ok "a change the controller does not read costs no AWS call" || fail "label re-sync calls" "$label_calls"
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
n_ev=$(events_of web | tr ' ' '\n' | grep -c EnsuredLoadBalancer)
kc annotate svc web example.com/x=1 >/dev/null
more_ensured() { [ "$(events_of web | tr ' ' '\n' | grep -c EnsuredLoadBalancer)" -gt "$n_ev" ] || \
	[ "$(kc get events -o json | python3 -c "import json,sys; print(sum(e.get('count',1) for e in json.load(sys.stdin)['items'] if e['reason']=='EnsuredLoadBalancer'))")" -gt "$n_ev" ]; }
wait_until 20 more_ensured
sleep 1
verify_calls=$(calls)
verify_log=$(tb_json "$FAULTPROXY_URL/_control/calls?log=100" | python3 -c 'import json,sys; print(" ".join(l["action"] for l in json.load(sys.stdin)["log"]))')
[ "$verify_calls" -le 8 ] && ok "a full re-check of an unchanged ELB: $verify_calls calls ($verify_log)" \
	|| fail "re-check calls bounded" "$verify_calls: $verify_log"
# attributes AWS already has are compared (DescribeLoadBalancerAttributes), not written again
! grep -qE "Modify|Set|Create|Delete|Authorize|Revoke|Register" <<<"$verify_log" &&
	ok "the re-check writes nothing (no ModifyLoadBalancerAttributes)" || fail "re-check writes" "$verify_log"

# additional-resource-tags changed after creation: AddTags/RemoveTags on the ELB; a key is removed
# only when the annotation (as this process last applied it) named it; foreign and cluster tags stay
elb_tags() { moto_py "
t = elb.describe_tags(LoadBalancerNames=['$lb'])['TagDescriptions'][0]['Tags']
print(sorted((x['Key'], x['Value']) for x in t if not x['Key'].startswith('kubernetes.io/')), sorted(x['Key'] for x in t if x['Key'].startswith('kubernetes.io/')))"; }
moto_py "elb.add_tags(LoadBalancerNames=['$lb'], Tags=[{'Key': 'owner', 'Value': 'ops'}])"
log_of() { tb_json "$FAULTPROXY_URL/_control/calls?log=100" | python3 -c 'import json,sys; print(" ".join(l["action"] for l in json.load(sys.stdin)["log"]))'; }
etags_are() { [ "$(elb_tags)" = "$1" ]; }
ckeys="['kubernetes.io/cluster/$CLUSTER', 'kubernetes.io/service-name']"
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc annotate svc web service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags=team=a,env=prod >/dev/null
want="[('env', 'prod'), ('owner', 'ops'), ('team', 'a')] $ckeys"
if wait_until 20 etags_are "$want"; then ok "additional-resource-tags added after creation are put on the ELB (AddTags)"
else fail "ELB tags added" "$(elb_tags) want $want $(log_of)"; fi
sleep 1
grep -q AddTags <<<"$(log_of)" && ! grep -q RemoveTags <<<"$(log_of)" && ok "... AddTags, no RemoveTags" || fail "ELB tag calls" "$(log_of)"
kc annotate --overwrite svc web service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags=env=test >/dev/null
want="[('env', 'test'), ('owner', 'ops')] $ckeys"
if wait_until 20 etags_are "$want"; then ok "a changed value is replaced and a dropped key removed; the foreign owner tag and the cluster tags stay"
else fail "ELB tags changed" "$(elb_tags) want $want $(log_of)"; fi
sleep 1
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
kc label --overwrite svc web team=b >/dev/null
sleep 3
[ "$(calls)" = 0 ] && ok "after the tag changes, an unchanged Service still costs no AWS call" || fail "re-sync after tags" "$(calls) $(log_of)"

# Nodes: one goes, one comes, one is excluded
inst() { elb_py "$lb" "' '.join(sorted(i['InstanceId'] for i in d['Instances']))"; }
inst_is() { [ "$(inst)" = "$1" ]; }
sorted_ids() { tr ' ' '\n' <<<"$*" | sort | tr '\n' ' ' | sed 's/ $//'; }
kc delete node "$d3" >/dev/null
want=$(sorted_ids "$i1 $i2")
if wait_until 20 inst_is "$want"; then ok "a deleted Node's instance is deregistered"
else fail "deleted Node deregistered" "$(inst)"; fi
node_create "$d4" "aws:///us-east-1a/$i4"
want=$(sorted_ids "$i1 $i2 $i4")
if wait_until 20 inst_is "$want"; then ok "a new Node's instance is registered"
else fail "new Node registered" "$(inst)"; fi
kc label node "$d1" node.kubernetes.io/exclude-from-external-load-balancers=true >/dev/null
want=$(sorted_ids "$i2 $i4")
if wait_until 20 inst_is "$want"; then ok "a Node with the exclude label is deregistered"
else fail "excluded Node deregistered" "$(inst)"; fi
kc patch node "$d2" -p '{"spec":{"unschedulable":true}}' >/dev/null
want=$i4
if wait_until 20 inst_is "$want"; then ok "an unschedulable Node is deregistered"
else fail "unschedulable Node deregistered" "$(inst)"; fi
grep -q UpdatedLoadBalancer <<<"$(events_of web)" && ok "Event UpdatedLoadBalancer for the hosts" || fail "UpdatedLoadBalancer" "$(events_of web)"

# an invalid annotation: an Event, nothing made
kc create -f - >/dev/null <<'EOF'
{"apiVersion":"v1","kind":"Service","metadata":{"name":"bad","namespace":"default",
 "annotations":{"service.beta.kubernetes.io/aws-load-balancer-proxy-protocol":"yes"}},
 "spec":{"type":"LoadBalancer","ports":[{"port":80,"nodePort":31080,"protocol":"TCP"}]}}
EOF
buid=$(kc get svc bad -o jsonpath='{.metadata.uid}')
blb="a$(tr -d - <<<"$buid" | cut -c1-31)"
rejected() { grep -q SyncLoadBalancerFailed <<<"$(events_of bad)"; }
if wait_until 20 rejected; then ok "an invalid annotation gives a SyncLoadBalancerFailed Event"
else fail "invalid annotation Event" "$(events_of bad)"; fi
msg=$(kc get events -o json | python3 -c "import json,sys; print([e['message'] for e in json.load(sys.stdin)['items'] if e['involvedObject']['name']=='bad'][0])")
grep -q "the only value supported currently is '\*'" <<<"$msg" && ok "the Event says why (upstream's message)" || fail "Event message" "$msg"
[ "$(elb_py "$blb" "d")" = NONE ] && [ "$(sg_py "k8s-elb-$blb" "len(g)")" = 0 ] &&
	[ "$(svc_py bad "s['metadata'].get('finalizers')")" = None ] &&
	ok "nothing is made for it (no ELB, no group, no finalizer)" || fail "nothing made for the invalid Service" "$(elb_py "$blb" "d")"

# three more ELBs (one port each), for the restart's concurrent re-checks and the drift probe
for k in 1 2 3; do
	kc create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Service","metadata":{"name":"w$k","namespace":"default"},
 "spec":{"type":"LoadBalancer","selector":{"app":"w$k"},"ports":[{"port":80,"nodePort":3181$k,"protocol":"TCP"}]}}
EOF
done
w_hosts() { [ "$(kc get svc w1 w2 w3 -o jsonpath='{range .items[*]}{.status.loadBalancer.ingress[0].hostname}{"\n"}{end}' | grep -c .)" = 3 ]; }
wait_until 60 w_hosts || fail "three more ELB Services get their hostnames" "$(tail -5 "$T_TMP/ccm1.log")"

# a restart: the tags last applied are not known any more, so a key dropped while the controller
# was down stays (it cannot tell ours from someone else's) and new ones are added; 4 workers
# re-check the 4 ELBs at once with a cold instance cache: one refill (single-flight), not one
# DescribeInstances per worker
ccm_stop_check ccm1
kc annotate --overwrite svc web service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags=k=v >/dev/null
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
ccm_start ccm1 --concurrent-service-syncs=4 || fail "ccm starts again" "$(tail -5 "$T_TMP/ccm1.log")"
want="[('env', 'test'), ('k', 'v'), ('owner', 'ops')] $ckeys"
if wait_until 30 etags_are "$want"; then ok "after a restart a new key is added and nothing is removed (env, dropped while down, stays)"
else fail "ELB tags after a restart" "$(elb_tags) want $want"; fi
n_logged() { tr ' ' '\n' <<<"$(log_of)" | grep -c "^$1\$"; }
rechecked() { [ "$(n_logged ModifyLoadBalancerAttributes)" -ge 4 ]; }
wait_until 60 rechecked
sleep 1
[ "$(calls DescribeInstances)" = 1 ] && ok "4 workers re-checking 4 ELBs with a cold instance cache: 1 DescribeInstances (one refill, the others wait for it)" \
	|| fail "single-flight instance refill" "$(calls DescribeInstances) DescribeInstances: $(log_of)"

# drift: with --min-resync-period=6m the probe runs every 5 s (6m / 72): an instance
# deregistered behind the controller's back is registered again; once the start's re-checks are
# done (each keeps what it described as the probe's reference), a probe pass is one
# DescribeLoadBalancers for the 4 (20 names a call), nothing else
ccm_stop_check ccm1
ccm_start ccm1 --min-resync-period=6m || fail "ccm starts with --min-resync-period=6m" "$(tail -5 "$T_TMP/ccm1.log")"
probe_only() { # the calls of 6 s are probes only
	tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
	sleep 6
	local l
	l=$(log_of)
	[ -n "$l" ] && [ -z "$(tr ' ' '\n' <<<"$l" | grep -v '^DescribeLoadBalancers$')" ]
}
if wait_until 60 probe_only; then
	tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
	sleep 11
	n_probe=$(calls)
	[ "$(n_logged DescribeLoadBalancers)" = "$n_probe" ] && [ "$n_probe" -ge 1 ] && [ "$n_probe" -le 3 ] &&
		ok "steady state: the probe makes one DescribeLoadBalancers per 5 s pass for the 4 ELBs ($n_probe calls in 11 s)" \
		|| fail "probe calls" "$n_probe: $(log_of)"
else
	fail "the probe settles to DescribeLoadBalancers only" "$(log_of)"
fi
w1lb="a$(kc get svc w1 -o jsonpath='{.metadata.uid}' | tr -d - | cut -c1-31)"
moto_py "elb = client('elb'); elb.deregister_instances_from_load_balancer(LoadBalancerName='$w1lb', Instances=[{'InstanceId': '$i4'}])"
w1_back() { [ "$(elb_py "$w1lb" "'$i4' in [i['InstanceId'] for i in d['Instances']]")" = True ]; }
if wait_until 30 w1_back; then ok "drift: an instance deregistered behind the controller's back is registered again (the probe saw the ELB differ)"
else fail "drift repaired" "$(elb_py "$w1lb" "d['Instances']") $(tail -5 "$T_TMP/ccm1.log")"; fi
ccm_stop_check ccm1
ccm_start ccm1 || fail "ccm starts again" "$(tail -5 "$T_TMP/ccm1.log")"
kc delete svc w1 w2 w3 --wait=false >/dev/null
w_gone() { ! kc get svc w1 >/dev/null 2>&1 && ! kc get svc w2 >/dev/null 2>&1 && ! kc get svc w3 >/dev/null 2>&1; }
wait_until 60 w_gone || fail "the three ELB Services are deleted" "$(tail -5 "$T_TMP/ccm1.log")"
sleep 2

# delete: nothing left. The first finalizer removal fails (the API server answers 500 once): the
# retry, like the echo of our own status patch, finds the load balancer already deleted by this
# process and only writes to Kubernetes (it deleted everything again: 4 more calls)
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
curl -sSk --max-time 10 -X POST -H 'Content-Type: application/json' "$KAS_URL/_control/faults" \
	--data-binary '{"action":"error","method":"PATCH","path":"/services/web($|\\?)","code":500,"count":1}' >/dev/null ||
	fail "API server fault rule accepted"
kc delete svc web --wait=false >/dev/null
gone() { ! kc get svc web >/dev/null 2>&1; }
if wait_until 40 gone; then ok "the Service is deleted once its finalizer is removed"
else fail "the Service is deleted" "$(tail -20 "$T_TMP/ccm1.log")"; fi
sleep 2
delete_calls=$(calls)
delete_log=$(log_of)
[ "$(tr ' ' '\n' <<<"$delete_log" | grep -c '^DeleteLoadBalancer$')" = 1 ] &&
	ok "the delete is one pass: the echo of our own status patch deletes nothing again ($delete_calls calls)" \
	|| fail "the delete is one pass" "$delete_log"
[ "$(elb_py "$lb" "d")" = NONE ] && ok "the ELB is deleted" || fail "ELB deleted" "$(elb_py "$lb" "d")"
[ "$(sg_py "k8s-elb-$lb" "len(g)")" = 0 ] && ok "its security group is deleted" || fail "ELB group deleted" "$(sg_py "k8s-elb-$lb" "g")"
[ "$(node_rule)" = False ] && ok "the node group's rule is revoked" || fail "node rule revoked" "$(node_rule)"
left=$(moto_py "
elb = client('elb')
print(len(elb.describe_load_balancers()['LoadBalancerDescriptions']), len([g for g in ec2.describe_security_groups()['SecurityGroups'] if g['GroupName'].startswith('k8s-elb-')]))")
[ "$left" = "0 0" ] && ok "moto holds no load balancer and no k8s-elb- group" || fail "moto state after delete" "$left"
# Events are sent by the recorder's own thread: the last one may land after the Service is gone
deleted_event() { grep -q DeletedLoadBalancer <<<"$(events_of web)"; }
wait_until 20 deleted_event && ok "Event DeletedLoadBalancer" || fail "DeletedLoadBalancer" "$(events_of web)"

[ "$T_FAIL" = 0 ] || grep -E '^[EW]' "$T_TMP/ccm1.log" | head -20
echo "# AWS calls: create $create_calls, re-sync after a label 0 = $label_calls, full re-check $verify_calls, delete $delete_calls"
ccm_stop_check ccm1
t_summary
