#!/usr/bin/env bash
# tests: product
# node-termination-handler's IMDS mode (`aws-k8s nth`, one process per Node as the DaemonSet
# runs it, with the environment the upstream Helm chart sets) against the metadata fake (IMDSv2
# required) and the test API server, checked with kubectl:
#   - a spot interruption, a scheduled maintenance, a rebalance recommendation (monitoring only:
#     cordon; with draining: drain) and the ASG target lifecycle state Terminated each cordon,
#     taint (upstream's keys, upstream's event ID as value) and drain their Node (the ReplicaSet
#     pod evicted, the DaemonSet pod kept), with upstream's Kubernetes event reasons; a notice
#     that stays listed is handled once;
#   - a scheduled event that becomes canceled, another that becomes completed, one canceled while
#     nth was down: uncordoned, NTH's labels and taints removed; the uncordon after a reboot (action-time label against the
#     uptime): kept cordoned when the uptime says no reboot, uncordoned when it says one, and
#     the event still listed active does not cordon it again;
#   - a PodDisruptionBudget blocks the drain (the deadline passes, the event is tried again after
#     a delay, the process stays up), then allows it: the drain completes; a blocked event that
#     is then canceled uncordons;
#   - DRY_RUN: a notice changes nothing (no Node write, no eviction);
#   - CORDON_ONLY with EXCLUDE_FROM_LOAD_BALANCERS and TAINT_EFFECT=PreferNoSchedule: cordoned,
#     labelled out of the load balancers, tainted with that effect, nothing evicted;
#     ENABLE_OUT_OF_SERVICE_TAINT: the out-of-service taint after the drain;
#   - malformed metadata answers (HTML, truncated JSON, 500s, a hang past the client timeout):
#     each logged once however many polls see it, no crash, no hot loop, and the next good
#     notice is acted on;
#   - SIGTERM in the middle of a PDB-blocked drain: exit 0 within seconds; a restart finishes;
#   - every metadata read carried a token; an expired token is replaced without an error.
# The Nodes are handled at the same time: the longer stories (scheduled, pdb, bad, term) run as
# background flows whose checks are replayed here at the end.
. "$(dirname "$0")/../lib/testlib.sh"
. "$T_ROOT/tests/lib/moto.sh"
. "$T_ROOT/tests/kube/lib.sh"
. "$T_ROOT/tests/integration/nth_lib.sh"

T=$T_TMP
export KUBECACHEDIR=$T/kcache
k() { kubectl --kubeconfig "$KC" "$@"; }
start_kas || { fail "the test API server starts"; t_summary; }

NODES="spot sched rebmon rebdrain asg pdb dry bad term opts oos"

# ---- the Nodes, each with a ReplicaSet pod (NAME-web) and a DaemonSet pod (NAME-ds) -----------
python3 - "$NODES" >"$T/objects.json" <<'PY'
import json, sys
items = []
for n in sys.argv[1].split():
    items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
                  "spec": {"taints": [{"key": "keep", "value": "me", "effect": "NoSchedule"}]},
                  "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    for pod, kind in (("web", "ReplicaSet"), ("ds", "DaemonSet")):
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": "%s-%s" % (n, pod), "namespace": "default", "labels": {"app": "%s-%s" % (n, pod)},
                                   "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": "%s-%s" % (n, pod),
                                                        "uid": "uid-%s-%s" % (n, pod), "controller": True}]},
                      "spec": {"nodeName": n, "containers": [{"name": "c", "image": "i"}]},
                      "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
for n in ("pdb", "term"):  # a budget that refuses every eviction of NAME-web
    items.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": n, "namespace": "default"},
                  "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": n + "-web"}}}})
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
k create -f "$T/objects.json" >/dev/null 2>"$T/objects.err"
n=$(k get pods -o name 2>/dev/null | wc -l)
[ "$n" = 22 ] && peer ok "11 Nodes with 22 pods, 2 PodDisruptionBudgets" ||
	{ peer fail "the Nodes and pods" "$n pods; $(tail -3 "$T/objects.err")"; t_summary; }

