#!/usr/bin/env bash
# tests: product
# SIGKILL and SIGTERM at chosen points: while CreateVolume, AttachVolume, the DescribeInstances
# of a Node's initialisation and CreateRoute are held at the fault proxy (a `delay` rule: the
# call reaches AWS only if the caller is still there). After a restart everything converges
# once: one volume per name, one attachment, one initialised Node, one route per Node; and a
# SIGTERM in the same places stops the process within a second or two.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"
. "$(dirname "$0")/csi_controller_lib.sh"

# pending ACTION: waits (30 s at most) until the proxy holds a call of ACTION (its delay rule
# has seen one)
pending() {
	local i
	for ((i = 0; i < 300; i++)); do
		tb_json "$FAULTPROXY_URL/_control/faults" | python3 -c '
import json, sys
sys.exit(0 if any(r.get("seen", 0) > 0 and sys.argv[1] in str(r.get("action")) for r in json.load(sys.stdin)["rules"]) else 1)' "$1" && return 0
		sleep 0.1
	done
	return 1
}
# signal_during ACTION PID SIG [LOG]: once the proxy holds a call of ACTION, sends SIG to PID
# and waits until it is gone; for SIGTERM, one check that it exits within 3 s
signal_during() {
	local t0 i ms
	pending "$1" || fail "SIG$3 during $1: the call reached the proxy" \
		"$(tail -n 12 "${4:-/dev/null}" 2>/dev/null)"
	t0=$(date +%s%N)
	kill "-$3" "$2" 2>/dev/null
	for ((i = 0; i < 200; i++)); do kill -0 "$2" 2>/dev/null || break; sleep 0.05; done
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$3" = TERM ] || return 0
	[ "$ms" -lt 3000 ] && ok "SIGTERM during $1: exit in $ms ms" || fail "SIGTERM during $1: exit within 3 s" "$ms ms"
}
initialized() { [ "$(node_py "$1" "'node.cloudprovider.kubernetes.io/uninitialized' in taints")" = False ]; }

ccm_env_start || { fail "test bed starts"; t_summary; }

