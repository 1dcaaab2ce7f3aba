/* Tag templates: values (strings in a per-evaluation arena, ints, bools, the props) and
 * the functions a template calls: upstream's (pkg/util/template/funcs.go: contains, field,
 * index, lastIndex, substring, toLower, toUpper; html, js, call and urlquery disabled) and
 * Go's builtins, each with Go's argument checks and error messages. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "modules/csi-controller/csi_controller_tagfn.h"

const char *const csi_tagtpl_pv_fields[3] = {"PVCName", "PVCNamespace", "PVName"};
const char *const csi_tagtpl_snapshot_fields[3] = {"VolumeSnapshotName", "VolumeSnapshotNamespace",
						   "VolumeSnapshotContentName"};
static const struct tpl_fn fns[] = {
    {"contains", 2, 2, F_CONTAINS},
    {"field", 3, 3, F_FIELD},
    {"index", 2, 2, F_INDEX},
    {"lastIndex", 2, 2, F_LAST_INDEX},
    {"substring", 3, 3, F_SUBSTRING},
    {"toLower", 1, 1, F_TO_LOWER},
    {"toUpper", 1, 1, F_TO_UPPER},
    {"html", 0, -1, F_DISABLED},
    {"js", 0, -1, F_DISABLED},
    {"call", 0, -1, F_DISABLED},
    {"urlquery", 0, -1, F_DISABLED},
    {"and", 1, -1, F_AND},
    {"or", 1, -1, F_OR},
    {"not", 1, 1, F_NOT},
    {"len", 1, 1, F_LEN},
    {"eq", 1, -1, F_EQ},
    {"ne", 2, 2, F_NE},
    {"lt", 2, 2, F_LT},
    {"le", 2, 2, F_LE},
    {"gt", 2, 2, F_GT},
    {"ge", 2, 2, F_GE},
    {"print", 0, -1, F_PRINT},
    {"println", 0, -1, F_PRINTLN},
    {"printf", 1, -1, F_PRINTF},
    {"slice", 1, -1, F_SLICE},
};

int tpl_fail(struct tpl *t, const char *fmt, ...)
{
	va_list ap;

	if (t->failed)
		return -EINVAL;
	t->failed = true;
	va_start(ap, fmt);
	vsnprintf(t->err, t->errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

char *tpl_alloc(struct tpl *t, size_t n)
{
	if (n > CSI_TAGTPL_MAX_OUT + 1) {
		tpl_fail(t, "a value longer than %d bytes", CSI_TAGTPL_MAX_OUT);
		return NULL;
	}
	if (n > TPL_ARENA - t->used) {
		tpl_fail(t, "the template needs more than %d bytes of strings", TPL_ARENA);
		return NULL;
	}
	char *p = t->arena + t->used;
	t->used += n;
	return p;
}

int tpl_str(struct tpl *t, const char *s, size_t n, struct tpl_val *ret)
{
	char *p = tpl_alloc(t, n + 1);
	if (!p)
		return -EINVAL;
	memcpy(p, s, n);
	p[n] = 0;
	*ret = (struct tpl_val){.k = V_STR, .s = p};
	return 0;
}

const char *tpl_type_name(const struct tpl *t, const struct tpl_val *v)
{
	switch (v->k) {
	case V_STR:
		return "string";
	case V_INT:
		return "int";
	case V_BOOL:
		return "bool";
	default:
		return t->props->type;
	}
}

bool tpl_truth(const struct tpl_val *v)
{
	switch (v->k) {
	case V_STR:
		return v->s[0] != 0;
	case V_INT:
	case V_BOOL:
		return v->i != 0;
	default:
		return true;
	}
}

static const char *prop(const struct tpl *t, size_t i)
{
	return t->props->values[i] ? t->props->values[i] : "";
}

/* v as fmt prints it with verb (v, s, d or t); the props as a struct, "&{...}" when ptr
 * (print, printf) and "{...}" when printed by an action (Go indirects the pointer there). */
