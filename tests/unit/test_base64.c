/* Base64 over OpenSSL: both alphabets, strict decoding that says what and where. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

TEST(base64_url_safe_without_padding)
{
	static const unsigned char bin[] = {0xfb, 0xff, 0xbf};
	_cleanup_free_ char *std = NULL, *url = NULL, *url2 = NULL;
	_cleanup_free_ void *d = NULL;
	size_t n;

	ASSERT_OK(base64_encode(bin, 2, BASE64_STD, &std));
	ASSERT_STREQ(std, "+/8=");
	ASSERT_OK(base64_encode(bin, 2, BASE64_URL, &url));
	ASSERT_STREQ(url, "-_8");
	ASSERT_OK(base64_encode(bin, 3, BASE64_URL, &url2));
	ASSERT_STREQ(url2, "-_-_");
	ASSERT_OK(base64_decode("-_8", 3, BASE64_URL, &d, &n));
	ASSERT_EQ(n, 2);
	ASSERT_TRUE(memcmp(d, bin, 2) == 0);
}

/* base64_check() of s; base64_decode() must agree with it. */
static int dec(const char *s, unsigned flags, struct base64_error *e)
{
	void *d = NULL;
	int r = base64_check(s, strlen(s), flags, e);
	int r2 = base64_decode(s, strlen(s), flags, &d, NULL);
	free(d);
	return r == r2 ? r : -EPROTO;
}

TEST(base64_strict_decode_says_what_and_where)
{
	struct base64_error e = {0};

	ASSERT_ERR(dec("Zg", BASE64_STD, &e), EINVAL);
	ASSERT_STREQ(e.what, "missing padding");
	ASSERT_EQ(e.offset, 2);
	ASSERT_ERR(dec("Zg=", BASE64_STD, &e), EINVAL);
	ASSERT_STREQ(e.what, "wrong padding");
	ASSERT_EQ(e.offset, 2);
	ASSERT_ERR(dec("Zm9v=", BASE64_STD, &e), EINVAL);
	ASSERT_STREQ(e.what, "wrong padding");
	ASSERT_ERR(dec("Zg===", BASE64_STD, &e), EINVAL);
	ASSERT_STREQ(e.what, "wrong padding");
	ASSERT_ERR(dec("Zg==Zg==", BASE64_STD, &e), EINVAL);
	ASSERT_STREQ(e.what, "data after the padding");
	ASSERT_EQ(e.offset, 4);
	ASSERT_ERR(dec("Zm9vY", BASE64_STD | BASE64_PAD_OPTIONAL, &e), EINVAL);
	ASSERT_STREQ(e.what, "a lone character in the last group");
	ASSERT_ERR(dec("Zm9v$", BASE64_STD, &e), EINVAL);
	ASSERT_STREQ(e.what, "invalid character");
	ASSERT_EQ(e.offset, 4);
	ASSERT_ERR(dec("Zm 9v", BASE64_STD, &e), EINVAL);
	ASSERT_EQ(e.offset, 2);
	ASSERT_ERR(dec("-_8=", BASE64_STD, &e), EINVAL); /* URL alphabet in a standard text */
	ASSERT_ERR(dec("+/8", BASE64_URL, &e), EINVAL); /* and the standard one in a URL text */
	ASSERT_ERR(dec("Zg==", BASE64_URL, &e), EINVAL);
	ASSERT_STREQ(e.what, "padding where none is allowed");
	ASSERT_OK(dec("Zg==", BASE64_URL | BASE64_PAD_OPTIONAL, NULL));
	ASSERT_ERR(dec("=", BASE64_STD | BASE64_PAD_OPTIONAL, &e), EINVAL);
	/* relaxed by flags */
	ASSERT_OK(dec("Zg", BASE64_STD | BASE64_PAD_OPTIONAL, NULL));
	ASSERT_OK(dec("Zg==", BASE64_STD | BASE64_PAD_OPTIONAL, NULL));
	ASSERT_OK(dec(" Zm\r\n9v\tYg = = ", BASE64_STD | BASE64_SKIP_SPACE, NULL));
	ASSERT_OK(dec("+_-/", BASE64_ANY_ALPHABET, NULL));
	ASSERT_OK(dec("", BASE64_STD, NULL));
}

/* The encoders the helper replaced (pbjson's and the Kubernetes client's: standard, padded; the
 * CSI token's: URL-safe, unpadded), kept here to show its output is the same byte for byte. */
static void old_encode(const unsigned char *s, size_t n, bool url, char *out)
{
	const char *tab = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			      : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *p = out;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		*p++ = tab[(v >> 18) & 63];
		*p++ = tab[(v >> 12) & 63];
		if (i + 1 < n || !url)
			*p++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		if (i + 2 < n || !url)
			*p++ = i + 2 < n ? tab[v & 63] : '=';
	}
	*p = 0;
}

TEST(base64_same_bytes_as_the_old_encoders_and_round_trips)
{
	unsigned char in[64];
	char old[128];
	unsigned seed = 7;
	static const unsigned decode_flags[] = {BASE64_STD, BASE64_URL};

	for (int round = 0; round < 2000; round++) {
		size_t n = (size_t)round % sizeof(in);
		for (size_t i = 0; i < n; i++)
			in[i] = (unsigned char)(rand_r(&seed) & 0xff);
		for (int url = 0; url < 2; url++) {
			_cleanup_free_ char *e = NULL;
			_cleanup_free_ void *d = NULL;
			size_t dn;
			old_encode(in, n, url, old);
			ASSERT_OK(base64_encode(in, n, url ? BASE64_URL : BASE64_STD, &e));
			ASSERT_STREQ(e, old);
			ASSERT_OK(base64_decode(e, strlen(e), decode_flags[url], &d, &dn));
			ASSERT_EQ(dn, n);
			ASSERT_TRUE(memcmp(d, in, n) == 0);
		}
	}
}

TEST(base64_caps_the_input)
{
	char *s = NULL;
	void *d = NULL;
	ASSERT_ERR(base64_encode("", BASE64_MAX_INPUT + 1, BASE64_STD, &s), E2BIG);
	ASSERT_ERR(base64_decode("", BASE64_MAX_INPUT + 1, BASE64_STD, &d, NULL), E2BIG);
	ASSERT_ERR(base64_check("", BASE64_MAX_INPUT + 1, BASE64_STD, NULL), E2BIG);
	ASSERT_NULL(s);
	ASSERT_NULL(d);
}
