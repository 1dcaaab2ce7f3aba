#!/usr/bin/env bash
# Figures of aws-k8s cpm's etcd membership and backup (issue 19), against real etcd 3.4
# processes on 127.0.0.1 with TLS (Debian's etcd-server; the PKI made with openssl as kubeadm
# makes it): one member holding KEYS keys of SIZE bytes, grown to three by `cpm etcd join` (as a
# learner), etcd started with the initial cluster it prints, and `cpm etcd promote`; for each join
# the wall time and the etcd calls of the join, of the promote, and of the whole join + start +
# promote. Then `cpm etcd backup` of the three-member cluster (time, size, resident memory peak)
# and `cpm etcd defrag --cluster` (time). Each figure is one run; the machine may be shared.
# Environment: KEYS (default 2000), SIZE (default 2000).
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../integration/cpm_etcd_lib.sh"
KEYS=${KEYS:-2000}
SIZE=${SIZE:-2000}
command -v etcd >/dev/null && command -v etcdctl >/dev/null || { echo "cpm_etcd: etcd or etcdctl is missing (apt-get install etcd-server etcd-client)"; exit 0; }

EP=$T_TMP/pki
etcd_pki "$EP" || { echo "cpm_etcd: the PKI could not be made"; exit 1; }
C1=$(free_port) P1=$(free_port) C2=$(free_port) P2=$(free_port) C3=$(free_port) P3=$(free_port)
U1=https://127.0.0.1:$C1
EPS=$U1,https://127.0.0.1:$C2,https://127.0.0.1:$C3
etcd_run e1 "$C1" "$P1" "$T_TMP/e1" "e1=https://127.0.0.1:$P1" new
etcd_wait_healthy "$U1" || { echo "cpm_etcd: e1 did not start: $(tail -3 "$T_TMP/e1.log")"; exit 1; }
t0=$(date +%s%N)
etcd_fill "$U1" "$KEYS" "$SIZE" || { echo "cpm_etcd: filling e1 failed"; exit 1; }
echo "e1 filled with $KEYS keys of $SIZE bytes in $((($(date +%s%N) - t0) / 1000000)) ms;" \
	"db $(ectl --endpoints "$U1" endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["dbSize"])') bytes"

# grow NAME CLIENT_PORT PEER_PORT: join + start + promote, timed
grow() {
	local n=$1 cp=$2 pp=$3 out ic t0 tj ms
	t0=$(date +%s%N)
	out=$(cpm_etcd join --endpoints "$EPS" --name "$n" --peer-url "https://127.0.0.1:$pp" --data-dir "$T_TMP/$n" 2>&1) ||
		{ echo "cpm_etcd: join $n failed: $out"; exit 1; }
	tj=$((($(date +%s%N) - t0) / 1000000))
	ic=$(sed -n 's/^ETCD_INITIAL_CLUSTER=//p' <<<"$out")
	echo "  $n: $(grep '^join:' <<<"$out") (wall $tj ms)"
	etcd_run "$n" "$cp" "$pp" "$T_TMP/$n" "$ic" existing
	out=$(cpm_etcd promote --endpoints "$EPS" --peer-url "https://127.0.0.1:$pp" 2>&1) ||
		{ echo "cpm_etcd: promote $n failed: $out; $(tail -3 "$T_TMP/$n.log")"; exit 1; }
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "  $n: $out"
	echo "  $n: join + etcd start + catch-up + promote: $ms ms"
}
echo "grown from one member to three (join as a learner, start, promote):"
grow e2 "$C2" "$P2"
grow e3 "$C3" "$P3"
echo "members: $(ectl --endpoints "$EPS" member list 2>/dev/null | awk -F', ' '{ printf "%s%s(%s) ", "", $3, ($6 == "true" ? "learner" : "voter") }')"

# peak resident memory of a command: /usr/bin/time when present, else not measured
peak() { if [ -x /usr/bin/time ]; then /usr/bin/time -f "%M" -o "$T_TMP/peak" "$@"; else "$@"; fi; }
mkdir -p "$T_TMP/backup"
t0=$(date +%s%N)
out=$(peak "$AWS_K8S" cpm etcd backup --cacert "$EP/ca.crt" --cert "$EP/client.crt" --key "$EP/client.key" \
	--endpoints "$EPS" --out "$T_TMP/backup/etcd.snapshot.gz" 2>&1) || { echo "cpm_etcd: backup failed: $out"; exit 1; }
ms=$((($(date +%s%N) - t0) / 1000000))
echo "backup (.gz): $ms ms, $(stat -c %s "$T_TMP/backup/etcd.snapshot.gz") bytes written$([ -s "$T_TMP/peak" ] && echo ", peak RSS $(($(cat "$T_TMP/peak") / 1024)) MiB"): $(tail -1 <<<"$out")"
t0=$(date +%s%N)
out=$(cpm_etcd defrag --endpoints "$EPS" --cluster 2>&1) || { echo "cpm_etcd: defrag failed: $out"; exit 1; }
echo "defrag --cluster of 3 members: $((($(date +%s%N) - t0) / 1000000)) ms: $(tail -1 <<<"$out")"
