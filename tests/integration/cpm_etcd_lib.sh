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
