# shellcheck shell=bash
# Shared helpers for integration tests and benchmarks. Source it from a test script:
#   . "$(dirname "$0")/../lib/testlib.sh"
# Then use ok/fail/check/skip and end with t_summary, which prints the
# "N passed, N failed, N skipped" line that tests/run sums up.
set -u
T_PASS=0 T_FAIL=0 T_SKIP=0
T_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export AWS_K8S=${AWS_K8S:-$T_ROOT/aws-k8s}
export T_TMP; T_TMP=$(mktemp -d "${TMPDIR:-/tmp}/awsk8s-test.XXXXXX")
T_CLEANUP=()

t_cleanup_add() { T_CLEANUP+=("$*"); }
t_cleanup() {
	local i
	for ((i = ${#T_CLEANUP[@]} - 1; i >= 0; i--)); do eval "${T_CLEANUP[i]}" >/dev/null 2>&1 || true; done
	T_CLEANUP=()
	rm -rf "$T_TMP"
}
trap t_cleanup EXIT
trap 'exit 130' INT TERM

# ok NAME, fail NAME [WHY], skip NAME REASON: one check each. A skip is not a pass, and
# tests/run turns it into a failure under TEST_STRICT_SKIPS=1 unless tests/skips.allow lists it.
# "peer ok ...", "peer check ...": a check of a test peer (moto, a fake, the fault proxy), not of
# aws-k8s, in a script marked "# tests: product"; t_summary prints their count on a
# "test peers:" line (see tests/README.md).
T_PEER_PASS=0 T_PEER_FAIL=0 T_PEER_SKIP=0
peer() { local T_IN_PEER=1; "$@"; }
ok() {
	T_PASS=$((T_PASS + 1))
	if [ -n "${T_IN_PEER:-}" ]; then T_PEER_PASS=$((T_PEER_PASS + 1)); fi
	echo "ok - $1"
}
fail() {
	T_FAIL=$((T_FAIL + 1))
	if [ -n "${T_IN_PEER:-}" ]; then T_PEER_FAIL=$((T_PEER_FAIL + 1)); fi
	echo "FAIL - $1${2:+: $2}"
}
skip() {
	T_SKIP=$((T_SKIP + 1))
	if [ -n "${T_IN_PEER:-}" ]; then T_PEER_SKIP=$((T_PEER_SKIP + 1)); fi
	echo "skip - $1: ${2:-(no reason given)}"
}
# check NAME CMD...: passes when CMD exits 0; output of a failing CMD is shown.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$name"; else fail "$name" "$(printf '%s' "$out" | tail -n 5)"; fi
}
# t_summary: the closing line, then exit: 1 when a check failed, 77 when every check was
# skipped (the whole script could not run here), else 0.
t_summary() {
	if [ $((T_PEER_PASS + T_PEER_FAIL + T_PEER_SKIP)) -gt 0 ]; then
		echo "test peers: $T_PEER_PASS passed, $T_PEER_FAIL failed, $T_PEER_SKIP skipped"
	fi
	echo "$T_PASS passed, $T_FAIL failed, $T_SKIP skipped"
	[ "$T_FAIL" -eq 0 ] || exit 1
	[ "$T_PASS" -eq 0 ] && [ "$T_SKIP" -gt 0 ] && exit 77
	exit 0
}

# free_port: prints a TCP port on 127.0.0.1 that nothing listens on.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_http URL [SECONDS]: waits until URL answers (any HTTP status), default 15 s.
wait_http() {
	local url=$1 limit=${2:-15} i=0
	while ! curl -sk -o /dev/null --max-time 1 "$url"; do
		i=$((i + 1))
		[ $i -gt $((limit * 20)) ] && return 1
		sleep 0.05
	done
}

# bg NAME CMD...: starts CMD in the background, logs to $T_TMP/NAME.log, records its
# pid in $T_TMP/NAME.pid and kills it at exit.
# wait_until SECONDS CMD...: runs CMD (quietly) until it succeeds, for at most SECONDS; a
# deadline, not a number of tries, since CMD itself may take a second (kubectl, boto3). SECONDS
# counts whole seconds, so the wait is at least SECONDS. CMD may be eval '...' to compute its
# arguments again each time.
wait_until() {
	local end=$((SECONDS + $1 + 1))
	shift
	while :; do
		"$@" >/dev/null 2>&1 && return 0
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.2
	done
}

bg() {
	local name=$1
	shift
	"$@" >"$T_TMP/$name.log" 2>&1 &
	echo $! >"$T_TMP/$name.pid"
	t_cleanup_add "kill $! 2>/dev/null; sleep 0.1; kill -9 $! 2>/dev/null"
}

# stop_within PID SECONDS NAME: a bounded graceful stop. Sends SIGTERM to PID (a child of this
# shell, e.g. started with bg) and waits up to SECONDS for it to exit. Returns 0 when it did,
# with its exit status in STOP_RC (the caller checks it). Otherwise records one failure and
# returns 1: when PID was no longer running at the call (it died early; STOP_RC is then the
# status it died with), or when it is still running after SECONDS (it is then SIGKILLed, so a
# process that ignores SIGTERM fails in SECONDS instead of hanging the script; STOP_RC=timeout).
stop_within() {
	local pid=$1 secs=$2 name=$3 i
	STOP_RC=
	if ! kill -TERM "$pid" 2>/dev/null; then
		wait "$pid" 2>/dev/null
		STOP_RC=$?
		fail "$name is running when asked to stop" "it had already exited with status $STOP_RC"
		return 1
	fi
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		STOP_RC=timeout
		fail "$name stops within ${secs} s of SIGTERM" "still running after ${secs} s; killed"
		return 1
	fi
	wait "$pid" 2>/dev/null
	STOP_RC=$?
	return 0
}
# wait_exit PID SECONDS: waits up to SECONDS for PID (already asked to stop) to exit and returns
# its exit status; past SECONDS it is killed and the status is 124. Never waits without bound.
wait_exit() {
	local pid=$1 secs=$2 i
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		return 124
	fi
	wait "$pid" 2>/dev/null
}
