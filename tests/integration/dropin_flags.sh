#!/usr/bin/env bash
# tests: product
# aws-k8s as a drop-in for the upstream binaries (issue 12): called through symlinks named like
# them (aws-cloud-controller-manager, aws-ebs-csi-driver, kube-rbac-proxy,
# node-termination-handler: upstream's flags and variables in its --help, Go's single-dash
# flags), with the mode words the EBS chart passes
# (controller, node, all: the union of both), with the command lines the upstream charts
# and Deckhouse pass, with every klog and component-base logging flag in Go's syntaxes (one
# warning line names those without an effect; -v, --logging-format and --log-file work), and
# --version on every subcommand in the upstream format. Each run ends at once: the plugins on an
# endpoint that cannot be bound, the ccm on a missing kubeconfig or cluster ID, the node plugin
# with no metadata, so a run that got past its flags exits 1 with a known message, and a usage
# error would exit 2. Then `make install` (oci_image.sh checks the image's links).
# shellcheck disable=SC2054 # commas inside flag values, not between array elements
. "$(dirname "$0")/../lib/testlib.sh"

command -v python3 >/dev/null || { skip "drop-in checks" "python3 is needed"; t_summary; }

BIN=$T_TMP/bin
mkdir -p "$BIN"
UPSTREAM="aws-cloud-controller-manager aws-ebs-csi-driver node-termination-handler kube-rbac-proxy"
for n in $UPSTREAM; do ln -s "$AWS_K8S" "$BIN/$n"; done

# no AWS, no Kubernetes: every run below stops at start-up, after its flags
export AWS_EC2_METADATA_DISABLED=true AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
export AWS_CONFIG_FILE=$T_TMP/aws-config AWS_SHARED_CREDENTIALS_FILE=$T_TMP/aws-credentials
unset CSI_NODE_NAME AWS_PROFILE KUBECONFIG AWS_EC2_ENDPOINT AWS_ENDPOINT_URL AWS_ENDPOINT_URL_EC2
NOSOCK=unix://$T_TMP/no-such-dir/csi.sock
printf '[Global]\nKubernetesClusterID=dropin\n' >"$T_TMP/cloud-config"

USAGE_ERR="unknown flag|invalid [a-zA-Z]+ value|needs a value|unexpected argument|invalid value"
SERVE_FAIL="failed to serve the CSI endpoint"
NO_NODE_ID="cannot tell the node id"
NO_KUBE="cannot reach the Kubernetes API"
NO_CLUSTER_ID="no cluster ID"
NO_EFFECT="have no effect here"

# started NAME RC TEXT CMD...: runs CMD (at most 10 s); passes when it exits RC, said TEXT (what
# it says once it has taken its flags) and printed no usage error. OUT is its output.
started() {
	local name=$1 want=$2 text=$3 rc
	shift 3
	OUT=$T_TMP/run.$((N += 1)).out
	timeout 10 "$@" >"$OUT" 2>&1
	rc=$?
	if [ "$rc" != "$want" ]; then
		fail "$name" "exit $rc, not $want: $(tail -c 600 "$OUT")"
	elif grep -qE "$USAGE_ERR" "$OUT"; then
		fail "$name" "usage error: $(grep -E "$USAGE_ERR" "$OUT" | head -n 2)"
	elif ! grep -qF -- "$text" "$OUT"; then
		fail "$name" "no '$text' in: $(tail -c 600 "$OUT")"
	else
		ok "$name"
	fi
}
N=0
has() { grep -qE -- "$2" "$OUT" && ok "$1" || fail "$1" "no /$2/ in: $(tail -c 600 "$OUT")"; }
hasnt() { ! grep -qE -- "$2" "$OUT" && ok "$1" || fail "$1" "/$2/ in: $(grep -E -- "$2" "$OUT" | head -n 3)"; }

# ---- the command lines the upstream manifests pass ----
# EBS CSI chart, controller (csi.md: --batching, --http-endpoint :3301; the rest the chart's
# template: endpoint, cluster id, extra tags, sdk debug log, logging format, user agent, -v)
EBS_CTRL=(--endpoint="$NOSOCK" --k8s-tag-cluster-id=dropin --extra-tags=team=storage,env=test
	--http-endpoint=127.0.0.1:0 --batching=true --aws-sdk-debug-log=true
	--warn-on-invalid-tag=true --logging-format=text --user-agent-extra=helm
	--enable-otel-tracing=false --v=2)
