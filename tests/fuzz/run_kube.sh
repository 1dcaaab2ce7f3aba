#!/usr/bin/env bash
# Fuzzes the Kubernetes client's parsers with libFuzzer (clang 14, with ASan and UBSan):
#   kube_kubeconfig   kubeconfig files (YAML through libyaml, then the fields)
#   kube_watch_line   one line of a watch stream
#
#   tests/fuzz/run_kube.sh SECONDS [FUZZER...]
#
# Each fuzzer runs for SECONDS, starting from tests/fuzz/corpus/<name>/ (new inputs it finds go
# to build/fuzz/corpus/<name>/, crashes to build/fuzz/artifacts/). Exit status 1 on any crash,
# leak, timeout or sanitizer report.
set -eu
SECS=${1:-60}
shift || true
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build/fuzz
FUZZERS=("$@")
[ ${#FUZZERS[@]} -gt 0 ] || FUZZERS=(kube_kubeconfig kube_watch_line)
PKGS="libcurl openssl libcjson yaml-0.1"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
CFLAGS="-std=gnu17 -O1 -g -D_GNU_SOURCE -I$ROOT $(pkg-config --cflags $PKGS) $SAN -DAWSK8S_VERSION=\"fuzz\""

cd "$ROOT"
mkdir -p "$B/obj" "$B/artifacts"
objs=()
for src in common/base/*.c common/kube/*.c common/http/client.c common/metrics/*.c; do
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
	mkdir -p "$B/corpus/$f"
	dict=()
	[ -f "tests/fuzz/$f.dict" ] && dict=(-dict="tests/fuzz/$f.dict")
	echo "== $f for ${SECS}s"
	if "$B/$f" -max_total_time="$SECS" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$B/artifacts/$f-" "${dict[@]}" \
		"$B/corpus/$f" "tests/fuzz/corpus/$f" >"$B/$f.log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/$f.log")
		cov=$(grep -o 'cov: [0-9]*' "$B/$f.log" | tail -1)
		echo "$f: ${runs:-?} runs, $cov, no crash"
	else
		status=1
		echo "$f: FAILED (see $B/$f.log and $B/artifacts/)"
		grep -E "ERROR|SUMMARY|runtime error" "$B/$f.log" | head -5
	fi
done
exit $status
