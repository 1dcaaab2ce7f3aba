#!/usr/bin/env bash
# tests: product
# The upstream charts' manifests run unchanged (tests/data/manifests/upstream/: the EBS CSI
# driver's chart with its defaults and with common values, the AWS cloud-controller-manager's
# chart, Deckhouse's cloud-provider-aws module, the node-termination-handler's chart in IMDS and
# in queue mode; only image and command changed): every aws-k8s
# container in them is started through tests/lib/manifest_run.py as the kubelet would start it
# (command, args with $(VAR) expanded, the container's env with its fieldRefs, Secrets and
# ConfigMaps resolved), through links named like the upstream binaries, against moto, the
# metadata fake (filled from a moto instance with an instance profile and a cluster tag) and
# the test API server (a Node named like the instance). For each: every flag of its args is one
# that `<binary> [mode] --help` lists; it starts (no exit 2, no usage error) and comes up (the
# CSI socket answers GetPluginInfo and Probe, the node reports the instance; the ccm serves
# /healthz, syncs its Node informer and holds its Lease with the cluster ID of its cloud config
# or of the instance's tag - two different IDs here); its AWS credentials come from where the
# manifest says (a Secret's keys in its environment, else the instance profile); the flags it
# accepts without an effect are named at most once, in its one start-up warning (the list is
# printed as "note - ..." lines); flags and variables with an effect are checked where cheap (metrics endpoints, tags on a created volume,
# DISABLE_TAINT_WATCHER, the untainting of the Node, --logging-format=json, the preStop hook);
# SIGTERM stops it with status 0 within 2 s (CSI) or 10 s (ccm). The manifests also pass
# `kubectl apply --dry-run=server --validate=strict` against the test API server (checks of the
# test data, counted as peer checks). The chart's metadata-labeler sidecar (mode metadataLabeler)
# must hold its Lease and write the two count labels on the Node.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../lib/manifest_lib.sh"

for t in jq curl kubectl python3; do
	command -v $t >/dev/null || { skip "upstream manifests" "$t is needed"; t_summary; }
done
python3 -c 'import yaml' 2>/dev/null || { skip "upstream manifests" "python3 has no PyYAML"; t_summary; }

DATA=$T_ROOT/tests/data/manifests/upstream
IMAGE=aws-k8s:test
CLUSTER=3b5e8a1c-6f2d-4e9a-9c1b-7d4f2a8e6b10 # the Deckhouse manifests' clusterUUID (cloud config)
TAG_CLUSTER=chart-cluster                    # the instance's cluster tag (a ccm without config)
TAINT=ebs.csi.aws.com/agent-not-ready
USAGE_ERR="unknown flag|invalid [a-zA-Z]+ value|needs a value|unexpected argument|unknown mode|Usage:"
expect() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$3', want '$2'"; fi; }

# ---- the peers ----
moto_start && peer ok "moto starts" || { peer fail "moto starts"; t_summary; }
inst=$(moto_py '
iam.create_role(RoleName="node", AssumeRolePolicyDocument="{}")
iam.create_instance_profile(InstanceProfileName="node")
iam.add_role_to_instance_profile(InstanceProfileName="node", RoleName="node")
i = run_instance(InstanceType="m5.large", Placement={"AvailabilityZone": "us-east-1a"},
                 IamInstanceProfile={"Name": "node"},
                 tags={"Name": "node", "kubernetes.io/cluster/" + sys.argv[1]: "owned"})
d = ec2.describe_instances(InstanceIds=[i])["Reservations"][0]["Instances"][0]
print(i, d["PrivateDnsName"])' "$TAG_CLUSTER")
read -r IID NODE <<<"$inst"
[[ $IID == i-* && -n $NODE ]] && peer ok "moto instance $IID ($NODE)" || { peer fail "moto instance" "$inst"; t_summary; }
if imds_start --from-moto "$MOTO_URL" --instance-id "$IID"; then
	peer ok "the metadata fake starts, filled from the moto instance"
else
	peer fail "the metadata fake starts"
	t_summary
fi
peer check "the metadata fake serves the instance profile's credentials" \
	curl -sf "$IMDS_URL/latest/meta-data/iam/security-credentials/node"
KC=$T_TMP/kc
KAS_PORT=$(free_port)
export KUBECACHEDIR=$T_TMP/kcache
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KAS_PORT" --kubeconfig-out "$KC"
wait_http "https://127.0.0.1:$KAS_PORT/healthz" 30 && [ -s "$KC" ] &&
	peer ok "the test API server starts" || { peer fail "the test API server starts"; t_summary; }
kc() { kubectl --kubeconfig "$KC" "$@"; }
kc create -f - >/dev/null <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"$NODE","labels":{"topology.kubernetes.io/zone":"us-east-1a","topology.kubernetes.io/region":"us-east-1"}},
 "spec":{"providerID":"aws:///us-east-1a/$IID"},
 "status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}
