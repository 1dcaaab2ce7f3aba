#!/usr/bin/env bash
# tests: product
# `make demo` (tests/demo/run) cannot rot: it runs with the binary under test and exits 0 in
# under 2.5 minutes; the roles it starts run the rendered manifests' command lines (the
# arguments of `kubectl kustomize deploy/example`, only a port, the cloud config's mounted path
# and the node's --device-dir changed); the ccm initializes the Nodes and routes their pod
# CIDRs; the volume's whole life runs (controller and node as root with loop devices,
# else the controller's part, with the reason printed); the AWS calls by action and each
# role's resident memory are printed, each role stops with status 0 and nothing is left behind
# (processes, loop devices, its temporary folder). Then two variations: a machine without
# losetup leaves the node part out and says why, and a role that dies makes the demo exit 1
# naming the step.
. "$(dirname "$0")/../lib/testlib.sh"

for t in kubectl jq curl python3; do
	command -v $t >/dev/null || { skip "make demo" "$t is needed"; t_summary; }
done
python3 -c 'import yaml' 2>/dev/null || { skip "make demo" "python3 has no PyYAML"; t_summary; }
DEMO=$T_ROOT/tests/demo/run
has() { grep -qE -- "$2" "$T_TMP/$1.out"; }
# left_behind NAME: what the demo of NAME left: its temporary folder, processes or loop devices
# naming it (the folder is read from the kubeconfig path it prints)
left_behind() {
	local tmp p
	tmp=$(sed -n 's/.*kubeconfig: \(.*\)\/kc$/\1/p' "$T_TMP/$1.out" | head -n 1)
	[ -n "$tmp" ] || { echo "no temporary folder printed"; return 0; }
	[ -e "$tmp" ] && echo "folder $tmp"
	for p in /proc/[0-9]*; do
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$tmp/" && echo "process ${p#/proc/}"
	done
	command -v losetup >/dev/null && losetup -a 2>/dev/null | grep -F "$tmp/"
	return 0
}

# ---- the demo, as `make demo` runs it ----
t0=$SECONDS
"$DEMO" >"$T_TMP/full.out" 2>&1
rc=$?
took=$((SECONDS - t0))
if [ $rc = 0 ]; then ok "the demo exits 0 ($took s)"; else fail "the demo exits 0" "exit $rc: $(grep -a FAILED "$T_TMP/full.out" | head -n 3)"; fi
# 2 minutes, plus 30 s for the capa part (tests/demo/capa.sh: about 15 s idle, 30 s at load 10)
check "the demo takes under 2.5 minutes ($took s)" test "$took" -lt 150
echo "note - demo output:"
sed 's/^/note -   /' "$T_TMP/full.out"

# the command lines it runs are the manifests'
kubectl kustomize "$T_ROOT/deploy/example" >"$T_TMP/deploy.yaml" 2>&1 || fail "kubectl kustomize deploy/example" "$(tail -3 "$T_TMP/deploy.yaml")"
python3 - "$T_TMP/deploy.yaml" "$T_TMP/full.out" <<'PY' >"$T_TMP/argv.res"
import re, shlex, sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
out = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[2], errors="replace").read())
roles = {"ccm": ("Deployment", "cloud-controller-manager", "cloud-controller-manager"),
         "csi-controller": ("Deployment", "ebs-csi-controller", "ebs-plugin"),
         "csi-node": ("DaemonSet", "ebs-csi-node", "ebs-plugin")}
# what the test bed may change: the value of a port, a path's directory, an added --device-dir
def same(want, got):
    if want == got:
        return True
    w, _, wv = want.partition("=")
    g, _, gv = got.partition("=")
    if w != g:
        return False
    if w == "--secure-port":
        return gv.isdigit()
    return wv.startswith("/") and gv.endswith(wv.rsplit("/", 1)[-1]) and gv != wv
for role, (kind, name, ctr) in roles.items():
    m = re.search(r"^== aws-k8s %s: .*\n(?:.*\n)*?runs: (.*)$" % re.escape(role), out, re.M)
    if not m:
        print("missing\t%s" % role)
        continue
    o = next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)
    c = next(c for c in o["spec"]["template"]["spec"]["containers"] if c["name"] == ctr)
    want = c["command"][1:] + c.get("args", [])
    got = shlex.split(m.group(1))
    ok = got[0].endswith("/aws-k8s") and c["command"][0].endswith("/aws-k8s")
    got = [a for a in got[1:] if not (role == "csi-node" and a.startswith("--device-dir="))]
    ok = ok and len(got) == len(want) and all(same(w, g) for w, g in zip(want, got))
    print("%s\t%s\t%s" % ("ok" if ok else "bad", role, " ".join(got) + "  /  manifest: " + " ".join(want)))
