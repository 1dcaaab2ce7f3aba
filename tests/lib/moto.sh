# shellcheck shell=bash
# The AWS-side test bed: moto, the instance metadata fake and the fault proxy.
#
# Source it after testlib.sh:
#     . "$(dirname "$0")/../lib/testlib.sh"
#     . "$(dirname "$0")/../lib/moto.sh"
#
# moto_start [moto_server args...]
#     Starts `moto_server -H 127.0.0.1 -p PORT` on a free port, waits until it answers and
#     exports MOTO_URL, MOTO_PORT, MOTO_PID, AWS_ENDPOINT_URL=$MOTO_URL, AWS_REGION
#     (us-east-1), AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (testing), and
#     AWS_EC2_METADATA_DISABLED=true. Region, keys and AWS_EC2_METADATA_DISABLED keep the
#     value a test exported before the call. AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE
#     point into $T_TMP (empty) so ~/.aws never leaks in; AWS_PROFILE is unset. The server
#     is killed by pid at exit (or with moto_stop). Log: $T_TMP/moto-PORT.log.
# moto_reset
#     POST /moto-api/reset: wipes all state (default VPC and subnets come back).
# moto_py 'python code' [args...]
#     Runs python3 with boto3 clients pointed at $MOTO_URL (or $MOTO_PY_ENDPOINT when set,
#     e.g. the fault proxy). Predefined: os, sys, json, time, boto3, client(name, region=None,
#     endpoint=None, retries=None, config=None), lazy clients ec2, elb, elbv2, sqs, events, autoscaling,
#     sts, iam, and run_instance(**kw) -> instance id (ami-12345678, t3.micro, one instance,
#     TagSpecifications from tags={...}). Example:
#         iid=$(moto_py 'print(run_instance(InstanceType="m5.large", tags={"Name": "n1"}))')
# moto_py_checks 'python code' [args...]
#     Same preamble plus ok(name), fail(name, detail), eq(name, got, want) and
#     true_(name, cond, detail): each becomes a testlib ok/fail line in the shell. An
#     exception in the code counts as one failure with the traceback tail. Extra args are
#     sys.argv[1:] in both moto_py and moto_py_checks.
# imds_start [imds-fake args...]
#     Starts tests/imds-fake/run --port PORT ARGS on a free port; exports IMDS_URL, IMDS_PORT,
#     IMDS_PID, IMDS_LOG. E.g. imds_start --require-token --from-moto "$MOTO_URL"
#     --instance-id "$iid". It does not point AWS_EC2_METADATA_SERVICE_ENDPOINT at it: a test
#     that wants an SDK or the binary to use it sets that (and AWS_EC2_METADATA_DISABLED=false).
# faultproxy_start UPSTREAM_URL [fault-proxy args...]
#     Starts tests/fault-proxy/run --port PORT --upstream URL; exports FAULTPROXY_URL,
#     FAULTPROXY_PORT, FAULTPROXY_PID, FAULTPROXY_LOG. Point a client at it with
#     AWS_ENDPOINT_URL=$FAULTPROXY_URL.
# moto_stop / imds_stop / faultproxy_stop
#     Stop the last started instance now (SIGTERM, then SIGKILL after 2 s).
# tb_json URL [curl args...]
#     curl -sf the URL and print the body (handy for the /_control/ endpoints).
# tb_post URL JSON / tb_delete URL
#     POST a JSON body / DELETE; print the answer (also the error body); non-zero exit on
#     a non-2xx answer.
#
# Several instances: copy IMDS_URL (or FAULTPROXY_URL) after each *_start call.

TB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# _tb_kill PID: SIGTERM, wait up to 2 s, then SIGKILL. Only ever the pid we started.
_tb_kill() {
	local pid=$1 i
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 40; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null
	# reap it when it is our child (a zombie still answers kill -0), else give it 2 s
	wait "$pid" 2>/dev/null
	for ((i = 0; i < 40; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.05
	done
	return 0
}

# _tb_start NAME PROBE_PATH CMD... : CMD contains the literal word @PORT, replaced by a free
# port. Retries with another port if the process dies (port taken). Sets _TB_PORT/_TB_PID.
_tb_start() {
	local name=$1 probe=$2 attempt port pid i log
	shift 2
	for attempt in 1 2 3; do
		port=$(free_port)
		local cmd=() a
		for a in "$@"; do cmd+=("${a//@PORT/$port}"); done
		log="$T_TMP/$name-$port.log"
		"${cmd[@]}" >"$log" 2>&1 &
		pid=$!
		for ((i = 0; i < 600; i++)); do
			if ! kill -0 "$pid" 2>/dev/null; then break; fi
			if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port$probe"; then
				t_cleanup_add "_tb_kill $pid"
				_TB_PORT=$port _TB_PID=$pid _TB_LOG=$log
				return 0
			fi
			sleep 0.05
		done
		_tb_kill "$pid"
		echo "$name did not start on port $port (attempt $attempt):" >&2
		tail -n 5 "$log" >&2
	done
	return 1
}

moto_start() {
	_tb_start moto /moto-api/ moto_server -H 127.0.0.1 -p @PORT "$@" || return 1
	export MOTO_PORT=$_TB_PORT MOTO_PID=$_TB_PID MOTO_LOG=$_TB_LOG
	export MOTO_URL=http://127.0.0.1:$MOTO_PORT
	export AWS_ENDPOINT_URL=$MOTO_URL
	export AWS_REGION=${AWS_REGION:-us-east-1}
	export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-$AWS_REGION}
	export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-testing}
	export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-testing}
	export AWS_EC2_METADATA_DISABLED=${AWS_EC2_METADATA_DISABLED:-true}
	export AWS_CONFIG_FILE=${AWS_CONFIG_FILE:-$T_TMP/aws-config}
	export AWS_SHARED_CREDENTIALS_FILE=${AWS_SHARED_CREDENTIALS_FILE:-$T_TMP/aws-credentials}
	unset AWS_PROFILE AWS_DEFAULT_PROFILE
}

