/* aws-k8s cpm: the control-plane manager's one-shot steps (cpm.h). */
#include "modules/cpm/cpm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/kube/kubeflags.h"
#include "modules/cpm/cpm_approve.h"
#include "modules/cpm/cpm_etcd.h"
#include "modules/cpm/cpm_int.h"
#include "modules/cpm/cpm_run.h"
#include "modules/cpm/cpm_sched.h"
#include "modules/cpm/cpm_sched_cmd.h"
#include "modules/cpm/cpm_version.h"

static const char cpm_usage[] =
	"The control-plane manager: renders what kubeadm would for a control-plane node (the PKI,\n"
	"the kubeconfigs and the static-pod manifests of kube-apiserver, kube-controller-manager,\n"
	"kube-scheduler and etcd), from the kubeadm-style configuration Deckhouse's Secret\n"
	"d8-control-plane-manager-config holds, without a kubeadm binary.\n"
	"\n"
	"Commands:\n"
	"  (none) | converge [--config-dir DIR] [--pki-dir DIR] [--root DIR] [--kubeconfig FILE]\n"
	"      Deckhouse's DaemonSet run, one-shot then idle: removes orphan kubeadm patches;\n"
	"      annotates the Node control-plane-manager.deckhouse.io/waiting-for-approval and waits\n"
	"      (--approval-retries x --approval-interval, 42 x 10s) for .../approved (set by\n"
	"      'cpm approve'); with MY_POD_NAME, waits for that pod's image-holder containers;\n"
	"      refuses to go on when the etcd manifest's --advertise-client-urls IP\n"
	"      is not MY_IP, its --name not the node or its --data-dir not /var/lib/etcd, or when\n"
	"      kubelet.conf does not point at https://127.0.0.1:6445; installs kubeadm-config.yaml\n"
	"      and the <component>.yaml.tpl patches (env expanded) under\n"
	"      /etc/kubernetes/deckhouse/kubeadm/, the d8-pki files under /etc/kubernetes/pki, the\n"
	"      certificates and kubeconfigs as render does, the extra-file-* (0600) under\n"
	"      /etc/kubernetes/deckhouse/extra-files/; converges kube-apiserver,\n"
	"      kube-controller-manager, kube-scheduler, etcd in that order: the manifest with the\n"
	"      kubeadm patches (TARGET[suffix][+strategic|merge|json].{yaml,json}) applied is\n"
	"      written when the live one lacks its checksum, then the mirror pod <comp>-<node> must\n"
	"      show it and be Ready (--pod-ready-retries x 1s; for kube-apiserver the manifest is\n"
	"      moved out and back once more, kubernetes#109596). Every replaced or removed file is\n"
	"      first copied under /etc/kubernetes/deckhouse/backup/<YYYY-MM-DD>_<configChecksum>/\n"
	"      (newest 5 folders kept). Then writes last_applied_configuration_checksum, answers ok\n"
	"      on /readyz (--healthz-bind-address, 127.0.0.1:8095) and waits for SIGTERM (exit 0).\n"
	"      The node is NODE_NAME (or the hostname), its IP MY_IP.\n"
	"      --dry-run: the same steps on a copy of ROOT/etc/kubernetes (no approval asked, no\n"
	"      pod waited for, no API server needed), then what would change: the manifests and\n"
	"      the kubeadm configuration as diff -u, other files by name only (keys); exit 0.\n"
	"  render --config FILE [--root DIR] [--node-name N] [--my-ip IP] [--dry-run]\n"
	"      Writes under DIR (as kubeadm's --rootfs; default /), then stops:\n"
	"      - etc/kubernetes/pki: the leaf certificates of kubeadm's table (apiserver,\n"
	"        apiserver-kubelet-client, apiserver-etcd-client, front-proxy-client, etcd/server,\n"
	"        etcd/peer, etcd/healthcheck-client; keys 0600) and sa.key/sa.pub. The CAs (ca,\n"
	"        front-proxy-ca, etcd/ca) are inputs, installed from the Secret d8-pki: never made.\n"
	"        A certificate is renewed when fewer than 30 days remain (an expired one included:\n"
	"        no API server is needed), when its subject or SANs differ from the configuration,\n"
	"        when its key is missing or does not match, or when another CA issued it.\n"
	"      - etc/kubernetes/{admin,super-admin,controller-manager,scheduler}.conf (0600),\n"
	"        recreated on the same rules and when the server or the CA changed.\n"
	"      - etc/kubernetes/manifests/{kube-apiserver,kube-controller-manager,kube-scheduler,\n"
	"        etcd}.yaml (0600): kubeadm's flags with the configuration's extraArgs, probes,\n"
	"        volumes and resources, and the annotation\n"
	"        control-plane-manager.deckhouse.io/checksum (sha256 of the manifest and of every\n"
	"        file it names under /etc/kubernetes).\n"
	"      A file is written only when it changes: a second run with nothing changed touches\n"
	"      nothing. Each step is printed with its outcome and duration. --dry-run says what\n"
	"      would change (a manifest's change as `diff -u`; a certificate's with its reason)\n"
	"      and writes nothing (exit 0 either way).\n"
	"  certs check-expiration [--root DIR]\n"
	"      kubeadm's table of the certificates (and kubeconfigs) with their expiry, residual\n"
	"      time and CA, then the CAs'.\n"
	"  certs renew <name|all> [--root DIR] [--config FILE]\n"
	"      Renews unconditionally, as kubeadm: a new key and certificate with the names of the\n"
	"      one on disk, signed by the CA on disk. Names: admin.conf, apiserver,\n"
	"      apiserver-etcd-client, apiserver-kubelet-client, controller-manager.conf,\n"
	"      etcd-healthcheck-client, etcd-peer, etcd-server, front-proxy-client,\n"
	"      scheduler.conf, super-admin.conf. kubelet.conf is not touched (the kubelet rotates\n"
	"      its own). Restart the control-plane pods afterwards. --config gives the validity\n"
	"      (certificateValidityPeriod) and key type (encryptionAlgorithm); default 1 year,\n"
	"      RSA-2048.\n"
	"  version plan --target V|Default --control-plane NODE=V ... [--kubelet NODE=V ...]\n"
	"      [--max-used V]   (or --kubeconfig FILE: the versions read from the cluster)\n"
	"      The steps of a Kubernetes version change as Deckhouse makes them (one minor at a\n"
	"      time, the skew rules, the version map); a refused change names the rule. See\n"
	"      'aws-k8s cpm version --help'.\n"
	"  scheduler-config --kubernetes-version V [--webhooks FILE] [--cluster-domain D]\n"
	"      [--cluster-ca FILE]\n"
	"      Prints kube-scheduler's configuration: Deckhouse's two profiles and an extender per\n"
	"      KubeSchedulerWebhookConfiguration webhook. render --scheduler-webhooks FILE writes\n"
	"      it to " CPM_SCHED_CONFIG_PATH " (before the manifests,\n"
	"      so the kube-scheduler checksum covers it).\n"
	"  approve [flags]\n"
	"      The one-master-at-a-time controller (Deckhouse's update_approval hook), a role of its\n"
	"      own with leader election: approves one waiting master at a time (Node annotations\n"
	"      control-plane-manager.deckhouse.io/waiting-for-approval -> approved) and removes the\n"
	"      approval once that node's cpm Pod is Ready. Its flags: 'aws-k8s cpm approve --help'.\n"
	"  etcd backup|defrag|members|join|promote|remove-stale|update-peer-url ...\n"
	"      etcd backups and membership over etcd's v3 API ('aws-k8s cpm etcd --help').\n"
	"\n"
	"The configuration: kubeadm.k8s.io/v1beta3 or v1beta4 ClusterConfiguration (kubernetesVersion,\n"
	"controlPlaneEndpoint, networking, apiServer/controllerManager/scheduler extraArgs and\n"
	"extraVolumes, apiServer.certSANs, etcd.local, encryptionAlgorithm, certificate validity)\n"
	"and InitConfiguration (nodeRegistration.name, localAPIEndpoint); NODE_NAME and MY_IP, as\n"
	"Deckhouse's DaemonSet sets them, win over the latter.\n"
	"\n"
	"etcd in the converge (--etcd-membership, on by default): the cluster is found as kubeadm\n"
	"finds it, from the other nodes' etcd mirror pods (component=etcd, their annotation\n"
	"kubeadm.kubernetes.io/etcd.advertise-client-urls), and reached with etcd/ca.crt and\n"
	"etcd/healthcheck-client; each call has a 5s timeout.\n"
	"  - no /var/lib/etcd/member and no other etcd pod: the first master, manifest as rendered;\n"
	"  - no data, or data but no member (orphan: moved aside to member.orphaned-<time>), or a\n"
	"    member started elsewhere without data here (stale: removed): MemberAdd as a learner,\n"
	"    the manifest with --initial-cluster (every member) and --initial-cluster-state=existing,\n"
	"    its pod waited for, then MemberPromote once in sync (10 tries, 1s x1.5); refused while\n"
	"    the lone member still advertises a loopback peer URL;\n"
	"  - the lone member: its peer URL set to the manifest's (single -> multi);\n"
	"  - quorum lost (this voter sees no leader), multi -> single without manual work, made\n"
	"    safe so: only when every other voting member neither answers nor is on a Node with\n"
	"    the control-plane role (the others' data is gone for good: remove the Node or its\n"
	"    label first), a snapshot is written to the backup folder\n"
	"    (etcd-before-force-new-cluster.snapshot), the manifest gets --force-new-cluster (and\n"
	"    another checksum) until its pod is Ready and etcd lists this member alone with a\n"
	"    leader, then it is written again without the flag. Otherwise the step fails with\n"
	"    the reason and nothing is written.\n"
	"\n"
	"Exit codes: 0 done, 1 a step failed (the failed step says why; the steps before it are\n"
	"kept), 2 usage error.";

