# shellcheck shell=bash
# The demo's control-plane-manager part, sourced by tests/demo/run, which calls demo_cpm before
# its report (it uses run's say and failed). What kubeadm would write for a control-plane node,
# without kubeadm: the three CAs are made with the openssl CLI (as Deckhouse installs them from
# the Secret d8-pki), then `aws-k8s cpm render` writes the PKI, the kubeconfigs and the four
# static-pod manifests for master-0 (10.0.0.5) from the kubeadm v1beta4 configuration Deckhouse
# puts in the Secret d8-control-plane-manager-config (tests/data/cpm; here with encryptionAlgorithm
# ECDSA-P256, whose keys are made in a millisecond, where RSA-2048 takes 0.1-1 s each); the apiserver certificate
# is verified against its CA, `cpm certs check-expiration` lists what was made, and a second
# render changes nothing.

demo_cpm() {
	local root=$T_TMP/cpm-root out
	say "aws-k8s cpm render: a control-plane node's PKI, kubeconfigs and static-pod manifests"
	. "$T_ROOT/tests/integration/cpm_lib.sh"
	mkdir -p "$root/etc/kubernetes/pki"
	cpm_mkcas "$root/etc/kubernetes/pki" || failed "making the three CAs with openssl"
	echo "the CAs (ca, front-proxy-ca, etcd/ca) made with openssl under $root/etc/kubernetes/pki"
	sed 's/^encryptionAlgorithm: .*/encryptionAlgorithm: ECDSA-P256/' \
		"$T_ROOT/tests/data/cpm/kubeadm-config-v1beta4.yaml" >"$T_TMP/cpm-config.yaml"
	echo "the configuration: tests/data/cpm/kubeadm-config-v1beta4.yaml with encryptionAlgorithm: ECDSA-P256"
	out=$(NODE_NAME=master-0 MY_IP=10.0.0.5 "$AWS_K8S" cpm render \
		--config "$T_TMP/cpm-config.yaml" --root "$root" 2>&1) ||
		failed "cpm render: $(tail -3 <<<"$out")"
	sed 's/^/  /' <<<"$out"
	openssl verify -CAfile "$root/etc/kubernetes/pki/ca.crt" "$root/etc/kubernetes/pki/apiserver.crt" ||
		failed "apiserver.crt verifies against ca.crt"
	echo "apiserver.crt's names: $(openssl x509 -in "$root/etc/kubernetes/pki/apiserver.crt" -noout -ext subjectAltName | tail -n 1 | sed 's/^ *//')"
	grep -o -- '--[a-z-]*=' "$root/etc/kubernetes/manifests/kube-apiserver.yaml" | wc -l |
		xargs printf 'kube-apiserver.yaml: %s flags; '
	grep -m1 'control-plane-manager.deckhouse.io/checksum' "$root/etc/kubernetes/manifests/kube-apiserver.yaml" | sed 's/^ *//'
	say "aws-k8s cpm certs check-expiration"
	"$AWS_K8S" cpm certs check-expiration --root "$root" 2>&1 | sed 's/^/  /' ||
		failed "cpm certs check-expiration"
	out=$(NODE_NAME=master-0 MY_IP=10.0.0.5 "$AWS_K8S" cpm render \
		--config "$T_TMP/cpm-config.yaml" --root "$root" 2>&1)
	grep -q '^render: 0 created, 0 updated, 17 unchanged' <<<"$out" ||
		failed "a second cpm render changes nothing: $(tail -1 <<<"$out")"
	echo "a second render: $(tail -1 <<<"$out")"
}
