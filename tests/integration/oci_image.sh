#!/usr/bin/env bash
# tests: product
# sanitizer-pass: skip (runs the static binary, $AWS_K8S_STATIC, never the sanitizer build)
# make image: the OCI image layout archive against the OCI image spec (oci-layout, index.json ->
# manifest -> config and layers, media types, every blob's digest and size, diff_ids, history),
# the layers' tar entries (sorted, owners 0:0, fixed times), two builds giving the same bytes;
# then the layers unpacked into an empty folder and run from it with chroot, with no file of
# the host: aws-k8s --version and the upstream names' --version as user 65532, an AWS call over
# HTTPS that trusts the image's CA bundle (and only it), a ccm that initializes a Node against
# moto and the test API server, and the file system tools the CSI node plugin runs (mkfs.ext4,
# e2fsck, resize2fs, mkfs.xfs, xfs_growfs on a loop device).
#
# The binary is $AWS_K8S_STATIC (default build/static/aws-k8s, `make static`). Without it the
# archive is built around a stand-in static program, its spec checks and the tools' run, and
# every check that runs aws-k8s is skipped with that reason. Needs root (chroot, mount, a loop
# device); the script runs in a private mount namespace. aws-k8s runs in the bare root (no
# /proc, no /dev) with an empty environment but for PATH, HOME and the AWS variables; the
# test's own files, the kubeconfig and the cloud config, are copied into it under /run/test
# (nothing is bind-mounted). The tools then run with what a container runtime gives a
# container: /proc, and a /dev tmpfs with null, zero, full, random, urandom (plus the loop
# device's node for xfs_growfs, as the node plugin sees the host's /dev).
if [ -z "${OCI_IMAGE_PRIVATE_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	OCI_IMAGE_PRIVATE_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

if [ "$(id -u)" != 0 ] || [ -z "${OCI_IMAGE_PRIVATE_NS:-}" ]; then
	skip "image" "needs root and unshare (chroot, mount)"
	t_summary
fi
for t in chroot losetup blkid dumpe2fs openssl moto_server python3; do
	command -v $t >/dev/null || { skip "image" "$t is not installed"; t_summary; }
done

BIN=${AWS_K8S_STATIC:-$T_ROOT/build/static/aws-k8s}
REAL=1
if [ ! -x "$BIN" ]; then
	REAL=
	NOBIN="no static aws-k8s at $BIN (make static, or set AWS_K8S_STATIC)"
	skip "image around the static aws-k8s" "$NOBIN; spec checks run on a stand-in"
	printf 'int main(void) { return 0; }\n' >"$T_TMP/standin.c"
	BIN=$T_TMP/standin
	cc -static -o "$BIN" "$T_TMP/standin.c" || { fail "a static stand-in builds"; t_summary; }
fi
VERSION=$(cat "$T_ROOT/VERSION")
CHROOT=$(command -v chroot)

# ---- two builds: the same bytes, from a copy of the binary with another path and time ----
mk_image() {
	env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s -C "$T_ROOT" --no-print-directory image \
		IMAGE_BIN="$1" IMAGE_OUT="$2"
}
if ! out=$(mk_image "$BIN" "$T_TMP/a.oci.tar" 2>&1); then
	fail "make image" "$out"
	t_summary
fi
ok "make image writes the archive"
echo "# ${out//$'\n'/$'\n'# }"
mkdir -p "$T_TMP/copy"
cp "$BIN" "$T_TMP/copy/aws-k8s" && touch -d @1 "$T_TMP/copy/aws-k8s"
if out=$(mk_image "$T_TMP/copy/aws-k8s" "$T_TMP/b.oci.tar" 2>&1) &&
	cmp -s "$T_TMP/a.oci.tar" "$T_TMP/b.oci.tar"; then
	ok "two builds give the same archive ($(sha256sum <"$T_TMP/a.oci.tar" | cut -c1-16)...)"
else fail "two builds give the same archive" "$out"; fi
if ! out=$(mk_image "$T_ROOT/Makefile" "$T_TMP/bad.tar" 2>&1) &&
	grep -q "not a little-endian 64-bit ELF" <<<"$out" && [ ! -e "$T_TMP/bad.tar" ]; then
	ok "make image refuses a file that is not an executable"
else fail "make image refuses a file that is not an executable" "$out"; fi

# ---- the archive against the OCI image spec; unpacks the layers into $ROOT ----
ROOT=$T_TMP/root
mkdir -p "$ROOT"
rev=$(git -C "$T_ROOT" rev-parse HEAD)
while IFS=$'\t' read -r what name detail; do
	case $what in
	ok) ok "$name" ;;
	fail) fail "$name" "$detail" ;;
	*) echo "# $what $name" ;;
	esac
