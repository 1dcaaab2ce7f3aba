#!/usr/bin/env python3
"""A tiny plain-HTTP stand-in for an API server's configmaps list and watch, serving what the
real test server never sends: broken watch streams.

    watch_stub.py --port P --scenario NAME --log FILE

Scenarios (watch number N counts the watch requests):
  malformed  list: one item (rv 5). watch 1: ADDED rv 6, then a line that is not JSON, then
             end. watch 2: ADDED rv 7, then an event of an unknown type. watch 3 and later:
             ADDED rv 8, then bookmarks until the client goes away.
  gone410    every watch: HTTP 410 Expired.
  error410   every watch: an ERROR event with a 410 Status.
  big        watch 1: an event of 100 KB; later watches: a small event, then bookmarks.
  garbage    every watch: a valid event, then 300 lines of random bytes, invalid JSON, deep
             nesting, wrong types, then end.
Every request is appended to the log file as "METHOD PATH?QUERY USER-AGENT".
"""
import argparse
import json
import random
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ARGS = None
WATCHES = [0]


def cm(name, rv):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)}}


def event(t, obj):
    return (json.dumps({"type": t, "object": obj}) + "\n").encode()


def garbage_lines(rng):
    out = []
    for _ in range(300):
        k = rng.randrange(8)
        if k == 0:
            out.append(bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 200))))
        elif k == 1:
            out.append(b"[" * rng.randrange(1, 5000))
        elif k == 2:
            out.append(b'{"type":"ADDED","object":' + b"[" * 3000 + b"]" * 3000 + b"}")
        elif k == 3:
            out.append(b'{"type":7,"object":{}}')
        elif k == 4:
            out.append(b'{"type":"MODIFIED","object":"string"}')
        elif k == 5:
            out.append(b'{"type":"ADDED","object":{"metadata":{"resourceVersion":' +
                       b'"' + b"9" * 500 + b'"}}}')
        elif k == 6:
            out.append(b'{"type":"ERROR","object":{"code":"x"}}')
        else:
            out.append(b'{"type":"DELETED","object":{"metadata":{"name":' +
                       str(rng.random()).encode() + b"}}}")
    return [l.replace(b"\n", b" ") + b"\n" for l in out]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        pass

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with open(ARGS.log, "a") as f:
            f.write("GET %s %s\n" % (self.path, self.headers.get("User-Agent", "-")))
        u = urlsplit(self.path)
        q = parse_qs(u.query)
        if u.path != "/api/v1/configmaps" and u.path != "/api/v1/namespaces/default/configmaps":
            return self.send_json(404, {"kind": "Status", "status": "Failure", "code": 404,
                                        "reason": "NotFound", "message": "not here"})
        if q.get("watch", [""])[0] not in ("true", "1"):
            return self.send_json(200, {"kind": "ConfigMapList", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": "5"},
                                        "items": [cm("a", 5)]})
        WATCHES[0] += 1
        n = WATCHES[0]
        sc = ARGS.scenario
        if sc == "gone410":
            return self.send_json(410, {"kind": "Status", "status": "Failure", "code": 410,
                                        "reason": "Expired", "message": "too old resource version"})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        w = self.wfile
        try:
            if sc == "error410":
                w.write(event("ERROR", {"kind": "Status", "status": "Failure", "code": 410,
                                        "reason": "Expired", "message": "too old"}))
            elif sc == "malformed":
                if n == 1:
                    w.write(event("ADDED", cm("b", 6)))
                    w.write(b"this is not json\n")
                elif n == 2:
                    w.write(event("ADDED", cm("c", 7)))
                    w.write(event("SOMETHING", cm("x", 99)))
                else:
                    w.write(event("ADDED", cm("d", 8)))
                    while True:
                        w.flush()
                        time.sleep(0.3)
                        w.write(event("BOOKMARK", {"kind": "ConfigMap",
                                                   "metadata": {"resourceVersion": "8"}}))
            elif sc == "big":
                if n == 1:
                    big = cm("big", 6)
                    big["data"] = {"blob": "x" * 100000}
                    w.write(event("ADDED", big))
                else:
                    w.write(event("ADDED", cm("small", 7)))
                    while True:
                        w.flush()
                        time.sleep(0.3)
                        w.write(event("BOOKMARK", {"kind": "ConfigMap",
                                                   "metadata": {"resourceVersion": "7"}}))
            elif sc == "garbage":
                w.write(event("ADDED", cm("g%d" % n, 10 + n)))
                for line in garbage_lines(random.Random(n)):
                    w.write(line)
            w.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--scenario", required=True,
                   choices=["malformed", "gone410", "error410", "big", "garbage"])
    p.add_argument("--log", required=True)
    ARGS = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    srv.daemon_threads = True
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
