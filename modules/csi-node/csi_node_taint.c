/* The startup taint: clusters (Karpenter, EKS node groups) put ebs.csi.aws.com/agent-not-ready
 * on new nodes so that no pod with an EBS volume lands there before the node plugin runs. As
 * upstream does, once kubelet has registered the plugin (the CSINode object lists the driver
 * with an allocatable count) the plugin removes that taint from its own Node ($CSI_NODE_NAME),
 * with a JSON patch whose "test" step makes a concurrent change of the taints fail instead of
 * being overwritten; it retries with backoff (0.5 s doubling, 10 tries, about 4 minutes).
 * DISABLE_TAINT_WATCHER=true (Go's true words: 1, t, T, true, TRUE, True) leaves the taint
 * alone, as upstream does, for clusters where something else removes it. */
#include "modules/csi-node/csi_node.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/signals.h"
#include "common/base/timeutil.h"
#include "common/kube/config.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"

static bool csinode_ready(const cJSON *csinode, const char *driver)
{
	const cJSON *drivers = json_find(csinode, "spec.drivers"), *d;

	cJSON_ArrayForEach(d, drivers)
	{
		const char *name = json_str(d, "name");
		long long count;
		if (name && strcmp(name, driver) == 0)
			return json_get_int(d, "allocatable.count", &count) == 0;
	}
	return false;
}

int csi_node_untaint_patch(const cJSON *node, char **ret)
{
	const cJSON *taints = json_find(node, "spec.taints"), *t;
	cJSON *kept = NULL, *patch = NULL;
	bool found = false;
	int r = -ENOMEM;

	if (!cJSON_IsArray(taints))
		return 0;
	if (!(kept = cJSON_CreateArray()))
		return -ENOMEM;
	cJSON_ArrayForEach(t, taints)
	{
		const char *key = json_str(t, "key");
		if (key && strcmp(key, CSI_NODE_STARTUP_TAINT) == 0) {
			found = true;
			continue;
		}
		if (!cJSON_AddItemToArray(kept, cJSON_Duplicate(t, true)))
			goto out;
	}
	if (!found) {
		r = 0;
		goto out;
	}
	cJSON *test = NULL, *replace = NULL;
	if (!(patch = cJSON_CreateArray()) || !(test = cJSON_CreateObject()) ||
	    !cJSON_AddItemToArray(patch, test) || !(replace = cJSON_CreateObject()) ||
	    !cJSON_AddItemToArray(patch, replace))
		goto out;
	if (!cJSON_AddStringToObject(test, "op", "test") ||
	    !cJSON_AddStringToObject(test, "path", "/spec/taints") ||
	    !cJSON_AddItemToObject(test, "value", cJSON_Duplicate(taints, true)) ||
	    !cJSON_AddStringToObject(replace, "op", "replace") ||
	    !cJSON_AddStringToObject(replace, "path", "/spec/taints") ||
	    !cJSON_AddItemToObject(replace, "value", kept))
		goto out;
	kept = NULL;
	if (!(*ret = cJSON_PrintUnformatted(patch)))
		goto out;
	r = 1;
out:
	cJSON_Delete(kept);
	cJSON_Delete(patch);
	return r;
}

/* One attempt: 0 when the node has no startup taint (any more), -EAGAIN while the plugin is not
 * registered yet, another -errno on an API error. */
