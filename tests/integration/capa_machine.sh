#!/usr/bin/env bash
# tests: product
# aws-k8s capa's AWSMachine controller against moto (behind the fault proxy, which records every
# call) and the test API server. The cluster's network is made in moto by the test and written
# into an AWSCluster's spec and status (the AWSCluster has no owner Cluster, so the cluster
# controller leaves it alone). Three machines across three zones, one control-plane: the
# instances' subnet, security groups, root volume, tags, IMDS options and user data (the
# boothook decoded, its Secrets Manager chunks read back and gunzipped; the boothook itself run
# against moto with the aws CLI), providerID, status; an instance terminated behind the
# controller's back sets the terminal failure; deleting an AWSMachine terminates its instance
# and deletes its secrets; a controller SIGKILLed right after RunInstances, and a RunInstances
# reply lost on the wire, leave exactly one instance. Refused or waiting: an unsupported secrets
# backend, a stopped instance, a recorded instance that does not exist, a cluster not ready.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../lib/capa_objects.sh"

C=c1
NS=default
export KUBECACHEDIR=$T_TMP/kcache
kc() { kubectl --kubeconfig "$KC" "$@"; }
calls_reset() { tb_post "$FAULTPROXY_URL/_control/calls/reset" '{}' >/dev/null; }
am_py() { kc get awsmachine "$1" -n "$NS" -o json | python3 -c "import json,sys; o=json.load(sys.stdin); print($2)"; }
am_gone() { ! kc get awsmachine "$1" -n "$NS" >/dev/null 2>&1; }
am_has() { [ "$(am_py "$1" "$2" 2>/dev/null)" = "True" ]; }

# ---- peers ----
capa_testbed_start

# ---- the cluster's network, made by the test in moto ----
moto_py '
vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
out = {"vpc": vpc, "subnets": {}, "sgs": {}}
for i, az in enumerate(["us-east-1a", "us-east-1b", "us-east-1c"]):
    out["subnets"][az] = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.%d.0/24" % (64 + i),
                                           AvailabilityZone=az)["Subnet"]["SubnetId"]
for role in ["node", "lb", "controlplane", "extra"]:
    out["sgs"][role] = ec2.create_security_group(GroupName="c1-" + role, Description=role,
                                                 VpcId=vpc)["GroupId"]
for p in ["control-plane.cluster-api-provider-aws.sigs.k8s.io", "nodes.cluster-api-provider-aws.sigs.k8s.io"]:
    iam.create_instance_profile(InstanceProfileName=p)
img = ec2.describe_images(Owners=["amazon"])["Images"]
img = [i for i in img if i.get("RootDeviceName")][0]
out["ami"], out["rootdev"] = img["ImageId"], img["RootDeviceName"]
json.dump(out, open(sys.argv[1], "w"))
' "$T_TMP/net.json"
net() { python3 -c "import json,sys; o=json.load(open('$T_TMP/net.json')); print($1)"; }
AMI=$(net 'o["ami"]')
SG_EXTRA=$(net 'o["sgs"]["extra"]')
peer check "the test's VPC, subnets, groups and instance profiles exist in moto" test -n "$AMI"

kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"$C","namespace":"$NS"},
 "spec":{"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster","name":"$C"}}}
