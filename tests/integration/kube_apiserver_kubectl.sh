#!/usr/bin/env bash
# tests: peers
# sanitizer-pass: skip (tests the Python fakes only; aws-k8s is not run)
# The fake kube-apiserver (tests/kube-apiserver/run) driven by kubectl 1.32, and by curl
# for what kubectl does not show (status codes, watch streams, the control endpoint).
. "$(dirname "$0")/../lib/testlib.sh"

KAS=$T_ROOT/tests/kube-apiserver/run
if ! command -v kubectl >/dev/null || ! command -v openssl >/dev/null; then
	skip "kube-apiserver" "kubectl or openssl missing"
	t_summary
fi

PORT=$(free_port)
HPORT=$(free_port)
KC=$T_TMP/kubeconfig
export KUBECACHEDIR=$T_TMP/kcache
cat >"$T_TMP/auth.json" <<'EOF'
{"tokens": [
   {"token": "alice-token", "user": "alice", "uid": "u-alice", "groups": ["dev"]},
   {"token": "proxy-token", "user": "system:serviceaccount:mon:prom", "uid": "u-prom",
    "groups": ["system:serviceaccounts"], "audiences": ["kube-rbac-proxy"]}],
 "rules": [
   {"name": "alice-pods", "users": ["alice"], "verbs": ["get", "list", "watch"],
    "apiGroups": [""], "resources": ["pods"], "namespaces": ["default"]},
   {"name": "metrics", "groups": ["monitoring"], "verbs": ["get"], "nonResourceURLs": ["/metrics"]}],
 "clientCerts": [{"name": "carol", "user": "carol", "groups": ["monitoring"]}]}
EOF

bg kas "$KAS" --port "$PORT" --http-port "$HPORT" --kubeconfig-out "$KC" --config "$T_TMP/auth.json"
KAS_PID=$(cat "$T_TMP/kas.pid")
for _ in $(seq 100); do [ -s "$KC" ] && break; sleep 0.1; done
if ! wait_http "https://127.0.0.1:$PORT/healthz" 15 || [ ! -s "$KC" ]; then
	fail "server starts" "$(tail -5 "$T_TMP/kas.log")"
	t_summary
fi
ok "server starts and writes $(basename "$KC")"

k() { kubectl --kubeconfig "$KC" "$@"; }
TOKEN=$(cat "$KC.token")
URL=https://127.0.0.1:$PORT
kcurl() { curl -s --cacert "$KC.ca.crt" -H "Authorization: Bearer $TOKEN" "$@"; }
ctl() { curl -s "http://127.0.0.1:$HPORT/_control/$1" "${@:2}"; }
# py EXPR: evaluates EXPR with d = the JSON document on stdin, prints the result
py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# expect WANT GOT: fails showing both when they differ
expect() { [ "$1" = "$2" ] || { echo "want [$1], got [$2]"; return 1; }; }
# events FILE: "TYPE name" per watch event in a stream of JSON objects
events() {
	python3 -c '
import json, sys
s, dec, i = open(sys.argv[1]).read(), json.JSONDecoder(), 0
while True:
    while i < len(s) and s[i].isspace(): i += 1
    if i >= len(s): break
    o, i = dec.raw_decode(s, i)
    print(o["type"], o["object"].get("metadata", {}).get("name", o["object"].get("code", "")))
' "$1"
}
# wait_watch RESOURCE N: until exactly N watches on RESOURCE are open
wait_watch() {
	local i
	for i in $(seq 60); do
		[ "$(ctl watches | py "sum(1 for w in d['watches'] if w['resource'] == '$1')")" -eq "$2" ] && return 0
		sleep 0.05
	done
	return 1
}

# --- basics ---------------------------------------------------------------------------

check "kubectl version reports server v1.32" \
	bash -c "kubectl --kubeconfig '$KC' version -o json | python3 -c 'import json,sys; v=json.load(sys.stdin)[\"serverVersion\"]; assert v[\"gitVersion\"].startswith(\"v1.32\"), v'"
check "initial namespaces exist" \
	expect "default kube-node-lease kube-public kube-system" "$(k get ns -o jsonpath='{.items[*].metadata.name}')"
check "kubectl api-resources lists apps and coordination kinds" \
	bash -c "kubectl --kubeconfig '$KC' api-resources -o name | grep -qx deployments.apps && kubectl --kubeconfig '$KC' api-resources -o name | grep -qx leases.coordination.k8s.io"

# --- apply ----------------------------------------------------------------------------

cat >"$T_TMP/deploy.yaml" <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.25
        env: [{name: MODE, value: fast}]
      - name: side
        image: busybox:1.36
EOF
check "apply creates a Deployment" expect "deployment.apps/web created" "$(k apply -f "$T_TMP/deploy.yaml" 2>&1)"
sed -i 's/nginx:1.25/nginx:1.26/; s/replicas: 2/replicas: 3/' "$T_TMP/deploy.yaml"
check "apply again configures it" expect "deployment.apps/web configured" "$(k apply -f "$T_TMP/deploy.yaml" 2>&1)"
check "second apply landed (image, replicas, env kept, generation 2)" \
	expect "3 nginx:1.26 busybox:1.36 MODE=fast 2" \
	"$(k get deploy web -o jsonpath='{.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[1].image} {.spec.template.spec.containers[0].env[0].name}={.spec.template.spec.containers[0].env[0].value} {.metadata.generation}')"
check "apply without change is unchanged" expect "deployment.apps/web unchanged" "$(k apply -f "$T_TMP/deploy.yaml" 2>&1)"

cat >"$T_TMP/node.yaml" <<'EOF'
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {kubernetes.io/hostname: node-1, tier: a}}
spec: {providerID: "aws:///us-east-1a/i-0000000000000001"}
status:
  conditions: [{type: Ready, status: "True"}]
  addresses: [{type: InternalIP, address: 10.0.0.1}]
EOF
k apply -f "$T_TMP/node.yaml" >/dev/null 2>&1
sed 's/tier: a/tier: b/; s/node-1/node-2/g; s/0001/0002/; s/10.0.0.1/10.0.0.2/' "$T_TMP/node.yaml" | k apply -f - >/dev/null 2>&1
sed -i 's/tier: a/tier: c/' "$T_TMP/node.yaml"
check "apply twice changes a Node label" \
	bash -c "kubectl --kubeconfig '$KC' apply -f '$T_TMP/node.yaml' | grep -q configured && [ \"\$(kubectl --kubeconfig '$KC' get node node-1 -o jsonpath='{.metadata.labels.tier}')\" = c ]"
