/* common/csi: the error type and its gRPC codes, capabilities, key/value lists. */
#include <errno.h>
#include <stdlib.h>

#include "common/csi/grpc.h"
#include "common/grpc/rpc.h"
#include "tests/unit/harness.h"

TEST(csi_error_codes_and_messages)
{
	struct csi_error e;
	char big[2 * CSI_ERROR_MESSAGE_MAX];

	ASSERT_EQ(csi_error_set(&e, CSI_NOT_FOUND, "volume %s is gone", "vol-1"), CSI_NOT_FOUND);
	ASSERT_EQ(e.code, CSI_NOT_FOUND);
	ASSERT_STREQ(e.message, "volume vol-1 is gone");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	csi_error_set(&e, CSI_INTERNAL, "%s", big); /* cut, terminated */
	ASSERT_EQ(strlen(e.message), CSI_ERROR_MESSAGE_MAX - 1);
	ASSERT_EQ(csi_error_ok(&e), CSI_OK);
	ASSERT_STREQ(e.message, "");

	ASSERT_EQ(csi_code_from_errno(-ENOENT, CSI_NOT_FOUND, CSI_INTERNAL), CSI_NOT_FOUND);
	ASSERT_EQ(csi_code_from_errno(-EAGAIN, CSI_NOT_FOUND, CSI_INTERNAL), CSI_UNAVAILABLE);
	ASSERT_EQ(csi_code_from_errno(-ECONNRESET, CSI_NOT_FOUND, CSI_INTERNAL), CSI_UNAVAILABLE);
	ASSERT_EQ(csi_code_from_errno(-EINVAL, CSI_NOT_FOUND, CSI_ABORTED), CSI_ABORTED);

	/* every code has its own gRPC code and name */
	static const struct {
		enum csi_code c;
		int rpc;
		const char *name;
	} map[] = {
	    {CSI_OK, RPC_OK, "OK"},
	    {CSI_INVALID_ARGUMENT, RPC_INVALID_ARGUMENT, "INVALID_ARGUMENT"},
	    {CSI_NOT_FOUND, RPC_NOT_FOUND, "NOT_FOUND"},
	    {CSI_ALREADY_EXISTS, RPC_ALREADY_EXISTS, "ALREADY_EXISTS"},
	    {CSI_FAILED_PRECONDITION, RPC_FAILED_PRECONDITION, "FAILED_PRECONDITION"},
	    {CSI_OUT_OF_RANGE, RPC_OUT_OF_RANGE, "OUT_OF_RANGE"},
	    {CSI_RESOURCE_EXHAUSTED, RPC_RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"},
	    {CSI_ABORTED, RPC_ABORTED, "ABORTED"},
	    {CSI_DEADLINE_EXCEEDED, RPC_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"},
	    {CSI_UNAVAILABLE, RPC_UNAVAILABLE, "UNAVAILABLE"},
	    {CSI_INTERNAL, RPC_INTERNAL, "INTERNAL"},
	    {CSI_UNIMPLEMENTED, RPC_UNIMPLEMENTED, "UNIMPLEMENTED"},
	    {CSI_CANCELLED, RPC_CANCELLED, "CANCELLED"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
		ASSERT_EQ(csi_rpc_code(map[i].c), map[i].rpc);
		ASSERT_STREQ(csi_code_name(map[i].c), map[i].name);
	}
	ASSERT_EQ(csi_rpc_code((enum csi_code)99), RPC_INTERNAL);
	ASSERT_STREQ(csi_code_name((enum csi_code)99), "UNKNOWN");
}

TEST(csi_caps_and_key_values)
{
	Csi__V1__VolumeCapability pb = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__AccessMode mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	Csi__V1__VolumeCapability__BlockVolume blk = CSI__V1__VOLUME_CAPABILITY__BLOCK_VOLUME__INIT;
	Csi__V1__VolumeCapability__MountVolume mnt = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	struct csi_cap cap;

	csi_cap_of_pb(NULL, &cap);
	ASSERT_FALSE(cap.present);
	ASSERT_FALSE(csi_cap_supported(&cap, true));
	pb.access_mode = &mode;
	mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
	csi_cap_of_pb(&pb, &cap); /* no access type */
	ASSERT_TRUE(cap.no_access_type);
	ASSERT_FALSE(csi_cap_supported(&cap, true));
	pb.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	pb.mount = &mnt;
	mnt.fs_type = (char *)"xfs";
	csi_cap_of_pb(&pb, &cap);
	ASSERT_STREQ(cap.fs_type, "xfs");
	ASSERT_FALSE(csi_cap_supported(&cap, true)); /* multi-attach: block only */
	mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	csi_cap_of_pb(&pb, &cap);
	ASSERT_TRUE(csi_cap_supported(&cap, false));
	pb.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
	pb.block = &blk;
	mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
	csi_cap_of_pb(&pb, &cap);
	ASSERT_TRUE(cap.block);
	ASSERT_TRUE(csi_cap_supported(&cap, true));
	ASSERT_FALSE(csi_cap_supported(&cap, false));
	pb.access_mode = NULL;
	csi_cap_of_pb(&pb, &cap);
	ASSERT_EQ(cap.access_mode, 0);
	ASSERT_FALSE(csi_cap_supported(&cap, true));

	struct csi_kv *kv = NULL;
	size_t n = 0;
	ASSERT_OK(csi_kv_set(&kv, &n, 2, "Type", "gp3"));
	ASSERT_OK(csi_kv_set(&kv, &n, 2, "iops", "3000"));
	ASSERT_OK(csi_kv_set(&kv, &n, 2, "Type", "io2")); /* replaced, not added */
	ASSERT_ERR(csi_kv_set(&kv, &n, 2, "other", "x"), E2BIG);
	ASSERT_EQ(n, 2);
	ASSERT_STREQ(csi_kv_get(kv, n, "type"), "io2"); /* lookups ignore case */
	ASSERT_NULL(csi_kv_get(kv, n, "throughput"));
	csi_kv_free(kv, n);
	csi_kv_free(NULL, 0);
}
