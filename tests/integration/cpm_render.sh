#!/usr/bin/env bash
# tests: product
# aws-k8s cpm render: from the kubeadm configuration as Deckhouse's Secret holds it (v1beta4
# with NODE_NAME/MY_IP, v1beta3 with the node in InitConfiguration) and three input CAs made
# with the openssl CLI, under a --root. Every leaf certificate passes `openssl verify` against
# its CA and is checked field by field (openssl x509 -text) against kubeadm's table
# (tests/data/cpm/kubeadm-certs.tsv); keys 0600; sa.pub is sa.key's; the kubeconfigs hold the
# users, groups and servers of kubeadm's table; every manifest is accepted by `kubectl create
# --dry-run=server --validate=strict` against the test API server and its command read back
# equals tests/data/cpm/manifest-flags.tsv; the checksum annotation is recomputed by hand; a
# second run changes no file (content and mtime). Renewal: 29 days left -> renewed, 31 -> kept
# (a leaf and admin.conf), a SAN added -> renewed, a key deleted -> renewed, a moved
# control-plane endpoint -> the admin kubeconfigs recreated, all 7 leaves expired (openssl ca,
# 2024-2025) -> all renewed by one render with no API server anywhere; each renewal changes the
# checksum of the manifests that name the file. --dry-run writes nothing; the root kubeconfig
# symlink. Bad input: missing CA, no node name, unsupported certificatesDir, usage errors.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/cpm_lib.sh"

D=$T_ROOT/tests/data/cpm
R=$T_TMP/root
P=$R/etc/kubernetes/pki
CFG4=$D/kubeadm-config-v1beta4.yaml
export KUBECACHEDIR=$T_TMP/kcache

render() { NODE_NAME=master-0 MY_IP=10.0.0.5 "$AWS_K8S" cpm render --config "${CFG:-$CFG4}" --root "$R" "$@"; }
# snapshot: path, mode, mtime (ns) and sha256 of every file under the root
snapshot() { (cd "$R" && find . -type f -printf '%p %m %T@\n' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum); }

peer check "the three CAs are made with openssl" cpm_mkcas "$P"

# ---- first render ----------------------------------------------------------------------------
out=$(render 2>&1)
rc=$?
if [ $rc = 0 ] && grep -q '^render: 17 created, 0 updated, 0 unchanged' <<<"$out"; then
	ok "render: exit 0, 17 files created (7 leaves, sa.key, sa.pub, 4 kubeconfigs, 4 manifests)"
else fail "render: exit 0, 17 files created" "exit $rc: $(tail -5 <<<"$out")"; fi
grep -qE '^\[created\] +pki/apiserver.crt \([0-9]+ ms\): missing$' <<<"$out" &&
	ok "render prints each step with its outcome and duration" ||
	fail "render prints each step with its outcome and duration" "$(head -3 <<<"$out")"

