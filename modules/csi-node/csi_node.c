/* aws-k8s csi-node: the EBS CSI node plugin. Flags as the upstream driver's node mode has
 * them (aws-ebs-csi-driver `node`), plus a few of ours, marked as such in --help. */
#include "modules/csi-node/csi_node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/ids.h"
#include "common/aws/imds.h"
#include "common/base/buf.h"
#include "common/base/flags.h"
#include "common/base/log.h"
#include "common/csi/labeler.h"
#include "common/csi/plugin.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"
#include "modules/csi-node/csi_node_nvme.h"
#include "modules/csi-node/csi_node_service.h"

static const char node_usage[] =
	"Serves the CSI Identity and Node services of the EBS CSI driver on --endpoint, as the\n"
	"upstream driver's node mode does (run it as a privileged DaemonSet with /dev, the\n"
	"kubelet directory and the plugin socket directory mounted). The node id is the EC2\n"
	"instance id, from the instance metadata service or from the Kubernetes Node named by\n"
	"$CSI_NODE_NAME (--metadata-sources, asked in order), or given with --node-id. Every\n"
	"value a source serves is checked (instance id, zone, zone id, region, instance type,\n"
	"outpost ARN): a source that serves a malformed one is not used, and the next one is\n"
	"asked. metadata-labeler is the Node as kubernetes reads it plus the counts the metadata\n"
	"labeler (`aws-k8s ebs-csi-driver metadataLabeler`) writes in its labels\n"
	"<driver>/enis-count and <driver>/non-csi-ebs-volumes-count: the attach limit then needs\n"
	"no metadata service and no EC2 call, and NodeGetInfo reads the labels again (one GET of\n"
	"the Node). Without both labels (or with one that is not a count) that source is not\n"
	"used and the next one is asked.\n\n"
	"Test mode: --device-dir DIR finds volumes through DIR instead of /dev/disk/by-id,\n"
	"where a link nvme-Amazon_Elastic_Block_Store_vol<id without dash> -> /dev/loopN stands\n"
	"for an attached EBS volume; with --node-id and --availability-zone the node runs with no\n"
	"AWS at all (local smoke tests, the project's integration tests).\n\n"
	"The upstream mode argument `node` is accepted (`aws-ebs-csi-driver node ...` through a\n"
	"symlink, or `aws-k8s ebs-csi-driver node ...`); --version prints the upstream driver's\n"
	"JSON.\n\n"
	"`aws-k8s csi-node pre-stop-hook` is the container's preStop hook, as upstream's\n"
	"`pre-stop-hook` mode (see its --help).";

static long long attach_limit, reserved;
static bool legacy_xfs, describe_types;
static char *mount_prefix, **metadata_sources, *node_id, *zone, *instance_type, *device_dir,
	*nvme_page_dir;
static int64_t mkfs_timeout;

