#!/usr/bin/env bash
# tests: product
# (runs $AWS_K8S ccm through ccm_start in ccm_lib.sh, csi-controller, nth and csi-node)
# The metric names, types and label sets are upstream's, so that existing dashboards and alerts
# work: the ccm exports cloud-provider-aws's cloudprovider_aws_api_* (tests/data/metrics/
# upstream_ccm.txt) and nothing of the EBS CSI driver's; csi-controller the driver's controller
# families (upstream_ebs_csi.txt: the AWS calls, and a detach kept pending through the fault
# proxy for aws_ebs_csi_ec2_detach_pending_seconds_total) and nothing of the node's or the
# ccm's; csi-node the node's (the EBS NVMe statistics, from a page file in test mode) and
# nothing of the controller's; nth (IMDS mode) upstream node-termination-handler's
# (upstream_nth.txt), on a spot notice drained and a metadata poll that fails. Each scrape passes `promtool check metrics` (its one lint about
# upstream's counter name cloudprovider_aws_api_request_errors, which has no _total suffix, is
# expected). csi_metrics.sh checks the values and mode all.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"
. "$(dirname "$0")/csi_controller_lib.sh"
. "$(dirname "$0")/../lib/metrics_lib.sh"

DATA=$METRICS_DATA
command -v promtool >/dev/null || { skip "metrics_names" "promtool is not installed"; t_summary; }
command -v jq >/dev/null || { skip "metrics_names" "jq is not installed"; t_summary; }

if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi
read -r _ d1 < <(instance n1)
moto_py "
vpc = ec2.describe_vpcs()['Vpcs'][0]['VpcId']
ec2.create_route_table(VpcId=vpc, TagSpecifications=[{'ResourceType': 'route-table',
    'Tags': [{'Key': 'kubernetes.io/cluster/$CLUSTER', 'Value': 'owned'}]}])" >/dev/null
# a call that AWS refuses (403, not retried) and one throttled past its retries
# (and a CreateTags refused once, so that the tagging controller's error counter has a series)
tb_post "$FAULTPROXY_URL/_control/faults" '[{"service":"ec2","action":"DescribeRouteTables","effect":"error","code":"UnauthorizedOperation","status":403,"count":2},
	{"service":"ec2","action":"DescribeInstances","effect":"throttle","count":3},
	{"service":"ec2","action":"CreateTags","effect":"error","code":"UnauthorizedOperation","status":403,"count":1}]' >/dev/null
ccm_start ccm1 --allocate-node-cidrs=true --cluster-cidr=10.244.0.0/16 \
	--controllers='*,tagging' --tags=team=a --resources=instance || fail "ccm starts"
node_create "$d1" "" 10.244.1.0/24
ccm_scrape() { curl -sk "https://127.0.0.1:$CCM_PORT_ccm1/metrics" >"$T_TMP/ccm.prom"; }
ccm_ready() {
	ccm_scrape && grep -q '^cloudprovider_aws_api_request_duration_seconds_count{request="describe_instance"}' "$T_TMP/ccm.prom" &&
		grep -q '^cloudprovider_aws_api_request_duration_seconds_count{request="describe_route_tables"}' "$T_TMP/ccm.prom" &&
		grep -q '^cloudprovider_aws_api_request_errors{request="describe_route_tables"}' "$T_TMP/ccm.prom" &&
		grep -q '^cloudprovider_aws_api_throttled_requests_total{operation_name="DescribeInstances"}' "$T_TMP/ccm.prom" &&
		grep -q '^cloudprovider_aws_tagging_controller_work_item_duration_seconds_count{latency_type="work_item_processing_time"}' "$T_TMP/ccm.prom" &&
		grep -q '^cloudprovider_aws_tagging_controller_work_item_errors_total{error_type="total_errors"' "$T_TMP/ccm.prom"
}
if wait_until 30 ccm_ready; then ok "ccm: the calls made are counted, request values in snake case as upstream (describe_instance, describe_route_tables)"
else fail "ccm: calls counted in snake case" "$(grep '^cloudprovider' "$T_TMP/ccm.prom" | head -20)"; fi
if grep -q '^cloudprovider_aws_api_response_status_total{service="EC2",operation="DescribeRouteTables",status_code="403",error_type="other"}' "$T_TMP/ccm.prom" &&
	grep -q '^cloudprovider_aws_api_response_status_total{service="EC2",operation="DescribeInstances",status_code="503",error_type="throttle"}' "$T_TMP/ccm.prom"; then
	ok "ccm: terminal error replies in cloudprovider_aws_api_response_status_total (403 other, 503 throttle)"
