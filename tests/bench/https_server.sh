#!/usr/bin/env bash
# HTTPS against plain HTTP on the shared server (aws-k8s serve, one server thread; TLS by the
# OpenSSL relay in front of libmicrohttpd): GET /healthz, TOTAL requests (default 4000) with
# CONC in flight (default 200), each on a new connection (a full handshake, no resumption) and
# on kept-alive connections; then the resident memory with CONC idle TLS connections open.
# The load generator (tests/bench/https_load.c, libcurl) runs on the same machine, so the
# figures are those of the whole exchange, client included. Prints figures only.
. "$(dirname "$0")/../lib/testlib.sh"
TOTAL=${TOTAL:-4000}
CONC=${CONC:-200}
B=$T_ROOT/build/bench-http
mkdir -p "$B"
cc -std=gnu17 -O2 -Wall -o "$B/https_load" "$T_ROOT/tests/bench/https_load.c" \
	$(pkg-config --cflags --libs libcurl) || { echo "https_server: build failed"; exit 0; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$T_TMP/tls.key" -out "$T_TMP/tls.crt" 2>/dev/null
hp=$(free_port) tp=$(free_port)
bg plain "$AWS_K8S" serve --metrics-bind-address "127.0.0.1:$hp"
bg tls "$AWS_K8S" serve --metrics-bind-address "127.0.0.1:$tp" --tls-cert-file "$T_TMP/tls.crt" \
	--tls-private-key-file "$T_TMP/tls.key"
wait_http "http://127.0.0.1:$hp/healthz" 10 && wait_http "https://127.0.0.1:$tp/healthz" 10 ||
	{ echo "https_server: the servers did not start"; exit 0; }

# the server's CPU time (user + system, clock ticks) and resident memory
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
hz=$(getconf CLK_TCK)
pid=$(cat "$T_TMP/tls.pid")
echo "TLS server idle at start: RSS $(rss "$pid") KiB"
run() { # NAME SERVER_PID URL MODE [CAFILE]
	local t0 out
	t0=$(ticks "$2")
	out=$("$B/https_load" "$3" "$TOTAL" "$CONC" "$4" ${5:+"$5"})
	echo "$1, $out; server CPU $(((($(ticks "$2") - t0) * 1000000 / hz) / TOTAL)) us/request"
}
for mode in fresh keepalive; do
	run "plain HTTP" "$(cat "$T_TMP/plain.pid")" "http://127.0.0.1:$hp/healthz" "$mode"
	run "HTTPS (TLS 1.3, P-256)" "$pid" "https://127.0.0.1:$tp/healthz" "$mode" "$T_TMP/tls.crt"
done

# memory: the TLS server after the runs, then with CONC clients that finished their handshake
# and a request, and wait
before=$(rss "$pid")
python3 - "$tp" "$CONC" "$T_TMP/tls.crt" "/proc/$pid/status" <<'PY'
import socket, ssl, sys
port, n, ca, status = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
conns = [ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")
         for _ in range(n)]
for c in conns:
    c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    c.recv(4096)
rss = [l.split()[1] for l in open(status) if l.startswith("VmRSS")][0]
print(f"{n} kept-alive TLS connections open: RSS {rss} KiB")
PY
echo "TLS server idle after the runs, before them: RSS ${before} KiB"
