#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/textdiff.h"
#include "tests/unit/harness.h"

/* Applies the unified diff d to a (hunks in order, context checked); NULL when it does not
 * apply. The caller frees the result. */
static char *apply(const char *a, const char *d)
{
	struct buf out = BUF_INIT(0);
	const char *p = a;
	size_t line = 1; /* a's line p is at */
	d = strstr(d, "\n+++ ");
	d = d ? strchr(d + 1, '\n') : NULL;
	if (!d)
		goto bad;
	d++;
	while (*d) {
		size_t sa, na, sb, nb;
		int used = 0;
		if (sscanf(d, "@@ -%zu,%zu +%zu,%zu @@%n", &sa, &na, &sb, &nb, &used) != 4 || !used ||
		    d[used] != '\n')
			goto bad;
		d += used + 1;
		size_t first = na ? sa : sa + 1; /* a 0-line range names the line before */
		for (; line < first; line++) {	  /* copy a's lines up to the hunk */
			const char *e = strchr(p, '\n');
			size_t len = e ? (size_t)(e - p + 1) : strlen(p);
			buf_append(&out, p, len);
			p += len;
		}
		size_t ca = 0, cb = 0; /* the hunk's lines of a and of b, checked against its header */
		while (*d && *d != '@') {
			const char *e = strchr(d, '\n');
			size_t len = (size_t)(e - d); /* the line without its kind and '\n' */
			bool nl = strncmp(e + 1, "\\ No newline", 12) != 0;
			if (*d == ' ' || *d == '-') {
				if (strncmp(p, d + 1, len - 1) != 0 || (nl && p[len - 1] != '\n'))
					goto bad;
				p += len - 1 + nl;
				line++;
				ca++;
			}
			if (*d == ' ' || *d == '+') {
				buf_append(&out, d + 1, len - 1);
				if (nl)
					buf_putc(&out, '\n');
				cb++;
			}
			d = e + 1;
			if (!nl)
				d = strchr(d, '\n') + 1;
		}
		if (ca != na || cb != nb)
			goto bad;
	}
	buf_puts(&out, p);
	return out.data ? buf_steal(&out) : strdup("");
bad:
	buf_release(&out);
	return NULL;
}

TEST(textdiff_identical_appends_nothing)
{
	_cleanup_buf_ struct buf d = BUF_INIT(0);
	ASSERT_EQ(text_diff("a\nb\n", "a\nb\n", "x", "y", 3, &d), 0);
	ASSERT_EQ(d.len, 0);
	ASSERT_EQ(text_diff("", "", "x", "y", 3, &d), 0);
}

/* Expected outputs are GNU diff -u's for the same inputs. */
TEST(textdiff_matches_diff_u)
{
	_cleanup_buf_ struct buf d = BUF_INIT(0);
	ASSERT_EQ(text_diff("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nFIVE\n6\n7\n8\n9\n", "a/f",
			    "b/f", 3, &d),
		  1);
	ASSERT_STREQ(d.data, "--- a/f\n+++ b/f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+FIVE\n 6\n 7\n 8\n");
	buf_reset(&d);
	/* two changes 10 lines apart: two hunks */
	ASSERT_EQ(text_diff("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "x\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\ny\n",
			    "a", "b", 3, &d),
		  1);
	ASSERT_STREQ(d.data, "--- a\n+++ b\n@@ -1,4 +1,4 @@\n-1\n+x\n 2\n 3\n 4\n@@ -10,3 +10,4 @@\n 10\n 11\n 12\n+y\n");
	buf_reset(&d);
	/* everything new */
	ASSERT_EQ(text_diff("", "a\nb\n", "a", "b", 3, &d), 1);
	ASSERT_STREQ(d.data, "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+a\n+b\n");
	buf_reset(&d);
	/* the last line lost its newline */
	ASSERT_EQ(text_diff("a\nb\n", "a\nb", "a", "b", 3, &d), 1);
	ASSERT_STREQ(d.data, "--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n");
}

TEST(textdiff_random_edits_apply_back)
{
	unsigned seed = 12345;
	for (int round = 0; round < 300; round++) {
		_cleanup_buf_ struct buf a = BUF_INIT(0), b = BUF_INIT(0), d = BUF_INIT(0);
		int n = rand_r(&seed) % 40;
		for (int i = 0; i < n; i++) {
			int v = rand_r(&seed) % 6, op = rand_r(&seed) % 10;
			if (op != 0) /* in a unless inserted */
				buf_printf(&a, "line %d\n", v);
			if (op != 1) /* in b unless deleted */
				buf_printf(&b, "line %d\n", op == 2 ? v + 10 : v);
		}
		if (rand_r(&seed) % 4 == 0)
			buf_puts(&b, "tail without newline");
		const char *as = a.data ?: "", *bs = b.data ?: "";
		int r = text_diff(as, bs, "a", "b", rand_r(&seed) % 4, &d);
		ASSERT_TRUE(r == 0 || r == 1);
		ASSERT_EQ(r, strcmp(as, bs) != 0);
		if (r == 0)
			continue;
		char *got = apply(as, d.data);
		ASSERT_NOT_NULL(got);
		ASSERT_STREQ(got, bs);
		free(got);
	}
}

TEST(textdiff_refuses_huge_texts)
{
	_cleanup_buf_ struct buf big = BUF_INIT(0), d = BUF_INIT(0);
	for (int i = 0; i <= TEXT_DIFF_MAX_LINES + 1; i++)
		ASSERT_OK(buf_puts(&big, "x\n"));
	ASSERT_ERR(text_diff(big.data, "x\n", "a", "b", 3, &d), E2BIG);
	ASSERT_EQ(d.len, 0);
}
