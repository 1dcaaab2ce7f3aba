/* etcd membership for the control-plane manager: classify this node, join as a learner, promote
 * when in sync, remove the members of Nodes that lost the control-plane role without losing
 * quorum, fix the lone member's peer URL (cpm_etcd.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/cpm/cpm_etcd.h"

int cpm_etcd_fail(struct etcd_error *err, int r, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->code = 0;
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return r;
}

#define fail cpm_etcd_fail
/* tries of MemberAdd while etcd says the cluster is not healthy yet (1 s, x1.5) */
#define JOIN_STEPS 10

const char *cpm_etcd_state_name(enum cpm_etcd_state s)
{
	switch (s) {
	case CPM_ETCD_JOINED:
		return "joined";
	case CPM_ETCD_LEARNER:
		return "learner";
	case CPM_ETCD_UNSTARTED:
		return "unstarted";
	case CPM_ETCD_NEEDS_JOIN:
		return "needs-join";
	case CPM_ETCD_ORPHAN:
		return "orphan";
	case CPM_ETCD_STALE:
		return "stale";
	}
	return "?";
}

bool cpm_etcd_has_data(const char *data_dir)
{
	char p[4200];
	struct stat st;

	return data_dir && str_printf(p, sizeof(p), "%s/member", data_dir) >= 0 &&
	       stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

const struct etcd_member *cpm_etcd_find_self(const struct etcd_members *ms, const char *name,
					     const char *peer_url)
{
	const struct etcd_member *m = etcd_members_find_peer(ms, peer_url);

	return m ? m : etcd_members_find_name(ms, name);
}

static bool started(const struct etcd_member *m)
{
	return m->name[0] != 0;
}

enum cpm_etcd_state cpm_etcd_classify(const struct etcd_members *ms, const char *name,
				      const char *peer_url, bool has_data)
{
	const struct etcd_member *m = cpm_etcd_find_self(ms, name, peer_url);

	if (!m)
		return has_data ? CPM_ETCD_ORPHAN : CPM_ETCD_NEEDS_JOIN;
	if (!started(m))
		return CPM_ETCD_UNSTARTED;
	if (!has_data)
		return CPM_ETCD_STALE;
	return m->is_learner ? CPM_ETCD_LEARNER : CPM_ETCD_JOINED;
}

int cpm_etcd_wipe_orphan(const char *data_dir, char *moved_to, size_t size)
{
	char from[4200];
	int r;

	if ((r = str_printf(from, sizeof(from), "%s/member", data_dir)) < 0 ||
	    (r = str_printf(moved_to, size, "%s/member.orphaned-%lld", data_dir,
			    (long long)time(NULL))) < 0)
		return r;
	return rename(from, moved_to) < 0 ? -errno : 0;
}

static void stats_end(struct cpm_etcd_stats *st, struct etcd_client *c, unsigned long calls0,
		      int64_t t0)
{
	if (!st)
		return;
	st->calls = (unsigned)(etcd_client_calls(c) - calls0);
	st->duration_ms = (now_mono_ns() - t0) / NSEC_PER_MSEC;
}

/* --initial-cluster: every member's name=peerURL, this node's under name. */
static int initial_cluster(const struct etcd_members *ms, const char *name, const char *peer_url,
			   struct buf *out, struct etcd_error *err)
{
	buf_reset(out);
	for (size_t i = 0; i < ms->n; i++) {
		const struct etcd_member *m = &ms->v[i];
		bool self = strv_contains(m->peer_urls, peer_url);

		if (!self && !started(m))
			return fail(err, -EBUSY, "member %016llx (%s) is added but not started",
				    (unsigned long long)m->id, m->peer_urls[0] ? m->peer_urls[0] : "");
		for (size_t k = 0; m->peer_urls[k]; k++) {
			int r = buf_printf(out, "%s%s=%s", out->len ? "," : "", self ? name : m->name,
					   self ? peer_url : m->peer_urls[k]);

			if (r < 0)
				return r;
			if (self)
				break;
		}
	}
	return 0;
}

int cpm_etcd_join(struct etcd_client *c, const char *name, const char *peer_url, bool has_data,
		  struct buf *ic, struct cpm_etcd_stats *st, struct etcd_error *err)
{
	unsigned long calls0 = etcd_client_calls(c);
	int64_t t0 = now_mono_ns(), delay = NSEC_PER_SEC;
	struct etcd_members ms = { 0 };
	const struct etcd_member *self;
	int r;

	if (!name || !name[0] || !peer_url || !peer_url[0])
		return fail(err, -EINVAL, "a name and a peer URL are needed");
	if ((r = etcd_member_list(c, &ms, err)) < 0)
		goto out;
	self = cpm_etcd_find_self(&ms, name, peer_url);
	if (self && started(self) && !has_data) {
		/* stale: started once with this URL or name, its data is gone */
		if ((r = etcd_member_remove(c, self->id, err)) < 0)
			goto out;
		etcd_members_release(&ms);
		if ((r = etcd_member_list(c, &ms, err)) < 0)
			goto out;
		self = NULL;
	}
	if (self && !strv_contains(self->peer_urls, peer_url)) {
		r = fail(err, -EEXIST, "member %s has the peer URL %s, not %s", self->name,
			 self->peer_urls[0] ? self->peer_urls[0] : "", peer_url);
		goto out;
	}
	if (!self) {
		struct etcd_members after = { 0 };
		char *urls[] = { (char *)peer_url, NULL };

		for (size_t i = 0; i < ms.n; i++) {
			const struct etcd_member *m = &ms.v[i];

			if (!started(m) && m->is_learner) {
				/* an interrupted join: etcd takes one learner at a time */
				if ((r = etcd_member_remove(c, m->id, err)) < 0)
					goto out;
			} else if (!started(m)) {
				r = fail(err, -EBUSY,
					 "member %016llx (%s) is added but not started: start it or "
					 "remove it first",
					 (unsigned long long)m->id, m->peer_urls[0] ? m->peer_urls[0] : "");
				goto out;
			} else if (m->is_learner) {
				r = fail(err, -EBUSY, "learner %s is not promoted yet", m->name);
				goto out;
			}
		}
		/* etcd refuses ("unhealthy cluster") until every voter has been connected for 5 s,
		 * as after a promote: tried again with the promote's backoff */
		for (unsigned k = 0;; k++) {
			r = etcd_member_add(c, urls, true, NULL, &after, err);
			if (r != -EAGAIN || k + 1 >= JOIN_STEPS)
				break;
			sleep_ns(delay);
			delay = delay * 3 / 2;
		}
		if (r < 0)
			goto out;
		etcd_members_release(&ms);
		ms = after;
	}
	r = initial_cluster(&ms, name, peer_url, ic, err);
out:
	etcd_members_release(&ms);
	stats_end(st, c, calls0, t0);
	return r;
}

int cpm_etcd_promote(struct etcd_client *c, const char *name, const char *peer_url,
		     const struct cpm_etcd_backoff *bo, struct cpm_etcd_stats *st,
		     struct etcd_error *err)
{
	unsigned long calls0 = etcd_client_calls(c);
	int64_t t0 = now_mono_ns(), delay = bo && bo->base_ns ? bo->base_ns : NSEC_PER_SEC;
	unsigned steps = bo && bo->steps ? bo->steps : 10, attempts = 0;
	double factor = bo && bo->factor > 0 ? bo->factor : 1.5;
	struct etcd_members ms = { 0 };
	const struct etcd_member *self;
	uint64_t id;
	int r;

	if ((r = etcd_member_list(c, &ms, err)) < 0)
		goto out;
	if (!(self = cpm_etcd_find_self(&ms, name, peer_url))) {
		r = fail(err, -ENOENT, "no member named %s or with the peer URL %s",
			 name ? name : "-", peer_url ? peer_url : "-");
		goto out;
	}
	if (!self->is_learner)
		goto out;
	id = self->id;
	for (;;) {
		attempts++;
		r = etcd_member_promote(c, id, err);
		if (r >= 0)
			break;
		if (r == -EBUSY && strstr(err->message, "can only promote a learner member") &&
		    !strstr(err->message, "in sync")) {
			r = 0; /* promoted already (by another run) */
			break;
		}
		if (r != -EBUSY && r != -EAGAIN && r != -ETIMEDOUT)
			break;
		if (attempts >= steps) {
			char last[sizeof(err->message)];

			str_copy(last, sizeof(last), err->message);
			r = fail(err, -ETIMEDOUT, "not promoted after %u tries: %s", attempts, last);
			break;
		}
		sleep_ns(delay);
		delay = (int64_t)((double)delay * factor);
	}
out:
	etcd_members_release(&ms);
	if (st)
		st->attempts = attempts;
	stats_end(st, c, calls0, t0);
	return r;
}

void cpm_etcd_removal_release(struct cpm_etcd_removal *rm)
{
	buf_release(&rm->report);
	rm->removed = rm->refused = 0;
}

/* MemberRemove, tried again while etcd answers "unhealthy cluster" (its strict reconfiguration
 * check wants the voters left connected for 5 s, as right after another removal). */
static int remove_retrying(struct etcd_client *c, uint64_t id, struct etcd_error *e)
{
	int64_t delay = NSEC_PER_SEC;
	int r;

	for (unsigned k = 0;; k++) {
		r = etcd_member_remove(c, id, e);
		if (r != -EAGAIN || k + 1 >= JOIN_STEPS)
			return r;
		sleep_ns(delay);
		delay = delay * 3 / 2;
	}
}

/* Whether the member's status answers on its first client URL (with a leader, when
 * need_leader). */
static bool member_status_ok(struct etcd_client *c, const struct etcd_member *m, bool need_leader)
{
	struct etcd_status s;

	if (!started(m) || !m->client_urls[0])
		return false;
	return etcd_status(c, m->client_urls[0], &s, NULL) >= 0 && (!need_leader || s.leader != 0);
}

static bool member_healthy(struct etcd_client *c, const struct etcd_member *m)
{
	return member_status_ok(c, m, true);
}

/* It answers at all, leader or not. */
static bool member_answers(struct etcd_client *c, const struct etcd_member *m)
{
	return member_status_ok(c, m, false);
}


int cpm_etcd_remove_stale(struct etcd_client *c, char *const *cp, bool dry_run,
			  struct cpm_etcd_removal *rm, struct cpm_etcd_stats *st,
			  struct etcd_error *err)
{
	unsigned long calls0 = etcd_client_calls(c);
	int64_t t0 = now_mono_ns();
	struct etcd_members ms = { 0 };
	unsigned voters = 0, healthy = 0;
	bool *ok = NULL;
	int r, ret = 0;

	if ((r = etcd_member_list(c, &ms, err)) < 0)
		goto out;
	if (!(ok = calloc(ms.n + 1, sizeof(*ok)))) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ms.n; i++) {
		ok[i] = member_healthy(c, &ms.v[i]);
		if (!ms.v[i].is_learner) {
			voters++;
			healthy += ok[i];
		}
	}
	if (healthy < voters / 2 + 1) {
		r = fail(err, -ENOLINK,
			 "the cluster has lost quorum: %u of %u voting members answer; removing one "
			 "would hang: restore quorum, or restart the one left with "
			 "--force-new-cluster",
			 healthy, voters);
		goto out;
	}
	/* learners first (they never count), then voters that do not answer, then the others */
	for (int pass = 0; pass < 3; pass++) {
		for (size_t i = 0; i < ms.n; i++) {
			const struct etcd_member *m = &ms.v[i];
			struct etcd_error e = { 0 };
			unsigned v2 = voters - 1, h2 = healthy - (ok[i] ? 1 : 0);

			if (!started(m) || strv_contains(cp, m->name))
				continue;
			if ((pass == 0) != m->is_learner || (!m->is_learner && (pass == 1) == ok[i]))
				continue;
			if (!m->is_learner && v2 == 0) {
				buf_printf(&rm->report, "kept %s (%016llx): the last voting member\n",
					   m->name, (unsigned long long)m->id);
				rm->refused++;
				continue;
			}
			if (!m->is_learner && h2 < v2 / 2 + 1) {
				buf_printf(&rm->report,
					   "kept %s (%016llx): %u of the %u voting members left would "
					   "answer, under the quorum of %u\n",
					   m->name, (unsigned long long)m->id, h2, v2, v2 / 2 + 1);
				rm->refused++;
				continue;
			}
			if (!dry_run && (r = remove_retrying(c, m->id, &e)) < 0) {
				buf_printf(&rm->report, "kept %s (%016llx): MemberRemove: %s: %s\n",
					   m->name, (unsigned long long)m->id, e.message,
					   strerror(-r));
				rm->refused++;
				continue;
			}
			buf_printf(&rm->report, "%s %s (%016llx)%s\n",
				   dry_run ? "would remove" : "removed", m->name,
				   (unsigned long long)m->id, m->is_learner ? ", a learner" : "");
			rm->removed++;
			if (!m->is_learner) {
				voters = v2;
				healthy = h2;
			}
		}
	}
	if (rm->refused)
		ret = fail(err, -EBUSY, "%u member(s) not removed", rm->refused);
	r = ret;
out:
	free(ok);
	etcd_members_release(&ms);
	stats_end(st, c, calls0, t0);
	return r;
}

