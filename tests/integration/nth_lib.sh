# shellcheck shell=bash
# Sourced by tests/integration/nth_*.sh (not executable, so tests/run does not run it).
# nth_imds_fakes NODES...: one metadata fake per Node (IMDSv2 required: the test of token use),
# started together; U[NODE] is its URL (U must be declared -A by the caller). A fake that does
# not answer within 30 s is a peer failure that ends the script.
nth_imds_fakes() {
	local n port
	for n in "$@"; do
		port=$(free_port)
		bg "imds-$n" "$T_ROOT/tests/imds-fake/run" --port "$port" --require-token
		U[$n]=http://127.0.0.1:$port
	done
	for n in "$@"; do
		wait_http "${U[$n]}/_control/health" 30 ||
			{ peer fail "the metadata fake for $n starts" "$(tail -3 "$T/imds-$n.log")"; t_summary; }
	done
	peer ok "$# metadata fakes (IMDSv2 required)"
}
