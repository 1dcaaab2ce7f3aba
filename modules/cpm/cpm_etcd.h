/* etcd for the control-plane manager: backups and membership, over common/etcd (the JSON gateway).
 *
 * What the cpm run calls (every function takes a client made with etcd_client_new, whose
 * timeout bounds each etcd call; none logs above debug; each returns 0 or a -errno, with the
 * server's answer or what refused the step in err->message):
 *
 *   enum cpm_etcd_state st = cpm_etcd_classify(&members, "master-1", "https://10.0.0.6:2380",
 *                                              cpm_etcd_has_data("/var/lib/etcd"));
 *   CPM_ETCD_NEEDS_JOIN / ORPHAN / STALE:  cpm_etcd_wipe_orphan (ORPHAN), then cpm_etcd_join
 *        -> the --initial-cluster for the manifest (initial-cluster-state=existing); start etcd;
 *   CPM_ETCD_LEARNER (after the start):    cpm_etcd_promote (10 tries, 1 s x1.5: Deckhouse's);
 *   CPM_ETCD_JOINED:                       nothing.
 *   Every node, from the list of Nodes with the control-plane role:
 *        cpm_etcd_remove_stale (never below quorum), cpm_etcd_fix_lone_peer (single master).
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/buf.h"
#include "common/etcd/etcd.h"

/* `aws-k8s cpm etcd VERB ...` (argv[0] is "etcd"); returns the exit code. */
int cpm_etcd_main(int argc, char **argv);
/* The membership verbs of `cpm etcd` (members, join, promote, remove-stale, update-peer-url);
 * returns the exit code. */
int cpm_etcd_members_cmd(struct etcd_client *c, const char *verb, const char *name,
			 const char *peer_url, const char *data_dir, char *const *control_plane,
			 bool dry_run);

/* Writes the printf-style message into err (when not NULL, code 0) and returns r. */
__attribute__((format(printf, 3, 4))) int cpm_etcd_fail(struct etcd_error *err, int r,
							const char *fmt, ...);

/* ---- backup (cpm_etcd_backup.c) ---- */

struct cpm_etcd_backup_opts {
	const char *out;	  /* FILE, FILE.gz (gzip of the snapshot) or FILE.tar.gz */
	int keep;		  /* files kept: FILE and FILE's older copies, 1 or more */
	int min_free_percent;	  /* of the file system of FILE, left free after the write */
	int64_t total_timeout_ns; /* the whole snapshot; 0: none (the idle timeout still holds) */
	const char *endpoint;	  /* NULL: the client's first */
};
struct cpm_etcd_backup_result {
	uint64_t db_size;   /* bytes of the db */
	uint64_t file_size; /* bytes written to FILE */
	unsigned messages;
	int64_t duration_ms;
	unsigned rotated; /* older files renamed */
	unsigned removed; /* older files removed past keep */
};
/* The snapshot, verified, written to opts->out (through a temporary file in its folder, renamed
 * over it) only when min_free_percent of the file system stays free with it; older files are
 * kept as FILE's name with .1, .2... before its extension (etcd-backup.1.tar.gz). On any failure
 * nothing is left but what was there before. -ENOSPC: the free-space rule refused (err says the
 * figures). */
int cpm_etcd_backup(struct etcd_client *c, const struct cpm_etcd_backup_opts *o,
		    struct cpm_etcd_backup_result *ret, struct etcd_error *err);
/* The name of the n-th older copy of out (n >= 1) into buf: "a/b.tar.gz" -> "a/b.2.tar.gz". */
int cpm_etcd_backup_name(const char *out, unsigned n, char *buf, size_t size);

/* ---- membership (cpm_etcd_members.c) ---- */

enum cpm_etcd_state {
	CPM_ETCD_JOINED,     /* a started voting member, and this node has data */
	CPM_ETCD_LEARNER,    /* a started learner: promote it */
	CPM_ETCD_UNSTARTED,  /* added (by a join) but not started yet, no data: start etcd */
	CPM_ETCD_NEEDS_JOIN, /* no member, no data */
	CPM_ETCD_ORPHAN,     /* data but no member (removed while away): wipe and rejoin */
	CPM_ETCD_STALE,	     /* a started member but no data here (a new disk): remove, rejoin */
};
const char *cpm_etcd_state_name(enum cpm_etcd_state s);

