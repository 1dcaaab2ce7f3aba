#!/usr/bin/env bash
# tests: product
# The shared base in a real process: command dispatch and exit codes, the metrics and health
# server, the Prometheus format checked by promtool, graceful stop.
. "$(dirname "$0")/../lib/testlib.sh"

# dispatch, help and exit codes
check "help lists the commands" bash -c '"$AWS_K8S" --help | grep -q "^  serve "'
"$AWS_K8S" nope >/dev/null 2>"$T_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown command 'nope'" "$T_TMP/err" && ok "unknown command exits 2" || fail "unknown command exits 2" "rc=$rc"
! grep -q "EBS CSI driver\|first argument is a flag" "$T_TMP/err" && ok "unknown command: no upstream hint for a plain word" ||
	fail "unknown command: no upstream hint for a plain word" "$(cat "$T_TMP/err")"
# an upstream chart with only the image swapped: the hint names the command to set
"$AWS_K8S" controller --endpoint=unix:///x >/dev/null 2>"$T_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "mode of the EBS CSI driver.*aws-ebs-csi-driver.*'aws-k8s ebs-csi-driver controller'" "$T_TMP/err" &&
	ok "an EBS mode word as the command exits 2 naming the command to set" ||
	fail "an EBS mode word as the command exits 2 naming the command to set" "rc=$rc $(cat "$T_TMP/err")"
"$AWS_K8S" --cloud-provider=aws >/dev/null 2>"$T_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "first argument is a flag.*aws-cloud-controller-manager" "$T_TMP/err" &&
	ok "flags alone exit 2 naming the upstream commands to set" ||
	fail "flags alone exit 2 naming the upstream commands to set" "rc=$rc $(cat "$T_TMP/err")"
"$AWS_K8S" serve --bogus >/dev/null 2>"$T_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown flag '--bogus'" "$T_TMP/err" && ok "bad flag exits 2 naming it" || fail "bad flag exits 2 naming it" "rc=$rc"
"$AWS_K8S" serve --v=abc >/dev/null 2>"$T_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "'--v'" "$T_TMP/err" && ok "bad flag value exits 2" || fail "bad flag value exits 2" "rc=$rc"
commit=$(git -C "$T_ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
check "version prints the commit" bash -c '"$AWS_K8S" version | head -1 | grep -q "commit '"$commit"'"'
check "version prints library versions" bash -c '"$AWS_K8S" version | grep -q "^libcurl " && "$AWS_K8S" version | grep -q "^gRPC core "'
check "help CMD shows the flags" bash -c '"$AWS_K8S" help serve | grep -q -- "--metrics-bind-address"'
check "CMD --help shows the flags" bash -c '"$AWS_K8S" serve --help | grep -q -- "--health-probe-bind-address"'
ln -s "$AWS_K8S" "$T_TMP/serve"
check "a symlink named after a command runs it" bash -c '"$T_TMP/serve" --help | grep -q "Usage: aws-k8s serve"'

# the server
port=$(free_port)
bg serve "$AWS_K8S" serve --metrics-bind-address "127.0.0.1:$port"
if wait_http "http://127.0.0.1:$port/healthz" 10; then ok "server answers"; else fail "server answers" "$(cat "$T_TMP/serve.log")"; fi
check "healthz ok" bash -c '[ "$(curl -s http://127.0.0.1:'"$port"'/healthz)" = ok ]'
check "readyz verbose" bash -c 'curl -s "http://127.0.0.1:'"$port"'/readyz?verbose" | grep -q "readyz check passed"'
check "livez ok" bash -c '[ "$(curl -s -o /dev/null -w "%{http_code}" http://127.0.0.1:'"$port"'/livez)" = 200 ]'
check "unknown path 404" bash -c '[ "$(curl -s -o /dev/null -w "%{http_code}" http://127.0.0.1:'"$port"'/nope)" = 404 ]'
curl -s "http://127.0.0.1:$port/metrics" >"$T_TMP/metrics.txt"
check "metrics has process metrics" grep -q '^process_resident_memory_bytes [0-9]' "$T_TMP/metrics.txt"
check "metrics content type" bash -c 'curl -sI http://127.0.0.1:'"$port"'/metrics | grep -qi "content-type: text/plain; version=0.0.4"'
if command -v promtool >/dev/null; then
	check "promtool check metrics" bash -c 'promtool check metrics <"'"$T_TMP"'/metrics.txt"'
else
	skip "promtool check metrics" "promtool is not installed (Debian package prometheus)"
fi
# split health and metrics addresses
hport=$(free_port) mport=$(free_port)
bg split "$AWS_K8S" serve --metrics-bind-address "127.0.0.1:$mport" --health-probe-bind-address "127.0.0.1:$hport"
wait_http "http://127.0.0.1:$hport/healthz" 10
check "health on its own port" bash -c '[ "$(curl -s http://127.0.0.1:'"$hport"'/healthz)" = ok ]'
check "metrics on its own port" bash -c 'curl -s http://127.0.0.1:'"$mport"'/metrics | grep -q process_open_fds'
# port in use
"$AWS_K8S" serve --metrics-bind-address "127.0.0.1:$port" >/dev/null 2>"$T_TMP/err"; rc=$?
[ $rc -eq 1 ] && grep -q "failed to start the metrics server" "$T_TMP/err" && ok "port in use exits 1 with a clear error" || fail "port in use exits 1" "rc=$rc"
# graceful stop
pid=$(cat "$T_TMP/serve.pid")
kill -TERM "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then fail "SIGTERM stops the server"; else
	wait "$pid"; rc=$?
	[ $rc -eq 0 ] && grep -q '"stopping"' "$T_TMP/serve.log" && ok "SIGTERM stops the server cleanly" || fail "SIGTERM stops the server cleanly" "rc=$rc"
fi
t_summary
