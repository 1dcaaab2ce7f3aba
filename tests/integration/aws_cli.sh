#!/usr/bin/env bash
# tests: product
# The `aws-k8s aws` subcommand's interface: help, usage errors and exit codes, endpoint
# resolution from the environment (no server needed except where noted).
. "$(dirname "$0")/aws_lib.sh"
T=$T_TMP
export AWS_REGION=eu-west-1 AWS_ACCESS_KEY_ID=AKIDCLI AWS_SECRET_ACCESS_KEY=cli-secret
export AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=$T/none AWS_SHARED_CREDENTIALS_FILE=$T/none
unset AWS_ENDPOINT_URL AWS_PROFILE

"$AWS_K8S" aws --help >"$T/help.txt" 2>&1
[ $? -eq 0 ] && grep -q -- "--endpoint-url" "$T/help.txt" && grep -q "Filter.1.Name=instance-state-name" "$T/help.txt" \
	&& ok "aws --help exits 0 with flags and examples" || fail "aws --help exits 0 with flags and examples"
"$AWS_K8S" help aws >/dev/null 2>&1 && ok "aws-k8s help aws" || fail "aws-k8s help aws"
"$AWS_K8S" --help | grep -q "^  aws " && ok "aws is in the command list" || fail "aws is in the command list"
for args in "" "s3 ListBuckets" "ec2" "ec2 DescribeInstances NoEquals" "--nosuchflag ec2 X" \
	"sqs SendMessage {broken" "imds" "batch nosuchkind i-1" "endpoint nosuch"; do
	# shellcheck disable=SC2086
	"$AWS_K8S" aws $args >/dev/null 2>"$T/u.err"
	rc=$?
	[ $rc -eq 2 ] && [ -s "$T/u.err" ] && ok "usage error exits 2 with a message: aws $args" \
		|| fail "usage error exits 2 with a message: aws $args" "rc=$rc"
done
"$AWS_K8S" aws --region=Not_A_Region ec2 DescribeRegions >/dev/null 2>&1
[ $? -eq 2 ] && ok "a bad region is a usage error" || fail "a bad region is a usage error"

"$AWS_K8S" aws endpoint ec2 >"$T/e1.json" 2>&1
jcheck "standard endpoint for the region" "$T/e1.json" '.url == "https://ec2.eu-west-1.amazonaws.com" and .custom == false'
"$AWS_K8S" aws --region cn-north-1 endpoint elbv2 >"$T/e2.json" 2>&1
jcheck "aws-cn partition" "$T/e2.json" '.url == "https://elasticloadbalancing.cn-north-1.amazonaws.com.cn" and .signingName == "elasticloadbalancing"'
AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2=http://127.0.0.1:1 AWS_ENDPOINT_URL=http://127.0.0.1:2 \
	"$AWS_K8S" aws endpoint elbv2 >"$T/e3.json" 2>&1
jcheck "AWS_ENDPOINT_URL_<SERVICE> wins over AWS_ENDPOINT_URL" "$T/e3.json" '.url == "http://127.0.0.1:1" and .custom'
AWS_ENDPOINT_URL=http://127.0.0.1:2 "$AWS_K8S" aws endpoint events >"$T/e4.json" 2>&1
jcheck "AWS_ENDPOINT_URL for the other services" "$T/e4.json" '.url == "http://127.0.0.1:2"'
AWS_ENDPOINT_URL_EC2=http://127.0.0.1:1 "$AWS_K8S" aws --endpoint-url http://127.0.0.1:3 endpoint ec2 >"$T/e5.json" 2>&1
jcheck "--endpoint-url wins over the environment" "$T/e5.json" '.url == "http://127.0.0.1:3"'

# nothing listens there: a transport error, retried, then exit 1 with a clear message
port=$(free_port)
"$AWS_K8S" aws --endpoint-url "http://127.0.0.1:$port" --retry-base-delay=1ms ec2 DescribeRegions >/dev/null 2>"$T/refused.err"
[ $? -eq 1 ] && grep -q "DescribeRegions http://127.0.0.1:$port" "$T/refused.err" && ok "connection refused: exit 1 naming the endpoint" \
	|| fail "connection refused: exit 1 naming the endpoint" "$(cat "$T/refused.err")"
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY "$AWS_K8S" aws --endpoint-url "http://127.0.0.1:$port" ec2 DescribeRegions >/dev/null 2>"$T/nokey.err"
[ $? -eq 1 ] && grep -q "no usable AWS credentials: none configured" "$T/nokey.err" && ok "no credentials anywhere: exit 1 with a clear message" \
	|| fail "no credentials anywhere: exit 1 with a clear message" "$(cat "$T/nokey.err")"

t_summary
