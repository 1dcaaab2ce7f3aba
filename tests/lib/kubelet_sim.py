#!/usr/bin/env python3
"""A simulated kubelet for the cpm tests (python3, standard library only).

    kubelet_sim.py --server http://127.0.0.1:PORT --node master-0=ROOT [--node ...]
                   [--ready-delay 0.3] [--record FILE] [--cpm-pod NODE=POD=URL ...]
                   [--run etcd]

For each --node NAME=ROOT it watches ROOT/etc/kubernetes/manifests (polling every 0.1 s; files
whose name starts with "." are ignored, as the kubelet does) and keeps one mirror pod per
static-pod manifest in the test API server (--server: its plain-HTTP port, no credentials):
kube-system/<metadata.name>-<NAME>, with the manifest's labels and annotations (the cpm
checksum included) plus kubernetes.io/config.mirror, .config.hash and .config.source=file,
spec.nodeName NAME. A new or changed manifest replaces the mirror pod (deleted, then created
NotReady) and ready-delay seconds later the pod's condition Ready turns True, unless the file
ROOT/.kubelet-sim/hold-<metadata.name> exists: that component stays NotReady until the file
goes. A manifest removed deletes its mirror pod.

--cpm-pod NODE=POD=URL: the readiness prober of a cpm "pod": kube-system/POD is created on
NODE when missing, and its Ready condition follows GET URL (its /readyz; 200 = Ready), checked
every 0.2 s.

--run etcd: the etcd manifests are run for real, as the kubelet would: the container's command
(etcd and its flags) with every absolute path in a flag's value taken under ROOT (--data-dir,
the certificates), its output appended to ROOT/.kubelet-sim/etcd.log. A changed manifest stops
the process (SIGTERM, SIGKILL after 10 s) and starts the new one; a removed one stops it; a
process that exits is started again 1 s later (restartPolicy Always). Its mirror pod is Ready
while the process runs and GET <--listen-metrics-urls>/metrics answers 200.

--record FILE: one line per event, appended: "<unix time> <node> <pod> <event> <checksum>",
event one of created, ready, notready, deleted, started, exited (checksum "-" when there is none).
SIGTERM or SIGINT stop it (exit 0).
"""
import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

CHECKSUM = "control-plane-manager.deckhouse.io/checksum"


def unquote(v):
    v = v.strip()
    if v.startswith('"'):
        try:
            return json.loads(v)
        except ValueError:
            return v.strip('"')
    if v.startswith("'") and v.endswith("'") and len(v) >= 2:
        return v[1:-1].replace("''", "'")
    return v


def parse_manifest(text):
    """name, labels, annotations of a block-style YAML Pod (as cpm writes it), or of JSON."""
    s = text.lstrip()
    if s.startswith("{"):
        obj = json.loads(s)
        md = obj.get("metadata") or {}
        return md.get("name"), md.get("labels") or {}, md.get("annotations") or {}
    name, labels, ann = None, {}, {}
    in_md, sub = False, None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:
            in_md = line.rstrip() == "metadata:"
            sub = None
            continue
        if not in_md:
            continue
        key, _, val = line.strip().partition(":")
        if indent == 2:
            sub = None
            if key == "name":
                name = unquote(val)
            elif key in ("labels", "annotations") and not val.strip():
                sub = labels if key == "labels" else ann
        elif indent == 4 and sub is not None:
            k = unquote(key)
            # the value starts after the first ": " following the key
            rest = line.strip()[len(key) + 1:]
            sub[k] = unquote(rest)
    return name, labels, ann


def parse_command(text):
    """The first container's command list of a block-style YAML Pod, or of JSON."""
    s = text.lstrip()
    if s.startswith("{"):
        obj = json.loads(s)
        return ((obj.get("spec") or {}).get("containers") or [{}])[0].get("command") or []
    cmd, item_indent = None, None
    for line in text.splitlines():
        stripped = line.strip()
        if cmd is None:
            if stripped in ("command:", "- command:"):
                cmd = []
            continue
        indent = len(line) - len(line.lstrip(" "))
        if stripped.startswith("- ") and (item_indent is None or indent == item_indent):
            item_indent = indent
            cmd.append(unquote(stripped[2:]))
        else:
            break
    return cmd or []


