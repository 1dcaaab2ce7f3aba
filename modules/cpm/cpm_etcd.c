/* aws-k8s cpm etcd: backups, defragmentation and membership from the command line (cpm_etcd.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/cpm/cpm_etcd.h"

static const char etcd_usage[] =
	"etcd for the control-plane manager, through etcd's v3 JSON gateway (every call with a\n"
	"timeout: --command-timeout, and --dial-timeout for the connection and TLS handshake).\n"
	"The connection flags are etcdctl's, and so are their variables (ETCDCTL_ENDPOINTS,\n"
	"ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY). With etcd 3.4 the server certificate needs the\n"
	"clientAuth usage too (kubeadm's has it): the gateway calls itself with it.\n"
	"\n"
	"Commands:\n"
	"  backup --out FILE [--keep N] [--min-free-percent P]\n"
	"      The snapshot of the first endpoint, as `etcdctl snapshot save` writes it (the db,\n"
	"      then its sha256, checked here), to FILE; gzip'ed when FILE ends in .gz, a tar.gz\n"
	"      holding NAME.snapshot when it ends in .tar.gz (Deckhouse's etcd-backup.tar.gz). Written\n"
	"      through a temporary file next to FILE and renamed, only when P % (25) of its file\n"
	"      system stays free with it, checked before, during and after the write; otherwise exit\n"
	"      1 and nothing left. --keep N keeps FILE and N-1 older ones (etcd-backup.1.tar.gz...).\n"
	"  defrag [--cluster] [--min-db-size-percent P --quota-backend-bytes Q]\n"
	"      Defragments each endpoint in turn (etcdctl defrag); --cluster: every member's\n"
	"      client URLs instead, from the member list. With P > 0, only the members whose db\n"
	"      size is at least P % of Q, their etcd's --quota-backend-bytes (Deckhouse's hourly\n"
	"      check: 90); the others are named and left alone.\n"
	"  members [--control-plane-nodes N,N] [--name N --peer-url URL --data-dir D]\n"
	"      The member table (ID, name, peer URLs, voter/learner/unstarted, whether its status\n"
	"      answers) with, given the control-plane Nodes, which would be removed; given this\n"
	"      node, its state: joined, learner, unstarted, needs-join, orphan or stale.\n"
	"  join --name N --peer-url URL [--data-dir D]\n"
	"      Adds this node as a learner unless its peer URL is a member already (an orphan's data\n"
	"      in D/member is moved aside first, a stale member removed), then prints the flags of\n"
	"      its etcd: ETCD_INITIAL_CLUSTER=... and ETCD_INITIAL_CLUSTER_STATE=existing.\n"
	"  promote --peer-url URL | --name N\n"
	"      Promotes the learner once it is in sync: 10 tries, 1 s apart growing x1.5.\n"
	"  remove-stale --control-plane-nodes N,N [--dry-run]\n"
	"      Removes the members whose name is no control-plane Node, one at a time, never below\n"
	"      quorum and never the last (exit 1 when one was refused).\n"
	"  force-new-cluster-check --name N [--peer-url URL] --control-plane-nodes N,N\n"
	"      Quorum lost (2 -> 1 with the other dead): exit 0 and says so when it is safe to\n"
	"      restart this node's etcd once with --force-new-cluster (every other voting member\n"
	"      dead and on no control-plane Node), else exit 1 with the reason.\n"
	"  update-peer-url --peer-url URL\n"
	"      Single member only: sets its peer URL (what lets a second master join).\n"
	"\n"
	"Each command prints what it did, its duration and the number of etcd calls. Exit codes: 0\n"
	"done, 1 refused or failed (the reason printed), 2 usage error.";

static char **endpoints, **control_plane;
static char *cacert, *cert, *key, *out, *name, *peer_url, *data_dir;
static int64_t command_timeout, dial_timeout, snapshot_timeout;
static long long keep, min_free, min_db_pct, quota_bytes;
static bool dry_run, cluster;

static const struct flag etcd_flags[] = {
	{ "endpoints", FLAG_STRLIST, &endpoints, NULL, "ETCDCTL_ENDPOINTS",
	  "etcd's client URLs, comma-separated (default https://127.0.0.1:2379)." },
	{ "cacert", FLAG_STRING, &cacert, NULL, "ETCDCTL_CACERT", "The CA of etcd's certificates." },
	{ "cert", FLAG_STRING, &cert, NULL, "ETCDCTL_CERT", "The client certificate." },
	{ "key", FLAG_STRING, &key, NULL, "ETCDCTL_KEY", "The client certificate's key." },
	{ "command-timeout", FLAG_DURATION, &command_timeout, "5s", NULL,
	  "The limit of each etcd call (of each silence, during a snapshot)." },
	{ "dial-timeout", FLAG_DURATION, &dial_timeout, "2s", NULL,
	  "The limit of the connection and TLS handshake." },
	{ "snapshot-timeout", FLAG_DURATION, &snapshot_timeout, "1h", NULL,
	  "backup: the limit of the whole snapshot (0: none)." },
	{ "out", FLAG_STRING, &out, NULL, NULL, "backup: the file (.gz, .tar.gz compress)." },
	{ "keep", FLAG_INT, &keep, "1", NULL, "backup: how many files to keep.", 1, 100 },
	{ "min-free-percent", FLAG_INT, &min_free, "25", NULL,
	  "backup: the part of the file system that must stay free.", 0, 100 },
	{ "cluster", FLAG_BOOL, &cluster, "false", NULL,
	  "defrag: every member's client URLs, from the member list (etcdctl's --cluster)." },
	{ "min-db-size-percent", FLAG_INT, &min_db_pct, "0", NULL,
	  "defrag: only members whose db size is at least this % of --quota-backend-bytes "
	  "(0: every member).", 0, 100 },
	{ "quota-backend-bytes", FLAG_INT, &quota_bytes, "2147483648", NULL,
	  "defrag: the members' --quota-backend-bytes (etcd's default: 2 GiB).", 1,
	  (long long)1 << 40 },
	{ "name", FLAG_STRING, &name, NULL, "NODE_NAME", "This node's member name." },
	{ "peer-url", FLAG_STRING, &peer_url, NULL, NULL, "This node's peer URL." },
	{ "data-dir", FLAG_STRING, &data_dir, "/var/lib/etcd", NULL, "This node's etcd data." },
	{ "control-plane-nodes", FLAG_STRLIST, &control_plane, NULL, NULL,
	  "The Nodes with the control-plane role, comma-separated." },
	{ "dry-run", FLAG_BOOL, &dry_run, "false", NULL, "remove-stale: say, do nothing." },
	LOG_FLAGS,
	{ NULL },
};

static int failed(const char *verb, int r, const struct etcd_error *e)
{
	fprintf(stderr, "aws-k8s cpm etcd %s: %s%s%s\n", verb, e && e->message[0] ? e->message : "",
		e && e->message[0] ? ": " : "", strerror(-r));
	return 1;
}

static int cmd_backup(struct etcd_client *c)
{
	struct cpm_etcd_backup_result res;
	struct etcd_error e = { 0 };
	int r;

	if (!out || !out[0]) {
		fprintf(stderr, "aws-k8s cpm etcd backup: --out is required\n");
		return 2;
	}
	r = cpm_etcd_backup(c,
			    &(struct cpm_etcd_backup_opts){ .out = out,
							    .keep = (int)keep,
							    .min_free_percent = (int)min_free,
							    .total_timeout_ns = snapshot_timeout },
			    &res, &e);
	if (r < 0)
		return failed("backup", r, &e);
	printf("backup: %s: %llu bytes (db %llu bytes, %u messages, sha256 checked) in %lld ms, "
	       "%lu etcd calls; %u older kept, %u removed\n",
	       out, (unsigned long long)res.file_size, (unsigned long long)res.db_size,
	       res.messages, (long long)res.duration_ms, etcd_client_calls(c), res.rotated,
	       res.removed);
	return 0;
}

/* The endpoints to defragment: the given ones, or with --cluster every started member's client
 * URLs from the member list. */
