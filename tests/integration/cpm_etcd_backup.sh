#!/usr/bin/env bash
# tests: product
# aws-k8s cpm etcd backup against a real etcd 3.4 on 127.0.0.1 with TLS (client certificates
# required; the PKI made with the openssl CLI as kubeadm makes it) holding ~4 MB of keys: the
# plain file is byte-for-byte what `etcdctl snapshot save` writes; .gz and .tar.gz hold the same
# bytes (the tar one entry, NAME.snapshot, as Deckhouse's script); `etcdctl snapshot restore`
# of our file starts an etcd that has the keys written; --keep 3 keeps three files; the 25 %
# free-space rule on a small tmpfs (root) refuses with a clear message and leaves nothing
# (the older file untouched), while a lower --min-free-percent lets it through; the same rule
# with --min-free-percent 100 on any disk; a peer that accepts and never answers (TLS: in the
# handshake; plain HTTP: after the request) times out within the bounds given; a missing
# client certificate fails clearly; deploy/cpm's CronJobs d8-etcd-backup and d8-etcd-defrag, their
# command lines taken from the rendered manifest and run as the kubelet would
# (tests/lib/manifest_run.py), the backup's file accepted by `etcdctl snapshot status`; defrag,
# its threshold (--min-db-size-percent of --quota-backend-bytes) and --cluster; usage errors.
# Prints the backup's time, size and peak memory.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/cpm_etcd_lib.sh"

command -v etcd >/dev/null && command -v etcdctl >/dev/null || {
	skip "etcd backup" "etcd or etcdctl is not installed (Debian's etcd-server, etcd-client)"
	t_summary
}
EP=$T_TMP/pki
peer check "the etcd PKI is made with openssl" etcd_pki "$EP"

CP=$(free_port) PP=$(free_port)
URL=https://127.0.0.1:$CP
etcd_run e1 "$CP" "$PP" "$T_TMP/e1" "e1=https://127.0.0.1:$PP" new
peer check "etcd answers on $URL with TLS" etcd_wait_healthy "$URL"
peer check "~4 MB of keys written (200 x 20 KB)" etcd_fill "$URL" 200 20000
ectl --endpoints "$URL" put marker "the-written-value" >/dev/null
B=$T_TMP/b
mkdir -p "$B"

# ---- the plain snapshot -------------------------------------------------------------------------
# the endpoint from etcdctl's variable
out=$(ETCDCTL_ENDPOINTS=$URL cpm_etcd backup --out "$B/snap.db" 2>&1)
rc=$?
ectl --endpoints "$URL" snapshot save "$B/ref.db" >/dev/null 2>&1
if [ $rc = 0 ] && cmp -s "$B/snap.db" "$B/ref.db"; then
	ok "backup to snap.db: exit 0, byte-for-byte what etcdctl snapshot save writes ($(stat -c %s "$B/snap.db") bytes)"
else fail "backup to snap.db equals etcdctl's" "exit $rc: $out; $(cmp "$B/snap.db" "$B/ref.db" 2>&1)"; fi
echo "# figures: $out"
grep -q 'sha256 checked' <<<"$out" && ok "backup says the sha256 was checked" || fail "backup says the sha256 was checked" "$out"
[ "$(stat -c %a "$B/snap.db")" = 600 ] && ok "the backup is 0600 (it holds the Secrets)" || fail "the backup is 0600" "$(stat -c %a "$B/snap.db")"
ectl snapshot status "$B/snap.db" >"$T_TMP/status.txt" 2>&1 &&
	ok "etcdctl snapshot status reads it: $(cat "$T_TMP/status.txt")" || fail "etcdctl snapshot status reads it" "$(cat "$T_TMP/status.txt")"

# ---- restored: an etcd with the keys -----------------------------------------------------------------
CP2=$(free_port) PP2=$(free_port)
if ectl snapshot restore "$B/snap.db" --name r1 --data-dir "$T_TMP/r1" \
	--initial-cluster "r1=https://127.0.0.1:$PP2" --initial-advertise-peer-urls "https://127.0.0.1:$PP2" >"$T_TMP/restore.log" 2>&1; then
	ok "etcdctl snapshot restore takes the backup (it checks the sha256 etcd appended)"