static char *config_path, *root, *node_name, *my_ip, *sched_webhooks;
static bool dry_run, root_symlink;

static const struct flag cpm_flags[] = {
	{ "config", FLAG_STRING, &config_path, NULL, NULL,
	  "Path to the kubeadm configuration (YAML documents: ClusterConfiguration, "
	  "InitConfiguration, kubeadm.k8s.io/v1beta3 or v1beta4)." },
	{ "root", FLAG_STRING, &root, "/", NULL,
	  "Write and read everything under this folder instead of / (as kubeadm's --rootfs)." },
	{ "node-name", FLAG_STRING, &node_name, NULL, "NODE_NAME",
	  "The node's name (over InitConfiguration's nodeRegistration.name)." },
	{ "my-ip", FLAG_STRING, &my_ip, NULL, "MY_IP",
	  "The node's IP, the advertise address (over InitConfiguration's "
	  "localAPIEndpoint.advertiseAddress)." },
	{ "dry-run", FLAG_BOOL, &dry_run, "false", NULL,
	  "render, converge: print what would change, write nothing." },
	{ "root-kubeconfig-symlink", FLAG_BOOL, &root_symlink, "false", NULL,
	  "render: also link ROOT/root/.kube/config to /etc/kubernetes/admin.conf "
	  "(Deckhouse's rootKubeconfigSymlink)." },
	{ "scheduler-webhooks", FLAG_STRING, &sched_webhooks, NULL, NULL,
	  "render: also write " CPM_SCHED_CONFIG_PATH " from this YAML file of "
	  "KubeSchedulerWebhookConfigurations (see 'aws-k8s cpm scheduler-config --help')." },
	CPM_RUN_FLAGS,
	KUBE_FLAGS_QPS("5", "10"),
	LOG_FLAGS,
	{ NULL },
};

