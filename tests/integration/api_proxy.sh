#!/usr/bin/env bash
# tests: product
# aws-k8s api-proxy (issue 19): an L4 proxy with TLS passed through, against local TLS servers
# (a Python helper written below) and the test API server: the local upstream preferred, a
# killed upstream and a connect that hangs (fail over within 1 s, after --connect-timeout), the
# upstream file and the EndpointSlices of default/kubernetes changed live without dropping an
# open stream or a kubectl watch, bad flags (exit 2), SIGTERM (exit 0).
. "$(dirname "$0")/../lib/testlib.sh"

if ! command -v kubectl >/dev/null || ! command -v openssl >/dev/null; then
	skip "api-proxy" "kubectl or openssl missing"
	t_summary
	exit 77
fi
export KUBECACHEDIR=$T_TMP/kcache
PEER=$T_TMP/tlspeer.py
cat >"$PEER" <<'PY'
# tlspeer.py: TLS peers for tests/integration/api_proxy.sh (written there by a heredoc).
#   server HOST PORT NAME CERT KEY   a TLS server: "hello NAME" at once, then per line:
#                                    "stream" ticks every 0.1 s, "bulk N" N pattern bytes
#   hello HOST PORT CA               prints the server's name and the ms the hello took
#   stream HOST PORT CA OUT          appends each tick to OUT, "END" when the stream ends
#   bulk HOST PORT CA N              checks N pattern bytes, prints "ok NAME"
#   idle HOST PORT CA SECS           silent after the hello: "closed S" when the proxy closes it
#   tarpit HOST PORT                 a listener whose queue is full: connects hang
import socket, ssl, sys, threading, time

def pattern(n):
    block = bytes(range(256)) * 64
    out = bytearray()
    while len(out) < n:
        out += block
    return bytes(out[:n])

def client(host, port, ca):
    ctx = ssl.create_default_context(cafile=ca)
    raw = socket.create_connection((host, int(port)), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    f = s.makefile("rb")
    hello = f.readline().decode().split()
    if len(hello) != 2 or hello[0] != "hello":
        sys.exit("no hello: %r" % hello)
    return s, f, hello[1]

def serve(host, port, name, cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, int(port)))
    ls.listen(128)

    def handle(c):
        try:
            s = ctx.wrap_socket(c, server_side=True)
            s.sendall(("hello %s\n" % name).encode())
            f = s.makefile("rb")
            for line in f:
                w = line.decode().split()
                if w[:1] == ["stream"]:
                    i = 0
                    while True:
                        s.sendall(("tick %s %d\n" % (name, i)).encode())
                        i += 1
                        time.sleep(0.1)
                elif w[:1] == ["bulk"]:
                    s.sendall(pattern(int(w[1])))
        except (OSError, ssl.SSLError):
            pass
        finally:
            c.close()

    while True:
        c, _ = ls.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()

def main():
    a = sys.argv[1:]
    if a[0] == "server":
        serve(*a[1:6])
    elif a[0] == "hello":
        t = time.monotonic()
        s, f, name = client(*a[1:4])
        print(name, int((time.monotonic() - t) * 1000))
    elif a[0] == "stream":
        s, f, name = client(*a[1:4])
        s.settimeout(None)
        s.sendall(b"stream\n")
        with open(a[4], "a") as out:
            out.write("connected %s\n" % name)
            out.flush()
            try:
                for line in f:
                    out.write(line.decode())
                    out.flush()
            except (OSError, ssl.SSLError):
                pass
            out.write("END\n")
    elif a[0] == "bulk":
        n = int(a[4])
        s, f, name = client(*a[1:4])
        s.sendall(b"bulk %d\n" % n)
        got = f.read(n)
        if got != pattern(n):
            sys.exit("bulk: %d bytes, not the pattern" % len(got))
        print("ok", name)
    elif a[0] == "idle":
        # silent after the hello; prints the seconds until the proxy closes the connection
        s, f, name = client(*a[1:4])
        s.settimeout(float(a[4]))
        t = time.monotonic()
        try:
            rest = f.read()
            print("closed %.1f %d" % (time.monotonic() - t, len(rest)))
        except (OSError, ssl.SSLError):
            print("open")
    elif a[0] == "tarpit":
        ls = socket.socket()
        ls.bind((a[1], int(a[2])))
        ls.listen(0)
        fill = []
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex((a[1], int(a[2])))
            fill.append(c)
        time.sleep(1e6)