# ---- one metadata fake per Node, started together (nth_lib.sh) -------------------------------
declare -A U
nth_imds_fakes $NODES

# nth NAME LOGNAME [VAR=VALUE...]: nth for Node NAME with the chart's environment (IMDS mode);
# its log is $T/LOGNAME.log, its pid in $T/LOGNAME.pid (and $T/nth-pids, killed at exit)
touch "$T/nth-pids"
t_cleanup_add "for p in \$(cat '$T/nth-pids'); do kill -9 \$p; done"
nth() {
	local node=$1 log=$2
	shift 2
	env KUBECONFIG="$KC" NODE_NAME="$node" POD_NAME="nth-$node" NAMESPACE=kube-system \
		INSTANCE_METADATA_URL="${U[$node]}" DELETE_LOCAL_DATA=true IGNORE_DAEMON_SETS=true \
		POD_TERMINATION_GRACE_PERIOD=-1 NODE_TERMINATION_GRACE_PERIOD=120 METADATA_TRIES=3 \
		DRY_RUN=false CORDON_ONLY=false TAINT_NODE=true TAINT_EFFECT=NoSchedule \
		EXCLUDE_FROM_LOAD_BALANCERS=false EMIT_KUBERNETES_EVENTS=true JSON_LOGGING=false \
		LOG_LEVEL=info ENABLE_SPOT_INTERRUPTION_DRAINING=true ENABLE_SCHEDULED_EVENT_DRAINING=true \
		ENABLE_ASG_LIFECYCLE_DRAINING=true ENABLE_REBALANCE_MONITORING=false \
		ENABLE_REBALANCE_DRAINING=false ENABLE_SQS_TERMINATION_DRAINING=false \
		ENABLE_PROMETHEUS_SERVER=false ENABLE_PROBES_SERVER=false "$@" \
		"$AWS_K8S" nth --poll-interval=500ms >"$T/$log.log" 2>&1 &
	echo $! >"$T/$log.pid"
	echo $! >>"$T/nth-pids"
}
pid() { cat "$T/$1.pid"; }
started() { grep -q "started the IMDS monitors" "$T/$1.log"; }