const struct flag csi_node_flags[] = {
	CSI_COMMON_FLAGS,
	{ "kubeconfig", FLAG_STRING, &kube_flag_kubeconfig, NULL, NULL,
	  "Absolute path to a kubeconfig file. The default is the empty string, which causes the "
	  "in-cluster config to be used (for the kubernetes metadata source)." },
	{ "metadata-sources", FLAG_STRLIST, &metadata_sources, "imds,kubernetes", NULL,
	  "Dictates which sources are used to retrieve instance metadata. The driver will "
	  "attempt to rely on each source in order until one succeeds. Valid options include "
	  "'imds', 'kubernetes' and 'metadata-labeler'.",
	  .choices = "imds,kubernetes,metadata-labeler" },
	{ "volume-attach-limit", FLAG_INT, &attach_limit, "-1", NULL,
	  "Value for the maximum number of volumes attachable per node. If specified, the limit "
	  "applies to all nodes and overrides --reserved-volume-attachments. If not specified, the "
	  "value is computed from the instance type.", -1, 1000000 },
	{ "reserved-volume-attachments", FLAG_INT, &reserved, "-1", NULL,
	  "Number of volume attachments reserved for system use. Not used when "
	  "--volume-attach-limit is specified. When -1, the metadata labeler's volume count plus "
	  "one for the root volume (metadata-labeler source), else the number of block devices in "
	  "the instance metadata (those under a CSI device name, /dev/xvdaa-xvddz, left out) plus "
	  "one for the root volume.", -1, 1000 },
	{ "legacy-xfs", FLAG_BOOL, &legacy_xfs, "false", NULL,
	  "Formats XFS volumes with `bigtime=0,inobtcount=0,reflink=0`, so that they can be "
	  "mounted onto nodes with linux kernel <= v5.4." },
	{ "windows-host-process", FLAG_BOOL, NULL, "false", NULL,
	  "Run as a Windows HostProcess container (Windows only: no effect on Linux).",
	  .no_effect = true },
	{ "csi-mount-point-prefix", FLAG_STRING, &mount_prefix, "", NULL,
	  "A prefix of the mount points of CSI volumes.", .no_effect = true },
	{ "enable-node-local-volumes", FLAG_BOOL, NULL, "false", NULL,
	  "Enable node-local volumes (volume handles local-ebs://...).", .no_effect = true },
	{ "node-id", FLAG_STRING, &node_id, NULL, NULL,
	  "(aws-k8s) The node id (instance id) to report, instead of asking the metadata "
	  "sources." },
	{ "availability-zone", FLAG_STRING, &zone, NULL, NULL,
	  "(aws-k8s) The zone to report, instead of asking the metadata sources." },
	{ "instance-type", FLAG_STRING, &instance_type, NULL, NULL,
	  "(aws-k8s) The instance type for the attach limit, instead of asking the metadata "
	  "sources." },
	{ "describe-instance-type", FLAG_BOOL, &describe_types, "false", NULL,
	  "(aws-k8s) Off by default: the node makes no EC2 call, as upstream's (its IAM role "
	  "usually has no EC2 rights), and takes the attach limit from the built-in instance-type "
	  "table. When true, it asks EC2 once for the instance type's attach limit "
	  "(DescribeInstanceTypes, which needs ec2:DescribeInstanceTypes) and uses it instead of "
	  "the table's, falling back to the table when EC2 does not answer." },
	{ "device-dir", FLAG_STRING, &device_dir, NULL, NULL,
	  "(aws-k8s, test mode) Find volume devices through links in this directory instead of "
	  "/dev/disk/by-id (see above)." },
	{ "nvme-log-page-dir", FLAG_STRING, &nvme_page_dir, NULL, NULL,
	  "(aws-k8s, test mode) Read each volume's EBS NVMe statistics (the node's metrics) from "
	  "the file DIR/<volume id> instead of asking its device." },
	{ "mkfs-timeout", FLAG_DURATION, &mkfs_timeout, "10m", NULL,
	  "(aws-k8s) How long mkfs, fsck and resize may run before they are killed." },
	LOG_FLAGS,
	{ NULL },
};

/* Where a field of a metadata source is read from, for the error that names it. */
static const char *field_origin(const char *source, const char *field)
{
	static const struct {
		const char *source, *field, *origin;
	} origins[] = {
		{ "imds", "instance-id", "meta-data/instance-id" },
		{ "imds", "instance-type", "meta-data/instance-type" },
		{ "imds", "availability-zone", "meta-data/placement/availability-zone" },
		{ "imds", "availability-zone-id", "meta-data/placement/availability-zone-id" },
		{ "imds", "region", "meta-data/placement/region" },
		{ "imds", "outpost-arn", "meta-data/outpost-arn" },
		{ "kubernetes", "instance-id", "spec.providerID" },
		{ "kubernetes", "availability-zone",
		  "spec.providerID or label topology.kubernetes.io/zone" },
		{ "kubernetes", "availability-zone-id", "label topology.k8s.aws/zone-id" },
		{ "kubernetes", "region", "label topology.kubernetes.io/region" },
		{ "kubernetes", "instance-type", "label node.kubernetes.io/instance-type" },
	};

	if (strcmp(source, "metadata-labeler") == 0)
		source = "kubernetes"; /* the same Node */
	for (size_t i = 0; i < ARRAY_SIZE(origins); i++)
		if (strcmp(origins[i].source, source) == 0 && strcmp(origins[i].field, field) == 0)
			return origins[i].origin;
	return "";
}