done < <(python3 - "$T_TMP/a.oci.tar" "$ROOT" "$VERSION" "$rev" "$BIN" 2>&1 <<'PY'
import gzip, hashlib, io, json, sys, tarfile

archive, root, version, rev, binary = sys.argv[1:]
M_INDEX = "application/vnd.oci.image.index.v1+json"
M_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
M_CONFIG = "application/vnd.oci.image.config.v1+json"
M_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def out(*f):
    print("\t".join(str(x).replace("\t", " ").replace("\n", " ") for x in f), flush=True)


def check(name, cond, detail=""):
    out("ok" if cond else "fail", name, detail)
    return cond


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def entries_ok(what, tf, epoch, owned):
    """sorted names, no absolute path or .., numeric owners 0:0 (but the paths in owned), one
    time stamp, no whiteout file"""
    names = [m.name for m in tf.getmembers()]
    bad = [m.name for m in tf.getmembers()
           if m.name.startswith("/") or ".." in m.name.split("/") or "/.wh." in "/" + m.name
           or m.mtime != epoch or (m.uid, m.gid) != owned.get(m.name, (0, 0))
           or m.uname or m.gname]
    check(what + ": entries sorted, relative, 0:0, one time stamp, no whiteout",
          names == sorted(names) and not bad and len(set(names)) == len(names),
          "bad: %s; order %s" % (bad[:5], names[:8]))


with open(archive, "rb") as f:
    outer = tarfile.open(fileobj=io.BytesIO(f.read()))
files = {m.name: outer.extractfile(m).read() for m in outer.getmembers() if m.isfile()}
epoch = outer.getmembers()[0].mtime
entries_ok("archive", outer, epoch, {})
check("archive: oci-layout is 1.0.0",
      json.loads(files.get("oci-layout", b"{}")).get("imageLayoutVersion") == "1.0.0")
blobs = {n[len("blobs/sha256/"):]: d for n, d in files.items() if n.startswith("blobs/sha256/")}
check("every blob is named by its sha256",
      blobs and all(hashlib.sha256(d).hexdigest() == h for h, d in blobs.items()))
used = set()


def blob(desc, media_type, what):
    """the blob a descriptor names, when its media type, digest and size match"""
    h = desc.get("digest", "")[len("sha256:"):]
    used.add(h)
    d = blobs.get(h)
    check("%s: %s, digest and size match its blob" % (what, media_type),
          desc.get("mediaType") == media_type and d is not None and len(d) == desc.get("size")
          and sha(d) == desc.get("digest"), json.dumps(desc))
    return d or b"{}"


index = json.loads(files.get("index.json", b"{}"))
check("index.json: schemaVersion 2, index media type, one manifest",
      index.get("schemaVersion") == 2 and index.get("mediaType") == M_INDEX
      and len(index.get("manifests", [])) == 1, json.dumps(index))
mdesc = (index.get("manifests") or [{}])[0]
check("index.json: tagged %s for linux/amd64" % version,
      mdesc.get("annotations", {}).get("org.opencontainers.image.ref.name") == version
      and mdesc.get("platform") == {"architecture": "amd64", "os": "linux"}, json.dumps(mdesc))
manifest = json.loads(blob(mdesc, M_MANIFEST, "manifest"))
check("manifest: schemaVersion 2, two layers",
      manifest.get("schemaVersion") == 2 and len(manifest.get("layers", [])) == 2)
config = json.loads(blob(manifest.get("config", {}), M_CONFIG, "config"))
layers = [blob(d, M_LAYER, "layer %d" % (i + 1)) for i, d in enumerate(manifest.get("layers", []))]
check("no blob outside the manifest", used == set(blobs), sorted(set(blobs) - used))

cc = config.get("config", {})
labels = cc.get("Labels", {})
check("config: amd64 linux, user 65532:65532, entrypoint /usr/bin/aws-k8s",
      config.get("architecture") == "amd64" and config.get("os") == "linux"
      and cc.get("User") == "65532:65532" and cc.get("Entrypoint") == ["/usr/bin/aws-k8s"],
      json.dumps(cc))
check("config: labels version %s and revision %s" % (version, rev[:12]),
      labels.get("org.opencontainers.image.version") == version
      and labels.get("org.opencontainers.image.revision", "").split("-")[0] == rev,
      json.dumps(labels))
raws = []
for i, gz in enumerate(layers):
    check("layer %d: gzip without name or time" % (i + 1),
          gz[:4] == b"\x1f\x8b\x08\x00" and gz[4:8] == b"\0\0\0\0", gz[:10].hex())
    raws.append(gzip.decompress(gz))
check("config: rootfs.diff_ids are the sha256 of the uncompressed layers",
      config.get("rootfs", {}).get("type") == "layers"
      and config.get("rootfs", {}).get("diff_ids") == [sha(r) for r in raws],
      json.dumps(config.get("rootfs")))
hist = config.get("history", [])
check("config: one history entry per layer, with the image's time",
      len([h for h in hist if not h.get("empty_layer")]) == len(layers)
      and all(h.get("created") == config.get("created") and h.get("comment") for h in hist),
      json.dumps(hist))
for i, raw in enumerate(raws):
    tf = tarfile.open(fileobj=io.BytesIO(raw))
    entries_ok("layer %d" % (i + 1), tf, epoch, {"home/nonroot": (65532, 65532)})
    tf.extractall(root, numeric_owner=True)
with open(binary, "rb") as f:
    want = f.read()
with open(root + "/usr/bin/aws-k8s", "rb") as f:
    check("/usr/bin/aws-k8s is the binary", f.read() == want)
for i, (d, raw) in enumerate(zip(manifest.get("layers", []), raws)):
    out("size:", "layer %d: %d bytes compressed, %d uncompressed (%s)"
        % (i + 1, d["size"], len(raw), hist[i].get("comment", "")[:60]))
out("size:", "image: %d bytes compressed (archive %d), %d uncompressed"
    % (sum(len(g) for g in layers), len(open(archive, "rb").read()), sum(map(len, raws))))
PY
)