int cpm_etcd_fix_lone_peer(struct etcd_client *c, const char *peer_url, bool *ret_changed,
			   struct etcd_error *err)
{
	struct etcd_members ms = { 0 };
	char *urls[] = { (char *)peer_url, NULL };
	int r;

	*ret_changed = false;
	if (!peer_url || !peer_url[0])
		return fail(err, -EINVAL, "a peer URL is needed");
	if ((r = etcd_member_list(c, &ms, err)) < 0)
		return r;
	if (ms.n == 1 && !(strv_len(ms.v[0].peer_urls) == 1 && strcmp(ms.v[0].peer_urls[0], peer_url) == 0)) {
		r = etcd_member_update(c, ms.v[0].id, urls, err);
		*ret_changed = r >= 0;
	}
	etcd_members_release(&ms);
	return r;
}

int cpm_etcd_force_check(struct etcd_client *c, const char *name, const char *peer_url,
			 char *const *cp, bool *ret_safe, struct etcd_error *err)
{
	struct etcd_members ms = { 0 };
	const struct etcd_member *self;
	unsigned others = 0;
	int r;

	*ret_safe = false;
	if ((r = etcd_member_list(c, &ms, err)) < 0)
		return r;
	self = cpm_etcd_find_self(&ms, name, peer_url);
	if (!self || self->is_learner || !started(self)) {
		r = fail(err, -ENOENT, "this node (%s) is no started voting member", name ? name : "-");
		goto out;
	}
	if (!member_answers(c, self)) {
		r = fail(err, -EHOSTDOWN, "this node's etcd does not answer on its client URL");
		goto out;
	}
	for (size_t i = 0; i < ms.n; i++) {
		const struct etcd_member *m = &ms.v[i];

		if (m == self || m->is_learner)
			continue;
		others++;
		if (member_healthy(c, m) || member_answers(c, m)) {
			r = fail(err, -EBUSY, "member %s answers: the cluster can work without forcing",
				 m->name[0] ? m->name : m->peer_urls[0]);
			goto out;
		}
		if (started(m) && strv_contains(cp, m->name)) {
			r = fail(err, -EBUSY, "member %s is on a control-plane Node: it may come back",
				 m->name);
			goto out;
		}
	}
	if (!others) {
		r = fail(err, -EALREADY, "this node is the only voting member already");
		goto out;
	}
	*ret_safe = true;
out:
	etcd_members_release(&ms);
	return r;
}