EOF
python3 - "$T_TMP/net.json" >"$T_TMP/awscluster.json" <<'EOF'
import json, sys
n = json.load(open(sys.argv[1]))
print(json.dumps({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSCluster",
  "metadata": {"name": "c1", "namespace": "default", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
  "spec": {"region": "us-east-1", "sshKeyName": "cluster-key", "additionalTags": {"team": "infra"},
           "network": {"vpc": {"id": n["vpc"]}, "subnets": [
               {"resourceID": s, "id": s, "availabilityZone": az, "isPublic": False, "cidrBlock": "10.0.0.0/24"}
               for az, s in sorted(n["subnets"].items())]}}}))
EOF
kc apply -f "$T_TMP/awscluster.json" >/dev/null
SGS_JSON=$(net 'json.dumps({r: {"id": i, "name": "c1-" + r} for r, i in o["sgs"].items() if r != "extra"})' | sed 's/^/ /')
kc patch awscluster "$C" -n "$NS" --subresource=status --type=merge \
	-p "{\"status\":{\"ready\":true,\"networkStatus\":{\"securityGroups\":$SGS_JSON}}}" >/dev/null
peer check "the AWSCluster's status (ready, security groups) is written by the test" \
	test "$(kc get awscluster "$C" -n "$NS" -o jsonpath='{.status.networkStatus.securityGroups.node.id}')" = "$(net 'o["sgs"]["node"]')"

# bootstrap data: the control plane's is 12 KB of incompressible text (two 7000-byte chunks)
python3 -c 'import base64,os; print("#cloud-config\nwrite_files:\n- path: /etc/blob\n  content: " + base64.b64encode(os.urandom(9000)).decode())' >"$T_TMP/boot-cp.txt"
printf '#cloud-config\nruncmd:\n- [kubeadm, join, --config, /run/kubeadm/kubeadm-join-config.yaml]\n' >"$T_TMP/boot-md.txt"
kc create secret generic "$C-cp-0-bootstrap" -n "$NS" --from-file=value="$T_TMP/boot-cp.txt" >/dev/null
kc create secret generic "$C-md-bootstrap" -n "$NS" --from-file=value="$T_TMP/boot-md.txt" >/dev/null

# machine NAME ZONE ROLE(cp|md) SPEC-JSON: the Machine (owner) and the AWSMachine
machine() {
	local name=$1 zone=$2 role=$3 spec=$4 labels secret
	labels="\"cluster.x-k8s.io/cluster-name\":\"$C\""
	secret=$C-md-bootstrap
	if [ "$role" = cp ]; then
		labels="$labels,\"cluster.x-k8s.io/control-plane\":\"\""
		secret=$C-cp-0-bootstrap
	fi
	local boot="{\"dataSecretName\":\"$secret\"}"
	[ -z "${NO_BOOTSTRAP:-}" ] || boot='{}'
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Machine","metadata":{"name":"$name","namespace":"$NS","labels":{$labels}},
 "spec":{"clusterName":"$C","failureDomain":"$zone","bootstrap":$boot,
  "infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSMachine","name":"$name"}}}
EOF
	local muid
	muid=$(kc get machine.cluster.x-k8s.io "$name" -n "$NS" -o jsonpath='{.metadata.uid}')
	kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSMachine",
 "metadata":{"name":"$name","namespace":"$NS","labels":{$labels},
  "ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Machine","name":"$name","uid":"$muid"}]},
 "spec":$spec}
EOF
}

# ---- the manager ----
HPORT=$(free_port)
start_capa() {
	bg "capa$1" "$AWS_K8S" capa --kubeconfig="$KC" --health-addr="127.0.0.1:$HPORT" --sync-period=3s \
		--awsmachine-concurrency=3 --v=2
	CAPA_PID=$(cat "$T_TMP/capa$1.pid")
	wait_http "http://127.0.0.1:$HPORT/healthz" 20
}
if start_capa 1; then
	ok "capa starts with the machine controller"
else
	fail "capa starts" "$(tail -5 "$T_TMP/capa1.log")"
	t_summary
fi

calls_reset
machine "$C-cp-0" us-east-1a cp "{\"instanceType\":\"t3.large\",\"ami\":{\"id\":\"$AMI\"},
  \"iamInstanceProfile\":\"control-plane.cluster-api-provider-aws.sigs.k8s.io\",
  \"rootVolume\":{\"size\":40,\"type\":\"gp3\"},\"additionalTags\":{\"tier\":\"cp\"}}"
machine "$C-md-0" us-east-1b md "{\"instanceType\":\"t3.medium\",\"ami\":{\"id\":\"$AMI\"},\"sshKeyName\":\"md-key\",
  \"iamInstanceProfile\":\"nodes.cluster-api-provider-aws.sigs.k8s.io\",
  \"additionalSecurityGroups\":[{\"id\":\"$SG_EXTRA\"}]}"
machine "$C-md-1" us-east-1c md "{\"instanceType\":\"t3.medium\",\"ami\":{\"id\":\"$AMI\"},
  \"iamInstanceProfile\":\"nodes.cluster-api-provider-aws.sigs.k8s.io\",
  \"spotMarketOptions\":{\"maxPrice\":\"0.04\"},\"cloudInit\":{\"insecureSkipSecretsManager\":true},
  \"instanceMetadataOptions\":{\"httpTokens\":\"optional\",\"httpPutResponseHopLimit\":2}}"

all_ready() {
	for m in cp-0 md-0 md-1; do am_has "$C-$m" 'o.get("status",{}).get("ready") is True' || return 1; done
}
if wait_until 60 all_ready; then
	ok "three AWSMachines become ready"
else
	fail "three AWSMachines become ready" "$(kc get awsmachines -n "$NS" -o wide 2>&1; tail -5 "$T_TMP/capa1.log")"
fi
tb_json "$FAULTPROXY_URL/_control/calls?log=0" >"$T_TMP/create-calls.json"
python3 -c '
import json,sys
c = json.load(open(sys.argv[1]))
print("figure: AWS calls to create three machines: %d (%s)" % (c["total"],
      ", ".join("%s %d" % (k, v) for k, v in sorted(c["counts"].items()))))' "$T_TMP/create-calls.json"


