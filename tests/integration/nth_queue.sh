#!/usr/bin/env bash
# tests: product
# node-termination-handler's queue mode (`aws-k8s nth` with ENABLE_SQS_TERMINATION_DRAINING)
# against moto (SQS, EventBridge rules with the queue as target, EC2), the counting fault proxy
# in front of it and the test API server:
#   - a spot warning, a rebalance recommendation and a state change (stopping), each put through
#     an EventBridge rule, an ASG terminate lifecycle action (EventBridge, direct, wrapped in
#     SNS) and an AWS Health scheduled change sent directly: each cordons the right Node (found
#     by its kubernetes.io/hostname label or by name) and its message is deleted;
#   - CompleteLifecycleAction (which moto lacks: the fault proxy answers it) is called once per
#     lifecycle message, after the drain;
#   - an unmanaged instance (no managed tag) and a foreign one (EC2 knows no such ID): nothing
#     cordoned, the message deleted once, never seen again;
#   - a test notification, a running state change, not JSON, JSON of another shape, an unknown
#     detail-type, a 250 KB body: each logged once and deleted, nothing cordoned;
#   - a cordon the API server refuses (403): the message is not deleted and comes back; once the
#     API server accepts, the Node is cordoned and the message deleted;
#   - SIGTERM: a clean stop.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

ccm_env_start || { fail "moto, the fault proxy and the test API server start"; t_summary; }
T=$T_TMP
MANAGED=aws-node-termination-handler/managed

# pcount KEY: calls the fault proxy counted for service:action
pcount() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c '
import json, sys; print(json.load(sys.stdin)["counts"].get(sys.argv[1], 0))' "$1"; }

# ---- AWS: the queue, the rules, the instances -------------------------------------------------
moto_py "
q = sqs.create_queue(QueueName='nth-q')['QueueUrl']
arn = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=['QueueArn'])['Attributes']['QueueArn']
for name, src, dt in [('spot', 'aws.ec2', 'EC2 Spot Instance Interruption Warning'),
                      ('rebalance', 'aws.ec2', 'EC2 Instance Rebalance Recommendation'),
                      ('state', 'aws.ec2', 'EC2 Instance State-change Notification'),
                      ('asg', 'aws.autoscaling', 'EC2 Instance-terminate Lifecycle Action')]:
    events.put_rule(Name='nth-' + name, EventPattern=json.dumps({'source': [src], 'detail-type': [dt]}))
    events.put_targets(Rule='nth-' + name, Targets=[{'Id': 'q', 'Arn': arn}])
print(q)" >"$T/queue" 2>"$T/queue.err"
QUEUE_URL=$(cat "$T/queue")
case $QUEUE_URL in http*/nth-q) peer ok "the queue and four EventBridge rules targeting it" ;;
*) peer fail "the queue and the rules" "$(tail -3 "$T/queue.err")"; t_summary ;; esac

