#!/usr/bin/env bash
# tests: product
# deploy/capa run as the kubelet would run it, under the RBAC it ships: deploy/capa/example is
# rendered (its credentials file replaced by moto's keys, as an operator edits it), applied to
# the test API server, which enforces the rendered bindings for the ServiceAccount
# capa-controller-manager (its token; "authorize": true); the Deployment's two containers
# (manager: aws-k8s capa; kube-rbac-proxy: aws-k8s kube-rbac-proxy) are started from the
# rendering through tests/lib/manifest_run.py against moto behind the fault proxy. Checked: the
# probes' endpoints, the Lease in capa-system, the AWS credentials from the mounted Secret
# (AWS_SHARED_CREDENTIALS_FILE), a two-zone cluster made ready and one machine made ready with
# no request refused (so the ClusterRole covers every call the binary makes), the metrics
# through the sidecar (a scraper bound to capa-metrics-reader: 200; no token: 401; an unbound
# user: 403), the machine and the cluster deleted with nothing left in moto, SIGTERM: exit 0.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/../lib/manifest_lib.sh"
. "$(dirname "$0")/../lib/capa_objects.sh"

for t in jq curl kubectl python3; do
	command -v $t >/dev/null || { skip "capa deploy" "$t is needed"; t_summary; }
done
python3 -c 'import yaml' 2>/dev/null || { skip "capa deploy" "python3 has no PyYAML"; t_summary; }
export KUBECACHEDIR=$T_TMP/kcache
C=c1
NS=default
SA=system:serviceaccount:capa-system:capa-controller-manager
kc() { kubectl --kubeconfig "$KC" "$@"; }

# ---- the rendering, with the test's credentials ----
R=$T_TMP/capa.yaml
if ! kubectl kustomize "$T_ROOT/deploy/capa/example" >"$T_TMP/rendered.yaml" 2>"$T_TMP/kustomize.err"; then
	fail "kubectl kustomize deploy/capa/example" "$(cat "$T_TMP/kustomize.err")"
	t_summary
fi
python3 - "$T_TMP/rendered.yaml" >"$R" <<'PY'
import base64, sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
creds = "[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n"
for o in objs:
    if o["kind"] == "Secret" and o["metadata"]["name"] == "capa-manager-bootstrap-credentials":
        o["data"]["credentials"] = base64.b64encode(creds.encode()).decode()
yaml.safe_dump_all(objs, sys.stdout)
PY
grep -q 'name: capa-manager-bootstrap-credentials' "$R" && ok "deploy/capa/example renders the credentials Secret CAPA reads" ||
	fail "deploy/capa/example renders the credentials Secret" "$(grep -c '^kind' "$R") objects"

# the server's rules: what the rendered bindings give the ServiceAccount; a scraper bound to
# capa-metrics-reader, as an operator binds it to Prometheus; a user with no binding
python3 - "$R" "$SA" >"$T_TMP/auth.json" <<'PY'
import json, sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
sa = sys.argv[2]
_, _, sa_ns, sa_name = sa.split(":")
roles = {(o["kind"], o["metadata"]["name"]): o for o in objs if o["kind"] in ("Role", "ClusterRole")}
rules = []
def bind(binding, user):
    role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
    where = [binding["metadata"]["namespace"]] if binding["kind"] == "RoleBinding" else []
    for r in role["rules"]:
        rule = {"name": binding["metadata"]["name"], "users": [user], "verbs": r["verbs"], "namespaces": where}
        if "nonResourceURLs" in r:
            rule["nonResourceURLs"] = r["nonResourceURLs"]
        else:
            rule.update(apiGroups=r["apiGroups"], resources=r["resources"],
                        resourceNames=r.get("resourceNames", []))
        rules.append(rule)
for b in objs:
    if b["kind"] in ("ClusterRoleBinding", "RoleBinding") and any(
            s["kind"] == "ServiceAccount" and s["name"] == sa_name and s.get("namespace") == sa_ns
            for s in b["subjects"]):
        bind(b, sa)
bind({"kind": "ClusterRoleBinding", "metadata": {"name": "scraper"},
      "roleRef": {"kind": "ClusterRole", "name": "capa-metrics-reader"}}, "scraper")
