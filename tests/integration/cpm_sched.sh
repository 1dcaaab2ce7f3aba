#!/usr/bin/env bash
# tests: product
# KubeSchedulerWebhookConfiguration -> kube-scheduler's configuration. The CRD of
# deploy/cpm/base/crd-kubeschedulerwebhookconfigurations.yaml is created on the test API server, which then accepts valid CRs (filling in
# failurePolicy Fail and timeoutSeconds 5) and refuses the invalid ones with the field named;
# `kubectl get -o yaml` of the stored CRs goes to `aws-k8s cpm scheduler-config`, whose output,
# parsed back with PyYAML, holds Deckhouse's two profiles and the extenders expected (URL,
# verbs, weight, HTTPS, timeout, nodeCacheCapable, ignorable, caData; an invalid caBundle
# replaced by the cluster CA with a warning); v1 from 1.29, v1beta3 for 1.28. `cpm render
# --scheduler-webhooks` writes the same file to /etc/kubernetes/deckhouse/extra-files/ (0600)
# with the configuration's domain and version and ROOT's CA, the kube-scheduler manifest's
# checksum covers it (a changed CR changes the scheduler manifest only), a second render
# changes nothing, --dry-run shows a change as diff -u and writes nothing, and an invalid CR
# makes render exit 1 with the field named and nothing
# written.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/cpm_lib.sh"

if ! command -v kubectl >/dev/null || ! python3 -c 'import yaml' 2>/dev/null; then
	skip "cpm scheduler config" "kubectl or python3's yaml module missing"
	t_summary
fi
export KUBECACHEDIR=$T_TMP/kcache
CRD=$T_ROOT/deploy/cpm/base/crd-kubeschedulerwebhookconfigurations.yaml
R=$T_TMP/root
P=$R/etc/kubernetes/pki
peer check "the three CAs are made with openssl" cpm_mkcas "$P"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T_TMP/ext.key" -out "$T_TMP/ext.crt" -days 30 \
	-subj /CN=extender-ca 2>/dev/null
EXT_CA=$(base64 -w0 "$T_TMP/ext.crt")
CLUSTER_CA=$(base64 -w0 "$P/ca.crt")

PORT=$(free_port)
KC=$T_TMP/kas.kubeconfig
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$PORT" --kubeconfig-out "$KC"
if ! wait_http "https://127.0.0.1:$PORT/healthz" 30; then
	peer fail "the test API server starts" "$(tail -5 "$T_TMP/kas.log")"
	t_summary
fi
k() { kubectl --kubeconfig "$KC" "$@"; }

check "the CRD of deploy/cpm/base is created" k apply --validate=strict -f "$CRD"
for i in $(seq 1 30); do k get kubeschedulerwebhookconfigurations >/dev/null 2>&1 && break; sleep 0.5; done

cr() { # NAME WEBHOOKS-YAML
	printf 'apiVersion: deckhouse.io/v1alpha1\nkind: KubeSchedulerWebhookConfiguration\nmetadata:\n  name: %s\nwebhooks:\n%s\n' "$1" "$2"
}
cr sds-extender "- weight: 5
  failurePolicy: Ignore
  timeoutSeconds: 7
  clientConfig:
    service: {name: sds-scheduler-extender, namespace: d8-sds, port: 8099, path: /scheduler}
    caBundle: $EXT_CA" >"$T_TMP/cr1.yaml"
cr a-defaults "- weight: 1
  clientConfig:
    service: {name: ext, namespace: kube-system, port: 443, path: filter/}
    caBundle: bm90IGEgY2VydGlmaWNhdGU=" >"$T_TMP/cr2.yaml"
check "a CR with every field is accepted" k apply --validate=strict -f "$T_TMP/cr1.yaml"
check "a CR with the defaults left out is accepted" k apply --validate=strict -f "$T_TMP/cr2.yaml"

