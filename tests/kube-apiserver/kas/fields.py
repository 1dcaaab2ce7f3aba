"""Server-side field validation: the `fieldValidation` query parameter (Strict, Warn, Ignore).

The real server decodes request bodies strictly (sigs.k8s.io/json): a key the Go type does not
have is an unknown field, a key given twice a duplicate field. `Strict` makes them an error,
`Warn` (the default) one Warning header each, `Ignore` says nothing; the last two drop the
unknown fields (the last of duplicate keys wins). Custom resources are checked against the
structural schema of their CRD (what pruning would drop). Server-side apply always refuses
unknown fields, whatever the directive ("field not declared in schema").

The schema of the built-in kinds is data: kas/proto_schema.json, the protobuf field tables
of the API types that tools/gen-proto-schema reads out of kubectl (a protobuf field's name is
its JSON name but for proto.JSON_NAMES), with the corrections below for the types whose JSON
differs from their protobuf message (scalars, raw JSON, structs Go inlines: found from the
`json:"..." protobuf:"...name=..."` tags in kubectl's binary). apiextensions.k8s.io is not in
kubectl, so the CustomResourceDefinition types are written out in CRD_TYPES.

Error order, as the real server reports them:
  create/update, JSON body:  document order, unknown and duplicate fields interleaved
  create/update, YAML body:  the YAML duplicate keys (with lines), then unknown fields in
                             key order (the YAML is turned into JSON with sorted keys first)
  patches:                   duplicate keys of the patch (document order), then unknown
                             fields of the patched object (key order)
  custom resources:          duplicates first, then unknown fields of metadata, then the
                             pruned fields (key order), then those of embedded metadata
"""
import json
import re
import threading

from . import proto

DIRECTIVES = ("Ignore", "Warn", "Strict")
META = "k8s.io.apimachinery.pkg.apis.meta.v1."

# Nodes: ANY, ("msg", message name), ("list", node, list-map keys or None), ("map", node),
# ("cr", openAPIV3Schema, is the root).
ANY = ("any",)  # not looked into: scalars, raw JSON, types with their own JSON decoding

# Messages whose JSON form is not an object with the message's fields.
JSON_SCALARS = {
    META + "Time", META + "MicroTime", META + "Duration", META + "FieldsV1", META + "Verbs",
    "k8s.io.apimachinery.pkg.api.resource.Quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
    "k8s.io.apimachinery.pkg.runtime.RawExtension",
    "k8s.io.api.authentication.v1.ExtraValue", "k8s.io.api.authorization.v1.ExtraValue",
    "k8s.io.api.certificates.v1.ExtraValue",
}
INLINE = proto.INLINE  # message fields Go inlines in their parent's JSON object
# Nested messages that embed TypeMeta besides kinds and lists (apiVersion and kind allowed).
TYPEMETA = {META + "DeleteOptions", META + "Status"}

# Lists of the built-in types with more than one key (list-type map), for the paths of
# server-side apply errors; the others use the patch merge key of patch.py.
LIST_KEYS = {
    ("k8s.io.api.core.v1.Container", "ports"): ("containerPort", "protocol"),
    ("k8s.io.api.core.v1.EphemeralContainerCommon", "ports"): ("containerPort", "protocol"),
    ("k8s.io.api.core.v1.ServiceSpec", "ports"): ("port", "protocol"),
    ("k8s.io.api.core.v1.PodSpec", "topologySpreadConstraints"): ("topologyKey", "whenUnsatisfiable"),
}
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "volumes": "name", "env": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "imagePullSecrets": "name", "hostAliases": "ip", "resourceClaims": "name",
    "schedulingGates": "name", "podIPs": "ip", "hostIPs": "ip", "conditions": "type",
    "ownerReferences": "uid",
}

