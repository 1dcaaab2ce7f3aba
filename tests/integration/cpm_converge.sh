#!/usr/bin/env bash
# tests: product
# aws-k8s cpm (converge, Deckhouse's DaemonSet run) against the test API server and the
# simulated kubelet tests/lib/kubelet_sim.py, which keeps the mirror pods of ROOT's static-pod
# manifests and records when each was created and became Ready. The inputs are files as
# Deckhouse mounts its Secrets: /config (kubeadm-config.yaml, <comp>.yaml.tpl, extra-file-*)
# and /pki (the d8-pki CAs made with openssl, sa.key/sa.pub). Checked: the Node's
# waiting-for-approval annotation and the wait for approved; the four components converge in
# Deckhouse's order, each Ready with its checksum before the next manifest is written; the
# installed files and modes; /healthz, /readyz (only after the converge); SIGTERM exit 0; a
# second run with nothing changed changes no file (content, mode, mtime) and no mirror pod; a
# config change replaces only kube-apiserver and backs the old manifest and config up under
# backup/<date>_<configChecksum>/ (restorable byte for byte); only the newest 5 backup folders
# stay; a component held NotReady stops the run naming it (exit 1), nothing after it touched,
# last_applied unchanged, the backup restorable; kube-apiserver held NotReady is moved out and
# back once (kubernetes#109596) before failing; kubeadm patches from the Secret (strategic merge
# of the container by name, env expanded) show in the manifest, and an orphan patch is removed
# (backed up); with MY_POD_NAME the image-holder containers are waited for; checkEtcdManifest's
# three refusals and checkKubeletConfig's two; usage; --help.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/cpm_lib.sh"

D=$T_ROOT/tests/data/cpm
R=$T_TMP/root
CD=$T_TMP/config
PD=$T_TMP/pki
REC=$T_TMP/sim.rec
export KUBECACHEDIR=$T_TMP/kcache
NODE=master-0
IP=10.0.0.5

# ---- peers ---------------------------------------------------------------------------------------
PORT=$(free_port)
HPORT=$(free_port)
KC=$T_TMP/kc
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$PORT" --http-port "$HPORT" --kubeconfig-out "$KC"
MANI=$R/etc/kubernetes/manifests
peer check "the test API server answers" wait_http "http://127.0.0.1:$HPORT/healthz" 30
API=http://127.0.0.1:$HPORT
kctl() { kubectl --kubeconfig "$KC" "$@"; }
peer check "Node $NODE is created" kctl create -f - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$NODE\"}}"
bg sim python3 "$T_ROOT/tests/lib/kubelet_sim.py" --server "$API" --node "$NODE=$R" --ready-delay 0.3 --record "$REC"

# ---- inputs as Deckhouse mounts them ---------------------------------------------------------------
mkdir -p "$CD" "$PD" "$R/etc/kubernetes"
peer check "the d8-pki CAs are made with openssl" cpm_mkcas "$T_TMP/cas"
cp "$T_TMP/cas/ca.crt" "$T_TMP/cas/ca.key" "$T_TMP/cas/front-proxy-ca.crt" "$T_TMP/cas/front-proxy-ca.key" "$PD/"
cp "$T_TMP/cas/etcd/ca.crt" "$PD/etcd-ca.crt"
cp "$T_TMP/cas/etcd/ca.key" "$PD/etcd-ca.key"
openssl genrsa -out "$PD/sa.key" 2048 2>/dev/null && openssl rsa -in "$PD/sa.key" -pubout -out "$PD/sa.pub" 2>/dev/null
cp "$D/kubeadm-config-v1beta4.yaml" "$CD/kubeadm-config.yaml"
printf 'apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins: []\n' >"$CD/extra-file-admission-control-config.yaml"
kubelet_conf() {
	printf 'apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: %s\n  name: kubernetes\n' "$1" >"$R/etc/kubernetes/kubelet.conf"
}
kubelet_conf https://127.0.0.1:6445