# ============ csi-controller: CreateVolume and AttachVolume =================================
vols_named() { moto_py "
print(len([v for v in ec2.describe_volumes()['Volumes'] for t in v.get('Tags', []) if t['Key'] == 'CSIVolumeName' and t['Value'] == '$1']))"; }

for sig in KILL TERM; do
	csi_ctrl_start || fail "csi-controller starts"
	fault '{"service":"ec2","action":"CreateVolume","effect":"delay","seconds":4,"count":1}'
	cc create-volume --name "k-$sig" --size 1Gi --zone us-east-1a >/dev/null 2>&1 &
	cpid=$!
	signal_during CreateVolume "$CTRL_PID" "$sig"
	wait "$cpid" 2>/dev/null
	clear_faults
	sleep 4.5 # the held call would have been forwarded by now if it were going to be
	csi_ctrl_start || fail "csi-controller restarts"
	v=$(jget "$(cc create-volume --name "k-$sig" --size 1Gi --zone us-east-1a)" .volume.volume_id)
	v2=$(jget "$(cc create-volume --name "k-$sig" --size 1Gi --zone us-east-1a)" .volume.volume_id)
	n=$(vols_named "k-$sig")
	[[ $v == vol-* ]] && [ "$v" = "$v2" ] && [ "$n" = 1 ] \
		&& ok "SIG$sig during CreateVolume, restart: one volume for the name" \
		|| fail "SIG$sig during CreateVolume, restart: one volume for the name" "v=$v v2=$v2 n=$n"

	iid=$(moto_py 'print(run_instance(InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"}))')
	fault '{"service":"ec2","action":"AttachVolume","effect":"delay","seconds":4,"count":1}'
	cc controller-publish --volume "$v" --node "$iid" >/dev/null 2>&1 &
	cpid=$!
	signal_during AttachVolume "$CTRL_PID" "$sig"
	wait "$cpid" 2>/dev/null
	clear_faults
	sleep 4.5
	csi_ctrl_start || fail "csi-controller restarts"
	d1=$(jget "$(cc controller-publish --volume "$v" --node "$iid")" .publish_context.devicePath)
	d2=$(jget "$(cc controller-publish --volume "$v" --node "$iid")" .publish_context.devicePath)
	atts=$(moto_py "print(len(ec2.describe_volumes(VolumeIds=['$v'])['Volumes'][0]['Attachments']))")
	[ -n "$d1" ] && [ "$d1" = "$d2" ] && [ "$atts" = 1 ] \
		&& ok "SIG$sig during AttachVolume, restart: attached once ($d1)" \
		|| fail "SIG$sig during AttachVolume, restart: attached once" "d1=$d1 d2=$d2 attachments=$atts"
	stop_within "$CTRL_PID" 10 csi-controller
done

# ============ ccm: initialisation and routes =================================================
read -r rt < <(moto_py "
vpc = ec2.describe_vpcs()['Vpcs'][0]['VpcId']
print(ec2.create_route_table(VpcId=vpc, TagSpecifications=[{'ResourceType': 'route-table', 'Tags': [{'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])['RouteTable']['RouteTableId'])")
routes_to() { moto_py "
print(len([r for r in ec2.describe_route_tables(RouteTableIds=['$rt'])['RouteTables'][0]['Routes'] if r.get('DestinationCidrBlock') == '$1']))"; }
one_route() { [ "$(routes_to "$1")" = 1 ]; }
k=0
for sig in KILL TERM; do
	k=$((k + 1))
	read -r iid dns < <(instance "kn-$sig")
	node_create "$dns" "aws:///us-east-1a/$iid" "10.244.$k.0/24"
	fault '{"service":"ec2","action":"DescribeInstances","effect":"delay","seconds":4,"count":1}'
	# the route controller off here: it could create the route while initialisation is held
	ccm_start "ccm-$sig" --controllers=cloud-node,cloud-node-lifecycle || fail "ccm starts"
	pid=$(cat "$T_TMP/ccm-$sig.pid")
	signal_during DescribeInstances "$pid" "$sig" "$T_TMP/ccm-$sig.log"
	clear_faults
	initialized "$dns" && fail "SIG$sig during initialisation: the Node is not initialised yet"
	[ "$(routes_to "10.244.$k.0/24")" = 0 ] || fail "SIG$sig during initialisation: no route yet"
	fault '{"service":"ec2","action":"CreateRoute","effect":"delay","seconds":4,"count":1}'
	ccm_start "ccm2-$sig" --allocate-node-cidrs=true --configure-cloud-routes=true \
		--cluster-cidr=10.244.0.0/16 --route-reconciliation-period=1s || fail "ccm restarts"
	pid=$(cat "$T_TMP/ccm2-$sig.pid")
	wait_until 20 initialized "$dns" && ok "SIG$sig during initialisation, restart: the Node is initialised" \
		|| fail "SIG$sig during initialisation, restart: the Node is initialised"
	signal_during CreateRoute "$pid" "$sig" "$T_TMP/ccm2-$sig.log"
	clear_faults
	sleep 4.5
	ccm_start "ccm3-$sig" --allocate-node-cidrs=true --configure-cloud-routes=true \
		--cluster-cidr=10.244.0.0/16 --route-reconciliation-period=1s || fail "ccm restarts"
	wait_until 20 one_route "10.244.$k.0/24"
	sleep 3 # a few more route passes: still one
	n=$(routes_to "10.244.$k.0/24")
	[ "$n" = 1 ] && ok "SIG$sig during CreateRoute, restart: one route for the Node's CIDR" \
		|| fail "SIG$sig during CreateRoute, restart: one route for the Node's CIDR" "$n routes"
	kill "$(cat "$T_TMP/ccm3-$sig.pid")" 2>/dev/null
	sleep 1
done

t_summary
