# shellcheck shell=bash
# Sourced by tests/integration/cpm_*.sh (not executable, so tests/run does not run it).
# cpm_mkca PKI FILE CN: a kubeadm-like CA under PKI (FILE.crt, FILE.key 0600) made with the
# openssl CLI, as Deckhouse installs the CAs from the Secret d8-pki.
cpm_mkca() {
	mkdir -p "$(dirname "$1/$2")"
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1/$2.key" -out "$1/$2.crt" -days 3650 \
		-subj "/CN=$3" -addext "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "subjectAltName=DNS:$3" 2>/dev/null &&
		chmod 600 "$1/$2.key"
}
# cpm_mkcas PKI: the three CAs of kubeadm's table
cpm_mkcas() { cpm_mkca "$1" ca kubernetes && cpm_mkca "$1" front-proxy-ca front-proxy-ca && cpm_mkca "$1" etcd/ca etcd-ca; }
