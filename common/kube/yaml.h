/* YAML to cJSON, through libyaml's event parser: the first document of the input becomes one
 * cJSON tree (mappings to objects, sequences to arrays, scalars to strings, or with
 * KUBE_YAML_TYPED plain scalars to null/bool/number as YAML 1.2's core schema says).
 *
 * Limits, since the input may come from anyone: aliases are refused (no "billion laughs"), at
 * most KUBE_YAML_MAX_DEPTH levels, KUBE_YAML_MAX_NODES nodes and KUBE_YAML_MAX_KEYS keys in
 * one mapping; mapping keys must be scalars and unique. Errors name the line and column: "line 3
 * column 5: mapping values are not allowed in this context". */
#pragma once
#include <cjson/cJSON.h>
#include <stddef.h>

#define KUBE_YAML_MAX_DEPTH 64
#define KUBE_YAML_MAX_NODES 200000
#define KUBE_YAML_MAX_KEYS 10000 /* in one mapping (duplicate keys are looked for) */

enum {
	KUBE_YAML_TYPED = 1 << 0, /* plain scalars: null, true/false, numbers */
};

/* -EBADMSG on a syntax error or a refused construct (message in err), -E2BIG over a limit,
 * -ENODATA for an empty input (no document). */
int kube_yaml_parse(const char *data, size_t len, unsigned flags, cJSON **ret, char *err,
		    size_t errlen);
