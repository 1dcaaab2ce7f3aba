/* aws-k8s capa's pure pieces: CAPA's default subnet layout (pkg/internal/cidr), its tag sets
 * (sorted keys, CAPA's keys over additionalTags) and CAPI conditions. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "common/base/json.h"
#include "modules/capa/capa_cluster.h"
#include "tests/unit/harness.h"

/* the reference's table for 10.0.0.0/16 (capa.md §4) */
TEST(capa_default_subnets_as_capa)
{
	char pub[CAPA_MAX_ZONES][20], priv[CAPA_MAX_ZONES][20];

	ASSERT_OK(capa_default_subnets("10.0.0.0/16", 3, pub, priv));
	ASSERT_STREQ(pub[0], "10.0.0.0/20");
	ASSERT_STREQ(pub[1], "10.0.16.0/20");
	ASSERT_STREQ(pub[2], "10.0.32.0/20");
	ASSERT_STREQ(priv[0], "10.0.64.0/18");
	ASSERT_STREQ(priv[1], "10.0.128.0/18");
	ASSERT_STREQ(priv[2], "10.0.192.0/18");

	ASSERT_OK(capa_default_subnets("10.0.0.0/16", 2, pub, priv));
	ASSERT_STREQ(pub[0], "10.0.0.0/19");
	ASSERT_STREQ(pub[1], "10.0.32.0/19");
	ASSERT_STREQ(priv[0], "10.0.64.0/18");
	ASSERT_STREQ(priv[1], "10.0.128.0/18");

	ASSERT_OK(capa_default_subnets("10.0.0.0/16", 1, pub, priv));
	ASSERT_STREQ(pub[0], "10.0.0.0/17");
	ASSERT_STREQ(priv[0], "10.0.128.0/17");

	/* host bits of the VPC CIDR are dropped; another base */
	ASSERT_OK(capa_default_subnets("192.168.7.9/20", 3, pub, priv));
	ASSERT_STREQ(pub[0], "192.168.0.0/24");
	ASSERT_STREQ(priv[2], "192.168.12.0/22");
}

TEST(capa_default_subnets_refuses_bad_input)
{
	char pub[CAPA_MAX_ZONES][20], priv[CAPA_MAX_ZONES][20];

	ASSERT_ERR(capa_default_subnets("10.0.0.0", 3, pub, priv), EINVAL);
	ASSERT_ERR(capa_default_subnets("10.0.0.300/16", 3, pub, priv), EINVAL);
	ASSERT_ERR(capa_default_subnets("10.0.0.0/33", 3, pub, priv), EINVAL);
	ASSERT_ERR(capa_default_subnets("10.0.0.0/16", 0, pub, priv), EINVAL);
	ASSERT_ERR(capa_default_subnets("10.0.0.0/16", CAPA_MAX_ZONES + 1, pub, priv), EINVAL);
	/* smaller than a /28 per subnet */
	ASSERT_ERR(capa_default_subnets("10.0.0.0/26", 3, pub, priv), EINVAL);
}

TEST(capa_tags_sorted_capa_keys_win)
{
	struct capa_tags t = {0};
	cJSON *add = cJSON_Parse("{\"team\":\"infra\",\"Name\":\"mine\","
				 "\"sigs.k8s.io/cluster-api-provider-aws/role\":\"x\"}");

	ASSERT_TRUE(add != NULL);
	ASSERT_OK(capa_tags_build(&t, add, "c1", "common", "c1-vpc"));
	ASSERT_EQ(t.n, 4);
	ASSERT_STREQ(t.key[0], "Name");
	ASSERT_STREQ(t.value[0], "c1-vpc");
	ASSERT_STREQ(t.key[1], "sigs.k8s.io/cluster-api-provider-aws/cluster/c1");
	ASSERT_STREQ(t.value[1], "owned");
	ASSERT_STREQ(t.key[2], "sigs.k8s.io/cluster-api-provider-aws/role");
	ASSERT_STREQ(t.value[2], "common");
	ASSERT_STREQ(t.key[3], "team");
	capa_tags_release(&t);
	cJSON_Delete(add);
}

TEST(capa_condition_keeps_transition_time)
{
	cJSON *st = cJSON_CreateObject();

	ASSERT_EQ(capa_condition_set(st, "VpcReady", "False", "Warning", "Failed", "boom"), 1);
	ASSERT_EQ(capa_condition_set(st, "VpcReady", "False", "Warning", "Failed", "boom"), 0);
	cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(st, "conditions"), 0);
	cJSON_ReplaceItemInObject(c, "lastTransitionTime", cJSON_CreateString("2000-01-01T00:00:00Z"));
	/* the message changes, the status does not: the time stays */
	ASSERT_EQ(capa_condition_set(st, "VpcReady", "False", "Warning", "Failed", "again"), 1);
	ASSERT_STREQ(json_str(c, "lastTransitionTime"), "2000-01-01T00:00:00Z");
	/* True drops severity, reason and message, and moves the time */
	ASSERT_EQ(capa_condition_set(st, "VpcReady", "True", NULL, NULL, NULL), 1);
	ASSERT_TRUE(json_str(c, "reason") == NULL && json_str(c, "severity") == NULL);
	ASSERT_TRUE(strcmp(json_str(c, "lastTransitionTime"), "2000-01-01T00:00:00Z") != 0);
	cJSON_Delete(st);
}

/* CAPA's test vector (pkg/hash), reproduced with Python's hashlib.blake2b(digest_size=28) */
TEST(capa_lb_hashed_name_as_capa)
{
	char out[33];
	uint8_t d[64];

	capa_lb_hashed_name("01234567890123456789012", out);
	ASSERT_STREQ(out, "26o3cjil5at5qn27vukn5x09b3ql-k8s");
	/* RFC 7693 appendix A: BLAKE2b-512("abc") starts ba 80 a5 3f */
	capa_blake2b("abc", 3, d, 64);
	ASSERT_EQ(d[0], 0xba);
	ASSERT_EQ(d[1], 0x80);
	ASSERT_EQ(d[2], 0xa5);
	ASSERT_EQ(d[3], 0x3f);
	ASSERT_EQ(d[63], 0x23);
	/* more than one block, a 28-byte digest: 06 0e a1 9f ... (Python's hashlib) */
	char big[300];
	memset(big, 'x', sizeof(big));
	capa_blake2b(big, sizeof(big), d, 28);
	ASSERT_EQ(d[0], 0x06);
	ASSERT_EQ(d[1], 0x0e);
	ASSERT_EQ(d[2], 0xa1);
	ASSERT_EQ(d[27], 0x8e);
}