# apiextensions.k8s.io/v1, not in kubectl's protobuf tables. Notation: "" a scalar or raw
# JSON, "Name" a type below, "[Name]" a list of it, "{Name}" a map of it, "{}" a map of
# scalars, "meta:Name" a meta/v1 message.
CRD_TYPES = {
    "CustomResourceDefinition": {"metadata": "meta:ObjectMeta", "spec": "Spec", "status": "Status"},
    "Spec": {"group": "", "names": "Names", "scope": "", "versions": "[Version]",
             "conversion": "Conversion", "preserveUnknownFields": ""},
    "Names": {"plural": "", "singular": "", "shortNames": "", "kind": "", "listKind": "",
              "categories": ""},
    "Version": {"name": "", "served": "", "storage": "", "deprecated": "",
                "deprecationWarning": "", "schema": "Validation", "subresources": "Subresources",
                "additionalPrinterColumns": "[Column]", "selectableFields": "[SelectableField]"},
    "Validation": {"openAPIV3Schema": "JSONSchemaProps"},
    "Subresources": {"status": "SubresourceStatus", "scale": "SubresourceScale"},
    "SubresourceStatus": {},
    "SubresourceScale": {"specReplicasPath": "", "statusReplicasPath": "", "labelSelectorPath": ""},
    "Column": {"name": "", "type": "", "format": "", "description": "", "priority": "",
               "jsonPath": ""},
    "SelectableField": {"jsonPath": ""},
    "Conversion": {"strategy": "", "webhook": "WebhookConversion"},
    "WebhookConversion": {"clientConfig": "WebhookClientConfig", "conversionReviewVersions": ""},
    "WebhookClientConfig": {"url": "", "service": "ServiceReference", "caBundle": ""},
    "ServiceReference": {"namespace": "", "name": "", "path": "", "port": ""},
    "Status": {"conditions": "[Condition]", "acceptedNames": "Names", "storedVersions": ""},
    "Condition": {"type": "", "status": "", "lastTransitionTime": "", "reason": "", "message": ""},
    # items, additionalProperties, additionalItems and dependencies have their own JSON
    # decoding (schema or array, schema or bool...): not looked into, like the real decoder
    "JSONSchemaProps": {
        "id": "", "$schema": "", "$ref": "", "description": "", "type": "", "format": "",
        "title": "", "default": "", "maximum": "", "exclusiveMaximum": "", "minimum": "",
        "exclusiveMinimum": "", "maxLength": "", "minLength": "", "pattern": "",
        "maxItems": "", "minItems": "", "uniqueItems": "", "multipleOf": "", "enum": "",
        "maxProperties": "", "minProperties": "", "required": "", "items": "",
        "allOf": "[JSONSchemaProps]", "oneOf": "[JSONSchemaProps]", "anyOf": "[JSONSchemaProps]",
        "not": "JSONSchemaProps", "properties": "{JSONSchemaProps}", "additionalProperties": "",
        "patternProperties": "{JSONSchemaProps}", "dependencies": "{}", "additionalItems": "",
        "definitions": "{JSONSchemaProps}", "externalDocs": "ExternalDocumentation",
        "example": "", "nullable": "", "x-kubernetes-preserve-unknown-fields": "",
        "x-kubernetes-embedded-resource": "", "x-kubernetes-int-or-string": "",
        "x-kubernetes-list-map-keys": "", "x-kubernetes-list-type": "",
        "x-kubernetes-map-type": "", "x-kubernetes-validations": "[ValidationRule]"},
    "ExternalDocumentation": {"description": "", "url": ""},
    "ValidationRule": {"rule": "", "message": "", "messageExpression": "", "reason": "",
                       "fieldPath": "", "optionalOldSelf": ""},
}
CRD_PREFIX = "apiextensions.v1."


class Schema:
    """Field tables by message name, compiled on first use."""

    def __init__(self):
        self.cache = {}
        # A table is published (empty) before it is filled, so that a type that refers to
        # itself compiles; the re-entrant lock keeps other threads (the server answers
        # requests on several) from reading a table that is still empty.
        self.lock = threading.RLock()

    def fields(self, name):
        with self.lock:
            f = self.cache.get(name)
            if f is None:
                f = self.cache[name] = {}
                f.update(self._compile(name))
            return f

    def _compile(self, name):
        if name.startswith(CRD_PREFIX):
            return {k: _crd_node(v) for k, v in CRD_TYPES[name[len(CRD_PREFIX):]].items()}
        # (a whole object may always say apiVersion and kind: see Walk.walk)
        tables = proto.schema()
        out = {}
        for fname, t, rep, tn in (tables.get(name) or {}).values():
            if t == "m" and fname in INLINE:
                out.update(self.fields(tn))
                continue
            out[proto.JSON_NAMES.get(fname, fname)] = _proto_node(tables, name, fname, t, rep, tn)
        if name in TYPEMETA or name + "List" in tables or \
                (name.endswith("List") and name[:-4] in tables):
            out["apiVersion"] = out["kind"] = ANY
        return out

    def known(self, name):
        return name.startswith(CRD_PREFIX) or name in proto.schema()


