#!/usr/bin/env bash
# tests: product
# sanitizer-pass: skip (runs the static binary of make static, not the sanitized one)
# The static binary of `make static` (build/static/aws-k8s, or $AWS_K8S_STATIC): linked
# statically and stripped; --version and one start of every subcommand against the test peers
# (aws and kube-debug calls, ccm initializing a Node, csi-controller GetPluginInfo and a volume
# created and deleted, csi-node staging a loop device when root, ebs-csi-driver, serve); and,
# in an empty root with no file from the host (no ld.so, no libnss_*, no nsswitch.conf), host
# names resolved by the binary itself through c-ares: from /etc/hosts, and from a DNS server
# named in /etc/resolv.conf, with only the AWS credentials in the environment.
if [ -z "${STATIC_PRIVATE_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	STATIC_PRIVATE_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"
. "$(dirname "$0")/csi_controller_lib.sh"

STATIC=${AWS_K8S_STATIC:-$T_ROOT/build/static/aws-k8s}
if [ ! -x "$STATIC" ]; then
	skip "static binary" "$STATIC is not built (make static)"
	t_summary
fi
export AWS_K8S=$STATIC
T=$T_TMP

# ---- the file ----------------------------------------------------------------------------
desc=$(file -b "$STATIC")
check "file: statically linked" grep -q "statically linked" <<<"$desc"
check "file: stripped" grep -qv "not stripped" <<<"$desc"
check "ldd: not a dynamic executable" sh -c "ldd '$STATIC' 2>&1 | grep -q 'not a dynamic executable'"
check "no program interpreter, no needed library" sh -c \
	"! readelf -ld '$STATIC' | grep -q 'INTERP\|NEEDED'"
if out=$(env -i "$STATIC" --version 2>&1) && grep -q "^aws-k8s " <<<"$out" && grep -q "^libcurl " <<<"$out" &&
	grep -q "^OpenSSL " <<<"$out" && grep -q "^gRPC core " <<<"$out"; then
	ok "--version with an empty environment"
else fail "--version with an empty environment" "$out"; fi

if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi

# ---- aws, kube-debug, serve -------------------------------------------------------------
out=$("$STATIC" aws --compact ec2 DescribeAvailabilityZones 2>&1)
check "aws: DescribeAvailabilityZones through the fault proxy to moto" \
	grep -q '"zoneName":"us-east-1a"' <<<"$out"
out=$("$STATIC" kube-debug --kubeconfig "$KC" raw /version 2>&1)
check "kube-debug: GET /version from the test API server over TLS" grep -q '"gitVersion"' <<<"$out"
port=$(free_port)
bg serve "$STATIC" serve --metrics-bind-address "127.0.0.1:$port"
wait_http "http://127.0.0.1:$port/healthz" 10
check "serve: /healthz" test "$(curl -s "http://127.0.0.1:$port/healthz")" = ok
check "serve: /metrics" sh -c "curl -s http://127.0.0.1:$port/metrics | grep -q '^process_resident_memory_bytes '"
stop_within "$(cat "$T/serve.pid")" 5 serve && check "serve: exit 0 on SIGTERM" test "$STOP_RC" = 0

# ---- ccm: a Node initialized from its instance -------------------------------------------
read -r iid dns < <(instance static-a)
node_create "$dns"
ccm_args=(ccm --cloud-provider=aws --cloud-config="$CCM_CONFIG" --kubeconfig="$KC"
	--bind-address=127.0.0.1 --leader-elect-lease-duration=3s --leader-elect-renew-deadline=2s
	--leader-elect-retry-period=500ms --node-monitor-period=1s --v=2)
port=$(free_port)
bg ccm "$STATIC" "${ccm_args[@]}" --secure-port="$port"
# up to 20 s, or until the ccm exits
wait_until 20 sh -c "curl -sk -o /dev/null https://127.0.0.1:$port/healthz || ! kill -0 $(cat "$T/ccm.pid")"
check "ccm: HTTPS /healthz (TLS on OpenSSL, libmicrohttpd without HTTPS)" \
	test "$(curl -sk "https://127.0.0.1:$port/healthz")" = ok
if wait_until 20 sh -c "[ \"\$(kubectl --kubeconfig '$KC' get node '$dns' -o jsonpath='{.spec.providerID}')\" = 'aws:///us-east-1a/$iid' ]"; then
	ok "ccm: the Node gets its providerID"
else fail "ccm: the Node gets its providerID" "$(tail -n 5 "$T/ccm.log")"; fi
check "ccm: the uninitialized taint is gone" test "$(node_py "$dns" "'node.cloudprovider.kubernetes.io/uninitialized' in taints")" = False
stop_within "$(cat "$T/ccm.pid")" 10 ccm && check "ccm: exit 0 on SIGTERM" test "$STOP_RC" = 0

# ---- csi-controller and ebs-csi-driver controller ------------------------------------------
if csi_ctrl_start; then
	check "csi-controller: GetPluginInfo over its socket" sh -c \
		"'$STATIC' csi-client --endpoint 'unix://$CTRL_SOCK' get-plugin-info | jq -e '.name == \"ebs.csi.aws.com\"'"
	vid=$(cc create-volume --name pvc-static --size 1Gi --param type=gp3 --zone us-east-1a | jq -r .volume.volume_id)
	check "csi-controller: CreateVolume in moto" grep -q '^vol-' <<<"$vid"
	check "csi-controller: DeleteVolume" cc delete-volume --volume "$vid"
	stop_within "$CTRL_PID" 10 csi-controller && check "csi-controller: exit 0 on SIGTERM" test "$STOP_RC" = 0
else
	fail "csi-controller starts"
fi
sock=$T/ebs.sock
bg ebs "$STATIC" ebs-csi-driver controller --endpoint "unix://$sock" --k8s-tag-cluster-id=test
wait_until 10 "$STATIC" csi-client --endpoint "unix://$sock" --timeout 2s get-plugin-info
check "ebs-csi-driver controller: CONTROLLER_SERVICE" sh -c "'$STATIC' csi-client --endpoint 'unix://$sock' \
	get-plugin-capabilities | jq -e '[.capabilities[].service.type] | index(\"CONTROLLER_SERVICE\")'"

# ---- csi-node: NodeGetInfo; with root, a loop device staged (libblkid probes, libmount mounts)
sock=$T/node.sock byid=$T/by-id
mkdir -p "$byid"
AWS_EC2_METADATA_DISABLED=true bg node "$STATIC" csi-node --endpoint "unix://$sock" \
	--node-id i-0123456789abcdef0 --availability-zone us-east-1a --instance-type m5.large \
	--describe-instance-type=false --device-dir "$byid"
wait_until 10 test -S "$sock"
csin() { "$STATIC" csi-client --endpoint "unix://$sock" --timeout 60s "$@"; }
check "csi-node: NodeGetInfo" sh -c "'$STATIC' csi-client --endpoint 'unix://$sock' node-get-info | \
	jq -e '.node_id == \"i-0123456789abcdef0\"'"
if [ -z "${STATIC_PRIVATE_NS:-}" ] || ! command -v losetup >/dev/null || ! command -v mkfs.ext4 >/dev/null; then
	skip "csi-node: stage a loop device" "needs root, unshare, losetup and mkfs.ext4"
elif truncate -s 32M "$T/v.img" && loop=$(losetup -f --show "$T/v.img"); then
	t_cleanup_add "umount -l '$T/st' 2>/dev/null; losetup -d '$loop'"
	ln -s "$loop" "$byid/nvme-Amazon_Elastic_Block_Store_vol0aaa"
	check "csi-node: NodeStageVolume formats and mounts ext4" csin node-stage --volume vol-0aaa \
		--staging-path "$T/st" --publish-context devicePath=/dev/xvdba --capability mount:ext4
	check "csi-node: the staging path is an ext4 mount" sh -c "grep ' $T/st ' /proc/self/mountinfo | grep -q ext4"
	check "csi-node: NodeUnstageVolume" csin node-unstage --volume vol-0aaa --staging-path "$T/st"
	check "csi-node: nothing left mounted" sh -c "! grep -q ' $T/st ' /proc/self/mountinfo"
else
	fail "csi-node: a loop device" "losetup failed"
fi
stop_within "$(cat "$T/node.pid")" 10 csi-node && check "csi-node: exit 0 on SIGTERM" test "$STOP_RC" = 0

# ---- an empty root: names through c-ares from /etc/hosts and /etc/resolv.conf ---------------
# A DNS server on a loopback address of its own answers one name (A record) and logs every
# query; nothing else in the root but the binary and those two files.
root=$T/root
mkdir -p "$root/etc" "$root/tmp"
cp "$STATIC" "$root/aws-k8s"
printf '127.0.0.1 moto.hosts.static.test\n' >"$root/etc/hosts"
dns_ip=127.0.53.$((RANDOM % 200 + 20))
printf 'nameserver %s\n' "$dns_ip" >"$root/etc/resolv.conf"
cat >"$T/dns.py" <<'PY'
import socket, struct, sys
ip, name, log = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((ip, 53))
print("ready", flush=True)
while True:
    q, peer = s.recvfrom(512)
    (qid,), i, labels = struct.unpack(">H", q[:2]), 12, []
    while q[i]:
        labels.append(q[i + 1:i + 1 + q[i]])
        i += 1 + q[i]
    qname, (qtype,) = b".".join(labels), struct.unpack(">H", q[i + 1:i + 3])
    question = q[12:i + 5]
    with open(log, "a") as f:
        f.write("%s %d\n" % (qname.decode(), qtype))
    known = qname.lower() == name
    ans = b""
    if known and qtype == 1:
        ans = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton("127.0.0.1")
    flags = 0x8180 if known else 0x8183
    s.sendto(struct.pack(">HHHHHH", qid, flags, 1, 1 if ans else 0, 0, 0) + question + ans, peer)
PY
in_root() {
	env -i AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1 \
		"$CHROOT" "$root" /aws-k8s "$@"
}
CHROOT=$(command -v chroot)
if [ "$(id -u)" != 0 ] || [ -z "$CHROOT" ]; then
	skip "an empty root" "needs root and chroot"
	t_summary
fi
out=$(in_root --version 2>&1)
check "empty root: --version" grep -q "^aws-k8s " <<<"$out"
# the listener's address goes through glibc's getaddrinfo, which needs no NSS module for a
# numeric address or none (":PORT")
port=$(free_port)
bg serve-root env -i "$CHROOT" "$root" /aws-k8s serve --metrics-bind-address ":$port"
if wait_http "http://127.0.0.1:$port/healthz" 10; then ok "empty root: serve on :PORT"
else fail "empty root: serve on :PORT" "$(tail -n 3 "$T/serve-root.log")"; fi
out=$(in_root aws --compact --endpoint-url "http://moto.hosts.static.test:$MOTO_PORT" ec2 DescribeRegions 2>&1)
check "empty root: a name from /etc/hosts (c-ares)" grep -q '"regionName":"us-east-1"' <<<"$out"
bg dns python3 "$T/dns.py" "$dns_ip" moto.dns.static.test "$T/queries"
if wait_until 5 grep -q ready "$T/dns.log"; then
	out=$(in_root aws --compact --endpoint-url "http://moto.dns.static.test:$MOTO_PORT" ec2 DescribeRegions 2>&1)
	check "empty root: a name from the DNS server of /etc/resolv.conf (c-ares)" \
		grep -q '"regionName":"us-east-1"' <<<"$out"
	check "empty root: the DNS server was asked (A record)" grep -q '^moto.dns.static.test 1$' "$T/queries"
	out=$(in_root aws --endpoint-url "http://nosuch.static.test:$MOTO_PORT" --retry-base-delay=1ms \
		ec2 DescribeRegions 2>&1)
	rc=$?
	if [ $rc = 1 ] && grep -qi "resolve" <<<"$out"; then ok "empty root: an unknown name is a resolve error (exit 1)"
	else fail "empty root: an unknown name is a resolve error" "rc=$rc $(tail -n 2 <<<"$out")"; fi
else
	fail "the test DNS server starts on $dns_ip:53" "$(cat "$T/dns.log" 2>/dev/null)"
fi

t_summary