int tpl_format(struct tpl *t, struct buf *b, const struct tpl_val *v, char verb, bool ptr)
{
	int r = 0;

	if (v->k == V_PROPS) {
		r = buf_puts(b, ptr ? "&{" : "{");
		for (size_t i = 0; i < t->props->n && r >= 0; i++) {
			struct tpl_val f = {.k = V_STR, .s = prop(t, i)};
			if (i)
				r = buf_putc(b, ' ');
			if (r >= 0)
				r = tpl_format(t, b, &f, verb, false);
		}
		return r < 0 ? r : buf_putc(b, '}');
	}
	bool ok = verb == 'v' || (verb == 's' && v->k == V_STR) || (verb == 'd' && v->k == V_INT) ||
		  (verb == 't' && v->k == V_BOOL);
	if (!ok && (r = buf_printf(b, "%%!%c(%s=", verb, tpl_type_name(t, v))) < 0)
		return r;
	if (v->k == V_STR)
		r = buf_puts(b, v->s);
	else if (v->k == V_INT)
		r = buf_printf(b, "%lld", v->i);
	else
		r = buf_puts(b, v->i ? "true" : "false");
	return r < 0 || ok ? r : buf_putc(b, ')');
}

int tpl_field(struct tpl *t, const struct tpl_val *recv, const char *name, size_t n,
	      struct tpl_val *ret)
{
	if (recv->k == V_PROPS)
		for (size_t i = 0; i < t->props->n; i++)
			if (strlen(t->props->names[i]) == n &&
			    memcmp(t->props->names[i], name, n) == 0) {
				*ret = (struct tpl_val){.k = V_STR, .s = prop(t, i)};
				return 0;
			}
	return tpl_fail(t, "can't evaluate field %.*s in type %s", (int)n, name,
			tpl_type_name(t, recv));
}

const struct tpl_fn *tpl_fn_find(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof(fns) / sizeof(*fns); i++)
		if (strlen(fns[i].name) == n && memcmp(fns[i].name, name, n) == 0)
			return &fns[i];
	return NULL;
}

static int want(struct tpl *t, const struct tpl_fn *f, const struct tpl_val *a, size_t i,
		enum tpl_vkind k)
{
	static const char *const names[] = {"string", "int", "bool"};

	if (a[i].k == k)
		return 0;
	return tpl_fail(t, "wrong type for argument %zu of %s: expected %s; got %s", i + 1, f->name,
			names[k], tpl_type_name(t, &a[i]));
}

static int ret_str(struct tpl *t, struct buf *b, struct tpl_val *ret)
{
	if (b->len > CSI_TAGTPL_MAX_OUT)
		return tpl_fail(t, "a value longer than %d bytes", CSI_TAGTPL_MAX_OUT);
	return tpl_str(t, b->data ? b->data : "", b->len, ret);
}

/* Go's strings.Split(s, delim)[idx] (an empty delim splits into UTF-8 sequences). */
static int fn_field(struct tpl *t, const char *delim, long long idx, const char *s,
		    struct tpl_val *ret)
{
	size_t dl = strlen(delim), n = 0;
	const char *w = s, *next;

	if (idx < 0)
		return tpl_fail(t, "error calling field: index out of range [%lld]", idx);
	for (;; w = next) {
		size_t wl;
		if (dl) {
			const char *hit = strstr(w, delim);
			wl = hit ? (size_t)(hit - w) : strlen(w);
			next = hit ? hit + dl : NULL;
		} else {
			if (!*w)
				break;
			unsigned char c = (unsigned char)*w;
			size_t want_len = c < 0xc2   ? 1
					  : c < 0xe0 ? 2
					  : c < 0xf0 ? 3
					  : c < 0xf5 ? 4
						     : 1;
			wl = 1;
			while (wl < want_len && ((unsigned char)w[wl] & 0xc0) == 0x80)
				wl++;
			if (wl != want_len)
				wl = 1;
			next = w + wl;
		}
		if ((long long)n == idx)
			return tpl_str(t, w, wl, ret);
		n++;
		if (!next)
			break;
	}
	return tpl_fail(t,
			"error calling field: extractWord: cannot index into split string; index = "
			"%lld, length = %zu",
			idx, n);
}