else fail "ccm: response_status_total" "$(grep response_status "$T_TMP/ccm.prom")"; fi
promtool_check ccm "$T_TMP/ccm.prom"
compare ccm "$T_TMP/ccm.prom" "$DATA/upstream_ccm.txt" "$DATA/upstream_ebs_csi.txt"
ccm_stop_check ccm1

# csi-controller: a volume created, one create AWS refuses, one create throttled past its
# retries, and a detach still pending past --detach-pending-metric-after
if csi_ctrl_start --detach-pending-metric-after=1s; then ok "csi-controller starts"
else
	fail "csi-controller starts"
	t_summary
fi
cc create-volume --name pvc-m1 --size 1Gi --zone us-east-1a >/dev/null || fail "CreateVolume"
tb_post "$FAULTPROXY_URL/_control/faults" '{"service":"ec2","action":"CreateVolume","effect":"error","code":"UnauthorizedOperation","status":403,"count":1}' >/dev/null
cc create-volume --name pvc-m2 --size 1Gi --zone us-east-1a >/dev/null 2>&1
tb_post "$FAULTPROXY_URL/_control/faults" '{"service":"ec2","action":"CreateVolume","effect":"throttle","count":3}' >/dev/null
cc create-volume --name pvc-m3 --size 1Gi --zone us-east-1a >/dev/null 2>&1
iid=$(moto_py 'print(run_instance(InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"}))')
out=$(cc create-volume --name pvc-m4 --size 1Gi --zone us-east-1a)
vol=$(jget "$out" .volume.volume_id)
dev=$(jget "$(cc controller-publish --volume "$vol" --node "$iid")" .publish_context.devicePath)
slow_detach "$vol" "$iid" "$dev" 4
cc controller-unpublish --volume "$vol" --node "$iid" >"$T_TMP/unpublish.out" 2>&1 &
unpublish=$!
sleep 2.5
curl -s "$CTRL_METRICS/metrics" >"$T_TMP/csi.prom"
wait "$unpublish" || fail "the slowed detach ends" "$(cat "$T_TMP/unpublish.out")"
if grep -q '^aws_ebs_csi_api_request_duration_seconds_count{request="CreateVolume"}' "$T_TMP/csi.prom" &&
	grep -q '^aws_ebs_csi_api_request_errors_total{request="CreateVolume",code="UnauthorizedOperation"}' "$T_TMP/csi.prom" &&
	grep -q '^aws_ebs_csi_api_request_throttles_total{operation_name="CreateVolume"}' "$T_TMP/csi.prom"; then
	ok "csi-controller: calls, errors by code and throttles counted, request values the EC2 actions"
else fail "csi-controller: calls counted" "$(grep -E '^aws_ebs_csi_api_request_(errors|throttles|duration_seconds_count)' "$T_TMP/csi.prom")"; fi
promtool_check csi-controller "$T_TMP/csi.prom"
compare csi-controller "$T_TMP/csi.prom" "$DATA/upstream_ebs_csi.txt" "$DATA/upstream_ccm.txt" controller

