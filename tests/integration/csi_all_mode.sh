#!/usr/bin/env bash
# tests: product
# aws-k8s ebs-csi-driver all (upstream's mode all, also the mode without a word): the Identity,
# Controller and Node services on one socket, with the union of the controller's and the node's
# flags, against moto and the metadata fake (filled from a moto instance, so the node id the
# node reports is an instance the controller can attach to). One socket answers GetPluginInfo,
# GetPluginCapabilities, ControllerGetCapabilities and NodeGetCapabilities (the exact lists),
# NodeGetInfo, and a CreateVolume, ControllerPublish to the node's own id, ControllerUnpublish
# and DeleteVolume round trip; SIGTERM stops it with status 0 within 2 s.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"

for t in jq curl; do command -v $t >/dev/null || { skip "mode all" "$t is needed"; t_summary; }; done
expect() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$3', want '$2'"; fi; }
jget() { printf '%s' "$1" | jq -r "$2"; }

moto_start && peer ok "moto starts" || { peer fail "moto starts"; t_summary; }
iid=$(moto_py 'print(run_instance(InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"}))')
[[ $iid == i-* ]] && peer ok "moto instance $iid" || { peer fail "moto instance" "$iid"; t_summary; }
if imds_start --from-moto "$MOTO_URL" --instance-id "$iid"; then
	peer ok "the metadata fake starts, filled from the moto instance"
else
	peer fail "the metadata fake starts, filled from the moto instance"
	t_summary
fi
export AWS_EC2_METADATA_SERVICE_ENDPOINT=$IMDS_URL AWS_EC2_METADATA_DISABLED=false
unset CSI_NODE_NAME

SOCK=$T_TMP/all.sock
# all [mode word...] NAME FLAGS...: starts ebs-csi-driver on $SOCK, waits for GetPluginInfo;
# sets PID
all() {
	local name=$1 i
	shift
	rm -f "$SOCK"
	bg "$name" "$AWS_K8S" ebs-csi-driver "$@" --endpoint "unix://$SOCK"
	PID=$(cat "$T_TMP/$name.pid")
	for ((i = 0; i < 200; i++)); do
		"$AWS_K8S" csi-client --endpoint "unix://$SOCK" --timeout 2s get-plugin-info \
			>/dev/null 2>&1 && return 0
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "ebs-csi-driver did not start:" >&2
	tail -n 20 "$T_TMP/$name.log" >&2
	return 1
}
c() { "$AWS_K8S" csi-client --endpoint "unix://$SOCK" --timeout 60s "$@"; }
code() {
	local err
	if err=$(c "$@" 2>&1 >/dev/null); then echo OK
	else echo "$err" | sed -n 's/^rpc error: code = \([A-Za-z]*\) .*/\1/p' | head -n 1; fi
}

# controller flags (cluster id, extra tags, the merge window) and node flags (attach limit)
# on one command line
if all all-mode all --k8s-tag-cluster-id=test --extra-tags=team=all \
	--modify-volume-request-handler-timeout=200ms --volume-attach-limit=20 --http-endpoint=127.0.0.1:0; then
	ok "ebs-csi-driver all serves one socket with the controller's and the node's flags"
else
	fail "ebs-csi-driver all serves one socket with the controller's and the node's flags"
	t_summary
fi

# ---- Identity: both services ----
expect "GetPluginInfo name" ebs.csi.aws.com "$(jget "$(c get-plugin-info)" .name)"
expect "GetPluginCapabilities: CONTROLLER_SERVICE and VOLUME_ACCESSIBILITY_CONSTRAINTS, exactly" \
	"CONTROLLER_SERVICE,VOLUME_ACCESSIBILITY_CONSTRAINTS" \
	"$(jget "$(c get-plugin-capabilities)" '[.capabilities[] | .service.type // "other"] | join(",")')"
expect "Probe is ready (the controller's EC2 dry run)" true "$(jget "$(c probe)" .ready)"

# ---- the two services' capabilities, as in their separate modes ----
expect "ControllerGetCapabilities: the controller mode's list, exactly" \
	"CREATE_DELETE_VOLUME,PUBLISH_UNPUBLISH_VOLUME,LIST_VOLUMES,LIST_VOLUMES_PUBLISHED_NODES,GET_VOLUME,CREATE_DELETE_SNAPSHOT,LIST_SNAPSHOTS,CLONE_VOLUME,EXPAND_VOLUME,MODIFY_VOLUME" \
	"$(jget "$(c controller-get-capabilities)" '[.capabilities[].rpc.type] | join(",")')"