static int load_config(struct cpm_config *cfg)
{
	char err[600] = "";
	int r = cpm_config_load(config_path, node_name, my_ip, cfg, err, sizeof(err));

	if (r < 0)
		fprintf(stderr, "aws-k8s cpm: the configuration %s\n", err);
	return r;
}

static int render(void)
{
	struct cpm_report rep = { .live = stdout };
	struct cpm_config cfg = { 0 };
	struct cpm_pki_input in;
	int64_t t0 = cpm_report_clock_ms();
	char *sched = NULL, sched_detail[300], err[600] = "";
	int r;

	if (!config_path || !config_path[0]) {
		fprintf(stderr, "aws-k8s cpm render: --config is required\n");
		return 2;
	}
	if (load_config(&cfg) < 0)
		return 1;
	/* the webhooks are checked before anything is written */
	if (sched_webhooks && sched_webhooks[0] &&
	    cpm_sched_for_render(&cfg, root, sched_webhooks, &sched, sched_detail,
				 sizeof(sched_detail), err, sizeof(err)) < 0) {
		fprintf(stderr, "aws-k8s cpm render: the scheduler webhooks %s\n", err);
		cpm_config_release(&cfg);
		return 1;
	}
	cpm_config_pki_input(&cfg, root, &in);
	in.root_kubeconfig_symlink = root_symlink;
	r = cpm_pki_converge(&in, dry_run, &rep);
	if (r >= 0)
		r = cpm_sa_converge(&in, dry_run, &rep);
	if (r >= 0)
		r = cpm_kubeconfigs_converge(&in, dry_run, &rep);
	if (r >= 0 && sched)
		r = cpm_sched_write(root, sched, dry_run, sched_detail, &rep);
	if (r >= 0)
		r = cpm_manifests_converge(&cfg, root, dry_run, &rep);
	if (r < 0)
		fprintf(stderr, "aws-k8s cpm render: failed: %s\n", strerror(-r));
	else if (dry_run)
		printf("render (dry run): %zu would change, %zu unchanged (%lld ms)\n",
		       cpm_report_count(&rep, CPM_STEP_WOULD_CHANGE),
		       cpm_report_count(&rep, CPM_STEP_UNCHANGED),
		       (long long)(cpm_report_clock_ms() - t0));
	else
		printf("render: %zu created, %zu updated, %zu unchanged (%lld ms)\n",
		       cpm_report_count(&rep, CPM_STEP_CREATED),
		       cpm_report_count(&rep, CPM_STEP_UPDATED),
		       cpm_report_count(&rep, CPM_STEP_UNCHANGED),
		       (long long)(cpm_report_clock_ms() - t0));
	free(sched);
	cpm_report_release(&rep);
	cpm_config_release(&cfg);
	return r < 0 ? 1 : 0;
}