# older charts: --extra-volume-tags and --logtostderr
EBS_CTRL_OLD=(--endpoint="$NOSOCK" --extra-volume-tags=a=b --k8s-tag-cluster-id=dropin
	--logtostderr --v=5)
# every other flag of the upstream controller mode
EBS_CTRL_MORE=(--endpoint="$NOSOCK" --modify-volume-request-handler-timeout=2s
	--deprecated-metrics=false --metrics-cert-file= --metrics-key-file=
	--enable-node-local-volumes=false --kubeconfig= --metadata-sources=imds,kubernetes
	--driver-name=ebs.csi.aws.com)
# EBS CSI chart, node (csi.md: --volume-attach-limit, --legacy-xfs, --http-endpoint :3302;
# --reserved-volume-attachments and --volume-attach-limit are exclusive)
EBS_NODE=(--endpoint="$NOSOCK" --reserved-volume-attachments=2 --legacy-xfs=true
	--logging-format=text --v=2 --enable-otel-tracing=false --http-endpoint=127.0.0.1:0
	--csi-mount-point-prefix=/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/
	--metadata-sources=imds,kubernetes --windows-host-process=false)
# a Windows node's flag, ignored on Linux (upstream too): named in the warning, never refused
EBS_NODE_WINDOWS=(--endpoint="$NOSOCK" --windows-host-process=true --v=2)
EBS_NODE_LIMIT=(--endpoint="$NOSOCK" --volume-attach-limit=25 --kubeconfig=
	--enable-node-local-volumes=false --logtostderr --v=2)
# Deckhouse's CCM Deployment (ccm-and-discoverer.md: cluster CIDR, node CIDRs, cloud routes,
# provider, -v; the Deployment also sets leader election, the bind address and port and the
# cloud config), then the upstream chart's arguments (--v=2 --cloud-provider=aws) and the
# upstream docs' example (service account credentials, no cloud routes)
CCM_DECKHOUSE=(--leader-elect=true --bind-address=127.0.0.1 --secure-port=10471
	--cluster-cidr=10.111.0.0/16 --allocate-node-cidrs=true --configure-cloud-routes=true
	--cloud-config="$T_TMP/cloud-config" --cloud-provider=aws --v=2
	--kubeconfig="$T_TMP/no-kubeconfig")
CCM_CHART=(--v=2 --cloud-provider=aws)
CCM_DOCS=(--cloud-provider=aws --use-service-account-credentials=true
	--configure-cloud-routes=false --v=2)

# ---- through symlinks named like the upstream binaries ----
started "aws-ebs-csi-driver controller: the chart's controller arguments" 1 "$SERVE_FAIL" \
	"$BIN/aws-ebs-csi-driver" controller "${EBS_CTRL[@]}"
started "aws-ebs-csi-driver controller: an older chart's arguments" 1 "$SERVE_FAIL" \
	"$BIN/aws-ebs-csi-driver" controller "${EBS_CTRL_OLD[@]}"
started "aws-ebs-csi-driver controller: the other upstream controller flags" 1 "$SERVE_FAIL" \
	"$BIN/aws-ebs-csi-driver" controller "${EBS_CTRL_MORE[@]}"
started "aws-ebs-csi-driver node: the chart's node arguments" 1 "$NO_NODE_ID" \
	"$BIN/aws-ebs-csi-driver" node "${EBS_NODE[@]}"
started "aws-ebs-csi-driver node: --volume-attach-limit" 1 "$NO_NODE_ID" \
	"$BIN/aws-ebs-csi-driver" node "${EBS_NODE_LIMIT[@]}"
started "aws-ebs-csi-driver node: --windows-host-process=true" 1 "$NO_NODE_ID" \
	"$BIN/aws-ebs-csi-driver" node "${EBS_NODE_WINDOWS[@]}"
has "--windows-host-process=true is named in the warning" 'flags="--windows-host-process"'
started "aws-ebs-csi-driver node with a node id: serves until the endpoint fails" 1 "$SERVE_FAIL" \
	"$BIN/aws-ebs-csi-driver" node "${EBS_NODE[@]}" --node-id=i-1234567890abcdef0 \
	--availability-zone=us-east-1a
