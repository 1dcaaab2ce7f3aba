#!/usr/bin/env bash
# Copy-paste detector: jscpd from npm (pinned by tests/check/package-lock.json; install it with
# `npm ci --prefix tests/check`, nothing is fetched here) over common/ and modules/, with the
# settings and the number of clones allowed in tests/check/cpd.json. Prints every clone; fails
# when there are more than maxClones.
set -uo pipefail
cd "$(dirname "$0")/../.."
jscpd=tests/check/node_modules/.bin/jscpd
if [ ! -x "$jscpd" ]; then
	echo "cpd: jscpd is not installed: run 'npm ci --prefix tests/check'"
	exit 1
fi
out=build/check/cpd
rm -rf "$out" && mkdir -p "$out"
"$jscpd" --config tests/check/cpd.json --reporters json,console --output "$out" common modules 2>&1 |
	sed 's/\x1b\[[0-9;]*m//g' >"$out/console.txt"
if [ ! -s "$out/jscpd-report.json" ]; then
	cat "$out/console.txt"
	echo "cpd: jscpd failed"
	exit 1
fi
grep -E '^( - |   )[a-z]' "$out/console.txt" | sed 's/^ - /clone: /; s/^   /   and: /'
node -e '
	const cfg = require(process.argv[1]), rep = require(process.argv[2]);
	const n = rep.statistics.total.clones, max = cfg.maxClones;
	console.log(`cpd: ${n} clones of ${cfg.minLines}+ lines and ${cfg.minTokens}+ tokens ` +
		    `(at most ${max} allowed, tests/check/cpd.json)`);
	process.exit(n > max ? 1 : 0);
' "$PWD/tests/check/cpd.json" "$PWD/$out/jscpd-report.json"