moto_stop() { _tb_kill "${MOTO_PID:-}"; }

moto_reset() {
	curl -sf -o /dev/null --max-time 10 -X POST "$MOTO_URL/moto-api/reset"
}

_TB_PY_PRE='
import os, sys, json, time
import boto3
from botocore.config import Config as _Config
_EP = os.environ.get("MOTO_PY_ENDPOINT") or os.environ["MOTO_URL"]
def client(name, region=None, endpoint=None, retries=None, **kw):
    cfg = kw.pop("config", None)
    if retries is not None:
        cfg = (cfg or _Config()).merge(_Config(retries=retries))
    return boto3.client(name, endpoint_url=endpoint or _EP,
                        region_name=region or os.environ.get("AWS_REGION", "us-east-1"),
                        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
                        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
                        config=cfg, **kw)
class _Lazy:
    def __init__(self, name): self._name, self._c = name, None
    def __getattr__(self, a):
        if self._c is None: self._c = client(self._name)
        return getattr(self._c, a)
ec2, elb, elbv2, sqs, events, autoscaling, sts, iam = (_Lazy(n) for n in
    ("ec2", "elb", "elbv2", "sqs", "events", "autoscaling", "sts", "iam"))
def run_instance(ImageId="ami-12345678", InstanceType="t3.micro", tags=None, **kw):
    if tags:
        kw.setdefault("TagSpecifications", []).append(
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]})
    r = ec2.run_instances(ImageId=ImageId, InstanceType=InstanceType, MinCount=1, MaxCount=1, **kw)
    return r["Instances"][0]["InstanceId"]
'

moto_py() {
	local code=$1
	shift
	python3 -c "$_TB_PY_PRE
$code" "$@"
}

_TB_PY_CHECKS='
import traceback as _tb
def _emit(tag, name, detail=""):
    detail = " ".join(str(detail).split())[:400]
    sys.__stdout__.write("@@%s\t%s\t%s\n" % (tag, name, detail)); sys.__stdout__.flush()
def ok(name): _emit("ok", name)
def fail(name, detail=""): _emit("fail", name, detail)
def eq(name, got, want):
    if got == want: ok(name)
    else: fail(name, "got %r, want %r" % (got, want))
def true_(name, cond, detail=""):
    if cond: ok(name)
    else: fail(name, detail)
'

moto_py_checks() {
	local code=$1 tag name detail rc
	shift
	local f="$T_TMP/pychecks.$$.$RANDOM"
	printf '%s\n' "$code" >"$f.py"
	python3 -c "$_TB_PY_PRE$_TB_PY_CHECKS
_f = sys.argv.pop(1)
try:
    exec(compile(open(_f).read(), 'checks', 'exec'))
except BaseException as _e:
    _emit('fail', 'python checks raised', ''.join(_tb.format_exception(_e))[-400:])
" "$f.py" "$@" >"$f.out" 2>"$f.err"
	rc=$?
	while IFS=$'\t' read -r tag name detail; do
		case $tag in
		@@ok) ok "$name" ;;
		@@fail) fail "$name" "$detail" ;;
		*) printf '%s\n' "$tag${name:+	$name}${detail:+	$detail}" ;;
		esac
	done <"$f.out"
	if [ $rc -ne 0 ]; then
		fail "python checks exited $rc" "$(tail -n 3 "$f.err")"
	fi
	rm -f "$f.py" "$f.out" "$f.err"
	return 0
}

imds_start() {
	_tb_start imds /_control/health "$TB_DIR/imds-fake/run" --port @PORT "$@" || return 1
	export IMDS_PORT=$_TB_PORT IMDS_PID=$_TB_PID IMDS_LOG=$_TB_LOG
	export IMDS_URL=http://127.0.0.1:$IMDS_PORT
}

imds_stop() { _tb_kill "${IMDS_PID:-}"; }

faultproxy_start() {
	local up=$1
	shift
	_tb_start faultproxy /_control/health "$TB_DIR/fault-proxy/run" --port @PORT --upstream "$up" "$@" || return 1
	export FAULTPROXY_PORT=$_TB_PORT FAULTPROXY_PID=$_TB_PID FAULTPROXY_LOG=$_TB_LOG
	export FAULTPROXY_URL=http://127.0.0.1:$FAULTPROXY_PORT
}

faultproxy_stop() { _tb_kill "${FAULTPROXY_PID:-}"; }
# fault RULE-JSON: adds a rule to the fault proxy; clear_faults: removes them all
fault() { tb_post "$FAULTPROXY_URL/_control/faults" "$1" >/dev/null; }
clear_faults() { tb_delete "$FAULTPROXY_URL/_control/faults" >/dev/null; }

tb_json() {
	local url=$1
	shift
	curl -sf --max-time 10 "$@" "$url"
}

tb_post() {
	curl -sS --fail-with-body --max-time 10 -X POST -H 'Content-Type: application/json' --data-binary "$2" "$1"
}

tb_delete() {
	curl -sS --fail-with-body --max-time 10 -X DELETE "$1"
}