# ---- helpers ---------------------------------------------------------------------------------
# polling goes to the API server with curl (cheap); the checks themselves use kubectl
api() { curl -sk --max-time 10 -H "Authorization: Bearer $KAS_TOKEN" "$KAS_URL$1"; }
p_cordoned() { api "/api/v1/nodes/$1" | jq -e '.spec.unschedulable == true'; }
p_uncordoned() { api "/api/v1/nodes/$1" | jq -e '.spec.unschedulable != true'; }
p_gone() { [ "$(curl -sk -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KAS_TOKEN" "$KAS_URL/api/v1/namespaces/default/pods/$1")" = 404 ]; }
nj() { k get node "$1" -o json | jq -r "$2"; }
cordoned() { [ "$(nj "$1" '.spec.unschedulable // false')" = true ]; }
taints() { nj "$1" '[.spec.taints[]? | .key + "=" + (.value // "") + ":" + .effect] | join(" ")'; }
label() { nj "$1" ".metadata.labels[\"$2\"] // \"\""; }
pod_gone() { ! k get pod "$1" >/dev/null 2>&1; }
pod_there() { k get pod "$1" >/dev/null 2>&1; }
# clean NODE: uncordoned, only the foreign taint left, none of NTH's labels
clean() {
	test "$(nj "$1" '[.spec.unschedulable // false, ([.spec.taints[]?.key] | join(" ")),
		([.metadata.labels | keys[] | select(startswith("aws-node-termination-handler/"))] | length)] | join(",")')" = "false,keep,0"
}
# reasons NODE: the reasons of NTH's Kubernetes events on the Node, sorted, comma-separated
reasons() {
	k get events -o json | jq -r --arg n "$1" '[.items[] | select(.involvedObject.kind == "Node" and
		.involvedObject.name == $n and .source.component == "aws-node-termination-handler") | .reason]
		| unique | join(",")'
}
has_reasons() { local r; r=",$(reasons "$1"),"; shift; for x; do [[ $r == *",$x,"* ]] || return 1; done; }
# evictions POD: eviction requests the API server saw for the pod
evictions() { ctl GET "requests?limit=100000" | jq --arg p "/pods/$1/eviction" '[.requests[] | select(.path | contains($p))] | length'; }
# node_writes NODE: PATCH/PUT requests on the Node
node_writes() { ctl GET "requests?limit=100000" | jq --arg p "/api/v1/nodes/$1" '[.requests[] | select((.path | split("?")[0]) == $p and (.method == "PATCH" or .method == "PUT"))] | length'; }
count() { grep -c -- "$2" "$T/$1.log"; }
fake() { tb_post "${U[$1]}/_control/$2" "$3" >/dev/null; }
fake_get() { tb_json "${U[$1]}/_control/$2"; }
polls() { fake_get "$1" requests | jq --arg p "/latest/meta-data/$2" '.by_path[$p] // 0'; }
# polled_since NODE PATH N: the fake has served PATH at least N times
polled_since() { [ "$(polls "$1" "$2")" -ge "$3" ]; }
# more_polls NODE PATH N: waits until the fake served PATH N more times
more_polls() { local p0; p0=$(polls "$1" "$2"); wait_until 30 polled_since "$1" "$2" $((p0 + $3)); }
# upstream's event IDs: sha256 of Go's %v of the decoded struct pointer, "&{terminate TIME}"
sha() { printf '%s' "$1" | sha256sum | cut -c1-64; }
# the taint and label value: the event ID cut to 63 characters
v63() { printf '%.63s' "$1"; }
# expect_drained NODE KIND_TAINT EVENT_ID REASON...: the checks of a drained Node (one kubectl
# call for the Node, one for the pods)
expect_drained() {
	local n=$1 key=aws-node-termination-handler/$2 v got pods
	v=$(v63 "$3")
	shift 3
	got=$(nj "$n" '[(.spec.unschedulable // false), ([.spec.taints[]? | .key + "=" + (.value // "") + ":" + .effect] | join(" ")),
		.metadata.labels["aws-node-termination-handler/event-id"] // ""] | join("|")')
	check "$n: cordoned" test "${got%%|*}" = true
	check "$n: tainted $key=<event ID>:NoSchedule, the other taint kept" \
		test "$(cut -d'|' -f2 <<<"$got")" = "keep=me:NoSchedule $key=$v:NoSchedule"
	check "$n: labelled with the event ID" test "${got##*|}" = "$v"
	pods=$(k get pods -o jsonpath='{.items[*].metadata.name}' --field-selector "spec.nodeName=$n")
	check "$n: the ReplicaSet pod was evicted, the DaemonSet pod is kept" test "$pods" = "$n-ds"
	if wait_until 20 has_reasons "$n" "$@"; then ok "$n: Kubernetes events $* on the Node"
	else fail "$n: Kubernetes events $*" "got $(reasons "$n")"; fi
}
# stopped LOG WHAT: SIGTERM, then exit 0 within 15 s, and no error logged on the way out
stopped() {
	local t0=$SECONDS
	stop_within "$(pid "$1")" 15 "$2" || return
	local errs
	errs=$(sed -n '/"stop requested"/,$p' "$T/$1.log" | grep '^E' | cut -c1-300)
	if [ "$STOP_RC" = 0 ] && [ -z "$errs" ]; then
		ok "$2 stops on SIGTERM with exit 0 (in $((SECONDS - t0)) s), no error logged on the way out"
	else fail "$2 stops on SIGTERM with exit 0, no error logged on the way out" "exit $STOP_RC; $errs"; fi
}

# ---- flow: scheduled maintenance: drain, canceled, completed, the uncordon after a reboot ------
E1=instance-event-0a1b2c3d4e5f60718 E2=instance-event-0b2c3d4e5f6071829 E3=instance-event-0c3d4e5f607182930
E4=instance-event-0f60718293a4b5c6d
ev() { printf '{"Code":"%s","EventId":"%s","State":"%s","NotBefore":30,"NotAfter":3600}' "$@"; }
flow_sched() {
	fake sched events "[$(ev system-reboot $E1 active)]"
	nth sched nth-sched
	wait_until 30 p_gone sched-web
	expect_drained sched scheduled-maintenance $E1 ScheduledEvent PreDrain CordonAndDrain
	check "sched: a restart code (system-reboot) labels the Node for the uncordon after reboot" \
		test "$(label sched aws-node-termination-handler/action)" = UncordonAfterReboot
	local at now
	at=$(label sched aws-node-termination-handler/action-time) now=$(date +%s)
	check "sched: action-time is the Unix time of the cordon ($at)" test "$at" -le "$now" -a "$at" -gt $((now - 120))
	fake sched events "[$(ev system-reboot $E1 canceled)]"
	wait_until 30 clean sched
	check "sched: the event canceled: uncordoned, NTH's taint and labels removed" clean sched
	wait_until 20 has_reasons sched Uncordon
	check "sched: Kubernetes event Uncordon" has_reasons sched Uncordon
	fake sched events "[$(ev system-reboot $E1 canceled),$(ev instance-stop $E2 active)]"
	wait_until 30 p_cordoned sched
	check "sched: a second event (instance-stop) cordons again" cordoned sched
	fake sched events "[$(ev system-reboot $E1 canceled),$(ev instance-stop $E2 completed)]"
	wait_until 30 clean sched
	check "sched: the event completed: uncordoned, NTH's taint and labels removed" clean sched

	# the reboot: a third event cordons and labels; nth restarts with an uptime file
	fake sched events "[$(ev system-reboot $E1 canceled),$(ev instance-stop $E2 completed),$(ev system-reboot $E3 active)]"
	wait_until 30 p_cordoned sched
	wait_until 10 eval '[ "$(label sched aws-node-termination-handler/event-id)" = $E3 ]'
	at=$(label sched aws-node-termination-handler/action-time)
	check "sched: a third event (system-reboot) cordons and labels UncordonAfterReboot again" \
		test "$(label sched aws-node-termination-handler/action)/$(label sched aws-node-termination-handler/event-id)" = "UncordonAfterReboot/$E3"
	stopped nth-sched "nth (sched)"
	printf '100000.00 150000.00\n' >"$T/uptime-long"
	nth sched nth-sched2 UPTIME_FROM_FILE="$T/uptime-long"
	check "sched: restarted without a reboot (uptime 100000 s), the check says so" \
		wait_for "$T/nth-sched2.log" "has not rebooted" 30
	wait_until 30 started nth-sched2
	check "sched: ... and the Node stays cordoned with its labels" \
		test "$(cordoned sched && echo y)/$(label sched aws-node-termination-handler/action-time)" = "y/$at"
	stopped nth-sched2 "nth (sched, second run)"
	# rebooted 1 s ago; the event is still listed active, as it can be right after the reboot
	wait_until 5 eval '[ "$(date +%s)" -ge $((at + 2)) ]'
	printf '1.00 1.50\n' >"$T/uptime-short"
	nth sched nth-sched3 UPTIME_FROM_FILE="$T/uptime-short"
	wait_until 30 clean sched
	check "sched: after a reboot (uptime 1 s < time since the cordon): uncordoned, labels and taint removed" clean sched
	wait_until 30 started nth-sched3
	more_polls sched events/maintenance/scheduled 4
	check "sched: the event still listed active does not cordon the Node again" clean sched
	check "sched: ... nor is it handled again" test "$(count nth-sched3 "handling interruption event")" = 0

	# an event canceled while nth is down: the next run uncordons (the Node carries its ID)
	local list
	list="$(ev system-reboot $E1 canceled),$(ev instance-stop $E2 completed),$(ev system-reboot $E3 completed)"
	fake sched events "[$list,$(ev system-maintenance $E4 active)]"
	wait_until 30 eval '[ "$(label sched aws-node-termination-handler/event-id)" = $E4 ]'
	check "sched: a fourth event (system-maintenance) cordons" cordoned sched
	stopped nth-sched3 "nth (sched, third run)"
	fake sched events "[$list,$(ev system-maintenance $E4 canceled)]"
	nth sched nth-sched4
	wait_for "$T/nth-sched4.log" '"node uncordoned"' 30
	check "sched: canceled while nth was down: the next run uncordons, NTH's taint and labels removed" clean sched
	check "sched: ... one read of the Node per canceled event it never saw" \
		test "$(count nth-sched4 "an event handled before this run was canceled")" = 1
	stopped nth-sched4 "nth (sched, fourth run)"
}

# ---- flow: a PodDisruptionBudget blocks, then allows; a blocked event canceled ----------------
P1=instance-event-0d4e5f60718293a4b P2=instance-event-0e5f60718293a4b5c
flow_pdb() {
	fake pdb events "[$(ev system-maintenance $P1 active)]"
	nth pdb nth-pdb NODE_TERMINATION_GRACE_PERIOD=6
	check "pdb: the drain blocked past NODE_TERMINATION_GRACE_PERIOD (6 s) is left for later" \
		wait_for "$T/nth-pdb.log" "trying again later" 40
	check "pdb: cordoned, the pod still there" test "$(cordoned pdb && echo y)/$(pod_there pdb-web && echo y)" = "y/y"
	wait_until 20 has_reasons pdb CordonAndDrainError
	check "pdb: Kubernetes event CordonAndDrainError" has_reasons pdb CordonAndDrainError
	attempts() { count nth-pdb "handling interruption event"; }
	two() { [ "$(attempts)" -ge 2 ]; }
	check "pdb: the event is tried again" wait_until 40 two
	# seconds between the first "not done" and the second attempt, from the klog timestamps
	local gap n a
	gap=$(grep -E "trying again later|handling interruption event" "$T/nth-pdb.log" | sed -n '2,3p' |
		awk '{split($2, t, ":"); s[NR] = t[1] * 3600 + t[2] * 60 + t[3]} END {d = s[2] - s[1]; printf "%d", d < 0 ? d + 86400 : d}')
	check "pdb: ... after a delay (${gap} s), not in a hot loop" test "$gap" -ge 9
	n=$(evictions pdb-web) a=$(attempts)
	check "pdb: $n evictions in $a attempts (at most one per attempt and 5 s)" test "$n" -ge 1 -a "$n" -le $((2 * a))
	check "pdb: the process stays up (no crash loop)" kill -0 "$(pid nth-pdb)"
	k patch pdb pdb --type merge -p '{"spec":{"minAvailable":0}}' >/dev/null
	check "pdb: once the budget allows it, the drain completes" wait_until 60 p_gone pdb-web
	check "pdb: logged as drained" wait_for "$T/nth-pdb.log" "node cordoned and drained" 10
	check "pdb: the DaemonSet pod is kept" pod_there pdb-ds

	# a second event blocked by the budget, then canceled (the first completed): uncordoned
	k get pod pdb-ds -o json | jq '{apiVersion, kind, metadata: {name: "pdb-web2", namespace: "default",
		labels: {app: "pdb-web"}, ownerReferences: [.metadata.ownerReferences[0] | .kind = "ReplicaSet" | .uid = "u-web2"]},
		spec, status}' | k create -f - >/dev/null
	k patch pdb pdb --type merge -p '{"spec":{"minAvailable":1}}' >/dev/null
	local later # read by the eval below
	# shellcheck disable=SC2034
	later=$(count nth-pdb "trying again later")
	fake pdb events "[$(ev system-maintenance $P1 active),$(ev system-maintenance $P2 active)]"
	check "pdb: a second event blocked by the budget is left for later" \
		wait_until 40 eval '[ "$(count nth-pdb "trying again later")" -gt $later ]'
	fake pdb events "[$(ev system-maintenance $P1 completed),$(ev system-maintenance $P2 canceled)]"
	wait_for "$T/nth-pdb.log" '"node uncordoned"' 30
	check "pdb: ... then canceled: uncordoned, NTH's taint and labels removed" clean pdb
	check "pdb: ... and its pod left alone" pod_there pdb-web2
	stopped nth-pdb "nth (pdb)"
}

