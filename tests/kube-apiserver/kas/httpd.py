"""The HTTP side: routing, content negotiation, watch streaming and /_control/."""
import http.server
import json
import select
import socket
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse

from . import VERSION_INFO, fields, resources, table
from .api import ApiError, check_body_type, list_json, status_body
from .store import DUMPS, Gone, Item

MAX_BODY = 64 << 20
JSON = "application/json"


class Request:
    def __init__(self, method, path, query, body, headers):
        self.method = method
        self.path = path
        self.query = query
        self.body = body
        self.headers = headers
        self.content_type = headers.get("Content-Type", "")
        self.user = None
        self.res = None
        self.ns = None
        self.name = None
        self.sub = None
        self.watch = False
        self.dry = query.get("dryRun") == "All"
        self.warnings = []  # texts of the Warning headers of the answer (field validation)

    @property
    def key(self):
        return self.ns + "/" + self.name if self.res.namespaced else self.name

    @property
    def verb(self):
        m = self.method
        if m == "GET":
            if self.name:
                return "get"
            return "watch" if self.watch else "list"
        if m == "POST":
            return "create"
        if m == "PUT":
            return "update"
        if m == "PATCH":
            return "patch"
        if m == "DELETE":
            return "delete" if self.name else "deletecollection"
        return m.lower()


def parse_accept(header):
    out = []
    for part in (header or "").split(","):
        segs = [s.strip() for s in part.split(";")]
        if not segs[0]:
            continue
        params = {}
        for s in segs[1:]:
            k, _, v = s.partition("=")
            params[k.strip().lower()] = v.strip()
        out.append((segs[0].lower(), params))
    return out


def choose_output(header):
    """("json"|"Table"|"PartialObjectMetadata", version) for a resource request."""
    for mt, params in parse_accept(header):
        if mt not in (JSON, "*/*", "application/*"):
            continue
        as_ = params.get("as")
        if as_ is None:
            return "json", None
        if as_ == "Table" and params.get("g") == "meta.k8s.io":
            return "Table", params.get("v", "v1")
        if as_ in ("PartialObjectMetadata", "PartialObjectMetadataList") and params.get("g") == "meta.k8s.io":
            return "PartialObjectMetadata", params.get("v", "v1")
    return "json", None


