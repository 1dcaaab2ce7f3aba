/* Unit tests: the node service's argument checks, error codes and idempotent no-ops (nothing
 * here mounts; tests/integration/csi_node_loop.sh does the real thing on loop devices). */
#include <sys/stat.h>

#include "common/base/buf.h"
#include "common/base/fileutil.h"
#include "modules/csi-node/csi_node_internal.h"
#include "tests/unit/harness.h"

static struct csi_node *new_node(void)
{
	static char byid[512];
	struct csi_node *n = NULL;

	(void)str_printf(byid, sizeof(byid), "%s/by-id", test_tmpdir());
	mkdir(byid, 0755);
	struct csi_node_config cfg = { .devices = { .by_id_dir = byid }, .node_id = "i-1" };
	return csi_node_new(&cfg, &n) < 0 ? NULL : n;
}

static struct csi_node_volume_req req_mount(const char *vol, const char *staging,
					    const char *target)
{
	return (struct csi_node_volume_req){
		.volume_id = vol,
		.staging_path = staging,
		.target_path = target,
		.cap = { .present = true, .fs_type = "ext4", .access_mode = 1 },
	};
}

TEST(csi_node_service_invalid_arguments)
{
	struct csi_node *n = new_node();
	struct csi_error st;
	struct csi_node_volume_req r;

	ASSERT_NOT_NULL(n);
	r = req_mount("", "/st", NULL);
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_INVALID_ARGUMENT);
	ASSERT_CONTAINS(st.message, "volume id");
	r = req_mount("vol/../x", "/st", NULL);
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_INVALID_ARGUMENT);
	r = req_mount("vol-1", "", NULL);
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_INVALID_ARGUMENT);
	r = req_mount("vol-1", "relative", NULL);
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_INVALID_ARGUMENT);
	r = req_mount("vol-1", "/a/../b", NULL);
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_INVALID_ARGUMENT);
	r = req_mount("vol-1", "/st", NULL);
	r.cap.present = false;
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_INVALID_ARGUMENT);
	ASSERT_CONTAINS(st.message, "capability");
	r = req_mount("vol-1", "/st", NULL);
	r.cap.fs_type = "btrfs";
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_INVALID_ARGUMENT);
	r.cap.fs_type = "ntfs";
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_INVALID_ARGUMENT);
	ASSERT_CONTAINS(st.message, "Windows");
	r = req_mount("vol-1", "/st", NULL);
	r.cap.access_mode = 5; /* multi-attach only for block */
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_INVALID_ARGUMENT);
	r.cap.access_mode = 3;
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_INVALID_ARGUMENT);
	r = req_mount("vol-1", "/st", NULL);
	const struct csi_kv vc[] = {{"blockSize", "x"}};
	r.volume_context = vc;
	r.n_volume_context = 1;
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_INVALID_ARGUMENT);
	r = req_mount("vol-1", "/st", NULL);
	const char *flags[] = { "bind" };
	r.cap.mount_flags = flags;
	r.cap.n_mount_flags = 1;
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_INVALID_ARGUMENT);
	/* publish: the target is required and differs from the staging path */
	r = req_mount("vol-1", "/st", "");
	ASSERT_EQ(csi_node_publish(n, &r, &st), CSI_INVALID_ARGUMENT);
	r = req_mount("vol-1", "/st", "/st");
	ASSERT_EQ(csi_node_publish(n, &r, &st), CSI_INVALID_ARGUMENT);
	ASSERT_EQ(csi_node_unpublish(n, "vol-1", "", &st), CSI_INVALID_ARGUMENT);
	ASSERT_EQ(csi_node_unstage(n, "", "/st", &st), CSI_INVALID_ARGUMENT);
	struct csi_node_expand_req e = { .volume_id = "vol-1", .volume_path = "" };
	int64_t bytes;
	ASSERT_EQ(csi_node_expand(n, &e, &bytes, &st), CSI_INVALID_ARGUMENT);
	struct csi_node_stats s;
	ASSERT_EQ(csi_node_get_stats(n, "", "/x", &s, &st), CSI_INVALID_ARGUMENT);
	csi_node_free(n);
}

TEST(csi_node_service_block_stage_is_a_noop)
{
	struct csi_node *n = new_node();
	struct csi_error st;
	struct csi_node_volume_req r = req_mount("vol-1", "/nonexistent/st", NULL);

	ASSERT_NOT_NULL(n);
	r.cap.block = true;
	r.cap.access_mode = 5; /* io2 Multi-Attach */
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_OK);
	csi_node_free(n);
}

TEST(csi_node_service_missing_things)
{
	struct csi_node *n = new_node();
	struct csi_error st;
	char st_path[1024], tgt[1024];

	ASSERT_NOT_NULL(n);
	(void)str_printf(st_path, sizeof(st_path), "%s/staging", test_tmpdir());
	(void)str_printf(tgt, sizeof(tgt), "%s/target", test_tmpdir());
	/* the volume has no device: NotFound */
	struct csi_node_volume_req r = req_mount("vol-0123", st_path, NULL);
	const struct csi_kv pc[] = {{"devicePath", "/dev/xvdzz"}};
	r.publish_context = pc;
	r.n_publish_context = 1;
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_NOT_FOUND);
	ASSERT_CONTAINS(st.message, "vol-0123");
	/* publish of a volume that is not staged */
	r = req_mount("vol-0123", st_path, tgt);
	ASSERT_EQ(csi_node_publish(n, &r, &st), CSI_FAILED_PRECONDITION);
	ASSERT_CONTAINS(st.message, "not staged");
	/* unstage / unpublish of what is not there: OK, twice; an empty directory is removed */
	ASSERT_EQ(csi_node_unstage(n, "vol-0123", st_path, &st), CSI_OK);
	ASSERT_EQ(mkdir(tgt, 0750), 0);
	ASSERT_EQ(csi_node_unpublish(n, "vol-0123", tgt, &st), CSI_OK);
	struct stat sb;
	ASSERT_TRUE(stat(tgt, &sb) < 0 && errno == ENOENT);
	ASSERT_EQ(csi_node_unpublish(n, "vol-0123", tgt, &st), CSI_OK);
	csi_node_free(n);
}