# nth (IMDS mode): a spot notice drained (actions_total, actions_node_total), a metadata answer
# that fails (events_error_total), on PROMETHEUS_SERVER_PORT with ENABLE_PROMETHEUS_SERVER
imds_start || fail "the metadata fake starts"
kc create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"nth-node"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}
EOF
NTH_PORT=$(free_port)
KUBECONFIG=$KC NODE_NAME=nth-node INSTANCE_METADATA_URL=$IMDS_URL METADATA_TRIES=1 AWS_EC2_METADATA_DISABLED=false \
	ENABLE_PROMETHEUS_SERVER=true PROMETHEUS_SERVER_PORT=$NTH_PORT \
	bg nth "$AWS_K8S" nth --poll-interval=300ms
if wait_http "http://127.0.0.1:$NTH_PORT/metrics" 15; then ok "nth serves its metrics on PROMETHEUS_SERVER_PORT"
else fail "nth serves its metrics on PROMETHEUS_SERVER_PORT" "$(tail -n 5 "$T_TMP/nth.log")"; fi
tb_post "$IMDS_URL/_control/faults" '{"path":"/latest/meta-data/spot","status":500,"count":1}' >/dev/null
tb_post "$IMDS_URL/_control/spot" '{"action":"terminate","in":60}' >/dev/null
nth_ready() {
	curl -s "http://127.0.0.1:$NTH_PORT/metrics" >"$T_TMP/nth.prom" &&
		grep -q '^actions_total{node_action="cordon-and-drain",node_status="success"} 1$' "$T_TMP/nth.prom" &&
		grep -q '^events_error_total{event_error_where="spot-itn-monitor"}' "$T_TMP/nth.prom"
}
if wait_until 30 nth_ready; then ok "nth: the drain counted in actions_total (cordon-and-drain, success), the failed poll in events_error_total"
else fail "nth: actions and errors counted" "$(grep -E '^(actions|events)' "$T_TMP/nth.prom"; tail -n 3 "$T_TMP/nth.log")"; fi
grep -q '^actions_node_total{node_action="cordon-and-drain",node_status="success",node_name="nth-node",node_event_id="spot-itn-' "$T_TMP/nth.prom" &&
	ok "nth: actions_node_total names the node and the event (deprecated upstream, kept)" ||
	fail "nth: actions_node_total names the node and the event" "$(grep '^actions_node' "$T_TMP/nth.prom")"
promtool_check nth "$T_TMP/nth.prom"
compare nth "$T_TMP/nth.prom" "$DATA/upstream_nth.txt" "$DATA/upstream_ccm.txt"
if stop_within "$(cat "$T_TMP/nth.pid")" 10 nth; then
	[ "$STOP_RC" = 0 ] && ok "nth stops on SIGTERM (exit 0)" || fail "nth stops on SIGTERM (exit 0)" "exit $STOP_RC"
fi

# csi-node: two volumes, one with a good page, one with a bad one
if ! nvme_fixture "$T_TMP/nvme"; then
	skip "csi-node metrics" "$NVME_WHY"
	t_summary
fi
port=$(free_port)
bg node "$AWS_K8S" csi-node --endpoint "unix://$T_TMP/node.sock" --http-endpoint "127.0.0.1:$port" \
	--node-id i-0123456789abcdef0 --availability-zone us-east-1a --device-dir "$T_TMP/nvme/by-id" \
	--nvme-log-page-dir "$T_TMP/nvme/pages"
if wait_http "http://127.0.0.1:$port/metrics" 15; then ok "csi-node serves its metrics"
else
	fail "csi-node serves its metrics" "$(tail -n 5 "$T_TMP/node.log")"
	t_summary
fi
curl -s "http://127.0.0.1:$port/metrics" >"$T_TMP/node.prom"
promtool_check csi-node "$T_TMP/node.prom"
compare csi-node "$T_TMP/node.prom" "$DATA/upstream_ebs_csi.txt" "$DATA/upstream_ccm.txt" node
t_summary
