"""meta.k8s.io Table output (what `kubectl get` asks for), with a few kind printers."""
import calendar
import time

from .store import DUMPS


def age(ts):
    if not ts:
        return "<unknown>"
    try:
        t = calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return "<invalid>"
    d = max(0, int(time.time() - t))
    if d < 120:
        return "%ds" % d
    if d < 600:
        return "%dm%ds" % (d // 60, d % 60) if d % 60 else "%dm" % (d // 60)
    if d < 3 * 3600:
        return "%dm" % (d // 60)
    if d < 48 * 3600:
        return "%dh" % (d // 3600)
    return "%dd" % (d // 86400)


def _col(name, typ="string", fmt="", priority=0):
    return {"name": name, "type": typ, "format": fmt, "description": name, "priority": priority}


def _pod(o):
    md, spec, st = o.get("metadata") or {}, o.get("spec") or {}, o.get("status") or {}
    cs = st.get("containerStatuses") or []
    ready = sum(1 for c in cs if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in cs)
    phase = st.get("reason") or st.get("phase") or "Unknown"
    if md.get("deletionTimestamp"):
        phase = "Terminating"
    return ["%d/%d" % (ready, len(spec.get("containers") or [])), phase, restarts,
            age(md.get("creationTimestamp")), st.get("podIP") or "<none>", spec.get("nodeName") or "<none>"]


def _node(o):
    md, spec, st = o.get("metadata") or {}, o.get("spec") or {}, o.get("status") or {}
    ready = "Unknown"
    for c in st.get("conditions") or []:
        if c.get("type") == "Ready":
            ready = "Ready" if c.get("status") == "True" else "NotReady"
    if spec.get("unschedulable"):
        ready += ",SchedulingDisabled"
    roles = sorted(k.split("/", 1)[1] for k in (md.get("labels") or {})
                   if k.startswith("node-role.kubernetes.io/"))
    return [ready, ",".join(roles) or "<none>", age(md.get("creationTimestamp")),
            (st.get("nodeInfo") or {}).get("kubeletVersion", "")]


def _deploy(o):
    spec, st = o.get("spec") or {}, o.get("status") or {}
    return ["%d/%d" % (st.get("readyReplicas") or 0, spec.get("replicas") or 0),
            st.get("updatedReplicas") or 0, st.get("availableReplicas") or 0,
            age(o["metadata"].get("creationTimestamp"))]


def _ns(o):
    return [(o.get("status") or {}).get("phase", ""), age(o["metadata"].get("creationTimestamp"))]


PRINTERS = {
    "Pod": ([_col("Ready"), _col("Status"), _col("Restarts", "integer"), _col("Age"),
             _col("IP", priority=1), _col("Node", priority=1)], _pod),
    "Node": ([_col("Status"), _col("Roles"), _col("Age"), _col("Version")], _node),
    "Deployment": ([_col("Ready"), _col("Up-to-date", "integer"), _col("Available", "integer"),
                    _col("Age")], _deploy),
    "Namespace": ([_col("Status"), _col("Age")], _ns),
}


def _default(o):
    return [age((o.get("metadata") or {}).get("creationTimestamp"))]


def table(res, objs, md, include, version="v1"):
    """A Table for objs (a list of dicts); include is "None", "Metadata" or "Object"."""
    cols, fn = PRINTERS.get(res.kind if not res.crd else "", ([_col("Age")], _default))
    rows = []
    for o in objs:
        row = {"cells": [o.get("metadata", {}).get("name", "")] + fn(o)}
        if include == "Object":
            row["object"] = o
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": o.get("metadata") or {}}
        rows.append(row)
    t = {"kind": "Table", "apiVersion": "meta.k8s.io/" + version, "metadata": md,
         "columnDefinitions": [_col("Name", fmt="name")] + cols, "rows": rows}
    return DUMPS(t)


def partial(obj, version="v1"):
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/" + version,
            "metadata": obj.get("metadata") or {}}