def under_root(root, value):
    """Every comma-separated absolute path of a flag's value, under root."""
    return ",".join(root.rstrip("/") + v if v.startswith("/") else v for v in value.split(","))


class Api:
    def __init__(self, server):
        self.server = server.rstrip("/")

    def call(self, method, path, body=None, ctype="application/json"):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, {}
        except (urllib.error.URLError, OSError):
            return 0, {}

    def pod_path(self, name=""):
        return "/api/v1/namespaces/kube-system/pods" + ("/" + name if name else "")

    def set_ready(self, name, ready):
        cond = {"type": "Ready", "status": "True" if ready else "False"}
        return self.call("PATCH", self.pod_path(name) + "/status",
                         {"status": {"phase": "Running", "conditions": [cond]}},
                         "application/merge-patch+json")[0]


class Sim:
    def __init__(self, args):
        self.api = Api(args.server)
        self.delay = args.ready_delay
        self.record_file = args.record
        self.nodes = [n.split("=", 1) for n in args.node]
        self.cpm_pods = [c.split("=", 2) for c in args.cpm_pod]
        # (node, file) -> {"hash", "pod", "sum", "created", "ready", "comp", "root"}
        self.known = {}
        self.cpm_ready = {}
        self.run_kinds = set(args.run)

    def record(self, node, pod, event, checksum):
        if not self.record_file:
            return
        with open(self.record_file, "a") as f:
            f.write("%.3f %s %s %s %s\n" % (time.time(), node, pod, event, checksum or "-"))

    def start_proc(self, node, st):
        root, cmd = st["root"], st["cmd"]
        args = [cmd[0]]
        for a in cmd[1:]:
            if a.startswith("--") and "=" in a:
                k, v = a.split("=", 1)
                args.append(k + "=" + under_root(root, v))
            else:
                args.append(a)
        os.makedirs(os.path.join(root, ".kubelet-sim"), exist_ok=True)
        log = open(os.path.join(root, ".kubelet-sim", st["comp"] + ".log"), "a")
        log.write("---- %s %s\n" % (time.strftime("%H:%M:%S"), " ".join(args)))
        log.flush()

        def child():
            try:  # die with the sim
                import ctypes
                ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)
            except OSError:
                pass
        st["proc"] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, preexec_fn=child)
        log.close()
        st["started"] = time.time()
        self.record(node, st["pod"], "started", st["sum"])

    def stop_proc(self, node, st):
        p = st.get("proc")
        if not p:
            return
        st["proc"] = None
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.record(node, st["pod"], "exited", st["sum"])

    def metrics_ok(self, st):
        url = None
        for a in st["cmd"]:
            if a.startswith("--listen-metrics-urls="):
                url = a.split("=", 1)[1].split(",")[0]
        if not url:
            return True
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=1) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def delete_pod(self, node, st):
        self.stop_proc(node, st)
        self.api.call("DELETE", self.api.pod_path(st["pod"]))
        self.record(node, st["pod"], "deleted", st["sum"])

    def create_pod(self, node, path, text):
        name, labels, ann = parse_manifest(text)
        if not name:
            return None
        h = hashlib.sha256(text.encode()).hexdigest()[:32]
        pod = "%s-%s" % (name, node)
        ann = dict(ann)
        ann.update({"kubernetes.io/config.mirror": h, "kubernetes.io/config.hash": h,
                    "kubernetes.io/config.source": "file"})
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": "kube-system", "labels": labels,
                             "annotations": ann},
                "spec": {"nodeName": node, "containers": [{"name": name, "image": "sim"}]},
                "status": {"phase": "Running",
                           "conditions": [{"type": "Ready", "status": "False"}]}}
        self.api.call("DELETE", self.api.pod_path(pod))
        code, _ = self.api.call("POST", self.api.pod_path(), body)
        if code not in (200, 201):
            return None
        self.record(node, pod, "created", ann.get(CHECKSUM))
        return {"hash": h, "pod": pod, "sum": ann.get(CHECKSUM), "created": time.time(),
                "ready": False, "comp": name,
                "cmd": parse_command(text) if name in self.run_kinds else None}

    def scan(self, node, root):
        mdir = os.path.join(root, "etc/kubernetes/manifests")
        seen = set()
        try:
            names = sorted(os.listdir(mdir))
        except OSError:
            names = []
        for fn in names:
            if fn.startswith(".") or not fn.endswith((".yaml", ".yml", ".json")):
                continue
            path = os.path.join(mdir, fn)
            try:
                with open(path) as f:
                    text = f.read()
            except OSError:
                continue
            key = (node, path)
            seen.add(key)
            h = hashlib.sha256(text.encode()).hexdigest()[:32]
            st = self.known.get(key)
            if st and st["hash"] == h:
                continue
            if st:
                self.delete_pod(node, st)
                del self.known[key]
            new = self.create_pod(node, path, text)
            if new:
                new["root"] = root
                self.known[key] = new
                if new["cmd"]:
                    self.start_proc(node, new)
        for key in [k for k in self.known if k[0] == node and k not in seen]:
            self.delete_pod(node, self.known.pop(key))

    def readiness(self):
        now = time.time()
        for (node, _), st in self.known.items():
            held = os.path.exists(os.path.join(st["root"], ".kubelet-sim", "hold-" + st["comp"]))
            want = not held and now - st["created"] >= self.delay
            if st.get("cmd"):
                p = st.get("proc")
                if p is not None and p.poll() is not None:
                    self.stop_proc(node, st)
                    st["exited"] = now
                if st.get("proc") is None and now - st.get("exited", 0) >= 1:
                    self.start_proc(node, st)
                p = st.get("proc")
                want = want and p is not None and p.poll() is None and self.metrics_ok(st)
            if want != st["ready"] and self.api.set_ready(st["pod"], want) == 200:
                st["ready"] = want
                self.record(node, st["pod"], "ready" if want else "notready", st["sum"])

    def probe_cpm(self):
        for node, pod, url in self.cpm_pods:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    ok = r.status == 200
            except (urllib.error.URLError, OSError):
                ok = False
            if pod not in self.cpm_ready:
                body = {"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": pod, "namespace": "kube-system",
                                     "labels": {"app": "d8-control-plane-manager"}},
                        "spec": {"nodeName": node,
                                 "containers": [{"name": "control-plane-manager",
                                                 "image": "sim"}]},
                        "status": {"phase": "Running",
                                   "conditions": [{"type": "Ready", "status": "False"}]}}
                code, _ = self.api.call("POST", self.api.pod_path(), body)
                if code in (200, 201, 409):
                    self.cpm_ready[pod] = None
                continue
            if self.cpm_ready[pod] != ok and self.api.set_ready(pod, ok) == 200:
                self.cpm_ready[pod] = ok
                self.record(node, pod, "ready" if ok else "notready", "-")

    def stop_all(self):
        for (node, _), st in self.known.items():
            self.stop_proc(node, st)

    def run(self):
        try:
            self.loop()
        finally:
            self.stop_all()

    def loop(self):
        last_probe = 0.0
        while True:
            for node, root in self.nodes:
                self.scan(node, root)
            self.readiness()
            if self.cpm_pods and time.time() - last_probe >= 0.2:
                self.probe_cpm()
                last_probe = time.time()
            time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--node", action="append", default=[], help="NAME=ROOT")
    ap.add_argument("--ready-delay", type=float, default=0.3)
    ap.add_argument("--record")
    ap.add_argument("--cpm-pod", action="append", default=[], help="NODE=POD=URL")
    ap.add_argument("--run", action="append", default=[], choices=["etcd"],
                    help="run this component's manifest for real")
    args = ap.parse_args()
    if not args.node and not args.cpm_pod:
        ap.error("give at least one --node NAME=ROOT")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    Sim(args).run()


if __name__ == "__main__":
    main()
