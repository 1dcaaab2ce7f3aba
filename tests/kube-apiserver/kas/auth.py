"""Authentication (bearer tokens, client certificates) and RBAC-ish authorization.

Config (JSON, see README.md):
  {"tokens": [{"token": "t", "user": "alice", "uid": "1", "groups": ["g"],
               "audiences": ["a"], "extra": {"k": ["v"]}}],
   "rules":  [{"name": "r", "users": ["alice"], "groups": ["g"], "verbs": ["get"],
               "apiGroups": [""], "resources": ["pods", "pods/log"], "resourceNames": [],
               "namespaces": ["default"], "nonResourceURLs": ["/metrics"]}],
   "anonymous": false, "authorize": false, "apiAudiences": ["https://kubernetes.default.svc"],
   "clientCerts": [{"name": "alice", "user": "alice", "groups": ["g"]}]}
"""
import threading

DEFAULT_AUDIENCES = ["https://kubernetes.default.svc.cluster.local"]

DEFAULT_RULES = [
    {"name": "cluster-admin", "groups": ["system:masters"], "verbs": ["*"], "apiGroups": ["*"],
     "resources": ["*"], "nonResourceURLs": ["*"]},
    {"name": "system:discovery", "groups": ["system:authenticated"], "verbs": ["get"],
     "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/version", "/version/",
                         "/healthz", "/livez", "/readyz", "/openapi", "/openapi/*"]},
    {"name": "system:basic-user", "groups": ["system:authenticated"], "verbs": ["create"],
     "apiGroups": ["authorization.k8s.io", "authentication.k8s.io"],
     "resources": ["selfsubjectaccessreviews", "selfsubjectreviews", "selfsubjectrulesreviews"]},
]


def _list(rule, plural, singular):
    v = rule.get(plural)
    if v is None and singular in rule:
        v = [rule[singular]]
    return v or []


