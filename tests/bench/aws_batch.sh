#!/usr/bin/env bash
# The Describe batcher: 200 concurrent single-ID DescribeInstances asks (one thread each, in
# `aws-k8s aws batch`) against moto, counted by the fault proxy in front of it. For comparison
# the same 200 IDs asked one call each (what a client without batching does). Prints figures.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"

N=${AWS_BATCH_IDS:-200}
moto_start || { echo "aws_batch: moto did not start"; exit 0; }
faultproxy_start "$MOTO_URL" || { echo "aws_batch: fault proxy did not start"; exit 0; }
ids=$(moto_py "
ids = []
for _ in range(($N + 99) // 100):
    r = ec2.run_instances(ImageId='ami-12345678', InstanceType='t3.micro', MinCount=min(100, $N - len(ids)),
                          MaxCount=min(100, $N - len(ids)))
    ids += [i['InstanceId'] for i in r['Instances']]
print(' '.join(ids[:$N]))")
read -r -a IDS <<<"$ids"
export AWS_ENDPOINT_URL=$FAULTPROXY_URL
"$AWS_K8S" aws ec2 DescribeRegions >/dev/null 2>&1
calls() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | jq -r '.calls["ec2:DescribeInstances"].total // 0'; }

for window in 10ms 20ms; do
	tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
	out=$("$AWS_K8S" aws --batch-window=$window batch instances "${IDS[@]}" 2>"$T_TMP/batch.err")
	found=$(printf '%s' "$out" | jq '[.items[] | select(. != null)] | length')
	secs=$(printf '%s' "$out" | jq .seconds)
	echo "batched (window $window): ${#IDS[@]} concurrent single-ID asks -> $(calls) DescribeInstances calls seen by moto" \
		"(batches $(printf '%s' "$out" | jq .batches), largest $(printf '%s' "$out" | jq .maxIdsPerCall) IDs), $found instances returned, ${secs}s"
done

tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
start=$(date +%s.%N)
printf '%s\n' "${IDS[@]}" | xargs -P 8 -I{} "$AWS_K8S" aws --compact ec2 DescribeInstances InstanceId.1={} >/dev/null 2>&1
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "unbatched (8 processes in parallel): ${#IDS[@]} asks -> $(calls) DescribeInstances calls seen by moto, ${secs}s"
