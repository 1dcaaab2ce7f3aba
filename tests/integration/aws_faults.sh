#!/usr/bin/env bash
# tests: product
# Retries, errors and metrics under the fault proxy in front of moto: throttled calls succeed
# after retries, validation errors are not retried, truncated XML is a clear error, a hanging
# peer times out, the retry token bucket stops a storm, and the metrics count it all.
. "$(dirname "$0")/aws_lib.sh"

moto_start || { fail "moto starts"; t_summary; }
faultproxy_start "$MOTO_URL" || { fail "fault proxy starts"; t_summary; }
export AWS_ENDPOINT_URL=$FAULTPROXY_URL
T=$T_TMP
fault() { tb_post "$FAULTPROXY_URL/_control/faults" "$1" >/dev/null || fail "fault rule accepted: $1"; }
reset_proxy() { tb_post "$FAULTPROXY_URL/_control/reset" '{}' >/dev/null; }
M() { metric_value "$1" "$2"; }

awsc ec2 DescribeRegions >/dev/null 2>&1 # warm moto's EC2 backend (1 s on the first call)
vol=$(awsc ec2 CreateVolume AvailabilityZone=us-east-1a Size=1 | jq -r .volumeId)

# --- throttling: retried, then success ---
reset_proxy
fault '{"service":"ec2","action":"DescribeInstances","effect":"throttle","count":2}'
run_to "$T/t1.json" --print-metrics ec2 DescribeInstances
[ $RC -eq 0 ] && ok "two RequestLimitExceeded replies, then success" || fail "two RequestLimitExceeded replies, then success" "$(tail -n 3 "$T/t1.json.err")"
[ "$(proxy_calls ec2:DescribeInstances)" = 3 ] && ok "throttled call: 3 attempts reached the proxy" || fail "throttled call: 3 attempts reached the proxy" "$(proxy_calls ec2:DescribeInstances)"
[ "$(M "$T/t1.json.err" 'cloudprovider_aws_api_throttled_requests_total{operation_name="DescribeInstances"}')" = 2 ] \
	&& ok "cloudprovider_aws_api_throttled_requests_total counts the 2 throttled replies" \
	|| fail "cloudprovider_aws_api_throttled_requests_total counts the 2 throttled replies" "$(grep throttled "$T/t1.json.err")"
[ "$(M "$T/t1.json.err" 'aws_k8s_aws_api_retries_total{request="DescribeInstances"}')" = 2 ] \
	&& ok "aws_k8s_aws_api_retries_total counts 2 retries" || fail "aws_k8s_aws_api_retries_total counts 2 retries" "$(grep retries "$T/t1.json.err")"
[ "$(M "$T/t1.json.err" 'cloudprovider_aws_api_request_duration_seconds_count{request="describe_instance"}')" = 1 ] \
	&& ok "the successful call is one latency observation" || fail "the successful call is one latency observation" "$(grep duration_seconds_count "$T/t1.json.err")"
[ "$(M "$T/t1.json.err" 'cloudprovider_aws_api_request_errors{request="describe_instance"}')" = 0 ] \
	&& ok "no request error counted for a call that succeeded" || fail "no request error counted for a call that succeeded"

reset_proxy
fault '{"service":"elbv2","effect":"throttle","count":1}'
run_to "$T/t2.json" elbv2 DescribeLoadBalancers
[ $RC -eq 0 ] && [ "$(proxy_calls elbv2:DescribeLoadBalancers)" = 2 ] && ok "ELBv2 Throttling (ErrorResponse shape) is retried" \
	|| fail "ELBv2 Throttling (ErrorResponse shape) is retried" "rc=$RC $(proxy_calls elbv2:DescribeLoadBalancers)"

url=$(awsc sqs CreateQueue QueueName=fq | jq -r .QueueUrl)
reset_proxy
fault '{"service":"sqs","action":"SendMessage","effect":"throttle","count":1}'
run_to "$T/t3.json" --print-metrics sqs SendMessage QueueUrl="$url" MessageBody=hello
[ $RC -eq 0 ] && [ "$(proxy_calls sqs:SendMessage)" = 2 ] && ok "SQS JSON ThrottlingException is retried" \
	|| fail "SQS JSON ThrottlingException is retried" "rc=$RC $(proxy_calls sqs:SendMessage) $(tail -n 2 "$T/t3.json.err")"
