"""Values of custom resources against their CRD's structural schema, as the real API server
checks them after decoding: defaults first (`default` of a property that is absent), then
types, `required`, `enum`, `minimum`/`maximum` (with the exclusive forms), `minLength`/
`maxLength`, `minItems`/`maxItems`, `pattern`, `nullable`, `x-kubernetes-int-or-string`,
`anyOf`/`oneOf` of types. Each error is a field error as the server words it:

    spec.instanceType: Required value
    spec.diskType: Unsupported value: "gp9": supported values: "gp3", "gp2"
    spec.diskSizeGb: Invalid value: "string": spec.diskSizeGb in body must be of type integer: "string"
    spec.diskSizeGb: Invalid value: 0: spec.diskSizeGb in body should be greater than or equal to 1

Not checked: formats, CEL rules (x-kubernetes-validations), list-type uniqueness."""

import copy
import json
import re

TYPES = {"string": (str,), "boolean": (bool,), "object": (dict,), "array": (list,)}


def _is_type(v, t):
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool) or (isinstance(v, float) and v.is_integer())
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, TYPES.get(t, (object,)))


def _type_name(v):
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    if isinstance(v, float):
        return "number"
    return {str: "string", dict: "object", list: "array"}.get(type(v), "null")


def _go(v):
    """A value as the field errors print it (Go's %#v of the decoded JSON value, roughly)."""
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (dict, list)):
        return '"%s"' % _type_name(v)
    return str(v)


def _num(x):
    return int(x) if isinstance(x, float) and x.is_integer() else x


def apply_defaults(s, v):
    """Fills absent properties that have a default, recursively (in place)."""
    if not isinstance(s, dict):
        return
    if isinstance(v, dict):
        props = s.get("properties")
        if isinstance(props, dict):
            for k, ps in props.items():
                if k not in v and isinstance(ps, dict) and "default" in ps:
                    v[k] = copy.deepcopy(ps["default"])
                if k in v:
                    apply_defaults(ps, v[k])
        addl = s.get("additionalProperties")
        if isinstance(addl, dict) and not isinstance(props, dict):
            for x in v.values():
                apply_defaults(addl, x)
    elif isinstance(v, list) and isinstance(s.get("items"), dict):
        for x in v:
            apply_defaults(s["items"], x)


def _path(path):
    out = ""
    for p in path:
        out += "[%d]" % p if isinstance(p, int) else ("." + p if out else p)
    return out


def validate(s, v, path, errs, root=False):
    if not isinstance(s, dict):
        return
    f = _path(path)
    if v is None:
        if not s.get("nullable") and s.get("type") and not root:
            errs.append("%s: Invalid value: \"null\": %s in body must be of type %s: \"null\"" % (f, f, s["type"]))
        return
    t = s.get("type")
    if s.get("x-kubernetes-int-or-string"):
        if not (_is_type(v, "integer") or isinstance(v, str)):
            errs.append('%s: Invalid value: %s: %s in body must be of type integer,string: "%s"'
                        % (f, _go(v), f, _type_name(v)))
            return
    elif t and not _is_type(v, t):
        errs.append('%s: Invalid value: "%s": %s in body must be of type %s: "%s"'
                    % (f, _type_name(v), f, t, _type_name(v)))
        return
    if "enum" in s and v not in s["enum"]:
        errs.append("%s: Unsupported value: %s: supported values: %s"
                    % (f, _go(v), ", ".join(_go(e) for e in s["enum"])))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        lo, hi = s.get("minimum"), s.get("maximum")
        if lo is not None and (v <= lo if s.get("exclusiveMinimum") else v < lo):
            errs.append("%s: Invalid value: %s: %s in body should be greater than %s%s"
                        % (f, _go(v), f, "" if s.get("exclusiveMinimum") else "or equal to ", _num(lo)))
        if hi is not None and (v >= hi if s.get("exclusiveMaximum") else v > hi):
            errs.append("%s: Invalid value: %s: %s in body should be less than %s%s"
                        % (f, _go(v), f, "" if s.get("exclusiveMaximum") else "or equal to ", _num(hi)))
    if isinstance(v, str):
        if "minLength" in s and len(v) < s["minLength"]:
            errs.append("%s: Invalid value: %s: %s in body should be at least %d chars long"
                        % (f, _go(v), f, s["minLength"]))
        if "maxLength" in s and len(v) > s["maxLength"]:
            errs.append("%s: Too long: may not be longer than %d" % (f, s["maxLength"]))
        if "pattern" in s and not re.search(s["pattern"], v):
            errs.append("%s: Invalid value: %s: %s in body should match '%s'" % (f, _go(v), f, s["pattern"]))
    if isinstance(v, list):
        if "minItems" in s and len(v) < s["minItems"]:
            errs.append("%s: Invalid value: %d: %s in body should have at least %d items"
                        % (f, len(v), f, s["minItems"]))
        if "maxItems" in s and len(v) > s["maxItems"]:
            errs.append("%s: Too many: %d: must have at most %d items" % (f, len(v), s["maxItems"]))
        for i, x in enumerate(v):
            validate(s.get("items"), x, path + (i,), errs)
    if isinstance(v, dict):
        for k in s.get("required") or ():
            if k not in v:
                errs.append("%s: Required value" % _path(path + (k,)))
        props = s.get("properties")
        if isinstance(props, dict):
            for k, x in v.items():
                if k in props and not (root and k in ("apiVersion", "kind", "metadata")):
                    validate(props[k], x, path + (k,), errs)
        elif isinstance(s.get("additionalProperties"), dict):
            for k, x in v.items():
                validate(s["additionalProperties"], x, path + (k,), errs)


def check(schema, obj):
    """Defaults obj in place and returns its field errors (empty when valid)."""
    if not isinstance(schema, dict) or not isinstance(obj, dict):
        return []
    apply_defaults(schema, obj)
    errs = []
    validate(schema, obj, (), errs, root=True)
    return errs
