#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/base64.h"
#include "tests/unit/harness.h"

static const struct {
	const char *plain, *std;
} rfc4648[] = {
	{"", ""},	      {"f", "Zg=="},	     {"fo", "Zm8="},	     {"foo", "Zm9v"},
	{"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
};

TEST(base64_rfc4648_vectors)
{
	for (size_t i = 0; i < ARRAY_SIZE(rfc4648); i++) {
		_cleanup_free_ char *e = NULL, *d = NULL;
		size_t n;
		ASSERT_OK(base64_encode(rfc4648[i].plain, strlen(rfc4648[i].plain), BASE64_STD, &e));
		ASSERT_STREQ(e, rfc4648[i].std);
		ASSERT_OK(base64_decode(e, strlen(e), BASE64_STD, &d, &n, NULL));
		ASSERT_EQ(n, strlen(rfc4648[i].plain));
		ASSERT_STREQ(d, rfc4648[i].plain); /* NUL-terminated */
	}
}

TEST(base64_url_safe_without_padding)
{
	static const unsigned char bin[] = {0xfb, 0xff, 0xbf};
	_cleanup_free_ char *std = NULL, *url = NULL, *url2 = NULL, *d = NULL;
	size_t n;

	ASSERT_OK(base64_encode(bin, 2, BASE64_STD, &std));
	ASSERT_STREQ(std, "+/8=");
	ASSERT_OK(base64_encode(bin, 2, BASE64_URL | BASE64_NOPAD, &url));
	ASSERT_STREQ(url, "-_8");
	ASSERT_OK(base64_encode(bin, 3, BASE64_URL, &url2));
	ASSERT_STREQ(url2, "-_-_");
	ASSERT_OK(base64_decode("-_8", 3, BASE64_URL | BASE64_NOPAD, &d, &n, NULL));
	ASSERT_EQ(n, 2);
	ASSERT_TRUE(memcmp(d, bin, 2) == 0);
}

static int dec(const char *s, unsigned flags, struct base64_error *e)
{
	char *d = NULL;
	int r = base64_decode(s, strlen(s), flags, &d, NULL, e);
	free(d);
	return r;
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
	ASSERT_ERR(dec("+/8", BASE64_URL | BASE64_NOPAD, &e), EINVAL);
	ASSERT_ERR(dec("Zg==", BASE64_URL | BASE64_NOPAD, &e), EINVAL);
	ASSERT_STREQ(e.what, "padding where none is allowed");
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
	static const unsigned decode_flags[] = {BASE64_STD, BASE64_URL | BASE64_NOPAD};

	for (int round = 0; round < 2000; round++) {
		size_t n = (size_t)round % sizeof(in);
		for (size_t i = 0; i < n; i++)
			in[i] = (unsigned char)(rand_r(&seed) & 0xff);
		for (int url = 0; url < 2; url++) {
			_cleanup_free_ char *e = NULL, *d = NULL;
			size_t dn;
			old_encode(in, n, url, old);
			ASSERT_OK(base64_encode(in, n, url ? BASE64_URL | BASE64_NOPAD : BASE64_STD, &e));
			ASSERT_STREQ(e, old);
			ASSERT_OK(base64_decode(e, strlen(e), decode_flags[url], &d, &dn, NULL));
			ASSERT_EQ(dn, n);
			ASSERT_TRUE(memcmp(d, in, n) == 0);
		}
	}
}

TEST(base64_caps_the_input)
{
	char *d = NULL;
	ASSERT_ERR(base64_encode("", BASE64_MAX_INPUT + 1, BASE64_STD, &d), EMSGSIZE);
	ASSERT_ERR(base64_decode("", BASE64_MAX_INPUT + 1, BASE64_STD, &d, NULL, NULL), EMSGSIZE);
	ASSERT_NULL(d);
}