[ "$(M "$T/t3.json.err" 'cloudprovider_aws_api_throttled_requests_total{operation_name="SendMessage"}')" = 1 ] \
	&& ok "the JSON throttle is counted" || fail "the JSON throttle is counted"

# --- a validation error is not retried ---
reset_proxy
fault '{"service":"ec2","action":"CreateVolume","effect":"error","status":400,"code":"InvalidParameterValue","message":"bad size","count":5}'
run_to "$T/v1.json" --print-metrics ec2 CreateVolume AvailabilityZone=us-east-1a Size=1
[ $RC -eq 1 ] && grep -q "InvalidParameterValue: bad size (HTTP 400" "$T/v1.json.err" && ok "a validation error fails with its code and message" \
	|| fail "a validation error fails with its code and message" "rc=$RC $(head -n 2 "$T/v1.json.err")"
[ "$(proxy_calls ec2:CreateVolume)" = 1 ] && ok "a validation error is not retried (1 call)" || fail "a validation error is not retried (1 call)" "$(proxy_calls ec2:CreateVolume)"
[ "$(M "$T/v1.json.err" 'cloudprovider_aws_api_request_errors{request="create_volume"}')" = 1 ] \
	&& ok "cloudprovider_aws_api_request_errors counts the failed call" || fail "cloudprovider_aws_api_request_errors counts the failed call"
[ "$(M "$T/v1.json.err" 'aws_k8s_aws_api_retries_total{request="CreateVolume"}')" = 0 ] \
	&& ok "no retry counted for the validation error" || fail "no retry counted for the validation error"

# --- truncated replies ---
reset_proxy
fault '{"service":"ec2","action":"DescribeVolumes","effect":"truncate","mode":"mid-tag","length":"cut"}'
run_to "$T/x1.json" --print-metrics ec2 DescribeVolumes "VolumeId.1=$vol"
if [ $RC -eq 1 ] && grep -q "unusable reply from ec2 DescribeVolumes (HTTP 200, .* bytes): malformed XML" "$T/x1.json.err"; then
	ok "truncated XML (complete HTTP message) gives a clear error"
else
	fail "truncated XML (complete HTTP message) gives a clear error" "rc=$RC $(cat "$T/x1.json.err")"
fi
[ "$(proxy_calls ec2:DescribeVolumes)" = 3 ] && ok "an unusable reply is retried like a 5xx (3 attempts)" || fail "an unusable reply is retried like a 5xx (3 attempts)" "$(proxy_calls ec2:DescribeVolumes)"
[ "$(M "$T/x1.json.err" 'aws_k8s_aws_api_unusable_replies_total{request="DescribeVolumes"}')" = 3 ] \
	&& ok "aws_k8s_aws_api_unusable_replies_total counts each unusable reply" \
	|| fail "aws_k8s_aws_api_unusable_replies_total counts each unusable reply" "$(grep unusable "$T/x1.json.err")"
reset_proxy
fault '{"service":"ec2","action":"DescribeVolumes","effect":"truncate","mode":"mid-tag","length":"cut","count":1}'
run_to "$T/x1b.json" ec2 DescribeVolumes "VolumeId.1=$vol"
[ $RC -eq 0 ] && [ "$(proxy_calls ec2:DescribeVolumes)" = 2 ] && grep -q "$vol" "$T/x1b.json" \
	&& ok "one truncated reply, then the real one: success on the retry" \
	|| fail "one truncated reply, then the real one: success on the retry" "rc=$RC $(proxy_calls ec2:DescribeVolumes)"
reset_proxy
fault '{"service":"ec2","action":"DescribeVolumes","effect":"truncate","mode":"half","length":"full","count":1}'
run_to "$T/x2.json" ec2 DescribeVolumes "VolumeId.1=$vol"
[ $RC -eq 0 ] && [ "$(proxy_calls ec2:DescribeVolumes)" = 2 ] && ok "a reply cut short of its Content-Length is a connection error, retried" \
	|| fail "a reply cut short of its Content-Length is a connection error, retried" "rc=$RC $(proxy_calls ec2:DescribeVolumes) $(cat "$T/x2.json.err")"
