/* Device-name allocation of csi-controller. */
#include <stdlib.h>
#include <string.h>

#include "modules/csi-controller/csi_controller_internal.h"
#include "tests/unit/harness.h"

TEST(csi_devices_list_is_upstreams)
{
	ASSERT_EQ(csi_n_device_names, 127);
	ASSERT_STREQ(csi_device_names[0], "/dev/xvdaa");
	ASSERT_STREQ(csi_device_names[25], "/dev/xvdaz");
	ASSERT_STREQ(csi_device_names[26], "/dev/xvdba");
	ASSERT_STREQ(csi_device_names[52], "/dev/xvdda");
	ASSERT_STREQ(csi_device_names[75], "/dev/xvddx");
	ASSERT_STREQ(csi_device_names[76], "/dev/xvdb");
	ASSERT_STREQ(csi_device_names[100], "/dev/xvdz");
	ASSERT_STREQ(csi_device_names[101], "/dev/sdb");
	ASSERT_STREQ(csi_device_names[126], "/dev/sda2");
	for (size_t i = 0; i < csi_n_device_names; i++)
		for (size_t k = i + 1; k < csi_n_device_names; k++)
			ASSERT_TRUE(strcmp(csi_device_names[i], csi_device_names[k]) != 0);
}

TEST(csi_devices_pick_skips_used_and_inflight)
{
	struct csi_devices *d;
	char a[CSI_DEVICE_NAME_MAX], b[CSI_DEVICE_NAME_MAX], c[CSI_DEVICE_NAME_MAX];
	const char *used[] = {"/dev/xvda", "/dev/sdaa"}; /* sdaa is the same device as xvdaa */

	ASSERT_OK(csi_devices_new(&d));
	ASSERT_OK(csi_devices_pick(d, "i-1", "vol-a", used, 2, a));
	ASSERT_STREQ(a, "/dev/xvdab");
	/* a second volume in flight on the same node gets another name */
	ASSERT_OK(csi_devices_pick(d, "i-1", "vol-b", used, 2, b));
	ASSERT_STREQ(b, "/dev/xvdac");
	/* the same volume again gets its name back (idempotent) */
	ASSERT_OK(csi_devices_pick(d, "i-1", "vol-a", used, 2, c));
	ASSERT_STREQ(c, "/dev/xvdab");
	ASSERT_EQ(csi_devices_held(d, "i-1"), 2);
	/* another node is independent */
	ASSERT_OK(csi_devices_pick(d, "i-2", "vol-c", NULL, 0, c));
	ASSERT_STREQ(c, "/dev/xvdaa");
	csi_devices_release(d, "i-1", "vol-a");
	ASSERT_EQ(csi_devices_held(d, "i-1"), 1);
	ASSERT_OK(csi_devices_pick(d, "i-1", "vol-d", used, 2, c));
	ASSERT_STREQ(c, "/dev/xvdab");
	csi_devices_free(d);
}

TEST(csi_devices_bad_names_go_last)
{
	struct csi_devices *d;
	char a[CSI_DEVICE_NAME_MAX];

	ASSERT_OK(csi_devices_new(&d));
	csi_devices_mark_bad(d, "i-1", "/dev/xvdaa");
	csi_devices_mark_bad(d, "i-1", "/dev/xvdab");
	ASSERT_OK(csi_devices_pick(d, "i-1", "vol-a", NULL, 0, a));
	ASSERT_STREQ(a, "/dev/xvdac");
	/* when everything else is used, a bad name is still tried */
	const char **used = calloc(csi_n_device_names, sizeof(*used));
	size_t n = 0;
	for (size_t i = 2; i < csi_n_device_names; i++)
		used[n++] = csi_device_names[i];
	ASSERT_OK(csi_devices_pick(d, "i-1", "vol-b", used, n, a));
	ASSERT_STREQ(a, "/dev/xvdaa");
	ASSERT_OK(csi_devices_pick(d, "i-1", "vol-c", used, n, a));
	ASSERT_STREQ(a, "/dev/xvdab");
	ASSERT_ERR(csi_devices_pick(d, "i-1", "vol-d", used, n, a), ENOSPC);
	free(used);
	csi_devices_free(d);
}