# ---- flow: malformed metadata answers -------------------------------------------------------
flow_bad() {
	nth bad nth-bad METADATA_TRIES=2
	wait_until 30 started nth-bad
	local t0=$SECONDS path=/latest/meta-data/spot/instance-action i=0 what rule hits
	fails() { count nth-bad 'metadata monitor failed.*monitor="spot-itn-monitor"'; }
	recovered() { count nth-bad 'metadata monitor recovered.*monitor="spot-itn-monitor"'; }
	# each rule covers several polls (2 attempts per poll for the 500s and the hang)
	for what in "HTML|{\"status\":200,\"content_type\":\"text/html\",\"body\":\"<!DOCTYPE html><html><body><h1>Welcome to the proxy</h1></body></html>\",\"count\":4}|is not" \
		"truncated JSON|{\"status\":200,\"body\":\"{\\\"action\\\": \\\"terminate\\\", \\\"time\\\": \\\"2026-\",\"count\":4}|is not" \
		"500|{\"status\":500,\"count\":6}|EREMOTEIO" \
		"a hang past the 2 s client timeout|{\"delay\":30,\"count\":4}|ETIMEDOUT"; do
		i=$((i + 1))
		rule=$(cut -d'|' -f2 <<<"$what")
		fake bad faults "$(jq -c --arg p $path '. + {path: $p}' <<<"$rule")"
		wait_until 60 eval '[ "$(recovered)" -ge $i ]'
		hits=$(fake_get bad faults | jq ".[$((i - 1))].hits")
		check "bad: $(cut -d'|' -f1 <<<"$what") ($hits answers): logged once, then the recovery" \
			test "$(fails)/$(recovered)/$hits" = "$i/$i/$(jq .count <<<"$rule")"
		check "bad: ... the line says why" \
			grep -q "metadata monitor failed.*$(cut -d'|' -f3 <<<"$what")" <<<"$(grep "metadata monitor failed" "$T/nth-bad.log" | tail -1)"
	done
	check "bad: still running" kill -0 "$(pid nth-bad)"
	local polled secs
	polled=$(polls bad events/maintenance/scheduled) secs=$((SECONDS - t0))
	check "bad: no hot loop ($polled polls of the other monitors in ${secs} s at 0.5 s)" test "$polled" -le $((2 * secs + 4))
	fake bad spot '{"action":"terminate","in":60}'
	wait_until 30 p_gone bad-web
	check "bad: the next good notice is acted on (drained)" \
		test "$(cordoned bad && echo y)/$(pod_gone bad-web && echo y)" = "y/y"
	stopped nth-bad "nth (bad)"
}

