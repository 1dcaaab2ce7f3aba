#!/usr/bin/env bash
# tests: product
# etcd membership inside `aws-k8s cpm converge`, against real etcd 3.4 processes: the simulated
# kubelet (tests/lib/kubelet_sim.py --run etcd) runs each node's etcd from the manifest the
# converge writes (paths under the node's root). Two masters m0 and m1 on two loopback addresses
# of a random 127.x.y.0/24 (etcd's ports 2379/2380/2381 on each). Checked:
#   - m0, the first master (no other etcd pod), starts a one-member cluster;
#   - single -> multi: while the lone member advertises https://localhost:2380, m1's converge is
#     refused with the reason; m0's converge sets the real peer URL (update-peer-url);
#   - m1 converges against the one-member cluster: joined as a learner (its manifest with
#     --initial-cluster-state=existing and both members in --initial-cluster), promoted, a voter
#     (etcdctl member list), the keys written before readable there; the time and etcd calls of
#     the join + promote are printed;
#   - orphan: m1's member removed behind its back (its data stays): its converge moves the data
#     aside (member.orphaned-<time>) and rejoins as a voter;
#   - 2 -> 1: m1 stopped; while m1 is still a control-plane Node, m0's converge refuses
#     --force-new-cluster with the reason; once the Node is gone, m0's converge restarts etcd once
#     with --force-new-cluster, then without it: one member, every written key kept, a snapshot
#     in the backup folder.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/cpm_lib.sh"

