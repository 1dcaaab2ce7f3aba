#!/usr/bin/env python3
"""A simulated kubelet for the cpm tests (python3, standard library only).

    kubelet_sim.py --server http://127.0.0.1:PORT --node master-0=ROOT [--node ...]
                   [--ready-delay 0.3] [--record FILE] [--cpm-pod NODE=POD=URL ...]

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

--record FILE: one line per event, appended: "<unix time> <node> <pod> <event> <checksum>",
event one of created, ready, notready, deleted (checksum "-" when there is none).
SIGTERM or SIGINT stop it (exit 0).
"""
import argparse
import hashlib
import json
import os
import signal
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

    def record(self, node, pod, event, checksum):
        if not self.record_file:
            return
        with open(self.record_file, "a") as f:
            f.write("%.3f %s %s %s %s\n" % (time.time(), node, pod, event, checksum or "-"))

    def delete_pod(self, node, st):
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
                "ready": False, "comp": name}

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
        for key in [k for k in self.known if k[0] == node and k not in seen]:
            self.delete_pod(node, self.known.pop(key))

    def readiness(self):
        now = time.time()
        for (node, _), st in self.known.items():
            held = os.path.exists(os.path.join(st["root"], ".kubelet-sim", "hold-" + st["comp"]))
            want = not held and now - st["created"] >= self.delay
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

    def run(self):
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
    args = ap.parse_args()
    if not args.node and not args.cpm_pod:
        ap.error("give at least one --node NAME=ROOT")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    Sim(args).run()


if __name__ == "__main__":
    main()