declare -A ID DNS
for k in spot rebalance state asg asgdirect asgsns health health2 unmanaged refused; do
	tags="{'Name': '$k', '$MANAGED': ''}"
	[ "$k" = unmanaged ] && tags="{'Name': '$k'}"
	read -r ID[$k] DNS[$k] < <(moto_py "
i = ec2.run_instances(ImageId='ami-12345678', InstanceType='m5.large', MinCount=1, MaxCount=1,
    TagSpecifications=[{'ResourceType': 'instance', 'Tags': [{'Key': k, 'Value': v} for k, v in $tags.items()]}])['Instances'][0]
print(i['InstanceId'], i['PrivateDnsName'])")
	# the spot Node carries the hostname label (its name differs), the others are found by name
	if [ "$k" = spot ]; then
		kc create -f - >/dev/null <<JSON
{"apiVersion":"v1","kind":"Node","metadata":{"name":"spot-node","labels":{"kubernetes.io/hostname":"${DNS[$k]}"}},
 "status":{"conditions":[{"type":"Ready","status":"True"}]}}
JSON
	else
		node_create "${DNS[$k]}" "aws:///us-east-1a/${ID[$k]}"
	fi
done
NODE_spot=spot-node
node_of() { if [ "$1" = spot ]; then echo spot-node; else echo "${DNS[$1]}"; fi; }
if [ -n "${ID[refused]}" ] && kc get node spot-node "${DNS[refused]}" >/dev/null 2>&1; then
	peer ok "10 instances in moto, their Nodes in the API server"
else peer fail "instances and Nodes" "${ID[*]}"; t_summary; fi

# moto has no CompleteLifecycleAction: the fault proxy answers it as AWS does
fault '{"service":"autoscaling","action":"CompleteLifecycleAction","effect":"body","body":"<CompleteLifecycleActionResponse xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\"><CompleteLifecycleActionResult/><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></CompleteLifecycleActionResponse>"}'

# ---- start it --------------------------------------------------------------------------------
PROM_PORT=$(free_port)
KUBECONFIG=$KC ENABLE_SQS_TERMINATION_DRAINING=true QUEUE_URL=$QUEUE_URL AWS_REGION=us-east-1 \
	SQS_MSG_VISIBILITY_TIMEOUT_SEC=2 NODE_TERMINATION_GRACE_PERIOD=30 TAINT_NODE=true \
	ENABLE_PROMETHEUS_SERVER=true PROMETHEUS_SERVER_PORT=$PROM_PORT \
	bg nth "$AWS_K8S" nth --v=2
NTH_PID=$(cat "$T/nth.pid")
wait_until 20 grep -q "queue mode: polling" "$T/nth.log" && ok "nth starts in queue mode" \
	|| { fail "nth starts in queue mode" "$(tail -5 "$T/nth.log")"; t_summary; }

# upstream's gauges, counted at start: 9 instances carry the managed tag (all but "unmanaged"), 8
# of them have a Node with their providerID (the spot Node has none: found by its label instead)
gauges() { curl -s "http://127.0.0.1:$PROM_PORT/metrics" | grep -E '^nth_tagged_(instances|nodes) ' | sort | tr '\n' ' '; }
if wait_until 20 test "$(gauges)" = "nth_tagged_instances 9 nth_tagged_nodes 8 "; then
	ok "nth_tagged_instances 9, nth_tagged_nodes 8"
else fail "nth_tagged_instances 9, nth_tagged_nodes 8" "got: $(gauges)"; fi

# ---- the events ------------------------------------------------------------------------------
send() { moto_py "sqs.send_message(QueueUrl='$QUEUE_URL', MessageBody=sys.argv[1])" "$1"; }
put_event() { moto_py "
r = events.put_events(Entries=[{'Source': sys.argv[1], 'DetailType': sys.argv[2], 'Detail': sys.argv[3]}])
assert r['FailedEntryCount'] == 0, r" "$@"; }

put_event aws.ec2 "EC2 Spot Instance Interruption Warning" \
	"{\"instance-id\":\"${ID[spot]}\",\"instance-action\":\"terminate\"}"
put_event aws.ec2 "EC2 Instance Rebalance Recommendation" "{\"instance-id\":\"${ID[rebalance]}\"}"
put_event aws.ec2 "EC2 Instance State-change Notification" "{\"instance-id\":\"${ID[state]}\",\"state\":\"stopping\"}"
put_event aws.autoscaling "EC2 Instance-terminate Lifecycle Action" \
	"{\"LifecycleActionToken\":\"tok-eb\",\"AutoScalingGroupName\":\"nodes\",\"LifecycleHookName\":\"nth\",\"EC2InstanceId\":\"${ID[asg]}\",\"LifecycleTransition\":\"autoscaling:EC2_INSTANCE_TERMINATING\"}"
direct="{\"Origin\":\"AutoScalingGroup\",\"Service\":\"AWS Auto Scaling\",\"Time\":\"2026-12-04T06:34:00.000Z\",\"LifecycleTransition\":\"autoscaling:EC2_INSTANCE_TERMINATING\",\"RequestId\":\"req-1\",\"LifecycleActionToken\":\"tok-direct\",\"EC2InstanceId\":\"${ID[asgdirect]}\",\"LifecycleHookName\":\"nth\",\"AutoScalingGroupName\":\"nodes\"}"
send "$direct"
send "$(python3 -c 'import json,sys; print(json.dumps({"Type":"Notification","MessageId":"sns-1","TopicArn":"arn:aws:sns:us-east-1:123456789012:nth","Message":sys.argv[1].replace("tok-direct","tok-sns").replace(sys.argv[2],sys.argv[3])}))' "$direct" "${ID[asgdirect]}" "${ID[asgsns]}")"
send "{\"version\":\"0\",\"id\":\"h-1\",\"detail-type\":\"AWS Health Event\",\"source\":\"aws.health\",\"time\":\"2026-12-04T06:36:00Z\",\"detail\":{\"service\":\"EC2\",\"eventTypeCategory\":\"scheduledChange\",\"eventTypeCode\":\"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED\",\"affectedEntities\":[{\"entityValue\":\"${ID[health]}\"},{\"entityValue\":\"${ID[health2]}\"}]}}"
put_event aws.ec2 "EC2 Spot Instance Interruption Warning" \
	"{\"instance-id\":\"${ID[unmanaged]}\",\"instance-action\":\"terminate\"}"
put_event aws.ec2 "EC2 Spot Instance Interruption Warning" \
	'{"instance-id":"i-0aaaaaaaaaaaaaaaa","instance-action":"terminate"}'

acted="spot rebalance state asg asgdirect asgsns health health2"
cordoned() { [ "$(kc get node "$(node_of "$1")" -o jsonpath='{.spec.unschedulable}')" = true ]; }
all_cordoned() { for k in $acted; do cordoned "$k" || return 1; done; }
queue_empty() { moto_py "
a = sqs.get_queue_attributes(QueueUrl='$QUEUE_URL', AttributeNames=['All'])['Attributes']
sys.exit(0 if int(a['ApproximateNumberOfMessages']) + int(a['ApproximateNumberOfMessagesNotVisible']) == 0 else 1)"; }

if wait_until 90 all_cordoned; then ok "each event kind cordons its Node (spot, rebalance, state change, 3 ASG lifecycle forms, 2 Health entities)"
else
	for k in $acted; do cordoned "$k" || fail "the $k event cordons $(node_of "$k")" "$(grep -i "${ID[$k]}" "$T/nth.log" | tail -3)"; done
fi
check "the spot Node was found by its kubernetes.io/hostname label (its name is not the DNS name)" cordoned spot
wait_until 30 queue_empty && ok "every message was deleted (the queue is empty)" \
	|| fail "every message was deleted" "$(moto_py "print(sqs.get_queue_attributes(QueueUrl='$QUEUE_URL', AttributeNames=['All'])['Attributes'])")"
n=$(pcount autoscaling:CompleteLifecycleAction)
[ "$n" = 3 ] && ok "CompleteLifecycleAction called once for each of the 3 lifecycle messages" \
	|| fail "CompleteLifecycleAction called 3 times" "got $n"
for k in asg asgdirect asgsns; do
	if grep "completed the lifecycle action" "$T/nth.log" | grep -q "${ID[$k]}"; then
		ok "the $k lifecycle action completed (CONTINUE) after its drain"
	else fail "the $k lifecycle action completed" "$(grep "${ID[$k]}" "$T/nth.log" | tail -3)"; fi
done

# ---- unmanaged, foreign ----------------------------------------------------------------------
if ! cordoned unmanaged; then ok "the unmanaged instance's Node is not cordoned"
else fail "the unmanaged instance's Node is not cordoned"; fi
c=$(grep -c "not managed" "$T/nth.log")
[ "$c" = 1 ] && ok "the unmanaged instance's message is logged once (deleted, not retried)" \
	|| fail "the unmanaged message is logged once" "$c times"
c=$(grep -c "EC2 knows no such instance" "$T/nth.log")
[ "$c" = 1 ] && ok "the foreign instance's message is logged once (deleted, not retried)" \
	|| fail "the foreign message is logged once" "$c times"

# ---- malformed and nothing-to-do messages ----------------------------------------------------
before=$(pcount sqs:DeleteMessage)
send '{"AccountId":"123456789012","Service":"AWS Auto Scaling","Event":"autoscaling:TEST_NOTIFICATION","AutoScalingGroupName":"nodes"}'
send "{\"version\":\"0\",\"id\":\"s-2\",\"detail-type\":\"EC2 Instance State-change Notification\",\"source\":\"aws.ec2\",\"detail\":{\"instance-id\":\"${ID[refused]}\",\"state\":\"running\"}}"
send '<html><body>not json</body></html>'
send '{"hello":"world"}'
send "{\"version\":\"0\",\"id\":\"u-1\",\"detail-type\":\"EC2 Fleet Error\",\"source\":\"aws.ec2\",\"detail\":{\"instance-id\":\"${ID[refused]}\"}}"
python3 -c 'print("{\"pad\":\"" + "x" * 250000 + "\"}")' >"$T/huge.json"
moto_py "sqs.send_message(QueueUrl='$QUEUE_URL', MessageBody=open(sys.argv[1]).read())" "$T/huge.json"
wait_until 30 queue_empty && ok "6 messages with nothing to do or malformed: all deleted" \
	|| fail "malformed messages deleted" "$(tail -5 "$T/nth.log")"
n=$(($(pcount sqs:DeleteMessage) - before))
[ "$n" = 6 ] && ok "one DeleteMessage each (6)" || fail "one DeleteMessage each" "got $n"
c=$(grep -c "not an interruption event" "$T/nth.log")
[ "$c" = 4 ] && ok "the 4 malformed messages are logged once each (not JSON, other shape, unknown detail-type, 250 KB)" \
	|| fail "malformed messages logged once each" "$c lines: $(grep "not an interruption event" "$T/nth.log" | cut -c1-200)"
c=$(grep -c "deleting a message with nothing to do" "$T/nth.log")
[ "$c" = 2 ] && ok "the test notification and the running state change are skips, logged once each" \
	|| fail "the 2 skips logged once each" "$c"
if ! cordoned refused; then ok "nothing was cordoned for them"; else fail "nothing cordoned for malformed messages"; fi

# ---- a refused cordon keeps the message ------------------------------------------------------
rn=${DNS[refused]}
ctl() { curl -sk -X "$1" "$KAS_URL/_control/$2" "${@:3}"; }
ctl POST faults -H 'Content-Type: application/json' \
	-d "{\"action\":\"error\",\"method\":\"PATCH\",\"path\":\"^/api/v1/nodes/$rn\",\"code\":403}" >/dev/null
ctl POST faults -H 'Content-Type: application/json' \
	-d "{\"action\":\"error\",\"method\":\"PUT\",\"path\":\"^/api/v1/nodes/$rn\",\"code\":403}" >/dev/null
put_event aws.ec2 "EC2 Spot Instance Interruption Warning" \
	"{\"instance-id\":\"${ID[refused]}\",\"instance-action\":\"terminate\"}"
twice() { [ "$(grep -c "its message stays on the queue" "$T/nth.log")" -ge 2 ]; }
if wait_until 60 twice; then ok "a cordon refused by the API server: the message is kept and comes back"
else fail "a refused cordon keeps the message" "$(tail -5 "$T/nth.log")"; fi
queue_empty && fail "the message is still on the queue while the cordon fails" || ok "the message is still on the queue while the cordon fails"
ctl DELETE faults >/dev/null
if wait_until 60 cordoned refused && wait_until 30 queue_empty; then
	ok "once the API server accepts, the Node is cordoned and the message deleted"
else fail "the retried message drains once accepted" "$(tail -5 "$T/nth.log")"; fi

# ---- stop ------------------------------------------------------------------------------------
if stop_within "$NTH_PID" 30 nth; then
	if [ "$STOP_RC" = 0 ] && ! grep -q "Sanitizer\|runtime error" "$T/nth.log"; then
		ok "nth stops cleanly on SIGTERM in the middle of a long poll (exit 0)"
	else fail "nth stops cleanly on SIGTERM" "exit $STOP_RC; $(tail -3 "$T/nth.log")"; fi
fi
t_summary