# ---- certificates against kubeadm's table --------------------------------------------------------
# cert_fields FILE: subject, issuer, EKU, key usage, basic constraints, SANs (sorted), days left,
# seconds since not-before (kubeadm backdates by 5 minutes)
cert_fields() {
	openssl x509 -in "$1" -noout -text -nameopt oneline 2>/dev/null | python3 -c '
import sys, re, time, subprocess
t = sys.stdin.read()
def after(h):
    m = re.search(re.escape(h) + r"[^\n]*\n\s*([^\n]*)", t)
    return m.group(1).strip() if m else "-"
subj = re.search(r"Subject: ([^\n]*)", t).group(1).strip()
iss = re.search(r"Issuer: ([^\n]*)", t).group(1).strip()
na = re.search(r"Not After : ([^\n]*)", t).group(1).strip()
left = (time.mktime(time.strptime(na, "%b %d %H:%M:%S %Y GMT")) - time.mktime(time.gmtime())) / 86400
nb = re.search(r"Not Before: ([^\n]*)", t).group(1).strip()
back = time.mktime(time.gmtime()) - time.mktime(time.strptime(nb, "%b %d %H:%M:%S %Y GMT"))
sans = after("X509v3 Subject Alternative Name")
sans = ",".join(sorted(s.strip() for s in sans.split(","))) if sans != "-" else "-"
print(subj, iss, after("X509v3 Extended Key Usage"), after("X509v3 Key Usage"), after("X509v3 Basic Constraints"), sans, "%.0f" % left, "%.0f" % back, sep="\t")'
}
ca_cn() { case $1 in ca) echo kubernetes ;; front-proxy-ca) echo front-proxy-ca ;; etcd/ca) echo etcd-ca ;; esac; }
while IFS=$'\t' read -r file ca subject eku sans; do
	case $file in '#'* | '') continue ;; esac
	check "pki/$file.crt: openssl verify against $ca" openssl verify -CAfile "$P/$ca.crt" "$P/$file.crt"
	IFS=$'\t' read -r h_subj h_iss h_eku h_ku h_bc h_sans h_left h_back < <(cert_fields "$P/$file.crt")
	want_subj=$(sed 's/ = /=/g' <<<"$subject") # -nameopt oneline prints "CN=x" as "CN = x"; compare loosely
	want_sans=$(tr ',' '\n' <<<"$sans" | sort | paste -sd, -)
	errs=""
	[ "$(sed 's/ = /=/g' <<<"$h_subj")" = "$want_subj" ] || errs+=" subject '$h_subj' is not '$subject';"
	[ "$h_iss" = "CN = $(ca_cn "$ca")" ] || errs+=" issuer '$h_iss';"
	[ "$h_eku" = "$eku" ] || errs+=" EKU '$h_eku' is not '$eku';"
	[ "$h_ku" = "Digital Signature, Key Encipherment" ] || errs+=" key usage '$h_ku';"
	[ "$h_bc" = "CA:FALSE" ] || errs+=" basic constraints '$h_bc';"
	[ "$h_sans" = "$want_sans" ] || errs+=" SANs '$h_sans' are not '$want_sans';"
	[ "$h_left" -ge 364 ] && [ "$h_left" -le 365 ] || errs+=" $h_left days left, not 365;"
	[ "$h_back" -ge 300 ] && [ "$h_back" -le 1200 ] || errs+=" not-before $h_back s ago, not 5 minutes before it was made;"
	[ -z "$errs" ] && ok "pki/$file.crt matches kubeadm's table (subject, issuer, usages, SANs, 1 year, backdated 5 min)" ||
		fail "pki/$file.crt matches kubeadm's table" "$errs"
	mode_k=$(stat -c %a "$P/$file.key") mode_c=$(stat -c %a "$P/$file.crt")
	[ "$mode_k" = 600 ] && [ "$mode_c" = 644 ] && ok "pki/$file: key 0600, certificate 0644" ||
		fail "pki/$file: key 0600, certificate 0644" "key $mode_k, certificate $mode_c"
	[ "$(openssl x509 -in "$P/$file.crt" -noout -pubkey)" = "$(openssl pkey -in "$P/$file.key" -pubout 2>/dev/null)" ] &&
		ok "pki/$file.key is the certificate's key" || fail "pki/$file.key is the certificate's key"
done <"$D/kubeadm-certs.tsv"
[ "$(openssl pkey -in "$P/sa.key" -pubout 2>/dev/null)" = "$(cat "$P/sa.pub")" ] && [ "$(stat -c %a "$P/sa.key")" = 600 ] &&
	ok "sa.key (0600) and sa.pub (its PKIX public key)" || fail "sa.key (0600) and sa.pub (its PKIX public key)"

# ---- kubeconfigs -----------------------------------------------------------------------------------
# kc_check FILE USER GROUP SERVER
kc_check() {
	local f=$R/etc/kubernetes/$1 d=$T_TMP/kc.$1
	mkdir -p "$d"
	python3 - "$f" "$d" <<'EOF' || return 1
import sys, yaml, base64
k = yaml.safe_load(open(sys.argv[1]))
c, u, x = k["clusters"][0], k["users"][0], k["contexts"][0]
assert c["name"] == "kubernetes" and x["context"] == {"cluster": "kubernetes", "user": u["name"]}, k["contexts"]
assert k["current-context"] == x["name"] == u["name"] + "@kubernetes", k["current-context"]
open(sys.argv[2] + "/server", "w").write(c["cluster"]["server"])
open(sys.argv[2] + "/user", "w").write(u["name"])
for key, name in (("certificate-authority-data", "ca.crt"),):
    open(sys.argv[2] + "/" + name, "wb").write(base64.b64decode(c["cluster"][key]))
open(sys.argv[2] + "/crt", "wb").write(base64.b64decode(u["user"]["client-certificate-data"]))
open(sys.argv[2] + "/key", "wb").write(base64.b64decode(u["user"]["client-key-data"]))
EOF
	local subj want
	subj=$(openssl x509 -in "$d/crt" -noout -subject -nameopt RFC2253)
	want="subject=CN=$2${3:+,O=$3}"
	[ "$subj" = "$want" ] || { echo "subject $subj, not $want"; return 1; }
	[ "$(cat "$d/server")" = "$4" ] || { echo "server $(cat "$d/server"), not $4"; return 1; }
	[ "$(cat "$d/user")" = "$2" ] || { echo "user $(cat "$d/user")"; return 1; }
	cmp -s "$d/ca.crt" "$P/ca.crt" || { echo "the embedded CA is not pki/ca.crt"; return 1; }
	openssl verify -CAfile "$P/ca.crt" "$d/crt" >/dev/null || { echo "not issued by pki/ca"; return 1; }
	openssl x509 -in "$d/crt" -noout -ext extendedKeyUsage | grep -q "TLS Web Client Authentication" || { echo "no clientAuth"; return 1; }
	[ "$(openssl x509 -in "$d/crt" -noout -pubkey)" = "$(openssl pkey -in "$d/key" -pubout 2>/dev/null)" ] || { echo "key mismatch"; return 1; }
	[ "$(stat -c %a "$f")" = 600 ] || { echo "mode $(stat -c %a "$f")"; return 1; }
}
check "admin.conf: kubernetes-admin, group kubeadm:cluster-admins, the control-plane endpoint, 0600" \
	kc_check admin.conf kubernetes-admin kubeadm:cluster-admins https://127.0.0.1:6445