EOF
peer check "the Node $NODE is created" kc get node "$NODE"
# what kubelet does once node-driver-registrar has registered the plugin: the CSINode lists the
# driver (the node plugin removes its startup taint only then)
kc create -f - >/dev/null <<EOF
{"apiVersion":"storage.k8s.io/v1","kind":"CSINode","metadata":{"name":"$NODE"},
 "spec":{"drivers":[{"name":"ebs.csi.aws.com","nodeID":"$IID","allocatable":{"count":25}}]}}
EOF
peer check "the CSINode $NODE lists ebs.csi.aws.com (kubelet's registration)" kc get csinode "$NODE"
peer check "namespace d8-cloud-provider-aws is created (the module's namespace.yaml)" \
	kc create namespace d8-cloud-provider-aws

# ---- the manifests against the test API server ----
for f in "$DATA"/*.yaml; do
	out=$(kc apply --dry-run=server --validate=strict -f "$f" 2>&1)
	rc=$?
	n=$(grep -c "(server dry run)" <<<"$out")
	want=$(python3 -c 'import sys, yaml; print(sum(1 for d in yaml.safe_load_all(open(sys.argv[1])) if d))' "$f")
	if [ $rc = 0 ] && [ "$n" = "$want" ]; then
		peer ok "kubectl apply --dry-run=server --validate=strict: ${f##*/} ($n objects)"
	else
		peer fail "kubectl apply --dry-run=server --validate=strict: ${f##*/}" "exit $rc: $out"
	fi
done

# ---- links named like the upstream binaries (the image, make install) ----
BIN=$T_TMP/bin
mkdir -p "$BIN"
for n in aws-ebs-csi-driver aws-cloud-controller-manager node-termination-handler; do ln -s "$AWS_K8S" "$BIN/$n"; done

# the flags of a manifest's args, the help of the binary it runs: "--name value" lines for the
# flags in the args that the help does not list, and "--name" lines for those the help marks as
# without effect (with a value other than the default)
cat >"$T_TMP/flags.py" <<'PY'
import json, re, sys
args, help_text = json.loads(sys.argv[1]), open(sys.argv[2]).read()
rows = {}
for line in help_text.splitlines():
    m = re.match(r"\s+(?:-\w, )?--([\w-]+)(?: (\S+))?\s*(.*)", line)
    if m:
        d = re.search(r'\(default "?([^")]*)"?\)', m.group(3))
        rows[m.group(1)] = ("(accepted; no effect here)" in m.group(3), m.group(2),
                            d.group(1) if d else ("false" if m.group(2) is None else ""))
for a in args:
    if not a.startswith("-"):
        continue
    name, eq, val = a.lstrip("-").partition("=")
    if name not in rows:
        print("unknown --" + name)
        continue
    no_effect, typ, default = rows[name]
    if not eq:
        val = "true" if typ is None else ""
    if no_effect and val != default:
        print("noeffect --" + name)
