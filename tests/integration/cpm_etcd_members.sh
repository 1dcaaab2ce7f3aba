#!/usr/bin/env bash
# tests: product
# aws-k8s cpm etcd membership against real etcd 3.4 processes on 127.0.0.1 (TLS, distinct ports
# and data dirs): one member started with the peer URL https://localhost:P, as a bootstrap
# leaves it, gets its real one with update-peer-url (single -> multi); grown to three by join
# (learner) + start + promote; a member killed mid-way; shrunk to one by remove-stale with the
# control-plane Nodes named (the dead member first, never below quorum, never the last); grown
# to three again, the old data of each rejoining member found orphan and moved aside. A writer
# puts a key every ~20 ms throughout, to whichever endpoint answers: every acknowledged write is
# read back at the end and no gap between two acknowledged writes exceeds 5 s (quorum never
# lost). At each step `etcdctl member list` and `cpm etcd members` agree on the names, roles
# and peer URLs. Last, with two of three members dead, remove-stale refuses at once (lost
# quorum: a MemberRemove would hang) instead of hanging; force-new-cluster-check says it is not
# safe while a dead member's Node is still control-plane and safe once it is not; the backup
# works without quorum; e1 restarted once with --force-new-cluster (what the cpm run's manifest
# would do) is a lone member with every acknowledged write, and takes writes after a restart
# without the flag. Prints the time and etcd calls of each join + promote.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/cpm_etcd_lib.sh"

command -v etcd >/dev/null && command -v etcdctl >/dev/null || {
	skip "etcd membership" "etcd or etcdctl is not installed (Debian's etcd-server, etcd-client)"
	t_summary
}
EP=$T_TMP/pki
peer check "the etcd PKI is made with openssl" etcd_pki "$EP"

C1=$(free_port) P1=$(free_port) C2=$(free_port) P2=$(free_port) C3=$(free_port) P3=$(free_port)
U1=https://127.0.0.1:$C1 U2=https://127.0.0.1:$C2 U3=https://127.0.0.1:$C3
EPS=$U1,$U2,$U3
peer_of() { case $1 in e1) echo "https://127.0.0.1:$P1" ;; e2) echo "https://127.0.0.1:$P2" ;; e3) echo "https://127.0.0.1:$P3" ;; esac; }
cport_of() { case $1 in e1) echo "$C1" ;; e2) echo "$C2" ;; e3) echo "$C3" ;; esac; }

# ours / theirs: "name:role:peerURL" of every member, sorted, as cpm etcd members and etcdctl
# member list see them
ours() { cpm_etcd members --endpoints "$EPS" 2>/dev/null | awk 'NF >= 5 && $1 ~ /^[0-9a-f]+$/ {print $2":"$3":"$5}' | sort | paste -sd' '; }
theirs() {
	ectl --endpoints "$EPS" member list 2>/dev/null | awk -F', ' '{
		role = ($2 == "unstarted") ? "unstarted" : ($6 == "true" ? "learner" : "voter")
		print (($3 == "") ? "-" : $3) ":" role ":" $4 }' | sort | paste -sd' '
}
# agree STEP NAME...: both views list exactly these voters (with their peer URLs)
agree() {
	local step=$1 want o t
	shift
	want=$(for n in "$@"; do echo "$n:voter:$(peer_of "$n")"; done | sort | paste -sd' ')
	o=$(ours) t=$(theirs)
	if [ "$o" = "$want" ] && [ "$t" = "$want" ]; then ok "$step: etcdctl member list and cpm etcd members agree: $*"
	else fail "$step: the member lists agree" "want [$want]; cpm [$o]; etcdctl [$t]"; fi
}

# ---- one member, bootstrapped with https://localhost:P1 -------------------------------------------
etcd_run e1 "$C1" "$P1" "$T_TMP/e1" "e1=https://localhost:$P1" new --initial-advertise-peer-urls "https://localhost:$P1"
peer check "e1 answers" etcd_wait_healthy "$U1"
out=$(cpm_etcd members --endpoints "$EPS" --name e1 --peer-url "$(peer_of e1)" --data-dir "$T_TMP/e1" 2>&1)
grep -q "^this node: joined$" <<<"$out" && grep -q " e1 voter healthy https://localhost:$P1$" <<<"$out" &&
	ok "members: e1 a healthy voter with https://localhost:P1, this node joined (found by name)" || fail "members on e1" "$out"