PY
node=
has full "volume lifecycle done: controller and node" && node=1
while IFS=$'\t' read -r res role detail; do
	case $res in
	ok) ok "$role runs the manifest's command and args (test-bed changes only)" ;;
	missing) [ "$role" = csi-node ] && [ -z "$node" ] || fail "$role is started from the manifest" "no 'runs:' line" ;;
	*) fail "$role runs the manifest's command and args" "$detail" ;;
	esac
done <"$T_TMP/argv.res"

check "the ccm initializes the Nodes" has full '^all Nodes initialized$'
check "the route controller routes the three pod CIDRs (moto's routes printed)" \
	test "$(grep -c '^  route 10\.111\.[123]\.0/24 -> i-[0-9a-f]* active$' "$T_TMP/full.out")" = 3
if [ -n "$node" ]; then
	ok "the volume's life runs, controller and node"
	for call in node-stage node-publish node-get-volume-stats node-unpublish node-unstage; do
		check "the node's $call is printed with its reply" has full "^$call +\{"
	done
	check "NodeStage formats the device (the file system type printed)" has full '^  /dev/loop[0-9]+ holds ext4$'
	check "the file written through the target is read through the staging mount" has full "read through the staging mount: hello from vol-"
	check "the node's preStop hook from the manifest runs" has full 'runs: .*/aws-k8s csi-node pre-stop-hook$'
	check "the csi-node removes the startup taint" has full 'agent-not-ready removed by the node'
else
	why=$(sed -n 's/.*aws-k8s csi-node: LEFT OUT: //p' "$T_TMP/full.out" | sed 's/\x1b\[[0-9;]*m//g')
	skip "the volume's node part" "${why:-no reason printed}"
	check "the controller's part of the volume's life runs" has full '^volume lifecycle done: controller only'
fi
for call in create-volume controller-publish controller-expand controller-unpublish delete-volume; do
	check "the controller's $call is printed with its reply" has full "^$call +\{"
done
check "moto's view is printed: attached, grown, gone" sh -c "grep -q 'GiB gp3 in-use, attached to i-' '$T_TMP/full.out' &&
	grep -q ' 2 GiB gp3 available' '$T_TMP/full.out' && grep -q '^  moto sees: no volume vol-' '$T_TMP/full.out'"
for a in DescribeInstances CreateRoute CreateVolume AttachVolume ModifyVolume DetachVolume DeleteVolume; do
	check "the AWS calls by action are printed: ec2:$a" has full "^[1-9][0-9]*	ec2:$a$"
done
roles="ccm csi-controller"
[ -n "$node" ] && roles+=" csi-node"
for r in $roles; do
	check "the memory of aws-k8s $r is printed" has full "^aws-k8s $r: [0-9]+ kB resident \(VmRSS\)$"
	check "aws-k8s $r stops with status 0" has full "^aws-k8s $r: exit status 0$"
done
grep -a "kB resident" "$T_TMP/full.out" | sed 's/^/note - /'
check "nothing is left behind (folder, processes, loop devices)" test -z "$(left_behind full)"

# ---- a machine without losetup: the node part is left out, said so; the rest runs ----
if [ -n "$node" ]; then
	nosbin=$(tr ':' '\n' <<<"$PATH" | grep -vxE '/usr/sbin|/sbin|/usr/local/sbin' | paste -sd: -)
	PATH=$nosbin "$DEMO" >"$T_TMP/nolo.out" 2>&1
	rc=$?
	check "without losetup: the demo exits 0" test "$rc" = 0
	check "without losetup: the node part is left out, with the reason" has nolo 'aws-k8s csi-node: LEFT OUT: losetup is not installed'
	check "without losetup: the controller's part runs" has nolo '^volume lifecycle done: controller only \(the node part is left out: losetup is not installed\)$'
	check "without losetup: the Nodes are initialized" has nolo '^all Nodes initialized$'
fi

# ---- a role that dies: the demo fails, names the step, still reports and stops ----
cat >"$T_TMP/aws-k8s" <<EOF
#!/bin/sh
[ "\$1" = csi-controller ] && { echo "csi-controller: made to fail by the test" >&2; exit 1; }
exec "$AWS_K8S" "\$@"
EOF
chmod +x "$T_TMP/aws-k8s"
AWS_K8S=$T_TMP/aws-k8s "$DEMO" >"$T_TMP/dies.out" 2>&1
rc=$?
check "a role that dies: the demo exits 1 (got $rc)" test "$rc" = 1
check "a role that dies: the failed step is named" has dies '^demo: FAILED after [0-9]+ s: the CSI controller answers on '
check "a role that dies: its log is shown" has dies 'csi-controller: made to fail by the test'
check "a role that dies: the ccm is still reported and stopped" has dies '^aws-k8s ccm: exit status 0$'
check "a role that dies: nothing is left behind" test -z "$(left_behind dies)"

t_summary