expect "NodeGetCapabilities: the node mode's list, exactly" \
	"STAGE_UNSTAGE_VOLUME,EXPAND_VOLUME,GET_VOLUME_STATS,VOLUME_CONDITION" \
	"$(jget "$(c node-get-capabilities)" '[.capabilities[].rpc.type] | join(",")')"

# ---- NodeGetInfo: the instance of the metadata service ----
info=$(c node-get-info)
expect "NodeGetInfo: node id is the instance id" "$iid" "$(jget "$info" .node_id)"
expect "NodeGetInfo: zone" us-east-1a "$(jget "$info" '.accessible_topology.segments["topology.kubernetes.io/zone"]')"
expect "NodeGetInfo: --volume-attach-limit" 20 "$(jget "$info" .max_volumes_per_node)"

# ---- a controller round trip to the node's own id ----
out=$(c create-volume --name pvc-all --size 4Gi --param type=gp3 --capability mount:ext4 --zone us-east-1a)
vol=$(jget "$out" .volume.volume_id)
[[ $vol == vol-* ]] && ok "CreateVolume ($vol)" || fail "CreateVolume" "$out"
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
tags = {t["Key"]: t["Value"] for t in v.get("Tags", [])}
eq("moto: the volume is 4 GiB gp3", (v["Size"], v["VolumeType"]), (4, "gp3"))
eq("moto: --extra-tags reached the volume", tags.get("team"), "all")
eq("moto: --k8s-tag-cluster-id reached the volume", tags.get("kubernetes.io/cluster/test"), "owned")
' "$vol"
node=$(jget "$info" .node_id)
out=$(c controller-publish --volume "$vol" --node "$node")
expect "ControllerPublish to the NodeGetInfo id: a device path" /dev/xvdaa "$(jget "$out" .publish_context.devicePath)"
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
eq("moto: attached to the instance", [(a["InstanceId"], a["State"]) for a in v["Attachments"]], [(sys.argv[2], "attached")])
' "$vol" "$iid"
expect "ControllerUnpublish" OK "$(code controller-unpublish --volume "$vol" --node "$node")"
moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
eq("moto: detached", v["Attachments"], [])
' "$vol"
expect "DeleteVolume" OK "$(code delete-volume --volume "$vol")"
moto_py_checks '
left = [v["VolumeId"] for v in ec2.describe_volumes()["Volumes"] if v["VolumeId"] == sys.argv[1]]
eq("moto: the volume is gone", left, [])
' "$vol"
expect "a Node call on the same socket: NodeGetVolumeStats of a missing path is NotFound" NotFound \
	"$(code node-get-volume-stats --volume "$vol" --volume-path "$T_TMP/none")"

# ---- SIGTERM: both services stop ----
if stop_within "$PID" 2 "ebs-csi-driver all"; then
	expect "SIGTERM: exits 0 within 2 s" 0 "$STOP_RC"
fi
[ ! -e "$SOCK" ] && ok "the socket is removed at stop" || fail "the socket is removed at stop"

# ---- the mode without a word is all ----
if all no-word; then
	expect "no mode word: Node service (NodeGetInfo)" "$iid" "$(jget "$(c node-get-info)" .node_id)"
	expect "no mode word: Controller service (ControllerGetCapabilities answers)" OK \
		"$(code controller-get-capabilities)"
	stop_within "$PID" 2 "ebs-csi-driver (no mode word)" && expect "no mode word: SIGTERM exits 0" 0 "$STOP_RC"
else
	fail "ebs-csi-driver without a mode word serves"
fi

# ---- a node that cannot tell its id stops the whole plugin, before any AWS client ----
out=$(AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:1 timeout 30 "$AWS_K8S" ebs-csi-driver all \
	--endpoint "unix://$T_TMP/never.sock" --metadata-sources=imds 2>&1)
rc=$?
expect "no node id: exit 1" 1 "$rc"
grep -q "cannot tell the node id" <<<"$out" && ok "no node id: the error says so" || fail "no node id: the error says so" "$out"

t_summary