def _proto_node(tables, parent, fname, t, rep, tn):
    if t == "map":
        entry = tables.get(tn) or {}
        val = entry.get("2")
        if val and val[1] == "m" and val[3] not in JSON_SCALARS:
            return ("map", ("msg", val[3]))
        return ("map", ANY)
    if t != "m" or tn in JSON_SCALARS:
        return ANY  # a scalar, or a list of scalars
    node = ("msg", tn)
    if rep:
        keys = LIST_KEYS.get((parent, fname))
        if keys is None and fname in MERGE_KEYS:
            keys = (MERGE_KEYS[fname],)
        return ("list", node, keys)
    return node


def _crd_node(spec):
    if spec == "":
        return ANY
    if spec == "{}":
        return ("map", ANY)
    if spec.startswith("meta:"):
        return ("msg", META + spec[5:])
    if spec.startswith("["):
        return ("list", ("msg", CRD_PREFIX + spec[1:-1]), None)
    if spec.startswith("{"):
        return ("map", ("msg", CRD_PREFIX + spec[1:-1]))
    return ("msg", CRD_PREFIX + spec)


SCHEMA = Schema()


def root_node(group, version, kind, cr_schema=None, crd=False):
    """The node a whole object of this kind is checked against (ANY: not checked)."""
    if crd:
        return ("cr", cr_schema, True) if isinstance(cr_schema, dict) else ANY
    if group == "apiextensions.k8s.io" and kind == "CustomResourceDefinition":
        return ("msg", CRD_PREFIX + kind)
    name = "k8s.io.api.%s.%s.%s" % (group.split(".")[0] if group else "core", version, kind)
    if not SCHEMA.known(name):
        return ANY
    return ("msg", name)


# --- bodies ----------------------------------------------------------------------------

class Obj(dict):
    """A JSON object that had a key more than once: `pairs` keeps them all, in order."""
    __slots__ = ("pairs",)