check "super-admin.conf: kubernetes-super-admin, group system:masters, the control-plane endpoint" \
	kc_check super-admin.conf kubernetes-super-admin system:masters https://127.0.0.1:6445
check "controller-manager.conf: system:kube-controller-manager, the local apiserver" \
	kc_check controller-manager.conf system:kube-controller-manager "" https://10.0.0.5:6443
check "scheduler.conf: system:kube-scheduler, the local apiserver" \
	kc_check scheduler.conf system:kube-scheduler "" https://10.0.0.5:6443

# ---- a second run changes nothing ---------------------------------------------------------------
snapshot >"$T_TMP/snap1"
sleep 1.1
out=$(render 2>&1)
rc=$?
snapshot >"$T_TMP/snap2"
[ $rc = 0 ] && grep -q '^render: 0 created, 0 updated, 17 unchanged' <<<"$out" &&
	ok "a second render: every step unchanged" || fail "a second render: every step unchanged" "exit $rc: $(tail -3 <<<"$out")"
cmp -s "$T_TMP/snap1" "$T_TMP/snap2" && ok "a second render changes no file (content, mode, mtime)" ||
	fail "a second render changes no file" "$(diff "$T_TMP/snap1" "$T_TMP/snap2" | head -5)"
out=$(render --dry-run 2>&1)
[ $? = 0 ] && grep -q '0 would change, 17 unchanged' <<<"$out" && ok "--dry-run with nothing to do: 0 would change" ||
	fail "--dry-run with nothing to do: 0 would change" "$(tail -3 <<<"$out")"

# ---- manifests: the test API server accepts them strictly; flags read back ------------------------
PORT=$(free_port)
KC=$T_TMP/kas.kubeconfig
bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$PORT" --kubeconfig-out "$KC"
if ! wait_http "https://127.0.0.1:$PORT/healthz" 30; then
	peer fail "the test API server starts" "$(tail -5 "$T_TMP/kas.log")"
	t_summary
fi
k() { kubectl --kubeconfig "$KC" "$@"; }
k get namespace kube-system >/dev/null 2>&1 || peer check "namespace kube-system is created" k create namespace kube-system
# the server refuses an unknown field (the strict check can fail)
sed 's/^  hostNetwork: true$/  hostNetworkz: true/' "$R/etc/kubernetes/manifests/kube-scheduler.yaml" >"$T_TMP/bad.yaml"
out=$(k create --dry-run=server --validate=strict -f "$T_TMP/bad.yaml" 2>&1)
[ $? != 0 ] && grep -q 'unknown field' <<<"$out" && peer ok "a Pod with an unknown field is refused (the strict check can fail)" ||
	peer fail "a Pod with an unknown field is refused" "$out"
