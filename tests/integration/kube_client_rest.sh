#!/usr/bin/env bash
# tests: product
# The Kubernetes REST client against the project's test API server, through
# `aws-k8s kube-debug`: pagination, selectors, Status errors, update conflict then retry, the
# three patch types, delete options, eviction blocked by a PodDisruptionBudget, TokenReview and
# SubjectAccessReview, Retry-After, client certificates, client-side rate limiting.
. "$(dirname "$0")/../lib/testlib.sh"
. "$T_ROOT/tests/kube/lib.sh"

start_kas || { fail "test API server starts"; t_summary; }

# --- pagination and selectors ---
for i in 1 2 3 4 5 6 7; do
	printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm%s","labels":{"app":"web","idx":"%s"}},"data":{"a":"1"}}' "$i" "$i" | kcreate configmaps
done
out=$(kd list configmaps --namespace default --limit 3)
check "list pages of 3: 3 pages, 7 items" grep -q "^total 7 pages 3$" <<<"$out"
check "each page but the last has a continue token" \
	test "$(grep -c 'continue yes' <<<"$out")" -eq 2
check "pages share one resourceVersion" test "$(grep '^page' <<<"$out" | awk '{print $6}' | sort -u | wc -l)" -eq 1
n=$(ctl GET requests | jq '[.requests[] | select(.path | test("configmaps\\?limit=3"))] | length')
check "3 list requests, the 2nd and 3rd with continue" test "$n" -eq 3 -a \
	"$(ctl GET requests | jq '[.requests[] | select(.path | test("continue="))] | length')" -eq 2
out=$(kd list configmaps --namespace default --selector 'app=web,idx in (1,3)')
check "label selector 'idx in (1,3)'" grep -q "^total 2 pages 1$" <<<"$out"
out=$(kd list configmaps --field-selector metadata.name=cm4)
check "field selector metadata.name=cm4" grep -q "^default/cm4 " <<<"$out"

# --- Status errors ---
out=$(kd get configmaps default/nope)
check "404 is ENOENT with reason NotFound" grep -q 'errno=ENOENT code=404 reason=NotFound' <<<"$out"
out=$(printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1"}}' | kd create configmaps -)
check "409 AlreadyExists is EEXIST" grep -q 'errno=EEXIST code=409 reason=AlreadyExists' <<<"$out"

# --- optimistic concurrency ---
out=$(kd conflict configmaps default/cm1)
check "a stale update conflicts (ESTALE, 409 Conflict)" grep -q "^conflict: code=409 reason=Conflict$" <<<"$out"
check "RetryOnConflict then succeeds" grep -q "^retried: ok calls=1 " <<<"$out"
check "both writes landed" test "$(kd get configmaps default/cm1 | jq -r '.metadata.labels["kube-debug/step"] + "," + .metadata.labels["kube-debug/retried"]')" = "fresh,true"

# --- patches ---
cat <<'EOF' | kcreate pods
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","labels":{"app":"db"}},
 "spec":{"containers":[{"name":"a","image":"img-a"},{"name":"b","image":"img-b"}]}}
EOF
out=$(kd patch pods default/p1 strategic '{"spec":{"containers":[{"name":"b","image":"img-b2"}]}}')
check "strategic merge patch merges containers by name" \
	test "$(jq -c '[.spec.containers[] | .name + "=" + .image]' <<<"$out")" = '["a=img-a","b=img-b2"]'
out=$(kd patch pods default/p1 merge '{"metadata":{"labels":{"tier":"x"}},"spec":{"containers":[{"name":"c","image":"img-c"}]}}')
check "merge patch replaces lists and merges maps" \
	test "$(jq -c '[[.spec.containers[].name], .metadata.labels]' <<<"$out")" = '[["c"],{"app":"db","tier":"x"}]'
