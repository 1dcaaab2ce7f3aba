/* Tag templates: the part of Go's text/template that a tagSpecification value can use, with
 * upstream's functions (pkg/util/template in aws-ebs-csi-driver v1.64):
 *
 *   text, {{ pipeline }}, {{- and -}} trimming, comments ({{/\* ... *\/}}),
 *   {{ if }} / {{ with }} with {{ else }}, {{ else if }}, {{ else with }}, {{ end }};
 *   a pipeline is commands joined by "|", each piping its value in as the next one's last
 *   argument; an operand is .Field, ., $, $.Field, "string", `raw string`, an integer
 *   (decimal, 0x, 0o, 0b, leading 0 octal), true, false, or a ( pipeline ), optionally
 *   followed by .Field;
 *   upstream's functions: contains, field, index, lastIndex, substring, toLower, toUpper,
 *   and html, js, call, urlquery that always fail; Go's own and, or, not, len, eq, ne, lt, le,
 *   gt, ge, print, println, printf (verbs %v %s %d %t %T %%, without flags or width), slice.
 *
 * Not supported, each a clear error: variables other than $ ($x := ...), range, define,
 * template, block, break, continue, character, floating-point and complex constants, nil.
 * toUpper and toLower change ASCII letters only (Kubernetes names are ASCII).
 *
 * One pass: each action is parsed and, where it runs, evaluated as it is read; a branch that
 * does not run is still parsed, so a syntax error anywhere fails as in Go. Every string lives
 * in a per-call arena; the template, every value and the output are capped. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "modules/csi-controller/csi_controller_tagfn.h"

enum tok {
	T_RDELIM,
	T_PIPE,
	T_LPAREN,
	T_RPAREN,
	T_FIELD,
	T_DOT,
	T_VAR,
	T_IDENT,
	T_KEYWORD,
	T_STRING,
	T_RAW,
	T_NUMBER,
	T_BOOL,
	T_NIL,
	T_DECLARE,
	T_ASSIGN,
	T_CHAR,
};

struct token {
	enum tok type;
	const char *p; /* the token's text (a field without its dot) */
	size_t n;
	bool spaced; /* white space before it */
	bool trim;   /* T_RDELIM: " -}}" */
};

static const char *const keywords[] = {"if",	 "else",     "end",   "range", "with",
				       "define", "template", "block", "break", "continue"};

/* ---- lexing (inside an action) ---- */

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_alnum(char c)
{
	return c == '_' || isalnum((unsigned char)c);
}

static bool at_rdelim(const struct tpl *t, size_t p, bool *trim)
{
	const char *s = t->in + p;
	size_t left = t->len - p;

	*trim = left >= 4 && is_space(s[0]) && s[1] == '-' && s[2] == '}' && s[3] == '}';
	return *trim || (left >= 2 && s[0] == '}' && s[1] == '}');
}

/* Go's atTerminator: what may follow an identifier, a field or a variable. */
static bool at_term(const struct tpl *t, size_t p)
{
	bool trim;

	return p >= t->len || is_space(t->in[p]) || strchr(".,|:()", t->in[p]) ||
	       at_rdelim(t, p, &trim);
}

static int lex_number(struct tpl *t, size_t p, struct token *tk)
{
	if (t->in[p] == '+' || t->in[p] == '-')
		p++;
	while (p < t->len &&
	       (is_alnum(t->in[p]) || t->in[p] == '.' ||
		((t->in[p] == '+' || t->in[p] == '-') && strchr("eEpP", t->in[p - 1]))))
		p++;
	tk->type = T_NUMBER;
	tk->n = (size_t)(t->in + p - tk->p);
	t->pos = p;
	return 0;
}

static int lex_word(struct tpl *t, size_t p, struct token *tk)
{
	while (p < t->len && is_alnum(t->in[p]))
		p++;
	if (!at_term(t, p))
		return tpl_fail(t, "bad character '%c' after \"%.*s\"", t->in[p],
				(int)(t->in + p - tk->p), tk->p);
	tk->n = (size_t)(t->in + p - tk->p);
	t->pos = p;
	return 0;
}