# invalid CRs: the API server (the CRD's schema) and cpm both name the field
bad_cr() { # NAME FIELD-SERVER FIELD-CPM WEBHOOKS-YAML
	local name=$1 fs=$2 fc=$3 out
	cr "$name" "$4" >"$T_TMP/$name.yaml"
	out=$(k apply -f "$T_TMP/$name.yaml" 2>&1)
	if [ $? != 0 ] && grep -q "$fs" <<<"$out"; then ok "the API server refuses $name, naming $fs"; else
		fail "the API server refuses $name, naming $fs" "$out"; fi
	out=$("$AWS_K8S" cpm scheduler-config --kubernetes-version 1.33 --webhooks "$T_TMP/$name.yaml" 2>&1 >"$T_TMP/$name.out")
	if [ $? = 1 ] && grep -qF "KubeSchedulerWebhookConfiguration \"$name\": $fc" <<<"$out" && [ ! -s "$T_TMP/$name.out" ]; then
		ok "cpm refuses $name, naming $fc, printing nothing"
	else fail "cpm refuses $name, naming $fc" "$out"; fi
}
bad_cr weight-zero "webhooks\[0\].weight" "webhooks[0].weight: must be an integer of at least 1" "- weight: 0
  clientConfig:
    service: {name: s, namespace: n, port: 1, path: /}
    caBundle: $EXT_CA"
bad_cr no-weight "webhooks\[0\].weight" "webhooks[0].weight: required" "- clientConfig:
    service: {name: s, namespace: n, port: 1, path: /}
    caBundle: $EXT_CA"
bad_cr policy-never "webhooks\[0\].failurePolicy" "webhooks[0].failurePolicy: must be Fail or Ignore" "- weight: 1
  failurePolicy: Never
  clientConfig:
    service: {name: s, namespace: n, port: 1, path: /}
    caBundle: $EXT_CA"
bad_cr no-port "webhooks\[0\].clientConfig.service.port" "webhooks[0].clientConfig.service.port: required" "- weight: 1
  clientConfig:
    service: {name: s, namespace: n, path: /}
    caBundle: $EXT_CA"
bad_cr no-ca "webhooks\[0\].clientConfig.caBundle" "webhooks[0].clientConfig.caBundle: required" "- weight: 1
  clientConfig:
    service: {name: s, namespace: n, port: 1, path: /}"

# ---- scheduler-config from what the API server stored ---------------------------------------------
k get kubeschedulerwebhookconfigurations -o yaml >"$T_TMP/stored.yaml"
grep -q "failurePolicy: Fail" "$T_TMP/stored.yaml" && grep -q "timeoutSeconds: 5" "$T_TMP/stored.yaml" &&
	peer ok "the API server filled in the defaults" || peer fail "the API server filled in the defaults" "$(cat "$T_TMP/stored.yaml")"
"$AWS_K8S" cpm scheduler-config --kubernetes-version v1.33.4 --webhooks "$T_TMP/stored.yaml" \
	--cluster-ca "$P/ca.crt" >"$T_TMP/sc.yaml" 2>"$T_TMP/sc.err"
rc=$?
[ $rc = 0 ] && ok "cpm scheduler-config: exit 0" || fail "cpm scheduler-config: exit 0" "exit $rc: $(cat "$T_TMP/sc.err")"
grep -q 'warning: KubeSchedulerWebhookConfiguration "a-defaults": webhooks\[0\].clientConfig.caBundle is not a PEM certificate: the cluster CA is used' "$T_TMP/sc.err" &&
	ok "the invalid caBundle is named in a warning" || fail "the invalid caBundle is named in a warning" "$(cat "$T_TMP/sc.err")"