HZ=$(free_port)
# cpm_bg NAME [ARGS]: cpm converge in the background (pid in CPM_PID), output in $T_TMP/NAME.log
cpm_bg() {
	local name=$1
	shift
	NODE_NAME=$NODE MY_IP=${MYIP:-$IP} MY_POD_NAME=${PODNAME:-} "$AWS_K8S" cpm "$@" --config-dir "$CD" --pki-dir "$PD" --root "$R" \
		--kubeconfig "$KC" --healthz-bind-address "127.0.0.1:$HZ" --approval-interval 200ms \
		--approval-retries 300 --pod-ready-interval 200ms --pod-ready-retries "${TRIES:-150}" \
		>"$T_TMP/$name.log" 2>&1 &
	CPM_PID=$!
	t_cleanup_add "kill $CPM_PID 2>/dev/null"
}
# wait_for SECONDS CMD...: polls CMD every 0.1 s (bounded)
wait_for() {
	local secs=$1 i
	shift
	for ((i = 0; i < secs * 10; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
readyz() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$HZ/readyz")" = 200 ]; }
node_ann() { kctl get node "$NODE" -o json | python3 -c "import sys,json; a=json.load(sys.stdin)['metadata'].get('annotations') or {}; print('$1' in a)"; }
# converged NAME: waits for /readyz ok (or the process's end); 0 when ready
converged() { wait_for 180 sh -c "curl -sf -o /dev/null --max-time 2 http://127.0.0.1:$HZ/readyz || ! kill -0 $CPM_PID"; readyz; }
stop_cpm() { # stop_cpm WHAT: SIGTERM, exit 0 expected
	if stop_within "$CPM_PID" 20 "$1"; then
		[ "$STOP_RC" = 0 ] && ok "$1: SIGTERM ends it with exit 0" || fail "$1: SIGTERM ends it with exit 0" "exit $STOP_RC"
	fi
}
# snapshot: path, mode, mtime and sha256 of every file under the root
# (kubelet.conf aside: the test itself rewrites it)
snapshot() { (cd "$R" && find . -type f ! -name kubelet.conf -printf '%p %m %T@\n' | sort && find . -type f ! -name kubelet.conf -print0 | sort -z | xargs -0 sha256sum); }
# order: the sim's created/ready events of the control-plane pods since line $1
# (created and ready events; with a second argument, the events matching that pattern)
events_since() { tail -n +"$(($1 + 1))" "$REC" | awk '{print $3, $4}' | grep -E "${2:- (created|ready)$}" || true; }
rec_lines() { wc -l <"$REC"; }
: >"$REC"
# synced COMP: its mirror pod carries the manifest's checksum and is Ready
synced() {
	local sum
	sum=$(grep -o '[0-9a-f]\{64\}' "$MANI/$1.yaml" | head -1)
	kctl -n kube-system get pod "$1-$NODE" -o json | python3 -c "
import sys, json
p = json.load(sys.stdin)
ok = p['metadata']['annotations'].get('control-plane-manager.deckhouse.io/checksum') == '$sum' and \\
    any(c['type'] == 'Ready' and c['status'] == 'True' for c in p['status'].get('conditions', []))
sys.exit(0 if ok else 1)"
}
MANI=$R/etc/kubernetes/manifests
BK=$R/etc/kubernetes/deckhouse/backup

# ---- first run: approval, then the four components in order ---------------------------------------
L0=$(rec_lines)
cpm_bg run1
if wait_for 60 sh -c "kubectl --kubeconfig '$KC' get node $NODE -o jsonpath='{.metadata.annotations}' | grep -q waiting-for-approval"; then
	ok "the Node is annotated control-plane-manager.deckhouse.io/waiting-for-approval"
else fail "the Node is annotated waiting-for-approval" "$(tail -3 "$T_TMP/run1.log")"; fi
sleep 1
[ ! -e "$MANI/kube-apiserver.yaml" ] && kill -0 "$CPM_PID" 2>/dev/null &&
	ok "nothing is written before the approval" || fail "nothing is written before the approval"
readyz && fail "/readyz fails before the converge" || ok "/readyz fails before the converge"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HZ/healthz")" = 200 ] &&
	ok "/healthz answers 200 while waiting" || fail "/healthz answers 200 while waiting"
kctl annotate node "$NODE" control-plane-manager.deckhouse.io/approved= >/dev/null
if converged; then ok "run 1: converged after the approval (/readyz 200)"; else fail "run 1: converged after the approval" "$(tail -5 "$T_TMP/run1.log")"; fi
want="kube-apiserver-$NODE created
kube-apiserver-$NODE ready
kube-controller-manager-$NODE created
kube-controller-manager-$NODE ready
kube-scheduler-$NODE created
kube-scheduler-$NODE ready
etcd-$NODE created
etcd-$NODE ready"
got=$(events_since "$L0")
[ "$got" = "$want" ] && ok "run 1: kube-apiserver, kube-controller-manager, kube-scheduler, etcd, each Ready before the next is written" ||
	fail "run 1: Deckhouse's order, one at a time" "$(tr '\n' ';' <<<"$got")"