/* ---- the command line ---- */

static int cmd_fail(const char *verb, int r, const struct etcd_error *e)
{
	fprintf(stderr, "aws-k8s cpm etcd %s: %s%s%s\n", verb, e->message, e->message[0] ? ": " : "",
		strerror(-r));
	return 1;
}

static int cmd_members(struct etcd_client *c, const char *name, const char *peer_url,
		       const char *data_dir, char *const *cp)
{
	struct etcd_members ms = { 0 };
	struct etcd_error e = { 0 };
	int r = etcd_member_list(c, &ms, &e);

	if (r < 0)
		return cmd_fail("members", r, &e);
	for (size_t i = 0; i < ms.n; i++) {
		const struct etcd_member *m = &ms.v[i];
		_cleanup_buf_ struct buf urls = BUF_INIT(0);

		for (size_t k = 0; m->peer_urls[k]; k++)
			buf_printf(&urls, "%s%s", k ? "," : "", m->peer_urls[k]);
		printf("%016llx %s %s %s %s%s\n", (unsigned long long)m->id,
		       started(m) ? m->name : "-",
		       !started(m) ? "unstarted" : m->is_learner ? "learner" : "voter",
		       member_healthy(c, m) ? "healthy" : "unhealthy", urls.data ? urls.data : "-",
		       cp && started(m) && !strv_contains(cp, m->name)
			       ? " remove:not-a-control-plane-node"
			       : "");
	}
	if ((name && name[0]) || (peer_url && peer_url[0]))
		printf("this node: %s\n",
		       cpm_etcd_state_name(
			       cpm_etcd_classify(&ms, name, peer_url, cpm_etcd_has_data(data_dir))));
	etcd_members_release(&ms);
	return 0;
}

