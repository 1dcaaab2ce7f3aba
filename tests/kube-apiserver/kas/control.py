"""Fault injection rules and the request log behind the /_control/ endpoint."""
import collections
import re
import threading
import time

ACTIONS = ("error", "stall", "gone", "close")


class Fault:
    def __init__(self, fid, spec):
        self.id = fid
        self.action = spec.get("action", "error")
        if self.action not in ACTIONS:
            raise ValueError("action must be one of %s" % ", ".join(ACTIONS))
        self.method = (spec.get("method") or "*").upper()
        self.path = spec.get("path") or ""
        self.regex = re.compile(self.path)
        self.watch = spec.get("watch")  # None: any request, True: watches only, False: no watches
        self.code = int(spec.get("code", 500))
        self.retry_after = spec.get("retryAfter")
        if self.retry_after is None and self.code == 429:
            self.retry_after = 1
        self.message = spec.get("message")
        self.seconds = float(spec.get("seconds", 0))
        count = spec.get("count")
        self.count = None if count is None else int(count)
        self.hits = 0

    def dump(self):
        d = {"id": self.id, "action": self.action, "method": self.method, "path": self.path,
             "watch": self.watch, "count": self.count, "hits": self.hits}
        if self.action == "error":
            d["code"] = self.code
            if self.retry_after is not None:
                d["retryAfter"] = self.retry_after
        if self.action == "stall":
            d["seconds"] = self.seconds
        return d


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.seq = 0

    def add(self, spec):
        with self.lock:
            self.seq += 1
            f = Fault(self.seq, spec)
            self.rules.append(f)
            return f

    def list(self):
        with self.lock:
            return [f.dump() for f in self.rules]

    def clear(self):
        with self.lock:
            n = len(self.rules)
            self.rules = []
            return n

    def remove(self, fid):
        with self.lock:
            before = len(self.rules)
            self.rules = [f for f in self.rules if f.id != fid]
            return before != len(self.rules)

    def match(self, method, target, is_watch):
        """The first rule matching the request (its count is used up), or None."""
        with self.lock:
            for f in self.rules:
                if f.method not in ("*", method):
                    continue
                if f.watch is not None and bool(f.watch) != is_watch:
                    continue
                if f.action == "gone" and f.watch is None and not is_watch:
                    continue  # "gone" rules apply to watches unless "watch": false is given
                if not f.regex.search(target):
                    continue
                f.hits += 1
                if f.count is not None:
                    f.count -= 1
                    if f.count <= 0:
                        self.rules.remove(f)
                return f
        return None


class RequestLog:
    def __init__(self, maxlen=20000):
        self.lock = threading.Lock()
        self.entries = collections.deque(maxlen=maxlen)
        self.counters = collections.Counter()

    def record(self, method, path, verb, resource, code, user, warnings=None):
        key = "%s %s" % (verb, resource)
        e = {"time": round(time.time(), 3), "method": method, "path": path,
             "verb": verb, "resource": resource, "code": code, "user": user}
        if warnings:  # the Warning headers of the answer (unknown fields a client sent...)
            e["warnings"] = list(dict.fromkeys(warnings))
        with self.lock:
            self.counters[key] += 1
            self.entries.append(e)

    def dump(self, limit=None):
        with self.lock:
            entries = list(self.entries)
            if limit is not None:
                entries = entries[-limit:] if limit > 0 else []
            return {"total": sum(self.counters.values()), "counters": dict(self.counters),
                    "requests": entries}

    def clear(self):
        with self.lock:
            self.entries.clear()
            self.counters.clear()