/* Uses what a metadata source said (the values m does not have yet), unless one of its values
 * is malformed: a source that serves one bad value is trusted for none, and the next source
 * is asked instead (as upstream moves on when a source fails). */
static int take_source(const char *source, struct csi_node_meta *got, struct csi_node_meta *m)
{
	struct csi_node_meta_fault f;
	char esc[160];

	if (csi_node_meta_check(got, &f) < 0) {
		log_error("malformed instance metadata: not using this source",
			  KV_S("source", source), KV_S("field", f.field),
			  KV_S("from", field_origin(source, f.field)),
			  KV_S("value", aws_value_escape(f.value, esc, sizeof(esc))),
			  KV_S("problem", f.problem));
		return -EBADMSG;
	}
	csi_node_meta_merge(m, got);
	return 0;
}

/* imds: the instance metadata service (and the AWS client the opt-in EC2 call needs). */
static bool from_imds(struct csi_node_meta *m, bool complete, struct aws_client **aws)
{
	bool need_aws = describe_types && attach_limit < 0, rejected = false;
	int r;

	if (complete && !need_aws)
		return false;
	aws_metrics_family_set(AWS_METRICS_EBS_CSI); /* the EBS CSI driver's names */
	if (!*aws && (r = aws_client_new(&(struct aws_client_opts){ .user_agent = "csi-node" },
					 aws)) < 0) {
		log_warn("cannot create the AWS client", KV_E(r));
	} else if (!complete || !m->instance_type || m->enis < 0) {
		struct csi_node_meta got = { .enis = -1 };
		r = csi_node_meta_from_imds(aws_client_imds(*aws), &got);
		if (r < 0 && !complete)
			log_warn("instance metadata unavailable", KV_E(r));
		rejected = take_source("imds", &got, m) < 0;
		csi_node_meta_release(&got);
	}
	return rejected;
}

/* kubernetes, and metadata-labeler (labeler true): the Node $CSI_NODE_NAME. The labeler's
 * source gives nothing unless the Node carries its two counts; when it does, its client is
 * kept in p for NodeGetInfo. */
static bool from_kube(struct csi_node_plugin *p, bool labeler)
{
	const char *source = labeler ? "metadata-labeler" : "kubernetes";
	const char *kube_node = getenv("CSI_NODE_NAME");
	struct csi_node_meta got = { .enis = -1 };
	struct kube_client *kc = NULL;
	cJSON *node = NULL;
	bool rejected = false;
	char err[512] = "";
	int r;

	if (!kube_node || !*kube_node) {
		if (labeler)
			log_warn("metadata source not used: CSI_NODE_NAME is not set",
				 KV_S("source", source));
		return false;
	}
	if ((r = kube_client_from_flags("csi-node", &kc, err, sizeof(err))) < 0) {
		log_warn("cannot reach Kubernetes for the node's metadata", KV_S("source", source),
			 KV_S("error", err));
		return false;
	}
	if ((r = csi_node_get_node(kc, kube_node, &node)) < 0)
		log_warn("cannot read the node's metadata from Kubernetes", KV_S("source", source),
			 KV_S("node", kube_node), KV_E(r));
	else if (!labeler && (r = csi_node_meta_from_node(node, &got)) < 0)
		log_warn("no instance id in the Node's providerID", KV_S("node", kube_node),
			 KV_E(r));
	else if (labeler && (r = csi_node_meta_from_labeled_node(node, csi_flags.driver_name,
								 &got, err, sizeof(err))) < 0)
		log_warn("metadata source not used: the Node lacks the metadata labeler's counts",
			 KV_S("source", source), KV_S("node", kube_node), KV_S("why", err));
	/* the kubernetes source merges what it read even without an instance id, as before */
	if (node && (!labeler || r == 0))
		rejected = take_source(source, &got, &p->meta) < 0;
	if (labeler && r == 0 && !rejected && p->meta.reserved && !p->kc) {
		p->kc = TAKE_PTR(kc);
		p->kube_node = kube_node;
	}
	cJSON_Delete(node);
	csi_node_meta_release(&got);
	kube_client_free(kc);
	return rejected;
}

