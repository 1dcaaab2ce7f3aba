#!/usr/bin/env bash
# aws-k8s rbac-proxy on its hot path (issue 17's figures): wrk (Debian's) GETs /metrics, a static
# body of BODY bytes (default 20000, a typical component's metrics page) served by nginx (the
# upstream), on kept-alive TLS connections, through three paths with the same wrk threads and
# connections:
#   direct: TLS straight to the upstream nginx (its TLS port);
#   nginx:  nginx as a plain TLS reverse proxy (no authentication) in front of the upstream's
#           plain HTTP port, keep-alive to it;
#   proxy:  aws-k8s rbac-proxy in front of the same plain HTTP port, a bearer token that the
#           test API server's TokenReview accepts and its SubjectAccessReview allows; both
#           decisions cached after the first request (upstream's lifetimes: 2 min, 5 min).
# Each path runs RUNS times (default 5) for DUR (default 10s) with CONNS connections (default
# 32) on THREADS wrk threads (default 2); the script prints every run and the min/median of
# requests/s, p50 and p99, then the proxy's resident memory idle, under load, and its peak.
# The machine's cores are shared by wrk, the upstream, the proxy under test and whatever else
# runs: the figures compare the three paths, measured the same way, not absolute capacity.
# PIN=1 (needs 2 CPUs or more) measures the proxy as a sidecar with a CPU of its own, as in a pod
# where it has its own CPU request: wrk and the upstream nginx run on CPU 0 in every path, the
# proxy in front (aws-k8s rbac-proxy or nginx) on CPU 1, one event loop or worker each. Without it
# all share every CPU, and the proxy path, which does the direct path's TLS work plus a second
# hop, cannot reach the direct path's rate (see the CPU-per-request lines).
# Environment: PIN, RUNS, DUR, CONNS, THREADS, BODY, WORKERS (the proxy's --workers; default 0, one
# event loop per CPU).
. "$(dirname "$0")/../lib/testlib.sh"
RUNS=${RUNS:-5}
DUR=${DUR:-10s}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
BODY=${BODY:-20000}
PIN=${PIN:-0}
[ "$PIN" = 1 ] && [ "$(nproc)" -lt 2 ] && { echo "rbac_proxy: PIN=1 needs 2 CPUs"; exit 0; }
WORKERS=${WORKERS:-$([ "$PIN" = 1 ] && echo 1 || echo 0)}
# command prefixes: on CPU 0, on CPU 1 when PIN=1
ON0=() ON1=()
[ "$PIN" = 1 ] && ON0=(taskset -c 0) ON1=(taskset -c 1)
for p in wrk nginx; do
	command -v $p >/dev/null || { echo "rbac_proxy: $p is missing (apt-get install wrk nginx-light)"; exit 0; }
done

