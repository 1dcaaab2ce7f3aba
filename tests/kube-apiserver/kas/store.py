"""Objects in memory, the global resourceVersion, watch history, watchers and list snapshots.

Stored objects are never modified in place: an update stores a new dict. So a
reader may hold and serialize an Item without a lock, and a list snapshot for
pagination is just a list of references.
"""
import base64
import bisect
import collections
import json
import threading
import time

DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class Gone(Exception):
    """A resourceVersion or continue token older than what the server remembers."""

    def __init__(self, message, cont=None):
        super().__init__(message)
        self.message = message
        self.cont = cont


class Item:
    __slots__ = ("obj", "_js")

    def __init__(self, obj):
        self.obj = obj
        self._js = None

    def js(self):
        j = self._js
        if j is None:
            j = self._js = DUMPS(self.obj)
        return j


class Event:
    __slots__ = ("rv", "type", "item", "old")

    def __init__(self, rv, etype, item, old):
        self.rv = rv
        self.type = etype
        self.item = item
        self.old = old


def obj_key(obj):
    md = obj.get("metadata") or {}
    ns = md.get("namespace") or ""
    return ns + "/" + md.get("name", "") if ns else md.get("name", "")


class Storage:
    def __init__(self, skey, history):
        self.skey = skey
        self.items = {}  # key ("ns/name" or "name") -> Item
        self._sorted = None
        self.history = collections.deque(maxlen=history)
        self.window_start = 0  # watches from an older resourceVersion get 410
        self.watchers = set()

    def sorted_keys(self):
        if self._sorted is None:
            self._sorted = sorted(self.items)
        return self._sorted

    def range(self, ns):
        keys = self.sorted_keys()
        if ns is None:
            return keys
        lo = bisect.bisect_left(keys, ns + "/")
        hi = bisect.bisect_left(keys, ns + "0")  # "0" sorts right after "/"
        return keys[lo:hi]


class Watcher:
    MAX_QUEUE = 200000

    def __init__(self, storage, ns, match, bookmarks, info):
        self.storage = storage
        self.ns = ns
        self.match = match  # obj -> bool (label and field selectors)
        self.bookmarks = bookmarks
        self.info = info
        self.cond = threading.Condition(threading.Lock())
        self.queue = collections.deque()
        self.closed = False
        self.abrupt = False
        self.want_bookmark = False

    def push(self, ev):
        with self.cond:
            if len(self.queue) >= self.MAX_QUEUE:
                self.closed = True  # a consumer too slow: the real server drops it too
            else:
                self.queue.append(ev)
            self.cond.notify()

    def close(self, abrupt=False):
        with self.cond:
            self.closed = True
            self.abrupt = self.abrupt or abrupt
            self.cond.notify()

    def bookmark(self):
        with self.cond:
            self.want_bookmark = True
            self.cond.notify()

    def wait(self, timeout):
        """Returns (events, bookmark_wanted, closed)."""
        with self.cond:
            if not self.queue and not self.closed and not self.want_bookmark:
                self.cond.wait(timeout)
            evs = list(self.queue)
            self.queue.clear()
            bm = self.want_bookmark
            self.want_bookmark = False
            return evs, bm, self.closed

    def translate(self, ev):
        """The event type this watcher sees for a stored event, or None."""
        obj = ev.item.obj
        if self.ns is not None and (obj.get("metadata") or {}).get("namespace") != self.ns:
            return None
        new = self.match(obj)
        if ev.type == "ADDED":
            return "ADDED" if new else None
        if ev.type == "DELETED":
            return "DELETED" if new else None
        old = ev.old is not None and self.match(ev.old.obj)
        if new and old:
            return "MODIFIED"
        if new:
            return "ADDED"
        if old:
            return "DELETED"
        return None


