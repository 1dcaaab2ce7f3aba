# shellcheck shell=bash
# Helpers for the Kubernetes client tests (source after tests/lib/testlib.sh).
#   start_kas [ARGS...]   the project's test API server on a free port: sets KC (kubeconfig),
#                         KAS_URL, KAS_TOKEN; killed at exit
#   ctl METHOD PATH [CURL ARGS...]   the server's /_control/ endpoint
#   kd ARGS...            aws-k8s kube-debug against it
#   kcreate RES           create the JSON/YAML object read from stdin
#   wait_for FILE REGEX [SECONDS]    waits until a line of FILE matches

start_kas() {
	KAS_PORT=$(free_port)
	KC=$T_TMP/kc
	bg kas "$T_ROOT/tests/kube-apiserver/run" --port "$KAS_PORT" --kubeconfig-out "$KC" "$@"
	wait_http "https://127.0.0.1:$KAS_PORT/healthz" 30 || return 1
	local i
	for i in $(seq 100); do
		[ -s "$KC.token" ] && [ -s "$KC" ] && break
		sleep 0.1
	done
	KAS_URL=https://127.0.0.1:$KAS_PORT
	KAS_TOKEN=$(cat "$KC.token")
}

ctl() {
	local m=$1 p=$2
	shift 2
	curl -sk -X "$m" -H "Authorization: Bearer $KAS_TOKEN" "$KAS_URL/_control/$p" "$@"
}

kd() { "$AWS_K8S" kube-debug --kubeconfig "$KC" "$@"; }

kcreate() { kd create "$1" - >/dev/null; }

wait_for() {
	local file=$1 re=$2 limit=${3:-15} i=0
	until grep -qE "$re" "$file" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt $((limit * 20)) ] && return 1
		sleep 0.05
	done
}

# ms_since NANOSECONDS: milliseconds elapsed since that wall-clock time
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