out=$(kd patch pods default/p1 json '[{"op":"replace","path":"/metadata/labels/app","value":"db2"},{"op":"remove","path":"/metadata/labels/tier"}]')
check "JSON patch" test "$(jq -c .metadata.labels <<<"$out")" = '{"app":"db2"}'
out=$(kd patch pods default/p1 json '[{"op":"test","path":"/metadata/labels/app","value":"nope"}]')
check "a failing JSON patch test is EINVAL (422)" grep -q 'errno=EINVAL code=422' <<<"$out"

# --- delete options ---
uid=$(kd get configmaps default/cm2 | jq -r .metadata.uid)
out=$(kd delete configmaps default/cm2 --precondition-uid wrong-uid)
check "a delete precondition that fails is a conflict" grep -q 'errno=ESTALE code=409' <<<"$out"
out=$(kd delete configmaps default/cm2 --precondition-uid "$uid" --propagation Foreground --grace-period 0)
check "delete with uid precondition, propagation and grace period" grep -q '^deleted default/cm2$' <<<"$out"

# --- eviction and PodDisruptionBudgets ---
ready_pod() {
	printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}' "$1" | kcreate pods
}
ready_pod web-1
ready_pod web-2
printf '{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"web-pdb"},"spec":{"minAvailable":2,"selector":{"matchLabels":{"app":"web"}}}}' | kcreate poddisruptionbudgets
out=$(kd evict default/web-1)
check "eviction blocked by the budget: 429, EAGAIN" grep -q 'errno=EAGAIN code=429 reason=TooManyRequests' <<<"$out"
check "the message names the disruption budget" grep -q "disruption budget" <<<"$out"
check "the pod is still there" kd get pods default/web-1
ready_pod web-3
out=$(kd evict default/web-1)
check "eviction allowed once the budget has room" grep -q '^evicted default/web-1$' <<<"$out"
check "the evicted pod is gone" grep -q 'ENOENT' <<<"$(kd get pods default/web-1)"

# --- TokenReview and SubjectAccessReview ---
ctl POST auth -d '{"tokens":[{"token":"alice-token","user":"alice","uid":"u-1","groups":["dev"]}],
 "rules":[{"name":"dev-read","users":["alice"],"verbs":["get","list"],"apiGroups":[""],"resources":["pods"],"namespaces":["default"]}]}' >/dev/null
out=$(kd token-review alice-token)
check "TokenReview authenticates a known token" test "$(jq -r '.authenticated,.user.username' <<<"$out" | paste -sd,)" = "true,alice"
check "TokenReview returns the groups" grep -q '"dev"' <<<"$out"
out=$(kd token-review not-a-token)
check "TokenReview rejects an unknown token" test "$(jq -r .authenticated <<<"$out")" = false
out=$(kd access-review alice get pods --namespace default)
check "SubjectAccessReview allows what a rule grants" test "$(jq -r .allowed <<<"$out")" = true
out=$(kd access-review alice delete pods --namespace default)
check "SubjectAccessReview denies what no rule grants" test "$(jq -r .allowed <<<"$out")" = false

