#!/usr/bin/env bash
# tests: product
# sanitizer-pass: skip
# common/csi/csi.proto, written for this project, against the CSI specification's facts kept in
# tests/data/csi_spec_fields.txt (package, methods, every message's field names, numbers and
# types, every enum's values): a message, field or value of ours that the specification does
# not have, or has with another number or type, fails; so does one of the specification's that
# a message or enum of ours lacks. What the proto leaves out on purpose (its header says so) is
# listed here, and the list must match exactly. Then the comparison itself is checked: broken
# copies of the proto (a number, a name, a type, a missing or an extra value) must fail it.
. "$(dirname "$0")/../lib/testlib.sh"

PROTO=$T_ROOT/common/csi/csi.proto
SPEC=$T_ROOT/tests/data/csi_spec_fields.txt

# compare PROTO_FILE: prints "@@ok<TAB>name" and "@@fail<TAB>name<TAB>detail" lines
compare() {
	python3 - "$1" "$SPEC" <<'PY'
import re, sys

proto_path, spec_path = sys.argv[1], sys.argv[2]
# Our wire twins of the well-known types (the proto's header): same fields, same bytes.
TWINS = {"BoolValue": "google.protobuf.BoolValue", "Int64Value": "google.protobuf.Int64Value",
         "Timestamp": "google.protobuf.Timestamp"}
# Left out on purpose: the GroupController service (the proto's header), with its messages.
OMITTED = {
    "rpc GroupController.GroupControllerGetCapabilities", "rpc GroupController.CreateVolumeGroupSnapshot",
    "rpc GroupController.DeleteVolumeGroupSnapshot", "rpc GroupController.GetVolumeGroupSnapshot",
    "message GroupControllerGetCapabilitiesRequest", "message GroupControllerGetCapabilitiesResponse",
    "message GroupControllerServiceCapability", "message GroupControllerServiceCapability.RPC",
    "enum GroupControllerServiceCapability.RPC.Type",
    "message CreateVolumeGroupSnapshotRequest", "message CreateVolumeGroupSnapshotResponse",
    "message VolumeGroupSnapshot", "message DeleteVolumeGroupSnapshotRequest",
    "message DeleteVolumeGroupSnapshotResponse", "message GetVolumeGroupSnapshotRequest",
    "message GetVolumeGroupSnapshotResponse",
}

def emit(tag, name, detail=""):
    print("@@%s\t%s\t%s" % (tag, name, detail.replace("\t", " ").replace("\n", " ")))

# ---- the specification's table ----
spec = {"package": None, "messages": {}, "enums": {}, "rpcs": {}}
for n, line in enumerate(open(spec_path), 1):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    w = line.split()
    if w[0] == "package":
        spec["package"] = w[1]
    elif w[0] == "message":
        spec["messages"].setdefault(w[1], {})
    elif w[0] == "enum":
        spec["enums"].setdefault(w[1], {})
    elif w[0] == "rpc":
        spec["rpcs"][w[1]] = (w[2], w[3])
    elif len(w) >= 3 and w[1] == "=":
        owner, _, name = w[0].rpartition(".")
        if owner in spec["enums"]:
            spec["enums"][owner][name] = int(w[2])
        elif owner in spec["messages"] and len(w) >= 4:
            spec["messages"][owner][name] = (int(w[2]), " ".join(w[3:]))
        else:
            raise SystemExit("%s:%d: no message or enum '%s' declared before" % (spec_path, n, owner))
    else:
        raise SystemExit("%s:%d: cannot read '%s'" % (spec_path, n, line))

# ---- the .proto ----
text = open(proto_path).read()
text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
text = re.sub(r"//[^\n]*", " ", text)
toks = re.findall(r'"[^"]*"|[A-Za-z_.][A-Za-z0-9_.]*|-?\d+|[{}();=<>,\[\]]', text)
pos = 0

def peek():
    return toks[pos] if pos < len(toks) else None

def take(want=None):
    global pos
    t = peek()
    if t is None or (want is not None and t != want):
        raise SyntaxError("expected %r, found %r (token %d)" % (want, t, pos))
    pos += 1
    return t

def skip_statement():  # option / reserved / import / syntax ... ;
    while take() != ";":
        pass

def skip_options():  # [ ... ]
    if peek() == "[":
        while take() != "]":
            pass

ours = {"package": None, "messages": {}, "enums": {}, "rpcs": {}}

def parse_enum(full):
    vals = ours["enums"].setdefault(full, {})
    take("{")
    while peek() != "}":
        if peek() in ("option", "reserved"):
            skip_statement()
            continue
        name = take()
        take("=")
        vals[name] = int(take())
        skip_options()
        take(";")
    take("}")

def parse_field(msg):
    t = take()
    if t == "map":
        take("<"); k = take(); take(","); v = take(); take(">")
        typ = "map<%s,%s>" % (k, v)
    elif t in ("repeated", "optional"):
        typ = t + " " + take()
    else:
        typ = t
    name = take()
    take("=")
    num = int(take())
    skip_options()
    take(";")
    msg[name] = (num, typ)

def parse_message(full):
    msg = ours["messages"].setdefault(full, {})
    take("{")
    while peek() != "}":
        t = peek()
        if t == "message":
            take(); parse_message(full + "." + take())
        elif t == "enum":
            take(); parse_enum(full + "." + take())
        elif t == "oneof":
            take(); take(); take("{")
            while peek() != "}":
                if peek() == "option":
                    skip_statement()
                else:
                    parse_field(msg)
            take("}")
        elif t in ("option", "reserved", "extensions"):
            skip_statement()
        elif t == ";":
            take()
        else:
            parse_field(msg)
    take("}")

def parse_service(svc):
    take("{")
    while peek() != "}":
        if peek() == "option":
            skip_statement()
            continue
        take("rpc")
        name = take()
        take("(")
        req = take()
        if req == "stream":
            req = "stream " + take()
        take(")"); take("returns"); take("(")
        resp = take()
        if resp == "stream":
            resp = "stream " + take()
        take(")")
        if peek() == "{":
            depth = 0
            while True:
                t = take()
                depth += (t == "{") - (t == "}")
                if depth == 0:
                    break
        else:
            take(";")
        ours["rpcs"][svc + "." + name] = (req, resp)
    take("}")

try:
    while peek() is not None:
        t = take()
        if t == "package":
            ours["package"] = take()
            take(";")
        elif t in ("syntax", "import", "option"):
            while take() != ";":
                pass
        elif t == "message":
            parse_message(take())
        elif t == "enum":
            parse_enum(take())
        elif t == "service":
            parse_service(take())
        elif t == ";":
            pass
        else:
            raise SyntaxError("unexpected %r at token %d" % (t, pos))
except SyntaxError as e:
    emit("fail", "the proto parses", str(e))
    sys.exit(0)

# the twins under the well-known names, and the field types that name them
def norm_type(t):
    parts = t.split(" ")
    parts[-1] = TWINS.get(parts[-1], parts[-1])
    return " ".join(parts)
for twin, wk in TWINS.items():
    if twin in ours["messages"]:
        ours["messages"][wk] = ours["messages"].pop(twin)
for m in ours["messages"].values():
    for f, (num, typ) in list(m.items()):
        m[f] = (num, norm_type(typ))

# ---- the comparison ----
if ours["package"] == spec["package"]:
    emit("ok", "package %s" % ours["package"])
else:
    emit("fail", "package", "ours %r, the specification's %r" % (ours["package"], spec["package"]))

for svc in sorted({k.split(".")[0] for k in ours["rpcs"]}):
    diffs, n = [], 0
    for k, v in sorted(ours["rpcs"].items()):
        if not k.startswith(svc + "."):
            continue
        n += 1
        if k not in spec["rpcs"]:
            diffs.append("%s is not in the specification" % k)
        elif spec["rpcs"][k] != v:
            diffs.append("%s(%s) returns (%s), the specification's: (%s) returns (%s)" % ((k,) + v + spec["rpcs"][k]))
    if diffs:
        emit("fail", "service %s" % svc, "; ".join(diffs))
    else:
        emit("ok", "service %s: %d methods, requests and replies as the specification" % (svc, n))

for name in sorted(ours["messages"]):
    fields = ours["messages"][name]
    if name not in spec["messages"]:
        emit("fail", "message %s" % name, "not in the specification")
        continue
    want = spec["messages"][name]
    diffs = []
    for f, (num, typ) in sorted(fields.items(), key=lambda x: x[1][0]):
        if f not in want:
            diffs.append("field %s = %d is not in the specification" % (f, num))
        elif want[f] != (num, typ):
            diffs.append("%s = %d %s, the specification's = %d %s" % (f, num, typ, want[f][0], want[f][1]))
    for f, (num, typ) in sorted(want.items(), key=lambda x: x[1][0]):
        if f not in fields:
            diffs.append("lacks the specification's %s = %d %s" % (f, num, typ))
    if diffs:
        emit("fail", "message %s" % name, "; ".join(diffs))
    else:
        emit("ok", "message %s: %d fields, names, numbers and types as the specification" % (name, len(fields)))

for name in sorted(ours["enums"]):
    vals = ours["enums"][name]
    if name not in spec["enums"]:
        emit("fail", "enum %s" % name, "not in the specification")
        continue
    want = spec["enums"][name]
    diffs = ["%s = %d, the specification's = %s" % (v, n, want.get(v, "(none)"))
             for v, n in sorted(vals.items(), key=lambda x: x[1]) if want.get(v) != n]
    diffs += ["lacks the specification's %s = %d" % (v, n) for v, n in sorted(want.items(), key=lambda x: x[1])
              if v not in vals]
    if diffs:
        emit("fail", "enum %s" % name, "; ".join(diffs))
    else:
        emit("ok", "enum %s: %d values as the specification" % (name, len(vals)))

absent = {"rpc " + k for k in spec["rpcs"] if k not in ours["rpcs"]}
absent |= {"message " + k for k in spec["messages"] if k not in ours["messages"]}
absent |= {"enum " + k for k in spec["enums"] if k not in ours["enums"]}
if absent == OMITTED:
    emit("ok", "the proto leaves out only the GroupController service (%d methods, messages and enums)" % len(absent))
else:
    emit("fail", "the proto leaves out only the GroupController service",
         "left out but not listed: %s; listed but defined: %s" % (sorted(absent - OMITTED) or "-", sorted(OMITTED - absent) or "-"))
PY
}

