#!/usr/bin/env bash
# aws-k8s api-proxy against nginx's stream proxy (what Deckhouse's kubernetes-api-proxy runs),
# issue 19's figures. The upstream is an nginx HTTPS server with a static body of BODY bytes
# (default 4000, a typical API answer); TLS goes end to end through both proxies (L4). wrk
# (Debian's) runs through four paths with the same threads and connections:
#   direct:  wrk straight to the upstream's TLS port;
#   nginx:   nginx stream { upstream { least_conn; server ...; } proxy_timeout 24h;
#            proxy_connect_timeout 1s; } with worker_processes 2, as Deckhouse configures it;
#   buffer:  aws-k8s api-proxy --relay=buffer (the default), --workers 2;
#   splice:  aws-k8s api-proxy --relay=splice, --workers 2.
# Two loads: keep-alive (CONNS connections kept open: the relay) and one connection per request
# (Connection: close: accept, connect and a TLS handshake each time). Each path runs RUNS times
# (default 3) for DUR (default 8s); the script prints every run, the min/median of requests/s,
# p50 and p99, then the fail-over time (curl's total time for one request when the preferred
# upstream refuses, and when its connect hangs), and resident memory of each proxy idle and
# under load. With each run, the proxy's CPU time (user + system, its processes and nginx's
# workers, from /proc) per 1,000 requests: per connection in the close load, the figure the
# machine's load disturbs least. The machine's cores are shared by wrk, the upstream and the proxy under test: the
# figures compare the paths measured the same way, not absolute capacity.
# Environment: RUNS, DUR, CONNS, THREADS, BODY, LOADS ("keepalive close", or one of them),
# PLAIN=1 (plain HTTP end to end instead of TLS: without the handshakes, which cost far more CPU
# than the proxy, the proxies' own per-connection cost shows).
. "$(dirname "$0")/../lib/testlib.sh"
RUNS=${RUNS:-3}
DUR=${DUR:-8s}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
BODY=${BODY:-4000}
LOADS=${LOADS:-keepalive close}
SCHEME=https SSL=" ssl"
[ "${PLAIN:-0}" = 1 ] && SCHEME=http SSL=
for p in wrk nginx curl; do
	command -v $p >/dev/null || { echo "api_proxy: $p is missing (apt-get install wrk nginx-light curl)"; exit 0; }
done
STREAM_SO=/usr/lib/nginx/modules/ngx_stream_module.so
[ -f "$STREAM_SO" ] || { echo "api_proxy: nginx's stream module is missing (apt-get install libnginx-mod-stream)"; exit 0; }

UP=$(free_port) NG=$(free_port) PXB=$(free_port) PXS=$(free_port) DEAD=$(free_port) HANG=$(free_port)
PXF=$(free_port) NGF=$(free_port)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$T_TMP/tls.key" -out "$T_TMP/tls.crt" 2>/dev/null
mkdir -p "$T_TMP/www" "$T_TMP/ng-up" "$T_TMP/ng-px"
chmod a+rx "$T_TMP" "$T_TMP/www"
head -c "$BODY" /dev/zero | tr '\0' 'x' >"$T_TMP/www/obj"
chmod a+r "$T_TMP/www/obj"

# nginx_conf PREFIX WORKERS BLOCKS: an nginx in the foreground from PREFIX
nginx_conf() {
	cat >"$1/nginx.conf" <<EOF
load_module $STREAM_SO;
worker_processes $2;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 16384; }
$3
EOF
}
nginx_conf "$T_TMP/ng-up" 2 "http {
	access_log off;
	client_body_temp_path $T_TMP/ng-up/body;
	proxy_temp_path $T_TMP/ng-up/proxy;
	fastcgi_temp_path $T_TMP/ng-up/fastcgi;
	uwsgi_temp_path $T_TMP/ng-up/uwsgi;
	scgi_temp_path $T_TMP/ng-up/scgi;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:$UP$SSL;
		ssl_certificate $T_TMP/tls.crt;
		ssl_certificate_key $T_TMP/tls.key;
		root $T_TMP/www;
		default_type text/plain;
	}
}"
# Deckhouse's stream proxy, on the bench port, plus a second one for the fail-over figures
# (a refused upstream first, then the good one)
nginx_conf "$T_TMP/ng-px" 2 "stream {
	upstream kubernetes { least_conn; server 127.0.0.1:$UP; }
	upstream failover { server 127.0.0.2:$DEAD; server 127.0.0.1:$UP backup; }
	server { listen 127.0.0.1:$NG; proxy_pass kubernetes; proxy_timeout 24h; proxy_connect_timeout 1s; }
	server { listen 127.0.0.1:$NGF; proxy_pass failover; proxy_timeout 24h; proxy_connect_timeout 1s; }
}"
bg upstream nginx -p "$T_TMP/ng-up" -c "$T_TMP/ng-up/nginx.conf" -e "$T_TMP/ng-up/error.log"
bg ngproxy nginx -p "$T_TMP/ng-px" -c "$T_TMP/ng-px/nginx.conf" -e "$T_TMP/ng-px/error.log"
bg pxbuf "$AWS_K8S" api-proxy --listen "127.0.0.1:$PXB" --upstream "127.0.0.1:$UP" --workers 2
bg pxsplice "$AWS_K8S" api-proxy --listen "127.0.0.1:$PXS" --upstream "127.0.0.1:$UP" --workers 2 --relay splice
for port in $UP $NG $PXB $PXS; do
	wait_http "$SCHEME://127.0.0.1:$port/obj" 20 || {
		echo "api_proxy: 127.0.0.1:$port does not answer: $(tail -3 "$T_TMP"/*.log "$T_TMP"/ng-*/error.log 2>/dev/null)"
		exit 0
	}
