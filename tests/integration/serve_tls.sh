#!/usr/bin/env bash
# tests: product
# HTTPS of the shared server in a real process (aws-k8s serve with kube-rbac-proxy's TLS
# flags): curl with --cacert, the minimum version and the cipher suites checked with openssl
# s_client, client certificates against --client-ca-file, the files re-read after a rotation,
# the CSI plugins' metrics over HTTPS (--metrics-cert-file/--metrics-key-file, as upstream);
# the ccm's secure port is checked by the ccm scripts
p6=$(free_port)
bg csi env AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=y AWS_EC2_METADATA_DISABLED=true \
	"$AWS_K8S" csi-controller --endpoint "unix://$T_TMP/csi.sock" --http-endpoint "127.0.0.1:$p6" \
	--metrics-cert-file "$D/server.crt" --metrics-key-file "$D/server.key"
wait_http "https://127.0.0.1:$p6/metrics" 10
check "csi-controller --metrics-cert-file serves /metrics over HTTPS" bash -c "curl -s --cacert '$D/ca.crt' https://127.0.0.1:$p6/metrics | grep -q '^process_open_fds '"

# a prompt stop with connections open.
. "$(dirname "$0")/../lib/testlib.sh"
D=$T_TMP/pki
mkdir -p "$D"

# a CA, a serving certificate for 127.0.0.1 (RSA, for the RSA suites) and client certificates
mkca() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=$1" -keyout "$D/$1.key" -out "$D/$1.crt" 2>/dev/null; }
mkcert() { # NAME CA SUBJECT EXT
	openssl req -new -newkey "${KEYTYPE:-ec}" -pkeyopt "${KEYOPT:-ec_paramgen_curve:P-256}" -nodes -subj "$3" \
		-keyout "$D/$1.key" -out "$D/$1.csr" 2>/dev/null &&
		openssl x509 -req -in "$D/$1.csr" -CA "$D/$2.crt" -CAkey "$D/$2.key" -CAcreateserial \
			-days 2 -extfile <(printf '%s\n' "$4") -out "$D/$1.crt" 2>/dev/null
}
mkca ca && mkca ca2 && mkca clientca && mkca rogue &&
	KEYTYPE=rsa KEYOPT=rsa_keygen_bits:2048 mkcert server ca "/CN=localhost" \
		"subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth" &&
	mkcert server2 ca2 "/CN=localhost" "subjectAltName=IP:127.0.0.1" &&
	mkcert alice clientca "/O=dev/O=system:masters/CN=alice" "extendedKeyUsage=clientAuth" &&
	mkcert mallory rogue "/CN=alice" "extendedKeyUsage=clientAuth" ||
	{ fail "test certificates are made with openssl"; t_summary; }

serve() { # NAME PORT ARGS...: starts aws-k8s serve with TLS on PORT and waits for it
	local name=$1 port=$2
	shift 2
	cp "$D/server.crt" "$T_TMP/$name.crt" && cp "$D/server.key" "$T_TMP/$name.key"
	bg "$name" "$AWS_K8S" serve --metrics-bind-address "127.0.0.1:$port" \
		--tls-cert-file "$T_TMP/$name.crt" --tls-private-key-file "$T_TMP/$name.key" "$@"
	for _ in $(seq 200); do # wait_http, with a client certificate (taken when not asked for)
		curl -sk -o /dev/null --max-time 1 --cert "$D/alice.crt" --key "$D/alice.key" \
			"https://127.0.0.1:$port/healthz" && return 0
		sleep 0.05
	done
	return 1
}
# s_client PORT ARGS...: succeeds when the handshake does
s_client() { local port=$1; shift
	openssl s_client -connect "127.0.0.1:$port" -CAfile "$D/ca.crt" -verify_return_error "$@" \
		</dev/null >"$T_TMP/s_client.out" 2>&1; }

