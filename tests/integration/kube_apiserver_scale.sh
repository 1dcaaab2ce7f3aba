#!/usr/bin/env bash
# tests: peers
# sanitizer-pass: skip (tests the Python fakes only; aws-k8s is not run)
# The fake kube-apiserver holds 5,000 Nodes and 20,000 Pods and lists them quickly.
# parallel: no (time limits on listing 5,000 Nodes and 20,000 Pods)
. "$(dirname "$0")/../lib/testlib.sh"

PORT=$(free_port)
HPORT=$(free_port)
KC=$T_TMP/kubeconfig
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$PORT" --http-port "$HPORT" --kubeconfig-out "$KC"
if ! wait_http "http://127.0.0.1:$HPORT/healthz" 15; then
	fail "server starts" "$(tail -5 "$T_TMP/kas.log")"
	t_summary
fi

while IFS= read -r line; do
	case $line in
	"ok - "*) ok "${line#ok - }" ;;
	"FAIL - "*) fail "${line#FAIL - }" ;;
	*) [ -n "$line" ] && fail "scale test" "$line" ;;
	esac
done < <(python3 - "$HPORT" 2>&1 <<'PYEOF'
import http.client, json, sys, threading, time, urllib.parse

port = int(sys.argv[1])


def report(ok, name, why=""):
    print(("ok - " if ok else "FAIL - ") + name + (": " + why if why and not ok else ""), flush=True)


def conn():
    return http.client.HTTPConnection("127.0.0.1", port, timeout=60)


def create(kind, lo, hi, errors):
    c = conn()
    for i in range(lo, hi):
        if kind == "node":
            path, body = "/api/v1/nodes", {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "node-%05d" % i, "labels": {"zone": "z%d" % (i % 3)}},
                "spec": {"providerID": "aws:///us-east-1a/i-%017x" % i},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
        else:
            path, body = "/api/v1/namespaces/default/pods", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "pod-%05d" % i, "labels": {"app": "a%d" % (i % 10)}},
                "spec": {"nodeName": "node-%05d" % (i % 5000), "containers": [{"name": "c", "image": "x:1"}]},
                "status": {"phase": "Running"}}
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        if r.status != 201:
            errors.append(r.status)
            return


def load(kind, n, threads=4):
    errors, step = [], n // threads
    ts = [threading.Thread(target=create, args=(kind, i * step, (i + 1) * step, errors)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return errors


t0 = time.time()
e1 = load("node", 5000)
e2 = load("pod", 20000)
dt = time.time() - t0
report(not e1 and not e2 and dt < 40, "create 5,000 nodes and 20,000 pods over HTTP (%.1fs)" % dt, str((e1[:3], e2[:3])))

c = conn()


def get(path):
    c.request("GET", path)
    r = c.getresponse()
    return r.status, json.loads(r.read())


def paginate(path, limit):
    names, cont, rvs = [], None, set()
    while True:
        q = "%s%slimit=%d" % (path, "&" if "?" in path else "?", limit)
        if cont:
            q += "&continue=" + urllib.parse.quote(cont)
        st, d = get(q)
        assert st == 200, (st, d)
        names += [i["metadata"]["name"] for i in d["items"]]
        rvs.add(d["metadata"]["resourceVersion"])
        cont = d["metadata"].get("continue")
        if not cont:
            return names, rvs


st, d = get("/api/v1/pods?limit=500")
report(st == 200 and len(d["items"]) == 500 and d["metadata"].get("remainingItemCount") == 19500,
       "first page of 500 pods counts the remaining ones", str(d["metadata"])[:200])

t0 = time.time()
names, rvs = paginate("/api/v1/pods", 500)
dt = time.time() - t0
report(names == ["pod-%05d" % i for i in range(20000)] and len(rvs) == 1 and dt < 5,
       "list 20,000 pods in pages of 500, sorted and consistent (%.2fs)" % dt, "%d names, rvs %s" % (len(names), rvs))

t0 = time.time()
names, _ = paginate("/api/v1/nodes?labelSelector=zone%3Dz1", 100)
dt = time.time() - t0
report(len(names) == 1667 and dt < 3, "list 5,000 nodes with a label selector, pages of 100 (%.2fs)" % dt, str(len(names)))

t0 = time.time()
st, d = get("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-00042")
dt = time.time() - t0
report(st == 200 and [i["metadata"]["name"] for i in d["items"]] == ["pod-00042", "pod-05042", "pod-10042", "pod-15042"]
       and dt < 1, "field selector spec.nodeName over 20,000 pods (%.2fs)" % dt)

t0 = time.time()
st, d = get("/api/v1/pods")
dt = time.time() - t0
report(st == 200 and len(d["items"]) == 20000 and dt < 5, "one unpaginated list of 20,000 pods (%.2fs)" % dt)

# a watch does not block other requests, and sees a change made meanwhile
rv = d["metadata"]["resourceVersion"]
w = conn()
w.request("GET", "/api/v1/nodes?watch=1&resourceVersion=%s&timeoutSeconds=3" % rv)
wr = w.getresponse()
t0 = time.time()
c.request("PATCH", "/api/v1/nodes/node-00007", json.dumps({"spec": {"unschedulable": True}}),
          {"Content-Type": "application/strategic-merge-patch+json"})
r = c.getresponse()
r.read()
dt = time.time() - t0
line = json.loads(wr.readline())
report(r.status == 200 and dt < 1 and line["type"] == "MODIFIED" and line["object"]["metadata"]["name"] == "node-00007",
       "watch sees a change while other requests go on (%.2fs)" % dt, str(line)[:200])
PYEOF
)
[ $((T_PASS + T_FAIL)) -ge 7 ] || fail "scale test" "not every check ran"
t_summary