# manifest_check COMPONENT: strict dry-run create, then the command, probes, volumes, resources
manifest_check() {
	local c=$1 m=$R/etc/kubernetes/manifests/$1.yaml
	k create --dry-run=server --validate=strict -o json -f "$m" >"$T_TMP/$c.json" || return 1
	python3 - "$T_TMP/$c.json" "$c" "$D/manifest-flags.tsv" "$R" "$m" <<'EOF'
import sys, json, hashlib, os
pod, comp, tsv, root, path = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
want = [l.rstrip("\n").split("\t")[1] for l in open(tsv) if l.startswith(comp + "\t")]
ctr = pod["spec"]["containers"][0]
errs = []
if ctr["command"] != want:
    errs.append("command differs: extra %s, missing %s, or order" % (sorted(set(ctr["command"]) - set(want)), sorted(set(want) - set(ctr["command"]))))
md = pod["metadata"]
if md["name"] != comp or md["namespace"] != "kube-system" or md["labels"] != {"component": comp, "tier": "control-plane"}:
    errs.append("metadata %s" % md)
spec = pod["spec"]
if not spec.get("hostNetwork") or spec.get("priorityClassName") != "system-node-critical" or spec.get("priority") != 2000001000:
    errs.append("hostNetwork/priority")
if spec["securityContext"] != {"seccompProfile": {"type": "RuntimeDefault"}}:
    errs.append("securityContext")
exp = {"kube-apiserver": ("10.0.0.5", 6443, "HTTPS", "/livez", "/readyz", {"cpu": "250m"}),
       "kube-controller-manager": ("127.0.0.1", 10257, "HTTPS", "/healthz", None, {"cpu": "200m"}),
       "kube-scheduler": ("127.0.0.1", 10259, "HTTPS", "/healthz", None, {"cpu": "100m"}),
       "etcd": ("127.0.0.1", 2381, "HTTP", "/livez", "/readyz", {"cpu": "100m", "memory": "100Mi"})}[comp]
host, port, scheme, live, ready, req = exp
lp = ctr["livenessProbe"]
if lp["httpGet"] != {"host": host, "path": live, "port": port, "scheme": scheme} or lp["failureThreshold"] != 8 or lp["initialDelaySeconds"] != 10 or lp["timeoutSeconds"] != 15:
    errs.append("livenessProbe %s" % lp)
sp = ctr["startupProbe"]
if sp["httpGet"]["port"] != port or sp["failureThreshold"] != 24:
    errs.append("startupProbe %s" % sp)
if ready and (ctr.get("readinessProbe", {}).get("httpGet", {}).get("path") != ready or ctr["readinessProbe"]["periodSeconds"] != 1):
    errs.append("readinessProbe %s" % ctr.get("readinessProbe"))
if not ready and "readinessProbe" in ctr:
    errs.append("unexpected readinessProbe")
if ctr["resources"] != {"requests": req}:
    errs.append("resources %s" % ctr["resources"])
vols = {v["name"]: v["hostPath"] for v in spec["volumes"]}
mounts = {m["name"]: m for m in ctr["volumeMounts"]}
if set(vols) != set(mounts):
    errs.append("volumes %s and mounts %s differ" % (sorted(vols), sorted(mounts)))
need = {"kube-apiserver": {"k8s-certs": "/etc/kubernetes/pki", "ca-certs": "/etc/ssl/certs", "deckhouse-extra-files": "/etc/kubernetes/deckhouse/extra-files"},
        "kube-controller-manager": {"k8s-certs": "/etc/kubernetes/pki", "kubeconfig": "/etc/kubernetes/controller-manager.conf", "flexvolume-dir": "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"},
        "kube-scheduler": {"kubeconfig": "/etc/kubernetes/scheduler.conf"},
        "etcd": {"etcd-certs": "/etc/kubernetes/pki/etcd", "etcd-data": "/var/lib/etcd"}}[comp]
for n, p in need.items():
    if vols.get(n, {}).get("path") != p or mounts.get(n, {}).get("mountPath") != p:
        errs.append("volume %s is not %s" % (n, p))
# every file a flag names under /etc/kubernetes is mounted
for a in ctr["command"][1:]:
    v = a.split("=", 1)[1]
    if v.startswith("/etc/kubernetes/") and not any(v == m["mountPath"] or v.startswith(m["mountPath"] + "/") for m in mounts.values()):
        errs.append("%s is not mounted" % v)
# the checksum, as Deckhouse computes it: the manifest without it, then each referenced file
text = open(path).read()
key = "control-plane-manager.deckhouse.io/checksum"
lines = [l for l in text.splitlines(True) if key not in l]
i = lines.index("  annotations:\n")
if not lines[i + 1].startswith("    "):  # the checksum was its only annotation
    del lines[i]
h = hashlib.sha256("".join(lines).encode())
refs = sorted({a.split("=", 1)[1] for a in ctr["command"][1:] if "=/etc/kubernetes/" in a})
for r in refs:
    f = root + r
    h.update(open(f, "rb").read() if os.path.isfile(f) else r.encode())
if md["annotations"].get(key) != h.hexdigest():
    errs.append("checksum %s, recomputed %s" % (md["annotations"].get(key), h.hexdigest()))
print("; ".join(errs))
sys.exit(1 if errs else 0)
EOF
}
for c in kube-apiserver kube-controller-manager kube-scheduler etcd; do
	check "$c.yaml: accepted by kubectl create --dry-run=server --validate=strict; flags, probes, volumes, resources, checksum" \
		manifest_check "$c"
done
[ "$(stat -c %a "$R/etc/kubernetes/manifests/etcd.yaml")" = 600 ] && ok "manifests are 0600" || fail "manifests are 0600"
check "the dry runs stored nothing" bash -c "[ -z \"\$(kubectl --kubeconfig '$KC' get pods -n kube-system -o name)\" ]"

# ---- renewal --------------------------------------------------------------------------------------
# leaf_days FILE DAYS CA SUBJECT: replace pki/FILE (a server certificate) with a certificate of the same names and key usages, signed
# by its CA with openssl, valid DAYS days from now
leaf_days() {
	local f=$1 days=$2 ca=$3 subj=$4 sans
	sans=$(openssl x509 -in "$P/$f.crt" -noout -ext subjectAltName 2>/dev/null | tail -n +2 | sed 's/IP Address:/IP:/g; s/ //g')
	printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\n%s\n' \
		"${sans:+subjectAltName=$sans}" >"$T_TMP/ext"
	openssl req -new -key "$P/$f.key" -subj "$subj" -out "$T_TMP/csr" 2>/dev/null &&
		openssl x509 -req -in "$T_TMP/csr" -CA "$P/$ca.crt" -CAkey "$P/$ca.key" -CAcreateserial -days "$days" \
			-extfile "$T_TMP/ext" -out "$P/$f.crt" 2>/dev/null
}
enddate() { openssl x509 -in "$P/$1.crt" -noout -enddate; }
step_of() { grep -E "^\[[a-z ]+\] +$1 " <<<"$2" | head -1; }