PY
# the flags named by the start-up warning(s) of a log, text or JSON format, one per line
warned() {
	grep -a "have no effect here" "$1" | python3 -c '
import json, re, sys
for line in sys.stdin:
    line = line.strip()
    try:
        v = json.loads(line).get("flags", "")
    except ValueError:
        m = re.search(r"flags=\"([^\"]*)\"", line)
        v = m.group(1) if m else ""
    for f in v.split(","):
        if f.strip():
            print(f.strip().split("=")[0].split(" ")[0])'
}

# the values the cluster supplies: the Node the pod runs on, its host IP, the chart's optional
# aws-secret (given, so that the controller takes its keys from it)
VALUES=(--set "fieldRef:spec.nodeName=$NODE" --set fieldRef:status.hostIP=127.0.0.1
	--set fieldRef:metadata.name=test-pod
	--set secretKeyRef:aws-secret/key_id=testing --set secretKeyRef:aws-secret/access_key=testing)
# what the test bed adds to the container's environment (tests/lib/manifest_lib.sh)
mr_peer_env "$MOTO_URL" "$IMDS_URL" "$KC"
PEER_ENV=("${MR_PEER_ENV[@]}")

c() { "$AWS_K8S" csi-client --endpoint "unix://$SOCK" --timeout 30s "$@"; }

# csi_checks ID JSON: the CSI plugin is up; what its flags and variables do
csi_checks() {
	local id=$1 json=$2 mode=$3 out i
	SOCK=$(jq -r '(.argv[] | select(startswith("--endpoint=")) | sub("^--endpoint=";"")) // .env.CSI_ENDPOINT' <<<"$json" |
		head -n 1 | sed -E 's#^unix:(//)?##')
	mr_csi_wait "$SOCK" "$PID"
	out=$(c get-plugin-info 2>&1)
	expect "$id: comes up: GetPluginInfo on its socket" ebs.csi.aws.com "$(jq -r .name <<<"$out" 2>/dev/null)"
	expect "$id: Probe is ready" true "$(c probe 2>/dev/null | jq -r .ready)"
	if [ "$mode" = node ]; then
		expect "$id: NodeGetInfo: the instance of the metadata service" "$IID" \
			"$(c node-get-info 2>/dev/null | jq -r .node_id)"
		if jq -e '.env.CSI_NODE_NAME' <<<"$json" >/dev/null; then
			if jq -e '.env.DISABLE_TAINT_WATCHER == "true"' <<<"$json" >/dev/null; then
				grep -q "DISABLE_TAINT_WATCHER is set" "$LOG" &&
					kc get node "$NODE" -o json | jq -e --arg t "$TAINT" '[.spec.taints[]?.key] | index($t)' >/dev/null &&
					ok "$id: DISABLE_TAINT_WATCHER=true: the Node keeps $TAINT" ||
					fail "$id: DISABLE_TAINT_WATCHER=true: the Node keeps $TAINT" "$(kc get node "$NODE" -o jsonpath='{.spec.taints}')"
			else
				for ((i = 0; i < 100; i++)); do
					kc get node "$NODE" -o json | jq -e --arg t "$TAINT" '[.spec.taints[]?.key] | index($t) | not' >/dev/null && break
					sleep 0.1
				done
				[ $i -lt 100 ] && ok "$id: CSI_NODE_NAME: the plugin removes $TAINT from its Node" ||
					fail "$id: CSI_NODE_NAME: the plugin removes $TAINT from its Node" "$(kc get node "$NODE" -o jsonpath='{.spec.taints}')"
			fi
		fi
	fi
	# --http-endpoint: the metrics server answers (on the free port it was moved to)
	for ep in $(jq -r '.argv[] | select(startswith("--http-endpoint=")) | sub("^--http-endpoint=";"")' <<<"$json"); do
		expect "$id: --http-endpoint=$ep: /metrics answers 200" 200 \
			"$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ep##*:}/metrics")"
	done
	if [ "$mode" = controller ] && jq -e '.argv[] | select(startswith("--extra-tags="))' <<<"$json" >/dev/null; then
		out=$(c create-volume --name "pvc-$RANDOM" --size 1Gi --capability mount:ext4 --zone us-east-1a 2>&1)
		local vol
		vol=$(jq -r .volume.volume_id <<<"$out" 2>/dev/null)
		[[ $vol == vol-* ]] && ok "$id: CreateVolume ($vol)" || fail "$id: CreateVolume" "$out"
		moto_py_checks '