# run PROTO_FILE: the comparison's lines as ok/fail lines of this script
run() {
	local tag name detail out
	out=$(compare "$1" 2>&1) || { fail "the comparison runs" "$(tail -n 3 <<<"$out")"; return; }
	while IFS=$'\t' read -r tag name detail; do
		case $tag in
		@@ok) ok "$name" ;;
		@@fail) fail "$name" "$detail" ;;
		*) fail "the comparison prints only results" "$tag $name $detail" ;;
		esac
	done <<<"$out"
}

n=$(grep -c '^package \|^rpc \|^message \|^enum \| = ' "$SPEC")
if [ "$n" -ge 250 ]; then ok "the specification's table holds $n facts"; else fail "the specification's table" "$n facts"; fi
run "$PROTO"

# ---- the comparison catches a broken proto ----
# mutant NAME SED_EXPR EXPECTED: the proto with SED_EXPR applied must fail the comparison with a
# line that contains EXPECTED (and the edit must change the file)
mutant() {
	local name=$1 expr=$2 want=$3 f=$T_TMP/mutant.proto out
	sed -e "$expr" "$PROTO" >"$f"
	if cmp -s "$f" "$PROTO"; then
		fail "the comparison catches $name" "the edit '$expr' changed nothing"
		return
	fi
	out=$(compare "$f" 2>&1 | grep '^@@fail')
	if grep -qF -- "$want" <<<"$out"; then ok "the comparison catches $name"
	else fail "the comparison catches $name" "want a failure with '$want', got: ${out:-no failure}"; fi
}
mutant "a field number" 's/int64 limit_bytes = 2;/int64 limit_bytes = 3;/' \
	"limit_bytes = 3 int64, the specification's = 2 int64"
