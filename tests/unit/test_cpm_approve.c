/* cpm_node_view and cpm_obj_ready: what the approver reads of a master Node and of a cpm Pod
 * (the annotations in either spelling, the Ready condition, spec.unschedulable). */
#include <string.h>

#include "common/base/json.h"
#include "modules/cpm/cpm_approve.h"
#include "tests/unit/harness.h"

static cJSON *parse(const char *s)
{
	cJSON *j = NULL;
	return json_parse(s, strlen(s), &j, NULL) == 0 ? j : NULL;
}

TEST(cpm_approve_node_view)
{
	cJSON *n = parse("{\"metadata\":{\"name\":\"m1\",\"resourceVersion\":\"42\",\"annotations\":{"
			 "\"control-plane-manager.deckhouse.io/waiting-for-approval\":\"\"}},"
			 "\"status\":{\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":\"True\"},"
			 "{\"type\":\"Ready\",\"status\":\"True\"}]}}");
	struct cpm_node_view v;

	ASSERT_NOT_NULL(n);
	cpm_node_view(n, &v);
	ASSERT_STREQ(v.name, "m1");
	ASSERT_STREQ(v.rv, "42");
	ASSERT_STREQ(v.waiting, CPM_ANN_PREFIX);
	ASSERT_NULL(v.approved);
	ASSERT_TRUE(v.ready);
	ASSERT_TRUE(v.schedulable);
	cJSON_Delete(n);
}

TEST(cpm_approve_node_view_old_spelling_cordoned_not_ready)
{
	cJSON *n = parse("{\"metadata\":{\"name\":\"m2\",\"annotations\":{"
			 "\"control-plane-manger.deckhouse.io/approved\":\"\","
			 "\"control-plane-manger.deckhouse.io/waiting-for-approval\":\"\"}},"
			 "\"spec\":{\"unschedulable\":true},"
			 "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"Unknown\"}]}}");
	struct cpm_node_view v;

	ASSERT_NOT_NULL(n);
	cpm_node_view(n, &v);
	ASSERT_STREQ(v.approved, CPM_ANN_PREFIX_OLD);
	ASSERT_STREQ(v.waiting, CPM_ANN_PREFIX_OLD);
	ASSERT_FALSE(v.ready);
	ASSERT_FALSE(v.schedulable);
	ASSERT_NULL(v.rv);
	cJSON_Delete(n);
}

TEST(cpm_approve_node_view_both_spellings_and_nothing)
{
	cJSON *n = parse("{\"metadata\":{\"name\":\"m3\",\"annotations\":{"
			 "\"control-plane-manger.deckhouse.io/approved\":\"\","
			 "\"control-plane-manager.deckhouse.io/approved\":\"\","
			 "\"control-plane-manager.deckhouse.io/checksum\":\"x\"}},"
			 "\"spec\":{\"unschedulable\":false}}");
	cJSON *bare = parse("{\"metadata\":{\"name\":\"m4\"}}");
	struct cpm_node_view v;

	ASSERT_NOT_NULL(n);
	ASSERT_NOT_NULL(bare);
	cpm_node_view(n, &v);
	ASSERT_STREQ(v.approved, CPM_ANN_PREFIX); /* the new spelling when both */
	ASSERT_NULL(v.waiting);
	ASSERT_TRUE(v.schedulable);
	ASSERT_FALSE(v.ready); /* no conditions: not Ready */
	cpm_node_view(bare, &v);
	ASSERT_NULL(v.approved);
	ASSERT_NULL(v.waiting);
	ASSERT_TRUE(v.schedulable);
	cJSON_Delete(n);
	cJSON_Delete(bare);
}

TEST(cpm_approve_pod_ready)
{
	cJSON *ready = parse("{\"status\":{\"conditions\":[{\"type\":\"PodScheduled\",\"status\":"
			     "\"True\"},{\"type\":\"Ready\",\"status\":\"True\"}]}}");
	cJSON *not_ready = parse("{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":"
				 "\"False\"},{\"type\":\"ContainersReady\",\"status\":\"True\"}]}}");
	cJSON *odd = parse("{\"status\":{\"conditions\":{\"type\":\"Ready\"}}}");

	ASSERT_TRUE(cpm_obj_ready(ready));
	ASSERT_FALSE(cpm_obj_ready(not_ready));
	ASSERT_FALSE(cpm_obj_ready(odd));
	ASSERT_FALSE(cpm_obj_ready(NULL));
	cJSON_Delete(ready);
	cJSON_Delete(not_ready);
	cJSON_Delete(odd);
}
