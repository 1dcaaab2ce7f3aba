#!/usr/bin/env bash
# tests: product
# aws-k8s cpm certs, on a root rendered by `cpm render` (CAs made with the openssl CLI):
# check-expiration prints kubeadm's two tables (the 11 certificates and kubeconfigs with their
# expiry as openssl reads it, residual time and CA; the 3 CAs), marks a missing one; renew NAME
# renews that one alone unconditionally, keeping its names (a SAN the configuration no longer
# has included, as kubeadm) with a new key signed by the CA on disk, and kubeadm's closing
# words; a kubeconfig keeps its server; renew all renews the 11 (a missing one reported, not
# fatal); --config's encryptionAlgorithm gives ECDSA keys; render afterwards keeps the renewed
# files and moves the manifests' checksums; usage errors exit 2, a missing certificate 1.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/cpm_lib.sh"

D=$T_ROOT/tests/data/cpm
R=$T_TMP/root
P=$R/etc/kubernetes/pki
export NODE_NAME=master-0 MY_IP=10.0.0.5
certs() { "$AWS_K8S" cpm certs "$@" --root "$R"; }
serial() { openssl x509 -in "$1" -noout -serial; }
kc_crt() { python3 -c 'import sys, yaml, base64; k = yaml.safe_load(open(sys.argv[1])); sys.stdout.write(base64.b64decode(k["users"][0]["user"]["client-certificate-data"]).decode())' "$R/etc/kubernetes/$1"; }
kc_server() { python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["clusters"][0]["cluster"]["server"])' "$R/etc/kubernetes/$1"; }
sans() { openssl x509 -in "$1" -noout -ext subjectAltName | tail -n +2 | tr -d ' ' | tr ',' '\n' | sort | paste -sd, -; }

peer check "the three CAs are made with openssl" cpm_mkcas "$P"
# the apiserver certificate carries a SAN of an earlier configuration
sed 's/^  certSANs: \[\]$/  certSANs:\n  - api.example.com/' "$D/kubeadm-config-v1beta4.yaml" >"$T_TMP/cfg.yaml"
check "cpm render writes the root" "$AWS_K8S" cpm render --config "$T_TMP/cfg.yaml" --root "$R"

# ---- check-expiration ----------------------------------------------------------------------------
out=$(certs check-expiration 2>&1)
rc=$?
[ $rc = 0 ] && ok "check-expiration: exit 0" || fail "check-expiration: exit 0" "exit $rc: $out"
[[ "$(head -1 <<<"$out")" =~ ^CERTIFICATE\ +EXPIRES\ +RESIDUAL\ TIME\ +CERTIFICATE\ AUTHORITY\ +EXTERNALLY\ MANAGED$ ]] &&
	ok "check-expiration: kubeadm's header" || fail "check-expiration: kubeadm's header" "$(head -1 <<<"$out")"
# expires_as_kubeadm FILE: the certificate's not-after as kubeadm prints it ("Dec 06, 2027 01:35 UTC")
expires_as_kubeadm() { date -u -d "$(openssl x509 -noout -enddate -in "$1" | cut -d= -f2)" '+%b %d, %Y %H:%M UTC'; }
errs=""
n=0
for row in admin.conf:ca apiserver:ca apiserver-etcd-client:etcd-ca apiserver-kubelet-client:ca controller-manager.conf:ca \
	etcd-healthcheck-client:etcd-ca etcd-peer:etcd-ca etcd-server:etcd-ca front-proxy-client:front-proxy-ca scheduler.conf:ca super-admin.conf:ca; do
	name=${row%%:*} ca=${row#*:}
	case $name in
	*.conf) kc_crt "$name" >"$T_TMP/c.crt"; f=$T_TMP/c.crt ;;
	etcd-*) f=$P/etcd/${name#etcd-}.crt ;;
	*) f=$P/$name.crt ;;
	esac
	line=$(grep -E "^$name " <<<"$out")
	want="$(expires_as_kubeadm "$f")"
	# kubeadm's ShortHumanDuration: 364d, or 1y when exactly 365 days are left (the check in the
	# same second as the render)
	if [[ "$line" =~ ^$name\ +"$want"\ +(36[45]d|1y)\ +$ca\ +no$ ]]; then n=$((n + 1)); else errs+=" [$line] (want $want, $ca);"; fi
