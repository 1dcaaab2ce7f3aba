/* JSON helpers over cJSON: parsing with a clear error, and typed getters by path.
 *
 * A path is a dotted list of object keys and array indexes: "metadata.name",
 * "status.addresses.0.address". A key that itself holds dots (a label such as
 * "topology.kubernetes.io/zone") is looked up with the *_key functions on its parent object.
 * Getters return 0, -ENOENT when a step of the path is missing (or null), or -EBADMSG when the
 * value has another type; json_errmsg() turns that into a sentence naming the path. */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* Parses exactly len bytes (trailing white space allowed). -EBADMSG on a syntax error, with the
 * byte offset of the error in *ret_err_offset when it is not NULL. */
int json_parse(const char *s, size_t len, cJSON **ret, size_t *ret_err_offset);

const cJSON *json_find(const cJSON *root, const char *path);
int json_get_str(const cJSON *root, const char *path, const char **ret);
int json_get_int(const cJSON *root, const char *path, long long *ret);
int json_get_double(const cJSON *root, const char *path, double *ret);
int json_get_bool(const cJSON *root, const char *path, bool *ret);
int json_get_object(const cJSON *root, const char *path, const cJSON **ret);
int json_get_array(const cJSON *root, const char *path, const cJSON **ret);

/* The string at path, or NULL when missing or not a string. */
const char *json_str(const cJSON *root, const char *path);
/* The string under a literal key of obj (dots allowed in key), or NULL. */
const char *json_str_key(const cJSON *obj, const char *key);

/* Sets a string / number / bool at a dotted path, creating objects on the way. */
int json_set_str(cJSON *root, const char *path, const char *value);
int json_set_number(cJSON *root, const char *path, double value);
int json_set_bool(cJSON *root, const char *path, bool value);
/* Adds or replaces item (taking ownership) under key of obj. */
int json_put(cJSON *obj, const char *key, cJSON *item);

/* Compact text of a value (malloc'd) or NULL. */
char *json_print(const cJSON *v);
/* Writes "field 'path' is missing" / "field 'path' is not a string"... into buf. */
const char *json_errmsg(int r, const char *path, const char *want, char *buf, size_t n);
