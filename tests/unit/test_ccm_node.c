/* What the cloud-node controller writes when it initializes a Node. */
#include <stdlib.h>

#include "common/base/json.h"
#include "modules/ccm/ccm_controllers.h"
#include "modules/ccm/ccm_model.h"
#include "tests/unit/harness.h"

#define UNINIT                                                                                     \
	"{\"key\":\"" CCM_TAINT_UNINITIALIZED "\",\"value\":\"true\",\"effect\":\"NoSchedule\"}"
#define DEDICATED "{\"key\":\"dedicated\",\"value\":\"db\",\"effect\":\"NoExecute\"}"
#define NODE(taints)                                                                               \
	"{\"metadata\":{\"name\":\"ip-10-0-0-1\",\"resourceVersion\":\"7\"},\"spec\":{\"taints\":" \
	"[" taints "]}}"

static const char labels_json[] = "{\"topology.kubernetes.io/zone\":\"us-east-1a\"}";

/* The merge patch: the uninitialized taint gone, other taints kept, providerID, labels. */
TEST(ccm_node_init_patch_removes_the_taint)
{
	cJSON *node = NULL, *labels = NULL, *patch = NULL;
	char *text = NULL;

	ASSERT_OK(json_parse(labels_json, strlen(labels_json), &labels, NULL));
	struct ccm_node_init im = {.provider_id = "aws:///us-east-1a/i-1", .labels = labels};
	ASSERT_OK(json_parse(NODE(UNINIT "," DEDICATED), strlen(NODE(UNINIT "," DEDICATED)), &node,
			     NULL));
	ASSERT_OK(ccm_node_init_patch(node, "8", &im, &text));
	ASSERT_OK(json_parse(text, strlen(text), &patch, NULL));
	free(text);
	cJSON_Delete(node);
	char *taints = json_print(json_find(patch, "spec.taints"));
	ASSERT_STREQ(taints, "[" DEDICATED "]");
	free(taints);
	ASSERT_STREQ(json_str(patch, "spec.providerID"), "aws:///us-east-1a/i-1");
	ASSERT_STREQ(json_str(patch, "metadata.resourceVersion"), "8");
	ASSERT_STREQ(
	    json_str_key(json_find(patch, "metadata.labels"), "topology.kubernetes.io/zone"),
	    "us-east-1a");
	cJSON_Delete(patch);

	/* the only taint: spec.taints null, which a merge patch deletes */
	ASSERT_OK(json_parse(NODE(UNINIT), strlen(NODE(UNINIT)), &node, NULL));
	ASSERT_OK(ccm_node_init_patch(node, "8", &im, &text));
	cJSON_Delete(node);
	cJSON_Delete(labels);
	ASSERT_OK(json_parse(text, strlen(text), &patch, NULL));
	free(text);
	bool null_taints =
	    cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(json_find(patch, "spec"), "taints"));
	cJSON_Delete(patch);
	ASSERT_TRUE(null_taints);
}

/* The update after a conflict: the same change on a fresh copy of the Node. */
TEST(ccm_node_init_mutate_removes_the_taint)
{
	cJSON *node = NULL, *labels = NULL;

	ASSERT_OK(json_parse(labels_json, strlen(labels_json), &labels, NULL));
	struct ccm_node_init im = {.provider_id = "aws:///us-east-1a/i-1", .labels = labels};
	ASSERT_OK(json_parse(NODE(DEDICATED "," UNINIT), strlen(NODE(DEDICATED "," UNINIT)), &node,
			     NULL));
	ASSERT_OK(ccm_node_init_mutate(&im, node));
	cJSON_Delete(labels);
	char *taints = json_print(json_find(node, "spec.taints"));
	bool tainted = ccm_node_has_taint(node, CCM_TAINT_UNINITIALIZED);
	const char *pid = json_str(node, "spec.providerID");
	bool pid_ok = pid && strcmp(pid, "aws:///us-east-1a/i-1") == 0;
	cJSON_Delete(node);
	ASSERT_STREQ(taints, "[" DEDICATED "]");
	free(taints);
	ASSERT_FALSE(tainted);
	ASSERT_TRUE(pid_ok);
}
