#!/usr/bin/env bash
# tests: product
# Elastic Load Balancing through `aws-k8s aws` against moto: a classic ELB (API 2012-06-01,
# member lists, the ErrorResponse shape) and an NLB with a target group (API 2015-12-01).
. "$(dirname "$0")/aws_lib.sh"

moto_start || { fail "moto starts"; t_summary; }
T=$T_TMP

read -r subnet vpc iid <<<"$(moto_py '
s = ec2.describe_subnets(Filters=[{"Name": "availability-zone", "Values": ["us-east-1a"]}])["Subnets"][0]
print(s["SubnetId"], s["VpcId"], run_instance(SubnetId=s["SubnetId"]))')"

# --- classic ---
run_to "$T/c1.json" elb CreateLoadBalancer LoadBalancerName=k8s-a1 Subnets.member.1="$subnet" \
	Listeners.member.1.Protocol=TCP Listeners.member.1.LoadBalancerPort=80 \
	Listeners.member.1.InstanceProtocol=TCP Listeners.member.1.InstancePort=30080 \
	Tags.member.1.Key=kubernetes.io/service-name Tags.member.1.Value=default/web
jcheck "classic CreateLoadBalancer returns the DNS name" "$T/c1.json" '.DNSName | startswith("k8s-a1")'
run_to "$T/c2.json" elb RegisterInstancesWithLoadBalancer LoadBalancerName=k8s-a1 Instances.member.1.InstanceId="$iid"
[ $RC -eq 0 ] && ok "classic RegisterInstancesWithLoadBalancer" || fail "classic RegisterInstancesWithLoadBalancer" "$(cat "$T/c2.json.err")"
run_to "$T/c3.json" elb DescribeLoadBalancers LoadBalancerNames.member.1=k8s-a1
jcheck "classic DescribeLoadBalancers: listener, subnet, instance" "$T/c3.json" \
	".LoadBalancerDescriptions[0] | (.ListenerDescriptions[0].Listener.InstancePort == \"30080\") and (.Subnets == [\"$subnet\"]) and (.Instances[0].InstanceId == \"$iid\")"
run_to "$T/c4.json" elb DescribeTags LoadBalancerNames.member.1=k8s-a1
jcheck "classic DescribeTags" "$T/c4.json" '.TagDescriptions[0].Tags[0].Value == "default/web"'
run_to "$T/c5.json" elb CreateLoadBalancer LoadBalancerName=k8s-a1 Subnets.member.1="$subnet" \
	Listeners.member.1.Protocol=TCP Listeners.member.1.LoadBalancerPort=80 Listeners.member.1.InstancePort=30080
grep -q "DuplicateLoadBalancerName" "$T/c5.json.err" && [ $RC -eq 1 ] && ok "ELB error shape (ErrorResponse): duplicate name" \
	|| fail "ELB error shape (ErrorResponse): duplicate name" "rc=$RC $(cat "$T/c5.json.err")"
run_to "$T/c6.json" elb DeleteLoadBalancer LoadBalancerName=k8s-a1
[ $RC -eq 0 ] && ok "classic DeleteLoadBalancer" || fail "classic DeleteLoadBalancer" "$(cat "$T/c6.json.err")"
run_to "$T/c7.json" elb DescribeLoadBalancers LoadBalancerNames.member.1=k8s-a1
grep -q "LoadBalancerNotFound" "$T/c7.json.err" && ok "the deleted classic ELB is not found" \
	|| fail "the deleted classic ELB is not found" "$(cat "$T/c7.json.err")"

# --- NLB with a target group ---
run_to "$T/n1.json" elbv2 CreateLoadBalancer Name=k8s-nlb Type=network Scheme=internet-facing Subnets.member.1="$subnet"
lb=$(jq -r '.LoadBalancers[0].LoadBalancerArn' "$T/n1.json" 2>/dev/null)
case $lb in arn:aws:elasticloadbalancing:*) ok "NLB CreateLoadBalancer returns an ARN" ;; *) fail "NLB CreateLoadBalancer returns an ARN" "$(cat "$T/n1.json" "$T/n1.json.err")" ;; esac
jcheck "NLB type is network" "$T/n1.json" '.LoadBalancers[0].Type == "network"'
run_to "$T/n2.json" elbv2 CreateTargetGroup Name=k8s-tg Protocol=TCP Port=30080 VpcId="$vpc" TargetType=instance \
	HealthCheckProtocol=TCP
