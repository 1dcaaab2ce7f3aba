/* aws-k8s ebs-csi-driver controller|node|all|metadataLabeler: the EBS CSI driver as its
 * upstream binary (aws-ebs-csi-driver) runs, the first argument being the mode as the upstream
 * Helm chart passes it. Modes controller and node are csi-controller and csi-node,
 * metadataLabeler the labeler of csi_controller_labeler.c; this file holds the dispatch and
 * mode all (also the mode without a word): the Controller and Node services and Identity on
 * one endpoint, with the union of both flag tables, as upstream's mode all (which, as
 * upstream's, runs no labeler: the node's --metadata-sources=metadata-labeler reads the labels
 * the metadataLabeler sidecar writes). */
#include "modules/ebs-csi-driver/ebs_csi_driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/csi/plugin.h"
#include "modules/csi-controller/csi_controller.h"
#include "modules/csi-controller/csi_controller_grpc.h"
#include "modules/csi-controller/csi_controller_labeler.h"
#include "modules/csi-controller/csi_controller_service.h"
#include "modules/csi-node/csi_node.h"

#define EBS_MAX_FLAGS 128

static const char ebs_usage[] =
	"aws-k8s ebs-csi-driver [controller|node|all|metadataLabeler|pre-stop-hook] [flags]\n\n"
	"Runs the EBS CSI driver as its upstream binary (aws-ebs-csi-driver) does: the first\n"
	"argument is the mode, as the upstream Helm chart passes it.\n\n"
	"  controller     the Identity and Controller services: aws-k8s csi-controller\n"
	"  node           the Identity and Node services: aws-k8s csi-node\n"
	"  pre-stop-hook  the node container's preStop hook: aws-k8s csi-node pre-stop-hook\n"
	"  metadataLabeler  the controller's metadata-labeler sidecar: labels each Node with its\n"
	"                 instance's interface and volume counts, which csi-node reads with\n"
	"                 --metadata-sources=metadata-labeler (see its --help)\n"
	"  all            (or no mode) the Identity, Controller and Node services on one endpoint\n\n"
	"Run 'aws-k8s ebs-csi-driver controller --help' (or node) for the flags of a mode. The\n"
	"flags of mode all, below, are the union of both: the controller's EC2 client and the\n"
	"node's metadata sources (--kubeconfig and --metadata-sources are the node's here).";

/* The rows of a, then those of b whose name a does not have, into out (cap rows with the
 * terminator). The node's table comes first: its --kubeconfig and --metadata-sources have an
 * effect, the controller's are accepted only. */
static int flags_union(const struct flag *a, const struct flag *b, struct flag *out, size_t cap)
{
	const struct flag *tables[2] = {a, b};
	size_t n = 0;

	for (int t = 0; t < 2; t++)
		for (const struct flag *f = tables[t]; f->name; f++) {
			bool dup = false;
			for (size_t i = 0; i < n && !dup; i++)
				dup = strcmp(out[i].name, f->name) == 0;
			if (dup)
				continue;
			if (n + 1 >= cap)
				return -1;
			out[n++] = *f;
		}
	out[n] = (struct flag){NULL};
	return 0;
}

static int ebs_all_main(int argc, char **argv)
{
	static struct flag all_flags[EBS_MAX_FLAGS];
	struct csi_ctrl ctrl = {0};
	struct csi_node_plugin node = {.meta = {.enis = -1}};
	struct csi_identity id = {.controller = true, .probe = csi_ctrl_probe, .probe_ud = &ctrl};
	int n, r;

	if (flags_union(csi_node_flags, csi_controller_flags, all_flags, EBS_MAX_FLAGS) < 0) {
		fprintf(stderr, "aws-k8s ebs-csi-driver: too many flags\n");
		return 1;
	}
	if ((n = flags_parse("ebs-csi-driver", ebs_usage, all_flags, argc, argv)) < 0)
		return flags_exit_code(n);
	if (n > 0) {
		fprintf(stderr, "aws-k8s ebs-csi-driver: unexpected argument '%s'\n", argv[0]);
		r = 2;
		goto out;
	}
	/* the node first: no AWS client is made when it cannot tell its instance */
	/* without AWS_REGION, the region of the node's metadata sources (--metadata-sources are
	 * the node's here), as upstream's mode all asks one metadata service for both */
	if ((r = csi_node_plugin_init(&node, "ebs-csi-driver")) != 0 ||
	    (r = csi_controller_configure_region(&ctrl, "ebs-csi-driver", node.meta.region)) != 0)
		goto out;
	const struct csi_service svcs[] = {
		{csi_ctrl_methods, &ctrl},
		{csi_node_methods, node.node},
	};
	struct csi_node_untaint *untaint =
		csi_node_untaint_start(getenv("CSI_NODE_NAME"), csi_flags.driver_name);
	r = csi_serve_services("ebs-csi-driver", &id, svcs, 2);
	csi_node_untaint_stop(untaint);
out:
	csi_ctrl_release(&ctrl);
	csi_node_plugin_release(&node);
	flags_free(all_flags);
	return r;
}

int ebs_csi_driver_main(int argc, char **argv)
{
	const char *mode = argc > 1 && argv[1][0] != '-' ? argv[1] : NULL;

	if (!mode)
		return ebs_all_main(argc, argv);
	if (strcmp(mode, "controller") == 0)
		return csi_controller_main(argc - 1, argv + 1);
	if (strcmp(mode, "node") == 0)
		return csi_node_main(argc - 1, argv + 1);
	if (strcmp(mode, "pre-stop-hook") == 0)
		return csi_node_main(argc, argv); /* csi-node pre-stop-hook */
	if (strcmp(mode, "all") == 0)
		return ebs_all_main(argc - 1, argv + 1);
	if (strcmp(mode, "metadataLabeler") == 0)
		return csi_labeler_main(argc - 1, argv + 1);
	fprintf(stderr,
		"aws-k8s ebs-csi-driver: unknown mode '%s': expected controller, node, all, "
		"pre-stop-hook or metadataLabeler\n",
		mode);
	return 2;
}
