"""Decoding of Kubernetes protobuf request bodies into the JSON form.

kubectl's typed clients (`kubectl create configmap`, `kubectl auth can-i`, ...) send
`application/vnd.kubernetes.protobuf`: the magic "k8s\\0", then a runtime.Unknown
{typeMeta{apiVersion, kind}, raw} whose raw bytes are the object's message. The field
tables come from proto_schema.json (made by tools/gen-proto-schema). Answers always go
back as JSON, which these clients accept too.
"""
import base64
import json
import os
import threading
import time

MAGIC = b"k8s\x00"
_schema = None
_lock = threading.Lock()
ZERO_TIME = -62135596800  # Go's zero time.Time in Unix seconds


class ProtoError(ValueError):
    pass


def schema():
    global _schema
    with _lock:
        if _schema is None:
            path = os.path.join(os.path.dirname(os.path.realpath(__file__)), "proto_schema.json")
            with open(path) as f:
                _schema = json.load(f)
        return _schema


def _varint(buf, i):
    shift = result = 0
    while True:
        if i >= len(buf):
            raise ProtoError("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf):
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            ln, i = _varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ProtoError("unsupported wire type %d" % wt)
        yield num, wt, v


def _int(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def _ts(d, micro=False):
    secs = d.get("seconds", 0)
    if secs == ZERO_TIME or (not secs and not d.get("nanos")):
        return None
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    if micro:
        return base + ".%06dZ" % (d.get("nanos", 0) // 1000)
    return base + "Z"


def _duration(d):
    ns = d.get("duration", 0)
    s = ns / 1e9
    h, rem = divmod(int(s), 3600)
    m, sec = divmod(rem, 60)
    frac = s - int(s)
    return ("%dh" % h if h else "") + ("%dm" % m if h or m else "") + ("%gs" % (sec + frac))


META = "k8s.io.apimachinery.pkg.apis.meta.v1."
SPECIAL = {
    META + "Time": lambda d: _ts(d),
    META + "MicroTime": lambda d: _ts(d, True),
    META + "Duration": _duration,
    "k8s.io.apimachinery.pkg.api.resource.Quantity": lambda d: d.get("string", ""),
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        lambda d: d.get("strVal", "") if d.get("type") == 1 else d.get("intVal", 0),
    "k8s.io.apimachinery.pkg.runtime.RawExtension":
        lambda d: json.loads(d["raw"]) if d.get("raw") else None,
    META + "FieldsV1": lambda d: json.loads(d["Raw"]) if d.get("Raw") else None,
    "k8s.io.api.authentication.v1.ExtraValue": lambda d: d.get("items", []),
    "k8s.io.api.authorization.v1.ExtraValue": lambda d: d.get("items", []),
}
KEEP_ZERO = {"data", "binaryData", "stringData"}
# Message-typed fields that Go embeds with `json:",inline"`: their fields sit in the parent's
# JSON object (the `json:",inline" protobuf:"...name=X"` tags of kubectl's binary).
INLINE = {"volumeSource", "persistentVolumeSource", "ephemeralContainerCommon", "handler",
          "localObjectReference", "ingressRuleValue", "typeMeta"}
# Protobuf field names that are not the JSON name (`json:"uid" protobuf:"...,name=uID"`).
JSON_NAMES = {"uID": "uid", "aPIGroup": "apiGroup"}


def _scalar(t, wt, v):
    if t == "s":
        return bytes(v).decode("utf-8", "replace")
    if t == "b":
        return base64.b64encode(v).decode()
    if t in ("i", "e"):
        return _int(v)
    if t == "z":
        return (v >> 1) ^ -(v & 1)
    if t == "bool":
        return bool(v)
    if t == "f":
        return int.from_bytes(v, "little", signed=True)
    if t == "d":
        import struct
        return struct.unpack("<d" if len(v) == 8 else "<f", v)[0]
    raise ProtoError("unknown field type %s" % t)


def decode_message(buf, name, raw=False):
    table = schema().get(name)
    if table is None:
        raise ProtoError("no schema for %s" % name)
    out = {}
    for num, wt, v in _fields(buf):
        f = table.get(str(num))
        if f is None:
            continue
        fname, t, rep, tn = f
        fname = JSON_NAMES.get(fname, fname)
        if t == "map":
            e = decode_message(v, tn, raw=True)
            out.setdefault(fname, {})[e.get("key", "")] = e.get("value", _empty(tn))
            continue
        if t == "m":
            val = decode_message(v, tn)
            if fname in INLINE and isinstance(val, dict):
                out.update(val)
                continue
        elif rep and wt == 2 and t not in ("s", "b"):  # packed scalars
            val, i, vals = None, 0, []
            while i < len(v):
                x, i = _varint(v, i)
                vals.append(_scalar(t, 0, x))
            out.setdefault(fname, []).extend(vals)
            continue
        else:
            val = _scalar(t, wt, v)
        if rep:
            out.setdefault(fname, []).append(val)
        else:
            out[fname] = val
    if name in SPECIAL:
        return SPECIAL[name](out)
    if raw:
        return out
    # gogo writes every non-pointer field; JSON omits the empty ones
    spec = name.endswith("Spec")  # spec.replicas: 0 is a value, status.replicas: 0 is not
    return {k: v for k, v in out.items()
            if k in KEEP_ZERO or (spec and k == "replicas") or not (v is None or v == "" or v is False or v == 0 or v == {} or v == [])}


def _empty(entry_name):
    f = (schema().get(entry_name) or {}).get("2")
    if not f:
        return ""
    return {"s": "", "b": "", "i": 0, "bool": False}.get(f[1], None)


def decode(body):
    """A protobuf request body -> the object as JSON would have it."""
    if not body.startswith(MAGIC):
        raise ProtoError("not a Kubernetes protobuf body")
    tm, raw = {}, b""
    for num, _wt, v in _fields(body[4:]):
        if num == 1:
            for n, _w, x in _fields(v):
                tm["apiVersion" if n == 1 else "kind"] = bytes(x).decode()
        elif num == 2:
            raw = v
    av, kind = tm.get("apiVersion", ""), tm.get("kind", "")
    group, _, version = av.rpartition("/")
    pkg = "k8s.io.api.%s.%s" % (group.split(".")[0] if group else "core", version)
    name = pkg + "." + kind
    if name not in schema():
        name = META + kind  # DeleteOptions, Status, ... live in meta/v1
    obj = decode_message(raw, name)
    if not isinstance(obj, dict):
        raise ProtoError("%s is not an object" % kind)
    obj["apiVersion"] = av
    obj["kind"] = kind
    return obj
