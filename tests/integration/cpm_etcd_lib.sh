# shellcheck shell=bash
# Sourced by tests/integration/cpm_etcd_*.sh (not executable, so tests/run does not run it).
# Real etcd 3.4 processes on 127.0.0.1 with TLS on the client and peer ports, certificates made
# with the openssl CLI as kubeadm makes them (etcd/server and etcd/peer with serverAuth and
# clientAuth, SANs localhost and 127.0.0.1; a healthcheck-client with clientAuth).

# etcd_pki DIR: ca.crt/key, server.crt/key (also used for the peers), client.crt/key
etcd_pki() {
	local d=$1
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ca.key" \
		-out "$d/ca.crt" -days 30 -subj "/CN=etcd-ca" \
		-addext "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign" \
		-addext "basicConstraints=critical,CA:TRUE" 2>/dev/null || return 1
	etcd_leaf "$d" server "/CN=master" "serverAuth,clientAuth" "DNS:localhost,IP:127.0.0.1" &&
		etcd_leaf "$d" client "/CN=kube-etcd-healthcheck-client" "clientAuth" ""
}
# etcd_leaf DIR NAME SUBJECT EKU SANS
etcd_leaf() {
	local d=$1 n=$2 ext="$T_TMP/$2.ext"
	{
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$4"
		[ -n "$5" ] && echo "subjectAltName=$5"
	} >"$ext"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/$n.key" \
		-out "$d/$n.csr" -subj "$3" 2>/dev/null &&
		openssl x509 -req -in "$d/$n.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
			-days 30 -extfile "$ext" -out "$d/$n.crt" 2>/dev/null
}

# etcd_run NAME CLIENT_PORT PEER_PORT DATA_DIR INITIAL_CLUSTER STATE [ARGS...]: starts etcd
# through bg (killed at exit), logs in $T_TMP/NAME.log; $EP is the PKI folder.
etcd_run() {
	local name=$1 cp=$2 pp=$3 dd=$4 ic=$5 state=$6
	shift 6
	bg "$name" etcd --name "$name" --data-dir "$dd" \
		--listen-client-urls "https://127.0.0.1:$cp" --advertise-client-urls "https://127.0.0.1:$cp" \
		--listen-peer-urls "https://127.0.0.1:$pp" --initial-advertise-peer-urls "https://127.0.0.1:$pp" \
		--initial-cluster "$ic" --initial-cluster-state "$state" \
		--cert-file "$EP/server.crt" --key-file "$EP/server.key" --trusted-ca-file "$EP/ca.crt" \
		--client-cert-auth --peer-cert-file "$EP/server.crt" --peer-key-file "$EP/server.key" \
		--peer-trusted-ca-file "$EP/ca.crt" --peer-client-cert-auth \
		--heartbeat-interval 100 --election-timeout 1000 "$@"
}

# ectl ARGS...: etcdctl with the client certificate
ectl() { ETCDCTL_API=3 etcdctl --cacert "$EP/ca.crt" --cert "$EP/client.crt" --key "$EP/client.key" --command-timeout 10s "$@"; }
# cpm_etcd ARGS...: aws-k8s cpm etcd with the client certificate
cpm_etcd() { "$AWS_K8S" cpm etcd --cacert "$EP/ca.crt" --cert "$EP/client.crt" --key "$EP/client.key" "$@"; }

# etcd_wait_healthy URL [SECONDS]: until etcdctl endpoint health passes (default 60 s)
etcd_wait_healthy() {
	local i
	for ((i = 0; i < ${2:-60} * 4; i++)); do
		ectl --endpoints "$1" --command-timeout 2s endpoint health >/dev/null 2>&1 && return 0
		sleep 0.25
	done
	return 1
}

# etcd_fill URL N SIZE: N keys k0001.. of SIZE random bytes (base64), in one python process;
# prints nothing, fails on the first failed put.
etcd_fill() {
	python3 - "$1" "$2" "$3" "$EP" <<'PY'
import base64, http.client, json, os, ssl, sys, urllib.parse
url, n, size, ep = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
u = urllib.parse.urlparse(url)
ctx = ssl.create_default_context(cafile=ep + "/ca.crt")
ctx.load_cert_chain(ep + "/client.crt", ep + "/client.key")
c = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=30)
b64 = lambda b: base64.b64encode(b).decode()
for i in range(1, n + 1):
    body = json.dumps({"key": b64(b"k%04d" % i), "value": b64(base64.b64encode(os.urandom(size * 3 // 4)))})
    c.request("POST", "/v3/kv/put", body, {"Content-Type": "application/json"})
    r = c.getresponse(); data = r.read()
    if r.status != 200:
        sys.exit("put k%04d: %d %s" % (i, r.status, data[:200]))
PY
}

# etcd_writer_start STATE URL[,URL...]: a writer in the background (through bg, named writer)
# that puts w/000001, w/000002... one after the other, write n to endpoint n first (round robin)
# and on to the next until one acknowledges it (2 s per try; a learner or a dead member refuses), until the file STATE.stop appears; then it reads every key back
# from the endpoints and writes a JSON summary to STATE: acked, lost (acknowledged but missing or
# wrong), failed_tries, max_gap_s (the longest time between two acknowledged writes).
etcd_writer_start() {
	# (a background job's stdin is /dev/null: the script goes through a file)
	cat >"$T_TMP/writer.py" <<'PY'
import base64, http.client, json, os, ssl, sys, time, urllib.parse
state, urls, ep = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
ctx = ssl.create_default_context(cafile=ep + "/ca.crt")
ctx.load_cert_chain(ep + "/client.crt", ep + "/client.key")
b64 = lambda b: base64.b64encode(b).decode()
def post(url, path, body):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=2)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse(); data = r.read()
        return r.status, data
    finally:
        c.close()
acked, failed, gap = 0, 0, 0.0
last = time.monotonic()
n = 1
while not os.path.exists(state + ".stop"):
    done = False
    for i in range(len(urls)):
        url = urls[(n + i) % len(urls)]
        try:
            st, _ = post(url, "/v3/kv/put", {"key": b64(b"w/%06d" % n), "value": b64(b"%d" % n)})
        except Exception:
            st = 0
        if st == 200:
            done = True; break
        failed += 1
    if done:
        now = time.monotonic(); gap = max(gap, now - last); last = now
        acked = n; n += 1
        time.sleep(0.02)
    else:
        time.sleep(0.1)
lost = -1
for url in urls:
    try:
        st, data = post(url, "/v3/kv/range", {"key": b64(b"w/"), "range_end": b64(b"w0")})
    except Exception:
        continue
    if st != 200:
        continue
    got = {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv["value"]).decode() for kv in json.loads(data).get("kvs", [])}
    lost = sum(1 for i in range(1, acked + 1) if got.get("w/%06d" % i) != str(i))
    break
json.dump({"acked": acked, "lost": lost, "failed_tries": failed, "max_gap_s": round(gap, 2)}, open(state, "w"))
PY
	bg writer python3 "$T_TMP/writer.py" "$1" "$2" "$EP"
}
# etcd_writer_stop STATE: asks the writer to stop and waits for its summary (60 s at most)
etcd_writer_stop() {
	local i
	touch "$1.stop"
	for ((i = 0; i < 240; i++)); do
		[ -s "$1" ] && return 0
		sleep 0.25
	done
	return 1
}
# etcd_count_w URL: how many w/ keys the writer has written so far
etcd_count_w() { ectl --endpoints "$1" get w/ w0 --limit 1 -w json 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin).get("count", 0))' 2>/dev/null; }