else fail "etcdctl snapshot restore takes the backup" "$(tail -3 "$T_TMP/restore.log")"; fi
etcd_run r1 "$CP2" "$PP2" "$T_TMP/r1" "r1=https://127.0.0.1:$PP2" new
if etcd_wait_healthy "https://127.0.0.1:$CP2" &&
	[ "$(ectl --endpoints "https://127.0.0.1:$CP2" get marker --print-value-only)" = the-written-value ] &&
	[ "$(ectl --endpoints "https://127.0.0.1:$CP2" get k0001 k0201 --keys-only | grep -c .)" = 200 ] &&
	[ "$(ectl --endpoints "https://127.0.0.1:$CP2" get k0137 --print-value-only)" = "$(ectl --endpoints "$URL" get k0137 --print-value-only)" ]; then
	ok "the restored etcd starts and has the keys written (marker, 200 keys, k0137's value)"
else fail "the restored etcd has the keys written" "$(tail -3 "$T_TMP/r1.log")"; fi

# ---- gzip and tar.gz ------------------------------------------------------------------------------
check "backup to snap.db.gz" cpm_etcd backup --endpoints "$URL" --out "$B/snap.db.gz"
gzip -dc "$B/snap.db.gz" | cmp -s - "$B/snap.db" && ok ".gz holds the same bytes" || fail ".gz holds the same bytes"
check "backup to etcd-backup.tar.gz" cpm_etcd backup --endpoints "$URL" --out "$B/etcd-backup.tar.gz"
list=$(tar -tzf "$B/etcd-backup.tar.gz" 2>&1)
[ "$list" = etcd-backup.snapshot ] && ok "the tar.gz holds one entry, etcd-backup.snapshot (Deckhouse's name)" || fail "the tar.gz holds etcd-backup.snapshot" "$list"
tar -xzOf "$B/etcd-backup.tar.gz" etcd-backup.snapshot | cmp -s - "$B/snap.db" && ok "its content is the snapshot" || fail "its content is the snapshot"

# ---- --keep -------------------------------------------------------------------------------------------
for i in 1 2 3; do cpm_etcd backup --endpoints "$URL" --out "$B/etcd-backup.tar.gz" --keep 3 >/dev/null 2>&1; done
if [ -f "$B/etcd-backup.tar.gz" ] && [ -f "$B/etcd-backup.1.tar.gz" ] && [ -f "$B/etcd-backup.2.tar.gz" ] && [ ! -e "$B/etcd-backup.3.tar.gz" ]; then
	ok "--keep 3: etcd-backup.tar.gz, .1 and .2, nothing more"
else fail "--keep 3 keeps three files" "$(ls "$B")"; fi
cpm_etcd backup --endpoints "$URL" --out "$B/etcd-backup.tar.gz" --keep 1 >/dev/null 2>&1
[ ! -e "$B/etcd-backup.1.tar.gz" ] && [ ! -e "$B/etcd-backup.2.tar.gz" ] && ok "--keep 1 afterwards removes the older ones" || fail "--keep 1 removes the older ones" "$(ls "$B")"
left=$(find "$B" -name '.*tmp' | wc -l)
[ "$left" = 0 ] && ok "no temporary file left by the runs" || fail "no temporary file left" "$(find "$B" -name '.*tmp')"

# ---- the free-space rule ------------------------------------------------------------------------------
out=$(cpm_etcd backup --endpoints "$URL" --out "$B/full.db" --min-free-percent 100 2>&1)
rc=$?
if [ $rc = 1 ] && grep -q 'not written: .* under the 100% to keep free' <<<"$out" && [ ! -e "$B/full.db" ]; then
	ok "--min-free-percent 100: exit 1, 'not written ... under the 100% to keep free', no file"
else fail "--min-free-percent 100 refuses" "exit $rc: $out"; fi
M=$T_TMP/small
mkdir -p "$M"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=16m tmpfs "$M" 2>/dev/null; then
	t_cleanup_add "umount -l '$M'"
	# 16 MiB with 9 MiB taken: a 4 MB snapshot would leave ~3 MiB, under 25 % (4 MiB)
	head -c $((9 << 20)) /dev/zero >"$M/filler"
	echo old >"$M/etcd-backup.db"
	out=$(cpm_etcd backup --endpoints "$URL" --out "$M/etcd-backup.db" 2>&1)
	rc=$?
	if [ $rc = 1 ] && grep -q 'not written: .*under the 25% to keep free' <<<"$out" &&
		[ "$(cat "$M/etcd-backup.db")" = old ] && [ "$(ls -A "$M" | sort | paste -sd' ')" = "etcd-backup.db filler" ]; then
		ok "16 MiB tmpfs, 9 MiB taken: refused under the 25 % rule, the older file untouched, nothing else left"
	else fail "the 25 % rule on a small tmpfs" "exit $rc: $out; $(ls -A "$M")"; fi
	echo "# $out"
	out=$(cpm_etcd backup --endpoints "$URL" --out "$M/etcd-backup.db" --min-free-percent 10 2>&1)
	rc=$?
	[ $rc = 0 ] && cmp -s "$M/etcd-backup.db" "$B/snap.db" && ok "the same with --min-free-percent 10: written" ||
		fail "--min-free-percent 10 lets it through" "exit $rc: $out"
else
	skip "the 25 % rule on a small tmpfs" "not root or tmpfs cannot be mounted here (the rule is checked with --min-free-percent 100 above)"
fi

# ---- a peer that never answers --------------------------------------------------------------------------
HP=$(free_port)
bg hang python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16); held = []
while True:
    c, _ = s.accept(); held.append(c)' "$HP"
listening() {
	local i
	for ((i = 0; i < 80; i++)); do
		python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$1" 2>/dev/null && return 0
		sleep 0.25
	done
	return 1
}
peer check "the silent listener accepts connections" listening "$HP"
t0=$(date +%s%N)
out=$(cpm_etcd backup --endpoints "https://127.0.0.1:$HP" --dial-timeout 1s --command-timeout 1s --out "$B/hang.db" 2>&1)
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ $rc = 1 ] && grep -qi 'timed out\|timeout' <<<"$out" && [ $ms -lt 15000 ] && [ ! -e "$B/hang.db" ]; then
	ok "TLS to a peer that never answers: a timeout error in ${ms} ms (--dial-timeout 1s), no file"
else fail "TLS to a silent peer times out" "exit $rc in $ms ms: $out"; fi
t0=$(date +%s%N)
out=$(cpm_etcd backup --endpoints "http://127.0.0.1:$HP" --command-timeout 1s --out "$B/hang.db" 2>&1)
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
if [ $rc = 1 ] && grep -qi 'timed out\|timeout' <<<"$out" && [ $ms -lt 15000 ] && [ ! -e "$B/hang.db" ]; then
	ok "plain HTTP to a peer that never answers: a timeout error in ${ms} ms (--command-timeout 1s)"
else fail "HTTP to a silent peer times out" "exit $rc in $ms ms: $out"; fi
t0=$(date +%s%N)
out=$(cpm_etcd members --endpoints "http://127.0.0.1:$HP" --command-timeout 1s 2>&1)
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 1 ] && [ $ms -lt 15000 ] && ok "members against it: exit 1 in ${ms} ms" || fail "members against a silent peer" "exit $rc in $ms ms: $out"