KAS_PORT=$(free_port) UP_TLS=$(free_port) UP_HTTP=$(free_port) NG_PORT=$(free_port) PX_PORT=$(free_port)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$T_TMP/tls.key" -out "$T_TMP/tls.crt" 2>/dev/null
mkdir -p "$T_TMP/www" "$T_TMP/ng-up" "$T_TMP/ng-px"
chmod a+rx "$T_TMP" "$T_TMP/www" # nginx started as root serves as nobody
python3 -c "
import sys
line = b'# TYPE some_metric counter\nsome_metric{label=\"value\"} 12345\n'
sys.stdout.buffer.write((line * ($BODY // len(line) + 1))[:$BODY])" >"$T_TMP/www/metrics"
chmod a+r "$T_TMP/www/metrics"

# nginx_conf PREFIX SERVER-BLOCK: an nginx that runs in the foreground from PREFIX
nginx_conf() {
	cat >"$1/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path $1/body;
	proxy_temp_path $1/proxy;
	fastcgi_temp_path $1/fastcgi;
	uwsgi_temp_path $1/uwsgi;
	scgi_temp_path $1/scgi;
	keepalive_requests 1000000;
	ssl_certificate $T_TMP/tls.crt;
	ssl_certificate_key $T_TMP/tls.key;
	ssl_protocols TLSv1.2 TLSv1.3;
	$2
}
EOF
}
nginx_conf "$T_TMP/ng-up" "server {
		listen 127.0.0.1:$UP_HTTP;
		listen 127.0.0.1:$UP_TLS ssl;
		root $T_TMP/www;
		default_type text/plain;
	}"
nginx_conf "$T_TMP/ng-px" "upstream up { server 127.0.0.1:$UP_HTTP; keepalive 64; }
	server {
		listen 127.0.0.1:$NG_PORT ssl;
		location / {
			proxy_pass http://up;
			proxy_http_version 1.1;
			proxy_set_header Connection \"\";
			proxy_set_header X-Forwarded-For \$remote_addr;
			proxy_buffering off;
		}
	}"
# the upstream and the reverse proxy get as many worker processes as the rbac-proxy has event
# loops
nw=$([ "$WORKERS" = 0 ] && nproc || echo "$WORKERS")
sed -i "s/^worker_processes 1;/worker_processes $nw;/" "$T_TMP/ng-up/nginx.conf" "$T_TMP/ng-px/nginx.conf"
cat >"$T_TMP/auth.json" <<'JSON'
{"tokens": [{"token": "scraper-token", "user": "scraper", "groups": ["monitoring"]}],
 "rules": [{"groups": ["monitoring"], "verbs": ["get"], "nonResourceURLs": ["/metrics"]}]}
JSON
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KAS_PORT" --kubeconfig-out "$T_TMP/kc" --config "$T_TMP/auth.json"
bg upstream "${ON0[@]}" nginx -p "$T_TMP/ng-up" -c "$T_TMP/ng-up/nginx.conf" -e "$T_TMP/ng-up/error.log"
bg ngproxy "${ON1[@]}" nginx -p "$T_TMP/ng-px" -c "$T_TMP/ng-px/nginx.conf" -e "$T_TMP/ng-px/error.log"
wait_http "https://127.0.0.1:$KAS_PORT/healthz" 30 && wait_http "http://127.0.0.1:$UP_HTTP/metrics" 10 &&
	wait_http "https://127.0.0.1:$NG_PORT/metrics" 10 || {
	echo "rbac_proxy: the peers did not start: $(tail -3 "$T_TMP"/kas.log "$T_TMP"/ng-*/error.log)"
	exit 0
}
bg proxy "${ON1[@]}" "$AWS_K8S" rbac-proxy --secure-listen-address=127.0.0.1:$PX_PORT \
	--upstream=http://127.0.0.1:$UP_HTTP/ --kubeconfig="$T_TMP/kc" --workers="$WORKERS"
wait_http "https://127.0.0.1:$PX_PORT/healthz" 20 || { echo "rbac_proxy: the proxy did not start: $(tail -3 "$T_TMP/proxy.log")"; exit 0; }
PX_PID=$(cat "$T_TMP/proxy.pid")
AUTH="Authorization: Bearer scraper-token"
code=$(curl -sk -o "$T_TMP/first" -w '%{http_code}' -H "$AUTH" "https://127.0.0.1:$PX_PORT/metrics")
if [ "$code" != 200 ] || ! cmp -s "$T_TMP/first" "$T_TMP/www/metrics"; then
	echo "rbac_proxy: the proxy does not serve the body for the token (HTTP $code)"
	exit 0
fi
code=$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$PX_PORT/metrics")
[ "$code" = 401 ] || { echo "rbac_proxy: the proxy answers $code without a token"; exit 0; }

st() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
mib() { echo "scale=1; $1 / 1024" | bc; }
echo "proxy idle after start-up and one request: VmRSS $(mib "$(st "$PX_PID" VmRSS)") MiB," \
	"RssAnon $(mib "$(st "$PX_PID" RssAnon)") MiB"
if [ "$PIN" = 1 ]; then
	echo "PIN=1: wrk and the upstream nginx on CPU 0, the proxy in front on CPU 1 (other work on the" \
		"machine is not pinned away)"
else
	echo "$(nproc) CPUs, shared by wrk, the upstream nginx, the path under test and other work on" \
		"the machine"
fi
echo "wrk -t$THREADS -c$CONNS -d$DUR --latency, body $BODY bytes, $RUNS runs per path"

# ticks PID...: CPU time (user + system, clock ticks) used so far by each PID and its children
# processes (nginx's workers), summed
ticks() {
	local t=0 p
	for p in "$@" $(pgrep -P "$(echo "$@" | tr ' ' ,)"); do
		[ -r "/proc/$p/stat" ] || continue
		t=$((t + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat")))
	done
	echo "$t"
}
UP_PID=$(cat "$T_TMP/upstream.pid") NG_PID=$(cat "$T_TMP/ngproxy.pid")
HZ=$(getconf CLK_TCK)

# one PATH URL [HEADER]: one wrk run; prints "req/s p50_ms p99_ms cpu_front_us cpu_up_us" (latencies
# in ms; CPU microseconds per request used by the path's front process, the proxy or nginx, and by
# the upstream nginx)
one() {
	local out front t0f t0u
	case $1 in direct) front=$UP_PID ;; nginx) front=$NG_PID ;; proxy) front=$PX_PID ;; esac
	t0f=$(ticks "$front") t0u=$(ticks "$UP_PID")
	out=$("${ON0[@]}" wrk -t"$THREADS" -c"$CONNS" -d"$DUR" --latency ${3:+-H "$3"} "$2" 2>&1)
	local df=$(($(ticks "$front") - t0f)) du=$(($(ticks "$UP_PID") - t0u))
	[ "$1" = direct ] && df=0
	local nreq
	nreq=$(awk '/requests in/ { print $1 }' <<<"$out")
	if grep -q "Non-2xx\|Socket errors" <<<"$out"; then
		echo "rbac_proxy: $1: errors: $(grep "Non-2xx\|Socket errors" <<<"$out")" >&2
	fi
	awk -v nreq="${nreq:-0}" -v df="$df" -v du="$du" -v hz="$HZ" '
	function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
	/Requests\/sec/ { rps = $2 } $1 == "50%" { p50 = ms($2) } $1 == "99%" { p99 = ms($2) }
	END { n = nreq > 0 ? nreq : 1
	      printf "%.0f %.3f %.3f %.1f %.1f\n", rps, p50, p99, df * 1e6 / hz / n, du * 1e6 / hz / n }' <<<"$out"
}
declare -A RES
rss_load=0
for i in $(seq "$RUNS"); do
	for path in direct nginx proxy; do
		case $path in
		direct) r=$(one direct "https://127.0.0.1:$UP_TLS/metrics") ;;
		nginx) r=$(one nginx "https://127.0.0.1:$NG_PORT/metrics") ;;
		proxy)
			( sleep "$(($(tr -dc 0-9 <<<"$DUR") / 2))"; st "$PX_PID" VmRSS >"$T_TMP/rss.load" ) &
			sampler=$!
			r=$(one proxy "https://127.0.0.1:$PX_PORT/metrics" "$AUTH")
			wait "$sampler"
			[ "$(cat "$T_TMP/rss.load")" -gt "$rss_load" ] && rss_load=$(cat "$T_TMP/rss.load")
			;;
		esac
		printf 'run %d %-7s %8s req/s  p50 %7s ms  p99 %7s ms  CPU/request: front %6s us, upstream %6s us\n' \
			"$i" "$path" $r
		RES[$path]+="$r"$'\n'
	done