static int cmd_join(struct etcd_client *c, const char *name, const char *peer_url,
		    const char *data_dir)
{
	_cleanup_buf_ struct buf ic = BUF_INIT(0);
	struct cpm_etcd_stats st = { 0 };
	struct etcd_members ms = { 0 };
	struct etcd_error e = { 0 };
	bool has_data = cpm_etcd_has_data(data_dir);
	int r = etcd_member_list(c, &ms, &e);

	if (r < 0)
		return cmd_fail("join", r, &e);
	if (cpm_etcd_classify(&ms, name, peer_url, has_data) == CPM_ETCD_ORPHAN) {
		char moved[4300];

		r = cpm_etcd_wipe_orphan(data_dir, moved, sizeof(moved));
		if (r < 0) {
			etcd_members_release(&ms);
			fprintf(stderr, "aws-k8s cpm etcd join: moving the orphan data of %s aside: "
					"%s\n", data_dir, strerror(-r));
			return 1;
		}
		printf("join: orphan data moved to %s\n", moved);
		has_data = false;
	}
	etcd_members_release(&ms);
	r = cpm_etcd_join(c, name, peer_url, has_data, &ic, &st, &e);
	if (r < 0)
		return cmd_fail("join", r, &e);
	printf("join: %s as a learner in %lld ms, %u etcd calls\nETCD_NAME=%s\n"
	       "ETCD_INITIAL_CLUSTER=%s\nETCD_INITIAL_CLUSTER_STATE=existing\n",
	       peer_url, (long long)st.duration_ms, st.calls + 1, name, ic.data);
	return 0;
}

