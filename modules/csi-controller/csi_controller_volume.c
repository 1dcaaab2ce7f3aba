/* DeleteVolume, ValidateVolumeCapabilities and ControllerGetVolume. */
#include <errno.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/error.h"
#include "common/aws/ids.h"
#include "modules/csi-controller/csi_controller_internal.h"

static const struct ctrl_deletion volume_deletion = {
    .kind = "volume",
    .key_prefix = "vol/",
    .id_valid = aws_volume_id_valid,
    .remove = ec2_delete_volume,
};

enum csi_code csi_ctrl_delete_volume(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				     const char *volume_id, struct csi_error *err)
{
	return ctrl_delete(c, &volume_deletion, volume_id, err);
}

/* The volume of a request's id: checked, then described. */
static enum csi_code describe(struct csi_ctrl *c, const char *volume_id, struct ec2_volume *ret,
			      struct csi_error *err)
{
	struct aws_error aerr = {0};
	int r;

	if (!aws_volume_id_valid(volume_id))
		return ctrl_bad_id(err, "volume id", volume_id);
	if ((r = ec2_describe_volume(c, volume_id, ret, &aerr)) < 0)
		return ctrl_aws_fail(err, r, &aerr, "looking up the volume", CSI_NOT_FOUND,
				     CSI_INTERNAL);
	return csi_error_ok(err);
}

enum csi_code csi_ctrl_validate(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				const char *volume_id, const struct csi_cap *caps, size_t n_caps,
				const char **ret_unsupported, struct csi_error *err)
{
	struct ec2_volume v = {0};

	*ret_unsupported = NULL;
	if (!*volume_id)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "volume id is missing");
	if (!n_caps)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "volume capabilities are missing");
	if (describe(c, volume_id, &v, err) != CSI_OK)
		return err->code;
	for (size_t i = 0; i < n_caps && !*ret_unsupported; i++)
		if (!csi_cap_supported(&caps[i], v.multi_attach))
			*ret_unsupported =
			    caps[i].access_mode == CSI_MODE_MULTI_NODE_MULTI_WRITER
				? "MULTI_NODE_MULTI_WRITER needs block access to a volume with "
				  "multi-attach enabled"
				: "an access mode or type this driver does not support";
	ec2_volume_release(&v);
	return CSI_OK;
}

enum csi_code csi_ctrl_get_volume(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				  const char *volume_id, struct csi_ctrl_volume *ret,
				  struct csi_error *err)
{
	struct ec2_volume v = {0};

	if (!*volume_id)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "volume id is missing");
	if (describe(c, volume_id, &v, err) != CSI_OK)
		return err->code;
	if (ctrl_volume_of(&v, NULL, 0, true, ret) < 0)
		csi_error_set(err, CSI_RESOURCE_EXHAUSTED, "out of memory");
	ec2_volume_release(&v);
	return err->code;
}