tg=$(jq -r '.TargetGroups[0].TargetGroupArn' "$T/n2.json" 2>/dev/null)
case $tg in arn:*targetgroup*) ok "CreateTargetGroup returns an ARN" ;; *) fail "CreateTargetGroup returns an ARN" "$(cat "$T/n2.json" "$T/n2.json.err")" ;; esac
run_to "$T/n3.json" elbv2 RegisterTargets TargetGroupArn="$tg" Targets.member.1.Id="$iid" Targets.member.1.Port=30080
[ $RC -eq 0 ] && ok "RegisterTargets" || fail "RegisterTargets" "$(cat "$T/n3.json.err")"
run_to "$T/n4.json" elbv2 CreateListener LoadBalancerArn="$lb" Protocol=TCP Port=80 \
	DefaultActions.member.1.Type=forward DefaultActions.member.1.TargetGroupArn="$tg"
jcheck "CreateListener forwards to the target group" "$T/n4.json" \
	".Listeners[0].DefaultActions[0].TargetGroupArn == \"$tg\" and .Listeners[0].Port == \"80\""
run_to "$T/n5.json" elbv2 DescribeTargetHealth TargetGroupArn="$tg"
jcheck "DescribeTargetHealth shows the instance" "$T/n5.json" \
	".TargetHealthDescriptions[0].Target.Id == \"$iid\" and .TargetHealthDescriptions[0].TargetHealth.State == \"healthy\""
run_to "$T/n6.json" elbv2 DescribeLoadBalancers Names.member.1=k8s-nlb
jcheck "elbv2 DescribeLoadBalancers by name" "$T/n6.json" ".LoadBalancers[0].LoadBalancerArn == \"$lb\""
for n in 2 3; do awsc elbv2 CreateLoadBalancer Name=k8s-nlb$n Type=network Subnets.member.1="$subnet" >/dev/null; done
run_to "$T/pg.json" --paginate elbv2 DescribeLoadBalancers PageSize=1
jcheck "elbv2 pagination (Marker/NextMarker): 3 pages of 1" "$T/pg.json" \
	'length == 3 and ([.[].LoadBalancers[].LoadBalancerName] | sort == ["k8s-nlb","k8s-nlb2","k8s-nlb3"])'
run_to "$T/n7.json" elbv2 DeleteTargetGroup TargetGroupArn="$tg"
grep -q "ResourceInUse" "$T/n7.json.err" && ok "a target group in use cannot be deleted" \
	|| fail "a target group in use cannot be deleted" "rc=$RC $(cat "$T/n7.json.err")"
listener=$(jq -r '.Listeners[0].ListenerArn' "$T/n4.json" 2>/dev/null)
run_to "$T/n8.json" elbv2 DeleteListener ListenerArn="$listener"
run_to "$T/n9.json" elbv2 DeleteTargetGroup TargetGroupArn="$tg"
[ $RC -eq 0 ] && ok "DeleteTargetGroup after the listener is gone" || fail "DeleteTargetGroup after the listener is gone" "$(cat "$T/n9.json.err")"
run_to "$T/n10.json" elbv2 DeleteLoadBalancer LoadBalancerArn="$lb"
[ $RC -eq 0 ] && ok "NLB DeleteLoadBalancer" || fail "NLB DeleteLoadBalancer" "$(cat "$T/n10.json.err")"
run_to "$T/n11.json" elbv2 DescribeLoadBalancers
jcheck "the deleted NLB is gone, the two others remain" "$T/n11.json" \
	'[.LoadBalancers[].LoadBalancerName] | sort == ["k8s-nlb2","k8s-nlb3"]'

# --- Auto Scaling (Query protocol, member lists) ---
run_to "$T/a1.json" autoscaling DescribeAutoScalingInstances InstanceIds.member.1="$iid"
jcheck "autoscaling DescribeAutoScalingInstances (not in a group: empty)" "$T/a1.json" \
	'(.AutoScalingInstances // "") | length == 0'

t_summary
