#!/usr/bin/env bash
# tests: product
# aws-k8s capa's AMI lookup (../shared/reference/capa.md §9) against moto (behind the fault
# proxy, which counts the calls) and the test API server: images made in moto under its own
# account, named as CAPA's default format wants (capa-ami-<baseOS>-?<version>-*), and
# imageLookupOrg = that account. Machines without spec.ami.id boot the newest image of their
# Machine's spec.version; three machines of one version make one DescribeImages and one
# DescribeInstanceTypes (the cache); imageLookupBaseOS on the AWSMachine beats the cluster's
# default; a version without an image, and a Machine without a version, get InstanceReady
# False/InstanceProvisionFailed with the reason, and no instance.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../lib/capa_objects.sh"

NS=default
export KUBECACHEDIR=$T_TMP/kcache
kc() { kubectl --kubeconfig "$KC" "$@"; }
# the fault proxy's count of one EC2 action since the start
count() {
	tb_json "$FAULTPROXY_URL/_control/calls?log=0" |
		python3 -c "import json,sys; print(json.load(sys.stdin)['counts'].get('ec2:$1', 0))"
}
am() { kc get awsmachine "$1" -n "$NS" -o json | python3 -c "import json,sys; o=json.load(sys.stdin); print($2)"; }
ready() { [ "$(am "$1" 'o.get("status", {}).get("ready")')" = True ]; }
provision_failed() {
	[ "$(am "$1" '[c["reason"] for c in o.get("status", {}).get("conditions", []) if c["type"] == "InstanceReady"]')" = "['InstanceProvisionFailed']" ]
}
cond_msg() { am "$1" '[c.get("message", "") for c in o["status"]["conditions"] if c["type"] == "InstanceReady"][0]'; }

capa_testbed_start

# ---- moto: a subnet, the groups, and images under moto's own account ----
moto_py '
import time
acct = sts.get_caller_identity()["Account"]
vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
sub = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.64.0/20", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
sgs = {r: ec2.create_security_group(GroupName="a1-" + r, Description=r, VpcId=vpc)["GroupId"]
       for r in ("node", "lb", "controlplane")}
# moto registers images without architecture or virtualization type: they are made from an
# instance of an x86_64 HVM image instead (CreateImage copies both)
src = [i for i in ec2.describe_images(Owners=["amazon"])["Images"]
       if i.get("Architecture") == "x86_64" and i.get("VirtualizationType") == "hvm"][0]["ImageId"]
builder = ec2.run_instances(ImageId=src, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
img = {}
for key, name in (("old", "capa-ami-ubuntu-24.04-v1.31.2-00"), ("new", "capa-ami-ubuntu-24.04-v1.31.2-01"),
                  ("other", "capa-ami-ubuntu-24.04-v1.30.0-00"), ("flatcar", "capa-ami-flatcar-stable-v1.31.2-00")):
    img[key] = ec2.create_image(InstanceId=builder, Name=name)["ImageId"]
    time.sleep(1.1)  # CreationDate has one-second steps
img["builder"] = builder
json.dump({"acct": acct, "vpc": vpc, "subnet": sub, "sgs": sgs, "img": img}, open(sys.argv[1], "w"))
' "$T_TMP/moto.json"
m() { python3 -c "import json; o=json.load(open('$T_TMP/moto.json')); print($1)"; }
peer check "the images are registered in moto" test -n "$(m 'o["img"]["new"]')"
ACCT=$(m 'o["acct"]')

kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"a1","namespace":"$NS"},
 "spec":{"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster","name":"a1"}}}
EOF
kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster","metadata":{"name":"a1","namespace":"$NS"},
 "spec":{"region":"us-east-1","imageLookupOrg":"$ACCT","network":{"vpc":{"id":"$(m 'o["vpc"]')"},
  "subnets":[{"id":"$(m 'o["subnet"]')","resourceID":"$(m 'o["subnet"]')","availabilityZone":"us-east-1a","isPublic":false}]}}}
EOF
kc patch awscluster a1 -n "$NS" --subresource=status --type=merge -p "{\"status\":{\"ready\":true,\"networkStatus\":{\"securityGroups\":
 $(m 'json.dumps({r: {"id": i, "name": "a1-" + r} for r, i in o["sgs"].items()})')}}}" >/dev/null
printf '#cloud-config\nruncmd: [[true]]\n' >"$T_TMP/boot.txt"
kc create secret generic a1-boot -n "$NS" --from-file=value="$T_TMP/boot.txt" >/dev/null