done
for port in $NG $PXB $PXS; do
	code=$(curl -s --cacert "$T_TMP/tls.crt" -o "$T_TMP/got" -w '%{http_code}' "$SCHEME://127.0.0.1:$port/obj")
	[ "$code" = 200 ] && cmp -s "$T_TMP/got" "$T_TMP/www/obj" || { echo "api_proxy: port $port: HTTP $code or a wrong body"; exit 0; }
done

st() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
mib() { echo "scale=1; $1 / 1024" | bc; }
# rss PID...: the sum of VmRSS of the processes and their children (nginx's workers)
rss() {
	local sum=0 p c
	for p in "$@"; do
		for c in $p $(pgrep -P "$p"); do sum=$((sum + $(st "$c" VmRSS))); done
	done
	echo $sum
}
NG_PID=$(cat "$T_TMP/ngproxy.pid") PXB_PID=$(cat "$T_TMP/pxbuf.pid") PXS_PID=$(cat "$T_TMP/pxsplice.pid")
declare -A IDLE LOAD
for k in nginx:$NG_PID buffer:$PXB_PID splice:$PXS_PID; do IDLE[${k%%:*}]=$(rss "${k#*:}"); LOAD[${k%%:*}]=0; done
echo "$(nproc) CPUs shared by wrk, the upstream nginx (2 workers), the proxy under test and other work" \
	"(load average now: $(cut -d' ' -f1-3 /proc/loadavg)); $SCHEME; wrk -t$THREADS -c$CONNS -d$DUR --latency," \
	"body $BODY bytes, $RUNS runs per path"

# cpu PID: CPU ticks (user + system) of PID and its children (nginx's workers)
cpu() {
	local sum=0 p
	for p in "$1" $(pgrep -P "$1"); do sum=$((sum + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done
	echo $sum
}
HZ=$(getconf CLK_TCK)
one() { # URL [HEADER]: "req/s p50_ms p99_ms requests"
	local out
	out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DUR" --latency ${2:+-H "$2"} "$1" 2>&1)
	if grep -q "Non-2xx\|Socket errors" <<<"$out"; then
		echo "api_proxy: $1: $(grep "Non-2xx\|Socket errors" <<<"$out")" >&2
	fi
	awk '
	function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
	/Requests\/sec/ { rps = $2 } $1 == "50%" { p50 = ms($2) } $1 == "99%" { p99 = ms($2) }
	/ requests in / { n = $1 }
	END { printf "%.0f %.3f %.3f %d\n", rps, p50, p99, n }' <<<"$out"
}
declare -A RES
for load in $LOADS; do
	hdr=
	[ $load = close ] && hdr="Connection: close"
	for i in $(seq "$RUNS"); do
		for path in direct nginx buffer splice; do
			case $path in
			direct) port=$UP pid= ;; nginx) port=$NG pid=$NG_PID ;;
			buffer) port=$PXB pid=$PXB_PID ;; splice) port=$PXS pid=$PXS_PID ;;
			esac
			if [ -n "$pid" ]; then
				( sleep "$(($(tr -dc 0-9 <<<"$DUR") / 2))"; rss "$pid" >"$T_TMP/rss.$path" ) &
				sampler=$!
				c0=$(cpu "$pid")
			fi
			r=$(one "$SCHEME://127.0.0.1:$port/obj" "$hdr")
			cpk=-
			if [ -n "$pid" ]; then
				c1=$(cpu "$pid")
				read -r _ _ _ nreq <<<"$r"
				[ "${nreq:-0}" -gt 0 ] && cpk=$(echo "scale=1; ($c1 - $c0) * 1000000 / $HZ / $nreq" | bc)
				wait "$sampler"
				[ "$(cat "$T_TMP/rss.$path")" -gt "${LOAD[$path]}" ] && LOAD[$path]=$(cat "$T_TMP/rss.$path")
			fi
			r="${r% *} $cpk"
			printf '%-9s run %d %-7s %8s req/s  p50 %7s ms  p99 %7s ms  CPU %5s ms/1000 req\n' "$load" "$i" "$path" $r
			RES[$load.$path]+="$r"$'\n'
		done
	done
