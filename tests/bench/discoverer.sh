#!/usr/bin/env bash
# Figures of aws-k8s discoverer, against moto (behind the counting fault proxy) and the test API
# server: a VPC with cluster-tagged public and internal subnets in three zones, the prefix's
# security groups, VOLUMES CSI volumes of the cluster (every other one with a PersistentVolume)
# and INSTANCES instances of the node profile (every other one allowing IMDSv1). The daemon runs
# two periods: the AWS calls of each by action, the Kubernetes writes of the first period and of
# the second (nothing changed in between), the wall time of each, the discoverer's resident
# memory (VmRSS, VmHWM, RssAnon) and CPU time after each, and the instance-type catalog's size (moto serves
# every type it knows, 1,263).
# moto ignores MaxResults and answers DescribeInstanceTypes with every type in one 5 MB reply;
# AWS sends pages of at most 100. By default (PAGED=1) the proxy serves moto's reply cut into
# pages of 100 with nextToken, as AWS would, so the memory figures are those of a real region;
# PAGED=0 lets moto's one reply through (the peak then holds the whole 5 MB document).
# Environment: VOLUMES (default 200), INSTANCES (default 20), PERIOD (--discovery-period,
# default 20s; longer than a period takes), PAGED (1).
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../integration/ccm_lib.sh"

VOLUMES=${VOLUMES:-200}
INSTANCES=${INSTANCES:-20}
PERIOD=${PERIOD:-20s}
PAGED=${PAGED:-1}
UUID=6b0e0c1a-bench-0000-0000-000000000001
PFX=bench

ccm_env_start || { echo "environment did not start"; exit 1; }
moto_py "
U, P, nv, ni = '$UUID', '$PFX', int(sys.argv[1]), int(sys.argv[2])
def spec(kind, t):
    return [{'ResourceType': kind, 'Tags': [{'Key': k, 'Value': v} for k, v in t.items()]}]
cl = {'kubernetes.io/cluster/' + U: 'shared'}
vpc = ec2.create_vpc(CidrBlock='10.70.0.0/16')['Vpc']['VpcId']
for n, role in enumerate(('elb', 'internal-elb')):
    for i, z in enumerate('abc'):
        ec2.create_subnet(VpcId=vpc, CidrBlock='10.70.%d.0/24' % (10 * n + i), AvailabilityZone='us-east-1' + z,
                          TagSpecifications=spec('subnet', dict(cl, **{'kubernetes.io/role/' + role: '1'})))
for g in ('node', 'ssh-accessible', 'loadbalancer'):
    ec2.create_security_group(GroupName=P + '-' + g, Description=g, VpcId=vpc)
with open('$T_TMP/volumes', 'w') as f:
    for i in range(nv):
        v = ec2.create_volume(AvailabilityZone='us-east-1a', Size=1, TagSpecifications=spec('volume', {
            'ebs.csi.aws.com/cluster': 'true', 'kubernetes.io/cluster/' + U: 'owned', 'CSIVolumeName': 'pvc-%d' % i}))
        f.write(v['VolumeId'] + '\n')
iam.create_instance_profile(InstanceProfileName=P + '-node')
for i in range(ni):
    run_instance(tags=cl, IamInstanceProfile={'Name': P + '-node'},
                 MetadataOptions={'HttpTokens': 'optional' if i % 2 == 0 else 'required'})
" "$VOLUMES" "$INSTANCES" >/dev/null || { echo "moto setup failed"; exit 1; }
# the PersistentVolumes of every other volume
python3 - "$KC" "$KAS_URL" "$T_TMP/volumes" <<'PY' || { echo "PersistentVolumes not created"; exit 1; }
import json, ssl, sys, urllib.request
kc, url, vols = sys.argv[1:4]
tok = open(kc + '.token').read().strip()
ctx = ssl.create_default_context(cafile=kc + '.ca.crt')
for i, v in enumerate(open(vols).read().split()):
    if i % 2:
        continue
    body = json.dumps({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-%d" % i},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": v}}}).encode()
    req = urllib.request.Request(url + "/api/v1/persistentvolumes", data=body, method="POST")
    req.add_header("Authorization", "Bearer " + tok)
    req.add_header("Content-Type", "application/json")
    urllib.request.urlopen(req, context=ctx).read()
PY
kc apply -f "$T_ROOT/deploy/discoverer/base/crd-instancetypescatalog.yaml" >/dev/null || exit 1
kc -n kube-system create configmap d8-cluster-uuid --from-literal=cluster-uuid="$UUID" >/dev/null
printf 'apiVersion: deckhouse.io/v1\nkind: ClusterConfiguration\ncloud:\n  provider: AWS\n  prefix: %s\n' "$PFX" >"$T_TMP/cc.yaml"
kc -n kube-system create secret generic d8-cluster-configuration --from-file=cluster-configuration.yaml="$T_TMP/cc.yaml" >/dev/null
# moto lacks DescribeInstanceTopology: the proxy answers its DryRun as AWS does for an allowed call
fault '{"service": "ec2", "action": "DescribeInstanceTopology", "effect": "error", "status": 412, "code": "DryRunOperation", "message": "Request would have succeeded, but DryRun flag is set."}'