# ---- steady state: the resyncs (--sync-period=3s) of three running machines only read ----
rvs() { for m in cp-0 md-0 md-1; do am_py "$C-$m" 'o["metadata"]["resourceVersion"]'; done | tr '\n' ' '; }
calls_reset
RV0=$(rvs)
n_calls() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c "import json,sys; print(json.load(sys.stdin)['counts'].get('$1', 0))"; }
# two resync passes over the three machines
wait_until 30 test "$(n_calls ec2:DescribeInstances)" -ge 6
tb_json "$FAULTPROXY_URL/_control/calls?log=0" >"$T_TMP/steady-calls.json"
writes=$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["counts"]
print(" ".join("%s=%d" % (k, v) for k, v in sorted(c.items())
               if not k.split(":")[1].startswith(("Describe", "Get", "List"))))' "$T_TMP/steady-calls.json")
n_di=$(n_calls ec2:DescribeInstances)
if [ "$n_di" -ge 6 ] && [ -z "$writes" ]; then
	ok "two resyncs of three running machines: no mutating AWS call ($n_di DescribeInstances)"
else
	fail "the resyncs of running machines only read" "$n_di DescribeInstances; writes: $writes"
fi
check "and no write of the AWSMachines (resourceVersions unchanged)" test "$(rvs)" = "$RV0"
for m in cp-0 md-0 md-1; do kc get awsmachine "$C-$m" -n "$NS" -o json >"$T_TMP/am-$m.json"; done
moto_py_checks '
import base64, gzip, email, re
net = json.load(open(sys.argv[1])); tmp = sys.argv[2]
sm = client("secretsmanager")
def am(m): return json.load(open("%s/am-%s.json" % (tmp, m)))
res = ec2.describe_instances(Filters=[{"Name": "tag:sigs.k8s.io/cluster-api-provider-aws/cluster/c1", "Values": ["owned"]}])
insts = [i for r in res["Reservations"] for i in r["Instances"] if i["State"]["Name"] != "terminated"]
byname = {}
for i in insts:
    byname.setdefault({t["Key"]: t["Value"] for t in i.get("Tags", [])}["Name"], []).append(i)
if sorted(byname) == ["c1-cp-0", "c1-md-0", "c1-md-1"] and all(len(v) == 1 for v in byname.values()):
    ok("one instance per AWSMachine, named after it")
else:
    fail("one instance per AWSMachine", {k: len(v) for k, v in byname.items()})
zones = {"c1-cp-0": "us-east-1a", "c1-md-0": "us-east-1b", "c1-md-1": "us-east-1c"}
sg = net["sgs"]
want_sgs = {"c1-cp-0": {sg["node"], sg["lb"], sg["controlplane"]}, "c1-md-0": {sg["node"], sg["lb"], sg["extra"]},
            "c1-md-1": {sg["node"], sg["lb"]}}