p1=$(free_port)
if serve s1 "$p1"; then ok "serves HTTPS"; else fail "serves HTTPS" "$(cat "$T_TMP/s1.log")"; fi
check "curl --cacert: /healthz is ok" bash -c "[ \"\$(curl -s --cacert '$D/ca.crt' https://127.0.0.1:$p1/healthz)\" = ok ]"
check "curl --cacert: /metrics" bash -c "curl -s --cacert '$D/ca.crt' https://127.0.0.1:$p1/metrics | grep -q '^process_resident_memory_bytes '"
check "another CA does not verify it" bash -c "! curl -s --cacert '$D/ca2.crt' https://127.0.0.1:$p1/healthz"
check "no plain HTTP on the TLS port" bash -c "! curl -s --max-time 3 http://127.0.0.1:$p1/healthz"
check "TLS 1.2 and 1.3 are served" bash -c "$(declare -f s_client); D='$D' T_TMP='$T_TMP'; s_client $p1 -tls1_2 && s_client $p1 -tls1_3"
check "TLS 1.1 is refused (VersionTLS12 by default)" bash -c "$(declare -f s_client); D='$D' T_TMP='$T_TMP'; ! s_client $p1 -tls1_1 -cipher DEFAULT@SECLEVEL=0"
check "the handshake offers HTTP/1.1 by ALPN" bash -c "$(declare -f s_client); D='$D' T_TMP='$T_TMP'; s_client $p1 -alpn h2,http/1.1 && grep -q 'ALPN protocol: http/1.1' '$T_TMP/s_client.out'"

p2=$(free_port)
serve s2 "$p2" --tls-min-version VersionTLS10 || fail "serves with --tls-min-version VersionTLS10" "$(cat "$T_TMP/s2.log")"
check "--tls-min-version VersionTLS10 serves TLS 1.1" bash -c "$(declare -f s_client); D='$D' T_TMP='$T_TMP'; s_client $p2 -tls1_1 -cipher DEFAULT@SECLEVEL=0"
p3=$(free_port)
serve s3 "$p3" --tls-min-version VersionTLS13 || fail "serves with --tls-min-version VersionTLS13" "$(cat "$T_TMP/s3.log")"
check "--tls-min-version VersionTLS13 refuses TLS 1.2" bash -c "$(declare -f s_client); D='$D' T_TMP='$T_TMP'; ! s_client $p3 -tls1_2 && s_client $p3 -tls1_3"

p4=$(free_port)
serve s4 "$p4" --tls-cipher-suites TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256 ||
	fail "serves with --tls-cipher-suites" "$(cat "$T_TMP/s4.log")"
check "--tls-cipher-suites: a suite in the list is served" bash -c "$(declare -f s_client); D='$D' T_TMP='$T_TMP'; s_client $p4 -tls1_2 -cipher ECDHE-RSA-AES256-GCM-SHA384 && grep -q 'Cipher is ECDHE-RSA-AES256-GCM-SHA384' '$T_TMP/s_client.out'"
check "--tls-cipher-suites: one outside it is refused" bash -c "$(declare -f s_client); D='$D' T_TMP='$T_TMP'; ! s_client $p4 -tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256"
"$AWS_K8S" serve --tls-cipher-suites TLS_BOGUS --metrics-bind-address 127.0.0.1:0 >/dev/null 2>"$T_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "'TLS_BOGUS'" "$T_TMP/err" && ok "an unknown suite exits 2 naming it" || fail "an unknown suite exits 2 naming it" "rc=$rc $(cat "$T_TMP/err")"
"$AWS_K8S" serve --tls-min-version VersionTLS14 --metrics-bind-address 127.0.0.1:0 >/dev/null 2>"$T_TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "'VersionTLS14'" "$T_TMP/err" && ok "an unknown version exits 2 naming it" || fail "an unknown version exits 2 naming it" "rc=$rc"
"$AWS_K8S" serve --tls-cert-file "$D/server.crt" --tls-private-key-file "$D/alice.key" --metrics-bind-address 127.0.0.1:0 >/dev/null 2>"$T_TMP/err"; rc=$?
[ $rc -eq 1 ] && grep -q "does not match" "$T_TMP/err" && ok "a key of another certificate exits 1 saying so" || fail "a key of another certificate exits 1 saying so" "rc=$rc $(cat "$T_TMP/err")"

