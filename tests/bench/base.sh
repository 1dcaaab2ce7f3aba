#!/usr/bin/env bash
# Figures of the shared base: the stripped binary's size, the resident memory of an idle
# process serving /metrics, and the time from start to the first successful /healthz.
. "$(dirname "$0")/../lib/testlib.sh"
runs=${RUNS:-20}

strip -o "$T_TMP/aws-k8s.stripped" "$AWS_K8S"
size=$(stat -c %s "$T_TMP/aws-k8s.stripped")
echo "binary: $(numfmt --to=iec-i --suffix=B "$size") stripped ($size bytes), dynamically linked"

# start-up latency: from exec to the first 200 on /healthz, polled every 0.5 ms from one
# Python process (so no client process start is counted)
python3 - "$AWS_K8S" "$runs" <<'PY'
import http.client, socket, subprocess, sys, time
binary, runs = sys.argv[1], int(sys.argv[2])
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
times = []
for _ in range(runs):
    port = free_port()
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "serve", "--metrics-bind-address", f"127.0.0.1:{port}"],
                         stderr=subprocess.DEVNULL)
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                break
        except OSError:
            time.sleep(0.0005)
    times.append((time.perf_counter() - t0) * 1e3)
    p.terminate(); p.wait()
times.sort()
print(f"start to first /healthz: best {times[0]:.1f} ms, median {times[len(times)//2]:.1f} ms over {runs} runs")
PY

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