# ---- flow: SIGTERM in the middle of a drain -------------------------------------------------
flow_term() {
	fake term asg '{"state":"Terminated"}'
	nth term nth-term
	check "term: the drain is blocked by the budget" wait_for "$T/nth-term.log" "eviction blocked, will retry" 30
	stopped nth-term "nth (term) in the middle of a drain"
	check "term: cordoned, the pod still there" test "$(cordoned term && echo y)/$(pod_there term-web && echo y)" = "y/y"
	k delete pdb term >/dev/null
	nth term nth-term2
	check "term: a restart finishes the drain" wait_until 30 p_gone term-web
	check "term: ... logged as drained" wait_for "$T/nth-term2.log" "node cordoned and drained" 10
	stopped nth-term2 "nth (term, second run)"
}

# ---- flows: the notices handled at once ------------------------------------------------------
flow_spot() {
	fake spot spot '{"action":"terminate","in":110}'
	local t id
	t=$(fake_get spot state | jq -r .spot.time)
	nth spot nth-spot
	wait_until 30 p_gone spot-web
	expect_drained spot spot-itn "spot-itn-$(sha "&{terminate $t}")" SpotInterruption PreDrain CordonAndDrain
	# IMDSv2: every read with a token; an expired token is replaced
	req() { fake_get spot requests | jq -r ".$1"; }
	check "spot: every metadata read carried a valid token (none without, no 401)" \
		test "$(req without_token)/$(req unauthorized)/$(req tokens_issued)" = "0/0/1"
	check "spot: reads with a token were made" test "$(req with_token)" -gt 10
	fake spot tokens/expire '{}'
	wait_until 20 eval '[ "$(req tokens_issued)" = 2 ]'
	check "spot: an expired token (one 401) is replaced by a new one" \
		test "$(req tokens_issued)/$(req unauthorized)" = "2/1"
	more_polls spot spot/instance-action 3
	check "spot: ... without a monitor error" test "$(count nth-spot "metadata monitor failed")" = 0
	check "spot: the notice, still listed, was handled once" test "$(count nth-spot "handling interruption event")" = 1
	stopped nth-spot "nth (spot)"
}