p5=$(free_port)
cp "$D/clientca.crt" "$T_TMP/client-ca.crt"
serve s5 "$p5" --client-ca-file "$T_TMP/client-ca.crt" || fail "serves with --client-ca-file" "$(cat "$T_TMP/s5.log")"
c5() { curl -s --max-time 5 --cacert "$D/ca.crt" "$@" "https://127.0.0.1:$p5/healthz"; }
check "--client-ca-file: a signed client certificate is served" bash -c "[ \"\$(curl -s --cacert '$D/ca.crt' --cert '$D/alice.crt' --key '$D/alice.key' https://127.0.0.1:$p5/healthz)\" = ok ]"
check "--client-ca-file: no client certificate is refused" bash -c "$(declare -f c5); p5=$p5 D='$D'; ! c5"
check "--client-ca-file: a certificate of another CA is refused" bash -c "$(declare -f c5); p5=$p5 D='$D'; ! c5 --cert '$D/mallory.crt' --key '$D/mallory.key'"

# rotation: the files replaced (as a Secret volume does), the new pair in service within ~1 s
cp "$D/server2.crt" "$T_TMP/s1.crt.new" && cp "$D/server2.key" "$T_TMP/s1.key.new" &&
	mv "$T_TMP/s1.key.new" "$T_TMP/s1.key" && mv "$T_TMP/s1.crt.new" "$T_TMP/s1.crt"
rotated=
for _ in $(seq 40); do
	[ "$(curl -s --cacert "$D/ca2.crt" "https://127.0.0.1:$p1/healthz")" = ok ] && { rotated=1; break; }
	sleep 0.1
done
[ -n "$rotated" ] && ok "a rotated certificate is served without a restart" || fail "a rotated certificate is served without a restart" "$(tail -3 "$T_TMP/s1.log")"
check "the rotation is logged" grep -q "reloaded the serving certificate" "$T_TMP/s1.log"

# the CSI plugins' metrics over HTTPS (--metrics-cert-file/--metrics-key-file, as upstream);
# the ccm's secure port is checked by the ccm scripts
p6=$(free_port)
bg csi env AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=y AWS_EC2_METADATA_DISABLED=true \
	"$AWS_K8S" csi-controller --endpoint "unix://$T_TMP/csi.sock" --http-endpoint "127.0.0.1:$p6" \
	--metrics-cert-file "$D/server.crt" --metrics-key-file "$D/server.key"
wait_http "https://127.0.0.1:$p6/metrics" 10
check "csi-controller --metrics-cert-file serves /metrics over HTTPS" bash -c "curl -s --cacert '$D/ca.crt' https://127.0.0.1:$p6/metrics | grep -q '^process_open_fds '"

# a prompt stop with connections open: idle TCP ones and a TLS one mid-request
exec 7<>"/dev/tcp/127.0.0.1/$p1" 8<>"/dev/tcp/127.0.0.1/$p1"
(printf 'GET /healthz HTTP/1.1\r\nHost: x\r\n'; sleep 30) | openssl s_client -quiet -connect "127.0.0.1:$p1" >/dev/null 2>&1 &
t_cleanup_add "kill $! 2>/dev/null"
sleep 0.3
if stop_within "$(cat "$T_TMP/s1.pid")" 3 "serve with open TLS connections"; then
	[ "$STOP_RC" = 0 ] && ok "SIGTERM stops the server with connections open" || fail "SIGTERM stops the server with connections open" "rc=$STOP_RC"
fi
exec 7>&- 8>&-
t_summary
