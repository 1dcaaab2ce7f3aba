/* YAML to cJSON over libyaml's event API. */
#include "common/kube/yaml.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct level {
	cJSON *node;
	char *key; /* pending key of a mapping */
	size_t n;  /* keys of a mapping so far */
};

struct ctx {
	struct level stack[KUBE_YAML_MAX_DEPTH];
	int depth;
	cJSON *root;
	size_t nodes;
	unsigned flags;
	char *err;
	size_t errlen;
};

static int fail_at(struct ctx *c, const yaml_event_t *ev, int r, const char *what)
{
	snprintf(c->err, c->errlen, "line %zu column %zu: %s", ev->start_mark.line + 1,
		 ev->start_mark.column + 1, what);
	return r;
}

static bool all_digits(const char *s, const char *set)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!strchr(set, *s))
			return false;
	return true;
}

/* YAML 1.2 core schema numbers: [-+]?[0-9]+, 0o.., 0x.., decimal floats, .inf, .nan. */
static bool core_number(const char *s, double *ret)
{
	const char *p = s + (*s == '-' || *s == '+');
	char *end;

	if (strncmp(s, "0x", 2) == 0 && all_digits(s + 2, "0123456789abcdefABCDEF")) {
		*ret = (double)strtoull(s + 2, NULL, 16);
		return true;
	}
	if (strncmp(s, "0o", 2) == 0 && all_digits(s + 2, "01234567")) {
		*ret = (double)strtoull(s + 2, NULL, 8);
		return true;
	}
	if (!strcmp(p, ".inf") || !strcmp(p, ".Inf") || !strcmp(p, ".INF") || !strcmp(s, ".nan") ||
	    !strcmp(s, ".NaN") || !strcmp(s, ".NAN"))
		return false; /* JSON has no such numbers: keep them as strings */
	/* digits, optional fraction, optional exponent; at least one digit before the exponent */
	const char *q = p;
	size_t digits = 0;
	while (*q >= '0' && *q <= '9')
		q++, digits++;
	if (*q == '.')
		for (q++; *q >= '0' && *q <= '9'; q++)
			digits++;
	if (!digits)
		return false;
	if (*q == 'e' || *q == 'E') {
		q++;
		q += (*q == '-' || *q == '+');
		if (!(*q >= '0' && *q <= '9'))
			return false;
		while (*q >= '0' && *q <= '9')
			q++;
	}
	if (*q)
		return false;
	*ret = strtod(s, &end);
	return *end == 0;
}

static bool is_null_word(const char *s)
{
	return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
	       !strcmp(s, "NULL");
}

static cJSON *scalar_node(const struct ctx *c, const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	const char *tag = (const char *)ev->data.scalar.tag;
	bool plain =
	    ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && (!tag || !strcmp(tag, "!"));
	double d;

	if (tag && !strcmp(tag, YAML_NULL_TAG))
		return cJSON_CreateNull();
	if (!plain)
		return cJSON_CreateString(s);
	if (is_null_word(s))
		return cJSON_CreateNull();
	if (c->flags & KUBE_YAML_TYPED) {
		if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
			return cJSON_CreateTrue();
		if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
			return cJSON_CreateFalse();
		if (core_number(s, &d))
			return cJSON_CreateNumber(d);
	}
	return cJSON_CreateString(s);
}

/* Places a finished node: as the root, as an array item, as a mapping key or value. */
static int place(struct ctx *c, const yaml_event_t *ev, cJSON *node, bool is_scalar)
{
	if (!node)
		return -ENOMEM;
	if (c->depth == 0) {
		c->root = node;
		return 0;
	}
	struct level *top = &c->stack[c->depth - 1];
	if (cJSON_IsArray(top->node)) {
		cJSON_AddItemToArray(top->node, node);
		return 0;
	}
	if (!top->key) {
		/* a mapping key */
		if (!is_scalar) {
			cJSON_Delete(node);
			return fail_at(c, ev, -EBADMSG, "mapping keys must be scalars");
		}
		top->key = strdup(cJSON_IsString(node) ? node->valuestring
				  : cJSON_IsNull(node) ? ""
						       : (const char *)ev->data.scalar.value);
		cJSON_Delete(node);
		return top->key ? 0 : -ENOMEM;
	}
	if (++top->n > KUBE_YAML_MAX_KEYS) {
		cJSON_Delete(node);
		return fail_at(c, ev, -E2BIG, "too many keys in one mapping");
	}
	if (cJSON_GetObjectItemCaseSensitive(top->node, top->key)) {
		char msg[160];
		snprintf(msg, sizeof(msg), "duplicate mapping key '%.100s'", top->key);
		cJSON_Delete(node);
		return fail_at(c, ev, -EBADMSG, msg);
	}
	cJSON_AddItemToObject(top->node, top->key, node);
	free(top->key);
	top->key = NULL;
	return 0;
}