flow_reb() {
	fake rebmon rebalance '{}'
	fake rebdrain rebalance '{}'
	local t1 t2 id
	t1=$(fake_get rebmon state | jq -r .rebalance.noticeTime)
	t2=$(fake_get rebdrain state | jq -r .rebalance.noticeTime)
	nth rebmon nth-rebmon ENABLE_REBALANCE_MONITORING=true
	nth rebdrain nth-rebdrain ENABLE_REBALANCE_MONITORING=true ENABLE_REBALANCE_DRAINING=true
	# monitoring only: cordon and taint, no drain
	wait_until 30 p_cordoned rebmon
	id=$(v63 "rebalance-recommendation-$(sha "&{$t1}")")
	check "rebmon (monitoring only): cordoned, tainted aws-node-termination-handler/rebalance-recommendation=<event ID>" \
		test "$(cordoned rebmon && echo y)/$(taints rebmon)" = "y/keep=me:NoSchedule aws-node-termination-handler/rebalance-recommendation=$id:NoSchedule"
	wait_until 20 has_reasons rebmon RebalanceRecommendation PreDrain Cordon
	check "rebmon: Kubernetes events RebalanceRecommendation PreDrain Cordon" has_reasons rebmon RebalanceRecommendation PreDrain Cordon
	more_polls rebmon events/recommendations/rebalance 3
	check "rebmon: not drained (no CordonAndDrain event, both pods kept, no eviction)" \
		test "$(reasons rebmon | grep -c CordonAndDrain)/$(pod_there rebmon-web && echo y)/$(evictions rebmon-web)" = "0/y/0"
	check "rebmon: the notice, still listed, was handled once" test "$(count nth-rebmon "handling interruption event")" = 1
	# with draining
	wait_until 30 p_gone rebdrain-web
	expect_drained rebdrain rebalance-recommendation "rebalance-recommendation-$(sha "&{$t2}")" \
		RebalanceRecommendation PreDrain CordonAndDrain
	stopped nth-rebmon "nth (rebmon)"
	stopped nth-rebdrain "nth (rebdrain)"
}

