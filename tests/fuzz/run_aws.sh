#!/usr/bin/env bash
# Fuzzes the AWS client's reply parsers with libFuzzer (clang 14, with ASan and UBSan):
#   aws_xml_reply    Query protocol replies: libxml2 parsing, the tree helpers, XML-to-JSON,
#                    the EC2 / ELB error shapes
#   aws_json_reply   JSON protocol replies and errors, the metadata identity document
#   aws_ini          the shared config / credentials files
#
#   tests/fuzz/run_aws.sh SECONDS [FUZZER...]
#
# Each fuzzer runs for SECONDS, starting from tests/fuzz/corpus/<name>/ (new inputs go to
# build/fuzz-aws/corpus/<name>/; keep the interesting ones by copying them back, or run with
# MERGE=1 to merge them into tests/fuzz/corpus/<name>/). Crashes go to build/fuzz-aws/artifacts/.
# Exit status 1 on any crash, leak, timeout or sanitizer report.
set -eu
SECS=${1:-60}
shift || true
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build/fuzz-aws
FUZZERS=("$@")
[ ${#FUZZERS[@]} -gt 0 ] || FUZZERS=(aws_xml_reply aws_json_reply aws_ini)
PKGS="libcurl openssl libcjson libxml-2.0"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
CFLAGS="-std=gnu17 -O1 -g -D_GNU_SOURCE -I$ROOT $(pkg-config --cflags $PKGS) $SAN"

cd "$ROOT"
mkdir -p "$B/obj" "$B/artifacts"
objs=()
for src in common/base/*.c common/aws/*.c common/http/client.c common/metrics/*.c; do
	obj=$B/obj/$(echo "$src" | tr / _).o
	if [ ! -e "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find "${src%/*}" -name '*.h' -newer "$obj")" ]; then
		clang $CFLAGS -fsanitize=fuzzer-no-link -c -o "$obj" "$src"
	fi
	objs+=("$obj")
done

status=0
for f in "${FUZZERS[@]}"; do
	clang $CFLAGS -fsanitize=fuzzer -o "$B/$f" "tests/fuzz/$f.c" "${objs[@]}" \
		$(pkg-config --libs $PKGS) -lpthread -lm
	mkdir -p "$B/corpus/$f" "tests/fuzz/corpus/$f"
	dict=()
	[ -f "tests/fuzz/$f.dict" ] && dict=(-dict="tests/fuzz/$f.dict")
	echo "== $f for ${SECS}s"
	if "$B/$f" -max_total_time="$SECS" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$B/artifacts/$f-" "${dict[@]}" \
		"$B/corpus/$f" "tests/fuzz/corpus/$f" >"$B/$f.log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/$f.log")
		cov=$(grep -o 'cov: [0-9]*' "$B/$f.log" | tail -1)
		echo "$f: ${runs:-?} runs, $cov, no crash"
		if [ "${MERGE:-0}" = 1 ]; then
			"$B/$f" -merge=1 "tests/fuzz/corpus/$f" "$B/corpus/$f" >"$B/$f.merge.log" 2>&1 || true
			echo "$f: corpus now $(ls "tests/fuzz/corpus/$f" | wc -l) inputs"
		fi
	else
		status=1
		echo "$f: FAILED (see $B/$f.log and $B/artifacts/)"
		grep -E "ERROR|SUMMARY|runtime error" "$B/$f.log" | head -5
	fi
done
exit $status
