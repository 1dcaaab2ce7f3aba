/* capa's presets of Deckhouse's layouts (capa_preset.c): the annotation, Terraform's subnet cut,
 * what the preset fills and what it leaves to the spec, and the machines' public subnets. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>

#include "common/base/json.h"
#include "modules/capa/capa_byo.h"
#include "modules/capa/capa_machine.h"
#include "tests/unit/harness.h"

/* NULL on a parse error: the test's next assertion fails */
static cJSON *parse(const char *s)
{
	cJSON *o = NULL;
	return json_parse(s, strlen(s), &o, NULL) < 0 ? NULL : o;
}

#define WITH_LAYOUT(v) "{\"metadata\":{\"annotations\":{\"aws-k8s.deckhouse.io/layout\":\"" v "\"}},"

TEST(capa_layout_annotation)
{
	cJSON *o = parse("{\"metadata\":{\"name\":\"c\"}}");
	ASSERT_EQ(capa_layout_of(o), CAPA_LAYOUT_NONE);
	cJSON_Delete(o);
	o = parse(WITH_LAYOUT("WithoutNAT") "\"spec\":{}}");
	ASSERT_EQ(capa_layout_of(o), CAPA_LAYOUT_WITHOUT_NAT);
	ASSERT_TRUE(capa_preset_public_machines(o));
	cJSON_Delete(o);
	o = parse(WITH_LAYOUT("WithNAT") "\"spec\":{}}");
	ASSERT_EQ(capa_layout_of(o), CAPA_LAYOUT_WITH_NAT);
	ASSERT_FALSE(capa_preset_public_machines(o));
	cJSON_Delete(o);
	/* exact names only: Deckhouse's deprecated Standard, another case */
	o = parse(WITH_LAYOUT("Standard") "\"spec\":{}}");
	ASSERT_ERR(capa_layout_of(o), EINVAL);
	cJSON_Delete(o);
	o = parse(WITH_LAYOUT("withnat") "\"spec\":{}}");
	ASSERT_ERR(capa_layout_of(o), EINVAL);
	cJSON_Delete(o);
}

/* Terraform: cidrsubnet(cidr, ceil(log2(2 * zones)), i) public, i + zones internal */
TEST(capa_layout_subnets_as_terraform)
{
	char pub[CAPA_MAX_ZONES][20], priv[CAPA_MAX_ZONES][20];

	ASSERT_OK(capa_layout_subnets("10.0.0.0/16", 3, pub, priv));
	ASSERT_STREQ(pub[0], "10.0.0.0/19");
	ASSERT_STREQ(pub[1], "10.0.32.0/19");
	ASSERT_STREQ(pub[2], "10.0.64.0/19");
	ASSERT_STREQ(priv[0], "10.0.96.0/19");
	ASSERT_STREQ(priv[1], "10.0.128.0/19");
	ASSERT_STREQ(priv[2], "10.0.160.0/19");
	ASSERT_OK(capa_layout_subnets("10.0.0.0/16", 2, pub, priv));
	ASSERT_STREQ(pub[1], "10.0.64.0/18");
	ASSERT_STREQ(priv[0], "10.0.128.0/18");
	ASSERT_OK(capa_layout_subnets("172.16.5.0/22", 1, pub, priv)); /* host bits dropped */
	ASSERT_STREQ(pub[0], "172.16.4.0/23");
	ASSERT_STREQ(priv[0], "172.16.6.0/23");
	ASSERT_ERR(capa_layout_subnets("10.0.0.0/27", 2, pub, priv), EINVAL); /* under /28 */
	ASSERT_ERR(capa_layout_subnets("10.0.0.0", 2, pub, priv), EINVAL);
	ASSERT_ERR(capa_layout_subnets("10.0.0.300/16", 2, pub, priv), EINVAL);
	ASSERT_ERR(capa_layout_subnets("10.0.0.0/16", 0, pub, priv), EINVAL);
	ASSERT_ERR(capa_layout_subnets(NULL, 2, pub, priv), EINVAL);
}

static void scope_of(struct capa_scope *s, cJSON *o)
{
	*s = (struct capa_scope){ .obj = o, .name = "c1" };
}