for c in kube-apiserver kube-controller-manager kube-scheduler etcd; do
	sum=$(grep -o 'checksum: "[0-9a-f]*"' "$MANI/$c.yaml" | grep -o '[0-9a-f]\{64\}')
	podsum=$(kctl -n kube-system get pod "$c-$NODE" -o jsonpath='{.metadata.annotations.control-plane-manager\.deckhouse\.io/checksum}')
	[ -n "$sum" ] && [ "$sum" = "$podsum" ] && ok "run 1: $c: the mirror pod carries the manifest's checksum" ||
		fail "run 1: $c: the mirror pod carries the manifest's checksum" "'$sum' vs '$podsum'"
done
modes=$(cd "$R/etc/kubernetes" && stat -c '%n %a' deckhouse/kubeadm/config.yaml deckhouse/extra-files/admission-control-config.yaml pki/ca.key pki/ca.crt pki/etcd/ca.key pki/sa.key pki/apiserver.key admin.conf 2>&1 | tr '\n' ';')
[ "$modes" = "deckhouse/kubeadm/config.yaml 644;deckhouse/extra-files/admission-control-config.yaml 600;pki/ca.key 600;pki/ca.crt 644;pki/etcd/ca.key 600;pki/sa.key 600;pki/apiserver.key 600;admin.conf 600;" ] &&
	ok "run 1: installed: kubeadm config, extra file 0600, d8-pki (keys 0600), leaves, kubeconfigs" || fail "run 1: installed files and modes" "$modes"
cmp -s "$PD/etcd-ca.crt" "$R/etc/kubernetes/pki/etcd/ca.crt" && ok "run 1: d8-pki etcd-ca.crt is installed as pki/etcd/ca.crt" || fail "run 1: etcd-ca.crt installed as pki/etcd/ca.crt"
LAST=$R/etc/kubernetes/deckhouse/last_applied_configuration_checksum
grep -qx '[0-9a-f]\{64\}' "$LAST" && ok "run 1: last_applied_configuration_checksum written" || fail "run 1: last_applied_configuration_checksum written" "$(cat "$LAST" 2>&1)"
stop_cpm "run 1"

# ---- second run, nothing changed ------------------------------------------------------------------
before=$(snapshot)
L1=$(rec_lines)
cpm_bg run2
converged && ok "run 2 (already approved): converged" || fail "run 2: converged" "$(tail -5 "$T_TMP/run2.log")"
after=$(snapshot)
[ "$before" = "$after" ] && ok "run 2: no file changed (content, mode, mtime)" || fail "run 2: no file changed" "$(diff <(echo "$before") <(echo "$after") | head -5 | tr '\n' ';')"
[ -z "$(events_since "$L1")" ] && ok "run 2: no mirror pod was replaced" || fail "run 2: no mirror pod was replaced" "$(events_since "$L1" | tr '\n' ';')"
grep -q 'converge: 0 created, 0 updated' "$T_TMP/run2.log" && ok "run 2: reports 0 created, 0 updated" || fail "run 2: reports 0 created, 0 updated" "$(grep 'converge:' "$T_TMP/run2.log")"
stop_cpm "run 2"

# ---- a config change: only kube-apiserver, with backups --------------------------------------------
# six old backup folders: after the run only the newest 5 folders stay
for i in 1 2 3 4 5 6; do mkdir -p "$BK/2020-01-0${i}_old$i" && touch -d "2020-01-0$i" "$BK/2020-01-0${i}_old$i"; done
cp -p "$MANI/kube-apiserver.yaml" "$T_TMP/apiserver.old"
cp -p "$R/etc/kubernetes/deckhouse/kubeadm/config.yaml" "$T_TMP/config.old"
sed -i 's/value: 60s/value: 61s/' "$CD/kubeadm-config.yaml"
# --dry-run first: the converge on a copy, its differences printed, nothing written, no API server
before=$(snapshot)
L2=$(rec_lines)
out=$(NODE_NAME=$NODE MY_IP=$IP "$AWS_K8S" cpm converge --dry-run --config-dir "$CD" --pki-dir "$PD" --root "$R" \
	--kubeconfig /nonexistent 2>&1)