for name, lst in sorted(byname.items()):
    i = lst[0]; m = name[3:]; o = am(m)
    tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
    az = zones[name]
    if i["SubnetId"] == net["subnets"][az] and i["Placement"]["AvailabilityZone"] == az:
        ok("%s: in the private subnet of its failure domain %s" % (name, az))
    else:
        fail("%s: subnet" % name, (i["SubnetId"], i["Placement"]))
    groups = {g["GroupId"] for e in i["NetworkInterfaces"] for g in e["Groups"]}
    if groups == want_sgs[name]:
        ok("%s: security groups of its role (and additionalSecurityGroups)" % name)
    else:
        fail("%s: security groups" % name, sorted(groups))
    want = {"sigs.k8s.io/cluster-api-provider-aws/cluster/c1": "owned", "sigs.k8s.io/cluster-api-provider-aws/role":
            "control-plane" if "cp" in name else "node", "Name": name, "kubernetes.io/cluster/c1": "owned",
            "MachineName": "default/" + name, "team": "infra"}
    if "cp" in name: want["tier"] = "cp"
    if tags == want:
        ok("%s: CAPA tags (owned, role, Name, cloud provider, MachineName, additionalTags)" % name)
    else:
        fail("%s: tags" % name, tags)
    eni_tags = {t["Key"]: t["Value"] for t in ec2.describe_network_interfaces(NetworkInterfaceIds=[i["NetworkInterfaces"][0]["NetworkInterfaceId"]])["NetworkInterfaces"][0].get("TagSet", [])}
    if eni_tags == want: ok("%s: the network interface carries the same tags" % name)
    else: fail("%s: ENI tags" % name, eni_tags)
    pid = o["spec"].get("providerID")
    if pid == "aws:///%s/%s" % (az, i["InstanceId"]) and o["spec"].get("instanceID") == i["InstanceId"]:
        ok("%s: providerID aws:///<zone>/<id> and instanceID" % name)
    else:
        fail("%s: providerID" % name, pid)
    st = o.get("status", {})
    conds = {c["type"]: c["status"] for c in st.get("conditions", [])}
    addrs = {a["type"] for a in st.get("addresses", [])}
    if st.get("instanceState") == "running" and conds.get("InstanceReady") == "True" and "InternalIP" in addrs:
        ok("%s: status instanceState running, InstanceReady True, addresses" % name)
    else:
        fail("%s: status" % name, st)
    fin = o["metadata"].get("finalizers", [])
    if fin == ["awsmachine.infrastructure.cluster.x-k8s.io"]: ok("%s: CAPA finalizer" % name)
    else: fail("%s: finalizer" % name, fin)
    prof = i.get("IamInstanceProfile", {}).get("Arn", "")
    if prof.endswith("/" + ("control-plane" if "cp" in name else "nodes") + ".cluster-api-provider-aws.sigs.k8s.io"):
        ok("%s: IAM instance profile" % name)
    else:
        fail("%s: instance profile" % name, prof)
    key = {"c1-cp-0": "cluster-key", "c1-md-0": "md-key", "c1-md-1": "cluster-key"}[name]
    if i.get("KeyName") == key: ok("%s: SSH key (the machine'"'"'s, else the cluster'"'"'s)" % name)
    else: fail("%s: key" % name, i.get("KeyName"))
    mo = i.get("MetadataOptions", {})
    wt, wh = ("optional", 2) if name == "c1-md-1" else ("required", 1)
    if mo.get("HttpTokens") == wt and mo.get("HttpPutResponseHopLimit") == wh and mo.get("HttpEndpoint") == "enabled":
        ok("%s: IMDS options (IMDSv2 required unless the spec says otherwise)" % name)
    else:
        fail("%s: IMDS options" % name, mo)