v = ec2.describe_volumes(VolumeIds=[sys.argv[1]])["Volumes"][0]
tags = {t["Key"]: t["Value"] for t in v.get("Tags", [])}
args = json.loads(sys.argv[3])
want = dict(kv.split("=", 1) for a in args if a.startswith("--extra-tags=") for kv in a.split("=", 1)[1].split(","))
for a in args:
    if a.startswith("--k8s-tag-cluster-id="):
        want["kubernetes.io/cluster/" + a.split("=", 1)[1]] = "owned"
eq(sys.argv[2] + ": the manifest'"'"'s --extra-tags and --k8s-tag-cluster-id are on the volume",
   {k: tags.get(k) for k in want}, want)
' "$vol" "$id" "$(jq -c .argv <<<"$json")"
		out=$(c delete-volume --volume "$vol" 2>&1) && ok "$id: DeleteVolume" || fail "$id: DeleteVolume" "$out"
	fi
}

# ccm_checks ID JSON: the manager is up: /healthz, the Node informer, the Lease, its cluster ID
labeler_checks() {
	local id=$1 i enis vols
	for ((i = 0; i < 200; i++)); do
		enis=$(kc get node "$NODE" -o jsonpath='{.metadata.labels.ebs\.csi\.aws\.com/enis-count}' 2>/dev/null)
		[ -n "$enis" ] && break
		sleep 0.1
	done
	vols=$(kc get node "$NODE" -o jsonpath='{.metadata.labels.ebs\.csi\.aws\.com/non-csi-ebs-volumes-count}' 2>/dev/null)
	[[ $enis =~ ^[0-9]+$ ]] && [ "$enis" -ge 1 ] && [[ $vols =~ ^[0-9]+$ ]] &&
		ok "$id: labels the Node with its ENI and non-CSI volume counts ($enis, $vols)" ||
		fail "$id: labels the Node with its ENI and non-CSI volume counts" "enis='$enis' volumes='$vols': $(tail -n 3 "$LOG")"
	[ -n "$(kc get lease -A -o json | jq -r '.items[] | select(.metadata.name == "metadata-labeler-ebs.csi.aws.com") | .spec.holderIdentity // empty')" ] &&
		ok "$id: holds the Lease metadata-labeler-ebs.csi.aws.com" ||
		fail "$id: holds the Lease metadata-labeler-ebs.csi.aws.com" "$(kc get lease -A 2>&1 | head -n 5)"
}
ccm_checks() {
	local id=$1 json=$2 port code want i
	port=$(jq -r '[.argv[] | select(startswith("--secure-port=")) | sub("^--secure-port=";"")] | last' <<<"$json")
	wait_http "https://127.0.0.1:$port/healthz" 20
	code=$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$port/healthz")
	expect "$id: comes up: /healthz on its secure port answers 200" 200 "$code"
	for ((i = 0; i < 150; i++)); do
		grep -q "node informer synced" "$LOG" && break
		sleep 0.1
	done
	grep -q "node informer synced" "$LOG" && ok "$id: leads and runs its controllers (node informer synced)" ||
		fail "$id: leads and runs its controllers (node informer synced)" "$(tail -n 5 "$LOG")"
	[ -n "$(kc -n kube-system get lease cloud-controller-manager -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)" ] &&
		ok "$id: holds the Lease kube-system/cloud-controller-manager" ||
		fail "$id: holds the Lease kube-system/cloud-controller-manager"
	# with --cloud-config, its KubernetesClusterID; without, the tag of its own instance
	want=$TAG_CLUSTER
	jq -e '.argv[] | select(startswith("--cloud-config="))' <<<"$json" >/dev/null && want=$CLUSTER
	grep -qE "AWS cloud provider.*cluster=\"?$want\"" "$LOG" &&
		ok "$id: cluster ID $want (its cloud config, else its instance's tag)" ||
		fail "$id: cluster ID $want" "$(grep -a "AWS cloud provider\|cluster" "$LOG" | head -n 3)"
}

