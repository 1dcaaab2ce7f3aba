/* The metadata-labeler's Node labels (labeler.h). */
#include "common/csi/labeler.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/aws/ids.h"
#include "common/base/buf.h"
#include "common/base/json.h"

int csi_labeler_key(const char *driver, const char *suffix, char *buf, size_t n)
{
	return str_printf(buf, n, "%s%s", driver, suffix) < 0 ? -ENAMETOOLONG : 0;
}

static int count_label(const cJSON *labels, const char *driver, const char *suffix, int *ret,
		       char *why, size_t n)
{
	char key[CSI_LABEL_KEY_MAX], esc[64];
	const char *v;
	long long k;

	if (csi_labeler_key(driver, suffix, key, sizeof(key)) < 0) {
		snprintf(why, n, "the driver name is too long for a label key");
		return -ENAMETOOLONG;
	}
	v = labels ? json_str_key(labels, key) : NULL;
	if (!v) {
		snprintf(why, n, "no label %s", key);
		return -ENODATA;
	}
	if (str_to_ll(v, 0, CSI_LABEL_MAX_COUNT, &k) < 0) {
		snprintf(why, n, "label %s \"%s\" is not a count (0 to %d)", key,
			 aws_value_escape(v, esc, sizeof(esc)), CSI_LABEL_MAX_COUNT);
		return -EBADMSG;
	}
	*ret = (int)k;
	return 0;
}

int csi_labeler_counts_of_node(const cJSON *node, const char *driver,
			       struct csi_labeler_counts *ret, char *why, size_t n)
{
	const cJSON *labels = json_find(node, "metadata.labels");
	struct csi_labeler_counts k;
	int r;

	if ((r = count_label(labels, driver, CSI_LABEL_ENIS, &k.enis, why, n)) < 0 ||
	    (r = count_label(labels, driver, CSI_LABEL_VOLUMES, &k.volumes, why, n)) < 0)
		return r;
	*ret = k;
	return 0;
}

int csi_labeler_instance_id(const char *provider_id, char *buf, size_t n)
{
	const char *slash = provider_id ? strrchr(provider_id, '/') : NULL;
	const char *id = slash ? slash + 1 : provider_id;

	if (!id || !aws_instance_id_valid(id))
		return -EINVAL;
	return str_copy(buf, n, id) < 0 ? -ENAMETOOLONG : 0;
}