# --- Retry-After, 5xx ---
ctl POST faults -d '{"action":"error","code":429,"retryAfter":1,"count":1,"method":"GET","path":"configmaps/cm3"}' >/dev/null
t0=$(date +%s%N)
check "a GET answered 429 with Retry-After is retried" kd get configmaps default/cm3
check "after waiting Retry-After (1 s)" test "$(ms_since "$t0")" -ge 900
ctl POST faults -d '{"action":"error","code":500,"count":1,"method":"GET","path":"configmaps/cm3"}' >/dev/null
out=$(kd get configmaps default/cm3)
check "a 500 without Retry-After is EAGAIN at once" grep -q 'errno=EAGAIN code=500' <<<"$out"
ctl POST faults -d '{"action":"error","code":503,"retryAfter":1,"count":1,"method":"POST","path":"configmaps"}' >/dev/null
out=$(printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm9"}}' | kd create configmaps -)
check "a POST is not retried" grep -q 'errno=EAGAIN code=503' <<<"$out"

# --- client certificate, in-cluster-like token file ---
jq '."current-context" = "kas-cert"' "$KC" >"$T_TMP/kc-cert"
check "client certificate authentication (kas-cert context)" \
	"$AWS_K8S" kube-debug --kubeconfig "$T_TMP/kc-cert" get configmaps default/cm3
cp "$KC.token" "$T_TMP/tok"
jq --arg f "$T_TMP/tok" '.users[0].user = {tokenFile: $f}' "$KC" >"$T_TMP/kc-tf"
check "tokenFile authentication" "$AWS_K8S" kube-debug --kubeconfig "$T_TMP/kc-tf" get configmaps default/cm3
echo bogus >"$T_TMP/tok2"
jq --arg f "$T_TMP/tok2" '.users[0].user = {tokenFile: $f}' "$KC" >"$T_TMP/kc-bad"
out=$("$AWS_K8S" kube-debug --kubeconfig "$T_TMP/kc-bad" get configmaps default/cm3)
check "a bad token is EACCES (401)" grep -q 'errno=EACCES code=401' <<<"$out"
out=$("$AWS_K8S" kube-debug --kubeconfig "$T_TMP/nonexistent" get nodes x 2>&1)
check "a missing kubeconfig is named in the error" grep -q "nonexistent" <<<"$out"

# --- a rotated token file: re-read after a 401 (as a service-account token is) ---
ctl POST auth -d '{"tokens":[{"token":"robot-1","user":"robot","groups":["system:masters"]}]}' >/dev/null
echo robot-1 >"$T_TMP/robot-tok"
jq --arg f "$T_TMP/robot-tok" '.users[0].user = {tokenFile: $f}' "$KC" >"$T_TMP/kc-robot"
bg robot "$AWS_K8S" kube-debug --kubeconfig "$T_TMP/kc-robot" informer configmaps --namespace default \
	--watch-timeout 120 --duration 60s
check "an informer authenticates with a token file" wait_for "$T_TMP/robot.log" "^SYNCED " 10
# rotate: the new token is valid, the old one revoked, the open watch dropped
ctl DELETE requests >/dev/null
ctl POST auth -d '{"tokens":[{"token":"robot-2","user":"robot","groups":["system:masters"]}]}' >/dev/null
echo robot-2 >"$T_TMP/robot-tok.new" && mv "$T_TMP/robot-tok.new" "$T_TMP/robot-tok"
cfg=$(ctl GET auth | jq -c '{tokens: [.tokens[] | select(.token != "robot-1" and .user != "admin")], rules: [], authorize: .authorize}')
ctl PUT auth -d "$cfg" >/dev/null
ctl POST watches/drop >/dev/null
printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"after-rotation"}}' | kcreate configmaps
check "after the token rotates, the informer re-reads the file and goes on" \
	wait_for "$T_TMP/robot.log" "^ADD default/after-rotation " 15
check "the old token was refused (401), then the new one used" \
	test "$(ctl GET requests | jq -c '[.requests[] | select(.path | test("configmaps.*watch")) | .code] | [(map(select(. == 401)) | length > 0), last]')" = "[true,200]"
kill "$(cat "$T_TMP/robot.pid")"

# --- client-side rate limiting: 7 pages at 5 qps with burst 1 take over a second ---
t0=$(date +%s%N)
kd --kube-api-qps 5 --kube-api-burst 1 --quiet list configmaps --namespace default --limit 1 >/dev/null
ms=$(ms_since "$t0")
check "--kube-api-qps 5 --kube-api-burst 1 spaces 7 requests (${ms} ms)" test "$ms" -ge 1000
t0=$(date +%s%N)
kd --kube-api-qps 1000 --kube-api-burst 100 --quiet list configmaps --namespace default --limit 1 >/dev/null
ms=$(ms_since "$t0")
check "a generous limit does not wait (${ms} ms)" test "$ms" -lt 1000

t_summary