check "get -o json has server-set fields" bash -c "kubectl --kubeconfig '$KC' get node node-1 -o json | python3 -c '
import json, sys, re
d = json.load(sys.stdin); m = d[\"metadata\"]
assert d[\"kind\"] == \"Node\" and d[\"apiVersion\"] == \"v1\", d
assert re.match(r\"^[0-9a-f-]{36}$\", m[\"uid\"]) and int(m[\"resourceVersion\"]) > 0, m
assert m[\"creationTimestamp\"].endswith(\"Z\") and d[\"status\"][\"addresses\"][0][\"address\"] == \"10.0.0.1\", d'"

check "a node's providerID cannot change (422 Invalid with the real message)" \
	bash -c "kubectl --kubeconfig '$KC' patch node node-1 -p '{\"spec\":{\"providerID\":\"aws:///x/i-9\"}}' 2>&1 | grep -q 'spec.providerID: Forbidden' && [ \"\$(kubectl --kubeconfig '$KC' get node node-1 -o jsonpath='{.spec.providerID}')\" = aws:///us-east-1a/i-0000000000000001 ]"

# --- label, annotate, patch -------------------------------------------------------------

k label node node-1 disk=ssd >/dev/null 2>&1
k annotate node node-1 note=hello >/dev/null 2>&1
check "label and annotate" expect "ssd hello" "$(k get node node-1 -o jsonpath='{.metadata.labels.disk} {.metadata.annotations.note}')"
check "label selector (in, !=, exists, !key)" \
	expect "node-1|node-2|node-2|node-1" \
	"$(k get nodes -l 'tier in (c,x)' -o name | sed 's|node/||')|$(k get nodes -l 'tier!=c' -o name | sed 's|node/||')|$(k get nodes -l 'tier,!disk' -o name | sed 's|node/||')|$(k get nodes -l disk -o name | sed 's|node/||')"
k patch deploy web --type=merge -p '{"metadata":{"labels":{"team":"blue"}},"spec":{"paused":true}}' >/dev/null 2>&1
check "patch --type=merge" expect "blue true" "$(k get deploy web -o jsonpath='{.metadata.labels.team} {.spec.paused}')"
k patch deploy web --type=strategic -p '{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox:1.37"}]}}}}' >/dev/null 2>&1
check "patch --type=strategic merges containers by name" \
	expect "app=nginx:1.26 side=busybox:1.37 MODE" \
	"$(k get deploy web -o jsonpath='{range .spec.template.spec.containers[*]}{.name}={.image} {end}{.spec.template.spec.containers[0].env[0].name}')"
k patch node node-1 --type=strategic -p '{"spec":{"taints":[{"key":"dedicated","value":"db","effect":"NoSchedule"}]}}' >/dev/null 2>&1
check "patch --type=strategic adds a taint" \
	expect "dedicated=db:NoSchedule" "$(k get node node-1 -o jsonpath='{range .spec.taints[*]}{.key}={.value}:{.effect}{end}')"
k patch node node-1 --subresource=status --type=strategic \
	-p '{"status":{"conditions":[{"type":"DiskPressure","status":"False"}],"addresses":[{"type":"Hostname","address":"ip-10-0-0-1"}]}}' >/dev/null 2>&1
check "strategic patch of node status merges conditions by type and addresses by type" \
	expect "Ready,DiskPressure InternalIP,Hostname" \
	"$(k get node node-1 -o jsonpath='{.status.conditions[0].type},{.status.conditions[1].type} {.status.addresses[0].type},{.status.addresses[1].type}')"
k patch deploy web --type=json -p '[{"op":"test","path":"/spec/replicas","value":3},{"op":"replace","path":"/spec/replicas","value":4},{"op":"add","path":"/metadata/labels/x","value":"y"}]' >/dev/null 2>&1
check "patch --type=json" expect "4 y" "$(k get deploy web -o jsonpath='{.spec.replicas} {.metadata.labels.x}')"
out=$(k patch deploy web --type=json -p '[{"op":"test","path":"/spec/replicas","value":99},{"op":"replace","path":"/spec/replicas","value":7}]' 2>&1)
check "patch --type=json with a failing test op is refused" \
	bash -c "echo '$out' | grep -q 'test failed' && [ \"\$(kubectl --kubeconfig '$KC' get deploy web -o jsonpath='{.spec.replicas}')\" = 4 ]"
check "scale through the scale subresource" \
	bash -c "kubectl --kubeconfig '$KC' scale deploy web --replicas=1 >/dev/null && [ \"\$(kubectl --kubeconfig '$KC' get deploy web -o jsonpath='{.spec.replicas}')\" = 1 ]"

# --- create (protobuf bodies), delete, 404, 409 ---------------------------------------------

k create configmap cfg --from-literal=a=1 >/dev/null 2>&1
check "kubectl create configmap (protobuf body)" expect "1" "$(k get cm cfg -o jsonpath='{.data.a}')"
check "kubectl create of an existing name fails" \
	bash -c "kubectl --kubeconfig '$KC' create configmap cfg 2>&1 | grep -q 'configmaps \"cfg\" already exists'"
code=$(kcurl -o "$T_TMP/exists.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	-d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"}}' "$URL/api/v1/namespaces/default/configmaps")
check "create of an existing name is 409 AlreadyExists" expect "409 AlreadyExists" "$code $(py 'd["reason"]' <"$T_TMP/exists.json")"
k delete configmap cfg >/dev/null 2>&1
check "delete, then get is NotFound" \
	bash -c "kubectl --kubeconfig '$KC' get cm cfg 2>&1 | grep -q 'configmaps \"cfg\" not found'"
code=$(kcurl -o "$T_TMP/404.json" -w '%{http_code}' "$URL/api/v1/namespaces/default/configmaps/cfg")
check "404 is a NotFound Status" expect "404 NotFound 404 cfg configmaps" \
	"$code $(py 'd["reason"], d["code"], d["details"]["name"], d["details"]["kind"]' <"$T_TMP/404.json" | tr -d "(),'")"

k create configmap cas --from-literal=v=0 >/dev/null 2>&1
kcurl "$URL/api/v1/namespaces/default/configmaps/cas" >"$T_TMP/cas.json"
py 'json.dumps(dict(d, data={"v": "1"}))' <"$T_TMP/cas.json" >"$T_TMP/cas1.json"
py 'json.dumps(dict(d, data={"v": "2"}))' <"$T_TMP/cas.json" >"$T_TMP/cas2.json"
c1=$(kcurl -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' --data-binary @"$T_TMP/cas1.json" "$URL/api/v1/namespaces/default/configmaps/cas")
c2=$(kcurl -o "$T_TMP/409.json" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' --data-binary @"$T_TMP/cas2.json" "$URL/api/v1/namespaces/default/configmaps/cas")
check "PUT with a stale resourceVersion is 409 Conflict" \
	expect "200 409 Conflict 1" "$c1 $c2 $(py 'd["reason"]' <"$T_TMP/409.json") $(k get cm cas -o jsonpath='{.data.v}')"

# --- finalizers ---------------------------------------------------------------------------

k create configmap fin >/dev/null 2>&1
k patch configmap fin --type=merge -p '{"metadata":{"finalizers":["example.com/keep"]}}' >/dev/null 2>&1
k delete configmap fin --wait=false >/dev/null 2>&1
check "delete with a finalizer sets deletionTimestamp and keeps the object" \
	bash -c "[ -n \"\$(kubectl --kubeconfig '$KC' get cm fin -o jsonpath='{.metadata.deletionTimestamp}')\" ]"
k patch configmap fin --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null 2>&1
check "removing the last finalizer deletes it" \
	bash -c "kubectl --kubeconfig '$KC' get cm fin 2>&1 | grep -q NotFound"
uid=$(k get cm cas -o jsonpath='{.metadata.uid}')
code=$(kcurl -o /dev/null -w '%{http_code}' -X DELETE -H 'Content-Type: application/json' \
	-d '{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"not-'"$uid"'"}}' "$URL/api/v1/namespaces/default/configmaps/cas")
check "delete with a wrong uid precondition is 409" expect "409 cas" "$code $(k get cm cas -o jsonpath='{.metadata.name}')"

# --- watch ----------------------------------------------------------------------------

timeout 8 kubectl --kubeconfig "$KC" get configmaps -l w=1 --watch -o json --output-watch-events >"$T_TMP/watch.json" 2>"$T_TMP/watch.err" &
WPID=$!
t_cleanup_add "kill $WPID"
wait_watch configmaps 1
k create configmap wa >/dev/null 2>&1
k label configmap wa w=1 >/dev/null 2>&1
k label configmap wa extra=yes >/dev/null 2>&1
k label configmap wa w- >/dev/null 2>&1
k label configmap wa w=1 >/dev/null 2>&1
k delete configmap wa >/dev/null 2>&1
for _ in $(seq 40); do [ "$(events "$T_TMP/watch.json" 2>/dev/null | wc -l)" -ge 5 ] && break; sleep 0.1; done
kill "$WPID" 2>/dev/null
check "kubectl get --watch sees ADDED, MODIFIED, DELETED with a label selector" \
	expect "ADDED wa,MODIFIED wa,DELETED wa,ADDED wa,DELETED wa," "$(events "$T_TMP/watch.json" | tr '\n' ',')"

RV=$(kcurl "$URL/api/v1/namespaces/default/configmaps" | py 'd["metadata"]["resourceVersion"]')
k create configmap wb >/dev/null 2>&1
kcurl -N -m 5 "$URL/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=$RV&timeoutSeconds=1" >"$T_TMP/w2.json"
check "watch from a list resourceVersion replays later events, timeoutSeconds ends it" \
	expect "ADDED wb" "$(events "$T_TMP/w2.json")"
kcurl -N -m 5 "$URL/api/v1/namespaces/default/configmaps?watch=1&fieldSelector=metadata.name%3Dwb&timeoutSeconds=1" >"$T_TMP/w3.json"
check "watch without resourceVersion starts with the current state (field selector applied)" \
	expect "ADDED wb" "$(events "$T_TMP/w3.json")"
kcurl -N -m 5 "$URL/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=$RV&allowWatchBookmarks=true&timeoutSeconds=2&labelSelector=none%3Dnone" >"$T_TMP/w4.json"
has_bookmark() { events "$1" | grep -q '^BOOKMARK'; }
check "allowWatchBookmarks sends BOOKMARK events" has_bookmark "$T_TMP/w4.json"

# --- pagination -------------------------------------------------------------------------

python3 - "$T_TMP/many.json" <<'EOF'
import json, sys
items = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "page-%02d" % i, "labels": {"page": "yes"}},
          "data": {"i": str(i)}} for i in range(23)]
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(sys.argv[1], "w"))
EOF
k create -f "$T_TMP/many.json" >/dev/null 2>&1
out=$(k get configmaps -l page=yes --chunk-size=5 -o name -v=6 2>&1)
check "kubectl get --chunk-size=5 pages through 23 objects" \
	expect "23 5" "$(echo "$out" | grep -c '^configmap/page-') $(echo "$out" | grep -c 'configmaps?.*limit=5.* 200 OK')"
check "pagination with limit/continue is consistent and complete" python3 - "$URL" "$TOKEN" "$KC.ca.crt" <<'EOF'
import json, ssl, sys, urllib.parse, urllib.request
url, token, ca = sys.argv[1:4]
ctx = ssl.create_default_context(cafile=ca)
def get(q):
    req = urllib.request.Request(url + "/api/v1/namespaces/default/configmaps?labelSelector=page%3Dyes&" + q,
                                 headers={"Authorization": "Bearer " + token})
    return json.load(urllib.request.urlopen(req, context=ctx))
first = get("limit=10")
assert "remainingItemCount" not in first["metadata"], first["metadata"]  # not with a selector
names, cont, rvs = [i["metadata"]["name"] for i in first["items"]], first["metadata"]["continue"], set()
# a change between pages must not show up in the paginated list (it is a snapshot)
req = urllib.request.Request(url + "/api/v1/namespaces/default/configmaps/page-22", method="DELETE",
                             headers={"Authorization": "Bearer " + token})
urllib.request.urlopen(req, context=ctx).read()
while cont:
    page = get("limit=10&continue=" + urllib.parse.quote(cont))
    rvs.add(page["metadata"]["resourceVersion"])
    names += [i["metadata"]["name"] for i in page["items"]]
    cont = page["metadata"].get("continue")
assert names == ["page-%02d" % i for i in range(23)], names
assert rvs == {first["metadata"]["resourceVersion"]}, rvs
EOF

# --- cordon, uncordon, drain -------------------------------------------------------------

k cordon node-1 >/dev/null 2>&1
check "cordon sets spec.unschedulable (and a field selector finds it)" \
	expect "true node/node-1" "$(k get node node-1 -o jsonpath='{.spec.unschedulable}') $(k get nodes --field-selector spec.unschedulable=true -o name)"
k uncordon node-1 >/dev/null 2>&1
check "uncordon clears it" \
	expect " node/node-1 node/node-2" "$(k get node node-1 -o jsonpath='{.spec.unschedulable}') $(k get nodes --field-selector spec.unschedulable=false -o name | tr '\n' ' ' | sed 's/ $//')"

cat >"$T_TMP/drain.yaml" <<'EOF'
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template: {metadata: {labels: {app: agent}}, spec: {containers: [{name: a, image: agent:1}]}}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: db}
spec:
  replicas: 3
  selector: {matchLabels: {app: db}}
  template: {metadata: {labels: {app: db}}, spec: {containers: [{name: db, image: db:1}]}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db}