mutant "a field name" 's/bool ready_to_use = 5;/bool ready = 5;/' "field ready = 5 is not in the specification"
mutant "a field type" 's/int32 max_entries = 1;/int64 max_entries = 1;/' \
	"max_entries = 1 int64, the specification's = 1 int32"
mutant "a missing field" '/string volume_mount_group = 3;/d' \
	"lacks the specification's volume_mount_group = 3 string"
mutant "an extra field" 's/^  int64 capacity_bytes = 1;$/  int64 capacity_bytes = 1;\n  string extra = 9;/' \
	"field extra = 9 is not in the specification"
mutant "a missing enum value" '/MODIFY_VOLUME = 14;/d' "lacks the specification's MODIFY_VOLUME = 14"
mutant "an enum value's number" 's/MULTI_NODE_MULTI_WRITER = 5;/MULTI_NODE_MULTI_WRITER = 8;/' \
	"MULTI_NODE_MULTI_WRITER = 8, the specification's = 5"
mutant "a twin's field" 's/int32 nanos = 2;/int64 nanos = 2;/' "nanos = 2 int64, the specification's = 2 int32"
mutant "a method's reply" 's/returns (ProbeResponse)/returns (GetPluginInfoResponse)/' \
	"Identity.Probe(ProbeRequest) returns (GetPluginInfoResponse)"
mutant "a message left out" '/^message DeleteSnapshotResponse {}$/d' "left out but not listed: ['message DeleteSnapshotResponse']"
t_summary