rc=$?
[ $rc = 0 ] && grep -qx -- '+    - --request-timeout=61s' <<<"$out" && grep -qx -- '-    - --request-timeout=60s' <<<"$out" &&
	grep -q '^+++ b/etc/kubernetes/manifests/kube-apiserver.yaml$' <<<"$out" &&
	grep -q '^\[would replace\] /etc/kubernetes/deckhouse/kubeadm/config.yaml$' <<<"$out" &&
	! grep -q '^\[would .*\] /etc/kubernetes/\(manifests/kube-controller-manager.yaml\|manifests/kube-scheduler.yaml\|manifests/etcd.yaml\|pki/\)' <<<"$out" &&
	grep -q '^converge (dry run): 3 files would change' <<<"$out" &&
	[ "$before" = "$(snapshot)" ] && [ "$(rec_lines)" = "$L2" ] &&
	ok "converge --dry-run: kube-apiserver.yaml's diff (the flag), the kubeadm config and the last-applied checksum would change; nothing written, no pod touched, no API server needed" ||
	fail "converge --dry-run" "exit $rc: $(tail -30 <<<"$out")"
ls -d /tmp/cpm-dry-run.* 2>/dev/null | grep -q . && fail "converge --dry-run leaves no temporary copy" "$(ls -d /tmp/cpm-dry-run.*)" ||
	ok "converge --dry-run leaves no temporary copy"
