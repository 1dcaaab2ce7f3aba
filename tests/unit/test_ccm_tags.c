/* The tagging controller's pure pieces: the checksum label, --tags and --resources, the batch
 * planner and the reading of a NotFound error. */
#include <stdlib.h>

#include "common/base/buf.h"
#include "modules/ccm/ccm_tags.h"
#include "tests/unit/harness.h"

static int parse(const char *list, struct ccm_tagset *t, char *err, size_t n)
{
	char **v = NULL;
	int r = strv_split(list, ',', &v);
	if (r >= 0)
		r = ccm_tagset_parse(v, t, err, n);
	strv_free(v);
	return r;
}

/* upstream's test values: MD5 of "key1=value1" and of "key1=value1,key2=value2" */
TEST(ccm_tags_checksum_as_upstream)
{
	char sum[CCM_TAGGING_CHECKSUM_LEN + 1];
	const char *k1[] = {"key1"}, *v1[] = {"value1"};
	ASSERT_OK(ccm_tags_checksum(k1, v1, 1, sum));
	ASSERT_STREQ(sum, "9767c4972ba72e87ab553bad2afde741");

	/* any order in, the same sum: the pairs are sorted first */
	const char *k2[] = {"key2", "key1"}, *v2[] = {"value2", "value1"};
	ASSERT_OK(ccm_tags_checksum(k2, v2, 2, sum));
	ASSERT_STREQ(sum, "c812faa65d1d5e5aefa6b069b3da39df");

	/* sorted as "key=value" strings, byte order ('-' before '='), as Go's sort.Strings */
	const char *k3[] = {"a", "Z", "a-b"}, *v3[] = {"2", "z", "1"};
	ASSERT_OK(ccm_tags_checksum(k3, v3, 3, sum));
	ASSERT_STREQ(sum, "a52e02f6c6b63426f7e64ff579c5c4df");
}

