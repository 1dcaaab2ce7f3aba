"""The table of kinds the server knows, CRD registration, discovery and OpenAPI.

A Resource is one (group, version, plural) served over HTTP. Its objects live in
the storage named by `skey` = (group, plural): all served versions of a CRD share
one storage, like the real server (without conversion: only apiVersion changes).
"""
import hashlib
import threading

STD_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
CREATE_ONLY = ["create"]
SUB_VERBS = ["get", "patch", "update"]


class Resource:
    def __init__(self, group, version, plural, kind, namespaced, short=(), subresources=(),
                 verbs=None, singular=None, categories=(), generation=False,
                 create_on_update=False, crd=None, status_sub=None, scale=None, schema=None):
        self.group = group
        self.version = version
        self.plural = plural
        self.kind = kind
        self.namespaced = namespaced
        self.short = list(short)
        self.subresources = list(subresources)
        self.verbs = list(verbs or STD_VERBS)
        self.singular = singular or kind.lower()
        self.categories = list(categories)
        self.generation = generation
        self.create_on_update = create_on_update
        self.crd = crd  # name of the CRD that registered it, None for built-ins
        self.status_sub = ("status" in self.subresources) if status_sub is None else status_sub
        # scale: (specReplicasPath, statusReplicasPath, labelSelectorPath) for CRDs
        self.scale = scale
        # a CRD version's openAPIV3Schema (custom resources are checked against it)
        self.schema = schema
        self.skey = (group, plural)

    @property
    def api_version(self):
        return self.group + "/" + self.version if self.group else self.version

    @property
    def stored(self):
        return self.verbs != CREATE_ONLY

    def sub_kind(self, sub):
        """(group, version, kind) answered by a subresource."""
        if sub == "eviction":
            return ("policy", "v1", "Eviction")
        if sub == "scale":
            return ("autoscaling", "v1", "Scale")
        if sub == "token":
            return ("authentication.k8s.io", "v1", "TokenRequest")
        return (self.group, self.version, self.kind)

    def sub_verbs(self, sub):
        if sub in ("eviction", "token"):
            return ["create"]
        return list(SUB_VERBS)


def _r(group, version, plural, kind, namespaced, **kw):
    return Resource(group, version, plural, kind, namespaced, **kw)


