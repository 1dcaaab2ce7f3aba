/* aws-k8s: one binary for every AWS platform component of a Kubernetes cluster. This file holds
 * the command table and the set-up every subcommand shares, nothing else. The subcommand is
 * argv[1], or the name the binary was called by (a symlink named "ccm" runs `aws-k8s ccm`). */
#include <curl/curl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "common/base/log.h"
#include "common/base/signals.h"
#include "modules/aws/aws.h"
#include "modules/ccm/ccm.h"
#include "modules/csi-client/csi_client.h"
#include "modules/csi-controller/csi_controller.h"
#include "modules/csi-node/csi_node.h"
#include "modules/kube-debug/kube_debug.h"
#include "modules/serve/serve.h"
#include "modules/version/version.h"

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct cmd commands[] = {
	{ "aws", aws_main, "call any AWS API action through the shared AWS client (debugging)" },
	{ "ccm", ccm_main, "the AWS cloud-controller-manager (cloud-node, lifecycle, route)" },
	{ "csi-client", csi_client_main, "call a CSI plugin over its socket and print the reply as JSON" },
	{ "csi-controller", csi_controller_main, "the EBS CSI controller plugin (volumes, attachments, snapshots)" },
	{ "csi-node", csi_node_main, "the EBS CSI node plugin (a DaemonSet on every node)" },
	{ "kube-debug", kube_debug_main, "drive the Kubernetes client core (tests, debugging)" },
	{ "serve", serve_main, "serve only the shared metrics and health endpoints (diagnostics)" },
	{ "version", version_main, "print the version, the commit and the library versions" },
};

static const struct cmd *cmd_find(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: aws-k8s <command> [flags]\n\n"
		     "One binary for the AWS platform components of a Kubernetes cluster.\n\n"
		     "Commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-16s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "  %-16s %s\n", "help <command>", "show the flags of a command");
	fprintf(out, "\nRun 'aws-k8s <command> --help' for the flags of a command.\n");
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
	r = c->fn(argc, argv);
	curl_global_cleanup();
	return r;
}

int main(int argc, char **argv)
{
	const struct cmd *c = cmd_find(basename(argv[0]));

	if (c)
		return run(c, argc, argv);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0)
		return run(cmd_find("version"), 1, argv);
	if (strcmp(argv[1], "help") == 0) {
		if (argc < 3) {
			usage(stdout);
			return 0;
		}
		if (!(c = cmd_find(argv[2]))) {
			fprintf(stderr, "aws-k8s: unknown command '%s' (see 'aws-k8s --help')\n", argv[2]);
			return 2;
		}
		char *help_argv[] = { argv[2], (char *)"--help", NULL };
		return c->fn(2, help_argv);
	}
	if (!(c = cmd_find(argv[1]))) {
		fprintf(stderr, "aws-k8s: unknown command '%s' (see 'aws-k8s --help')\n", argv[1]);
		return 2;
	}
	return run(c, argc - 1, argv + 1);
}