# ---- the unpacked root ----
links_ok=1
for n in aws-cloud-controller-manager aws-ebs-csi-driver node-termination-handler kube-rbac-proxy \
	ccm csi-controller csi-node ebs-csi-driver; do
	[ "$(readlink "$ROOT/usr/bin/$n")" = aws-k8s ] || { links_ok=; echo "# /usr/bin/$n: $(readlink "$ROOT/usr/bin/$n")"; }
done
check "the upstream names and the commands link to aws-k8s" test -n "$links_ok"
for d in bin sbin lib lib64; do
	[ "$(readlink "$ROOT/$d")" = "usr/$d" ] || links_ok=
done
check "/bin, /sbin, /lib, /lib64 link into /usr" test -n "$links_ok"
check "the user nonroot is 65532" grep -qx 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' "$ROOT/etc/passwd"
check "the group nonroot is 65532" grep -qx 'nonroot:x:65532:' "$ROOT/etc/group"
check "the CA bundle is this machine's" cmp "$ROOT/etc/ssl/certs/ca-certificates.crt" /etc/ssl/certs/ca-certificates.crt
tools_ok=1
for t in mkfs.ext2 mkfs.ext3 mkfs.ext4 mkfs.xfs e2fsck resize2fs xfs_growfs; do
	[ -x "$ROOT/usr/sbin/$t" ] || { tools_ok=; echo "# no /usr/sbin/$t"; }
done
check "the node plugin's tools are in /usr/sbin" test -n "$tools_ok"

# in_root [--user] [NAME=VALUE]... CMD...: CMD run in the unpacked root, as root or as 65532,
# with an empty environment but for PATH and HOME as a runtime sets them, and the NAME=VALUE
# given. root_argv fills ROOT_ARGV with the same command (env execs chroot execs CMD: one pid).
root_argv() {
	local spec=0:0 home=/root envs=()
	if [ "$1" = --user ]; then spec=65532:65532 home=/home/nonroot; shift; fi
	while [[ $1 == *=* ]]; do envs+=("$1"); shift; done
	ROOT_ARGV=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		"HOME=$home" "${envs[@]}" "$CHROOT" "--userspec=$spec" "$ROOT" "$@")
}
in_root() { root_argv "$@" && "${ROOT_ARGV[@]}"; }

# ---- --version with nothing but the image, as the image's user ----
if [ -n "$REAL" ]; then
	out=$(in_root --user /usr/bin/aws-k8s --version 2>&1)
	check "aws-k8s --version in the bare image" grep -q "^aws-k8s $VERSION (commit " <<<"$out"
	out=$(in_root --user aws-ebs-csi-driver --version 2>&1)
	check "aws-ebs-csi-driver --version through the link" grep -q "\"driverVersion\": \"v$VERSION\"" <<<"$out"
	out=$(in_root --user aws-cloud-controller-manager --version 2>&1)
	check "aws-cloud-controller-manager --version through the link" grep -qx "Kubernetes v$VERSION" <<<"$out"
	out=$(in_root --user node-termination-handler 2>&1)
	check "node-termination-handler asks for its node name" grep -q "must provide a node-name" <<<"$out"
	missing='' names=$(in_root --user aws-k8s --help | sed -n '/^Called by the name/,/^$/p' |
		awk '/^  / { print $1 }')
	for n in $names; do
		[ "$(readlink "$ROOT/usr/bin/$n")" = aws-k8s ] || missing="$missing $n"
	done
	check "every upstream name aws-k8s --help lists is a link in the image" \
		test -n "$names" -a -z "$missing"