peer check "apiserver.crt re-signed by openssl with 29 days left" leaf_days apiserver 29 ca /CN=kube-apiserver
before_sum=$(grep checksum "$R/etc/kubernetes/manifests/kube-apiserver.yaml")
out=$(render 2>&1)
s=$(step_of pki/apiserver.crt "$out")
[[ "$s" =~ ^\[updated\].*"expires in 2"[89]" days (< 30)"$ ]] && [ "$(cert_fields "$P/apiserver.crt" | cut -f7)" -ge 364 ] &&
	openssl verify -CAfile "$P/ca.crt" "$P/apiserver.crt" >/dev/null &&
	ok "29 days left: apiserver.crt renewed for a year" || fail "29 days left: apiserver.crt renewed" "$s"
[ "$(grep -c '^\[updated\]' <<<"$out")" = 2 ] && [ "$(step_of manifests/kube-apiserver.yaml "$out" | cut -c1-9)" = "[updated]" ] &&
	[ "$before_sum" != "$(grep checksum "$R/etc/kubernetes/manifests/kube-apiserver.yaml")" ] &&
	ok "29 days left: only the certificate and the kube-apiserver manifest (its checksum) change" ||
	fail "29 days left: only the certificate and the kube-apiserver manifest change" "$(grep -v unchanged <<<"$out")"

peer check "apiserver.crt re-signed by openssl with 31 days left" leaf_days apiserver 31 ca /CN=kube-apiserver
render >/dev/null 2>&1 # the manifest's checksum follows the new file
snapshot >"$T_TMP/snap1"
e=$(enddate apiserver)
out=$(render 2>&1)
snapshot >"$T_TMP/snap2"
[[ "$(step_of pki/apiserver.crt "$out")" == "[unchanged]"* ]] && [ "$e" = "$(enddate apiserver)" ] && cmp -s "$T_TMP/snap1" "$T_TMP/snap2" &&
	ok "31 days left: apiserver.crt kept, nothing written" || fail "31 days left: apiserver.crt kept" "$(step_of pki/apiserver.crt "$out")"

sed 's/^  certSANs: \[\]$/  certSANs:\n  - api.example.com\n  - 192.168.10.10/' "$CFG4" >"$T_TMP/cfg-sans.yaml"
out=$(CFG=$T_TMP/cfg-sans.yaml render 2>&1)
sans=$(cert_fields "$P/apiserver.crt" | cut -f6)
[[ "$(step_of pki/apiserver.crt "$out")" == "[updated]"*"SANs differ" ]] && [[ "$sans" == *"DNS:api.example.com"* ]] &&
	[[ "$sans" == *"IP Address:192.168.10.10"* ]] && [ "$(grep -c '^\[updated\] *pki/' <<<"$out")" = 1 ] &&
	ok "a SAN added: apiserver.crt renewed with api.example.com and 192.168.10.10, no other certificate" ||
	fail "a SAN added: apiserver.crt renewed" "$(grep -v unchanged <<<"$out"); SANs $sans"

rm "$P/etcd/peer.key"
out=$(CFG=$T_TMP/cfg-sans.yaml render 2>&1)
[[ "$(step_of pki/etcd/peer.crt "$out")" == "[updated]"*"key is missing" ]] && [ "$(stat -c %a "$P/etcd/peer.key")" = 600 ] &&
	[ "$(openssl x509 -in "$P/etcd/peer.crt" -noout -pubkey)" = "$(openssl pkey -in "$P/etcd/peer.key" -pubout 2>/dev/null)" ] &&
	[ "$(step_of manifests/etcd.yaml "$out" | cut -c1-9)" = "[updated]" ] &&
	ok "a key deleted: etcd/peer renewed (key 0600, matching), the etcd manifest's checksum follows" ||
	fail "a key deleted: etcd/peer renewed" "$(grep -v unchanged <<<"$out")"

sed 's/^controlPlaneEndpoint: .*/controlPlaneEndpoint: "127.0.0.1:7445"/' "$T_TMP/cfg-sans.yaml" >"$T_TMP/cfg-ep.yaml"
out=$(CFG=$T_TMP/cfg-ep.yaml render 2>&1)
[[ "$(step_of admin.conf "$out")" == "[updated]"*"server"* ]] && [[ "$(step_of super-admin.conf "$out")" == "[updated]"* ]] &&
	[[ "$(step_of scheduler.conf "$out")" == "[unchanged]"* ]] &&
	kc_check admin.conf kubernetes-admin kubeadm:cluster-admins https://127.0.0.1:7445 >/dev/null &&
	ok "a moved control-plane endpoint: admin.conf and super-admin.conf recreated, scheduler.conf kept" ||
	fail "a moved control-plane endpoint: admin kubeconfigs recreated" "$(grep -v unchanged <<<"$out")"

