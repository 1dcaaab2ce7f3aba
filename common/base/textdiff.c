/* Unified diffs of two texts (textdiff.h). */
#include "common/base/textdiff.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct line {
	const char *s;
	size_t len; /* without the '\n' */
	bool nl;    /* ended by '\n' */
};

/* Splits text into lines; *n is their count. */
static int split(const char *text, struct line **ret, size_t *n)
{
	size_t cap = 1;
	*n = 0;
	for (const char *p = text; *p; p++)
		cap += *p == '\n';
	if (cap > TEXT_DIFF_MAX_LINES + 1)
		return -E2BIG;
	if (!(*ret = calloc(cap, sizeof(**ret))))
		return -ENOMEM;
	for (const char *p = text; *p;) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		(*ret)[(*n)++] = (struct line){.s = p, .len = len, .nl = e != NULL};
		p += len + (e != NULL);
	}
	return 0;
}

static bool same(const struct line *x, const struct line *y)
{
	return x->len == y->len && x->nl == y->nl && memcmp(x->s, y->s, x->len) == 0;
}

/* One line of the script: ' ' kept, '-' only in a, '+' only in b; i, j its lines. */
struct op {
	char kind;
	size_t i, j;
};

static int put_line(struct buf *out, char kind, const struct line *l)
{
	if (buf_putc(out, kind) < 0 || buf_append(out, l->s, l->len) < 0 || buf_putc(out, '\n') < 0)
		return -ENOMEM;
	return l->nl ? 0 : buf_puts(out, "\\ No newline at end of file\n");
}

/* The hunk of ops[from, to): its header, then its lines. */
static int put_hunk(struct buf *out, const struct op *ops, size_t from, size_t to,
		    const struct line *a, const struct line *b)
{
	size_t na = 0, nb = 0, sa = ops[from].i, sb = ops[from].j;
	for (size_t k = from; k < to; k++) {
		na += ops[k].kind != '+';
		nb += ops[k].kind != '-';
	}
	/* diff -u: a range of 0 lines names the line before it */
	if (buf_printf(out, "@@ -%zu,%zu +%zu,%zu @@\n", na ? sa + 1 : sa, na, nb ? sb + 1 : sb,
		       nb) < 0)
		return -ENOMEM;
	for (size_t k = from; k < to; k++) {
		const struct op *o = &ops[k];
		if (put_line(out, o->kind, o->kind == '+' ? &b[o->j] : &a[o->i]) < 0)
			return -ENOMEM;
	}
	return 0;
}

int text_diff(const char *a_text, const char *b_text, const char *name_a, const char *name_b,
	      int context, struct buf *out)
{
	struct line *a = NULL, *b = NULL;
	struct op *ops = NULL;
	uint16_t *t = NULL;
	size_t na = 0, nb = 0, n_ops = 0;
	int r;

	if (context < 0)
		context = 0;
	if ((r = split(a_text, &a, &na)) < 0 || (r = split(b_text, &b, &nb)) < 0)
		goto out;
	r = -ENOMEM;
	/* t[i][j]: the LCS length of a[i..] and b[j..] (fits: both under 65,536 lines) */
	size_t w = nb + 1;
	if (!(t = calloc((na + 1) * w, sizeof(*t))) || !(ops = calloc(na + nb + 1, sizeof(*ops))))
		goto out;
	for (size_t i = na; i-- > 0;)
		for (size_t j = nb; j-- > 0;)
			t[i * w + j] = same(&a[i], &b[j])		 ? t[(i + 1) * w + j + 1] + 1
				       : t[(i + 1) * w + j] >= t[i * w + j + 1] ? t[(i + 1) * w + j]
										: t[i * w + j + 1];
	/* the script; on a tie a's line goes first (diff -u's removals before additions) */
	size_t i = 0, j = 0;
	bool differ = false;
	while (i < na || j < nb) {
		if (i < na && j < nb && same(&a[i], &b[j])) {
			ops[n_ops++] = (struct op){' ', i++, j++};
		} else if (j < nb && (i == na || t[i * w + j + 1] > t[(i + 1) * w + j])) {
			ops[n_ops++] = (struct op){'+', i, j++};
			differ = true;
		} else {
			ops[n_ops++] = (struct op){'-', i++, j};
			differ = true;
		}
	}
	if (!differ) {
		r = 0;
		goto out;
	}
	if (buf_printf(out, "--- %s\n+++ %s\n", name_a, name_b) < 0)
		goto out;
	/* hunks: each change with up to context kept lines around it; changes closer than
	 * 2 * context kept lines share a hunk */
	size_t k = 0;
	while (k < n_ops) {
		while (k < n_ops && ops[k].kind == ' ')
			k++;
		if (k == n_ops)
			break;
		size_t from = k > (size_t)context ? k - (size_t)context : 0, end = k;
		for (;;) {
			while (end < n_ops && ops[end].kind != ' ')
				end++;
			size_t run = end;
			while (run < n_ops && ops[run].kind == ' ')
				run++;
			if (run < n_ops && run - end <= 2 * (size_t)context) {
				end = run;
				continue;
			}
			end = end + (size_t)context < run ? end + (size_t)context : run;
			break;
		}
		if (put_hunk(out, ops, from, end, a, b) < 0)
			goto out;
		k = end;
	}
	r = 1;
out:
	free(a);
	free(b);
	free(ops);
	free(t);
	return r;
}
