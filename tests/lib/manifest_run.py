#!/usr/bin/env python3
"""Run one container of a Kubernetes manifest as a local process, the way the kubelet would
start it: its command and args, with $(VAR) references expanded from the container's
environment, and that environment (env and envFrom, with valueFrom resolved from test values).
Used by tests/integration/upstream_manifests.sh on the upstream charts' manifests
(tests/data/manifests/upstream/), and meant for any script that runs a role from a rendered
manifest (make demo, deploy/ checks).

    manifest_run.py FILE [FILE...] --container NAME [--kind KIND] [--name NAME]
        [--set REF=VALUE]... [--values FILE.json]
        [--env NAME=VALUE]... [--pass-env PATTERN]... [--inherit-env]
        [--mount-root DIR] [--path-map FROM=TO]... [--port-map OLD=NEW]...
        [--bin-dir DIR] [--entrypoint PATH] [--extra-arg ARG]... [--lifecycle preStop]
        (--print-argv | --print-env | --print-json | --exec)
    manifest_run.py FILE [FILE...] --list [--image IMAGE]

Selecting: the container NAME in the workloads (Pod, Deployment, DaemonSet, StatefulSet,
ReplicaSet, Job, CronJob) of the files; --kind and --name choose among several.

Values (what the API server and the kubelet would supply):
  --set fieldRef:spec.nodeName=ip-10-0-0-1    a fieldRef's value (metadata.namespace defaults
                                              to the object's namespace)
  --set secretKeyRef:NAME/KEY=VALUE           a Secret key; Secrets in the files count too
  --set configMapKeyRef:NAME/KEY=VALUE        a ConfigMap key; ConfigMaps in the files count too
  --values FILE.json   {"fieldRef": {"spec.nodeName": "..."}, "secretKeyRef": {"NAME/KEY": "..."},
                        "configMapKeyRef": {"NAME/KEY": "..."}}
A reference marked optional that has no value leaves the variable unset; any other missing
value is an error (exit 2), as the kubelet refuses to start such a container.

Environment: the process gets only the container's environment and PATH (a container's
standard PATH), plus --env NAME=VALUE (what the test bed adds: endpoints of the local peers, a
kubeconfig standing for the in-cluster one) and the parent's variables matching --pass-env
(fnmatch patterns, e.g. 'ASAN_*'); --inherit-env starts from the whole parent environment.

Paths and ports (a pod has its own mounts and network namespace; a test process shares the
host's):
  --mount-root DIR   every volumeMount's mountPath becomes DIR/<volume name>[/<subPath>] in the
                     args and the environment; the directories are made, and secret and
                     configMap volumes are written from the values (their items, or every
                     key given), on --exec and --print-mounts
  --path-map FROM=TO any other path prefix to rewrite the same way
  --port-map OLD=NEW a port in host:port values (":OLD"), in --*port=OLD flags and in the
                     value of a variable named *PORT (PROBES_SERVER_PORT=8080)
Binary:
  --bin-dir DIR      the command's first word is looked up by its base name in DIR (a
                     directory of links named like the upstream binaries)
  --entrypoint PATH  the image's ENTRYPOINT, for a container without a command
  --extra-arg ARG    appended after the manifest's args (say why where it is used)
  --lifecycle preStop  the container's preStop exec command instead (no $(VAR) expansion, as
                     the kubelet does for hooks), with the container's environment
Output: --print-argv (one shell-quoted line), --print-env (NAME=VALUE lines), --print-json
({"argv", "env", "mounts", "object"}), --print-mounts (mountPath -> directory lines),
--exec (replaces this process). --list prints one JSON object per container.
"""
import argparse
import base64
import fnmatch
import json
import os
import re
import shlex
import sys

import yaml

CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
WORKLOADS = ("Pod", "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob",
             "ReplicationController")


class Fail(Exception):
    pass


def pod_spec(obj):
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec") or {})
    return ((spec.get("template") or {}).get("spec") or {})


def load(files):
    objs = []
    for f in files:
        with open(f) as fh:
            for i, doc in enumerate(yaml.safe_load_all(fh)):
                if isinstance(doc, dict) and doc.get("kind"):
                    doc["_source"] = "%s#%d" % (f, i)
                    objs.append(doc)
    return objs


def meta(obj, key, default=None):
    return (obj.get("metadata") or {}).get(key, default)


def containers(objs):
    for obj in objs:
        if obj["kind"] not in WORKLOADS:
            continue
        spec = pod_spec(obj)
        for c in spec.get("containers") or []:
            yield obj, spec, c


