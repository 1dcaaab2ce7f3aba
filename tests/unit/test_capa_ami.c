/* capa AMI lookup: the name pattern, the newest image, the architecture, the cache. */
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/json.h"
#include "modules/capa/capa_ami.h"
#include "tests/unit/harness.h"

/* A fake EC2: canned replies by action, and what was asked. */
struct fake_ec2 {
	const char *images, *types;
	int n_images, n_types;
	char last_name[256], last_owner[64], last_arch[32];
};

static int fake_call(void *ud, const char *action, const struct aws_query *q,
		     struct aws_reply *rep)
{
	struct fake_ec2 *f = ud;
	const char *xml;

	if (strcmp(action, "DescribeImages") == 0) {
		f->n_images++;
		/* the filters in CAPA's order: owner-id, name, architecture, state, hvm */
		str_copy(f->last_owner, sizeof(f->last_owner), aws_query_get(q, "Filter.1.Value.1"));
		str_copy(f->last_name, sizeof(f->last_name), aws_query_get(q, "Filter.2.Value.1"));
		str_copy(f->last_arch, sizeof(f->last_arch), aws_query_get(q, "Filter.3.Value.1"));
		xml = f->images;
	} else {
		f->n_types++;
		xml = f->types;
	}
	int r = aws_xml_parse(xml, strlen(xml), &rep->doc, NULL, 0);
	if (r < 0)
		return r;
	rep->root = rep->result = xmlDocGetRootElement(rep->doc);
	return 0;
}

static const char images_xml[] =
    "<DescribeImagesResponse><imagesSet>"
    "<item><imageId>ami-old</imageId><creationDate>2025-01-02T03:04:05.000Z</creationDate></item>"
    "<item><imageId>ami-new</imageId><creationDate>2026-03-01T00:00:00.000Z</creationDate></item>"
    "<item><imageId>ami-mid</imageId><creationDate>2025-11-30T23:59:59.000Z</creationDate></item>"
    "</imagesSet></DescribeImagesResponse>";
static const char no_images_xml[] = "<DescribeImagesResponse><imagesSet/></DescribeImagesResponse>";
static const char arm_xml[] =
    "<DescribeInstanceTypesResponse><instanceTypeSet><item><instanceType>m7g.large</instanceType>"
    "<processorInfo><supportedArchitectures><item>arm64</item></supportedArchitectures>"
    "</processorInfo></item></instanceTypeSet></DescribeInstanceTypesResponse>";
static const char both_xml[] =
    "<DescribeInstanceTypesResponse><instanceTypeSet><item><instanceType>t3.large</instanceType>"
    "<processorInfo><supportedArchitectures><item>i386</item><item>arm64</item>"
    "<item>x86_64</item></supportedArchitectures></processorInfo></item></instanceTypeSet>"
    "</DescribeInstanceTypesResponse>";
static const char no_type_xml[] =
    "<DescribeInstanceTypesResponse><instanceTypeSet/></DescribeInstanceTypesResponse>";

TEST(capa_ami_name_pattern)
{
	char out[256];
	ASSERT_OK(capa_ami_name(NULL, NULL, "v1.31.2", out, sizeof(out)));
	ASSERT_STREQ(out, "capa-ami-ubuntu-24.04-?1.31.2-*");
	ASSERT_OK(capa_ami_name("img-{{.K8sVersion}}-{{.BaseOS}}-{{.K8sVersion}}", "flatcar",
				"1.30.0", out, sizeof(out)));
	ASSERT_STREQ(out, "img-1.30.0-flatcar-1.30.0");
	ASSERT_ERR(capa_ami_name(NULL, NULL, "", out, sizeof(out)), EINVAL);
	ASSERT_ERR(capa_ami_name(NULL, NULL, "v", out, sizeof(out)), EINVAL);
	ASSERT_ERR(capa_ami_name(NULL, NULL, "v1.31.2", out, 10), ENAMETOOLONG);
}

TEST(capa_ami_newest_wins_and_is_cached)
{
	struct fake_ec2 f = {.images = images_xml, .types = both_xml};
	char err[256] = "", out[64];
	struct capa_ami_caller c = {.fn = fake_call, .ud = &f, .region = "eu-west-1", .err = err,
				    .errlen = sizeof(err)};
	cJSON *mspec = NULL, *cspec = NULL;
	const char *ms = "{\"instanceType\":\"t3.large\",\"imageLookupBaseOS\":\"ubuntu-22.04\"}";
	const char *cs = "{\"imageLookupOrg\":\"111122223333\"}";

	capa_ami_cache_clear();
	ASSERT_OK(json_parse(ms, strlen(ms), &mspec, NULL));
	ASSERT_OK(json_parse(cs, strlen(cs), &cspec, NULL));
	ASSERT_OK(capa_ami_for_machine(&c, mspec, cspec, "v1.31.2", "t3.large", out, sizeof(out)));
	ASSERT_STREQ(out, "ami-new");
	ASSERT_STREQ(f.last_owner, "111122223333"); /* the cluster's org: the machine has none */
	ASSERT_STREQ(f.last_name, "capa-ami-ubuntu-22.04-?1.31.2-*");
	ASSERT_STREQ(f.last_arch, "x86_64"); /* x86_64 is preferred when both are there */
	/* ten more machines of the same version: no call */
	for (int i = 0; i < 10; i++)
		ASSERT_OK(capa_ami_for_machine(&c, mspec, cspec, "v1.31.2", "t3.large", out,
					       sizeof(out)));
	ASSERT_EQ(f.n_images, 1);
	ASSERT_EQ(f.n_types, 1);
	/* another region is another key */
	c.region = "us-east-1";
	ASSERT_OK(capa_ami_for_machine(&c, mspec, cspec, "v1.31.2", "t3.large", out, sizeof(out)));
	ASSERT_EQ(f.n_images, 2);
	/* an arm64-only type */
	f.types = arm_xml;
	ASSERT_OK(capa_ami_arch(&c, "m7g.large", out, sizeof(out)));
	ASSERT_STREQ(out, "arm64");
	cJSON_Delete(mspec);
	cJSON_Delete(cspec);
	capa_ami_cache_clear();
}

TEST(capa_ami_none_is_a_clear_error_and_not_cached)
{
	struct fake_ec2 f = {.images = no_images_xml, .types = no_type_xml};
	char err[256] = "", out[64];
	struct capa_ami_caller c = {.fn = fake_call, .ud = &f, .err = err, .errlen = sizeof(err)};

	capa_ami_cache_clear();
	ASSERT_ERR(capa_ami_lookup(&c, "819546954734", "capa-ami-x-*", "x86_64", out, sizeof(out)),
		   ENOENT);
	ASSERT_CONTAINS(err, "no available hvm image of owner 819546954734");
	ASSERT_ERR(capa_ami_lookup(&c, "819546954734", "capa-ami-x-*", "x86_64", out, sizeof(out)),
		   ENOENT);
	ASSERT_EQ(f.n_images, 2);
	ASSERT_ERR(capa_ami_arch(&c, "nope.large", out, sizeof(out)), ENOENT);
	ASSERT_CONTAINS(err, "nope.large");
	ASSERT_ERR(capa_ami_for_machine(&c, NULL, NULL, NULL, "t3.large", out, sizeof(out)), EINVAL);
	ASSERT_CONTAINS(err, "spec.version");
	capa_ami_cache_clear();
}
