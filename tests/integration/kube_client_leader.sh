#!/usr/bin/env bash
# tests: product
# Leader election: processes compete for one Lease. After the leader is killed with SIGKILL the
# other takes over within the lease duration (plus its retry period); after a graceful stop it
# takes over at once (the Lease is released); a leader that cannot renew stops within the
# renew deadline; never two leaders at once, checked from the timestamps every process writes
# while it believes it leads.
. "$(dirname "$0")/../lib/testlib.sh"
. "$T_ROOT/tests/kube/lib.sh"

start_kas || { fail "test API server starts"; t_summary; }

LEASE=4 RENEW=3 RETRY_MS=500
OUT=$T_TMP/leaders.out
: >"$OUT"
leader() {
	bg "le-$1" "$AWS_K8S" kube-debug --kubeconfig "$KC" leader --identity "$1" --out "$OUT" \
		--leader-elect-lease-duration ${LEASE}s --leader-elect-renew-deadline ${RENEW}s \
		--leader-elect-retry-period ${RETRY_MS}ms --leader-elect-resource-name test-lock \
		--leader-elect-resource-namespace kube-system
}
ts() { awk -v id="$1" -v w="$2" '$1 == id && $2 == w { print $3; exit }' "$OUT"; }
# between MIN MAX VALUE: VALUE is a number within [MIN, MAX]
between() { [ -n "$3" ] && [ "$3" -ge "$1" ] && [ "$3" -le "$2" ]; }
# ms A B: milliseconds from nanosecond time A to B, or nothing when one is unknown
ms() { [ -n "$1" ] && [ -n "$2" ] && echo $((($2 - $1) / 1000000)); }
lease() { kd get leases kube-system/test-lock; }

leader A
check "A becomes leader" wait_for "$OUT" "^A START " 10
leader B
check "B sees A as the leader" wait_for "$T_TMP/le-B.log" "^leader is A$" 10
sleep 1.5
check "only A leads" test "$(grep -c START "$OUT")" -eq 1
spec=$(lease | jq -c '.spec')
check "the Lease names A, ${LEASE}s, MicroTime renewTime" \
	test "$(jq -r '[.holderIdentity, .leaseDurationSeconds, (.renewTime | test("\\.[0-9]{6}Z$"))] | @csv' <<<"$spec")" = '"A",4,true'

# SIGKILL: B takes over within the lease duration from the last renewal it saw. B polls every
# retry period with up to 120% jitter, so it may see A's last renewal up to 2.2 retry periods
# late and notice the expiry up to 2.2 retry periods late (client-go behaves the same).
{
	kill -9 "$(cat "$T_TMP/le-A.pid")"
	killed=$(date +%s%N)
	wait_exit "$(cat "$T_TMP/le-A.pid")" 5
} 2>/dev/null
check "B takes over after A is killed" wait_for "$OUT" "^B START " 15
took=$(ms "$killed" "$(ts B START)")
limit=$((LEASE * 1000 + 2 * RETRY_MS * 22 / 10 + 300))
check "within the lease duration: ${took} ms (limit ${limit} ms)" between 0 "$limit" "$took"
check "and not before A's lease could have expired (${took} ms)" \
	between $(((LEASE - RENEW) * 1000)) "$limit" "$took"
check "leaseTransitions counts the change" test "$(lease | jq .spec.leaseTransitions)" -eq 1

# graceful stop: B releases the Lease and C takes over at once
leader C
check "C sees B as the leader" wait_for "$T_TMP/le-C.log" "^leader is B$" 10
sleep 1
kill -TERM "$(cat "$T_TMP/le-B.pid")"
check "B releases the lease on SIGTERM" wait_for "$OUT" "^B STOP " 10
check "C takes over" wait_for "$OUT" "^C START " 10
took=$(ms "$(ts B STOP)" "$(ts C START)")
check "at once: ${took} ms after the release (retry period ${RETRY_MS} ms)" \
	between 0 $((RETRY_MS * 22 / 10 + 300)) "$took"
wait_exit "$(cat "$T_TMP/le-B.pid")" 10
rc=$?
check "B exits 0 after a graceful stop (exit $rc)" test "$rc" -eq 0

# a leader that cannot renew stops at the renew deadline, and exits non-zero
ctl POST faults -d '{"action":"stall","seconds":30,"path":"leases/test-lock"}' >/dev/null
stalled=$(date +%s%N)
check "C gives up the lead when it cannot renew" wait_for "$OUT" "^C LOST " 15
took=$(ms "$stalled" "$(ts C LOST)")
check "within the renew deadline: ${took} ms (deadline ${RENEW}000 ms)" \
	between 0 $((RENEW * 1000 + 200)) "$took"
lastlead=$(awk '$1 == "C" && $2 == "LEAD" { t = $3 } END { print t }' "$OUT")
check "C wrote no heartbeat after it stopped leading" between 0 "$(ts C LOST)" "$lastlead"
wait_exit "$(cat "$T_TMP/le-C.pid")" 10
rc=$?
check "C exits with an error, its controllers stopped (exit $rc)" test "$rc" -eq 1
ctl DELETE faults >/dev/null

# never two leaders: each leader's interval [START, last heartbeat or STOP/LOST] is disjoint
# from the others'
check "never two leaders at once" awk '
	$2 == "START" { start[$1] = $3; order[n++] = $1 }
	$2 == "LEAD" || $2 == "STOP" || $2 == "LOST" { if ($3 > end[$1]) end[$1] = $3 }
	END {
		for (i = 0; i < n; i++) for (j = 0; j < n; j++) {
			a = order[i]; b = order[j]
			if (a != b && start[a] < start[b] && end[a] >= start[b]) { print a " overlaps " b; exit 1 }
		}
		if (n != 3) { print n " leaders"; exit 1 }
	}' "$OUT"
beats=$(awk '$2 == "LEAD" { c[$1]++ } END { printf "%d %d %d", c["A"], c["B"], c["C"] }' "$OUT")
check "heartbeats were written by each leader ($beats)" \
	awk -v b="$beats" 'BEGIN { split(b, c, " "); exit !(c[1] > 5 && c[2] > 5 && c[3] > 5) }'

t_summary
