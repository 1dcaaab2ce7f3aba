#!/usr/bin/env bash
# tests: peers
# sanitizer-pass: skip (tests the Python fakes only; aws-k8s is not run)
# Unit tests of the fake kube-apiserver's selectors, patches and protobuf decoding.
. "$(dirname "$0")/../lib/testlib.sh"

while IFS= read -r line; do
	case $line in
	PASS\ *) ok "kube-apiserver ${line#PASS }" ;;
	FAIL\ *) fail "kube-apiserver ${line#FAIL }" ;;
	*) [ -n "$line" ] && fail "kube-apiserver unit tests" "$line" ;;
	esac
done < <(python3 "$T_ROOT/tests/kube-apiserver/test_kas.py" 2>&1)
[ $((T_PASS + T_FAIL)) -gt 0 ] || fail "kube-apiserver unit tests" "no test ran"
t_summary
