#include <stdint.h>
#include <stdlib.h>

#include "common/base/buf.h"
#include "tests/unit/harness.h"

TEST(buf_append_grows_and_terminates)
{
	_cleanup_buf_ struct buf b = BUF_INIT(0);
	for (int i = 0; i < 1000; i++)
		ASSERT_OK(buf_puts(&b, "abc"));
	ASSERT_EQ(b.len, 3000);
	ASSERT_EQ(b.data[b.len], 0);
	ASSERT_OK(buf_printf(&b, "%d-%s", 42, "x"));
	ASSERT_STREQ(b.data + 3000, "42-x");
}

TEST(buf_cap_is_hard_and_leaves_buffer_unchanged)
{
	_cleanup_buf_ struct buf b = BUF_INIT(10);
	ASSERT_OK(buf_puts(&b, "0123456789"));
	ASSERT_ERR(buf_putc(&b, 'x'), EMSGSIZE);
	ASSERT_ERR(buf_printf(&b, "%s", "y"), EMSGSIZE);
	ASSERT_EQ(b.len, 10);
	ASSERT_STREQ(b.data, "0123456789");
	buf_reset(&b);
	ASSERT_ERR(buf_append(&b, "0123456789AB", 12), EMSGSIZE);
	ASSERT_EQ(b.len, 0);
}

TEST(buf_consume_and_steal)
{
	struct buf b = BUF_INIT(0);
	ASSERT_OK(buf_puts(&b, "line1\nline2"));
	buf_consume(&b, 6);
	ASSERT_STREQ(b.data, "line2");
	char *s = buf_steal(&b);
	ASSERT_STREQ(s, "line2");
	ASSERT_NULL(b.data);
	ASSERT_EQ(b.len, 0);
	free(s);
	s = buf_steal(&b); /* an empty buffer steals as "" */
	ASSERT_STREQ(s, "");
	free(s);
}

TEST(buf_urlencode_rfc3986)
{
	_cleanup_buf_ struct buf b = BUF_INIT(0);
	const char *in = "a b/c~d_e.f-g*h=i&j+k%";
	ASSERT_OK(buf_put_urlencoded(&b, in, strlen(in), false));
	ASSERT_STREQ(b.data, "a%20b%2Fc~d_e.f-g%2Ah%3Di%26j%2Bk%25");
	buf_reset(&b);
	ASSERT_OK(buf_put_urlencoded(&b, "/x y/\xc3\xa9", 7, true));
	ASSERT_STREQ(b.data, "/x%20y/%C3%A9");
}

TEST(str_to_ll_bounds_and_garbage)
{
	long long v = 7;
	ASSERT_OK(str_to_ll("42", 0, 100, &v));
	ASSERT_EQ(v, 42);
	ASSERT_ERR(str_to_ll("101", 0, 100, &v), ERANGE);
	ASSERT_ERR(str_to_ll("12x", 0, 100, &v), EINVAL);
	ASSERT_ERR(str_to_ll("", 0, 100, &v), EINVAL);
	ASSERT_ERR(str_to_ll(" 1", 0, 100, &v), EINVAL);
	ASSERT_ERR(str_to_ll("99999999999999999999", INT64_MIN, INT64_MAX, &v), ERANGE);
	ASSERT_EQ(v, 42);
}

TEST(str_to_bool_forms)
{
	bool b = false;
	ASSERT_OK(str_to_bool("TRUE", &b));
	ASSERT_TRUE(b);
	ASSERT_OK(str_to_bool("0", &b));
	ASSERT_FALSE(b);
	ASSERT_ERR(str_to_bool("maybe", &b), EINVAL);
}

TEST(str_copy_and_printf_truncation)
{
	char small[4];
	ASSERT_OK(str_copy(small, sizeof(small), "abc"));
	ASSERT_ERR(str_copy(small, sizeof(small), "abcd"), ENAMETOOLONG);
	ASSERT_STREQ(small, "abc");
	ASSERT_EQ(str_printf(small, sizeof(small), "%d", 12), 2);
	ASSERT_ERR(str_printf(small, sizeof(small), "%d", 1234), ENAMETOOLONG);
}

TEST(strv_split_trims_and_drops_empty)
{
	_cleanup_strv_ char **v = NULL;
	ASSERT_OK(strv_split(" a, b ,,c ", ',', &v));
	ASSERT_EQ(strv_len(v), 3);
	ASSERT_STREQ(v[0], "a");
	ASSERT_STREQ(v[1], "b");
	ASSERT_STREQ(v[2], "c");
	ASSERT_TRUE(strv_contains(v, "b"));
	ASSERT_FALSE(strv_contains(v, "d"));
}

TEST(str_equal_ct_compares)
{
	ASSERT_TRUE(str_equal_ct("secret", "secret"));
	ASSERT_FALSE(str_equal_ct("secret", "secreT"));
	ASSERT_FALSE(str_equal_ct("secret", "secret2"));
	ASSERT_FALSE(str_equal_ct("", "x"));
	ASSERT_TRUE(str_equal_ct("", ""));
}
