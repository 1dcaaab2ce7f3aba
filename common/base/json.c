#include "common/base/json.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int json_parse(const char *s, size_t len, cJSON **ret, size_t *ret_err_offset)
{
	const char *end = NULL;
	cJSON *v;

	if (!s)
		return -EINVAL;
	v = cJSON_ParseWithLengthOpts(s, len, &end, false);
	if (!v) {
		if (ret_err_offset)
			*ret_err_offset = end && end >= s ? (size_t)(end - s) : 0;
		return -EBADMSG;
	}
	if (end) {
		const char *stop = s + len;
		while (end < stop && (isspace((unsigned char)*end) || *end == 0))
			end++;
		if (end < stop) {
			if (ret_err_offset)
				*ret_err_offset = (size_t)(end - s);
			cJSON_Delete(v);
			return -EBADMSG;
		}
	}
	*ret = v;
	return 0;
}

static const cJSON *step(const cJSON *cur, const char *seg, size_t len)
{
	char key[256];

	if (!cur || len >= sizeof(key))
		return NULL;
	memcpy(key, seg, len);
	key[len] = 0;
	if (cJSON_IsArray(cur)) {
		char *e;
		long idx = strtol(key, &e, 10);
		if (*e || e == key || idx < 0)
			return NULL;
		return cJSON_GetArrayItem(cur, (int)idx);
	}
	if (cJSON_IsObject(cur))
		return cJSON_GetObjectItemCaseSensitive(cur, key);
	return NULL;
}

const cJSON *json_find(const cJSON *root, const char *path)
{
	const cJSON *cur = root;
	const char *p = path;

	if (!path || !*path)
		return root;
	while (cur && *p) {
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);
		cur = step(cur, p, len);
		p += len + (dot ? 1 : 0);
	}
	if (cur && cJSON_IsNull(cur))
		return NULL;
	return cur;
}

int json_get_str(const cJSON *root, const char *path, const char **ret)
{
	const cJSON *v = json_find(root, path);
	if (!v)
		return -ENOENT;
	if (!cJSON_IsString(v))
		return -EBADMSG;
	*ret = v->valuestring;
	return 0;
}

int json_get_double(const cJSON *root, const char *path, double *ret)
{
	const cJSON *v = json_find(root, path);
	if (!v)
		return -ENOENT;
	if (!cJSON_IsNumber(v))
		return -EBADMSG;
	*ret = v->valuedouble;
	return 0;
}

int json_get_int(const cJSON *root, const char *path, long long *ret)
{
	double d;
	int r = json_get_double(root, path, &d);
	if (r < 0)
		return r;
	if (d != floor(d) || d > 9007199254740992.0 || d < -9007199254740992.0)
		return -EBADMSG;
	*ret = (long long)d;
	return 0;
}

int json_get_bool(const cJSON *root, const char *path, bool *ret)
{
	const cJSON *v = json_find(root, path);
	if (!v)
		return -ENOENT;
	if (!cJSON_IsBool(v))
		return -EBADMSG;
	*ret = cJSON_IsTrue(v);
	return 0;
}

int json_get_object(const cJSON *root, const char *path, const cJSON **ret)
{
	const cJSON *v = json_find(root, path);
	if (!v)
		return -ENOENT;
	if (!cJSON_IsObject(v))
		return -EBADMSG;
	*ret = v;
	return 0;
}

int json_get_array(const cJSON *root, const char *path, const cJSON **ret)
{
	const cJSON *v = json_find(root, path);
	if (!v)
		return -ENOENT;
	if (!cJSON_IsArray(v))
		return -EBADMSG;
	*ret = v;
	return 0;
}

const char *json_str(const cJSON *root, const char *path)
{
	const char *s = NULL;
	return json_get_str(root, path, &s) == 0 ? s : NULL;
}

const char *json_str_key(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int json_put(cJSON *obj, const char *key, cJSON *item)
{
	if (!item)
		return -ENOMEM;
	if (!cJSON_IsObject(obj)) {
		cJSON_Delete(item);
		return -EINVAL;
	}
	if (cJSON_GetObjectItemCaseSensitive(obj, key))
		return cJSON_ReplaceItemInObjectCaseSensitive(obj, key, item) ? 0 : -ENOMEM;
	return cJSON_AddItemToObject(obj, key, item) ? 0 : -ENOMEM;
}

/* Walks to the parent object of the last segment, creating objects; returns the last key. */
static cJSON *parent_of(cJSON *root, const char *path, char *last, size_t n)
{
	cJSON *cur = root;
	const char *p = path;

	for (;;) {
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);
		if (len == 0 || len >= n)
			return NULL;
		memcpy(last, p, len);
		last[len] = 0;
		if (!dot)
			return cJSON_IsObject(cur) ? cur : NULL;
		cJSON *next = cJSON_GetObjectItemCaseSensitive(cur, last);
		if (!next || cJSON_IsNull(next)) {
			next = cJSON_CreateObject();
			if (!next || json_put(cur, last, next) < 0)
				return NULL;
		}
		if (!cJSON_IsObject(next))
			return NULL;
		cur = next;
		p = dot + 1;
	}
}

static int set_item(cJSON *root, const char *path, cJSON *item)
{
	char last[256];
	cJSON *parent = item ? parent_of(root, path, last, sizeof(last)) : NULL;
	if (!parent) {
		cJSON_Delete(item);
		return item ? -EINVAL : -ENOMEM;
	}
	return json_put(parent, last, item);
}

int json_set_str(cJSON *root, const char *path, const char *value)
{
	return set_item(root, path, cJSON_CreateString(value));
}

int json_set_number(cJSON *root, const char *path, double value)
{
	return set_item(root, path, cJSON_CreateNumber(value));
}

int json_set_bool(cJSON *root, const char *path, bool value)
{
	return set_item(root, path, cJSON_CreateBool(value));
}

char *json_print(const cJSON *v)
{
	return v ? cJSON_PrintUnformatted(v) : NULL;
}

const char *json_errmsg(int r, const char *path, const char *want, char *buf, size_t n)
{
	if (r == -ENOENT)
		snprintf(buf, n, "field '%s' is missing", path);
	else if (r == -EBADMSG)
		snprintf(buf, n, "field '%s' is not %s", path, want ? want : "of the expected type");
	else
		snprintf(buf, n, "field '%s': %s", path, strerror(-r));
	return buf;
}
