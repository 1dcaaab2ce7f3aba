/* The AWSMachineClass rendering (common/aws/machineclass.h) against the table in
 * tests/data/machineclass/cases.json: each case gives the node group, the zone, the
 * node-manager "aws" object and the AWSInstanceClass spec, and either the whole machine class
 * expected or a part of the error sentence. */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "common/aws/machineclass.h"
#include "common/base/json.h"
#include "tests/unit/harness.h"

TEST(aws_machineclass_name)
{
	char out[64];
	ASSERT_OK(aws_machineclass_name("worker", "0f1e2d3c-aaaa-bbbb-cccc-000000000001",
					"eu-central-1a", out, sizeof(out)));
	/* sha256("0f1e2d3c-aaaa-bbbb-cccc-000000000001eu-central-1a")[:8], from sha256sum */
	ASSERT_STREQ(out, "worker-41ee9f90");
	ASSERT_ERR(aws_machineclass_name("worker", "u", "z", out, 9), ENAMETOOLONG);
	ASSERT_ERR(aws_machineclass_name("worker", "", "z", out, sizeof(out)), EINVAL);
	ASSERT_ERR(aws_machineclass_name("worker", "u", NULL, out, sizeof(out)), EINVAL);
}

TEST(aws_machineclass_table)
{
	size_t len;
	char *text = test_read_file(test_data("machineclass/cases.json"), &len);
	cJSON *doc = NULL;
	ASSERT_NOT_NULL(text);
	int r = json_parse(text, len, &doc, NULL);
	free(text);
	ASSERT_OK(r);
	const char *uuid = json_str(doc, "cluster_uuid");
	const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "cases"), *c;
	int n = 0;
	cJSON_ArrayForEach(c, cases)
	{
		struct aws_machineclass_in in = {
			.node_group = json_str(c, "node_group"),
			.cluster_uuid = uuid,
			.zone = json_str(c, "zone"),
			.cloud = cJSON_GetObjectItemCaseSensitive(c, "cloud"),
			.class_spec = cJSON_GetObjectItemCaseSensitive(c, "class"),
		};
		const char *name = json_str(c, "name"), *want_err = json_str(c, "error");
		const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "want");
		char err[256] = "";
		cJSON *mc = NULL;
		r = aws_machineclass_render(&in, &mc, err, sizeof(err));
		if (want_err) {
			if (r != -EINVAL || !strstr(err, want_err)) {
				test_fail(__FILE__, __LINE__, "case \"%s\": r=%d err=\"%s\", want -EINVAL and \"%s\"",
					  name, r, err, want_err);
				cJSON_Delete(mc);
				break;
			}
			ASSERT_NULL(mc);
		} else {
			bool same = r == 0 && cJSON_Compare(mc, want, true);
			if (!same) {
				char *got = mc ? cJSON_PrintUnformatted(mc) : NULL;
				test_fail(__FILE__, __LINE__, "case \"%s\": r=%d err=\"%s\" got %s", name, r,
					  err, got ? got : "(null)");
				free(got);
				cJSON_Delete(mc);
				break;
			}
			cJSON_Delete(mc);
		}
		n++;
	}
	cJSON_Delete(doc);
	ASSERT_EQ(n, 14);
}
