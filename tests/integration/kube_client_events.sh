#!/usr/bin/env bash
# tests: product
# The event recorder: repeats of one event become one Event whose count is PATCHed; 10 similar
# events with different messages are combined; events about cluster-scoped objects go to
# "default"; a stalled API server never blocks the recording; the queue and the spam filter
# are bounded.
. "$(dirname "$0")/../lib/testlib.sh"
. "$T_ROOT/tests/kube/lib.sh"

start_kas || { fail "test API server starts"; t_summary; }
printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"}}' | kcreate configmaps
printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-1"}}' | kcreate nodes
events_of() { kd raw "/api/v1/namespaces/$1/events?fieldSelector=involvedObject.name%3D$2"; }
verbs() { ctl GET requests | jq -r "[.requests[] | select(.path | test(\"/events\")) | select(.method == \"$1\")] | length"; }

out=$(kd event configmaps default/cfg Warning FailedSync "sync failed" --count 5)
check "5 repeats: 1 create, 4 patches" grep -q "created=1 patched=4 " <<<"$out"
ev=$(events_of default cfg)
check "one Event with count 5" test "$(jq -c '[(.items | length), .items[0].count]' <<<"$ev")" = "[1,5]"
check "type, reason, message, source" test "$(jq -r '.items[0] | [.type, .reason, .message, .source.component] | @csv' <<<"$ev")" = \
	'"Warning","FailedSync","sync failed","aws-k8s-kube-debug"'
check "involvedObject names the ConfigMap with its uid" \
	test "$(jq -r '.items[0].involvedObject | [.kind, .apiVersion, .namespace, .name, (.uid | length > 0)] | @csv' <<<"$ev")" = \
	'"ConfigMap","v1","default","cfg",true'
check "first and last timestamps" test "$(jq -r '.items[0] | (.firstTimestamp <= .lastTimestamp) and (.lastTimestamp | test("Z$"))' <<<"$ev")" = true
check "the API saw 1 POST and 4 PATCH" test "$(verbs POST),$(verbs PATCH)" = "1,4"

out=$(kd event nodes node-1 Normal Registered "node registered")
ev=$(events_of default node-1)
check "an event about a Node goes to namespace default" \
	test "$(jq -r '.items[0].involvedObject | [.kind, .name, (.namespace // "")] | @csv' <<<"$ev")" = '"Node","node-1",""'

out=$(kd event configmaps default/cfg Warning Similar "attempt {i} failed" --count 12)
check "10 similar events with different messages: 9 alone, then combined" grep -q "created=10 patched=2 " <<<"$out"
ev=$(events_of default cfg)
check "the combined Event counts the rest" test "$(jq -r '.items[] | select(.message | startswith("(combined from similar events): ")) | [.message, .count] | @csv' <<<"$ev")" = \
	'"(combined from similar events): attempt 12 failed",3'

# a stalled API server never blocks the caller; the queue and the spam filter are bounded
ctl POST faults -d '{"action":"stall","seconds":3,"method":"POST","path":"/events","count":1}' >/dev/null
out=$(kd --kube-api-qps -1 event configmaps default/cfg Normal Busy "busy" --count 2000)
ms=$(sed -n 's/^recorded in \([0-9]*\) ms$/\1/p' <<<"$out")
check "2000 events recorded in ${ms} ms while the API server stalls" test -n "$ms" -a "${ms:-9999}" -lt 500
check "a full queue drops events instead of blocking" \
	test "$(sed -n 's/.*dropped_queue=\([0-9]*\).*/\1/p' <<<"$out")" -gt 0
check "the spam filter lets 25 through per object" \
	test $(($(sed -n 's/.*created=\([0-9]*\) patched=\([0-9]*\).*/\1+\2/p' <<<"$out"))) -eq 25

t_summary
