#include <stdlib.h>

#include "common/base/json.h"
#include "tests/unit/harness.h"

static const char node[] = "{\"metadata\":{\"name\":\"n1\",\"labels\":{\"topology.kubernetes.io/zone\":\"a\"},"
			   "\"generation\":3,\"big\":1e300,\"frac\":1.5,\"nul\":null},"
			   "\"spec\":{\"unschedulable\":true,\"taints\":[{\"key\":\"k0\"},{\"key\":\"k1\"}]}}";

TEST(json_typed_getters_by_path)
{
	cJSON *j = NULL;
	ASSERT_OK(json_parse(node, strlen(node), &j, NULL));
	const char *s = NULL;
	long long i = 0;
	bool b = false;
	const cJSON *o = NULL;
	ASSERT_OK(json_get_str(j, "metadata.name", &s));
	ASSERT_STREQ(s, "n1");
	ASSERT_OK(json_get_int(j, "metadata.generation", &i));
	ASSERT_EQ(i, 3);
	ASSERT_OK(json_get_bool(j, "spec.unschedulable", &b));
	ASSERT_TRUE(b);
	ASSERT_STREQ(json_str(j, "spec.taints.1.key"), "k1");
	ASSERT_OK(json_get_object(j, "metadata.labels", &o));
	ASSERT_STREQ(json_str_key(o, "topology.kubernetes.io/zone"), "a");
	ASSERT_OK(json_get_array(j, "spec.taints", &o));
	ASSERT_EQ(cJSON_GetArraySize(o), 2);
	cJSON_Delete(j);
}

TEST(json_missing_and_wrong_type)
{
	cJSON *j = NULL;
	ASSERT_OK(json_parse(node, strlen(node), &j, NULL));
	const char *s = "untouched";
	long long i = 7;
	char msg[128];
	ASSERT_ERR(json_get_str(j, "metadata.namespace", &s), ENOENT);
	ASSERT_ERR(json_get_str(j, "metadata.generation", &s), EBADMSG);
	ASSERT_ERR(json_get_str(j, "metadata.nul", &s), ENOENT);
	ASSERT_ERR(json_get_int(j, "metadata.frac", &i), EBADMSG);
	ASSERT_ERR(json_get_int(j, "metadata.big", &i), EBADMSG);
	ASSERT_ERR(json_get_str(j, "spec.taints.2.key", &s), ENOENT);
	ASSERT_ERR(json_get_str(j, "spec.taints.x", &s), ENOENT);
	ASSERT_STREQ(s, "untouched");
	ASSERT_EQ(i, 7);
	ASSERT_STREQ(json_errmsg(-ENOENT, "metadata.namespace", "a string", msg, sizeof(msg)),
		     "field 'metadata.namespace' is missing");
	ASSERT_STREQ(json_errmsg(-EBADMSG, "metadata.generation", "a string", msg, sizeof(msg)),
		     "field 'metadata.generation' is not a string");
	cJSON_Delete(j);
}

TEST(json_malformed_input)
{
	cJSON *j = NULL;
	size_t off = 0;
	const char *bad[] = { "", "{", "{\"a\":}", "[1,2", "{\"a\":1} x", "nul", "\"unterminated" };
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
		ASSERT_ERR(json_parse(bad[k], strlen(bad[k]), &j, &off), EBADMSG);
	ASSERT_ERR(json_parse("{\"a\":1} x", 9, &j, &off), EBADMSG);
	ASSERT_EQ(off, 8);
	/* trailing white space is fine; a length shorter than the text cuts it */
	ASSERT_OK(json_parse("{\"a\":1} \n", 9, &j, NULL));
	cJSON_Delete(j);
	ASSERT_ERR(json_parse("{\"a\":1}", 5, &j, NULL), EBADMSG);
}

TEST(json_set_creates_path)
{
	cJSON *j = cJSON_CreateObject();
	ASSERT_OK(json_set_str(j, "metadata.labels.app", "x"));
	ASSERT_OK(json_set_number(j, "spec.replicas", 3));
	ASSERT_OK(json_set_bool(j, "spec.paused", false));
	ASSERT_OK(json_set_str(j, "metadata.labels.app", "y"));
	_cleanup_free_ char *s = json_print(j);
	ASSERT_STREQ(s, "{\"metadata\":{\"labels\":{\"app\":\"y\"}},\"spec\":{\"replicas\":3,\"paused\":false}}");
	/* a scalar in the way is an error, not a silent overwrite */
	ASSERT_ERR(json_set_str(j, "spec.replicas.x", "z"), EINVAL);
	cJSON_Delete(j);
}
