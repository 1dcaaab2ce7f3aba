#!/usr/bin/env bash
# tests: product
# node-termination-handler's queue mode (`aws-k8s nth` with ENABLE_SQS_TERMINATION_DRAINING)
# against moto (SQS, EventBridge rules with the queue as target, EC2), the counting fault proxy
# in front of it and the test API server:
#   - a spot warning, a rebalance recommendation and a state change (stopping), each put through
#     an EventBridge rule, an ASG terminate lifecycle action (EventBridge, direct, wrapped in
#     SNS) and an AWS Health scheduled change sent directly: each cordons the right Node (found
#     by its kubernetes.io/hostname label or by name) and its message is deleted;
#     each Node's ReplicaSet pod is evicted (the drain), the unmanaged Node's pod is kept; the
#     evictions carry POD_TERMINATION_GRACE_PERIOD and the drain waits for a terminating pod
#     (a finalizer holds it) before the message is deleted;
#   - CompleteLifecycleAction (which moto lacks: the fault proxy answers it) is called once per
#     lifecycle message, after the drain;
#   - a lifecycle drain blocked by a PodDisruptionBudget past HEARTBEAT_INTERVAL (30 s, upstream's
#     minimum): RecordLifecycleActionHeartbeat (answered by the fault proxy) is called while it
#     waits, the action is not completed and the message stays; once the budget allows it, the
#     pod is evicted, the heartbeats stop and the action is completed;
#   - an unmanaged instance (no managed tag) and a foreign one (EC2 knows no such ID): nothing
#     cordoned, the message deleted once, never seen again;
#   - a test notification, a running state change, not JSON, JSON of another shape, an unknown
#     detail-type, a 250 KB body: each logged once and deleted, nothing cordoned;
#   - a cordon the API server refuses (403): the message is not deleted and comes back; once the
#     API server accepts, the Node is cordoned and the message deleted;
#   - SIGTERM: a clean stop;
#   - USE_PROVIDER_ID (a second nth): a spot warning cordons and drains the Node whose
#     spec.providerID is the instance's (its name and labels say nothing of the instance).
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
for k in spot rebalance state asg asgdirect asgsns health health2 unmanaged refused hb pid; do
	tags="{'Name': '$k', '$MANAGED': ''}"
	[ "$k" = unmanaged ] && tags="{'Name': '$k'}"
	read -r ID[$k] DNS[$k] AZ < <(moto_py "
i = ec2.run_instances(ImageId='ami-12345678', InstanceType='m5.large', MinCount=1, MaxCount=1,
    TagSpecifications=[{'ResourceType': 'instance', 'Tags': [{'Key': k, 'Value': v} for k, v in $tags.items()]}])['Instances'][0]
print(i['InstanceId'], i['PrivateDnsName'], i['Placement']['AvailabilityZone'])")
	# the spot Node carries the hostname label (its name differs), the pid Node only the
	# providerID (for USE_PROVIDER_ID), the others are found by name
	if [ "$k" = pid ]; then
		kc create -f - >/dev/null <<JSON
{"apiVersion":"v1","kind":"Node","metadata":{"name":"pid-node"},"spec":{"providerID":"aws:///$AZ/${ID[$k]}"},
 "status":{"conditions":[{"type":"Ready","status":"True"}]}}
JSON
	elif [ "$k" = spot ]; then
		kc create -f - >/dev/null <<JSON
{"apiVersion":"v1","kind":"Node","metadata":{"name":"spot-node","labels":{"kubernetes.io/hostname":"${DNS[$k]}"}},
 "status":{"conditions":[{"type":"Ready","status":"True"}]}}
JSON
	else
		node_create "${DNS[$k]}" "aws:///us-east-1a/${ID[$k]}"
	fi
done
NODE_spot=spot-node
node_of() { case $1 in spot | pid) echo "$1-node" ;; *) echo "${DNS[$1]}" ;; esac; }
if [ -n "${ID[pid]}" ] && kc get node spot-node pid-node "${DNS[refused]}" "${DNS[hb]}" >/dev/null 2>&1; then
	peer ok "12 instances in moto, their Nodes in the API server"