done
# stat PATH COLUMN: "min median" of one column over the runs
stat() { awk -v c="$2" 'NF { print $c }' <<<"${RES[$1]}" | sort -g | awk '{ v[NR] = $1 } END { printf "%s %s", v[1], v[int((NR + 1) / 2)] }'; }
echo "min / median over $RUNS runs:"
for path in direct nginx proxy; do
	read -r rmin rmed <<<"$(stat $path 1)"
	read -r p50min p50med <<<"$(stat $path 2)"
	read -r p99min p99med <<<"$(stat $path 3)"
	printf '  %-7s %8s / %8s req/s   p50 %s / %s ms   p99 %s / %s ms\n' "$path" "$rmin" "$rmed" \
		"$p50min" "$p50med" "$p99min" "$p99med"
done
read -r _ dmed <<<"$(stat direct 1)"
read -r _ pmed <<<"$(stat proxy 1)"
read -r _ nmed <<<"$(stat nginx 1)"
echo "CPU per request (medians; front = the proxy or nginx in front, upstream = the nginx that serves the body):"
for path in direct nginx proxy; do
	read -r _ fmed <<<"$(stat $path 4)"
	read -r _ umed <<<"$(stat $path 5)"
	printf '  %-7s front %6s us + upstream %6s us\n' "$path" "$fmed" "$umed"
done
echo "proxy / direct (medians): $(echo "scale=2; $pmed / $dmed" | bc)x   nginx / direct: $(echo "scale=2; $nmed / $dmed" | bc)x   proxy / nginx: $(echo "scale=2; $pmed / $nmed" | bc)x"
echo "proxy under load ($CONNS connections): VmRSS up to $(mib "$rss_load") MiB; peak of its life" \
	"VmHWM $(mib "$(st "$PX_PID" VmHWM)") MiB"
sleep 2
echo "proxy idle after the runs: VmRSS $(mib "$(st "$PX_PID" VmRSS)") MiB, RssAnon $(mib "$(st "$PX_PID" RssAnon)") MiB"
