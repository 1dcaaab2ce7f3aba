#!/usr/bin/env bash
# tests: product
# The metadata client through `aws-k8s aws imds` against the metadata fake (filled from a moto
# instance): IMDSv2 tokens, the helpers, one token for many reads, a new token once after a
# 401, the IMDSv1 fallback, retries on 5xx, short timeouts, AWS_EC2_METADATA_DISABLED, and the
# region taken from the metadata service.
. "$(dirname "$0")/aws_lib.sh"

moto_start || { fail "moto starts"; t_summary; }
T=$T_TMP
iid=$(moto_py 'print(run_instance(InstanceType="m5.large", tags={"Name": "node-1"},
      Placement={"AvailabilityZone": "us-east-1b"}))')
imds_start --require-token --from-moto "$MOTO_URL" --instance-id "$iid" || { fail "metadata fake starts"; t_summary; }
export AWS_EC2_METADATA_SERVICE_ENDPOINT=$IMDS_URL AWS_EC2_METADATA_DISABLED=false
reqs() { tb_json "$IMDS_URL/_control/requests" | jq -r "$1"; }
rst() { tb_post "$IMDS_URL/_control/reset" '{}' >/dev/null; }

out=$("$AWS_K8S" aws imds get meta-data/instance-id 2>&1)
[ "$out" = "$iid" ] && ok "imds get meta-data/instance-id (IMDSv2 required)" || fail "imds get meta-data/instance-id (IMDSv2 required)" "$out"
[ "$(reqs .tokens_issued)" = 1 ] && [ "$(reqs .unauthorized)" = 0 ] && ok "one token, no 401" || fail "one token, no 401" "$(reqs -c .)"
for h in instance-type:m5.large zone:us-east-1b region:us-east-1; do
	out=$("$AWS_K8S" aws imds "${h%%:*}" 2>&1)
	[ "$out" = "${h#*:}" ] && ok "imds ${h%%:*} = ${h#*:}" || fail "imds ${h%%:*} = ${h#*:}" "$out"
done
out=$("$AWS_K8S" aws imds zone-id 2>&1)
case $out in use1-az*) ok "imds zone-id" ;; *) fail "imds zone-id" "$out" ;; esac
out=$("$AWS_K8S" aws imds local-hostname 2>&1)
case $out in ip-*.ec2.internal) ok "imds local-hostname" ;; *) fail "imds local-hostname" "$out" ;; esac
"$AWS_K8S" aws imds identity >"$T/id.json" 2>&1
jcheck "imds identity: the document of the moto instance" "$T/id.json" \
	".instanceId == \"$iid\" and .region == \"us-east-1\" and .availabilityZone == \"us-east-1b\" and .accountId == \"123456789012\""
"$AWS_K8S" aws imds macs >"$T/macs.txt" 2>&1
grep -Eq '^([0-9a-f]{2}:){5}[0-9a-f]{2} device-number=0 interface-id=eni-' "$T/macs.txt" && ok "imds macs with device number and interface" \
	|| fail "imds macs with device number and interface" "$(cat "$T/macs.txt")"

rst
"$AWS_K8S" aws imds macs >/dev/null 2>&1
[ "$(reqs .tokens_issued)" = 1 ] && [ "$(reqs .with_token)" -ge 3 ] && ok "one token serves every read of a process" \
	|| fail "one token serves every read of a process" "$(reqs -c '{tokens_issued,with_token}')"

# a 401 (token expired on the server) gets a new token, once
rst
tb_post "$IMDS_URL/_control/faults" '{"path":"/latest/meta-data/instance-id","status":401,"count":1}' >/dev/null
out=$("$AWS_K8S" aws imds instance-id 2>&1)
[ "$out" = "$iid" ] && [ "$(reqs .tokens_issued)" = 2 ] && ok "a 401 fetches a new token and the read succeeds" \
	|| fail "a 401 fetches a new token and the read succeeds" "$out $(reqs -c '{tokens_issued}')"
rst
tb_post "$IMDS_URL/_control/faults" '{"path":"/latest/meta-data/instance-id","status":401}' >/dev/null
"$AWS_K8S" aws imds instance-id >/dev/null 2>"$T/401.err"
rc=$?
[ $rc -eq 1 ] && [ "$(reqs '.by_path["/latest/meta-data/instance-id"]')" = 2 ] && ok "a second 401 is an error, not a loop" \
	|| fail "a second 401 is an error, not a loop" "rc=$rc $(reqs -c .by_path)"
tb_delete "$IMDS_URL/_control/faults" >/dev/null