static bool tok_is(const struct token *tk, const char *word)
{
	return tk->n == strlen(word) && memcmp(tk->p, word, tk->n) == 0;
}

/* The next token of the action at t->pos, t->pos moved past it. */
static int lex(struct tpl *t, struct token *tk)
{
	size_t p = t->pos;
	bool trim;

	*tk = (struct token){0};
	for (;; p++) {
		if (p >= t->len)
			return tpl_fail(t, "unclosed action");
		if (at_rdelim(t, p, &trim)) {
			tk->type = T_RDELIM;
			tk->trim = trim;
			tk->p = t->in + p;
			tk->n = trim ? 4 : 2;
			t->pos = p + tk->n;
			return 0;
		}
		if (!is_space(t->in[p]))
			break;
		tk->spaced = true;
	}
	char c = t->in[p];
	tk->p = t->in + p;
	tk->n = 1;
	t->pos = p + 1;
	switch (c) {
	case '|':
		tk->type = T_PIPE;
		return 0;
	case '(':
		tk->type = T_LPAREN;
		return 0;
	case ')':
		tk->type = T_RPAREN;
		return 0;
	case '=':
		tk->type = T_ASSIGN;
		return 0;
	case ':':
		if (p + 1 >= t->len || t->in[p + 1] != '=')
			return tpl_fail(t, "expected :=");
		tk->type = T_DECLARE;
		tk->n = 2;
		t->pos = p + 2;
		return 0;
	case '"':
		for (p++;; p++) {
			if (p >= t->len || t->in[p] == '\n')
				return tpl_fail(t, "unterminated quoted string");
			if (t->in[p] == '\\') {
				if (++p >= t->len || t->in[p] == '\n')
					return tpl_fail(t, "unterminated quoted string");
			} else if (t->in[p] == '"') {
				break;
			}
		}
		tk->type = T_STRING;
		tk->n = (size_t)(t->in + p + 1 - tk->p);
		t->pos = p + 1;
		return 0;
	case '`': {
		const char *e = memchr(t->in + p + 1, '`', t->len - p - 1);
		if (!e)
			return tpl_fail(t, "unterminated raw quoted string");
		tk->type = T_RAW;
		tk->n = (size_t)(e + 1 - tk->p);
		t->pos = (size_t)(e + 1 - t->in);
		return 0;
	}
	case '\'':
		return tpl_fail(t, "character constants are not supported");
	case '$':
		tk->type = T_VAR;
		return lex_word(t, p + 1, tk);
	case '.':
		if (p + 1 < t->len && isdigit((unsigned char)t->in[p + 1]))
			return lex_number(t, p, tk);
		if (p + 1 < t->len && is_alnum(t->in[p + 1])) {
			tk->type = T_FIELD;
			tk->p++;
			return lex_word(t, p + 1, tk);
		}
		if (!at_term(t, p + 1))
			return tpl_fail(t, "bad character '%c' after \".\"", t->in[p + 1]);
		tk->type = T_DOT;
		return 0;
	default:
		break;
	}
	if (c == '+' || c == '-' || isdigit((unsigned char)c))
		return lex_number(t, p, tk);
	if (isalpha((unsigned char)c) || c == '_') {
		int r = lex_word(t, p, tk);
		if (r < 0)
			return r;
		tk->type = T_IDENT;
		if (tok_is(tk, "true") || tok_is(tk, "false"))
			tk->type = T_BOOL;
		else if (tok_is(tk, "nil"))
			tk->type = T_NIL;
		for (size_t i = 0; i < sizeof(keywords) / sizeof(*keywords); i++)
			if (tok_is(tk, keywords[i]))
				tk->type = T_KEYWORD;
		return 0;
	}
	if (c > ' ' && c < 0x7f) {
		tk->type = T_CHAR;
		return 0;
	}
	return tpl_fail(t, "unrecognized character in action: 0x%02x", (unsigned char)c);
}

