#!/usr/bin/env bash
# tests: product
# aws-k8s ccm against moto and the test API server: start-up errors, the cloud-node controller
# (Nodes named by private DNS name, instance ID, Name tag and providerID in every accepted
# form; a missing and an ambiguous instance; the periodic re-sync) and the node-lifecycle
# controller (stopped -> shutdown taint, Ready -> taint removed, terminated -> Node deleted).
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

# ---- start-up errors (no server needed) -------------------------------------------------
printf '[Global]\nKubernetesClusterID = c1\nBogusKey = 1\n' >"$T_TMP/bad.ini"
out=$("$AWS_K8S" ccm --cloud-provider=aws --cloud-config="$T_TMP/bad.ini" 2>&1)
rc=$?
if [ $rc = 1 ] && grep -q "line 3: unknown key 'BogusKey' in section \[Global\]" <<<"$out"; then
	ok "an unknown cloud-config key is a clear start-up error"
else fail "an unknown cloud-config key is a clear start-up error" "rc=$rc $out"; fi
printf '[Global\nZone = a\n' >"$T_TMP/bad2.ini"
out=$("$AWS_K8S" ccm --cloud-provider=aws --cloud-config="$T_TMP/bad2.ini" 2>&1)
rc=$?
if [ $rc = 1 ] && grep -q "line 1: malformed section header" <<<"$out"; then
	ok "a malformed cloud config is a clear start-up error"
else fail "a malformed cloud config is a clear start-up error" "rc=$rc $out"; fi
out=$("$AWS_K8S" ccm --cloud-provider=aws --no-such-flag 2>&1)
rc=$?
if [ $rc = 2 ] && grep -q "unknown flag '--no-such-flag'" <<<"$out"; then ok "an unknown flag is rejected (exit 2)"
else fail "an unknown flag is rejected (exit 2)" "rc=$rc $out"; fi
out=$("$AWS_K8S" ccm --controllers='*,-bogus' --cloud-provider=aws 2>&1)
rc=$?
if [ $rc = 2 ] && grep -q "'bogus' is not in the list of known controllers" <<<"$out"; then ok "an unknown controller is rejected"
else fail "an unknown controller is rejected" "rc=$rc $out"; fi
out=$("$AWS_K8S" ccm 2>&1)
if [ $? = 1 ] && grep -q "cloud-provider cannot be empty" <<<"$out"; then ok "--cloud-provider is required"
else fail "--cloud-provider is required" "$out"; fi

if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi

