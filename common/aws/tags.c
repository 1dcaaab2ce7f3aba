/* AWS tag keys and the Kubernetes cluster tag (see tags.h). */
#include "common/aws/tags.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define SHOW 40 /* bytes of a key or ID quoted in a message */

/* The length of the UTF-8 sequence at s (1-4), or 0 when it is not valid UTF-8: overlong
 * forms, surrogates and code points past U+10FFFF are not. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned cp;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

static bool ascii_ok(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr(" +-=._:/@", c));
}

/* How many bytes of s to quote in a message: at most SHOW and at most upto (the bytes before
 * a bad one), ending on a character boundary. */
static int shown(const char *s, size_t upto)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, n;

	if (upto > SHOW)
		upto = SHOW;
	while (p[i] && (n = utf8_len(p + i)) != 0 && i + n <= upto)
		i += n;
	return (int)i;
}

/* Checks the characters of s; returns how many there are (counting stops a little past
 * AWS_TAG_KEY_MAX) or -EINVAL with what is wrong in err. */
static int check_chars(const char *s, const char *what, char *err, size_t errlen)
{
	const unsigned char *p = (const unsigned char *)s;
	int chars = 0;

	for (size_t i = 0; p[i];) {
		size_t n = utf8_len(p + i);
		if (n == 0) {
			snprintf(err, errlen, "%s \"%.*s...\": invalid UTF-8 at byte %zu", what,
				 shown(s, i), s, i);
			return -EINVAL;
		}
		if (n == 1 && !ascii_ok(p[i])) {
			char c[8];
			if (p[i] > 0x20 && p[i] < 0x7f)
				snprintf(c, sizeof(c), "'%c'", p[i]);
			else
				snprintf(c, sizeof(c), "\\x%02x", p[i]);
			snprintf(
			    err, errlen,
			    "%s \"%.*s...\": the character %s at byte %zu is not allowed in an "
			    "AWS tag key (letters, digits, spaces and + - = . _ : / @)",
			    what, shown(s, i), s, c, i);
			return -EINVAL;
		}
		i += n;
		if (chars <= AWS_TAG_KEY_MAX) /* enough to say "too long" */
			chars++;
	}
	return chars;
}

int aws_tag_key_check(const char *key, char *err, size_t errlen)
{
	int n;

	if (!key || !*key) {
		snprintf(err, errlen, "an empty tag key");
		return -EINVAL;
	}
	if ((n = check_chars(key, "tag key", err, errlen)) < 0)
		return n;
	if (n > AWS_TAG_KEY_MAX) {
		snprintf(err, errlen, "tag key \"%.*s...\" has more than %d characters",
			 shown(key, SHOW), key, AWS_TAG_KEY_MAX);
		return -EINVAL;
	}
	return 0;
}

int aws_cluster_id_check(const char *id, char *err, size_t errlen)
{
	const int max = AWS_TAG_KEY_MAX - (int)strlen(AWS_CLUSTER_TAG_PREFIX);
	int n;

	if (!id || !*id) {
		snprintf(err, errlen, "an empty cluster ID");
		return -EINVAL;
	}
	if ((n = check_chars(id, "cluster ID", err, errlen)) < 0)
		return n;
	if (n > max) {
		snprintf(err, errlen,
			 "cluster ID \"%.*s...\" is too long: the tag key " AWS_CLUSTER_TAG_PREFIX
			 "<ID> would have more than %d characters (the ID at most %d)",
			 shown(id, SHOW), id, AWS_TAG_KEY_MAX, max);
		return -EINVAL;
	}
	return 0;
}