static int defrag_targets(struct etcd_client *c, char ***ret)
{
	_cleanup_strv_ char **v = NULL;
	struct etcd_members ms = { 0 };
	struct etcd_error e = { 0 };
	int r;

	if (!cluster) {
		for (char *const *ep = etcd_client_endpoints(c); *ep; ep++)
			if (strv_push(&v, *ep) < 0)
				return -ENOMEM;
		*ret = TAKE_PTR(v);
		return 0;
	}
	r = etcd_member_list(c, &ms, &e);
	if (r < 0) {
		failed("defrag", r, &e);
		return r;
	}
	for (size_t i = 0; i < ms.n && r >= 0; i++) {
		if (!ms.v[i].client_urls[0])
			printf("defrag: member %016llx has not started (no client URL): left\n",
			       (unsigned long long)ms.v[i].id);
		else if (strv_push(&v, ms.v[i].client_urls[0]) < 0)
			r = -ENOMEM;
	}
	etcd_members_release(&ms);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(v);
	return 0;
}

static int cmd_defrag(struct etcd_client *c)
{
	_cleanup_strv_ char **eps = NULL;
	int rc = 0;

	if (defrag_targets(c, &eps) < 0 || !eps)
		return 1;
	for (size_t i = 0; eps[i]; i++) {
		struct etcd_error e = { 0 };
		struct etcd_status before = { 0 }, after = { 0 };
		int64_t t0 = now_mono_ns();
		int r = etcd_status(c, eps[i], &before, &e);

		if (r >= 0 && min_db_pct > 0 && before.db_size * 100 < quota_bytes * min_db_pct) {
			printf("defrag: %s: db %lld bytes, %lld%% of the quota %lld: under %lld%%, left\n",
			       eps[i], (long long)before.db_size,
			       (long long)(before.db_size * 100 / quota_bytes), quota_bytes,
			       min_db_pct);
			continue;
		}
		if (r >= 0)
			r = etcd_defragment(c, eps[i], &e);
		if (r >= 0)
			r = etcd_status(c, eps[i], &after, &e);
		if (r < 0) {
			fprintf(stderr, "aws-k8s cpm etcd defrag: %s: %s: %s\n", eps[i], e.message,
				strerror(-r));
			rc = 1;
			continue;
		}
		printf("defrag: %s: db %lld -> %lld bytes (%lld in use) in %lld ms\n", eps[i],
		       (long long)before.db_size, (long long)after.db_size,
		       (long long)after.db_size_in_use,
		       (long long)((now_mono_ns() - t0) / NSEC_PER_MSEC));
	}
	return rc;
}