# kc_days FILE DAYS SUBJECT: the kubeconfig's client certificate re-signed by pki/ca (same key and
# names, openssl) valid DAYS days
kc_days() {
	local f=$R/etc/kubernetes/$1 d=$T_TMP/kcd
	mkdir -p "$d"
	python3 -c 'import sys, yaml, base64; k = yaml.safe_load(open(sys.argv[1])); open(sys.argv[2], "wb").write(base64.b64decode(k["users"][0]["user"]["client-key-data"]))' "$f" "$d/key" &&
		printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\nauthorityKeyIdentifier=keyid\n' >"$d/ext" &&
		openssl req -new -key "$d/key" -subj "$3" -out "$d/csr" 2>/dev/null &&
		openssl x509 -req -in "$d/csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days "$2" -extfile "$d/ext" -out "$d/crt" 2>/dev/null &&
		python3 -c 'import sys, yaml, base64
k = yaml.safe_load(open(sys.argv[1]))
k["users"][0]["user"]["client-certificate-data"] = base64.b64encode(open(sys.argv[2], "rb").read()).decode()
open(sys.argv[1], "w").write(yaml.safe_dump(k))' "$f" "$d/crt"
}
peer check "admin.conf's certificate re-signed by openssl with 29 days left" kc_days admin.conf 29 /O=kubeadm:cluster-admins/CN=kubernetes-admin
out=$(CFG=$T_TMP/cfg-ep.yaml render 2>&1)
[[ "$(step_of admin.conf "$out")" =~ ^\[updated\].*"expires in 2"[89]" days (< 30)"$ ]] &&
	kc_check admin.conf kubernetes-admin kubeadm:cluster-admins https://127.0.0.1:7445 >/dev/null &&
	openssl x509 -in "$T_TMP/kc.admin.conf/crt" -noout -checkend $((360 * 86400)) >/dev/null &&
	ok "admin.conf with 29 days left: recreated for a year" || fail "admin.conf with 29 days left: recreated" "$(step_of admin.conf "$out")"
peer check "admin.conf's certificate re-signed by openssl with 31 days left" kc_days admin.conf 31 /O=kubeadm:cluster-admins/CN=kubernetes-admin
cp "$R/etc/kubernetes/admin.conf" "$T_TMP/admin.31"
out=$(CFG=$T_TMP/cfg-ep.yaml render 2>&1)
[[ "$(step_of admin.conf "$out")" == "[unchanged]"* ]] && cmp -s "$T_TMP/admin.31" "$R/etc/kubernetes/admin.conf" &&
	ok "admin.conf with 31 days left: kept as it is" || fail "admin.conf with 31 days left: kept" "$(step_of admin.conf "$out")"

# ---- every leaf expired (the masters were off; no API server anywhere) ---------------------------
# expire FILE CA: re-issue pki/FILE with its key, subject, SANs and usages, valid from 2024 to 2025
expire() {
	local f=$1 ca=$2 subj sans eku d=$T_TMP/ca-db
	mkdir -p "$d/new" && : >"$d/index.txt" && [ -f "$d/serial" ] || echo 1000 >"$d/serial"
	printf '[ca]\ndefault_ca=d\n[d]\ndatabase=%s/index.txt\nnew_certs_dir=%s/new\nserial=%s/serial\ndefault_md=sha256\npolicy=p\nunique_subject=no\n[p]\ncommonName=supplied\norganizationName=optional\n' \
		"$d" "$d" "$d" >"$d/ca.cnf"
	subj=$(openssl x509 -in "$P/$f.crt" -noout -subject -nameopt oneline | sed 's/^subject=//; s/ = /=/g; s/, /\//g; s/^/\//')
	sans=$(openssl x509 -in "$P/$f.crt" -noout -ext subjectAltName 2>/dev/null | tail -n +2 | sed 's/IP Address:/IP:/g; s/ //g')
	eku=$(openssl x509 -in "$P/$f.crt" -noout -ext extendedKeyUsage | tail -n +2 | sed 's/TLS Web Server Authentication/serverAuth/; s/TLS Web Client Authentication/clientAuth/g; s/ //g')
	printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\nauthorityKeyIdentifier=keyid\n%s\n' \
		"$eku" "${sans:+subjectAltName=$sans}" >"$d/ext"
	openssl req -new -key "$P/$f.key" -subj "$subj" -out "$d/csr" 2>/dev/null &&
		openssl ca -batch -config "$d/ca.cnf" -cert "$P/$ca.crt" -keyfile "$P/$ca.key" -preserveDN -notext \
			-startdate 20240101000000Z -enddate 20250101000000Z -extfile "$d/ext" -in "$d/csr" -out "$P/$f.crt" 2>/dev/null &&
		openssl x509 -in "$P/$f.crt" -noout -checkend 0 >/dev/null && return 1 || return 0
}
n=0
while IFS=$'\t' read -r file ca _; do
	case $file in '#'* | '') continue ;; esac
	expire "$file" "$ca" && n=$((n + 1))
