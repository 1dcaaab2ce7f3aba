/* The versions `cpm version plan --kubeconfig` reads from a cluster (cpm_version_cluster.h). */
#include "modules/cpm/cpm_version_cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/kube/config.h"
#include "common/kube/rest.h"
#include "modules/cpm/cpm_version.h"

#define CP_LABEL "node-role.kubernetes.io/control-plane"
#define VERSION_ANNOTATION "control-plane-manager.deckhouse.io/kubernetes-version"

struct nodes {
	char ***kubelets, ***masters;
	char *err;
	size_t errlen;
	size_t n;
};

static int push_kv(char ***v, const char *k, const char *val)
{
	char s[1024];
	int n = snprintf(s, sizeof(s), "%s=%s", k, val);

	return n < 0 || (size_t)n >= sizeof(s) ? -ENAMETOOLONG : strv_push(v, s);
}

static int node_item(void *ud, cJSON *item)
{
	struct nodes *n = ud;
	const char *name = json_str(item, "metadata.name");
	const char *v = json_str(item, "status.nodeInfo.kubeletVersion");
	const cJSON *labels = json_find(item, "metadata.labels");
	int r = 0;

	if (++n->n > CPM_VERSION_MAX_NODES) {
		snprintf(n->err, n->errlen, "more than %d Nodes", CPM_VERSION_MAX_NODES);
		r = -E2BIG;
	} else if (!name || !v) {
		snprintf(n->err, n->errlen, "Node \"%s\": no status.nodeInfo.kubeletVersion",
			 name ? name : "?");
		r = -EINVAL;
	} else {
		r = push_kv(n->kubelets, name, v);
		if (r >= 0 && labels && cJSON_GetObjectItemCaseSensitive(labels, CP_LABEL))
			r = strv_push(n->masters, name);
	}
	cJSON_Delete(item);
	return r;
}

/* The version of a mirror pod: Deckhouse's annotation, else its first container's image tag. */
static const char *pod_version(const cJSON *pod)
{
	const cJSON *ann = json_find(pod, "metadata.annotations");
	const cJSON *c = cJSON_GetArrayItem(json_find(pod, "spec.containers"), 0);
	const char *v = ann ? json_str_key(ann, VERSION_ANNOTATION) : NULL;
	const char *image = c ? json_str(c, "image") : NULL, *colon;

	if (v)
		return v;
	colon = image ? strrchr(image, ':') : NULL;
	return colon && !strchr(colon, '/') ? colon + 1 : NULL;
}

int cpm_version_from_cluster(const char *kubeconfig, char ***cp, char ***kubelets, char **max_used,
			     char *err, size_t errlen)
{
	static const char *const comps[] = {"kube-apiserver", "kube-controller-manager",
					    "kube-scheduler"};
	struct kube_config *cfg = NULL;
	struct kube_client *kc = NULL;
	struct kube_status st = {0};
	char **masters = NULL;
	struct nodes n = {kubelets, &masters, err, errlen, 0};
	cJSON *o = NULL;
	int r = kube_config_load(&(struct kube_config_opts){.kubeconfig = kubeconfig}, &cfg, err,
				 errlen);

	if (r >= 0)
		r = kube_client_new(cfg, &(struct kube_client_opts){.component = "cpm"}, &kc);
	if (r >= 0) {
		err[0] = 0;
		r = kube_list_each(kc, KUBE_REF(&kube_nodes, NULL, NULL), NULL, node_item, &n, NULL,
				   &st);
		if (r < 0 && !err[0])
			snprintf(err, errlen, "listing Nodes: %s",
				 st.message[0] ? st.message : strerror(-r));
	}
	for (size_t i = 0; r >= 0 && masters && masters[i]; i++)
		for (int c = 0; r >= 0 && c < 3; c++) {
			char pod[320], key[320];
			const char *v;
			snprintf(pod, sizeof(pod), "%s-%s", comps[c], masters[i]);
			r = kube_get(kc, KUBE_REF(&kube_pods, "kube-system", pod), &o, &st);
			if (r < 0) {
				snprintf(err, errlen, "the mirror pod kube-system/%s: %s", pod,
					 st.message[0] ? st.message : strerror(-r));
				break;
			}
			v = pod_version(o);
			snprintf(key, sizeof(key), "%s/%s", masters[i], comps[c]);
			if (!v) {
				snprintf(err, errlen,
					 "the mirror pod kube-system/%s: no %s annotation "
					 "and no image tag",
					 pod, VERSION_ANNOTATION);
				r = -EINVAL;
			} else {
				r = push_kv(cp, key, v);
			}
			cJSON_Delete(o);
			o = NULL;
		}
	if (r >= 0 && !masters) {
		snprintf(err, errlen, "no Node carries the label %s", CP_LABEL);
		r = -ENOENT;
	}
	if (r >= 0) {
		int q =
		    kube_get(kc, KUBE_REF(&kube_secrets, "kube-system", "d8-cluster-configuration"),
			     &o, &st);
		const char *b64 =
		    q >= 0 ? json_str(o, "data.maxUsedControlPlaneKubernetesVersion") : NULL;
		char *raw = NULL;
		size_t len = 0;
		if (q < 0 && q != -ENOENT) {
			snprintf(err, errlen, "the Secret kube-system/d8-cluster-configuration: %s",
				 st.message[0] ? st.message : strerror(-q));
			r = q;
		} else if (b64 && kube_base64_decode(b64, strlen(b64), &raw, &len) >= 0) {
			*max_used = raw;
		} else if (b64) {
			snprintf(err, errlen,
				 "the Secret kube-system/d8-cluster-configuration: "
				 "maxUsedControlPlaneKubernetesVersion is not base64");
			r = -EINVAL;
		}
		cJSON_Delete(o);
	}
	strv_free(masters);
	kube_client_free(kc);
	kube_config_free(cfg);
	return r;
}