/* Go's substring of upstream, whose out-of-range slicing panics (an error in a template). */
static int fn_substring(struct tpl *t, long long start, long long end, const char *s,
			struct tpl_val *ret)
{
	long long n = (long long)strlen(s);

	if (start < 0)
		start = 0;
	else if (end < 0 || end > n)
		end = n;
	if (end < 0 || end > n || start > end)
		return tpl_fail(t,
				"error calling substring: slice bounds out of range [%lld:%lld] "
				"with length %lld",
				start, end, n);
	return tpl_str(t, s + start, (size_t)(end - start), ret);
}

static int fn_case(struct tpl *t, const char *s, bool upper, struct tpl_val *ret)
{
	if (tpl_str(t, s, strlen(s), ret) < 0)
		return -EINVAL;
	for (char *p = (char *)ret->s; *p; p++)
		if (upper ? (*p >= 'a' && *p <= 'z') : (*p >= 'A' && *p <= 'Z'))
			*p = (char)(*p ^ 0x20);
	return 0;
}

/* eq, ne, lt, le, gt, ge as Go's: same basic kind, no ordering of bools or structs. */
static int compare(struct tpl *t, const struct tpl_fn *f, const struct tpl_val *a, size_t n,
		   struct tpl_val *ret)
{
	bool res = false, order = f->kind != F_EQ && f->kind != F_NE;

	if (f->kind == F_EQ && n < 2)
		return tpl_fail(t, "error calling eq: missing argument for comparison");
	for (size_t i = 1; i < n && !res; i++) {
		if (order && (a[0].k == V_PROPS || a[i].k == V_PROPS))
			return tpl_fail(t, "error calling %s: invalid type for comparison",
					f->name);
		if (a[0].k != a[i].k)
			return tpl_fail(t, "error calling %s: incompatible types for comparison",
					f->name);
		if (order && a[0].k == V_BOOL)
			return tpl_fail(t, "error calling %s: invalid type for comparison",
					f->name);
		int c = a[0].k == V_STR	    ? strcmp(a[0].s, a[i].s)
			: a[0].k == V_PROPS ? 0
					    : (a[0].i > a[i].i) - (a[0].i < a[i].i);
		switch (f->kind) {
		case F_EQ:
		case F_NE:
			res = c == 0;
			break;
		case F_LT:
			res = c < 0;
			break;
		case F_LE:
			res = c <= 0;
			break;
		case F_GT:
			res = c > 0;
			break;
		default:
			res = c >= 0;
		}
	}
	if (f->kind == F_NE)
		res = !res;
	*ret = (struct tpl_val){.k = V_BOOL, .i = res};
	return 0;
}

/* Go's slice on a string: slice s, slice s i, slice s i j. */
static int fn_slice(struct tpl *t, const struct tpl_val *a, size_t n, struct tpl_val *ret)
{
	long long idx[2] = {0, 0};

	if (a[0].k != V_STR)
		return tpl_fail(t, "error calling slice: can't slice item of type %s",
				tpl_type_name(t, &a[0]));
	if (n > 4)
		return tpl_fail(t, "error calling slice: too many slice indexes: %zu", n - 1);
	if (n == 4)
		return tpl_fail(t, "error calling slice: cannot 3-index slice a string");
	idx[1] = (long long)strlen(a[0].s);
	long long cap = idx[1];
	for (size_t i = 1; i < n; i++) {
		if (a[i].k != V_INT)
			return tpl_fail(
			    t, "error calling slice: cannot index slice/array with type %s",
			    tpl_type_name(t, &a[i]));
		if (a[i].i < 0 || a[i].i > cap)
			return tpl_fail(t, "error calling slice: index out of range: %lld", a[i].i);
		idx[i - 1] = a[i].i;
	}
	if (idx[0] > idx[1])
		return tpl_fail(t, "error calling slice: invalid slice index: %lld > %lld", idx[0],
				idx[1]);
	return tpl_str(t, a[0].s + idx[0], (size_t)(idx[1] - idx[0]), ret);
}