flow_asg() {
	fake asg asg '{"state":"Terminated"}'
	nth asg nth-asg
	wait_until 30 p_gone asg-web
	local id
	id=$(label asg aws-node-termination-handler/event-id)
	expect_drained asg asg-lifecycle-termination "$id" ASGLifecycle PreDrain CordonAndDrain
	check "asg: the event ID is target-lifecycle-state-terminated-..." grep -q "^target-lifecycle-state-terminated-" <<<"$id"
	more_polls asg autoscaling/target-lifecycle-state 4
	check "asg: the state, still Terminated, was handled once" test "$(count nth-asg "handling interruption event")" = 1
	stopped nth-asg "nth (asg)"
}

flow_dry() {
	fake dry spot '{"action":"terminate","in":60}'
	nth dry nth-dry DRY_RUN=true
	check "dry: the notice is logged as a dry run" wait_for "$T/nth-dry.log" "dry-run flag was set" 30
	more_polls dry spot/instance-action 3
	check "dry: nothing changed on the Node (not cordoned, no taint, no label)" \
		test "$(nj dry '[.spec.unschedulable // false, (.spec.taints | length), (.metadata.labels | length)] | join(",")')" = "false,1,1"
	check "dry: no Node write, no eviction, both pods there" \
		test "$(node_writes dry)/$(evictions dry-web)/$(pod_there dry-web && pod_there dry-ds && echo y)" = "0/0/y"
	check "dry: logged once" test "$(count nth-dry "dry-run flag was set")" = 1
	stopped nth-dry "nth (dry)"
}