for t in kubectl python3 openssl etcd etcdctl curl; do command -v $t >/dev/null || { skip "etcd in the converge" "$t is needed"; t_summary; }; done
D=$T_ROOT/tests/data/cpm
CD=$T_TMP/config
PD=$T_TMP/pki
REC=$T_TMP/sim.rec
: >"$REC"
export KUBECACHEDIR=$T_TMP/kcache
NET=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1))
IP0=$NET.11
IP1=$NET.12
R0=$T_TMP/root-m0
R1=$T_TMP/root-m1
bindable() { python3 -c 'import socket, sys
for ip in sys.argv[1:]:
    for port in (2379, 2380, 2381):
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((ip, port)); s.close()' "$@"; }
if ! bindable "$IP0" "$IP1" 2>"$T_TMP/bind.err"; then
	skip "etcd in the converge" "cannot bind $IP0/$IP1 ports 2379-2381: $(tail -1 "$T_TMP/bind.err")"
	t_summary
fi

PORT=$(free_port)
HPORT=$(free_port)
KC=$T_TMP/kc
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$PORT" --http-port "$HPORT" --kubeconfig-out "$KC"
peer check "the test API server answers" wait_http "http://127.0.0.1:$HPORT/healthz" 30
kctl() { kubectl --kubeconfig "$KC" "$@"; }
for n in m0 m1; do
	peer check "master Node $n is created" kctl create -f - <<<"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$n\",\"labels\":{\"node-role.kubernetes.io/control-plane\":\"\"}},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"
done

# the Secrets as files, shared by both masters; etcd 3.4 (the one installed), its client and
# metrics URLs on the node's own address (MY_IP, expanded by the converge)
mkdir -p "$CD" "$PD"
peer check "the d8-pki CAs are made with openssl" cpm_mkcas "$T_TMP/cas"
cp "$T_TMP/cas/ca.crt" "$T_TMP/cas/ca.key" "$T_TMP/cas/front-proxy-ca.crt" "$T_TMP/cas/front-proxy-ca.key" "$PD/"
cp "$T_TMP/cas/etcd/ca.crt" "$PD/etcd-ca.crt"
cp "$T_TMP/cas/etcd/ca.key" "$PD/etcd-ca.key"
openssl genrsa -out "$PD/sa.key" 2048 2>/dev/null && openssl rsa -in "$PD/sa.key" -pubout -out "$PD/sa.pub" 2>/dev/null
python3 - "$D/kubeadm-config-v1beta4.yaml" "$CD/kubeadm-config.yaml" <<'EOF'
import sys
s = open(sys.argv[1]).read()
old = "    - name: initial-cluster-state\n      value: existing\n"
assert old in s
s = s.replace(old, "    - name: listen-client-urls\n      value: https://${MY_IP}:2379\n"
              "    - name: listen-metrics-urls\n      value: http://${MY_IP}:2381\n")
s = s.replace("    dataDir: /var/lib/etcd\n", "    dataDir: /var/lib/etcd\n    imageTag: 3.4.23-0\n")
open(sys.argv[2], "w").write(s)
EOF
for r in "$R0" "$R1"; do
	mkdir -p "$r/etc/kubernetes"
	printf 'apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://127.0.0.1:6445\n  name: kubernetes\n' >"$r/etc/kubernetes/kubelet.conf"
done
bg sim python3 "$T_ROOT/tests/lib/kubelet_sim.py" --server "http://127.0.0.1:$HPORT" --ready-delay 0.3 \
	--record "$REC" --run etcd --node "m0=$R0" --node "m1=$R1"

# wait_for SECONDS CMD...: polls CMD every 0.2 s (bounded)
wait_for() {
	local secs=$1 i
	shift
	for ((i = 0; i < secs * 5; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
	return 1
}
# converge NODE IP LOG: one cpm run, until its /readyz answers 200 (then SIGTERM: its exit code,
# 0 expected) or it exits (1); its output in $T_TMP/LOG.log
converge() {
	local n=$1 ip=$2 log=$T_TMP/$3.log hz pid i
	hz=$(free_port)
	kctl annotate node "$n" control-plane-manager.deckhouse.io/approved= --overwrite >/dev/null 2>&1
	NODE_NAME=$n MY_IP=$ip "$AWS_K8S" cpm --config-dir "$CD" --pki-dir "$PD" --root "$T_TMP/root-$n" \
		--kubeconfig "$KC" --healthz-bind-address "127.0.0.1:$hz" --approval-interval 200ms \
		--pod-ready-interval 200ms --pod-ready-retries 450 --v=2 >"$log" 2>&1 &
	pid=$!
	for ((i = 0; i < 1500; i++)); do
		if curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$hz/readyz"; then
			kill -TERM "$pid"
			wait "$pid"
			return
		fi
		kill -0 "$pid" 2>/dev/null || { wait "$pid"; return 1; }
		sleep 0.2
	done
	kill "$pid"
	wait "$pid"
	return 1
}
# e0/e1 ARGS...: etcdctl against m0's / m1's etcd with m0's healthcheck-client certificate
EP0=$R0/etc/kubernetes/pki/etcd
ectl() { ETCDCTL_API=3 etcdctl --cacert "$EP0/ca.crt" --cert "$EP0/healthcheck-client.crt" --key "$EP0/healthcheck-client.key" --command-timeout 10s --dial-timeout 3s "$@"; }
e0() { ectl --endpoints "https://$IP0:2379" "$@"; }
e1() { ectl --endpoints "https://$IP1:2379" "$@"; }
# members: "name:peerURL:role" sorted, from m0's etcd
members() { e0 member list -w json 2>/dev/null | python3 -c '
import json, sys
ms = json.load(sys.stdin).get("members", [])
print(" ".join(sorted("%s:%s:%s" % (m.get("name", "-"), ",".join(m.get("peerURLs", [])), "learner" if m.get("isLearner") else "voter") for m in ms)))'; }
healthy0() { e0 endpoint health; }
V0="m0:https://$IP0:2380:voter"
V1="m1:https://$IP1:2380:voter"

# ---- m0: the first master -------------------------------------------------------------------------
if converge m0 "$IP0" m0-1; then ok "m0 (the first master, no other etcd pod) converges"; else fail "m0 converges" "$(tail -3 "$T_TMP/m0-1.log")"; fi
grep -q '\[unchanged\] *etcd membership.*the first master' "$T_TMP/m0-1.log" && ok "m0: its etcd manifest as rendered (the first master)" ||
	fail "m0: the first master" "$(grep 'etcd membership' "$T_TMP/m0-1.log")"
wait_for 30 healthy0 && ok "m0: its etcd, run from the written manifest, is healthy" || fail "m0: etcd healthy" "$(tail -3 "$R0/.kubelet-sim/etcd.log")"
got=$(members)
[ "$got" = "$V0" ] && ok "m0: etcdctl member list: m0 alone, a voter" || fail "m0: member list" "$got"
for i in $(seq 1 20); do e0 put "k$i" "v$i" >/dev/null || break; done
[ "$(e0 get k20 --print-value-only)" = v20 ] && ok "m0: 20 keys written" || fail "m0: 20 keys written"

# ---- single -> multi: the lone member's peer URL -----------------------------------------------
ID0=$(e0 member list -w json | python3 -c 'import json, sys; print("%x" % json.load(sys.stdin)["members"][0]["ID"])')
peer check "m0's peer URL set to https://localhost:2380 (a single master's bootstrap)" e0 member update "$ID0" --peer-urls=https://localhost:2380
if converge m1 "$IP1" m1-refused; then fail "m1 refused while the lone member is on localhost" "it converged"; else
	grep -q 'the lone member m0 still advertises the peer URL https://localhost:2380' "$T_TMP/m1-refused.log" &&
		ok "m1: refused while the lone member advertises https://localhost:2380 (the reason given)" ||
		fail "m1 refused with the reason" "$(grep -i 'etcd' "$T_TMP/m1-refused.log" | tail -2)"
fi
got=$(members)
[ "$got" = "m0:https://localhost:2380:voter" ] && ok "m1's refused converge added no member" || fail "no member added" "$got"
if converge m0 "$IP0" m0-2; then ok "m0 converges again"; else fail "m0 converges again" "$(tail -3 "$T_TMP/m0-2.log")"; fi
grep -q "\[updated\] *etcd membership.*the lone member's peer URL set" "$T_TMP/m0-2.log" && [ "$(members)" = "$V0" ] &&
	ok "m0: the lone member's peer URL is set to https://$IP0:2380 (update-peer-url)" || fail "m0: peer URL updated" "$(members); $(grep 'etcd membership' "$T_TMP/m0-2.log")"

# ---- m1 joins ---------------------------------------------------------------------------------------
if converge m1 "$IP1" m1-join; then ok "m1 converges against the one-member cluster"; else fail "m1 converges" "$(tail -3 "$T_TMP/m1-join.log")"; fi
line=$(grep 'etcd membership' "$T_TMP/m1-join.log" | tail -1)
case $line in *"[created]"*"needs-join: joined as a learner and promoted in "*) ok "m1: joined as a learner and promoted within the run" ;;
*) fail "m1: joined and promoted" "$line" ;; esac
ms=${line##*promoted in }
echo "# figure: join + promote of m1 (one-member cluster): ${ms%%)*})"
got=$(members)
[ "$got" = "$V0 $V1" ] && ok "etcdctl member list: m0 and m1, both voters" || fail "two voters" "$got"
M1=$R1/etc/kubernetes/manifests/etcd.yaml
grep -q -- "--initial-cluster-state=existing" "$M1" && grep -Eq -- "--initial-cluster=(m0=https://$IP0:2380,m1=https://$IP1:2380|m1=https://$IP1:2380,m0=https://$IP0:2380)" "$M1" &&
	ok "m1's manifest: --initial-cluster-state=existing and both members in --initial-cluster" || fail "m1's manifest" "$(grep initial "$M1")"
[ "$(e1 get k20 --consistency=s --print-value-only)" = v20 ] && ok "m1's etcd has the keys written on m0" || fail "m1 has the keys"
seq_ok=$(awk '$2 == "m1" && $3 == "etcd-m1" && ($4 == "created" || $4 == "ready") {print $4}' "$REC" | head -2 | tr '\n' ' ')
[ "$seq_ok" = "created ready " ] && ok "m1: its etcd pod was written (after the learner was added) and became Ready" || fail "m1: etcd pod" "$seq_ok"

# ---- orphan: m1's member removed behind its back -----------------------------------------------
ID1=$(e0 member list -w json | python3 -c 'import json, sys; print(["%x" % m["ID"] for m in json.load(sys.stdin)["members"] if m.get("name") == "m1"][0])')
# (etcd refuses a removal for 5 s after a member connected: "unhealthy cluster")
remove_m1() { e0 member remove "$ID1" || ! e0 member list | grep -q "$ID1"; }
peer check "m1's member is removed with etcdctl (its data stays)" wait_for 60 remove_m1
one_member() { [ "$(members)" = "$V0" ]; }
peer check "m0 is alone again" wait_for 30 one_member
[ -d "$R1/var/lib/etcd/member" ] && ok "m1 still has its data (an orphan)" || fail "m1 has its data"
if converge m1 "$IP1" m1-orphan; then ok "m1 (orphan) converges"; else fail "m1 (orphan) converges" "$(tail -3 "$T_TMP/m1-orphan.log")"; fi
line=$(grep 'etcd membership' "$T_TMP/m1-orphan.log" | tail -1)
case $line in *"[created]"*"orphan: joined as a learner and promoted"*"orphan data moved to "*) ok "m1: the orphan's data moved aside, rejoined and promoted" ;;
*) fail "m1: orphan rejoined" "$line" ;; esac
ls -d "$R1"/var/lib/etcd/member.orphaned-* >/dev/null 2>&1 && [ -d "$R1/var/lib/etcd/member" ] &&
	ok "m1: the old data is kept as member.orphaned-<time>, new data in member/" || fail "m1: data moved aside" "$(ls "$R1/var/lib/etcd")"
got=$(members)
[ "$got" = "$V0 $V1" ] && ok "etcdctl member list after the rejoin: m0 and m1, both voters" || fail "two voters after the rejoin" "$got"
for i in $(seq 21 40); do e0 put "k$i" "v$i" >/dev/null || break; done
[ "$(e1 get k40 --consistency=s --print-value-only)" = v40 ] && ok "40 keys written in the two-member cluster" || fail "40 keys written"

# ---- 2 -> 1: m1 gone -----------------------------------------------------------------------------
mv "$M1" "$T_TMP/m1-etcd.yaml"
m1_down() { ! e1 endpoint health; }
peer check "m1's etcd is stopped (its manifest removed)" wait_for 30 m1_down
no_leader() { [ "$(e0 endpoint status -w json 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["Status"].get("leader", 0))')" = 0 ]; }
peer check "m0 has no leader (quorum lost)" wait_for 30 no_leader
if converge m0 "$IP0" m0-notsafe; then fail "--force-new-cluster refused while m1 is a control-plane Node" "it converged"; else
	grep -q 'etcd has lost quorum and --force-new-cluster is not safe: member m1 is on a control-plane Node' "$T_TMP/m0-notsafe.log" &&
		ok "m0: --force-new-cluster refused while m1 is still a control-plane Node (the reason given)" ||
		fail "force refused with the reason" "$(grep -i 'etcd' "$T_TMP/m0-notsafe.log" | tail -2)"
fi
! grep -q -- --force-new-cluster "$R0/etc/kubernetes/manifests/etcd.yaml" && ok "m0: the refused step wrote no --force-new-cluster" || fail "no --force-new-cluster written"
peer check "Node m1 is deleted" kctl delete node m1
if converge m0 "$IP0" m0-force; then ok "m0 converges alone (2 -> 1)"; else fail "m0 converges alone" "$(tail -3 "$T_TMP/m0-force.log")"; fi
grep -q '\[updated\] *etcd membership.*quorum lost: restarted once with --force-new-cluster' "$T_TMP/m0-force.log" &&
	ok "m0: restarted once with --force-new-cluster" || fail "m0: force-new-cluster" "$(grep 'etcd membership' "$T_TMP/m0-force.log")"
got=$(members)
[ "$got" = "$V0" ] && ok "etcdctl member list: m0 alone, a voter" || fail "m0 alone" "$got"
! grep -q -- --force-new-cluster "$R0/etc/kubernetes/manifests/etcd.yaml" && ok "m0's manifest is written again without --force-new-cluster" || fail "the flag removed"
starts=$(awk '$3 == "etcd-m0" && $4 == "started"' "$REC" | wc -l)
forced=$(grep -c -- '--force-new-cluster' "$R0/.kubelet-sim/etcd.log" 2>/dev/null)
[ "$forced" = 1 ] && ok "m0's etcd ran once with --force-new-cluster ($starts starts in all)" || fail "once with --force-new-cluster" "$forced runs"
n=0
for i in $(seq 1 40); do [ "$(e0 get "k$i" --print-value-only)" = "v$i" ] && n=$((n + 1)); done
[ "$n" = 40 ] && ok "every written key is kept (40 of 40)" || fail "keys kept" "$n of 40"
e0 put after-shrink yes >/dev/null && ok "m0 takes writes alone" || fail "m0 takes writes"
ls "$R0"/etc/kubernetes/deckhouse/backup/*/etcd-before-force-new-cluster.snapshot >/dev/null 2>&1 &&
	ok "a snapshot was taken before --force-new-cluster (in the backup folder)" || fail "snapshot before forcing"

help=$("$AWS_K8S" cpm --help 2>&1)
grep -q -- '--etcd-membership' <<<"$help" && grep -q -- 'gets --force-new-cluster' <<<"$help" && grep -q 'as a learner' <<<"$help" &&
	! grep -q 'Not built yet' <<<"$help" && ok "cpm --help documents etcd in the converge (no 'Not built yet' left)" || fail "cpm --help documents etcd in the converge"

t_summary