# ---- other failures -------------------------------------------------------------------------------------
out=$("$AWS_K8S" cpm etcd backup --endpoints "$URL" --cacert "$EP/ca.crt" --out "$B/nocert.db" 2>&1)
rc=$?
[ $rc = 1 ] && [ ! -e "$B/nocert.db" ] && ok "no client certificate: exit 1 ($(head -c 120 <<<"$out"))" || fail "no client certificate fails" "exit $rc: $out"
out=$(cpm_etcd backup --endpoints "$URL" 2>&1)
[ $? = 2 ] && grep -q -- '--out is required' <<<"$out" && ok "no --out: usage error (exit 2)" || fail "no --out: exit 2" "$out"
out=$(cpm_etcd backup --out "$B/x.db" --endpoints 127.0.0.1:2379 2>&1)
[ $? = 2 ] && ok "an endpoint without a scheme: exit 2" || fail "an endpoint without a scheme: exit 2" "$out"
out=$(cpm_etcd frobnicate 2>&1)
[ $? = 2 ] && ok "an unknown command: exit 2" || fail "an unknown command: exit 2" "$out"
out=$(cpm_etcd backup --endpoints "$URL" --out "$T_TMP/nodir/x.db" 2>&1)
[ $? = 1 ] && grep -q nodir <<<"$out" && ok "a missing folder: exit 1, named" || fail "a missing folder: exit 1" "$out"

