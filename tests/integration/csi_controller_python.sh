#!/usr/bin/env bash
# tests: product
# csi-controller checked from outside with a gRPC client no one here wrote: Debian's
# python3-grpcio (/usr/bin/python3), with messages generated at test time from the project's
# csi.proto by protoc --python_out, calling methods through grpc's generic unary_unary (so
# no grpc_tools plugin is needed).
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/csi_controller_lib.sh"

PY=/usr/bin/python3
if ! $PY -c 'import grpc, google.protobuf' 2>/dev/null; then
	skip "python3-grpcio" "Debian's /usr/bin/python3 has no grpc module (apt-get install python3-grpcio)"
	t_summary
fi
if ! command -v protoc >/dev/null; then
	skip "protoc" "protoc is not installed (apt-get install protobuf-compiler)"
	t_summary
fi
mkdir -p "$T_TMP/py"
if protoc --proto_path="$T_ROOT/common/csi" --python_out="$T_TMP/py" "$T_ROOT/common/csi/csi.proto"; then
	peer ok "protoc generates Python messages from csi.proto"
else
	peer fail "protoc generates Python messages from csi.proto"
	t_summary
fi

moto_start || { fail "moto starts"; t_summary; }
csi_ctrl_start -v 5 || { fail "csi-controller starts"; t_summary; }  # -v 5 logs every request

out=$(PYTHONPATH="$T_TMP/py" $PY - "$CTRL_SOCK" <<'PYEOF' 2>&1
import sys
import grpc
import csi_pb2 as csi

ch = grpc.insecure_channel("unix:" + sys.argv[1])

def call(service, method, req, rep_type):
    f = ch.unary_unary("/csi.v1.%s/%s" % (service, method),
                       request_serializer=lambda m: m.SerializeToString(),
                       response_deserializer=rep_type.FromString)
    return f(req, timeout=60)

def check(name, cond, detail=""):
    print(("ok\t" if cond else "fail\t") + name + ("" if cond else "\t" + str(detail)))

info = call("Identity", "GetPluginInfo", csi.GetPluginInfoRequest(), csi.GetPluginInfoResponse)
check("python: GetPluginInfo name", info.name == "ebs.csi.aws.com", info)
check("python: GetPluginInfo vendor_version", info.vendor_version.startswith("v"), info)

caps = call("Identity", "GetPluginCapabilities", csi.GetPluginCapabilitiesRequest(), csi.GetPluginCapabilitiesResponse)
types = [c.service.type for c in caps.capabilities if c.HasField("service")]
check("python: capabilities", csi.PluginCapability.Service.CONTROLLER_SERVICE in types, caps)

cap = csi.VolumeCapability(mount=csi.VolumeCapability.MountVolume(fs_type="ext4"),
                           access_mode=csi.VolumeCapability.AccessMode(mode=csi.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))
req = csi.CreateVolumeRequest(name="py-vol-1", capacity_range=csi.CapacityRange(required_bytes=3 * 2**30 + 1),
                              volume_capabilities=[cap], parameters={"type": "gp3", "throughput": "200"},
                              secrets={"password": "never-logged"},
                              accessibility_requirements=csi.TopologyRequirement(
                                  preferred=[csi.Topology(segments={"topology.ebs.csi.aws.com/zone": "us-east-1c"})]))
rep = call("Controller", "CreateVolume", req, csi.CreateVolumeResponse)
check("python: CreateVolume id", rep.volume.volume_id.startswith("vol-"), rep)
check("python: CreateVolume rounds up to 4 GiB", rep.volume.capacity_bytes == 4 * 2**30, rep)
check("python: CreateVolume topology", dict(rep.volume.accessible_topology[0].segments) == {"topology.kubernetes.io/zone": "us-east-1c"}, rep)
rep2 = call("Controller", "CreateVolume", req, csi.CreateVolumeResponse)
check("python: CreateVolume again, same id", rep2.volume.volume_id == rep.volume.volume_id, rep2)

try:
    call("Controller", "CreateVolume", csi.CreateVolumeRequest(volume_capabilities=[cap]), csi.CreateVolumeResponse)
    check("python: missing name is INVALID_ARGUMENT", False, "no error")
except grpc.RpcError as e:
    check("python: missing name is INVALID_ARGUMENT", e.code() == grpc.StatusCode.INVALID_ARGUMENT, e)

raw = ch.unary_unary("/csi.v1.Controller/CreateVolume")  # bytes in, bytes out
try:
    raw(b"\x0a\xff\xff\xff\xff\xff", timeout=10)
    check("python: garbage bytes rejected", False, "no error")
except grpc.RpcError as e:
    check("python: garbage bytes rejected", e.code() == grpc.StatusCode.INVALID_ARGUMENT, e)

try:
    ch.unary_unary("/csi.v1.Controller/NoSuchMethod")(b"", timeout=10)
    check("python: unknown method", False, "no error")
except grpc.RpcError as e:
    check("python: unknown method is UNIMPLEMENTED", e.code() == grpc.StatusCode.UNIMPLEMENTED, e)

call("Controller", "DeleteVolume", csi.DeleteVolumeRequest(volume_id=rep.volume.volume_id), csi.DeleteVolumeResponse)
check("python: DeleteVolume", True)
PYEOF
)
while IFS=$'\t' read -r st name detail; do
	case $st in
	ok) ok "$name" ;;
	fail) fail "$name" "$detail" ;;
	*) fail "python client" "$st $name $detail" ;;
	esac
done <<<"$out"
grep -qF 'secrets\":\"<redacted>' "$T_TMP/csi-ctrl.log" && ok "-v 5 logs requests with secrets redacted" ||
	fail "-v 5 logs requests with secrets redacted"
grep -q "never-logged" "$T_TMP/csi-ctrl.log" && fail "secrets never logged" || ok "secrets never logged"
left=$(moto_py 'print(len(ec2.describe_volumes(Filters=[{"Name":"tag-key","Values":["CSIVolumeName"]}])["Volumes"]))')
[ "$left" = 0 ] && ok "the Python client's volume is deleted" || fail "the Python client's volume is deleted" "$left left"
t_summary