def select(objs, args):
    found = [(o, s, c) for o, s, c in containers(objs)
             if c.get("name") == args.container and (not args.kind or o["kind"] == args.kind)
             and (not args.name or meta(o, "name") == args.name)]
    if not found:
        raise Fail("no container %r%s%s in %s" % (
            args.container, " in a %s" % args.kind if args.kind else "",
            " named %r" % args.name if args.name else "", ", ".join(args.files)))
    if len(found) > 1:
        raise Fail("container %r is in %d objects: %s: give --kind or --name" % (
            args.container, len(found),
            ", ".join("%s/%s" % (o["kind"], meta(o, "name")) for o, _, _ in found)))
    return found[0]


class Values:
    """The values a cluster would supply: fieldRefs, Secret and ConfigMap keys."""

    def __init__(self, objs, sets, values_file):
        self.field = {}
        self.secret = {}  # (namespace or None, name) -> {key: value}
        self.configmap = {}
        for o in objs:
            ns = meta(o, "namespace")
            if o["kind"] == "Secret":
                d = {k: base64.b64decode(v).decode() for k, v in (o.get("data") or {}).items()}
                d.update(o.get("stringData") or {})
                self.secret[(ns, meta(o, "name"))] = d
            elif o["kind"] == "ConfigMap":
                self.configmap[(ns, meta(o, "name"))] = dict(o.get("data") or {})
        if values_file:
            with open(values_file) as fh:
                v = json.load(fh)
            for k, val in (v.get("fieldRef") or {}).items():
                self.field[k] = str(val)
            for what, table in (("secretKeyRef", self.secret),
                                ("configMapKeyRef", self.configmap)):
                for k, val in (v.get(what) or {}).items():
                    self._put(table, what, k, val)
        for s in sets:
            ref, sep, val = s.partition("=")
            kind, sep2, key = ref.partition(":")
            if not sep or not sep2:
                raise Fail("--set %r: not REF=VALUE (REF fieldRef:PATH, secretKeyRef:NAME/KEY "
                           "or configMapKeyRef:NAME/KEY)" % s)
            if kind == "fieldRef":
                self.field[key] = val
            elif kind == "secretKeyRef":
                self._put(self.secret, kind, key, val)
            elif kind == "configMapKeyRef":
                self._put(self.configmap, kind, key, val)
            else:
                raise Fail("--set %r: unknown reference kind %r" % (s, kind))

    @staticmethod
    def _put(table, what, key, val):
        name, sep, k = key.partition("/")
        if not sep or not name or not k:
            raise Fail("%s %r: not NAME/KEY" % (what, key))
        table.setdefault((None, name), {})[k] = str(val)

    @staticmethod
    def _get(table, ns, name):
        if (ns, name) in table:
            return table[(ns, name)]
        return table.get((None, name))

    def secret_data(self, ns, name):
        return self._get(self.secret, ns, name)

    def configmap_data(self, ns, name):
        return self._get(self.configmap, ns, name)


def string(v, what):
    """A manifest's value where Kubernetes takes only a string (an env value, an arg)."""
    if not isinstance(v, str):
        raise Fail("%s: %r is not a string (the API server refuses it: quote it)" % (what, v))
    return v


def expand(s, env):
    """Kubernetes' $(VAR) expansion: a defined variable is replaced, an undefined reference is
    kept as written, $$ is a literal $."""
    out, i, n = [], 0, len(s)
    while i < n:
        ch = s[i]
        if ch != "$" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            end = s.find(")", i + 2)
            if end < 0:  # an unclosed reference: "$(" stays, the rest is read on
                out.append("$(")
                i += 2
                continue
            name = s[i + 2:end]
            out.append(env[name] if name in env else "$(%s)" % name)
            i = end + 1
        else:
            out.append(ch)
            out.append(nxt)
            i += 2
    return "".join(out)


