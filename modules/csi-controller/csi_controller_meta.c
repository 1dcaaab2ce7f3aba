/* The controller's region when AWS_REGION is not set: --metadata-sources in order, as upstream
 * (pkg/cloud/metadata: the first source that answers wins). imds asks the instance metadata
 * service, retried with a bounded backoff on the process's cancel token; kubernetes reads the
 * Node the pod runs on ($CSI_NODE_NAME): its topology.kubernetes.io/region label, else the
 * region of the zone in its providerID aws:///<zone>/<instance>; metadata-labeler is the
 * kubernetes source on a Node that also carries the labeler's two count labels (upstream's
 * source fails without them, and the next one is asked). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/ids.h"
#include "common/aws/imds.h"
#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/csi/identity.h"
#include "common/csi/labeler.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"
#include "modules/csi-controller/csi_controller_internal.h"

#define IMDS_FIRST_DELAY_NS (200 * NSEC_PER_MSEC)
#define IMDS_MAX_DELAY_NS (2 * NSEC_PER_SEC)

/* The region a zone is in: up to the end of the first "-<digits>" (us-east-1a, us-gov-west-1b,
 * us-west-2-lax-1a all give the region before their letter or Local Zone part). */
static int region_of_zone(const char *zone, char ret[CSI_REGION_MAX])
{
	const char *p = zone;

	while ((p = strchr(p, '-')) != NULL) {
		p++;
		if (!isdigit((unsigned char)*p))
			continue;
		while (isdigit((unsigned char)*p))
			p++;
		size_t l = (size_t)(p - zone);
		if (l >= CSI_REGION_MAX)
			return -ENAMETOOLONG;
		memcpy(ret, zone, l);
		ret[l] = '\0';
		return aws_region_valid(ret) && aws_zone_in_region(zone, ret) ? 0 : -EINVAL;
	}
	return -EINVAL;
}

int csi_ctrl_region_of_node(const cJSON *node, char ret[CSI_REGION_MAX], char *why, size_t n)
{
	const cJSON *labels = json_find(node, "metadata.labels");
	const char *label = labels ? json_str_key(labels, "topology.kubernetes.io/region") : NULL;
	const char *pid = json_str(node, "spec.providerID");
	char esc[160];

	if (!label && labels)
		label = json_str_key(labels, "failure-domain.beta.kubernetes.io/region");
	if (label && *label) {
		if (!aws_region_valid(label) || str_copy(ret, CSI_REGION_MAX, label) < 0) {
			snprintf(why, n, "label topology.kubernetes.io/region \"%s\" is not a region",
				 aws_value_escape(label, esc, sizeof(esc)));
			return -EBADMSG;
		}
		return 0;
	}
	/* aws:///<zone>/<instance id>: the zone is the path's first element */
	if (pid && str_has_prefix(pid, "aws:///")) {
		char zone[64];
		const char *z = pid + 7, *slash = strchr(z, '/');
		size_t l = slash ? (size_t)(slash - z) : 0;
		if (l > 0 && l < sizeof(zone)) {
			memcpy(zone, z, l);
			zone[l] = '\0';
			if (aws_zone_valid(zone) && region_of_zone(zone, ret) == 0)
				return 0;
		}
	}
	if (pid && *pid)
		snprintf(why, n,
			 "no label topology.kubernetes.io/region, and providerID \"%s\" names no zone",
			 aws_value_escape(pid, esc, sizeof(esc)));
	else
		snprintf(why, n, "no label topology.kubernetes.io/region and no providerID");
	return -ENODATA;
}