out=$(cpm_etcd update-peer-url --endpoints "$EPS" --peer-url "$(peer_of e1)" 2>&1)
[ "$out" = "update-peer-url: changed" ] && ok "update-peer-url on the lone member: changed" || fail "update-peer-url: changed" "$out"
out=$(cpm_etcd update-peer-url --endpoints "$EPS" --peer-url "$(peer_of e1)" 2>&1)
[ "$out" = "update-peer-url: unchanged" ] && ok "update-peer-url again: unchanged" || fail "update-peer-url again: unchanged" "$out"
agree "single member" e1

etcd_writer_start "$T_TMP/writer.json" "$EPS"

# join_promote NAME: join, start etcd with the printed initial cluster, promote
FIG=()
join_promote() {
	local n=$1 out ic t0 ms
	t0=$(date +%s%N)
	out=$(cpm_etcd join --endpoints "$EPS" --name "$n" --peer-url "$(peer_of "$n")" --data-dir "$T_TMP/$n" 2>&1)
	if [ $? != 0 ] || ! ic=$(sed -n 's/^ETCD_INITIAL_CLUSTER=//p' <<<"$out") || [ -z "$ic" ]; then
		fail "join $n" "$out"
		return 1
	fi
	grep -q "^ETCD_INITIAL_CLUSTER_STATE=existing$" <<<"$out" && grep -q "$n=$(peer_of "$n")" <<<"$ic" &&
		ok "join $n: added as a learner; initial cluster $ic" || fail "join $n prints the initial cluster" "$out"
	FIG+=("$(grep '^join: .* as a learner' <<<"$out")")
	out=$(theirs)
	grep -q "^-:unstarted:$(peer_of "$n")\| -:unstarted:$(peer_of "$n")" <<<"$out" && ok "etcdctl sees $n unstarted before it starts" ||
		fail "etcdctl sees $n unstarted" "$out"
	etcd_run "$n" "$(cport_of "$n")" "${2:-$(peer_of "$n" | sed 's/.*://')}" "$T_TMP/$n" "$ic" existing
	out=$(cpm_etcd promote --endpoints "$EPS" --peer-url "$(peer_of "$n")" 2>&1)
	ms=$((($(date +%s%N) - t0) / 1000000))
	if grep -q "^promote: $(peer_of "$n") is a voting member" <<<"$out"; then ok "promote $n: $out"
	else fail "promote $n" "$out; $(tail -3 "$T_TMP/$n.log")"; fi
	FIG+=("$out; join + start + promote: $ms ms")
}

# ---- grown to three -----------------------------------------------------------------------------------
out=$(cpm_etcd members --endpoints "$EPS" --name e2 --peer-url "$(peer_of e2)" --data-dir "$T_TMP/e2" 2>&1)
grep -q "^this node: needs-join$" <<<"$out" && ok "members: e2 needs a join" || fail "members: e2 needs a join" "$out"
join_promote e2
agree "grown to two" e1 e2
join_promote e3
agree "grown to three" e1 e2 e3
out=$(cpm_etcd promote --endpoints "$EPS" --name e3 2>&1)
grep -q "(0 tries" <<<"$out" && ok "promote of a voter: nothing to do ($out)" || fail "promote of a voter: nothing to do" "$out"

# ---- a member killed; shrunk to one ----------------------------------------------------------------------
kill_member() { local p; for n in "$@"; do p=$(cat "$T_TMP/$n.pid"); kill -9 "$p"; wait "$p"; done 2>/dev/null; }
kill_member e2
before=$(etcd_count_w "$U1")
out=$(cpm_etcd members --endpoints "$EPS" --control-plane-nodes e1,e3 2>&1)
grep -q " e2 voter unhealthy .* remove:not-a-control-plane-node$" <<<"$out" &&
	ok "e2 killed: members shows it unhealthy, to remove (not a control-plane Node)" || fail "members after the kill" "$out"