# ---- deploy/cpm's CronJob d8-etcd-backup, its command line run as the kubelet would -------------------
# (kubectl kustomize deploy/cpm/base, tests/lib/manifest_run.py: the host paths it mounts under a
# folder, etcd's port 2379 moved to this etcd's; the PKI as kubeadm names it)
DR=$T_TMP/deploy-cpm.yaml MR=$T_TMP/mr
mkdir -p "$MR/etcd-pki" "$T_TMP/bin"
ln -sf "$AWS_K8S" "$T_TMP/bin/aws-k8s"
cp "$EP/ca.crt" "$MR/etcd-pki/ca.crt"
cp "$EP/client.crt" "$MR/etcd-pki/healthcheck-client.crt"
cp "$EP/client.key" "$MR/etcd-pki/healthcheck-client.key"
# cronjob NAME CONTAINER OUTPUT: runs the CronJob's container, exit status in $rc
cronjob() {
	python3 "$T_ROOT/tests/lib/manifest_run.py" "$DR" --kind CronJob --name "$1" --container "$2" \
		--mount-root "$MR" --port-map 2379="$CP" --bin-dir "$T_TMP/bin" \
		--pass-env 'ASAN_*' --pass-env 'UBSAN_*' --pass-env 'LSAN_*' --exec >"$3" 2>&1
	rc=$?
}
if ! command -v kubectl >/dev/null || ! python3 -c 'import yaml' 2>/dev/null; then
	skip "deploy/cpm's etcd CronJobs run" "kubectl or python3's yaml module missing"
elif ! kubectl kustomize "$T_ROOT/deploy/cpm/base" >"$DR" 2>"$DR.err"; then
	fail "kubectl kustomize deploy/cpm/base" "$(tail -3 "$DR.err")"
