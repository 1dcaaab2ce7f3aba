"""REST semantics: create, get, list, update, patch, delete, eviction, scale, reviews.

Every method takes a Request (see http.py) and returns (code, body) where body is a
dict, a store.Item, or a ready JSON string; errors raise ApiError.
"""
import json
import math
import random
import time
import uuid

from . import crdvalidate, fields
from . import patch as patchmod
from . import proto, selectors
from .store import DUMPS, Gone, Item, obj_key

NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
INITIAL_NAMESPACES = ("default", "kube-system", "kube-node-lease", "kube-public")


class ApiError(Exception):
    REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
               405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
               415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
               500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}

    def __init__(self, code, message, reason=None, details=None, retry_after=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason if reason is not None else self.REASONS.get(code, "")
        self.details = details
        self.retry_after = retry_after

    def status(self):
        return status_body(self.code, self.message, self.reason, self.details)


def status_body(code, message, reason, details=None):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
          "message": message}
    if reason:  # (omitempty: a plain error of the real server has none, kubectl then says
        st["reason"] = reason  # "Error from server: ...")
    if details:
        st["details"] = details
    st["code"] = code
    return st


def success_status(code=200, details=None):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        st["details"] = details
    if code != 200:
        st["code"] = code
    return st


def now_ts():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def qualified(res):
    return res.plural + "." + res.group if res.group else res.plural


def details(res, name, uid=None):
    d = {"name": name, "kind": res.plural}
    if res.group:
        d["group"] = res.group
    if uid:
        d["uid"] = uid
    return d


def not_found(res, name):
    return ApiError(404, '%s "%s" not found' % (qualified(res), name), details=details(res, name))


def conflict(res, name, why="the object has been modified; please apply your changes to the "
                            "latest version and try again"):
    return ApiError(409, 'Operation cannot be fulfilled on %s "%s": %s' % (qualified(res), name, why),
                    details=details(res, name))


def invalid(res, name, msg):
    """422 Invalid; msg is "field.path: What: detail" like the real field errors."""
    field, _, rest = msg.partition(": ")
    reason = {"Required value": "FieldValueRequired", "Forbidden": "FieldValueForbidden",
              "Unsupported value": "FieldValueNotSupported"}.get(rest.split(":")[0], "FieldValueInvalid")
    d = {"name": name, "kind": res.kind,
         "causes": [{"reason": reason, "message": rest or msg, "field": field}]}
    if res.group:
        d["group"] = res.group
    return ApiError(422, '%s "%s" is invalid: %s' % (res.kind, name, msg), details=d)


def invalid_all(res, name, errs):
    """422 Invalid with every field error, worded as the real server words several."""
    causes = []
    for e in errs:
        field, _, rest = e.partition(": ")
        reason = {"Required value": "FieldValueRequired", "Unsupported value": "FieldValueNotSupported",
                  "Too long": "FieldValueTooLong", "Too many": "FieldValueTooMany"}.get(
                      rest.split(":")[0], "FieldValueInvalid")
        causes.append({"reason": reason, "message": rest, "field": field})
    text = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
    d = {"name": name, "group": res.group, "kind": res.kind, "causes": causes}
    return ApiError(422, '%s "%s" is invalid: %s' % (qualified(res), name, text), details=d)


UNSUPPORTED = ("the body of the request was in an unknown format - accepted media types include: "
               "application/json, application/yaml")


def check_body_type(content_type):
    """JSON, YAML and Kubernetes protobuf bodies; anything else (CBOR...) gets 415."""
    ct = (content_type or "").split(";")[0].strip().lower()
    if ct and ct not in ("application/json", "application/yaml", "*/*", "text/plain",
                         "application/vnd.kubernetes.protobuf") \
            and not ct.endswith("+json") and not ct.endswith("+yaml"):
        raise ApiError(415, UNSUPPORTED)


def parse_json(body, what="request body"):
    if not body:
        raise ApiError(400, "%s is empty" % what)
    if body.startswith(proto.MAGIC):
        try:
            return proto.decode(body)
        except (proto.ProtoError, ValueError, IndexError) as e:
            raise ApiError(400, "cannot decode protobuf %s: %s" % (what, e))
    try:
        return json.loads(body)
    except ValueError:
        try:
            import yaml  # optional: only for YAML bodies some clients send
            return yaml.safe_load(body)
        except Exception:
            raise ApiError(400, "couldn't get version/kind; json parse error: invalid %s" % what)


OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
APPLY = "application/apply-patch+yaml"
SMP = "application/strategic-merge-patch+json"


def field_validation(req):
    """The fieldValidation directive of a write: Strict, Warn (the default) or Ignore."""
    v = req.query.get("fieldValidation", "")
    if v in fields.DIRECTIVES:
        return v
    if v == "":
        return "Warn"
    kind = OPTIONS_KIND.get(req.method, "CreateOptions")
    msg = 'Unsupported value: %s: supported values: "", "Ignore", "Strict", "Warn"' % fields.go_quote(v)
    raise ApiError(422, '%s.meta.k8s.io "" is invalid: fieldValidation: %s' % (kind, msg),
                   details={"group": "meta.k8s.io", "kind": kind, "causes": [
                       {"reason": "FieldValueNotSupported", "message": msg, "field": "fieldValidation"}]})


