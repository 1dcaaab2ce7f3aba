/* Volume capabilities and sizes (see volume.h). */
#include "common/csi/volume.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/base/buf.h"

const char *csi_kv_get(const struct csi_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; kv && i < n; i++)
		if (kv[i].key && strcasecmp(kv[i].key, key) == 0)
			return kv[i].value ? kv[i].value : "";
	return NULL;
}

void csi_kv_free(struct csi_kv *kv, size_t n)
{
	for (size_t i = 0; kv && i < n; i++) {
		free((char *)kv[i].key);
		free((char *)kv[i].value);
	}
	free(kv);
}

int csi_kv_set(struct csi_kv **kv, size_t *n, size_t max, const char *key, const char *value)
{
	struct csi_kv *nv;
	char *k, *v;

	if (!(v = strdup(value)))
		return -ENOMEM;
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*kv)[i].key, key) == 0) {
			free((char *)(*kv)[i].value);
			(*kv)[i].value = v;
			return 0;
		}
	if (*n >= max) {
		free(v);
		return -E2BIG;
	}
	if (!(k = strdup(key)) || !(nv = realloc(*kv, (*n + 1) * sizeof(*nv)))) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	*kv = nv;
	nv[*n].key = k;
	nv[*n].value = v;
	(*n)++;
	return 0;
}

bool csi_cap_supported(const struct csi_cap *cap, bool allow_multi_attach)
{
	if (!cap || !cap->present || cap->no_access_type)
		return false;
	switch (cap->access_mode) {
	case CSI_MODE_SINGLE_NODE_WRITER:
	case CSI_MODE_SINGLE_NODE_READER_ONLY:
	case CSI_MODE_SINGLE_NODE_SINGLE_WRITER:
	case CSI_MODE_SINGLE_NODE_MULTI_WRITER:
		return true;
	case CSI_MODE_MULTI_NODE_MULTI_WRITER:
		return allow_multi_attach && cap->block;
	default:
		return false;
	}
}

int csi_parse_size(const char *s, long long *ret)
{
	static const struct {
		const char *sfx;
		long long mul;
	} units[] = {
	    {"Ki", 1LL << 10},	    {"Mi", 1LL << 20},	       {"Gi", 1LL << 30},
	    {"Ti", 1LL << 40},	    {"Pi", 1LL << 50},	       {"k", 1000LL},
	    {"K", 1000LL},	    {"M", 1000000LL},	       {"G", 1000000000LL},
	    {"T", 1000000000000LL}, {"P", 1000000000000000LL},
	};
	char num[32];
	size_t i = 0;
	long long v;

	if (!s)
		return -EINVAL;
	while (s[i] && isdigit((unsigned char)s[i]))
		i++;
	if (i == 0 || i >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, i);
	num[i] = 0;
	if (str_to_ll(num, 0, LLONG_MAX, &v) < 0)
		return -ERANGE;
	if (!s[i]) {
		*ret = v;
		return 0;
	}
	for (size_t u = 0; u < ARRAY_SIZE(units); u++)
		if (strcmp(s + i, units[u].sfx) == 0) {
			if (v > LLONG_MAX / units[u].mul)
				return -ERANGE;
			*ret = v * units[u].mul;
			return 0;
		}
	return -EINVAL;
}
