/* aws-k8s: one binary for every AWS platform component of a Kubernetes cluster. This file holds
 * the command table and the set-up every subcommand shares, nothing else. The subcommand is
 * argv[1], or the name the binary was called by: a symlink named "ccm" runs `aws-k8s ccm`, and
 * one named like an upstream binary runs the command that replaces it
 * (aws-cloud-controller-manager, aws-ebs-csi-driver). A command that plays one mode of an
 * upstream binary takes that mode's word as its first argument (`csi-node node ...`, as the
 * EBS chart passes `node`), and each prints --version as its upstream binary does. */
#include <curl/curl.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "awsk8s_version.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/base/signals.h"
#include "modules/api-proxy/api_proxy.h"
#include "modules/aws/aws.h"
#include "modules/capa/capa.h"
#include "modules/ccm/ccm.h"
#include "modules/cpm/cpm.h"
#include "modules/csi-client/csi_client.h"
#include "modules/csi-controller/csi_controller.h"
#include "modules/csi-node/csi_node.h"
#include "modules/discoverer/discoverer.h"
#include "modules/ebs-csi-driver/ebs_csi_driver.h"
#include "modules/kube-debug/kube_debug.h"
#include "modules/nth/nth.h"
#include "modules/rbac-proxy/rbac_proxy.h"
#include "modules/serve/serve.h"
#include "modules/version/version.h"

#if defined(__x86_64__)
#define PLATFORM "linux/amd64"
#elif defined(__aarch64__)
#define PLATFORM "linux/arm64"
#else
#define PLATFORM "linux/unknown"
#endif
#ifdef __clang__
#define COMPILER "clang " __clang_version__
#else
#define COMPILER "gcc " __VERSION__
#endif

/* --version of our own commands: the first line of `aws-k8s version`. */
static int version_aws_k8s(const char *how)
{
	if (strcmp(how, "true") != 0)
		return -EINVAL;
	printf("aws-k8s %s (commit %s)\n", AWSK8S_VERSION, AWSK8S_COMMIT);
	return 0;
}

/* --version as k8s.io/component-base's verflag prints it ("Kubernetes v1.34.0", or the Go
 * syntax of version.Info for --version=raw), with this binary's version. */
static int version_kubernetes(const char *how)
{
	const char *commit = AWSK8S_COMMIT, *dirty = strstr(commit, "-dirty");
	unsigned major = 0, minor = 0;

	if (strcmp(how, "raw") != 0) {
		if (strcmp(how, "true") != 0)
			return -EINVAL;
		printf("Kubernetes v%s\n", AWSK8S_VERSION);
		return 0;
	}
	if (sscanf(AWSK8S_VERSION, "%u.%u", &major, &minor) != 2)
		major = minor = 0;
	printf("version.Info{Major:\"%u\", Minor:\"%u\", GitVersion:\"v%s\", GitCommit:\"%.*s\", "
	       "GitTreeState:\"%s\", BuildDate:\"\", GoVersion:\"\", Compiler:\"%s\", "
	       "Platform:\"%s\"}\n",
	       major, minor, AWSK8S_VERSION, (int)(dirty ? (size_t)(dirty - commit) : strlen(commit)),
	       commit, dirty ? "dirty" : "clean", COMPILER, PLATFORM);
	return 0;
}

/* --version as the EBS CSI driver prints it: its VersionInfo as indented JSON. Go's fields
 * that a C build has no value for (build date, Go version) are empty. */
static int version_ebs_csi(const char *how)
{
	if (strcmp(how, "true") != 0)
		return -EINVAL;
	printf("{\n  \"driverVersion\": \"v%s\",\n  \"gitCommit\": \"%s\",\n  \"buildDate\": \"\",\n"
	       "  \"goVersion\": \"\",\n  \"compiler\": \"%s\",\n  \"platform\": \"%s\"\n}\n",
	       AWSK8S_VERSION, AWSK8S_COMMIT, COMPILER, PLATFORM);
	return 0;
}

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
	const char *mode;		 /* the upstream mode word it takes as first argument */
	flags_version_fn version; /* NULL: aws-k8s's own line */
};

