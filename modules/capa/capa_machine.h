/* AWSMachine -> EC2, as Cluster API Provider AWS does it (reference capa.md §2, §5, §9, §11):
 * the pure parts of the machine reconciler. Nothing here makes a call or logs.
 *
 * - capa_machine_tags: CAPA's tag set of an instance (and its volume and ENI) or of a
 *   bootstrap secret, sorted by key: additionalTags of the AWSCluster, then the AWSMachine's,
 *   then kubernetes.io/cluster/<c>=owned (and MachineName=<ns>/<machine> on EC2), then CAPA's
 *   own keys (sigs.k8s.io/cluster-api-provider-aws/cluster/<c>=owned, .../role, Name) on top.
 * - capa_pick_subnet / capa_machine_sgs: the subnet of the failure domain and the security
 *   groups of the role, from the AWSCluster object.
 * - capa_run_instances_query: the RunInstances request, with a ClientToken derived from the
 *   AWSMachine's UID (so a retried or repeated create cannot make a second instance).
 * - capa_instance_status: an instance's state -> the AWSMachine's status fields. */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/aws/ec2.h"
#include "common/aws/query.h"
#include "modules/capa/capa.h"

#define CAPA_MAX_ADDITIONAL_TAGS 50
#define CAPA_MAX_SGS 16
#define CAPA_CLIENT_TOKEN_MAX 64

/* The value of key in t, or NULL. */
const char *capa_tags_get(const struct capa_tags *t, const char *key);

/* What a machine's objects are built from. */
struct capa_machine_ctx {
	const char *cluster;	/* the CAPI Cluster's name */
	const char *namespace;	/* the AWSMachine's namespace */
	const char *awsmachine; /* the AWSMachine's name: the Name tag */
	const char *uid;	/* the AWSMachine's UID */
	const char *machine;	/* the owner Machine's name (MachineName tag) */
	const char *role;	/* "control-plane" or "node" */
	const cJSON *spec;	/* the AWSMachine's spec */
	const cJSON *awscluster; /* the AWSCluster object (spec and status) */
};

/* ec2: the instance's tags (with MachineName); otherwise the bootstrap secrets'. On error
 * (-EINVAL: a bad additionalTags entry, "aws:" prefix, over 50) err says why. */
int capa_machine_tags(const struct capa_machine_ctx *m, bool ec2, struct capa_tags *ret, char *err,
		      size_t errlen);

/* The subnet for the machine (reference §9 "Subnet choice"): spec.subnet.id, else the first
 * private subnet of the failure domain's zone, else (publicIP) the first public one, else the
 * first private one. Subnets come from the AWSCluster's spec.network.subnets[] (id or
 * resourceID, availabilityZone, isPublic). -ENOENT with a reason when there is none,
 * -EOPNOTSUPP for spec.subnet.filters. */
int capa_pick_subnet(const struct capa_machine_ctx *m, const char *failure_domain,
		     const char **ret_id, char *err, size_t errlen);

/* The security group ids: the role's core groups from the AWSCluster (overrides first, then
 * status.networkStatus.securityGroups): node {node, lb}, control-plane {node, lb,
 * controlplane}; then spec.additionalSecurityGroups[].id. -ENOENT (not there yet) with a reason. */
int capa_machine_sgs(const struct capa_machine_ctx *m, const char *ids[CAPA_MAX_SGS], size_t *ret_n,
		     char *err, size_t errlen);

/* The SSH key: spec.sshKeyName when the field is there ("" = none), else the AWSCluster's,
 * else "default". NULL means send no KeyName. */
const char *capa_machine_key_name(const struct capa_machine_ctx *m);

/* The ClientToken of the machine's RunInstances: "capa-" and the UID without dashes (37
 * characters; EC2 allows 64). */
int capa_client_token(const char *uid, char *out, size_t n);

/* The RunInstances request (reference §9): Min/MaxCount 1, ImageId spec.ami.id, InstanceType,
 * ClientToken, the first network interface with SubnetId, the groups and
 * AssociatePublicIpAddress, IamInstanceProfile.Name, KeyName, UserData (already base64),
 * BlockDeviceMapping for spec.rootVolume on root_device, InstanceMarketOptions for
 * spec.spotMarketOptions, MetadataOptions always (IMDSv2 required unless the spec says
 * otherwise), TagSpecifications for instance, volume and network-interface. -EINVAL with a
 * reason for a spec CAPA refuses (no instanceType, rootVolume.size < 8, neither ami.id nor an
 * AMI from the lookup). */
struct capa_run_args {
	const char *subnet_id;
	const char *const *sg_ids;
	size_t n_sgs;
	const char *user_data_b64;
	const char *root_device; /* the AMI's RootDeviceName; needed only with spec.rootVolume */
	const char *ami;	 /* the lookup's image when spec.ami.id is absent (capa_ami.c) */
};
int capa_run_instances_query(const struct capa_machine_ctx *m, const struct capa_run_args *a,
			     struct aws_query *q, char *err, size_t errlen);

/* The DescribeInstances filters that find the machine's instance before any create: the
 * cluster's owned tag, tag:Name = the AWSMachine's name, and every state but terminated. */
int capa_find_instance_query(const struct capa_machine_ctx *m, struct aws_query *q);

/* "aws:///<zone>/<id>"; and the id back out of a providerID (the text after the last '/'). */
int capa_provider_id(const char *zone, const char *id, char *out, size_t n);
int capa_provider_id_parse(const char *pid, char *out, size_t n);

/* What the instance's state means for the AWSMachine (reference §11). */
struct capa_instance_status {
	bool ready;
	bool terminal;		/* failureReason/failureMessage set: CAPI replaces the machine */
	bool requeue_fast;	/* pending: look again in 1 s */
	const char *cond_status; /* InstanceReady: "True", "False", "Unknown" */
	const char *cond_reason; /* NULL with True */
	const char *cond_severity;
	const char *failure_reason; /* "UpdateError" when terminal */
};
void capa_instance_status(const char *state, struct capa_instance_status *ret);

/* The status.addresses array of an instance (InternalIP for each private address of its
 * ENIs, ExternalIP, InternalDNS, ExternalDNS), as CAPA lists them. */
cJSON *capa_instance_addresses(const struct ec2_instance *i);

/* The API load balancer (capa_machine_lb.c): a running control-plane instance is registered
 * (classic: RegisterInstancesWithLoadBalancer when the load balancer has a subnet in its zone;
 * nlb: RegisterTargets in every target group of its listeners), condition ELBAttached; one
 * that is not running is deregistered. Detach deregisters (before the instance is
 * terminated). No call for a worker, a disabled load balancer or one not in the AWSCluster's
 * status yet; no write when nothing is to change. < 0 with s->err. */
struct capa_mscope;
int capa_machine_lb_attach(struct capa_mscope *s, const struct ec2_instance *i);
int capa_machine_lb_detach(struct capa_mscope *s, const struct ec2_instance *i);