cpm_bg run3
converged && ok "run 3 (request-timeout changed): converged" || fail "run 3: converged" "$(tail -5 "$T_TMP/run3.log")"
got=$(events_since "$L2")
[ "$got" = "kube-apiserver-$NODE created
kube-apiserver-$NODE ready" ] && ok "run 3: only kube-apiserver was replaced" || fail "run 3: only kube-apiserver was replaced" "$(tr '\n' ';' <<<"$got")"
grep -q -- '--request-timeout=61s' "$MANI/kube-apiserver.yaml" && ok "run 3: the new flag is in the manifest" || fail "run 3: the new flag is in the manifest"
SUM3=$(cat "$LAST")
B3=$BK/$(date -u +%F)_$SUM3
cmp -s "$B3/etc/kubernetes/manifests/kube-apiserver.yaml" "$T_TMP/apiserver.old" &&
	ok "run 3: the old kube-apiserver.yaml is in backup/<date>_<configChecksum>/etc/kubernetes/manifests/" ||
	fail "run 3: the old manifest is backed up" "$(ls -R "$BK" 2>&1 | head -20 | tr '\n' ' ')"
cmp -s "$B3/etc/kubernetes/deckhouse/kubeadm/config.yaml" "$T_TMP/config.old" && ok "run 3: the old kubeadm config.yaml is backed up too" || fail "run 3: the old kubeadm config.yaml is backed up"
[ "$(stat -c %a "$B3")" = 700 ] && ok "run 3: the backup folder is 0700" || fail "run 3: the backup folder is 0700" "$(stat -c %a "$B3")"
folders=$(ls "$BK" | sort | tr '\n' ' ')
[ "$(ls "$BK" | wc -l)" = 5 ] && [ -d "$B3" ] && [ ! -e "$BK/2020-01-01_old1" ] && [ ! -e "$BK/2020-01-02_old2" ] && [ -d "$BK/2020-01-03_old3" ] &&
	ok "run 3: only the newest 5 backup folders are kept" || fail "run 3: only the newest 5 backup folders are kept" "$folders"
stop_cpm "run 3"
# restoring the backup gives back the old manifest, byte for byte
cp -p "$B3/etc/kubernetes/manifests/kube-apiserver.yaml" "$T_TMP/restored"
cmp -s "$T_TMP/restored" "$T_TMP/apiserver.old" && ok "run 3: the backup restores the old manifest byte for byte" || fail "run 3: the backup restores the old manifest"

# ---- a component that never becomes Ready -----------------------------------------------------------
mkdir -p "$R/.kubelet-sim"
touch "$R/.kubelet-sim/hold-kube-controller-manager"
cp -p "$MANI/kube-controller-manager.yaml" "$T_TMP/kcm.old"
cp -p "$MANI/kube-scheduler.yaml" "$T_TMP/sched.old"
sed -i 's/value: 40s/value: 41s/' "$CD/kubeadm-config.yaml"
L3=$(rec_lines)
TRIES=15 cpm_bg run4
if wait_exit "$CPM_PID" 120; then rc=0; else rc=$?; fi
[ "$rc" = 1 ] && ok "run 4: a component held NotReady ends the run with exit 1" || fail "run 4: exit 1" "exit $rc: $(tail -3 "$T_TMP/run4.log")"
grep -q 'converge failed: component kube-controller-manager did not converge: timeout waiting for pod kube-system/kube-controller-manager-master-0 to become ready' "$T_TMP/run4.log" &&
	ok "run 4: the error names kube-controller-manager and its mirror pod" || fail "run 4: the error names the component" "$(grep -i 'fail' "$T_TMP/run4.log" | tail -2)"
got=$(events_since "$L3")
[ "$got" = "kube-controller-manager-$NODE created" ] && ok "run 4: nothing after kube-controller-manager was touched" || fail "run 4: nothing after it was touched" "$(tr '\n' ';' <<<"$got")"
cmp -s "$MANI/kube-scheduler.yaml" "$T_TMP/sched.old" && [ "$(cat "$LAST")" = "$SUM3" ] &&
	ok "run 4: kube-scheduler.yaml and last_applied_configuration_checksum unchanged" || fail "run 4: scheduler and last_applied unchanged"
B4=$(ls -d "$BK"/*/etc/kubernetes/manifests/kube-controller-manager.yaml 2>/dev/null | head -1)
if [ -n "$B4" ] && cmp -s "$B4" "$T_TMP/kcm.old"; then
	cp -p "$B4" "$MANI/kube-controller-manager.yaml"
	rm -f "$R/.kubelet-sim/hold-kube-controller-manager"
	cmp -s "$MANI/kube-controller-manager.yaml" "$T_TMP/kcm.old" && ok "run 4: the backup of kube-controller-manager.yaml restores the previous one" ||
		fail "run 4: the backup restores the previous manifest"
else fail "run 4: the previous kube-controller-manager.yaml is backed up" "$(ls "$BK")"; fi
rm -f "$R/.kubelet-sim/hold-kube-controller-manager"
sed -i 's/value: 41s/value: 40s/' "$CD/kubeadm-config.yaml"
peer check "the simulated kubelet runs the restored kube-controller-manager" wait_for 60 synced kube-controller-manager

# ---- kube-apiserver never Ready: moved out and back once (kubernetes#109596), then the error --------
touch "$R/.kubelet-sim/hold-kube-apiserver"
sed -i 's/value: 61s/value: 62s/' "$CD/kubeadm-config.yaml"
L4=$(rec_lines)
TRIES=10 cpm_bg run5
if wait_exit "$CPM_PID" 120; then rc=0; else rc=$?; fi
got=$(events_since "$L4" "^kube-apiserver-$NODE (created|deleted)$" | tr '\n' ';')
[ "$rc" = 1 ] && grep -q 'component kube-apiserver did not converge' "$T_TMP/run5.log" &&
	ok "run 5: kube-apiserver held NotReady: exit 1 naming kube-apiserver" || fail "run 5: exit 1 naming kube-apiserver" "exit $rc: $(tail -2 "$T_TMP/run5.log")"
[ "$got" = "kube-apiserver-$NODE deleted;kube-apiserver-$NODE created;kube-apiserver-$NODE deleted;kube-apiserver-$NODE created;" ] &&
	ok "run 5: the manifest was replaced, then moved out and back once before giving up" || fail "run 5: moved out and back once" "$got"
[ -e "$MANI/kube-apiserver.yaml" ] && [ ! -e "$MANI/.kube-apiserver.yaml" ] && ok "run 5: the manifest is back in place" || fail "run 5: the manifest is back in place"
rm -f "$R/.kubelet-sim/hold-kube-apiserver"

# ---- kubeadm patches from the Secret ---------------------------------------------------------------------
cat >"$CD/kube-scheduler.yaml.tpl" <<'EOF'
---
apiVersion: v1
kind: Pod
metadata:
  name: kube-scheduler
  namespace: kube-system
  annotations:
    control-plane-manager.deckhouse.io/patched-for: ${MY_IP}
spec:
  containers:
    - name: kube-scheduler
      args:
      - --v=4
      env:
      - name: GOGC
        value: "50"
---
apiVersion: v1
kind: Pod
metadata:
  name: kube-scheduler
spec:
  dnsPolicy: ClusterFirstWithHostNet
EOF
mkdir -p "$R/etc/kubernetes/deckhouse/kubeadm/patches"
echo 'spec: {}' >"$R/etc/kubernetes/deckhouse/kubeadm/patches/leftover.yaml"
L5=$(rec_lines)
cpm_bg run6
converged && ok "run 6 (a kube-scheduler patch): converged" || fail "run 6: converged" "$(tail -5 "$T_TMP/run6.log")"
S=$MANI/kube-scheduler.yaml
grep -q -- '- --v=4' "$S" && grep -q -- '- --kubeconfig=/etc/kubernetes/scheduler.conf' "$S" &&
	ok "run 6: the patch's --v=4 is in the manifest, merged into the container by name (its command kept)" || fail "run 6: the patch's flag is in the manifest" "$(grep -n -- '--' "$S" | head -12 | tr '\n' ' ')"
grep -q 'name: GOGC' "$S" && grep -q 'dnsPolicy: ClusterFirstWithHostNet' "$S" && grep -q "patched-for: \"\\?$IP" "$S" &&
	ok "run 6: both documents applied; \${MY_IP} expanded as Deckhouse's install does" || fail "run 6: both documents applied, env expanded" "$(grep -n 'GOGC\|dnsPolicy\|patched' "$S" | tr '\n' ' ')"
[ "$(grep -c '^  containers:' "$S")" = 1 ] && [ "$(grep -c '^  - ' "$S")" -ge 1 ] && [ "$(grep -c 'name: kube-scheduler$' "$S")" = 2 ] &&
	ok "run 6: still one container (merged, not appended)" || fail "run 6: one container" "$(grep -n 'name: kube-scheduler' "$S" | tr '\n' ' ')"
grep -q 'ClusterFirstWithHostNet' "$R/etc/kubernetes/deckhouse/kubeadm/patches/kube-scheduler.yaml" &&
	ok "run 6: installed as deckhouse/kubeadm/patches/kube-scheduler.yaml" || fail "run 6: installed as patches/kube-scheduler.yaml"
[ ! -e "$R/etc/kubernetes/deckhouse/kubeadm/patches/leftover.yaml" ] && ls "$BK"/*/etc/kubernetes/deckhouse/kubeadm/patches/leftover.yaml >/dev/null 2>&1 &&
	ok "run 6: an orphan patch file is removed, after a backup" || fail "run 6: the orphan patch is removed and backed up"
got=$(events_since "$L5" | tr '\n' ';')
case $got in *"kube-scheduler-$NODE created;kube-scheduler-$NODE ready;"*) ok "run 6: kube-scheduler's mirror pod was replaced and Ready" ;; *) fail "run 6: kube-scheduler's mirror pod replaced" "$got" ;; esac
psum=$(kctl -n kube-system get pod "kube-scheduler-$NODE" -o jsonpath='{.metadata.annotations.control-plane-manager\.deckhouse\.io/checksum}')
grep -q "$psum" "$S" && [ -n "$psum" ] && ok "run 6: the patched manifest's checksum is the mirror pod's" || fail "run 6: the patched manifest's checksum" "$psum"
stop_cpm "run 6"
before=$(snapshot)
cpm_bg run7
converged && ok "run 7 (patch unchanged): converged" || fail "run 7: converged" "$(tail -5 "$T_TMP/run7.log")"
[ "$before" = "$(snapshot)" ] && ok "run 7: with a patch, a second run changes no file either" || fail "run 7: no file changed" "$(diff <(echo "$before") <(snapshot) | head -4 | tr '\n' ';')"
stop_cpm "run 7"