# NAME VERSION(or "") AWSMACHINE-SPEC-EXTRA
machine() {
	local ver=""
	[ -z "$2" ] || ver="\"version\":\"$2\","
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Machine","metadata":{"name":"$1","namespace":"$NS","labels":{"cluster.x-k8s.io/cluster-name":"a1"}},
 "spec":{"clusterName":"a1",$ver"failureDomain":"us-east-1a","bootstrap":{"dataSecretName":"a1-boot"},
  "infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSMachine","name":"$1"}}}
EOF
	local uid
	uid=$(kc get machine.cluster.x-k8s.io "$1" -n "$NS" -o jsonpath='{.metadata.uid}')
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSMachine",
 "metadata":{"name":"$1","namespace":"$NS","labels":{"cluster.x-k8s.io/cluster-name":"a1"},
  "ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Machine","name":"$1","uid":"$uid"}]},
 "spec":{"instanceType":"t3.medium","cloudInit":{"insecureSkipSecretsManager":true}$3}}
EOF
}
image_of() {
	moto_py "
r = ec2.describe_instances(Filters=[{'Name': 'tag:Name', 'Values': ['$1']}])['Reservations']
print(' '.join(i['ImageId'] for x in r for i in x['Instances']))"
}

bg capa "$AWS_K8S" capa --kubeconfig="$KC" --health-addr="127.0.0.1:$(free_port)" --sync-period=10m \
	--awsmachine-concurrency=3 --v=2
wait_until 30 grep -q "Starting workers" "$T_TMP/capa.log"

# ---- three machines of one version: the newest image, one lookup ----
for n in a1-m1 a1-m2 a1-m3; do machine "$n" v1.31.2 ""; done
all3() { ready a1-m1 && ready a1-m2 && ready a1-m3; }
if wait_until 90 all3; then ok "three machines without spec.ami.id become ready"
else fail "three machines become ready" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi
NEW=$(m 'o["img"]["new"]')
for n in a1-m1 a1-m2 a1-m3; do
	check "$n boots the newest capa-ami-ubuntu-24.04-?1.31.2-* image of $ACCT" test "$(image_of "$n")" = "$NEW"
done
check "three machines, one DescribeImages" test "$(count DescribeImages)" = 1
check "three machines, one DescribeInstanceTypes" test "$(count DescribeInstanceTypes)" = 1
check "spec.ami stays as the user wrote it (absent)" test "$(am a1-m1 'o["spec"].get("ami")')" = None

# ---- imageLookupBaseOS on the AWSMachine ----
machine a1-fc v1.31.2 ',"imageLookupBaseOS":"flatcar-stable"'
if wait_until 60 ready a1-fc; then ok "a machine with imageLookupBaseOS flatcar-stable becomes ready"
else fail "the flatcar machine becomes ready" "$(cond_msg a1-fc)"; fi
check "it boots the flatcar image" test "$(image_of a1-fc)" = "$(m 'o["img"]["flatcar"]')"
check "and needed one more DescribeImages (another name)" test "$(count DescribeImages)" = 2

# ---- no image for the version; no version at all ----
runs=$(count RunInstances)
machine a1-none v1.29.9 ""
if wait_until 60 provision_failed a1-none; then ok "no image for v1.29.9: InstanceReady False/InstanceProvisionFailed"
else fail "no image: the condition" "$(am a1-none 'o.get("status")')"; fi
msg=$(cond_msg a1-none)
case $msg in
*"no available hvm image of owner $ACCT named \"capa-ami-ubuntu-24.04-?1.29.9-*\" for architecture x86_64"*)
	ok "the condition names the owner, the name and the architecture" ;;
*) fail "the condition message" "$msg" ;;
esac
machine a1-nover "" ""
if wait_until 60 provision_failed a1-nover; then ok "no spec.version and no ami.id: InstanceReady False/InstanceProvisionFailed"
else fail "no version: the condition" "$(am a1-nover 'o.get("status")')"; fi
case $(cond_msg a1-nover) in
*spec.version*) ok "the condition says the Machine has no spec.version" ;;
*) fail "the no-version message" "$(cond_msg a1-nover)" ;;
esac
sleep 2
check "no RunInstances for either" test "$(count RunInstances)" = "$runs"
check "no instance for either" test -z "$(image_of a1-none)$(image_of a1-nover)"

# ---- the image appears: the machine goes on (a miss is not cached) ----
moto_py "ec2.create_image(InstanceId='$(m 'o["img"]["builder"]')', Name='capa-ami-ubuntu-24.04-v1.29.9-00')" >/dev/null
if wait_until 120 ready a1-none; then ok "once an image for v1.29.9 is registered, the machine becomes ready"
else fail "the late image is used" "$(cond_msg a1-none)"; fi

if stop_within "$(cat "$T_TMP/capa.pid")" 30 capa; then
	check "capa stops on SIGTERM with exit 0" test "$STOP_RC" = 0
fi
t_summary
