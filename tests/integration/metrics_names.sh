#!/usr/bin/env bash
# tests: product
# (runs $AWS_K8S ccm through ccm_start in ccm_lib.sh, and csi-controller)
# The metric names, types and label sets of the AWS calls are upstream's, so that existing
# dashboards and alerts work: the ccm exports cloud-provider-aws's cloudprovider_aws_api_*
# (tests/data/metrics/upstream_ccm.txt) and nothing of the EBS CSI driver's, csi-controller
# the driver's aws_ebs_csi_api_request_* (upstream_ebs_csi.txt) and nothing of the ccm's.
# Each scrape passes `promtool check metrics` (its one lint about upstream's counter name
# cloudprovider_aws_api_request_errors, which has no _total suffix, is expected).
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"
. "$(dirname "$0")/csi_controller_lib.sh"

DATA=$T_ROOT/tests/data/metrics
command -v promtool >/dev/null || { skip "metrics_names" "promtool is not installed"; t_summary; }

# promtool FILE: the exposition parses and has no lint but upstream's own name
promtool_check() {
	local out
	out=$(promtool check metrics <"$2" 2>&1)
	out=$(grep -v '^cloudprovider_aws_api_request_errors counter metrics should have "_total" suffix$' <<<"$out")
	if [ -z "$out" ]; then ok "$1: promtool check metrics"
	else fail "$1: promtool check metrics" "$out"; fi
}

# compare NAME SCRAPE UPSTREAM OTHER: every metric of UPSTREAM is exported with its type and
# exactly its label names; no name of OTHER's family is exported; no name twice
compare() {
	local out
	if out=$(python3 - "$2" "$3" "$4" <<'PY'
import re, sys
scrape, mine, other = sys.argv[1:4]
def table(path):
    t = {}
    for line in open(path):
        line = line.split("#", 1)[0].split()
        if line:
            t[line[0]] = (line[1], set() if line[2] == "-" else set(line[2].split(",")))
    return t
want, theirs = table(mine), table(other)
types, labels, problems = {}, {}, []
for line in open(scrape):
    m = re.match(r"# TYPE (\S+) (\S+)", line)
    if m:
        if m.group(1) in types:
            problems.append("%s: declared twice" % m.group(1))
        types[m.group(1)] = m.group(2)
        continue
    if line.startswith("#") or not line.strip():
        continue
    m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s", line)
    name, ls = m.group(1), set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)] if name.endswith(suffix) else None
        if base and types.get(base) == "histogram":
            name = base
            ls.discard("le")
    labels.setdefault(name, set()).add(frozenset(ls))
for name, (typ, ls) in sorted(want.items()):
    if name not in types:
        problems.append("%s: not exported" % name)
        continue
    if types[name] != typ:
        problems.append("%s: type %s, upstream %s" % (name, types[name], typ))
    for got in labels.get(name, ()):
        if set(got) != ls:
            problems.append("%s: labels {%s}, upstream {%s}" % (name, ",".join(sorted(got)), ",".join(sorted(ls))))
    if not labels.get(name):
        problems.append("%s: no series" % name)
for name in sorted(types):
    if name in theirs:
        problems.append("%s: a name of the other upstream family" % name)
print("\n".join(problems))
sys.exit(1 if problems else 0)
PY
	); then ok "$1: the names, types and label sets of $(basename "$3")"
	else fail "$1: the names, types and label sets of $(basename "$3")" "$out"; fi
}

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
tb_post "$FAULTPROXY_URL/_control/faults" '[{"service":"ec2","action":"DescribeRouteTables","effect":"error","code":"UnauthorizedOperation","status":403,"count":2},
	{"service":"ec2","action":"DescribeInstances","effect":"throttle","count":3}]' >/dev/null
ccm_start ccm1 --allocate-node-cidrs=true --cluster-cidr=10.244.0.0/16 || fail "ccm starts"
node_create "$d1" "" 10.244.1.0/24
ccm_scrape() { curl -sk "https://127.0.0.1:$CCM_PORT_ccm1/metrics" >"$T_TMP/ccm.prom"; }
ccm_ready() {
	ccm_scrape && grep -q '^cloudprovider_aws_api_request_duration_seconds_count{request="describe_instance"}' "$T_TMP/ccm.prom" &&
		grep -q '^cloudprovider_aws_api_request_duration_seconds_count{request="describe_route_tables"}' "$T_TMP/ccm.prom" &&
		grep -q '^cloudprovider_aws_api_request_errors{request="describe_route_tables"}' "$T_TMP/ccm.prom" &&
		grep -q '^cloudprovider_aws_api_throttled_requests_total{operation_name="DescribeInstances"}' "$T_TMP/ccm.prom"
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

# csi-controller: a volume created, one create AWS refuses, one create throttled past its retries
if csi_ctrl_start; then ok "csi-controller starts"
else
	fail "csi-controller starts"
	t_summary
fi
cc create-volume --name pvc-m1 --size 1Gi --zone us-east-1a >/dev/null || fail "CreateVolume"
tb_post "$FAULTPROXY_URL/_control/faults" '{"service":"ec2","action":"CreateVolume","effect":"error","code":"UnauthorizedOperation","status":403,"count":1}' >/dev/null
cc create-volume --name pvc-m2 --size 1Gi --zone us-east-1a >/dev/null 2>&1
tb_post "$FAULTPROXY_URL/_control/faults" '{"service":"ec2","action":"CreateVolume","effect":"throttle","count":3}' >/dev/null
cc create-volume --name pvc-m3 --size 1Gi --zone us-east-1a >/dev/null 2>&1
curl -s "$CTRL_METRICS/metrics" >"$T_TMP/csi.prom"
if grep -q '^aws_ebs_csi_api_request_duration_seconds_count{request="CreateVolume"}' "$T_TMP/csi.prom" &&
	grep -q '^aws_ebs_csi_api_request_errors_total{request="CreateVolume",code="UnauthorizedOperation"}' "$T_TMP/csi.prom" &&
	grep -q '^aws_ebs_csi_api_request_throttles_total{operation_name="CreateVolume"}' "$T_TMP/csi.prom"; then
	ok "csi-controller: calls, errors by code and throttles counted, request values the EC2 actions"
else fail "csi-controller: calls counted" "$(grep -E '^aws_ebs_csi_api_request_(errors|throttles|duration_seconds_count)' "$T_TMP/csi.prom")"; fi
promtool_check csi-controller "$T_TMP/csi.prom"
compare csi-controller "$T_TMP/csi.prom" "$DATA/upstream_ebs_csi.txt" "$DATA/upstream_ccm.txt"
t_summary