static int certs(int argc, char **argv)
{
	struct cpm_config cfg = { 0 };
	struct cpm_pki_input in = { .root = root };
	int r;

	if (config_path && config_path[0]) {
		if (load_config(&cfg) < 0)
			return 1;
		cpm_config_pki_input(&cfg, root, &in);
	}
	r = cpm_certs_run(&in, argc, argv);
	cpm_config_release(&cfg);
	return r;
}

int cpm_main(int argc, char **argv)
{
	int r, n;

	/* commands with flags of their own (the command word first) */
	if (argc > 1 && strcmp(argv[1], "version") == 0)
		return cpm_version_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "scheduler-config") == 0)
		return cpm_sched_main(argc - 1, argv + 1);
	/* a role with flags of its own (the Deployment's command line) */
	if (argc > 1 && strcmp(argv[1], "approve") == 0)
		return cpm_approve_main(argc - 1, argv + 1);
	/* `cpm etcd ...` has its own flags (cpm_etcd.c) */
	if (argc > 1 && strcmp(argv[1], "etcd") == 0)
		return cpm_etcd_main(argc - 1, argv + 1);
	n = flags_parse("cpm", cpm_usage, cpm_flags, argc, argv);
	if (n < 0)
		return flags_exit_code(n);
	if (n > 1 && strcmp(argv[0], "converge") == 0) {
		fprintf(stderr, "aws-k8s cpm converge: unexpected argument '%s'\n", argv[1]);
		r = 2;
	} else if (n == 0 || strcmp(argv[0], "converge") == 0) {
		r = cpm_run(&(struct cpm_run_opts){ .root = root, .node_name = node_name,
						     .my_ip = my_ip, .pod_name = getenv("MY_POD_NAME"),
						     .root_kubeconfig_symlink = root_symlink,
						     .dry_run = dry_run });
	} else if (strcmp(argv[0], "render") == 0) {
		if (n > 1) {
			fprintf(stderr, "aws-k8s cpm render: unexpected argument '%s'\n", argv[1]);
			r = 2;
		} else {
			r = render();
		}
	} else if (strcmp(argv[0], "certs") == 0) {
		r = certs(n - 1, argv + 1);
	} else {
		fprintf(stderr, "aws-k8s cpm: unknown command '%s' (converge, render, certs, approve, "
				"version, scheduler-config; see 'aws-k8s cpm "
				"--help')\n", argv[0]);
		r = 2;
	}
	flags_free(cpm_flags);
	return r;
}