print(json.dumps({"authorize": True, "rules": rules, "tokens": [
    {"token": "capa-token", "user": sa, "groups": ["system:serviceaccounts"]},
    {"token": "scraper-token", "user": "scraper"}, {"token": "nobody-token", "user": "nobody"}]}))
PY
n=$(jq '[.rules[] | select(.users == ["'"$SA"'"])] | length' "$T_TMP/auth.json" 2>/dev/null)
[ "${n:-0}" -ge 6 ] && ok "the rendered bindings give capa-controller-manager $n rules" ||
	fail "the rendered bindings of capa-controller-manager" "$(head -c 300 "$T_TMP/auth.json")"

# ---- peers ----
if ! moto_start || ! faultproxy_start "$MOTO_URL"; then
	peer fail "moto and the fault proxy start"
	t_summary
fi
export MOTO_PY_ENDPOINT=$MOTO_URL
KPORT=$(free_port)
KC=$T_TMP/kc
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KPORT" --kubeconfig-out "$KC" --config "$T_TMP/auth.json"
if ! wait_http "https://127.0.0.1:$KPORT/healthz" 30 || ! wait_until 10 test -s "$KC"; then
	peer fail "the test API server starts" "$(tail -5 "$T_TMP/kas.log")"
	t_summary
fi
check "the rendering is applied (Namespace, CRDs, RBAC, Secret, Deployment)" kc apply -f "$R"
peer check "Cluster API's CRDs (Cluster, Machine) are accepted" capa_crds
SAKC=$T_TMP/sa.kc
jq '.users = [.users[] | .user = {"token": "capa-token"}]' "$KC" >"$SAKC"
out=$(kubectl --kubeconfig "$SAKC" get secrets -A 2>&1)
grep -q Forbidden <<<"$out" && peer ok "the server refuses capa-controller-manager what it is not granted (list secrets)" ||
	peer fail "the server enforces the rules" "$out"

# ---- the pod's two containers, from the rendering ----
mkdir -p "$T_TMP/bin" && ln -s "$AWS_K8S" "$T_TMP/bin/aws-k8s"
: >"$T_TMP/aws-config"
HP=$(free_port) DP=$(free_port) MP=$(free_port)
RUN=("$R" --kind Deployment --name capa-controller-manager --bin-dir "$T_TMP/bin" --mount-root "$T_TMP/pod"
	--set fieldRef:status.podIP=127.0.0.1 --port-map "9440=$HP" --port-map "8080=$DP" --port-map "8443=$MP"
	--env "KUBECONFIG=$SAKC" --env "AWS_ENDPOINT_URL=$FAULTPROXY_URL" --env "AWS_CONFIG_FILE=$T_TMP/aws-config"
	--env AWS_EC2_METADATA_DISABLED=true --pass-env 'ASAN_*' --pass-env 'UBSAN_*' --pass-env 'LSAN_*')
echo "# manager: $(python3 "$MR" "${RUN[@]}" --container manager --extra-arg=--v=2 --print-argv)"
bg capa python3 "$MR" "${RUN[@]}" --container manager --extra-arg=--v=2 --exec
bg proxy python3 "$MR" "${RUN[@]}" --container kube-rbac-proxy --exec
for p in healthz readyz; do
	check "the manager's $p probe (port healthz) answers 200" wait_http "http://127.0.0.1:$HP/$p" 30