spec: {minAvailable: 2, selector: {matchLabels: {app: db}}}
EOF
k apply -f "$T_TMP/drain.yaml" >/dev/null 2>&1
DS_UID=$(k get ds agent -o jsonpath='{.metadata.uid}')
RS_UID=$(k get rs db -o jsonpath='{.metadata.uid}')
# pod NAME NODE OWNERKIND OWNERNAME OWNERUID APP READY
pod() {
	cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  labels: {app: $7}
  ownerReferences: [{apiVersion: apps/v1, kind: $3, name: $4, uid: "$5", controller: true}]
spec:
  nodeName: $2
  containers: [{name: c, image: x:1}]
  volumes: [{name: scratch, emptyDir: {}}]
status:
  phase: Running
  conditions: [{type: Ready, status: "$6"}]
EOF
}
{
	pod db-1 node-1 ReplicaSet db "$RS_UID" True db
	echo ---
	pod db-2 node-2 ReplicaSet db "$RS_UID" True db
	echo ---
	pod db-3 node-2 ReplicaSet db "$RS_UID" False db
	echo ---
	pod agent-1 node-1 DaemonSet agent "$DS_UID" True agent
} >"$T_TMP/pods.yaml"
k create -f "$T_TMP/pods.yaml" >/dev/null 2>&1
check "field selector spec.nodeName across namespaces" \
	expect "agent-1 db-1" "$(k get pods -A --field-selector spec.nodeName=node-1 -o jsonpath='{.items[*].metadata.name}')"

