#!/usr/bin/env bash
# Figures of the shared base: the stripped binary's size, the resident memory of an idle
# process serving /metrics, and the time from start to the first successful /healthz.
. "$(dirname "$0")/../lib/testlib.sh"
runs=${RUNS:-20}

strip -o "$T_TMP/aws-k8s.stripped" "$AWS_K8S"
size=$(stat -c %s "$T_TMP/aws-k8s.stripped")
echo "binary: $(numfmt --to=iec-i --suffix=B "$size") stripped ($size bytes), dynamically linked"

# start-up latency: start to first 200 on /healthz, best / median of $runs
times=()
for i in $(seq "$runs"); do
	port=$(free_port)
	t0=$(date +%s%N)
	"$AWS_K8S" serve --metrics-bind-address "127.0.0.1:$port" 2>/dev/null &
	pid=$!
	until curl -sf -o /dev/null "http://127.0.0.1:$port/healthz"; do sleep 0.001; done
	t1=$(date +%s%N)
	times+=($(((t1 - t0) / 1000)))
	kill "$pid"; wait "$pid" 2>/dev/null
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
echo "start to first /healthz: best ${sorted[0]} us, median ${sorted[$((runs / 2))]} us over $runs runs (includes curl's own start)"

# idle memory after serving 100 scrapes
port=$(free_port)
"$AWS_K8S" serve --metrics-bind-address "127.0.0.1:$port" 2>/dev/null &
pid=$!
t_cleanup_add "kill $pid"
wait_http "http://127.0.0.1:$port/healthz"
for i in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/metrics"; done
sleep 0.5
rss=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status)
hwm=$(awk '/^VmHWM/ {print $2}' /proc/$pid/status)
anon=$(awk '/^RssAnon/ {print $2}' /proc/$pid/status)
threads=$(awk '/^Threads/ {print $2}' /proc/$pid/status)
echo "idle serve process after 100 scrapes: RSS ${rss} KiB (anonymous ${anon} KiB, the rest is shared library text), peak ${hwm} KiB, ${threads} threads"