# ---- MY_POD_NAME: its image-holder containers are waited for (Deckhouse's waitImageHolderContainers)
holders() { # holders READY: the pod's container statuses
	printf '{"status":{"phase":"Running","containerStatuses":[{"name":"control-plane-manager","ready":false,"restartCount":0,"image":"x","imageID":""},{"name":"image-holder-etcd","ready":%s,"restartCount":0,"image":"x","imageID":""}]}}' "$1"
}
curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' "$API/api/v1/namespaces/kube-system/pods" \
	-d '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"d8-control-plane-manager-x","namespace":"kube-system"},"spec":{"nodeName":"'"$NODE"'","containers":[{"name":"control-plane-manager","image":"x"},{"name":"image-holder-etcd","image":"x"}]},'"$(holders false | sed 's/^{//')" ||
	peer fail "the cpm pod with an image holder is created"
PODNAME=d8-control-plane-manager-x cpm_bg run8
if wait_for 60 grep -q 'waiting for the image-holder containers.*notReady="image-holder-etcd"' "$T_TMP/run8.log"; then
	sleep 1
	! readyz && kill -0 "$CPM_PID" 2>/dev/null && ok "run 8: waits while an image-holder container of MY_POD_NAME is not ready" || fail "run 8: waits for the image holders"
else fail "run 8: waits for the image-holder containers" "$(tail -3 "$T_TMP/run8.log")"; fi
curl -sf -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' "$API/api/v1/namespaces/kube-system/pods/d8-control-plane-manager-x/status" -d "$(holders true)" ||
	peer fail "the image holder is made ready"
converged && ok "run 8: converges once the image holder is ready (control-plane-manager's own readiness not needed)" || fail "run 8: converges once the image holder is ready" "$(tail -3 "$T_TMP/run8.log")"
stop_cpm "run 8"

# ---- refusals ---------------------------------------------------------------------------------------------
refused() { # refused NAME PATTERN: a run that must end with exit 1 and the message
	local name=$1 pat=$2 rc
	TRIES=5 cpm_bg "$name"
	if wait_exit "$CPM_PID" 60; then rc=0; else rc=$?; fi
	if [ "$rc" = 1 ] && grep -q -- "$pat" "$T_TMP/$name.log"; then ok "$name: exit 1: $pat"; else fail "$name: exit 1: $pat" "exit $rc: $(grep -v '^I' "$T_TMP/$name.log" | tail -2)"; fi
}
E=$MANI/etcd.yaml
cp -p "$E" "$T_TMP/etcd.good"
before=$(snapshot)
sed -i "s/--name=$NODE/--name=other-node/" "$E"
refused etcd-name "refusing to converge: etcd is not supposed to change its name from other-node to $NODE"
cp -p "$T_TMP/etcd.good" "$E"
sed -i 's|--data-dir=/var/lib/etcd|--data-dir=/data/etcd|' "$E"
refused etcd-data-dir "refusing to converge: etcd is not supposed to change data-dir from /data/etcd to /var/lib/etcd"
cp -p "$T_TMP/etcd.good" "$E"
MYIP=10.0.0.9 refused etcd-address "refusing to converge: etcd is not supposed to change advertise address from $IP to 10.0.0.9"
kubelet_conf https://10.0.0.5:6443
refused kubelet-server "cannot find server: https://127.0.0.1:6445 in kubelet config"
rm "$R/etc/kubernetes/kubelet.conf"
refused kubelet-missing "refusing to converge: kubelet config does not exist"
kubelet_conf https://127.0.0.1:6445
cp -p "$T_TMP/etcd.good" "$E"
[ "$before" = "$(snapshot)" ] && ok "the refused runs changed no file" || fail "the refused runs changed no file" "$(diff <(echo "$before") <(snapshot) | head -4 | tr '\n' ';')"

# ---- usage, help ----------------------------------------------------------------------------------------------
"$AWS_K8S" cpm converge extra >/dev/null 2>&1
[ $? = 2 ] && ok "cpm converge with an argument: exit 2" || fail "cpm converge with an argument: exit 2"
NODE_NAME=$NODE "$AWS_K8S" cpm --config-dir "$CD" --kubeconfig "$KC" --healthz-bind-address "127.0.0.1:$HZ" >"$T_TMP/noip.log" 2>&1
rc=$?
[ $rc = 2 ] && grep -q 'MY_IP' "$T_TMP/noip.log" && ok "no MY_IP: exit 2 naming MY_IP" || fail "no MY_IP: exit 2" "exit $rc"
help=$("$AWS_K8S" cpm --help 2>&1)
grep -q 'converge' <<<"$help" && grep -q -- '--approval-retries' <<<"$help" && grep -q -- '--pod-ready-retries' <<<"$help" &&
	! grep -q 'Not built yet.*converge' <<<"$help" && ok "cpm --help documents converge and its flags" || fail "cpm --help documents converge"

t_summary