else peer fail "instances and Nodes" "${ID[*]}"; t_summary; fi
# a ReplicaSet pod web-KEY on each Node (web-state held by a finalizer after its eviction); a
# PodDisruptionBudget that refuses web-hb's eviction
pods_json() {
	local k fin
	for k in "${!ID[@]}"; do
		fin=
		[ "$k" = state ] && fin='"finalizers":["example.com/hold"],'
		printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-%s","namespace":"default",%s"labels":{"app":"web-%s"},' "$k" "$fin" "$k"
		printf '"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs-%s","uid":"u-%s","controller":true}]},' "$k" "$k"
		printf '"spec":{"nodeName":"%s","containers":[{"name":"c","image":"i"}]},"status":{"phase":"Running"}}\n' "$(node_of "$k")"
	done
	printf '{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"hb","namespace":"default"},'
	printf '"spec":{"minAvailable":1,"selector":{"matchLabels":{"app":"web-hb"}}}}\n'
}
pods_json | jq -s '{apiVersion: "v1", kind: "List", items: .}' | kc create -f - >/dev/null 2>"$T/pods.err"
n=$(kc get pods -o name 2>/dev/null | wc -l)
[ "$n" = 12 ] && peer ok "a ReplicaSet pod on each of the 12 Nodes, a budget for web-hb" ||
	{ peer fail "the pods" "$n pods; $(tail -3 "$T/pods.err")"; t_summary; }
pod_gone() { ! kc get pod "web-$1" >/dev/null 2>&1; }

# moto has no CompleteLifecycleAction: the fault proxy answers it as AWS does
fault '{"service":"autoscaling","action":"CompleteLifecycleAction","effect":"body","body":"<CompleteLifecycleActionResponse xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\"><CompleteLifecycleActionResult/><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></CompleteLifecycleActionResponse>"}'
fault '{"service":"autoscaling","action":"RecordLifecycleActionHeartbeat","effect":"body","body":"<RecordLifecycleActionHeartbeatResponse xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\"><RecordLifecycleActionHeartbeatResult/><ResponseMetadata><RequestId>r-2</RequestId></ResponseMetadata></RecordLifecycleActionHeartbeatResponse>"}'

# ---- start it --------------------------------------------------------------------------------
PROM_PORT=$(free_port)
KUBECONFIG=$KC ENABLE_SQS_TERMINATION_DRAINING=true QUEUE_URL=$QUEUE_URL AWS_REGION=us-east-1 \
	SQS_MSG_VISIBILITY_TIMEOUT_SEC=2 NODE_TERMINATION_GRACE_PERIOD=120 POD_TERMINATION_GRACE_PERIOD=7 TAINT_NODE=true \
	HEARTBEAT_INTERVAL=30 HEARTBEAT_UNTIL=60 \
	ENABLE_PROMETHEUS_SERVER=true PROMETHEUS_SERVER_PORT=$PROM_PORT \
	bg nth "$AWS_K8S" nth --v=2
NTH_PID=$(cat "$T/nth.pid")
wait_until 20 grep -q "queue mode: polling" "$T/nth.log" && ok "nth starts in queue mode" \
	|| { fail "nth starts in queue mode" "$(tail -5 "$T/nth.log")"; t_summary; }

# upstream's gauges, counted at start: 11 instances carry the managed tag (all but "unmanaged"), 10
# of them have a Node with their providerID (the spot Node has none: found by its label instead)
gauges() { curl -s "http://127.0.0.1:$PROM_PORT/metrics" | grep -E '^nth_tagged_(instances|nodes) ' | sort | tr '\n' ' '; }
# (polled: gauges is run again on each try)
gauges_ok() { [ "$(gauges)" = "nth_tagged_instances 11 nth_tagged_nodes 10 " ]; }
if wait_until 60 gauges_ok; then
	ok "nth_tagged_instances 11, nth_tagged_nodes 10"
else fail "nth_tagged_instances 11, nth_tagged_nodes 10" "got: $(gauges)"; fi

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
# in_queue: the messages on the queue, visible and in flight
in_queue() { moto_py "
a = sqs.get_queue_attributes(QueueUrl='$QUEUE_URL', AttributeNames=['All'])['Attributes']
print(int(a['ApproximateNumberOfMessages']) + int(a['ApproximateNumberOfMessagesNotVisible']))"; }
queue_empty() { [ "$(in_queue)" = 0 ]; }

if wait_until 90 all_cordoned; then ok "each event kind cordons its Node (spot, rebalance, state change, 3 ASG lifecycle forms, 2 Health entities)"
else
	for k in $acted; do cordoned "$k" || fail "the $k event cordons $(node_of "$k")" "$(grep -i "${ID[$k]}" "$T/nth.log" | tail -3)"; done
fi
check "the spot Node was found by its kubernetes.io/hostname label (its name is not the DNS name)" cordoned spot
terminating() { [ -n "$(kc get pod web-state -o jsonpath='{.metadata.deletionTimestamp}')" ]; }
wait_until 60 terminating
check "the eviction carried POD_TERMINATION_GRACE_PERIOD (web-state's deletionGracePeriodSeconds is 7)" \
	test "$(kc get pod web-state -o jsonpath='{.metadata.deletionGracePeriodSeconds}')" = 7
others_done() { for k in $acted; do [ "$k" = state ] || pod_gone "$k" || return 1; done; [ "$(in_queue)" -le 1 ]; }
wait_until 60 others_done
sleep 3
check "... the drain waits for the terminating pod: its Node not logged as drained, its message kept" \
	test "$(grep '"node cordoned and drained"' "$T/nth.log" | grep -c "node=\"${DNS[state]}\"")/$(in_queue)" = 0/1