done
[ $n = 11 ] && ok "check-expiration: the 11 rows, each with openssl's not-after, 364d (or 1y) left, its CA" ||
	fail "check-expiration: the 11 rows" "$errs"
grep -qE '^CERTIFICATE AUTHORITY +EXPIRES +RESIDUAL TIME +EXTERNALLY MANAGED$' <<<"$out" &&
	[ "$(grep -cE '^(ca|etcd-ca|front-proxy-ca) +[A-Z][a-z]{2} [0-9]{2}, [0-9]{4} [0-9]{2}:[0-9]{2} UTC +9y +no$' <<<"$out")" = 3 ] &&
	ok "check-expiration: the CA table (3 CAs, 9y left)" || fail "check-expiration: the CA table" "$(tail -4 <<<"$out")"
mv "$R/etc/kubernetes/scheduler.conf" "$T_TMP/scheduler.conf"
out=$(certs check-expiration 2>&1)
grep -q '^!MISSING! scheduler.conf$' <<<"$out" && ok "check-expiration marks a missing kubeconfig !MISSING!" ||
	fail "check-expiration marks a missing kubeconfig" "$out"

# ---- renew one -------------------------------------------------------------------------------------
(cd "$P" && find . -name '*.crt' -o -name '*.key' | sort | xargs sha256sum) >"$T_TMP/before"
s0=$(serial "$P/apiserver.crt") sans0=$(sans "$P/apiserver.crt")
subj0=$(openssl x509 -in "$P/apiserver.crt" -noout -subject)
out=$(certs renew apiserver 2>&1)
rc=$?
(cd "$P" && find . -name '*.crt' -o -name '*.key' | sort | xargs sha256sum) >"$T_TMP/after"
[ $rc = 0 ] && grep -q '^certificate for serving the Kubernetes API renewed$' <<<"$out" &&
	grep -q '^Done renewing certificates. You must restart the kube-apiserver, kube-controller-manager, kube-scheduler and etcd' <<<"$out" &&
	ok "renew apiserver: kubeadm's words" || fail "renew apiserver: kubeadm's words" "exit $rc: $out"
[ "$s0" != "$(serial "$P/apiserver.crt")" ] && [ "$sans0" = "$(sans "$P/apiserver.crt")" ] && [[ "$sans0" == *DNS:api.example.com* ]] &&
	[ "$subj0" = "$(openssl x509 -in "$P/apiserver.crt" -noout -subject)" ] &&
	openssl verify -CAfile "$P/ca.crt" "$P/apiserver.crt" >/dev/null &&
	[ "$(openssl x509 -in "$P/apiserver.crt" -noout -pubkey)" = "$(openssl pkey -in "$P/apiserver.key" -pubout 2>/dev/null)" ] &&
	[ "$(stat -c %a "$P/apiserver.key")" = 600 ] &&
	ok "renew apiserver: a new certificate and key (0600), same subject and SANs, signed by pki/ca" ||
	fail "renew apiserver: new certificate, same names" "serial $s0 -> $(serial "$P/apiserver.crt"); SANs $sans0 -> $(sans "$P/apiserver.crt")"
[ "$(diff "$T_TMP/before" "$T_TMP/after" | grep -c '^>')" = 2 ] && ! diff "$T_TMP/before" "$T_TMP/after" | grep '^>' | grep -qv './apiserver\.' &&
	ok "renew apiserver touches apiserver.crt/.key only" || fail "renew apiserver touches apiserver.crt/.key only" "$(diff "$T_TMP/before" "$T_TMP/after")"