# expect_config FILE APIVERSION DOMAIN: the parsed file against the table of expected extenders
expect_config() {
	python3 - "$@" "$EXT_CA" "$CLUSTER_CA" <<'PY'
import sys, yaml
path, api, domain, ext_ca, cluster_ca = sys.argv[1:]
c = yaml.safe_load(open(path))
errs = []
def eq(what, got, want):
    if got != want:
        errs.append("%s: %r, not %r" % (what, got, want))
eq("apiVersion", c.get("apiVersion"), api)
eq("kind", c.get("kind"), "KubeSchedulerConfiguration")
eq("clientConnection", c.get("clientConnection"), {"kubeconfig": "/etc/kubernetes/scheduler.conf"})
profiles = {p["schedulerName"]: p["pluginConfig"] for p in c.get("profiles", [])}
eq("profiles", sorted(profiles), ["default-scheduler", "high-node-utilization"])
eq("high-node-utilization", profiles.get("high-node-utilization"), [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}}])
eq("default-scheduler", profiles.get("default-scheduler"), [{"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}]}}])
common = {"filterVerb": "filter", "prioritizeVerb": "prioritize", "enableHTTPS": True, "nodeCacheCapable": True}
want = [  # sorted by CR name: a-defaults, then sds-extender
    dict(common, urlPrefix="https://ext.kube-system.svc.%s:443/filter/" % domain, weight=1, httpTimeout="5s", ignorable=False, tlsConfig={"caData": cluster_ca}),
    dict(common, urlPrefix="https://sds-scheduler-extender.d8-sds.svc.%s:8099/scheduler" % domain, weight=5, httpTimeout="7s", ignorable=True, tlsConfig={"caData": ext_ca}),
]
got = c.get("extenders", [])
eq("number of extenders", len(got), len(want))
for i, (g, w) in enumerate(zip(got, want)):
    eq("extenders[%d]" % i, g, w)
print("\n".join(errs))
sys.exit(1 if errs else 0)
PY
}
check "the printed config, parsed back: two profiles and the two extenders expected (v1)" \
	expect_config "$T_TMP/sc.yaml" kubescheduler.config.k8s.io/v1 cluster.local
"$AWS_K8S" cpm scheduler-config --kubernetes-version 1.28 --cluster-domain k8s.example --webhooks "$T_TMP/stored.yaml" \
	--cluster-ca "$P/ca.crt" >"$T_TMP/sc28.yaml" 2>/dev/null
check "1.28 and another domain: v1beta3, the URLs in that domain" \
	expect_config "$T_TMP/sc28.yaml" kubescheduler.config.k8s.io/v1beta3 k8s.example
out=$("$AWS_K8S" cpm scheduler-config --kubernetes-version 1.33 --webhooks "$T_TMP/stored.yaml" 2>&1 >/dev/null)
[ $? = 1 ] && grep -q "a-defaults.*caBundle: not base64 of a PEM certificate, and no cluster CA" <<<"$out" &&
	ok "an invalid caBundle without --cluster-ca is refused" || fail "an invalid caBundle without --cluster-ca is refused" "$out"
"$AWS_K8S" cpm scheduler-config --kubernetes-version 1.33 | grep -q extenders &&
	fail "no webhooks: no extenders" || ok "no webhooks: no extenders"
"$AWS_K8S" cpm scheduler-config >/dev/null 2>&1
[ $? = 2 ] && ok "scheduler-config without --kubernetes-version is a usage error" || fail "scheduler-config without --kubernetes-version is a usage error"

# ---- cpm render --scheduler-webhooks ------------------------------------------------------------
SC=$R/etc/kubernetes/deckhouse/extra-files/scheduler-config.yaml
CFG=$T_TMP/kubeadm.yaml
python3 - "$T_ROOT/tests/data/cpm/kubeadm-config-v1beta4.yaml" "$CFG" <<'PY'
import sys
t = open(sys.argv[1]).read()
add = ("  - name: config\n    value: /etc/kubernetes/deckhouse/extra-files/scheduler-config.yaml\n")
t = t.replace("scheduler:\n  extraArgs:\n", "scheduler:\n  extraArgs:\n" + add, 1)
open(sys.argv[2], "w").write(t)
PY
render() { NODE_NAME=master-0 MY_IP=10.0.0.5 "$AWS_K8S" cpm render --config "$CFG" --root "$R" "$@"; }
snapshot() { (cd "$R" && find . -type f -printf '%p %m %T@\n' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
out=$(render --scheduler-webhooks "$T_TMP/stored.yaml" 2>&1)
rc=$?
grep -qE '^\[created\] +extra-files/scheduler-config.yaml \([0-9]+ ms\): 2 extenders, an invalid caBundle replaced by the cluster CA$' <<<"$out" && [ $rc = 0 ] &&
	ok "render writes extra-files/scheduler-config.yaml (2 extenders, the CA fallback said)" ||
	fail "render writes extra-files/scheduler-config.yaml" "exit $rc: $(grep -i sched <<<"$out")"
[ "$(stat -c %a "$SC" 2>/dev/null)" = 600 ] && ok "scheduler-config.yaml is 0600" || fail "scheduler-config.yaml is 0600" "$(stat -c %a "$SC" 2>&1)"
check "the rendered file, parsed back: the same profiles and extenders (1.33: v1)" \
	expect_config "$SC" kubescheduler.config.k8s.io/v1 cluster.local
M=$R/etc/kubernetes/manifests/kube-scheduler.yaml
grep -q -- "--config=/etc/kubernetes/deckhouse/extra-files/scheduler-config.yaml" "$M" &&
	ok "the kube-scheduler manifest runs with --config=<the file>" || fail "the kube-scheduler manifest runs with --config=<the file>"
sum_of() { grep 'control-plane-manager.deckhouse.io/checksum' "$1" | awk '{print $2}'; }
s1=$(sum_of "$M") a1=$(sum_of "$R/etc/kubernetes/manifests/kube-apiserver.yaml")
before=$(snapshot)
out=$(render --scheduler-webhooks "$T_TMP/stored.yaml" 2>&1)
[ "$(snapshot)" = "$before" ] && grep -qE '^\[unchanged\] +extra-files/scheduler-config.yaml' <<<"$out" &&
	ok "a second render changes no file" || fail "a second render changes no file" "$(grep -v unchanged <<<"$out" | head -5)"

# a CR changed (weight 5 -> 9): the file and the scheduler's checksum change, the apiserver's not
sed 's/weight: 5/weight: 9/' "$T_TMP/stored.yaml" >"$T_TMP/stored2.yaml"
out=$(render --scheduler-webhooks "$T_TMP/stored2.yaml" 2>&1)
s2=$(sum_of "$M") a2=$(sum_of "$R/etc/kubernetes/manifests/kube-apiserver.yaml")
grep -qE '^\[updated\] +extra-files/scheduler-config.yaml' <<<"$out" && grep -q "weight: 9" "$SC" &&
	ok "a changed CR rewrites the file" || fail "a changed CR rewrites the file" "$(grep sched <<<"$out")"
[ -n "$s1" ] && [ "$s1" != "$s2" ] && [ "$a1" = "$a2" ] &&
	ok "the kube-scheduler checksum covers the file (changed), kube-apiserver's did not change" ||
	fail "the kube-scheduler checksum covers the file" "scheduler $s1 -> $s2, apiserver $a1 -> $a2"

# --dry-run with another CR change: the file's change shown as diff -u, nothing written
sed 's/weight: 9/weight: 3/' "$T_TMP/stored2.yaml" >"$T_TMP/stored3.yaml"
before=$(snapshot)
out=$(render --scheduler-webhooks "$T_TMP/stored3.yaml" --dry-run 2>/dev/null)
grep -qx -- '-  weight: 9' <<<"$out" && grep -qx -- '+  weight: 3' <<<"$out" &&
	grep -q -- '^--- a/etc/kubernetes/deckhouse/extra-files/scheduler-config.yaml' <<<"$out" &&
	grep -qE '^\[would change\] +extra-files/scheduler-config.yaml .*would replace' <<<"$out" && [ "$(snapshot)" = "$before" ] &&
	ok "--dry-run shows the file's change as diff -u and writes nothing" ||
	fail "--dry-run shows the file's change as diff -u and writes nothing" "$(grep -n 'weight\|sched' <<<"$out" | head)"

# an invalid CR: exit 1, the field named, nothing written
before=$(snapshot)
out=$(render --scheduler-webhooks "$T_TMP/weight-zero.yaml" 2>&1)
rc=$?
[ $rc = 1 ] && grep -q 'KubeSchedulerWebhookConfiguration "weight-zero": webhooks\[0\].weight' <<<"$out" && [ "$(snapshot)" = "$before" ] &&
	ok "render with an invalid CR: exit 1, the field named, nothing written" ||
	fail "render with an invalid CR: exit 1, the field named, nothing written" "exit $rc: $out"
# without config= in the scheduler's extraArgs the step says kube-scheduler does not read it
CFG=$T_ROOT/tests/data/cpm/kubeadm-config-v1beta4.yaml
out=$(render --scheduler-webhooks "$T_TMP/stored.yaml" --dry-run 2>&1)
grep -q 'scheduler-config.yaml.*no config=/etc/kubernetes/deckhouse/extra-files/scheduler-config.yaml: kube-scheduler does not read it' <<<"$out" &&
	ok "render says when scheduler.extraArgs lack config= (dry run)" || fail "render says when scheduler.extraArgs lack config=" "$(grep sched <<<"$out")"

t_summary