main()
PY
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=upstream \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$T_TMP/up.key" -out "$T_TMP/up.crt" 2>/dev/null
CA=$T_TMP/up.crt

# ---- usage errors: exit 2, nothing started ----
usage_err() { # NAME WANT-IN-STDERR ARGS...
	local name=$1 want=$2 rc
	shift 2
	timeout 20 "$AWS_K8S" api-proxy "$@" >"$T_TMP/u.out" 2>"$T_TMP/u.err"
	rc=$?
	if [ "$rc" = 2 ] && grep -qF -- "$want" "$T_TMP/u.err"; then
		ok "$name"
	else
		fail "$name" "rc=$rc: $(head -c 400 "$T_TMP/u.err")"
	fi
}
usage_err "an unknown flag is a usage error" "bogus" --bogus --upstream 127.0.0.1:1
usage_err "--upstream without a port is a usage error" "not HOST:PORT" --upstream 127.0.0.1
usage_err "--upstream with port 99999 is a usage error" "not HOST:PORT" --upstream 127.0.0.1:99999
usage_err "no source of upstreams is a usage error" "no upstream"
usage_err "--relay outside buffer,splice is a usage error" "relay" --relay=copy --upstream 127.0.0.1:1
usage_err "a positional argument is a usage error" "unexpected argument" --upstream 127.0.0.1:1 extra
usage_err "--connect-timeout=0s is a usage error" "must be positive" --connect-timeout=0s --upstream 127.0.0.1:1
usage_err "a --listen that is not HOST:PORT is a usage error" "--listen" --listen nowhere --upstream 127.0.0.1:1
usage_err "--workers=0 is a usage error" "workers" --workers=0 --upstream 127.0.0.1:1
"$AWS_K8S" api-proxy --help >"$T_TMP/help" 2>&1
rc=$?
missing=
for f in --listen --upstream --upstream-file --node-ip --watch-endpoints --connect-timeout \
	--fail-timeout --idle-timeout --workers --max-connections --buffer-size --relay --health-listen \
	--kubeconfig; do
	grep -q -- "$f" "$T_TMP/help" || missing+=" $f"
done
[ "$rc" = 0 ] && [ -z "$missing" ] && grep -q "least_conn" "$T_TMP/help" && ok "--help (exit 0) lists every flag and the choice of upstream" ||
	fail "--help (exit 0) lists every flag and the choice of upstream" "rc=$rc missing:$missing"
"$AWS_K8S" --help | grep -q "^  api-proxy " && ok "aws-k8s --help lists api-proxy" || fail "aws-k8s --help lists api-proxy"

