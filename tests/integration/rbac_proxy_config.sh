#!/usr/bin/env bash
# tests: product
# aws-k8s rbac-proxy: what tests/integration/rbac_proxy.sh leaves out of issue 17's list, against
# the test API server and the recording test upstream: --config-file with rewrites by query
# parameter (one SubjectAccessReview per value, 400 without one) and static rules (by user and by
# a client certificate's group), --auth-token-audiences, --allow-paths (404 outside),
# --forward-authorization-header, --proxy-endpoints-port, --tls-min-version, --tls-cipher-suites,
# the HTTP/2 flags accepted with a warning and --oidc-issuer refused; hop-by-hop headers; rewrites
# by header (KUBE_RBAC_PROXY_CONFIG); the caches; an HTTPS upstream that
# requires a client certificate (--upstream-ca-file, --upstream-client-cert-file/-key-file): its
# certificate verified against the CA and its address.
. "$(dirname "$0")/../lib/testlib.sh"

KAS_PORT=$(free_port) UP_PORT=$(free_port) PX_PORT=$(free_port) EP_PORT=$(free_port)
PX2_PORT=$(free_port) PX3_PORT=$(free_port)
REC=$T_TMP/upstream.jsonl
cat >"$T_TMP/auth.json" <<'JSON'
{"tokens": [{"token": "ns-token", "user": "nsuser", "audiences": ["kube-rbac-proxy"]},
            {"token": "api-token", "user": "nsuser"},
            {"token": "stat-token", "user": "stat", "audiences": ["kube-rbac-proxy"]},
            {"token": "cache-token", "user": "cacheuser", "audiences": ["kube-rbac-proxy"]}],
 "rules": [{"users": ["nsuser"], "verbs": ["get"], "apiGroups": [""], "resources": ["services/proxy"],
            "resourceNames": ["metrics"], "namespaces": ["ns-a", "ns-b"]},
           {"users": ["cacheuser"], "verbs": ["get"], "apiGroups": [""], "resources": ["services/proxy"],
            "namespaces": ["ns-b"]}],
 "clientCerts": [{"name": "mon", "user": "mon", "groups": ["monitoring"]}]}
JSON
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KAS_PORT" --kubeconfig-out "$T_TMP/kc" --config "$T_TMP/auth.json"
bg upstream "$T_ROOT/tests/rbac-upstream/run" --port "$UP_PORT" --record "$REC"
peer check "the test API server answers" wait_http "https://127.0.0.1:$KAS_PORT/healthz" 30
peer check "the test upstream answers" wait_http "http://127.0.0.1:$UP_PORT/" 15
cat >"$T_TMP/config.yaml" <<'YAML'
authorization:
  rewrites:
    byQueryParameter:
      name: namespace
  resourceAttributes:
    namespace: "{{ .Value }}"
    apiVersion: v1
    resource: services
    subresource: proxy
    name: metrics
  static:
  - user:
      name: stat
    resourceRequest: true
    verb: get
    namespace: ns-static
    resource: services
    subresource: proxy
  - user:
      groups: [monitoring]
    resourceRequest: true
    verb: get
