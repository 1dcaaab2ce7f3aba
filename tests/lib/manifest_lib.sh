# shellcheck shell=bash
# Running the aws-k8s containers of a manifest on the test bed with tests/lib/manifest_run.py:
# what every such script adds to the manifest (tests/integration/upstream_manifests.sh,
# tests/demo/run). Source it after tests/lib/testlib.sh.
#
#   MR                                   the runner, tests/lib/manifest_run.py
#   mr_peer_env AWS_URL IMDS_URL KUBECONFIG
#       sets MR_PEER_ENV, the runner's options that point a container at the test bed: the AWS
#       endpoint (moto, or the fault proxy in front of it), the metadata fake, a kubeconfig
#       standing for the in-cluster configuration, empty AWS config and credentials files (so
#       ~/.aws never leaks in), and the sanitizers' options of a sanitizer build
#   mr_port_maps ARGS_JSON
#       a pod has its own network namespace, a test process shares the host's: prints one
#       --port-map=OLD=NEW per port the args bind (--http-endpoint, --metrics-address,
#       --secure-port), NEW a free port
#   mr_csi_wait SOCKET PID
#       waits (up to 20 s) until the CSI plugin PID answers GetPluginInfo on SOCKET; status 1
#       when it does not (or PID died)

MR=$T_ROOT/tests/lib/manifest_run.py

mr_peer_env() {
	: >"$T_TMP/aws-config"
	: >"$T_TMP/aws-credentials"
	MR_PEER_ENV=(--env "AWS_ENDPOINT_URL=$1" --env "AWS_EC2_METADATA_SERVICE_ENDPOINT=$2"
		--env "KUBECONFIG=$3" --env "AWS_CONFIG_FILE=$T_TMP/aws-config"
		--env "AWS_SHARED_CREDENTIALS_FILE=$T_TMP/aws-credentials"
		--pass-env 'ASAN_*' --pass-env 'UBSAN_*' --pass-env 'LSAN_*' --pass-env 'TSAN_*')
}

mr_port_maps() {
	python3 -c '
import json, re, sys
for a in json.loads(sys.argv[1]):
    m = re.match(r"--(?:http-endpoint|metrics-address)=.*:(\d+)$", a) or re.match(r"--secure-port=(\d+)$", a)
    if m:
        print(m.group(1))' "$1" | while read -r p; do echo "--port-map=$p=$(free_port)"; done
}

mr_csi_wait() {
	local i
	for ((i = 0; i < 200; i++)); do
		"$AWS_K8S" csi-client --endpoint "unix://$1" --timeout 2s get-plugin-info >/dev/null 2>&1 && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