def is_yaml(content_type):
    ct = (content_type or "").split(";")[0].strip().lower()
    return ct == "application/yaml" or (ct.endswith("+yaml") and ct != APPLY)


def gvk_text(obj, default_av, default_kind):
    """schema.GroupVersionKind.String() of a request object: "apps/v1, Kind=Deployment"."""
    av = obj.get("apiVersion") if isinstance(obj.get("apiVersion"), str) else default_av
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else default_kind
    group, _, version = (av or "").rpartition("/")
    return "%s/%s, Kind=%s" % (group, version, kind)


def copy_obj(obj):
    return json.loads(DUMPS(obj))


def ordered(obj):
    """apiVersion, kind and metadata first, like the real server writes them."""
    out = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": obj.get("metadata")}
    for k, v in obj.items():
        if k not in out:
            out[k] = v
    return out


def get_path(obj, dotted):
    cur = obj
    for p in dotted.strip(".").split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def set_path(obj, dotted, value):
    parts = dotted.strip(".").split(".")
    cur = obj
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value


def pod_healthy(pod):
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    st = pod.get("status") or {}
    if st.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])


def _int_or_percent(v, total, round_up):
    if isinstance(v, str) and v.endswith("%"):
        pct = int(v[:-1])
        x = total * pct / 100.0
        return int(math.ceil(x) if round_up else math.floor(x))
    return int(v)


