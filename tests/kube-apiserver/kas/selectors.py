"""Label selectors (string and LabelSelector object forms) and field selectors."""


class SelectorError(ValueError):
    pass


_KEY_END = set(" \t=!,()")


def parse_labels(text):
    """Parses a label selector string into [(key, op, values)].

    op is one of "=", "!=", "in", "notin", "exists", "!exists", "gt", "lt".
    """
    reqs = []
    s = text or ""
    i, n = 0, len(s)

    def skip(j):
        while j < n and s[j] in " \t":
            j += 1
        return j

    while True:
        i = skip(i)
        if i >= n:
            break
        neg = False
        if s[i] == "!":
            neg = True
            i = skip(i + 1)
        j = i
        while j < n and s[j] not in _KEY_END:
            j += 1
        key = s[i:j]
        if not key:
            raise SelectorError("unable to parse requirement: found '%s', expected: identifier" % s[i:i + 1])
        i = skip(j)
        if neg:
            reqs.append((key, "!exists", ()))
        elif i >= n or s[i] == ",":
            reqs.append((key, "exists", ()))
        elif s.startswith("==", i) or s.startswith("!=", i) or s[i] == "=":
            op = "!=" if s[i] == "!" else "="
            i += 2 if s.startswith("==", i) or op == "!=" else 1
            i = skip(i)
            j = i
            while j < n and s[j] not in ", \t":
                j += 1
            reqs.append((key, op, (s[i:j],)))
            i = skip(j)
        elif s.startswith(">", i) or s.startswith("<", i):
            op = "gt" if s[i] == ">" else "lt"
            i = skip(i + 1)
            j = i
            while j < n and s[j] not in ", \t":
                j += 1
            try:
                reqs.append((key, op, (int(s[i:j]),)))
            except ValueError:
                raise SelectorError("for 'Gt', 'Lt' operators, the value must be an integer")
            i = skip(j)
        else:
            j = i
            while j < n and s[j].isalpha():
                j += 1
            word = s[i:j]
            if word not in ("in", "notin"):
                raise SelectorError("unable to parse requirement: found '%s', expected: in, notin, =, ==, !=, gt, lt" % word)
            i = skip(j)
            if i >= n or s[i] != "(":
                raise SelectorError("unable to parse requirement: found '%s', expected: '('" % s[i:i + 1])
            close = s.find(")", i)
            if close < 0:
                raise SelectorError("unable to parse requirement: expected: ')'")
            vals = tuple(v.strip() for v in s[i + 1:close].split(","))
            reqs.append((key, word, tuple(v for v in vals if v or len(vals) == 1)))
            i = skip(close + 1)
        if i < n:
            if s[i] != ",":
                raise SelectorError("unable to parse requirement: found '%s', expected: ','" % s[i])
            i += 1
    return reqs


def match_labels(reqs, labels):
    labels = labels or {}
    for key, op, vals in reqs:
        present = key in labels
        v = labels.get(key)
        if op == "=":
            if not present or v != vals[0]:
                return False
        elif op == "!=":
            if present and v == vals[0]:
                return False
        elif op == "in":
            if not present or v not in vals:
                return False
        elif op == "notin":
            if present and v in vals:
                return False
        elif op == "exists":
            if not present:
                return False
        elif op == "!exists":
            if present:
                return False
        elif op in ("gt", "lt"):
            try:
                iv = int(v)
            except (TypeError, ValueError):
                return False
            if (op == "gt" and not iv > vals[0]) or (op == "lt" and not iv < vals[0]):
                return False
    return True


def from_label_selector(sel):
    """Converts a metav1.LabelSelector object into requirements. None matches nothing."""
    if sel is None:
        return None
    reqs = [(k, "=", (v,)) for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or []:
        op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}.get(e.get("operator"))
        if op is None:
            raise SelectorError("%r is not a valid label selector operator" % e.get("operator"))
        reqs.append((e.get("key", ""), op, tuple(e.get("values") or ())))
    return reqs


def parse_fields(text):
    """Parses a field selector into [(path list, op, value)], op "=" or "!="."""
    out = []
    if not text:
        return out
    for part in _split_unescaped(text, ","):
        part = part.strip()
        if not part:
            continue
        for op, tok in (("!=", "!="), ("=", "=="), ("=", "=")):
            idx = _find_unescaped(part, tok)
            if idx >= 0:
                key = part[:idx].strip()
                val = _unescape(part[idx + len(tok):].strip())
                out.append((key.split("."), op, val))
                break
        else:
            raise SelectorError("invalid selector: '%s'; can't understand '%s'" % (text, part))
    return out


def _find_unescaped(s, tok):
    i = 0
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s.startswith(tok, i):
            return i
        i += 1
    return -1


def _split_unescaped(s, sep):
    parts, cur, i = [], [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            cur.append(s[i:i + 2])
            i += 2
            continue
        if s[i] == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(s[i])
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            out.append(s[i + 1])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def field_value(obj, path):
    cur = obj
    for p in path:
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(p)
        if cur is None:
            return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, (dict, list)):
        return ""
    return str(cur)


# Boolean fields the real server reports as "false" when they are unset.
_FALSE_DEFAULTS = {("spec", "unschedulable"), ("spec", "hostNetwork")}


def match_fields(reqs, obj):
    for path, op, val in reqs:
        v = field_value(obj, path)
        if v == "" and tuple(path) in _FALSE_DEFAULTS:
            v = "false"
        if (op == "=") != (v == val):
            return False
    return True
