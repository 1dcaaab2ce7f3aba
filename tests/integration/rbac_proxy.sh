#!/usr/bin/env bash
# tests: product
# aws-k8s rbac-proxy against the test API server (TokenReview and SubjectAccessReview from its
# tables) and a test upstream that records what it received: the security table of issue 17,
# the stale cache with the API server down, and certificate files replaced on disk.
. "$(dirname "$0")/../lib/testlib.sh"

KAS_PORT=$(free_port) UP_PORT=$(free_port) PX_PORT=$(free_port) PX2_PORT=$(free_port)
REC=$T_TMP/upstream.jsonl
cat >"$T_TMP/auth.json" <<'JSON'
{"tokens": [{"token": "alice-token", "user": "alice", "groups": ["dev"]},
            {"token": "bob-token", "user": "bob", "groups": ["dev"]},
            {"token": "dave-token", "user": "dave", "groups": ["dev"]}],
 "rules": [{"users": ["alice", "dave"], "verbs": ["get", "create"], "nonResourceURLs": ["/metrics", "/public/*"]},
           {"groups": ["monitoring"], "verbs": ["get"], "nonResourceURLs": ["/metrics"]},
           {"users": ["carol"], "verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments/prometheus-metrics"],
            "resourceNames": ["exporter"], "namespaces": ["d8-monitoring"]}],
 "clientCerts": [{"name": "carol", "user": "carol", "groups": ["monitoring"]}]}
JSON
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KAS_PORT" --kubeconfig-out "$T_TMP/kc" --config "$T_TMP/auth.json"
bg upstream "$T_ROOT/tests/rbac-upstream/run" --port "$UP_PORT" --record "$REC"
peer check "the test API server answers" wait_http "https://127.0.0.1:$KAS_PORT/healthz" 30
peer check "the test upstream answers" wait_http "http://127.0.0.1:$UP_PORT/" 15
: >"$REC"