/* NodeGetVolumeStats and NodeExpandVolume where the volume is not: the spec's "volume does not
 * exist" is NOT_FOUND for a path that does not exist, a relative one (csi-sanity sends
 * "some/path"; "." exists in our working directory but must not be looked at) and one with
 * nothing mounted on it; only a missing id or path is INVALID_ARGUMENT. */
TEST(csi_node_service_stats_and_expand_not_found)
{
	struct csi_node *n = new_node();
	struct csi_node_stats s;
	struct csi_error st;
	int64_t bytes;
	char missing[1024], dir[1024], file[1024];
	static char longpath[4200];

	ASSERT_NOT_NULL(n);
	(void)str_printf(missing, sizeof(missing), "%s/nope/deeper", test_tmpdir());
	(void)str_printf(dir, sizeof(dir), "%s/empty-dir", test_tmpdir());
	(void)str_printf(file, sizeof(file), "%s/plain-file", test_tmpdir());
	ASSERT_EQ(mkdir(dir, 0750), 0);
	ASSERT_OK(file_write_atomic(file, "x", 1, 0640));
	longpath[0] = '/';
	memset(longpath + 1, 'a', sizeof(longpath) - 2);
	const struct {
		const char *id, *path;
		enum csi_code code;
		const char *msg;
	} cases[] = {
		{ "", "/proc", CSI_INVALID_ARGUMENT, "volume id is missing" },
		{ "vol-0123", "", CSI_INVALID_ARGUMENT, "volume path is missing" },
		{ "vol-0123", NULL, CSI_INVALID_ARGUMENT, "volume path is missing" },
		{ "vol-0123", "some/path", CSI_NOT_FOUND, "not an absolute path" },
		{ "vol-0123", ".", CSI_NOT_FOUND, "not an absolute path" },
		{ "vol-0123", "/a/../b", CSI_INVALID_ARGUMENT, "contains \"..\"" },
		{ "vol-0123", longpath, CSI_INVALID_ARGUMENT, "is too long" },
		{ "vol-0123", missing, CSI_NOT_FOUND, "does not exist" },
		{ "vol-0123", dir, CSI_NOT_FOUND, "no volume is mounted at" },
		{ "vol-0123", file, CSI_NOT_FOUND, "no volume is mounted at" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct csi_node_expand_req e = { .volume_id = cases[i].id,
						 .volume_path = cases[i].path };
		memset(&st, 0, sizeof(st));
		ASSERT_EQ(csi_node_get_stats(n, cases[i].id, cases[i].path, &s, &st), cases[i].code);
		ASSERT_CONTAINS(st.message, cases[i].msg);
		memset(&st, 0, sizeof(st));
		ASSERT_EQ(csi_node_expand(n, &e, &bytes, &st), cases[i].code);
		ASSERT_CONTAINS(st.message, cases[i].msg);
	}
	/* a mount point is found: stats report it; expand goes on to check what is mounted */
	ASSERT_EQ(csi_node_get_stats(n, "vol-0123", "/proc", &s, &st), CSI_OK);
	ASSERT_TRUE(s.has_bytes);
	ASSERT_FALSE(s.abnormal);
	struct csi_node_expand_req e = { .volume_id = "vol-0123", .volume_path = "/proc" };
	ASSERT_EQ(csi_node_expand(n, &e, &bytes, &st), CSI_FAILED_PRECONDITION);
	ASSERT_CONTAINS(st.message, "not a block device mount");
	csi_node_free(n);
}

TEST(csi_node_service_one_call_per_volume)
{
	struct csi_node *n = new_node();
	struct csi_error st;

	ASSERT_NOT_NULL(n);
	ASSERT_EQ(csi_node_lock(n, "vol-1", &st), CSI_OK);
	ASSERT_EQ(csi_node_lock(n, "vol-1", &st), CSI_ABORTED);
	ASSERT_STREQ(st.message, "an operation on volume vol-1 is already in progress");
	struct csi_node_volume_req r = req_mount("vol-1", "/st", NULL);
	ASSERT_EQ(csi_node_stage(n, &r, &st), CSI_ABORTED);
	ASSERT_EQ(csi_node_unstage(n, "vol-1", "/st", &st), CSI_ABORTED);
	ASSERT_EQ(csi_node_unpublish(n, "vol-1", "/t", &st), CSI_ABORTED);
	/* another volume is not held up */
	ASSERT_EQ(csi_node_unstage(n, "vol-2", "/nonexistent/st", &st), CSI_OK);
	csi_node_unlock(n, "vol-1");
	ASSERT_EQ(csi_node_lock(n, "vol-1", &st), CSI_OK);
	csi_node_unlock(n, "vol-1");
	ASSERT_TRUE(csi_node_access_mode_valid(1, false));
	ASSERT_TRUE(csi_node_access_mode_valid(2, false));
	ASSERT_TRUE(csi_node_access_mode_valid(7, false));
	ASSERT_FALSE(csi_node_access_mode_valid(5, false));
	ASSERT_TRUE(csi_node_access_mode_valid(5, true));
	ASSERT_FALSE(csi_node_access_mode_valid(0, true));
	csi_node_free(n);
	csi_node_free(NULL);
}
