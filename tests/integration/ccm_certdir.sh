#!/usr/bin/env bash
# tests: product
# aws-k8s ccm --cert-dir: the self-signed pair is written safely. A key path that is a
# symbolic link is refused (the ccm exits with a clear error, the link's target is untouched);
# an old 0644 key file is replaced by a 0600 one; a 0755 folder is tightened to 0700; a missing
# folder is made 0700; a --cert-dir that is itself a link is refused; a pair already there is
# read and served, not rewritten.
. "$(dirname "$0")/../lib/testlib.sh"
. "$(dirname "$0")/../lib/moto.sh"
. "$(dirname "$0")/ccm_lib.sh"

if ! ccm_env_start; then
	fail "test environment starts"
	t_summary
fi
KEY=cloud-controller-manager.key
CRT=cloud-controller-manager.crt
mode() { stat -c %a "$1"; }

# run_fail DIR: runs the ccm with --cert-dir=DIR, expecting it to exit by itself; sets LAST_RC
# and LAST_LOG
run_fail() {
	local port log=$T_TMP/fail.log
	port=$(free_port)
	timeout 30 "$AWS_K8S" ccm --cloud-provider=aws --cloud-config="$CCM_CONFIG" \
		--kubeconfig="$KC" --bind-address=127.0.0.1 --secure-port="$port" \
		--leader-elect=false --cert-dir="$1" >"$log" 2>&1
	LAST_RC=$?
	LAST_LOG=$(cat "$log")
	# the sanitizer build also exits 1 on a report
	grep -q "Sanitizer\|runtime error" "$log" && LAST_RC=sanitizer
}

# ---- the key path is a symbolic link to another file ----
D=$T_TMP/certs-link
mkdir -p "$D"
chmod 0755 "$D"
printf 'precious\n' >"$T_TMP/victim"
chmod 0644 "$T_TMP/victim"
ln -s "$T_TMP/victim" "$D/$KEY"
run_fail "$D"
if [ "$LAST_RC" = 1 ] && grep -q "refusing to write the private key to '$D/$KEY': it is a symbolic link" <<<"$LAST_LOG"; then
	ok "a key path that is a symbolic link: the ccm exits 1 with a clear error"
else fail "a symbolic link at the key path is refused" "rc=$LAST_RC $(tail -3 <<<"$LAST_LOG")"; fi
if [ "$(cat "$T_TMP/victim")" = precious ] && [ "$(mode "$T_TMP/victim")" = 644 ] && [ -L "$D/$KEY" ]; then
	ok "the link's target is untouched (content and mode), the link stays"
else fail "the link's target is untouched" "$(mode "$T_TMP/victim") $(head -c 60 "$T_TMP/victim")"; fi
if ! ls -A "$D" | grep -q '\.tmp$' && [ ! -e "$D/$CRT" ]; then ok "no temporary file and no certificate are left behind"
else fail "nothing left behind" "$(ls -A "$D")"; fi
if ! grep -q precious <<<"$LAST_LOG"; then ok "the log holds no file content"; else fail "the log holds no file content"; fi

# ---- an old 0644 key in a 0755 folder ----
D=$T_TMP/certs-old
mkdir -p "$D"
chmod 0755 "$D"
printf 'old key\n' >"$D/$KEY"
chmod 0644 "$D/$KEY"
if ccm_start old --cert-dir="$D" --leader-elect=false; then ok "the ccm starts with an old 0644 key in --cert-dir"
else fail "the ccm starts with an old key" "$(tail -3 "$T_TMP/old.log")"; fi
if [ "$(mode "$D/$KEY")" = 600 ] && grep -q "PRIVATE KEY" "$D/$KEY"; then ok "the new private key is 0600 (was 0644)"
else fail "the key is 0600" "$(mode "$D/$KEY") $(head -1 "$D/$KEY")"; fi
if [ "$(mode "$D/$CRT")" = 644 ] && grep -q "BEGIN CERTIFICATE" "$D/$CRT"; then ok "the certificate is 0644"
else fail "the certificate is 0644" "$(mode "$D/$CRT")"; fi
if [ "$(mode "$D")" = 700 ]; then ok "the 0755 folder is tightened to 0700"; else fail "the folder is 0700" "$(mode "$D")"; fi
if ! ls -A "$D" | grep -q '\.tmp$'; then ok "no temporary file is left"; else fail "no temporary file" "$(ls -A "$D")"; fi
served=$(openssl s_client -connect "127.0.0.1:$CCM_PORT_old" </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256 2>/dev/null)
written=$(openssl x509 -in "$D/$CRT" -noout -fingerprint -sha256 2>/dev/null)
if [ -n "$served" ] && [ "$served" = "$written" ]; then ok "the served certificate is the one written"
else fail "the served certificate is the one written" "served '$served' written '$written'"; fi
ccm_stop_check old

# ---- the pair is there now: read and served, not rewritten ----
before=$(stat -c '%i %Y' "$D/$KEY" "$D/$CRT")
sleep 1
if ccm_start again --cert-dir="$D" --leader-elect=false; then
	served=$(openssl s_client -connect "127.0.0.1:$CCM_PORT_again" </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256 2>/dev/null)
	if [ "$served" = "$written" ] && [ "$(stat -c '%i %Y' "$D/$KEY" "$D/$CRT")" = "$before" ]; then
		ok "an existing pair is served as it is, not rewritten"
	else fail "an existing pair is reused" "served '$served'"; fi
	ccm_stop_check again
else fail "the ccm starts with an existing pair" "$(tail -3 "$T_TMP/again.log")"; fi

# ---- a missing folder (and parent) is made 0700 ----
D=$T_TMP/new/certs
if ccm_start new --cert-dir="$D" --leader-elect=false && [ "$(mode "$D")" = 700 ] &&
	[ "$(mode "$D/$KEY")" = 600 ]; then
	ok "a missing --cert-dir is made 0700, the key 0600"
else fail "a missing --cert-dir is made 0700" "$(mode "$D" 2>&1) $(tail -3 "$T_TMP/new.log")"; fi
kill "$(cat "$T_TMP/new.pid")" 2>/dev/null

# ---- --cert-dir itself a symbolic link ----
mkdir -p "$T_TMP/real"
chmod 0755 "$T_TMP/real"
ln -s "$T_TMP/real" "$T_TMP/dirlink"
run_fail "$T_TMP/dirlink"
if [ "$LAST_RC" = 1 ] && grep -q "cert-dir '$T_TMP/dirlink' is a symbolic link" <<<"$LAST_LOG" &&
	[ "$(mode "$T_TMP/real")" = 755 ] && [ -z "$(ls -A "$T_TMP/real")" ]; then
	ok "a --cert-dir that is a symbolic link is refused; its target is neither chmod'ed nor written"
else fail "a --cert-dir link is refused" "rc=$LAST_RC $(mode "$T_TMP/real") $(tail -3 <<<"$LAST_LOG")"; fi
t_summary
