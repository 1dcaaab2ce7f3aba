/* etcd in the converge run: join as a learner, promote, the lone member's peer URL, and
 * --force-new-cluster when it is safe (cpm_etcd_converge.h). */
#include "modules/cpm/cpm_etcd_converge.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/etcd/etcd.h"
#include "common/kube/rest.h"
#include "common/kube/yaml.h"
#include "modules/cpm/cpm_etcd.h"
#include "modules/cpm/cpm_files.h"
#include "modules/cpm/cpm_report.h"

#define STEP "etcd membership"
#define ADVERTISE_ANNOTATION "kubeadm.kubernetes.io/etcd.advertise-client-urls"
#define PKI_ETCD "/etc/kubernetes/pki/etcd/"

/* What the step knows of this node and its peers. */
struct ex {
	const struct cpm_converge *c;
	char name[256], peer[512], client[512], data_dir[4096];
	char **peers; /* the other nodes' etcd client URLs */
	char **cp;    /* the Nodes with the control-plane role */
	struct etcd_client *ec;
	char *err;
	size_t errlen;
	int64_t t0;
	int64_t t_etcd; /* the first etcd call */
};

__attribute__((format(printf, 3, 4))) static int fail(struct ex *x, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->err, x->errlen, fmt, ap);
	va_end(ap);
	return r;
}

__attribute__((format(printf, 3, 4))) static void report(struct ex *x, enum cpm_step_outcome o,
							  const char *fmt, ...)
{
	char detail[CPM_REPORT_DETAIL_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	log_info("etcd membership", KV_S("node", x->c->node_name), KV_S("detail", detail));
	if (x->c->rep)
		cpm_report_add(x->c->rep, STEP, o, (now_mono_ns() - x->t0) / NSEC_PER_MSEC, "%s",
			       detail);
}

/* The first value (up to a comma) of --flag in the desired etcd manifest's command. */
static void arg_first(const cJSON *cmd, const char *flag, char *out, size_t n)
{
	const cJSON *a;
	size_t l = strlen(flag);

	out[0] = 0;
	cJSON_ArrayForEach(a, cmd) {
		const char *s = cJSON_GetStringValue(a);
		if (s && strncmp(s, flag, l) == 0 && s[l] == '=') {
			snprintf(out, n, "%.*s", (int)strcspn(s + l + 1, ","), s + l + 1);
			return;
		}
	}
}

static int desired_args(struct ex *x)
{
	char sum[65], applied[512] = "", perr[256] = "", *text = NULL;
	const struct cpm_converge *c = x->c;
	cJSON *pod = NULL;
	const cJSON *cmd = NULL;
	int r = cpm_component_desired(c->cfg, c->root, CPM_ETCD, &text, sum, applied,
				      sizeof(applied), x->err, x->errlen);

	if (r < 0)
		return r;
	r = kube_yaml_parse(text, strlen(text), 0, &pod, perr, sizeof(perr));
	free(text);
	cmd = r >= 0 ? cpm_pod_command(pod) : NULL;
	arg_first(cmd, "--name", x->name, sizeof(x->name));
	arg_first(cmd, "--initial-advertise-peer-urls", x->peer, sizeof(x->peer));
	arg_first(cmd, "--advertise-client-urls", x->client, sizeof(x->client));
	arg_first(cmd, "--data-dir", x->data_dir, sizeof(x->data_dir));
	cJSON_Delete(pod);
	if (r < 0 || !x->name[0] || !x->peer[0] || !x->client[0] || !x->data_dir[0])
		return fail(x, r < 0 ? r : -EINVAL,
			    "etcd: the manifest lacks --name, --initial-advertise-peer-urls, "
			    "--advertise-client-urls or --data-dir%s%s",
			    perr[0] ? ": " : "", perr);
	return 0;
}

/* The other nodes' etcd pods (kubeadm's way to find the cluster) and the control-plane Nodes. */
static int discover(struct ex *x)
{
	struct kube_status st = { 0 };
	cJSON *list = NULL;
	const cJSON *it;
	int r = kube_list(x->c->kc, KUBE_REF(&kube_pods, "kube-system", NULL),
			  &(struct kube_list_opts){ .label_selector =
							    "component=etcd,tier=control-plane" },
			  &list, &st);

	if (r < 0)
		return fail(x, r, "etcd: cannot list the etcd pods: %s %s", strerror(-r), st.message);
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(list, "items")) {
		const char *node = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(it, "spec"), "nodeName"));
		const char *urls = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(
				cJSON_GetObjectItemCaseSensitive(it, "metadata"), "annotations"),
			ADVERTISE_ANNOTATION));
		char u[512];

		if (!node || !urls || strcmp(node, x->c->node_name) == 0)
			continue;
		for (const char *p = urls; *p && r >= 0; p += strcspn(p, ","), p += *p == ',') {
			snprintf(u, sizeof(u), "%.*s", (int)strcspn(p, ","), p);
			if (u[0] && !strv_contains(x->peers, u) && strv_len(x->peers) < 15)
				r = strv_push(&x->peers, u);
		}
	}
	cJSON_Delete(list);
	list = NULL;
	if (r >= 0)
		r = kube_list(x->c->kc, KUBE_REF(&kube_nodes, NULL, NULL),
			      &(struct kube_list_opts){ .label_selector =
								"node-role.kubernetes.io/control-plane" },
			      &list, &st);
	if (r < 0)
		return fail(x, r, "etcd: cannot list the control-plane Nodes: %s %s", strerror(-r),
			    st.message);
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(list, "items")) {
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(it, "metadata"), "name"));
		if (n && r >= 0)
			r = strv_push(&x->cp, n);
	}
	cJSON_Delete(list);
	return r < 0 ? fail(x, r, "etcd: out of memory") : 0;
}