started "aws-cloud-controller-manager: Deckhouse's arguments" 1 "$NO_KUBE" \
	"$BIN/aws-cloud-controller-manager" "${CCM_DECKHOUSE[@]}"
started "aws-cloud-controller-manager: the upstream chart's arguments" 1 "$NO_CLUSTER_ID" \
	"$BIN/aws-cloud-controller-manager" "${CCM_CHART[@]}"
started "aws-cloud-controller-manager: the upstream docs' arguments" 1 "$NO_CLUSTER_ID" \
	"$BIN/aws-cloud-controller-manager" "${CCM_DOCS[@]}"

# ---- the same through aws-k8s, with and without the mode word ----
started "aws-k8s ebs-csi-driver controller" 1 "$SERVE_FAIL" \
	"$AWS_K8S" ebs-csi-driver controller "${EBS_CTRL[@]}"
started "aws-k8s ebs-csi-driver node" 1 "$NO_NODE_ID" "$AWS_K8S" ebs-csi-driver node "${EBS_NODE[@]}"
started "aws-k8s csi-controller controller" 1 "$SERVE_FAIL" \
	"$AWS_K8S" csi-controller controller "${EBS_CTRL[@]}"
started "aws-k8s csi-controller (no mode word)" 1 "$SERVE_FAIL" "$AWS_K8S" csi-controller "${EBS_CTRL[@]}"
started "aws-k8s csi-node node" 1 "$NO_NODE_ID" "$AWS_K8S" csi-node node "${EBS_NODE[@]}"
started "aws-k8s csi-node (no mode word)" 1 "$NO_NODE_ID" "$AWS_K8S" csi-node "${EBS_NODE[@]}"
started "aws-k8s ccm: Deckhouse's arguments" 1 "$NO_KUBE" "$AWS_K8S" ccm "${CCM_DECKHOUSE[@]}"
started "aws-k8s aws-ebs-csi-driver node (the upstream name as a command)" 1 "$NO_NODE_ID" \
	"$AWS_K8S" aws-ebs-csi-driver node "${EBS_NODE[@]}"

# ---- mode all (also the mode without a word): the union of the controller's and node's flags ----
started "aws-ebs-csi-driver without a mode: all, with both charts' arguments" 1 "$NO_NODE_ID" \
	"$BIN/aws-ebs-csi-driver" "${EBS_CTRL[@]}" "${EBS_NODE[@]}"
started "aws-ebs-csi-driver all with a node id: serves until the endpoint fails" 1 "$SERVE_FAIL" \
	"$BIN/aws-ebs-csi-driver" all "${EBS_CTRL[@]}" "${EBS_NODE[@]}" \
	--node-id=i-1234567890abcdef0 --availability-zone=us-east-1a
started "aws-k8s ebs-csi-driver all" 1 "$NO_NODE_ID" "$AWS_K8S" ebs-csi-driver all --endpoint="$NOSOCK"

# ---- kube-rbac-proxy, node-termination-handler, and a name not built ----
started "kube-rbac-proxy --help: the rbac-proxy's flags" 0 "--secure-listen-address" "$BIN/kube-rbac-proxy" --help
started "kube-rbac-proxy without --secure-listen-address: a usage error naming it" 2 "--secure-listen-address is required" \
	"$BIN/kube-rbac-proxy" --upstream=http://127.0.0.1:1/
started "aws-k8s capa --help: CAPA's manager flags" 0 "--awscluster-concurrency" "$AWS_K8S" capa --help
started "node-termination-handler without NODE_NAME: upstream's refusal" 2 "must provide a node-name" \
	env -u NODE_NAME "$BIN/node-termination-handler"
# every flag of upstream's, with the variable it reads, in `node-termination-handler --help`
"$BIN/node-termination-handler" --help >"$T_TMP/nth.help" 2>&1
missing=$(grep -v '^#' "$T_ROOT/tests/data/nth/upstream_flags.txt" | while read -r f v; do
	grep -qE -- "^ +--$f( [a-z]+)? .*\[\\\$$v\]" "$T_TMP/nth.help" || echo "--$f [\$$v]"
done)
n=$(grep -vc '^#' "$T_ROOT/tests/data/nth/upstream_flags.txt")
[ -z "$missing" ] && ok "node-termination-handler --help: upstream's $n flags, each with its variable" ||
	fail "node-termination-handler --help: upstream's $n flags, each with its variable" "missing: $missing"
