/* The AWS cloud config (--cloud-config): the INI dialect of Go's gcfg, as the upstream AWS
 * cloud-controller-manager reads it.
 *
 *   [Global]
 *   KubernetesClusterID = "2f1b..."          ; quotes, escapes, ; and # comments
 *   ElbSecurityGroup = sg-123
 *   NodeIPFamilies = ipv4                    ; multi-valued: every line appends
 *   NodeIPFamilies = ipv6
 *
 *   [ServiceOverride "1"]
 *   Service = ec2
 *   Region = us-east-1
 *   URL = https://ec2.example.com
 *   SigningRegion = us-east-1
 *
 * Section and key names are case-insensitive, subsection names are not. Every key of the
 * upstream [Global] section is known (and Deckhouse's PublicNetworkAllowList); an unknown
 * section or key, a malformed line, a bad boolean or number, a bad NodeIPFamilies value, a
 * KubernetesClusterID or KubernetesClusterTag that cannot make the AWS tag key
 * kubernetes.io/cluster/<ID> (more than 106 characters, or one AWS does not allow in a key) or an
 * incomplete or duplicate [ServiceOverride] is an error naming the file and the line. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/aws/endpoints.h"

#define CCM_CONFIG_MAX_FILE ((size_t)1 << 20)
#define CCM_CONFIG_MAX_OVERRIDES 64

struct ccm_service_override {
	char *name; /* the subsection: "1" in [ServiceOverride "1"] */
	char *service;
	char *region;
	char *url;
	char *signing_region;
	char *signing_method;
	char *signing_name;
};

struct ccm_config {
	char *zone;
	char *region;
	char *vpc;
	char *subnet_id;
	char *route_table_id; /* one ID, or (an extension) a comma-separated list */
	char *role_arn;
	char *source_arn;
	char *cluster_tag; /* KubernetesClusterTag (legacy) */
	char *cluster_id;  /* KubernetesClusterID */
	bool disable_sg_ingress;
	char *elb_security_group;
	char **node_ip_families; /* "ipv4" / "ipv6" in order; {"ipv4"} when not given */
	char *health_probe_mode; /* ClusterServiceLoadBalancerHealthProbeMode */
	long long shared_probe_port;
	char *shared_probe_path;
	char *topology_pattern;		 /* SupportedTopologyInstanceTypePattern */
	char *nlb_sg_mode;		 /* NLBSecurityGroupMode */
	char *public_network_allow_list; /* Deckhouse */
	struct ccm_service_override *overrides;
	size_t n_overrides;
};

/* Parses config text; path (may be NULL) names it in errors. On failure a one-line reason
 * ("cloud config 'F' line 3: unknown key 'Foo' in section [Global]") goes to err. -EINVAL for
 * a bad file, -E2BIG over a limit, -ENOMEM. */
int ccm_config_parse(const char *text, size_t len, const char *path, struct ccm_config **ret,
		     char *err, size_t errlen);
/* Reads and parses a file (NULL or "" gives the defaults: no file). */
int ccm_config_load(const char *path, struct ccm_config **ret, char *err, size_t errlen);
void ccm_config_free(struct ccm_config *c);

/* The cluster ID the config gives: KubernetesClusterID, else KubernetesClusterTag, else NULL. */
const char *ccm_config_cluster_id(const struct ccm_config *c);
/* Whether NodeIPFamilies lists family ("ipv4" / "ipv6"). */
bool ccm_config_has_family(const struct ccm_config *c, const char *family);

/* The AWS service a [ServiceOverride] Service names, in the spellings of both AWS SDKs:
 * "ec2"/"EC2", "elasticloadbalancing" (classic and v2, as SDK v1 shared it), "Elastic Load
 * Balancing", "Elastic Load Balancing v2"/"elasticloadbalancingv2", "sts", "autoscaling"/"Auto
 * Scaling" (case-insensitive). Fills up to 2 services; returns how many (0: a service this
 * binary does not call, such as kms or s3). "ec2imds"/"imds" give 0 and set *ret_imds. */
int ccm_override_services(const char *service, enum aws_service ret[2], bool *ret_imds);
/* Applies the overrides whose Region is region to e (the IMDS one, if any, to *ret_imds_url,
 * malloc'd). */
int ccm_config_apply_overrides(const struct ccm_config *c, const char *region,
			       struct aws_endpoints *e, char **ret_imds_url);

static inline void ccm_config_freep(struct ccm_config **c)
{
	ccm_config_free(*c);
}
#define _cleanup_ccm_config_ __attribute__((cleanup(ccm_config_freep)))