static const struct cmd commands[] = {
	{ "api-proxy", api_proxy_main, "the node's kubernetes-api-proxy: an L4 proxy to the API servers with fail-over" },
	{ "aws", aws_main, "call any AWS API action through the shared AWS client (debugging)" },
	{ "capa", capa_main,
	  "Cluster API Provider AWS's manager: AWSCluster infrastructure (VPC, subnets, gateways, SGs)" },
	{ "ccm", ccm_main, "the AWS cloud-controller-manager (cloud-node, lifecycle, route)", NULL,
	  version_kubernetes },
	{ "cpm", cpm_main,
	  "the control-plane manager: render kubeadm's PKI, kubeconfigs and static pods; certs" },
	{ "csi-client", csi_client_main, "call a CSI plugin over its socket and print the reply as JSON" },
	{ "csi-controller", csi_controller_main,
	  "the EBS CSI controller plugin (volumes, attachments, snapshots)", "controller",
	  version_ebs_csi },
	{ "csi-node", csi_node_main, "the EBS CSI node plugin (a DaemonSet on every node)", "node",
	  version_ebs_csi },
	{ "discoverer", discoverer_main,
	  "the cloud-data-discoverer: permission conditions, instance types, discovery data" },
	{ "ebs-csi-driver", ebs_csi_driver_main,
	  "the EBS CSI driver as upstream runs it: ebs-csi-driver controller|node|all|metadataLabeler", NULL,
	  version_ebs_csi },
	{ "kube-debug", kube_debug_main, "drive the Kubernetes client core (tests, debugging)" },
	{ "nth", nth_main, "the AWS node-termination-handler (IMDS and queue modes)" },
	{ "rbac-proxy", rbac_proxy_main,
	  "kube-rbac-proxy: an HTTPS proxy that authorizes requests by TokenReview and SubjectAccessReview" },
	{ "serve", serve_main, "serve only the shared metrics and health endpoints (diagnostics)" },
	{ "version", version_main, "print the version, the commit and the library versions" },
};

/* The upstream binaries' names (Makefile's UPSTREAM_NAMES), and the command each runs (NULL:
 * not built yet). */
static const struct {
	const char *name, *cmd;
} upstream[] = {
	{ "aws-cloud-controller-manager", "ccm" },
	{ "aws-ebs-csi-driver", "ebs-csi-driver" },
	{ "node-termination-handler", "nth" },
	{ "kube-rbac-proxy", "rbac-proxy" },
};

/* The commands of the components still to come (NULL-terminated; none today). */
static const char *const to_come[] = { NULL };

/* 1 and *ret for a command or an upstream name it replaces, 0 for an unknown name, -ENOSYS for
 * a component not built yet. */
static int cmd_find(const char *name, const struct cmd **ret)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, name) == 0) {
			*ret = &commands[i];
			return 1;
		}
	for (size_t i = 0; i < sizeof(upstream) / sizeof(upstream[0]); i++)
		if (strcmp(upstream[i].name, name) == 0)
			return upstream[i].cmd ? cmd_find(upstream[i].cmd, ret) : -ENOSYS;
	for (size_t i = 0; to_come[i]; i++)
		if (strcmp(to_come[i], name) == 0)
			return -ENOSYS;
	return 0;
}

static int not_built(const char *name)
{
	fprintf(stderr, "aws-k8s: '%s' is not built yet: this aws-k8s %s has no such component (see "
			"'aws-k8s --help')\n",
		name, AWSK8S_VERSION);
	return 1;
}

/* An upstream chart that swaps only the image runs the image's entrypoint, aws-k8s, with the
 * upstream binary's arguments: say which command to set. */
static void upstream_hint(const char *arg)
{
	static const char *const ebs_modes[] = { "controller", "node", "all", "pre-stop-hook",
						  "metadataLabeler" };

	for (size_t i = 0; i < sizeof(ebs_modes) / sizeof(ebs_modes[0]); i++)
		if (strcmp(arg, ebs_modes[i]) == 0) {
			fprintf(stderr, "aws-k8s: '%s' is a mode of the EBS CSI driver: set the "
					"container's command to /usr/bin/aws-ebs-csi-driver, or run "
					"'aws-k8s ebs-csi-driver %s'\n",
				arg, arg);
			return;
		}
	if (arg[0] == '-')
		fprintf(stderr, "aws-k8s: the first argument is a flag: an upstream manifest that runs "
				"its binary with flags alone needs the container's command set to the "
				"upstream name (/usr/bin/aws-cloud-controller-manager, "
				"/usr/bin/kube-rbac-proxy, ...) or to 'aws-k8s <command>'\n");
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: aws-k8s <command> [flags]\n\n"
		     "One binary for the AWS platform components of a Kubernetes cluster.\n\n"
		     "Commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-16s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "  %-16s %s\n", "help <command>", "show the flags of a command");
	fprintf(out, "\n'aws-k8s flags-check <command> [flags]' runs the command's flag parser on the "
		     "flags and\nexits (0: taken, 2: refused) without starting anything.\n");
	fprintf(out, "\nCalled by the name of an upstream binary (a symlink; 'make install' makes them)"
		     ", it runs\nthe command that replaces it:\n");
	for (size_t i = 0; i < sizeof(upstream) / sizeof(upstream[0]); i++)
		fprintf(out, "  %-30s %s\n", upstream[i].name,
			upstream[i].cmd ? upstream[i].cmd : "(not built yet)");
	fprintf(out, "\nRun 'aws-k8s <command> --help' for the flags of a command.\n");
}