else
	skip "aws-k8s --version in the image" "$NOBIN"
fi

# ---- the image's CA bundle is what aws-k8s trusts: moto over HTTPS with a certificate of a
# test CA fails, and works once that CA is appended to the bundle in the root ----
ca_bundle_in_image() {
	local d=$T_TMP/tls port out rc
	mkdir -p "$d"
	if ! { openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.crt" \
		-days 2 -subj /CN=oci-image-test-ca &&
		openssl req -newkey rsa:2048 -nodes -keyout "$d/srv.key" -out "$d/srv.csr" \
			-subj /CN=127.0.0.1 &&
		printf 'subjectAltName=IP:127.0.0.1\n' >"$d/ext" &&
		openssl x509 -req -in "$d/srv.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" \
			-CAcreateserial -out "$d/srv.crt" -days 2 -extfile "$d/ext"; } >"$d/log" 2>&1; then
		fail "a test CA and a server certificate" "$(tail -n 3 "$d/log")"
		return
	fi
	port=$(free_port)
	bg moto-tls moto_server -H 127.0.0.1 -p "$port" -c "$d/srv.crt" -k "$d/srv.key"
	if ! wait_http "https://127.0.0.1:$port/" 30; then
		fail "moto over HTTPS starts" "$(tail -n 3 "$T_TMP/moto-tls.log")"
		return
	fi
	root_argv --user AWS_ENDPOINT_URL="https://127.0.0.1:$port" AWS_REGION=us-east-1 \
		AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_EC2_METADATA_DISABLED=true \
		aws-k8s aws sts GetCallerIdentity
	out=$("${ROOT_ARGV[@]}" 2>&1)
	rc=$?
	if [ $rc = 1 ] && grep -q "SSL certificate problem" <<<"$out"; then
		ok "aws-k8s in the image refuses a server its CA bundle does not trust"
	else fail "aws-k8s in the image refuses a server its CA bundle does not trust" "rc=$rc $out"; fi
	cat "$d/ca.crt" >>"$ROOT/etc/ssl/certs/ca-certificates.crt"
	out=$("${ROOT_ARGV[@]}" 2>&1)
	rc=$?
	if [ $rc = 0 ] && grep -q '"Account":' <<<"$out"; then
		ok "aws-k8s in the image trusts /etc/ssl/certs/ca-certificates.crt"
	else fail "aws-k8s in the image trusts /etc/ssl/certs/ca-certificates.crt" "rc=$rc $out"; fi
	cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
}
if [ -n "$REAL" ]; then
	ca_bundle_in_image
else
	skip "the image's CA bundle" "$NOBIN"
fi

