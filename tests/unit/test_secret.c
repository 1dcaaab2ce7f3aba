#include <stdlib.h>
#include <string.h>

#include "common/base/secret.h"
#include "tests/unit/harness.h"

TEST(secret_wipe_zeroes_exactly_n_bytes)
{
	char b[8] = "abcdefg";
	secret_wipe(b + 1, 3);
	ASSERT_TRUE(memcmp(b, "a\0\0\0efg", 8) == 0);
	secret_wipe(NULL, 5); /* NULL and 0 are fine */
	secret_wipe(b, 0);
	ASSERT_EQ(b[0], 'a');
}

TEST(secret_wipe_str_zeroes_up_to_the_terminator)
{
	char s[8] = "tok";
	s[4] = 'x'; /* past the terminator: untouched */
	secret_wipe_str(s);
	ASSERT_TRUE(memcmp(s, "\0\0\0\0x", 5) == 0);
	secret_wipe_str(NULL);
}

TEST(secret_free_and_freep)
{
	char *s = strdup("s3cr3t");
	ASSERT_NOT_NULL(s);
	secret_freep(&s);
	ASSERT_NULL(s);
	secret_freep(&s); /* twice is fine */
	secret_freep(NULL);
	secret_free(NULL);
	secret_free(strdup("x"));
	{
		_cleanup_secret_ char *t = strdup("token");
		ASSERT_NOT_NULL(t);
	}
}