# ---- the peers: A is the node's own API server (127.0.0.2), B, C, D others ----
PA=$(free_port) PB=$(free_port) PC=$(free_port) PD=$(free_port)
PX=$(free_port) PH=$(free_port)
bg upA python3 "$PEER" server 127.0.0.2 "$PA" A "$T_TMP/up.crt" "$T_TMP/up.key"
bg upB python3 "$PEER" server 127.0.0.1 "$PB" B "$T_TMP/up.crt" "$T_TMP/up.key"
bg upC python3 "$PEER" server 127.0.0.1 "$PC" C "$T_TMP/up.crt" "$T_TMP/up.key"
bg upD python3 "$PEER" server 127.0.0.1 "$PD" D "$T_TMP/up.crt" "$T_TMP/up.key"
hello() { timeout 20 python3 "$PEER" hello 127.0.0.1 "$1" "$CA" 2>/dev/null; } # PORT: "NAME MS"
wait_ticks() { # FILE N: at least N ticks in FILE (bounded)
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(grep -c '^tick' "$1" 2>/dev/null)" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
wait_name() { # PORT NAME: a new connection reaches NAME (bounded)
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(hello "$1" | cut -d' ' -f1)" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
wait_peer() { # HOST PORT
	local i
	for ((i = 0; i < 150; i++)); do
		[ "$(timeout 10 python3 "$PEER" hello "$1" "$2" "$CA" 2>/dev/null | cut -d' ' -f1)" != "" ] && return 0
		sleep 0.2
	done
	return 1
}
for p in "127.0.0.2 $PA" "127.0.0.1 $PB" "127.0.0.1 $PC" "127.0.0.1 $PD"; do
	peer check "the TLS peer on ${p/ /:} answers" wait_peer $p
done

# the reloader's file as Deckhouse renders it (nginx_new.conf): the stream block's upstream
UF=$T_TMP/nginx_new.conf
write_conf() { # SERVER-LINES...: replaced atomically, as the reloader's writer does
	{
		printf 'user nginx;\nworker_processes 2;\nstream {\n  upstream kubernetes {\n    least_conn;\n'
		for s in "$@"; do printf '    %s\n' "$s"; done
		printf '  }\n  server {\n    listen 127.0.0.1:6445;\n    proxy_pass kubernetes;\n    proxy_timeout 24h;\n    proxy_connect_timeout 1s;\n  }\n}\n'
	} >"$UF.tmp" && mv "$UF.tmp" "$UF"
}
write_conf "server 127.0.0.2:$PA;" "server 127.0.0.1:$PB;"
bg proxy "$AWS_K8S" api-proxy --listen "127.0.0.1:$PX" --upstream-file "$UF" --upstream "127.0.0.1:$PD" \
	--node-ip 127.0.0.2 --fail-timeout 2s --health-listen "127.0.0.1:$PH" --v=2
PX_PID=$(cat "$T_TMP/proxy.pid")
check "api-proxy serves /healthz" wait_http "http://127.0.0.1:$PH/healthz" 30
metric() { curl -s "http://127.0.0.1:$PH/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }

names=$(for i in 1 2 3; do hello "$PX" | cut -d' ' -f1; done | tr '\n' ' ')
[ "$names" = "A A A " ] && ok "new connections go to the local API server first (--node-ip), TLS verified through the proxy" ||
	fail "new connections go to the local API server first (--node-ip), TLS verified through the proxy" "got: $names"
out=$(timeout 60 python3 "$PEER" bulk 127.0.0.1 "$PX" "$CA" 20000000 2>&1)
[ "$out" = "ok A" ] && ok "20 MB through the proxy arrive intact" || fail "20 MB through the proxy arrive intact" "$out"
b=$(metric 'api_proxy_bytes_total{direction="to_client"}')
[ "${b:-0}" -ge 20000000 ] 2>/dev/null && ok "api_proxy_bytes_total counts the bytes to the client ($b)" ||
	fail "api_proxy_bytes_total counts the bytes to the client" "$b"

# the same through the splice relay
PX3=$(free_port)
bg proxy3 "$AWS_K8S" api-proxy --listen "127.0.0.1:$PX3" --upstream "127.0.0.1:$PB" --relay=splice --workers=1 \
	--idle-timeout=2s
PX3_PID=$(cat "$T_TMP/proxy3.pid")
for ((i = 0; i < 100; i++)); do grep -q '"serving"' "$T_TMP/proxy3.log" && break; sleep 0.1; done
out=$(timeout 60 python3 "$PEER" bulk 127.0.0.1 "$PX3" "$CA" 20000000 2>&1)
[ "$out" = "ok B" ] && ok "--relay=splice: 20 MB arrive intact" || fail "--relay=splice: 20 MB arrive intact" "$out"
# --idle-timeout: a silent connection is closed, a stream that ticks is not
S3=$T_TMP/s3
bg s3 python3 "$PEER" stream 127.0.0.1 "$PX3" "$CA" "$S3"
out=$(timeout 30 python3 "$PEER" idle 127.0.0.1 "$PX3" "$CA" 15 2>&1)
set -- $out
if [ "${1:-}" = closed ] && awk -v t="${2:-0}" 'BEGIN { exit !(t >= 1.5 && t < 8) }'; then
	ok "--idle-timeout=2s: a silent connection is closed after ${2} s"
else
	fail "--idle-timeout=2s: a silent connection is closed after about 2 s" "$out"
fi
n0=$(grep -c '^tick' "$S3")
[ "$n0" -ge 10 ] && ! grep -q '^END' "$S3" && ok "--idle-timeout=2s: a stream with bytes flowing stays open ($n0 ticks)" ||
	fail "--idle-timeout=2s: a stream with bytes flowing stays open" "$(tail -2 "$S3")"
stop_within "$PX3_PID" 10 "api-proxy --relay=splice" && [ "$STOP_RC" = 0 ] && ok "--relay=splice: SIGTERM exit 0" ||
	fail "--relay=splice: SIGTERM exit 0" "rc=$STOP_RC"

# one connection per request, each failing over: 400 connections in a row (from 4 clients at
# once) through a proxy whose preferred upstream refuses (--fail-timeout 0s: every connection
# tries it first), so each one's upstream socket is replaced once (a new epoll tag) and, after
# the first few, each reuses a closed connection's memory and buffer (the free list). The
# upstream reads to EOF (the client's half-close), answers the length and sha256 of what it got
# and closes: both orders of ending, checked byte for byte, with both relays.
ECHO=$T_TMP/echo.py
cat >"$ECHO" <<'PY'
import hashlib, os, socket, sys, threading
def serve(ls):
    while True:
        c, _ = ls.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()
def handle(c):
    h, n = hashlib.sha256(), 0
    while True:
        b = c.recv(65536)
        if not b:
            break
        h.update(b); n += len(b)
    c.sendall(b"%d %s\n" % (n, h.hexdigest().encode()) + b"z" * (n % 70000))
    c.close()
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0)); ls.listen(256)
threading.Thread(target=serve, args=(ls,), daemon=True).start()
print(ls.getsockname()[1], flush=True)
bad = []
def client(port, k, count):
    for i in range(count):
        data = os.urandom((k * 7919 + i * 104729) % 200000)
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(data); s.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got += b
            s.close()
        except OSError as e:
            bad.append("conn %d/%d: %s" % (k, i, e)); continue
        want = b"%d %s\n" % (len(data), hashlib.sha256(data).hexdigest().encode()) + b"z" * (len(data) % 70000)
        if got != want:
            bad.append("conn %d/%d: %d bytes back, %d expected" % (k, i, len(got), len(want)))
port = int(sys.stdin.readline())
ts = [threading.Thread(target=client, args=(port, k, 100)) for k in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print(("bad %d %s" % (len(bad), "; ".join(bad[:3]))).strip(), flush=True)
PY
DEAD=$(free_port)
for relay in buffer splice; do
	coproc ECHOP { python3 "$ECHO"; }
	read -r -t 20 EP <&"${ECHOP[0]}"
	PX5=$(free_port) PH5=$(free_port)
	bg "proxy5$relay" "$AWS_K8S" api-proxy --listen "127.0.0.1:$PX5" --upstream "127.0.0.2:$DEAD,127.0.0.1:$EP" \
		--node-ip 127.0.0.2 --fail-timeout 0s --relay "$relay" --workers 2 --health-listen "127.0.0.1:$PH5"
	for ((i = 0; i < 100; i++)); do grep -q '"serving"' "$T_TMP/proxy5$relay.log" && break; sleep 0.1; done
	echo "$PX5" >&"${ECHOP[1]}"
	res=
	read -r -t 120 res <&"${ECHOP[0]}"
	kill "$ECHOP_PID" 2>/dev/null
	wait "$ECHOP_PID" 2>/dev/null
	m=$(curl -s "http://127.0.0.1:$PH5/metrics")
	acc=$(awk '$1 == "api_proxy_connections_total" { print $2 }' <<<"$m")
	cf=$(awk '$1 ~ /^api_proxy_upstream_connect_failures_total/ { s += $2 } END { print s + 0 }' <<<"$m")
	if [ "$res" = "bad 0" ] && [ "${acc:-0}" -ge 400 ] && [ "${cf:-0}" -ge 400 ]; then
		ok "--relay=$relay: 400 connections in a row, each failing over once ($cf connect failures), every byte back in both orders of ending"
	else
		fail "--relay=$relay: 400 failed-over connections come back intact" "$res; accepted $acc, connect failures $cf; $(grep -m3 '^api_proxy' <<<"$m" | tr '\n' ' ')"
	fi
	stop_within "$(cat "$T_TMP/proxy5$relay.pid")" 10 "api-proxy --relay=$relay (fail-over loop)" && [ "$STOP_RC" = 0 ] &&
		ok "--relay=$relay: SIGTERM exit 0 with the free list full" || fail "--relay=$relay: SIGTERM exit 0 with the free list full" "rc=$STOP_RC"
done

# --max-connections: past it a new connection is closed at accept
PX4=$(free_port)
# (an upstream named twice counts once)
bg proxy4 "$AWS_K8S" api-proxy --listen "127.0.0.1:$PX4" --upstream "127.0.0.1:$PB,127.0.0.1:$PB" --max-connections=1
PX4_PID=$(cat "$T_TMP/proxy4.pid")
for ((i = 0; i < 100; i++)); do grep -q '"serving"' "$T_TMP/proxy4.log" && break; sleep 0.1; done
S4=$T_TMP/s4
bg s4 python3 "$PEER" stream 127.0.0.1 "$PX4" "$CA" "$S4"
peer check "a stream through the proxy with --max-connections=1 ticks" wait_ticks "$S4" 3
[ -z "$(hello "$PX4")" ] && ok "--max-connections=1: a second connection is refused" ||
	fail "--max-connections=1: a second connection is refused"
kill "$(cat "$T_TMP/s4.pid")" 2>/dev/null
check "--max-connections=1: once the first closes, a new one is served" wait_name "$PX4" B
grep -q 'count=1 upstreams="127.0.0.1:'"$PB"'"' "$T_TMP/proxy4.log" && ok "an upstream named twice counts once" ||
	fail "an upstream named twice counts once" "$(grep upstreams "$T_TMP/proxy4.log")"
stop_within "$PX4_PID" 10 "api-proxy --max-connections=1" && [ "$STOP_RC" = 0 ] || fail "api-proxy --max-connections=1 exits 0" "rc=$STOP_RC"

# a stream to A, then A is killed mid-stream
S1=$T_TMP/s1
bg s1 python3 "$PEER" stream 127.0.0.1 "$PX" "$CA" "$S1"
peer check "a stream through the proxy ticks" wait_ticks "$S1" 3
pid=$(cat "$T_TMP/upA.pid")
{ kill -9 "$pid" && wait "$pid"; } 2>/dev/null
r=$(hello "$PX")
set -- $r
if [ "${1:-}" = B ] && [ "${2:-9999}" -lt 1000 ]; then
	ok "with the local upstream killed, a new connection goes to the next one within 1 s ($2 ms)"
else
	fail "with the local upstream killed, a new connection goes to the next one within 1 s" "got: $r"
fi
[ "$(metric 'api_proxy_upstream_connect_failures_total{upstream="127.0.0.2:'"$PA"'"}')" -ge 1 ] 2>/dev/null &&
	ok "the failed connect is counted for the killed upstream" ||
	fail "the failed connect is counted for the killed upstream" "$(curl -s "http://127.0.0.1:$PH/metrics" | grep failures)"

# a local upstream that never answers the connect: after --connect-timeout (1s), the next one
bg tarpit python3 "$PEER" tarpit 127.0.0.2 "$PA"
sleep 2.5 # past --fail-timeout=2s: the local upstream is tried first again
r=$(hello "$PX")
set -- $r
if [ "${1:-}" = B ] && [ "${2:-0}" -ge 900 ] && [ "${2:-0}" -lt 4000 ]; then
	ok "a connect that hangs is given up after 1 s and the next upstream serves ($2 ms)"
else
	fail "a connect that hangs is given up after 1 s and the next upstream serves" "got: $r"
fi
[ "$(metric api_proxy_upstream_connect_timeouts_total)" -ge 1 ] 2>/dev/null && ok "the connect timeout is counted" ||
	fail "the connect timeout is counted" "$(metric api_proxy_upstream_connect_timeouts_total)"

# the file changes while a stream is open: no open connection dropped
S2=$T_TMP/s2
bg s2 python3 "$PEER" stream 127.0.0.1 "$PX" "$CA" "$S2"
peer check "a second stream ticks" wait_ticks "$S2" 3
s2up=$(awk '$1 == "connected" { print $2 }' "$S2")
write_conf "server 127.0.0.1:$PC;"
check "the upstream file changed: new connections go to its new upstream" wait_name "$PX" C
n0=$(grep -c '^tick' "$S2")
check "the stream opened before the change (to $s2up) goes on" wait_ticks "$S2" $((n0 + 5))
grep -q '^END' "$S2" && fail "the stream was not closed by the change" "$(tail -2 "$S2")" || ok "the stream was not closed by the change"
[ "$(metric api_proxy_upstreams)" = 1 ] && ok "api_proxy_upstreams is 1 after the change" ||
	fail "api_proxy_upstreams is 1 after the change" "$(metric api_proxy_upstreams)"
printf 'stream {\n  upstream kubernetes {\n    server 127.0.0.1;\n  }\n}\n' >"$UF.tmp" && mv "$UF.tmp" "$UF"
for ((i = 0; i < 100; i++)); do grep -q "upstream file is refused" "$T_TMP/proxy.log" && break; sleep 0.1; done
grep -q "upstream file is refused" "$T_TMP/proxy.log" && [ "$(hello "$PX" | cut -d' ' -f1)" = C ] &&
	ok "a file that does not parse is refused and the previous upstreams stay" ||
	fail "a file that does not parse is refused and the previous upstreams stay" "$(tail -3 "$T_TMP/proxy.log")"
: >"$UF.tmp" && mv "$UF.tmp" "$UF"
check "an empty file: the --upstream flags serve" wait_name "$PX" D
printf '# one HOST:PORT a line\n127.0.0.1:%s  # C\n' "$PC" >"$UF.tmp" && mv "$UF.tmp" "$UF"
check "a file of HOST:PORT lines works too" wait_name "$PX" C
n0=$(grep -c '^tick' "$S2")
wait_ticks "$S2" $((n0 + 3)) && ! grep -q '^END' "$S2" && ok "the stream goes on after four changes of the file" ||
	fail "the stream goes on after four changes of the file" "$(tail -2 "$S2")"

# ---- the EndpointSlices of default/kubernetes, and a kubectl watch through the proxy ----
KAS=$(free_port) PX2=$(free_port) PH2=$(free_port)
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KAS" --kubeconfig-out "$T_TMP/kc"
peer check "the test API server answers" wait_http "https://127.0.0.1:$KAS/healthz" 60
sed "s#https://127.0.0.1:$KAS#https://127.0.0.1:$PX2#" "$T_TMP/kc" >"$T_TMP/kc2"
k() { kubectl --kubeconfig "$T_TMP/kc" "$@"; }
k2() { kubectl --kubeconfig "$T_TMP/kc2" --request-timeout=20s "$@"; }
bg proxy2 "$AWS_K8S" api-proxy --listen "127.0.0.1:$PX2" --upstream "127.0.0.1:$KAS" \
	--kubeconfig "$T_TMP/kubelet.conf" --health-listen "127.0.0.1:$PH2" --v=2
PX2_PID=$(cat "$T_TMP/proxy2.pid")
check "api-proxy with a kubeconfig serves /healthz" wait_http "http://127.0.0.1:$PH2/healthz" 30
for ((i = 0; i < 100; i++)); do grep -q 'source="--upstream"' "$T_TMP/proxy2.log" && break; sleep 0.1; done
k create configmap cm1 >/dev/null 2>&1
W=$T_TMP/watch
bg watch kubectl --kubeconfig "$T_TMP/kc2" get configmaps -w -o name
wait_line() { # FILE TEXT (bounded: 30 s)
	local i
	for ((i = 0; i < 300; i++)); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
check "kubectl watches through the proxy (bootstrap --upstream)" wait_line "$T_TMP/watch.log" configmap/cm1
slice() { # NAME PORT ADDRESS...: an EndpointSlice of the Service kubernetes
	local name=$1 port=$2 eps=
	shift 2
	for a in "$@"; do eps+="${eps:+,}{\"addresses\":[\"${a%:*}\"],\"conditions\":{\"ready\":${a#*:}}}"; done
	cat <<JSON
{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"$name","namespace":"default",
 "labels":{"kubernetes.io/service-name":"kubernetes"}},"addressType":"IPv4","endpoints":[$eps],
 "ports":[{"name":"https","port":$port,"protocol":"TCP"}]}
JSON
}
# the kubeconfig appears after the start (kubelet.conf comes with kubelet's TLS bootstrap, which
# goes through this proxy): the watch starts then
grep -q "no Kubernetes client yet" "$T_TMP/proxy2.log" && ok "a kubeconfig that does not exist yet: a warning, the proxy serves" ||
	fail "a kubeconfig that does not exist yet: a warning, the proxy serves" "$(tail -3 "$T_TMP/proxy2.log")"
cp "$T_TMP/kc" "$T_TMP/kubelet.conf"
check "the kubeconfig in place: the EndpointSlice watch starts (retried every 10 s)" \
	wait_line "$T_TMP/proxy2.log" "watching the EndpointSlices"
slice kubernetes-c "$PC" 127.0.0.1:true 127.0.0.9:false >"$T_TMP/slice.json"
peer check "the EndpointSlice is created" k apply -f "$T_TMP/slice.json"
check "the EndpointSlices changed: new connections go to their ready address" wait_name "$PX2" C
curl -s "http://127.0.0.1:$PH2/metrics" | grep -q '^api_proxy_upstreams 1$' && ok "an address that is not ready is left out" ||
	fail "an address that is not ready is left out" "$(curl -s "http://127.0.0.1:$PH2/metrics" | grep upstream)"
k create configmap cm2 >/dev/null 2>&1
check "the kubectl watch opened before the change goes on (sees cm2)" wait_line "$T_TMP/watch.log" configmap/cm2
slice kubernetes-c "$PD" 127.0.0.1:true >"$T_TMP/slice.json"
peer check "the EndpointSlice is updated" k apply -f "$T_TMP/slice.json"
check "the EndpointSlice updated: new connections go to the new port" wait_name "$PX2" D
k create configmap cm3 >/dev/null 2>&1
check "the kubectl watch goes on after the second change (sees cm3)" wait_line "$T_TMP/watch.log" configmap/cm3
peer check "the EndpointSlice is deleted" k delete endpointslice kubernetes-c
ok_get=
for ((i = 0; i < 100; i++)); do k2 get configmap cm3 -o name >/dev/null 2>&1 && ok_get=1 && break; sleep 0.1; done
[ -n "$ok_get" ] && ok "no EndpointSlice left: the bootstrap --upstream serves kubectl again" ||
	fail "no EndpointSlice left: the bootstrap --upstream serves kubectl again" "$(tail -3 "$T_TMP/proxy2.log")"
kill -0 "$(cat "$T_TMP/watch.pid")" 2>/dev/null && ok "the kubectl watch is still running" || fail "the kubectl watch is still running" "$(tail -3 "$T_TMP/watch.log")"

# ---- deploy/api-proxy's static pod, its container run as the kubelet would ----------------
# (tests/lib/manifest_run.py: the mounts under a directory, the ports moved, NODE_IP from
# status.hostIP). kubelet.conf is missing, as before kubelet's TLS bootstrap: the file serves.
MR=$T_TMP/mr PS=$(free_port) PHS=$(free_port)
mkdir -p "$MR/etc-kubernetes/kubernetes-api-proxy" "$T_TMP/bin"
ln -sf "$AWS_K8S" "$T_TMP/bin/aws-k8s"
# first in the file: 127.0.0.2:$PA, the listener whose connects hang
printf 'stream {\n  upstream kubernetes {\n    least_conn;\n    server 127.0.0.2:%s;\n    server 127.0.0.1:%s;\n  }\n}\n' \
	"$PA" "$PB" >"$MR/etc-kubernetes/kubernetes-api-proxy/nginx_new.conf"
bg pod python3 "$T_ROOT/tests/lib/manifest_run.py" "$T_ROOT/deploy/api-proxy/kubernetes-api-proxy.yaml" \
	--container kubernetes-api-proxy --set fieldRef:status.hostIP=127.0.0.1 --mount-root "$MR" \
	--port-map 6445="$PS" --port-map 6446="$PHS" --bin-dir "$T_TMP/bin" \
	--pass-env 'ASAN_*' --pass-env 'UBSAN_*' --pass-env 'LSAN_*' --exec
POD_PID=$(cat "$T_TMP/pod.pid")
check "deploy/api-proxy's pod: its readiness probe's /readyz answers" wait_http "http://127.0.0.1:$PHS/readyz" 30
got=$(for i in 1 2 3; do hello "$PS"; done | awk '{ printf "%s%s", $1, ($2 < 900 ? " " : "(slow) ") }')
[ "$got" = "B B B " ] && ok "deploy/api-proxy's pod: the node's own API server (NODE_IP) first, from nginx_new.conf" ||
	fail "deploy/api-proxy's pod: the node's own API server (NODE_IP) first, from nginx_new.conf" "$got"
grep -q "no Kubernetes client yet" "$T_TMP/pod.log" && ok "deploy/api-proxy's pod: without kubelet.conf yet it serves and retries" ||
	fail "deploy/api-proxy's pod: without kubelet.conf yet it serves and retries" "$(tail -3 "$T_TMP/pod.log")"
stop_within "$POD_PID" 10 "deploy/api-proxy's pod" && [ "$STOP_RC" = 0 ] && ok "deploy/api-proxy's pod: SIGTERM exit 0" ||
	fail "deploy/api-proxy's pod: SIGTERM exit 0" "rc=$STOP_RC"

# ---- SIGTERM with connections open: exit 0 ----
stop_within "$PX_PID" 10 "api-proxy (file)" && [ "$STOP_RC" = 0 ] && ok "SIGTERM with a stream open: exit 0" ||
	fail "SIGTERM with a stream open: exit 0" "rc=$STOP_RC"
stop_within "$PX2_PID" 10 "api-proxy (EndpointSlices)" && [ "$STOP_RC" = 0 ] && ok "SIGTERM with a watch open and the informer running: exit 0" ||
	fail "SIGTERM with a watch open and the informer running: exit 0" "rc=$STOP_RC"
t_summary