# IMDSv1 fallback when the token PUT is refused (403/404/405)
tb_post "$IMDS_URL/_control/settings" '{"require_token": false}' >/dev/null
rst
tb_post "$IMDS_URL/_control/faults" '{"path":"/latest/api/token","method":"PUT","status":404}' >/dev/null
out=$("$AWS_K8S" aws imds instance-id 2>&1)
[ "$out" = "$iid" ] && [ "$(reqs .without_token)" -ge 1 ] && ok "IMDSv1 fallback after the token PUT gets 404" \
	|| fail "IMDSv1 fallback after the token PUT gets 404" "$out $(reqs -c '{without_token,by_status}')"
tb_delete "$IMDS_URL/_control/faults" >/dev/null
tb_post "$IMDS_URL/_control/settings" '{"require_token": true}' >/dev/null

# 5xx is retried; 404 is not
rst
tb_post "$IMDS_URL/_control/faults" '{"path":"/latest/meta-data/instance-type","status":503,"count":2}' >/dev/null
out=$("$AWS_K8S" aws imds instance-type 2>&1)
[ "$out" = m5.large ] && ok "two 503s, then the value" || fail "two 503s, then the value" "$out"
rst
"$AWS_K8S" aws imds get meta-data/spot/instance-action >/dev/null 2>"$T/404.err"
rc=$?
[ $rc -eq 1 ] && grep -q "not found (404)" "$T/404.err" && [ "$(reqs '.by_path["/latest/meta-data/spot/instance-action"]')" = 1 ] \
	&& ok "a 404 is reported at once (no retry)" || fail "a 404 is reported at once (no retry)" "rc=$rc $(cat "$T/404.err")"
tb_post "$IMDS_URL/_control/spot" '{"action":"terminate","time":"2030-01-02T03:04:05Z"}' >/dev/null
"$AWS_K8S" aws imds get meta-data/spot/instance-action >"$T/spot.json" 2>&1
jcheck "a scripted spot/instance-action is read" "$T/spot.json" '.action == "terminate" and .time == "2030-01-02T03:04:05Z"'

# short timeouts: a stalled service fails in about 3 x 1 s, not in minutes
rst
tb_post "$IMDS_URL/_control/faults" '{"path":"/latest/meta-data/instance-id","delay":20}' >/dev/null
start=$(date +%s)
"$AWS_K8S" aws imds instance-id >/dev/null 2>"$T/slow.err"
rc=$?
secs=$(($(date +%s) - start))
[ $rc -eq 1 ] && [ $secs -le 6 ] && ok "a stalled metadata service times out ($secs s, 3 attempts of 1 s)" \
	|| fail "a stalled metadata service times out" "rc=$rc ${secs}s $(cat "$T/slow.err")"
tb_delete "$IMDS_URL/_control/faults" >/dev/null
rst
tb_post "$IMDS_URL/_control/faults" '{"path":"/latest/api/token","method":"PUT","delay":20}' >/dev/null
start=$(date +%s)
"$AWS_K8S" aws imds instance-id >/dev/null 2>"$T/slowtok.err"
rc=$?
secs=$(($(date +%s) - start))
[ $rc -eq 1 ] && [ $secs -le 6 ] && [ "$(reqs '.by_method.PUT')" = 3 ] \
	&& ok "a stalled token request: 3 attempts of 1 s, then an error ($secs s)" \
	|| fail "a stalled token request: 3 attempts of 1 s, then an error" "rc=$rc ${secs}s $(reqs -c .by_method)"
tb_delete "$IMDS_URL/_control/faults" >/dev/null

AWS_EC2_METADATA_DISABLED=true "$AWS_K8S" aws imds instance-id >/dev/null 2>"$T/dis.err"
[ $? -eq 1 ] && grep -q "disabled" "$T/dis.err" && ok "AWS_EC2_METADATA_DISABLED=true turns the client off" \
	|| fail "AWS_EC2_METADATA_DISABLED=true turns the client off" "$(cat "$T/dis.err")"

# the region from the metadata service when nothing else gives one
env -u AWS_REGION -u AWS_DEFAULT_REGION "$AWS_K8S" aws endpoint ec2 >"$T/ep.json" 2>&1
jcheck "the region comes from the metadata service when not configured" "$T/ep.json" '.signingRegion == "us-east-1"'
env -u AWS_REGION -u AWS_DEFAULT_REGION AWS_EC2_METADATA_DISABLED=true "$AWS_K8S" aws ec2 DescribeRegions >/dev/null 2>"$T/noreg.err"
[ $? -eq 1 ] && grep -q "region is not known" "$T/noreg.err" && ok "no region anywhere: a clear error" \
	|| fail "no region anywhere: a clear error" "$(cat "$T/noreg.err")"

t_summary
