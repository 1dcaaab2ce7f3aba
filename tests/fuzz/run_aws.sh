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
CC=clang
FUZZ_MERGE=${MERGE:-0}

cd "$ROOT"
. tests/fuzz/lib.sh
fuzz_objects common/base/*.c common/aws/*.c common/http/client.c common/metrics/*.c
fuzz_run_all 16384 "${FUZZERS[@]}"
