#!/usr/bin/env bash
# A short run of every libFuzzer target, for CI (make fuzz-ci): each is built with clang
# -fsanitize=fuzzer,address,undefined and run for FUZZ_SECONDS (default 30) from its kept corpus
# in tests/fuzz/corpus/<name>/:
#   aws_xml_reply aws_json_reply aws_ini     the AWS client's reply and config parsers
#   kube_kubeconfig kube_watch_line          the Kubernetes client's parsers
#   csi_decode_fuzz                          the CSI request decoding path
#   csi_tagtpl_fuzz                          csi-controller's tag templates
# One check per target: it builds, runs at least 100 inputs, and ends without a crash, leak,
# timeout or sanitizer report. Ends with "N passed, N failed, N skipped".
#
#   tests/fuzz/ci.sh [--ci] [TARGET...]
#
# Without clang (or its libFuzzer and sanitizer runtimes, Debian's libclang-rt-14-dev) the run
# is skipped, except in CI mode (--ci, or CI set in the environment), where it fails. Builds go
# to build/fuzz-ci/<group>/, new inputs to build/fuzz-ci/<group>/corpus/, crashes to
# build/fuzz-ci/<group>/artifacts/.
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
. tests/lib/testlib.sh

ci=0
[ -n "${CI:-}" ] && ci=1
if [ "${1:-}" = --ci ]; then
	ci=1
	shift
fi
only=" $* "
SECS=${FUZZ_SECONDS:-30}
MIN_RUNS=100
CC=${FUZZ_CC:-clang}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"

# clang with the fuzzer and sanitizer runtimes: a one-line fuzzer must build
probe=$T_TMP/probe
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return d && n > 9999999; }\n' >"$probe.c"
if ! out=$($CC $SAN -fsanitize=fuzzer -o "$probe" "$probe.c" 2>&1); then
	why="'$CC -fsanitize=fuzzer,address,undefined' cannot build a fuzzer: $(head -c 300 <<<"${out:-$CC not found}") (install clang and libclang-rt-14-dev)"
	if [ $ci = 1 ]; then fail "clang with libFuzzer, ASan and UBSan" "$why"
	else skip "fuzzing" "$why"; fi
	t_summary
fi
. tests/fuzz/lib.sh

# fuzz_group NAME MAX_LEN "SOURCES" TARGET...: compiles the group's objects (PKGS and CFLAGS
# set by the caller), then builds and runs each target
fuzz_group() {
	local group=$1 max_len=$2 srcs=$3 t rate
	shift 3
	local -a targets=()
	for t in "$@"; do
		[ "$only" = "  " ] || [[ $only == *" $t "* ]] && targets+=("$t")
	done
	[ ${#targets[@]} -gt 0 ] || return 0
	B=$root/build/fuzz-ci/$group
	FUZZ_LOG=$B/build.log
	mkdir -p "$B"
	: >"$FUZZ_LOG"
	# shellcheck disable=SC2086
	if ! fuzz_objects $srcs; then
		for t in "${targets[@]}"; do
			fail "$t builds" "$fuzz_failed: $(grep -m 3 'error' "$FUZZ_LOG")"
		done
		return
	fi
	for t in "${targets[@]}"; do
		if ! fuzz_build "$t"; then
			fail "$t builds" "$(grep -m 3 'error' "$FUZZ_LOG")"
			continue
		fi
		echo "# $t: ${SECS} s"
		if fuzz_run "$t" "$max_len"; then
			rate=$(( ${FUZZ_RUNS:-0} / (SECS > 0 ? SECS : 1) ))
			if [ "${FUZZ_RUNS:-0}" -ge $MIN_RUNS ]; then
				ok "$t: ${FUZZ_RUNS} runs in ${SECS} s (${rate}/s), $FUZZ_COV, no crash"
			else
				fail "$t runs at least $MIN_RUNS inputs" "${FUZZ_RUNS:-no} runs (see $FUZZ_LOGFILE)"
			fi
		else
			fail "$t: no crash in ${SECS} s" "$(grep -m 4 -E 'ERROR|SUMMARY|runtime error|Test unit written' "$FUZZ_LOGFILE" | tr '\n' ' ') (log: $FUZZ_LOGFILE, inputs: $B/artifacts/)"
		fi
	done
}

PKGS="libcurl openssl libcjson libxml-2.0"
# shellcheck disable=SC2086
CFLAGS="-std=gnu17 -O1 -g -D_GNU_SOURCE -I$root $(pkg-config --cflags $PKGS) $SAN"
fuzz_group aws 16384 "$(echo common/base/*.c common/aws/*.c common/http/client.c common/metrics/*.c)" \
	aws_xml_reply aws_json_reply aws_ini

PKGS="libcurl openssl libcjson yaml-0.1"
# shellcheck disable=SC2086
CFLAGS="-std=gnu17 -O1 -g -D_GNU_SOURCE -I$root $(pkg-config --cflags $PKGS) $SAN -DAWSK8S_VERSION=\"fuzz\""
fuzz_group kube 8192 "$(echo common/base/*.c common/kube/*.c common/http/client.c common/metrics/*.c)" \
	kube_kubeconfig kube_watch_line

if [ "$only" = "  " ] || [[ $only == *" csi_decode_fuzz "* ]] || [[ $only == *" csi_tagtpl_fuzz "* ]]; then
	if make -s build/default/gen/common/csi/csi.pb-c.c build/default/gen/awsk8s_version.h >/dev/null; then
		PKGS="libcurl openssl libcjson yaml-0.1 libmicrohttpd libxml-2.0 grpc libprotobuf-c"
		# shellcheck disable=SC2086
		CFLAGS="-std=gnu17 -O1 -g -D_GNU_SOURCE -I$root -I$root/build/default/gen $(pkg-config --cflags $PKGS) $SAN"
		fuzz_group csi 4096 "$(echo common/base/*.c common/aws/*.c common/http/*.c common/metrics/*.c \
			common/grpc/*.c common/kube/*.c common/csi/*.c common/x509/*.c modules/csi-controller/*.c build/default/gen/common/csi/csi.pb-c.c)" \
			csi_decode_fuzz csi_tagtpl_fuzz
	else
		fail "csi_decode_fuzz builds" "make cannot generate build/default/gen/common/csi/csi.pb-c.c"
	fi
fi
t_summary
