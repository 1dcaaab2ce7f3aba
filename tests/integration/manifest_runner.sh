#!/usr/bin/env bash
# tests: peers
# sanitizer-pass: skip
# tests/lib/manifest_run.py, the runner of a manifest's container: Kubernetes' $(VAR)
# expansion ($$ escapes, undefined and unclosed references kept), the env in the kubelet's order
# (envFrom, then env referring to earlier variables), valueFrom from --set and from the Secrets
# and ConfigMaps of the files, optional references left unset and missing ones refused (exit 2),
# the path rewrites of --mount-root and the port maps, secret volumes written, --bin-dir, a
# clean environment on --exec, the preStop hook, and the errors: an ambiguous container, a
# non-string value.
. "$(dirname "$0")/../lib/testlib.sh"

python3 -c 'import yaml' 2>/dev/null || { skip "manifest runner" "python3 has no PyYAML"; t_summary; }
MR=$T_ROOT/tests/lib/manifest_run.py
expect() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$3', want '$2'"; fi; }

cat >"$T_TMP/m.yaml" <<'EOF'
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: ns1}
data: {key: YWJj, conf: "W0dsb2JhbF0K"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: ns1}
data: {A: from-cm, B: b-cm}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: ns1}
spec:
  template:
    spec:
      containers:
        - name: main
          command: ["/opt/bin/tool"]
          args: ["--endpoint=$(EP)", "--node=$(NODE)", "$$(EP)", "$(MISSING)", "--port=:8080",
                 "--cfg=/etc/conf/conf", "--secure-port=10258"]
          envFrom:
            - configMapRef: {name: cm}
              prefix: CM_
          env:
            - {name: EP, value: "unix:///sock/csi.sock"}
            - {name: METRICS_PORT, value: "8080"}
            - {name: NOT_A_PORTX, value: "8080"}
            - {name: REF, value: "$(EP)+$(CM_A)"}
            - name: NODE
              valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
            - name: NS
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
            - name: KEY
              valueFrom: {secretKeyRef: {name: creds, key: key}}
            - name: OPT
              valueFrom: {secretKeyRef: {name: nosuch, key: k, optional: true}}
            - name: GIVEN
              valueFrom: {configMapKeyRef: {name: other, key: k}}
          volumeMounts:
            - {name: s, mountPath: /sock/}
            - {name: c, mountPath: /etc/conf}
          lifecycle:
            preStop:
              exec: {command: ["/opt/bin/tool", "hook", "$(EP)"]}
        - name: other
          image: x
      volumes:
        - {name: s, emptyDir: {}}
        - name: c
          secret:
            secretName: creds
            items: [{key: conf, path: conf}]
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: other
      image: y
      args: [1]
EOF
m=$T_TMP/m.yaml
SETS=(--set fieldRef:spec.nodeName=n1 --set configMapKeyRef:other/k=given)

json=$(python3 "$MR" "$m" --container main "${SETS[@]}" --mount-root "$T_TMP/mnt" \
	--port-map 8080=18080 --port-map 10258=20258 --print-json)
expect "argv: \$(VAR) expanded, \$\$ escaped, an undefined reference kept, paths and ports moved" \
	"[\"/opt/bin/tool\",\"--endpoint=unix://$T_TMP/mnt/s/csi.sock\",\"--node=n1\",\"\$(EP)\",\"\$(MISSING)\",\"--port=:18080\",\"--cfg=$T_TMP/mnt/c/conf\",\"--secure-port=20258\"]" \
	"$(jq -c .argv <<<"$json")"
expect "env: envFrom with its prefix, env referring to earlier variables, a *PORT variable moved, valueFrom resolved, the optional one unset" \
	"{\"CM_A\":\"from-cm\",\"CM_B\":\"b-cm\",\"EP\":\"unix://$T_TMP/mnt/s/csi.sock\",\"METRICS_PORT\":\"18080\",\"NOT_A_PORTX\":\"8080\",\"REF\":\"unix://$T_TMP/mnt/s/csi.sock+from-cm\",\"NODE\":\"n1\",\"NS\":\"ns1\",\"KEY\":\"abc\",\"GIVEN\":\"given\"}" \
	"$(jq -c .container_env <<<"$json")"
expect "the process environment: the container's and PATH only" \
	"PATH CM_A CM_B EP METRICS_PORT NOT_A_PORTX REF NODE NS KEY GIVEN" "$(jq -r '.env | keys_unsorted | join(" ")' <<<"$json")"

out=$(python3 "$MR" "$m" --container main --set configMapKeyRef:other/k=x --print-argv 2>&1)
rc=$?
[ $rc = 2 ] && grep -q "fieldRef spec.nodeName has no value" <<<"$out" &&
	ok "a fieldRef without a value: exit 2, named" || fail "a fieldRef without a value: exit 2, named" "exit $rc: $out"
out=$(python3 "$MR" "$m" --container main --set fieldRef:spec.nodeName=n --print-argv 2>&1)
rc=$?
[ $rc = 2 ] && grep -q "configMapKeyRef other/k has no value" <<<"$out" &&
	ok "a required configMapKeyRef without a value: exit 2, named" ||
	fail "a required configMapKeyRef without a value: exit 2, named" "exit $rc: $out"
out=$(python3 "$MR" "$m" --container other --print-argv 2>&1)
rc=$?
[ $rc = 2 ] && grep -q "is in 2 objects: Deployment/d, Pod/p" <<<"$out" &&
	ok "an ambiguous container: exit 2, the objects named" || fail "an ambiguous container: exit 2" "exit $rc: $out"
out=$(python3 "$MR" "$m" --container other --kind Pod --entrypoint /e --print-argv 2>&1)
rc=$?
[ $rc = 2 ] && grep -q "is not a string" <<<"$out" &&
	ok "a non-string arg is refused, as the API server does" || fail "a non-string arg is refused" "exit $rc: $out"

# --exec: the secret volume is written, the binary comes from --bin-dir, the hook runs
mkdir -p "$T_TMP/bin"
cat >"$T_TMP/bin/tool" <<'EOF'
#!/bin/sh
printf '%s\n' "$@" >"$OUT_DIR/args"
env | sort >"$OUT_DIR/env"
EOF
chmod +x "$T_TMP/bin/tool"
python3 "$MR" "$m" --container main "${SETS[@]}" --mount-root "$T_TMP/mnt2" --bin-dir "$T_TMP/bin" \
	--env "OUT_DIR=$T_TMP" --exec
expect "--exec: runs the --bin-dir binary with the argv" "--node=n1" "$(sed -n 2p "$T_TMP/args")"
expect "--exec: the secret volume's item is written" "[Global]" "$(cat "$T_TMP/mnt2/c/conf")"
grep -q "^HOME=" "$T_TMP/env" && fail "--exec: a clean environment (no HOME)" || ok "--exec: a clean environment (no HOME)"
python3 "$MR" "$m" --container main "${SETS[@]}" --mount-root "$T_TMP/mnt2" --bin-dir "$T_TMP/bin" \
	--env "OUT_DIR=$T_TMP" --lifecycle preStop --exec
expect "--lifecycle preStop: the hook's command, \$(VAR) not expanded (as the kubelet)" \
	"hook \$(EP)" "$(tr '\n' ' ' <"$T_TMP/args" | sed 's/ $//')"
n=$(python3 "$MR" "$m" --list | wc -l)
expect "--list: one line per container" 3 "$n"

t_summary