kc_crt admin.conf >"$T_TMP/a0.crt"
out=$(certs renew admin.conf 2>&1)
rc=$?
kc_crt admin.conf >"$T_TMP/a1.crt"
[ $rc = 0 ] && grep -q '^certificate embedded in the kubeconfig file for the admin to use and for kubeadm itself renewed$' <<<"$out" &&
	[ "$(serial "$T_TMP/a0.crt")" != "$(serial "$T_TMP/a1.crt")" ] &&
	[ "$(openssl x509 -in "$T_TMP/a1.crt" -noout -subject -nameopt RFC2253)" = "subject=CN=kubernetes-admin,O=kubeadm:cluster-admins" ] &&
	[ "$(kc_server admin.conf)" = https://127.0.0.1:6445 ] && openssl verify -CAfile "$P/ca.crt" "$T_TMP/a1.crt" >/dev/null &&
	[ "$(stat -c %a "$R/etc/kubernetes/admin.conf")" = 600 ] &&
	ok "renew admin.conf: a new client certificate, same user and group, server kept, 0600" ||
	fail "renew admin.conf" "$out"

# ---- renew all, a missing one reported --------------------------------------------------------------
out=$(certs renew all 2>&1)
rc=$?
[ $rc = 0 ] && [ "$(grep -c ' renewed$' <<<"$out")" = 10 ] &&
	grep -q '^MISSING! certificate embedded in the kubeconfig file for the scheduler manager to use$' <<<"$out" &&
	ok "renew all: 10 renewed, the missing scheduler.conf reported, exit 0" || fail "renew all" "exit $rc: $out"
out=$(certs renew scheduler.conf 2>&1)
[ $? = 1 ] && grep -q 'scheduler.conf' <<<"$out" && ok "renew of a missing kubeconfig alone: exit 1 naming it" ||
	fail "renew of a missing kubeconfig alone: exit 1" "$out"
mv "$T_TMP/scheduler.conf" "$R/etc/kubernetes/scheduler.conf"

# ---- render after renewals keeps the files; the manifests' checksums move -----------------------
sum0=$(grep checksum "$R/etc/kubernetes/manifests/kube-apiserver.yaml")
out=$("$AWS_K8S" cpm render --config "$T_TMP/cfg.yaml" --root "$R" 2>&1)
[ $? = 0 ] && [ "$(grep -cE '^\[unchanged\] +pki/' <<<"$out")" = 9 ] && [ "$(grep -cE '^\[unchanged\] +[a-z-]+\.conf' <<<"$out")" = 4 ] &&
	[ "$(grep -cE '^\[updated\] +manifests/' <<<"$out")" = 3 ] && grep -qE '^\[unchanged\] +manifests/kube-scheduler.yaml' <<<"$out" &&
	[ "$sum0" != "$(grep checksum "$R/etc/kubernetes/manifests/kube-apiserver.yaml")" ] &&
	ok "render after renew: certificates and kubeconfigs kept; new checksums for the 3 manifests whose files were renewed (scheduler.conf was missing then: its manifest kept)" ||
	fail "render after renew" "$(grep -v '^\[unchanged\]' <<<"$out")"

# ---- --config: encryptionAlgorithm ------------------------------------------------------------------
sed 's/^encryptionAlgorithm: RSA-2048$/encryptionAlgorithm: ECDSA-P256/' "$T_TMP/cfg.yaml" >"$T_TMP/cfg-ec.yaml"
out=$(certs renew front-proxy-client --config "$T_TMP/cfg-ec.yaml" 2>&1)
[ $? = 0 ] && openssl pkey -in "$P/front-proxy-client.key" -noout -text 2>/dev/null | grep -q 'prime256v1' &&
	openssl verify -CAfile "$P/front-proxy-ca.crt" "$P/front-proxy-client.crt" >/dev/null &&
	ok "renew --config with encryptionAlgorithm ECDSA-P256: a P-256 key" || fail "renew with ECDSA-P256" "$out"

# ---- usage errors --------------------------------------------------------------------------------------
for args in "renew" "renew nope" "renew apiserver extra" "bogus" "check-expiration extra"; do
	# shellcheck disable=SC2086
	out=$(certs $args 2>&1)
	rc=$?
	[ $rc = 2 ] && ok "certs $args: usage error (exit 2)" || fail "certs $args: usage error (exit 2)" "exit $rc: $out"
done
out=$("$AWS_K8S" cpm certs renew apiserver --root "$T_TMP/empty" 2>&1)
[ $? = 1 ] && grep -q "apiserver.crt" <<<"$out" && ok "renew without the certificate: exit 1 naming the file" ||
	fail "renew without the certificate: exit 1" "$out"

t_summary