code=$(kcurl -o "$T_TMP/evict.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	-d '{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"db-1","namespace":"default"}}' \
	"$URL/api/v1/namespaces/default/pods/db-1/eviction")
check "eviction blocked by the PDB is 429 with the real message" \
	expect "429 TooManyRequests Cannot evict pod as it would violate the pod's disruption budget." \
	"$code $(py 'd["reason"] + " " + d["message"]' <"$T_TMP/evict.json")"

start=$(date +%s)
out=$(k drain node-1 --ignore-daemonsets --delete-emptydir-data --timeout=3s 2>&1)
rc=$?
check "drain --timeout=3s fails while the PDB blocks eviction" \
	bash -c "[ $rc -ne 0 ] && echo \"\$1\" | grep -q 'disruption budget' && [ \"\$(kubectl --kubeconfig '$KC' get pod db-1 -o name)\" = pod/db-1 ]" _ "$out"
check "drain cordoned the node" expect "true" "$(k get node node-1 -o jsonpath='{.spec.unschedulable}')"

k patch pod db-3 --subresource=status --type=strategic -p '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}' >/dev/null 2>&1
out=$(k drain node-1 --ignore-daemonsets --delete-emptydir-data --timeout=20s 2>&1)
rc=$?
check "drain succeeds once a third pod is Ready" bash -c "[ $rc -eq 0 ] && echo \"\$1\" | grep -q 'pod/db-1 evicted'" _ "$out"
check "drained pod is gone, DaemonSet pod and other nodes' pods are left alone" \
	expect "agent-1 db-2 db-3" "$(k get pods -o jsonpath='{.items[*].metadata.name}')"
k patch pdb db --type=merge -p '{"spec":{"minAvailable":null,"maxUnavailable":"50%"}}' >/dev/null 2>&1
check "eviction allowed by a maxUnavailable percent PDB" \
	bash -c "kubectl --kubeconfig '$KC' drain node-2 --ignore-daemonsets --delete-emptydir-data --timeout=3s >/dev/null 2>&1; [ \"\$(kubectl --kubeconfig '$KC' get pods -l app=db -o name | wc -l)\" -lt 2 ]"
echo "drain checks took $(($(date +%s) - start))s"

# --- authentication ---------------------------------------------------------------------

code=$(curl -s --cacert "$KC.ca.crt" -o "$T_TMP/401.json" -w '%{http_code}' -H 'Authorization: Bearer wrong' "$URL/api/v1/pods")
check "bad token is 401 Unauthorized" expect "401 Unauthorized" "$code $(py 'd["reason"]' <"$T_TMP/401.json")"
check "no credentials is 401" expect "401" "$(curl -s --cacert "$KC.ca.crt" -o /dev/null -w '%{http_code}' "$URL/api")"
check "kubectl with a bad token fails" \
	bash -c "! kubectl --kubeconfig '$KC' --token=wrong get ns >/dev/null 2>&1"
who() { curl -s --cacert "$KC.ca.crt" "$@" -X POST -H 'Content-Type: application/json' \
	-d '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}' \
	"$URL/apis/authentication.k8s.io/v1/selfsubjectreviews" | py '" ".join([d["status"]["userInfo"]["username"]] + d["status"]["userInfo"]["groups"])'; }
check "client certificate authenticates (CN=user, O=groups)" \
	expect "admin system:masters system:authenticated" "$(who --cert "$KC.client.crt" --key "$KC.client.key")"
check "client certificate from clientCerts" \
	expect "carol monitoring system:authenticated" "$(who --cert "$KC.carol.crt" --key "$KC.carol.key")"
check "kubectl with the client-certificate context" \
	expect "admin" "$(k --context kas-cert auth whoami -o jsonpath='{.status.userInfo.username}')"
check "plain HTTP port with kubectl (no credentials needed there)" expect "node-1 node-2" "$(k --context kas-http get nodes -o jsonpath='{.items[*].metadata.name}')"
check "a token for another audience is refused by the API" \
	expect "401" "$(curl -s --cacert "$KC.ca.crt" -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer proxy-token' "$URL/api")"

review() { k create -o json -f - | py "$1"; }
check "TokenReview of a known token (kubectl create -f)" \
	expect "True system:serviceaccount:mon:prom u-prom system:serviceaccounts,system:authenticated kube-rbac-proxy" \
	"$(review '" ".join([str(d["status"]["authenticated"]), d["status"]["user"]["username"], d["status"]["user"]["uid"], ",".join(d["status"]["user"]["groups"]), ",".join(d["status"]["audiences"])])' <<'EOF'
{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
 "spec": {"token": "proxy-token", "audiences": ["kube-rbac-proxy"]}}
EOF
)"
check "TokenReview of an unknown token / wrong audience" \
	expect "False False" "$(printf '%s\n' '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"nope"}}' | review 'd["status"]["authenticated"]') $(printf '%s\n' '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"proxy-token","audiences":["other"]}}' | review 'd["status"]["authenticated"]')"
