/* Waiting for the approval and for the mirror pods (cpm_wait.h). */
#include "modules/cpm/cpm_wait.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/base/cancel.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/kube/rest.h"
#include "modules/cpm/cpm_manifest.h"

static const cJSON *annotation(const cJSON *obj, const char *key)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "annotations");

	return cJSON_GetObjectItemCaseSensitive(a, key);
}

static int get_node(struct kube_client *kc, const char *node, bool *ret_approved, char *err,
		    size_t errlen)
{
	struct kube_status st = { 0 };
	cJSON *obj = NULL;
	int r = kube_get(kc, KUBE_REF(&kube_nodes, NULL, node), &obj, &st);

	if (r < 0) {
		snprintf(err, errlen, "cannot get node \"%s\": %s%s%s", node, strerror(-r),
			 st.message[0] ? ": " : "", st.message);
		return r;
	}
	*ret_approved = annotation(obj, CPM_APPROVED_ANNOTATION) != NULL;
	cJSON_Delete(obj);
	return 0;
}

int cpm_approval_wait(struct kube_client *kc, const char *node, int tries, int64_t interval_ns,
		      struct cancel *ct, char *err, size_t errlen)
{
	struct kube_status st = { 0 };
	bool approved = false;
	int r = get_node(kc, node, &approved, err, errlen);

	if (r < 0)
		return r;
	if (approved) {
		log_info("node already approved, no need to annotate", KV_S("node", node),
			 KV_S("annotation", CPM_APPROVED_ANNOTATION));
		return 0;
	}
	r = kube_patch(kc, KUBE_REF(&kube_nodes, NULL, node), KUBE_PATCH_MERGE,
		       "{\"metadata\":{\"annotations\":{\"" CPM_WAITING_ANNOTATION "\":\"\"}}}", NULL,
		       &st);
	if (r < 0) {
		snprintf(err, errlen, "cannot annotate node \"%s\" %s: %s %s", node,
			 CPM_WAITING_ANNOTATION, strerror(-r), st.message);
		return r;
	}
	log_info("waiting for the approval", KV_S("node", node),
		 KV_S("annotation", CPM_APPROVED_ANNOTATION), KV_I("tries", tries));
	for (int i = 0; i < tries; i++) {
		if ((r = get_node(kc, node, &approved, err, errlen)) < 0)
			return r;
		if (approved) {
			log_info("node approved", KV_S("node", node));
			return 0;
		}
		if (cancel_wait(ct, interval_ns))
			return -ECANCELED;
	}
	snprintf(err, errlen, "can't get annotation %s from our node \"%s\" after %d tries",
		 CPM_APPROVED_ANNOTATION, node, tries);
	return -ETIMEDOUT;
}

/* GET kube-system/pod; on failure a sentence in err (when given). */
static int system_pod(struct kube_client *kc, const char *pod, cJSON **ret, char *err,
		      size_t errlen)
{
	struct kube_status st = { 0 };
	int r = kube_get(kc, KUBE_REF(&kube_pods, "kube-system", pod), ret, &st);

	if (r < 0 && err)
		snprintf(err, errlen, "cannot get pod kube-system/%s: %s %s", pod, strerror(-r),
			 st.message);
	return r;
}

/* 1 when the pod carries checksum and is Ready; 0 otherwise, what was seen in why. */
static int pod_state(const cJSON *pod, const char *checksum, char *why, size_t n)
{
	const cJSON *sum = annotation(pod, CPM_CHECKSUM_ANNOTATION), *c;
	const cJSON *conds = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(pod, "status"), "conditions");

	if (!cJSON_IsString(sum) || strcmp(sum->valuestring, checksum) != 0) {
		snprintf(why, n, "its checksum is %s, not %s",
			 cJSON_IsString(sum) ? sum->valuestring : "(none)", checksum);
		return 0;
	}
	cJSON_ArrayForEach(c, conds) {
		const char *type = json_str_key(c, "type"), *status = json_str_key(c, "status");
		if (type && status && strcmp(type, "Ready") == 0 && strcmp(status, "True") == 0)
			return 1;
	}
	snprintf(why, n, "it has the checksum but is not Ready");
	return 0;
}

int cpm_mirror_pod_wait(struct kube_client *kc, const char *pod, const char *checksum, int tries,
			int64_t interval_ns, struct cancel *ct, char *err, size_t errlen)
{
	char why[256] = "not looked at";

	for (int i = 0; i < tries; i++) {
		cJSON *obj = NULL;
		int r = system_pod(kc, pod, &obj, NULL, 0);
		if (r == -ECANCELED)
			return r;
		if (r < 0) {
			snprintf(why, sizeof(why), "%s", r == -ENOENT ? "it does not exist"
								       : strerror(-r));
		} else if (pod_state(obj, checksum, why, sizeof(why))) {
			cJSON_Delete(obj);
			log_info("pod has the checksum and is ready", KV_S("pod", pod),
				 KV_S("checksum", checksum));
			return 0;
		}
		cJSON_Delete(obj);
		log_v(1, "waiting for the pod", KV_S("pod", pod), KV_S("state", why));
		if (i + 1 < tries && cancel_wait(ct, interval_ns))
			return -ECANCELED;
	}
	snprintf(err, errlen,
		 "timeout waiting for pod kube-system/%s to become ready with checksum %s after %d "
		 "tries (last seen: %s)",
		 pod, checksum, tries, why);
	return -ETIMEDOUT;
}

/* The first container (but control-plane-manager) not ready, or NULL when all are. */
static const char *holder_not_ready(const cJSON *pod)
{
	const cJSON *c, *statuses = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(pod, "status"), "containerStatuses");

	cJSON_ArrayForEach(c, statuses) {
		const char *name = json_str_key(c, "name");
		if (name && strcmp(name, "control-plane-manager") != 0 &&
		    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "ready")))
			return name;
	}
	return NULL;
}

int cpm_image_holders_wait(struct kube_client *kc, const char *pod, int tries, int64_t interval_ns,
			   struct cancel *ct, char *err, size_t errlen)
{
	char last[128] = "";

	for (int i = 0; i < tries; i++) {
		cJSON *obj = NULL;
		int r = system_pod(kc, pod, &obj, err, errlen);
		if (r < 0)
			return r;
		const char *name = holder_not_ready(obj);
		if (!name) {
			cJSON_Delete(obj);
			return 0;
		}
		snprintf(last, sizeof(last), "%s", name);
		cJSON_Delete(obj);
		log_info("waiting for the image-holder containers", KV_S("pod", pod),
			 KV_S("notReady", last));
		if (cancel_wait(ct, interval_ns))
			return -ECANCELED;
	}
	snprintf(err, errlen, "container %s of pod kube-system/%s is not ready after %d tries", last,
		 pod, tries);
	return -ETIMEDOUT;
}
