#!/usr/bin/env bash
# tests: peers
# sanitizer-pass: skip (tests the Python fakes only; aws-k8s is not run)
# Checks the AWS-side test bed from the outside: moto (moto.sh), the instance metadata
# fake (tests/imds-fake) and the fault-injecting proxy (tests/fault-proxy), with curl,
# boto3/botocore and awscli. No aws-k8s binary needed.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"

code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }
# expect NAME WANT GOT
expect() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$3', want '$2'"; fi; }
gone_after_term() { # PID: SIGTERM, then it must be gone within 3 s
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 1
	for ((i = 0; i < 60; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.05
	done
	return 1
}

# ---------------------------------------------------------------------------------------
# moto
# ---------------------------------------------------------------------------------------
if ! moto_start; then
	fail "moto starts"
	t_summary
fi
expect "moto answers on MOTO_URL" 200 "$(code "$MOTO_URL/moto-api/")"
expect "AWS_ENDPOINT_URL points at moto" "$MOTO_URL" "$AWS_ENDPOINT_URL"
expect "AWS_EC2_METADATA_DISABLED defaults to true" true "$AWS_EC2_METADATA_DISABLED"

cidr=$(aws --endpoint-url "$MOTO_URL" ec2 describe-vpcs --filters Name=is-default,Values=true \
	--query 'Vpcs[0].CidrBlock' --output text 2>&1)
expect "awscli against moto sees the default VPC" 172.31.0.0/16 "$cidr"

sg=$(moto_py 'print(ec2.create_security_group(GroupName="tb-reset", Description="x")["GroupId"])')
moto_reset
n=$(moto_py 'print(len(ec2.describe_security_groups(Filters=[{"Name":"group-name","Values":["tb-reset"]}])["SecurityGroups"]))')
if [ -n "$sg" ] && [ "$n" = 0 ]; then ok "moto_reset wipes state ($sg gone)"; else fail "moto_reset wipes state" "sg=$sg left=$n"; fi

# An instance with two ENIs, tags, an instance profile and metadata tags enabled.
iid=$(moto_py '
iam.create_role(RoleName="tb-node-role", AssumeRolePolicyDocument="{}")
iam.create_instance_profile(InstanceProfileName="tb-node-profile")
iam.add_role_to_instance_profile(InstanceProfileName="tb-node-profile", RoleName="tb-node-role")
sub = ec2.describe_subnets(Filters=[{"Name": "availability-zone", "Values": ["us-east-1b"]}])["Subnets"][0]
iid = run_instance(InstanceType="m5.large", SubnetId=sub["SubnetId"],
                   IamInstanceProfile={"Name": "tb-node-profile"},
                   MetadataOptions={"InstanceMetadataTags": "enabled"},
                   tags={"Name": "tb-node", "kubernetes.io/cluster/tb": "owned"})
eni = ec2.create_network_interface(SubnetId=sub["SubnetId"], SecondaryPrivateIpAddressCount=1)["NetworkInterface"]
ec2.attach_network_interface(NetworkInterfaceId=eni["NetworkInterfaceId"], InstanceId=iid, DeviceIndex=1)
print(iid)')
if [[ $iid == i-* ]]; then ok "moto_py creates an instance ($iid)"; else fail "moto_py creates an instance" "$iid"; fi

# ---------------------------------------------------------------------------------------
# instance metadata fake
# ---------------------------------------------------------------------------------------
if ! imds_start --require-token --from-moto "$MOTO_URL" --instance-id "$iid"; then
	fail "imds fake starts from moto"
	t_summary
fi
ok "imds fake starts from moto instance"
I=$IMDS_URL
MD=$I/latest/meta-data

expect "IMDS: GET without token is 401 when tokens are required" 401 "$(code "$MD/instance-id")"
expect "IMDS: token PUT without TTL header is 400" 400 "$(code -X PUT "$I/latest/api/token")"
expect "IMDS: token TTL 0 is 400" 400 "$(code -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 0' "$I/latest/api/token")"
expect "IMDS: token TTL 21601 is 400" 400 "$(code -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 21601' "$I/latest/api/token")"
expect "IMDS: token TTL 'abc' is 400" 400 "$(code -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: abc' "$I/latest/api/token")"
expect "IMDS: token PUT with X-Forwarded-For is 403" 403 "$(code -X PUT -H 'X-Forwarded-For: 10.0.0.1' -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$I/latest/api/token")"
expect "IMDS: GET on the token path is 405" 405 "$(code "$I/latest/api/token")"

hdr=$T_TMP/tokhdr
TOK=$(curl -s -D "$hdr" -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 21600' "$I/latest/api/token")
ttlh=$(tr -d '\r' <"$hdr" | awk -F': ' 'tolower($1)=="x-aws-ec2-metadata-token-ttl-seconds"{print $2}')
if [ ${#TOK} -ge 40 ] && [ "$ttlh" = 21600 ]; then ok "IMDS: token PUT returns a token and its TTL header"; else fail "IMDS: token PUT" "token='$TOK' ttl='$ttlh'"; fi
H="X-aws-ec2-metadata-token: $TOK"
md() { curl -s --max-time 5 -H "$H" "$MD/$1"; }
expect "IMDS: instance-id with a token is the moto instance" "$iid" "$(md instance-id)"
ttl2=$(curl -s -D - -o /dev/null -H "$H" "$MD/instance-id" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-aws-ec2-metadata-token-ttl-seconds"{print $2}')
if [ -n "$ttl2" ] && [ "$ttl2" -le 21600 ] && [ "$ttl2" -ge 21590 ]; then ok "IMDS: GET answers carry the token's remaining TTL ($ttl2)"; else fail "IMDS: remaining TTL header" "$ttl2"; fi
expect "IMDS: a made-up token is 401" 401 "$(code -H 'X-aws-ec2-metadata-token: AQAEAbogus==' "$MD/instance-id")"
short=$(curl -s -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 1' "$I/latest/api/token")
c1=$(code -H "X-aws-ec2-metadata-token: $short" "$MD/instance-id")
sleep 1.1
c2=$(code -H "X-aws-ec2-metadata-token: $short" "$MD/instance-id")
expect "IMDS: a 1 s token works, then expires (401)" "200 401" "$c1 $c2"

want_root="ami-id
ami-launch-index
ami-manifest-path
block-device-mapping/
events/
hostname
iam/
instance-action
instance-id
instance-life-cycle
instance-type
local-hostname
local-ipv4
mac
network/
placement/
profile
public-hostname
public-ipv4
reservation-id
security-groups
services/
tags/"
expect "IMDS: /latest/meta-data/ listing (dirs end in /, one per line)" "$want_root" "$(md '')"
expect "IMDS: /latest/meta-data without slash lists too" "$want_root" "$(curl -s -H "$H" "$I/latest/meta-data")"
expect "IMDS: /latest/ listing" "$(printf 'dynamic/\nmeta-data/')" "$(curl -s -H "$H" "$I/latest/")"
expect "IMDS: placement/ listing" "$(printf 'availability-zone\navailability-zone-id\nregion')" "$(md placement/)"
expect "IMDS: unknown path is 404" 404 "$(code -H "$H" "$MD/no-such-thing")"
expect "IMDS: unknown version is 404" 404 "$(code -H "$H" "$I/1999-01-01/meta-data/")"
expect "IMDS: user-data absent is 404" 404 "$(code -H "$H" "$I/latest/user-data")"
expect "IMDS: spot/instance-action is 404 before it is scripted" 404 "$(code -H "$H" "$MD/spot/instance-action")"
expect "IMDS: events/recommendations/rebalance is 404 before it is scripted" 404 "$(code -H "$H" "$MD/events/recommendations/rebalance")"
expect "IMDS: autoscaling/target-lifecycle-state is 404 outside an ASG" 404 "$(code -H "$H" "$MD/autoscaling/target-lifecycle-state")"
expect "IMDS: events/maintenance/scheduled is [] with no events" "[]" "$(md events/maintenance/scheduled)"

# Everything the fake serves must match moto's view of the instance.
moto_py_checks '
import urllib.request
iid, url, tok = sys.argv[1:4]
def md(p):
    r = urllib.request.Request(url + "/latest/" + p, headers={"X-aws-ec2-metadata-token": tok})
    return urllib.request.urlopen(r, timeout=5).read().decode()
inst = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
az = inst["Placement"]["AvailabilityZone"]
zid = ec2.describe_availability_zones(ZoneNames=[az])["AvailabilityZones"][0]["ZoneId"]
eq("IMDS=moto: instance-type", md("meta-data/instance-type"), "m5.large")
eq("IMDS=moto: ami-id", md("meta-data/ami-id"), inst["ImageId"])
eq("IMDS=moto: local-ipv4", md("meta-data/local-ipv4"), inst["PrivateIpAddress"])
eq("IMDS=moto: local-hostname and hostname", (md("meta-data/local-hostname"), md("meta-data/hostname")), (inst["PrivateDnsName"],) * 2)
eq("IMDS=moto: public-ipv4", md("meta-data/public-ipv4"), inst["PublicIpAddress"])
eq("IMDS=moto: public-hostname", md("meta-data/public-hostname"), inst["PublicDnsName"])
eq("IMDS=moto: placement/availability-zone", md("meta-data/placement/availability-zone"), "us-east-1b")
eq("IMDS=moto: placement/availability-zone-id", md("meta-data/placement/availability-zone-id"), zid)
eq("IMDS=moto: placement/region", md("meta-data/placement/region"), "us-east-1")
enis = sorted(inst["NetworkInterfaces"], key=lambda e: e["Attachment"]["DeviceIndex"])
eq("IMDS=moto: mac is the primary ENI", md("meta-data/mac"), enis[0]["MacAddress"])
eq("IMDS=moto: network/interfaces/macs/ lists both ENIs", md("meta-data/network/interfaces/macs/"),
   "\n".join(sorted(e["MacAddress"] + "/" for e in enis)))
sub = ec2.describe_subnets(SubnetIds=[enis[0]["SubnetId"]])["Subnets"][0]
vpc = ec2.describe_vpcs(VpcIds=[enis[0]["VpcId"]])["Vpcs"][0]
for e in enis:
    base = "meta-data/network/interfaces/macs/%s/" % e["MacAddress"]
    ips = [p["PrivateIpAddress"] for p in sorted(e["PrivateIpAddresses"], key=lambda p: not p["Primary"])]
    got = {k: md(base + k) for k in ("device-number", "interface-id", "local-ipv4s", "subnet-id", "vpc-id",
                                      "vpc-ipv4-cidr-block", "vpc-ipv4-cidr-blocks", "subnet-ipv4-cidr-block",
                                      "security-group-ids", "mac", "owner-id")}
    want = {"device-number": str(e["Attachment"]["DeviceIndex"]), "interface-id": e["NetworkInterfaceId"],
            "local-ipv4s": "\n".join(ips), "subnet-id": e["SubnetId"], "vpc-id": e["VpcId"],
            "vpc-ipv4-cidr-block": vpc["CidrBlock"], "vpc-ipv4-cidr-blocks": vpc["CidrBlock"],
            "subnet-ipv4-cidr-block": sub["CidrBlock"],
            "security-group-ids": "\n".join(g["GroupId"] for g in e["Groups"]), "mac": e["MacAddress"],
            "owner-id": "123456789012"}
    eq("IMDS=moto: ENI device %s fields" % e["Attachment"]["DeviceIndex"], got, want)
eq("IMDS=moto: second ENI has 2 private IPs", len(md("meta-data/network/interfaces/macs/%s/local-ipv4s" % enis[1]["MacAddress"]).split("\n")), 2)
pub = enis[0]["Association"]["PublicIp"]
eq("IMDS=moto: primary ENI public-ipv4s", md("meta-data/network/interfaces/macs/%s/public-ipv4s" % enis[0]["MacAddress"]), pub)
doc = json.loads(md("dynamic/instance-identity/document"))
eq("IMDS=moto: identity document",
   {k: doc.get(k) for k in ("accountId", "architecture", "availabilityZone", "imageId", "instanceId", "instanceType", "privateIp", "region", "version")},
   {"accountId": "123456789012", "architecture": inst["Architecture"], "availabilityZone": "us-east-1b",
    "imageId": inst["ImageId"], "instanceId": iid, "instanceType": "m5.large",
    "privateIp": inst["PrivateIpAddress"], "region": "us-east-1", "version": "2017-09-30"})
true_("IMDS: identity document uses the \" : \" pretty layout", "\n  \"instanceId\" : \"%s\"," % iid in md("dynamic/instance-identity/document"))
eq("IMDS: instance-identity/ listing", md("dynamic/instance-identity/"), "document\npkcs7\nrsa2048\nsignature")
eq("IMDS=moto: tags/instance/ lists the tags", md("meta-data/tags/instance/"), "Name\nkubernetes.io/cluster/tb")
eq("IMDS=moto: tags/instance/Name", md("meta-data/tags/instance/Name"), "tb-node")
eq("IMDS=moto: iam/security-credentials/ lists the role", md("meta-data/iam/security-credentials/"), "tb-node-role")
info = json.loads(md("meta-data/iam/info"))
eq("IMDS=moto: iam/info", (info["Code"], info["InstanceProfileArn"], list(info)),
   ("Success", inst["IamInstanceProfile"]["Arn"], ["Code", "LastUpdated", "InstanceProfileArn", "InstanceProfileId"]))
raw = md("meta-data/iam/security-credentials/tb-node-role")
cr = json.loads(raw)
eq("IMDS: credential JSON keys in AWS order", list(cr), ["Code", "LastUpdated", "Type", "AccessKeyId", "SecretAccessKey", "Token", "Expiration"])
import re, datetime
iso = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
exp = datetime.datetime.strptime(cr["Expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
left = (exp - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
true_("IMDS: credential values (Success, AWS-HMAC, ASIA key, RFC3339 times, ~6 h left)",
      cr["Code"] == "Success" and cr["Type"] == "AWS-HMAC" and cr["AccessKeyId"].startswith("ASIA")
      and len(cr["SecretAccessKey"]) == 40 and len(cr["Token"]) > 40 and iso.match(cr["LastUpdated"])
      and iso.match(cr["Expiration"]) and 21500 < left <= 21600, raw)
eq("IMDS: block-device-mapping/ has ami and root", md("meta-data/block-device-mapping/"), "ami\nroot")
eq("IMDS: block-device-mapping/root is the root device", md("meta-data/block-device-mapping/root"), inst["RootDeviceName"])
# botocore itself (IMDSv2 token flow) against the fake
from botocore.utils import InstanceMetadataFetcher, InstanceMetadataRegionFetcher
f = InstanceMetadataFetcher(timeout=2, num_attempts=1, base_url=url, env={})
c = f.retrieve_iam_role_credentials()
eq("IMDS: botocore fetches the role credentials", (c.get("role_name"), c.get("access_key")), ("tb-node-role", cr["AccessKeyId"]))
eq("IMDS: botocore reads the region", InstanceMetadataRegionFetcher(timeout=2, num_attempts=1, base_url=url, env={}).retrieve_region(), "us-east-1")
' "$iid" "$I" "$TOK"

# Scripted answers. The exact text NTH parses.
post() { curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary "$2" "$I/_control/$1"; }
expect "IMDS control: set spot instance-action" 200 "$(post spot '{"action":"terminate","time":"2030-01-02T03:04:05Z"}')"
expect "IMDS: spot/instance-action JSON" '{"action": "terminate", "time": "2030-01-02T03:04:05Z"}' "$(md spot/instance-action)"
expect "IMDS: spot/termination-time" 2030-01-02T03:04:05Z "$(md spot/termination-time)"
expect "IMDS: spot/ appears in the listing" "$(printf 'instance-action\ntermination-time')" "$(md spot/)"
post spot '{"action":"stop","in":120}' >/dev/null
sa=$(md spot/instance-action)
if python3 -c '
import json,sys,datetime
d=json.loads(sys.argv[1]); t=datetime.datetime.strptime(d["time"],"%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
left=(t-datetime.datetime.now(datetime.timezone.utc)).total_seconds()
sys.exit(not (d["action"]=="stop" and 117<left<=121 and list(d)==["action","time"]))' "$sa"; then
	ok "IMDS: spot action with relative time (stop, now+120 s)"
else fail "IMDS: spot action with relative time" "$sa"; fi
expect "IMDS: the scripted spot time is stable across reads" "$sa" "$(md spot/instance-action)"
curl -s -X DELETE "$I/_control/spot" >/dev/null
expect "IMDS: spot/instance-action is 404 again after DELETE" 404 "$(code -H "$H" "$MD/spot/instance-action")"

post events '[{"Code":"system-reboot","Description":"scheduled reboot","EventId":"instance-event-0d59937288b749b32","NotBefore":"21 Jan 2019 09:00:43 GMT","NotAfter":"21 Jan 2019 09:17:23 GMT","NotBeforeDeadline":"24 Jan 2019 09:00:43 GMT","State":"active"}]' >/dev/null
want_ev='[
  {
    "NotBefore" : "21 Jan 2019 09:00:43 GMT",
    "Code" : "system-reboot",
    "Description" : "scheduled reboot",
    "EventId" : "instance-event-0d59937288b749b32",
    "NotAfter" : "21 Jan 2019 09:17:23 GMT",
    "NotBeforeDeadline" : "24 Jan 2019 09:00:43 GMT",
    "State" : "active"
  }
]'
expect "IMDS: events/maintenance/scheduled exact AWS layout" "$want_ev" "$(md events/maintenance/scheduled)"
post events '{"events":[{"Code":"instance-stop","NotBefore":60,"State":"active"},{"Code":"instance-retirement","State":"completed"}]}' >/dev/null
ev=$(md events/maintenance/scheduled)
if python3 -c '
import json,sys,re
e=json.loads(sys.argv[1]); r=re.compile(r"^[1-9]\d? (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$")
ok=len(e)==2 and [x["Code"] for x in e]==["instance-stop","instance-retirement"] and e[1]["State"]=="completed"
ok=ok and all(r.match(x[k]) for x in e for k in ("NotBefore","NotAfter","NotBeforeDeadline")) and all(re.match(r"^instance-event-[0-9a-f]{17}$",x["EventId"]) for x in e)
ok=ok and list(e[0])==["NotBefore","Code","Description","EventId","NotAfter","NotBeforeDeadline","State"]
sys.exit(not ok)' "$ev"; then ok "IMDS: events with defaults and relative times (2 events, GMT layout)"; else fail "IMDS: events with defaults" "$ev"; fi
curl -s -X DELETE "$I/_control/events" >/dev/null
expect "IMDS: events DELETE gives []" "[]" "$(md events/maintenance/scheduled)"

post rebalance '{"noticeTime":"2030-01-02T03:04:05Z"}' >/dev/null
expect "IMDS: events/recommendations/rebalance JSON" '{"noticeTime": "2030-01-02T03:04:05Z"}' "$(md events/recommendations/rebalance)"
curl -s -X DELETE "$I/_control/rebalance" >/dev/null
expect "IMDS: rebalance 404 after DELETE" 404 "$(code -H "$H" "$MD/events/recommendations/rebalance")"

post asg '{"state":"InService"}' >/dev/null
expect "IMDS: autoscaling/target-lifecycle-state InService" InService "$(md autoscaling/target-lifecycle-state)"
post asg '{"state":"Terminated"}' >/dev/null
expect "IMDS: autoscaling/target-lifecycle-state Terminated" Terminated "$(md autoscaling/target-lifecycle-state)"
curl -s -X DELETE "$I/_control/asg" >/dev/null
post instance '{"tags":{"aws:autoscaling:groupName":"tb-asg"}}' >/dev/null
expect "IMDS: an aws:autoscaling:groupName tag gives InService" InService "$(md autoscaling/target-lifecycle-state)"
expect "IMDS: the new tag is listed in tags/instance/" tb-asg "$(md tags/instance/aws:autoscaling:groupName)"

post instance '{"instance_type":"c5.xlarge","local_ipv4":"10.9.8.7"}' >/dev/null
doc=$(curl -s -H "$H" "$I/latest/dynamic/instance-identity/document")
if [ "$(md instance-type)" = c5.xlarge ] && [ "$(md local-ipv4)" = 10.9.8.7 ] && grep -q '"instanceType" : "c5.xlarge"' <<<"$doc" && grep -q '"privateIp" : "10.9.8.7"' <<<"$doc"; then
	ok "IMDS control: instance change shows in meta-data and identity document"
else fail "IMDS control: instance change" "$(md instance-type) $doc"; fi
post instance '{"extra":{"public-ipv4":null,"custom/leaf":"v1"}}' >/dev/null
expect "IMDS control: extra paths add and remove entries" "404 v1" "$(code -H "$H" "$MD/public-ipv4") $(md custom/leaf)"

k1=$(md iam/security-credentials/tb-node-role | python3 -c 'import json,sys; print(json.load(sys.stdin)["AccessKeyId"])')
post instance '{"iam":{"credentials_ttl":1}}' >/dev/null
curl -s -X POST "$I/_control/credentials/rotate" >/dev/null
k2=$(md iam/security-credentials/tb-node-role | python3 -c 'import json,sys; print(json.load(sys.stdin)["AccessKeyId"])')
sleep 1.1
k3=$(md iam/security-credentials/tb-node-role | python3 -c 'import json,sys; print(json.load(sys.stdin)["AccessKeyId"])')
if [ -n "$k1" ] && [ "$k1" != "$k2" ] && [ "$k2" != "$k3" ]; then ok "IMDS: credentials rotate on demand and after a 1 s expiry ($k1 -> $k2 -> $k3)"; else fail "IMDS: credential rotation" "$k1 $k2 $k3"; fi

# Fault injection and counters.
curl -s -X POST "$I/_control/requests/reset" >/dev/null
post faults '{"status":503,"count":2}' >/dev/null
r="$(code -H "$H" "$MD/instance-id") $(code -H "$H" "$MD/instance-id") $(code -H "$H" "$MD/instance-id")"
expect "IMDS fault: status 503 for the first 2 calls, then normal" "503 503 200" "$r"
post faults '{"delay":2,"count":1,"path":"/latest/meta-data/instance-type"}' >/dev/null
t0=$(date +%s%N)
c=$(curl -s -o /dev/null -w '%{http_code}' --max-time 0.5 -H "$H" "$MD/instance-type"); rc=$?
t1=$(date +%s%N)
if [ $rc = 28 ] && [ $(((t1 - t0) / 1000000)) -lt 1500 ]; then ok "IMDS fault: a stall makes the client time out"; else fail "IMDS fault: stall" "rc=$rc code=$c"; fi
expect "IMDS fault: the stall rule is used up after count=1" c5.xlarge "$(md instance-type)"
post faults '{"path":"/latest/api/token","status":500}' >/dev/null
expect "IMDS fault: path-limited fault hits the token PUT only" "500 200" "$(code -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$I/latest/api/token") $(code -H "$H" "$MD/instance-id")"
curl -s -X DELETE "$I/_control/faults" >/dev/null
expect "IMDS fault: DELETE clears faults" 200 "$(code -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$I/latest/api/token")"
curl -s -X POST "$I/_control/requests/reset" >/dev/null
for _ in 1 2 3; do md placement/region >/dev/null; done
code "$MD/placement/region" >/dev/null
cnt=$(curl -s "$I/_control/requests" | python3 -c '
import json,sys; d=json.load(sys.stdin)
print(d["by_path"].get("/latest/meta-data/placement/region"), d["with_token"], d["without_token"], d["unauthorized"], d["by_status"].get("401"), d["total"])')
expect "IMDS counters: by path, with/without token, 401s" "4 3 1 1 1 4" "$cnt"
curl -s -X POST "$I/_control/settings" -d '{"require_token":false}' >/dev/null
expect "IMDS: IMDSv1 GET works once tokens are optional" "$iid" "$(curl -s "$MD/instance-id")"

# A second fake: defaults plus a config file, IMDSv1 allowed.
cat >"$T_TMP/imds.json" <<'EOF'
{"instance": {"instance_id": "i-0cfgcfgcfgcfgcfg0", "user_data": "#!/bin/sh\necho hi\n"},
 "spot": {"action": "hibernate", "time": "2031-05-06T07:08:09Z"},
 "asg_state": "InService"}
EOF
I1=$IMDS_URL P1=$IMDS_PID
if imds_start --config "$T_TMP/imds.json"; then
	r="$(curl -s "$IMDS_URL/latest/meta-data/instance-id") $(curl -s "$IMDS_URL/latest/meta-data/spot/instance-action" | tr -d ' ') $(curl -s "$IMDS_URL/latest/meta-data/autoscaling/target-lifecycle-state")"
	expect "IMDS --config: instance, spot and ASG state from the file" 'i-0cfgcfgcfgcfgcfg0 {"action":"hibernate","time":"2031-05-06T07:08:09Z"} InService' "$r"
	expect "IMDS --config: user-data" "$(printf '#!/bin/sh\necho hi')" "$(curl -s "$IMDS_URL/latest/user-data")"
	expect "IMDS defaults: iam role credentials present" imds-fake-role "$(curl -s "$IMDS_URL/latest/meta-data/iam/security-credentials/")"
	if gone_after_term "$IMDS_PID"; then ok "IMDS: SIGTERM stops the fake"; else fail "IMDS: SIGTERM stops the fake"; fi
else
	fail "IMDS --config fake starts"
fi
IMDS_URL=$I1 IMDS_PID=$P1

# ---------------------------------------------------------------------------------------
# fault proxy
# ---------------------------------------------------------------------------------------
if ! faultproxy_start "$MOTO_URL"; then
	fail "fault proxy starts"
	t_summary
fi
ok "fault proxy starts"
moto_reset
MOTO_PY_ENDPOINT=$FAULTPROXY_URL moto_py_checks '
import urllib.request, http.client, time, botocore.exceptions as bx, botocore.parsers
P = os.environ["MOTO_PY_ENDPOINT"]
def ctl(method, path, body=None):
    r = urllib.request.Request(P + "/_control/" + path, method=method,
                               data=json.dumps(body).encode() if body is not None else None,
                               headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(r, timeout=5).read())
def fault(**rule): return ctl("POST", "faults", rule)
direct = lambda n: client(n, endpoint=os.environ["MOTO_URL"])
NR = {"total_max_attempts": 1}
def err(fn):
    try:
        fn(); return None
    except bx.ClientError as e:
        return (e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"].get("Type"))

# forwarding
eq("proxy: EC2 DescribeVpcs forwarded", [v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"]], [v["VpcId"] for v in direct("ec2").describe_vpcs()["Vpcs"]])
iid = run_instance(InstanceType="m5.large", tags={"Name": "via-proxy"})
eq("proxy: EC2 RunInstances forwarded (instance visible in moto)", direct("ec2").describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]["InstanceType"], "m5.large")
elb.create_load_balancer(LoadBalancerName="tb-clb", Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 80, "InstancePort": 30080}], AvailabilityZones=["us-east-1a"])
eq("proxy: ELB classic forwarded", [l["LoadBalancerName"] for l in elb.describe_load_balancers()["LoadBalancerDescriptions"]], ["tb-clb"])
sub = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
arn = elbv2.create_load_balancer(Name="tb-nlb", Type="network", Subnets=[sub])["LoadBalancers"][0]["LoadBalancerArn"]
eq("proxy: ELBv2 forwarded", [l["LoadBalancerArn"] for l in direct("elbv2").describe_load_balancers()["LoadBalancers"]], [arn])
q = sqs.create_queue(QueueName="tb-q")["QueueUrl"]
sqs.send_message(QueueUrl=q, MessageBody="hello via proxy")
m = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=1)["Messages"]
eq("proxy: SQS (JSON protocol) send/receive forwarded", m[0]["Body"], "hello via proxy")
eq("proxy: EventBridge PutEvents forwarded", events.put_events(Entries=[{"Source": "tb", "DetailType": "t", "Detail": "{}"}])["FailedEntryCount"], 0)
eq("proxy: STS GetCallerIdentity forwarded", sts.get_caller_identity()["Account"], "123456789012")
eq("proxy: Auto Scaling forwarded", autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"], [])
c = ctl("GET", "calls")
want = {"ec2:DescribeVpcs": 1, "ec2:RunInstances": 1, "ec2:DescribeSubnets": 1, "elb:CreateLoadBalancer": 1,
        "elb:DescribeLoadBalancers": 1, "elbv2:CreateLoadBalancer": 1, "sqs:CreateQueue": 1, "sqs:SendMessage": 1,
        "sqs:ReceiveMessage": 1, "events:PutEvents": 1, "sts:GetCallerIdentity": 1,
        "autoscaling:DescribeAutoScalingGroups": 1}
eq("proxy: counts by service:action", c["counts"], want)
eq("proxy: totals (all passed and forwarded)", (c["total"], c["passed"], c["faulted"], c["forwarded"]), (12, 12, 0, 12))
eq("proxy: log names the call", {k: c["log"][-1][k] for k in ("service", "action", "region", "status", "effect")},
   {"service": "autoscaling", "action": "DescribeAutoScalingGroups", "region": "us-east-1", "status": 200, "effect": None})
ctl("POST", "calls/reset")
eq("proxy: calls/reset zeroes the counters", ctl("GET", "calls")["total"], 0)

# keep-alive: three requests on one client connection
hc = http.client.HTTPConnection("127.0.0.1", int(P.rsplit(":", 1)[1]), timeout=5)
socks, stat = [], []
for _ in range(3):
    hc.request("POST", "/", body="Action=DescribeRegions&Version=2016-11-15",
               headers={"Content-Type": "application/x-www-form-urlencoded",
                        "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=x"})
    r = hc.getresponse(); r.read(); stat.append(r.status); socks.append(id(hc.sock))
hc.close()
eq("proxy: HTTP/1.1 keep-alive (3 calls, one connection)", (stat, len(set(socks)), None in socks), ([200, 200, 200], 1, False))

# throttling, retries disabled: 3 throttled + 1 passed
ctl("POST", "calls/reset")
fault(service="ec2", action="DescribeInstances", effect="throttle", count=3)
e1 = client("ec2", retries=NR)
got = [err(lambda: e1.describe_instances(InstanceIds=[iid])) for _ in range(3)]
eq("proxy throttle EC2: RequestLimitExceeded, HTTP 503", got, [("RequestLimitExceeded", 503, None)] * 3)
eq("proxy throttle EC2: 4th call passes", e1.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]["InstanceId"], iid)
cc = ctl("GET", "calls")["calls"]["ec2:DescribeInstances"]
eq("proxy counters: 3 throttled + 1 passed", (cc["total"], cc["faulted"], cc["passed"], cc["effects"], cc["status"]),
   (4, 3, 1, {"throttle": 3}, {"503": 3, "200": 1}))
ctl("DELETE", "faults")

# retrying client recovers from throttles (botocore sees them as retryable)
ctl("POST", "calls/reset")
fault(service="ec2", action="DescribeAvailabilityZones", effect="throttle", count=2)
er = client("ec2", retries={"mode": "standard", "max_attempts": 4})
t0 = time.time()
n = len(er.describe_availability_zones()["AvailabilityZones"])
cc = ctl("GET", "calls")["calls"]["ec2:DescribeAvailabilityZones"]
eq("proxy throttle: a retrying client recovers (2 throttled, 3rd passes)", (n > 0, cc["faulted"], cc["passed"]), (True, 2, 1))
ctl("DELETE", "faults")

fault(service="elasticloadbalancing", effect="throttle", count=1)
eq("proxy throttle ELB: ErrorResponse Sender/Throttling, HTTP 400", err(lambda: client("elb", retries=NR).describe_load_balancers()), ("Throttling", 400, "Sender"))
fault(service="autoscaling", effect="throttle", count=1)
eq("proxy throttle Auto Scaling: Throttling, HTTP 400", err(lambda: client("autoscaling", retries=NR).describe_auto_scaling_groups()), ("Throttling", 400, "Sender"))
fault(service="sts", effect="throttle", count=1)
eq("proxy throttle STS: Throttling, HTTP 400", err(lambda: client("sts", retries=NR).get_caller_identity()), ("Throttling", 400, "Sender"))
fault(service="sqs", effect="throttle", count=1)
eq("proxy throttle SQS (JSON): ThrottlingException, HTTP 400", err(lambda: client("sqs", retries=NR).get_queue_url(QueueName="tb-q"))[:2], ("ThrottlingException", 400))
fault(service="events", effect="throttle", code="ThrottlingException", message="Rate exceeded", count=1)
ev_err = None
try:
    client("events", retries=NR).list_rules()
except bx.ClientError as e:
    ev_err = (e.response["Error"]["Code"], e.response["Error"]["Message"], e.response["ResponseMetadata"]["HTTPStatusCode"])
eq("proxy throttle EventBridge: {\"__type\":\"ThrottlingException\"}", ev_err, ("ThrottlingException", "Rate exceeded", 400))
fault(service="ec2", effect="throttle", code="Throttling", count=1)
eq("proxy throttle: the rule chooses the code", err(lambda: client("ec2", retries=NR).describe_vpcs())[:2], ("Throttling", 503))

# service aliases: elbv2 rule leaves classic ELB alone
fault(service="elbv2", effect="throttle", count=1)
eq("proxy: service elb passes while elbv2 is throttled", len(client("elb", retries=NR).describe_load_balancers()["LoadBalancerDescriptions"]), 1)
eq("proxy: elbv2 rule hits ELBv2", err(lambda: client("elbv2", retries=NR).describe_load_balancers())[:2], ("Throttling", 400))
ctl("DELETE", "faults")

# http 500 and a custom non-retryable error
fault(service="ec2", action="DescribeVpcs", effect="http500", count=1)
eq("proxy http500 EC2: InternalError, HTTP 500", err(lambda: client("ec2", retries=NR).describe_vpcs())[:2], ("InternalError", 500))
fault(service="elasticloadbalancing", effect="http500", count=1)
eq("proxy http500 ELB: InternalFailure, HTTP 500, Receiver", err(lambda: client("elb", retries=NR).describe_load_balancers()), ("InternalFailure", 500, "Receiver"))
ctl("POST", "calls/reset")
fault(service="ec2", action="CreateVolume", effect="error", status=400, code="InvalidParameterValue", message="bad size")
got = err(lambda: client("ec2", retries={"mode": "standard", "max_attempts": 5}).create_volume(AvailabilityZone="us-east-1a", Size=1))
eq("proxy custom error: 400 InvalidParameterValue", got[:2], ("InvalidParameterValue", 400))
eq("proxy custom error: a retrying client does not retry it", ctl("GET", "calls")["counts"].get("ec2:CreateVolume"), 1)
ctl("DELETE", "faults")

# delay, hang, truncation, close
fault(action="DescribeVpcs", effect="delay", seconds=1, count=1)
t0 = time.time(); vs = client("ec2", retries=NR).describe_vpcs()["Vpcs"]; dt = time.time() - t0
true_("proxy delay: the call succeeds after ~1 s (%.2f s)" % dt, len(vs) > 0 and 1.0 <= dt < 3, dt)
fault(action="DescribeRegions", effect="hang", count=1)
from botocore.config import Config
hcl = client("ec2", config=Config(read_timeout=1, connect_timeout=1, retries=NR))
t0 = time.time(); kind = None
try:
    hcl.describe_regions()
except bx.ReadTimeoutError:
    kind = "ReadTimeoutError"
except Exception as e:
    kind = type(e).__name__
dt = time.time() - t0
true_("proxy hang: the client times out (%s after %.2f s)" % (kind, dt), kind == "ReadTimeoutError" and dt < 3, kind)
time.sleep(0.5)
eq("proxy hang: logged once the client gave up", [(l["action"], l["effect"], l["status"]) for l in ctl("GET", "calls")["log"] if l["effect"] == "hang"], [("DescribeRegions", "hang", 0)])
fault(action="DescribeInstances", effect="truncate", count=1)
kind = None
try:
    client("ec2", retries=NR).describe_instances()
except botocore.parsers.ResponseParserError as e:
    kind = "ResponseParserError"
except Exception as e:
    kind = type(e).__name__
eq("proxy truncate (half): the body fails to parse", kind, "ResponseParserError")
# JSON: botocore itself swallows invalid JSON (it returns {"message": body}), so look at the raw reply.
fault(service="sqs", action="ListQueues", effect="truncate", count=1)
hc = http.client.HTTPConnection("127.0.0.1", int(P.rsplit(":", 1)[1]), timeout=5)
hc.request("POST", "/", body="{}", headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues",
           "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=x"})
r = hc.getresponse(); b = r.read(); hc.close()
try:
    json.loads(b); kind = "valid JSON"
except ValueError:
    kind = "invalid JSON"
eq("proxy truncate (JSON): SQS reply is cut and no longer valid JSON", (r.status, kind, b"QueueUrls" in b[:20]), (200, "invalid JSON", True))
hc = http.client.HTTPConnection("127.0.0.1", int(P.rsplit(":", 1)[1]), timeout=5)
fault(action="DescribeRegions", effect="truncate", mode="mid-tag", count=1)
hc.request("POST", "/", body="Action=DescribeRegions&Version=2016-11-15", headers={"Content-Type": "application/x-www-form-urlencoded", "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=x"})
r = hc.getresponse(); b = r.read(); hc.close()
import re
true_("proxy truncate (mid-tag): the body ends inside a tag", r.status == 200 and re.search(rb"<[A-Za-z]{1,3}$", b) is not None and len(b) == int(r.getheader("Content-Length")), b[-40:])
fault(action="DescribeRegions", effect="truncate", length="full", count=1)
kind = None
try:
    client("ec2", retries=NR).describe_regions()
except Exception as e:
    kind = type(e).__name__
true_("proxy truncate (length full): the client sees a broken connection (%s)" % kind, kind in ("ConnectionClosedError", "ResponseStreamingError", "ProtocolError", "IncompleteReadError"), kind)
fault(action="DescribeRegions", effect="close", count=1)
kind = None
try:
    client("ec2", retries=NR).describe_regions()
except Exception as e:
    kind = type(e).__name__
eq("proxy close: the client sees the connection closed", kind, "ConnectionClosedError")

# duration, skip, listing and clearing rules
fault(service="sts", effect="throttle", duration=1)
s1 = err(lambda: client("sts", retries=NR).get_caller_identity())
time.sleep(1.1)
s2 = err(lambda: client("sts", retries=NR).get_caller_identity())
eq("proxy duration: the rule ends after 1 s", (s1[0] if s1 else None, s2), ("Throttling", None))
fault(service="ec2", action="DescribeKeyPairs", effect="http500", skip=1, count=1)
e1 = client("ec2", retries=NR)
got = [err(lambda: e1.describe_key_pairs()) for _ in range(3)]
eq("proxy skip: only the 2nd matching call fails", [g[0] if g else None for g in got], [None, "InternalError", None])
fault(service="ec2", effect="throttle")
rules = ctl("GET", "faults")["rules"]
true_("proxy faults: GET lists rules with their use counts", len(rules) >= 2 and rules[-1]["effect"] == "throttle" and rules[-1]["active"] and "applied" in rules[-1], rules[-1])
ctl("DELETE", "faults")
eq("proxy faults: DELETE clears all rules", ctl("GET", "faults")["rules"], [])
eq("proxy faults: calls pass again after clearing", err(lambda: client("ec2", retries=NR).describe_vpcs()), None)
bad = None
try:
    ctl("POST", "faults", {"effect": "explode"})
except urllib.error.HTTPError as e:
    bad = e.code
eq("proxy faults: an unknown effect is rejected with 400", bad, 400)

# HTTP 200 replies that a client cannot understand (a fault matrix needs these)
import xml.etree.ElementTree as ET
AUTH = "AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/%s/aws4_request, SignedHeaders=host, Signature=x"
def raw(action, service="ec2", target=None):
    # (status, headers with lower-case names, body) of one call through the proxy
    hc = http.client.HTTPConnection("127.0.0.1", int(P.rsplit(":", 1)[1]), timeout=5)
    if target:
        hc.request("POST", "/", body="{}", headers={"Content-Type": "application/x-amz-json-1.0",
                   "X-Amz-Target": target, "Authorization": AUTH % service})
    else:
        hc.request("POST", "/", body="Action=%s&Version=2016-11-15" % action, headers={
                   "Content-Type": "application/x-www-form-urlencoded", "Authorization": AUTH % service})
    r = hc.getresponse(); b = r.read(); hc.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, b
def tags(e, skip=None):
    # the element names of a tree in document order, leaving out the subtrees named skip
    if e.tag.split("}")[-1] == skip:
        return []
    return [e.tag] + [t for c in e for t in tags(c, skip)]
ctl("DELETE", "faults")
ctl("POST", "calls/reset")
_, _, real = raw("DescribeInstances")
real = ET.fromstring(real)
ns = real.tag[:real.tag.find("}") + 1]
true_("proxy: the real DescribeInstances reply has a namespace, a reservationSet and nested groupSets",
      ns.startswith("{http://ec2.amazonaws.com/") and real.find(ns + "reservationSet") is not None
      and len(real.findall(".//" + ns + "groupSet")) >= 2, real.tag)

fault(action="DescribeRegions", effect="html200", count=1)
s, h, b = raw("DescribeRegions")
eq("proxy html200: HTTP 200, text/html, the login page", (s, h.get("content-type"), b),
   (200, "text/html", b"<html><head><title>Portal</title></head><body>login</body></html>"))
s, h, b = raw("DescribeRegions")
true_("proxy html200 (count=1): the next call is forwarded", s == 200 and b"<regionInfo>" in b, b[:80])
fault(action="DescribeRegions", effect="html200", duration=0.5)
got = [raw("DescribeRegions")[2][:5] for _ in range(2)]
time.sleep(0.6)
got.append(raw("DescribeRegions")[2][:5])
eq("proxy html200 (duration=0.5): HTML for 0.5 s, then the real reply", got, [b"<html", b"<html", b"<?xml"])

fault(action="DescribeInstances", effect="wrong-root", count=1)
s, h, b = raw("DescribeInstances")
root = ET.fromstring(b)
eq("proxy wrong-root (XML): well-formed, root renamed, namespace and children kept",
   (s, root.tag, tags(root)[1:], iid in b.decode()), (200, ns + "SomethingElseResponse", tags(real)[1:], True))
true_("proxy wrong-root: the closing tag is renamed too", b.rstrip().endswith(b"</SomethingElseResponse>"), b[-60:])
fault(service="sqs", action="ListQueues", effect="wrong-root", count=1)
s, h, b = raw(None, "sqs", "AmazonSQS.ListQueues")
eq("proxy wrong-root (JSON): the body is []", (s, b), (200, b"[]"))

fault(action="DescribeInstances", effect="strip", element="reservationSet", count=1)
s, h, b = raw("DescribeInstances")
root = ET.fromstring(b)
eq("proxy strip (XML): reservationSet gone, the root and requestId kept",
   (s, tags(root), b"reservationSet" in b, iid in b.decode()), (200, tags(real, "reservationSet"), False, False))
fault(action="DescribeInstances", effect="strip", element="groupSet", count=1)
s, h, b = raw("DescribeInstances")
root = ET.fromstring(b)
eq("proxy strip (XML): every groupSet gone (nested ones too), every other element kept",
   (s, b"groupSet" in b, tags(root), root.find(".//" + ns + "instanceId").text),
   (200, False, tags(real, "groupSet"), iid))
fault(action="DescribeInstances", effect="strip", element="reservationSet", count=1)
eq("proxy strip: boto3 takes the reply as a success without Reservations",
   "Reservations" in client("ec2", retries=NR).describe_instances(), False)
fault(service="sqs", action="ListQueues", effect="strip", element="QueueUrls", count=1)
s, h, b = raw(None, "sqs", "AmazonSQS.ListQueues")
_, _, want = raw(None, "sqs", "AmazonSQS.ListQueues")
want = json.loads(want)
eq("proxy strip (JSON): the top-level key is gone, the rest kept",
   (s, "QueueUrls" in want, json.loads(b)), (200, True, {k: v for k, v in want.items() if k != "QueueUrls"}))

fault(action="DescribeRegions", effect="empty200", skip=1, count=1)
r1, r2, r3 = raw("DescribeRegions"), raw("DescribeRegions"), raw("DescribeRegions")
eq("proxy empty200 (skip=1, count=1): only the 2nd call is HTTP 200 with a 0-byte body",
   (r1[0], len(r1[2]) > 0, r2[0], r2[1].get("content-length"), r2[2], r3[0], len(r3[2]) > 0),
   (200, True, 200, "0", b"", 200, True))

fault(action="DescribeRegions", effect="body", body="<DescribeRegionsResponse><regionInfo><item>", count=1)
s, h, b = raw("DescribeRegions")
eq("proxy body: HTTP 200, text/xml, the body verbatim", (s, h.get("content-type"), b),
   (200, "text/xml", b"<DescribeRegionsResponse><regionInfo><item>"))
fault(action="DescribeRegions", effect="body", body="{\"Regions\": 7}", status=202, content_type="application/json", count=1)
s, h, b = raw("DescribeRegions")
eq("proxy body: status and content_type from the rule", (s, h.get("content-type"), b), (202, "application/json", b"{\"Regions\": 7}"))

c = ctl("GET", "calls")["calls"]
eq("proxy counters: the new effects are counted (DescribeRegions: none forwarded)",
   {k: c["ec2:DescribeRegions"][k] for k in ("total", "faulted", "forwarded", "effects", "status")},
   {"total": 10, "faulted": 6, "forwarded": 4, "effects": {"html200": 3, "empty200": 1, "body": 2},
    "status": {"200": 9, "202": 1}})
eq("proxy counters: wrong-root and strip are faulted and forwarded",
   [{k: c[n][k] for k in ("total", "faulted", "forwarded", "effects")} for n in ("ec2:DescribeInstances", "sqs:ListQueues")],
   [{"total": 5, "faulted": 4, "forwarded": 5, "effects": {"wrong-root": 1, "strip": 3}},
    {"total": 3, "faulted": 2, "forwarded": 3, "effects": {"wrong-root": 1, "strip": 1}}])

def rule_status(rule):
    try:
        ctl("POST", "faults", rule)
        return 200
    except urllib.error.HTTPError as e:
        return e.code
ctl("DELETE", "faults")
eq("proxy faults: bad rules for the new effects are rejected with 400",
   [rule_status(r) for r in ({"effect": "strip"}, {"effect": "strip", "element": ""}, {"effect": "body"},
                              {"effect": "body", "body": "x", "status": 1000}, {"effect": "endless", "rate": -1},
                              {"effect": "endless", "seconds": "x"}, {"effect": "html200", "colour": "red"},
                              {"effect": "strip", "element": "x", "action": "NoSuchAction"})],
   [400, 400, 400, 400, 400, 400, 400, 200])
eq("proxy faults: only the valid rule was added", [r["effect"] for r in ctl("GET", "faults")["rules"]], ["strip"])
ctl("DELETE", "faults")
'

# endless: a body that never ends. A client reading for 1 s gets far more than 1 MB, the
# proxy stays small and healthy, stops when the client hangs up, and logs the bytes sent.
EC2_AUTH='Authorization: AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=x'
endless_get() { # MAX_TIME OUT: DescribeInstances through the proxy with curl; prints "SIZE HTTP_CODE CURL_RC"
	curl -s -o "$2" --max-time "$1" -w '%{size_download} %{http_code}' -H "$EC2_AUTH" \
		-d 'Action=DescribeInstances&Version=2016-11-15' "$FAULTPROXY_URL/"
	echo " $?"
}
endless_log() { # the last endless log entry as "status bytes ms", once it is there (2 s at most)
	local i
	for ((i = 0; i < 40; i++)); do
		tb_json "$FAULTPROXY_URL/_control/calls?log=50" | python3 -c 'import json, sys
e = [l for l in json.load(sys.stdin)["log"] if l["effect"] == "endless"]
if e: print(e[-1]["status"], e[-1].get("bytes"), int(e[-1]["ms"]))
sys.exit(not e)' && return 0
		sleep 0.05
	done
	echo none
}
rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$FAULTPROXY_PID/status"; }
tb_post "$FAULTPROXY_URL/_control/reset" '{}' >/dev/null
tb_post "$FAULTPROXY_URL/_control/faults" '{"service":"ec2","action":"DescribeInstances","effect":"endless","count":1}' >/dev/null
read -r size hcode rc < <(endless_get 1 /dev/null)
if [ "$rc" = 28 ] && [ "$hcode" = 200 ] && [ "$size" -gt 1000000 ]; then
	ok "proxy endless: curl --max-time 1 gets HTTP 200 and more than 1 MB ($size bytes)"
else fail "proxy endless: curl --max-time 1 gets HTTP 200 and more than 1 MB" "size=$size code=$hcode rc=$rc"; fi
read -r lstatus lbytes lms < <(endless_log)
if [ "$lstatus" = 200 ] && [ "${lbytes:-0}" -ge "$size" ] && [ "$lms" -lt 2000 ]; then
	ok "proxy endless: logged when the client hung up (status 200, $lbytes bytes, $lms ms)"
else fail "proxy endless: logged when the client hung up" "log: $lstatus $lbytes $lms, curl got $size"; fi
counters=$(tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c 'import json, sys
c = json.load(sys.stdin); d = c["calls"]["ec2:DescribeInstances"]
print(d["effects"], d["faulted"], d["forwarded"], d["status"], d.get("bytes"), c.get("bytes"))')
expect "proxy endless: counted (effects, faulted, not forwarded, status, bytes)" \
	"{'endless': 1} 1 0 {'200': 1} $lbytes $lbytes" "$counters"
expect "proxy endless: the proxy is healthy afterwards" 200 "$(code "$FAULTPROXY_URL/_control/health")"
read -r size hcode rc < <(endless_get 5 "$T_TMP/after-endless.xml")
if [ "$rc" = 0 ] && [ "$hcode" = 200 ] && grep -q '</DescribeInstancesResponse>' "$T_TMP/after-endless.xml"; then
	ok "proxy endless (count=1): the next DescribeInstances is forwarded and complete"
else fail "proxy endless (count=1): the next call is forwarded" "size=$size code=$hcode rc=$rc"; fi

tb_post "$FAULTPROXY_URL/_control/faults" '{"action":"DescribeInstances","effect":"endless","rate":0,"count":1}' >/dev/null
read -r size hcode rc < <(endless_get 1 /dev/null)
rss=$(rss_kb)
if [ "$rc" = 28 ] && [ "$size" -gt 50000000 ] && [ "$rss" -lt 100000 ]; then
	ok "proxy endless (rate 0): $((size / 1000000)) MB in 1 s, the proxy stays at $((rss / 1000)) MB"
else fail "proxy endless (rate 0): fast and bounded memory" "size=$size rc=$rc rss=${rss}kB"; fi

tb_post "$FAULTPROXY_URL/_control/faults" '{"action":"DescribeInstances","effect":"endless","rate":200000,"count":1}' >/dev/null
read -r size hcode rc < <(endless_get 1 "$T_TMP/endless.xml")
if [ "$rc" = 28 ] && [ "$size" -gt 100000 ] && [ "$size" -lt 400000 ]; then
	ok "proxy endless (rate 200000): about 200 kB in 1 s ($size bytes)"
else fail "proxy endless (rate 200000): about 200 kB in 1 s" "size=$size rc=$rc"; fi
head=$(head -c 106 "$T_TMP/endless.xml")
expect "proxy endless: the body starts a DescribeInstances reply and repeats <item>s" \
	'<DescribeInstancesResponse><reservationSet><item><instanceId>i-00000000000000000</instanceId></item><item>' "$head"

tb_post "$FAULTPROXY_URL/_control/faults" '{"action":"DescribeInstances","effect":"endless","rate":100000,"seconds":0.5,"count":1}' >/dev/null
t0=$(date +%s%N)
read -r size hcode rc < <(endless_get 5 /dev/null)
ms=$((($(date +%s%N) - t0) / 1000000))
if [ "$rc" = 18 ] && [ "$hcode" = 200 ] && [ "$ms" -lt 2000 ]; then
	ok "proxy endless (seconds 0.5): the proxy closes the unfinished body (curl: partial file, $ms ms)"
else fail "proxy endless (seconds 0.5): the proxy closes the unfinished body" "rc=$rc code=$hcode $ms ms"; fi

# a client that sends its request and never reads: the proxy gives up after seconds
tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null
tb_post "$FAULTPROXY_URL/_control/faults" '{"action":"DescribeInstances","effect":"endless","rate":0,"seconds":1,"count":1}' >/dev/null
stalled=$(python3 - "$FAULTPROXY_PORT" <<'PY'
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", int(sys.argv[1])))
body = b"Action=DescribeInstances&Version=2016-11-15"
s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
          b"Authorization: AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/ec2/aws4_request, "
          b"SignedHeaders=host, Signature=x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
time.sleep(2)  # not reading: the proxy's socket buffer fills up
s.settimeout(3)
n, t0 = 0, time.time()
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        n += len(d)
except OSError as e:
    print("error", type(e).__name__)
    sys.exit()
print("eof", "%.1f" % (time.time() - t0), n)
PY
)
read -r lstatus lbytes lms < <(endless_log)
if [ "${stalled%% *}" = eof ] && [ "$lms" -ge 900 ] && [ "$lms" -lt 1900 ]; then
	ok "proxy endless (seconds 1): a client that stops reading is let go after 1 s ($lms ms, $lbytes bytes)"
else fail "proxy endless (seconds 1): a client that stops reading is let go" "client: $stalled; log: $lstatus $lbytes $lms"; fi
expect "proxy endless: healthy after the stalled client" 200 "$(code "$FAULTPROXY_URL/_control/health")"
tb_post "$FAULTPROXY_URL/_control/reset" '{}' >/dev/null

out=$(AWS_MAX_ATTEMPTS=1 AWS_RETRY_MODE=standard bash -c 'curl -s -o /dev/null -X POST -d "{\"service\":\"ec2\",\"effect\":\"throttle\",\"count\":1}" "$1/_control/faults"; aws --endpoint-url "$1" ec2 describe-vpcs 2>&1' _ "$FAULTPROXY_URL")
if grep -q 'RequestLimitExceeded' <<<"$out"; then ok "awscli through the proxy sees RequestLimitExceeded"; else fail "awscli through the proxy" "$out"; fi

# ---------------------------------------------------------------------------------------
# shutdown by pid
# ---------------------------------------------------------------------------------------
if gone_after_term "$FAULTPROXY_PID"; then ok "fault proxy: SIGTERM stops it"; else fail "fault proxy: SIGTERM stops it"; fi
if gone_after_term "$IMDS_PID"; then ok "IMDS (from moto): SIGTERM stops it"; else fail "IMDS (from moto): SIGTERM stops it"; fi
moto_stop
if kill -0 "$MOTO_PID" 2>/dev/null; then fail "moto_stop stops moto"; else ok "moto_stop stops moto"; fi

t_summary