/* The other nodes' etcd first (a learner here refuses MemberList), this node's last. */
static int client(struct ex *x, bool with_self)
{
	char ca[4200], crt[4200], key[4200];
	_cleanup_strv_ char **eps = NULL;
	int r = 0;

	for (size_t i = 0; x->peers && x->peers[i] && r >= 0; i++)
		r = strv_push(&eps, x->peers[i]);
	if (r >= 0 && with_self && !strv_contains(eps, x->client))
		r = strv_push(&eps, x->client);
	if (r >= 0)
		r = cpm_path(x->c->root, PKI_ETCD "ca.crt", ca, sizeof(ca));
	if (r >= 0)
		r = cpm_path(x->c->root, PKI_ETCD "healthcheck-client.crt", crt, sizeof(crt));
	if (r >= 0)
		r = cpm_path(x->c->root, PKI_ETCD "healthcheck-client.key", key, sizeof(key));
	if (r >= 0)
		r = etcd_client_new(&(struct etcd_client_opts){ .endpoints = eps,
								.ca_file = ca,
								.cert_file = crt,
								.key_file = key },
				    &x->ec);
	return r < 0 ? fail(x, r, "etcd: cannot make a client: %s", strerror(-r)) : 0;
}

static bool loopback_url(const char *url)
{
	const char *h = strstr(url, "://");

	h = h ? h + 3 : url;
	return strncmp(h, "localhost", 9) == 0 || strncmp(h, "127.0.0.1", 9) == 0 ||
	       strncmp(h, "[::1]", 5) == 0;
}

/* No member here (or an orphan's, or a stale one): a learner, its manifest, its pod, the
 * promote; the figure of the whole in the report. */
static int join(struct ex *x, const struct etcd_members *ms, enum cpm_etcd_state state,
		bool has_data, unsigned long calls0)
{
	_cleanup_buf_ struct buf ic = BUF_INIT(0);
	struct cpm_etcd_stats js = { 0 }, ps = { 0 };
	struct etcd_error e = { 0 };
	char moved[4300] = "";
	int r;

	if (ms->n == 1 && ms->v[0].peer_urls[0] && loopback_url(ms->v[0].peer_urls[0]) &&
	    !strv_contains(ms->v[0].peer_urls, x->peer))
		return fail(x, -EBUSY,
			    "etcd: the lone member %s still advertises the peer URL %s: its own "
			    "converge sets the real one first (or 'aws-k8s cpm etcd update-peer-url')",
			    ms->v[0].name, ms->v[0].peer_urls[0]);
	if (has_data && (state == CPM_ETCD_ORPHAN || state == CPM_ETCD_UNSTARTED)) {
		char dd[4200];

		r = cpm_path(x->c->root, x->data_dir, dd, sizeof(dd));
		if (r >= 0)
			r = cpm_etcd_wipe_orphan(dd, moved, sizeof(moved));
		if (r < 0)
			return fail(x, r, "etcd: cannot move the orphan data of %s aside: %s", dd,
				    strerror(-r));
		log_warn("etcd data without a member here: moved aside to rejoin",
			 KV_S("moved_to", moved));
		has_data = false;
	}
	log_info("joining etcd as a learner", KV_S("name", x->name), KV_S("peer", x->peer),
		 KV_S("state", cpm_etcd_state_name(state)));
	r = cpm_etcd_join(x->ec, x->name, x->peer, has_data, &ic, &js, &e);
	if (r < 0)
		return fail(x, r, "etcd: join as a learner: %s: %s", e.message, strerror(-r));
	struct cpm_converge jc = *x->c;
	jc.etcd_initial_cluster = ic.data;
	r = cpm_component_converge(&jc, CPM_ETCD, x->err, x->errlen);
	if (r < 0)
		return r;
	r = cpm_etcd_promote(x->ec, x->name, x->peer, NULL, &ps, &e);
	if (r < 0)
		return fail(x, r, "etcd: promote: %s: %s", e.message, strerror(-r));
	report(x, CPM_STEP_CREATED,
	       "%s: joined as a learner and promoted in %lld ms, %lu etcd calls (promote: %u "
	       "tries)%s%s",
	       cpm_etcd_state_name(state), (long long)((now_mono_ns() - x->t_etcd) / NSEC_PER_MSEC),
	       etcd_client_calls(x->ec) - calls0, ps.attempts,
	       moved[0] ? "; orphan data moved to " : "", moved);
	return 0;
}