/* Go's fmt.Sprintf for the verbs %v %s %d %t %T and %%, without flags, width or precision. */
static int fn_printf(struct tpl *t, const struct tpl_val *a, size_t n, struct tpl_val *ret)
{
	_cleanup_buf_ struct buf b = BUF_INIT(CSI_TAGTPL_MAX_OUT + 1);
	size_t next = 1;
	int r = 0;

	for (const char *p = a[0].s; *p && r >= 0; p++) {
		if (*p != '%') {
			r = buf_putc(&b, *p);
			continue;
		}
		char verb = *++p;
		if (!verb) {
			r = buf_puts(&b, "%!(NOVERB)");
			break;
		}
		if (verb == '%') {
			r = buf_putc(&b, '%');
		} else if (!strchr("vsdtT", verb)) {
			return tpl_fail(
			    t,
			    "error calling printf: %%%c is not supported (known: %%v %%s "
			    "%%d %%t %%T %%%%, without flags or width)",
			    verb);
		} else if (next >= n) {
			r = buf_printf(&b, "%%!%c(MISSING)", verb);
		} else if (verb == 'T') {
			r = buf_puts(&b, tpl_type_name(t, &a[next++]));
		} else {
			r = tpl_format(t, &b, &a[next++], verb, true);
		}
	}
	for (size_t i = next; i < n && r >= 0; i++) {
		r = buf_printf(&b, "%s%s=", i == next ? "%!(EXTRA " : ", ",
			       tpl_type_name(t, &a[i]));
		if (r >= 0)
			r = tpl_format(t, &b, &a[i], 'v', true);
		if (r >= 0 && i + 1 == n)
			r = buf_putc(&b, ')');
	}
	if (r < 0)
		return tpl_fail(t, "error calling printf: longer than %d bytes",
				CSI_TAGTPL_MAX_OUT);
	return ret_str(t, &b, ret);
}

/* print and println: Go's fmt.Sprint (a space between operands when neither is a string) and
 * fmt.Sprintln (spaces always, and a newline). */
static int fn_print(struct tpl *t, const struct tpl_val *a, size_t n, bool ln, struct tpl_val *ret)
{
	_cleanup_buf_ struct buf b = BUF_INIT(CSI_TAGTPL_MAX_OUT + 1);
	int r = 0;

	for (size_t i = 0; i < n && r >= 0; i++) {
		if (i && (ln || (a[i - 1].k != V_STR && a[i].k != V_STR)))
			r = buf_putc(&b, ' ');
		if (r >= 0)
			r = tpl_format(t, &b, &a[i], 'v', true);
	}
	if (r >= 0 && ln)
		r = buf_putc(&b, '\n');
	if (r < 0)
		return tpl_fail(t, "error calling print: longer than %d bytes", CSI_TAGTPL_MAX_OUT);
	return ret_str(t, &b, ret);
}

/* Runs f on the n arguments a (the piped value last), their number already checked. */
int tpl_call(struct tpl *t, const struct tpl_fn *f, struct tpl_val *a, size_t n,
	     struct tpl_val *ret)
{
	static const enum tpl_vkind sig[][3] = {
	    [F_CONTAINS] = {V_STR, V_STR},
	    [F_FIELD] = {V_STR, V_INT, V_STR},
	    [F_INDEX] = {V_STR, V_STR},
	    [F_LAST_INDEX] = {V_STR, V_STR},
	    [F_SUBSTRING] = {V_INT, V_INT, V_STR},
	    [F_TO_LOWER] = {V_STR},
	    [F_TO_UPPER] = {V_STR},
	};
	const char *hit;