/* imds: placement/region (or the zone's region), retried with backoff until budget_ns. */
static int region_from_imds(const struct csi_ctrl_meta_opts *o, char ret[CSI_REGION_MAX],
			    char *why, size_t n)
{
	struct aws_imds *m = NULL;
	int64_t delay = IMDS_FIRST_DELAY_NS, end = now_mono_ns() + o->imds_budget_ns;
	int r, tries = 0;

	if ((r = aws_imds_new(o->imds, &m)) < 0) {
		snprintf(why, n, "cannot set up the metadata client: %s", strerror(-r));
		return r;
	}
	if (aws_imds_disabled(m)) {
		snprintf(why, n, "disabled (AWS_EC2_METADATA_DISABLED=true)");
		aws_imds_free(m);
		return -ENODEV;
	}
	for (;;) {
		char *reg = NULL;
		tries++;
		r = aws_imds_region(m, &reg);
		if (r == 0 && (!aws_region_valid(reg) || str_copy(ret, CSI_REGION_MAX, reg) < 0)) {
			char esc[160];
			snprintf(why, n, "placement/region \"%s\" is not a region",
				 aws_value_escape(reg, esc, sizeof(esc)));
			r = -EBADMSG;
		}
		free(reg);
		if (r == 0 || r == -EBADMSG)
			break;
		snprintf(why, n, "%s at %s (%d %s)", r == -ENOENT ? "no region" : strerror(-r),
			 aws_imds_endpoint(m), tries, tries == 1 ? "try" : "tries");
		if (r == -ENOENT || r == -ENODEV)
			break; /* an answer, not an outage: no retry */
		int64_t left = end - now_mono_ns();
		if (left <= 0)
			break;
		log_v(2, "instance metadata not available yet: retrying", KV_E(r),
		      KV_I("delay_ms", delay / NSEC_PER_MSEC));
		if (cancel_wait(cancel_root(), delay < left ? delay : left)) {
			snprintf(why, n, "stopped while retrying");
			r = -ECANCELED;
			break;
		}
		delay = delay * 2 > IMDS_MAX_DELAY_NS ? IMDS_MAX_DELAY_NS : delay * 2;
	}
	aws_imds_free(m);
	return r;
}

/* kubernetes: the Node named by $CSI_NODE_NAME, through --kubeconfig or the in-cluster
 * configuration; metadata-labeler (labeler true): the same Node, which must carry the labeler's
 * counts. */
static int region_from_kube(const struct csi_ctrl_meta_opts *o, bool labeler,
			    char ret[CSI_REGION_MAX], char *why, size_t n)
{
	struct csi_labeler_counts k;
	struct kube_client *kc = NULL;
	struct kube_status st = {0};
	cJSON *node = NULL;
	char path[320], err[512];
	int r;

	if (!o->node_name || !*o->node_name) {
		snprintf(why, n, "CSI_NODE_NAME is not set");
		return -EINVAL;
	}
	if (str_printf(path, sizeof(path), "/api/v1/nodes/%s", o->node_name) < 0) {
		snprintf(why, n, "the node name is too long");
		return -ENAMETOOLONG;
	}
	if ((r = kube_client_from_flags("csi-controller", &kc, err, sizeof(err))) < 0) {
		snprintf(why, n, "%s", err);
		return r;
	}
	if ((r = kube_get_path(kc, path, &node, &st)) < 0)
		snprintf(why, n, "reading Node %s: %s%s%s", o->node_name, strerror(-r),
			 st.reason[0] ? " " : "", st.reason);
	else if (!labeler || (r = csi_labeler_counts_of_node(
				  node, o->driver ? o->driver : CSI_DRIVER_NAME_DEFAULT, &k, why, n)) == 0)
		r = csi_ctrl_region_of_node(node, ret, why, n);
	cJSON_Delete(node);
	kube_client_free(kc);
	return r;
}

int csi_ctrl_find_region(const struct csi_ctrl_meta_opts *o, char ret[CSI_REGION_MAX], char *why,
			 size_t n)
{
	struct buf all = BUF_INIT(4096);
	int r = -ENODATA;

	if (n)
		why[0] = '\0';
	for (char **s = o->sources; s && *s; s++) {
		char one[512] = "";
		if (strcmp(*s, "imds") == 0)
			r = region_from_imds(o, ret, one, sizeof(one));
		else if (strcmp(*s, "kubernetes") == 0 || strcmp(*s, "metadata-labeler") == 0)
			r = region_from_kube(o, strcmp(*s, "metadata-labeler") == 0, ret, one,
					     sizeof(one));
		else
			continue; /* the flag table takes no other */
		if (r == 0) {
			log_info("region from metadata", KV_S("source", *s), KV_S("region", ret));
			break;
		}
		log_warn("no region from this metadata source", KV_S("source", *s),
			 KV_S("error", one));
		if (buf_printf(&all, "%s%s: %s", all.len ? "; " : "", *s, one) < 0)
			break;
		if (r == -ECANCELED)
			break;
	}
	if (r < 0)
		snprintf(why, n, "%s", all.len ? all.data : "no metadata source is enabled");
	buf_release(&all);
	return r < 0 ? r : 0;
}
