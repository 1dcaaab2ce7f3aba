#!/usr/bin/env bash
# The static binary (make static: build/static/aws-k8s, or $AWS_K8S_STATIC) against the dynamic
# one ($AWS_K8S, ./aws-k8s), measured in one run, the two alternating:
# - size, stripped;
# - start-up, best and median of RUNS (20): `--version` (exec to exit), `aws endpoint ec2` (flags,
#   the AWS client set up, one endpoint resolved, exit) and `serve` from exec to the first 200
#   on /healthz;
# - idle resident memory of serve, csi-node, csi-controller (started with no peer: the node
#   with --node-id, the controller with an endpoint nothing answers on) and ccm (against moto
#   and the test API server, one Node, leading its own lease), 1 s after they
#   are up: VmRSS; the private part (Private_Clean + Private_Dirty of smaps_rollup: the pages
#   no other process maps), alone and beside a second process of the same binary (an idle
#   serve: alone, the static binary's text and the dynamic one's libraries count as private;
#   beside another process of the same image, as on a node, they are shared); and the
#   anonymous part (heap, stacks: each process's own whatever the link).
. "$(dirname "$0")/../lib/testlib.sh"
runs=${RUNS:-20}
STATIC=${AWS_K8S_STATIC:-$T_ROOT/build/static/aws-k8s}
for b in "$AWS_K8S" "$STATIC"; do
	if [ ! -x "$b" ]; then
		echo "static_vs_dynamic: skipped: $b is not built (make; make static)"
		exit 0
	fi
done
strip -o "$T_TMP/dyn.stripped" "$AWS_K8S"
strip -o "$T_TMP/static.stripped" "$STATIC"
printf 'size, stripped: dynamic %s (plus %d shared libraries), static %s\n' \
	"$(numfmt --to=iec-i --suffix=B "$(stat -c %s "$T_TMP/dyn.stripped")")" \
	"$(ldd "$AWS_K8S" | grep -c '=>')" \
	"$(numfmt --to=iec-i --suffix=B "$(stat -c %s "$T_TMP/static.stripped")")"

# the ccm idles against the test peers: moto behind the counting proxy, the test API server, one
# Node of one instance (tests/integration/ccm_lib.sh)
. "$T_ROOT/tests/lib/moto.sh"
. "$T_ROOT/tests/integration/ccm_lib.sh"
ccm_env_start || { echo "static_vs_dynamic: the test peers did not start" >&2; exit 1; }
read -r _ dns < <(instance bench-a)
node_create "$dns"

python3 - "$AWS_K8S" "$STATIC" "$runs" "$T_TMP" "$KC" "$CCM_CONFIG" <<'PY'
import http.client, os, socket, subprocess, sys, time
dyn, static, runs, tmp, kc, ccm_config = sys.argv[1:4] + sys.argv[4:7]
runs = int(runs)
bins = {"dynamic": dyn, "static": static}
env = dict(os.environ, AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
           AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x")
null = subprocess.DEVNULL

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def run_exit(binary, args):
    t0 = time.perf_counter()
    subprocess.run([binary] + args, stdout=null, stderr=null, env=env, check=True)
    return (time.perf_counter() - t0) * 1e3

def serve_ready(binary, args):
    port = free_port()
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "serve", "--metrics-bind-address", f"127.0.0.1:{port}"],
                         stdout=null, stderr=null, env=env)
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                break
        except OSError:
            time.sleep(0.0005)
    ms = (time.perf_counter() - t0) * 1e3
    p.terminate(); p.wait()
    return ms

def fig(xs):
    xs = sorted(xs)
    return f"best {xs[0]:5.1f} ms, median {xs[len(xs) // 2]:5.1f} ms"

cases = [("--version", run_exit, ["--version"]),
         ("aws endpoint ec2", run_exit, ["aws", "endpoint", "ec2"]),
         ("serve to first /healthz", serve_ready, [])]
for name, fn, args in cases:
    t = {k: [] for k in bins}
    for b in bins:
        fn(bins[b], args)  # warm the page cache
    for _ in range(runs):
        for k, b in bins.items():
            t[k].append(fn(b, args))
    print(f"start-up, {name} ({runs} runs): " +
          "; ".join(f"{k} {fig(v)}" for k, v in t.items()))

def memory(pid):
    kb = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":"):
                kb[parts[0][:-1]] = int(parts[1])
    return kb["Rss"], kb["Private_Clean"] + kb["Private_Dirty"], kb["Anonymous"]

def idle(binary, sub, tag, companion=False):
    # companion: a second process of the same binary (an idle serve) runs beside it, as other
    # containers of the same image do on a node: the text they share is then not private
    if companion:
        mate = subprocess.Popen([binary, "serve", "--metrics-bind-address", f"127.0.0.1:{free_port()}"],
                             stdout=null, stderr=null, env=env)
        time.sleep(0.5)
    sock = f"{tmp}/{tag}.sock"
    port = free_port()
    argv = {
        "serve": ["serve", "--metrics-bind-address", f"127.0.0.1:{port}"],
        "csi-node": ["csi-node", "--endpoint", f"unix://{sock}", "--node-id", "i-0123456789abcdef0",
                     "--availability-zone", "us-east-1a", "--instance-type", "m5.large",
                     "--describe-instance-type=false"],
        "csi-controller": ["csi-controller", "--endpoint", f"unix://{sock}"],
        # its own lease name, so the dynamic and static runs do not wait for each other
        "ccm": ["ccm", "--cloud-provider=aws", f"--cloud-config={ccm_config}",
                f"--kubeconfig={kc}", "--bind-address=127.0.0.1", f"--secure-port={port}",
                f"--leader-elect-resource-name=bench-{tag}", "--v=1"],
    }[sub]
    e = dict(env, AWS_ENDPOINT_URL=os.environ["AWS_ENDPOINT_URL"] if sub == "ccm" else
             f"http://127.0.0.1:{free_port()}")
    p = subprocess.Popen([binary] + argv, stdout=null, stderr=null, env=e)
    end = time.time() + 10
    while time.time() < end:
        if sub == "ccm":
            try:
                c = http.client.HTTPSConnection("127.0.0.1", port, timeout=1,
                                                context=__import__("ssl")._create_unverified_context())
                c.request("GET", "/healthz"); c.getresponse()
                break
            except OSError:
                pass
        elif sub == "serve":
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                c.request("GET", "/healthz"); c.getresponse()
                break
            except OSError:
                pass
        elif os.path.exists(sock):
            break
        time.sleep(0.01)
    time.sleep(1)
    m = memory(p.pid)
    p.terminate(); p.wait()
    if companion:
        mate.terminate(); mate.wait()
    return m

for sub in ("serve", "csi-node", "csi-controller", "ccm"):
    out = []
    for k, b in bins.items():
        rss, private, anon = idle(b, sub, f"{sub}-{k}")
        _, private2, _ = idle(b, sub, f"{sub}-{k}-2", companion=True)
        out.append(f"{k} VmRSS {rss / 1024:4.1f} MiB, private {private / 1024:4.1f} MiB "
                   f"({private2 / 1024:4.1f} beside a second process), "
                   f"anonymous {anon / 1024:4.1f} MiB")
    print(f"idle {sub}: " + "; ".join(out))
PY
