#!/usr/bin/env bash
# tests: product
# Watches and informers: list then watch, reconnect from the last version after a dropped
# stream, relist after 410 (an ERROR event and an expired history), deletions seen through a
# relist, bookmarks, server-side timeouts; and against a stub server, malformed lines, unknown
# event types, HTTP 410 and garbage: an error and a reconnect, never a crash.
. "$(dirname "$0")/../lib/testlib.sh"
. "$T_ROOT/tests/kube/lib.sh"

start_kas || { fail "test API server starts"; t_summary; }
cm() { printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s"},"data":{"k":"%s"}}' "$1" "${2:-v}" | kcreate configmaps; }
watch_requests() { ctl GET requests | jq -r '.requests[] | select(.path | test("configmaps.*watch=true")) | .path'; }
list_requests() { ctl GET requests | jq '[.requests[] | select(.method == "GET" and (.path | test("configmaps\\?limit=")))] | length'; }

cm a0
cm a1
cm a2
bg inf "$AWS_K8S" kube-debug --kubeconfig "$KC" informer configmaps --namespace default \
	--watch-timeout 120 --duration 120s
LOG=$T_TMP/inf.log
check "informer lists and syncs 3 objects" wait_for "$LOG" "^SYNCED 3$"
cm a3
check "a new object arrives through the watch" wait_for "$LOG" "^ADD default/a3 "
rv3=$(sed -n 's/^ADD default\/a3 //p' "$LOG")

# a dropped stream: the informer watches again from the last version it saw
ctl POST "watches/drop?abrupt=1" >/dev/null
cm a4
check "after a dropped stream, the next event arrives" wait_for "$LOG" "^ADD default/a4 "
check "the new watch resumed from the last version seen ($rv3)" \
	grep -q "resourceVersion=$rv3&" <<<"$(watch_requests)"
check "no relist for a dropped stream" test "$(list_requests)" -eq 1

# an ERROR event with code 410: relist
ctl POST faults -d '{"action":"gone","count":1,"path":"configmaps","watch":true}' >/dev/null
ctl POST watches/drop >/dev/null
for i in $(seq 100); do [ "$(list_requests)" -ge 2 ] && break; sleep 0.1; done
check "an ERROR event with code 410 makes the informer list again" test "$(list_requests)" -eq 2

# a deletion while the watch is down and the history expired: seen through the relist
ctl POST faults -d '{"action":"error","code":500,"count":1,"watch":true,"path":"configmaps"}' >/dev/null
ctl POST watches/drop >/dev/null
for i in $(seq 100); do
	ctl GET requests | jq -e '[.requests[] | select(.code == 500)] | length > 0' >/dev/null && break
	sleep 0.05
done
kd delete configmaps default/a1 >/dev/null
ctl POST watches/expire >/dev/null
check "a deletion missed by the watch is delivered after the relist" wait_for "$LOG" "^DELETE default/a1$" 20
check "the watch error was followed by a backoff, then a relist" test "$(list_requests)" -eq 3
cm a5 changed
check "and the watch goes on" wait_for "$LOG" "^ADD default/a5 "

kill -TERM "$(cat "$T_TMP/inf.pid")"
check "the informer stops on SIGTERM and prints its statistics" wait_for "$LOG" "^stats: " 10
stats=$(sed -n 's/^stats: //p' "$LOG")
check "statistics: 3 lists, 2 relists, 2 gone, 5 objects ($stats)" \
	test "$(jq -c '[.lists, .relists, .gone, .objects, .malformed]' <<<"$stats")" = "[3,2,2,5,0]"

# bookmarks and server-side timeouts (the test server sends a bookmark every second)
out=$(kd watch configmaps --namespace default --watch-timeout 2 --duration 5s)
check "bookmarks arrive on a watch that allows them" grep -q "^BOOKMARK " <<<"$out"
streams=$(sed -n 's/^watch: streams=\([0-9]*\).*/\1/p' <<<"$out")
check "a watch ended by timeoutSeconds=2 is reopened at once ($streams streams in 5 s)" test "$streams" -ge 2

# --- broken streams, from a stub server ---
stub() {
	STUB_PORT=$(free_port)
	: >"$T_TMP/stub-$1.log"
	bg "stub-$1" python3 "$T_ROOT/tests/kube/watch_stub.py" --port "$STUB_PORT" --scenario "$1" \
		--log "$T_TMP/stub-$1.log"
	wait_http "http://127.0.0.1:$STUB_PORT/" 10
}
kds() { "$AWS_K8S" kube-debug --master "http://127.0.0.1:$STUB_PORT" "$@"; }

stub malformed
out=$(kds watch configmaps --count 5 --duration 20s)
rc=$?
check "malformed lines: the watch goes on and ends normally (exit $rc)" test "$rc" -eq 0
check "every valid event is delivered" test "$(grep -c '^ADDED' <<<"$out")" -eq 3
check "a non-JSON line and an unknown type each counted as malformed" grep -q "errors=2 malformed=2" <<<"$out"
sreq=$(grep watch "$T_TMP/stub-malformed.log")
ver=$("$AWS_K8S" version | awk 'NR == 1 { print $2 }')
check "the user agent names the subcommand and the version (aws-k8s-kube-debug/$ver)" \
	test "$(awk '{ print $3 }' <<<"$sreq" | sort -u)" = "aws-k8s-kube-debug/$ver"
check "after each malformed line a reconnect from the last version (6, then 7)" \
	test "$(grep -c 'resourceVersion=6&' <<<"$sreq"),$(grep -c 'resourceVersion=7&' <<<"$sreq")" = "1,1"

stub gone410
out=$(kds watch configmaps --resource-version 1 --duration 10s)
rc=$?
check "HTTP 410 on a watch asks for a relist (exit 3)" test "$rc" -eq 3 -a "$(tail -1 <<<"$out")" = GONE
stub error410
out=$(kds watch configmaps --resource-version 1 --duration 10s)
rc=$?
check "an ERROR event with code 410 asks for a relist (exit 3)" test "$rc" -eq 3
out=$(kds informer configmaps --duration 3s)
check "an informer facing 410 on every watch keeps listing" \
	test "$(sed -n 's/^stats: //p' <<<"$out" | jq '.lists >= 2 and .gone >= 2')" = true

stub big
out=$(kds watch configmaps --max-event 65536 --count 2 --duration 15s)
check "an event over the size cap is an error, then a reconnect" \
	test "$(grep -c '^ADDED' <<<"$out"),$(sed -n 's/.*errors=\([0-9]*\) malformed=\([0-9]*\).*/\1,\2/p' <<<"$out")" = "1,1,1"
check "the reconnect starts again from where it was (no version delivered yet)" \
	test "$(grep -c 'watch=true' "$T_TMP/stub-big.log")" -ge 2 -a "$(grep -c 'resourceVersion=' "$T_TMP/stub-big.log")" -eq 0
stub big
out=$(kds watch configmaps --count 1 --duration 15s)
check "under the default cap the same event is delivered" grep -q "^ADDED default/big " <<<"$out"

stub garbage
out=$(kds watch configmaps --duration 5s)
rc=$?
check "garbage on the stream: no crash (exit $rc)" test "$rc" -eq 0
check "garbage lines counted as malformed" \
	test "$(sed -n 's/.*malformed=\([0-9]*\).*/\1/p' <<<"$out")" -ge 2

t_summary