flow_opts() {
	fake opts spot '{"action":"terminate","in":60}'
	local t v
	t=$(fake_get opts state | jq -r .spot.time)
	v=$(v63 "spot-itn-$(sha "&{terminate $t}")")
	nth opts nth-opts CORDON_ONLY=true EXCLUDE_FROM_LOAD_BALANCERS=true TAINT_EFFECT=PreferNoSchedule
	check "opts: CORDON_ONLY: logged as cordoned" wait_for "$T/nth-opts.log" '"node cordoned"' 30
	check "opts: CORDON_ONLY: cordoned, both pods kept, no eviction" \
		test "$(cordoned opts && echo y)/$(pod_there opts-web && pod_there opts-ds && echo y)/$(evictions opts-web)" = "y/y/0"
	check "opts: EXCLUDE_FROM_LOAD_BALANCERS: labelled node.kubernetes.io/exclude-from-external-load-balancers" \
		test "$(label opts node.kubernetes.io/exclude-from-external-load-balancers)" = aws-node-termination-handler
	check "opts: TAINT_EFFECT=PreferNoSchedule: the spot taint has that effect" \
		test "$(taints opts)" = "keep=me:NoSchedule aws-node-termination-handler/spot-itn=$v:PreferNoSchedule"
	stopped nth-opts "nth (opts)"
}

flow_oos() {
	fake oos spot '{"action":"terminate","in":60}'
	nth oos nth-oos ENABLE_OUT_OF_SERVICE_TAINT=true
	wait_until 30 p_gone oos-web
	check "oos: drained" wait_for "$T/nth-oos.log" '"node cordoned and drained"' 30
	check "oos: ENABLE_OUT_OF_SERVICE_TAINT: node.kubernetes.io/out-of-service=nodeshutdown:NoExecute after the drain" \
		grep -q " node.kubernetes.io/out-of-service=nodeshutdown:NoExecute" <<<" $(taints oos)"
	stopped nth-oos "nth (oos)"
}

# ---- the fake's HTML fault answer (the extension this test relies on) ------------------------
fake bad faults '{"path":"/latest/meta-data/probe","status":200,"content_type":"text/html","body":"<html></html>","count":1}'
peer check "the metadata fake answers a fault rule's body with its content_type" \
	grep -qi "^content-type: text/html" <<<"$(curl -si --max-time 5 "${U[bad]}/latest/meta-data/probe")"
tb_delete "${U[bad]}/_control/faults" >/dev/null

FLOWS="spot reb asg dry sched pdb bad term opts oos"
for f in $FLOWS; do
	(t0=$SECONDS; "flow_$f"; echo "# the $f flow took $((SECONDS - t0)) s") >"$T/flow-$f.out" 2>&1 &
	echo $! >"$T/flow-$f.pid"
done

# ---- the flows' checks -----------------------------------------------------------------------
for f in $FLOWS; do
	wait_exit "$(cat "$T/flow-$f.pid")" 150 || fail "the $f flow ends within 150 s"
	while IFS= read -r line; do
		case $line in
		"ok - "*) ok "${line#ok - }" ;;
		"FAIL - "*) fail "${line#FAIL - }" ;;
		"skip - "*) skip "${line#skip - }" ;;
		*) echo "$line" ;;
		esac
	done <"$T/flow-$f.out"
done
if grep -l "Sanitizer\|runtime error" "$T"/nth-*.log >"$T/san.txt"; then
	fail "no sanitizer report" "$(cat "$T/san.txt")"
else ok "no sanitizer report in the $(ls "$T"/nth-*.log | wc -l) nth logs"; fi
t_summary
