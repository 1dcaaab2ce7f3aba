#!/usr/bin/env bash
# tests: product
# deploy/ as CI checks it: kubectl's kustomize renders every folder of deploy/ that has a
# kustomization.yaml; the test API server accepts every rendered object with
# `kubectl apply --dry-run=server --validate=strict` (the VolumeSnapshotClass after the
# external-snapshotter's CRD from tests/data/deploy/); every aws-k8s command line in the rendered
# objects (containers and preStop hooks: command, args with kubelet's $(VAR) expansion, literal
# env) is accepted by `aws-k8s flags-check`, the subcommand's own flag parser; and the objects
# say what deploy/README.md promises (leader election, anti-affinity, tolerations, privileged
# node plugin with Bidirectional propagation, the preStop hook, the CSIDriver, the default
# classes, nth's two modes with the upstream chart's RBAC, probe and metrics ports, cpm's DaemonSet
# (mounts, env, probes, annotations) and its approver with least-privilege RBAC, resources on
# every aws-k8s container), cpm's etcd backup and defragmentation CronJobs (schedule, host
# networking, masters, read-only certificates, the command).
# The test API server checks field names (strict decoding), not values, required fields or
# references (the Role of a RoleBinding, a PriorityClass, a Secret): the python checks below
# cover the values this project sets.
. "$(dirname "$0")/../lib/testlib.sh"

if ! command -v kubectl >/dev/null || ! python3 -c 'import yaml' 2>/dev/null; then
	skip "deploy manifests" "kubectl or python3's yaml module missing"
	t_summary
fi
export KUBECACHEDIR=$T_TMP/kcache
DEPLOY=$T_ROOT/deploy
R=$T_TMP/rendered
mkdir -p "$R"