static int push(struct ctx *c, const yaml_event_t *ev, cJSON *node)
{
	if (!node)
		return -ENOMEM;
	if (c->depth >= KUBE_YAML_MAX_DEPTH) {
		cJSON_Delete(node);
		return fail_at(c, ev, -E2BIG, "nested too deeply");
	}
	/* a container as a mapping key is refused by place() before it is pushed */
	if (c->depth > 0 && cJSON_IsObject(c->stack[c->depth - 1].node) &&
	    !c->stack[c->depth - 1].key) {
		cJSON_Delete(node);
		return fail_at(c, ev, -EBADMSG, "mapping keys must be scalars");
	}
	c->stack[c->depth++] = (struct level){.node = node};
	return 0;
}

static int pop(struct ctx *c, const yaml_event_t *ev)
{
	if (c->depth == 0)
		return fail_at(c, ev, -EBADMSG, "unbalanced end of a collection");
	struct level l = c->stack[--c->depth];
	free(l.key);
	return place(c, ev, l.node, false);
}

static int handle(struct ctx *c, const yaml_event_t *ev, bool *done)
{
	if ((ev->type == YAML_SCALAR_EVENT || ev->type == YAML_SEQUENCE_START_EVENT ||
	     ev->type == YAML_MAPPING_START_EVENT) &&
	    ++c->nodes > KUBE_YAML_MAX_NODES)
		return fail_at(c, ev, -E2BIG, "too many nodes");
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		if (strlen((const char *)ev->data.scalar.value) != ev->data.scalar.length)
			return fail_at(c, ev, -EBADMSG, "NUL byte in a scalar");
		return place(c, ev, scalar_node(c, ev), true);
	case YAML_SEQUENCE_START_EVENT:
		return push(c, ev, cJSON_CreateArray());
	case YAML_MAPPING_START_EVENT:
		return push(c, ev, cJSON_CreateObject());
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		return pop(c, ev);
	case YAML_ALIAS_EVENT:
		return fail_at(c, ev, -EBADMSG, "YAML aliases are not supported");
	case YAML_DOCUMENT_END_EVENT:
	case YAML_STREAM_END_EVENT:
		*done = true;
		return 0;
	default:
		return 0;
	}
}

int kube_yaml_parse(const char *data, size_t len, unsigned flags, cJSON **ret, char *err,
		    size_t errlen)
{
	struct ctx c = {.flags = flags, .err = err, .errlen = errlen};
	yaml_parser_t parser;
	bool done = false;
	int r = 0;

	if (errlen)
		err[0] = 0;
	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	while (!done) {
		yaml_event_t ev;
		if (!yaml_parser_parse(&parser, &ev)) {
			snprintf(err, errlen, "line %zu column %zu: %s%s%s",
				 parser.problem_mark.line + 1, parser.problem_mark.column + 1,
				 parser.problem ? parser.problem : "syntax error",
				 parser.context ? " " : "", parser.context ? parser.context : "");
			r = parser.error == YAML_MEMORY_ERROR ? -ENOMEM : -EBADMSG;
			break;
		}
		r = handle(&c, &ev, &done);
		yaml_event_delete(&ev);
		if (r < 0)
			break;
	}
	yaml_parser_delete(&parser);
	for (int i = 0; i < c.depth; i++) {
		free(c.stack[i].key);
		cJSON_Delete(c.stack[i].node);
	}
	if (r < 0) {
		cJSON_Delete(c.root);
		return r;
	}
	if (!c.root) {
		snprintf(err, errlen, "no document");
		return -ENODATA;
	}
	*ret = c.root;
	return 0;
}
