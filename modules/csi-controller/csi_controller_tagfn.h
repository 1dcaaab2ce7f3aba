/* Values and functions of tag templates, shared by csi_controller_tagtpl.c (lexing, parsing,
 * running) and csi_controller_tagfn.c (values, upstream's functions and Go's builtins). Not
 * for other files: csi_controller_tagtpl.h is the interface. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/base/buf.h"
#include "modules/csi-controller/csi_controller_tagtpl.h"

#define TPL_ARENA (64 * 1024) /* bytes for all the strings of one evaluation */
#define TPL_MAX_DEPTH 32      /* nested ( ), if and with */
#define TPL_MAX_ARGS 32	      /* arguments of one call */
enum tpl_vkind { V_STR, V_INT, V_BOOL, V_PROPS };

struct tpl_val {
	enum tpl_vkind k;
	long long i;   /* V_INT, V_BOOL */
	const char *s; /* V_STR (NUL-terminated, in the arena) */
};

struct tpl {
	const char *in;
	size_t len, pos;
	const struct csi_tagtpl_props *props;
	char *arena;
	size_t used;
	struct buf out;
	char *err;
	size_t errlen;
	bool failed;
	int depth;
	bool trim_next; /* the last action ended with " -}}" */
};

enum tpl_fkind {
	F_CONTAINS,
	F_FIELD,
	F_INDEX,
	F_LAST_INDEX,
	F_SUBSTRING,
	F_TO_LOWER,
	F_TO_UPPER,
	F_DISABLED,
	F_AND,
	F_OR,
	F_NOT,
	F_LEN,
	F_EQ,
	F_NE,
	F_LT,
	F_LE,
	F_GT,
	F_GE,
	F_PRINT,
	F_PRINTLN,
	F_PRINTF,
	F_SLICE,
};

struct tpl_fn {
	const char *name;
	int min, max; /* arguments, the piped value included; max -1: no limit */
	enum tpl_fkind kind;
};

/* upstream's funcs.go first (its index and call replace Go's), then Go's builtins */
/* Records the first error of an evaluation in t->err; -EINVAL. */
int tpl_fail(struct tpl *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* n bytes of the evaluation's arena (NULL with the error set past the caps). */
char *tpl_alloc(struct tpl *t, size_t n);
/* A string value: a copy of s[0..n) in the arena. */
int tpl_str(struct tpl *t, const char *s, size_t n, struct tpl_val *ret);
/* Go's name of v's type ("string", "int", "bool", the props' type). */
const char *tpl_type_name(const struct tpl *t, const struct tpl_val *v);
/* Go's truth: a non-empty string, a non-zero int, true, the props. */
bool tpl_truth(const struct tpl_val *v);
/* Appends v as fmt prints it with verb v, s, d or t; the props as "&{...}" when ptr (print,
 * printf) and as "{...}" when an action prints them (Go indirects the pointer there). */
int tpl_format(struct tpl *t, struct buf *b, const struct tpl_val *v, char verb, bool ptr);
/* Field name of recv (the props): its value, else Go's "can't evaluate field" error. */
int tpl_field(struct tpl *t, const struct tpl_val *recv, const char *name, size_t n,
	      struct tpl_val *ret);
/* The function called name, or NULL. */
const struct tpl_fn *tpl_fn_find(const char *name, size_t n);
/* Go's "wrong number of args for f" when n arguments do not fit f. */
int tpl_check_arity(struct tpl *t, const struct tpl_fn *f, size_t n);
/* Runs f (not and or or: they are run where they are read) on the n arguments a, the piped
 * value last, their number already checked. */
int tpl_call(struct tpl *t, const struct tpl_fn *f, struct tpl_val *a, size_t n,
	     struct tpl_val *ret);
