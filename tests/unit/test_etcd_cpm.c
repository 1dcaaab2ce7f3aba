/* modules/cpm/cpm_etcd*: the names of the older backups, and this node's state from a member
 * list recorded from etcd 3.4.23 (tests/data/etcd/member-list-learner.json: e1 started, a learner
 * added at :23802 and not started). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/etcd/etcd.h"
#include "modules/cpm/cpm_etcd.h"
#include "tests/unit/harness.h"

TEST(etcd_backup_older_names)
{
	static const struct {
		const char *out;
		unsigned n;
		const char *want;
	} cases[] = {
		{ "/var/lib/etcd/etcd-backup.tar.gz", 0, "/var/lib/etcd/etcd-backup.tar.gz" },
		{ "/var/lib/etcd/etcd-backup.tar.gz", 2, "/var/lib/etcd/etcd-backup.2.tar.gz" },
		{ "b/snap.db.gz", 1, "b/snap.1.db.gz" },
		{ "b/snap.gz", 1, "b/snap.1.gz" },
		{ "b/snap.db", 3, "b/snap.3.db" },
		{ "dir.v1/snap", 1, "dir.v1/snap.1" },
		{ ".hidden", 1, ".hidden.1" },
		{ "x.tar.gz", 4, "x.4.tar.gz" },
	};
	char buf[256];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		ASSERT_OK(cpm_etcd_backup_name(cases[i].out, cases[i].n, buf, sizeof(buf)));
		ASSERT_STREQ(buf, cases[i].want);
	}
}

TEST(etcd_classify_this_node)
{
	size_t len;
	char *s = test_read_file(test_data("etcd/member-list-learner.json"), &len);
	struct etcd_members ms = { 0 };

	ASSERT_TRUE(s != NULL);
	ASSERT_OK(etcd_parse_members(s, len, &ms));
	free(s);
	ASSERT_EQ(cpm_etcd_classify(&ms, "e1", "http://127.0.0.1:23801", true), CPM_ETCD_JOINED);
	/* found by name when its peer URL is another (the lone member before update-peer-url) */
	ASSERT_EQ(cpm_etcd_classify(&ms, "e1", "https://10.0.0.5:2380", true), CPM_ETCD_JOINED);
	ASSERT_EQ(cpm_etcd_classify(&ms, "e1", "http://127.0.0.1:23801", false), CPM_ETCD_STALE);
	ASSERT_EQ(cpm_etcd_classify(&ms, "e2", "http://127.0.0.1:23802", false),
		  CPM_ETCD_UNSTARTED);
	ASSERT_EQ(cpm_etcd_classify(&ms, "e3", "http://127.0.0.1:23803", false),
		  CPM_ETCD_NEEDS_JOIN);
	ASSERT_EQ(cpm_etcd_classify(&ms, "e3", "http://127.0.0.1:23803", true), CPM_ETCD_ORPHAN);
	free(ms.v[1].name);
	ms.v[1].name = strdup("e2"); /* the learner started */
	ASSERT_EQ(cpm_etcd_classify(&ms, "e2", "http://127.0.0.1:23802", true), CPM_ETCD_LEARNER);
	ASSERT_STREQ(cpm_etcd_state_name(CPM_ETCD_ORPHAN), "orphan");
	etcd_members_release(&ms);
}

TEST(etcd_orphan_data_moved_aside)
{
	char dir[512], member[600], moved[700];
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/etcd", test_tmpdir());
	snprintf(member, sizeof(member), "%s/member", dir);
	ASSERT_FALSE(cpm_etcd_has_data(dir));
	ASSERT_OK(mkdir(dir, 0700));
	ASSERT_OK(mkdir(member, 0700));
	ASSERT_TRUE(cpm_etcd_has_data(dir));
	ASSERT_OK(cpm_etcd_wipe_orphan(dir, moved, sizeof(moved)));
	ASSERT_FALSE(cpm_etcd_has_data(dir));
	ASSERT_CONTAINS(moved, "/member.orphaned-");
	ASSERT_OK(stat(moved, &st));
	ASSERT_TRUE(S_ISDIR(st.st_mode));
}