/* The sources in --metadata-sources order; each fills what the ones before left unset. */
static int gather_metadata(struct csi_node_plugin *p)
{
	struct csi_node_meta *m = &p->meta;
	bool rejected = false;

	if (node_id && (m->instance_id = strdup(node_id)) == NULL)
		return -ENOMEM;
	if (zone && (m->zone = strdup(zone)) == NULL)
		return -ENOMEM;
	if (instance_type && (m->instance_type = strdup(instance_type)) == NULL)
		return -ENOMEM;
	for (char **s = metadata_sources; s && *s; s++) {
		bool complete = m->instance_id && m->zone;
		if (strcmp(*s, "imds") == 0)
			rejected |= from_imds(m, complete, &p->aws);
		else if (!complete) /* kubernetes, metadata-labeler (the flag table takes no other) */
			rejected |= from_kube(p, strcmp(*s, "metadata-labeler") == 0);
	}
	/* a zone given on the command line wins over the region a source gave */
	if (m->zone && m->region && !aws_zone_in_region(m->zone, m->region)) {
		free(m->region);
		m->region = NULL;
	}
	if (m->instance_id)
		return 0;
	return rejected ? -EBADMSG : -ENODATA;
}

/* A value given on the command line must have its format (a usage error otherwise). */
static bool flag_value_ok(const char *flag, const char *v, bool (*valid)(const char *),
			  const char *what)
{
	char esc[160];

	if (!v || valid(v))
		return true;
	fprintf(stderr, "aws-k8s csi-node: --%s: \"%s\" is not %s\n", flag,
		aws_value_escape(v, esc, sizeof(esc)), what);
	return false;
}

static long long compute_limit(const struct csi_node_meta *m, struct aws_client *aws)
{
	struct csi_node_limits_input in = {
		.attach_limit = attach_limit,
		.reserved = reserved,
		.instance_type = m->instance_type,
		.enis = m->enis,
		.bdm = m->bdm,
		.counted_reserved = m->reserved,
	};
	struct csi_node_type_facts facts;
	char why[256];
	int r;

	/* the only EC2 call of the node, and only when asked for */
	if (attach_limit < 0 && describe_types && aws && m->instance_type) {
		if ((r = csi_node_ec2_type_facts(aws, m->instance_type, &facts)) == 0)
			in.ec2 = &facts;
		else
			log_info("no instance type facts from EC2; using the built-in table",
				 KV_S("type", m->instance_type), KV_E(r));
	}
	long long limit = csi_node_max_volumes(&in, why, sizeof(why));
	log_info("attach limit", KV_I("max_volumes_per_node", limit), KV_S("how", why),
		 KV_S("instance_type", m->instance_type ? m->instance_type : ""),
		 KV_I("interfaces", m->enis));
	return limit;
}

/* NodeGetInfo with the metadata-labeler's counts: the Node's labels read again (one GET, no
 * EC2 call), as upstream's UpdateMetadata re-reads them; the limit changes with them. When
 * the Node cannot be read or its labels are gone, the last limit stands. */
static long long labeled_limit(void *ud)
{
	struct csi_node_plugin *p = ud;
	struct csi_labeler_counts k;
	cJSON *node = NULL;
	char why[256] = "";
	int r;

	if ((r = csi_node_get_node(p->kc, p->kube_node, &node)) < 0 ||
	    (r = csi_labeler_counts_of_node(node, csi_flags.driver_name, &k, why, sizeof(why))) <
		0)
		log_warn("cannot read the metadata labeler's counts again: the last attach limit "
			 "stands",
			 KV_S("node", p->kube_node), KV_S("why", why), KV_E(r));
	cJSON_Delete(node);
	pthread_mutex_lock(&p->lock);
	if (r == 0 && (k.enis != p->meta.enis || k.volumes + 1 != p->meta.reserved)) {
		p->meta.enis = k.enis;
		p->meta.reserved = k.volumes + 1;
		p->limit = compute_limit(&p->meta, NULL);
	}
	long long limit = p->limit;
	pthread_mutex_unlock(&p->lock);
	return limit;
}