started "node-termination-handler with Go's single-dash flags: past its flags (no Kubernetes here)" 1 \
	"no Kubernetes configuration" env -u NODE_NAME -u KUBECONFIG -u KUBERNETES_SERVICE_HOST NAMESPACE=kube-system \
	"$BIN/node-termination-handler" -node-name=n1 -metadata-url=http://127.0.0.1:1 -metadata-tries=1 -dry-run
OUT=$T_TMP/mode.out
"$BIN/aws-ebs-csi-driver" bogus >"$OUT" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "unknown mode 'bogus'" "$OUT" && ok "an unknown mode is a usage error" ||
	fail "an unknown mode is a usage error" "exit $rc: $(cat "$OUT")"
"$AWS_K8S" csi-node controller --endpoint="$NOSOCK" >"$OUT" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "unexpected argument 'controller'" "$OUT" &&
	ok "csi-node does not take the controller mode" ||
	fail "csi-node does not take the controller mode" "exit $rc: $(cat "$OUT")"
"$BIN/aws-ebs-csi-driver" --help >"$OUT" 2>&1 && grep -q "controller|node|all" "$OUT" &&
	ok "aws-ebs-csi-driver --help names the modes" ||
	fail "aws-ebs-csi-driver --help names the modes" "$(cat "$OUT")"
"$BIN/aws-ebs-csi-driver" node --help >"$OUT" 2>&1 && grep -q -- "--volume-attach-limit" "$OUT" &&
	grep -q -- "--log-backtrace-at" "$OUT" && grep -q -- "--version" "$OUT" &&
	ok "aws-ebs-csi-driver node --help: the node flags, the logging flags and --version" ||
	fail "aws-ebs-csi-driver node --help: the node flags, the logging flags and --version" \
		"$(head -c 600 "$OUT")"

# ---- --version on every subcommand, in the upstream format ----
mapfile -t COMMANDS < <("$AWS_K8S" --help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && NF && $1 != "help" { print $1 }')
[ "${#COMMANDS[@]}" -ge 9 ] && ok "aws-k8s --help lists ${#COMMANDS[@]} commands" ||
	fail "aws-k8s --help lists the commands" "${COMMANDS[*]}"

# ebs_json FILE: the EBS driver's --version: its VersionInfo as Go's json.MarshalIndent(.., "  ")
ebs_json() {
	python3 - "$1" <<'EOF'
import json, sys
text = open(sys.argv[1]).read()
d = json.loads(text)
keys = ["driverVersion", "gitCommit", "buildDate", "goVersion", "compiler", "platform"]
assert list(d) == keys, list(d)
assert all(isinstance(d[k], str) for k in keys)
assert d["driverVersion"].startswith("v") and d["gitCommit"] and d["platform"].startswith("linux/")
assert text == json.dumps(d, indent=2) + "\n", "not Go's indented layout"
EOF
}
# version_ok NAME FILE COMMAND: FILE holds the --version output of COMMAND
version_ok() {
	case $3 in
	ccm | aws-cloud-controller-manager)
		grep -qxE 'Kubernetes v[0-9]+\.[0-9]+\.[0-9]+' "$2" && [ "$(wc -l <"$2")" = 1 ] ;;
	csi-controller | csi-node | ebs-csi-driver | aws-ebs-csi-driver) ebs_json "$2" ;;
	*) grep -qxE 'aws-k8s [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]+(-dirty)?\)' "$2" ;;
	esac
}
check_version() {
	local name=$1 cmd=$2 rc
	shift 2
	OUT=$T_TMP/version.out
	"$@" >"$OUT" 2>"$OUT.err"
	rc=$?
	if [ $rc = 0 ] && [ ! -s "$OUT.err" ] && version_ok "$name" "$OUT" "$cmd" 2>"$OUT.why"; then
		ok "$name"
	else
		fail "$name" "exit $rc: $(head -c 400 "$OUT") $(cat "$OUT.err" "$OUT.why")"
	fi
}
for c in "${COMMANDS[@]}"; do
	check_version "aws-k8s $c --version" "$c" "$AWS_K8S" "$c" --version
done
check_version "aws-ebs-csi-driver --version" aws-ebs-csi-driver "$BIN/aws-ebs-csi-driver" --version
check_version "aws-ebs-csi-driver controller --version" aws-ebs-csi-driver \
	"$BIN/aws-ebs-csi-driver" controller --version