def resolve_env(obj, c, vals):
    """The container's environment in the kubelet's order: envFrom, then env (later wins);
    env values may reference the variables defined before them."""
    ns = meta(obj, "namespace")
    env = {}
    for src in c.get("envFrom") or []:
        prefix = src.get("prefix", "")
        for what, getter in (("configMapRef", vals.configmap_data),
                             ("secretRef", vals.secret_data)):
            ref = src.get(what)
            if ref is None:
                continue
            data = getter(ns, ref.get("name"))
            if data is None:
                if ref.get("optional"):
                    continue
                raise Fail("envFrom %s %r: no value given" % (what, ref.get("name")))
            for k, v in data.items():
                env[prefix + k] = v
    for e in c.get("env") or []:
        name = e["name"]
        if "value" in e or "valueFrom" not in e:
            env[name] = expand(string(e.get("value", ""), "env " + name), env)
            continue
        vf = e["valueFrom"]
        if "fieldRef" in vf:
            path = vf["fieldRef"].get("fieldPath")
            if path in vals.field:
                env[name] = vals.field[path]
            elif path == "metadata.namespace" and ns:
                env[name] = ns
            else:
                raise Fail("env %s: fieldRef %s has no value (--set fieldRef:%s=...)" %
                           (name, path, path))
            continue
        for what, getter in (("secretKeyRef", vals.secret_data),
                             ("configMapKeyRef", vals.configmap_data)):
            if what not in vf:
                continue
            ref = vf[what]
            data = getter(ns, ref.get("name")) or {}
            if ref.get("key") in data:
                env[name] = data[ref["key"]]
            elif not ref.get("optional"):
                raise Fail("env %s: %s %s/%s has no value (--set %s:%s/%s=...)" % (
                    name, what, ref.get("name"), ref.get("key"), what, ref.get("name"),
                    ref.get("key")))
            break
        else:
            raise Fail("env %s: valueFrom %s is not supported" % (name, sorted(vf)))
    return env


def mount_map(spec, c, root):
    """mountPath -> (directory, volume) for every volumeMount of the container."""
    vols = {v["name"]: v for v in spec.get("volumes") or []}
    out = {}
    for m in c.get("volumeMounts") or []:
        vol = vols.get(m["name"])
        if vol is None:
            raise Fail("volumeMount %r: no such volume in the pod" % m["name"])
        d = os.path.join(root, m["name"])
        if m.get("subPath"):
            d = os.path.join(d, m["subPath"])
        out[m["mountPath"].rstrip("/") or "/"] = (d, vol)
    return out


def make_mounts(mounts, obj, vals):
    ns = meta(obj, "namespace")
    for d, vol in mounts.values():
        os.makedirs(d, exist_ok=True)
        for what, getter, key in (("secret", vals.secret_data, "secretName"),
                                  ("configMap", vals.configmap_data, "name")):
            src = vol.get(what)
            if src is None:
                continue
            data = getter(ns, src.get(key))
            if data is None:
                if src.get("optional"):
                    continue
                raise Fail("volume %r: %s %r has no value" % (vol["name"], what, src.get(key)))
            items = src.get("items") or [{"key": k, "path": k} for k in sorted(data)]
            for it in items:
                if it["key"] not in data:
                    raise Fail("volume %r: %s %r has no key %r" % (
                        vol["name"], what, src.get(key), it["key"]))
                p = os.path.join(d, it["path"])
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "w") as fh:
                    fh.write(data[it["key"]])


def rewriter(path_maps, port_maps):
    """A function applying the path prefixes (longest first, at a path boundary: the start,
    after ':', '=', ',', a blank or a scheme's '//') and the port maps to a string."""
    pats = []
    for frm, to in sorted(path_maps, key=lambda p: -len(p[0])):
        frm = frm.rstrip("/") or "/"
        pats.append((re.compile(r"(?:^|(?<=[:=,\s])|(?<=//))" + re.escape(frm) +
                                r"(?=/|$|[^\w.-])"), to.rstrip("/")))
    ports = []
    for old, new in port_maps:
        ports.append((re.compile(r"(?<=:)" + re.escape(old) + r"(?!\d)"), new))
        ports.append((re.compile(r"^(--?[\w-]*port)=" + re.escape(old) + r"$"), r"\g<1>=" + new))

    def rewrite(s):
        for rx, to in pats:
            s = rx.sub(lambda m, to=to: to, s)
        for rx, to in ports:
            s = rx.sub(to, s)
        return s
    return rewrite


def pairs(items, what):
    out = []
    for it in items:
        a, sep, b = it.partition("=")
        if not sep or not a:
            raise Fail("%s %r: not OLD=NEW" % (what, it))
        out.append((a, b))
    return out