static bool known_verb(const char *v)
{
	static const char *const verbs[] = { "backup", "defrag", "members", "join", "promote",
					     "remove-stale", "force-new-cluster-check",
					     "update-peer-url" };

	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(v, verbs[i]) == 0)
			return true;
	return false;
}

int cpm_etcd_main(int argc, char **argv)
{
	struct etcd_client *c = NULL;
	const char *verb = NULL;
	int r, n;

	/* the command word first (as the manifests write it, so that flags-check, which refuses
	 * positional arguments, sees flags only), or among the flags */
	if (argc > 1 && argv[1][0] != '-') {
		if (!known_verb(argv[1])) {
			fprintf(stderr, "aws-k8s cpm etcd: unknown command '%s' (see 'aws-k8s cpm etcd "
					"--help')\n", argv[1]);
			return 2;
		}
		verb = argv[1];
		argv[1] = argv[0];
		argc--;
		argv++;
	}
	n = flags_parse("cpm etcd", etcd_usage, etcd_flags, argc, argv);
	if (n < 0)
		return flags_exit_code(n);
	if (!verb && n > 0) {
		verb = argv[0];
		n--;
	}
	if (!verb || n != 0) {
		fprintf(stderr, "aws-k8s cpm etcd: %s (see 'aws-k8s cpm etcd --help')\n",
			!verb ? "a command is needed: backup, defrag, members, join, promote, "
				 "remove-stale or update-peer-url"
			       : "one command only");
		r = 2;
		goto out;
	}
	if (!endpoints && strv_push(&endpoints, "https://127.0.0.1:2379") < 0) {
		r = 1;
		goto out;
	}
	r = etcd_client_new(&(struct etcd_client_opts){ .endpoints = endpoints,
							.ca_file = cacert,
							.cert_file = cert,
							.key_file = key,
							.timeout_ns = command_timeout,
							.connect_timeout_ns = dial_timeout },
			    &c);
	if (r < 0) {
		fprintf(stderr, "aws-k8s cpm etcd: bad --endpoints (http:// or https:// URLs, at most "
				"16): %s\n", strerror(-r));
		r = 2;
		goto out;
	}
	if (strcmp(verb, "backup") == 0)
		r = cmd_backup(c);
	else if (strcmp(verb, "defrag") == 0)
		r = cmd_defrag(c);
	else
		r = cpm_etcd_members_cmd(c, verb, name, peer_url, data_dir, control_plane, dry_run);
out:
	etcd_client_free(c);
	flags_free(etcd_flags);
	return r;
}
