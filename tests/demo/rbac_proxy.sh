# shellcheck shell=bash
# make demo, its last part (sourced by tests/demo/run, which calls demo_rbac_proxy before its
# report): the ccm's metrics scraped through its kube-rbac-proxy sidecar (deploy/rbac-proxy, in
# the rendered deploy/example), started from the manifest like the other roles. The test API
# server answers the sidecar's TokenReviews from a token table and its SubjectAccessReviews from
# the rendered Role aws-k8s:prometheus-metrics and its RoleBinding (the scraper's token is one of
# the RoleBinding's ServiceAccounts; another token has no role): no token gets 401, a token
# without the role 403, the scraper's token 200 and the ccm's metrics.
# Uses tests/demo/run's R, KC, KAS_URL, CCM_PORT, role, say, failed.

demo_rbac_proxy() {
	local px_port code
	say "aws-k8s rbac-proxy: the ccm's metrics through its kube-rbac-proxy sidecar"
	# the tokens and the rules of the rendered Role, for the subjects of its RoleBinding
	python3 - "$R" >"$T_TMP/rbac-auth.json" <<'PY' || failed "the Role aws-k8s:prometheus-metrics in the manifests"
import json, sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
role = next(o for o in objs if o["kind"] == "Role" and o["metadata"]["name"] == "aws-k8s:prometheus-metrics")
rb = next(o for o in objs if o["kind"] == "RoleBinding" and o["roleRef"]["name"] == role["metadata"]["name"])
users = [("system:serviceaccount:%s:%s" % (s["namespace"], s["name"])) if s["kind"] == "ServiceAccount"
         else s["name"] for s in rb["subjects"]]
sa = next(u for u in users if u.startswith("system:serviceaccount:"))
rules = [{"users": users, "verbs": r["verbs"], "apiGroups": r["apiGroups"],
          "resources": r["resources"], "resourceNames": r.get("resourceNames", []),
          "namespaces": [role["metadata"]["namespace"]]} for r in role["rules"]]
print(json.dumps({"tokens": [{"token": "demo-scraper-token", "user": sa},
                             {"token": "demo-nobody-token", "user": "nobody"}], "rules": rules}))
PY
	curl -sfk -o /dev/null -X POST --data-binary @"$T_TMP/rbac-auth.json" "$KAS_URL/_control/auth" ||
		failed "the test API server takes the tokens and the Role's rules"
	echo "the test API server: TokenReview knows two tokens (the scraper, $(jq -r '.tokens[0].user' "$T_TMP/rbac-auth.json"), and"
	echo "'nobody'); SubjectAccessReview answers from the rendered Role aws-k8s:prometheus-metrics:"
	jq -c '.rules[] | {resources, resourceNames, verbs}' "$T_TMP/rbac-auth.json" | sed 's/^/  /'
	px_port=$(free_port)
	# the ConfigMap kube-root-ca.crt (the CA of client certificates): the test API server's
	# client CA
	jq -n --rawfile ca "$KC.client-ca.crt" '{configMapKeyRef: {"kube-root-ca.crt/ca.crt": $ca}}' \
		>"$T_TMP/rbac-values.json"
	role rbac-proxy Deployment cloud-controller-manager kube-rbac-proxy \
		"the pod's IP is 127.0.0.1; the ports move as the ccm's did; ConfigMap kube-root-ca.crt: the test API server's client CA" \
		--port-map "10258=$CCM_PORT" --port-map "10471=$px_port" --set "fieldRef:status.podIP=127.0.0.1" \
		--values "$T_TMP/rbac-values.json"
	wait_http "https://127.0.0.1:$px_port/livez" 20 || failed "the sidecar answers /livez" rbac-proxy
	local url=https://127.0.0.1:$px_port/metrics
	# scrape WANT [TOKEN]: GET /metrics through the sidecar, as Prometheus does
	scrape() {
		code=$(curl -sk -o "$T_TMP/scrape.out" -w '%{http_code}' --max-time 10 \
			${2:+-H "Authorization: Bearer $2"} "$url")
		printf '%-40s HTTP %s\n' "GET /metrics ${3}" "$code"
		[ "$code" = "$1" ] || failed "GET /metrics $3: HTTP $1 expected, got $code: $(head -c 200 "$T_TMP/scrape.out")" rbac-proxy
	}
	scrape 401 "" "without a token"
	scrape 403 demo-nobody-token "with a token without the role"
	scrape 200 demo-scraper-token "with the scraper's token"
	grep -q '^# TYPE ' "$T_TMP/scrape.out" || failed "the ccm's metrics come back through the sidecar" rbac-proxy
	echo "  $(grep -c '^# TYPE ' "$T_TMP/scrape.out") metric families from the ccm, e.g. $(grep -m1 '^# TYPE ' "$T_TMP/scrape.out" | cut -d' ' -f3)"
	if grep -q "demo-scraper-token\|demo-nobody-token" "$T_TMP/rbac-proxy.log"; then
		failed "no token in the sidecar's log" rbac-proxy
	fi
	echo "the sidecar's log holds no token"
}