def build(args, objs):
    obj, spec, c = select(objs, args)
    vals = Values(objs, args.set, args.values)
    env = resolve_env(obj, c, vals)
    if args.lifecycle:
        hook = ((c.get("lifecycle") or {}).get(args.lifecycle) or {}).get("exec")
        if not hook or not hook.get("command"):
            raise Fail("container %r has no %s exec hook" % (c["name"], args.lifecycle))
        argv = [str(a) for a in hook["command"]]
    else:
        command = [string(a, "command") for a in c.get("command") or []]
        if not command:
            if not args.entrypoint:
                raise Fail("container %r has no command: give --entrypoint (the image's "
                           "ENTRYPOINT)" % c["name"])
            command = [args.entrypoint]
        argv = [expand(a, env) for a in command + [string(a, "args") for a in c.get("args") or []]]
    argv += args.extra_arg
    mounts = {}
    path_maps = pairs(args.path_map, "--path-map")
    if args.mount_root:
        mounts = mount_map(spec, c, os.path.abspath(args.mount_root))
        path_maps += [(mp, d) for mp, (d, _) in mounts.items()]
    rw = rewriter(path_maps, pairs(args.port_map, "--port-map"))
    argv = [rw(a) for a in argv]
    env = {k: rw(v) for k, v in env.items()}
    # a variable naming a port (PROMETHEUS_SERVER_PORT=9092, the node-termination-handler's)
    pm = dict(pairs(args.port_map, "--port-map"))
    env = {k: pm.get(v, v) if k.endswith("PORT") else v for k, v in env.items()}
    if args.bin_dir:
        b = os.path.join(os.path.abspath(args.bin_dir), os.path.basename(argv[0]))
        if not os.path.exists(b):
            raise Fail("--bin-dir: no %s in %s" % (os.path.basename(argv[0]), args.bin_dir))
        argv[0] = b
    if args.inherit_env:
        base = dict(os.environ)
    else:
        base = {"PATH": CONTAINER_PATH}
        for pat in args.pass_env:
            base.update({k: v for k, v in os.environ.items() if fnmatch.fnmatchcase(k, pat)})
    base.update(env)
    for k, v in pairs(args.env, "--env"):
        base[k] = v
    return obj, c, vals, argv, base, env, mounts


def main():
    p = argparse.ArgumentParser(
        description="Run one container of a Kubernetes manifest as a local process "
        "(see the module's documentation).")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--container")
    p.add_argument("--kind")
    p.add_argument("--name")
    p.add_argument("--set", action="append", default=[], metavar="REF=VALUE")
    p.add_argument("--values", metavar="FILE.json")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--pass-env", action="append", default=[], metavar="PATTERN")
    p.add_argument("--inherit-env", action="store_true")
    p.add_argument("--mount-root", metavar="DIR")
    p.add_argument("--path-map", action="append", default=[], metavar="FROM=TO")
    p.add_argument("--port-map", action="append", default=[], metavar="OLD=NEW")
    p.add_argument("--bin-dir", metavar="DIR")
    p.add_argument("--entrypoint", metavar="PATH")
    p.add_argument("--extra-arg", action="append", default=[], metavar="ARG")
    p.add_argument("--lifecycle", choices=("preStop", "postStart"))
    p.add_argument("--image", help="with --list: only containers of this image")
    out = p.add_mutually_exclusive_group(required=True)
    for o in ("list", "print-argv", "print-env", "print-json", "print-mounts", "exec"):
        out.add_argument("--" + o, action="store_true")
    args = p.parse_args()
    try:
        objs = load(args.files)
        if args.list:
            for o, _, c in containers(objs):
                if args.image and c.get("image") != args.image:
                    continue
                print(json.dumps({"source": o["_source"], "kind": o["kind"],
                                  "namespace": meta(o, "namespace"), "name": meta(o, "name"),
                                  "container": c["name"], "image": c.get("image"),
                                  "command": c.get("command") or [],
                                  "args": [str(a) for a in c.get("args") or []]}))
            return 0
        if not args.container:
            raise Fail("--container is required")
        obj, c, vals, argv, env, cenv, mounts = build(args, objs)
        if args.print_argv:
            print(shlex.join(argv))
        elif args.print_env:
            for k, v in env.items():
                print("%s=%s" % (k, v))
        elif args.print_json:
            print(json.dumps({"argv": argv, "env": env, "container_env": cenv,
                              "mounts": {k: d for k, (d, _) in mounts.items()},
                              "object": "%s/%s" % (obj["kind"], meta(obj, "name"))}))
        elif args.print_mounts:
            make_mounts(mounts, obj, vals)
            for k, (d, _) in mounts.items():
                print("%s -> %s" % (k, d))
        else:
            make_mounts(mounts, obj, vals)
            sys.stdout.flush()
            os.execvpe(argv[0], argv, env)
    except Fail as e:
        print("manifest_run: %s" % e, file=sys.stderr)
        return 2
    except (OSError, yaml.YAMLError) as e:
        print("manifest_run: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
