#!/usr/bin/env bash
# tests: product
# EC2 through `aws-k8s aws` against moto: DescribeInstances with filters and pagination,
# DescribeInstanceTypes, volumes, the EC2 error shape, moto's HTML 500, and the batcher.
. "$(dirname "$0")/aws_lib.sh"

moto_start || { fail "moto starts"; t_summary; }
T=$T_TMP

ids=$(moto_py '
ids = [run_instance(InstanceType="t3.micro", tags={"Name": "web-%d" % i, "team": "a" if i < 4 else "b"})
       for i in range(7)]
ec2.stop_instances(InstanceIds=[ids[6]])
ec2.create_tags(Resources=[ids[0]], Tags=[{"Key": "odd key/+", "Value": "a b&c=d/e+f%20~*"}])
print(" ".join(ids))')
read -r -a IDS <<<"$ids"
[ ${#IDS[@]} -eq 7 ] && peer ok "seven instances created in moto" || peer fail "seven instances created in moto" "$ids"

run_to "$T/all.json" ec2 DescribeInstances
[ $RC -eq 0 ] && ok "DescribeInstances succeeds" || fail "DescribeInstances succeeds" "$(cat "$T/all.json.err")"
jcheck "DescribeInstances returns the 7 instances" "$T/all.json" '[.reservationSet[].instancesSet[].instanceId] | length == 7'

run_to "$T/running.json" ec2 DescribeInstances Filter.1.Name=instance-state-name Filter.1.Value.1=running
jcheck "filter instance-state-name=running leaves out the stopped one" "$T/running.json" \
	"[.reservationSet[].instancesSet[].instanceId] | length == 6 and (index(\"${IDS[6]}\") | not)"

run_to "$T/tag.json" ec2 DescribeInstances Filter.1.Name=tag:team Filter.1.Value.1=b \
	Filter.2.Name=instance-state-name Filter.2.Value.1=running Filter.2.Value.2=stopped
jcheck "two filters with two values each" "$T/tag.json" \
	'[.reservationSet[].instancesSet[].tagSet[] | select(.key=="team") | .value] == ["b","b","b"]'

run_to "$T/wild.json" ec2 DescribeInstances 'Filter.1.Name=tag:Name' 'Filter.1.Value.1=web-1*' 'Filter.1.Value.2=web-5'
jcheck "tag filter with a wildcard and a second value" "$T/wild.json" \
	'[.reservationSet[].instancesSet[].tagSet[] | select(.key=="Name") | .value] | sort == ["web-1","web-5"]'
run_to "$T/odd.json" ec2 DescribeInstances 'Filter.1.Name=tag:odd key/+' 'Filter.1.Value.1=a b&c=d/e+f%20~\*'
jcheck "reserved characters in filter names and values are encoded and matched" "$T/odd.json" \
	"[.reservationSet[].instancesSet[].instanceId] == [\"${IDS[0]}\"]"

run_to "$T/byid.json" ec2 DescribeInstances "InstanceId.1=${IDS[0]}" "InstanceId.2=${IDS[3]}"
jcheck "DescribeInstances by two IDs" "$T/byid.json" \
	"[.reservationSet[].instancesSet[].instanceId] | sort == ([\"${IDS[0]}\",\"${IDS[3]}\"] | sort)"

run_to "$T/pages.json" --paginate ec2 DescribeInstances MaxResults=5
jcheck "pagination with MaxResults=5 gives two pages" "$T/pages.json" 'length == 2'
jcheck "the first page has a nextToken, the last none" "$T/pages.json" \
	'(.[0].nextToken | length > 0) and (.[1].nextToken == null)'
jcheck "the pages hold the 7 instances once each" "$T/pages.json" \
	'[.[].reservationSet[].instancesSet[].instanceId] | (length == 7) and (unique | length == 7)'

run_to "$T/types.json" ec2 DescribeInstanceTypes InstanceType.1=m5.large InstanceType.2=c5.xlarge
jcheck "DescribeInstanceTypes m5.large has 2 vCPUs and 8 GiB" "$T/types.json" \
	'.instanceTypeSet[] | select(.instanceType=="m5.large") | .vCpuInfo.defaultVCpus == "2" and .memoryInfo.sizeInMiB == "8192"'
jcheck "DescribeInstanceTypes c5.xlarge has EBS info" "$T/types.json" \
	'.instanceTypeSet[] | select(.instanceType=="c5.xlarge") | .ebsInfo.nvmeSupport == "required"'

run_to "$T/vol.json" ec2 CreateVolume AvailabilityZone=us-east-1a Size=10 VolumeType=gp3 Iops=4000 \
	TagSpecification.1.ResourceType=volume TagSpecification.1.Tag.1.Key=kubernetes.io/created-for/pvc/name \
	TagSpecification.1.Tag.1.Value=data-0
vol=$(jq -r .volumeId "$T/vol.json" 2>/dev/null)
case $vol in vol-*) ok "CreateVolume returns a volume ID" ;; *) fail "CreateVolume returns a volume ID" "$(cat "$T/vol.json" "$T/vol.json.err")" ;; esac
run_to "$T/dv.json" ec2 DescribeVolumes "VolumeId.1=$vol"
jcheck "DescribeVolumes shows size, type, iops and the tag" "$T/dv.json" \
	'.volumeSet[0] | .size == "10" and .volumeType == "gp3" and .iops == "4000" and (.tagSet[0].value == "data-0")'
run_to "$T/del.json" ec2 DeleteVolume "VolumeId=$vol"
[ $RC -eq 0 ] && ok "DeleteVolume succeeds" || fail "DeleteVolume succeeds" "$(cat "$T/del.json.err")"
run_to "$T/gone.json" ec2 DescribeVolumes "VolumeId.1=$vol"
if [ $RC -eq 1 ] && grep -q "InvalidVolume.NotFound" "$T/gone.json.err"; then
	ok "the deleted volume gives InvalidVolume.NotFound (exit 1)"
else
	fail "the deleted volume gives InvalidVolume.NotFound (exit 1)" "rc=$RC $(cat "$T/gone.json.err")"
fi

run_to "$T/nf.json" ec2 DescribeInstances InstanceId.1=i-0123456789abcdef0
if [ $RC -eq 1 ] && grep -q "InvalidInstanceID.NotFound: The instance ID 'i-0123456789abcdef0' does not exist (HTTP 400" "$T/nf.json.err"; then
	ok "EC2 error shape: code, message and status"
else
	fail "EC2 error shape: code, message and status" "rc=$RC $(cat "$T/nf.json.err")"
fi

run_to "$T/h500.json" --max-attempts=1 ec2 DescribeInstances Filter.1.Name=no-such-filter Filter.1.Value.1=x
if [ $RC -eq 1 ] && grep -q "HTTP 500 reply without an AWS error (text/html" "$T/h500.json.err"; then
	ok "moto's HTML 500 gives a clear error"
else
	fail "moto's HTML 500 gives a clear error" "rc=$RC $(cat "$T/h500.json.err")"
fi

run_to "$T/dry.json" ec2 DescribeInstances DryRun=true
grep -q "DryRunOperation" "$T/dry.json.err" && ok "DryRun gives DryRunOperation" || fail "DryRun gives DryRunOperation" "$(cat "$T/dry.json.err")"

run_to "$T/batch.json" batch instances "${IDS[0]}" "${IDS[1]}" "${IDS[2]}" i-0000000000000dead "${IDS[0]}"
jcheck "batch: each ID gets its own instance" "$T/batch.json" \
	".items[\"${IDS[1]}\"].instanceId == \"${IDS[1]}\" and .items[\"${IDS[2]}\"].instanceId == \"${IDS[2]}\""
jcheck "batch: an unknown ID is null (not found), the others still answered" "$T/batch.json" \
	'.items["i-0000000000000dead"] == null and .notFound == 1 and .failed == 0'
jcheck "batch: one batch, at most 2 calls (the NotFound retry)" "$T/batch.json" '.batches == 1 and .calls <= 2'

t_summary