kc patch pod web-state --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null
all_drained() { for k in $acted; do pod_gone "$k" || return 1; done; }
if wait_until 60 all_drained; then ok "each of the 8 Nodes is drained (its ReplicaSet pod evicted)"
else
	for k in $acted; do pod_gone "$k" || fail "the $k event drains $(node_of "$k")" "web-$k is still there"; done
fi
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
if ! cordoned unmanaged && ! pod_gone unmanaged; then ok "the unmanaged instance's Node is not cordoned, its pod kept"
else fail "the unmanaged instance's Node is not cordoned, its pod kept"; fi
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

# ---- a lifecycle drain blocked past HEARTBEAT_INTERVAL: heartbeats, then the completion -------
hb_direct=${direct//tok-direct/tok-hb}
send "${hb_direct//${ID[asgdirect]}/${ID[hb]}}"
beat() { [ "$(pcount autoscaling:RecordLifecycleActionHeartbeat)" -ge 1 ]; }
if wait_until 30 cordoned hb && wait_until 75 beat; then
	ok "a lifecycle drain blocked by a budget: RecordLifecycleActionHeartbeat called after HEARTBEAT_INTERVAL (30 s)"
else fail "a blocked lifecycle drain sends a heartbeat" "$(pcount autoscaling:RecordLifecycleActionHeartbeat) heartbeats; $(grep -i "${ID[hb]}" "$T/nth.log" | tail -3)"; fi
hb_logged() { grep '"sent a lifecycle heartbeat"' "$T/nth.log" | grep -qF "group=\"nodes\" hook=\"nth\" instance=\"${ID[hb]}\""; }
check "... logged with the group, the hook and the instance" hb_logged
check "... while blocked: the pod is there, the action not completed, the message on the queue" \
	test "$(pod_gone hb || echo y)/$(pcount autoscaling:CompleteLifecycleAction)/$(queue_empty || echo y)" = "y/3/y"
kc patch pdb hb --type merge -p '{"spec":{"minAvailable":0}}' >/dev/null
if wait_until 60 pod_gone hb && wait_until 30 queue_empty; then
	ok "once the budget allows it: the pod is evicted and the message deleted"
else fail "the blocked lifecycle drain completes" "$(grep -i "${ID[hb]}" "$T/nth.log" | tail -3)"; fi
check "... CompleteLifecycleAction called for it (4 in all)" test "$(pcount autoscaling:CompleteLifecycleAction)" = 4

# ---- stop ------------------------------------------------------------------------------------
if stop_within "$NTH_PID" 30 nth; then
	if [ "$STOP_RC" = 0 ] && ! grep -q "Sanitizer\|runtime error" "$T/nth.log"; then
		ok "nth stops cleanly on SIGTERM in the middle of a long poll (exit 0)"
	else fail "nth stops cleanly on SIGTERM" "exit $STOP_RC; $(tail -3 "$T/nth.log")"; fi
fi

# ---- USE_PROVIDER_ID: the Node found by spec.providerID alone --------------------------------
KUBECONFIG=$KC ENABLE_SQS_TERMINATION_DRAINING=true QUEUE_URL=$QUEUE_URL AWS_REGION=us-east-1 \
	USE_PROVIDER_ID=true bg nth-pid "$AWS_K8S" nth --v=2
wait_until 20 grep -q "queue mode: polling" "$T/nth-pid.log" || fail "nth (USE_PROVIDER_ID) starts" "$(tail -3 "$T/nth-pid.log")"
put_event aws.ec2 "EC2 Spot Instance Interruption Warning" "{\"instance-id\":\"${ID[pid]}\",\"instance-action\":\"terminate\"}"
if wait_until 60 pod_gone pid && wait_until 30 queue_empty; then
	ok "USE_PROVIDER_ID: the Node with the instance's providerID (aws:///ZONE/ID) is drained, the message deleted"
else fail "USE_PROVIDER_ID: the Node found by its providerID" "$(grep -i "${ID[pid]}" "$T/nth-pid.log" | tail -3)"; fi
check "USE_PROVIDER_ID: ... and cordoned" cordoned pid
stop_within "$(cat "$T/nth-pid.pid")" 30 nth-pid && check "nth (USE_PROVIDER_ID) stops with exit 0" test "$STOP_RC" = 0
t_summary