int cpm_etcd_members_cmd(struct etcd_client *c, const char *verb, const char *name,
			 const char *peer_url, const char *data_dir, char *const *cp, bool dry_run)
{
	struct cpm_etcd_stats st = { 0 };
	struct etcd_error e = { 0 };
	bool changed;
	int r;

	if (strcmp(verb, "members") == 0)
		return cmd_members(c, name, peer_url, data_dir, cp);
	if (strcmp(verb, "join") == 0) {
		if (!name || !name[0] || !peer_url || !peer_url[0]) {
			fprintf(stderr, "aws-k8s cpm etcd join: --name and --peer-url are needed\n");
			return 2;
		}
		return cmd_join(c, name, peer_url, data_dir);
	}
	if (strcmp(verb, "promote") == 0) {
		if ((!name || !name[0]) && (!peer_url || !peer_url[0])) {
			fprintf(stderr, "aws-k8s cpm etcd promote: --peer-url or --name is needed\n");
			return 2;
		}
		r = cpm_etcd_promote(c, name, peer_url, NULL, &st, &e);
		if (r < 0)
			return cmd_fail("promote", r, &e);
		printf("promote: %s is a voting member (%u tries, %lld ms, %u etcd calls)\n",
		       peer_url && peer_url[0] ? peer_url : name, st.attempts,
		       (long long)st.duration_ms, st.calls);
		return 0;
	}
	if (strcmp(verb, "remove-stale") == 0) {
		struct cpm_etcd_removal rm = { .report = BUF_INIT(0) };

		if (!cp || !cp[0]) {
			fprintf(stderr, "aws-k8s cpm etcd remove-stale: --control-plane-nodes is "
					"needed (never empty: that would remove every member)\n");
			return 2;
		}
		r = cpm_etcd_remove_stale(c, cp, dry_run, &rm, &st, &e);
		fputs(rm.report.data ? rm.report.data : "", stdout);
		printf("remove-stale: %u removed, %u kept (%lld ms, %u etcd calls)\n", rm.removed,
		       rm.refused, (long long)st.duration_ms, st.calls);
		cpm_etcd_removal_release(&rm);
		return r < 0 ? cmd_fail("remove-stale", r, &e) : 0;
	}
	if (strcmp(verb, "force-new-cluster-check") == 0) {
		bool safe;

		if (!cp || !cp[0] || !name || !name[0]) {
			fprintf(stderr, "aws-k8s cpm etcd force-new-cluster-check: --name and "
					"--control-plane-nodes are needed\n");
			return 2;
		}
		r = cpm_etcd_force_check(c, name, peer_url, cp, &safe, &e);
		if (r < 0) {
			printf("force-new-cluster-check: not safe: %s\n", e.message);
			return 1;
		}
		printf("force-new-cluster-check: safe: every other voting member is dead and on no "
		       "control-plane Node; restart %s's etcd once with --force-new-cluster\n", name);
		return 0;
	}
	if (strcmp(verb, "update-peer-url") == 0) {
		if (!peer_url || !peer_url[0]) {
			fprintf(stderr, "aws-k8s cpm etcd update-peer-url: --peer-url is needed\n");
			return 2;
		}
		r = cpm_etcd_fix_lone_peer(c, peer_url, &changed, &e);
		if (r < 0)
			return cmd_fail("update-peer-url", r, &e);
		printf("update-peer-url: %s\n", changed ? "changed" : "unchanged");
		return 0;
	}
	fprintf(stderr, "aws-k8s cpm etcd: unknown command '%s' (see 'aws-k8s cpm etcd --help')\n",
		verb);
	return 2;
}
