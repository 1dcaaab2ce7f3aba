#!/usr/bin/env bash
# tests: product
# The credential chain through `aws-k8s aws` against moto (behind the fault proxy, which
# counts the STS calls): environment keys, web identity (AssumeRoleWithWebIdentity, the token
# file re-read at refresh), a profile with role_arn + source_profile (AssumeRole), --role-arn
# on top of the chain, container credentials with a rotating token file, and instance-profile
# credentials from the metadata fake with a short lifetime. No secret may reach the logs.
. "$(dirname "$0")/aws_lib.sh"

moto_start || { fail "moto starts"; t_summary; }
faultproxy_start "$MOTO_URL" || { fail "fault proxy starts"; t_summary; }
export AWS_ENDPOINT_URL=$FAULTPROXY_URL
T=$T_TMP
reset_proxy() { tb_post "$FAULTPROXY_URL/_control/reset" '{}' >/dev/null; }
no_env_keys() { env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN "$@"; }
SECRETS=()
no_secret_in() { # NAME FILE: none of the SECRETS appears in FILE
	local s
	for s in "${SECRETS[@]}"; do
		if grep -qF -- "$s" "$2"; then fail "$1" "found '${s:0:12}...' in $2"; return; fi
	done
	ok "$1"
}

# --- 1. environment keys ---
export AWS_ACCESS_KEY_ID=AKIDENVTEST0001 AWS_SECRET_ACCESS_KEY=env-secret-value-1234567890
SECRETS+=("$AWS_SECRET_ACCESS_KEY")
run_to "$T/gci.json" --v=10 sts GetCallerIdentity
jcheck "STS GetCallerIdentity with environment keys" "$T/gci.json" '.Account == "123456789012" and (.Arn | endswith(":user/moto"))'
no_secret_in "environment secret key not in --v=10 logs" "$T/gci.json.err"
run_to "$T/c1.json" creds
jcheck "creds: source is the environment" "$T/c1.json" '.source == "environment" and .sessionToken == false'

# --- 2. web identity ---
printf 'eyJhbGciOiJSUzI1NiJ9.web-identity-token-secret.sig' >"$T/token"
SECRETS+=("web-identity-token-secret")
wi() { no_env_keys AWS_ROLE_ARN=arn:aws:iam::123456789012:role/irsa AWS_WEB_IDENTITY_TOKEN_FILE="$T/token" \
	AWS_ROLE_SESSION_NAME=irsa-sess "$AWS_K8S" aws --compact "$@"; }
reset_proxy
wi --v=10 --repeat=3 --interval=100ms sts GetCallerIdentity >"$T/wi.json" 2>"$T/wi.err"
jcheck "web identity: GetCallerIdentity shows the assumed role" "$T/wi.json" \
	'.Arn == "arn:aws:sts::123456789012:assumed-role/irsa/irsa-sess"'
[ "$(proxy_calls sts:AssumeRoleWithWebIdentity)" = 1 ] && ok "web identity: one AssumeRoleWithWebIdentity for three calls" \
	|| fail "web identity: one AssumeRoleWithWebIdentity for three calls" "$(proxy_calls sts:AssumeRoleWithWebIdentity)"
[ "$(proxy_calls sts:GetCallerIdentity)" = 3 ] && ok "web identity: the three calls were made" || fail "web identity: the three calls were made"
no_secret_in "web identity token and temporary keys not in --v=10 logs" "$T/wi.err"
wi creds >"$T/wic.json" 2>&1
jcheck "creds: source web-identity, with a session token and an expiration" "$T/wic.json" \
	'.source == "web-identity" and .sessionToken == true and (.expiration | test("^20[0-9][0-9]-"))'