# ---- a ccm from the image against moto and the test API server ----
# ccm_root_start FLAG...: the ccm in the bare root as the image's user, through its upstream name
ccm_root_start() {
	root_argv --user AWS_ENDPOINT_URL="$AWS_ENDPOINT_URL" AWS_REGION=us-east-1 \
		AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_EC2_METADATA_DISABLED=true \
		aws-cloud-controller-manager --cloud-provider=aws --cloud-config=/run/test/cloud-config \
		--kubeconfig=/run/test/kubeconfig --bind-address=127.0.0.1 \
		--leader-elect-lease-duration=3s --leader-elect-renew-deadline=2s \
		--leader-elect-retry-period=500ms --node-monitor-period=1s --v=2 "$@"
	bg ccm "${ROOT_ARGV[@]}"
}
ccm_in_image() {
	local port iA dA got
	if ! ccm_env_start; then
		fail "test environment starts"
		return
	fi
	mkdir -p "$ROOT/run/test"
	cp "$KC" "$ROOT/run/test/kubeconfig" && cp "$CCM_CONFIG" "$ROOT/run/test/cloud-config"
	chmod 0644 "$ROOT/run/test/kubeconfig" "$ROOT/run/test/cloud-config"
	port=$(free_port)
	ccm_root_start "--secure-port=$port"
	wait_until 20 curl -sk -o /dev/null "https://127.0.0.1:$port/healthz"
	if [ "$(curl -sk "https://127.0.0.1:$port/healthz")" = ok ]; then
		ok "the ccm in the image serves HTTPS /healthz"
	else fail "the ccm in the image serves HTTPS /healthz" "$(tail -n 5 "$T_TMP/ccm.log")"; fi
	read -r iA dA < <(instance img-a)
	node_create "$dA"
	initialized() {
		node_py "$dA" "n['spec'].get('providerID', ''), 'node.cloudprovider.kubernetes.io/uninitialized' in taints"
	}
	is_initialized() { [[ $(initialized) == "aws:///"*"/$iA False" ]]; }
	wait_until 30 is_initialized
	got=$(initialized)
	if [[ $got == "aws:///"*"/$iA False" ]]; then
		ok "the ccm in the image initializes a Node from EC2 (providerID, taint removed)"
	else fail "the ccm in the image initializes a Node" "$got; $(tail -n 5 "$T_TMP/ccm.log")"; fi
	has_holder() { [ -n "$(kc -n kube-system get lease cloud-controller-manager -o jsonpath='{.spec.holderIdentity}')" ]; }
	check "the ccm in the image holds the leader lease" wait_until 10 has_holder
	ccm_stop_check ccm
}
if [ -n "$REAL" ]; then
	ccm_in_image
else
	skip "ccm in the image" "$NOBIN"
fi

# ---- what a container runtime gives: /proc and a small /dev ----
mkdir -p "$ROOT/proc" "$ROOT/dev" "$ROOT/work" "$ROOT/mnt"
t_cleanup_add "umount -l '$ROOT/proc'; umount -l '$ROOT/dev'"
if ! { mount -t proc proc "$ROOT/proc" && mount -t tmpfs -o mode=0755,size=64k tmpfs "$ROOT/dev" &&
	mknod -m 666 "$ROOT/dev/null" c 1 3 && mknod -m 666 "$ROOT/dev/zero" c 1 5 &&
	mknod -m 666 "$ROOT/dev/full" c 1 7 && mknod -m 666 "$ROOT/dev/random" c 1 8 &&
	mknod -m 666 "$ROOT/dev/urandom" c 1 9; }; then
	fail "/proc and /dev in the root"
	t_summary
fi

# ---- the file system tools, from the image alone ----
fs_size() { dumpe2fs -h "$1" 2>/dev/null | awk -F: '/^Block count/{c=$2} /^Block size/{s=$2} END{print c*s}'; }
truncate -s 32M "$ROOT/work/ext4.img"
out=$(in_root mkfs.ext4 -F -q /work/ext4.img 2>&1)
if [ "$(blkid -p -o value -s TYPE "$ROOT/work/ext4.img" 2>&1)" = ext4 ]; then
	ok "mkfs.ext4 in the image makes an ext4 file system"
else fail "mkfs.ext4 in the image makes an ext4 file system" "$out"; fi
check "e2fsck in the image finds it clean" in_root e2fsck -fn /work/ext4.img
truncate -s 64M "$ROOT/work/ext4.img"
out=$(in_root resize2fs /work/ext4.img 2>&1)
if [ "$(fs_size "$ROOT/work/ext4.img")" = 67108864 ]; then
	ok "resize2fs in the image grows it to 64 MiB"
else fail "resize2fs in the image grows it to 64 MiB" "$out"; fi
truncate -s 300M "$ROOT/work/xfs.img"
check "mkfs.xfs in the image makes an xfs file system" in_root mkfs.xfs -q /work/xfs.img
check "blkid sees xfs" test "$(blkid -p -o value -s TYPE "$ROOT/work/xfs.img" 2>&1)" = xfs
# the node plugin's /dev is the host's (a hostPath volume): the loop device's node in ours
if loop=$(losetup -f --show "$ROOT/work/xfs.img" 2>/dev/null); then
	t_cleanup_add "umount -l '$ROOT/mnt'; losetup -d $loop"
	if mount "$loop" "$ROOT/mnt" && mknod "$ROOT$loop" b $((0x$(stat -c %t "$loop"))) $((0x$(stat -c %T "$loop"))); then
		truncate -s 400M "$ROOT/work/xfs.img" && losetup -c "$loop"
		out=$(in_root xfs_growfs -d /mnt 2>&1)
		size=$(($(stat -f -c '%b*%S' "$ROOT/mnt")))
		if [ "$size" -gt $((320 << 20)) ]; then
			ok "xfs_growfs in the image grows the mounted xfs (to $((size >> 20)) MiB)"
		else fail "xfs_growfs in the image grows the mounted xfs" "$size bytes; $out"; fi
		umount "$ROOT/mnt"
	else fail "the xfs image mounts"; fi
else
	fail "a loop device for xfs_growfs" "losetup -f failed"
fi

t_summary
