/* Base64 over OpenSSL: both alphabets, strict decoding. */
#include <stdlib.h>

#include "common/base/base64.h"
#include "tests/unit/harness.h"

TEST(base64_roundtrip_both_alphabets)
{
	static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const std[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
					  "Zm9vYmFy"};
	static const char *const url[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};

	for (size_t i = 0; i < ARRAY_SIZE(in); i++) {
		char *s;
		void *d;
		size_t n;
		ASSERT_OK(base64_encode(in[i], strlen(in[i]), BASE64_STD, &s));
		ASSERT_STREQ(s, std[i]);
		ASSERT_OK(base64_decode(s, strlen(s), BASE64_STD, &d, &n));
		ASSERT_EQ(n, strlen(in[i]));
		ASSERT_STREQ(d, in[i]);
		free(s);
		free(d);
		ASSERT_OK(base64_encode(in[i], strlen(in[i]), BASE64_URL, &s));
		ASSERT_STREQ(s, url[i]);
		ASSERT_OK(base64_decode(s, strlen(s), BASE64_URL, &d, &n));
		ASSERT_EQ(n, strlen(in[i]));
		ASSERT_STREQ(d, in[i]);
		free(s);
		free(d);
	}
	/* the two alphabets differ in 62 and 63 */
	const unsigned char bin[] = {0xfb, 0xff, 0xbf};
	char *s;
	ASSERT_OK(base64_encode(bin, sizeof(bin), BASE64_STD, &s));
	ASSERT_STREQ(s, "+/+/");
	free(s);
	ASSERT_OK(base64_encode(bin, sizeof(bin), BASE64_URL, &s));
	ASSERT_STREQ(s, "-_-_");
	free(s);
}

TEST(base64_decode_is_strict)
{
	void *d;
	size_t n;
	static const char *const bad_url[] = {"Zg==", "Z", "Zm9v+", "Zm9/", "Zm 9v", "Zm9v\n"};
	static const char *const bad_std[] = {"Zg", "Zm9", "Z===", "Zg=a", "-_-_", "Zm9v\n   "};

	for (size_t i = 0; i < ARRAY_SIZE(bad_url); i++)
		ASSERT_ERR(base64_decode(bad_url[i], strlen(bad_url[i]), BASE64_URL, &d, &n),
			   EINVAL);
	for (size_t i = 0; i < ARRAY_SIZE(bad_std); i++)
		ASSERT_ERR(base64_decode(bad_std[i], strlen(bad_std[i]), BASE64_STD, &d, &n),
			   EINVAL);
	/* binary content with a NUL survives; the length tells */
	ASSERT_OK(base64_decode("AGE", 3, BASE64_URL, &d, &n));
	ASSERT_EQ(n, 2);
	ASSERT_EQ(((char *)d)[0], 0);
	ASSERT_EQ(((char *)d)[1], 'a');
	free(d);
}