reset_proxy
fault '{"service":"sqs","action":"ListQueues","effect":"truncate","mode":"half","length":"cut"}'
run_to "$T/x3.json" sqs ListQueues
[ $RC -eq 1 ] && grep -q "unusable reply from sqs ListQueues .*malformed JSON" "$T/x3.json.err" && ok "truncated JSON gives a clear error" \
	|| fail "truncated JSON gives a clear error" "rc=$RC $(cat "$T/x3.json.err")"

# --- 5xx and dropped connections: retried ---
reset_proxy
fault '{"service":"ec2","action":"DescribeVolumes","effect":"http500","count":2}'
run_to "$T/h1.json" ec2 DescribeVolumes "VolumeId.1=$vol"
[ $RC -eq 0 ] && [ "$(proxy_calls ec2:DescribeVolumes)" = 3 ] && ok "two InternalError 500s, then success" \
	|| fail "two InternalError 500s, then success" "rc=$RC $(proxy_calls ec2:DescribeVolumes)"
reset_proxy
fault '{"service":"ec2","action":"DescribeVolumes","effect":"http500"}'
run_to "$T/h2.json" --max-attempts=2 ec2 DescribeVolumes "VolumeId.1=$vol"
[ $RC -eq 1 ] && [ "$(proxy_calls ec2:DescribeVolumes)" = 2 ] && grep -q "InternalError" "$T/h2.json.err" \
	&& ok "--max-attempts bounds the attempts and the last error is reported" \
	|| fail "--max-attempts bounds the attempts and the last error is reported" "rc=$RC $(proxy_calls ec2:DescribeVolumes)"
reset_proxy
fault '{"service":"ec2","action":"DescribeVolumes","effect":"close","count":1}'
run_to "$T/c1.json" ec2 DescribeVolumes "VolumeId.1=$vol"
[ $RC -eq 0 ] && [ "$(proxy_calls ec2:DescribeVolumes)" = 2 ] && ok "a connection closed without an answer is retried" \
	|| fail "a connection closed without an answer is retried" "rc=$RC $(proxy_calls ec2:DescribeVolumes)"

# --- a hanging peer times out ---
reset_proxy
fault '{"service":"ec2","action":"DescribeVolumes","effect":"hang","seconds":30}'
start=$(date +%s.%N)
run_to "$T/g1.json" --timeout=1s --max-attempts=2 --print-metrics ec2 DescribeVolumes "VolumeId.1=$vol"
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if [ $RC -eq 1 ] && grep -qi "timed out\|timeout" "$T/g1.json.err" && awk -v s="$secs" 'BEGIN { exit !(s < 6) }'; then
	ok "a hanging peer times out (2 attempts of 1 s, $secs s in all)"
else
	fail "a hanging peer times out" "rc=$RC ${secs}s $(head -n 2 "$T/g1.json.err")"
fi
[ "$(M "$T/g1.json.err" 'aws_k8s_aws_api_retries_total{request="DescribeVolumes"}')" = 1 ] \
	&& ok "the timeout was retried once" || fail "the timeout was retried once"
tb_delete "$FAULTPROXY_URL/_control/faults" >/dev/null

# --- the retry token bucket: 500 tokens, 5 per retry ---
reset_proxy
fault '{"service":"ec2","action":"DescribeRegions","effect":"http500"}'
run_to "$T/b1.json" --print-metrics --repeat=60 --interval=0s --retry-base-delay=1ms ec2 DescribeRegions
calls=$(proxy_calls ec2:DescribeRegions)
# 50 calls x 3 attempts empty the bucket (100 retries); the last 10 calls get 1 attempt each
[ "$calls" -eq 160 ] && ok "token bucket: 60 failing calls made 160 attempts, not 180" || fail "token bucket: 60 failing calls made 160 attempts, not 180" "$calls"
[ "$(M "$T/b1.json.err" 'aws_k8s_aws_api_retry_quota_exhausted_total')" = 10 ] \
	&& ok "aws_k8s_aws_api_retry_quota_exhausted_total counts the 10 refused retries" \
	|| fail "aws_k8s_aws_api_retry_quota_exhausted_total counts the 10 refused retries" "$(grep quota "$T/b1.json.err")"
[ "$(M "$T/b1.json.err" 'cloudprovider_aws_api_request_errors{request="describe_regions"}')" = 60 ] \
	&& ok "all 60 failed calls are counted as errors" || fail "all 60 failed calls are counted as errors"

t_summary
