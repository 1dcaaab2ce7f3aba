/* Volume capabilities and sizes (see volume.h). */
#include "common/csi/volume.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "common/base/buf.h"

bool csi_cap_is_block(const Csi__V1__VolumeCapability *cap)
{
	return cap && cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
}

bool csi_cap_supported(const Csi__V1__VolumeCapability *cap, bool allow_multi_attach)
{
	if (!cap || !cap->access_mode)
		return false;
	if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK &&
	    cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT)
		return false;
	switch (cap->access_mode->mode) {
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER:
		return true;
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER:
		return allow_multi_attach && csi_cap_is_block(cap);
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