ST = ("status",)
BUILTINS = [
    _r("", "v1", "namespaces", "Namespace", False, short=["ns"], subresources=["status", "finalize"]),
    _r("", "v1", "nodes", "Node", False, short=["no"], subresources=ST),
    _r("", "v1", "pods", "Pod", True, short=["po"], subresources=["status", "eviction"],
       categories=["all"]),
    _r("", "v1", "services", "Service", True, short=["svc"], subresources=ST, categories=["all"]),
    _r("", "v1", "endpoints", "Endpoints", True, short=["ep"], singular="endpoints",
       create_on_update=True),
    _r("", "v1", "secrets", "Secret", True),
    _r("", "v1", "configmaps", "ConfigMap", True, short=["cm"]),
    _r("", "v1", "events", "Event", True, short=["ev"], create_on_update=True),
    _r("", "v1", "persistentvolumes", "PersistentVolume", False, short=["pv"], subresources=ST),
    _r("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, short=["pvc"],
       subresources=ST),
    _r("", "v1", "serviceaccounts", "ServiceAccount", True, short=["sa"], subresources=["token"]),
    _r("", "v1", "replicationcontrollers", "ReplicationController", True, short=["rc"],
       subresources=["status", "scale"], generation=True, categories=["all"]),
    _r("apps", "v1", "deployments", "Deployment", True, short=["deploy"],
       subresources=["status", "scale"], generation=True, categories=["all"]),
    _r("apps", "v1", "daemonsets", "DaemonSet", True, short=["ds"], subresources=ST,
       generation=True, categories=["all"]),
    _r("apps", "v1", "replicasets", "ReplicaSet", True, short=["rs"],
       subresources=["status", "scale"], generation=True, categories=["all"]),
    _r("apps", "v1", "statefulsets", "StatefulSet", True, short=["sts"],
       subresources=["status", "scale"], generation=True, categories=["all"]),
    _r("apps", "v1", "controllerrevisions", "ControllerRevision", True),
    _r("batch", "v1", "jobs", "Job", True, subresources=ST, generation=True, categories=["all"]),
    _r("batch", "v1", "cronjobs", "CronJob", True, short=["cj"], subresources=ST,
       generation=True, categories=["all"]),
    _r("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    _r("events.k8s.io", "v1", "events", "Event", True, short=["ev"]),
    _r("coordination.k8s.io", "v1", "leases", "Lease", True),
    _r("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, subresources=ST),
    _r("storage.k8s.io", "v1", "csinodes", "CSINode", False),
    _r("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short=["sc"]),
    _r("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
    _r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, short=["pdb"],
       subresources=ST, generation=True),
    _r("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    _r("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    _r("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _r("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _r("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, verbs=CREATE_ONLY),
    _r("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False,
       verbs=CREATE_ONLY),
    _r("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False,
       verbs=CREATE_ONLY),
    _r("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
       False, verbs=CREATE_ONLY),
    _r("authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview",
       True, verbs=CREATE_ONLY),
    _r("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
       False, short=["crd", "crds"], subresources=ST, generation=True),
]

# Kinds only ever seen as request or response bodies (no storage of their own).
EXTRA_GROUP_VERSIONS = [("autoscaling", "v1")]


class Registry:
    """All served resources, built-in and from CRDs. Guarded by its own lock."""

    def __init__(self):
        self.lock = threading.RLock()
        self.by_gvr = {}      # (group, version, plural) -> Resource
        self.group_order = []  # groups in discovery order ("" first)
        self.versions = {}    # group -> [version, ...] preferred first
        self.generation = 0   # bumps on every change, used for discovery/openapi hashes
        for r in BUILTINS:
            self.add(r)

    def add(self, res):
        with self.lock:
            self.by_gvr[(res.group, res.version, res.plural)] = res
            if res.group not in self.versions:
                self.versions[res.group] = []
                self.group_order.append(res.group)
            if res.version not in self.versions[res.group]:
                self.versions[res.group].append(res.version)
            self.generation += 1

    def remove_crd(self, crd_name):
        with self.lock:
            gone = [k for k, r in self.by_gvr.items() if r.crd == crd_name]
            for k in gone:
                del self.by_gvr[k]
            self._rebuild_versions()
            self.generation += 1
            return gone

    def _rebuild_versions(self):
        present = {}
        for (g, v, _p) in self.by_gvr:
            present.setdefault(g, set()).add(v)
        for g in list(self.versions):
            self.versions[g] = [v for v in self.versions[g] if v in present.get(g, ())]
            if not self.versions[g]:
                del self.versions[g]
                self.group_order.remove(g)

    def get(self, group, version, plural):
        return self.by_gvr.get((group, version, plural))

    def in_group_version(self, group, version):
        with self.lock:
            return [r for (g, v, _p), r in self.by_gvr.items() if g == group and v == version]

    def group_versions(self):
        """[(group, [versions])] in discovery order."""
        with self.lock:
            return [(g, list(self.versions[g])) for g in self.group_order]

    def has_group_version(self, group, version):
        with self.lock:
            return version in self.versions.get(group, ())

    def storage_resources(self, skey):
        with self.lock:
            return [r for r in self.by_gvr.values() if r.skey == skey]

    def find_kind(self, api_version, kind):
        group, _, version = api_version.rpartition("/")
        with self.lock:
            for r in self.by_gvr.values():
                if r.group == group and r.version == version and r.kind == kind:
                    return r
        return None

    # --- CRDs ---------------------------------------------------------------

    def register_crd(self, crd):
        """Registers every served version of a CRD object. Returns an error text or None."""
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group = spec.get("group") or ""
        plural = names.get("plural") or ""
        kind = names.get("kind") or ""
        name = (crd.get("metadata") or {}).get("name", "")
        if not group or not plural or not kind:
            return "spec.group, spec.names.plural and spec.names.kind are required"
        if name != plural + "." + group:
            return 'metadata.name: Invalid value: "%s": must be spec.names.plural+"."+spec.group' % name
        versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
        if not versions:
            return "spec.versions: Required value: must have exactly one version marked as storage version"
        with self.lock:
            for key, r in list(self.by_gvr.items()):
                if r.crd == name:
                    del self.by_gvr[key]
            self._rebuild_versions()
            for v in versions:
                subs = (v.get("subresources") or spec.get("subresources") or {})
                sublist = []
                if "status" in subs:
                    sublist.append("status")
                scale = None
                if "scale" in subs:
                    sublist.append("scale")
                    sc = subs["scale"] or {}
                    scale = (sc.get("specReplicasPath", ".spec.replicas"),
                             sc.get("statusReplicasPath", ".status.replicas"),
                             sc.get("labelSelectorPath"))
                self.add(Resource(group, v["name"], plural, kind,
                                  spec.get("scope", "Namespaced") == "Namespaced",
                                  short=names.get("shortNames") or [],
                                  subresources=sublist, singular=names.get("singular") or None,
                                  categories=names.get("categories") or [], generation=True,
                                  crd=name, scale=scale,
                                  schema=(v.get("schema") or {}).get("openAPIV3Schema")))
        return None


# --- discovery documents ------------------------------------------------------

def api_resource_list(reg, group, version):
    gv = group + "/" + version if group else version
    out = []
    for r in sorted(reg.in_group_version(group, version), key=lambda r: r.plural):
        e = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
             "kind": r.kind, "verbs": r.verbs}
        if r.short:
            e["shortNames"] = r.short
        if r.categories:
            e["categories"] = r.categories
        if r.stored:
            e["storageVersionHash"] = hashlib.sha256(
                ("%s/%s/%s" % (r.group, r.version, r.kind)).encode()).hexdigest()[:12]
        out.append(e)
        for sub in r.subresources:
            sg, sv, sk = r.sub_kind(sub)
            se = {"name": r.plural + "/" + sub, "singularName": "", "namespaced": r.namespaced,
                  "kind": sk, "verbs": r.sub_verbs(sub)}
            if (sg, sv) != (r.group, r.version):
                se["group"] = sg
                se["version"] = sv
            out.append(se)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": out}


def _group_entry(group, versions):
    vs = [{"groupVersion": group + "/" + v, "version": v} for v in versions]
    return {"name": group, "versions": vs, "preferredVersion": vs[0]}


def api_group_list(reg):
    groups = [_group_entry(g, vs) for g, vs in reg.group_versions() if g]
    for g, v in EXTRA_GROUP_VERSIONS:
        if not any(x["name"] == g for x in groups):
            groups.append(_group_entry(g, [v]))
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(reg, group):
    for g, vs in reg.group_versions():
        if g == group and g:
            e = _group_entry(g, vs)
            e.update({"kind": "APIGroup", "apiVersion": "v1"})
            return e
    return None


def aggregated(reg, core, version="v2"):
    """apidiscovery.k8s.io APIGroupDiscoveryList for /api (core) or /apis."""
    items = []
    for g, vs in reg.group_versions():
        if (g == "") != core:
            continue
        versions = []
        for v in vs:
            resources = []
            for r in sorted(reg.in_group_version(g, v), key=lambda r: r.plural):
                e = {"resource": r.plural,
                     "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                     "scope": "Namespaced" if r.namespaced else "Cluster",
                     "singularResource": r.singular, "verbs": r.verbs}
                if r.short:
                    e["shortNames"] = r.short
                if r.categories:
                    e["categories"] = r.categories
                subs = []
                for sub in r.subresources:
                    sg, sv, sk = r.sub_kind(sub)
                    subs.append({"subresource": sub,
                                 "responseKind": {"group": sg, "version": sv, "kind": sk},
                                 "verbs": r.sub_verbs(sub)})
                if subs:
                    e["subresources"] = subs
                resources.append(e)
            versions.append({"version": v, "resources": resources, "freshness": "Current"})
        items.append({"metadata": {"name": g, "creationTimestamp": None}, "versions": versions})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/" + version,
            "metadata": {}, "items": items}


def api_versions():
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}


# --- OpenAPI ------------------------------------------------------------------
#
# kubectl needs OpenAPI v3 for two things: to learn that the server validates fields
# itself (a `fieldValidation` query parameter on the PATCH operation of the kind, so
# it skips client-side schema validation), and to look for strategic-merge support.
# The PATCH operations deliberately do not list strategic-merge-patch+json, so kubectl
# apply falls back to its compiled-in Go types for the patch metadata (built-in kinds)
# or to a JSON merge patch (custom resources) - the same patches it sends a real server.

PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
               "application/apply-patch+yaml"]


def openapi_v3_index(reg):
    paths = {}
    for g, vs in reg.group_versions():
        for v in vs:
            p = ("apis/%s/%s" % (g, v)) if g else "api/" + v
            paths[p] = {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (p, _gv_hash(reg, g, v))}
    return {"paths": paths}


def _gv_hash(reg, g, v):
    # changes whenever the registry changes (a CRD added or removed)
    return hashlib.sha512(("%d/%s/%s" % (reg.generation, g, v)).encode()).hexdigest()[:32].upper()


def openapi_v3_gv(reg, group, version):
    rs = reg.in_group_version(group, version)
    if not rs:
        return None
    prefix = "/apis/%s/%s" % (group, version) if group else "/api/" + version
    params = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
              for n in ("dryRun", "fieldManager", "fieldValidation", "force")]
    paths = {}
    schemas = {}
    for r in sorted(rs, key=lambda r: r.plural):
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        sname = "%s.%s.%s" % (r.group or "io.k8s.api.core", r.version, r.kind)
        schemas[sname] = {"type": "object", "x-kubernetes-group-version-kind": [gvk],
                          "x-kubernetes-preserve-unknown-fields": True}
        ref = {"$ref": "#/components/schemas/" + sname}
        base = prefix + ("/namespaces/{namespace}/" if r.namespaced else "/") + r.plural
        if not r.stored:
            paths[base] = {"post": _op("create", r, gvk, ref, params)}
            continue
        paths[base] = {"get": _op("list", r, gvk, ref, []), "post": _op("create", r, gvk, ref, params)}
        item = {"get": _op("get", r, gvk, ref, []), "put": _op("update", r, gvk, ref, params),
                "delete": _op("delete", r, gvk, ref, [])}
        item["patch"] = _op("patch", r, gvk, ref, params)
        item["patch"]["requestBody"] = {"content": {t: {"schema": {"type": "object"}}
                                                    for t in PATCH_TYPES}}
        paths[base + "/{name}"] = item
        for sub in r.subresources:
            if sub in ("status", "scale"):  # (eviction and token: create only)
                sg, sv, sk = r.sub_kind(sub)
                sgvk = {"group": sg, "version": sv, "kind": sk}
                p = _op("patch", r, sgvk, ref, params)
                p["requestBody"] = {"content": {t: {"schema": {"type": "object"}} for t in PATCH_TYPES}}
                paths[base + "/{name}/" + sub] = {"get": _op("get", r, sgvk, ref, []),
                                                  "put": _op("update", r, sgvk, ref, params),
                                                  "patch": p}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.4"},
            "paths": paths, "components": {"schemas": schemas}}


def _op(action, r, gvk, ref, params):
    op = {"operationId": "%s%s%s" % (action, (r.group or "core").replace(".", ""), r.kind),
          "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
          "responses": {"200": {"description": "OK",
                                "content": {"application/json": {"schema": ref}}}}}
    if params:
        op["parameters"] = params
    return op


OPENAPI_V2_JSON = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.32.4"},
                   "paths": {}, "definitions": {}}