out=$(cpm_etcd remove-stale --endpoints "$EPS" --control-plane-nodes e1,e3 2>&1)
rc=$?
[ $rc = 0 ] && grep -q "^removed e2 " <<<"$out" && ok "remove-stale e1,e3: the dead e2 removed" || fail "remove-stale removes the dead e2" "exit $rc: $out"
agree "e2 removed" e1 e3
after=$(etcd_count_w "$U1")
[ -n "$before" ] && [ -n "$after" ] && [ "$after" -gt "$before" ] && ok "the writer kept writing through the kill ($before -> $after keys)" ||
	fail "the writer kept writing through the kill" "$before -> $after"
out=$(cpm_etcd remove-stale --endpoints "$EPS" --control-plane-nodes e1 --dry-run 2>&1)
grep -q "^would remove e3 " <<<"$out" && ok "remove-stale --dry-run says it would remove e3" || fail "remove-stale --dry-run" "$out"
agree "after the dry run" e1 e3
out=$(cpm_etcd remove-stale --endpoints "$EPS" --control-plane-nodes e1 2>&1)
rc=$?
[ $rc = 0 ] && grep -q "^removed e3 " <<<"$out" && ok "remove-stale e1: e3 removed (2 -> 1 with both alive)" || fail "remove-stale e1" "exit $rc: $out"
agree "shrunk to one" e1
wait_exit "$(cat "$T_TMP/e3.pid")" 30
rc=$?
[ $rc != 124 ] && ok "the removed e3 stops by itself" || fail "the removed e3 stops by itself" "still running after 30 s"
out=$(cpm_etcd remove-stale --endpoints "$EPS" --control-plane-nodes e9 2>&1)
rc=$?
[ $rc = 1 ] && grep -q "^kept e1 .*the last voting member" <<<"$out" && ok "remove-stale never removes the last member (exit 1, said)" ||
	fail "remove-stale keeps the last member" "exit $rc: $out"
agree "the last member kept" e1
out=$(cpm_etcd remove-stale --endpoints "$EPS" 2>&1)
[ $? = 2 ] && ok "remove-stale without --control-plane-nodes: usage error" || fail "remove-stale without nodes: exit 2" "$out"

# ---- grown again: the old data is orphan ----------------------------------------------------------------
out=$(cpm_etcd members --endpoints "$EPS" --name e2 --peer-url "$(peer_of e2)" --data-dir "$T_TMP/e2" 2>&1)
grep -q "^this node: orphan$" <<<"$out" && ok "members: e2's old data with no member is orphan" || fail "e2 is orphan" "$out"
join_promote e2
ls -d "$T_TMP"/e2/member.orphaned-* >/dev/null 2>&1 && ok "e2's orphan data was moved aside (member.orphaned-*)" || fail "e2's orphan data moved aside" "$(ls "$T_TMP/e2")"
agree "grown to two again" e1 e2
join_promote e3
agree "grown to three again" e1 e2 e3

# ---- an interrupted join: its unstarted learner is replaced by the next join ------------------------
P4=$(free_port) P5=$(free_port)
out=$(cpm_etcd join --endpoints "$EPS" --name e4 --peer-url "https://127.0.0.1:$P4" --data-dir "$T_TMP/e4" 2>&1)
[ $? = 0 ] && grep -q -- "-:unstarted:https://127.0.0.1:$P4" <<<"$(theirs)" && ok "join e4, never started: an unstarted learner" || fail "join e4" "$out"
out=$(cpm_etcd join --endpoints "$EPS" --name e5 --peer-url "https://127.0.0.1:$P5" --data-dir "$T_TMP/e5" 2>&1)
rc=$?
t=$(theirs)
if [ $rc = 0 ] && grep -q -- "-:unstarted:https://127.0.0.1:$P5" <<<"$t" && ! grep -q ":$P4" <<<"$t"; then
	ok "join e5: e4's interrupted join removed first (etcd takes one learner), e5 added"
else fail "join e5 replaces the interrupted learner" "$out; etcdctl [$t]"; fi
id=$(cpm_etcd members --endpoints "$EPS" 2>/dev/null | awk -v u="https://127.0.0.1:$P5" '$3 == "unstarted" && $5 == u {print $1}')
peer check "the unstarted e5 removed with etcdctl" ectl --endpoints "$EPS" member remove "$id"
agree "after the interrupted joins" e1 e2 e3

