# shellcheck shell=bash
# The demo's node-termination-handler part, sourced by tests/demo/run, which calls demo_nth
# before its report (it uses run's R, ADAPT, role, failed, say, the Node $dns1 of instance $id1
# and the peers). aws-k8s nth runs from deploy/example's Deployment aws-node-termination-handler
# (queue mode) as the kubelet would start it: the queue its QUEUE_URL names is made in moto
# with the EventBridge rule upstream's setup makes, the instance tagged as managed, two pods
# put on its Node; then a spot interruption warning sent through EventBridge cordons and drains
# the Node, and the message is deleted from the queue.

# nth_queue_count URL: messages on the queue, visible and in flight
nth_queue_count() {
	moto_py "
a = sqs.get_queue_attributes(QueueUrl=sys.argv[1], AttributeNames=['All'])['Attributes']
print(int(a['ApproximateNumberOfMessages']) + int(a['ApproximateNumberOfMessagesNotVisible']))" "$1"
}

demo_nth() {
	local url qurl probes metrics node=$dns1 inst=$id1 p
	say "aws-k8s nth (queue mode): an EC2 spot interruption warning, through EventBridge and SQS"
	url=$(python3 - "$R" <<'PY'
import sys, yaml
for o in yaml.safe_load_all(open(sys.argv[1])):
    if o and o["kind"] == "Deployment" and o["metadata"]["name"] == "aws-node-termination-handler":
        env = o["spec"]["template"]["spec"]["containers"][0]["env"]
        print(next(e["value"] for e in env if e["name"] == "QUEUE_URL"))
PY
	) || failed "reading QUEUE_URL from the Deployment aws-node-termination-handler"
	echo "the manifest's QUEUE_URL: $url"
	# the queue and the rule as upstream's setup makes them; moto finds a queue by its name
	qurl=$(moto_py "
q = sqs.create_queue(QueueName=sys.argv[1])['QueueUrl']
arn = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=['QueueArn'])['Attributes']['QueueArn']
events.put_rule(Name='nth-spot', EventPattern=json.dumps({'source': ['aws.ec2'],
    'detail-type': ['EC2 Spot Instance Interruption Warning']}))
events.put_targets(Rule='nth-spot', Targets=[{'Id': 'nth', 'Arn': arn}])
ec2.create_tags(Resources=[sys.argv[2]], Tags=[{'Key': 'aws-node-termination-handler/managed', 'Value': ''}])
print(q)" "${url##*/}" "$inst") || failed "the queue, the EventBridge rule and the managed tag in moto"
	echo "moto: queue ${url##*/} ($qurl)"
	echo "EventBridge rule nth-spot: EC2 Spot Instance Interruption Warning -> the queue"
	echo "instance $inst (Node $node) tagged aws-node-termination-handler/managed"
	# two pods of a ReplicaSet on the Node, as the scheduler would have put them
	for p in web-1 web-2; do
		kc create -f - >/dev/null <<EOF || failed "a pod on $node"
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"$p","namespace":"default","labels":{"app":"web"},
 "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"u-web","controller":true}]},
 "spec":{"nodeName":"$node","containers":[{"name":"web","image":"nginx"}]},"status":{"phase":"Running"}}
EOF
	done
	kc get pods -n default -o custom-columns='POD:.metadata.name,NODE:.spec.nodeName'

	probes=$(free_port)
	metrics=$(free_port)
	role nth Deployment aws-node-termination-handler aws-node-termination-handler \
		"the pod's name for its fieldRef; a pod has its own network namespace: the probes and metrics ports move to free ones" \
		--set fieldRef:metadata.name=aws-node-termination-handler-demo \
		--port-map "8080=$probes" --port-map "9092=$metrics"
	wait_http "http://127.0.0.1:$probes/healthz" 20 || failed "nth serves /healthz" nth
	echo "/healthz: $(curl -s "http://127.0.0.1:$probes/healthz")"
	wait_until 20 grep -q "queue mode: polling" "$T_TMP/nth.log" || failed "nth polls its queue" nth

	moto_py "
r = events.put_events(Entries=[{'Source': 'aws.ec2', 'DetailType': 'EC2 Spot Instance Interruption Warning',
    'Detail': json.dumps({'instance-id': sys.argv[1], 'instance-action': 'terminate'})}])
assert r['FailedEntryCount'] == 0, r" "$inst" || failed "EventBridge PutEvents"
	echo "EventBridge: EC2 Spot Instance Interruption Warning for $inst (its Node: $node)"
	nth_cordoned() { [ "$(kc get node "$node" -o jsonpath='{.spec.unschedulable}')" = true ]; }
	wait_until 60 nth_cordoned || failed "the Node $node is cordoned within 60 s" nth
	nth_drained() { [ -z "$(kc get pods -n default --field-selector "spec.nodeName=$node" -o name)" ]; }
	wait_until 60 nth_drained || failed "the pods leave $node within 60 s" nth
	kc get node "$node" -o custom-columns='NAME:.metadata.name,UNSCHEDULABLE:.spec.unschedulable,EVENT:.metadata.labels.aws-node-termination-handler/event-id'
	echo "pods left on $node: none (web-1 and web-2 evicted)"
	nth_deleted() { [ "$(nth_queue_count "$qurl")" = 0 ]; }
	wait_until 30 nth_deleted || failed "the message is deleted from the queue" nth
	echo "the queue holds $(nth_queue_count "$qurl") messages (visible and in flight): the message was deleted after the drain"
	echo "the handler's log:"
	grep -aE "spot|cordon|drain|delet" "$T_TMP/nth.log" | cut -c1-200 | sed 's/^/  /' | head -n 8
	echo "its metrics: $(curl -s "http://127.0.0.1:$metrics/metrics" | grep '^actions_total' | tr '\n' ' ')"
}