done
holder() { kc get lease controller-leader-elect-capa -n capa-system -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
if wait_until 30 test -n "\$(holder)" && [ -n "$(holder)" ]; then
	ok "it holds the Lease capa-system/controller-leader-elect-capa ($(holder))"
else fail "it holds its Lease in capa-system" "$(tail -3 "$T_TMP/capa.log")"; fi
check "the sidecar's probe (/healthz over HTTPS) answers 200" wait_until 30 curl -skf "https://127.0.0.1:$MP/healthz"

# ---- a two-zone cluster and one machine, under the shipped RBAC ----
check "a Cluster and its AWSCluster (two zones) are created" capa_cluster "$NS" "$C" 2
if wait_until 120 capa_ready awscluster "$NS" "$C"; then ok "the AWSCluster becomes ready"
else fail "the AWSCluster becomes ready" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi
src=$(grep -a "using AWS credentials" "$T_TMP/capa.log" | head -n 1 | grep -oE 'source="?[a-z-]+' | sed -E 's/.*"//; s/source=//')
[ "$src" = shared-profile ] && ok "AWS credentials from the mounted Secret (AWS_SHARED_CREDENTIALS_FILE, source shared-profile)" ||
	fail "AWS credentials from the mounted Secret" "source '$src'"
capa_left "$C" >"$T_TMP/made.txt"
got=$(sed -E 's/^([a-z ]+): (.*)$/\1=\2/' "$T_TMP/made.txt" | awk -F= '{print $1 ":" split($2, a, " ")}' | paste -sd' ')
want="vpcs:1 subnets:4 internet gateways:1 nat gateways:2 elastic ips:2 route tables:4 security groups:4 load balancers:1"
[ "$got" = "$want" ] && ok "moto has the cluster: $got" || fail "moto has the two-zone cluster" "got '$got', want '$want'"
AMI=$(capa_ami)
check "a Machine and its AWSMachine (us-east-1a) are created" capa_machine "$NS" "$C" "$C-md-0" us-east-1a "$AMI"
if wait_until 90 capa_ready awsmachine "$NS" "$C-md-0"; then ok "the AWSMachine becomes ready"
else fail "the AWSMachine becomes ready" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi
pid=$(kc get awsmachine "$C-md-0" -n "$NS" -o jsonpath='{.spec.providerID}')
[[ $pid == aws:///us-east-1a/i-* ]] && ok "its providerID is $pid" || fail "its providerID" "'$pid'"

# ---- the metrics through the sidecar ----
code() { curl -sk -o "$T_TMP/metrics.out" -w '%{http_code}' "$@" "https://127.0.0.1:$MP/metrics"; }
c=$(code -H "Authorization: Bearer scraper-token")
[ "$c" = 200 ] && grep -q '^process_resident_memory_bytes ' "$T_TMP/metrics.out" &&
	ok "/metrics through the sidecar: 200 for a user bound to capa-metrics-reader" ||
	fail "/metrics for the scraper" "$c $(head -c 200 "$T_TMP/metrics.out")"
c=$(code)
[ "$c" = 401 ] && ok "/metrics without a token: 401" || fail "/metrics without a token: 401" "$c"
c=$(code -H "Authorization: Bearer nobody-token")
[ "$c" = 403 ] && ok "/metrics for a user with no binding: 403" || fail "/metrics for an unbound user: 403" "$c"

# ---- delete: the machine, then the cluster ----
kc delete awsmachine "$C-md-0" -n "$NS" --wait=false >/dev/null
gone() { ! kc get "$1" "$2" -n "$NS" >/dev/null 2>&1; }
if wait_until 90 gone awsmachine "$C-md-0"; then ok "the AWSMachine is deleted (instance terminated, finalizer removed)"
else fail "the AWSMachine is deleted" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi
kc delete awscluster "$C" -n "$NS" --wait=false >/dev/null
if wait_until 120 gone awscluster "$C"; then ok "the AWSCluster is deleted"
else fail "the AWSCluster is deleted" "$(grep -E '^E' "$T_TMP/capa.log" | tail -3)"; fi
left=$(capa_left "$C")
[ -z "$left" ] && ok "nothing of the cluster is left in moto (network, load balancer, instance)" ||
	fail "nothing of the cluster is left in moto" "$left"
n=$(grep -aciE 'forbidden|"code":403|http=403' "$T_TMP/capa.log")
[ "$n" = 0 ] && ok "no request of the manager was refused by the shipped RBAC" ||
	fail "no request refused by the RBAC" "$n lines: $(grep -aiE 'forbidden|403' "$T_TMP/capa.log" | head -n 2 | cut -c1-300)"

stop_within "$(cat "$T_TMP/capa.pid")" 10 capa && [ "$STOP_RC" = 0 ] && ok "the manager stops on SIGTERM with exit 0" ||
	fail "the manager stops on SIGTERM with exit 0" "exit ${STOP_RC:-?}"
t_summary
