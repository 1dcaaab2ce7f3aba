# Shared by tests/fuzz/run_*.sh (sourced). The caller sets B (its build folder), CC, CFLAGS and
# PKGS, and runs from the top of the repository.

# fuzz_objects SRC...: compiles each source for libFuzzer into $B/obj (again only when the source,
# or a header in its folder, is newer than its object) and lists the objects in the array objs.
# With FUZZ_LOG set, the compiler's messages are appended there and a failure returns 1 with the
# source in fuzz_failed; without it they go to stderr.
fuzz_objects() {
	local src obj
	objs=()
	mkdir -p "$B/obj"
	for src in "$@"; do
		obj=$B/obj/$(echo "$src" | tr / _).o
		if [ ! -e "$obj" ] || [ "$src" -nt "$obj" ] ||
			[ -n "$(find "${src%/*}" -name '*.h' -newer "$obj")" ]; then
			# shellcheck disable=SC2086
			if [ -z "${FUZZ_LOG:-}" ]; then
				$CC $CFLAGS -fsanitize=fuzzer-no-link -c -o "$obj" "$src"
			elif ! $CC $CFLAGS -fsanitize=fuzzer-no-link -c -o "$obj" "$src" 2>>"$FUZZ_LOG"; then
				fuzz_failed=$src
				return 1
			fi
		fi
		objs+=("$obj")
	done
}

# fuzz_build NAME: links $B/NAME from tests/fuzz/NAME.c and the objects (objs). With FUZZ_LOG
# set, the linker's messages are appended there; returns 1 when it fails.
fuzz_build() {
	local f=$1
	# shellcheck disable=SC2046,SC2086
	if [ -z "${FUZZ_LOG:-}" ]; then
		$CC $CFLAGS -fsanitize=fuzzer -o "$B/$f" "tests/fuzz/$f.c" "${objs[@]}" \
			$(pkg-config --libs $PKGS) -lpthread -lm
	else
		$CC $CFLAGS -fsanitize=fuzzer -o "$B/$f" "tests/fuzz/$f.c" "${objs[@]}" \
			$(pkg-config --libs $PKGS) -lpthread -lm 2>>"$FUZZ_LOG"
	fi
}

# fuzz_run NAME MAX_LEN: runs $B/NAME for $SECS seconds from tests/fuzz/corpus/NAME/ (and its
# NAME.dict when there is one); new inputs go to $B/corpus/NAME/, crashes to $B/artifacts/, the
# output to $B/NAME.log (FUZZ_LOGFILE). Sets FUZZ_RUNS (executions) and FUZZ_COV ("cov: N").
# Returns the fuzzer's status: not 0 on any crash, leak, timeout or sanitizer report.
fuzz_run() {
	local f=$1 max_len=$2 rc
	local -a dict=()
	mkdir -p "$B/artifacts" "$B/corpus/$f" "tests/fuzz/corpus/$f"
	[ -f "tests/fuzz/$f.dict" ] && dict=(-dict="tests/fuzz/$f.dict")
	FUZZ_LOGFILE=$B/$f.log
	"$B/$f" -max_total_time="$SECS" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$B/artifacts/$f-" "${dict[@]}" \
		"$B/corpus/$f" "tests/fuzz/corpus/$f" >"$FUZZ_LOGFILE" 2>&1
	rc=$?
	FUZZ_RUNS=$(sed -n 's/^stat::number_of_executed_units: *//p' "$FUZZ_LOGFILE")
	FUZZ_COV=$(grep -o 'cov: [0-9]*' "$FUZZ_LOGFILE" | tail -1)
	return $rc
}

# fuzz_run_all MAX_LEN FUZZER...: builds and runs each fuzzer (fuzz_build, fuzz_run). With
# FUZZ_MERGE=1 the new inputs are merged back into tests/fuzz/corpus/NAME/. Prints a line per
# fuzzer; returns 1 when any failed.
fuzz_run_all() {
	local max_len=$1 f status=0
	shift
	for f in "$@"; do
		fuzz_build "$f" || return 1
		echo "== $f for ${SECS}s"
		if fuzz_run "$f" "$max_len"; then
			echo "$f: ${FUZZ_RUNS:-?} runs, $FUZZ_COV, no crash"
			if [ "${FUZZ_MERGE:-0}" = 1 ]; then
				"$B/$f" -merge=1 "tests/fuzz/corpus/$f" "$B/corpus/$f" >"$B/$f.merge.log" 2>&1 || true
				echo "$f: corpus now $(ls "tests/fuzz/corpus/$f" | wc -l) inputs"
			fi
		else
			status=1
			echo "$f: FAILED (see $B/$f.log and $B/artifacts/)"
			grep -E "ERROR|SUMMARY|runtime error" "$B/$f.log" | head -5
		fi
	done
	return $status
}
