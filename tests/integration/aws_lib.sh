# shellcheck shell=bash
# Helpers shared by the tests/integration/aws_*.sh scripts (sourced, not run: not executable).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/testlib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/moto.sh"

# awsc ARGS...: the binary's aws subcommand, JSON on one line.
awsc() { "$AWS_K8S" aws --compact "$@"; }

# jcheck NAME FILE JQ_FILTER: passes when the jq filter gives true on the file.
jcheck() {
	local name=$1 file=$2 filter=$3 got
	if got=$(jq -e "$filter" "$file" 2>&1); then
		ok "$name"
	else
		fail "$name" "jq '$filter' gave ${got:-nothing} on $(head -c 300 "$file")"
	fi
}

# run_to NAME OUTFILE ARGS...: runs awsc, stdout to OUTFILE, stderr to OUTFILE.err; sets RC.
run_to() {
	local out=$1
	shift
	awsc "$@" >"$out" 2>"$out.err"
	RC=$?
}

# proxy_calls KEY: how many calls the fault proxy counted for service:action KEY.
proxy_calls() {
	tb_json "$FAULTPROXY_URL/_control/calls?log=0" | jq -r --arg k "$1" '.calls[$k].total // 0'
}

# metric_value FILE NAME_WITH_LABELS: the value of one series in --print-metrics output.
metric_value() {
	awk -v k="$2" '$1 == k { print $2; found = 1 } END { if (!found) print 0 }' "$1"
}