/* The command itself, after the mode word upstream's manifests pass first
 * (`csi-node node --endpoint=...`). */
static int run_cmd(const struct cmd *c, int argc, char **argv)
{
	if (c->mode && argc > 1 && strcmp(argv[1], c->mode) == 0) {
		argv[1] = argv[0];
		argc--;
		argv++;
	}
	flags_set_version(c->version ? c->version : version_aws_k8s);
	return c->fn(argc, argv);
}

static int run(const struct cmd *c, int argc, char **argv)
{
	int r;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "aws-k8s: failed to initialize libcurl\n");
		return 1;
	}
	if ((r = signals_setup()) < 0) {
		log_error("failed to set up signal handling", KV_E(r));
		return 1;
	}
	r = run_cmd(c, argc, argv);
	curl_global_cleanup();
	return r;
}

static const char flags_check_usage[] =
	"Usage: aws-k8s flags-check <command> [mode] [flags]\n\n"
	"Runs the flag parser of <command> on the flags, with the environment as it is, and exits\n"
	"without starting anything: 0 when the command takes them, 2 (with the parser's message)\n"
	"when it refuses one; a positional argument other than the command's mode word is refused.\n"
	"<command> is any command or upstream binary name (`flags-check aws-ebs-csi-driver node\n"
	"--endpoint=...`). Checks beyond the flags (a required --cloud-provider, the cloud config)\n"
	"are the command's start-up and are not run. tests/integration/deploy_manifests.sh runs it\n"
	"on every aws-k8s container of deploy/.\n";

/* `aws-k8s flags-check CMD ARGS...`: CMD's own flags_parse in check mode (flags.h), run without
 * the process set-up (no signal thread, no libcurl). */
static int flags_check_main(int argc, char **argv)
{
	const struct cmd *c = NULL;
	int r;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(flags_check_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if ((r = cmd_find(argv[1], &c)) <= 0) {
		if (r < 0)
			return not_built(argv[1]);
		fprintf(stderr, "aws-k8s flags-check: unknown command '%s' (see 'aws-k8s --help')\n",
			argv[1]);
		return 2;
	}
	flags_set_check_only(true);
	r = run_cmd(c, argc - 1, argv + 1);
	if (!flags_check_parsed()) {
		fprintf(stderr, "aws-k8s flags-check: '%s' returned without parsing its flags\n",
			argv[1]);
		return 1;
	}
	return r;
}

int main(int argc, char **argv)
{
	const struct cmd *c = NULL;
	const char *self = basename(argv[0]);
	int r = cmd_find(self, &c);

	if (r < 0)
		return not_built(self);
	if (r > 0)
		return run(c, argc, argv);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		cmd_find("version", &c);
		return run(c, 1, argv);
	}
	if (strcmp(argv[1], "flags-check") == 0)
		return flags_check_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "help") == 0) {
		if (argc < 3) {
			usage(stdout);
			return 0;
		}
		if ((r = cmd_find(argv[2], &c)) <= 0) {
			if (r < 0)
				return not_built(argv[2]);
			fprintf(stderr, "aws-k8s: unknown command '%s' (see 'aws-k8s --help')\n", argv[2]);
			return 2;
		}
		char *help_argv[] = { argv[2], (char *)"--help", NULL };
		flags_set_version(c->version ? c->version : version_aws_k8s);
		return c->fn(2, help_argv);
	}
	if ((r = cmd_find(argv[1], &c)) <= 0) {
		if (r < 0)
			return not_built(argv[1]);
		fprintf(stderr, "aws-k8s: unknown command '%s' (see 'aws-k8s --help')\n", argv[1]);
		upstream_hint(argv[1]);
		return 2;
	}
	return run(c, argc - 1, argv + 1);
}
