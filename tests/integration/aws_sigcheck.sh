#!/usr/bin/env bash
# tests: product
# Query requests against moto with signature checking on (INITIAL_NO_AUTH_ACTION_COUNT: after
# the first calls every request must be signed by a key moto knows; moto re-encodes the parsed
# form as botocore does and checks the signature over that). Issue 12: a filter value holding a
# space was refused with AuthFailure because the body said %20 where botocore says '+'. Filter
# names and values with spaces, '+', '/', '~', '*' and UTF-8, and a write (CreateTags) with
# spaces, must be accepted and match what they should.
. "$(dirname "$0")/aws_lib.sh"

# the three free calls create the IAM user, its inline policy and its access key
export INITIAL_NO_AUTH_ACTION_COUNT=3
moto_start || { fail "moto starts"; t_summary; }
unset INITIAL_NO_AUTH_ACTION_COUNT
T=$T_TMP

keys=$(moto_py '
iam.create_user(UserName="sigcheck")
iam.put_user_policy(UserName="sigcheck", PolicyName="all", PolicyDocument=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
k = iam.create_access_key(UserName="sigcheck")["AccessKey"]
print(k["AccessKeyId"], k["SecretAccessKey"])' 2>"$T/keys.err")
read -r AK SK <<<"$keys"
if [ -n "${SK:-}" ]; then
	peer ok "an IAM user with an access key is created in the free calls"
else
	peer fail "an IAM user with an access key is created in the free calls" "$(tail -n 3 "$T/keys.err")"
	t_summary
fi
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK

ids=$(moto_py '
print(" ".join([run_instance(tags={"Name": "a b"}), run_instance(tags={"Name": "a+b"}),
                run_instance(tags={"Name": "ab"}),
                run_instance(tags={"Name": "x+y/z~ z\u00fcrich \u20ac"}),
                run_instance(tags={"odd key/+": "v w"})]))' 2>"$T/ids.err")
read -r -a IDS <<<"$ids"
[ ${#IDS[@]} -eq 5 ] && peer ok "five tagged instances created with the signed key" ||
	peer fail "five tagged instances created with the signed key" "$ids $(tail -n 3 "$T/ids.err")"

# the bed: moto checks signatures (a wrong secret is refused) and accepts botocore's request
# for the filter with a space
AWS_SECRET_ACCESS_KEY=wrong-secret awsc ec2 DescribeInstances >"$T/wrong.json" 2>"$T/wrong.err"
[ $? -eq 1 ] && grep -q AuthFailure "$T/wrong.err" && peer ok "moto refuses a wrong signature" ||
	peer fail "moto refuses a wrong signature" "$(cat "$T/wrong.err")"
got=$(moto_py '
r = ec2.describe_instances(Filters=[{"Name": "tag:Name", "Values": ["a b"]}])
print(" ".join(i["InstanceId"] for x in r["Reservations"] for i in x["Instances"]))' 2>&1)
[ "$got" = "${IDS[0]}" ] && peer ok "botocore's filter with a space is accepted by moto" ||
	peer fail "botocore's filter with a space is accepted by moto" "$got"

# ids_are FILE ID...: the instances of a DescribeInstances reply, sorted, are exactly these
ids_are() {
	local file=$1 want
	shift
	want=$(printf '%s\n' "$@" | jq -R . | jq -sc 'sort')
	jq -e --argjson w "$want" '[.reservationSet[]?.instancesSet[].instanceId] | sort == $w' "$file" >/dev/null
}

run_to "$T/gci.json" sts GetCallerIdentity
[ "$RC" -eq 0 ] && ok "a signed request without special characters is accepted" ||
	fail "a signed request without special characters is accepted" "$(cat "$T/gci.json.err")"

run_to "$T/space.json" ec2 DescribeInstances Filter.1.Name=tag:Name 'Filter.1.Value.1=a b'
[ "$RC" -eq 0 ] && ids_are "$T/space.json" "${IDS[0]}" &&
	ok "filter value with a space is accepted and matches only the instance tagged 'a b'" ||
	fail "filter value with a space is accepted and matches only the instance tagged 'a b'" \
		"rc=$RC $(head -c 300 "$T/space.json") $(cat "$T/space.json.err")"

run_to "$T/plus.json" ec2 DescribeInstances Filter.1.Name=tag:Name 'Filter.1.Value.1=a+b' \
	'Filter.1.Value.2=ab'
[ "$RC" -eq 0 ] && ids_are "$T/plus.json" "${IDS[1]}" "${IDS[2]}" &&
	ok "a '+' in a filter value is a plus, not a space" ||
	fail "a '+' in a filter value is a plus, not a space" \
		"rc=$RC $(head -c 300 "$T/plus.json") $(cat "$T/plus.json.err")"

run_to "$T/utf8.json" ec2 DescribeInstances Filter.1.Name=tag:Name \
	'Filter.1.Value.1=x+y/z~ z*rich €'
[ "$RC" -eq 0 ] && ids_are "$T/utf8.json" "${IDS[3]}" &&
	ok "filter value with '+', '/', '~', a space, a '*' wildcard and UTF-8 is accepted and matches" ||
	fail "filter value with '+', '/', '~', a space, a '*' wildcard and UTF-8 is accepted and matches" \
		"rc=$RC $(head -c 300 "$T/utf8.json") $(cat "$T/utf8.json.err")"

run_to "$T/key.json" ec2 DescribeInstances 'Filter.1.Name=tag:odd key/+' 'Filter.1.Value.1=v w'
[ "$RC" -eq 0 ] && ids_are "$T/key.json" "${IDS[4]}" &&
	ok "filter name with a space, '/' and '+' is accepted and matches" ||
	fail "filter name with a space, '/' and '+' is accepted and matches" \
		"rc=$RC $(head -c 300 "$T/key.json") $(cat "$T/key.json.err")"

run_to "$T/tags.json" ec2 CreateTags "ResourceId.1=${IDS[2]}" 'Tag.1.Key=team name' \
	'Tag.1.Value=blue green + ü'
got=$(moto_py '
r = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [sys.argv[1]]}])
print(json.dumps(sorted([t["Key"], t["Value"]] for t in r["Tags"]), ensure_ascii=False))' \
	"${IDS[2]}" 2>&1)
[ "$RC" -eq 0 ] && [ "$got" = '[["Name", "ab"], ["team name", "blue green + ü"]]' ] &&
	ok "CreateTags with spaces, '+' and UTF-8 is accepted and stores the exact text" ||
	fail "CreateTags with spaces, '+' and UTF-8 is accepted and stores the exact text" \
		"rc=$RC $(cat "$T/tags.json.err") tags: $got"

t_summary