# ExpiredToken on the second call: the provider fetches again, reading the token file again
reset_proxy
tb_post "$FAULTPROXY_URL/_control/faults" '{"service":"sts","action":"GetCallerIdentity","effect":"error","status":400,"code":"ExpiredToken","message":"The security token included in the request is expired","skip":1,"count":1}' >/dev/null
wi --repeat=2 --interval=100ms sts GetCallerIdentity >"$T/ex.json" 2>"$T/ex.err"
rc=$?
[ $rc -eq 0 ] && [ "$(proxy_calls sts:AssumeRoleWithWebIdentity)" = 2 ] && ok "ExpiredToken makes the provider assume the role again, and the call succeeds" \
	|| fail "ExpiredToken makes the provider assume the role again, and the call succeeds" "rc=$rc $(proxy_calls sts:AssumeRoleWithWebIdentity) $(cat "$T/ex.err")"
reset_proxy
tb_post "$FAULTPROXY_URL/_control/faults" '{"service":"sts","action":"GetCallerIdentity","effect":"error","status":400,"code":"ExpiredToken","skip":1,"count":1}' >/dev/null
( sleep 1; rm -f "$T/token" ) &
side=$!
wi --v=3 --repeat=2 --interval=2s sts GetCallerIdentity >"$T/ex2.json" 2>"$T/ex2.err"
rc=$?
wait $side
if [ $rc -eq 1 ] && grep -q "cannot read the web identity token file" "$T/ex2.err"; then
	ok "the token file is read again at refresh (its removal shows)"
else
	fail "the token file is read again at refresh (its removal shows)" "rc=$rc $(tail -n 3 "$T/ex2.err")"
fi
printf 'eyJhbGciOiJSUzI1NiJ9.web-identity-token-secret.sig' >"$T/token"

# --- 3. profile with role_arn + source_profile ---
cat >"$AWS_SHARED_CREDENTIALS_FILE" <<EOT
[base]
aws_access_key_id = AKIDBASEPROFILE01
aws_secret_access_key = base-profile-secret-0987654321
EOT
SECRETS+=("base-profile-secret-0987654321")
cat >"$AWS_CONFIG_FILE" <<EOT
[profile dev]
role_arn = arn:aws:iam::123456789012:role/dev
source_profile = base
role_session_name = dev-sess
region = us-east-1
EOT
reset_proxy
no_env_keys "$AWS_K8S" aws --compact --profile dev --v=10 sts GetCallerIdentity >"$T/pr.json" 2>"$T/pr.err"
jcheck "profile role_arn + source_profile: AssumeRole, then the assumed role" "$T/pr.json" \
	'.Arn == "arn:aws:sts::123456789012:assumed-role/dev/dev-sess"'
[ "$(proxy_calls sts:AssumeRole)" = 1 ] && ok "profile role: exactly one AssumeRole" || fail "profile role: exactly one AssumeRole" "$(proxy_calls sts:AssumeRole)"
no_secret_in "profile secret not in --v=10 logs" "$T/pr.err"
no_env_keys AWS_PROFILE=nosuch "$AWS_K8S" aws sts GetCallerIdentity >"$T/np.json" 2>"$T/np.err"
[ $? -eq 1 ] && grep -q "no usable AWS credentials" "$T/np.err" && ok "a named profile that does not exist is an error" \
	|| fail "a named profile that does not exist is an error" "$(cat "$T/np.err")"

# --- 4. --role-arn on top of the chain ---
run_to "$T/ra.json" --role-arn arn:aws:iam::123456789012:role/ccm sts GetCallerIdentity
jcheck "--role-arn assumes a role on top of the environment keys" "$T/ra.json" \
	'.Arn | startswith("arn:aws:sts::123456789012:assumed-role/ccm/aws-k8s-")'