TEST(ccm_tags_parse)
{
	struct ccm_tagset t = {0};
	char err[256] = "";

	ASSERT_OK(parse("key2=value2,key1=value1", &t, err, sizeof(err)));
	ASSERT_EQ(t.n, 2);
	ASSERT_STREQ(t.keys[0], "key1"); /* sorted, as sent in Tag.N */
	ASSERT_STREQ(t.values[1], "value2");
	ASSERT_STREQ(t.checksum, "c812faa65d1d5e5aefa6b069b3da39df");
	ccm_tagset_release(&t);

	/* a later item with the same key wins (pflag's StringToString); an empty value is one */
	ASSERT_OK(parse("team=a,env=,team=storage", &t, err, sizeof(err)));
	ASSERT_EQ(t.n, 2);
	ASSERT_STREQ(t.keys[0], "env");
	ASSERT_STREQ(t.values[0], "");
	ASSERT_STREQ(t.values[1], "storage");
	ccm_tagset_release(&t);

	ASSERT_ERR(ccm_tagset_parse(NULL, &t, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "--tags must not be empty and must be a form of key=value");
	ASSERT_ERR(parse("novalue", &t, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "key=value");
	ASSERT_ERR(parse("=v", &t, err, sizeof(err)), EINVAL);
	/* upstream: keys are label-sized */
	ASSERT_ERR(parse("k234567890123456789012345678901234567890123456789012345678901234=v", &t,
			 err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "must not be more than 63 characters");
	ASSERT_OK(parse("k23456789012345678901234567890123456789012345678901234567890123=v", &t, err,
			sizeof(err)));
	ccm_tagset_release(&t);
	/* a character AWS refuses in a key */
	ASSERT_ERR(parse("a*b=v", &t, err, sizeof(err)), EINVAL);
	ASSERT_EQ(t.n, 0);
}

TEST(ccm_tags_resources)
{
	char err[256] = "";
	char inst[] = "instance", vol[] = "volume";
	char *instance[] = {inst, NULL}, *bad[] = {inst, vol, NULL};

	ASSERT_OK(ccm_tagging_resources_check(instance, err, sizeof(err)));
	ASSERT_ERR(ccm_tagging_resources_check(NULL, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "--resources must not be empty");
	ASSERT_ERR(ccm_tagging_resources_check(bad, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "volume is not a supported resource");
}

/* own first, the ineligible skipped, a shared ID riding along, max distinct IDs */
TEST(ccm_tags_plan)
{
	struct ccm_tag_cand c[] = {
	    {"i-a", true}, {"i-b", false}, {"i-c", true}, {"i-a", true}, {"i-d", true},
	    {"i-e", true}, {NULL, true},
	};
	size_t out[ARRAY_SIZE(c)], ids = 0;

	size_t n = ccm_tag_plan(c, ARRAY_SIZE(c), 2, 3, out, &ids);
	ASSERT_EQ(n, 4);
	ASSERT_EQ(ids, 3);
	ASSERT_EQ(out[0], 2);
	ASSERT_EQ(out[1], 0);
	ASSERT_EQ(out[2], 3); /* i-a again: no extra ID */
	ASSERT_EQ(out[3], 4);

	/* the own candidate ineligible: it is not first, and never in */
	n = ccm_tag_plan(c, ARRAY_SIZE(c), 1, 100, out, &ids);
	ASSERT_EQ(n, 5);
	ASSERT_EQ(ids, 4);
	ASSERT_NE(out[0], 1);
	for (size_t i = 0; i < n; i++)
		ASSERT_NE(out[i], 1);

	/* one per call (--tagging-controller-enable-batching=false): the own one alone */
	n = ccm_tag_plan(c, ARRAY_SIZE(c), 4, 1, out, &ids);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(out[0], 4);
}

/* 250 Nodes waiting: calls of 100, 100 and 50, every one in exactly one call */
TEST(ccm_tags_plan_batches_cover_every_node_once)
{
	enum { N = 250 };
	struct ccm_tag_cand c[N];
	char names[N][24];
	size_t out[N], ids, calls = 0, covered[N] = {0};

	for (size_t i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "i-%04zu", i);
		c[i] = (struct ccm_tag_cand){names[i], true};
	}
	for (size_t own = N - 1;; own--) {
		if (!c[own].eligible) {
			if (own == 0)
				break;
			continue;
		}
		size_t n = ccm_tag_plan(c, N, own, 100, out, &ids);
		ASSERT_EQ(n, ids);
		ASSERT_LE(ids, 100);
		ASSERT_EQ(out[0], own);
		for (size_t i = 0; i < n; i++) {
			covered[out[i]]++;
			c[out[i]].eligible = false; /* done */
		}
		calls++;
		if (own == 0)
			break;
	}
	ASSERT_EQ(calls, 3);
	for (size_t i = 0; i < N; i++)
		ASSERT_EQ(covered[i], 1);
}

TEST(ccm_tags_notfound_ids)
{
	const char *ids[] = {"i-0a", "i-0b", "i-0c", "i-0"};
	bool named[4] = {false};

	ASSERT_EQ(ccm_tag_notfound_ids("The instance IDs 'i-0a, i-0c' do not exist", ids, 4, named),
		  2);
	ASSERT_TRUE(named[0] && !named[1] && named[2] && !named[3]);
	memset(named, 0, sizeof(named));
	ASSERT_EQ(ccm_tag_notfound_ids("The instance ID 'i-0b' does not exist", ids, 4, named), 1);
	ASSERT_TRUE(named[1]);
	/* a prefix of an ID is not the ID; an "i-" inside a word is no ID */
	memset(named, 0, sizeof(named));
	ASSERT_EQ(ccm_tag_notfound_ids("xi-0 unknown, ami-0a", ids, 4, named), 0);
	ASSERT_EQ(ccm_tag_notfound_ids(NULL, ids, 4, named), 0);
}
