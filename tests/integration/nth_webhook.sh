#!/usr/bin/env bash
# tests: product
# node-termination-handler's webhook (`aws-k8s nth` in IMDS mode, one process per Node, against
# the metadata fake and the test API server) posting to a recording HTTP server started here
# (it records method, path, headers and body of each request; a path ending in /500 answers 500,
# one ending in /hang never answers) and through a recording forward proxy:
#   - a spot interruption notice: exactly one POST with upstream's default Slack-style body,
#     checked field by field (event ID, kind, instance, node, description, start time), with
#     upstream's default header Content-type: application/json;
#   - WEBHOOK_TEMPLATE (inline) and WEBHOOK_TEMPLATE_FILE render their fields; WEBHOOK_HEADERS'
#     headers are sent;
#   - WEBHOOK_PROXY: the POST goes through the proxy (absolute-URI request line) to the server;
#   - the server answering 500, and hanging past the 5 s timeout: the Node is drained all the
#     same, the failure is logged, events_error_total{event_error_where="webhook"} counts it, nth
#     stays up and stops on SIGTERM; SIGTERM during a hanging webhook cancels it at once;
#   - a malformed template, an unknown field, WEBHOOK_HEADERS that is not a JSON object of
#     strings: refused at start (exit 2, one clear line), before any request.
. "$(dirname "$0")/../lib/testlib.sh"
. "$T_ROOT/tests/kube/lib.sh"
. "$T_ROOT/tests/integration/nth_lib.sh"

T=$T_TMP
export KUBECACHEDIR=$T/kcache
k() { kubectl --kubeconfig "$KC" "$@"; }
start_kas || { fail "the test API server starts"; t_summary; }

# ---- the recording server and the recording proxy ---------------------------------------------
cat >"$T/recorder.py" <<'PY'
import http.server, json, sys, threading, time
port, out = int(sys.argv[1]), sys.argv[2]
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode("utf-8", "replace") if n else ""
        rec = {"method": self.command, "path": self.path, "headers": [[k, v] for k, v in self.headers.items()],
               "body": body, "time": time.time()}
        with lock, open(out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        if self.path.endswith("/hang"):
            time.sleep(300)
            return
        code = 500 if self.path.endswith("/500") else 200
        data = b'{"ok":false}' if code == 500 else b"ok"
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    do_GET = do_POST = do_PUT = handle_any
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
s.daemon_threads = True
s.serve_forever()
PY
cat >"$T/proxy.py" <<'PY'
import http.client, http.server, json, sys, threading, urllib.parse
port, out = int(sys.argv[1]), sys.argv[2]
lock = threading.Lock()
class P(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        with lock, open(out, "a") as f:
            f.write(json.dumps({"request_line": self.requestline}) + "\n")
        u = urllib.parse.urlsplit(self.path)
        if u.scheme != "http" or not u.hostname:
            self.send_error(400, "absolute http URI expected")
            return
        hdrs = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-connection", "connection")}
        c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
        c.request(self.command, (u.path or "/") + ("?" + u.query if u.query else ""), body, hdrs)
        r = c.getresponse()
        data = r.read()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    do_GET = do_POST = do_PUT = handle_any
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", port), P)
s.daemon_threads = True
s.serve_forever()
PY
SPORT=$(free_port) PPORT=$(free_port)
touch "$T/hooks.jsonl" "$T/proxied.jsonl"
bg recorder python3 "$T/recorder.py" "$SPORT" "$T/hooks.jsonl"
bg proxy python3 "$T/proxy.py" "$PPORT" "$T/proxied.jsonl"
HOOK=http://127.0.0.1:$SPORT
wait_http "$HOOK/_ready" 20 && wait_http "http://127.0.0.1:$PPORT/" 20 ||
	{ peer fail "the recording server and proxy start" "$(tail -3 "$T/recorder.log" "$T/proxy.log")"; t_summary; }
peer check "the recording proxy forwards an absolute-URI request to the server" \
	test "$(curl -s --max-time 5 --noproxy '' -x "http://127.0.0.1:$PPORT" "$HOOK/_probe")" = ok
peer check "the recording server recorded the probes" \
	test "$(jq -r 'select(.path == "/_probe") | .method' "$T/hooks.jsonl")" = GET
: >"$T/hooks.jsonl"
: >"$T/proxied.jsonl"

# ---- one Node per story, each with a ReplicaSet pod (NAME-web) --------------------------------
NODES="dflt tpl file proxy e500 hang stop"
python3 - "$NODES" >"$T/objects.json" <<'PY'
import json, sys
items = []
for n in sys.argv[1].split():
    items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
                  "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    items.append({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": n + "-web", "namespace": "default",
                               "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": n + "-web",
                                                    "uid": "uid-" + n, "controller": True}]},
                  "spec": {"nodeName": n, "containers": [{"name": "c", "image": "i"}]},
                  "status": {"phase": "Running"}})
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
k create -f "$T/objects.json" >/dev/null 2>"$T/objects.err"
n=$(k get pods -o name 2>/dev/null | wc -l)
[ "$n" = 7 ] && peer ok "7 Nodes with a pod each" ||
	{ peer fail "the Nodes and pods" "$n pods; $(tail -3 "$T/objects.err")"; t_summary; }