done <"$D/kubeadm-certs.tsv"
[ $n = 7 ] && peer ok "the 7 leaves re-issued by openssl ca, expired since 2025" || peer fail "the 7 leaves re-issued expired" "$n of 7"
out=$(CFG=$T_TMP/cfg-ep.yaml render 2>&1)
rc=$?
n=0
while IFS=$'\t' read -r file ca _; do
	case $file in '#'* | '') continue ;; esac
	[[ "$(step_of "pki/$file.crt" "$out")" == "[updated]"*"expired "*" days ago" ]] &&
		openssl verify -CAfile "$P/$ca.crt" "$P/$file.crt" >/dev/null &&
		openssl x509 -in "$P/$file.crt" -noout -checkend $((360 * 86400)) >/dev/null && n=$((n + 1))
done <"$D/kubeadm-certs.tsv"
[ $rc = 0 ] && [ $n = 7 ] && ok "all 7 leaves expired: each renewed for a year by one render, without any API server" ||
	fail "all 7 leaves expired: each renewed" "exit $rc, $n of 7: $(grep -v unchanged <<<"$out")"

# ---- --dry-run with something to do; the root kubeconfig symlink --------------------------------
rm "$P/etcd/healthcheck-client.key"
snapshot >"$T_TMP/snap1"
out=$(CFG=$T_TMP/cfg-ep.yaml render --dry-run 2>&1)
rc=$?
snapshot >"$T_TMP/snap2"
[ $rc = 0 ] && [[ "$(step_of pki/etcd/healthcheck-client.crt "$out")" == "[would change]"*"would renew: its key is missing" ]] &&
	grep -q '^render (dry run): 1 would change, 16 unchanged' <<<"$out" && cmp -s "$T_TMP/snap1" "$T_TMP/snap2" &&
	ok "--dry-run with a key deleted: says it would renew, writes nothing" ||
	fail "--dry-run with a key deleted: says it would renew, writes nothing" "exit $rc: $(grep -v unchanged <<<"$out")"
sed 's/value: 40s/value: 50s/' "$T_TMP/cfg-ep.yaml" >"$T_TMP/cfg-ep50.yaml"
out=$(CFG=$T_TMP/cfg-ep50.yaml render --dry-run 2>&1)
rc=$?
snapshot >"$T_TMP/snap2"
# the diff as diff -u: the flag's line removed and added, the checksum annotation too, nothing else
hunk=$(sed -n '/^--- a\/etc\/kubernetes\/manifests\/kube-controller-manager.yaml$/,/^render/p' <<<"$out" | grep '^[-+]' | sort)
[ $rc = 0 ] && grep -q '^+++ b/etc/kubernetes/manifests/kube-controller-manager.yaml$' <<<"$out" &&
	grep -qx -- '-    - --node-monitor-grace-period=40s' <<<"$hunk" && grep -qx -- '+    - --node-monitor-grace-period=50s' <<<"$hunk" &&
	[ "$(grep -c '^[-+] ' <<<"$hunk")" = 4 ] && ! grep -q '^--- a/etc/kubernetes/manifests/kube-scheduler.yaml' <<<"$out" && cmp -s "$T_TMP/snap1" "$T_TMP/snap2" &&
	ok "--dry-run with an extraArg changed: prints the manifest's diff (the flag and the checksum), writes nothing" ||
	fail "--dry-run prints the manifest's diff" "exit $rc: $hunk $(grep -v unchanged <<<"$out" | head -20)"
out=$(CFG=$T_TMP/cfg-ep.yaml render --root-kubeconfig-symlink 2>&1)
[ "$(readlink "$R/root/.kube/config")" = /etc/kubernetes/admin.conf ] && [[ "$(step_of /root/.kube/config "$out")" == "[created]"* ]] &&
	ok "--root-kubeconfig-symlink: ROOT/root/.kube/config -> /etc/kubernetes/admin.conf" ||
	fail "--root-kubeconfig-symlink" "$(readlink "$R/root/.kube/config"); $(grep -v unchanged <<<"$out")"
out=$(CFG=$T_TMP/cfg-ep.yaml render --root-kubeconfig-symlink 2>&1)
grep -q '^render: 0 created, 0 updated, 18 unchanged' <<<"$out" && ok "--root-kubeconfig-symlink again: nothing changes" ||
	fail "--root-kubeconfig-symlink again: nothing changes" "$(tail -2 <<<"$out")"