sar() {
	printf '{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":%s}\n' "$1" | review 'd["status"]["allowed"]'
}
check "SubjectAccessReview answers from the rules" \
	expect "True False False True False True" \
	"$(sar '{"user":"alice","resourceAttributes":{"namespace":"default","verb":"list","resource":"pods"}}') $(sar '{"user":"alice","resourceAttributes":{"namespace":"default","verb":"delete","resource":"pods"}}') $(sar '{"user":"alice","resourceAttributes":{"namespace":"kube-system","verb":"get","resource":"pods"}}') $(sar '{"user":"carol","groups":["monitoring"],"nonResourceAttributes":{"path":"/metrics","verb":"get"}}') $(sar '{"user":"carol","groups":["monitoring"],"nonResourceAttributes":{"path":"/debug","verb":"get"}}') $(sar '{"user":"x","groups":["system:masters"],"resourceAttributes":{"verb":"delete","resource":"nodes"}}')"
check "kubectl auth can-i (SelfSubjectAccessReview, protobuf body)" \
	expect "yes no" "$(k auth can-i delete nodes 2>/dev/null) $(k --token=alice-token auth can-i delete pods 2>/dev/null)"

# --- CRD ------------------------------------------------------------------------------------

cat >"$T_TMP/crd.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wdg]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
EOF
k apply -f "$T_TMP/crd.yaml" >/dev/null 2>&1
check "a CRD registers its resource in discovery" \
	bash -c "kubectl --kubeconfig '$KC' api-resources --api-group=example.com -o name | grep -qx widgets.example.com"
printf '%s\n' 'apiVersion: example.com/v1' 'kind: Widget' 'metadata: {name: w1}' 'spec: {size: 1}' | k apply -f - >/dev/null 2>&1
printf '%s\n' 'apiVersion: example.com/v1' 'kind: Widget' 'metadata: {name: w2}' 'spec: {size: 2}' | k apply -f - >/dev/null 2>&1
printf '%s\n' 'apiVersion: example.com/v1' 'kind: Widget' 'metadata: {name: w1}' 'spec: {size: 3}' | k apply -f - >/dev/null 2>&1
check "custom resources created, applied and listed with kubectl" \
	expect "w1=3 w2=2" "$(k get wdg -o jsonpath='{range .items[*]}{.metadata.name}={.spec.size} {end}' | sed 's/ $//')"
k patch widget w1 --subresource=status --type=merge -p '{"status":{"phase":"Done"},"spec":{"size":9}}' >/dev/null 2>&1
check "custom resource status subresource changes only status" \
	expect "Done 3" "$(k get widget w1 -o jsonpath='{.status.phase} {.spec.size}')"
k delete crd widgets.example.com >/dev/null 2>&1
check "deleting the CRD removes the resource" \
	expect "404" "$(kcurl -o /dev/null -w '%{http_code}' "$URL/apis/example.com/v1/namespaces/default/widgets")"

# --- field validation: fieldValidation=Strict|Warn|Ignore, as kubectl --validate sends it ------

k create namespace fv >/dev/null 2>&1
cat >"$T_TMP/fv-bad.yaml" <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: fv, namespace: fv, labels: {app: fv}}
spec:
  foo: 1
  selector: {matchLabels: {app: fv}}
  template:
    metadata: {labels: {app: fv}}
    spec:
      containers:
      - name: app
        image: nginx:1.25
        bar: 2
EOF
sed '/foo: 1/d; /bar: 2/d' "$T_TMP/fv-bad.yaml" >"$T_TMP/fv-good.yaml"
# lines OUTPUT: the lines of OUTPUT joined with |
lines() { printf '%s' "$1" | tr '\n' '|'; }
# has TEXT NEEDLE...: TEXT contains every NEEDLE
has() {
	local t=$1 n
	shift
	for n in "$@"; do [[ $t == *"$n"* ]] || { echo "no [$n] in [$t]"; return 1; }; done
}
# fv_fields: "foo bar" as far as the stored Deployment fv has them
fv_fields() { k -n fv get deploy fv -o json | py '" ".join(["foo" if "foo" in d["spec"] else "-", "bar" if "bar" in d["spec"]["template"]["spec"]["containers"][0] else "-"])'; }
# sent VALIDATE: the fieldValidation parameters of kubectl apply --validate=VALIDATE
sent() { k apply --dry-run=server --validate="$1" -f "$T_TMP/fv-good.yaml" -v=6 2>&1 | grep -o 'POST https[^ ]*' | grep -o 'fieldValidation=[A-Za-z]*' | tr '\n' ' '; }
check "kubectl apply --validate=strict|true|warn|false sends fieldValidation=Strict|Strict|Warn|Ignore" \
	expect "fieldValidation=Strict |fieldValidation=Strict |fieldValidation=Warn |fieldValidation=Ignore " \
	"$(sent strict)|$(sent true)|$(sent warn)|$(sent false)"

out=$(k apply --validate=strict -f "$T_TMP/fv-bad.yaml" 2>&1)
check "apply --validate=strict: unknown fields are a BadRequest naming each one; nothing is created" \
	expect "Error from server (BadRequest): error when creating \"$T_TMP/fv-bad.yaml\": Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.foo\", unknown field \"spec.template.spec.containers[0].bar\"|NotFound" \
	"$out|$(k -n fv get deploy fv -o name 2>&1 | grep -o NotFound)"
out=$(k apply --validate=warn -f "$T_TMP/fv-bad.yaml" 2>&1)
check "apply --validate=warn: one warning per unknown field, the object is created without them" \
	expect 'Warning: unknown field "spec.foo"|Warning: unknown field "spec.template.spec.containers[0].bar"|deployment.apps/fv created|- -' \
	"$(lines "$out")|$(fv_fields)"
k -n fv delete deploy fv >/dev/null 2>&1
out=$(k apply --validate=false -f "$T_TMP/fv-bad.yaml" 2>&1)
check "apply --validate=false (Ignore): created without a word, the unknown fields dropped" \
	expect "deployment.apps/fv created|- -" "$out|$(fv_fields)"
k -n fv delete deploy fv >/dev/null 2>&1
check "a valid manifest passes --validate=strict (created, then unchanged)" \
	expect "deployment.apps/fv created|deployment.apps/fv unchanged" \
	"$(k apply --validate=strict -f "$T_TMP/fv-good.yaml" 2>&1)|$(k apply --validate=strict -f "$T_TMP/fv-good.yaml" 2>&1)"
out=$(k apply --validate=strict -f "$T_TMP/fv-bad.yaml" 2>&1)
check "apply --validate=strict to an existing object: the strategic merge patch is refused (422, the real text)" \
	has "$out|$(fv_fields)" 'The request is invalid: patch: Invalid value: "map[metadata:map[annotations:' \
	'": strict decoding error: unknown field "spec.foo", unknown field "spec.template.spec.containers[0].bar"|- -'