/* True when data_dir holds member/ (etcd's data). */
bool cpm_etcd_has_data(const char *data_dir);
/* This node's member: by peer URL, else by name. */
const struct etcd_member *cpm_etcd_find_self(const struct etcd_members *ms, const char *name,
					     const char *peer_url);
enum cpm_etcd_state cpm_etcd_classify(const struct etcd_members *ms, const char *name,
				      const char *peer_url, bool has_data);
/* Moves data_dir/member aside to data_dir/member.orphaned-<unix time> (an orphan's data). */
int cpm_etcd_wipe_orphan(const char *data_dir, char *moved_to, size_t size);

struct cpm_etcd_stats {
	unsigned calls;	     /* etcd calls made */
	unsigned attempts;   /* promote attempts */
	int64_t duration_ms; /* of the whole step */
};

/* Adds this node as a learner (nothing when its peer URL is already a member, started or not;
 * a STALE member, started elsewhere with this URL but no data here, is removed first when
 * has_data is false). While etcd answers "unhealthy cluster" (a voter connected for less than
 * 5 s, as right after a promote), MemberAdd is tried again: 10 tries, 1 s x1.5. An unstarted learner of another peer URL (an interrupted join) is removed
 * first: etcd takes one learner at a time. Refused (-EBUSY) when another member is unstarted
 * voter or a started learner, or when the cluster has no leader. initial_cluster gets etcd's
 * --initial-cluster: every member name=peerURL, this one under name. */
int cpm_etcd_join(struct etcd_client *c, const char *name, const char *peer_url, bool has_data,
		  struct buf *initial_cluster, struct cpm_etcd_stats *st, struct etcd_error *err);

struct cpm_etcd_backoff {
	unsigned steps;	 /* tries; 0: 10 */
	int64_t base_ns; /* the first wait; 0: 1 s */
	double factor;	 /* 0: 1.5 */
};
/* Promotes the member with this peer URL (or name) once it is in sync: MemberPromote, and on
 * etcd's "not in sync" (or an unstarted learner) waits and tries again, up to steps tries.
 * Already a voter: 0 at once. -ETIMEDOUT after the last try. */
int cpm_etcd_promote(struct etcd_client *c, const char *name, const char *peer_url,
		     const struct cpm_etcd_backoff *bo, struct cpm_etcd_stats *st,
		     struct etcd_error *err);

/* What cpm_etcd_remove_stale did, one line per member it looked at. */
struct cpm_etcd_removal {
	struct buf report; /* "removed NAME (ID)", "kept ...: why" lines */
	unsigned removed, refused;
};
void cpm_etcd_removal_release(struct cpm_etcd_removal *rm);
/* Removes every started member whose name is not among control_plane (the Nodes that carry the
 * control-plane role), one at a time, learners first, and only when the voters left that
 * answer (their status, on their client URLs) still make a quorum of the voters left; never the
 * last voter. Unstarted members are left (a join in progress). -EBUSY when one was refused (the
 * others are still done); -ENOLINK when the cluster has lost quorum already (2 -> 1 with the
 * other dead: needs --force-new-cluster). dry_run: says what it would do. */
int cpm_etcd_remove_stale(struct etcd_client *c, char *const *control_plane, bool dry_run,
			  struct cpm_etcd_removal *rm, struct cpm_etcd_stats *st,
			  struct etcd_error *err);

/* Multi -> single after quorum was lost (Deckhouse's 2 -> 1, done by hand there): *ret_safe
 * when this node's member (name / peer_url) is a started voter that answers, and every other
 * voter neither answers nor belongs to a control-plane Node (control_plane). Then restarting
 * this node's etcd once with --force-new-cluster (same data dir; a backup first: the snapshot
 * needs no quorum) keeps its data and drops the others, and a restart without the flag follows.
 * -EBUSY (not safe) when another voter answers (no forcing needed) or is on a control-plane
 * Node (it may come back: forcing would split the cluster); -EALREADY when this node is the
 * only voter. The restart is the caller's (the static pod's manifest). */
int cpm_etcd_force_check(struct etcd_client *c, const char *name, const char *peer_url,
			 char *const *control_plane, bool *ret_safe, struct etcd_error *err);

/* Single master: when the cluster has exactly one member and its peer URL is not peer_url,
 * MemberUpdate it to peer_url (what lets a second master join). *ret_changed tells whether it
 * did. More than one member: nothing. */
int cpm_etcd_fix_lone_peer(struct etcd_client *c, const char *peer_url, bool *ret_changed,
			   struct etcd_error *err);
