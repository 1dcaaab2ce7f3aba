/* The AWSMachine controller's internals, shared by its Kubernetes side (capa_machine_ctl.c) and
 * its AWS side (capa_machine_aws.c). */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>

#include "common/aws/ec2.h"
#include "modules/capa/capa.h"
#include "modules/capa/capa_machine.h"
#include "modules/capa/capa_throttle.h"

struct capa_machine_state {
	struct capa_ctx *x;
	struct controller *c;
	struct kube_informer *awsmachines, *machines;
};

/* One reconcile of one AWSMachine. */
struct capa_mscope {
	struct capa_machine_state *ms;
	struct capa_machine_ctx m; /* names, role, spec, awscluster */
	cJSON *obj;		   /* the AWSMachine as it will be written (a copy) */
	const cJSON *stored;	   /* the AWSMachine as the informer has it */
	const char *region;	   /* the AWSCluster's spec.region (NULL: the client's) */
	char err[768];		   /* what failed, for the log and the condition */
};

/* EC2 through CAPA's rate limits; attempts 0: the client's retries, 1: no retry (RunInstances:
 * a retry is a new reconcile, which looks the instance up first). */
int capa_mach_ec2(struct capa_mscope *s, const char *action, const struct aws_query *q,
		  struct aws_reply *rep, int attempts);
/* A call to ELB or ELBv2 through the same buckets (the client's retries). */
int capa_mach_elb(struct capa_mscope *s, enum aws_service svc, const char *action,
		  const struct aws_query *q, struct aws_reply *rep);
/* The machine's instance: by spec.instanceID (or providerID) when set, else by CAPA's tags
 * (any state but terminated). 0 with *ret filled, -ENOENT when there is none. */
int capa_mach_find_instance(struct capa_mscope *s, struct ec2_instance *ret);
/* Stores the gzipped bootstrap data in Secrets Manager chunks under prefix; *ret_count. */
int capa_mach_secrets_create(struct capa_mscope *s, const char *prefix, const void *gz, size_t len,
			     unsigned *ret_count);
/* Force-deletes prefix-0 .. prefix-(count-1); a missing one is fine. */
int capa_mach_secrets_delete(struct capa_mscope *s, const char *prefix, unsigned count);
/* RunInstances with the request of capa_run_instances_query (no retry); then the ENIs get
 * the instance's tags (CreateTags: not every EC2 takes network-interface tag specifications). */
int capa_mach_run(struct capa_mscope *s, const struct capa_run_args *a, struct ec2_instance *ret);
/* The AMI's RootDeviceName (DescribeImages). */
int capa_mach_root_device(struct capa_mscope *s, const char *ami, char *out, size_t n);
/* TerminateInstances. */
int capa_mach_terminate(struct capa_mscope *s, const char *id);
/* The Secrets Manager URL the instance must use when it is not AWS's own, else "". */
void capa_mach_sm_endpoint(struct capa_mscope *s, char *out, size_t n);
