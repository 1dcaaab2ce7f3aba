/* kubeadm patches: strategic merge, JSON merge and JSON patch on a manifest (cpm_patch.h). */
#include "modules/cpm/cpm_patch.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/fileutil.h"
#include "common/kube/yaml.h"

/* The merge keys of the lists of a Pod (k8s.io/api/core/v1 patchMergeKey). */
static const struct {
	const char *field, *key;
} merge_keys[] = {
	{ "containers", "name" },	{ "initContainers", "name" },
	{ "ephemeralContainers", "name" }, { "volumes", "name" },
	{ "volumeMounts", "mountPath" }, { "volumeDevices", "devicePath" },
	{ "env", "name" },		{ "ports", "containerPort" },
	{ "imagePullSecrets", "name" },	{ "hostAliases", "ip" },
	{ "resourceClaims", "name" },	{ "conditions", "type" },
};

static const char *merge_key(const char *field)
{
	for (size_t i = 0; i < sizeof(merge_keys) / sizeof(merge_keys[0]); i++)
		if (strcmp(merge_keys[i].field, field) == 0)
			return merge_keys[i].key;
	return NULL;
}

static const char *directive(const cJSON *o)
{
	const cJSON *d = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "$patch") : NULL;

	return cJSON_IsString(d) ? d->valuestring : NULL;
}

/* A copy of v without the "$..." keys of its maps. */
static cJSON *clean_copy(const cJSON *v)
{
	cJSON *c = cJSON_Duplicate(v, true);
	cJSON *stack[64];
	int n = 0;

	if (!c)
		return NULL;
	stack[n++] = c;
	while (n > 0) {
		cJSON *cur = stack[--n], *e = cur->child, *next;
		for (; e; e = next) {
			next = e->next;
			if (cJSON_IsObject(cur) && e->string && e->string[0] == '$') {
				cJSON_Delete(cJSON_DetachItemViaPointer(cur, e));
				continue;
			}
			if ((cJSON_IsObject(e) || cJSON_IsArray(e)) && n < 64)
				stack[n++] = e;
		}
	}
	return c;
}

static int put(cJSON *obj, const char *key, cJSON *v)
{
	if (!v)
		return -ENOMEM;
	if (cJSON_GetObjectItemCaseSensitive(obj, key))
		return cJSON_ReplaceItemInObjectCaseSensitive(obj, key, v) ? 0 : -ENOMEM;
	return cJSON_AddItemToObject(obj, key, v) ? 0 : -ENOMEM;
}

static int smp(cJSON *dst, const cJSON *patch, int depth);

static int smp_list(cJSON *dst, const cJSON *patch, const char *key, int depth)
{
	const cJSON *p;

	cJSON_ArrayForEach(p, patch) {
		const cJSON *pk = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, key) : NULL;
		cJSON *d, *found = NULL;
		const char *dir = directive(p);
		if (!pk) {
			/* an item without its merge key: appended as it is */
			if (!cJSON_AddItemToArray(dst, clean_copy(p)))
				return -ENOMEM;
			continue;
		}
		cJSON_ArrayForEach(d, dst) {
			const cJSON *dk = cJSON_GetObjectItemCaseSensitive(d, key);
			if (dk && cJSON_Compare(dk, pk, true)) {
				found = d;
				break;
			}
		}
		if (dir && strcmp(dir, "delete") == 0) {
			if (found)
				cJSON_Delete(cJSON_DetachItemViaPointer(dst, found));
			continue;
		}
		if (!found) {
			if (!cJSON_AddItemToArray(dst, clean_copy(p)))
				return -ENOMEM;
			continue;
		}
		int r = smp(found, p, depth + 1);
		if (r < 0)
			return r;
	}
	return 0;
}

