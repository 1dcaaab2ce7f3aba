#!/usr/bin/env bash
# Fuzzes the CSI request decoding path (tests/fuzz/csi_decode_fuzz.c) with libFuzzer, ASan
# and UBSan for SECONDS (default 60). Needs clang with libFuzzer (clang-14 is installed).
# The seeds are tests/fuzz/corpus/csi_decode_fuzz/ (valid requests), new inputs go to
# build/fuzz-csi/corpus/, crashes to build/fuzz-csi/artifacts/. Prints "N passed, N failed"
# like the other tests. Without clang it skips; tests/fuzz/ci.sh --ci (make fuzz-ci) fails.
set -u
secs=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
out=build/fuzz-csi
mkdir -p "$out"
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
	common/grpc/*.c common/kube/*.c common/csi/*.c modules/csi-controller/*.c \
	build/default/gen/common/csi/csi.pb-c.c; then
	echo "FAIL - the fuzz harness builds ($fuzz_failed)"
	tail -n 20 "$out/csi_build.log"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
if ! fuzz_build csi_decode_fuzz; then
	echo "FAIL - the fuzz harness builds"
	tail -n 20 "$out/csi_build.log"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
# Seeds: tests/fuzz/corpus/csi_decode_fuzz/ (byte 0 picks the method, its index in
# csi_decode_fuzz.c, then the request); new inputs go to $out/corpus/csi_decode_fuzz.
echo "fuzzing the CSI decoding path for ${secs}s"
SECS=$secs
fuzz_run csi_decode_fuzz 4096
rc=$?
grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|Done [0-9]+ runs" "$FUZZ_LOGFILE" | tail -n 3
if [ $rc -eq 0 ]; then
	echo "ok - no crash in ${secs}s ($(ls "$out/corpus/csi_decode_fuzz" | wc -l) new corpus entries)"
	echo "1 passed, 0 failed, 0 skipped"
else
	echo "FAIL - the fuzzer found a crash (see $FUZZ_LOGFILE, $out/artifacts)"
	grep -m 5 -E "ERROR|SUMMARY|runtime error" "$FUZZ_LOGFILE"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