# --- kustomize -------------------------------------------------------------------------------
dirs=()
while IFS= read -r k; do dirs+=("$(dirname "${k#"$DEPLOY"/}")"); done < <(find "$DEPLOY" -name kustomization.yaml | sort)
if [ "${#dirs[@]}" -lt 6 ]; then
	fail "deploy/ has a base and an example for the module, ccm and csi" "found: ${dirs[*]}"
fi
for d in "${dirs[@]}"; do
	out=$R/${d//\//_}.yaml
	if kubectl kustomize "$DEPLOY/$d" >"$out" 2>"$out.err" && [ -s "$out" ]; then
		ok "kubectl kustomize deploy/$d renders $(grep -c '^kind:' "$out") objects"
	else
		fail "kubectl kustomize deploy/$d" "$(tail -3 "$out.err")"
		rm -f "$out"
	fi
done

# the helper: reads rendered YAML streams (python3 and PyYAML)
cat >"$T_TMP/m.py" <<'PY'
import json, os, re, sys, yaml

def docs(paths):
    for p in paths:
        with open(p) as f:
            for d in yaml.safe_load_all(f):
                if d:
                    yield p, d

def pod_spec(o):
    s = o.get("spec", {})
    if o.get("kind") == "Pod":  # a static pod (deploy/api-proxy)
        return s
    if o.get("kind") == "CronJob":  # deploy/cpm's etcd backup and defragmentation
        s = s.get("jobTemplate", {}).get("spec", {})
    return s.get("template", {}).get("spec") if "template" in s else None

def expand(s, env):
    # kubelet's $(VAR) expansion: defined variables are replaced, $$ is a literal $
    def rep(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", rep, s)

def runs_aws_k8s(argv):
    return bool(argv) and os.path.basename(argv[0]) in (
        "aws-k8s", "aws-cloud-controller-manager", "aws-ebs-csi-driver")

def invocations(paths):
    """One JSON line per aws-k8s command line: where, argv, literal env."""
    for p, o in docs(paths):
        spec = pod_spec(o)
        if not spec:
            continue
        for c in spec.get("initContainers", []) + spec.get("containers", []):
            env = {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}
            where = "%s %s/%s container %s" % (o["kind"], o["metadata"].get("namespace", ""),
                                               o["metadata"]["name"], c["name"])
            argv = [expand(a, env) for a in c.get("command", []) + c.get("args", [])]
            if runs_aws_k8s(argv):
                yield {"where": where, "argv": argv, "env": env}
            pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
            if runs_aws_k8s(pre):
                yield {"where": where + " preStop", "argv": pre, "env": env}

def find(objs, kind, name):
    for o in objs:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    return None

def container(o, name):
    return next(c for c in pod_spec(o)["containers"] if c["name"] == name)

def checks(paths):
    """PASS/FAIL lines: what deploy/README.md says the objects do."""
    objs = [o for _, o in docs(paths)]
    res = []
    def check(name, cond, why=""):
        res.append(("PASS " if cond else "FAIL ") + name + ("" if cond else ": " + why))
    ccm = find(objs, "Deployment", "cloud-controller-manager")
    if ccm:
        s = pod_spec(ccm)
        args = container(ccm, "cloud-controller-manager")["args"]
        check("ccm: 2 replicas with leader election", ccm["spec"]["replicas"] == 2 and
              "--leader-elect=true" in args, str(args))
        aa = s.get("affinity", {}).get("podAntiAffinity", {})
        check("ccm: pod anti-affinity preferred, not required",
              aa.get("preferredDuringSchedulingIgnoredDuringExecution") and
              not aa.get("requiredDuringSchedulingIgnoredDuringExecution"), str(aa))
        keys = {t.get("key") for t in s.get("tolerations", [])}
        want = {"node.cloudprovider.kubernetes.io/uninitialized", "node.kubernetes.io/not-ready",
                "node-role.kubernetes.io/control-plane"}
        check("ccm: tolerates the uninitialized, not-ready and control-plane taints",
              want <= keys, str(keys))
        check("ccm: host networking", s.get("hostNetwork") is True)
        check("ccm: a PodDisruptionBudget selects its pods",
              any(o["kind"] == "PodDisruptionBudget" and
                  o["spec"]["selector"]["matchLabels"].items() <=
                  ccm["spec"]["template"]["metadata"]["labels"].items() for o in objs))
        rb = find(objs, "ClusterRoleBinding", "system:cloud-controller-manager")
        check("ccm: its ClusterRole is bound to its ServiceAccount",
              rb and rb["subjects"][0]["name"] == s["serviceAccountName"] and
              find(objs, "ServiceAccount", s["serviceAccountName"]) is not None)
    node = find(objs, "DaemonSet", "ebs-csi-node")
    if node:
        c = container(node, "ebs-plugin")
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        vols = {v["name"]: v for v in pod_spec(node)["volumes"]}
        kube = [m for m in mounts.values() if m["mountPath"] == "/var/lib/kubelet"]
        check("csi-node: privileged", c["securityContext"].get("privileged") is True)
        check("csi-node: the kubelet directory mounted Bidirectional",
              kube and kube[0].get("mountPropagation") == "Bidirectional" and
              vols[kube[0]["name"]]["hostPath"]["path"] == "/var/lib/kubelet", str(kube))
        check("csi-node: the host's /dev mounted",
              any(m["mountPath"] == "/dev" and vols[n]["hostPath"]["path"] == "/dev"
                  for n, m in mounts.items()))
        pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        check("csi-node: preStop runs aws-k8s csi-node pre-stop-hook",
              pre[1:] == ["csi-node", "pre-stop-hook"] and runs_aws_k8s(pre), str(pre))
        names = [x["name"] for x in pod_spec(node)["containers"]]
        check("csi-node: with node-driver-registrar and liveness-probe",
              {"node-driver-registrar", "liveness-probe"} <= set(names), str(names))
    ctrl = find(objs, "Deployment", "ebs-csi-controller")
    if ctrl:
        names = [x["name"] for x in pod_spec(ctrl)["containers"]]
        want = ["ebs-plugin", "csi-provisioner", "csi-attacher", "csi-snapshotter",
                "csi-resizer", "liveness-probe"]
        check("csi-controller: the upstream sidecars (and kube-rbac-proxy last, if any)",
              names[:6] == want and names[6:] in ([], ["kube-rbac-proxy"]), str(names))
    drv = find(objs, "CSIDriver", "ebs.csi.aws.com")
    if drv:
        check("CSIDriver ebs.csi.aws.com: attachRequired, no podInfoOnMount, fsGroupPolicy File",
              drv["spec"] == {"attachRequired": True, "podInfoOnMount": False,
                              "fsGroupPolicy": "File"}, str(drv["spec"]))
    scs = [o for o in objs if o["kind"] == "StorageClass" and o["metadata"].get(
        "annotations", {}).get("storageclass.kubernetes.io/is-default-class") == "true"]
    if drv:
        check("one default StorageClass, gp3 on ebs.csi.aws.com",
              len(scs) == 1 and scs[0]["provisioner"] == "ebs.csi.aws.com" and
              scs[0]["parameters"]["type"] == "gp3", str(scs))
        vsc = [o for o in objs if o["kind"] == "VolumeSnapshotClass"]
        check("a VolumeSnapshotClass of ebs.csi.aws.com",
              len(vsc) == 1 and vsc[0]["driver"] == "ebs.csi.aws.com", str(vsc))
    nth_ds = find(objs, "DaemonSet", "aws-node-termination-handler")
    nth_dep = find(objs, "Deployment", "aws-node-termination-handler")
    if nth_ds or nth_dep:
        check("nth: one mode per rendering (IMDS DaemonSet or queue Deployment)",
              not (nth_ds and nth_dep))
    for nth in (nth_ds, nth_dep):
        if not nth:
            continue
        mode = "IMDS" if nth is nth_ds else "queue"
        s = pod_spec(nth)
        c = container(nth, "aws-node-termination-handler")
        env = {e["name"]: e for e in c.get("env", [])}
        val = lambda k: env.get(k, {}).get("value")
        check("nth (%s): NODE_NAME from spec.nodeName" % mode,
              env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
              == "spec.nodeName", str(env.get("NODE_NAME")))
        check("nth (%s): ENABLE_SQS_TERMINATION_DRAINING=%s" % (mode, str(nth is nth_dep).lower()),
              val("ENABLE_SQS_TERMINATION_DRAINING") == ("true" if nth is nth_dep else "false"))
        if nth is nth_ds:
            check("nth (IMDS): every taint tolerated, host networking, every Linux node",
                  {"operator": "Exists"} in s.get("tolerations", []) and s.get("hostNetwork") is True
                  and s.get("nodeSelector") == {"kubernetes.io/os": "linux"}, str(s.get("tolerations")))
        else:
            check("nth (queue): QUEUE_URL set, one replica, no host networking",
                  "QUEUE_URL" in env and nth["spec"]["replicas"] == 1 and not s.get("hostNetwork"))
        probe = c.get("livenessProbe", {}).get("httpGet", {})
        check("nth (%s): the liveness probe is the probes server (ENABLE_PROBES_SERVER, its port and path)" % mode,
              val("ENABLE_PROBES_SERVER") == "true" and str(probe.get("port")) == val("PROBES_SERVER_PORT")
              and probe.get("path") == val("PROBES_SERVER_ENDPOINT"), "%s %s" % (probe, env.get("PROBES_SERVER_PORT")))
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        check("nth (%s): port http-metrics is PROMETHEUS_SERVER_PORT" % mode,
              val("ENABLE_PROMETHEUS_SERVER") == "true" and
              str(ports.get("http-metrics")) == val("PROMETHEUS_SERVER_PORT"), str(ports))
        rb = find(objs, "ClusterRoleBinding", "aws-node-termination-handler")
        role = find(objs, "ClusterRole", "aws-node-termination-handler")
        check("nth (%s): its ClusterRole is bound to its ServiceAccount" % mode,
              rb and role and rb["roleRef"]["name"] == role["metadata"]["name"] and
              rb["subjects"][0]["name"] == s["serviceAccountName"] and
              find(objs, "ServiceAccount", s["serviceAccountName"]) is not None)
        got = {(g, r, v) for rule in (role or {}).get("rules", []) for g in rule["apiGroups"]
               for r in rule["resources"] for v in rule["verbs"]}
        want = {("", "nodes", v) for v in ("get", "list", "patch", "update")} | {
            ("", "pods", "get"), ("", "pods", "list"), ("", "pods/eviction", "create"),
            ("apps", "daemonsets", "get"), ("extensions", "daemonsets", "get"),
            ("", "events", "create"), ("", "events", "patch")}
        check("nth (%s): the ClusterRole has the upstream chart's rules, no more" % mode,
              got == want, "extra %s, missing %s" % (sorted(got - want), sorted(want - got)))
    cpm = find(objs, "DaemonSet", "d8-control-plane-manager")
    if cpm:
        s, c = pod_spec(cpm), container(cpm, "control-plane-manager")
        vols = {v["name"]: v for v in s.get("volumes", [])}
        mnt = {m["mountPath"]: (m, vols.get(m["name"], {})) for m in c.get("volumeMounts", [])}
        src = lambda p: (mnt.get(p, ({}, {}))[1].get("secret", {}).get("secretName") or
                         mnt.get(p, ({}, {}))[1].get("hostPath", {}).get("path"))
        check("cpm: the masters only, every taint tolerated, host networking",
              "node-role.kubernetes.io/control-plane" in s.get("nodeSelector", {}) and
              {"operator": "Exists"} in s.get("tolerations", []) and s.get("hostNetwork") is True)
        check("cpm: /pki, /config from the Secrets d8-pki and d8-control-plane-manager-config; "
              "the host's /etc/kubernetes, /root/.kube, /var/lib/etcd (written: an orphan's data moved aside)",
              [src(p) for p in ("/pki", "/config", "/etc/kubernetes", "/root/.kube", "/var/lib/etcd")] ==
              ["d8-pki", "d8-control-plane-manager-config", "/etc/kubernetes", "/root/.kube",
               "/var/lib/etcd"] and not mnt["/var/lib/etcd"][0].get("readOnly"), str(mnt))
        env = {e["name"]: e for e in c.get("env", [])}
        ref = lambda k: env.get(k, {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        check("cpm: MY_IP=status.hostIP, MY_POD_NAME=metadata.name, KUBERNETES_VERSION",
              ref("MY_IP") == "status.hostIP" and ref("MY_POD_NAME") == "metadata.name" and
              env.get("KUBERNETES_VERSION", {}).get("value"), str(env))
        pr = [c.get(k, {}).get("httpGet", {}) for k in ("livenessProbe", "readinessProbe")]
        check("cpm: probes /healthz and /readyz on 127.0.0.1:8095",
              [(p.get("host"), p.get("port"), p.get("path")) for p in pr] ==
              [("127.0.0.1", 8095, "/healthz"), ("127.0.0.1", 8095, "/readyz")], str(pr))
        ann = cpm["spec"]["template"]["metadata"].get("annotations", {})
        check("cpm: the pod annotations checksum/config, checksum/pki, rollout-epoch",
              {"checksum/config", "checksum/pki", "rollout-epoch"} <= set(ann), str(ann))
        ap = find(objs, "Deployment", "d8-control-plane-manager-approver")
        argv = (container(ap, "approver").get("command", []) + container(ap, "approver").get("args", [])) if ap else []
        sel = dict(a[len("--pod-selector="):].split("=", 1) for a in argv if a.startswith("--pod-selector="))
        check("cpm: the approver (cpm approve), 2 replicas with leader election, selecting the "
              "DaemonSet's pods", ap and argv[1:3] == ["cpm", "approve"] and ap["spec"]["replicas"] == 2
              and "--leader-elect=true" in argv and sel and
              sel.items() <= cpm["spec"]["template"]["metadata"]["labels"].items(), str(argv))
        got = set()
        for b in objs:
            if b["kind"] in ("ClusterRoleBinding", "RoleBinding") and any(
                    x["name"] == "d8-control-plane-manager-approver" for x in b["subjects"]):
                role = find(objs, b["roleRef"]["kind"], b["roleRef"]["name"]) or {}
                got |= {(b["kind"], g, r, v) for rule in role.get("rules", []) for g in rule["apiGroups"]
                        for r in rule["resources"] for v in rule["verbs"]}
        want = {("ClusterRoleBinding", "", "nodes", v) for v in ("get", "list", "watch", "patch")} | {
            ("ClusterRoleBinding", "", "events", v) for v in ("create", "patch")} | {
            ("RoleBinding", "", "pods", v) for v in ("get", "list", "watch")} | {
            ("RoleBinding", "coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}
        check("cpm: the approver's RBAC is nodes get/list/watch/patch, events create/patch, pods and "
              "leases in kube-system only, no more", got == want,
              "extra %s, missing %s" % (sorted(got - want), sorted(want - got)))
    # deploy/cpm's etcd CronJobs: Deckhouse's backup (schedule, one run at a time, one Job kept,
    # no retry) and the hourly defragmentation near the quota, on a master with host networking
    # and the etcd client certificates read-only
    for name, schedule, verb in (("d8-etcd-backup", "0 0 * * *", "backup"),
                                 ("d8-etcd-defrag", "27 * * * *", "defrag")):
        cj = find(objs, "CronJob", name)
        if not cj:
            continue
        s, js = pod_spec(cj), cj["spec"]["jobTemplate"]["spec"]
        c = s["containers"][0]
        argv = c.get("command", []) + c.get("args", [])
        opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
        check(name + ": schedule %r, concurrencyPolicy Forbid, history 1/1, backoffLimit 0, "
              "restartPolicy Never" % schedule,
              cj["spec"].get("schedule") == schedule and cj["spec"].get("concurrencyPolicy") == "Forbid"
              and cj["spec"].get("successfulJobsHistoryLimit") == 1 and
              cj["spec"].get("failedJobsHistoryLimit") == 1 and js.get("backoffLimit") == 0 and
              s.get("restartPolicy") == "Never", str(cj["spec"]))
        tol = {(t.get("key"), t.get("operator"), t.get("effect")) for t in s.get("tolerations", [])}
        check(name + ": host networking, on a control-plane node, its NoSchedule taint tolerated",
              s.get("hostNetwork") is True and
              "node-role.kubernetes.io/control-plane" in s.get("nodeSelector", {}) and
              (("node-role.kubernetes.io/control-plane", "Exists", "NoSchedule") in tol or
               (None, "Exists", None) in tol), "%s %s" % (s.get("nodeSelector"), tol))
        vols = {v["name"]: v for v in s.get("volumes", [])}
        mnt = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
        pki = mnt.get("/etc/kubernetes/pki/etcd", {})
        check(name + ": the host's /etc/kubernetes/pki/etcd mounted read-only, and every "
              "certificate flag under it",
              pki.get("readOnly") is True and
              vols.get(pki.get("name"), {}).get("hostPath", {}).get("path") == "/etc/kubernetes/pki/etcd"
              and all(opts.get(f, "").startswith("/etc/kubernetes/pki/etcd/") for f in ("cacert", "cert", "key"))
              and all(m.get("readOnly") for p, m in mnt.items() if p != "/var/lib/etcd"), str(mnt))
        check(name + ": runs as root (the keys are 0600 root), read-only root file system",
              c.get("securityContext", {}).get("runAsUser") == 0 and
              c.get("securityContext", {}).get("readOnlyRootFilesystem") is True)
        check(name + ": runs aws-k8s cpm etcd %s against the node's own member" % verb,
              runs_aws_k8s(argv) and argv[1:4] == ["cpm", "etcd", verb] and
              opts.get("endpoints") == "https://127.0.0.1:2379", str(argv))
        if verb == "backup":
            out = opts.get("out", "")
            bk = [m for p, m in mnt.items() if out.startswith(p.rstrip("/") + "/")]
            check(name + ": --out=/var/lib/etcd/etcd-backup.tar.gz on the host's /var/lib/etcd "
                  "(written), one file kept, 25 % left free",
                  out == "/var/lib/etcd/etcd-backup.tar.gz" and len(bk) == 1 and
                  not bk[0].get("readOnly") and
                  vols.get(bk[0]["name"], {}).get("hostPath", {}).get("path") == "/var/lib/etcd" and
                  opts.get("keep") == "1" and opts.get("min-free-percent", "25") == "25",
                  "%s %s" % (argv, mnt))
        else:
            check(name + ": every member (--cluster) at 90 % of --quota-backend-bytes, a long "
                  "command timeout", "--cluster" in argv and opts.get("min-db-size-percent") == "90"
                  and int(opts.get("quota-backend-bytes", "0")) > 0 and
                  opts.get("command-timeout", "5s") not in ("5s", ""), str(argv))
    akp = find(objs, "Pod", "kubernetes-api-proxy")
    if akp:  # deploy/api-proxy: the static pod and the Role nodes read the EndpointSlices with
        s, c = pod_spec(akp), container(akp, "kubernetes-api-proxy")
        args = dict(a[2:].split("=", 1) for a in c.get("args", []) if "=" in a)
        check("api-proxy: host networking, node-critical, on 127.0.0.1:6445 (kubelet.conf's server)",
              s.get("hostNetwork") is True and s.get("priorityClassName") == "system-node-critical"
              and args.get("listen") == "127.0.0.1:6445", str(args))
        hp = args.get("health-listen", "").rsplit(":", 1)[-1]
        probes = [c.get(p, {}).get("httpGet", {}) for p in ("livenessProbe", "readinessProbe")]
        check("api-proxy: the probes ask --health-listen", bool(hp) and all(
            str(p.get("port")) == hp and p.get("host") == "127.0.0.1" for p in probes), str(probes))
        mounts = [m["mountPath"] for m in c.get("volumeMounts", [])]
        check("api-proxy: --upstream-file and --kubeconfig are under its mounts", all(
            any(args.get(f, "").startswith(m + "/") for m in mounts) for f in ("upstream-file", "kubeconfig")),
              "%s %s" % (args, mounts))
        rb, role = find(objs, "RoleBinding", "kubernetes-api-proxy"), find(objs, "Role", "kubernetes-api-proxy")
        check("api-proxy: nodes may list and watch the EndpointSlices in default",
              rb and role and rb["metadata"].get("namespace") == "default" and
              {"kind": "Group", "name": "system:nodes", "apiGroup": "rbac.authorization.k8s.io"} in rb["subjects"] and
              any("endpointslices" in r["resources"] and {"list", "watch"} <= set(r["verbs"]) for r in role["rules"]))
    capa = find(objs, "Deployment", "capa-controller-manager")
    if capa:  # deploy/capa: CAPA's manager Deployment, its credentials and its exact RBAC
        s, c = pod_spec(capa), container(capa, "manager")
        argv = c.get("command", []) + c.get("args", [])
        opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
        check("capa: aws-k8s capa in capa-system, one replica, leader election",
              capa["metadata"].get("namespace") == "capa-system" and runs_aws_k8s(argv) and
              argv[1:2] == ["capa"] and capa["spec"]["replicas"] == 1 and "--leader-elect" in argv,
              str(argv))
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        mnt = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        vols = {v["name"]: v for v in s.get("volumes", [])}
        cred = env.get("AWS_SHARED_CREDENTIALS_FILE", "")
        check("capa: AWS_SHARED_CREDENTIALS_FILE in the Secret capa-manager-bootstrap-credentials",
              cred.rsplit("/", 1)[0] in mnt and vols.get(mnt[cred.rsplit("/", 1)[0]], {}).get(
                  "secret", {}).get("secretName") == "capa-manager-bootstrap-credentials",
              "%s %s" % (cred, mnt))
        hp = opts.get("health-addr", ":9440").rsplit(":", 1)[-1]
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        pr = [c.get(k, {}).get("httpGet", {}) for k in ("livenessProbe", "readinessProbe")]
        check("capa: the probes ask /healthz and /readyz on --health-addr (port healthz)",
              str(ports.get("healthz")) == hp and [(p.get("port"), p.get("path")) for p in pr] ==
              [("healthz", "/healthz"), ("healthz", "/readyz")], "%s %s" % (ports, pr))
        px = [x for x in s["containers"] if x["name"] == "kube-rbac-proxy"]
        pargs = dict(a[2:].split("=", 1) for a in (px[0].get("args", []) if px else []) if "=" in a)
        check("capa: the metrics (CAPA's diagnostics, port 8443) through the sidecar, the "
              "diagnostics endpoint on 127.0.0.1 only",
              px and opts.get("diagnostics-address", "").startswith("127.0.0.1:") and
              opts.get("insecure-diagnostics") == "true" and
              pargs.get("upstream") == "http://%s/" % opts["diagnostics-address"] and
              pargs.get("secure-listen-address", "").endswith(":8443") and
              any(p["name"] == "metrics" and p["containerPort"] == 8443 for p in px[0].get("ports", [])),
              "%s %s" % (opts, pargs))
        sa = s["serviceAccountName"]
        got = set()
        for b in objs:
            if b["kind"] in ("ClusterRoleBinding", "RoleBinding") and any(
                    x["kind"] == "ServiceAccount" and x["name"] == sa and
                    x.get("namespace") == "capa-system" for x in b["subjects"]):
                role = find(objs, b["roleRef"]["kind"], b["roleRef"]["name"]) or {}
                ns = b["metadata"].get("namespace", "*")
                got |= {(ns, g, r, v) for rule in role.get("rules", []) for g in rule.get("apiGroups", [])
                        for r in rule.get("resources", []) for v in rule["verbs"]}
        infra = "infrastructure.cluster.x-k8s.io"
        want = {("*", infra, r, v) for r in ("awsclusters", "awsmachines") for v in ("list", "watch", "patch")} | {
            ("*", infra, r + "/status", "patch") for r in ("awsclusters", "awsmachines")} | {
            ("*", "cluster.x-k8s.io", "clusters", "get"), ("*", "cluster.x-k8s.io", "machines", "list"),
            ("*", "cluster.x-k8s.io", "machines", "watch"), ("*", "", "secrets", "get"),
            ("*", "authentication.k8s.io", "tokenreviews", "create"),
            ("*", "authorization.k8s.io", "subjectaccessreviews", "create")} | {
            ("capa-system", "coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}
        check("capa: its RBAC is what the binary calls (AWSClusters, AWSMachines, Clusters, Machines, "
              "Secrets get, Leases in capa-system, the sidecar's reviews), no more", got == want,
              "extra %s, missing %s" % (sorted(got - want), sorted(want - got)))
    # aws-k8s rbac-proxy sidecars (deploy/rbac-proxy): the workload's metrics on 127.0.0.1 only,
    # the proxy's configuration names that upstream and a SAR on this very workload, the pod's
    # ServiceAccount may create TokenReviews and SubjectAccessReviews, the probes reach it
    for o in objs:
        spec = pod_spec(o)
        px = [c for c in (spec or {}).get("containers", []) if c["name"] == "kube-rbac-proxy"
              and runs_aws_k8s(c.get("command", []))]
        if not px:
            continue
        c, w = px[0], "%s/%s kube-rbac-proxy" % (o["kind"], o["metadata"]["name"])
        main = spec["containers"][0]
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        args = dict(a[2:].split("=", 1) for a in c.get("args", []) if "=" in a)
        if "KUBE_RBAC_PROXY_CONFIG" in env:
            cfg = yaml.safe_load(env["KUBE_RBAC_PROXY_CONFIG"])
            ups = cfg.get("upstreams") or []
            url = ups[0]["upstream"] if ups else ""
            ra = (ups[0].get("authorization") or {}).get("resourceAttributes", {}) if ups else {}
            port = re.match(r"https?://127\.0\.0\.1:(\d+)/", url)
            margs = main.get("args", [])
            bound = port and ("--http-endpoint=127.0.0.1:" + port.group(1) in margs or
                              ("--bind-address=127.0.0.1" in margs and
                               "--secure-port=" + port.group(1) in margs))
            check(w + ": the workload's metrics on 127.0.0.1, the proxy's upstream", bool(bound),
                  "%s, %s" % (url, margs))
            check(w + ": the SAR is get <workload>/prometheus-metrics on this workload",
                  ra.get("name") == o["metadata"]["name"] and
                  ra.get("resource") == o["kind"].lower() + "s" and
                  ra.get("subresource") == "prometheus-metrics" and
                  ra.get("namespace") == o["metadata"].get("namespace"), str(ra))
            # the rendered names: kustomize renames resourceNames equal to a generated name
            check(w + ": a Role in its namespace lets a scraper get it (its rendered name)",
                  any(r["kind"] == "Role" and r["metadata"].get("namespace") == ra.get("namespace")
                      and any(ra.get("apiGroup") in x.get("apiGroups", []) and "get" in x["verbs"]
                              and "%s/%s" % (ra.get("resource"), ra.get("subresource")) in x["resources"]
                              and (not x.get("resourceNames") or ra.get("name") in x["resourceNames"])
                              for x in r.get("rules", [])) for r in objs), str(ra))
        sa = spec.get("serviceAccountName")
        def grants(role):
            rules = (find(objs, "ClusterRole", role) or {}).get("rules", [])
            return all(any(res in r.get("resources", []) and "create" in r.get("verbs", [])
                           for r in rules) for res in ("tokenreviews", "subjectaccessreviews"))
        check(w + ": its ServiceAccount may create TokenReviews and SubjectAccessReviews",
              any(b["kind"] == "ClusterRoleBinding" and grants(b["roleRef"]["name"]) and
                  any(s["kind"] == "ServiceAccount" and s["name"] == sa for s in b["subjects"])
                  for b in objs), sa)
        lport = args.get("secure-listen-address", "").rsplit(":", 1)[-1]
        probes = [c.get(p, {}).get("httpGet", {}) for p in ("livenessProbe", "readinessProbe")]
        check(w + ": the probes ask the proxy over HTTPS",
              all(str(p.get("port")) == lport and p.get("scheme") == "HTTPS" for p in probes),
              "%s %s" % (lport, probes))
        vols = {v["name"] for v in spec.get("volumes", [])}
        check(w + ": its volumes exist", all(m["name"] in vols for m in c.get("volumeMounts", [])))
    for o in objs:
        spec = pod_spec(o)
        for c in (spec or {}).get("containers", []):
            if runs_aws_k8s(c.get("command", [])):
                r = c.get("resources", {})
                check("%s/%s %s: memory request and limit, CPU request" % (
                    o["kind"], o["metadata"]["name"], c["name"]),
                    r.get("requests", {}).get("memory") and r.get("requests", {}).get("cpu")
                    and r.get("limits", {}).get("memory"), str(r))
    print("\n".join(res))

mode, paths = sys.argv[1], sys.argv[2:]
if mode == "invocations":
    for i in invocations(paths):
        print(json.dumps(i))
else:
    checks(paths)
PY

# --- what the objects say --------------------------------------------------------------------
for f in "$R"/*.yaml; do
	d=$(basename "$f" .yaml)
	while IFS= read -r line; do
		case $line in
		PASS\ *) ok "deploy/${d//_//}: ${line#PASS }" ;;
		FAIL\ *) fail "deploy/${d//_//}: ${line#FAIL }" ;;
		esac
	done < <(python3 "$T_TMP/m.py" checks "$f" 2>&1 || echo "FAIL the objects can be read")
done

# --- every aws-k8s command line, through its own flag parser ---------------------------------
# flags_check JSON [EXTRA ARG]: runs `aws-k8s flags-check` on the command line, with only the
# container's literal environment; prints the exit status and the parser's message
flags_check() {
	python3 - "$1" "$AWS_K8S" "${2:-}" <<'PY'
import json, os, subprocess, sys
inv, binary, extra = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
argv = inv["argv"]
name = os.path.basename(argv[0])
cmd = [binary, "flags-check"] + ([] if name == "aws-k8s" else [name]) + argv[1:]
if extra:
    cmd.append(extra)
# the container's literal environment only (and a sanitizer build's options)
env = {k: v for k, v in os.environ.items() if k.endswith("SAN_OPTIONS")}
env["PATH"] = "/usr/bin:/bin"
env.update(inv["env"])
r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=20)
print(r.returncode, (r.stderr.strip().splitlines() or [""])[-1])
PY
}
n=0
for f in "$R"/*.yaml; do
	d=$(basename "$f" .yaml)
	while IFS= read -r inv; do
		n=$((n + 1))
		where=$(jq -r .where <<<"$inv")
		line=$(jq -r '.argv | join(" ")' <<<"$inv")
		res=$(flags_check "$inv")
		if [ "${res%% *}" = 0 ]; then
			ok "deploy/${d//_//}: $where: the binary takes '$line'"
		else
			fail "deploy/${d//_//}: $where: the binary takes '$line'" "exit ${res%% *}: ${res#* }"
		fi
		# the check can fail: the same line with an unknown flag is refused (exit 2)
		res=$(flags_check "$inv" --no-such-flag-in-deploy)
		[ "${res%% *}" = 2 ] || fail "deploy/${d//_//}: $where: an unknown flag added is refused" "exit ${res%% *}: ${res#* }"
	done < <(python3 "$T_TMP/m.py" invocations "$f")
done
# flags-check itself: it starts nothing, and tells a refused flag (2) from a command that is not
# built (1)
fc() { "$AWS_K8S" flags-check "$@" >"$T_TMP/fc.out" 2>&1; echo $?; }
rc=$(fc csi-controller controller --endpoint="unix://$T_TMP/fc.sock" --v=2)
if [ "$rc" = 0 ] && [ ! -e "$T_TMP/fc.sock" ]; then ok "flags-check csi-controller: exit 0, no socket made"
else fail "flags-check csi-controller: exit 0, no socket made" "exit $rc: $(cat "$T_TMP/fc.out")"; fi
rc=$(fc ccm --cloud-provider=aws extra)
[ "$rc" = 2 ] && grep -q "unexpected argument 'extra'" "$T_TMP/fc.out" &&
	ok "flags-check: a positional argument is refused (exit 2)" ||
	fail "flags-check: a positional argument is refused (exit 2)" "exit $rc: $(cat "$T_TMP/fc.out")"
rc=$(fc csi-node pre-stop-hook --timeout=5x)
[ "$rc" = 2 ] && grep -q "invalid duration value '5x'" "$T_TMP/fc.out" &&
	ok "flags-check: a bad value is refused with the parser's message" ||
	fail "flags-check: a bad value is refused with the parser's message" "exit $rc: $(cat "$T_TMP/fc.out")"
rc=$(fc capa --leader-elect --awscluster-concurrency=5 --feature-gates=EKS=false --v=2)
[ "$rc" = 0 ] && ok "flags-check capa: CAPA's manager flags are taken (exit 0)" ||
	fail "flags-check capa: CAPA's manager flags are taken (exit 0)" "exit $rc: $(cat "$T_TMP/fc.out")"
rc=$(fc no-such-command)
[ "$rc" = 2 ] && ok "flags-check: an unknown command exits 2" ||
	fail "flags-check: an unknown command exits 2" "exit $rc: $(cat "$T_TMP/fc.out")"

# ccm, csi-controller, csi-node and its preStop hook: 4 in the module's base and example each,
# 1 in each ccm rendering, 3 in each csi rendering
if [ "$n" -ge 16 ]; then ok "$n aws-k8s command lines checked"; else fail "aws-k8s command lines found" "only $n"; fi

# --- the test API server: dry-run, strict --------------------------------------------------
PORT=$(free_port)
KC=$T_TMP/kubeconfig
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$PORT" --kubeconfig-out "$KC"
for _ in $(seq 100); do [ -s "$KC" ] && break; sleep 0.1; done
if ! wait_http "https://127.0.0.1:$PORT/healthz" 30 || [ ! -s "$KC" ]; then
	peer fail "the test API server starts" "$(tail -5 "$T_TMP/kas.log")"
	t_summary
fi
k() { kubectl --kubeconfig "$KC" "$@"; }
peer check "the VolumeSnapshotClass CRD (external-snapshotter) is created" \
	k apply -f "$T_ROOT/tests/data/deploy/volumesnapshotclasses-crd.yaml"
# the Namespaces the renderings create (deploy/capa: capa-system): a dry run does not store
# them, so the objects in them would be refused, as a real server refuses them
for ns in $(cat "$R"/*.yaml | python3 -c 'import sys, yaml
print(" ".join(sorted({o["metadata"]["name"] for o in yaml.safe_load_all(sys.stdin) if o and o["kind"] == "Namespace"})))'); do
	peer check "the Namespace $ns of the renderings is created" k create namespace "$ns"
done
for f in "$R"/*.yaml; do
	d=$(basename "$f" .yaml)
	check "deploy/${d//_//}: kubectl apply --dry-run=server --validate=strict accepts every object" \
		k apply --dry-run=server --validate=strict -f "$f"
done
check "the dry runs stored nothing" \
	bash -c "[ -z \"\$(kubectl --kubeconfig '$KC' get deployments,daemonsets,csidrivers,storageclasses -A -o name)\" ]"
# the server refuses what it should: an unknown field in a rendered Deployment, an unknown
# field in the VolumeSnapshotClass (checked against the CRD's schema)
sed 's/^  revisionHistoryLimit: 2$/  revisionHistoryLimitz: 2/' "$R/ccm_base.yaml" >"$T_TMP/bad.yaml"
# unknown_field FILE: the server refuses FILE, naming an unknown field
unknown_field() {
	local out
	out=$(kubectl --kubeconfig "$KC" apply --dry-run=server --validate=strict -f "$1" 2>&1) && return 1
	grep -q 'unknown field' <<<"$out"
}
peer check "an unknown field in a Deployment is refused (the strict check can fail)" \
	unknown_field "$T_TMP/bad.yaml"
printf 'apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotClass\nmetadata: {name: x}\ndriver: ebs.csi.aws.com\ndeletionPolicy: Delete\ndeletionPolicyz: Delete\n' >"$T_TMP/badvsc.yaml"
peer check "an unknown field in a VolumeSnapshotClass is refused" unknown_field "$T_TMP/badvsc.yaml"

t_summary