static int smp(cJSON *dst, const cJSON *patch, int depth)
{
	const cJSON *p;
	const char *dir = directive(patch);

	if (depth > 64)
		return -E2BIG;
	if (dir && strcmp(dir, "replace") == 0) {
		cJSON *c = clean_copy(patch), *e;
		if (!c)
			return -ENOMEM;
		while ((e = dst->child))
			cJSON_Delete(cJSON_DetachItemViaPointer(dst, e));
		while ((e = c->child))
			cJSON_AddItemToObject(dst, e->string, cJSON_DetachItemViaPointer(c, e));
		cJSON_Delete(c);
		return 0;
	}
	cJSON_ArrayForEach(p, patch) {
		cJSON *d = cJSON_GetObjectItemCaseSensitive(dst, p->string);
		const char *mk = merge_key(p->string);
		int r = 0;
		if (p->string[0] == '$')
			continue;
		if (cJSON_IsNull(p)) {
			cJSON_DeleteItemFromObjectCaseSensitive(dst, p->string);
		} else if (cJSON_IsObject(p) && cJSON_IsObject(d) &&
			   !(directive(p) && strcmp(directive(p), "delete") == 0)) {
			r = smp(d, p, depth + 1);
		} else if (cJSON_IsObject(p) && directive(p) && strcmp(directive(p), "delete") == 0) {
			cJSON_DeleteItemFromObjectCaseSensitive(dst, p->string);
		} else if (cJSON_IsArray(p) && cJSON_IsArray(d) && mk) {
			r = smp_list(d, p, mk, depth + 1);
		} else {
			r = put(dst, p->string, clean_copy(p));
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int merge_patch(cJSON *dst, const cJSON *patch, int depth)
{
	const cJSON *p;

	if (depth > 64)
		return -E2BIG;
	cJSON_ArrayForEach(p, patch) {
		cJSON *d = cJSON_GetObjectItemCaseSensitive(dst, p->string);
		int r = 0;
		if (cJSON_IsNull(p))
			cJSON_DeleteItemFromObjectCaseSensitive(dst, p->string);
		else if (cJSON_IsObject(p) && cJSON_IsObject(d))
			r = merge_patch(d, p, depth + 1);
		else if (cJSON_IsObject(p)) {
			cJSON *o = cJSON_CreateObject();
			r = o ? merge_patch(o, p, depth + 1) : -ENOMEM;
			r = r < 0 ? (cJSON_Delete(o), r) : put(dst, p->string, o);
		} else
			r = put(dst, p->string, cJSON_Duplicate(p, true));
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- RFC 6902 ---------------------------------------------------------------------------- */

/* The parent of a JSON pointer's target and the last token (unescaped into tok). */
static int pointer_parent(cJSON *root, const char *ptr, cJSON **ret_parent, char *tok, size_t n)
{
	cJSON *cur = root;
	const char *s = ptr;

	if (*s != '/')
		return -EINVAL;
	for (;;) {
		size_t k = 0;
		s++;
		while (*s && *s != '/') {
			char c = *s++;
			if (c == '~' && (*s == '0' || *s == '1'))
				c = *s++ == '0' ? '~' : '/';
			if (k + 1 >= n)
				return -ENAMETOOLONG;
			tok[k++] = c;
		}
		tok[k] = 0;
		if (!*s) {
			*ret_parent = cur;
			return 0;
		}
		if (cJSON_IsObject(cur)) {
			cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
		} else if (cJSON_IsArray(cur)) {
			char *end;
			long i = strtol(tok, &end, 10);
			cur = *tok && !*end && i >= 0 ? cJSON_GetArrayItem(cur, (int)i) : NULL;
		} else {
			cur = NULL;
		}
		if (!cur)
			return -ENOENT;
	}
}

static int array_index(const cJSON *arr, const char *tok, bool for_add, int *ret)
{
	char *end;
	long i;
	int size = cJSON_GetArraySize(arr);

	if (for_add && strcmp(tok, "-") == 0) {
		*ret = size;
		return 0;
	}
	i = strtol(tok, &end, 10);
	if (!*tok || *end || i < 0 || i > size - (for_add ? 0 : 1))
		return -ENOENT;
	*ret = (int)i;
	return 0;
}

static cJSON *pointer_get(cJSON *root, const char *ptr)
{
	cJSON *parent;
	char tok[256];
	int i;

	if (!*ptr)
		return root;
	if (pointer_parent(root, ptr, &parent, tok, sizeof(tok)) < 0)
		return NULL;
	if (cJSON_IsObject(parent))
		return cJSON_GetObjectItemCaseSensitive(parent, tok);
	if (cJSON_IsArray(parent) && array_index(parent, tok, false, &i) >= 0)
		return cJSON_GetArrayItem(parent, i);
	return NULL;
}

static int op_remove(cJSON *root, const char *path, cJSON **ret_removed)
{
	cJSON *parent, *item = NULL;
	char tok[256];
	int i, r = pointer_parent(root, path, &parent, tok, sizeof(tok));

	if (r < 0)
		return r;
	if (cJSON_IsObject(parent))
		item = cJSON_DetachItemFromObjectCaseSensitive(parent, tok);
	else if (cJSON_IsArray(parent) && array_index(parent, tok, false, &i) >= 0)
		item = cJSON_DetachItemFromArray(parent, i);
	if (!item)
		return -ENOENT;
	if (ret_removed)
		*ret_removed = item;
	else
		cJSON_Delete(item);
	return 0;
}

static int op_add(cJSON **root, const char *path, cJSON *v)
{
	cJSON *parent;
	char tok[256];
	int i, r;

	if (!v)
		return -ENOMEM;
	if (!*path) {
		cJSON_Delete(*root);
		*root = v;
		return 0;
	}
	r = pointer_parent(*root, path, &parent, tok, sizeof(tok));
	if (r >= 0 && cJSON_IsObject(parent))
		return put(parent, tok, v);
	if (r >= 0 && cJSON_IsArray(parent) && (r = array_index(parent, tok, true, &i)) >= 0) {
		if (i == cJSON_GetArraySize(parent))
			return cJSON_AddItemToArray(parent, v) ? 0 : -ENOMEM;
		return cJSON_InsertItemInArray(parent, i, v) ? 0 : -ENOMEM;
	}
	cJSON_Delete(v);
	return r < 0 ? r : -ENOENT;
}

static int json_patch(cJSON **root, const cJSON *ops, char *err, size_t errlen)
{
	const cJSON *op;
	int k = 0;

	if (!cJSON_IsArray(ops)) {
		snprintf(err, errlen, "a json patch is a list of operations");
		return -EINVAL;
	}
	cJSON_ArrayForEach(op, ops) {
		const char *o = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(op, "op"));
		const char *path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(op, "path"));
		const char *from = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(op, "from"));
		const cJSON *value = cJSON_GetObjectItemCaseSensitive(op, "value");
		cJSON *moved = NULL, *cur;
		int r = -EINVAL;
		if (!o || !path) {
			snprintf(err, errlen, "operation %d: needs op and path", k);
			return -EINVAL;
		}
		if (strcmp(o, "add") == 0 && value)
			r = op_add(root, path, cJSON_Duplicate(value, true));
		else if (strcmp(o, "remove") == 0)
			r = op_remove(*root, path, NULL);
		else if (strcmp(o, "replace") == 0 && value)
			r = pointer_get(*root, path) ? op_remove(*root, path, NULL) : -ENOENT,
			r = r < 0 && *path ? r : op_add(root, path, cJSON_Duplicate(value, true));
		else if (strcmp(o, "move") == 0 && from)
			r = op_remove(*root, from, &moved),
			r = r < 0 ? r : op_add(root, path, moved);
		else if (strcmp(o, "copy") == 0 && from)
			r = (cur = pointer_get(*root, from)) ? op_add(root, path, cJSON_Duplicate(cur, true))
							      : -ENOENT;
		else if (strcmp(o, "test") == 0 && value)
			r = (cur = pointer_get(*root, path)) && cJSON_Compare(cur, value, true) ? 0
												 : -EINVAL;
		if (r < 0) {
			snprintf(err, errlen, "operation %d (%s %s): %s", k, o, path,
				 r == -EINVAL && strcmp(o, "test") == 0 ? "test failed"
				 : r == -EINVAL ? "bad operation" : strerror(-r));
			return -EINVAL;
		}
		k++;
	}
	return 0;
}

int cpm_patch_apply(cJSON **obj, enum cpm_patch_type type, const cJSON *patch, char *err,
		    size_t errlen)
{
	int r;

	if (type == CPM_PATCH_JSON)
		return json_patch(obj, patch, err, errlen);
	if (!cJSON_IsObject(patch) || !cJSON_IsObject(*obj)) {
		snprintf(err, errlen, "a %s patch is a map", type == CPM_PATCH_MERGE ? "merge"
									    : "strategic");
		return -EINVAL;
	}
	r = type == CPM_PATCH_MERGE ? merge_patch(*obj, patch, 0) : smp(*obj, patch, 0);
	if (r < 0)
		snprintf(err, errlen, "%s", strerror(-r));
	return r;
}

static const char *const targets[] = { "kube-apiserver", "kube-controller-manager",
				       "kube-scheduler", "etcd", "kubeletconfiguration",
				       "corednsdeployment" };

int cpm_patch_name(const char *name, const char *target, enum cpm_patch_type *ret_type)
{
	const char *t = NULL, *ext = strrchr(name, '.'), *plus;
	size_t tl = 0;

	if (!ext || (strcmp(ext, ".yaml") != 0 && strcmp(ext, ".json") != 0))
		return 0;
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		size_t l = strlen(targets[i]);
		if (strncmp(name, targets[i], l) == 0 && l > tl) {
			t = targets[i];
			tl = l;
		}
	}
	if (!t || strcmp(t, target) != 0)
		return 0;
	plus = memchr(name + tl, '+', (size_t)(ext - name - (ptrdiff_t)tl));
	for (const char *s = name + tl; s < (plus ? plus : ext); s++)
		if (*s == '.' || *s == '+')
			return 0;
	if (!plus) {
		*ret_type = CPM_PATCH_STRATEGIC;
		return 1;
	}
	size_t pl = (size_t)(ext - plus - 1);
	if (pl == 9 && strncmp(plus + 1, "strategic", 9) == 0)
		*ret_type = CPM_PATCH_STRATEGIC;
	else if (pl == 5 && strncmp(plus + 1, "merge", 5) == 0)
		*ret_type = CPM_PATCH_MERGE;
	else if (pl == 4 && strncmp(plus + 1, "json", 4) == 0)
		*ret_type = CPM_PATCH_JSON;
	else
		return 0;
	return 1;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Applies each "---"-separated document of text. */
static int apply_text(char *text, size_t len, enum cpm_patch_type type, cJSON **obj, char *err,
		      size_t errlen)
{
	char *doc = text, *end = text + len;

	while (doc < end) {
		char *sep = doc, *next = end;
		for (char *l = doc; l < end; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : end) {
			if (strncmp(l, "---", 3) == 0 && (l[3] == '\n' || l[3] == ' ' || !l[3])) {
				if (l == doc) {
					doc = strchr(l, '\n') ? strchr(l, '\n') + 1 : end;
					continue;
				}
				sep = l;
				next = strchr(l, '\n') ? strchr(l, '\n') + 1 : end;
				break;
			}
			sep = end;
		}
		if (sep <= doc) {
			doc = next;
			continue;
		}
		cJSON *p = NULL;
		int r = kube_yaml_parse(doc, (size_t)(sep - doc), KUBE_YAML_TYPED, &p, err, errlen);
		if (r == -ENODATA) {
			doc = next;
			continue;
		}
		if (r >= 0)
			r = cpm_patch_apply(obj, type, p, err, errlen);
		cJSON_Delete(p);
		if (r < 0)
			return r;
		doc = next;
	}
	return 0;
}

int cpm_patches_apply(const char *dir, const char *target, cJSON **obj, char *applied,
		      size_t applied_len, char *err, size_t errlen)
{
	char *names[CPM_PATCH_FILES_MAX];
	size_t n = 0, used = 0;
	struct dirent *e;
	DIR *d = opendir(dir);
	int r = 0, count = 0;

	if (applied_len)
		applied[0] = 0;
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		enum cpm_patch_type t;
		if (e->d_name[0] == '.' || !cpm_patch_name(e->d_name, target, &t))
			continue;
		if (n >= CPM_PATCH_FILES_MAX) {
			snprintf(err, errlen, "more than %d patch files for %s in %s",
				 CPM_PATCH_FILES_MAX, target, dir);
			r = -E2BIG;
			break;
		}
		if (!(names[n] = strdup(e->d_name))) {
			r = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (r >= 0)
		qsort(names, n, sizeof(names[0]), cmp_name);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		char path[4096], *text = NULL, perr[300] = "";
		size_t len = 0;
		enum cpm_patch_type t = CPM_PATCH_STRATEGIC;
		cpm_patch_name(names[i], target, &t);
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		r = file_read_all(path, CPM_PATCH_FILE_MAX, &text, &len);
		if (r >= 0)
			r = apply_text(text, len, t, obj, perr, sizeof(perr));
		free(text);
		if (r < 0) {
			snprintf(err, errlen, "patch %s: %s", path, perr[0] ? perr : strerror(-r));
			break;
		}
		count++;
		if (used + strlen(names[i]) + 2 < applied_len)
			used += (size_t)snprintf(applied + used, applied_len - used, "%s%s",
						 used ? "," : "", names[i]);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	return r < 0 ? r : count;
}

/* ---- YAML out ------------------------------------------------------------------------------ */

static bool plain_ok(const char *s)
{
	static const char *const typed[] = { "true", "false", "null", "yes", "no", "on", "off",
					     "True", "False", "Null", "NULL", "TRUE", "FALSE",
					     "~", "Yes", "No", "On", "Off", "y", "n", "Y", "N" };
	char *end;

	if (!*s || isspace((unsigned char)*s) || isspace((unsigned char)s[strlen(s) - 1]))
		return false;
	if (strchr("-?:,[]{}#&*!|>'\"%@`", *s) && !(*s == '-' && s[1] && s[1] != ' ' &&
						   !isdigit((unsigned char)s[1]) && s[1] != '.'))
		return false;
	for (size_t i = 0; i < sizeof(typed) / sizeof(typed[0]); i++)
		if (strcmp(s, typed[i]) == 0)
			return false;
	strtod(s, &end);
	if (!*end || strncmp(s, "0x", 2) == 0 || strncmp(s, "0o", 2) == 0)
		return false;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || (*p == ':' && (p[1] == ' ' || !p[1])) ||
		    (*p == ' ' && p[1] == '#'))
			return false;
	return true;
}

static void scalar(struct buf *b, const cJSON *v)
{
	if (cJSON_IsString(v)) {
		if (plain_ok(v->valuestring)) {
			buf_puts(b, v->valuestring);
		} else {
			char *q = cJSON_PrintUnformatted(v);
			buf_puts(b, q ? q : "\"\"");
			free(q);
		}
	} else if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;
		if (d == floor(d) && fabs(d) < 9e15)
			buf_printf(b, "%.0f", d);
		else
			buf_printf(b, "%.17g", d);
	} else if (cJSON_IsBool(v)) {
		buf_puts(b, cJSON_IsTrue(v) ? "true" : "false");
	} else {
		buf_puts(b, "null");
	}
}

static bool is_coll(const cJSON *v)
{
	return (cJSON_IsObject(v) || cJSON_IsArray(v)) && v->child;
}

static void key(struct buf *b, const char *k)
{
	cJSON tmp = { .type = cJSON_String, .valuestring = (char *)(uintptr_t)k };

	scalar(b, &tmp);
	buf_putc(b, ':');
}

static void node(struct buf *b, const cJSON *v, int indent, bool in_list);

static void value_after_key(struct buf *b, const cJSON *v, int indent)
{
	if (is_coll(v)) {
		buf_putc(b, '\n');
		node(b, v, cJSON_IsArray(v) ? indent : indent + 2, false);
	} else {
		buf_putc(b, ' ');
		if (cJSON_IsObject(v))
			buf_puts(b, "{}");
		else if (cJSON_IsArray(v))
			buf_puts(b, "[]");
		else
			scalar(b, v);
		buf_putc(b, '\n');
	}
}

/* A collection at indent; in_list: the first line follows "- " already written. */
static void node(struct buf *b, const cJSON *v, int indent, bool in_list)
{
	const cJSON *e;
	bool first = true;

	cJSON_ArrayForEach(e, v) {
		if (!(first && in_list))
			buf_printf(b, "%*s", indent, "");
		first = false;
		if (cJSON_IsObject(v)) {
			key(b, e->string);
			value_after_key(b, e, indent);
		} else {
			buf_puts(b, "- ");
			if (is_coll(e) && cJSON_IsObject(e)) {
				node(b, e, indent + 2, true);
			} else if (is_coll(e)) {
				buf_putc(b, '\n');
				node(b, e, indent + 2, false);
			} else {
				if (cJSON_IsObject(e))
					buf_puts(b, "{}");
				else if (cJSON_IsArray(e))
					buf_puts(b, "[]");
				else
					scalar(b, e);
				buf_putc(b, '\n');
			}
		}
	}
}

int cpm_yaml_write(struct buf *b, const cJSON *obj)
{
	if (!cJSON_IsObject(obj))
		return -EINVAL;
	if (!obj->child)
		buf_puts(b, "{}\n");
	else
		node(b, obj, 0, false);
	return b->data ? 0 : -ENOMEM;
}
