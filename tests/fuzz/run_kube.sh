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
CC=clang

cd "$ROOT"
. tests/fuzz/lib.sh
fuzz_objects common/base/*.c common/kube/*.c common/http/client.c common/metrics/*.c
fuzz_run_all 8192 "${FUZZERS[@]}"
