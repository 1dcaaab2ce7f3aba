"""Command line: run --port P --kubeconfig-out FILE [--http-port P2] [--config auth.json]."""
import argparse
import base64
import json
import os
import secrets
import shutil
import signal
import ssl
import sys
import tempfile
import threading

from . import certs
from .api import Api
from .auth import Auth
from .control import Faults, RequestLog
from .httpd import App, Server
from .resources import Registry
from .store import Store


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="tests/kube-apiserver/run",
        description="A fake Kubernetes API server for tests (see tests/kube-apiserver/README.md).")
    ap.add_argument("--port", type=int, required=True, help="HTTPS port")
    ap.add_argument("--kubeconfig-out", required=True, metavar="FILE",
                    help="where to write the kubeconfig (client material goes to FILE.*)")
    ap.add_argument("--http-port", type=int, help="also serve plain HTTP on this port")
    ap.add_argument("--config", help="auth config JSON: tokens, rules, anonymous, authorize, ...")
    ap.add_argument("--http-require-auth", action="store_true",
                    help="require credentials on the HTTP port too (default: none needed there)")
    ap.add_argument("--address", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    ap.add_argument("--admin-token", help="bearer token of the admin user (default: random)")
    ap.add_argument("--history", type=int, default=10000,
                    help="watch events remembered per resource (default 10000)")
    ap.add_argument("--bookmark-interval", type=float, default=1.0,
                    help="seconds between BOOKMARK events on watches that allow them (default 1)")
    ap.add_argument("-v", "--verbose", action="store_true", help="log every request to stderr")
    return ap.parse_args(argv)


def _b64(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def _write(path, text, mode=0o600):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def write_kubeconfig(path, args, token, ca_crt, client):
    server = "https://%s:%d" % ("127.0.0.1" if args.address in ("0.0.0.0", "") else args.address, args.port)
    clusters = [{"name": "kas", "cluster": {"server": server, "certificate-authority-data": _b64(ca_crt)}}]
    contexts = [{"name": "kas", "context": {"cluster": "kas", "user": "admin", "namespace": "default"}},
                {"name": "kas-cert", "context": {"cluster": "kas", "user": "admin-cert", "namespace": "default"}}]
    if args.http_port:
        clusters.append({"name": "kas-http", "cluster": {"server": "http://127.0.0.1:%d" % args.http_port}})
        contexts.append({"name": "kas-http", "context": {"cluster": "kas-http", "user": "admin",
                                                         "namespace": "default"}})
        # (kubectl sends no credentials over plain HTTP; the HTTP port needs none by default)
    cfg = {"apiVersion": "v1", "kind": "Config", "preferences": {}, "clusters": clusters,
           "users": [{"name": "admin", "user": {"token": token}},
                     {"name": "admin-cert", "user": {"client-certificate-data": _b64(client[0]),
                                                     "client-key-data": _b64(client[1])}}],
           "contexts": contexts, "current-context": "kas"}
    _write(path, json.dumps(cfg, indent=2) + "\n")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    cfg = {}
    if args.config:
        try:
            with open(args.config) as f:
                cfg = json.load(f)
        except (OSError, ValueError) as e:
            print("run: cannot read config %r: %s" % (args.config, e), file=sys.stderr)
            return 2
    token = args.admin_token or secrets.token_hex(16)
    out = os.path.abspath(args.kubeconfig_out)
    tmp = tempfile.mkdtemp(prefix="kas-")
    try:
        ca = certs.make_ca(tmp, "ca", "kas-ca")
        srv = certs.make_cert(tmp, "server", ca, "kube-apiserver", (),
                              ["IP:127.0.0.1", "DNS:localhost", "DNS:kubernetes",
                               "DNS:kubernetes.default.svc"], server=True)
        cca = certs.make_ca(tmp, "client-ca", "kas-client-ca")
        client = certs.make_cert(tmp, "client", cca, "admin", ["system:masters"])
        extra = []
        for c in cfg.get("clientCerts") or []:
            extra.append((c["name"], certs.make_cert(tmp, "extra-" + c["name"], cca, c.get("user") or c["name"],
                                                     c.get("groups") or [])))
    except (RuntimeError, OSError, KeyError) as e:
        print("run: cannot make certificates: %s" % e, file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
        return 1

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(srv[0], srv[1])
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.load_verify_locations(cca[0])
    ctx.set_alpn_protocols(["http/1.1"])

    reg = Registry()
    store = Store(history=args.history)
    auth = Auth(token)
    try:
        auth.load(cfg)
    except (ValueError, TypeError, AttributeError) as e:
        print("run: bad config: %s" % e, file=sys.stderr)
        return 2
    api = Api(reg, store, auth)
    app = App(reg, store, api, auth, Faults(), RequestLog(), args.bookmark_interval, args.verbose)
    app.auth_config = cfg
    app.http_require_auth = args.http_require_auth
    servers = []
    try:
        servers.append(Server((args.address, args.port), app, ctx))
        if args.http_port:
            servers.append(Server((args.address, args.http_port), app))
    except OSError as e:
        print("run: cannot listen: %s" % e, file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
        return 1

    for suffix, src in ((".ca.crt", ca[0]), (".client.crt", client[0]), (".client.key", client[1]),
                        (".client-ca.crt", cca[0]), (".client-ca.key", cca[1])):
        shutil.copyfile(src, out + suffix)
        os.chmod(out + suffix, 0o600)
    for name, (crt, key) in extra:
        shutil.copyfile(crt, "%s.%s.crt" % (out, name))
        shutil.copyfile(key, "%s.%s.key" % (out, name))
    _write(out + ".token", token + "\n")
    write_kubeconfig(out, args, token, ca[0], client)
    shutil.rmtree(tmp, ignore_errors=True)

    stop = threading.Event()

    def on_signal(_sig, _frame):
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
               for s in servers]
    for t in threads:
        t.start()
    while not stop.wait(0.2):
        pass
    app.stopping.set()
    for w in store.watchers():
        w.close()
    for s in servers:
        s.shutdown()
        s.server_close()
    return 0