/* Polls until this node's etcd lists itself alone (after --force-new-cluster). */
static int wait_alone(struct ex *x)
{
	struct etcd_error e = { 0 };
	int r, tries = x->c->pod_tries > 0 ? x->c->pod_tries : 42;

	for (int i = 0; i < tries; i++) {
		struct etcd_members ms = { 0 };
		struct etcd_status s = { 0 };

		r = etcd_member_list(x->ec, &ms, &e);
		bool alone = r >= 0 && ms.n == 1 && strv_contains(ms.v[0].peer_urls, x->peer);
		etcd_members_release(&ms);
		if (alone && etcd_status(x->ec, x->client, &s, &e) >= 0 && s.leader)
			return 0;
		if (cancel_wait(x->c->ct, x->c->pod_interval_ns ? x->c->pod_interval_ns
								 : NSEC_PER_SEC))
			return fail(x, -ECANCELED, "etcd: stopped");
	}
	return fail(x, -ETIMEDOUT,
		    "etcd: started with --force-new-cluster but does not list itself alone with a "
		    "leader: %s",
		    e.message);
}

/* Quorum lost: --force-new-cluster once, when safe, then the manifest without it. */
static int force_new_cluster(struct ex *x)
{
	struct cpm_etcd_backup_result res = { 0 };
	struct etcd_error e = { 0 };
	char folder[4096], out[4200];
	bool safe = false;
	int r = cpm_etcd_force_check(x->ec, x->name, x->peer, x->cp, &safe, &e);

	if (r < 0 || !safe)
		return fail(x, r < 0 ? r : -EBUSY,
			    "etcd has lost quorum and --force-new-cluster is not safe: %s",
			    e.message);
	r = cpm_backup_folder(x->c->backup, folder, sizeof(folder));
	if (r >= 0)
		r = str_printf(out, sizeof(out), "%s/etcd-before-force-new-cluster.snapshot", folder);
	if (r >= 0)
		r = cpm_mkdirs(folder);
	if (r >= 0)
		r = cpm_etcd_backup(x->ec,
				    &(struct cpm_etcd_backup_opts){ .out = out,
								    .keep = 1,
								    .min_free_percent = 0,
								    .endpoint = x->client },
				    &res, &e);
	if (r < 0)
		return fail(x, r, "etcd: the snapshot before --force-new-cluster: %s: %s", e.message,
			    strerror(-r));
	log_warn("etcd has lost quorum; every other voting member is dead and on no control-plane "
		 "Node: restarting it once with --force-new-cluster",
		 KV_S("snapshot", out));
	struct cpm_converge fc = *x->c;
	fc.etcd_force_new_cluster = true;
	r = cpm_component_converge(&fc, CPM_ETCD, x->err, x->errlen);
	if (r >= 0)
		r = wait_alone(x);
	if (r >= 0)
		r = cpm_component_converge(x->c, CPM_ETCD, x->err, x->errlen);
	if (r < 0)
		return r;
	report(x, CPM_STEP_UPDATED,
	       "quorum lost: restarted once with --force-new-cluster (snapshot %s, %llu bytes), "
	       "now the only member",
	       out, (unsigned long long)res.file_size);
	return 0;
}