TEST(capa_preset_fills_the_spec)
{
	char zones[2][64] = { "us-east-1a", "us-east-1b" };
	struct capa_scope s;
	cJSON *o = parse(WITH_LAYOUT("WithNAT") "\"spec\":{\"network\":{\"vpc\":{\"cidrBlock\":\"10.0.0.0/16\"}}}}");
	cJSON *net = (cJSON *)json_find(o, "spec.network");

	scope_of(&s, o);
	ASSERT_OK(capa_preset_apply(&s));
	ASSERT_TRUE(cJSON_IsTrue(json_find(o, "spec.bastion.enabled")));
	ASSERT_TRUE(s.spec_changed);
	ASSERT_EQ(capa_preset_subnets(&s, net, zones, 2), 1);
	const cJSON *l = json_find(o, "spec.network.subnets");
	ASSERT_EQ(cJSON_GetArraySize(l), 4);
	ASSERT_STREQ(json_str(cJSON_GetArrayItem(l, 0), "cidrBlock"), "10.0.0.0/18");
	ASSERT_STREQ(json_str(cJSON_GetArrayItem(l, 1), "availabilityZone"), "us-east-1b");
	ASSERT_TRUE(cJSON_IsTrue(json_find(cJSON_GetArrayItem(l, 1), "isPublic")));
	ASSERT_STREQ(json_str(cJSON_GetArrayItem(l, 2), "cidrBlock"), "10.0.128.0/18");
	ASSERT_TRUE(cJSON_IsFalse(json_find(cJSON_GetArrayItem(l, 3), "isPublic")));
	cJSON_Delete(o);

	/* WithoutNAT: public subnets only, no bastion */
	o = parse(WITH_LAYOUT("WithoutNAT") "\"spec\":{\"network\":{\"vpc\":{\"cidrBlock\":\"10.0.0.0/16\"}}}}");
	net = (cJSON *)json_find(o, "spec.network");
	scope_of(&s, o);
	ASSERT_OK(capa_preset_apply(&s));
	ASSERT_NULL(json_find(o, "spec.bastion"));
	ASSERT_EQ(capa_preset_subnets(&s, net, zones, 2), 1);
	l = json_find(o, "spec.network.subnets");
	ASSERT_EQ(cJSON_GetArraySize(l), 2);
	ASSERT_TRUE(cJSON_IsTrue(json_find(cJSON_GetArrayItem(l, 1), "isPublic")));
	cJSON_Delete(o);

	/* the spec wins: bastion disabled stays disabled */
	o = parse(WITH_LAYOUT("WithNAT") "\"spec\":{\"bastion\":{\"enabled\":false}}}");
	scope_of(&s, o);
	ASSERT_OK(capa_preset_apply(&s));
	ASSERT_TRUE(cJSON_IsFalse(json_find(o, "spec.bastion.enabled")));
	ASSERT_FALSE(s.spec_changed);
	cJSON_Delete(o);

	/* no layout: nothing filled */
	o = parse("{\"spec\":{\"network\":{\"vpc\":{\"cidrBlock\":\"10.0.0.0/16\"}}}}");
	scope_of(&s, o);
	ASSERT_OK(capa_preset_apply(&s));
	ASSERT_EQ(capa_preset_subnets(&s, (cJSON *)json_find(o, "spec.network"), zones, 2), 0);
	ASSERT_NULL(json_find(o, "spec.network.subnets"));
	cJSON_Delete(o);

	/* an unknown layout: a clear error, nothing filled */
	o = parse(WITH_LAYOUT("Standard") "\"spec\":{}}");
	scope_of(&s, o);
	ASSERT_ERR(capa_preset_apply(&s), EINVAL);
	ASSERT_CONTAINS(s.err, "unknown layout \"Standard\"");
	ASSERT_CONTAINS(s.err, "WithoutNAT or WithNAT");
	ASSERT_FALSE(s.spec_changed);
	cJSON_Delete(o);
}

/* WithoutNAT has no private subnet: a machine without publicIP goes into a public one */
TEST(capa_preset_machines_public)
{
	cJSON *c = parse(WITH_LAYOUT("WithoutNAT") "\"spec\":{\"network\":{\"subnets\":["
			 "{\"id\":\"subnet-a\",\"availabilityZone\":\"us-east-1a\",\"isPublic\":true},"
			 "{\"id\":\"subnet-b\",\"availabilityZone\":\"us-east-1b\",\"isPublic\":true}]}}}");
	cJSON *spec = parse("{}");
	struct capa_machine_ctx m = { .cluster = "c1", .spec = spec, .awscluster = c };
	const char *id = NULL;
	char err[256];

	ASSERT_OK(capa_pick_subnet(&m, "us-east-1b", &id, err, sizeof(err)));
	ASSERT_STREQ(id, "subnet-b");
	ASSERT_OK(capa_pick_subnet(&m, NULL, &id, err, sizeof(err)));
	ASSERT_STREQ(id, "subnet-a");
	/* without the layout the same cluster has no subnet for it (CAPA: private by default) */
	cJSON_DeleteItemFromObjectCaseSensitive(c, "metadata");
	ASSERT_ERR(capa_pick_subnet(&m, "us-east-1b", &id, err, sizeof(err)), ENOENT);
	cJSON_Delete(spec);
	cJSON_Delete(c);
}