	if (f->kind <= F_TO_UPPER)
		for (size_t i = 0; i < n; i++)
			if (want(t, f, a, i, sig[f->kind][i]) < 0)
				return -EINVAL;
	switch (f->kind) {
	case F_CONTAINS:
		*ret = (struct tpl_val){.k = V_BOOL, .i = strstr(a[1].s, a[0].s) != NULL};
		return 0;
	case F_FIELD:
		return fn_field(t, a[0].s, a[1].i, a[2].s, ret);
	case F_INDEX:
	case F_LAST_INDEX:
		hit = strstr(a[1].s, a[0].s);
		for (const char *h = hit; f->kind == F_LAST_INDEX && h && *h;
		     h = strstr(h + 1, a[0].s))
			hit = h;
		if (f->kind == F_LAST_INDEX && !*a[0].s)
			hit = a[1].s + strlen(a[1].s);
		*ret = (struct tpl_val){.k = V_INT, .i = hit ? hit - a[1].s : -1};
		return 0;
	case F_SUBSTRING:
		return fn_substring(t, a[0].i, a[1].i, a[2].s, ret);
	case F_TO_LOWER:
	case F_TO_UPPER:
		return fn_case(t, a[0].s, f->kind == F_TO_UPPER, ret);
	case F_DISABLED:
		return tpl_fail(t, "error calling %s: cannot call '%s' function", f->name, f->name);
	case F_NOT:
		*ret = (struct tpl_val){.k = V_BOOL, .i = !tpl_truth(&a[0])};
		return 0;
	case F_LEN:
		if (a[0].k != V_STR)
			return tpl_fail(t, "error calling len: len of type %s",
					a[0].k == V_PROPS ? t->props->type + 1
							  : tpl_type_name(t, &a[0]));
		*ret = (struct tpl_val){.k = V_INT, .i = (long long)strlen(a[0].s)};
		return 0;
	case F_EQ:
	case F_NE:
	case F_LT:
	case F_LE:
	case F_GT:
	case F_GE:
		return compare(t, f, a, n, ret);
	case F_PRINT:
	case F_PRINTLN:
		return fn_print(t, a, n, f->kind == F_PRINTLN, ret);
	case F_PRINTF:
		return want(t, f, a, 0, V_STR) < 0 ? -EINVAL : fn_printf(t, a, n, ret);
	case F_SLICE:
		return fn_slice(t, a, n, ret);
	default: /* and, or: evaluated where they are read (they stop early) */
		return tpl_fail(t, "internal error: %s", f->name);
	}
}

int tpl_check_arity(struct tpl *t, const struct tpl_fn *f, size_t n)
{
	if (f->max < 0 && n < (size_t)f->min)
		return tpl_fail(t, "wrong number of args for %s: want at least %d got %zu", f->name,
				f->min, n);
	if (f->max >= 0 && (n < (size_t)f->min || n > (size_t)f->max))
		return tpl_fail(t, "wrong number of args for %s: want %d got %zu", f->name, f->min,
				n);
	return 0;
}

void csi_tagtpl_known(const struct csi_tagtpl_props *props, char *buf, size_t len)
{
	struct buf b = BUF_INIT(len ? len - 1 : 0);

	(void)buf_puts(&b, "variables");
	for (size_t i = 0; i < props->n; i++)
		(void)buf_printf(&b, " .%s", props->names[i]);
	(void)buf_puts(&b, "; functions");
	for (size_t i = 0; i < sizeof(fns) / sizeof(*fns); i++)
		if (fns[i].kind != F_DISABLED)
			(void)buf_printf(&b, " %s", fns[i].name);
	(void)buf_puts(&b, "; actions if else with end");
	str_copy(buf, len, b.data ? b.data : "");
	buf_release(&b);
}
