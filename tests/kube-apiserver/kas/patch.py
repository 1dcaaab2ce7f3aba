"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

All functions take fresh copies (they may modify their `doc` argument) and return
the patched document. Errors raise PatchError(code, message).
"""
import copy


class PatchError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


# --- RFC 7386 -------------------------------------------------------------------

def merge_patch(doc, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(doc, dict):
        doc = {}
    for k, v in patch.items():
        if v is None:
            doc.pop(k, None)
        else:
            doc[k] = merge_patch(doc.get(k), v)
    return doc


# --- RFC 6902 -------------------------------------------------------------------

def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(422, "invalid JSON pointer %r" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc, parts, path):
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict):
            if p not in cur:
                raise PatchError(422, "doc is missing path: %s" % path)
            cur = cur[p]
        elif isinstance(cur, list):
            cur = cur[_index(cur, p, path, False)]
        else:
            raise PatchError(422, "doc is missing path: %s" % path)
    return cur


def _index(lst, p, path, allow_end):
    if p == "-" and allow_end:
        return len(lst)
    try:
        i = int(p)
    except ValueError:
        raise PatchError(422, "invalid array index %r in %s" % (p, path))
    if i < 0 or i > len(lst) or (i == len(lst) and not allow_end):
        raise PatchError(422, "unable to access invalid index: %d" % i)
    return i


def _get(doc, path):
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(422, "doc is missing path: %s" % path)
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, False)]
    raise PatchError(422, "doc is missing path: %s" % path)


def _add(doc, path, value):
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, True), value)
    else:
        raise PatchError(422, "doc is missing path: %s" % path)
    return doc


def _remove(doc, path):
    parts = _pointer(path)
    if not parts:
        raise PatchError(422, "cannot remove the whole document")
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(422, "Unable to remove nonexistent key: %s: missing value" % last)
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, path, False))
    raise PatchError(422, "doc is missing path: %s" % path)


def json_patch(doc, ops):
    if not isinstance(ops, list):
        raise PatchError(400, "json patch must be a JSON array of operations")
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise PatchError(400, "invalid json patch operation: %r" % (op,))
        kind, path = op["op"], op.get("path", "")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            parts = _pointer(path)
            if not parts:
                doc = copy.deepcopy(op.get("value"))
            else:
                parent = _parent(doc, parts, path)
                if isinstance(parent, dict):
                    parent[parts[-1]] = copy.deepcopy(op.get("value"))
                else:
                    parent[_index(parent, parts[-1], path, False)] = copy.deepcopy(op.get("value"))
        elif kind == "move":
            value = _remove(doc, op.get("from", ""))
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op.get("from", ""))))
        elif kind == "test":
            try:
                cur = _get(doc, path)
            except PatchError:
                cur = None
            if cur != op.get("value"):
                raise PatchError(422, "testing value %s failed: test failed" % path)
        else:
            raise PatchError(400, "Unexpected kind: %s" % kind)
    return doc


# --- strategic merge patch ------------------------------------------------------
#
# Patch metadata for the lists the built-in kinds declare with patchStrategy=merge.
# Lists not described here are atomic (replaced as a whole), like the real server.
# Note: Node spec.taints and Pod spec.tolerations are atomic in the real API.

_BY_NAME = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "volumes": "name", "env": "name", "volumeMounts": "mountPath",
    "volumeDevices": "devicePath", "imagePullSecrets": "name", "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey", "resourceClaims": "name",
    "schedulingGates": "name", "podIPs": "ip", "hostIPs": "ip", "conditions": "type",
}
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def list_strategy(kind, path, field):
    """("merge", key), ("set",) for a merged primitive list, or None for atomic.

    path: field names from the object root down to the map holding `field`
    (a list element is represented by its list's field name)."""
    if field == "ports":
        if path and path[-1] in _CONTAINER_LISTS:
            return ("merge", "containerPort")
        if kind == "Service" and tuple(path) == ("spec",):
            return ("merge", "port")
        return None
    if field == "addresses":
        if kind == "Node" and tuple(path) == ("status",):
            return ("merge", "type")
        return None
    if tuple(path) == ("metadata",):
        if field == "finalizers":
            return ("set",)
        if field == "ownerReferences":
            return ("merge", "uid")
        return None
    if field == "secrets" and kind == "ServiceAccount" and not path:
        return ("merge", "name")
    if field in _BY_NAME:
        return ("merge", _BY_NAME[field])
    return None


def strategic_merge(doc, patch, kind):
    if not isinstance(patch, dict):
        raise PatchError(400, "strategic merge patch must be a JSON object")
    out = _merge_map(doc if isinstance(doc, dict) else {}, patch, kind, [])
    if out is None:
        return {}
    return out


def _merge_map(orig, patch, kind, path):
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip({k: v for k, v in patch.items() if k != "$patch"})
    if directive == "delete":
        return None
    if directive is not None and directive != "merge":
        raise PatchError(400, "Unknown patch type: %s in map: %r" % (directive, patch))
    retain = patch.get("$retainKeys")
    orders = {}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            if isinstance(orig.get(field), list):
                orig[field] = [x for x in orig[field] if x not in v]
        elif k.startswith("$setElementOrder/"):
            orders[k.split("/", 1)[1]] = v
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        if v is None:
            orig.pop(k, None)
            continue
        cur = orig.get(k)
        if isinstance(v, dict):
            merged = _merge_map(cur if isinstance(cur, dict) else {}, v, kind, path + [k])
            if merged is None:
                orig.pop(k, None)
            else:
                orig[k] = merged
        elif isinstance(v, list):
            orig[k] = _merge_list(cur if isinstance(cur, list) else [], v, kind, path, k)
        else:
            orig[k] = v
    for field, order in orders.items():
        if isinstance(orig.get(field), list):
            orig[field] = _reorder(orig[field], order, list_strategy(kind, path, field))
    if isinstance(retain, list):
        for k in list(orig):
            if k not in retain:
                del orig[k]
    return orig


def _merge_list(orig, patch, kind, path, field):
    strat = list_strategy(kind, path, field)
    if strat is None:
        return _strip(patch)
    # a {"$patch": "replace"} element replaces the whole list with the other elements
    if any(isinstance(e, dict) and e.get("$patch") == "replace" for e in patch):
        return _strip([e for e in patch if not (isinstance(e, dict) and e.get("$patch") == "replace")])
    if strat[0] == "set":
        out = list(orig)
        for e in patch:
            if e not in out:
                out.append(e)
        return out
    key = strat[1]
    out = list(orig)
    for e in patch:
        if not isinstance(e, dict):
            out.append(e)
            continue
        if e.get("$patch") == "delete":
            out = [o for o in out if not (isinstance(o, dict) and o.get(key) == e.get(key))]
            continue
        for i, o in enumerate(out):
            if isinstance(o, dict) and key in e and o.get(key) == e.get(key):
                merged = _merge_map(o, e, kind, path + [field])
                if merged is None:
                    del out[i]
                else:
                    out[i] = merged
                break
        else:
            merged = _merge_map({}, e, kind, path + [field])
            if merged is not None:
                out.append(merged)
    return out


def _reorder(items, order, strat):
    if strat is None:
        return items
    if strat[0] == "set":
        pos = {json_key(v): i for i, v in enumerate(order)}
        keyf = json_key
    else:
        k = strat[1]
        pos = {json_key(v.get(k)): i for i, v in enumerate(order) if isinstance(v, dict)}

        def keyf(x):
            return json_key(x.get(k)) if isinstance(x, dict) else None
    ordered = sorted((x for x in items if keyf(x) in pos), key=lambda x: pos[keyf(x)])
    rest = [x for x in items if keyf(x) not in pos]
    return ordered + rest


def json_key(v):
    return repr(v)


def _strip(v):
    """Removes patch directives from a value that is inserted as is."""
    if isinstance(v, dict):
        return {k: _strip(x) for k, x in v.items() if not k.startswith("$")}
    if isinstance(v, list):
        return [_strip(x) for x in v]
    return v