bg proxy "$AWS_K8S" kube-rbac-proxy --secure-listen-address=127.0.0.1:$PX_PORT \
	--upstream=http://127.0.0.1:$UP_PORT/ --kubeconfig="$T_TMP/kc" --client-ca-file="$T_TMP/kc.client-ca.crt" \
	--auth-header-fields-enabled --ignore-paths=/public/* --read-header-timeout=2s \
	--max-request-body-bytes=1000 --max-header-bytes=8192 --stale-cache-interval=1h \
	--authn-cache-ttl=1s --authz-allow-cache-ttl=1s --authz-deny-cache-ttl=1s --workers=2 --v=2
check "the proxy answers (started by the name kube-rbac-proxy)" wait_http "https://127.0.0.1:$PX_PORT/" 20
PX=https://127.0.0.1:$PX_PORT

# status CASE EXPECTED CURL-ARGS...: one row of the table
status() {
	local name=$1 want=$2 got
	shift 2
	got=$(curl -sk -o "$T_TMP/body" -w '%{http_code}' --max-time 20 "$@")
	[ "$got" = "$want" ] && ok "$name: $want" || fail "$name: $want" "got $got: $(head -c 200 "$T_TMP/body")"
}
# seen PATH: how many requests for PATH the upstream recorded
seen() { python3 - "$REC" "$1" <<'PY'
import json, sys
print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["path"] == sys.argv[2]))
PY
}
# header PATH NAME: the values of header NAME in the last request for PATH the upstream saw
header() { python3 - "$REC" "$1" "$2" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["path"] == sys.argv[2]]
print("|".join(v for k, v in recs[-1]["headers"] if k.lower() == sys.argv[3].lower()) if recs else "<none>")
PY
}

status "no token" 401 "$PX/metrics"
status "bad token" 401 -H "Authorization: Bearer nope" "$PX/metrics"
status "valid token without rights" 403 -H "Authorization: Bearer bob-token" "$PX/metrics"
[ "$(seen /metrics)" = 0 ] && ok "the upstream saw none of the refused requests" || fail "the upstream saw none of the refused requests" "$(cat "$REC")"
status "valid token with rights" 200 -H "Authorization: Bearer alice-token" "$PX/metrics"
grep -q "upstream /metrics" "$T_TMP/body" && ok "the upstream's body comes back" || fail "the upstream's body comes back" "$(cat "$T_TMP/body")"
[ "$(header /metrics x-remote-user)" = alice ] && ok "X-Remote-User is the TokenReview's user" || fail "X-Remote-User is the TokenReview's user" "$(header /metrics x-remote-user)"
[ "$(header /metrics x-remote-groups)" = "dev|system:authenticated" ] && ok "X-Remote-Groups has the groups" || fail "X-Remote-Groups has the groups" "$(header /metrics x-remote-groups)"
[ "$(header /metrics authorization)" = "" ] && ok "Authorization is not forwarded" || fail "Authorization is not forwarded" "$(header /metrics authorization)"
[ "$(header /metrics x-forwarded-for)" = "127.0.0.1" ] && ok "X-Forwarded-For is the client" || fail "X-Forwarded-For is the client" "$(header /metrics x-forwarded-for)"

status "forged X-Remote-User" 200 -H "Authorization: Bearer alice-token" -H "X-Remote-User: admin" -H "X-Remote-Groups: system:masters" "$PX/metrics"
[ "$(header /metrics x-remote-user)" = alice ] && [ "$(header /metrics x-remote-groups)" = "dev|system:authenticated" ] &&
	ok "forged identity headers are replaced" || fail "forged identity headers are replaced" "$(header /metrics x-remote-user) $(header /metrics x-remote-groups)"
status "Connection: naming the proxy's headers" 200 -H "Authorization: Bearer alice-token" -H "Connection: X-Remote-User, X-Forwarded-For" "$PX/metrics"
[ "$(header /metrics x-remote-user)" = alice ] && [ "$(header /metrics x-forwarded-for)" = 127.0.0.1 ] &&
	ok "a client's Connection header cannot drop the proxy's headers" || fail "a client's Connection header cannot drop the proxy's headers" "$(tail -1 "$REC")"
status "forged X-Remote-User on an ignored path" 200 -H "X-Remote-User: admin" -H "Authorization: Bearer alice-token" "$PX/public/x"
[ "$(header /public/x x-remote-user)" = "" ] && [ "$(header /public/x authorization)" = "" ] &&
	ok "ignored path: identity and Authorization headers stripped" || fail "ignored path: identity and Authorization headers stripped" "$(tail -1 "$REC")"

# paths are normalised before the ignore list and the SAR
status "ignored path without a token" 200 "$PX/public/x"
status "'..' out of an ignored path" 401 --path-as-is "$PX/public/../metrics"
status "'%2e%2e' out of an ignored path" 401 --path-as-is "$PX/public/%2e%2e/metrics"
status "encoded slash out of an ignored path" 401 --path-as-is "$PX/public/..%2fmetrics"
status "'//' into an ignored path" 200 --path-as-is "$PX//public//y"
[ "$(seen /public/y)" = 1 ] && ok "the upstream gets the clean path" || fail "the upstream gets the clean path" "$(tail -1 "$REC")"
status "'..' to a path allowed by the SAR" 200 --path-as-is -H "Authorization: Bearer alice-token" "$PX/x/../metrics"
status "'%2e%2e' to a path the SAR refuses" 403 --path-as-is -H "Authorization: Bearer alice-token" "$PX/metrics/%2e%2e/other"

# client certificates
status "client certificate from the client CA" 200 --cert "$T_TMP/kc.carol.crt" --key "$T_TMP/kc.carol.key" "$PX/metrics"
[ "$(header /metrics x-remote-user)" = carol ] && ok "certificate user = CN" || fail "certificate user = CN" "$(header /metrics x-remote-user)"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=evil-ca -days 2 \
	-keyout "$T_TMP/evil-ca.key" -out "$T_TMP/evil-ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=carol/O=monitoring" \
	-keyout "$T_TMP/evil.key" -out "$T_TMP/evil.csr" 2>/dev/null
openssl x509 -req -in "$T_TMP/evil.csr" -CA "$T_TMP/evil-ca.crt" -CAkey "$T_TMP/evil-ca.key" -days 2 \
	-out "$T_TMP/evil.crt" 2>/dev/null
status "client certificate from the wrong CA" 401 --cert "$T_TMP/evil.crt" --key "$T_TMP/evil.key" "$PX/metrics"
# expired: signed by the right CA, its not-after a day before its not-before (now)
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=carol/O=monitoring" \
	-keyout "$T_TMP/old.key" -out "$T_TMP/old.csr" 2>/dev/null
openssl x509 -req -in "$T_TMP/old.csr" -CA "$T_TMP/kc.client-ca.crt" -CAkey "$T_TMP/kc.client-ca.key" \
	-days -1 -out "$T_TMP/old.crt" 2>/dev/null
peer check "the expired certificate is expired" bash -c "! openssl x509 -in '$T_TMP/old.crt' -noout -checkend 0"
status "expired client certificate" 401 --cert "$T_TMP/old.crt" --key "$T_TMP/old.key" "$PX/metrics"

# limits
big=$(head -c 9000 /dev/zero | tr '\0' a)
status "oversize header" 431 -H "Authorization: Bearer alice-token" -H "X-Big: $big" "$PX/metrics"
head -c 5000 /dev/zero >"$T_TMP/big.body"
status "body over the limit (Content-Length)" 413 -H "Authorization: Bearer alice-token" --data-binary @"$T_TMP/big.body" "$PX/metrics"
status "body over the limit (chunked)" 413 -H "Authorization: Bearer alice-token" -H "Transfer-Encoding: chunked" --data-binary @"$T_TMP/big.body" "$PX/metrics"
head -c 500 /dev/zero >"$T_TMP/small.body"
status "body under the limit" 200 -H "Authorization: Bearer alice-token" --data-binary @"$T_TMP/small.body" "$PX/public/post"
python3 - "$PX_PORT" >"$T_TMP/slow.out" 2>&1 <<'PY' && ok "slowloris: 408 within the header timeout" || fail "slowloris: 408 within the header timeout" "$(cat "$T_TMP/slow.out")"
import socket, ssl, sys, time
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1]))))
t0 = time.time(); s.settimeout(1); reply = b""
s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
while time.time() - t0 < 15:
    try:
        s.sendall(b"X-A: b\r\n")
        d = s.recv(4096)
        if not d: break
        reply += d
    except socket.timeout:
        continue
    except OSError:
        break
print(reply[:40], round(time.time() - t0, 1))
sys.exit(0 if reply.startswith(b"HTTP/1.1 408") and time.time() - t0 < 8 else 1)
PY
for v in tls1 tls1_1; do
	if echo | openssl s_client -connect 127.0.0.1:$PX_PORT -$v -cipher DEFAULT@SECLEVEL=0 >"$T_TMP/s_client.out" 2>&1 </dev/null; then
		fail "a $v client is refused" "$(tail -5 "$T_TMP/s_client.out")"
	else
		ok "a $v client is refused"
	fi
done
echo | openssl s_client -connect 127.0.0.1:$PX_PORT -tls1_2 >"$T_TMP/s_client.out" 2>&1 </dev/null &&
	ok "a TLS 1.2 client is served" || fail "a TLS 1.2 client is served" "$(tail -5 "$T_TMP/s_client.out")"

if grep -q "alice-token\|bob-token" "$T_TMP/proxy.log"; then fail "no token in the log" "$(grep -m1 token "$T_TMP/proxy.log")"; else ok "no token in the log"; fi

# Deckhouse's sidecar: its arguments unchanged, KUBE_RBAC_PROXY_CONFIG with excludePaths and an
# upstream with resourceAttributes (a SAR on deployments/prometheus-metrics), a self-signed cert
PX3_PORT=$(free_port)
KUBE_RBAC_PROXY_CONFIG="
excludePaths: [/healthz]
upstreams:
- upstream: http://127.0.0.1:$UP_PORT/sub/
  path: /
  authorization:
    resourceAttributes:
      namespace: d8-monitoring
      apiGroup: apps
      apiVersion: v1
      resource: deployments
      subresource: prometheus-metrics
      name: exporter
" bg deckhouse "$AWS_K8S" kube-rbac-proxy --secure-listen-address=127.0.0.1:$PX3_PORT \
	--client-ca-file="$T_TMP/kc.client-ca.crt" --v=2 --stale-cache-interval=1h30m --livez-path=/livez \
	--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 \
	--kubeconfig="$T_TMP/kc"
check "Deckhouse's sidecar arguments start it" wait_http "https://127.0.0.1:$PX3_PORT/livez" 20
status "Deckhouse: --livez-path answers without credentials" 200 "https://127.0.0.1:$PX3_PORT/livez"
status "Deckhouse: an excluded path goes through without credentials" 200 "https://127.0.0.1:$PX3_PORT/healthz"
[ "$(seen /sub/healthz)" = 1 ] && ok "Deckhouse: the upstream's path prefix is joined" || fail "Deckhouse: the upstream's path prefix is joined" "$(tail -1 "$REC")"
status "Deckhouse: the scraper's certificate is authorized by the SAR" 200 --cert "$T_TMP/kc.carol.crt" --key "$T_TMP/kc.carol.key" "https://127.0.0.1:$PX3_PORT/metrics"
status "Deckhouse: a user without the role is refused" 403 -H "Authorization: Bearer alice-token" "https://127.0.0.1:$PX3_PORT/metrics"

# stale cache: the API server goes away; known decisions hold, new ones fail closed
status "dave's first request (cached)" 200 -H "Authorization: Bearer dave-token" "$PX/metrics"
kill "$(cat "$T_TMP/kas.pid")"
wait_exit "$(cat "$T_TMP/kas.pid")" 10
sleep 1.5 # past the 1 s cache lifetimes
status "API server down: a decision within the stale interval holds" 200 -H "Authorization: Bearer dave-token" "$PX/metrics"
status "API server down: a new token fails closed" 401 -H "Authorization: Bearer alice-token2" "$PX/metrics"
status "API server down: a known token on a new path fails closed" 500 -H "Authorization: Bearer dave-token" "$PX/public/../other"

# certificate files replaced on disk: the next handshake uses the new one
mkcert() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" -days 2 \
	-keyout "$T_TMP/tls.key.new" -out "$T_TMP/tls.crt.new" 2>/dev/null &&
	mv "$T_TMP/tls.crt.new" "$T_TMP/tls.crt" && mv "$T_TMP/tls.key.new" "$T_TMP/tls.key"; }
mkcert first-cert
bg proxy2 "$AWS_K8S" rbac-proxy --secure-listen-address=127.0.0.1:$PX2_PORT \
	--upstream=http://127.0.0.1:$UP_PORT/ --kubeconfig="$T_TMP/kc" --tls-cert-file="$T_TMP/tls.crt" \
	--tls-private-key-file="$T_TMP/tls.key" --tls-reload-interval=200ms --ignore-paths=/*
check "the second proxy answers" wait_http "https://127.0.0.1:$PX2_PORT/" 20
subject() { echo | openssl s_client -connect 127.0.0.1:$PX2_PORT 2>/dev/null </dev/null | openssl x509 -noout -subject 2>/dev/null; }
subject | grep -q first-cert && ok "serves the certificate file" || fail "serves the certificate file" "$(subject)"
mkcert second-cert
sleep 0.5
subject | grep -q second-cert && ok "replaced certificate files: the next handshake uses the new one" ||
	fail "replaced certificate files: the next handshake uses the new one" "$(subject)"
stop_within "$(cat "$T_TMP/proxy2.pid")" 10 "rbac-proxy" && [ "$STOP_RC" = 0 ] && ok "stops cleanly on SIGTERM" || fail "stops cleanly on SIGTERM" "rc=$STOP_RC"
t_summary