else
	argv=$(python3 "$T_ROOT/tests/lib/manifest_run.py" "$DR" --kind CronJob --name d8-etcd-backup \
		--container backup --mount-root "$MR" --port-map 2379="$CP" --bin-dir "$T_TMP/bin" --print-argv 2>&1)
	echo "# d8-etcd-backup runs: $argv"
	cronjob d8-etcd-backup backup "$T_TMP/cj-backup.log"
	f=$MR/etcd-backup/etcd-backup.tar.gz
	if [ $rc = 0 ] && [ "$(tar -tzf "$f" 2>&1)" = etcd-backup.snapshot ]; then
		ok "deploy/cpm's d8-etcd-backup command line: exit 0, etcd-backup.tar.gz on the host path (one entry): $(tail -1 "$T_TMP/cj-backup.log")"
	else fail "deploy/cpm's d8-etcd-backup command line writes etcd-backup.tar.gz" "exit $rc: $(tail -3 "$T_TMP/cj-backup.log")"; fi
	tar -xzf "$f" -C "$T_TMP" etcd-backup.snapshot 2>/dev/null
	ectl snapshot status "$T_TMP/etcd-backup.snapshot" >"$T_TMP/cj-status.txt" 2>&1 &&
		ok "etcdctl snapshot status accepts the CronJob's snapshot: $(cat "$T_TMP/cj-status.txt")" ||
		fail "etcdctl snapshot status accepts the CronJob's snapshot" "$(cat "$T_TMP/cj-status.txt")"
	cronjob d8-etcd-backup backup "$T_TMP/cj-backup2.log"
	n=$(find "$MR/etcd-backup" -mindepth 1 | wc -l)
	[ $rc = 0 ] && [ "$n" = 1 ] && ok "run again: the one file overwritten, nothing else in the folder (--keep=1)" ||
		fail "run again: one file kept" "exit $rc, $(ls -A "$MR/etcd-backup")"
	# its memory, for the CronJob's resources: the same command line under /usr/bin/time
	if [ -x /usr/bin/time ]; then
		kb=$(eval "/usr/bin/time -f %M $argv" 2>&1 >/dev/null | tail -1)
		echo "# figures: d8-etcd-backup's run, ~4 MB db: peak RSS ${kb} KiB (the CronJob asks 24Mi, limit 64Mi)"
	fi
	argv=$(python3 "$T_ROOT/tests/lib/manifest_run.py" "$DR" --kind CronJob --name d8-etcd-defrag \
		--container defrag --mount-root "$MR" --port-map 2379="$CP" --bin-dir "$T_TMP/bin" --print-argv 2>&1)
	echo "# d8-etcd-defrag runs: $argv"
	cronjob d8-etcd-defrag defrag "$T_TMP/cj-defrag.log"
	if [ $rc = 0 ] && grep -qE "^defrag: https://127.0.0.1:$CP: db [0-9]+ bytes, [0-9]+% of the quota 2147483648: under 90%, left" "$T_TMP/cj-defrag.log"; then
		ok "deploy/cpm's d8-etcd-defrag command line: exit 0, the member (from the member list) far under 90 % of 2 GiB is left: $(cat "$T_TMP/cj-defrag.log")"
	else fail "deploy/cpm's d8-etcd-defrag command line" "exit $rc: $(cat "$T_TMP/cj-defrag.log")"; fi
fi

# ---- defrag ---------------------------------------------------------------------------------------------
ectl --endpoints "$URL" del --prefix k01 >/dev/null
# the db's size now: a quota just above it puts it over 90 %, one of 4x under
db=$(ectl --endpoints "$URL" endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["dbSize"])')
out=$(cpm_etcd defrag --endpoints "$URL" --min-db-size-percent 90 --quota-backend-bytes $((db * 4)) 2>&1)
rc=$?
db2=$(ectl --endpoints "$URL" endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["dbSize"])')
if [ $rc = 0 ] && grep -q "^defrag: $URL: db $db bytes, 25% of the quota $((db * 4)): under 90%, left" <<<"$out" && [ "$db2" = "$db" ]; then
	ok "defrag at 90 % of a quota 4x the db ($db bytes): left, exit 0, the db's size unchanged"
else fail "defrag under the threshold is left" "exit $rc, $db -> $db2: $out"; fi
out=$(cpm_etcd defrag --endpoints "$URL" --cluster --min-db-size-percent 90 --quota-backend-bytes $((db * 21 / 20)) 2>&1)
rc=$?
db2=$(ectl --endpoints "$URL" endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["dbSize"])')
if [ $rc = 0 ] && grep -qE "^defrag: https://127.0.0.1:$CP: db $db -> $db2 bytes" <<<"$out" && [ "$db2" -lt "$db" ]; then
	ok "defrag --cluster at 90 % of a quota 1.05x the db: defragmented, $db -> $db2 bytes"
else fail "defrag over the threshold defragments" "exit $rc, $db -> $db2: $out"; fi
out=$(cpm_etcd defrag --endpoints "$URL" 2>&1)
rc=$?
[ $rc = 0 ] && grep -qE "^defrag: $URL: db [0-9]+ -> [0-9]+ bytes" <<<"$out" && ok "defrag: $out" || fail "defrag" "exit $rc: $out"
out=$(cpm_etcd defrag --endpoints "$URL" --min-db-size-percent 101 2>&1)
[ $? = 2 ] && grep -q "out of range" <<<"$out" && ok "--min-db-size-percent 101: usage error (exit 2)" || fail "--min-db-size-percent 101: exit 2" "$out"
t_summary