/* This node is a started voter with data: the lone member's peer URL, or a lost quorum. */
static int joined(struct ex *x, const struct etcd_members *ms)
{
	struct etcd_status s = { 0 };
	struct etcd_error e = { 0 };
	bool changed = false;
	int r;

	if (ms->n == 1) {
		r = cpm_etcd_fix_lone_peer(x->ec, x->peer, &changed, &e);
		if (r < 0)
			return fail(x, r, "etcd: update the lone member's peer URL: %s: %s",
				    e.message, strerror(-r));
	} else if (etcd_status(x->ec, x->client, &s, &e) >= 0 && !s.leader) {
		return force_new_cluster(x);
	}
	r = cpm_component_converge(x->c, CPM_ETCD, x->err, x->errlen);
	if (r >= 0)
		report(x, changed ? CPM_STEP_UPDATED : CPM_STEP_UNCHANGED, "%s",
		       changed ? "the lone member's peer URL set to the manifest's" : "joined");
	return r;
}

int cpm_etcd_converge(const struct cpm_converge *c, char *err, size_t errlen)
{
	struct ex x = { .c = c, .err = err, .errlen = errlen, .t0 = now_mono_ns() };
	struct etcd_members ms = { 0 };
	struct etcd_error e = { 0 };
	enum cpm_etcd_state state;
	unsigned long calls0 = 0;
	char dd[4200];
	bool has_data;
	int r = desired_args(&x);

	if (r >= 0)
		r = discover(&x);
	if (r >= 0)
		r = cpm_path(c->root, x.data_dir, dd, sizeof(dd));
	if (r < 0)
		goto out;
	has_data = cpm_etcd_has_data(dd);
	if (!has_data && !x.peers) {
		log_info("no etcd data here and no other etcd pod: the first master, its etcd "
			 "manifest as rendered");
		r = cpm_component_converge(c, CPM_ETCD, err, errlen);
		if (r >= 0)
			report(&x, CPM_STEP_UNCHANGED, "%s", "the first master (no other etcd pod)");
		goto out;
	}
	if ((r = client(&x, has_data)) < 0)
		goto out;
	x.t_etcd = now_mono_ns();
	calls0 = etcd_client_calls(x.ec);
	r = etcd_member_list(x.ec, &ms, &e);
	if (r < 0 && has_data) {
		/* this node's etcd may just be down: its manifest first, then a look again */
		log_warn("etcd does not answer: its manifest first", KV_S("why", e.message));
		r = cpm_component_converge(c, CPM_ETCD, err, errlen);
		x.t_etcd = now_mono_ns();
		calls0 = etcd_client_calls(x.ec);
		if (r >= 0)
			r = etcd_member_list(x.ec, &ms, &e);
		if (r < 0 && !err[0])
			fail(&x, r, "etcd: no member list after its pod is Ready: %s: %s", e.message,
			     strerror(-r));
		if (r < 0)
			goto out;
	} else if (r < 0) {
		fail(&x, r, "etcd: cannot reach the cluster (%s): %s: %s", x.peers[0], e.message,
		     strerror(-r));
		goto out;
	}
	state = cpm_etcd_classify(&ms, x.name, x.peer, has_data);
	log_info("etcd member", KV_S("name", x.name), KV_S("state", cpm_etcd_state_name(state)),
		 KV_I("members", (long long)ms.n));
	switch (state) {
	case CPM_ETCD_JOINED:
		r = joined(&x, &ms);
		break;
	case CPM_ETCD_LEARNER:
		r = cpm_component_converge(c, CPM_ETCD, err, errlen);
		if (r >= 0 && (r = cpm_etcd_promote(x.ec, x.name, x.peer, NULL, NULL, &e)) < 0)
			fail(&x, r, "etcd: promote: %s: %s", e.message, strerror(-r));
		if (r >= 0)
			report(&x, CPM_STEP_UPDATED, "%s", "a learner, promoted");
		break;
	default:
		r = join(&x, &ms, state, has_data, calls0);
	}
out:
	if (r < 0 && c->rep)
		cpm_report_add(c->rep, STEP, CPM_STEP_FAILED, (now_mono_ns() - x.t0) / NSEC_PER_MSEC,
			       "%s", err);
	etcd_members_release(&ms);
	etcd_client_free(x.ec);
	strv_free(x.peers);
	strv_free(x.cp);
	return r;
}