declare -A U
nth_imds_fakes $NODES

# nth NAME [VAR=VALUE...]: nth for Node NAME with the chart's environment (IMDS mode), log in
# $T/nth-NAME.log, pid in $T/nth-NAME.pid (killed at exit). The proxy variables of the
# environment are dropped so that only WEBHOOK_PROXY applies.
touch "$T/nth-pids"
t_cleanup_add "for p in \$(cat '$T/nth-pids'); do kill -9 \$p; done"
nth() {
	local node=$1
	shift
	env -u http_proxy -u HTTP_PROXY -u https_proxy -u HTTPS_PROXY -u all_proxy -u ALL_PROXY \
		-u no_proxy -u NO_PROXY \
		KUBECONFIG="$KC" NODE_NAME="$node" POD_NAME="nth-$node" NAMESPACE=kube-system \
		INSTANCE_METADATA_URL="${U[$node]}" DELETE_LOCAL_DATA=true IGNORE_DAEMON_SETS=true \
		POD_TERMINATION_GRACE_PERIOD=-1 NODE_TERMINATION_GRACE_PERIOD=120 METADATA_TRIES=3 \
		DRY_RUN=false CORDON_ONLY=false TAINT_NODE=true EMIT_KUBERNETES_EVENTS=false \
		JSON_LOGGING=false LOG_LEVEL=info ENABLE_SPOT_INTERRUPTION_DRAINING=true \
		ENABLE_SCHEDULED_EVENT_DRAINING=true ENABLE_SQS_TERMINATION_DRAINING=false \
		ENABLE_PROMETHEUS_SERVER=false ENABLE_PROBES_SERVER=false "$@" \
		"$AWS_K8S" nth --poll-interval=500ms >"$T/nth-$node.log" 2>&1 &
	echo $! >"$T/nth-$node.pid"
	echo $! >>"$T/nth-pids"
}
pid() { cat "$T/nth-$1.pid"; }
fake() { curl -s --max-time 10 -X POST -H 'Content-Type: application/json' -d "$3" "${U[$1]}/_control/$2" >/dev/null; }
fake_get() { curl -s --max-time 10 "${U[$1]}/_control/$2"; }
api() { curl -sk --max-time 10 -H "Authorization: Bearer $KAS_TOKEN" "$KAS_URL$1"; }
p_gone() { [ "$(curl -sk -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KAS_TOKEN" "$KAS_URL/api/v1/namespaces/default/pods/$1")" = 404 ]; }
# hooks PATH: the requests the server recorded on PATH, one JSON object a line
hooks() { jq -c --arg p "$1" 'select(.path == $p)' "$T/hooks.jsonl"; }
nhooks() { hooks "$1" | wc -l; }
has_hook() { [ "$(nhooks "$1")" -ge 1 ]; }
# header PATH NAME: the value of header NAME (any case) of the first request on PATH
header() { hooks "$1" | head -1 | jq -r --arg h "${2,,}" '[.headers[] | select((.[0] | ascii_downcase) == $h) | .[1]] | join(",")'; }
body() { hooks "$1" | head -1 | jq -r .body; }
polls() { fake_get "$1" requests | jq '.by_path["/latest/meta-data/spot/instance-action"] // 0'; }
polled_since() { [ "$(polls "$1")" -ge "$2" ]; }
more_polls() { local p0; p0=$(polls "$1"); wait_until 30 polled_since "$1" $((p0 + $2)); }
sha() { printf '%s' "$1" | sha256sum | cut -c1-64; }
gotime() { date -u -d "$1" '+%Y-%m-%d %H:%M:%S +0000 UTC'; }
# spot NODE IN: posts a spot notice on NODE's fake for IN seconds from now; sets ST (its time) and
# EID (upstream's event ID)
spot() {
	fake "$1" spot "{\"action\":\"terminate\",\"in\":$2}"
	ST=$(fake_get "$1" state | jq -r .spot.time)
	EID=spot-itn-$(sha "&{terminate $ST}")
}
inst() { fake_get "$1" instance | jq -r ".$2"; }
# stopped NODE: SIGTERM, exit 0 within 15 s
stopped() {
	stop_within "$(pid "$1")" 15 "nth ($1)" || return
	check "nth ($1) stops on SIGTERM with exit 0" test "$STOP_RC" = 0
}

# ---- refused at start -------------------------------------------------------------------------
# bad NAME VAR=VALUE...: nth with WEBHOOK_URL and the bad setting must exit 2 within 20 s with
# the line matching $BAD_RE, and no request to the server
bad() {
	local name=$1 rc
	shift
	timeout 20 env KUBECONFIG="$KC" NODE_NAME=dflt INSTANCE_METADATA_URL="${U[dflt]}" \
		ENABLE_PROMETHEUS_SERVER=false ENABLE_PROBES_SERVER=false WEBHOOK_URL="$HOOK/hook/bad" "$@" \
		"$AWS_K8S" nth >"$T/bad.out" 2>&1
	rc=$?
	check "refused at start: $name (exit 2, the line says why)" \
		eval '[ $rc = 2 ] && grep -qE "$BAD_RE" "$T/bad.out" || { echo "exit $rc"; cat "$T/bad.out"; false; }'
}
BAD_RE='invalid webhook template: unclosed action' bad "a template with an unclosed action" \
	WEBHOOK_TEMPLATE='{"text":"{{ .EventID"}'
BAD_RE="invalid webhook template: unsupported template action '\{\{ \.NoSuchField \}\}'" \
	bad "a template with an unknown field" WEBHOOK_TEMPLATE='{"text":"{{ .NoSuchField }}"}'
echo '{"text":"{{ .Kind | upper"}' >"$T/bad.tmpl"
BAD_RE='invalid webhook template: unclosed action' bad "a malformed WEBHOOK_TEMPLATE_FILE" \
	WEBHOOK_TEMPLATE_FILE="$T/bad.tmpl"
BAD_RE="cannot read webhook-template-file '$T/missing.tmpl'" bad "a missing WEBHOOK_TEMPLATE_FILE" \
	WEBHOOK_TEMPLATE_FILE="$T/missing.tmpl"
BAD_RE='webhook-headers must be a JSON object of strings' bad "WEBHOOK_HEADERS not JSON" \
	WEBHOOK_HEADERS='Content-type: application/json'
BAD_RE='webhook-headers must be a JSON object of strings' bad "WEBHOOK_HEADERS a JSON array" \
	WEBHOOK_HEADERS='["Content-type","application/json"]'
BAD_RE='webhook-headers must be a JSON object of strings' bad "WEBHOOK_HEADERS with a number value" \
	WEBHOOK_HEADERS='{"X-Count":1}'
check "refused at start: no request reached the webhook server" test "$(wc -l <"$T/hooks.jsonl")" = 0

# ---- the stories, started together --------------------------------------------------------------
declare -A EIDS STS
i=0
for n in $NODES; do
	i=$((i + 1))
	spot "$n" $((60 + i)) # a different time, so a different event ID, on each (within the 120 s grace: at once)
	EIDS[$n]=$EID STS[$n]=$ST
done
nth dflt WEBHOOK_URL="$HOOK/hook/dflt"
nth tpl WEBHOOK_URL="$HOOK/hook/tpl" \
	WEBHOOK_HEADERS='{"Content-type":"application/json; charset=utf-8","Authorization":"Bearer s3cr3t","X-Nth-Test":"tpl"}' \
	WEBHOOK_TEMPLATE='{"id":"{{.EventID}}","node":"{{ .NodeName }}","type":"{{ .InstanceType}}","az":"{{ .AvailabilityZone }}","region":"{{.Region}}"}'
printf 'kind={{ .Kind }}\nmonitor={{ .Monitor }}\ninstance={{ .InstanceID }}\nstart={{ .StartTime }}\n' >"$T/hook.tmpl"
nth file WEBHOOK_URL="$HOOK/hook/file" WEBHOOK_TEMPLATE_FILE="$T/hook.tmpl" WEBHOOK_TEMPLATE='ignored {{ .NoSuchField'
# NO_PROXY naming the webhook's host does not bypass WEBHOOK_PROXY (Go's http.ProxyURL ignores it)
nth proxy WEBHOOK_URL="$HOOK/hook/proxy" WEBHOOK_PROXY="http://127.0.0.1:$PPORT" \
	NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
P500=$(free_port) PHANG=$(free_port)
nth e500 WEBHOOK_URL="$HOOK/hook/500" ENABLE_PROMETHEUS_SERVER=true PROMETHEUS_SERVER_PORT="$P500"
nth hang WEBHOOK_URL="$HOOK/hook/hang" ENABLE_PROMETHEUS_SERVER=true PROMETHEUS_SERVER_PORT="$PHANG"
# when the hang's failure is logged (epoch seconds), watched from now on
(wait_for "$T/nth-hang.log" '"webhook failed"' 90 && date +%s.%N >"$T/hang-failed-at") &

# ---- the default body ---------------------------------------------------------------------------
wait_until 60 has_hook /hook/dflt
check "default: the Node is drained" wait_until 30 p_gone dflt-web
check "default: nth logs the webhook sent (status 200)" wait_for "$T/nth-dflt.log" '"webhook sent".*status=200' 30
more_polls dflt 3
check "default: exactly one request, a POST" test "$(nhooks /hook/dflt)/$(hooks /hook/dflt | jq -r .method)" = "1/POST"
check "default: Content-type application/json (upstream's default header)" test "$(header /hook/dflt content-type)" = application/json
B=$(body /hook/dflt)
check "default: the body is JSON with one key, text" test "$(jq -c 'keys' <<<"$B")" = '["text"]'
TEXT=$(jq -r .text <<<"$B")
RE='^\[NTH\]\[Instance Interruption\] EventID: (.*) - Kind: (.*) - Instance: (.*) - Node: (.*) - Description: (.*) - Start Time: (.*)$'
if [[ $TEXT =~ $RE ]]; then
	ok "default: the text has upstream's shape ([NTH][Instance Interruption] EventID: … - Start Time: …)"
	F=("${BASH_REMATCH[@]}")
	check "default: EventID is upstream's spot event ID (${EIDS[dflt]:0:20}…)" test "${F[1]}" = "${EIDS[dflt]}"
	check "default: Kind is SPOT_ITN" test "${F[2]}" = SPOT_ITN
	check "default: Instance is the instance ID from the metadata" test "${F[3]}" = "$(inst dflt instance_id)"
	check "default: Node is the Node name" test "${F[4]}" = dflt
	check "default: Description is upstream's spot text with the notice time" \
		grep -qF "Spot ITN received. Instance will be interrupted at ${STS[dflt]}" <<<"${F[5]}"
	check "default: Start Time is the notice time in Go's format (${F[6]})" test "${F[6]}" = "$(gotime "${STS[dflt]}")"
else
	fail "default: the text has upstream's shape" "$TEXT"
fi

# ---- inline template and template file ----------------------------------------------------------
wait_until 60 has_hook /hook/tpl
B=$(body /hook/tpl)
check "WEBHOOK_TEMPLATE: rendered with EventID, NodeName, InstanceType, AvailabilityZone, Region" \
	test "$(jq -c . <<<"$B")" = "$(jq -nc --arg id "${EIDS[tpl]}" --arg t "$(inst tpl instance_type)" \
		--arg az "$(inst tpl availability_zone)" --arg r "$(inst tpl region)" \
		'{id: $id, node: "tpl", type: $t, az: $az, region: $r}')"
check "WEBHOOK_HEADERS: the headers are sent as given (Content-type, Authorization, X-Nth-Test)" \
	test "$(header /hook/tpl content-type)|$(header /hook/tpl authorization)|$(header /hook/tpl x-nth-test)" = \
	"application/json; charset=utf-8|Bearer s3cr3t|tpl"
wait_until 60 has_hook /hook/file
check "WEBHOOK_TEMPLATE_FILE: rendered (it wins over WEBHOOK_TEMPLATE): Kind, Monitor, InstanceID, StartTime" \
	test "$(body /hook/file)" = "$(printf 'kind=SPOT_ITN\nmonitor=SPOT_ITN_MONITOR\ninstance=%s\nstart=%s\n' \
		"$(inst file instance_id)" "$(gotime "${STS[file]}")")"

# ---- proxy --------------------------------------------------------------------------------------
wait_until 60 has_hook /hook/proxy
check "WEBHOOK_PROXY (NO_PROXY naming the host): the proxy got the POST with the absolute URI" \
	test "$(jq -r .request_line "$T/proxied.jsonl")" = "POST $HOOK/hook/proxy HTTP/1.1"
check "WEBHOOK_PROXY: ... and the server got it from the proxy (the event's body)" \
	eval '[ "$(nhooks /hook/proxy)" = 1 ] && body /hook/proxy | grep -qF "${EIDS[proxy]}"'
check "WEBHOOK_PROXY: only that request went through the proxy" test "$(wc -l <"$T/proxied.jsonl")" = 1

# ---- failures: 500 and a hang ---------------------------------------------------------------------
metric() { curl -s --max-time 5 "http://127.0.0.1:$1/metrics" | grep -E '^events_error_total\{[^}]*event_error_where="webhook"[^}]*\} '; }
metric_is() { metric "$1" | grep -qE "\} $2(\.0+)?$"; }
for what in "e500|500|status=500" "hang|hang|timed out|ETIMEDOUT|timeout"; do
	n=${what%%|*} path=/hook/$(cut -d'|' -f2 <<<"$what") re=$(cut -d'|' -f3- <<<"$what")
	port=$P500
	[ "$n" = hang ] && port=$PHANG
	wait_until 60 has_hook "$path"
	check "$n: the Node is drained all the same" wait_until 30 p_gone "$n-web"
	check "$n: the failure is logged" wait_for "$T/nth-$n.log" "\"webhook failed\".*($re)" 30
	check "$n: events_error_total{event_error_where=\"webhook\"} is 1" wait_until 10 metric_is "$port" 1
	more_polls "$n" 3
	check "$n: one request, no retry; nth is still up" \
		eval '[ "$(nhooks "$path")" = 1 ] && kill -0 "$(pid "$n")"'
	check "$n: the URL is not logged (it may hold a secret)" eval '! grep -qF "$HOOK/hook" "$T/nth-$n.log"'
done
# the hang ends at upstream's 5 s timeout: failure logged 3.5 to 20 s after the server got it
d=$(python3 -c 'import sys; print("%.1f" % (float(sys.argv[2]) - float(sys.argv[1])))' \
	"$(hooks /hook/hang | jq -r .time)" "$(cat "$T/hang-failed-at" 2>/dev/null || echo 0)")
check "hang: given up after the 5 s timeout (${d} s after the server got the POST)" \
	python3 -c 'import sys; sys.exit(not 3.5 <= float(sys.argv[1]) <= 20)' "$d"

# SIGTERM while the webhook hangs: the request is abandoned at once, not after its 5 s timeout,
# and the stop is not logged as a webhook failure (started now, after the other stories)
nth stop WEBHOOK_URL="$HOOK/hook/stop/hang"
wait_until 60 has_hook /hook/stop/hang
check "stop: the Node was drained before the webhook" p_gone stop-web
if stop_within "$(pid stop)" 15 "nth (stop) during a hanging webhook"; then
	check "stop: SIGTERM during a hanging webhook: exit 0" test "$STOP_RC" = 0
	check "stop: ... the request canceled, not timed out, and no error logged for it" \
		eval '! grep -E "timed out|\"webhook failed\"" "$T/nth-stop.log"'
	check "stop: ... logged as canceled" grep -q '"webhook canceled: stopping"' "$T/nth-stop.log"
	check "stop: ... one request" test "$(nhooks /hook/stop/hang)" = 1
fi
for n in ${NODES% stop}; do stopped "$n"; done
if grep -l "Sanitizer\|runtime error" "$T"/nth-*.log "$T/bad.out" >"$T/san.txt"; then
	fail "no sanitizer report" "$(cat "$T/san.txt")"
else ok "no sanitizer report in the nth logs"; fi
t_summary