static int peek(struct tpl *t, struct token *tk)
{
	size_t save = t->pos;
	int r = lex(t, tk);
	t->pos = save;
	return r;
}

static bool ends_command(const struct token *tk)
{
	return tk->type == T_PIPE || tk->type == T_RDELIM || tk->type == T_RPAREN;
}

/* ---- literals ---- */

static int hexval(char c)
{
	if (isdigit((unsigned char)c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return 99;
}

static bool tok_has(const struct token *tk, const char *chars)
{
	for (size_t i = 0; i < tk->n; i++)
		if (strchr(chars, tk->p[i]))
			return true;
	return false;
}

static int parse_int(struct tpl *t, const struct token *tk, long long *ret)
{
	const char *s = tk->p, *e = tk->p + tk->n;
	bool neg = false;
	unsigned base = 10;
	unsigned long long v = 0, lim;

	if (s < e && (*s == '+' || *s == '-'))
		neg = *s++ == '-';
	if (e - s > 2 && s[0] == '0' && strchr("xXoObB", s[1])) {
		base = strchr("xX", s[1]) ? 16 : strchr("oO", s[1]) ? 8 : 2;
		s += 2;
	} else if (e - s > 1 && s[0] == '0') {
		base = 8;
		s++;
	}
	lim = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
	for (const char *q = s; q < e; q++) {
		unsigned d = (unsigned)hexval(*q);
		if (d >= base) {
			if (tok_has(tk, "._pPi") || (base != 16 && tok_has(tk, "eE")))
				return tpl_fail(t,
						"number %.*s: floating-point, complex and "
						"underscored constants are not supported",
						(int)tk->n, tk->p);
			return tpl_fail(t, "bad number syntax: \"%.*s\"", (int)tk->n, tk->p);
		}
		if (v > (lim - d) / base)
			return tpl_fail(t, "integer overflow: \"%.*s\"", (int)tk->n, tk->p);
		v = v * base + d;
	}
	if (s == e)
		return tpl_fail(t, "bad number syntax: \"%.*s\"", (int)tk->n, tk->p);
	*ret = neg ? (long long)(0 - v) : (long long)v;
	return 0;
}

static size_t put_utf8(char *o, unsigned long cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* One escape after a backslash at s (Go's strconv.Unquote); the bytes into o. */
static int unescape(const char *s, const char *e, char *o, size_t *olen, size_t *used)
{
	static const char simple[] = "a\ab\bf\fn\nr\rt\tv\v\\\\\"\"";
	unsigned long cp = 0;
	int digits = 0, base = 16;

	for (size_t i = 0; simple[i]; i += 2)
		if (*s == simple[i]) {
			*o = simple[i + 1];
			*olen = *used = 1;
			return 0;
		}
	if (*s == 'x')
		digits = 2;
	else if (*s == 'u')
		digits = 4;
	else if (*s == 'U')
		digits = 8;
	else if (*s >= '0' && *s <= '7')
		digits = 3, base = 8;
	else
		return -EINVAL;
	const char *d = base == 8 ? s : s + 1;
	if (e - d < digits)
		return -EINVAL;
	for (int i = 0; i < digits; i++) {
		int v = hexval(d[i]);
		if (v >= base)
			return -EINVAL;
		cp = cp * (unsigned)base + (unsigned)v;
	}
	*used = (size_t)(d + digits - s);
	if (*s == 'x' || base == 8) {
		if (cp > 255)
			return -EINVAL;
		*o = (char)cp;
		*olen = 1;
	} else {
		if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
			return -EINVAL;
		*olen = put_utf8(o, cp);
	}
	return cp ? 0 : -EDOM;
}

static int unquote(struct tpl *t, const struct token *tk, struct tpl_val *ret)
{
	const char *s = tk->p + 1, *e = tk->p + tk->n - 1;
	char *o = tpl_alloc(t, tk->n);
	size_t n = 0;

	if (!o)
		return -EINVAL;
	while (s < e) {
		size_t olen = 1, used = 1;
		if (tk->type == T_RAW) {
			if (*s != '\r')
				o[n++] = *s;
			s++;
			continue;
		}
		if (*s != '\\') {
			o[n++] = *s++;
			continue;
		}
		int r = unescape(s + 1, e, o + n, &olen, &used);
		if (r == -EDOM)
			return tpl_fail(t, "string %.*s: a NUL character is not supported",
					(int)tk->n, tk->p);
		if (r < 0)
			return tpl_fail(t, "string %.*s: invalid syntax", (int)tk->n, tk->p);
		n += olen;
		s += 1 + used;
	}
	o[n] = 0;
	*ret = (struct tpl_val){.k = V_STR, .s = o};
	return 0;
}

/* ---- parsing and evaluating ---- */

static int pipeline(struct tpl *t, bool exec, const struct tpl_val *dot, enum tok end,
		    const char *what, struct tpl_val *ret);

/* An operand (and the .Field after it); the value in *ret when exec. */
static int operand(struct tpl *t, bool exec, const struct tpl_val *dot, struct tpl_val *ret)
{
	struct tpl_val v = {.k = V_STR, .s = ""};
	struct token tk;
	bool literal = false;
	int r;

	if ((r = lex(t, &tk)) < 0)
		return r;
	switch (tk.type) {
	case T_FIELD:
		r = exec ? tpl_field(t, dot, tk.p, tk.n, &v) : 0;
		break;
	case T_DOT:
		v = *dot;
		literal = true;
		break;
	case T_VAR:
		if (tk.n > 1)
			return tpl_fail(t, "undefined variable \"%.*s\" (only $ is supported)",
					(int)tk.n, tk.p);
		v = (struct tpl_val){.k = V_PROPS};
		break;
	case T_STRING:
	case T_RAW:
		r = unquote(t, &tk, &v);
		literal = true;
		break;
	case T_NUMBER:
		v.k = V_INT;
		r = parse_int(t, &tk, &v.i);
		literal = true;
		break;
	case T_BOOL:
		v = (struct tpl_val){.k = V_BOOL, .i = tok_is(&tk, "true")};
		literal = true;
		break;
	case T_LPAREN:
		if (++t->depth > TPL_MAX_DEPTH)
			return tpl_fail(t, "nested deeper than %d", TPL_MAX_DEPTH);
		r = pipeline(t, exec, dot, T_RPAREN, "parenthesized pipeline", &v);
		t->depth--;
		break;
	case T_IDENT: { /* a function as an argument: called with none */
		const struct tpl_fn *f = tpl_fn_find(tk.p, tk.n);
		struct tpl_val none = v;
		if (!f)
			return tpl_fail(t, "function \"%.*s\" not defined", (int)tk.n, tk.p);
		if (exec && (r = tpl_check_arity(t, f, 0)) == 0)
			r = tpl_call(t, f, &none, 0, &v);
		break;
	}
	case T_NIL:
		return tpl_fail(t, "nil is not supported");
	default:
		return tpl_fail(t, "unexpected \"%.*s\" in operand", (int)tk.n, tk.p);
	}
	while (r == 0) {
		size_t save = t->pos;
		if ((r = lex(t, &tk)) < 0)
			return r;
		if (tk.type != T_FIELD || tk.spaced) {
			t->pos = save;
			break;
		}
		if (literal)
			return tpl_fail(t, "unexpected . after term");
		if (exec)
			r = tpl_field(t, &v, tk.p, tk.n, &v);
	}
	*ret = v;
	return r;
}

/* A command whose first word is a function: its arguments, then the call. and and or stop at
 * the first argument that decides them (the rest is parsed, not run), as in Go. */
static int call_command(struct tpl *t, bool exec, const struct tpl_val *dot, const struct tpl_fn *f,
			const struct tpl_val *final, struct tpl_val *ret)
{
	struct tpl_val a[TPL_MAX_ARGS + 1];
	bool short_circuit = f->kind == F_AND || f->kind == F_OR, decided = false;
	struct token tk;
	size_t n = 0;
	int r;

	for (;;) {
		if ((r = peek(t, &tk)) < 0)
			return r;
		if (ends_command(&tk))
			break;
		if (n == TPL_MAX_ARGS)
			return tpl_fail(t, "more than %d arguments to %s", TPL_MAX_ARGS, f->name);
		bool run = exec && !decided;
		if ((r = operand(t, run, dot, &a[n])) < 0)
			return r;
		if (short_circuit && run && tpl_truth(&a[n]) == (f->kind == F_OR)) {
			decided = true;
			*ret = a[n];
		}
		n++;
	}
	if (!exec)
		return 0;
	if ((r = tpl_check_arity(t, f, n + (final != NULL))) < 0)
		return r;
	if (short_circuit) {
		if (!decided)
			*ret = final ? *final : a[n - 1];
		return 0;
	}
	if (final)
		a[n++] = *final;
	return tpl_call(t, f, a, n, ret);
}

/* One command of a pipeline (stage counts from 1), final the value piped in. */
static int command(struct tpl *t, bool exec, const struct tpl_val *dot, const struct tpl_val *final,
		   int stage, struct tpl_val *ret)
{
	struct token tk;
	size_t save = t->pos;
	int r;

	if ((r = lex(t, &tk)) < 0)
		return r;
	if (tk.type == T_IDENT) {
		const struct tpl_fn *f = tpl_fn_find(tk.p, tk.n);
		if (!f)
			return tpl_fail(t, "function \"%.*s\" not defined", (int)tk.n, tk.p);
		return call_command(t, exec, dot, f, final, ret);
	}
	if (ends_command(&tk))
		return tpl_fail(t, "unexpected \"%.*s\" in command", (int)tk.n, tk.p);
	if (tk.type == T_NIL)
		return tpl_fail(t, "nil is not a command");
	if (stage > 1 && (tk.type == T_BOOL || tk.type == T_DOT || tk.type == T_NUMBER ||
			  tk.type == T_STRING || tk.type == T_RAW))
		return tpl_fail(t, "non executable command in pipeline stage %d", stage);
	t->pos = save;
	if ((r = operand(t, exec, dot, ret)) < 0 || (r = peek(t, &tk)) < 0)
		return r;
	if (ends_command(&tk) && !final)
		return 0;
	const char *what = t->in + save;
	int what_len = (int)(t->pos - save);
	while (!ends_command(&tk)) {
		struct tpl_val ignored;
		if ((r = operand(t, false, dot, &ignored)) < 0 || (r = peek(t, &tk)) < 0)
			return r;
	}
	while (what_len > 0 && is_space(*what))
		what++, what_len--;
	return exec ? tpl_fail(t, "can't give argument to non-function \"%.*s\"", what_len, what)
		    : 0;
}

/* Commands joined by "|" up to end (}} or ")"), which is consumed. */
static int pipeline(struct tpl *t, bool exec, const struct tpl_val *dot, enum tok end,
		    const char *what, struct tpl_val *ret)
{
	struct tpl_val cur = {.k = V_STR, .s = ""};
	struct token tk;
	size_t save = t->pos;
	int r;

	if ((r = lex(t, &tk)) < 0)
		return r;
	if (tk.type == T_VAR) {
		struct token next;
		if ((r = lex(t, &next)) < 0)
			return r;
		if (next.type == T_DECLARE || next.type == T_ASSIGN)
			return tpl_fail(t, "variables are not supported (%.*s %.*s)", (int)tk.n,
					tk.p, (int)next.n, next.p);
	}
	t->pos = save;
	for (int stage = 1;; stage++) {
		if ((r = peek(t, &tk)) < 0)
			return r;
		if (tk.type == end && stage == 1)
			return tpl_fail(t, "missing value for %s", what);
		if (tk.type == end)
			break; /* also right after a "|", which Go's parser accepts */
		if (tk.type == T_RDELIM)
			return tpl_fail(t, "unclosed left paren");
		if (tk.type == T_RPAREN)
			return tpl_fail(t, "unexpected right paren");
		if ((r = command(t, exec, dot, stage > 1 ? &cur : NULL, stage, &cur)) < 0 ||
		    (r = peek(t, &tk)) < 0)
			return r;
		if (tk.type == T_PIPE)
			t->pos = (size_t)(tk.p + tk.n - t->in);
	}
	if ((r = lex(t, &tk)) < 0)
		return r;
	if (end == T_RDELIM)
		t->trim_next = tk.trim;
	*ret = cur;
	return 0;
}

enum term { TERM_EOF, TERM_END, TERM_ELSE, TERM_ELSE_IF, TERM_ELSE_WITH };

static int list(struct tpl *t, bool exec, const struct tpl_val *dot, enum term *ret);

static int expect_end(struct tpl *t, enum term term)
{
	if (term == TERM_EOF)
		return tpl_fail(t, "unexpected EOF (an {{if}} or {{with}} without {{end}})");
	if (term != TERM_END)
		return tpl_fail(t, "expected {{end}}; found {{else}}");
	return 0;
}

/* {{if}} or {{with}} (the keyword read) up to its {{end}}. */
static int control(struct tpl *t, bool exec, const struct tpl_val *dot, bool with)
{
	bool taken = false;
	enum term term;
	int r;

	if (++t->depth > TPL_MAX_DEPTH)
		return tpl_fail(t, "nested deeper than %d", TPL_MAX_DEPTH);
	for (;;) {
		struct tpl_val v;
		bool run = exec && !taken;
		if ((r = pipeline(t, run, dot, T_RDELIM, with ? "with" : "if", &v)) < 0)
			return r;
		bool cond = run && tpl_truth(&v);
		if ((r = list(t, cond, with && cond ? &v : dot, &term)) < 0)
			return r;
		taken |= cond;
		if (term == TERM_ELSE_IF || term == TERM_ELSE_WITH) {
			/* {{else if}} in an if, {{else with}} in a with; Go refuses the others */
			if ((term == TERM_ELSE_WITH) == with)
				continue;
			return tpl_fail(t, "unexpected \"%s\" in input", with ? "if" : "with");
		} else if (term == TERM_ELSE && (r = list(t, exec && !taken, dot, &term)) < 0) {
			return r;
		}
		break;
	}
	t->depth--;
	return expect_end(t, term);
}

static int expect_rdelim(struct tpl *t, const char *what)
{
	struct token tk;
	int r = lex(t, &tk);

	if (r < 0)
		return r;
	if (tk.type != T_RDELIM)
		return tpl_fail(t, "unexpected \"%.*s\" in %s", (int)tk.n, tk.p, what);
	t->trim_next = tk.trim;
	return 0;
}

/* One action after its "{{" (and trim marker). */
static int action(struct tpl *t, bool exec, const struct tpl_val *dot, enum term *ret)
{
	struct token tk, next;
	size_t save = t->pos;
	struct tpl_val v;
	int r;

	*ret = TERM_EOF;
	if ((r = lex(t, &tk)) < 0)
		return r;
	if (tk.type == T_KEYWORD) {
		if (tok_is(&tk, "end")) {
			*ret = TERM_END;
			return expect_rdelim(t, "end");
		}
		if (tok_is(&tk, "else")) {
			if ((r = peek(t, &next)) < 0)
				return r;
			if (tok_is(&next, "if") || tok_is(&next, "with")) {
				*ret = tok_is(&next, "if") ? TERM_ELSE_IF : TERM_ELSE_WITH;
				return lex(t, &next);
			}
			*ret = TERM_ELSE;
			return expect_rdelim(t, "else");
		}
		if (tok_is(&tk, "if") || tok_is(&tk, "with"))
			return control(t, exec, dot, tok_is(&tk, "with"));
		return tpl_fail(t, "{{%.*s}} is not supported", (int)tk.n, tk.p);
	}
	t->pos = save;
	if ((r = pipeline(t, exec, dot, T_RDELIM, "command", &v)) < 0)
		return r;
	if (exec && tpl_format(t, &t->out, &v, 'v', false) < 0)
		return tpl_fail(t, "the value is longer than %d bytes", CSI_TAGTPL_MAX_OUT);
	return 0;
}

/* Text and actions up to the {{end}} or {{else}} that ends the list (*ret), or the end. */
static int list(struct tpl *t, bool exec, const struct tpl_val *dot, enum term *ret)
{
	for (;;) {
		const char *open = memmem(t->in + t->pos, t->len - t->pos, "{{", 2);
		size_t from = t->pos, to = open ? (size_t)(open - t->in) : t->len;
		bool ltrim =
		    open && to + 3 < t->len && t->in[to + 2] == '-' && is_space(t->in[to + 3]);
		int r;

		if (t->trim_next)
			while (from < to && is_space(t->in[from]))
				from++;
		t->trim_next = false;
		if (ltrim)
			while (to > from && is_space(t->in[to - 1]))
				to--;
		if (exec && buf_append(&t->out, t->in + from, to - from) < 0)
			return tpl_fail(t, "the value is longer than %d bytes", CSI_TAGTPL_MAX_OUT);
		if (!open) {
			*ret = TERM_EOF;
			return 0;
		}
		t->pos = (size_t)(open - t->in) + (ltrim ? 4 : 2);
		if (t->len - t->pos >= 2 && memcmp(t->in + t->pos, "/*", 2) == 0) {
			const char *e = memmem(t->in + t->pos + 2, t->len - t->pos - 2, "*/", 2);
			bool trim;
			if (!e)
				return tpl_fail(t, "unclosed comment");
			t->pos = (size_t)(e + 2 - t->in);
			if (!at_rdelim(t, t->pos, &trim))
				return tpl_fail(t, "comment ends before closing delimiter");
			t->pos += trim ? 4 : 2;
			t->trim_next = trim;
			continue;
		}
		if ((r = action(t, exec, dot, ret)) < 0)
			return r;
		if (*ret != TERM_EOF)
			return 0;
	}
}

int csi_tagtpl_eval(const char *in, const struct csi_tagtpl_props *props, char **ret, char *err,
		    size_t errlen)
{
	struct tpl t = {
	    .in = in,
	    .len = strlen(in),
	    .props = props,
	    .out = BUF_INIT(CSI_TAGTPL_MAX_OUT),
	    .err = err,
	    .errlen = errlen,
	};
	struct tpl_val root = {.k = V_PROPS};
	enum term term = TERM_EOF;
	int r;

	if (t.len > CSI_TAGTPL_MAX_IN)
		return tpl_fail(&t, "the template is longer than %d bytes", CSI_TAGTPL_MAX_IN);
	if (!(t.arena = malloc(TPL_ARENA)))
		return -ENOMEM;
	r = list(&t, true, &root, &term);
	if (r == 0 && term != TERM_EOF)
		r = tpl_fail(&t, "unexpected {{%s}}", term == TERM_END ? "end" : "else");
	free(t.arena);
	if (r < 0) {
		buf_release(&t.out);
		return r;
	}
	*ret = t.out.data ? buf_steal(&t.out) : strdup("");
	return *ret ? 0 : -ENOMEM;
}

int csi_tagtpl_expand(const char *key, const char *value, const struct csi_tagtpl_props *props,
		      char **ret, char *err, size_t errlen)
{
	char why[192], known[320];
	int r = csi_tagtpl_eval(value, props, ret, why, sizeof(why));

	if (r == -EINVAL) {
		csi_tagtpl_known(props, known, sizeof(known));
		snprintf(err, errlen, "%s: cannot expand \"%.64s%s\": %s (known: %s)", key, value,
			 strlen(value) > 64 ? "..." : "", why, known);
	} else if (r < 0) {
		snprintf(err, errlen, "%s: out of memory", key);
	}
	return r;
}
