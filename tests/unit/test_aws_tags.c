/* AWS tag keys and the Kubernetes cluster tag. */
#include <stdlib.h>
#include <string.h>

#include "common/aws/tags.h"
#include "tests/unit/harness.h"

static char *repeat(const char *unit, int n)
{
	size_t ul = strlen(unit);
	char *s = malloc(ul * (size_t)n + 1);
	if (!s)
		return NULL;
	for (int i = 0; i < n; i++)
		memcpy(s + ul * (size_t)i, unit, ul);
	s[ul * (size_t)n] = 0;
	return s;
}

TEST(aws_tag_key_limits)
{
	char err[256];
	_cleanup_free_ char *k128 = repeat("k", 128), *k129 = repeat("k", 129);
	/* 128 two-byte characters are 256 bytes but 128 characters, as AWS counts */
	_cleanup_free_ char *e128 = repeat("\xc3\xa9", 128), *e129 = repeat("\xc3\xa9", 129);

	ASSERT_OK(aws_tag_key_check(k128, err, sizeof(err)));
	ASSERT_ERR(aws_tag_key_check(k129, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "has more than 128 characters");
	ASSERT_OK(aws_tag_key_check(e128, err, sizeof(err)));
	ASSERT_ERR(aws_tag_key_check(e129, err, sizeof(err)), EINVAL);
	ASSERT_ERR(aws_tag_key_check("", err, sizeof(err)), EINVAL);
	ASSERT_OK(aws_tag_key_check("kubernetes.io/cluster/c1", err, sizeof(err)));
	ASSERT_OK(aws_tag_key_check("a b+c-d=e.f_g:h/i@j", err, sizeof(err)));
	ASSERT_ERR(aws_tag_key_check("a*b", err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "tag key \"a...\": the character '*' at byte 1");
}

TEST(aws_cluster_id_check_lengths)
{
	char err[256];
	_cleanup_free_ char *id106 = repeat("x", 106), *id107 = repeat("x", 107),
			    *big = repeat("x", 1000000);

	ASSERT_OK(aws_cluster_id_check(id106, err, sizeof(err)));
	ASSERT_ERR(aws_cluster_id_check(id107, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "too long: the tag key kubernetes.io/cluster/<ID> would have more "
			     "than 128 characters (the ID at most 106)");
	ASSERT_ERR(aws_cluster_id_check(big, err, sizeof(err)), EINVAL);
	/* the message quotes 40 bytes, not the million */
	ASSERT_LT(strlen(err), 200);
	ASSERT_CONTAINS(err, "cluster ID \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\"");
	ASSERT_ERR(aws_cluster_id_check("", err, sizeof(err)), EINVAL);
}

TEST(aws_cluster_id_check_characters)
{
	char err[256];
	static const char *const good[] = {"c1", "8a3e2c1b-5d4f-4e6a-9b7c-0d1e2f3a4b5c",
					   "my cluster", "a+b=c.d_e:f/g@h",
					   "\xe4\xb8\xad\xe6\x96\x87"};
	static const char *const bad[] = {"a,b",   "a\nb",     "a\rb",	       "a\tb",
					  "a\"b",  "a*b",      "a\x7f",	       "a#b",
					  "a\xff", "\xc0\xaf", "\xed\xa0\x80", "\xe4\xb8"};

	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		ASSERT_OK(aws_cluster_id_check(good[i], err, sizeof(err)));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		err[0] = 0;
		ASSERT_ERR(aws_cluster_id_check(bad[i], err, sizeof(err)), EINVAL);
		ASSERT_CONTAINS(err, "cluster ID \"");
	}
	aws_cluster_id_check("ab\ncd", err, sizeof(err));
	/* a control character is shown escaped, and what follows it is not quoted */
	ASSERT_CONTAINS(err, "cluster ID \"ab...\": the character \\x0a at byte 2");
	aws_cluster_id_check("\xe4\xb8\xad\xff", err, sizeof(err));
	ASSERT_CONTAINS(err, "cluster ID \"\xe4\xb8\xad...\": invalid UTF-8 at byte 3");
}