# --- 5. container credentials (EKS Pod Identity style) ---
cport=$(free_port)
cat >"$T/container.py" <<'EOT'
import http.server, json, sys, time, datetime
port, log = int(sys.argv[1]), sys.argv[2]
n = [0]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        n[0] += 1
        with open(log, "a") as f:
            f.write("%s %s\n" % (self.path, self.headers.get("Authorization")))
        exp = datetime.datetime.utcnow() + datetime.timedelta(seconds=4)
        body = json.dumps({"AccessKeyId": "ASIACONTAINER%04d" % n[0],
                           "SecretAccessKey": "container-secret-%d-abcdefgh" % n[0],
                           "Token": "container-session-token-%d" % n[0],
                           "Expiration": exp.strftime("%Y-%m-%dT%H:%M:%SZ")}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
EOT
bg container python3 "$T/container.py" "$cport" "$T/container.log"
wait_http "http://127.0.0.1:$cport/" || fail "container credentials server starts"
: >"$T/container.log"
printf 'pod-identity-token-A' >"$T/ctoken"
SECRETS+=("container-secret-1-abcdefgh" "container-session-token-1" "pod-identity-token-A")
( sleep 1.2; printf 'pod-identity-token-B' >"$T/ctoken" ) &
side=$!
no_env_keys AWS_CONTAINER_CREDENTIALS_FULL_URI="http://127.0.0.1:$cport/v1/credentials" \
	AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE="$T/ctoken" \
	"$AWS_K8S" aws --compact --v=10 --repeat=4 --interval=1s sts GetCallerIdentity >"$T/ct.json" 2>"$T/ct.err"
rc=$?
wait $side
[ $rc -eq 0 ] && ok "container credentials: the calls succeed" || fail "container credentials: the calls succeed" "$(tail -n 3 "$T/ct.err")"
grep -q "^/v1/credentials pod-identity-token-A$" "$T/container.log" && ok "container credentials: the token file's content is the Authorization header" \
	|| fail "container credentials: the token file's content is the Authorization header" "$(cat "$T/container.log")"
grep -q "pod-identity-token-B$" "$T/container.log" && ok "container credentials: refreshed before expiry, the token file read again" \
	|| fail "container credentials: refreshed before expiry, the token file read again" "$(cat "$T/container.log")"
no_secret_in "container keys and token not in --v=10 logs" "$T/ct.err"
no_env_keys AWS_CONTAINER_CREDENTIALS_FULL_URI="http://192.0.2.1/creds" "$AWS_K8S" aws sts GetCallerIdentity >/dev/null 2>"$T/cbad.err"
[ $? -eq 1 ] && ok "container credentials: a plain-http URL off the allowed hosts is refused" \
	|| fail "container credentials: a plain-http URL off the allowed hosts is refused" "$(cat "$T/cbad.err")"

# --- 6. instance profile from the metadata fake, with short-lived keys ---
printf '{"instance": {"iam": {"role": "node-role", "credentials_ttl": 4}}}' >"$T/imds.json"
imds_start --require-token --config "$T/imds.json" || fail "metadata fake starts"
no_env_keys AWS_EC2_METADATA_DISABLED=false AWS_EC2_METADATA_SERVICE_ENDPOINT="$IMDS_URL" \
	"$AWS_K8S" aws --compact --v=10 --repeat=5 --interval=1s sts GetCallerIdentity >"$T/ip.json" 2>"$T/ip.err"
rc=$?
[ $rc -eq 0 ] && ok "instance profile: the calls succeed" || fail "instance profile: the calls succeed" "$(tail -n 3 "$T/ip.err")"
fetches=$(tb_json "$IMDS_URL/_control/requests" | jq '.by_path["/latest/meta-data/iam/security-credentials/node-role"] // 0')
[ "$fetches" -ge 2 ] && [ "$fetches" -le 4 ] && ok "instance profile: 4 s keys refreshed at half-life over 4 s ($fetches fetches)" \
	|| fail "instance profile: 4 s keys refreshed at half-life over 4 s" "$fetches fetches"
tok=$(tb_json "$IMDS_URL/_control/credentials" | jq -r '.SecretAccessKey // .secret_access_key // empty')
[ -n "$tok" ] && SECRETS+=("$tok")
no_secret_in "instance profile keys not in --v=10 logs" "$T/ip.err"
no_env_keys AWS_EC2_METADATA_DISABLED=false AWS_EC2_METADATA_SERVICE_ENDPOINT="$IMDS_URL" \
	"$AWS_K8S" aws --compact creds >"$T/ipc.json" 2>&1
jcheck "creds: source instance-profile" "$T/ipc.json" '.source == "instance-profile" and .sessionToken == true'

t_summary
