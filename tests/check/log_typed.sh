#!/usr/bin/env bash
# Compile-must-fail test of the typed log API (common/base/log.h): tests/check/log_typed.c with
# CASE=0 must compile with the project's warnings and -Werror (the positive control); every
# other CASE is a mistake (a bare string or a number where a KV_* item belongs, too many items)
# that the compiler must reject, even without -Werror, with the diagnostic expected for it.
# Runs with cc and, when installed, clang.
set -uo pipefail
cd "$(dirname "$0")/../.."
src=tests/check/log_typed.c
warn="-std=gnu17 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
	-Wwrite-strings -Wvla -Wno-unused-parameter -Wno-missing-field-initializers"
# CASE -> a pattern the compiler's diagnostic must match (so that a case fails for its reason)
expect=(
	[1]='generic'
	[2]='generic'
	[3]='generic'
	[4]='generic'
	[5]='generic'
	[6]='generic'
	[7]='int-conversion|integer without a cast|incompatible integer to pointer'
	[8]='more than LOG_MAX_ITEMS items'
)
pass=0 failed=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
bad() { failed=$((failed + 1)); echo "FAIL - $*"; }

compilers=("${CC:-cc}")
command -v clang >/dev/null && [ "${CC:-cc}" != clang ] && compilers+=(clang)
for c in "${compilers[@]}"; do
	# shellcheck disable=SC2086
	if out=$($c $warn -Werror -D_GNU_SOURCE -I. -DCASE=0 -fsyntax-only $src 2>&1); then
		ok "$c: the positive control compiles with -Werror"
	else
		bad "$c: the positive control does not compile:"$'\n'"$out"
	fi
	for n in "${!expect[@]}"; do
		# Without -Werror: the mistake must be a hard error (case 7, a wrong value type for
		# KV_S, is a warning that -Werror makes an error, as in the project's build).
		w=""
		[ "$n" = 7 ] && w=-Werror
		# shellcheck disable=SC2086
		if out=$($c $warn $w -D_GNU_SOURCE -I. -DCASE=$n -fsyntax-only $src 2>&1); then
			bad "$c: case $n compiled: $(grep -m1 "CASE == $n " $src)"
		elif grep -Eqi -- "${expect[$n]}" <<<"$out"; then
			ok "$c: case $n rejected ($(grep -m1 -o "CASE == $n .*" $src | sed 's|.*/\* ||; s| \*/||'))"
		else
			bad "$c: case $n rejected, but not with /${expect[$n]}/:"$'\n'"$out"
		fi
	done
done
echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