out=$(k apply --validate=warn -f "$T_TMP/fv-bad.yaml" 2>&1)
check "apply --validate=warn to an existing object: warnings, the patch applied without the unknown fields" \
	expect 'Warning: unknown field "spec.foo"|Warning: unknown field "spec.template.spec.containers[0].bar"|deployment.apps/fv configured|- -' \
	"$(lines "$out")|$(fv_fields)"
out=$(k apply --server-side --force-conflicts --validate=false -f "$T_TMP/fv-bad.yaml" 2>&1)
check "server-side apply refuses unknown fields whatever --validate says (structured-merge-diff paths)" \
	expect 'Error from server: failed to create typed patch object (fv/fv; apps/v1, Kind=Deployment): errors:|  .spec.foo: field not declared in schema|  .spec.template.spec.containers[name="app"].bar: field not declared in schema' \
	"$(lines "$out" | sed 's/|$//')"
check "server-side apply of the valid manifest passes --validate=strict" \
	expect "deployment.apps/fv serverside-applied" "$(k apply --server-side --force-conflicts --validate=strict -f "$T_TMP/fv-good.yaml" 2>&1)"
sed 's/name: fv,/name: fv-dry,/' "$T_TMP/fv-bad.yaml" >"$T_TMP/fv-dry-bad.yaml"
sed 's/name: fv,/name: fv-dry,/' "$T_TMP/fv-good.yaml" >"$T_TMP/fv-dry.yaml"
check "--dry-run=server validates too (the unknown field refused) and stores nothing" \
	expect "1|deployment.apps/fv-dry created (server dry run)|NotFound" \
	"$(k apply --dry-run=server --validate=strict -f "$T_TMP/fv-dry-bad.yaml" 2>&1 | grep -c 'unknown field "spec.foo"')|$(k apply --dry-run=server --validate=strict -f "$T_TMP/fv-dry.yaml" 2>&1)|$(k -n fv get deploy fv-dry 2>&1 | grep -o NotFound)"