static int untaint_once(struct kube_client *kc, const char *node_name, const char *driver)
{
	struct kube_status st = { 0 };
	cJSON *csinode = NULL, *node = NULL;
	_cleanup_free_ char *patch = NULL;
	int r;

	if ((r = kube_get(kc, KUBE_REF(&kube_csinodes, NULL, node_name), &csinode, &st)) < 0) {
		log_v(4, "CSINode not readable yet", KV_S("node", node_name),
		      KV_S("error", st.message));
		return r == -ENOENT ? -EAGAIN : r;
	}
	bool ready = csinode_ready(csinode, driver);
	cJSON_Delete(csinode);
	if (!ready) {
		log_v(4, "the driver has no allocatable count in CSINode yet",
		      KV_S("node", node_name));
		return -EAGAIN;
	}
	if ((r = kube_get(kc, KUBE_REF(&kube_nodes, NULL, node_name), &node, &st)) < 0)
		return r;
	r = csi_node_untaint_patch(node, &patch);
	cJSON_Delete(node);
	if (r <= 0)
		return r;
	if ((r = kube_patch(kc, KUBE_REF(&kube_nodes, NULL, node_name), KUBE_PATCH_JSON, patch,
			    NULL, &st)) < 0) {
		log_v(2, "removing the startup taint failed", KV_S("node", node_name),
		      KV_S("error", st.message));
		return r;
	}
	log_info("removed the startup taint", KV_S("node", node_name),
		 KV_S("taint", CSI_NODE_STARTUP_TAINT));
	return 0;
}

struct csi_node_untaint {
	pthread_t thread;
	char *node_name, *driver;
};

/* A client with a short request timeout, so that a stop never waits long for it. */
static int client(struct kube_client **ret, char *err, size_t errlen)
{
	struct kube_config_opts o = { .kubeconfig = kube_flag_kubeconfig,
				      .master = kube_flag_master };
	struct kube_config *cfg = NULL;
	int r;

	if ((r = kube_config_load(&o, &cfg, err, errlen)) < 0)
		return r;
	struct kube_client_opts co = { .component = "csi-node", .timeout_ns = 10 * NSEC_PER_SEC };
	r = kube_client_new(cfg, &co, ret);
	kube_config_free(cfg);
	return r;
}

static void *untaint_thread(void *arg)
{
	struct csi_node_untaint *u = arg;
	struct kube_client *kc = NULL;
	int64_t delay = 500 * NSEC_PER_MSEC;
	char err[512];
	int r = -EAGAIN;

	if (stop_wait(NSEC_PER_SEC))
		return NULL;
	for (int attempt = 0; attempt < 10; attempt++) {
		if (!kc && (r = client(&kc, err, sizeof(err))) < 0) {
			log_v(2, "no Kubernetes client for the startup taint", KV_S("error", err));
			break; /* no configuration: nothing to do, as upstream */
		}
		if ((r = untaint_once(kc, u->node_name, u->driver)) == 0)
			break;
		if (stop_wait(delay))
			break;
		delay *= 2;
	}
	if (r < 0 && r != -ENOENT && !stop_requested())
		log_warn("gave up removing the startup taint", KV_S("node", u->node_name), KV_E(r));
	kube_client_free(kc);
	return NULL;
}

/* strconv.ParseBool's true words */
static bool env_true(const char *name)
{
	static const char *const words[] = { "1", "t", "T", "true", "TRUE", "True" };
	const char *v = getenv(name);

	for (size_t i = 0; v && i < sizeof(words) / sizeof(words[0]); i++)
		if (strcmp(v, words[i]) == 0)
			return true;
	return false;
}

struct csi_node_untaint *csi_node_untaint_start(const char *node_name, const char *driver)
{
	struct csi_node_untaint *u;

	if (!node_name || !*node_name)
		return NULL;
	if (env_true("DISABLE_TAINT_WATCHER")) {
		log_info("DISABLE_TAINT_WATCHER is set: the startup taint is left alone",
			 KV_S("node", node_name), KV_S("taint", CSI_NODE_STARTUP_TAINT));
		return NULL;
	}
	if (!(u = calloc(1, sizeof(*u))))
		return NULL;
	u->node_name = strdup(node_name);
	u->driver = strdup(driver);
	if (!u->node_name || !u->driver ||
	    pthread_create(&u->thread, NULL, untaint_thread, u) != 0) {
		free(u->node_name);
		free(u->driver);
		free(u);
		return NULL;
	}
	return u;
}

void csi_node_untaint_stop(struct csi_node_untaint *u)
{
	if (!u)
		return;
	if (u->node_name && u->driver) {
		stop_request(); /* the plugin is shutting down: end the retries now */
		pthread_join(u->thread, NULL);
	}
	free(u->node_name);
	free(u->driver);
	free(u);
}