done
stat() { awk -v c="$2" 'NF { print $c }' <<<"${RES[$1]}" | sort -g | awk '{ v[NR] = $1 } END { printf "%s %s", v[1], v[int((NR + 1) / 2)] }'; }
for load in $LOADS; do
	echo "$load: min / median over $RUNS runs:"
	for path in direct nginx buffer splice; do
		read -r rmin rmed <<<"$(stat $load.$path 1)"
		read -r p50min p50med <<<"$(stat $load.$path 2)"
		read -r p99min p99med <<<"$(stat $load.$path 3)"
		read -r cpumin cpumed <<<"$(stat $load.$path 4)"
		printf '  %-7s %8s / %8s req/s   p50 %s / %s ms   p99 %s / %s ms   CPU %s / %s ms per 1000 req\n' \
			"$path" "$rmin" "$rmed" "$p50min" "$p50med" "$p99min" "$p99med" "$cpumin" "$cpumed"
	done
	read -r _ nmed <<<"$(stat $load.nginx 1)"
	read -r _ bmed <<<"$(stat $load.buffer 1)"
	read -r _ smed <<<"$(stat $load.splice 1)"
	echo "  api-proxy / nginx (medians): buffer $(echo "scale=2; $bmed / $nmed" | bc)x, splice $(echo "scale=2; $smed / $nmed" | bc)x"
done

# fail-over: the preferred upstream refuses (nothing listens), or its connect hangs (a listener
# whose queue is full); curl's total time for one HTTPS request, median of 5
python3 - "$HANG" <<'PY' &
import socket, sys, time
ls = socket.socket(); ls.bind(("127.0.0.2", int(sys.argv[1]))); ls.listen(0)
fill = []
for _ in range(4):
    c = socket.socket(); c.setblocking(False); c.connect_ex(("127.0.0.2", int(sys.argv[1]))); fill.append(c)
time.sleep(3600)
PY
TARPIT=$!
t_cleanup_add "kill $TARPIT 2>/dev/null"
PXH=$(free_port)
bg pxfail "$AWS_K8S" api-proxy --listen "127.0.0.1:$PXF" --upstream "127.0.0.2:$DEAD,127.0.0.1:$UP" --node-ip 127.0.0.2 --fail-timeout 0s
bg pxhang "$AWS_K8S" api-proxy --listen "127.0.0.1:$PXH" --upstream "127.0.0.2:$HANG,127.0.0.1:$UP" --node-ip 127.0.0.2 --fail-timeout 0s
# ready when they log it (a request through pxhang takes the 1 s connect timeout)
for ((i = 0; i < 200; i++)); do
	grep -q '"serving"' "$T_TMP/pxfail.log" && grep -q '"serving"' "$T_TMP/pxhang.log" && break
	sleep 0.1
done
med5() { # PORT: median total ms of 5 requests
	for _ in 1 2 3 4 5; do
		curl -s --cacert "$T_TMP/tls.crt" -o /dev/null -w '%{time_total}\n' --max-time 10 "$SCHEME://127.0.0.1:$1/obj"
	done | sort -g | awk '{ v[NR] = $1 * 1000 } END { printf "%.0f", v[3] }'
}
echo "fail-over (curl total time per request, median of 5; direct $(med5 "$UP") ms):"
echo "  preferred upstream refuses: api-proxy $(med5 "$PXF") ms (every request tries it first:" \
	"--fail-timeout 0s), nginx $(med5 "$NGF") ms (primary + backup)"
echo "  preferred upstream hangs:   api-proxy $(med5 "$PXH") ms (--connect-timeout 1s, then the next one)"
for k in nginx buffer splice; do
	echo "resident memory $k: idle $(mib "${IDLE[$k]}") MiB, under load ($CONNS connections) up to $(mib "${LOAD[$k]}") MiB"
done