YAML
bg proxy "$AWS_K8S" rbac-proxy --secure-listen-address=127.0.0.1:$PX_PORT \
	--upstream=http://127.0.0.1:$UP_PORT/ --kubeconfig="$T_TMP/kc" --config-file="$T_TMP/config.yaml" \
	--auth-token-audiences=kube-rbac-proxy --allow-paths=/metrics,/metrics/* \
	--forward-authorization-header --auth-header-fields-enabled --client-ca-file="$T_TMP/kc.client-ca.crt" \
	--proxy-endpoints-port="$EP_PORT"
check "the proxy answers" wait_http "https://127.0.0.1:$PX_PORT/" 20
PX=https://127.0.0.1:$PX_PORT

status() {
	local name=$1 want=$2 got
	shift 2
	got=$(curl -sk -o "$T_TMP/body" -w '%{http_code}' --max-time 20 "$@")
	[ "$got" = "$want" ] && ok "$name: $want" || fail "$name: $want" "got $got: $(head -c 200 "$T_TMP/body")"
}
# last NAME: header NAME of the last request the upstream recorded
last() { python3 - "$REC" "$1" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
print("|".join(v for k, v in recs[-1]["headers"] if k.lower() == sys.argv[2].lower()) if recs else "<none>")
PY
}
N="Authorization: Bearer ns-token"
status "rewrite: an allowed namespace" 200 -H "$N" "$PX/metrics?namespace=ns-a"
[ "$(last authorization)" = "Bearer ns-token" ] && ok "--forward-authorization-header: the upstream gets Authorization" ||
	fail "--forward-authorization-header: the upstream gets Authorization" "$(last authorization)"
status "rewrite: two allowed namespaces (a SAR each)" 200 -H "$N" "$PX/metrics?namespace=ns-a&namespace=ns-b"
status "rewrite: one of two namespaces refused" 403 -H "$N" "$PX/metrics?namespace=ns-a&namespace=ns-c"
status "rewrite: no value" 400 -H "$N" "$PX/metrics"
status "--allow-paths: another path" 404 -H "$N" "$PX/other?namespace=ns-a"
status "--allow-paths: a pattern" 200 -H "$N" "$PX/metrics/x?namespace=ns-a"
status "--auth-token-audiences: a token for the API server only" 401 -H "Authorization: Bearer api-token" "$PX/metrics?namespace=ns-a"
status "static rule by user, no SAR rule" 200 -H "Authorization: Bearer stat-token" "$PX/metrics?namespace=ns-static"
status "static rule by user: another namespace" 403 -H "Authorization: Bearer stat-token" "$PX/metrics?namespace=ns-a"
status "static rule by a client certificate's group (O)" 200 --cert "$T_TMP/kc.mon.crt" --key "$T_TMP/kc.mon.key" "$PX/metrics?namespace=ns-x"
[ "$(last x-remote-groups)" = "monitoring|system:authenticated" ] && ok "client certificate: groups = O" ||
	fail "client certificate: groups = O" "$(last x-remote-groups)"
# the caches at their default lifetimes (2 min TokenReview, 5 min allowed, 30 s denied): ten
# requests of a new token, allowed and denied, make one TokenReview and one review per decision
curl -sk -o /dev/null -X DELETE "https://127.0.0.1:$KAS_PORT/_control/requests"
codes=
for _ in 1 2 3 4 5; do
	codes+=$(curl -sk -o /dev/null -w ' %{http_code}' -H "Authorization: Bearer cache-token" "$PX/metrics?namespace=ns-b")
	codes+=$(curl -sk -o /dev/null -w ' %{http_code}' -H "Authorization: Bearer cache-token" "$PX/metrics?namespace=ns-z")
done
[ "$codes" = "$(printf ' 200 403%.0s' 1 2 3 4 5)" ] && ok "cached decisions answer as the first ones" ||
	fail "cached decisions answer as the first ones" "$codes"
counts=$(curl -sk "https://127.0.0.1:$KAS_PORT/_control/requests" | jq -c '.counters | with_entries(select(.key | test("review")))')
[ "$(jq '[.[]] | add' <<<"$counts")" = 3 ] && jq -e 'to_entries | map(select(.key | test("tokenreview"))) | .[0].value == 1' <<<"$counts" >/dev/null &&
	ok "cached: 10 requests, 1 TokenReview and 2 SubjectAccessReviews" || fail "cached: 10 requests, 1 TokenReview and 2 SubjectAccessReviews" "$counts"

# hop-by-hop headers, and a custom one the client's Connection header names, stay at the proxy
status "hop-by-hop headers" 200 -H "$N" -H "Keep-Alive: timeout=5" -H "TE: trailers" -H "Upgrade: h2c" \
	-H "Proxy-Authorization: Basic c2VjcmV0" -H "Proxy-Connection: keep-alive" -H "X-Hop: 1" \
	-H "Connection: keep-alive, X-Hop" -H "X-End-To-End: 1" "$PX/metrics?namespace=ns-a"
hops="$(last keep-alive)$(last te)$(last upgrade)$(last proxy-authorization)$(last proxy-connection)$(last x-hop)"
[ -z "$hops" ] && [ "$(last x-end-to-end)" = 1 ] && ok "hop-by-hop headers removed, end-to-end ones kept" ||
	fail "hop-by-hop headers removed, end-to-end ones kept" "$(tail -1 "$REC")"
got=$(curl -sk --max-time 10 "https://127.0.0.1:$EP_PORT/healthz")
[ "$got" = ok ] && ok "--proxy-endpoints-port: /healthz answers ok" || fail "--proxy-endpoints-port: /healthz answers ok" "$got"
status "--proxy-endpoints-port: nothing else there" 404 "https://127.0.0.1:$EP_PORT/metrics?namespace=ns-a"

# rewrites by header, from KUBE_RBAC_PROXY_CONFIG
PX4_PORT=$(free_port)
KUBE_RBAC_PROXY_CONFIG='
authorization:
  rewrites:
    byHttpHeader:
      name: X-Namespace
  resourceAttributes:
    namespace: "{{.Value}}"
    resource: services
    subresource: proxy
    name: metrics
' bg proxy4 "$AWS_K8S" rbac-proxy --secure-listen-address=127.0.0.1:$PX4_PORT \
	--upstream=http://127.0.0.1:$UP_PORT/ --kubeconfig="$T_TMP/kc" --auth-token-audiences=kube-rbac-proxy
check "the header-rewrite proxy answers" wait_http "https://127.0.0.1:$PX4_PORT/" 20
status "rewrite by header: an allowed namespace" 200 -H "$N" -H "X-Namespace: ns-b" "https://127.0.0.1:$PX4_PORT/metrics"
status "rewrite by header: a refused namespace" 403 -H "$N" -H "X-Namespace: ns-c" "https://127.0.0.1:$PX4_PORT/metrics"
status "rewrite by header: no header" 400 -H "$N" "https://127.0.0.1:$PX4_PORT/metrics"

# TLS settings, with an ECDSA certificate
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=px -days 2 \
	-keyout "$T_TMP/tls.key" -out "$T_TMP/tls.crt" 2>/dev/null
bg proxy2 "$AWS_K8S" rbac-proxy --secure-listen-address=127.0.0.1:$PX2_PORT --upstream=http://127.0.0.1:$UP_PORT/ \
	--kubeconfig="$T_TMP/kc" --tls-cert-file="$T_TMP/tls.crt" --tls-private-key-file="$T_TMP/tls.key" \
	--tls-min-version=VersionTLS13
bg proxy3 "$AWS_K8S" rbac-proxy --secure-listen-address=127.0.0.1:$PX3_PORT --upstream=http://127.0.0.1:$UP_PORT/ \
	--kubeconfig="$T_TMP/kc" --tls-cert-file="$T_TMP/tls.crt" --tls-private-key-file="$T_TMP/tls.key" \
	--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 --http2-disable --http2-max-concurrent-streams=50
check "the TLS 1.3 proxy answers" wait_http "https://127.0.0.1:$PX2_PORT/" 20
check "the cipher-list proxy answers" wait_http "https://127.0.0.1:$PX3_PORT/" 20
# tls PORT ARGS...: does a handshake with these s_client arguments succeed?
tls() { local p=$1; shift; echo | openssl s_client -connect 127.0.0.1:$p "$@" >"$T_TMP/s_client.out" 2>&1 </dev/null; }
tls "$PX2_PORT" -tls1_2 && fail "--tls-min-version=VersionTLS13: a TLS 1.2 client is refused" "$(tail -3 "$T_TMP/s_client.out")" ||
	ok "--tls-min-version=VersionTLS13: a TLS 1.2 client is refused"
tls "$PX2_PORT" -tls1_3 && ok "--tls-min-version=VersionTLS13: a TLS 1.3 client is served" ||
	fail "--tls-min-version=VersionTLS13: a TLS 1.3 client is served" "$(tail -3 "$T_TMP/s_client.out")"
tls "$PX3_PORT" -tls1_2 -cipher ECDHE-ECDSA-AES128-GCM-SHA256 &&
	fail "--tls-cipher-suites: a TLS 1.2 client with another suite is refused" "$(tail -3 "$T_TMP/s_client.out")" ||
	ok "--tls-cipher-suites: a TLS 1.2 client with another suite is refused"
tls "$PX3_PORT" -tls1_2 -cipher ECDHE-ECDSA-AES256-GCM-SHA384 && ok "--tls-cipher-suites: the listed suite is served" ||
	fail "--tls-cipher-suites: the listed suite is served" "$(tail -3 "$T_TMP/s_client.out")"
grep "have no effect" "$T_TMP/proxy3.log" | grep -q "http2-max-concurrent-streams" &&
	ok "HTTP/2 flags: accepted, named in the start-up warning" ||
	fail "HTTP/2 flags: accepted, named in the start-up warning" "$(head -3 "$T_TMP/proxy3.log")"
alpn=$(echo | openssl s_client -connect 127.0.0.1:$PX3_PORT -alpn h2,http/1.1 2>/dev/null </dev/null | grep -i "ALPN")
grep -q "h2$" <<<"$alpn" && fail "no HTTP/2 offered by ALPN" "$alpn" || ok "no HTTP/2 offered by ALPN"

# an HTTPS upstream requiring a client certificate
ca() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" -days 2 \
	-keyout "$T_TMP/$1.key" -out "$T_TMP/$1.crt" 2>/dev/null; }
# leaf NAME CA [SAN]: a certificate NAME signed by CA
leaf() {
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
		-keyout "$T_TMP/$1.key" -out "$T_TMP/$1.csr" 2>/dev/null &&
		openssl x509 -req -in "$T_TMP/$1.csr" -CA "$T_TMP/$2.crt" -CAkey "$T_TMP/$2.key" -days 2 \
			${3:+-extfile <(printf 'subjectAltName=%s' "$3")} -out "$T_TMP/$1.crt" 2>/dev/null
}
ca up-ca && ca other-ca && ca up-client-ca && leaf up-server up-ca IP:127.0.0.1 &&
	leaf up-wrong-name up-ca DNS:elsewhere.example && leaf proxy-client up-client-ca
peer check "the certificates for the HTTPS upstream are made" test -s "$T_TMP/proxy-client.crt"
UPS_PORT=$(free_port) UPW_PORT=$(free_port)
REC2=$T_TMP/upstream-tls.jsonl
bg upstream_tls "$T_ROOT/tests/rbac-upstream/run" --port "$UPS_PORT" --record "$REC2" \
	--tls-cert "$T_TMP/up-server.crt" --tls-key "$T_TMP/up-server.key" --client-ca "$T_TMP/up-client-ca.crt"
bg upstream_wrong "$T_ROOT/tests/rbac-upstream/run" --port "$UPW_PORT" --record "$T_TMP/wrong.jsonl" \
	--tls-cert "$T_TMP/up-wrong-name.crt" --tls-key "$T_TMP/up-wrong-name.key"
# up_ready: the HTTPS upstream answers a client with a certificate of its client CA
up_ready() {
	for _ in $(seq 150); do
		curl -sk --cert "$T_TMP/proxy-client.crt" --key "$T_TMP/proxy-client.key" -o /dev/null \
			"https://127.0.0.1:$UPS_PORT/ready" && return 0
		sleep 0.1
	done
	return 1
}
peer check "the HTTPS upstream answers" up_ready
# uproxy NAME UPSTREAM-PORT ARGS...: a proxy without authorization in front of the HTTPS upstream
uproxy() {
	local name=$1 up=$2 port
	shift 2
	port=$(free_port)
	bg "$name" "$AWS_K8S" rbac-proxy --secure-listen-address=127.0.0.1:$port --upstream=https://127.0.0.1:$up/ \
		--kubeconfig="$T_TMP/kc" --ignore-paths=/* "$@"
	wait_http "https://127.0.0.1:$port/livez-none" 20
	UP_URL=https://127.0.0.1:$port
}
uproxy px_tls "$UPS_PORT" --upstream-ca-file="$T_TMP/up-ca.crt" \
	--upstream-client-cert-file="$T_TMP/proxy-client.crt" --upstream-client-key-file="$T_TMP/proxy-client.key"
status "HTTPS upstream: CA and client certificate" 200 "$UP_URL/tls"
cn=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1].get("client_cn"))' "$REC2" 2>&1)
[ "$cn" = proxy-client ] && ok "HTTPS upstream: it sees the proxy's client certificate" ||
	fail "HTTPS upstream: it sees the proxy's client certificate" "$cn"
uproxy px_nocert "$UPS_PORT" --upstream-ca-file="$T_TMP/up-ca.crt"
status "HTTPS upstream: no client certificate, refused by it" 502 "$UP_URL/tls"
uproxy px_othca "$UPS_PORT" --upstream-ca-file="$T_TMP/other-ca.crt" \
	--upstream-client-cert-file="$T_TMP/proxy-client.crt" --upstream-client-key-file="$T_TMP/proxy-client.key"
status "HTTPS upstream: its certificate from another CA" 502 "$UP_URL/tls"
uproxy px_name "$UPW_PORT" --upstream-ca-file="$T_TMP/up-ca.crt"
status "HTTPS upstream: its certificate for another name" 502 "$UP_URL/tls"

"$AWS_K8S" rbac-proxy --secure-listen-address=127.0.0.1:$(free_port) --upstream=http://127.0.0.1:$UP_PORT/ \
	--kubeconfig="$T_TMP/kc" --oidc-issuer=https://issuer.example >"$T_TMP/oidc.out" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "oidc-issuer" "$T_TMP/oidc.out" && ok "--oidc-issuer is refused (exit 2)" ||
	fail "--oidc-issuer is refused (exit 2)" "exit $rc: $(cat "$T_TMP/oidc.out")"
if grep -q "ns-token\|stat-token\|api-token" "$T_TMP"/proxy*.log; then fail "no token in the logs"; else ok "no token in the logs"; fi
t_summary
