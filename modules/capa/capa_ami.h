/* The AMI lookup (pkg/cloud/services/ec2/ami.go, reference capa.md §7 and §9): when a machine
 * names no spec.ami.id, the newest available HVM image of an owner whose name matches CAPA's
 * pattern for the machine's Kubernetes version, for the architecture of its instance type; the
 * bastion's is the newest Canonical Ubuntu 24.04. Answers are cached per (region, owner, name,
 * architecture) for CAPA_AMI_CACHE_NS, and misses are looked up one at a time, so N machines
 * of one version make one DescribeImages. */
#pragma once
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "common/aws/client.h"
#include "common/aws/query.h"
#include "common/base/timeutil.h"

#define CAPA_AMI_DEFAULT_ORG "819546954734"
#define CAPA_AMI_DEFAULT_BASEOS "ubuntu-24.04"
#define CAPA_AMI_DEFAULT_FORMAT "capa-ami-{{.BaseOS}}-?{{.K8sVersion}}-*"
#define CAPA_AMI_UBUNTU_OWNER "099720109477"
#define CAPA_AMI_BASTION_NAME "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*"
#define CAPA_AMI_ID_MAX 64
#define CAPA_AMI_CACHE_NS (15 * 60 * NSEC_PER_SEC)
#define CAPA_AMI_CACHE_MAX 128

/* How the lookup calls EC2: fn makes one call (with the caller's rate limits) and writes what
 * failed to err; the lookup writes its own reasons ("no image ...") there too. */
struct capa_ami_caller {
	int (*fn)(void *ud, const char *action, const struct aws_query *q, struct aws_reply *rep);
	void *ud;
	const char *region; /* the cache's key (NULL: the client's) */
	char *err;
	size_t errlen;
};

/* The image name pattern: format with {{.BaseOS}} and {{.K8sVersion}} (the version without a
 * leading "v") replaced. -EINVAL for an empty version, -ENAMETOOLONG. */
int capa_ami_name(const char *format, const char *base_os, const char *version, char *out,
		  size_t n);

/* The architecture of an instance type (DescribeInstanceTypes): "x86_64" when it supports it,
 * else "arm64". Cached. -ENOENT with err when the type is unknown or has neither. */
int capa_ami_arch(const struct capa_ami_caller *c, const char *instance_type, char *out, size_t n);

/* The newest (CreationDate) available HVM image of owner whose name matches name and of arch.
 * Cached. -ENOENT with err when there is none. */
int capa_ami_lookup(const struct capa_ami_caller *c, const char *owner, const char *name,
		    const char *arch, char *out, size_t n);

/* A machine's image (§9): the org, format and base OS from the AWSMachine's spec, else the
 * AWSCluster's, else CAPA's defaults; the version from the Machine's spec.version. */
int capa_ami_for_machine(const struct capa_ami_caller *c, const cJSON *machine_spec,
			 const cJSON *cluster_spec, const char *version, const char *instance_type,
			 char *out, size_t n);

/* The image of a new machine (the machine controller's create path): spec.ami.id when set,
 * else capa_ami_for_machine with the Machine's spec.version, through the controller's rate
 * limits; -ENOENT or -EINVAL with the reason in s->err. */
struct capa_mscope;
int capa_mach_ami(struct capa_mscope *s, const cJSON *machine, char *out, size_t n);

/* Forgets every cached answer. */
void capa_ami_cache_clear(void);
