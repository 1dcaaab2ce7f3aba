# shellcheck shell=bash
# Helpers for the csi-controller integration tests: start the controller against moto (or a
# fault proxy in front of it) and call it with `aws-k8s csi-client`.
#
#   csi_ctrl_start [extra flags...]   starts csi-controller on $T_TMP/csi-ctrl.sock with the
#                                     metrics on a free port; sets CTRL_PID, CTRL_SOCK, CTRL_METRICS
#   cc CALL [flags...]                aws-k8s csi-client against it (stdout: the JSON reply)
#   cc_code CALL [flags...]           prints the gRPC code name of the call ("OK" on success)
#   jget JSON FILTER                  jq -r

csi_ctrl_start() {
	CTRL_SOCK=$T_TMP/csi-ctrl.sock
	local port
	port=$(free_port)
	CTRL_METRICS=http://127.0.0.1:$port
	"$AWS_K8S" csi-controller --endpoint "unix://$CTRL_SOCK" --http-endpoint "127.0.0.1:$port" \
		--modify-volume-request-handler-timeout=200ms --k8s-tag-cluster-id=test "$@" \
		>"$T_TMP/csi-ctrl.log" 2>&1 &
	CTRL_PID=$!
	t_cleanup_add "kill $CTRL_PID 2>/dev/null; sleep 0.2; kill -9 $CTRL_PID 2>/dev/null"
	local i
	for ((i = 0; i < 200; i++)); do
		if [ -S "$CTRL_SOCK" ] && "$AWS_K8S" csi-client --endpoint "unix://$CTRL_SOCK" --timeout 2s \
			get-plugin-info >/dev/null 2>&1; then
			return 0
		fi
		kill -0 "$CTRL_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "csi-controller did not start:" >&2
	tail -n 20 "$T_TMP/csi-ctrl.log" >&2
	return 1
}

cc() { "$AWS_K8S" csi-client --endpoint "unix://$CTRL_SOCK" --timeout 60s "$@"; }

cc_code() {
	local err
	if err=$(cc "$@" 2>&1 >/dev/null); then
		echo OK
	else
		echo "$err" | sed -n 's/^rpc error: code = \([A-Za-z]*\) .*/\1/p' | head -n 1
	fi
}

jget() { printf '%s' "$1" | jq -r "$2"; }
