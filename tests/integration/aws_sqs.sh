#!/usr/bin/env bash
# tests: product
# The JSON protocol through `aws-k8s aws` against moto: SQS (AmazonSQS.*, x-amz-json-1.0)
# send/receive/delete, JSON errors, and EventBridge (AWSEvents.*, x-amz-json-1.1) delivering
# to the queue.
. "$(dirname "$0")/aws_lib.sh"

moto_start || { fail "moto starts"; t_summary; }
T=$T_TMP

run_to "$T/q.json" sqs CreateQueue QueueName=nth-q
url=$(jq -r .QueueUrl "$T/q.json" 2>/dev/null)
case $url in http*/123456789012/nth-q) ok "CreateQueue returns the queue URL" ;; *) fail "CreateQueue returns the queue URL" "$(cat "$T/q.json" "$T/q.json.err")" ;; esac

body='{"detail-type":"EC2 Spot Instance Interruption Warning","ü":"€ & <x>"}'
run_to "$T/s.json" sqs SendMessage "$(jq -cn --arg u "$url" --arg b "$body" '{QueueUrl:$u, MessageBody:$b, MessageAttributes:{k:{DataType:"String",StringValue:"v"}}}')"
jcheck "SendMessage (JSON body) returns a message ID and the body's MD5" "$T/s.json" \
	"(.MessageId | length > 0) and .MD5OfMessageBody == \"$(printf '%s' "$body" | md5sum | cut -d' ' -f1)\""

run_to "$T/r.json" sqs ReceiveMessage QueueUrl="$url" MaxNumberOfMessages:=10 WaitTimeSeconds:=1 \
	'MessageAttributeNames:=["All"]'
jcheck "ReceiveMessage (Key=Value and Key:=JSON input) gets the body back intact" "$T/r.json" \
	".Messages | length == 1 and .[0].Body == $(jq -n --arg b "$body" '$b') and .[0].MessageAttributes.k.StringValue == \"v\""
handle=$(jq -r '.Messages[0].ReceiptHandle' "$T/r.json" 2>/dev/null)
run_to "$T/d.json" sqs DeleteMessage QueueUrl="$url" ReceiptHandle="$handle"
[ $RC -eq 0 ] && ok "DeleteMessage" || fail "DeleteMessage" "$(cat "$T/d.json.err")"
run_to "$T/r2.json" sqs ReceiveMessage QueueUrl="$url" WaitTimeSeconds:=1
jcheck "the queue is empty after DeleteMessage" "$T/r2.json" '(.Messages // []) | length == 0'

run_to "$T/bad.json" sqs DeleteMessage QueueUrl="$url" ReceiptHandle=bogus
[ $RC -eq 1 ] && grep -q "ReceiptHandleIsInvalid" "$T/bad.json.err" && ok "a JSON error reply is reported with its code" \
	|| fail "a JSON error reply is reported with its code" "rc=$RC $(cat "$T/bad.json.err")"
run_to "$T/nq.json" sqs GetQueueUrl QueueName=nope
grep -q "AWS.SimpleQueueService.NonExistentQueue" "$T/nq.json.err" && ok "SQS's query-compatible error code (x-amzn-query-error) is used" \
	|| fail "SQS's query-compatible error code (x-amzn-query-error) is used" "$(cat "$T/nq.json.err")"
run_to "$T/v.json" sqs ReceiveMessage QueueUrl="$url" MaxNumberOfMessages:=11
[ $RC -eq 1 ] && grep -q "InvalidParameterValue" "$T/v.json.err" && ok "a validation error exits 1" \
	|| fail "a validation error exits 1" "rc=$RC $(cat "$T/v.json.err")"

arn=$(awsc sqs GetQueueAttributes QueueUrl="$url" 'AttributeNames:=["QueueArn"]' | jq -r .Attributes.QueueArn)
run_to "$T/e1.json" events PutRule Name=nth-spot \
	"EventPattern={\"source\":[\"aws.ec2\"],\"detail-type\":[\"EC2 Spot Instance Interruption Warning\"]}"
jcheck "EventBridge PutRule returns the rule ARN" "$T/e1.json" '.RuleArn | contains("rule/nth-spot")'
run_to "$T/e2.json" events PutTargets Rule=nth-spot "Targets:=[{\"Id\":\"q\",\"Arn\":\"$arn\"}]"
jcheck "EventBridge PutTargets" "$T/e2.json" '.FailedEntryCount == 0'
run_to "$T/e3.json" events PutEvents '{"Entries":[{"Source":"aws.ec2","DetailType":"EC2 Spot Instance Interruption Warning","Detail":"{\"instance-id\":\"i-1\",\"instance-action\":\"terminate\"}"}]}'
jcheck "EventBridge PutEvents" "$T/e3.json" '.FailedEntryCount == 0 and (.Entries[0].EventId | length > 0)'
run_to "$T/e4.json" sqs ReceiveMessage QueueUrl="$url" WaitTimeSeconds:=2
jcheck "the event reached the queue through the rule" "$T/e4.json" \
	'.Messages[0].Body | fromjson | .detail["instance-id"] == "i-1" and .source == "aws.ec2"'
awsc events PutRule Name=other "EventPattern={\"source\":[\"x\"]}" >/dev/null
run_to "$T/e5.json" --paginate events ListRules Limit:=1
jcheck "EventBridge ListRules with --paginate (NextToken in the JSON body)" "$T/e5.json" \
	'[.[].Rules[].Name] | sort == ["nth-spot","other"]'

t_summary