# The bodies of the real server's own test (test/integration/apiserver/field_validation_test.go):
# unknown and repeated keys; the texts expected are the ones that test expects.
cat >"$T_TMP/fv-dups.json" <<'EOF'
{"apiVersion": "apps/v1", "kind": "Deployment",
 "metadata": {"name": "dups", "name": "dups", "unknownMeta": "metaVal", "labels": {"app": "nginx"}},
 "spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2", "paused": true, "paused": false,
  "selector": {"matchLabels": {"app": "nginx"}},
  "template": {"metadata": {"labels": {"app": "nginx"}},
   "spec": {"containers": [{"name": "nginx", "image": "nginx:latest", "unknownNested": "val1",
    "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}
EOF
DUPS='duplicate field "metadata.name", unknown field "metadata.unknownMeta", unknown field "spec.unknown1", unknown field "spec.unknownDupe", duplicate field "spec.paused", unknown field "spec.template.spec.containers[0].unknownNested", duplicate field "spec.template.spec.containers[0].imagePullPolicy"'
# fvreq METHOD QUERY [curl args...]: the status code; the body in fv.json, the headers in fv.h
fvreq() { kcurl -o "$T_TMP/fv.json" -D "$T_TMP/fv.h" -w '%{http_code}' -X "$1" "${@:3}" "$URL/apis/apps/v1/namespaces/fv/deployments$2"; }
# warnings: the Warning headers of the last fvreq, joined with |
warnings() { tr -d '\r' <"$T_TMP/fv.h" | sed -n 's/^Warning: //p' | tr '\n' '|'; }
code=$(fvreq POST "?fieldValidation=Strict" -H 'Content-Type: application/json' --data-binary @"$T_TMP/fv-dups.json")
check "POST fieldValidation=Strict: 400 BadRequest, unknown and duplicate fields in document order" \
	expect "400 BadRequest Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: $DUPS" \
	"$code $(py 'd["reason"] + " " + d["message"]' <"$T_TMP/fv.json")"
code=$(fvreq POST "" -H 'Content-Type: application/json' --data-binary @"$T_TMP/fv-dups.json")
check "POST without fieldValidation is Warn: 201 and one 'Warning: 299 - \"...\"' header per field" \
	expect "201 $(printf '%s' "$DUPS" | sed 's/"/\\"/g; s/\(unknown\|duplicate\) field/299 - "&/g; s/, 299/"|299/g')\"|" \
	"$code $(warnings)"
check "Warn keeps the last of repeated keys and drops the unknown fields" \
	expect "False Never False False" \
	"$(k -n fv get deploy dups -o json | py 'd["spec"]["paused"], d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "unknown1" in d["spec"], "unknownMeta" in d["metadata"]' | tr -d "(),'")"
k -n fv delete deploy dups >/dev/null 2>&1
code=$(fvreq POST "?fieldValidation=Ignore" -H 'Content-Type: application/json' --data-binary @"$T_TMP/fv-dups.json")
check "POST fieldValidation=Ignore: 201, no warning" expect "201 " "$code $(warnings)"
code=$(fvreq PUT "/dups?fieldValidation=Strict" -H 'Content-Type: application/json' --data-binary @"$T_TMP/fv-dups.json")
check "PUT fieldValidation=Strict: the same 400" expect "400 $DUPS" "$code $(py 'd["message"].split("strict decoding error: ")[1]' <"$T_TMP/fv.json")"
code=$(fvreq POST "?fieldValidation=strict" -H 'Content-Type: application/json' --data-binary @"$T_TMP/fv-dups.json")
check "an unsupported fieldValidation value is 422 Invalid (CreateOptions)" \
	expect '422 CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "strict": supported values: "", "Ignore", "Strict", "Warn"' \
	"$code $(py 'd["message"]' <"$T_TMP/fv.json")"
code=$(fvreq PATCH "/dups?fieldValidation=Strict" -H 'Content-Type: application/merge-patch+json' --data-binary @- <<'EOF'
{"spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2", "paused": true, "paused": false,
 "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:latest", "unknownNested": "val1",
  "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}
EOF
)
check "merge patch, Strict: 422 Invalid on field patch, the patch's duplicates then the result's unknown fields" \
	expect '422 Invalid patch strict decoding error: duplicate field "spec.unknownDupe", duplicate field "spec.paused", duplicate field "spec.template.spec.containers[0].imagePullPolicy", unknown field "spec.template.spec.containers[0].unknownNested", unknown field "spec.unknown1", unknown field "spec.unknownDupe"' \
	"$code $(py 'd["reason"] + " " + d["details"]["causes"][0]["field"] + " " + d["message"].split("\": ")[-1]' <"$T_TMP/fv.json")"
code=$(fvreq PATCH "/dups?fieldValidation=Warn" -H 'Content-Type: application/json-patch+json' \
	-d '[{"op": "add", "path": "/spec/unknown1", "value": "val1", "foo": "bar"}, {"op": "add", "path": "/spec/unknown2", "path": "/spec/unknown3", "value": "val1"}]')
check "JSON patch, Warn: warnings for the operations and for the result, the patch applied" \
	expect '200 299 - "json patch unknown field \"[0].foo\""|299 - "json patch duplicate field \"[1].path\""|299 - "unknown field \"spec.unknown1\""|299 - "unknown field \"spec.unknown3\""|' \
	"$code $(warnings)"
printf '{"apiVersion": "apps/v1", "kind": "Deployment",\n "metadata": {"name": "dups"},\n "spec": {"paused": false,\n  "paused": true}}\n' >"$T_TMP/fv-apply.json"
code=$(fvreq PATCH "/dups?fieldManager=t&fieldValidation=Strict" -H 'Content-Type: application/apply-patch+yaml' --data-binary @"$T_TMP/fv-apply.json")
check "server-side apply, Strict: repeated keys are refused as YAML says it (with their line)" \
	expect "400 error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:|  line 4: key \"paused\" already set in map" \
	"$code $(py 'd["message"]' <"$T_TMP/fv.json" | tr '\n' '|' | sed 's/|$//')"
if python3 -c 'import yaml' 2>/dev/null; then
	printf 'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: y\n  name: y\n  bogus: 1\nspec:\n  paused: true\n  paused: false\n' >"$T_TMP/fv.yaml"
	code=$(fvreq POST "?fieldValidation=Strict" -H 'Content-Type: application/yaml' --data-binary @"$T_TMP/fv.yaml")
	check "a YAML body, Strict: the YAML duplicates with their lines, then the unknown fields" \
		expect '400 strict decoding error: yaml: unmarshal errors:|  line 5: key "name" already set in map|  line 9: key "paused" already set in map, unknown field "metadata.bogus"' \
		"$code $(py 'd["message"].split(": ", 1)[1]' <"$T_TMP/fv.json" | tr '\n' '|' | sed 's/|$//')"
else
	skip "a YAML body, Strict: the YAML duplicates with their lines" "python3 has no yaml module (the server reads YAML bodies with it)"
fi

cat >"$T_TMP/fv-crd.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [port]
                items: {type: object, properties: {port: {type: integer}}}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
EOF
out=$(sed 's/^  group: example.com/&\n  color: blue/' "$T_TMP/fv-crd.yaml" | k apply --validate=strict -f - 2>&1)
check "a CustomResourceDefinition with an unknown field is refused under Strict" \
	expect 'Error from server (BadRequest): error when creating "STDIN": CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: strict decoding error: unknown field "spec.color"' "$out"
k apply --validate=strict -f "$T_TMP/fv-crd.yaml" >/dev/null 2>&1
printf '%s\n' 'apiVersion: example.com/v1' 'kind: Gadget' 'metadata: {name: g1, namespace: fv, flavour: x}' \
	'spec: {size: 1, colour: red, ports: [{port: 80, proto: TCP}], extra: {any: {thing: 1}}}' >"$T_TMP/fv-cr.yaml"
out=$(k apply --validate=strict -f "$T_TMP/fv-cr.yaml" 2>&1)
check "a custom resource under Strict: what its CRD's schema would prune is refused, metadata first" \
	expect "Error from server (BadRequest): error when creating \"$T_TMP/fv-cr.yaml\": Gadget in version \"v1\" cannot be handled as a Gadget: strict decoding error: unknown field \"metadata.flavour\", unknown field \"spec.colour\", unknown field \"spec.ports[0].proto\"" "$out"
out=$(k apply --validate=warn -f "$T_TMP/fv-cr.yaml" 2>&1)
check "a custom resource under Warn: created pruned, x-kubernetes-preserve-unknown-fields kept" \
	expect '3 gadget.example.com/g1 created {"extra": {"any": {"thing": 1}}, "ports": [{"port": 80}], "size": 1}' \
	"$(printf '%s\n' "$out" | grep -c '^Warning: unknown field') $(printf '%s\n' "$out" | grep -v '^Warning') $(k -n fv get gadget g1 -o json | py 'json.dumps(d["spec"], sort_keys=True)')"
out=$(k apply --server-side --validate=strict -f "$T_TMP/fv-cr.yaml" 2>&1)
check "server-side apply of a custom resource: its list-map keys in the paths" \
	has "$out" "failed to create typed patch object (fv/g1; example.com/v1, Kind=Gadget)" \
	".spec.ports[port=80].proto: field not declared in schema"
k delete crd gadgets.example.com >/dev/null 2>&1

# --- the manifests of deploy/, checked for unknown fields as a real server would ------------

# deploy/ is a kustomize tree: each kustomization is rendered (kubectl's built-in kustomize) and
# its objects applied; its VolumeSnapshotClass needs the external-snapshotter's CRD first
k apply -f "$T_ROOT/tests/data/deploy/volumesnapshotclasses-crd.yaml" >/dev/null
before=$(ctl state | py 'json.dumps({k: v for k, v in d["objects"].items() if k != "namespaces"}, sort_keys=True)')
# manifest FILE [PYTHON]: the objects of FILE as kubectl reads them (one JSON document per line),
# or what PYTHON prints with o = each object
manifest() {
	k create --dry-run=client --validate=false -f "$1" -o json 2>/dev/null | python3 -c '
import json, sys
s, dec, i, objs = sys.stdin.read(), json.JSONDecoder(), 0, []
while True:
    while i < len(s) and s[i].isspace(): i += 1
    if i >= len(s): break
    o, i = dec.raw_decode(s, i)
    objs += o.get("items", [o]) if o.get("kind") == "List" else [o]
for o in objs:
    exec(sys.argv[1] if len(sys.argv) > 1 else "print(json.dumps(o))")
' "${@:2}"
}
failed=
n=0
for kz in $(find "$T_ROOT/deploy" -name kustomization.yaml | sort); do
	n=$((n + 1))
	d=${kz%/kustomization.yaml}
	f=$T_TMP/rendered.$n.yaml
	k kustomize "$d" >"$f" 2>"$f.err" || { failed+="${d#"$T_ROOT"/}: kustomize: $(cat "$f.err"); "; continue; }
	# the namespaces they name exist in a real cluster: make them here
	for ns in $(manifest "$f" 'print(o.get("metadata", {}).get("namespace", ""))' | sort -u); do
		k create namespace "$ns" >/dev/null 2>&1
	done
	for how in --server-side=false --server-side=true; do
		out=$(k apply "$how" --validate=strict --dry-run=server -f "$f" 2>&1) || failed+="${d#"$T_ROOT"/} ($how): $out; "
	done
done
after=$(ctl state | py 'json.dumps({k: v for k, v in d["objects"].items() if k != "namespaces"}, sort_keys=True)')
check "every kustomization of deploy/ ($n, rendered) passes kubectl apply --validate=strict --dry-run=server (client- and server-side)" \
	expect "found, none failed" "$([ "$n" -gt 0 ] && echo found || echo "no manifest"), ${failed:-none failed}"
check "the dry runs of deploy/ stored nothing" expect "$before" "$after"
# the same check catches an unknown field in one of them: add two to the first workload
wl=
for f in $(find "$T_ROOT/deploy" \( -name '*.yaml' -o -name '*.yml' \) | sort); do
	wl=$(manifest "$f" '
c = (((o.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers")
if c:
    o["spec"]["replica"] = 1
    c[0]["imagePullPolicey"] = "Always"
    print(json.dumps(o))' | head -1)
	[ -n "$wl" ] && break
done
if [ -n "$wl" ]; then
	out=$(printf '%s' "$wl" | k apply --validate=strict --dry-run=server -f - 2>&1)
	check "a misspelt field in a deploy/ workload is caught (spec.replica, containers[0].imagePullPolicey)" \
		has "$out" 'strict decoding error: unknown field "spec.replica", unknown field "spec.template.spec.containers[0].imagePullPolicey"'
else
	skip "a misspelt field in a deploy/ workload is caught" "no manifest in deploy/ has a pod template"
fi

# --- fault injection -------------------------------------------------------------------------

ctl requests -X DELETE >/dev/null
k get nodes >/dev/null 2>&1
check "request log counts API calls by verb and resource" \
	expect "1 0" "$(ctl requests | py 'd["counters"].get("list nodes", 0), d["counters"].get("list pods", 0)' | tr -d '(),')"

ctl faults -X POST -d '{"action":"error","method":"GET","path":"^/api/v1/namespaces/default/configmaps/cas","code":500,"count":1}' >/dev/null
c1=$(kcurl -o /dev/null -w '%{http_code}' "$URL/api/v1/namespaces/default/configmaps/cas")
c2=$(kcurl -o /dev/null -w '%{http_code}' "$URL/api/v1/namespaces/default/configmaps/cas")
check "fault: 500 for the next matching request only" expect "500 200" "$c1 $c2"

ctl faults -X POST -d '{"action":"error","path":"/api/v1/nodes","code":429,"retryAfter":7}' >/dev/null
h=$(kcurl -D - -o /dev/null "$URL/api/v1/nodes" | tr -d '\r' | grep -iE '^(HTTP|Retry-After)' | tr '\n' ' ')
c2=$(kcurl -o /dev/null -w '%{http_code}' "$URL/api/v1/nodes")
ctl faults -X DELETE >/dev/null
c3=$(kcurl -o /dev/null -w '%{http_code}' "$URL/api/v1/nodes")
check "fault: 429 with Retry-After until cleared" expect "HTTP/1.1 429 Too Many Requests Retry-After: 7  429 200" "$h $c2 $c3"

ctl faults -X POST -d '{"action":"stall","path":"/api/v1/namespaces$","seconds":1.5,"count":1}' >/dev/null
t=$(kcurl -o /dev/null -w '%{time_total}' "$URL/api/v1/namespaces")
check "fault: stall delays a matching request" python3 -c "assert $t >= 1.4, $t"
t=$(kcurl -o /dev/null -w '%{time_total}' "$URL/api/v1/namespaces")
check "fault: stall with count 1 is used up" python3 -c "assert $t < 1.0, $t"

ctl faults -X POST -d '{"action":"gone","path":"/configmaps","count":1}' >/dev/null
kcurl -N -m 5 "$URL/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=$RV" >"$T_TMP/gone1.json"
kcurl -N -m 5 "$URL/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=$RV&timeoutSeconds=1&fieldSelector=metadata.name%3Dwb" >"$T_TMP/gone2.json"
check "fault: the next watch answers 410 Gone, the one after works" \
	expect "ERROR 410|ADDED wb" "$(events "$T_TMP/gone1.json")|$(events "$T_TMP/gone2.json")"

ctl faults -X POST -d '{"action":"close","path":"/api/v1/pods","count":1}' >/dev/null
kcurl -o /dev/null "$URL/api/v1/pods"
rc=$?
check "fault: close drops the connection without an answer" expect "52" "$rc"

RV_OLD=$(kcurl "$URL/api/v1/namespaces/default/configmaps" | py 'd["metadata"]["resourceVersion"]')
k create configmap after-expire >/dev/null 2>&1
ctl watches/expire -X POST >/dev/null
kcurl -N -m 5 "$URL/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=$RV_OLD" >"$T_TMP/expired.json"
check "watch from a resourceVersion older than the history is ERROR 410 Expired (curl)" \
	bash -c "python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))
assert e[\"type\"] == \"ERROR\" and e[\"object\"][\"code\"] == 410 and e[\"object\"][\"reason\"] == \"Expired\", e
' '$T_TMP/expired.json'"

wait_watch configmaps 0 # the server notices within a second that kubectl's watch went away
kcurl -N -m 10 "$URL/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true" >"$T_TMP/drop.json" &
CPID=$!
t_cleanup_add "kill $CPID"
wait_watch configmaps 1
check "control: watches are listed" expect "1" "$(ctl watches | py 'sum(1 for w in d["watches"] if w["resource"] == "configmaps")')"
check "control: drop ends every open watch" expect '{"dropped": 1}' "$(ctl watches/drop -X POST | py 'json.dumps({"dropped": d["dropped"]})')"
for _ in $(seq 40); do kill -0 "$CPID" 2>/dev/null || break; sleep 0.05; done
rc=124
kill -0 "$CPID" 2>/dev/null || { wait "$CPID"; rc=$?; }
check "dropped watch stream ended cleanly (curl exit 0, long before its 10 s limit)" expect "0" "$rc"

check "control: faults list empty after clear" expect "0" "$(ctl faults -X DELETE >/dev/null; ctl faults | py 'len(d["faults"])')"
ctl reset -X POST >/dev/null
check "control: reset wipes objects and keeps the initial namespaces" \
	expect "0 0 4" "$(k get nodes -o name | wc -l) $(k get pods -A -o name | wc -l) $(k get ns -o name | wc -l)"

# --- SIGTERM -----------------------------------------------------------------------------

kill -TERM "$KAS_PID"
rc=0
wait_exit "$KAS_PID" 5
rc=$?
check "SIGTERM stops the server with status 0 and closes the port" \
	bash -c "[ $rc -eq 0 ] && ! curl -sk -o /dev/null --max-time 1 'https://127.0.0.1:$PORT/healthz'"

t_summary