class App:
    """Everything the handlers share."""

    def __init__(self, registry, store, api, auth, faults, reqlog, bookmark_interval=1.0,
                 verbose=False):
        self.reg = registry
        self.store = store
        self.api = api
        self.auth = auth
        self.faults = faults
        self.reqlog = reqlog
        self.bookmark_interval = bookmark_interval
        self.verbose = verbose
        self.http_require_auth = False
        self.stopping = threading.Event()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, addr, app, ssl_ctx=None):
        self.app = app
        self.ssl_ctx = ssl_ctx
        super().__init__(addr, Handler)

    def process_request_thread(self, request, client_address):
        try:
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ssl_ctx is not None:
                request.settimeout(30)
                request = self.ssl_ctx.wrap_socket(request, server_side=True)
                request.settimeout(None)
            self.finish_request(request, client_address)
        except Exception:
            pass
        finally:
            self.shutdown_request(request)

    def handle_error(self, request, client_address):
        pass


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kas"
    sys_version = ""

    def log_message(self, fmt, *args):
        if self.server.app.verbose:
            sys.stderr.write("kas: %s %s\n" % (self.address_string(), fmt % args))

    def send_response(self, code, message=None):
        self._code = code
        super().send_response(code, message)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = lambda self: self.handle_any()

    # --- plumbing ------------------------------------------------------------------

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                line = self.rfile.readline(1024)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline(8)
                if len(out) > MAX_BODY:
                    raise ApiError(413, "request entity too large", reason="RequestEntityTooLarge")
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ApiError(413, "request entity too large", reason="RequestEntityTooLarge")
        return self.rfile.read(n) if n else b""

    def send_text(self, code, text, ctype=JSON, headers=None):
        data = text.encode() if isinstance(text, str) else text
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        req = getattr(self, "_req", None)
        if req is not None and req.warnings:
            for w in dict.fromkeys(req.warnings):  # each text once, like the real recorder
                self.send_header("Warning", fields.warning_header(w))
        # headers and body in one write
        self._headers_buffer.append(b"\r\n")
        if self.command != "HEAD":
            self._headers_buffer.append(data)
        self.flush_headers()

    def send_obj(self, code, obj, headers=None):
        self.send_text(code, DUMPS(obj), headers=headers)

    def send_error_status(self, e):
        headers = {}
        if e.retry_after is not None:
            headers["Retry-After"] = str(e.retry_after)
        self.send_obj(e.code, e.status(), headers)

    def write_chunk(self, data):
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    # --- entry point ---------------------------------------------------------------

    def handle_any(self):
        self._code = 0
        self._recorded = False
        self._req = None
        app = self.server.app
        url = urllib.parse.urlsplit(self.path)
        path = url.path or "/"
        query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        req = None
        try:
            body = self.read_body()
            req = Request(self.command, path, query, body, self.headers)
            self._req = req
            if path.startswith("/_control/") or path == "/_control":
                return self.control(req)
            parts = path.split("/")
            req.watch = query.get("watch") in ("1", "true", "True") or \
                (parts[1:2] == ["api"] and parts[3:4] == ["watch"]) or \
                (parts[1:2] == ["apis"] and parts[4:5] == ["watch"])
            if self.inject_fault(req):
                return
            req.user = self.authenticate()
            if req.user is None:
                raise ApiError(401, "Unauthorized")
            self.route(req)
        except ApiError as e:
            self.send_error_status(e)
        except (BrokenPipeError, ConnectionResetError, socket.timeout, ssl.SSLError):
            self.close_connection = True
        except Exception as e:  # a bug: answer 500 and say what it was
            import traceback
            traceback.print_exc()
            try:
                self.send_obj(500, status_body(500, "internal error: %r" % e, "InternalError"))
            except OSError:
                self.close_connection = True
        finally:
            if req is not None and not path.startswith("/_control") and not self._recorded:
                self.record(req)

    def authenticate(self):
        app = self.server.app
        authz = self.headers.get("Authorization")
        if isinstance(self.connection, ssl.SSLSocket):
            return app.auth.authenticate(authz, self.connection.getpeercert())
        if authz or app.http_require_auth:
            return app.auth.authenticate(authz, None)
        # the plain HTTP port without credentials: like the old insecure port, full access
        # (kubectl never sends credentials over plain HTTP)
        return {"username": "system:unsecured", "uid": "",
                "groups": ["system:masters", "system:authenticated"]}

    def peer_closed(self):
        """True when the client has gone away (a watch client sends nothing)."""
        try:
            conn = self.connection
            if isinstance(conn, ssl.SSLSocket) and conn.pending():
                return False
            r, _w, _x = select.select([conn], [], [], 0)
            if not r:
                return False
            if not isinstance(conn, ssl.SSLSocket):
                return conn.recv(1, socket.MSG_PEEK) == b""
            conn.setblocking(False)
            try:
                return conn.recv(1) == b""  # b"" on close_notify or EOF
            except ssl.SSLWantReadError:
                return False  # a TLS record without data (a key update, a ticket)
            finally:
                conn.setblocking(True)
        except (OSError, ValueError):
            return True

    def record(self, req):
        self._recorded = True
        if req.res is not None:
            resource = req.res.plural + ("/" + req.sub if req.sub else "")
            verb = req.verb
        else:
            resource, verb = req.path, req.method.lower()
        user = req.user["username"] if req.user else ""
        self.server.app.reqlog.record(req.method, self.path, verb, resource, self._code, user,
                                      req.warnings)

    def inject_fault(self, req):
        app = self.server.app
        target = self.path
        f = app.faults.match(req.method, target, req.watch)
        if f is None:
            return False
        if f.action == "stall":
            app.stopping.wait(f.seconds)
            return False
        if f.action == "close":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return True
        if f.action == "gone":
            msg = f.message or "too old resource version: 1 (%d)" % app.store.rv
            if req.watch:
                self.watch_error(status_body(410, msg, "Expired"))
            else:
                self.send_obj(410, status_body(410, msg, "Expired"))
            return True
        reason = ApiError.REASONS.get(f.code, "InternalError")
        msg = f.message or {429: "Too many requests, please try again later.",
                            500: "Internal error occurred: injected fault",
                            503: "the server is currently unable to handle the request"}.get(
                                f.code, "injected fault")
        headers = {"Retry-After": str(f.retry_after)} if f.retry_after is not None else None
        self.send_obj(f.code, status_body(f.code, msg, reason), headers)
        return True

    # --- routing -------------------------------------------------------------------

    def route(self, req):
        app = self.server.app
        p = req.path.rstrip("/") or "/"
        parts = [x for x in p.split("/") if x]
        if p in ("/healthz", "/livez", "/readyz") or p.startswith(("/healthz/", "/livez/", "/readyz/")):
            return self.send_text(200, "ok", "text/plain; charset=utf-8")
        if p == "/version":
            return self.send_obj(200, VERSION_INFO)
        if parts and parts[0] == "openapi":
            return self.openapi(req, parts)
        if not parts or parts[0] not in ("api", "apis"):
            raise ApiError(404, "the server could not find the requested resource", details={})
        core = parts[0] == "api"
        if len(parts) == 1:
            return self.discovery_root(req, core)
        if core:
            group, version, rest = "", parts[1], parts[2:]
        else:
            group = parts[1]
            if len(parts) == 2:
                g = resources.api_group(app.reg, group)
                if g is None:
                    raise ApiError(404, "the server could not find the requested resource", details={})
                return self.send_obj(200, g)
            version, rest = parts[2], parts[3:]
        if not rest:
            if not app.reg.has_group_version(group, version):
                raise ApiError(404, "the server could not find the requested resource", details={})
            return self.send_obj(200, resources.api_resource_list(app.reg, group, version))
        self.resolve(req, group, version, rest)
        self.authorize(req)
        if req.body and req.method in ("POST", "PUT", "PATCH"):
            check_body_type(req.content_type)
        self.dispatch(req)

    def resolve(self, req, group, version, rest):
        app = self.server.app
        if rest[0] == "watch":
            req.watch = True
            rest = rest[1:]
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            ns, rest = rest[1], rest[2:]
        res = app.reg.get(group, version, rest[0]) if rest else None
        nf = ApiError(404, "the server could not find the requested resource", details={})
        if res is None or len(rest) > 3:
            raise nf
        if ns is not None and not res.namespaced:
            raise nf
        req.res, req.ns = res, ns
        req.name = urllib.parse.unquote(rest[1]) if len(rest) > 1 else None
        req.sub = rest[2] if len(rest) > 2 else None
        if req.sub and req.sub not in res.subresources:
            raise nf
        if res.namespaced and req.name and ns is None:
            raise nf

    def authorize(self, req):
        app = self.server.app
        if not app.auth.enforce:
            return
        attrs = {"verb": req.verb, "group": req.res.group, "resource": req.res.plural,
                 "subresource": req.sub or "", "namespace": req.ns or "", "name": req.name or ""}
        ok, _ = app.auth.authorize(req.user["username"], req.user.get("groups") or [], attrs)
        if not ok:
            g = req.res.group
            where = (' in the namespace "%s"' % req.ns) if req.ns else " at the cluster scope"
            rname = req.res.plural + ("/" + req.sub if req.sub else "")
            raise ApiError(403, '%s%s is forbidden: User "%s" cannot %s resource "%s" in API group '
                                '"%s"%s' % (req.res.plural, ("." + g) if g else "", req.user["username"],
                                           req.verb, rname, g, where),
                           details={"kind": req.res.plural, **({"group": g} if g else {}),
                                    **({"name": req.name} if req.name else {})})

    def dispatch(self, req):
        api = self.server.app.api
        res, m = req.res, req.method
        if not res.stored:
            if m != "POST" or req.name:
                raise ApiError(405, "the server does not allow this method on the requested resource")
            return self.respond(req, *api.review(req))
        if m == "GET":
            if req.name is None:
                if req.watch:
                    return self.serve_watch(req)
                return self.respond(req, *api.list(req))
            if req.sub == "scale":
                return self.respond(req, *api.scale(req))
            return self.respond(req, *api.get(req))
        if m == "POST" and req.name is None:
            return self.respond(req, *api.create(req))
        if m == "POST" and req.sub == "eviction":
            return self.respond(req, *api.evict(req))
        if m == "POST" and req.sub == "token":
            return self.respond(req, *api.token_request(req))
        if req.name is not None and req.sub not in ("eviction", "token"):
            if m == "PUT":
                return self.respond(req, *api.update(req))
            if m == "PATCH":
                return self.respond(req, *api.patch(req))
            if m == "DELETE" and not req.sub:
                return self.respond(req, *api.delete(req))
        if m == "DELETE" and req.name is None:
            return self.respond(req, *api.deletecollection(req))
        raise ApiError(405, "the server does not allow this method on the requested resource")

    def respond(self, req, code, body):
        api = self.server.app.api
        out, ver = choose_output(self.headers.get("Accept"))
        if isinstance(body, tuple):  # a list: (res, metadata, items)
            res, md, items = body
            if out == "Table":
                return self.send_text(code, table.table(res, [i.obj for i in items], md,
                                                        req.query.get("includeObject", "Metadata"), ver))
            if out == "PartialObjectMetadata":
                return self.send_obj(code, {"kind": "PartialObjectMetadataList",
                                            "apiVersion": "meta.k8s.io/" + ver, "metadata": md,
                                            "items": [table.partial(i.obj, ver) for i in items]})
            return self.send_text(code, list_json(api, res, md, items))
        if isinstance(body, Item):
            if body.obj.get("kind") == req.res.kind and not req.sub in ("scale",):
                if out == "Table":
                    return self.send_text(code, table.table(req.res, [body.obj], {},
                                                            req.query.get("includeObject", "Metadata"), ver))
                if out == "PartialObjectMetadata":
                    return self.send_obj(code, table.partial(body.obj, ver))
                return self.send_text(code, api.view(req.res, body))
            return self.send_text(code, body.js())
        return self.send_obj(code, body)

    # --- discovery and OpenAPI -----------------------------------------------------

    def discovery_root(self, req, core):
        app = self.server.app
        for mt, params in parse_accept(self.headers.get("Accept")):
            if mt == JSON and params.get("as") == "APIGroupDiscoveryList" and \
                    params.get("g") == "apidiscovery.k8s.io" and params.get("v") in ("v2", "v2beta1"):
                v = params["v"]
                ctype = "application/json;g=apidiscovery.k8s.io;v=%s;as=APIGroupDiscoveryList" % v
                return self.send_text(200, DUMPS(resources.aggregated(app.reg, core, v)), ctype)
            if mt in (JSON, "*/*") and "as" not in params:
                break
        if core:
            return self.send_obj(200, resources.api_versions())
        return self.send_obj(200, resources.api_group_list(app.reg))

    def openapi(self, req, parts):
        app = self.server.app
        if parts == ["openapi", "v2"]:
            accept = self.headers.get("Accept") or ""
            if "protobuf" in accept and JSON not in accept:
                # an empty protobuf message is a valid, empty openapi_v2.Document
                return self.send_text(200, b"", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
            return self.send_obj(200, resources.OPENAPI_V2_JSON)
        if parts == ["openapi", "v3"]:
            return self.send_obj(200, resources.openapi_v3_index(app.reg))
        if len(parts) >= 4 and parts[:2] == ["openapi", "v3"]:
            if parts[2] == "api" and len(parts) == 4:
                doc = resources.openapi_v3_gv(app.reg, "", parts[3])
            elif parts[2] == "apis" and len(parts) == 5:
                doc = resources.openapi_v3_gv(app.reg, parts[3], parts[4])
            else:
                doc = None
            if doc is not None:
                return self.send_obj(200, doc, {"Cache-Control": "public, immutable",
                                                "Expires": "Thu, 01 Jan 2099 00:00:00 GMT"})
        raise ApiError(404, "the server could not find the requested resource", details={})

    # --- watch ---------------------------------------------------------------------

    def start_stream(self):
        self.send_response(200)
        self.send_header("Content-Type", JSON)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def watch_error(self, status):
        self.start_stream()
        self.write_chunk(DUMPS({"type": "ERROR", "object": status}).encode() + b"\n")
        self.wfile.write(b"0\r\n\r\n")

    def serve_watch(self, req):
        app = self.server.app
        api, res, q = app.api, req.res, req.query
        try:
            timeout = float(q.get("timeoutSeconds") or 1800)
        except ValueError:
            raise ApiError(400, "invalid timeoutSeconds")
        bookmarks = q.get("allowWatchBookmarks") in ("1", "true", "True")
        initial = q.get("sendInitialEvents") in ("1", "true", "True")
        match = api._match(q)
        try:
            w, init_items, replay, rv_now = app.store.watch(
                res.skey, req.ns, match or (lambda o: True), q.get("resourceVersion"), initial,
                bookmarks, {"resource": res.plural, "namespace": req.ns, "user": req.user["username"],
                            "labelSelector": q.get("labelSelector"), "fieldSelector": q.get("fieldSelector"),
                            "resourceVersion": q.get("resourceVersion"), "since": time.time()})
        except Gone as e:
            return self.watch_error(status_body(410, e.message, "Expired"))
        except ValueError as e:
            raise ApiError(400, str(e))
        out, ver = choose_output(self.headers.get("Accept"))

        def line(etype, item):
            if out == "Table":
                obj = table.table(res, [item.obj], {}, q.get("includeObject", "Metadata"), ver)
            elif out == "PartialObjectMetadata":
                obj = DUMPS(table.partial(item.obj, ver))
            else:
                obj = api.view(res, item)
            return ('{"type":"%s","object":%s}\n' % (etype, obj)).encode()

        def bookmark(rv, annotations=None):
            md = {"resourceVersion": str(rv)}
            if annotations:
                md["annotations"] = annotations
            return ('{"type":"BOOKMARK","object":%s}\n' % DUMPS(
                {"kind": res.kind, "apiVersion": res.api_version, "metadata": md})).encode()

        deadline = time.monotonic() + timeout
        try:
            self.start_stream()
            self.record(req)  # now, so that counters show open watches
            buf = []
            if init_items is not None:
                buf = [line("ADDED", it) for it in init_items if match is None or match(it.obj)]
                if initial and bookmarks:
                    buf.append(bookmark(rv_now, {"k8s.io/initial-events-end": "true"}))
            for ev in replay:
                t = w.translate(ev)
                if t:
                    buf.append(line(t, ev.item))
            for i in range(0, len(buf), 500):
                self.write_chunk(b"".join(buf[i:i + 500]))
            next_bm = time.monotonic() + app.bookmark_interval
            while not app.stopping.is_set():
                now = time.monotonic()
                if now >= deadline:
                    break
                wait = min(deadline - now, 1.0, max(0.0, next_bm - now) if bookmarks else 1.0)
                evs, want_bm, closed = w.wait(wait)
                if bookmarks and (want_bm or time.monotonic() >= next_bm):
                    with app.store.lock:
                        more, _bm, closed2 = w.wait(0)
                        rv = app.store.rv
                    evs += more
                    closed = closed or closed2
                else:
                    rv = None
                data = [line(t, ev.item) for ev in evs for t in (w.translate(ev),) if t]
                if rv is not None and not closed:
                    data.append(bookmark(rv))
                    next_bm = time.monotonic() + app.bookmark_interval
                if data:
                    self.write_chunk(b"".join(data))
                if closed or self.peer_closed():
                    break
            if w.abrupt:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            else:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        except Exception:  # a bug: the stream has started, so just end the connection
            import traceback
            traceback.print_exc()
            self.close_connection = True
        finally:
            app.store.unwatch(w)

    # --- /_control/ ----------------------------------------------------------------

    def control(self, req):
        app = self.server.app
        m = req.method
        parts = [x for x in req.path.split("/") if x][1:]
        try:
            body = json.loads(req.body) if req.body else {}
        except ValueError:
            return self.send_obj(400, {"error": "body is not JSON"})
        p = "/".join(parts)
        if p in ("", "help") and m == "GET":
            return self.send_obj(200, {"endpoints": CONTROL_HELP})
        if p == "reset" and m == "POST":
            for w in app.store.watchers():
                w.close()
            app.faults.clear()
            app.reqlog.clear()
            app.api.reset()
            if body.get("auth", True):
                app.auth.reset()
                if getattr(app, "auth_config", None):
                    app.auth.load(app.auth_config)
            return self.send_obj(200, {"resourceVersion": app.store.rv})
        if p == "state" and m == "GET":
            with app.store.lock:
                counts = {"%s%s" % (g + "/" if g else "", pl): len(st.items)
                          for (g, pl), st in app.store.storages.items() if st.items}
            return self.send_obj(200, {"resourceVersion": app.store.rv, "objects": counts,
                                       "watches": len(app.store.watchers())})
        if p == "watches" and m == "GET":
            return self.send_obj(200, {"watches": [w.info for w in app.store.watchers()]})
        if p == "watches/drop" and m == "POST":
            ws = self._selected_watches(req)
            for w in ws:
                w.close(abrupt=req.query.get("abrupt") in ("1", "true"))
            return self.send_obj(200, {"dropped": len(ws)})
        if p == "watches/expire" and m == "POST":
            app.store.forget_history()
            n = 0
            if req.query.get("drop") in ("1", "true"):
                ws = self._selected_watches(req)
                for w in ws:
                    w.close()
                n = len(ws)
            return self.send_obj(200, {"resourceVersion": app.store.rv, "dropped": n})
        if p == "watches/bookmark" and m == "POST":
            ws = [w for w in self._selected_watches(req) if w.bookmarks]
            for w in ws:
                w.bookmark()
            return self.send_obj(200, {"bookmarked": len(ws)})
        if p == "faults":
            if m == "GET":
                return self.send_obj(200, {"faults": app.faults.list()})
            if m == "POST":
                try:
                    specs = body if isinstance(body, list) else [body]
                    added = [app.faults.add(s).dump() for s in specs]
                except (ValueError, TypeError) as e:
                    return self.send_obj(400, {"error": str(e)})
                return self.send_obj(201, added[0] if len(added) == 1 else {"faults": added})
            if m == "DELETE":
                return self.send_obj(200, {"cleared": app.faults.clear()})
        if len(parts) == 2 and parts[0] == "faults" and m == "DELETE":
            try:
                fid = int(parts[1])
            except ValueError:
                fid = -1
            return self.send_obj(200 if app.faults.remove(fid) else 404, {"id": fid})
        if p == "requests/reset" and m == "POST":  # the spelling of the IMDS fake
            app.reqlog.clear()
            return self.send_obj(200, {"cleared": True})
        if p == "requests":
            if m == "GET":
                lim = req.query.get("limit")
                return self.send_obj(200, app.reqlog.dump(int(lim) if lim else None))
            if m == "DELETE":
                app.reqlog.clear()
                return self.send_obj(200, {"cleared": True})
        if p == "auth":
            if m == "GET":
                return self.send_obj(200, app.auth.dump())
            if m in ("POST", "PUT"):
                try:
                    app.auth.load(body, replace=(m == "PUT"))
                except (ValueError, TypeError, AttributeError) as e:
                    return self.send_obj(400, {"error": str(e)})
                return self.send_obj(200, app.auth.dump())
        return self.send_obj(404, {"error": "unknown control endpoint %s %s" % (m, req.path),
                                   "endpoints": CONTROL_HELP})

    def _selected_watches(self, req):
        want = req.query.get("resource")
        return [w for w in self.server.app.store.watchers()
                if not want or w.info.get("resource") == want]


CONTROL_HELP = [
    "GET    /_control/state                 resourceVersion, object counts, open watches",
    "POST   /_control/reset                 wipe all objects, faults, request log (and auth unless {\"auth\":false})",
    "GET    /_control/watches               open watches",
    "POST   /_control/watches/drop          end every open watch [?resource=pods] [?abrupt=1]",
    "POST   /_control/watches/expire        forget watch history: resumes and continue tokens get 410 [?drop=1]",
    "POST   /_control/watches/bookmark      send a BOOKMARK now on watches that allow them",
    "GET    /_control/faults                list fault rules",
    "POST   /_control/faults                add a rule {action,method,path,watch,code,retryAfter,seconds,count,message}",
    "DELETE /_control/faults[/ID]           clear all rules (or one)",
    "GET    /_control/requests[?limit=N]    request counters by 'verb resource' and the request log",
    "DELETE /_control/requests              clear the request log (also POST /_control/requests/reset)",
    "GET    /_control/auth                  tokens and rules",
    "POST   /_control/auth                  add tokens/rules (same format as --config); PUT replaces",
]