int csi_node_plugin_init(struct csi_node_plugin *p, const char *component)
{
	int r;

	*p = (struct csi_node_plugin){ .meta = { .enis = -1 } };
	pthread_mutex_init(&p->lock, NULL);
	if (attach_limit != -1 && reserved != -1) {
		fprintf(stderr, "aws-k8s %s: only one of --volume-attach-limit and "
				"--reserved-volume-attachments may be specified\n",
			component);
		return 2;
	}
	if (!flag_value_ok("node-id", node_id, aws_instance_id_valid,
			   "an EC2 instance id (i- and 8 or 17 hex digits)") ||
	    !flag_value_ok("availability-zone", zone, aws_zone_valid, "an availability zone") ||
	    !flag_value_ok("instance-type", instance_type, aws_instance_type_valid,
			   "an EC2 instance type (family.size)"))
		return 2;
	if ((r = gather_metadata(p)) < 0) {
		log_error("cannot tell the node id: no metadata source gave a well-formed one; give "
			  "--node-id, or make the instance metadata service or the Kubernetes Node "
			  "($CSI_NODE_NAME) reachable",
			  KV_E(r));
		return 1;
	}
	p->limit = compute_limit(&p->meta, p->aws);
	if ((r = csi_node_topology(&p->meta, &p->topo, &p->n_topo)) < 0) {
		log_error("out of memory", KV_E(r));
		return 1;
	}
	struct csi_node_config cfg = {
		.devices = { .by_id_dir = device_dir },
		.legacy_xfs = legacy_xfs,
		.mkfs_timeout_ns = mkfs_timeout,
		.node_id = p->meta.instance_id,
		.max_volumes = p->limit,
		/* the counts can change: asked again at NodeGetInfo (attach limit given: never) */
		.max_volumes_fn = p->kc && attach_limit < 0 && reserved < 0 ? labeled_limit : NULL,
		.max_volumes_ud = p,
		.topology = p->topo,
		.n_topology = p->n_topo,
	};
	if ((r = csi_node_new(&cfg, &p->node)) < 0) {
		log_error("cannot set up the node service", KV_E(r));
		return 1;
	}
	struct csi_nvme_metrics_config mc = {
		.devices = cfg.devices,
		.instance_id = p->meta.instance_id,
		.read = nvme_page_dir ? csi_nvme_read_file : NULL,
		.read_ud = nvme_page_dir,
	};
	if ((r = csi_nvme_metrics_new(&mc, &p->nvme)) < 0) {
		log_error("cannot set up the node's metrics", KV_E(r));
		return 1;
	}
	log_info("node", KV_S("node_id", p->meta.instance_id),
		 KV_S("zone", p->meta.zone ? p->meta.zone : ""),
		 KV_S("region", p->meta.region ? p->meta.region : ""),
		 KV_S("device_dir", device_dir ? device_dir : "/dev/disk/by-id"));
	return 0;
}

void csi_node_plugin_release(struct csi_node_plugin *p)
{
	csi_nvme_metrics_free(p->nvme);
	csi_node_free(p->node);
	csi_node_topology_free(p->topo, p->n_topo);
	aws_client_free(p->aws);
	csi_node_meta_release(&p->meta);
	kube_client_free(p->kc);
	pthread_mutex_destroy(&p->lock);
	*p = (struct csi_node_plugin){ .meta = { .enis = -1 } };
}

int csi_node_main(int argc, char **argv)
{
	struct csi_node_plugin p;
	int ret, n;

	if (argc > 1 && strcmp(argv[1], "pre-stop-hook") == 0)
		return csi_node_prestop_main(argc - 1, argv + 1);
	if ((n = flags_parse("csi-node", node_usage, csi_node_flags, argc, argv)) < 0)
		return flags_exit_code(n);
	if (n > 0) {
		fprintf(stderr, "aws-k8s csi-node: unexpected argument '%s'\n", argv[0]);
		flags_free(csi_node_flags);
		return 2;
	}
	if ((ret = csi_node_plugin_init(&p, "csi-node")) == 0) {
		struct csi_identity id = { .controller = false };
		struct csi_node_untaint *untaint =
			csi_node_untaint_start(getenv("CSI_NODE_NAME"), csi_flags.driver_name);
		ret = csi_serve("csi-node", &id, csi_node_methods, p.node);
		csi_node_untaint_stop(untaint);
	}
	csi_node_plugin_release(&p);
	flags_free(csi_node_flags);
	return ret;
}