def _hook(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        d = Obj(pairs)
        d.pairs = pairs
    return d


def loads(text):
    """JSON -> value; objects with repeated keys are Obj (the last value wins, like Go)."""
    return json.loads(text, object_pairs_hook=_hook)


def has_duplicates(v):
    if isinstance(v, Obj):
        return True
    if isinstance(v, dict):
        return any(has_duplicates(x) for x in v.values())
    if isinstance(v, list):
        return any(has_duplicates(x) for x in v)
    return False


# --- the walk ----------------------------------------------------------------------------

class Walk:
    """Walks a value along a node and collects "unknown field"/"duplicate field" texts (each
    once). With build=True it returns the value without its unknown fields (otherwise the
    value itself: most bodies have none, and checking alone is cheaper).

    order "doc": keys in document order, duplicates seen (a JSON body decoded by the typed
    decoder); "sorted": keys in sorted order, no duplicates (a patched object, a YAML body).
    smd=True: paths as server-side apply writes them (".spec.a[name=\"x\"].b")."""

    def __init__(self, order="doc", smd=False, build=False):
        self.order = order
        self.smd = smd
        self.build = build
        self.errors = []
        self.late = []  # custom resources: unknown fields of embedded metadata come last
        self.dropped = 0
        self._seen = set()

    def result(self):
        return self.errors + self.late

    def _add(self, what, path):
        if what == "unknown":
            self.dropped += 1
        text = path_text(path, self.smd) if self.smd else '%s field "%s"' % (what, path_text(path))
        if text not in self._seen:
            self._seen.add(text)
            self.errors.append(text)

    def _pairs(self, v):
        if self.order == "sorted":
            return sorted(v.items())
        return v.pairs if isinstance(v, Obj) else v.items()

    def walk(self, node, v, path=()):
        t = node[0]
        if t == "any":
            return v
        if t == "cr":
            return self._cr(node[1], v, path, node[2])
        if t == "list":
            if not isinstance(v, list):
                return v
            out = [self.walk(node[1], x, path + (_item(i, x, node[2]),)) for i, x in enumerate(v)]
            return out if self.build else v
        if not isinstance(v, dict):
            return v
        out = {}
        if t == "map":
            seen = set()
            for k, x in self._pairs(v):
                if k in seen:
                    self._add("duplicate", path + (k,))
                seen.add(k)
                out[k] = self.walk(node[1], x, path + (k,))
            return out if self.build else v
        fields = SCHEMA.fields(node[1])
        seen = set()
        for k, x in self._pairs(v):
            f = fields.get(k)
            if f is None:
                if not path and k in ("apiVersion", "kind"):  # TypeMeta of the object itself
                    out[k] = x
                    continue
                self._add("unknown", path + (k,))
                continue
            if k in seen:
                self._add("duplicate", path + (k,))
            seen.add(k)
            out[k] = self.walk(f, x, path + (k,))
        return out if self.build else v

    def free(self, v, path=()):
        """Duplicate keys anywhere in a value (document order)."""
        if isinstance(v, list):
            for i, x in enumerate(v):
                self.free(x, path + (_item(i, x, None),))
        elif isinstance(v, dict):
            seen = set()
            for k, x in self._pairs(v):
                if k in seen:
                    self._add("duplicate", path + (k,))
                seen.add(k)
                self.free(x, path + (k,))

    # custom resources: what pruning with the CRD's structural schema would drop
    def _cr(self, s, v, path, root=False):
        if isinstance(v, list):
            items = s.get("items") if isinstance(s, dict) else None
            if not isinstance(items, dict):
                return v
            keys = None
            if s.get("x-kubernetes-list-type") == "map":
                keys = tuple(s.get("x-kubernetes-list-map-keys") or ()) or None
            out = [self._cr(items, x, path + (_item(i, x, keys),)) for i, x in enumerate(v)]
            return out if self.build else v
        if not isinstance(v, dict) or not isinstance(s, dict):
            return v
        props = s.get("properties")
        props = props if isinstance(props, dict) else None
        addl = s.get("additionalProperties")
        keep = s.get("x-kubernetes-preserve-unknown-fields") is True or addl is True
        meta = root or s.get("x-kubernetes-embedded-resource") is True
        out = {}
        items = sorted(v.items())
        if root and "metadata" in v:  # ObjectMeta is decoded (typed) before pruning
            items = [("metadata", v["metadata"])] + [kv for kv in items if kv[0] != "metadata"]
        for k, x in items:
            if meta and k in ("apiVersion", "kind"):
                out[k] = x
            elif meta and k == "metadata":
                sub = Walk("sorted", self.smd, self.build)
                out[k] = sub.walk(("msg", META + "ObjectMeta"), x, path + (k,))
                self.dropped += sub.dropped
                for e in sub.errors:
                    if e not in self._seen:
                        self._seen.add(e)
                        (self.errors if root else self.late).append(e)
            elif props is not None and k in props:
                out[k] = self._cr(props[k], x, path + (k,))
            elif props is None and isinstance(addl, dict):
                out[k] = self._cr(addl, x, path + (k,))
            elif keep:
                out[k] = x
            else:
                self._add("unknown", path + (k,))
        return out if self.build else v


def _item(i, x, keys):
    """A list element on a path: its index, and its keys for server-side apply paths."""
    if keys and isinstance(x, dict) and any(k in x for k in keys):
        return ("#", i, ",".join("%s=%s" % (k, json.dumps(x[k], separators=(",", ":")))
                                 for k in sorted(keys) if k in x))
    return ("#", i, None)


def path_text(path, smd=False):
    out = []
    for p in path:
        if isinstance(p, tuple):
            out.append("[%s]" % (p[2] if smd and p[2] is not None else p[1]))
        elif smd or out:
            out.append("." + p)
        else:
            out.append(p)
    return "".join(out)


def check(node, v, order="doc", smd=False):
    """(value without unknown fields, [error texts])."""
    w = Walk(order, smd)
    if node[0] == "cr" and order == "doc":
        w.free(v)  # custom resources: every duplicate first
        w.order = "sorted"
    w.walk(node, v)
    if not w.dropped:
        return v, w.result()
    return Walk(w.order, smd, build=True).walk(node, v), w.result()


def patch_duplicates(body, ctype):
    """Strict-decoding errors of a patch document itself (merge, strategic, JSON patch)."""
    w = Walk("doc")
    if ctype == "application/json-patch+json":
        errs = []
        for i, op in enumerate(body if isinstance(body, list) else []):
            if not isinstance(op, dict):
                continue
            seen = set()
            for k, _x in w._pairs(op):
                if k not in ("op", "path", "from", "value"):
                    e = 'json patch unknown field "[%d].%s"' % (i, k)
                elif k in seen:
                    e = 'json patch duplicate field "[%d].%s"' % (i, k)
                else:
                    e = None
                seen.add(k)
                if e and e not in errs:
                    errs.append(e)
        return errs
    w.free(body)
    return w.errors


# --- YAML and line numbers -------------------------------------------------------------

def yaml_duplicate_lines(text):
    """`line N: key "k" already set in map` for each repeated key of a YAML (or JSON) text,
    as go-yaml says it (the line of the repeated key)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    try:
        return _json_dup_lines(text)
    except ValueError:
        pass
    try:
        import yaml
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except Exception:
        return []
    out = []

    def visit(n):
        if isinstance(n, yaml.MappingNode):
            seen = set()
            for k, val in n.value:
                key = getattr(k, "value", None)
                if isinstance(key, str):
                    if key in seen:
                        out.append('line %d: key "%s" already set in map' % (k.start_mark.line + 1, key))
                    seen.add(key)
                visit(val)
        elif isinstance(n, yaml.SequenceNode):
            for x in n.value:
                visit(x)
    visit(node)
    return out


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+|\s+', re.S)


def _json_dup_lines(text):
    """Repeated keys of a JSON text with their lines; ValueError when it is not JSON."""
    json.loads(text)
    out, stack, line, expect_key = [], [], 1, False
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        c = tok[0]
        if c == "{":
            stack.append(set())
            expect_key = True
        elif c == "[":
            stack.append(None)
            expect_key = False
        elif c in "}]":
            stack.pop()
            expect_key = False
        elif c == ",":
            expect_key = bool(stack) and stack[-1] is not None
        elif c == '"' and expect_key:
            key = json.loads(tok)
            if key in stack[-1]:
                out.append('line %d: key "%s" already set in map' % (line, key))
            stack[-1].add(key)
            expect_key = False
        line += tok.count("\n")
    return out


# --- Go formatting, for the texts of the real errors ------------------------------------

def go_quote(s):
    """strconv.Quote."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                        "\t": "\\t", "\v": "\\v"}[ch])
        elif o < 0x20 or o == 0x7f:
            out.append("\\x%02x" % o)
        elif not ch.isprintable():
            out.append("\\u%04x" % o if o < 0x10000 else "\\U%08x" % o)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_json(v):
    """encoding/json.Marshal of a map: sorted keys, compact, <>& escaped."""
    s = json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def go_value(v):
    """fmt's %+v of a decoded JSON value (map[string]interface{} and friends)."""
    if isinstance(v, dict):
        return "map[" + " ".join("%s:%s" % (k, go_value(v[k])) for k in sorted(v)) + "]"
    if isinstance(v, list):
        return "[" + " ".join(go_value(x) for x in v) + "]"
    if v is None:
        return "<nil>"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, float):
        return go_float(v)
    return str(v)


def go_float(f):
    """strconv.FormatFloat(f, 'g', -1, 64)."""
    if f == 0:
        return "0"
    r = repr(abs(f))
    mant, _, exp = r.partition("e")
    ip, _, fp = mant.partition(".")
    digits = (ip + fp).lstrip("0")
    dp = len(ip) + int(exp or 0) - (len(ip + fp) - len((ip + fp).lstrip("0")))
    digits = digits.rstrip("0") or "0"
    x = dp - 1
    sign = "-" if f < 0 else ""
    if x < -4 or x >= 6:  # the shortest form decides with precision 6
        m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return "%s%se%s%02d" % (sign, m, "-" if x < 0 else "+", abs(x))
    if dp <= 0:
        return sign + "0." + "0" * -dp + digits
    if dp >= len(digits):
        return sign + digits + "0" * (dp - len(digits))
    return sign + digits[:dp] + "." + digits[dp:]


def warning_header(text):
    """The value of one Warning header (RFC 7234, code 299, agent "-")."""
    q = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "299 - " + q.encode("utf-8").decode("latin-1")