# ---- v1beta3, the node from InitConfiguration ----------------------------------------------------
R3=$T_TMP/root3
mkdir -p "$R3/etc/kubernetes"
cp -a "$R/etc/kubernetes/pki" "$R3/etc/kubernetes/pki"
rm -f "$R3"/etc/kubernetes/pki/{apiserver,etcd/server}.*
out=$(env -u NODE_NAME -u MY_IP "$AWS_K8S" cpm render --config "$D/kubeadm-config-v1beta3.yaml" --root "$R3" 2>&1)
rc=$?
sans=$(cert_fields "$R3/etc/kubernetes/pki/apiserver.crt" | cut -f6)
esans=$(cert_fields "$R3/etc/kubernetes/pki/etcd/server.crt" | cut -f6)
[ $rc = 0 ] && [[ "$sans" == *"DNS:master-1"* && "$sans" == *"IP Address:10.0.0.6"* && "$sans" == *"DNS:api.example.com"* ]] &&
	[[ "$esans" == *"DNS:master-1"* && "$esans" == *"IP Address:10.0.0.6"* ]] &&
	grep -q -- '- --advertise-address=10.0.0.6$' "$R3/etc/kubernetes/manifests/kube-apiserver.yaml" &&
	grep -q -- '- --name=master-1$' "$R3/etc/kubernetes/manifests/etcd.yaml" &&
	grep -q -- 'image: registry.k8s.io/kube-apiserver:v1.30.6$' "$R3/etc/kubernetes/manifests/kube-apiserver.yaml" &&
	grep -q -- '- --profiling=false$' "$R3/etc/kubernetes/manifests/kube-scheduler.yaml" &&
	ok "v1beta3 (extraArgs as a map, node in InitConfiguration): certificates and manifests for master-1/10.0.0.6" ||
	fail "v1beta3: certificates and manifests for master-1/10.0.0.6" "exit $rc: $(tail -3 <<<"$out"); SANs $sans"
for c in kube-apiserver etcd; do
	check "v1beta3 $c.yaml: accepted by kubectl create --dry-run=server --validate=strict" \
		k create --dry-run=server --validate=strict -f "$R3/etc/kubernetes/manifests/$c.yaml"
done

# ---- bad input: a clear error, nothing written ---------------------------------------------------
R4=$T_TMP/root4
mkdir -p "$R4/etc/kubernetes/pki"
out=$(NODE_NAME=master-0 MY_IP=10.0.0.5 "$AWS_K8S" cpm render --config "$CFG4" --root "$R4" 2>&1)
rc=$?
[ $rc = 1 ] && grep -q "pki/ca.crt: missing (the CAs are inputs: install them from d8-pki)" <<<"$out" &&
	[ -z "$(find "$R4" -type f)" ] && ok "a missing CA: exit 1 naming it, nothing written" ||
	fail "a missing CA: exit 1 naming it, nothing written" "exit $rc: $out"
out=$(env -u NODE_NAME MY_IP=10.0.0.5 "$AWS_K8S" cpm render --config "$CFG4" --root "$R4" 2>&1)
[ $? = 1 ] && grep -q "no node name: set NODE_NAME" <<<"$out" && ok "no node name: exit 1 saying where to set it" ||
	fail "no node name: exit 1 saying where to set it" "$out"
sed 's/^kubernetesVersion: .*/kubernetesVersion: v1.33.4\ncertificatesDir: \/srv\/pki/' "$CFG4" >"$T_TMP/cfg-dir.yaml"
out=$(NODE_NAME=master-0 MY_IP=10.0.0.5 "$AWS_K8S" cpm render --config "$T_TMP/cfg-dir.yaml" --root "$R4" 2>&1)
[ $? = 1 ] && grep -q 'certificatesDir: "/srv/pki": only /etc/kubernetes/pki is supported' <<<"$out" &&
	ok "an unsupported certificatesDir is refused, not rendered wrong" || fail "an unsupported certificatesDir is refused" "$out"
out=$("$AWS_K8S" cpm render --root "$R4" 2>&1)
[ $? = 2 ] && grep -q -- "--config is required" <<<"$out" && ok "render without --config: usage error (exit 2)" ||
	fail "render without --config: usage error (exit 2)" "$out"
out=$("$AWS_K8S" cpm frobnicate 2>&1)
[ $? = 2 ] && grep -q "unknown command 'frobnicate'" <<<"$out" && ok "an unknown cpm command: exit 2" ||
	fail "an unknown cpm command: exit 2" "$out"
out=$("$AWS_K8S" cpm --help 2>&1)
[ $? = 0 ] && grep -q "render --config FILE" <<<"$out" && grep -q "certs renew <name|all>" <<<"$out" &&
	grep -q -- "--my-ip" <<<"$out" && grep -q "MY_IP" <<<"$out" &&
	ok "cpm --help: the commands, the flags and their variables" || fail "cpm --help" "$out"

t_summary
