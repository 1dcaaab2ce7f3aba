/* Frozen JSON: a read-only copy of a cJSON tree in one allocation, for objects an informer
 * keeps. A cJSON tree costs one malloc per node, key and string (about 150 bytes per leaf on
 * glibc); a frozen copy puts every node and string of the object in one block and shares object
 * keys ("metadata", "name", "type"...) between all objects through a bounded intern table,
 * which about halves the memory of a stored Kubernetes object.
 *
 * The result is an ordinary cJSON tree for every reading function (cJSON_GetObjectItem*,
 * json_find/json_str, cJSON_Print, cJSON_Duplicate); it must never be changed, and is released
 * with free() on the root (never cJSON_Delete). */
#pragma once
#include <cjson/cJSON.h>
#include <stddef.h>

#define KUBE_INTERN_MAX_STRINGS 65536
#define KUBE_INTERN_MAX_BYTES ((size_t)4 << 20)

/* NULL on ENOMEM or for NULL. */
cJSON *kube_json_freeze(const cJSON *v);
/* Bytes of the frozen block (for statistics). */
size_t kube_json_frozen_size(const cJSON *v);
/* The intern table's size: strings and bytes. */
void kube_intern_stats(size_t *ret_strings, size_t *ret_bytes);
