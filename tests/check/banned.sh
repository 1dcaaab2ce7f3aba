#!/usr/bin/env bash
# Banned functions (curl's list, see the style guide) in the code outside tests/: common/,
# modules/ and main.c. Comments and string literals are not searched. Each use is printed as
# file:line with what to use instead; the check fails when there is one.
set -uo pipefail
cd "$(dirname "$0")/../.."
find common modules main.c -name '*.[ch]' -print0 | sort -z | xargs -0 perl -e '
	my %instead = (
		sprintf => "snprintf or buf_printf", vsprintf => "vsnprintf or buf_vprintf",
		strcpy => "str_copy", strcat => "buf_puts or snprintf",
		strtok => "strtok_r or strsep", atoi => "str_to_ll", atol => "str_to_ll",
		gets => "fgets", system => "an argv exec (csi_exec)", popen => "an argv exec (csi_exec)",
	);
	my $names = join "|", sort keys %instead;
	my $n = 0;
	for my $f (@ARGV) {
		open(my $fh, "<", $f) or die "$f: $!\n";
		local $/;
		my $s = <$fh>;
		# comments and literals become their newlines only, so line numbers stay right
		$s =~ s{(/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\x27(?:\\.|[^\x27\\\n])*\x27)}
		       {(my $k = $1) =~ s/[^\n]//g; $k}gse;
		my $line = 0;
		for (split /\n/, $s, -1) {
			$line++;
			while (/(?<![\w.>])($names)\s*\(/g) {
				print "$f:$line: $1() is banned: use $instead{$1}\n";
				$n++;
			}
		}
	}
	print "banned functions: $n use(s) in ", scalar(@ARGV), " files\n";
	exit($n ? 1 : 0);
'
[ "${PIPESTATUS[2]}" = 0 ] || exit 1