# paged_catalog N: N periods' worth of proxy rules serving moto's DescribeInstanceTypes reply in
# pages of 100 (moto does not check signatures: a plain POST gets the reply)
paged_catalog() {
	curl -sf -d 'Action=DescribeInstanceTypes&Version=2016-11-15' -H \
		'Authorization: AWS4-HMAC-SHA256 Credential=testing/20200101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=00' \
		"$MOTO_URL/" >"$T_TMP/itypes.xml" || return 1
	python3 - "$T_TMP/itypes.xml" "$1" >"$T_TMP/pages.json" <<'PY' || return 1
import json, re, sys
doc = open(sys.argv[1]).read()
start = doc.index("<instanceTypeSet>") + len("<instanceTypeSet>")
end = doc.rindex("</instanceTypeSet>")
items, depth, begin = [], 0, start
for m in re.finditer(r"<item>|</item>", doc[start:end]):
    pos = start + m.end()
    if m.group() == "<item>":
        if depth == 0:
            begin = start + m.start()
        depth += 1
    else:
        depth -= 1
        if depth == 0:
            items.append(doc[begin:pos])
head = '<?xml version="1.0" encoding="UTF-8"?>\n<DescribeInstanceTypesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>bench</requestId><instanceTypeSet>'
pages = [items[i:i + 100] for i in range(0, len(items), 100)]
rules = []
for _ in range(int(sys.argv[2])):
    for k, p in enumerate(pages):
        tok = "<nextToken>page-%d</nextToken>" % (k + 1) if k + 1 < len(pages) else ""
        rules.append({"service": "ec2", "action": "DescribeInstanceTypes", "effect": "body", "count": 1,
                      "body": head + "".join(p) + "</instanceTypeSet>" + tok + "</DescribeInstanceTypesResponse>"})
print(json.dumps({"rules": rules}))
sys.stderr.write("%d types in %d pages of at most 100, %d to %d bytes\n" % (len(items), len(pages),
    min(len(r["body"]) for r in rules), max(len(r["body"]) for r in rules)))
PY
	tb_post "$FAULTPROXY_URL/_control/faults" "@$T_TMP/pages.json" >/dev/null
}
if [ "$PAGED" = 1 ]; then
	echo -n "DescribeInstanceTypes as AWS pages it: "
	paged_catalog 2 || { echo "the paged catalog rules failed"; exit 1; }
else
	echo "DescribeInstanceTypes as moto answers it: every type in one reply of $(curl -sf -o /dev/null -w '%{size_download}' -d 'Action=DescribeInstanceTypes&Version=2016-11-15' -H 'Authorization: AWS4-HMAC-SHA256 Credential=testing/20200101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=00' "$MOTO_URL/") bytes"
fi

writes() { curl -sf --cacert "$KC.ca.crt" "$KAS_URL/_control/requests" | python3 -c '
import json, sys
c = {k: v for k, v in json.load(sys.stdin)["counters"].items() if k.split()[0] in ("create", "update", "patch", "delete")}
print(sum(c.values()), "(" + (", ".join("%s %d" % kv for kv in sorted(c.items())) or "none") + ")")'; }
aws_calls() { tb_json "$FAULTPROXY_URL/_control/calls?log=1000" | python3 -c '
import json, sys
j = json.load(sys.stdin)
c = j["counts"]
ms = sum(e.get("ms", 0) for e in j["log"])
print(sum(c.values()), "(" + ", ".join("%s %d" % (k.split(":")[1], v) for k, v in sorted(c.items())) + ");",
      "%.2f s waiting for AWS (moto and the proxy)" % (ms / 1000))'; }
mem() { awk '/^(VmRSS|VmHWM|RssAnon)/ {printf "%s %.1f MiB  ", $1, $2 / 1024} END {print ""}' "/proc/$1/status"; }
# cpu PID: the process's CPU time so far (user + system), in ms
cpu() { awk -v hz="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / hz)}' "/proc/$1/stat"; }
reset() {
	tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
	curl -sf --cacert "$KC.ca.crt" -X POST "$KAS_URL/_control/requests/reset" >/dev/null
}
periods() { grep -c '"discovery period done"' "$T_TMP/disc.log"; }

reset
PORT=$(free_port)
bg disc "$AWS_K8S" discoverer --kubeconfig="$KC" --listen-address="127.0.0.1:$PORT" --discovery-period="$PERIOD"
PID=$(cat "$T_TMP/disc.pid")
echo "cloud: 6 cluster subnets in 3 zones, 3 security groups, $VOLUMES CSI volumes ($(((VOLUMES + 1) / 2)) with a PersistentVolume), $INSTANCES instances of the node profile"
for n in 1 2; do
	wait_until 120 bash -c "[ \$(grep -c '\"discovery period done\"' '$T_TMP/disc.log') -ge $n ]" ||
		{ echo "period $n did not end: $(tail -3 "$T_TMP/disc.log")"; exit 1; }
	line=$(grep '"discovery period done"' "$T_TMP/disc.log" | sed -n "${n}p")
	secs=$(sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' <<<"$line")
	[ "$n" = 1 ] && echo "period 1 (the objects are new):" || echo "period 2 (nothing changed):"
	printf '  wall time           %.2f s\n' "$secs"
	echo "  AWS calls           $(aws_calls)"
	echo "  Kubernetes writes   $(writes)"
	echo "  memory              $(mem "$PID")"
	now=$(cpu "$PID")
	echo "  CPU time            $((now - ${cpu_before:-0})) ms (the process's total since start: $now ms)"
	cpu_before=$now
	grep -q 'err="Success' <<<"$line" || echo "  (the period failed: $line)"
	reset
done
types=$(kc get instancetypescatalog for-cluster-autoscaler -o json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["instanceTypes"]))')
orphans=$(curl -sf "http://127.0.0.1:$PORT/metrics" | grep -c '^cloud_data_discovery_orphaned_disk_info{')
imds=$(curl -sf "http://127.0.0.1:$PORT/metrics" | sed -n 's/^cloud_data_discovery_aws_instances_imdsv1_allowed //p')
echo "instance-type catalog: $types types; orphaned disks reported: $orphans; instances allowing IMDSv1: $imds"
stop_within "$PID" 10 discoverer >/dev/null
echo "stopped: exit status $STOP_RC"