# ---- the writer -----------------------------------------------------------------------------------------
if etcd_writer_stop "$T_TMP/writer.json"; then
	read -r acked lost gap tries < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["acked"], d["lost"], d["max_gap_s"], d["failed_tries"])' "$T_TMP/writer.json")
	[ "$acked" -gt 50 ] && [ "$lost" = 0 ] && ok "the writer: $acked writes acknowledged, every one read back ($tries tries refused by a dead or unstarted member or a learner, then sent to the next)" ||
		fail "every acknowledged write is there" "$(cat "$T_TMP/writer.json")"
	python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 5 else 1)' "$gap" &&
		ok "quorum never lost: the longest gap between acknowledged writes is ${gap} s (< 5 s)" || fail "quorum never lost" "a gap of $gap s"
else fail "the writer reports" "$(tail -5 "$T_TMP/writer.log")"; fi

# ---- lost quorum: refused, not hung -------------------------------------------------------------------------
kill_member e2 e3
t0=$(date +%s%N)
out=$(cpm_etcd remove-stale --endpoints "$EPS" --control-plane-nodes e1 --command-timeout 3s 2>&1)
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 1 ] && grep -q "lost quorum: 1 of 3 voting members answer" <<<"$out" && [ $ms -lt 30000 ] &&
	ok "two of three dead: remove-stale refuses in ${ms} ms (lost quorum, --force-new-cluster named)" || fail "lost quorum: refused" "exit $rc in $ms ms: $out"

# ---- multi -> single without quorum: checked, then forced ------------------------------------------------
fnc() { cpm_etcd force-new-cluster-check --endpoints "$EPS" --name e1 --peer-url "$(peer_of e1)" --command-timeout 3s "$@" 2>&1; }
out=$(fnc --control-plane-nodes e1,e2)
rc=$?
[ $rc = 1 ] && grep -q "not safe: member e2 is on a control-plane Node" <<<"$out" &&
	ok "force-new-cluster-check with e2 still a control-plane Node: not safe (it may come back)" || fail "force check refuses while e2 is control-plane" "exit $rc: $out"
out=$(fnc --control-plane-nodes e1)
rc=$?
[ $rc = 0 ] && grep -q "^force-new-cluster-check: safe" <<<"$out" &&
	ok "force-new-cluster-check with e1 the only control-plane Node: safe" || fail "force check: safe" "exit $rc: $out"
out=$(cpm_etcd backup --endpoints "$U1" --out "$T_TMP/before-force.db" 2>&1)
[ $? = 0 ] && ok "a backup without quorum (the snapshot needs none)" || fail "a backup without quorum" "$out"
want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["acked"])' "$T_TMP/writer.json" 2>/dev/null)
if stop_within "$(cat "$T_TMP/e1.pid")" 30 e1; then
	etcd_run e1 "$C1" "$P1" "$T_TMP/e1" "e1=$(peer_of e1)" new --force-new-cluster
	if etcd_wait_healthy "$U1"; then
		agree "forced to one (--force-new-cluster)" e1
		got=$(etcd_count_w "$U1")
		[ -n "$want" ] && [ "$got" = "$want" ] && ok "the forced member kept every acknowledged write ($got)" || fail "the forced member kept the writes" "$got of $want"
		stop_within "$(cat "$T_TMP/e1.pid")" 30 e1 && etcd_run e1 "$C1" "$P1" "$T_TMP/e1" "e1=$(peer_of e1)" new
		etcd_wait_healthy "$U1" && ectl --endpoints "$U1" put after-force yes >/dev/null &&
			ok "restarted without the flag: a lone healthy member that takes writes" || fail "restarted without the flag" "$(tail -3 "$T_TMP/e1.log")"
		out=$(fnc --control-plane-nodes e1)
		[ $? = 1 ] && grep -q "only voting member already" <<<"$out" && ok "force-new-cluster-check afterwards: nothing to force" || fail "force check afterwards" "$out"
	else fail "e1 starts with --force-new-cluster" "$(tail -3 "$T_TMP/e1.log")"; fi
fi

for f in "${FIG[@]}"; do echo "# figures: $f"; done
t_summary