# ---- the manifests under deploy/ccm (rendered as tests/integration/deploy_manifests.sh does) --
kubectl kustomize "$T_ROOT/deploy/ccm/example" >"$T_TMP/ccm-deploy.yaml" 2>&1
out=$(kc apply --dry-run=server -f "$T_TMP/ccm-deploy.yaml" 2>&1)
if [ $? = 0 ]; then ok "deploy/ccm applies to the API server (dry run)"; else fail "deploy/ccm applies" "$out"; fi
mapfile -t dargs < <(python3 -c "
import yaml
for d in yaml.safe_load_all(open('$T_TMP/ccm-deploy.yaml')):
    if d['kind'] != 'Deployment': continue
    for a in d['spec']['template']['spec']['containers'][0]['args']: print(a)")
if [ ${#dargs[@]} -ge 8 ] && "$AWS_K8S" ccm "${dargs[@]}" --help >/dev/null 2>&1; then
	ok "the Deployment's arguments (${#dargs[@]}) are all accepted by aws-k8s ccm"
else fail "the Deployment's arguments are accepted" "${dargs[*]}"; fi

# ---- instances and Nodes ------------------------------------------------------------------
read -r iA dA < <(instance node-a)
read -r iB dB < <(instance node-b)
read -r iC dC < <(instance worker-c)
read -r iD dD < <(instance node-d)
read -r iE dE < <(instance node-e)
read -r iF dF < <(instance node-f)
read -r iT1 _ < <(instance twin)
read -r iT2 _ < <(instance twin)
read -r iX _ < <(moto_py "print(run_instance(tags={'Name': 'other-x', 'kubernetes.io/cluster/c2': 'owned'}))")
# a second interface with two more private IPs on A
moto_py "
i = ec2.describe_instances(InstanceIds=['$iA'])['Reservations'][0]['Instances'][0]
eni = ec2.create_network_interface(SubnetId=i['SubnetId'], SecondaryPrivateIpAddressCount=2)['NetworkInterface']
ec2.attach_network_interface(NetworkInterfaceId=eni['NetworkInterfaceId'], InstanceId='$iA', DeviceIndex=1)
"
zone=$(moto_py "print(ec2.describe_instances(InstanceIds=['$iA'])['Reservations'][0]['Instances'][0]['Placement']['AvailabilityZone'])")
zone_id=$(moto_py "print(ec2.describe_availability_zones(ZoneNames=['$zone'])['AvailabilityZones'][0]['ZoneId'])")

node_create "$dA"
node_create "$iB"
node_create worker-c
node_create node-d "aws:///$zone/$iD"
node_create node-e "aws:////$iE"
node_create node-f "$iF"
node_create ghost
node_create twin
node_create other-x
node_create static-1 "static:///static-1"
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null

t0=$(date +%s.%N)
ccm_start ccm1 --node-status-update-frequency=5s --controllers='*,-route' ||
	fail "ccm starts" "$(tail -5 "$T_TMP/ccm1.log")"
check "/healthz answers ok over HTTPS" bash -c "curl -sk https://127.0.0.1:$CCM_PORT_ccm1/healthz | grep -qx ok"

initialized() { [ "$(node_py "$1" "'$CCM_TAINT' in taints")" = False ]; }
CCM_TAINT=node.cloudprovider.kubernetes.io/uninitialized
for n in "$dA" "$iB" worker-c node-d node-e node-f; do
	wait_until 20 initialized "$n"
done
# the calls of the first 1.5 s: the initialization (the first re-sync comes after 5 s, and
# Nodes that failed are not looked up again within 5 s)
di=$(calls_between "$t0" "$(python3 -c "print($t0 + 1.5)")" DescribeInstances)
all=$(calls_between "$t0" "$(python3 -c "print($t0 + 1.5)")")
for pair in "$dA:$iA:private DNS name" "$iB:$iB:instance ID" "worker-c:$iC:Name tag" \
	"node-d:$iD:providerID aws:///zone/id" "node-e:$iE:providerID aws:////id" "node-f:$iF:bare providerID"; do
	IFS=: read -r n id how <<<"$pair"
	if initialized "$n"; then ok "node by $how loses the uninitialized taint"
	else fail "node by $how loses the uninitialized taint" "$(node_py "$n" taints)"; fi
	want_pid="aws:///$zone/$id"
	case $how in *aws:////*) want_pid="aws:////$id" ;; bare*) want_pid=$id ;; esac
	got=$(node_py "$n" 'n["spec"].get("providerID")')
	if [ "$got" = "$want_pid" ]; then ok "node by $how: providerID $got"
	else fail "node by $how: providerID" "got $got, want $want_pid"; fi
	got=$(node_py "$n" "' '.join(labels.get(k,'-') for k in ['topology.kubernetes.io/zone','failure-domain.beta.kubernetes.io/zone','topology.kubernetes.io/region','failure-domain.beta.kubernetes.io/region','node.kubernetes.io/instance-type','beta.kubernetes.io/instance-type','topology.k8s.aws/zone-id'])")
	want="$zone $zone us-east-1 us-east-1 m5.large m5.large $zone_id"
	if [ "$got" = "$want" ]; then ok "node by $how: GA, beta and zone-id labels"
	else fail "node by $how: labels" "got '$got', want '$want'"; fi
done
# addresses of A: every private IP of both ENIs (primary first), external IP, DNS names
want=$(moto_py "
i = ec2.describe_instances(InstanceIds=['$iA'])['Reservations'][0]['Instances'][0]
enis = sorted(i['NetworkInterfaces'], key=lambda e: e['Attachment']['DeviceIndex'])
a = [('InternalIP', p['PrivateIpAddress']) for e in enis for p in e['PrivateIpAddresses']]
a += [('ExternalIP', i['PublicIpAddress']), ('InternalDNS', i['PrivateDnsName']), ('Hostname', i['PrivateDnsName']), ('ExternalDNS', i['PublicDnsName'])]
print(a)")
got=$(node_py "$dA" addrs)
if [ "$got" = "$want" ] && [ "$(grep -o InternalIP <<<"$got" | wc -l)" = 4 ]; then
	ok "addresses: every private IP of every ENI, ExternalIP, InternalDNS, Hostname, ExternalDNS"
else fail "addresses of a two-ENI instance" "got $got, want $want"; fi
# exactly three: the first reconcile looks up every pending Node in one batch (ccm_node.c
# lookup_batch): by instance ID (B, D, E, F: one call), by private DNS name (A: one call, found,
# so no Name-tag fallback), by Name tag (worker-c, ghost, twin, other-x: one call); static-1 has
# another provider's ID. The misses are cached for 5 s, so no Node is looked up again in 1.5 s.
if [ "$di" = 3 ]; then ok "9 Nodes looked up with exactly 3 DescribeInstances (batched)"
else fail "9 Nodes looked up with exactly 3 DescribeInstances" "$di: $(tb_json "$FAULTPROXY_URL/_control/calls?log=30" | python3 -c "
import json, sys
print([(round(l['time'] - $t0, 2), l['action']) for l in json.load(sys.stdin)['log']][:12])")"; fi
if [ "$all" = "$((di + 1))" ] && [ "$(calls DescribeAvailabilityZones)" = 1 ]; then
	ok "no other AWS call than one DescribeAvailabilityZones"
else fail "AWS calls of the initialization" "$(tb_json "$FAULTPROXY_URL/_control/calls?log=0" | tr -d '\n ')"; fi

# missing, ambiguous, foreign-cluster, other-provider Nodes keep the taint and get an event
sleep 2
for n in ghost twin other-x static-1; do
	if [ "$(node_py "$n" "'$CCM_TAINT' in taints")" = True ] && [ "$(node_py $n 'n["spec"].get("providerID","")')" = "$([ $n = static-1 ] && echo static:///static-1)" ]; then
		ok "node $n keeps the taint and gets no providerID"
	else fail "node $n keeps the taint and gets no providerID" "$(node_py $n 'n["spec"]')"; fi
done
ev() { kc get events -A -o json | python3 -c "
import json, sys
for e in json.load(sys.stdin)['items']:
    if e['involvedObject']['name'] == '$1' and e['reason'] == '$2': print(e['type'], e['message']); break"; }
got=$(ev ghost FailedToInitialize)
if grep -q "^Warning .*private DNS name or the Name tag ghost" <<<"$got"; then ok "a Node without an instance gets a warning event: $got"
else fail "a Node without an instance gets a warning event" "$got"; fi
got=$(ev twin FailedToInitialize)
if grep -q "^Warning several EC2 instances" <<<"$got"; then ok "an ambiguous Node gets a warning event"
else fail "an ambiguous Node gets a warning event" "$got"; fi
if [ -n "$(ev node-d Synced)" ]; then ok "an initialized Node gets a Synced event"; else fail "an initialized Node gets a Synced event"; fi

# ---- periodic re-sync (every 5 s here) ---------------------------------------------------
moto_py "
i = ec2.describe_instances(InstanceIds=['$iD'])['Reservations'][0]['Instances'][0]
ec2.assign_private_ip_addresses(NetworkInterfaceId=i['NetworkInterfaces'][0]['NetworkInterfaceId'], SecondaryPrivateIpAddressCount=1)"
kc label node node-d topology.k8s.aws/zone-id- >/dev/null
has_3ips() { [ "$(node_py node-d "sum(1 for t, a in addrs if t == 'InternalIP')")" = 2 ]; }
has_zid() { [ "$(node_py node-d "labels.get('topology.k8s.aws/zone-id')")" = "$zone_id" ]; }
if wait_until 20 has_3ips; then ok "re-sync adds a new private IP to the addresses"; else fail "re-sync adds a new private IP" "$(node_py node-d addrs)"; fi
if wait_until 20 has_zid; then ok "re-sync restores a removed cloud label"; else fail "re-sync restores a removed cloud label"; fi

# ---- node lifecycle ------------------------------------------------------------------------
set_ready() { kc patch node "$1" --subresource=status --type=merge \
	-p "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"$2\",\"reason\":\"t\"}]}}" >/dev/null; }
shut() { [ "$(node_py "$1" "'node.cloudprovider.kubernetes.io/shutdown' in taints")" = "$2" ]; }
gone() { ! kc get node "$1" >/dev/null 2>&1; }

set_ready node-e False
sleep 3
if shut node-e False && ! gone node-e; then ok "a NotReady Node of a running instance is left alone"
else fail "a NotReady Node of a running instance is left alone"; fi
moto_py "ec2.stop_instances(InstanceIds=['$iE'])" >/dev/null
if wait_until 10 shut node-e True; then ok "stopping the instance of a NotReady Node adds the shutdown taint"
else fail "stopped instance: shutdown taint" "$(node_py node-e taints)"; fi
got=$(node_py node-e "[t for t in n['spec']['taints'] if t['key'] == 'node.cloudprovider.kubernetes.io/shutdown'][0]['effect']")
if [ "$got" = NoSchedule ]; then ok "the shutdown taint is NoSchedule"; else fail "the shutdown taint is NoSchedule" "$got"; fi
moto_py "ec2.start_instances(InstanceIds=['$iE'])" >/dev/null
set_ready node-e True
if wait_until 10 shut node-e False; then ok "a Ready Node loses the shutdown taint"; else fail "a Ready Node loses the shutdown taint"; fi

moto_py "ec2.terminate_instances(InstanceIds=['$iF'])" >/dev/null
sleep 3
if ! gone node-f; then ok "a Ready Node is not deleted even when its instance is terminated (upstream)"
else fail "a Ready Node is not deleted"; fi
set_ready node-f False
if wait_until 10 gone node-f; then ok "terminating the instance of a NotReady Node deletes the Node"
else fail "terminated instance: Node deleted"; fi
got=$(ev node-f DeletingNode)
if [ -n "$got" ]; then ok "the deletion is announced by an event"; else fail "the deletion is announced by an event"; fi

# ---- steady state: calls per period are bounded -------------------------------------------
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
sleep 6
# one snapshot of the counts: two reads would let a call land between them
read -r n n_di < <(tb_json "$FAULTPROXY_URL/_control/calls?log=0" |
	jq -r '"\(.total) \(.counts["ec2:DescribeInstances"] // 0)"')
# re-sync every 5 s (one DescribeInstances for the 5 initialized Nodes, so at least one in 6 s)
# and nothing for Ready Nodes; the three uninitialized Nodes retry with backoff (DescribeInstances
# by Name tag); nothing else
if [ "$n_di" -ge 1 ] && [ "$n" = "$n_di" ] && [ "$n" -le 12 ]; then
	ok "steady state: $n AWS calls in 6 s, all DescribeInstances, at least the re-sync's"
else fail "steady state AWS calls in 6 s (1 to 12, all DescribeInstances)" "$n calls, $n_di DescribeInstances"; fi

# ---- graceful stop releases the lease ----------------------------------------------------
if stop_within "$(cat "$T_TMP/ccm1.pid")" 10 ccm1; then
	if [ "$STOP_RC" = 0 ]; then ok "SIGTERM stops the ccm with exit code 0"; else fail "SIGTERM stops the ccm" "exit code $STOP_RC"; fi
fi
if ! grep -q "Sanitizer\|runtime error" "$T_TMP/ccm1.log"; then ok "no sanitizer report in the ccm's log"
else fail "sanitizer report" "$(grep -A5 "Sanitizer\|runtime error" "$T_TMP/ccm1.log" | head -20)"; fi
holder=$(kc -n kube-system get lease cloud-controller-manager -o jsonpath='{.spec.holderIdentity}')
if [ -z "$holder" ]; then ok "the lease is released on a graceful stop"; else fail "the lease is released" "$holder"; fi
t_summary