class Auth:
    def __init__(self, admin_token):
        self.lock = threading.Lock()
        self.admin_token = admin_token
        self.reset()

    def reset(self):
        with self.lock:
            self.tokens = {self.admin_token: {"user": "admin", "uid": "admin",
                                              "groups": ["system:masters"]}}
            self.rules = list(DEFAULT_RULES)
            self.anonymous = False
            self.enforce = False
            self.audiences = list(DEFAULT_AUDIENCES)
            self.config = {}

    def load(self, cfg, replace=False):
        if replace:
            self.reset()
        with self.lock:
            for t in cfg.get("tokens") or []:
                if not isinstance(t, dict) or not t.get("token"):
                    raise ValueError("every token needs a \"token\"")
                self.tokens[t["token"]] = dict(t)
            for r in cfg.get("rules") or []:
                if not isinstance(r, dict):
                    raise ValueError("a rule must be an object")
                self.rules.append(dict(r))
            if "anonymous" in cfg:
                self.anonymous = bool(cfg["anonymous"])
            if "authorize" in cfg:
                self.enforce = bool(cfg["authorize"])
            if cfg.get("apiAudiences"):
                self.audiences = list(cfg["apiAudiences"])
            self.config.update(cfg)

    def dump(self):
        with self.lock:
            return {"tokens": [dict(v, token=k) for k, v in self.tokens.items()],
                    "rules": list(self.rules), "anonymous": self.anonymous,
                    "authorize": self.enforce, "apiAudiences": self.audiences}

    # --- authentication -------------------------------------------------------------

    def _user_from_token(self, token, api=False):
        with self.lock:
            t = self.tokens.get(token)
            if t is not None and api and t.get("audiences") and \
                    not any(a in self.audiences for a in t["audiences"]):
                return None  # a token for another audience is no good for the API itself
        if t is None:
            return None
        groups = list(t.get("groups") or [])
        if "system:authenticated" not in groups:
            groups.append("system:authenticated")
        u = {"username": t.get("user") or t.get("username") or "", "uid": t.get("uid", ""),
             "groups": groups}
        if t.get("extra"):
            u["extra"] = t["extra"]
        return u

    def authenticate(self, authorization, peercert):
        """Returns a user dict, or None when the request must get 401."""
        if peercert and peercert.get("subject"):
            cn, orgs = None, []
            for rdn in peercert["subject"]:
                for k, v in rdn:
                    if k == "commonName":
                        cn = v
                    elif k == "organizationName":
                        orgs.append(v)
            if cn:
                return {"username": cn, "uid": "", "groups": orgs + ["system:authenticated"]}
        if authorization:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                return None
            return self._user_from_token(token.strip(), api=True)
        if self.anonymous:
            return {"username": "system:anonymous", "uid": "", "groups": ["system:unauthenticated"]}
        return None

    def token_review(self, spec):
        token = (spec or {}).get("token") or ""
        with self.lock:
            t = self.tokens.get(token)
            api_aud = list(self.audiences)
        if t is None:
            return {"authenticated": False, "user": {}, "error": "[invalid bearer token]"}
        token_aud = list(t.get("audiences") or api_aud)
        wanted = list((spec or {}).get("audiences") or api_aud)
        common = [a for a in wanted if a in token_aud]
        if not common:
            return {"authenticated": False, "user": {},
                    "error": "[invalid bearer token, token audiences %s is invalid for the target "
                             "audiences %s]" % (_golist(token_aud), _golist(wanted))}
        user = self._user_from_token(token)
        return {"authenticated": True, "user": user, "audiences": common}

    # --- authorization --------------------------------------------------------------

    def authorize(self, user, groups, attrs):
        """attrs: {"verb", "group", "resource", "subresource", "namespace", "name"} or
        {"verb", "path"} for a non-resource URL. Returns (allowed, reason)."""
        with self.lock:
            rules = list(self.rules)
        for i, r in enumerate(rules):
            if not self._subject(r, user, groups):
                continue
            if not _match(_list(r, "verbs", "verb"), attrs.get("verb", "")):
                continue
            if "path" in attrs:
                if not any(_match_url(u, attrs["path"]) for u in _list(r, "nonResourceURLs", "nonResourceURL")):
                    continue
            else:
                if not _list(r, "resources", "resource"):
                    continue
                if not _match(_list(r, "apiGroups", "apiGroup"), attrs.get("group", "")):
                    continue
                res, sub = attrs.get("resource", ""), attrs.get("subresource", "")
                if not any(_match_resource(x, res, sub) for x in _list(r, "resources", "resource")):
                    continue
                names = _list(r, "resourceNames", "resourceName")
                if names and attrs.get("name", "") not in names:
                    continue
                nss = _list(r, "namespaces", "namespace")
                if nss and "*" not in nss and attrs.get("namespace", "") not in nss:
                    continue
            name = r.get("name") or "rule-%d" % i
            who = ('User "%s"' % user) if user in _list(r, "users", "user") else \
                  ('Group "%s"' % next((g for g in groups if g in _list(r, "groups", "group")), ""))
            return True, 'RBAC: allowed by ClusterRoleBinding "%s" of ClusterRole "%s" to %s' % (name, name, who)
        return False, ""

    @staticmethod
    def _subject(r, user, groups):
        users = _list(r, "users", "user")
        gs = _list(r, "groups", "group")
        if "*" in users or user in users:
            return True
        return any(g in gs for g in groups) or ("*" in gs and groups)

    def review(self, spec, self_user=None, namespace=None):
        """Answers a (Self|Local)SubjectAccessReview spec: returns its status."""
        if self_user is not None:
            user, groups = self_user["username"], self_user.get("groups") or []
        else:
            user, groups = spec.get("user", ""), list(spec.get("groups") or [])
        ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if ra is not None:
            attrs = {"verb": ra.get("verb", ""), "group": ra.get("group", ""),
                     "resource": ra.get("resource", ""), "subresource": ra.get("subresource", ""),
                     "namespace": namespace if namespace is not None else ra.get("namespace", ""),
                     "name": ra.get("name", "")}
        elif nra is not None:
            attrs = {"verb": nra.get("verb", ""), "path": nra.get("path", "")}
        else:
            return None
        ok, reason = self.authorize(user, groups, attrs)
        st = {"allowed": ok}
        if reason:
            st["reason"] = reason
        return st


def _golist(items):
    return "[" + " ".join('"%s"' % a for a in items) + "]"


def _match(allowed, value):
    return "*" in allowed or value in allowed


def _match_resource(rule_res, res, sub):
    if rule_res == "*":
        return True
    full = res + "/" + sub if sub else res
    if rule_res == full:
        return True
    return rule_res.startswith("*/") and sub and rule_res[2:] == sub


def _match_url(rule_url, path):
    if rule_url == "*":
        return True
    if rule_url.endswith("*"):
        return path.startswith(rule_url[:-1])
    return rule_url == path