class Api:
    def __init__(self, registry, store, auth):
        self.reg = registry
        self.store = store
        self.auth = auth
        self.ip_seq = 10
        self.node_ports = set()
        self.init_state()

    def init_state(self):
        ns_res = self.reg.get("", "v1", "namespaces")
        for name in INITIAL_NAMESPACES:
            if self.store.get(ns_res.skey, name) is None:
                obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                self._create_obj(ns_res, obj, dry=False)

    def reset(self):
        with self.store.lock:
            crds, _rv = self.store.items(("apiextensions.k8s.io", "customresourcedefinitions"), None)
            for it in crds:
                self.reg.remove_crd(it.obj["metadata"]["name"])
            self.store.clear()
            self.node_ports = set()
            self.init_state()

    # --- helpers ----------------------------------------------------------------

    def view(self, res, item):
        """JSON text of a stored object as the resource version `res` serves it."""
        if item.obj.get("apiVersion") == res.api_version:
            return item.js()
        return DUMPS(dict(item.obj, apiVersion=res.api_version))

    def namespace_obj(self, ns):
        it = self.store.get(("", "namespaces"), ns)
        return it.obj if it else None

    def _match(self, q):
        lsel = q.get("labelSelector")
        fsel = q.get("fieldSelector")
        try:
            lreqs = selectors.parse_labels(lsel) if lsel else None
            freqs = selectors.parse_fields(fsel) if fsel else None
        except selectors.SelectorError as e:
            raise ApiError(400, "unable to parse requirement: %s" % e)
        if not lreqs and not freqs:
            return None

        def match(obj):
            if lreqs and not selectors.match_labels(lreqs, (obj.get("metadata") or {}).get("labels")):
                return False
            return not freqs or selectors.match_fields(freqs, obj)
        return match

    # --- read -------------------------------------------------------------------

    def get(self, req):
        it = self.store.get(req.res.skey, req.key)
        if it is None:
            raise not_found(req.res, req.name)
        return 200, it

    def list(self, req):
        res, q = req.res, req.query
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise ApiError(400, "invalid limit")
        match = self._match(q)
        try:
            items, rv, cont, remaining = self.store.list_page(
                res.skey, req.ns, match, max(limit, 0), q.get("continue"))
        except Gone as e:
            raise ApiError(410, e.message, reason="Expired")
        except ValueError as e:
            raise ApiError(400, str(e))
        md = {"resourceVersion": str(rv)}
        if cont:
            md["continue"] = cont
            if match is None:  # the real server cannot count ahead through a selector
                md["remainingItemCount"] = remaining
        return 200, (res, md, items)

    # --- create -----------------------------------------------------------------

    def create(self, req):
        res = req.res
        if not res.stored:
            return self.review(req)
        obj = self.decode(req, res)
        if not isinstance(obj, dict):
            raise ApiError(400, "the request body must be a JSON object")
        md = obj.setdefault("metadata", {})
        if not isinstance(md, dict):
            raise ApiError(400, "metadata must be an object")
        if res.namespaced:
            if md.get("namespace") and md["namespace"] != req.ns:
                raise ApiError(400, "the namespace of the provided object does not match the "
                                    "namespace sent on the request")
            md["namespace"] = req.ns
        else:
            md.pop("namespace", None)
        with self.store.lock:
            if res.namespaced:
                nsobj = self.namespace_obj(req.ns)
                if nsobj is None:
                    raise ApiError(404, 'namespaces "%s" not found' % req.ns,
                                   details={"name": req.ns, "kind": "namespaces"})
                if (nsobj.get("metadata") or {}).get("deletionTimestamp"):
                    raise ApiError(403, "%s \"%s\" is forbidden: unable to create new content in "
                                        "namespace %s because it is being terminated"
                                   % (qualified(res), md.get("name") or md.get("generateName", ""), req.ns),
                                   details={"name": md.get("name", ""), "kind": res.plural})
            return 201, self._create_obj(res, obj, req.dry)

    # --- field validation ---------------------------------------------------------

    def schema_node(self, res, sub=None):
        """What a whole request object of res (or of its subresource sub) is checked against."""
        if res.crd and sub != "scale":
            return fields.root_node(res.group, res.version, res.kind, res.schema, crd=True)
        group, version, kind = res.sub_kind(sub) if sub in ("scale", "eviction", "token") \
            else (res.group, res.version, res.kind)
        return fields.root_node(group, version, kind)

    def decode(self, req, res, sub=None, check_kind=True):
        """The body of a create or an update, decoded as the real server does under the
        request's fieldValidation: Strict refuses unknown and duplicate fields (400
        BadRequest), Warn drops the unknown ones and names each in a Warning header, Ignore
        drops them silently. Protobuf bodies carry no unknown fields by name."""
        fv = field_validation(req)
        body = req.body
        if not body or body.startswith(proto.MAGIC):
            return parse_json(body)
        lines = []
        order = "doc"
        if is_yaml(req.content_type):
            obj = parse_json(body)
            order = "sorted"  # the YAML is turned into JSON (sorted keys) before decoding
            if fv != "Ignore":
                lines = fields.yaml_duplicate_lines(body)
        else:
            try:
                obj = fields.loads(body)
            except ValueError:
                obj = parse_json(body)
                order = "sorted"
        if not isinstance(obj, dict):
            return obj
        if check_kind:
            self._check_kind(res, obj)
        group, version, kind = res.sub_kind(sub) if sub in ("scale", "eviction", "token") \
            else (res.group, res.version, res.kind)
        out, errs = fields.check(self.schema_node(res, sub), obj, order)
        if fv == "Ignore":
            return out
        if fv == "Strict" and (errs or lines):
            if lines:
                errs = ["yaml: unmarshal errors:\n  " + "\n  ".join(lines)] + errs
            av = obj.get("apiVersion") if isinstance(obj.get("apiVersion"), str) else ""
            body_kind = obj.get("kind") if isinstance(obj.get("kind"), str) and obj.get("kind") else kind
            raise ApiError(400, '%s in version "%s" cannot be handled as a %s: strict decoding error: %s'
                           % (body_kind, av.rpartition("/")[2] or version, kind, ", ".join(errs)))
        req.warnings.extend(lines + errs)
        return out

    def check_patched(self, req, node, doc, patch, ctype, fv):
        """A patched object (merge, strategic or JSON patch) under fieldValidation: the
        duplicate keys of the patch, then the unknown fields of the result. Strict: 422 with
        the real message (" \"\" is invalid: patch: Invalid value: ..."); Warn: warnings."""
        out, unknown = fields.check(node, doc, "sorted")
        if fv == "Ignore":
            return out
        errs = fields.patch_duplicates(patch, ctype) + unknown
        if not errs:
            return out
        if fv == "Warn":
            req.warnings.extend(errs)
            return out
        # the strategic merge patcher shows the patch as Go prints a map, the others the
        # patched object as JSON
        value = fields.go_value(patch) if ctype == SMP else fields.go_json(doc)
        cause = "Invalid value: %s: strict decoding error: %s" % (fields.go_quote(value), ", ".join(errs))
        raise ApiError(422, ' "" is invalid: patch: ' + cause, reason="Invalid",
                       details={"causes": [{"reason": "FieldValueInvalid", "message": cause,
                                            "field": "patch"}]})

    def check_apply(self, req, res, body, fv):
        """Server-side apply: an unknown field fails the typed patch object whatever the
        directive (500, no reason, the structured-merge-diff paths); duplicate keys are then
        judged like YAML (Strict 400, Warn warnings)."""
        if isinstance(body, dict):
            _out, errs = fields.check(self.schema_node(res, req.sub), body, "sorted", smd=True)
            if errs:
                errs = [e + ": field not declared in schema" for e in errs]
                text = errs[0] if len(errs) == 1 else "errors:\n  " + "\n  ".join(errs)
                md = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
                g, v, k = res.sub_kind(req.sub) if req.sub == "scale" else (res.group, res.version, res.kind)
                raise ApiError(500, "failed to create typed patch object (%s/%s; %s): %s" % (
                    md.get("namespace") or "", md.get("name") or "",
                    gvk_text(body, g + "/" + v if g else v, k), text), reason="")
        if fv == "Ignore":
            return
        if req.body.lstrip().startswith(b"{") and not fields.has_duplicates(body):
            return  # JSON (what kubectl sends) without a repeated key
        lines = fields.yaml_duplicate_lines(req.body)
        if not lines:
            return
        if fv == "Strict":
            raise ApiError(400, "error strict decoding YAML: error converting YAML to JSON: yaml: "
                                "unmarshal errors:\n  " + "\n  ".join(lines))
        req.warnings.extend(lines)

    def patch_body(self, req):
        try:
            return fields.loads(req.body)
        except ValueError:
            return parse_json(req.body, "patch")

    def _create_obj(self, res, obj, dry):
        md = obj["metadata"]
        if not md.get("name"):
            gen = md.get("generateName")
            if not gen:
                raise invalid(res, "", "metadata.name: Required value: name or generateName is required")
            for _ in range(100):
                name = gen + "".join(random.choice(NAME_CHARS) for _ in range(5))
                if self.store.get(res.skey, obj_key(dict(obj, metadata=dict(md, name=name)))) is None:
                    break
            md["name"] = name
        name = md["name"]
        if not isinstance(name, str) or "/" in name or "%" in name or len(name) > 253 or name in (".", ".."):
            raise invalid(res, str(name), 'metadata.name: Invalid value: "%s": a valid name must not '
                                           'contain \'/\' or \'%%\'' % name)
        if self.store.get(res.skey, obj_key(obj)) is not None:
            raise ApiError(409, '%s "%s" already exists' % (qualified(res), name),
                           reason="AlreadyExists", details=details(res, name))
        obj["apiVersion"] = res.api_version
        obj["kind"] = res.kind
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now_ts()
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "selfLink"):
            md.pop(k, None)
        if res.generation:
            md["generation"] = 1
        else:
            md.pop("generation", None)
        self._defaults(res, obj, None)
        if res.kind == "CustomResourceDefinition" and res.group == "apiextensions.k8s.io":
            err = self.reg.register_crd(obj) if not dry else None
            if err:
                raise invalid(res, name, err)
            names = (obj.get("spec") or {}).get("names") or {}
            obj["status"] = {"acceptedNames": names, "storedVersions": [
                v["name"] for v in (obj["spec"].get("versions") or []) if v.get("storage")],
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                     "message": "no conflicts found", "lastTransitionTime": now_ts()},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                     "message": "the initial names have been accepted", "lastTransitionTime": now_ts()}]}
        obj = ordered(obj)
        if dry:
            md["resourceVersion"] = str(self.store.rv)
            return Item(obj)
        return self.store.put(res.skey, obj, "ADDED")

    def _check_kind(self, res, obj):
        av, kind = obj.get("apiVersion"), obj.get("kind")
        if av and av != res.api_version and not (res.crd and av.split("/")[0] == res.group):
            raise ApiError(400, "the API version in the data (%s) does not match the expected API "
                                "version (%s)" % (av, res.api_version))
        if kind and kind != res.kind:
            raise ApiError(400, '%s in version "%s" cannot be handled as a %s: the object kind '
                                'does not match' % (kind, res.version, res.kind))

    def _defaults(self, res, obj, old):
        """Server-side defaults of a few kinds; old is the previous object on update. A custom
        resource gets its schema's defaults and is checked against it (422 Invalid)."""
        if res.crd and isinstance(res.schema, dict):
            errs = crdvalidate.check(res.schema, obj)
            if errs:
                raise invalid_all(res, (obj.get("metadata") or {}).get("name") or "", errs)
        kind = res.kind if not res.crd else None
        spec = obj.get("spec")
        if kind == "Pod":
            st = obj.get("status")
            if old is None and not (isinstance(st, dict) and st.get("phase")):
                obj["status"] = dict(st or {}, phase="Pending")
        elif kind == "Namespace":
            md = obj["metadata"]
            md.setdefault("labels", {})["kubernetes.io/metadata.name"] = md["name"]
            if old is None:
                obj["spec"] = {"finalizers": ["kubernetes"]}
                obj["status"] = {"phase": "Active"}
            else:
                obj["spec"] = old.get("spec") or {}
        elif kind in ("PersistentVolumeClaim", "PersistentVolume") and old is None:
            st = obj.get("status") or {}
            if not st.get("phase"):
                obj["status"] = dict(st, phase="Pending" if kind == "PersistentVolumeClaim" else "Available")
        elif kind in ("Deployment", "ReplicaSet", "StatefulSet") and isinstance(spec, dict):
            spec.setdefault("replicas", 1)
        elif kind == "Service" and isinstance(spec, dict):
            self._service_defaults(spec, (old or {}).get("spec") or {})

    def _service_defaults(self, spec, old):
        stype = spec.setdefault("type", "ClusterIP")
        if stype != "ExternalName":
            if not spec.get("clusterIP"):
                if old.get("clusterIP"):
                    spec["clusterIP"] = old["clusterIP"]
                else:
                    self.ip_seq += 1
                    spec["clusterIP"] = "10.96.%d.%d" % (self.ip_seq // 250, self.ip_seq % 250 + 1)
            if spec["clusterIP"] != "None":
                spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        spec.setdefault("sessionAffinity", "None")
        if stype in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
        old_ports = {(p.get("port"), p.get("protocol", "TCP")): p for p in old.get("ports") or []}
        for p in spec.get("ports") or []:
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
            if stype in ("NodePort", "LoadBalancer") and not p.get("nodePort"):
                prev = old_ports.get((p.get("port"), p["protocol"]), {}).get("nodePort")
                if prev:
                    p["nodePort"] = prev
                else:
                    for port in range(30000, 32768):
                        if port not in self.node_ports:
                            break
                    self.node_ports.add(port)
                    p["nodePort"] = port

    # --- update -----------------------------------------------------------------

    def update(self, req):
        res = req.res
        if req.sub == "scale":
            return self.scale(req)
        obj = self.decode(req, res, req.sub)
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise ApiError(400, "the request body must be an object with metadata")
        md = obj["metadata"]
        if md.get("name") != req.name:
            raise ApiError(400, "the name of the object (%s) does not match the name on the URL (%s)"
                           % (md.get("name"), req.name))
        if res.namespaced:
            if md.get("namespace") and md["namespace"] != req.ns:
                raise ApiError(400, "the namespace of the provided object does not match the "
                                    "namespace sent on the request")
            md["namespace"] = req.ns
        with self.store.lock:
            cur = self.store.get(res.skey, req.key)
            if cur is None:
                if res.create_on_update and not req.sub:
                    return self.create(req)
                raise not_found(res, req.name)
            rv = md.get("resourceVersion")
            if rv and rv != cur.obj["metadata"]["resourceVersion"]:
                raise conflict(res, req.name)
            if not rv and res.crd:  # custom resources allow no unconditional update
                raise invalid(res, req.name, "metadata.resourceVersion: Invalid value: 0x0: must be "
                                             "specified for an update")
            new = self._prepare_update(res, cur.obj, obj, req.sub)
            return 200, self._commit(res, cur, new, req.dry)

    def _prepare_update(self, res, old, new, sub):
        new["apiVersion"] = res.api_version
        new["kind"] = res.kind
        if sub in ("status", "finalize"):  # namespaces/finalize changes spec.finalizers only
            field = "status" if sub == "status" else "spec"
            out = copy_obj(old)
            if field in new:
                out[field] = new[field]
            else:
                out.pop(field, None)
            return out
        omd, nmd = old["metadata"], new["metadata"]
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "name", "namespace", "generation"):
            if k in omd:
                nmd[k] = omd[k]
            else:
                nmd.pop(k, None)
        nmd["resourceVersion"] = omd["resourceVersion"]
        if res.status_sub:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        self._defaults(res, new, old)
        if res.kind == "Node" and not res.crd:
            was = (old.get("spec") or {}).get("providerID")
            if was and (new.get("spec") or {}).get("providerID") != was:
                raise invalid(res, nmd["name"], 'spec.providerID: Forbidden: node updates may not '
                                                'change providerID except from "" to valid')
        if res.generation:
            skip = ("metadata", "status") if res.status_sub else ("metadata",)
            a = {k: v for k, v in old.items() if k not in skip}
            b = {k: v for k, v in new.items() if k not in skip}
            if a != b:
                nmd["generation"] = omd.get("generation", 1) + 1
        return new

    def _commit(self, res, cur, new, dry):
        """Stores an updated object; removes it when its last finalizer is gone."""
        if new == cur.obj:
            return cur  # no change: no new resourceVersion, no event (like the real server)
        md = new["metadata"]
        if md.get("deletionTimestamp") and not md.get("finalizers"):
            if dry:
                return Item(new)
            item = self.store.remove(res.skey, new)
            self._after_remove(res, new)
            return item
        if dry:
            return Item(new)
        if res.kind == "CustomResourceDefinition" and not res.crd:
            err = self.reg.register_crd(new)
            if err:
                raise invalid(res, md["name"], err)
        return self.store.put(res.skey, ordered(new), "MODIFIED", old=cur)

    # --- patch ------------------------------------------------------------------

    def patch(self, req):
        res = req.res
        ctype = (req.content_type or "").split(";")[0].strip().lower()
        fv = field_validation(req)
        body = self.patch_body(req)
        if req.sub == "scale":
            return self.scale(req, (ctype, body))
        if ctype == APPLY:
            self.check_apply(req, res, body, fv)
        with self.store.lock:
            cur = self.store.get(res.skey, req.key)
            if cur is None:
                if ctype == APPLY and isinstance(body, dict):
                    return self._apply_create(req, body)
                raise not_found(res, req.name)
            doc = self._apply_patch(res, copy_obj(cur.obj), ctype, body)
            if ctype != APPLY and isinstance(doc, dict):
                doc = self.check_patched(req, self.schema_node(res, req.sub), doc, body, ctype, fv)
            if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
                raise ApiError(422, "the patched object is not a valid object")
            md = doc["metadata"]
            if md.get("name") != req.name:
                raise ApiError(400, "the name of the object (%s) does not match the name on the URL (%s)"
                               % (md.get("name"), req.name))
            if md.get("resourceVersion") != cur.obj["metadata"]["resourceVersion"]:
                if md.get("resourceVersion"):
                    raise conflict(res, req.name)
            new = self._prepare_update(res, cur.obj, doc, req.sub)
            return 200, self._commit(res, cur, new, req.dry)

    def _apply_patch(self, res, doc, ctype, body):
        try:
            if ctype == "application/merge-patch+json":
                return patchmod.merge_patch(doc, body)
            if ctype == "application/json-patch+json":
                return patchmod.json_patch(doc, body)
            if ctype == "application/strategic-merge-patch+json":
                if res.crd:
                    raise ApiError(415, "strategic merge patch is not supported for custom resources; "
                                        "accepted media types include: application/json-patch+json, "
                                        "application/merge-patch+json, application/apply-patch+yaml")
                return patchmod.strategic_merge(doc, body, res.kind)
            if ctype == "application/apply-patch+yaml":
                # server-side apply, approximated: merge the applied configuration
                if not isinstance(body, dict):
                    raise ApiError(400, "apply patch must be an object")
                body = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
                if res.crd:
                    return patchmod.merge_patch(doc, body)
                return patchmod.strategic_merge(doc, body, res.kind)
        except patchmod.PatchError as e:
            raise ApiError(e.code, e.message)
        raise ApiError(415, "the body of the request was in an unknown format - accepted media "
                            "types include: application/json-patch+json, application/merge-patch+json, "
                            "application/apply-patch+yaml, application/strategic-merge-patch+json")

    def _apply_create(self, req, body):
        res = req.res
        self._check_kind(res, body)
        md = body.setdefault("metadata", {})
        md["name"] = req.name
        if res.namespaced:
            md["namespace"] = req.ns
        if res.namespaced and self.namespace_obj(req.ns) is None:
            raise ApiError(404, 'namespaces "%s" not found' % req.ns,
                           details={"name": req.ns, "kind": "namespaces"})
        return 201, self._create_obj(res, body, req.dry)

    # --- delete -----------------------------------------------------------------

    def _delete_options(self, req):
        opts = {}
        if req.body:
            opts = parse_json(req.body, "DeleteOptions") or {}
        q = req.query
        if "gracePeriodSeconds" in q:
            opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
        if "propagationPolicy" in q:
            opts["propagationPolicy"] = q["propagationPolicy"]
        pol = opts.get("propagationPolicy")
        if pol not in (None, "", "Orphan", "Background", "Foreground"):
            raise ApiError(400, 'propagationPolicy: Unsupported value: "%s"' % pol)
        return opts

    def delete(self, req):
        res = req.res
        opts = self._delete_options(req)
        with self.store.lock:
            cur = self.store.get(res.skey, req.key)
            if cur is None:
                raise not_found(res, req.name)
            self._preconditions(res, cur.obj, opts)
            if res.kind == "Namespace" and not res.crd and req.name in PROTECTED_NAMESPACES:
                raise ApiError(403, 'namespaces "%s" is forbidden: this namespace may not be deleted'
                               % req.name, details={"name": req.name, "kind": "namespaces"})
            item, gone = self._delete(res, cur, opts, req.dry)
        if gone and not (res.kind == "Pod" or res.crd):
            md = item.obj["metadata"]
            return 200, success_status(200, details(res, md["name"], md.get("uid")))
        return 200, item

    def _preconditions(self, res, obj, opts):
        pre = opts.get("preconditions") or {}
        md = obj["metadata"]
        if pre.get("uid") and pre["uid"] != md.get("uid"):
            raise conflict(res, md["name"], "Precondition failed: UID in precondition: %s, UID in "
                                            "object meta: %s" % (pre["uid"], md.get("uid")))
        if pre.get("resourceVersion") and pre["resourceVersion"] != md.get("resourceVersion"):
            raise conflict(res, md["name"], "Precondition failed: ResourceVersion in precondition: "
                                            "%s, ResourceVersion in object meta: %s"
                           % (pre["resourceVersion"], md.get("resourceVersion")))

    def _delete(self, res, cur, opts, dry):
        """Deletes one object (lock held). Returns (item, removed_for_good)."""
        obj = copy_obj(cur.obj)
        md = obj["metadata"]
        if md.get("deletionTimestamp"):
            return cur, False
        is_ns = res.kind == "Namespace" and not res.crd
        if md.get("finalizers") or is_ns:
            md["deletionTimestamp"] = now_ts()
            md["deletionGracePeriodSeconds"] = int(opts.get("gracePeriodSeconds") or 0)
            if is_ns:
                obj["status"] = dict(obj.get("status") or {}, phase="Terminating")
            if dry:
                return Item(obj), False
            item = self.store.put(res.skey, obj, "MODIFIED", old=cur)
            if is_ns:
                self._terminate_namespace(md["name"])
                item = self.store.get(res.skey, md["name"]) or item
                return item, self.store.get(res.skey, md["name"]) is None
            return item, False
        if dry:
            return cur, True
        item = self.store.remove(res.skey, obj)
        self._after_remove(res, obj)
        return item, True

    def _namespaced_storages(self):
        seen = {}
        with self.reg.lock:
            resources = list(self.reg.by_gvr.values())
        for r in resources:
            if r.namespaced and r.stored:
                seen[r.skey] = r
        return seen.values()

    def _terminate_namespace(self, ns):
        for r in self._namespaced_storages():
            items, _rv = self.store.items(r.skey, ns)
            for it in items:
                self._delete(r, it, {}, False)
        self._maybe_finish_namespace(ns)

    def _maybe_finish_namespace(self, ns):
        nsres = self.reg.get("", "v1", "namespaces")
        it = self.store.get(nsres.skey, ns)
        if it is None or not it.obj["metadata"].get("deletionTimestamp"):
            return
        for r in self._namespaced_storages():
            if self.store.items(r.skey, ns)[0]:
                return
        obj = copy_obj(it.obj)
        obj["spec"] = {"finalizers": []}
        self.store.remove(nsres.skey, obj)

    def _after_remove(self, res, obj):
        if res.namespaced:
            ns = obj["metadata"].get("namespace")
            nsobj = self.namespace_obj(ns)
            if nsobj and nsobj["metadata"].get("deletionTimestamp"):
                self._maybe_finish_namespace(ns)
        if res.kind == "CustomResourceDefinition" and not res.crd:
            spec = obj.get("spec") or {}
            skey = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
            items, _rv = self.store.items(skey, None)
            for it in items:
                self.store.remove(skey, copy_obj(it.obj))
            self.reg.remove_crd(obj["metadata"]["name"])
            self.store.drop_storage(skey)

    def deletecollection(self, req):
        res = req.res
        opts = self._delete_options(req)
        match = self._match(req.query)
        out = []
        with self.store.lock:
            items, rv = self.store.items(res.skey, req.ns)
            for it in items:
                if match is None or match(it.obj):
                    item, _gone = self._delete(res, it, opts, req.dry)
                    out.append(item)
        return 200, (res, {"resourceVersion": str(self.store.rv)}, out)

    # --- eviction ---------------------------------------------------------------

    def evict(self, req):
        res = req.res
        body = {}
        if req.body:
            body = self.decode(req, res, "eviction", check_kind=False)
        opts = (body or {}).get("deleteOptions") or {}
        with self.store.lock:
            cur = self.store.get(res.skey, req.key)
            if cur is None:
                raise not_found(res, req.name)
            pod = cur.obj
            ok = success_status(201)
            if pod["metadata"].get("deletionTimestamp"):
                return 201, ok
            self._preconditions(res, pod, opts)
            phase = (pod.get("status") or {}).get("phase")
            if phase not in ("Succeeded", "Failed", "Pending"):
                self._check_budget(req.ns, pod)
            self._delete(res, cur, opts, req.dry)
            return 201, ok

    def _check_budget(self, ns, pod):
        labels = pod["metadata"].get("labels") or {}
        pdbs = []
        for it in self.store.items(("policy", "poddisruptionbudgets"), ns)[0]:
            try:
                reqs = selectors.from_label_selector((it.obj.get("spec") or {}).get("selector"))
            except selectors.SelectorError:
                continue
            if reqs is not None and selectors.match_labels(reqs, labels):
                pdbs.append((it.obj, reqs))
        if not pdbs:
            return
        if len(pdbs) > 1:
            raise ApiError(500, "This pod has more than one PodDisruptionBudget, which the eviction "
                                "subresource does not support.")
        pdb, reqs = pdbs[0]
        spec = pdb.get("spec") or {}
        expected = healthy = 0
        for it in self.store.items(("", "pods"), ns)[0]:
            p = it.obj
            if not selectors.match_labels(reqs, (p.get("metadata") or {}).get("labels")):
                continue
            if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            expected += 1
            if pod_healthy(p):
                healthy += 1
        try:
            if spec.get("maxUnavailable") is not None:
                desired = expected - _int_or_percent(spec["maxUnavailable"], expected, True)
            elif spec.get("minAvailable") is not None:
                desired = _int_or_percent(spec["minAvailable"], expected, True)
            else:
                desired = expected
        except ValueError:
            desired = expected
        desired = max(desired, 0)
        if not pod_healthy(pod):
            policy = spec.get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
            if policy == "AlwaysAllow" or healthy >= desired:
                return
        elif healthy - desired >= 1:
            return
        name = pdb["metadata"]["name"]
        raise ApiError(429, "Cannot evict pod as it would violate the pod's disruption budget.",
                       details={"causes": [{"reason": "DisruptionBudget",
                                            "message": "The disruption budget %s needs %d healthy "
                                                       "pods and has %d currently" % (name, desired, healthy)}]})

    # --- scale ------------------------------------------------------------------

    def _scale_paths(self, res):
        if res.scale:
            return res.scale
        return (".spec.replicas", ".status.replicas", None)

    def _scale_obj(self, res, obj):
        spec_p, status_p, sel_p = self._scale_paths(res)
        md = obj["metadata"]
        sel = ""
        if sel_p:
            sel = get_path(obj, sel_p) or ""
        else:
            s = (obj.get("spec") or {}).get("selector")
            if isinstance(s, dict):
                parts = ["%s=%s" % kv for kv in sorted((s.get("matchLabels") or s).items())
                         if isinstance(kv[1], str)]
                sel = ",".join(parts)
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                 "creationTimestamp") if k in md},
                "spec": {"replicas": get_path(obj, spec_p) or 0},
                "status": {"replicas": get_path(obj, status_p) or 0, "selector": sel}}

    def scale(self, req, patch=None):
        res = req.res
        with self.store.lock:
            cur = self.store.get(res.skey, req.key)
            if cur is None:
                raise not_found(res, req.name)
            sc = self._scale_obj(res, cur.obj)
            if req.method == "GET":
                return 200, sc
            if patch is None:
                new_sc = self.decode(req, res, "scale", check_kind=False)
            else:
                fv = field_validation(req)
                if patch[0] == APPLY:
                    self.check_apply(req, res, patch[1], fv)
                new_sc = self._apply_patch(res if res.crd else _ScaleKind, copy_obj(sc), *patch)
                if patch[0] != APPLY and isinstance(new_sc, dict):
                    new_sc = self.check_patched(req, self.schema_node(res, "scale"), new_sc,
                                                patch[1], patch[0], fv)
            rv = ((new_sc or {}).get("metadata") or {}).get("resourceVersion")
            if rv and rv != cur.obj["metadata"]["resourceVersion"]:
                raise conflict(res, req.name)
            replicas = ((new_sc or {}).get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise invalid(res, req.name, "spec.replicas: Invalid value: must be a non-negative integer")
            new = copy_obj(cur.obj)
            set_path(new, self._scale_paths(res)[0], replicas)
            if res.generation and new != cur.obj:
                new["metadata"]["generation"] = new["metadata"].get("generation", 1) + 1
            item = self._commit(res, cur, new, req.dry)
            return 200, self._scale_obj(res, item.obj)

    # --- serviceaccounts/token ---------------------------------------------------

    def token_request(self, req):
        """TokenRequest: a new bearer token for the service account, known to TokenReview."""
        sa = self.store.get(req.res.skey, req.key)
        if sa is None:
            raise not_found(req.res, req.name)
        body = self.decode(req, req.res, "token", check_kind=False) if req.body else {}
        spec = dict((body or {}).get("spec") or {})
        exp = int(spec.get("expirationSeconds") or 3600)
        spec["expirationSeconds"] = exp
        token = "kas-sa-" + uuid.uuid4().hex
        user = "system:serviceaccount:%s:%s" % (req.ns, req.name)
        self.auth.load({"tokens": [{"token": token, "user": user, "uid": sa.obj["metadata"]["uid"],
                                    "groups": ["system:serviceaccounts",
                                               "system:serviceaccounts:" + req.ns],
                                    "audiences": spec.get("audiences") or None}]})
        md = dict((body or {}).get("metadata") or {}, name=req.name, namespace=req.ns,
                  creationTimestamp=None)
        expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + exp))
        return 201, {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1", "metadata": md,
                     "spec": spec, "status": {"token": token, "expirationTimestamp": expiry}}

    # --- reviews ----------------------------------------------------------------

    def review(self, req):
        res = req.res
        obj = self.decode(req, res, check_kind=False)
        if not isinstance(obj, dict):
            raise ApiError(400, "the request body must be an object")
        spec = obj.get("spec") or {}
        if res.plural == "tokenreviews":
            status = self.auth.token_review(spec)
        elif res.plural == "selfsubjectreviews":
            status = {"userInfo": req.user}
        elif res.plural in ("subjectaccessreviews", "localsubjectaccessreviews", "selfsubjectaccessreviews"):
            self_user = req.user if res.plural == "selfsubjectaccessreviews" else None
            ns = req.ns if res.plural == "localsubjectaccessreviews" else None
            if not self_user and not spec.get("user") and not spec.get("groups"):
                raise invalid(res, "", "spec.user: Invalid value: \"\": at least one of user or "
                                       "group must be specified")
            status = self.auth.review(spec, self_user, ns)
            if status is None:
                raise invalid(res, "", "spec.resourceAttributes: Invalid value: exactly one of "
                                       "nonResourceAttributes or resourceAttributes must be specified")
        else:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        md = obj.get("metadata") or {}
        md["creationTimestamp"] = None
        out = {"kind": res.kind, "apiVersion": res.api_version, "metadata": md, "spec": spec,
               "status": status}
        return 201, out


class _ScaleKindT:
    crd = None
    kind = "Scale"


_ScaleKind = _ScaleKindT()


def list_json(api, res, md, items):
    """Serializes a list response by joining the cached JSON of each item."""
    head = '{"kind":%s,"apiVersion":%s,"metadata":%s,"items":[' % (
        json.dumps(res.kind + "List"), json.dumps(res.api_version), DUMPS(md))
    return head + ",".join(api.view(res, it) for it in items) + "]}"