cp = byname["c1-cp-0"][0]
bdm = {b["DeviceName"]: b["Ebs"] for b in cp.get("BlockDeviceMappings", [])}
vols = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [cp["InstanceId"]]}])["Volumes"]
root = [v for v in vols if v["Attachments"][0]["Device"] == net["rootdev"]]
if root and root[0]["Size"] == 40 and root[0]["VolumeType"] == "gp3" and bdm.get(net["rootdev"], {}).get("DeleteOnTermination"):
    ok("c1-cp-0: root volume 40 GiB gp3 on the AMI'"'"'s root device, deleted on termination")
else:
    fail("c1-cp-0: root volume", [(v["Size"], v["VolumeType"], v["Attachments"]) for v in vols])
spot = byname["c1-md-1"][0]
if spot.get("InstanceLifecycle") == "spot" and am("md-1")["status"].get("interruptible") is True:
    ok("c1-md-1: a spot instance (spotMarketOptions), status.interruptible")
else: fail("c1-md-1: spot", spot.get("InstanceLifecycle"))

def userdata(i):
    v = ec2.describe_instance_attribute(InstanceId=i["InstanceId"], Attribute="userData")["UserData"]["Value"]
    return base64.b64decode(v)
for name, src in [("c1-cp-0", "boot-cp.txt"), ("c1-md-0", "boot-md.txt")]:
    ud = userdata(byname[name][0]).decode()
    msg = email.message_from_string(ud)
    parts = [(p.get_content_type(), p.get_payload()) for p in msg.walk() if not p.is_multipart()]
    types = [t for t, _ in parts]
    o = am(name[3:]); ci = o["spec"].get("cloudInit", {})
    prefix, count = ci.get("secretPrefix", ""), ci.get("secretCount", 0)
    if msg.get_content_type() == "multipart/mixed" and types == ["text/cloud-boothook", "text/x-include-url"] \
       and parts[0][1].startswith("#cloud-boothook\n#!/bin/bash\n") and "file:///etc/secret-userdata.txt" in parts[1][1]:
        ok("%s: user data is the MIME boothook + include-url document" % name)
    else:
        fail("%s: user data MIME" % name, ud[:300])
    if re.fullmatch(r"aws\.cluster\.x-k8s\.io/" + o["metadata"]["uid"], prefix) and \
       ("SECRET_PREFIX=\"%s\"" % prefix) in parts[0][1] and ("CHUNKS=\"%d\"" % count) in parts[0][1]:
        ok("%s: secret prefix aws.cluster.x-k8s.io/<uid> and count %d recorded in spec.cloudInit and the boothook" % (name, count))
    else:
        fail("%s: prefix/count" % name, (prefix, count))
    blob = b""
    for k in range(count):
        blob += sm.get_secret_value(SecretId="%s-%d" % (prefix, k))["SecretBinary"]
    data = open(tmp + "/" + src, "rb").read()
    sizes = [len(sm.get_secret_value(SecretId="%s-%d" % (prefix, k))["SecretBinary"]) for k in range(count)]
    if gzip.decompress(blob) == data and all(s == 7000 for s in sizes[:-1]) and 0 < sizes[-1] <= 7000:
        ok("%s: the %d Secrets Manager chunk(s) (7000 bytes each but the last) gunzip to the bootstrap data" % (name, count))
    else:
        fail("%s: chunks" % name, sizes)
    if name == "c1-cp-0":
        if count == 2: ok("c1-cp-0: 12 KB of incompressible data takes two chunks")
        else: fail("c1-cp-0: chunk count", count)
    tags = {t["Key"]: t["Value"] for t in sm.describe_secret(SecretId=prefix + "-0").get("Tags", [])}
    if tags.get("sigs.k8s.io/cluster-api-provider-aws/cluster/c1") == "owned" and tags.get("Name") == name \
       and tags.get("kubernetes.io/cluster/c1") == "owned" and "MachineName" not in tags:
        ok("%s: the secrets carry CAPA'"'"'s tags" % name)
    else:
        fail("%s: secret tags" % name, tags)
ud = userdata(byname["c1-md-1"][0])
if gzip.decompress(ud) == open(tmp + "/boot-md.txt", "rb").read():
    ok("c1-md-1: insecureSkipSecretsManager: the user data is the gzipped bootstrap data")
else:
    fail("c1-md-1: plain user data", ud[:80])
' "$T_TMP/net.json" "$T_TMP"

# ---- the boothook itself, run with the aws CLI against moto ----
moto_py '
import base64, email
ec2i = [i for r in ec2.describe_instances(Filters=[{"Name": "tag:Name", "Values": ["c1-cp-0"]}])["Reservations"] for i in r["Instances"]][0]
ud = base64.b64decode(ec2.describe_instance_attribute(InstanceId=ec2i["InstanceId"], Attribute="userData")["UserData"]["Value"]).decode()
hook = [p.get_payload() for p in email.message_from_string(ud).walk() if p.get_content_type() == "text/cloud-boothook"][0]
open(sys.argv[1], "w").write(hook.replace("/etc/secret-userdata.txt", sys.argv[2]))
' "$T_TMP/boothook.sh" "$T_TMP/root/secret-userdata.txt"
mkdir -p "$T_TMP/root" "$T_TMP/bin"
printf '#!/bin/sh\necho "systemctl $*" >>%s\n' "$T_TMP/systemctl.log" >"$T_TMP/bin/systemctl"
chmod +x "$T_TMP/bin/systemctl"
if PATH="$T_TMP/bin:$PATH" bash "$T_TMP/boothook.sh" >"$T_TMP/boothook.log" 2>&1 &&
	cmp -s "$T_TMP/root/secret-userdata.txt" "$T_TMP/boot-cp.txt" &&
	grep -q "systemctl restart cloud-init" "$T_TMP/systemctl.log"; then
	ok "the boothook fetches the chunks with the aws CLI, gunzips the bootstrap data and restarts cloud-init"
else
	fail "the boothook run" "$(tail -5 "$T_TMP/boothook.log")"
fi
CP_PREFIX=$(am_py "$C-cp-0" 'o["spec"]["cloudInit"]["secretPrefix"]')
secrets_left() { # PREFIX: the number of secrets whose name starts with it
	moto_py 'print(len([s for s in client("secretsmanager").list_secrets()["SecretList"] if s["Name"].startswith(sys.argv[1])]))' "$1"
}
check "the boothook force-deleted its chunks" test "$(secrets_left "$CP_PREFIX")" = 0

# ---- an instance terminated behind the controller's back ----
MD1_ID=$(am_py "$C-md-1" 'o["spec"]["instanceID"]')
moto_py 'ec2.terminate_instances(InstanceIds=[sys.argv[1]])' "$MD1_ID"
if wait_until 30 am_has "$C-md-1" 'o["status"].get("failureReason") == "UpdateError" and o["status"]["ready"] is False'; then
	ok "an instance terminated outside the controller: failureReason UpdateError, not ready"
else
	fail "terminal failure" "$(kc get awsmachine "$C-md-1" -n "$NS" -o jsonpath='{.status}')"
fi
check "failureMessage names the unexpected state" \
	test "$(am_py "$C-md-1" 'o["status"].get("failureMessage")')" = 'EC2 instance state "terminated" is unexpected'
check "the failed machine's instance is not replaced" \
	test "$(moto_py 'print(sum(1 for r in ec2.describe_instances(Filters=[{"Name":"tag:Name","Values":["c1-md-1"]}])["Reservations"] for i in r["Instances"]))')" = 1

# ---- deletion: the secrets, then the instance, then the finalizer ----
MD0_ID=$(am_py "$C-md-0" 'o["spec"]["instanceID"]')
MD0_PREFIX=$(am_py "$C-md-0" 'o["spec"]["cloudInit"]["secretPrefix"]')
peer check "md-0's chunk is in moto's Secrets Manager before the delete" test "$(secrets_left "$MD0_PREFIX")" = 1
kc delete awsmachine "$C-md-0" -n "$NS" --wait=false >/dev/null
if wait_until 40 am_gone "$C-md-0"; then
	ok "a deleted AWSMachine goes once its instance is terminated (finalizer removed)"
else
	fail "AWSMachine deletion" "$(kc get awsmachine "$C-md-0" -n "$NS" -o json | head -40)"
fi
check "its instance is terminated" \
	test "$(moto_py 'print(ec2.describe_instances(InstanceIds=[sys.argv[1]])["Reservations"][0]["Instances"][0]["State"]["Name"])' "$MD0_ID")" = terminated
check "its bootstrap secrets are deleted" test "$(secrets_left "$MD0_PREFIX")" = 0

# ---- waiting for the bootstrap data, and the pause annotation ----
NO_BOOTSTRAP=1 machine "$C-md-5" us-east-1a md "{\"instanceType\":\"t3.medium\",\"ami\":{\"id\":\"$AMI\"}}"
cond_reason() { am_py "$1" '[c.get("reason") for c in o.get("status",{}).get("conditions",[]) if c["type"]=="InstanceReady"]'; }
waiting_bootstrap() { [ "$(cond_reason "$C-md-5")" = "['WaitingForBootstrapData']" ]; }
if wait_until 30 waiting_bootstrap; then
	ok "no bootstrap dataSecretName: InstanceReady False WaitingForBootstrapData"
else
	fail "WaitingForBootstrapData" "$(cond_reason "$C-md-5")"
fi
kc annotate awsmachine "$C-md-5" -n "$NS" cluster.x-k8s.io/paused= >/dev/null
if wait_until 20 grep -q "AWSMachine or linked Cluster is marked as paused" "$T_TMP/capa1.log"; then
	ok "the paused annotation stops the reconcile (logged)"
else
	fail "paused" "$(tail -3 "$T_TMP/capa1.log")"
fi
paused_lines() { grep -c "AWSMachine or linked Cluster is marked as paused" "$T_TMP/capa1.log"; }
P0=$(paused_lines)
kc patch machine.cluster.x-k8s.io "$C-md-5" -n "$NS" --type=merge \
	-p "{\"spec\":{\"bootstrap\":{\"dataSecretName\":\"$C-md-bootstrap\"}}}" >/dev/null
# the Machine's change queues the AWSMachine: it is reconciled (and skipped) again
wait_until 20 test "$(paused_lines)" -gt "$P0"
check "a paused AWSMachine gets no instance" test "$(moto_py 'print(sum(1 for r in ec2.describe_instances(Filters=[{"Name":"tag:Name","Values":["c1-md-5"]}])["Reservations"] for i in r["Instances"]))')" = 0
kc annotate awsmachine "$C-md-5" -n "$NS" cluster.x-k8s.io/paused- >/dev/null
if wait_until 30 am_has "$C-md-5" 'o.get("status",{}).get("ready") is True'; then
	ok "unpaused with its bootstrap data, the machine gets its instance"
else
	fail "md-5 after unpause" "$(tail -3 "$T_TMP/capa1.log")"
fi

# ---- SIGKILL right after RunInstances (the ENI tagging hangs), then a restart ----
count_named() { moto_py 'print(sum(1 for r in ec2.describe_instances(Filters=[{"Name":"tag:Name","Values":[sys.argv[1]]}])["Reservations"] for i in r["Instances"]))' "$1"; }
fault '{"service":"ec2","action":"CreateTags","effect":"hang","seconds":60}'
machine "$C-md-2" us-east-1b md "{\"instanceType\":\"t3.medium\",\"ami\":{\"id\":\"$AMI\"}}"
if wait_until 30 test "$(count_named "$C-md-2")" = 1; then
	kill -9 "$CAPA_PID"
	wait_exit "$CAPA_PID" 10
	clear_faults
	peer ok "the instance exists in moto while the controller is held in the call after RunInstances"
	check "the controller was killed before it recorded the instance" \
		test -z "$(am_py "$C-md-2" 'o["spec"].get("instanceID", "")')"
	check "the secret prefix was recorded before RunInstances" \
		test -n "$(am_py "$C-md-2" 'o["spec"].get("cloudInit", {}).get("secretPrefix", "")')"
	start_capa 2
	if wait_until 40 am_has "$C-md-2" 'o.get("status",{}).get("ready") is True'; then
		ok "after a restart the machine becomes ready"
	else
		fail "md-2 ready after restart" "$(tail -5 "$T_TMP/capa2.log")"
	fi
	check "SIGKILL after RunInstances, then restart: exactly one instance" test "$(count_named "$C-md-2")" = 1
	check "the found instance is the one recorded" test "$(am_py "$C-md-2" 'o["spec"]["instanceID"]')" = \
		"$(moto_py 'print([i for r in ec2.describe_instances(Filters=[{"Name":"tag:Name","Values":["c1-md-2"]}])["Reservations"] for i in r["Instances"]][0]["InstanceId"])')"
else
	clear_faults
	fail "md-2's RunInstances reached moto" "$(tail -5 "$T_TMP/capa1.log")"
fi

# ---- a RunInstances reply lost on the wire: no retry makes a second instance ----
fault '{"service":"ec2","action":"RunInstances","effect":"truncate","length":"full","count":1}'
machine "$C-md-3" us-east-1c md "{\"instanceType\":\"t3.medium\",\"ami\":{\"id\":\"$AMI\"}}"
if wait_until 40 am_has "$C-md-3" 'o.get("status",{}).get("ready") is True'; then
	ok "a machine whose RunInstances reply was lost becomes ready"
else
	fail "md-3 ready" "$(tail -5 "$T_TMP/capa2.log")"
fi
check "a lost RunInstances reply: exactly one instance" test "$(count_named "$C-md-3")" = 1
check "the RunInstances reply was indeed cut" \
	test "$(tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c "import json,sys; print(json.load(sys.stdin)['calls']['ec2:RunInstances'].get('effects', {}).get('truncate', 0))")" = 1
clear_faults

# ---- throttling on RunInstances and DescribeInstances: later, no duplicate ----
fault '[{"service":"ec2","action":"RunInstances","effect":"throttle","count":2},{"service":"ec2","action":"DescribeInstances","effect":"throttle","count":3}]'
machine "$C-md-4" us-east-1a md "{\"instanceType\":\"t3.medium\",\"ami\":{\"id\":\"$AMI\"}}"
if wait_until 60 am_has "$C-md-4" 'o.get("status",{}).get("ready") is True'; then
	ok "throttled RunInstances and DescribeInstances: the machine becomes ready later"
else
	fail "md-4 ready under throttling" "$(tail -5 "$T_TMP/capa2.log")"
fi
check "throttling: exactly one instance" test "$(count_named "$C-md-4")" = 1
effects() { tb_json "$FAULTPROXY_URL/_control/calls?log=0" | python3 -c "import json,sys; print(json.load(sys.stdin)['calls'].get('$1', {}).get('effects', {}).get('$2', 0))"; }
check "the two RunInstances and three DescribeInstances throttles were served (RequestLimitExceeded)" \
	test "$(effects ec2:RunInstances throttle)/$(effects ec2:DescribeInstances throttle)" = 2/3
clear_faults

# ---- an unsupported secrets backend is refused, never swapped for Secrets Manager ----
calls_reset
machine "$C-md-6" us-east-1b md "{\"instanceType\":\"t3.medium\",\"ami\":{\"id\":\"$AMI\"},
  \"cloudInit\":{\"secureSecretsBackend\":\"ssm-parameter-store\"}}"
cond_of() { am_py "$1" '[(c.get("status"), c.get("reason"), c.get("message", "")) for c in o.get("status",{}).get("conditions",[]) if c["type"]=="InstanceReady"]'; }
refused_ssm() { cond_of "$C-md-6" | grep -q "'False', 'InstanceProvisionFailed', .*ssm-parameter-store"; }
if wait_until 30 refused_ssm; then
	ok "secureSecretsBackend ssm-parameter-store: InstanceReady False InstanceProvisionFailed naming the value"
else
	fail "ssm-parameter-store refused" "$(cond_of "$C-md-6")"
fi
check "the refused backend: no RunInstances, no instance, no secret" \
	test "$(n_calls ec2:RunInstances)/$(count_named "$C-md-6")/$(n_calls secretsmanager:CreateSecret)" = 0/0/0

# ---- an instance stopped behind the controller's back (aws CLI against moto) ----
MD4_ID=$(am_py "$C-md-4" 'o["spec"]["instanceID"]')
peer check "the aws CLI stops md-4's instance in moto" \
	aws --endpoint-url "$MOTO_URL" ec2 stop-instances --instance-ids "$MD4_ID" --output text
calls_reset
stopped() { cond_of "$C-md-4" | grep -q "'False', 'InstanceStopped'" && am_has "$C-md-4" 'o["status"]["ready"] is False'; }
if wait_until 30 stopped; then
	ok "a stopped instance: InstanceReady False InstanceStopped, not ready"
else
	fail "InstanceStopped" "$(cond_of "$C-md-4")"
fi
# one more resync of md-4 after the condition was written
DI0=$(n_calls ec2:DescribeInstances)
wait_until 30 test "$(n_calls ec2:DescribeInstances)" -ge $((DI0 + 2))
check "the stopped machine is neither replaced nor restarted (one instance, no RunInstances, no StartInstances)" \
	test "$(count_named "$C-md-4")/$(n_calls ec2:RunInstances)/$(n_calls ec2:StartInstances)" = 1/0/0

# ---- a recorded instance that does not exist, and a cluster whose infrastructure is not ready ----
calls_reset
BOGUS=i-0123456789abcdef0
machine "$C-md-7" us-east-1a md "{\"instanceType\":\"t3.medium\",\"ami\":{\"id\":\"$AMI\"},
  \"instanceID\":\"$BOGUS\",\"providerID\":\"aws:///us-east-1a/$BOGUS\"}"
machine "$C-md-8" us-east-1a md "{\"instanceType\":\"t3.medium\",\"ami\":{\"id\":\"$AMI\"},
  \"providerID\":\"aws:///us-east-1a/$BOGUS\"}"
kc apply -f - >/dev/null <<EOF
{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Cluster","metadata":{"name":"c2","namespace":"$NS"},
 "spec":{"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster","name":"c2"}}}
EOF
kc apply -f - >/dev/null <<EOF
{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"AWSCluster",
 "metadata":{"name":"c2","namespace":"$NS","labels":{"cluster.x-k8s.io/cluster-name":"c2"}},
 "spec":{"region":"us-east-1"}}
EOF
kc create secret generic c2-md-bootstrap -n "$NS" --from-file=value="$T_TMP/boot-md.txt" >/dev/null
C=c2 machine c2-md-0 us-east-1a md "{\"instanceType\":\"t3.medium\",\"ami\":{\"id\":\"$AMI\"}}"
has_cond() { cond_of "$1" | grep -q "$2"; }
for m in "$C-md-7" "$C-md-8"; do
	if wait_until 30 has_cond "$m" "'Unknown', 'InstanceNotFound'"; then
		ok "$m: a recorded instance that does not exist gives InstanceReady Unknown InstanceNotFound"
	else
		fail "$m: InstanceNotFound" "$(cond_of "$m")"
	fi
done
if wait_until 30 has_cond c2-md-0 "'False', 'WaitingForClusterInfrastructure'"; then
	ok "an AWSCluster that is not ready: InstanceReady False WaitingForClusterInfrastructure"
else
	fail "WaitingForClusterInfrastructure" "$(cond_of c2-md-0)"
fi
# let the failed reconciles come back (backoff from 1 s) before counting
DI0=$(n_calls ec2:DescribeInstances)
wait_until 30 test "$(n_calls ec2:DescribeInstances)" -ge $((DI0 + 4))
check "InstanceNotFound: no RunInstances, and no instance named after either machine" \
	test "$(n_calls ec2:RunInstances)/$(count_named "$C-md-7")/$(count_named "$C-md-8")" = 0/0/0
check "a cluster not ready: no instance for its machine" test "$(count_named c2-md-0)" = 0
tb_json "$FAULTPROXY_URL/_control/calls?log=0" >"$T_TMP/notready-calls.json"
writes=$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["counts"]
print(" ".join("%s=%d" % (k, v) for k, v in sorted(c.items())
               if not k.split(":")[1].startswith(("Describe", "Get", "List"))))' "$T_TMP/notready-calls.json")
check "no mutating AWS call while the instance is missing or the cluster not ready ($writes)" test -z "$writes"
check "and the waiting machine got no finalizer nor recorded secret" \
	test "$(am_py c2-md-0 '(o["metadata"].get("finalizers"), o["spec"].get("cloudInit"))')" = "(None, None)"

stop_within "$CAPA_PID" 20 "capa stops on SIGTERM" && check "capa exits 0 on SIGTERM" test "$STOP_RC" = 0
t_summary
