/* What the discoverer's files share.
 *
 * One period (disc_period, discoverer.c) runs these steps, each on its own so that one failing
 * does not stop the others:
 *   conditions      DryRun DescribeAddressesAttribute and DescribeInstanceTopology -> the
 *                   ConfigMap kube-system/d8-cloud-provider-conditions (disc_aws.c)
 *   instance types  paginated DescribeInstanceTypes -> InstanceTypesCatalog for-cluster-autoscaler
 *   discovery data  the cluster-tagged subnets, the prefix's security groups -> the Secret
 *                   kube-system/d8-cloud-provider-discovery-data and, from it, the node-manager
 *                   Secret kube-system/d8-node-manager-cloud-provider
 *   orphaned disks  the CSI driver's volumes of this cluster without a PersistentVolume
 *   imdsv1          instances of the node profile that allow IMDSv1
 * The builders of the objects are pure functions (disc_build.c, unit-tested); the Kubernetes
 * side (disc_kube.c) writes an object only when it differs from what is stored, with retries. */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/aws/ec2.h"

struct aws_client;
struct kube_client;

#define DISC_NS "kube-system"
#define DISC_CONDITIONS_CM "d8-cloud-provider-conditions"
#define DISC_DATA_SECRET "d8-cloud-provider-discovery-data"
#define DISC_NODE_MANAGER_SECRET "d8-node-manager-cloud-provider"
#define DISC_CATALOG_NAME "for-cluster-autoscaler"
#define DISC_COND_NAME "INSUFFICIENT_AWS_SA_PERMISSIONS"
#define DISC_MAX_ZONES 64
#define DISC_MAX_TYPES 5000
#define DISC_MAX_VOLUMES 100000

struct disc_cfg {
	char *cluster_uuid;
	char *prefix;
	char *layout;		   /* WithoutNAT, WithNAT, Standard */
	char *ami;		   /* instances.ami, may be NULL */
	cJSON *tags;		   /* the cluster configuration's tags, or NULL */
	char *node_profile;	   /* AWS_NODE_IAM_INSTANCE_PROFILE, else <prefix>-node */
	const char *access_key_id; /* from the environment, may be NULL */
	const char *secret_key;
	const char *region;
};

struct disc {
	struct aws_client *aws;
	struct kube_client *kc;
	struct disc_cfg cfg;
	/* write retries: tries, first delay, cap */
	long long write_tries;
	int64_t write_initial_ns, write_max_ns;
	unsigned long writes; /* objects created or updated, over the process's life */
	bool write_failed;    /* a write of the last period failed after every retry */
};

/* ---- disc_build.c: pure ---- */

struct disc_condition {
	char api[64]; /* "DescribeInstanceTopology" */
};
/* The JSON array Deckhouse writes: [{"name", "message": "<API> is not allowed", "ok": false}]. */
char *disc_conditions_json(const struct disc_condition *c, size_t n);

struct disc_itype {
	char name[64];
	long long vcpus;
	long long mem_mib;
};
/* InstanceTypesCatalog for-cluster-autoscaler with the types sorted by name (t is sorted). */
cJSON *disc_catalog(struct disc_itype *t, size_t n);

struct disc_subnet {
	char id[32];
	char zone[48];
	char vpc[32];
	int role; /* 1 kubernetes.io/role/elb (public), 2 internal-elb, 0 neither */
};
struct disc_sgs {
	char node[32], ssh[32], lb[32];
};
/* AWSCloudDiscoveryData from the cluster's subnets and groups: -ENOENT (with err) when no
 * subnet fits the layout, -EINVAL for subnets in several VPCs. */
int disc_data(const struct disc_cfg *cfg, const struct disc_subnet *s, size_t n,
	      const struct disc_sgs *sg, cJSON **ret, char *err, size_t errlen);
/* The node-manager Secret's data (string values, not yet base64) from the discovery data. */
cJSON *disc_node_manager_data(const struct disc_cfg *cfg, const cJSON *data);

struct disc_orphan {
	char id[32];
	char name[256]; /* the CSIVolumeName tag, "" without one */
};
/* The volumes whose ID is no PersistentVolume's volume (handles: n_h IDs, sorted). */
int disc_orphans(const struct ec2_volume *v, size_t n, char **handles, size_t n_h,
		 struct disc_orphan **ret, size_t *ret_n);

/* ---- disc_aws.c ---- */
int disc_conditions(struct disc *d, struct disc_condition *ret, size_t *ret_n);
int disc_instance_types(struct disc *d, struct disc_itype **ret, size_t *ret_n);
int disc_subnets(struct disc *d, struct disc_subnet **ret, size_t *ret_n);
int disc_groups(struct disc *d, const char *vpc, struct disc_sgs *ret);
int disc_volumes(struct disc *d, struct ec2_volume **ret, size_t *ret_n);
int disc_imdsv1(struct disc *d, long long *ret);

/* ---- disc_kube.c ---- */
/* Reads the cluster's identity and configuration into cfg where the flags left it empty. */
int disc_read_config(struct disc *d);
/* The volume IDs of every PersistentVolume (CSI ebs.csi.aws.com and in-tree), sorted. */
int disc_pv_handles(struct disc *d, char ***ret, size_t *ret_n);
/* Writes obj (ConfigMap, Secret or InstanceTypesCatalog) unless what is stored equals it:
 * keys names the top-level fields compared and copied ("data", "instanceTypes"...). With
 * skip_absent, an absent object is not created. 1 when written, 0 when unchanged, < 0 after
 * the last retry failed. */
int disc_apply(struct disc *d, const void *res, const cJSON *obj, const char *const *keys,
	       bool skip_absent);