check_version "aws-ebs-csi-driver node -version" aws-ebs-csi-driver \
	"$BIN/aws-ebs-csi-driver" node -version
check_version "aws-cloud-controller-manager --version" aws-cloud-controller-manager \
	"$BIN/aws-cloud-controller-manager" --version
check_version "aws-cloud-controller-manager --version after its flags" aws-cloud-controller-manager \
	"$BIN/aws-cloud-controller-manager" "${CCM_DECKHOUSE[@]}" --version=true
OUT=$T_TMP/raw.out
"$BIN/aws-cloud-controller-manager" --version=raw >"$OUT" 2>&1 &&
	grep -qE '^version\.Info\{Major:"[0-9]+", Minor:"[0-9]+", GitVersion:"v[0-9.]+", GitCommit:"[0-9a-f]+", GitTreeState:"(clean|dirty)"' "$OUT" &&
	ok "aws-cloud-controller-manager --version=raw: version.Info" ||
	fail "aws-cloud-controller-manager --version=raw: version.Info" "$(cat "$OUT")"

# ---- every klog and component-base logging flag, on every subcommand, in Go's syntaxes ----
KLOG=(-v=2 --v 2 -v 2 --vmodule=x=2 --log-flush-frequency=5s --logtostderr
	--alsologtostderr=false -log_file= --log-file-max-size=1800 --skip-headers
	--skip-log-headers=true --one-output=false --stderrthreshold=ERROR -log-dir /tmp
	--add-dir-header=false --log-backtrace-at=:0 --log_backtrace_at :0 --logging-format=text
	--log-text-split-stream=false --log-text-info-buffer-size=0 --log-json-split-stream=false
	--log-json-info-buffer-size=0)
for c in "${COMMANDS[@]}"; do
	check_version "aws-k8s $c: every logging flag, then --version" "$c" \
		"$AWS_K8S" "$c" "${KLOG[@]}" --version
done
started "csi-node: the chart's arguments and every logging flag" 1 "$NO_NODE_ID" \
	"$AWS_K8S" csi-node node "${EBS_NODE[@]}" "${KLOG[@]}"
[ "$(grep -c "$NO_EFFECT" "$OUT")" = 1 ] && ok "csi-node: one warning line for the flags without effect" ||
	fail "csi-node: one warning line for the flags without effect" "$(grep "$NO_EFFECT" "$OUT")"
has "csi-node: the warning names them" \
	'^W.*flags="--csi-mount-point-prefix, --vmodule, --skip-headers, --skip-log-headers, --stderrthreshold, --log-dir"$'
started "csi-controller: the chart's arguments and every logging flag" 1 "$SERVE_FAIL" \
	"$AWS_K8S" csi-controller controller "${EBS_CTRL[@]}" "${KLOG[@]}"
[ "$(grep -c "$NO_EFFECT" "$OUT")" = 1 ] && ok "csi-controller: one warning line" ||
	fail "csi-controller: one warning line" "$(grep "$NO_EFFECT" "$OUT")"
started "ccm: Deckhouse's arguments and every logging flag" 1 "$NO_KUBE" \
	"$BIN/aws-cloud-controller-manager" "${CCM_DECKHOUSE[@]}" "${KLOG[@]}"
[ "$(grep -c "$NO_EFFECT" "$OUT")" = 1 ] && ok "ccm: one warning line" ||
	fail "ccm: one warning line" "$(grep "$NO_EFFECT" "$OUT")"
started "the chart's arguments alone" 1 "$SERVE_FAIL" \
	"$BIN/aws-ebs-csi-driver" controller "${EBS_CTRL[@]}"
hasnt "the chart's arguments alone: no warning" "$NO_EFFECT"
started "csi-controller: the upstream flags it only checks" 1 "$SERVE_FAIL" \
	"$AWS_K8S" csi-controller --endpoint="$NOSOCK" --kubeconfig=/k --metadata-sources=kubernetes \
	--enable-node-local-volumes
has "csi-controller: the flag it only checks is named in the warning" \
	'flags="--enable-node-local-volumes"'