class Store:
    def __init__(self, history=10000, snapshot_ttl=300.0, max_snapshots=256):
        self.lock = threading.RLock()
        self.rv = 1
        self.history_len = history
        self.storages = {}
        self.snapshots = collections.OrderedDict()  # id -> (time, rv, keys, items)
        self.snapshot_ttl = snapshot_ttl
        self.max_snapshots = max_snapshots
        self.snap_seq = 0
        self.floor = 0  # window start of storages created from now on

    def storage(self, skey):
        s = self.storages.get(skey)
        if s is None:
            with self.lock:
                s = self.storages.get(skey)
                if s is None:
                    s = self.storages[skey] = Storage(skey, self.history_len)
                    s.window_start = self.floor
        return s

    def get(self, skey, key):
        return self.storage(skey).items.get(key)

    # --- writes (callers hold self.lock for read-modify-write sequences) ---------

    def next_rv(self):
        self.rv += 1
        return self.rv

    def put(self, skey, obj, etype, old=None):
        """Stores obj (ADDED or MODIFIED) with a new resourceVersion; returns its Item."""
        with self.lock:
            rv = self.next_rv()
            obj["metadata"]["resourceVersion"] = str(rv)
            st = self.storage(skey)
            key = obj_key(obj)
            item = Item(obj)
            if key not in st.items:
                st._sorted = None
            st.items[key] = item
            self._record(st, Event(rv, etype, item, old))
            return item

    def remove(self, skey, obj):
        """Removes the object for good; the DELETED event carries a new resourceVersion."""
        with self.lock:
            rv = self.next_rv()
            obj["metadata"]["resourceVersion"] = str(rv)
            st = self.storage(skey)
            st.items.pop(obj_key(obj), None)
            st._sorted = None
            item = Item(obj)
            self._record(st, Event(rv, "DELETED", item, None))
            return item

    def _record(self, st, ev):
        if len(st.history) == st.history.maxlen:
            st.window_start = st.history[0].rv
        st.history.append(ev)
        for w in st.watchers:
            w.push(ev)

    def drop_storage(self, skey):
        with self.lock:
            st = self.storages.pop(skey, None)
            if st:
                for w in list(st.watchers):
                    w.close()

    # --- lists ------------------------------------------------------------------

    def items(self, skey, ns):
        """All Items of a storage (in namespace ns unless None), sorted by key, and the rv."""
        with self.lock:
            st = self.storage(skey)
            return [st.items[k] for k in st.range(ns)], self.rv

    def list_page(self, skey, ns, match, limit, cont):
        """Returns (items, rv, continue token, remainingItemCount) of one list page."""
        if cont:
            snap_id, start = self._decode_continue(cont)
            with self.lock:
                snap = self.snapshots.get(snap_id)
                if snap is not None:
                    self.snapshots.move_to_end(snap_id)
            if snap is None:
                raise Gone("The provided continue parameter is too old to display a consistent "
                           "list result. You can start a new list without the continue parameter, "
                           "or use the continue token in this response to retrieve the remainder "
                           "of the results. Continuing with the provided token results in an "
                           "inconsistent list - objects that were created, modified, or deleted "
                           "between the time the first chunk was returned and now may show up "
                           "in the list.")
            _t, rv, keys, items = snap
            i = bisect.bisect_left(keys, start)
            return self._page(snap_id, rv, keys[i:], items[i:], limit)
        items, rv = self.items(skey, ns)
        if match is not None:
            items = [it for it in items if match(it.obj)]
        if not limit or len(items) <= limit:
            return items, rv, None, None
        keys = [obj_key(it.obj) for it in items]
        with self.lock:
            self._expire_snapshots()
            self.snap_seq += 1
            snap_id = self.snap_seq
            self.snapshots[snap_id] = (time.monotonic(), rv, keys, items)
        return self._page(snap_id, rv, keys, items, limit)

    def _page(self, snap_id, rv, keys, items, limit):
        if not limit or len(items) <= limit:
            return items, rv, None, None
        page = items[:limit]
        token = {"v": "meta.k8s.io/v1", "rv": rv, "start": keys[limit - 1] + "\x00", "snap": snap_id}
        cont = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
        return page, rv, cont, len(items) - limit

    @staticmethod
    def _decode_continue(cont):
        try:
            pad = "=" * (-len(cont) % 4)
            token = json.loads(base64.urlsafe_b64decode(cont + pad))
            return int(token["snap"]), str(token["start"])
        except Exception:
            raise ValueError("continue key is not valid: incorrect encoded start resourceVersion "
                             "(version meta.k8s.io/v1)")

    def _expire_snapshots(self):
        now = time.monotonic()
        while self.snapshots:
            sid, snap = next(iter(self.snapshots.items()))
            if len(self.snapshots) > self.max_snapshots or now - snap[0] > self.snapshot_ttl:
                del self.snapshots[sid]
            else:
                break

    # --- watches ----------------------------------------------------------------

    def watch(self, skey, ns, match, rv_param, initial, bookmarks, info):
        """Registers a watcher. Returns (watcher, initial items, replayed events, rv).

        rv_param "" or "0" (or initial=True): synthetic ADDED events for the current
        state, then changes. A number: every change after it, or Gone when it is older
        than the history window."""
        with self.lock:
            st = self.storage(skey)
            init_items = None
            replay = []
            if initial or rv_param in (None, "", "0"):
                init_items = [st.items[k] for k in st.range(ns)]
            else:
                try:
                    rv = int(rv_param)
                except ValueError:
                    raise ValueError('invalid resource version "%s"' % rv_param)
                if rv < st.window_start:
                    raise Gone("too old resource version: %d (%d)" % (rv, st.window_start))
                for ev in reversed(st.history):
                    if ev.rv <= rv:
                        break
                    replay.append(ev)
                replay.reverse()
            w = Watcher(st, ns, match, bookmarks, info)
            st.watchers.add(w)
            return w, init_items, replay, self.rv

    def unwatch(self, w):
        with self.lock:
            w.storage.watchers.discard(w)

    def watchers(self):
        with self.lock:
            return [w for st in self.storages.values() for w in st.watchers]

    def forget_history(self):
        """Makes every watch resume and every continue token answer 410 Gone."""
        with self.lock:
            for st in self.storages.values():
                st.history.clear()
                st.window_start = self.rv
            self.floor = self.rv
            self.snapshots.clear()

    def clear(self):
        with self.lock:
            for st in self.storages.values():
                for w in list(st.watchers):
                    w.close()
            self.storages = {}
            self.snapshots.clear()
            self.floor = self.rv