# nth_checks ID JSON: the node-termination-handler is up in the chart's mode: IMDS mode reads
# its instance's metadata and a spot notice cordons its Node (undone after); queue mode polls
# the chart's queue (made in moto); the probes server and the metrics as the chart's variables
# say; JSON_LOGGING
nth_checks() {
	local id=$1 json=$2 port i missing v
	# every variable the chart sets is one the binary reads: its --help lists it as [$NAME]
	missing=
	for v in $(jq -r '.container_env | keys[]' <<<"$json"); do
		grep -qF "[\$$v]" "$help" || missing+="$v "
	done
	[ -z "$missing" ] && ok "$id: every variable the chart sets is listed by 'node-termination-handler --help'" ||
		fail "$id: every variable the chart sets is listed by 'node-termination-handler --help'" "not listed: $missing"
	if jq -e '.container_env.ENABLE_SQS_TERMINATION_DRAINING == "true"' <<<"$json" >/dev/null; then
		wait_until_log "queue mode: polling" 200
		grep -q "queue mode: polling" "$LOG" && ok "$id: comes up in queue mode and polls the chart's QUEUE_URL" ||
			fail "$id: comes up in queue mode" "$(tail -n 3 "$LOG")"
	else
		wait_until_log "instance metadata" 200
		grep -a "instance metadata" "$LOG" | grep -q "$IID" && ok "$id: comes up in IMDS mode: its instance's metadata ($IID)" ||
			fail "$id: comes up in IMDS mode" "$(tail -n 3 "$LOG")"
		tb_post "$IMDS_URL/_control/spot" '{"action":"terminate","in":60}' >/dev/null
		for ((i = 0; i < 100; i++)); do
			[ "$(kc get node "$NODE" -o jsonpath='{.spec.unschedulable}')" = true ] && break
			sleep 0.1
		done
		[ $i -lt 100 ] && ok "$id: a spot notice cordons its Node (NODE_NAME from spec.nodeName)" ||
			fail "$id: a spot notice cordons its Node" "$(tail -n 3 "$LOG")"
		tb_delete "$IMDS_URL/_control/spot" >/dev/null
		kc uncordon "$NODE" >/dev/null
	fi
	if jq -e '.container_env.ENABLE_PROBES_SERVER == "true"' <<<"$json" >/dev/null; then
		port=$(jq -r .container_env.PROBES_SERVER_PORT <<<"$json")
		expect "$id: ENABLE_PROBES_SERVER: /healthz on PROBES_SERVER_PORT answers upstream's body" \
			'{"health":"OK"}' "$(curl -s "http://127.0.0.1:$port$(jq -r .container_env.PROBES_SERVER_ENDPOINT <<<"$json")")"
	fi
	if jq -e '.container_env.ENABLE_PROMETHEUS_SERVER == "true"' <<<"$json" >/dev/null; then
		port=$(jq -r .container_env.PROMETHEUS_SERVER_PORT <<<"$json")
		expect "$id: ENABLE_PROMETHEUS_SERVER: /metrics on PROMETHEUS_SERVER_PORT answers 200" 200 \
			"$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/metrics")"
	fi
	if jq -e '.container_env.JSON_LOGGING == "true"' <<<"$json" >/dev/null; then
		lines=$(grep -c . "$LOG")
		jsonl=$(jq -R 'fromjson? | objects' "$LOG" 2>/dev/null | jq -s length)
		[ "$lines" -gt 0 ] && [ "$lines" = "$jsonl" ] && ok "$id: JSON_LOGGING=true: every log line is JSON ($lines)" ||
			fail "$id: JSON_LOGGING=true: every log line is JSON" "$jsonl of $lines: $(head -n 2 "$LOG")"
	fi
}
wait_until_log() {
	local i
	for ((i = 0; i < $2; i++)); do
		grep -qa "$1" "$LOG" && return 0
		kill -0 "$PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# the chart's queue (queue mode), in moto
moto_py "sqs.create_queue(QueueName='nth-chart-queue')" >/dev/null &&
	peer ok "the queue of the node-termination-handler chart's values, in moto" || peer fail "the chart's queue in moto"

# ---- every aws-k8s container of every manifest ----
N=0
while IFS= read -r row <&3; do
	N=$((N + 1))
	src=$(jq -r .source <<<"$row")
	file=${src%#*}
	kind=$(jq -r .kind <<<"$row")
	name=$(jq -r .name <<<"$row")
	ctr=$(jq -r .container <<<"$row")
	args=$(jq -c .args <<<"$row")
	cmd=$(jq -r '.command[0] // "" | split("/") | last' <<<"$row")
	mode=$(jq -r '.args[0] // "" | select(startswith("-") | not)' <<<"$row")
	id="${file##*/}: $kind/$name/$ctr"
	files=("$file")
	# the Deckhouse driver reads the keys of the Secret the module's ccm template renders
	[[ $file == */deckhouse-ebs-csi.yaml ]] && files+=("$DATA/deckhouse-cloud-controller-manager.yaml")

	# every flag of the args is one the binary lists
	help=$T_TMP/help.$N
	"$BIN/$cmd" ${mode:+"$mode"} --help >"$help" 2>&1
	hrc=$?
	if grep -q "is not built yet" "$help"; then
		skip "$id" "$(head -n 1 "$help")"
		continue
	fi
	flagres=$(python3 "$T_TMP/flags.py" "$args" "$help")
	unknown=$(grep '^unknown ' <<<"$flagres" | cut -d' ' -f2 | tr '\n' ' ')
	[ $hrc = 0 ] && [ -z "$unknown" ] &&
		ok "$id: every flag of its args is listed by '$cmd ${mode:+$mode }--help'" ||
		fail "$id: every flag of its args is listed by '$cmd ${mode:+$mode }--help'" "exit $hrc; not listed: $unknown"
	noeffect=$(grep '^noeffect ' <<<"$flagres" | cut -d' ' -f2)

	# start it as the kubelet would
	run=("${files[@]}" --kind "$kind" --name "$name" --container "$ctr" "${VALUES[@]}" "${PEER_ENV[@]}"
		--mount-root "$T_TMP/mnt.$N" --bin-dir "$BIN")
	mapfile -t pm < <(mr_port_maps "$args")
	run+=("${pm[@]}")
	# the node-termination-handler's servers (PROBES_SERVER_PORT, PROMETHEUS_SERVER_PORT) move
	# off the host's ports, and its metadata service is the fake (the chart leaves
	# INSTANCE_METADATA_URL at 169.254.169.254)
	[ "$cmd" = node-termination-handler ] &&
		run+=(--port-map "8080=$(free_port)" --port-map "9092=$(free_port)" --env "INSTANCE_METADATA_URL=$IMDS_URL")
	# the chart's ccm sets no port: its default, 10258, moves off the host's too
	[ "$cmd" = aws-cloud-controller-manager ] && ! grep -q -- '--secure-port=' <<<"$args" &&
		run+=("--extra-arg=--secure-port=$(free_port)")
	if ! json=$(python3 "$MR" "${run[@]}" --print-json 2>&1); then
		fail "$id: manifest_run resolves the container" "$json"
		continue
	fi
	[ "$mode" = node ] && kc taint nodes "$NODE" "$TAINT=:NoExecute" --overwrite >/dev/null
	bg "run.$N" python3 "$MR" "${run[@]}" --exec
	PID=$(cat "$T_TMP/run.$N.pid")
	LOG=$T_TMP/run.$N.log
	case $cmd in
	aws-ebs-csi-driver)
		if [ "$mode" = metadataLabeler ]; then labeler_checks "$id"; else csi_checks "$id" "$json" "$mode"; fi ;;
	aws-cloud-controller-manager) ccm_checks "$id" "$json" ;;
	node-termination-handler) nth_checks "$id" "$json" ;;
	*) fail "$id: a binary this test does not know: $cmd" ;;
	esac
	if kill -0 "$PID" 2>/dev/null && ! grep -qE "$USAGE_ERR" "$LOG"; then
		ok "$id: running, no usage error"
	else
		fail "$id: running, no usage error" "$(grep -aE "$USAGE_ERR" "$LOG" | head -n 2; tail -n 3 "$LOG")"
	fi

	# the AWS credentials: the keys of its environment (a Secret), else the instance profile
	# (logged at --v=2 and above, when the first AWS call needs them)
	if [ "$mode" != node ]; then
		want=instance-profile
		jq -e '.container_env.AWS_ACCESS_KEY_ID' <<<"$json" >/dev/null && want=environment
		got=$(grep -a "using AWS credentials" "$LOG" | grep -oE 'source"?[=:]"[a-z-]+' | head -n 1 | sed -E 's/.*"//')
		v=$(jq -r '[.argv[] | select(test("^--?v=")) | sub("^--?v=";"") | tonumber] | last // 0' <<<"$json")
		if [ -n "$got" ] || [ "$v" -ge 2 ]; then
			expect "$id: AWS credentials from $want" "$want" "$got"
		fi
	fi
	if jq -e '.argv | index("--logging-format=json")' <<<"$json" >/dev/null; then
		lines=$(grep -c . "$LOG")
		jsonl=$(jq -R 'fromjson? | objects' "$LOG" 2>/dev/null | jq -s length)
		[ "$lines" -gt 0 ] && [ "$lines" = "$jsonl" ] && ok "$id: --logging-format=json: every log line is JSON ($lines)" ||
			fail "$id: --logging-format=json: every log line is JSON" "$jsonl of $lines: $(head -n 2 "$LOG")"
	fi

	# the flags without an effect: named in the one start-up warning, each once
	mapfile -t got < <(warned "$LOG")
	bad=$(printf '%s\n' "${got[@]}" | sort | uniq -d | tr '\n' ' ')
	[ -z "$bad" ] && ok "$id: no flag is named twice in the start-up warning" ||
		fail "$id: no flag is named twice in the start-up warning" "$bad"
	missing=
	for f in $noeffect; do printf '%s\n' "${got[@]}" | grep -qx -- "$f" || missing+="$f "; done
	[ -z "$missing" ] && ok "$id: the start-up warning names its flags without effect (${noeffect//$'\n'/ })" ||
		fail "$id: the start-up warning names its flags without effect" "not named: $missing; log: $(grep -a 'no effect' "$LOG")"
	[ -n "$noeffect" ] && echo "note - $id: accepted without effect: $(echo $noeffect)"
	echo "note - $id: environment: $(jq -r '.container_env | keys | join(" ")' <<<"$json")"

	# the node's preStop hook, with the container's environment (the Node is not draining)
	if [ "$mode" = node ] && python3 "$MR" "${run[@]}" --lifecycle preStop --print-argv >/dev/null 2>&1; then
		out=$(timeout 20 python3 "$MR" "${run[@]}" --lifecycle preStop --exec 2>&1)
		expect "$id: the preStop hook exits 0 (the Node is not draining)" 0 "$?"
	fi

	# SIGTERM
	bound=2
	[ "$cmd" = aws-cloud-controller-manager ] && bound=10
	[ "$cmd" = node-termination-handler ] && bound=10
	if stop_within "$PID" $bound "$id"; then
		expect "$id: SIGTERM: exits 0 within $bound s" 0 "$STOP_RC"
	fi
	if grep -qE "Sanitizer|runtime error" "$LOG"; then
		fail "$id: no sanitizer report" "$(grep -aA5 "Sanitizer\|runtime error" "$LOG" | head -n 8)"
	fi
done 3< <(python3 "$MR" "$DATA"/*.yaml --list --image "$IMAGE")
[ $N -ge 11 ] && ok "the manifests hold $N aws-k8s containers" || fail "the manifests hold the aws-k8s containers" "only $N"

t_summary