OUT=$T_TMP/sources.out
"$AWS_K8S" csi-controller --endpoint="$NOSOCK" --metadata-sources=imds,ec2 >"$OUT" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "one or more of: imds,kubernetes,metadata-labeler" "$OUT" &&
	ok "--metadata-sources takes imds, kubernetes and metadata-labeler only" ||
	fail "--metadata-sources takes imds, kubernetes and metadata-labeler only" "exit $rc: $(cat "$OUT")"
started "csi-node: --metadata-sources=metadata-labeler" 1 "$NO_NODE_ID" \
	"$AWS_K8S" csi-node --endpoint="$NOSOCK" --metadata-sources=metadata-labeler,imds
has "csi-node: metadata-labeler is asked (it needs \$CSI_NODE_NAME)" \
	'metadata source not used: CSI_NODE_NAME is not set" source="metadata-labeler"'

# the logging flags that work: -v (grpc's bind error is logged at 2), --logging-format, --log-file
started "-v 2" 1 "$SERVE_FAIL" "$AWS_K8S" csi-controller -v 2 --endpoint "$NOSOCK"
has "-v 2: the verbosity-2 lines are logged" '"grpc core"'
started "--v=0" 1 "$SERVE_FAIL" "$AWS_K8S" csi-controller --v=0 --endpoint "$NOSOCK"
hasnt "--v=0: no verbosity-2 lines" '"grpc core"'
started "-logging-format json" 1 "$SERVE_FAIL" "$AWS_K8S" csi-controller -logging-format json \
	-endpoint "$NOSOCK"
has "-logging-format json: JSON lines" '^\{"ts":'
LOGFILE=$T_TMP/klog/ctl.log
mkdir -p "$(dirname "$LOGFILE")"
OUT=$T_TMP/logfile.out
"$AWS_K8S" csi-controller --endpoint="$NOSOCK" --logtostderr=false --log_file "$LOGFILE" >"$OUT" 2>&1
rc=$?
[ $rc = 1 ] && grep -qF "$SERVE_FAIL" "$LOGFILE" && ! grep -qF "$SERVE_FAIL" "$OUT" &&
	ok "--logtostderr=false --log_file FILE: the log goes to FILE" ||
	fail "--logtostderr=false --log_file FILE: the log goes to FILE" \
		"exit $rc: stderr: $(cat "$OUT"); file: $(cat "$LOGFILE" 2>&1)"

# ---- make install and the image's links ----
DEST=$T_TMP/dest
if [ ! -x "$T_ROOT/aws-k8s" ]; then
	fail "make install" "no $T_ROOT/aws-k8s: run make first"
# the tree's ./aws-k8s as it is (-o: never rebuilt here), also under `make SANITIZE=... test`,
# whose variables reach a nested make through the environment
elif ! out=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -C "$T_ROOT" \
	-o aws-k8s install SANITIZE= DESTDIR="$DEST" PREFIX=/usr 2>&1); then
	fail "make install" "$out"
else
	ok "make install DESTDIR=... PREFIX=/usr"
	cmp -s "$T_ROOT/aws-k8s" "$DEST/usr/bin/aws-k8s" && [ -x "$DEST/usr/bin/aws-k8s" ] &&
		ok "make install: /usr/bin/aws-k8s" || fail "make install: /usr/bin/aws-k8s"
	for n in $UPSTREAM; do
		[ "$(readlink "$DEST/usr/bin/$n")" = aws-k8s ] && ok "make install: /usr/bin/$n -> aws-k8s" ||
			fail "make install: /usr/bin/$n -> aws-k8s" "$(ls -l "$DEST/usr/bin")"
	done
	check_version "the installed aws-ebs-csi-driver runs" aws-ebs-csi-driver \
		"$DEST/usr/bin/aws-ebs-csi-driver" --version
	check_version "the installed aws-cloud-controller-manager runs" aws-cloud-controller-manager \
		"$DEST/usr/bin/aws-cloud-controller-manager" --version
	installed=$(cd "$DEST/usr/bin" && find . -type l | sed 's|^\./||' | sort | tr '\n' ' ')
	listed=$("$AWS_K8S" --help | sed -n '/^Called by the name/,/^$/p' | awk '/^  / { print $1 }' |
		sort | tr '\n' ' ')
	[ "$listed" = "$installed" ] && ok "make install links the names aws-k8s --help lists" ||
		fail "make install links the names aws-k8s --help lists" "installed: $installed; listed: $listed"
fi

t_summary
