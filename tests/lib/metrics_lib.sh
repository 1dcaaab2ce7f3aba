# shellcheck shell=bash
# Helpers of the metrics integration tests (metrics_names.sh, csi_metrics.sh; sourced, not run).
#
#   promtool_check NAME FILE        the scrape in FILE parses and passes `promtool check
#                                   metrics` (but for upstream cloud-provider-aws's one name
#                                   without _total)
#   compare NAME FILE UPSTREAM OTHER [MODES]
#                                   every metric of the UPSTREAM table (tests/data/metrics/)
#                                   is exported with its type and exactly its label names; no
#                                   name of the OTHER table is exported; no family or series
#                                   twice. MODES (controller, node, or both comma-separated)
#                                   picks the rows of a table that has a mode column: the other
#                                   modes' names must not be exported.
#   slow_detach VOLUME INSTANCE DEVICE SECONDS
#                                   for SECONDS, the fault proxy answers every DescribeVolumes
#                                   with VOLUME still "detaching" from INSTANCE (moto detaches
#                                   at once): a detach the controller has to wait for
#   nvme_fixture DIR                two EBS volumes for a csi-node --device-dir DIR/by-id, with
#                                   pages in DIR/pages (--nvme-log-page-dir): NVME_VOL_GOOD has
#                                   tests/data/csi_node/ebs_nvme_page.bin, NVME_VOL_BAD the same
#                                   with a wrong magic; fails when there are not two block
#                                   devices to link to (NVME_WHY says so)
#   metric_value FILE SERIES        the value of the series (name{labels} as written) in FILE

# shellcheck disable=SC2034 # the scripts that source this file use it
METRICS_DATA=$T_ROOT/tests/data/metrics

promtool_check() {
	local out
	out=$(promtool check metrics <"$2" 2>&1)
	out=$(grep -v '^cloudprovider_aws_api_request_errors counter metrics should have "_total" suffix$' <<<"$out")
	if [ -z "$out" ]; then ok "$1: promtool check metrics"
	else fail "$1: promtool check metrics" "$out"; fi
}

compare() {
	local out
	if out=$(python3 - "$2" "$3" "$4" "${5:-}" <<'PY'
import re, sys
scrape, mine, other, modes = sys.argv[1:5]
modes = set(modes.split(",")) if modes else None
def table(path):
    t = {}
    for line in open(path):
        line = line.split("#", 1)[0].split()
        if line:
            t[line[0]] = (line[1], set() if line[2] == "-" else set(line[2].split(",")),
                          line[3] if len(line) > 3 else None)
    return t
want, theirs = table(mine), table(other)
if modes:
    unknown = {m for _, _, m in want.values()} - {"controller", "node"}
    if unknown:
        print("%s: modes %s in the table" % (mine, sorted(unknown))); sys.exit(1)
    theirs.update({n: v for n, v in want.items() if v[2] not in modes})
    want = {n: v for n, v in want.items() if v[2] in modes}
types, labels, problems, seen = {}, {}, [], set()
for line in open(scrape):
    m = re.match(r"# TYPE (\S+) (\S+)", line)
    if m:
        if m.group(1) in types:
            problems.append("%s: declared twice" % m.group(1))
        types[m.group(1)] = m.group(2)
        continue
    if line.startswith("#") or not line.strip():
        continue
    series = line.rsplit(" ", 1)[0]
    if series in seen:
        problems.append("%s: twice" % series)
    seen.add(series)
    m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s", line)
    name, ls = m.group(1), set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)] if name.endswith(suffix) else None
        if base and types.get(base) == "histogram":
            name = base
            ls.discard("le")
    labels.setdefault(name, set()).add(frozenset(ls))
for name, (typ, ls, _) in sorted(want.items()):
    if name not in types:
        problems.append("%s: not exported" % name)
        continue
    if types[name] != typ:
        problems.append("%s: type %s, upstream %s" % (name, types[name], typ))
    for got in labels.get(name, ()):
        if set(got) != ls:
            problems.append("%s: labels {%s}, upstream {%s}" % (name, ",".join(sorted(got)), ",".join(sorted(ls))))
    if not labels.get(name):
        problems.append("%s: no series" % name)
for name in sorted(types):
    if name in theirs:
        problems.append("%s: a name this process must not export" % name)
print("\n".join(problems))
sys.exit(1 if problems else 0)
PY
	); then ok "$1: the names, types and label sets of $(basename "$3")${5:+ ($5)}"
	else fail "$1: the names, types and label sets of $(basename "$3")${5:+ ($5)}" "$out"; fi
}

slow_detach() {
	local body
	body=$(python3 - "$T_ROOT/tests/data/csi" "$@" <<'PY'
import json, sys
d, vol, inst, dev, secs = sys.argv[1:6]
def fill(name, **kw):
    s = open("%s/%s" % (d, name)).read()
    for k, v in kw.items():
        s = s.replace("@%s@" % k, v)
    return s
att = fill("attachment_item.xml", VOLUME=vol, INSTANCE=inst, DEVICE=dev, STATE="detaching")
item = fill("volume_item.xml", ID=vol, SIZE="1", STATE="in-use", ATTACHMENTS=att, TAGS="",
            TYPE="gp3", IOPS="3000")
print(json.dumps({"service": "ec2", "action": "DescribeVolumes", "effect": "body",
                  "body": fill("describe_volumes.xml", ITEMS=item), "duration": float(secs)}))
PY
	) && fault "$body"
}

nvme_fixture() {
	local dir=$1 d found=()
	for d in /dev/loop0 /dev/loop1 /dev/loop2 /dev/loop3 /dev/ram0 /dev/ram1; do
		[ -b "$d" ] && found+=("$d")
	done
	if [ ${#found[@]} -lt 2 ]; then
		# shellcheck disable=SC2034 # for the caller's skip
		NVME_WHY="two block devices under /dev (loop0, loop1...) are needed to stand for volumes"
		return 1
	fi
	NVME_VOL_GOOD=vol-0000000000000a001 NVME_VOL_BAD=vol-0000000000000a002
	mkdir -p "$dir/by-id" "$dir/pages"
	ln -sfn "${found[0]}" "$dir/by-id/nvme-Amazon_Elastic_Block_Store_${NVME_VOL_GOOD//-/}"
	ln -sfn "${found[1]}" "$dir/by-id/nvme-Amazon_Elastic_Block_Store_${NVME_VOL_BAD//-/}"
	cp "$T_ROOT/tests/data/csi_node/ebs_nvme_page.bin" "$dir/pages/$NVME_VOL_GOOD"
	{ printf '\x11'; tail -c +2 "$T_ROOT/tests/data/csi_node/ebs_nvme_page.bin"; } >"$dir/pages/$NVME_VOL_BAD"
}

metric_value() {
	awk -v s="$2" 'index($0, s " ") == 1 { print substr($0, length(s) + 2); found = 1; exit }
		END { if (!found) exit 1 }' "$1"
}
