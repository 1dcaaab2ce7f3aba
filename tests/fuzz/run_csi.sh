#!/usr/bin/env bash
# Fuzzes the CSI request decoding path (tests/fuzz/csi_decode_fuzz.c) with libFuzzer, ASan
# and UBSan for SECONDS (default 60). Needs clang with libFuzzer (clang-14 is installed).
# The corpus lives in build/fuzz-csi/csi-corpus (seeded with valid requests), crashes in
# build/fuzz-csi/csi-crashes. Prints "N passed, N failed" like the other tests.
set -u
secs=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
out=build/fuzz-csi
mkdir -p "$out/csi-corpus" "$out/csi-crashes"
CC=${FUZZ_CC:-clang}
if ! command -v "$CC" >/dev/null; then
	echo "skip - $CC not installed"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi
make -s build/default/gen/common/csi/csi.pb-c.c build/default/gen/awsk8s_version.h >/dev/null || exit 1
PKGS="libcurl openssl libcjson yaml-0.1 libmicrohttpd libxml-2.0 grpc libprotobuf-c"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# shellcheck disable=SC2086
CFLAGS="-std=gnu17 -O1 -g -D_GNU_SOURCE -I. -Ibuild/default/gen $(pkg-config --cflags $PKGS) $SAN"
B=$out FUZZ_LOG=$out/csi_build.log
. tests/fuzz/lib.sh
if ! fuzz_objects common/base/*.c common/aws/*.c common/http/*.c common/metrics/*.c \
	common/grpc/*.c common/csi/*.c modules/csi-controller/*.c \
	build/default/gen/common/csi/csi.pb-c.c; then
	echo "FAIL - the fuzz harness builds ($fuzz_failed)"
	tail -n 20 "$out/csi_build.log"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
# shellcheck disable=SC2086
if ! $CC $CFLAGS -fsanitize=fuzzer -o "$out/csi_decode_fuzz" tests/fuzz/csi_decode_fuzz.c "${objs[@]}" \
	$(pkg-config --libs $PKGS) -lpthread -lm 2>>"$out/csi_build.log"; then
	echo "FAIL - the fuzz harness builds"
	tail -n 20 "$out/csi_build.log"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
# Seeds: byte 0 picks the method (index in csi_decode_fuzz.c), then the request.
seed() { printf "$2" >"$out/csi-corpus/seed-$1"; }
seed create '\x03\x0a\x05pvc-1\x12\x06\x08\x80\x80\x80\x80\x28\x1a\x08\x12\x00\x1a\x02\x08\x01\x22\x0b\x0a\x04type\x12\x03io2\x22\x0b\x0a\x04iops\x12\x03500'
seed create-topo '\x03\x0a\x01v\x3a\x27\x12\x25\x0a\x23\x0a\x1btopology.kubernetes.io/zone\x12\x04us-e'
seed publish '\x05\x0a\x09vol-01234\x12\x07i-01234\x1a\x06\x0a\x00\x1a\x02\x08\x01'
seed stage '\x11\x0a\x05vol-1\x12\x16\x0a\x0adevicePath\x12\x08/dev/xvd\x1a\x03/st'
seed list '\x0d\x08\x02\x12\x08MTowOg=='
seed modify '\x10\x0a\x05vol-1\x1a\x0d\x0a\x04iops\x12\x054000'
echo "fuzzing the CSI decoding path for ${secs}s"
"$out/csi_decode_fuzz" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$out/csi-crashes/" "$out/csi-corpus" >"$out/csi_fuzz.log" 2>&1
rc=$?
grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|Done [0-9]+ runs" "$out/csi_fuzz.log" | tail -n 3
if [ $rc -eq 0 ]; then
	echo "ok - no crash in ${secs}s ($(ls "$out/csi-corpus" | wc -l) corpus entries)"
	echo "1 passed, 0 failed, 0 skipped"
else
	echo "FAIL - the fuzzer found a crash (see $out/csi_fuzz.log, $out/csi-crashes)"
	grep -m 5 -E "ERROR|SUMMARY|runtime error" "$out/csi_fuzz.log"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
